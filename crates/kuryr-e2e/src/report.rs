//! The demo's output: a table of pods with their Neutron ports, and the connectivity matrix with
//! a summary per kind of path.

use std::collections::BTreeMap;

use crate::{
    neutron::NeutronPort,
    pods::PodView,
    probe::{PathKind, Probe},
};

fn render(rows: &[Vec<String>]) -> String {
    let cols = rows.iter().map(Vec::len).max().unwrap_or(0);
    let widths: Vec<usize> = (0..cols)
        .map(|c| {
            rows.iter()
                .filter_map(|r| r.get(c))
                .map(|s| s.chars().count())
                .max()
                .unwrap_or(0)
        })
        .collect();
    let mut out = String::new();
    for r in rows {
        let line: Vec<String> = r
            .iter()
            .enumerate()
            .map(|(i, s)| format!("{s:<w$}", w = widths[i]))
            .collect();
        out.push_str(line.join("  ").trim_end());
        out.push('\n');
    }
    out
}

/// The pod table: namespace, pod, node, Ready, Neutron port, IP, MAC, subnet, and what Neutron
/// says of the port (status and binding host) when `neutron` has it.
pub fn pod_table(pods: &[PodView], neutron: &BTreeMap<String, NeutronPort>) -> String {
    let mut rows = vec![
        [
            "NAMESPACE",
            "POD",
            "NODE",
            "READY",
            "NEUTRON PORT",
            "IP",
            "MAC",
            "SUBNET",
            "PORT STATUS",
            "BOUND TO",
        ]
        .map(String::from)
        .to_vec(),
    ];
    for p in pods {
        let n = neutron.get(&p.port_id);
        rows.push(vec![
            p.namespace.clone(),
            p.name.clone(),
            p.node.clone(),
            if p.ready { "yes" } else { "NO" }.into(),
            if p.port_id.is_empty() {
                "-".into()
            } else {
                p.port_id.clone()
            },
            if p.pod_ip.is_empty() {
                p.vif_ips.join(",")
            } else {
                p.pod_ip.clone()
            },
            if p.mac.is_empty() {
                "-".into()
            } else {
                p.mac.clone()
            },
            if p.cidr.is_empty() {
                "-".into()
            } else {
                p.cidr.clone()
            },
            n.map_or_else(|| "-".into(), |n| n.status.clone()),
            n.map_or_else(|| "-".into(), |n| n.host.clone()),
        ]);
    }
    render(&rows)
}

/// The connectivity matrix (rows connect to columns) and one summary line per kind of path.
pub fn matrix_table(pods: &[PodView], probes: &[Probe]) -> String {
    let mut header = vec!["FROM \\ TO".to_string()];
    header.extend((0..pods.len()).map(|i| format!("[{}]", i + 1)));
    let mut rows = vec![header];
    for (a, p) in pods.iter().enumerate() {
        let mut row = vec![format!("[{}] {}/{} ({})", a + 1, p.namespace, p.name, p.node)];
        for b in 0..pods.len() {
            row.push(match probes.iter().find(|x| x.from == a && x.to == b) {
                None => "-".into(),
                Some(x) if x.ok => "ok".into(),
                Some(_) => "FAIL".into(),
            });
        }
        rows.push(row);
    }
    let mut out = render(&rows);
    let mut kinds: BTreeMap<PathKind, (usize, usize)> = BTreeMap::new();
    for x in probes {
        let e = kinds.entry(PathKind::of(&pods[x.from], &pods[x.to])).or_default();
        e.1 += 1;
        if x.ok {
            e.0 += 1;
        }
    }
    for (k, (ok, all)) in kinds {
        out.push_str(&format!("  {:<30} {ok}/{all} connections answered\n", k.label()));
    }
    for x in probes.iter().filter(|x| !x.ok) {
        out.push_str(&format!(
            "  FAILED {}/{} -> {}/{} ({}:{}): {}\n",
            pods[x.from].namespace,
            pods[x.from].name,
            pods[x.to].namespace,
            pods[x.to].name,
            pods[x.to].pod_ip,
            crate::pods::POD_PORT,
            x.detail
        ));
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn pod(ns: &str, name: &str, node: &str) -> PodView {
        PodView {
            namespace: ns.into(),
            name: name.into(),
            node: node.into(),
            pod_ip: "10.10.0.5".into(),
            ready: true,
            port_id: "p-1".into(),
            ..PodView::default()
        }
    }

    #[test]
    fn matrix_marks_failures_and_summarises_per_path() {
        let pods = vec![pod("a", "x", "node-1"), pod("b", "y", "node-2")];
        let probes = vec![
            Probe {
                from: 0,
                to: 1,
                ok: true,
                detail: "y".into(),
                millis: 3,
            },
            Probe {
                from: 1,
                to: 0,
                ok: false,
                detail: "timed out".into(),
                millis: 3000,
            },
        ];
        let t = matrix_table(&pods, &probes);
        assert!(t.contains("FAIL"), "{t}");
        assert!(t.contains("across namespaces and nodes    1/2"), "{t}");
        assert!(t.contains("FAILED b/y -> a/x"), "{t}");
        let table = pod_table(&pods, &BTreeMap::new());
        assert!(table.lines().count() == 3 && table.contains("p-1"), "{table}");
    }
}

//! Prometheus text exposition, scraped and queried: the controller's `/metrics` over plain
//! HTTP on the loopback, a daemon's from inside its node's network namespace or, on a VM
//! node, through the VM's command agent (`sandbox/vm exec`).

use std::{collections::BTreeMap, time::Duration};

use tokio::io::{AsyncReadExt, AsyncWriteExt};

use crate::error::{Error, Result};

/// One sample: metric name, labels, value.
#[derive(Debug, Clone, PartialEq)]
pub struct Sample {
    /// Name, e.g. `kuryr_neutron_requests_total`.
    pub name: String,
    /// Labels.
    pub labels: BTreeMap<String, String>,
    /// Value.
    pub value: f64,
}

/// A parsed scrape.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Scrape {
    /// All samples, in order.
    pub samples: Vec<Sample>,
}

fn parse_labels(s: &str) -> BTreeMap<String, String> {
    let mut out = BTreeMap::new();
    let mut rest = s;
    while let Some((key, after)) = rest.split_once("=\"") {
        let key = key.trim_start_matches(',').trim().to_string();
        let mut val = String::new();
        let mut chars = after.char_indices();
        let mut end = after.len();
        while let Some((i, c)) = chars.next() {
            match c {
                '\\' => {
                    if let Some((_, n)) = chars.next() {
                        val.push(if n == 'n' { '\n' } else { n });
                    }
                }
                '"' => {
                    end = i + 1;
                    break;
                }
                c => val.push(c),
            }
        }
        out.insert(key, val);
        rest = &after[end..];
    }
    out
}

impl Scrape {
    /// Parses the text format (comments and malformed lines are skipped).
    pub fn parse(text: &str) -> Scrape {
        let samples = text
            .lines()
            .filter(|l| !l.starts_with('#') && !l.trim().is_empty())
            .filter_map(|l| {
                let (head, value) = match l.find('}') {
                    Some(close) => (&l[..=close], l[close + 1..].trim()),
                    None => l.split_once(' ')?,
                };
                let value: f64 = value.split_whitespace().next()?.parse().ok()?;
                let (name, labels) = match head.split_once('{') {
                    Some((n, rest)) => (n.to_string(), parse_labels(rest.trim_end_matches('}'))),
                    None => (head.trim().to_string(), BTreeMap::new()),
                };
                Some(Sample { name, labels, value })
            })
            .collect();
        Scrape { samples }
    }

    /// Sum of the samples named `name` whose labels pass `filter`.
    pub fn sum(&self, name: &str, filter: impl Fn(&BTreeMap<String, String>) -> bool) -> f64 {
        self.samples
            .iter()
            .filter(|s| s.name == name && filter(&s.labels))
            .map(|s| s.value)
            .sum()
    }

    /// Cumulative histogram buckets `(le, count)` of `<name>_bucket`, summed over the label sets
    /// that pass `filter`, sorted by `le`.
    pub fn buckets(&self, name: &str, filter: impl Fn(&BTreeMap<String, String>) -> bool) -> Vec<(f64, f64)> {
        let mut by_le: BTreeMap<u64, (f64, f64)> = BTreeMap::new();
        let bucket = format!("{name}_bucket");
        for s in self
            .samples
            .iter()
            .filter(|s| s.name == bucket && filter(&s.labels))
        {
            let le = match s.labels.get("le").map(String::as_str) {
                Some("+Inf") => f64::INFINITY,
                Some(v) => match v.parse::<f64>() {
                    Ok(v) => v,
                    Err(_) => continue,
                },
                None => continue,
            };
            let e = by_le.entry(le.to_bits()).or_insert((le, 0.0));
            e.1 += s.value;
        }
        let mut v: Vec<(f64, f64)> = by_le.into_values().collect();
        v.sort_by(|a, b| a.0.total_cmp(&b.0));
        v
    }
}

/// The `q` quantile (0–1) of a cumulative histogram `(le, count)`, interpolated linearly inside
/// the bucket as Prometheus' `histogram_quantile` does; `None` without observations.
pub fn histogram_quantile(q: f64, buckets: &[(f64, f64)]) -> Option<f64> {
    let total = buckets.last()?.1;
    if total <= 0.0 {
        return None;
    }
    let rank = q * total;
    let mut prev = (0.0, 0.0);
    for &(le, count) in buckets {
        if count >= rank {
            if le.is_infinite() {
                return Some(prev.0);
            }
            let in_bucket = count - prev.1;
            let frac = if in_bucket > 0.0 {
                (rank - prev.1) / in_bucket
            } else {
                1.0
            };
            return Some(prev.0 + (le - prev.0) * frac);
        }
        prev = (le, count);
    }
    Some(prev.0)
}

/// Bucket-wise difference `after - before` (for a histogram over one measured window).
pub fn bucket_delta(before: &[(f64, f64)], after: &[(f64, f64)]) -> Vec<(f64, f64)> {
    after
        .iter()
        .map(|&(le, c)| {
            let b = before.iter().find(|(l, _)| *l == le).map_or(0.0, |x| x.1);
            (le, c - b)
        })
        .collect()
}

/// `GET http://host:port/path` over HTTP/1.0 on the loopback.
pub async fn http_get(url: &str) -> Result<String> {
    let err = |source| Error::Http {
        url: url.to_string(),
        source,
    };
    let rest = url.strip_prefix("http://").ok_or_else(|| Error::Parse {
        what: url.to_string(),
        detail: "only http:// URLs".into(),
    })?;
    let (hostport, path) = rest
        .split_once('/')
        .map_or((rest, "/".to_string()), |(h, p)| (h, format!("/{p}")));
    let fut = async {
        let mut s = tokio::net::TcpStream::connect(hostport).await?;
        s.write_all(format!("GET {path} HTTP/1.0\r\nHost: {hostport}\r\n\r\n").as_bytes())
            .await?;
        let mut buf = Vec::new();
        s.read_to_end(&mut buf).await?;
        Ok::<_, std::io::Error>(buf)
    };
    let buf = tokio::time::timeout(Duration::from_secs(10), fut)
        .await
        .map_err(|_| err(std::io::Error::new(std::io::ErrorKind::TimedOut, "10 s")))?
        .map_err(err)?;
    let text = String::from_utf8_lossy(&buf).to_string();
    let (head, body) = text.split_once("\r\n\r\n").unwrap_or((&text, ""));
    let ok = head.split_whitespace().nth(1).is_some_and(|c| c.starts_with('2'));
    if !ok {
        return Err(err(std::io::Error::other(
            head.lines().next().unwrap_or("no answer").to_string(),
        )));
    }
    Ok(body.to_string())
}

/// Scrapes a `/metrics` URL reachable from here.
pub async fn scrape(url: &str) -> Result<Scrape> {
    Ok(Scrape::parse(&http_get(url).await?))
}

/// Scrapes `http://127.0.0.1:<port>/metrics` inside network namespace `netns` (a daemon's).
pub async fn scrape_in_netns(netns: &str, port: u16) -> Result<Scrape> {
    let url = format!("http://127.0.0.1:{port}/metrics");
    let mut cmd = tokio::process::Command::new("ip");
    cmd.args(["netns", "exec", netns, "curl", "-sf", "--max-time", "10", &url]);
    scrape_with(cmd, format!("ip netns exec {netns} curl {url}")).await
}

/// Scrapes `http://127.0.0.1:<port>/metrics` inside VM node `vm` (its daemon's), through
/// `sandbox/vm exec`: the VMs' addresses are not reachable from the host.
pub async fn scrape_in_vm(vm: &str, port: u16) -> Result<Scrape> {
    let url = format!("http://127.0.0.1:{port}/metrics");
    let mut cmd = tokio::process::Command::new(crate::cluster::repo_root().join("sandbox/vm"));
    cmd.args(["exec", vm, &format!("curl -sf --max-time 10 {url}")]);
    scrape_with(cmd, format!("sandbox/vm exec {vm} curl {url}")).await
}

async fn scrape_with(mut cmd: tokio::process::Command, what: String) -> Result<Scrape> {
    let out = cmd.output().await.map_err(|source| Error::Spawn {
        what: what.clone(),
        source,
    })?;
    if !out.status.success() {
        return Err(Error::Command {
            what,
            status: out.status.to_string(),
            output: format!(
                "{}{}",
                String::from_utf8_lossy(&out.stdout),
                String::from_utf8_lossy(&out.stderr)
            ),
        });
    }
    Ok(Scrape::parse(&String::from_utf8_lossy(&out.stdout)))
}

#[cfg(test)]
mod tests {
    use super::*;

    const TEXT: &str = "# HELP x y\n# TYPE kuryr_neutron_requests_total counter\n\
        kuryr_neutron_requests_total{operation=\"port_list\",method=\"GET\",outcome=\"ok\"} 3\n\
        kuryr_neutron_requests_total{operation=\"port_bulk_create\",method=\"POST\",outcome=\"ok\"} 2\n\
        h_bucket{le=\"0.1\"} 5\nh_bucket{le=\"0.5\"} 9\nh_bucket{le=\"+Inf\"} 10\nh_sum 2.5\nh_count 10\n\
        plain 7\nbroken{le=\"1\" nope\n";

    #[test]
    fn parses_counters_with_labels_and_sums_them() {
        let s = Scrape::parse(TEXT);
        assert_eq!(s.sum("kuryr_neutron_requests_total", |_| true), 5.0);
        assert_eq!(
            s.sum("kuryr_neutron_requests_total", |l| l
                .get("method")
                .is_some_and(|m| m != "GET")),
            2.0
        );
        assert_eq!(s.sum("plain", |_| true), 7.0);
    }

    #[test]
    fn histogram_quantiles_interpolate_inside_buckets() {
        let s = Scrape::parse(TEXT);
        let b = s.buckets("h", |_| true);
        assert_eq!(b.len(), 3);
        // p50: rank 5 -> end of the first bucket.
        assert!((histogram_quantile(0.5, &b).unwrap_or(0.0) - 0.1).abs() < 1e-9);
        // p90: rank 9 -> end of the second bucket.
        assert!((histogram_quantile(0.9, &b).unwrap_or(0.0) - 0.5).abs() < 1e-9);
        // p99 falls in +Inf: the last finite bound.
        assert!((histogram_quantile(0.99, &b).unwrap_or(0.0) - 0.5).abs() < 1e-9);
        assert_eq!(histogram_quantile(0.5, &[(0.1, 0.0), (f64::INFINITY, 0.0)]), None);
        let d = bucket_delta(&[(0.1, 1.0), (f64::INFINITY, 2.0)], &b);
        assert_eq!(d[0], (0.1, 4.0));
    }

    #[test]
    fn label_values_with_escapes_and_commas() {
        let l = parse_labels("a=\"x,y\",b=\"q\\\"z\"");
        assert_eq!(l["a"], "x,y");
        assert_eq!(l["b"], "q\"z");
    }
}

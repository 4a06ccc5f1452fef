//! The nodes' wiring as the chaos audit reads it: every Open vSwitch interface on a node's
//! switch that is plugged for a Neutron port (`external_ids:iface-id`), and whether its device
//! still exists. An interface whose device is gone is a half-removed pod: the pod's end of the
//! pair went with its network namespace, but nobody deleted the switch port (Open vSwitch keeps
//! it, retries opening it on every reconfiguration and logs a warning each time).

use std::process::Command;

use serde_json::Value;

use crate::{
    cluster::{NodeInfo, run},
    error::{Error, Result},
};

/// One plugged interface.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct OvsIface {
    /// The node.
    pub node: String,
    /// Interface name (`tap…`).
    pub name: String,
    /// The Neutron port it is plugged for.
    pub iface_id: String,
    /// Open vSwitch cannot open its device (it no longer exists).
    pub device_gone: bool,
}

/// The plugged interfaces of `node`'s switch.
pub fn read_node(node: &NodeInfo) -> Result<Vec<OvsIface>> {
    let out = run(
        "ovs-vsctl list Interface",
        Command::new("ovs-vsctl")
            .env("OVS_RUNDIR", &node.ovs_rundir)
            .args([
                "--timeout=10",
                "--format=json",
                "--columns=name,error,external_ids",
                "list",
                "Interface",
            ]),
    )?;
    parse(&node.name, &out)
}

/// Parses `ovs-vsctl --format=json --columns=name,error,external_ids list Interface`.
pub fn parse(node: &str, json: &str) -> Result<Vec<OvsIface>> {
    let bad = |detail: String| Error::Parse {
        what: format!("the Open vSwitch interfaces of {node}"),
        detail,
    };
    let doc: Value = serde_json::from_str(json).map_err(|e| bad(e.to_string()))?;
    let headings: Vec<&str> = doc["headings"]
        .as_array()
        .ok_or_else(|| bad("no headings".into()))?
        .iter()
        .filter_map(Value::as_str)
        .collect();
    let col = |name: &str| {
        headings
            .iter()
            .position(|h| *h == name)
            .ok_or_else(|| bad(format!("no column {name}")))
    };
    let (c_name, c_error, c_ids) = (col("name")?, col("error")?, col("external_ids")?);
    let rows = doc["data"].as_array().ok_or_else(|| bad("no data".into()))?;
    let mut out = Vec::new();
    for row in rows {
        let Some(name) = row[c_name].as_str() else {
            continue;
        };
        let Some(iface_id) = map_get(&row[c_ids], "iface-id") else {
            continue;
        };
        // `error` is a string when set, `["set", []]` when empty.
        let device_gone = row[c_error]
            .as_str()
            .is_some_and(|e| e.contains("No such device"));
        out.push(OvsIface {
            node: node.to_string(),
            name: name.to_string(),
            iface_id,
            device_gone,
        });
    }
    Ok(out)
}

/// `key` of an OVSDB map value (`["map", [[k, v], ...]]`).
fn map_get(v: &Value, key: &str) -> Option<String> {
    if v[0].as_str() != Some("map") {
        return None;
    }
    v[1].as_array()?
        .iter()
        .find(|kv| kv[0].as_str() == Some(key))
        .and_then(|kv| kv[1].as_str())
        .filter(|s| !s.is_empty())
        .map(str::to_string)
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    #[test]
    fn plugged_interfaces_and_gone_devices_are_read() {
        let json = r#"{"data":[
            ["br-int",["set",[]],["map",[]]],
            ["tap1",["set",[]],["map",[["attached-mac","fa:16:3e:00:00:01"],["iface-id","p1"]]]],
            ["tap2","could not open network device tap2 (No such device)",["map",[["iface-id","p2"]]]],
            ["ovn-node-2-0",["set",[]],["map",[]]]
        ],"headings":["name","error","external_ids"]}"#;
        let got = parse("node-1", json).unwrap();
        assert_eq!(
            got,
            vec![
                OvsIface {
                    node: "node-1".into(),
                    name: "tap1".into(),
                    iface_id: "p1".into(),
                    device_gone: false
                },
                OvsIface {
                    node: "node-1".into(),
                    name: "tap2".into(),
                    iface_id: "p2".into(),
                    device_gone: true
                },
            ]
        );
    }

    #[test]
    fn unreadable_output_is_named() {
        let e = parse("node-1", "not json").unwrap_err().to_string();
        assert!(e.contains("node-1"), "{e}");
        let e = parse("node-1", r#"{"data":[],"headings":["name"]}"#)
            .unwrap_err()
            .to_string();
        assert!(e.contains("node-1"), "{e}");
    }
}

//! The model's stand-in for ovn-controller's port claim on real nodes: it follows a node's
//! Open vSwitch database (`ovsdb-client monitor`, the same stream ovn-controller reads) and
//! reports a port plugged when an interface with `external_ids:iface-id=<port id>` appears;
//! when the model turns the port ACTIVE it also sets the interface's `ovn-installed` flag, the
//! other signal ovn-controller gives the node.
//! This lets the real daemons of `sandbox/cluster` (real wiring, real OVS) run against the
//! model cloud: the calibration replays `bench/pod-burst` against both clouds unchanged.

use std::{
    collections::HashMap,
    io::BufReader,
    process::{Child, Command, Stdio},
    sync::Arc,
};

use serde_json::Value;

use crate::Cloud;

/// A failure to follow an Open vSwitch database.
#[derive(Debug, thiserror::Error)]
pub enum OvsError {
    /// `ovsdb-client` could not be started.
    #[error("starting `ovsdb-client monitor {db}`: {source}")]
    Spawn {
        /// The database's address (`unix:PATH` or `tcp:IP:PORT`).
        db: String,
        /// Why.
        source: std::io::Error,
    },
}

/// What one monitor update says about interfaces: `(row uuid, Some(iface-id))` for a row that
/// now carries an iface-id, `(row uuid, None)` for a row deleted or without one.
///
/// The update is `ovsdb-client --format=json monitor DB Open_vSwitch Interface external_ids`'s
/// table: `{"headings":["row","action","external_ids"],"data":[[uuid, action, ["map",[[k,v]…]]]…]}`
/// with action `initial`, `insert`, `delete`, `old` or `new` (a modification is an `old` and a
/// `new` row). Anything else yields nothing: the stream is the only input and a row it cannot
/// read is skipped, not trusted.
pub fn iface_ids(update: &Value) -> Vec<(String, Option<String>)> {
    let headings: Vec<&str> = update
        .get("headings")
        .and_then(Value::as_array)
        .map(|h| h.iter().filter_map(Value::as_str).collect())
        .unwrap_or_default();
    let col = |name: &str| headings.iter().position(|h| *h == name);
    let (Some(row), Some(action), Some(ext)) = (col("row"), col("action"), col("external_ids")) else {
        return Vec::new();
    };
    let mut out = Vec::new();
    for r in update.get("data").and_then(Value::as_array).into_iter().flatten() {
        let (Some(uuid), Some(action)) = (
            r.get(row).and_then(Value::as_str),
            r.get(action).and_then(Value::as_str),
        ) else {
            continue;
        };
        match action {
            "delete" => out.push((uuid.to_string(), None)),
            "initial" | "insert" | "new" => {
                let id = r
                    .get(ext)
                    .and_then(|m| m.get(1))
                    .and_then(Value::as_array)
                    .into_iter()
                    .flatten()
                    .find(|kv| kv.get(0).and_then(Value::as_str) == Some("iface-id"))
                    .and_then(|kv| kv.get(1))
                    .and_then(Value::as_str)
                    .map(str::to_string);
                out.push((uuid.to_string(), id));
            }
            _ => {}
        }
    }
    out
}

/// Follows the database at `db` until it closes: every interface that gains an iface-id the
/// model knows as a port is reported plugged once (again only after it was removed). The
/// reading runs on its own thread (a blocking pipe), the activation on the runtime of `rt`.
pub fn follow(
    cloud: Arc<Cloud>,
    db: &str,
    rt: tokio::runtime::Handle,
) -> Result<(Child, std::thread::JoinHandle<()>), OvsError> {
    let mut child = Command::new("ovsdb-client")
        .args(["--format=json", "monitor", db, "Open_vSwitch", "Interface"])
        .arg("external_ids")
        .stdout(Stdio::piped())
        .stdin(Stdio::null())
        .spawn()
        .map_err(|source| OvsError::Spawn {
            db: db.to_string(),
            source,
        })?;
    let Some(stdout) = child.stdout.take() else {
        // Not reachable with Stdio::piped(); said as an error rather than a panic.
        return Err(OvsError::Spawn {
            db: db.to_string(),
            source: std::io::Error::other("no stdout pipe"),
        });
    };
    let db = db.to_string();
    let thread = std::thread::spawn(move || {
        let _rt = rt.enter();
        let mut plugs = Plugs::default();
        // This node's ovn-controller claims one port after another (Model::claim_per_port_ms).
        let per_port =
            std::time::Duration::try_from_secs_f64(cloud.model().claim_per_port_ms.max(0.0) / 1000.0)
                .unwrap_or_default();
        let mut busy_until = std::time::Instant::now();
        let stream = serde_json::Deserializer::from_reader(BufReader::new(stdout));
        for update in stream.into_iter::<Value>() {
            let update = match update {
                Ok(u) => u,
                Err(e) => {
                    tracing::warn!(%db, error = %e, "ovsdb-client monitor: unreadable output, stopping");
                    break;
                }
            };
            for (row, id) in iface_ids(&update) {
                let Some((row, id)) = plugs.update(row, id) else {
                    continue;
                };
                let db2 = db.clone();
                let now = std::time::Instant::now();
                busy_until = busy_until.max(now) + per_port;
                let known = cloud.plugged_then(&id, busy_until - now, move || {
                    // ovn-controller's other signal: the flag the daemon polls. Off the
                    // runtime's workers: it runs a process.
                    tokio::task::spawn_blocking(move || set_installed(&db2, &row));
                });
                tracing::debug!(%db, port = %id, known, "interface plugged");
            }
        }
        tracing::info!(%db, "ovsdb-client monitor ended");
    });
    Ok((child, thread))
}

/// Which interface rows carry which port: a port is claimed once while any row carries it
/// (ovn-controller binds a port, not a row), again only after every such row went away.
#[derive(Debug, Default)]
struct Plugs {
    rows: HashMap<String, String>,
    held: HashMap<String, usize>,
}

impl Plugs {
    /// Applies one row's news; `Some((row, port))` when `port` is newly plugged.
    fn update(&mut self, row: String, id: Option<String>) -> Option<(String, String)> {
        if self.rows.get(&row) == id.as_ref() {
            return None;
        }
        if let Some(old) = self.rows.remove(&row) {
            if let Some(n) = self.held.get_mut(&old) {
                *n -= 1;
                if *n == 0 {
                    self.held.remove(&old);
                }
            }
        }
        let id = id?;
        self.rows.insert(row.clone(), id.clone());
        let n = self.held.entry(id.clone()).or_default();
        *n += 1;
        (*n == 1).then_some((row, id))
    }
}

/// Sets `external_ids:ovn-installed="true"` on interface `row` of `db`, as ovn-controller does
/// once the port's flows are in place.
fn set_installed(db: &str, row: &str) {
    let out = Command::new("ovs-vsctl")
        .arg(format!("--db={db}"))
        .args(["set", "Interface", row, "external_ids:ovn-installed=\"true\""])
        .stdin(Stdio::null())
        .output();
    match out {
        Ok(o) if o.status.success() => {}
        // The interface may be gone already (a pod deleted at once): nothing to flag.
        Ok(o) => {
            tracing::debug!(%db, %row, stderr = %String::from_utf8_lossy(&o.stderr).trim(), "ovn-installed not set")
        }
        Err(e) => tracing::warn!(%db, %row, error = %e, "running ovs-vsctl"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_inserts_modifications_and_deletes() {
        let u: Value = serde_json::from_str(
            r#"{"data":[["r1","initial",["map",[]]],["r2","insert",["map",[["attached-mac","fa"],["iface-id","p2"]]]],
                ["r3","old",["map",[]]],["r3","new",["map",[["iface-id","p3"]]]],["r4","delete",["map",[["iface-id","p4"]]]]],
               "headings":["row","action","external_ids"]}"#,
        )
        .expect("test JSON");
        assert_eq!(
            iface_ids(&u),
            vec![
                ("r1".into(), None),
                ("r2".into(), Some("p2".into())),
                ("r3".into(), Some("p3".into())),
                ("r4".into(), None),
            ]
        );
    }

    #[test]
    fn a_port_is_plugged_once_while_any_row_carries_it() {
        let mut p = Plugs::default();
        let s = |x: &str| x.to_string();
        assert_eq!(p.update(s("r1"), None), None);
        assert_eq!(p.update(s("r1"), Some(s("a"))), Some((s("r1"), s("a"))));
        assert_eq!(p.update(s("r1"), Some(s("a"))), None, "a modification");
        assert_eq!(p.update(s("r2"), Some(s("a"))), None, "a second row of the port");
        assert_eq!(p.update(s("r1"), None), None);
        assert_eq!(p.update(s("r2"), None), None, "the last row gone");
        assert_eq!(
            p.update(s("r3"), Some(s("a"))),
            Some((s("r3"), s("a"))),
            "plugged again"
        );
        assert_eq!(
            p.update(s("r3"), Some(s("b"))),
            Some((s("r3"), s("b"))),
            "the row now another port's"
        );
    }

    #[test]
    fn skips_what_it_cannot_read() {
        for bad in [
            r#"{"data":[["r1","insert"]],"headings":["row","action","external_ids"]}"#,
            r#"{"data":[[1,"insert",["map",[]]]],"headings":["row","action","external_ids"]}"#,
            r#"{"headings":["row"]}"#,
            r#"[1,2]"#,
        ] {
            let u: Value = serde_json::from_str(bad).expect("test JSON");
            assert!(iface_ids(&u).iter().all(|(_, id)| id.is_none()), "{bad}");
        }
    }
}

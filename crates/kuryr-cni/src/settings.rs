//! Where the daemon is and how long to wait for it: from the plugin config keys
//! (`daemon_address`, `add_timeout`, `del_timeout`), else from upstream's `kuryr_conf` file
//! (`[cni_daemon] bind_address` and `vif_annotation_timeout`), else defaults.

use std::time::Duration;

use kuryr_cni_api::NetConf;
use kuryr_cni_api::daemon::DEFAULT_DAEMON_ADDRESS;

use crate::http::Address;

/// Connect timeout for TCP.
pub const CONNECT_TIMEOUT: Duration = Duration::from_secs(5);
/// Default ADD timeout: upstream's 180 s alarm.
pub const DEFAULT_ADD_TIMEOUT: u64 = 180;
/// Default timeout of the other verbs.
pub const DEFAULT_OTHER_TIMEOUT: u64 = 60;
/// How long the plugin keeps trying to *connect* to a daemon that is not listening (restarting
/// during a rolling upgrade of the DaemonSet, or not started yet), within the verb's timeout.
/// A request that was delivered is never re-sent: only connection failures are retried.
pub const CONNECT_RETRY_WINDOW: Duration = Duration::from_secs(60);

/// Resolved settings.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Settings {
    /// Daemon address.
    pub address: Address,
    /// ADD timeout.
    pub add_timeout: Duration,
    /// Timeout of DEL, CHECK, GC, STATUS.
    pub other_timeout: Duration,
}

/// `[section] key` of an oslo.config INI file (last occurrence wins, `#`/`;` comments).
pub fn ini_value(text: &str, section: &str, key: &str) -> Option<String> {
    let mut current = String::new();
    let mut found = None;
    for line in text.lines() {
        let line = line.trim();
        if line.starts_with('#') || line.starts_with(';') || line.is_empty() {
            continue;
        }
        if let Some(s) = line.strip_prefix('[').and_then(|l| l.strip_suffix(']')) {
            current = s.trim().to_owned();
            continue;
        }
        if current == section {
            if let Some((k, v)) = line.split_once('=').or_else(|| line.split_once(':')) {
                if k.trim() == key {
                    found = Some(v.trim().to_owned());
                }
            }
        }
    }
    found
}

impl Settings {
    /// Resolves settings for `conf`; an unreadable `kuryr_conf` falls back to defaults.
    pub fn resolve(conf: &NetConf) -> Self {
        let ini = conf
            .kuryr_conf
            .as_deref()
            .and_then(|p| std::fs::read_to_string(p).ok())
            .unwrap_or_default();
        let address = conf
            .daemon_address
            .clone()
            .or_else(|| ini_value(&ini, "cni_daemon", "bind_address"))
            .unwrap_or_else(|| DEFAULT_DAEMON_ADDRESS.to_owned());
        let vif_timeout =
            ini_value(&ini, "cni_daemon", "vif_annotation_timeout").and_then(|v| v.parse::<u64>().ok());
        // The daemon waits up to vif_annotation_timeout for the KuryrPort, then as long again for
        // activation.
        let add = conf.add_timeout.unwrap_or_else(|| {
            vif_timeout.map_or(DEFAULT_ADD_TIMEOUT, |t| {
                t.saturating_mul(2).saturating_add(30).max(DEFAULT_ADD_TIMEOUT)
            })
        });
        let other = conf.del_timeout.unwrap_or(DEFAULT_OTHER_TIMEOUT);
        Self {
            address: Address::parse(&address),
            add_timeout: Duration::from_secs(add.clamp(1, 3600)),
            other_timeout: Duration::from_secs(other.clamp(1, 3600)),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ini() {
        let t = "[DEFAULT]\nbind_address = x\n# c\n[cni_daemon]\nbind_address = 10.0.0.1:5036\nvif_annotation_timeout=120\n";
        assert_eq!(
            ini_value(t, "cni_daemon", "bind_address").as_deref(),
            Some("10.0.0.1:5036")
        );
        assert_eq!(ini_value(t, "cni_daemon", "nope"), None);
    }

    #[test]
    fn resolution_order() {
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("kuryr.conf");
        std::fs::write(
            &p,
            "[cni_daemon]\nbind_address = 127.0.0.2:6000\nvif_annotation_timeout = 200\n",
        )
        .unwrap();
        let mut conf = NetConf {
            kuryr_conf: Some(p.display().to_string()),
            ..Default::default()
        };
        let s = Settings::resolve(&conf);
        assert_eq!(s.address, Address::Tcp("127.0.0.2:6000".into()));
        assert_eq!(s.add_timeout, Duration::from_secs(430));
        conf.daemon_address = Some("unix:/run/k.sock".into());
        conf.add_timeout = Some(5);
        let s = Settings::resolve(&conf);
        assert_eq!(s.address, Address::Unix("/run/k.sock".into()));
        assert_eq!(s.add_timeout, Duration::from_secs(5));
        let s = Settings::resolve(&NetConf::default());
        assert_eq!(s.address, Address::Unix("/run/kuryr/cni.sock".into()));
        assert_eq!(s.add_timeout, Duration::from_secs(180));
    }
}

//! CNI network configuration: finding the network config in a conf dir the way libcni-based
//! runtimes do, wrapping single-plugin configs into lists, and building each plugin's stdin.

use std::path::{Path, PathBuf};

use serde_json::{Map, Value};

use super::Error;

/// CNI spec versions this runtime can drive (oldest first).
pub const SUPPORTED_VERSIONS: &[&str] = &["0.1.0", "0.2.0", "0.3.0", "0.3.1", "0.4.0", "1.0.0", "1.1.0"];

/// File extensions a CRI runtime considers in the CNI conf dir.
pub const CONF_EXTENSIONS: &[&str] = &["conf", "conflist", "json"];

/// A parsed network configuration list (a `.conflist`, or a single-plugin `.conf` wrapped).
#[derive(Debug, Clone, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct NetworkConfigList {
    /// Network name (`name`).
    pub name: String,
    /// Effective spec version used to talk to the plugins.
    pub cni_version: String,
    /// Plugin configurations in order; each has at least a `type`.
    pub plugins: Vec<Map<String, Value>>,
    /// The file this list was read from (empty for in-memory configs).
    pub source: PathBuf,
}

impl NetworkConfigList {
    /// `type` of plugin `idx` (always present: checked at parse time).
    pub fn plugin_type(&self, idx: usize) -> &str {
        self.plugins
            .get(idx)
            .and_then(|p| p.get("type"))
            .and_then(Value::as_str)
            .unwrap_or_default()
    }
}

fn version_rank(v: &str) -> Option<usize> {
    SUPPORTED_VERSIONS.iter().position(|s| *s == v)
}

/// Picks the spec version of a config: the highest supported entry of `cniVersions` (CNI 1.1),
/// else `cniVersion`.
fn effective_version(obj: &Map<String, Value>) -> Result<String, String> {
    if let Some(list) = obj.get("cniVersions").and_then(Value::as_array) {
        let best = list
            .iter()
            .filter_map(Value::as_str)
            .filter_map(|v| version_rank(v).map(|r| (r, v)))
            .max_by_key(|(r, _)| *r);
        if let Some((_, v)) = best {
            return Ok(v.to_string());
        }
    }
    match obj.get("cniVersion").and_then(Value::as_str) {
        Some(v) if version_rank(v).is_some() => Ok(v.to_string()),
        Some(v) => Err(format!("unsupported cniVersion {v:?}")),
        None => Err("missing cniVersion".to_string()),
    }
}

fn has_type(plugin: &Map<String, Value>) -> bool {
    plugin
        .get("type")
        .and_then(Value::as_str)
        .is_some_and(|t| !t.is_empty() && !t.contains('/'))
}

/// Parses one config file: `.conflist` as a list, `.conf`/`.json` as a single plugin wrapped into
/// a list of one. Returns a human-readable reason when the file is not a valid network config.
pub fn parse_config_file(file_name: &str, bytes: &[u8]) -> Result<NetworkConfigList, String> {
    let value: Value = serde_json::from_slice(bytes).map_err(|e| format!("invalid JSON: {e}"))?;
    let Value::Object(obj) = value else {
        return Err("not a JSON object".into());
    };
    let name = obj
        .get("name")
        .and_then(Value::as_str)
        .filter(|n| !n.is_empty())
        .ok_or("missing network name")?
        .to_string();
    let cni_version = effective_version(&obj)?;
    let plugins = if file_name.ends_with(".conflist") {
        let plugins = obj
            .get("plugins")
            .and_then(Value::as_array)
            .ok_or("conflist without plugins")?;
        if plugins.is_empty() {
            return Err("conflist with no plugins".into());
        }
        let mut out = Vec::with_capacity(plugins.len());
        for p in plugins {
            match p {
                Value::Object(m) if has_type(m) => out.push(m.clone()),
                _ => return Err("plugin without a valid type".into()),
            }
        }
        out
    } else {
        if !has_type(&obj) {
            return Err("missing plugin type".into());
        }
        vec![obj.clone()]
    };
    Ok(NetworkConfigList {
        name,
        cni_version,
        plugins,
        source: PathBuf::new(),
    })
}

/// Picks the network from `(file name, contents)` entries: only known extensions, sorted
/// lexicographically by file name, the first valid one wins.
pub fn select_config(
    mut entries: Vec<(String, Vec<u8>)>,
) -> Result<NetworkConfigList, Vec<(String, String)>> {
    entries.retain(|(n, _)| {
        Path::new(n)
            .extension()
            .and_then(|e| e.to_str())
            .is_some_and(|e| CONF_EXTENSIONS.contains(&e))
    });
    entries.sort_by(|a, b| a.0.cmp(&b.0));
    let mut rejected = Vec::new();
    for (name, bytes) in entries {
        match parse_config_file(&name, &bytes) {
            Ok(mut list) => {
                list.source = PathBuf::from(&name);
                return Ok(list);
            }
            Err(reason) => rejected.push((name, reason)),
        }
    }
    Err(rejected)
}

/// Reads the conf dir and selects the network ([`select_config`]).
pub fn load_from_dir(dir: &Path) -> Result<NetworkConfigList, Error> {
    load_from_dir_stamped(dir).map(|(list, _)| list)
}

/// [`load_from_dir`], also returning every file it read with its modification time and size
/// taken before reading it (a file changed meanwhile then looks changed to a cache).
pub(crate) fn load_from_dir_stamped(
    dir: &Path,
) -> Result<(NetworkConfigList, Vec<(PathBuf, FileStamp)>), Error> {
    let rd = std::fs::read_dir(dir).map_err(|source| Error::ReadConfDir {
        dir: dir.to_path_buf(),
        source,
    })?;
    let mut entries = Vec::new();
    let mut stamps = Vec::new();
    for entry in rd.flatten() {
        let path = entry.path();
        // Followed like `is_file` does: a link to a file is a config file.
        let Ok(meta) = std::fs::metadata(&path) else {
            continue;
        };
        if !meta.is_file() {
            continue;
        }
        let Some(name) = path.file_name().and_then(|n| n.to_str()) else {
            continue;
        };
        if let Ok(bytes) = std::fs::read(&path) {
            entries.push((name.to_string(), bytes));
            stamps.push((path.clone(), file_stamp(&meta)));
        }
    }
    match select_config(entries) {
        Ok(mut list) => {
            list.source = dir.join(&list.source);
            Ok((list, stamps))
        }
        Err(rejected) => Err(Error::NoNetworkConfig {
            dir: dir.to_path_buf(),
            rejected: rejected
                .into_iter()
                .map(|(n, r)| format!("{n}: {r}"))
                .collect::<Vec<_>>()
                .join("; "),
        }),
    }
}

/// A file's modification time and size.
pub(crate) type FileStamp = (Option<std::time::SystemTime>, u64);

/// The [`FileStamp`] of a file's metadata.
pub(crate) fn file_stamp(meta: &std::fs::Metadata) -> FileStamp {
    (meta.modified().ok(), meta.len())
}

/// The stdin of plugin `idx`: its config with `name` and `cniVersion` injected, `prevResult`
/// when given, and `runtimeConfig` holding only the capability args the plugin declares in
/// `capabilities` (as libcni does).
pub fn plugin_stdin(
    list: &NetworkConfigList,
    idx: usize,
    prev_result: Option<&Value>,
    capability_args: &Map<String, Value>,
) -> Value {
    let mut conf = list.plugins.get(idx).cloned().unwrap_or_default();
    let declared: Vec<String> = conf
        .get("capabilities")
        .and_then(Value::as_object)
        .map(|caps| {
            caps.iter()
                .filter(|(_, on)| on.as_bool() == Some(true))
                .map(|(k, _)| k.clone())
                .collect()
        })
        .unwrap_or_default();
    let runtime: Map<String, Value> = declared
        .iter()
        .filter_map(|k| capability_args.get(k).map(|v| (k.clone(), v.clone())))
        .collect();
    if !runtime.is_empty() {
        conf.insert("runtimeConfig".into(), Value::Object(runtime));
    }
    conf.insert("name".into(), Value::String(list.name.clone()));
    conf.insert("cniVersion".into(), Value::String(list.cni_version.clone()));
    conf.remove("cniVersions");
    match prev_result {
        Some(prev) => {
            conf.insert("prevResult".into(), prev.clone());
        }
        None => {
            conf.remove("prevResult");
        }
    }
    Value::Object(conf)
}

/// Whether `prevResult` is passed on DEL for this version (spec ≥ 0.4.0).
pub fn del_takes_prev_result(version: &str) -> bool {
    match (version_rank(version), version_rank("0.4.0")) {
        (Some(v), Some(min)) => v >= min,
        _ => false,
    }
}

/// `CNI_ARGS` as kubelet's CRI runtimes build it.
pub fn cni_args(namespace: &str, pod: &str, sandbox_id: &str, uid: &str) -> String {
    format!(
        "IgnoreUnknown=1;K8S_POD_NAMESPACE={namespace};K8S_POD_NAME={pod};\
         K8S_POD_INFRA_CONTAINER_ID={sandbox_id};K8S_POD_UID={uid}"
    )
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;
    use serde_json::json;

    fn e(n: &str, v: Value) -> (String, Vec<u8>) {
        (n.to_string(), serde_json::to_vec(&v).unwrap())
    }

    #[test]
    fn first_valid_file_wins_in_lexicographic_order() {
        let entries = vec![
            e(
                "20-b.conflist",
                json!({"cniVersion":"1.0.0","name":"b","plugins":[{"type":"b"}]}),
            ),
            e("05-broken.conflist", json!({"cniVersion":"1.0.0","name":"x"})),
            ("00-garbage.conf".into(), b"{not json".to_vec()),
            e(
                "10-a.conf",
                json!({"cniVersion":"0.3.1","name":"a","type":"bridge"}),
            ),
            e(
                "01-ignored.txt",
                json!({"cniVersion":"1.0.0","name":"t","type":"t"}),
            ),
        ];
        let list = select_config(entries).unwrap();
        assert_eq!(list.name, "a");
        assert_eq!(list.cni_version, "0.3.1");
        assert_eq!(list.plugins.len(), 1);
        assert_eq!(list.plugin_type(0), "bridge");
        assert_eq!(list.source, PathBuf::from("10-a.conf"));
    }

    #[test]
    fn json_extension_is_a_single_plugin_and_none_valid_is_error() {
        let list = select_config(vec![e(
            "99.json",
            json!({"cniVersion":"1.1.0","name":"j","type":"kuryr-cni"}),
        )])
        .unwrap();
        assert_eq!(list.plugin_type(0), "kuryr-cni");
        let err = select_config(vec![
            e(
                "a.conflist",
                json!({"cniVersion":"1.0.0","name":"x","plugins":[]}),
            ),
            e("b.conf", json!({"cniVersion":"9.9.9","name":"x","type":"t"})),
        ])
        .unwrap_err();
        assert_eq!(err.len(), 2);
        assert!(select_config(vec![]).is_err());
    }

    #[test]
    fn cni_versions_array_picks_highest_supported() {
        let list = parse_config_file(
            "a.conflist",
            &serde_json::to_vec(
                &json!({"cniVersion":"1.0.0","cniVersions":["0.4.0","1.1.0","2.0.0"],
                "name":"n","plugins":[{"type":"a"},{"type":"b","capabilities":{"portMappings":true}}]}),
            )
            .unwrap(),
        )
        .unwrap();
        assert_eq!(list.cni_version, "1.1.0");
        assert_eq!(list.plugins.len(), 2);
    }

    #[test]
    fn stdin_injects_name_version_and_prev_result() {
        let list = parse_config_file(
            "a.conflist",
            &serde_json::to_vec(&json!({"cniVersion":"1.0.0","name":"net",
                "plugins":[{"type":"a","x":1},{"type":"b","name":"wrong"}]}))
            .unwrap(),
        )
        .unwrap();
        let first = plugin_stdin(&list, 0, None, &Map::new());
        assert_eq!(first, json!({"type":"a","x":1,"name":"net","cniVersion":"1.0.0"}));
        let prev = json!({"cniVersion":"1.0.0","ips":[]});
        let second = plugin_stdin(&list, 1, Some(&prev), &Map::new());
        assert_eq!(second["name"], "net");
        assert_eq!(second["prevResult"], prev);
    }

    #[test]
    fn runtime_config_only_for_declared_capabilities() {
        let list = parse_config_file(
            "a.conflist",
            &serde_json::to_vec(&json!({"cniVersion":"1.0.0","name":"net","plugins":[
                {"type":"a"},
                {"type":"portmap","capabilities":{"portMappings":true,"bandwidth":false}}]}))
            .unwrap(),
        )
        .unwrap();
        let caps: Map<String, Value> = serde_json::from_value(json!({
            "portMappings": [{"hostPort": 8080, "containerPort": 80, "protocol": "tcp"}],
            "bandwidth": {"ingressRate": 1}}))
        .unwrap();
        assert!(plugin_stdin(&list, 0, None, &caps).get("runtimeConfig").is_none());
        let pm = plugin_stdin(&list, 1, None, &caps);
        assert_eq!(
            pm["runtimeConfig"],
            json!({"portMappings": [{"hostPort": 8080, "containerPort": 80, "protocol": "tcp"}]})
        );
    }

    #[test]
    fn cni_args_format_and_del_prev_result_versions() {
        assert_eq!(
            cni_args("ns", "p", "abc", "u-1"),
            "IgnoreUnknown=1;K8S_POD_NAMESPACE=ns;K8S_POD_NAME=p;K8S_POD_INFRA_CONTAINER_ID=abc;K8S_POD_UID=u-1"
        );
        assert!(!del_takes_prev_result("0.3.1"));
        assert!(!del_takes_prev_result("0.2.0"));
        assert!(!del_takes_prev_result("9.9.9"));
        assert!(del_takes_prev_result("0.4.0"));
        assert!(del_takes_prev_result("1.1.0"));
    }
}

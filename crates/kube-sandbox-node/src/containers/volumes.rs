//! A pod's volumes on the machine: ConfigMap, Secret, downwardAPI and projected volumes (a
//! ServiceAccount token, ConfigMap/Secret items, downward-API fields) written as files under the
//! pod's directory, emptyDirs as directories there, and hostPaths checked or created by their
//! `type` — after the node's host-path map (`--host-path FROM=TO`, longest prefix wins), which
//! gives every emulated node its own `/etc/cni/net.d` or OVS run directory on one machine.

use std::{
    collections::BTreeMap,
    os::unix::fs::PermissionsExt,
    path::{Component, Path, PathBuf},
};

use k8s_openapi::api::core::v1::{KeyToPath, Pod, Volume};

use super::{
    env::{Sources, field_ref},
    launch::Mount,
};

/// Rewrites a hostPath through the node's map (longest matching prefix, by whole components).
pub fn map_host_path(map: &[(PathBuf, PathBuf)], path: &Path) -> PathBuf {
    map.iter()
        .filter(|(from, _)| path.starts_with(from))
        .max_by_key(|(from, _)| from.components().count())
        .map(|(from, to)| match path.strip_prefix(from) {
            Ok(rest) if rest.as_os_str().is_empty() => to.clone(),
            Ok(rest) => to.join(rest),
            Err(_) => path.to_path_buf(),
        })
        .unwrap_or_else(|| path.to_path_buf())
}

/// Parses `FROM=TO` (both absolute).
pub fn parse_host_path(s: &str) -> Result<(PathBuf, PathBuf), String> {
    let (a, b) = s
        .split_once('=')
        .ok_or_else(|| format!("--host-path {s:?}: expected FROM=TO"))?;
    let (a, b) = (PathBuf::from(a), PathBuf::from(b));
    if !a.is_absolute() || !b.is_absolute() {
        return Err(format!("--host-path {s:?}: both paths must be absolute"));
    }
    Ok((a, b))
}

fn safe_relative(p: &str) -> Result<PathBuf, String> {
    let path = Path::new(p);
    if p.is_empty() || path.components().any(|c| !matches!(c, Component::Normal(_))) {
        return Err(format!(
            "invalid path {p:?}: must be relative and may not contain '..'"
        ));
    }
    Ok(path.to_path_buf())
}

fn write_file(dir: &Path, rel: &str, data: &[u8], mode: u32) -> Result<(), String> {
    let target = dir.join(safe_relative(rel)?);
    if let Some(parent) = target.parent() {
        std::fs::create_dir_all(parent).map_err(|e| format!("creating {}: {e}", parent.display()))?;
    }
    let tmp = target.with_extension("kube-sandbox-tmp");
    std::fs::write(&tmp, data).map_err(|e| format!("writing {}: {e}", tmp.display()))?;
    std::fs::set_permissions(&tmp, std::fs::Permissions::from_mode(mode & 0o777))
        .map_err(|e| format!("chmod {}: {e}", tmp.display()))?;
    std::fs::rename(&tmp, &target).map_err(|e| format!("writing {}: {e}", target.display()))
}

/// Writes the keys of one ConfigMap/Secret (all, or `items`) into `dir`.
fn write_keys(
    dir: &Path,
    data: Option<&BTreeMap<String, String>>,
    items: Option<&Vec<KeyToPath>>,
    what: &str,
    optional: bool,
    mode: u32,
) -> Result<(), String> {
    let Some(data) = data else {
        return if optional {
            Ok(())
        } else {
            Err(format!("{what} not found"))
        };
    };
    match items {
        Some(items) => {
            for it in items {
                match data.get(&it.key) {
                    Some(v) => write_file(dir, &it.path, v.as_bytes(), it.mode.map_or(mode, |m| m as u32))?,
                    None if optional => {}
                    None => {
                        return Err(format!(
                            "configmap references non-existent config key: {}",
                            it.key
                        ));
                    }
                }
            }
        }
        None => {
            for (k, v) in data {
                write_file(dir, k, v.as_bytes(), mode)?;
            }
        }
    }
    Ok(())
}

/// Writes the keys of the ConfigMap or Secret `kind`/`name` (all, or `items`) into `dir`.
fn write_object(
    dir: &Path,
    sources: &Sources,
    kind: &'static str,
    name: &str,
    items: Option<&Vec<KeyToPath>>,
    optional: Option<bool>,
    mode: u32,
) -> Result<(), String> {
    let what = format!("{} \"{name}\"", kind.to_lowercase());
    let data = sources.get(&(kind, name.to_string()));
    write_keys(dir, data, items, &what, optional.unwrap_or(false), mode)
}

/// Prepares every volume of `pod` under `pod_dir/volumes`; returns volume name → path.
/// `tokens`: volume name → the ServiceAccount token for its projection.
pub fn prepare(
    pod: &Pod,
    pod_dir: &Path,
    sources: &Sources,
    tokens: &BTreeMap<String, String>,
    host_paths: &[(PathBuf, PathBuf)],
    host_ip: &str,
) -> Result<BTreeMap<String, PathBuf>, String> {
    let mut out = BTreeMap::new();
    let volumes: &[Volume] = pod
        .spec
        .as_ref()
        .and_then(|s| s.volumes.as_deref())
        .unwrap_or_default();
    for v in volumes {
        let fail = |e: String| format!("MountVolume.SetUp failed for volume \"{}\" : {e}", v.name);
        let dir = pod_dir.join("volumes").join(&v.name);
        if let Some(hp) = &v.host_path {
            let path = map_host_path(host_paths, Path::new(&hp.path));
            host_path_check(&path, hp.type_.as_deref().unwrap_or("")).map_err(fail)?;
            out.insert(v.name.clone(), path);
            continue;
        }
        std::fs::create_dir_all(&dir).map_err(|e| fail(format!("creating {}: {e}", dir.display())))?;
        if let Some(cm) = &v.config_map {
            let mode = cm.default_mode.unwrap_or(0o644) as u32;
            write_object(
                &dir,
                sources,
                "ConfigMap",
                &cm.name,
                cm.items.as_ref(),
                cm.optional,
                mode,
            )
            .map_err(fail)?;
        } else if let Some(s) = &v.secret {
            let name = s.secret_name.clone().unwrap_or_default();
            let mode = s.default_mode.unwrap_or(0o644) as u32;
            write_object(&dir, sources, "Secret", &name, s.items.as_ref(), s.optional, mode).map_err(fail)?;
        } else if let Some(d) = &v.downward_api {
            let mode = d.default_mode.unwrap_or(0o644) as u32;
            for it in d.items.iter().flatten() {
                if let Some(f) = &it.field_ref {
                    let val = field_ref(pod, &f.field_path, host_ip).map_err(fail)?;
                    write_file(&dir, &it.path, val.as_bytes(), it.mode.map_or(mode, |m| m as u32))
                        .map_err(fail)?;
                }
            }
        } else if let Some(p) = &v.projected {
            let mode = p.default_mode.unwrap_or(0o644) as u32;
            for src in p.sources.iter().flatten() {
                if let Some(t) = &src.service_account_token {
                    let token = tokens
                        .get(&v.name)
                        .ok_or_else(|| fail("no ServiceAccount token was issued".into()))?;
                    write_file(&dir, &t.path, token.as_bytes(), 0o600.min(mode)).map_err(fail)?;
                    // kubelet gives the token to the pod's one non-root user (no fsGroup here).
                    if let Some(uid) = super::security::pod_user(pod) {
                        let file = dir.join(safe_relative(&t.path)?);
                        std::os::unix::fs::chown(&file, Some(uid), None)
                            .map_err(|e| fail(format!("chown {}: {e}", file.display())))?;
                    }
                } else if let Some(cm) = &src.config_map {
                    write_object(
                        &dir,
                        sources,
                        "ConfigMap",
                        &cm.name,
                        cm.items.as_ref(),
                        cm.optional,
                        mode,
                    )
                    .map_err(fail)?;
                } else if let Some(s) = &src.secret {
                    write_object(
                        &dir,
                        sources,
                        "Secret",
                        &s.name,
                        s.items.as_ref(),
                        s.optional,
                        mode,
                    )
                    .map_err(fail)?;
                } else if let Some(d) = &src.downward_api {
                    for it in d.items.iter().flatten() {
                        if let Some(f) = &it.field_ref {
                            let val = field_ref(pod, &f.field_path, host_ip).map_err(fail)?;
                            write_file(&dir, &it.path, val.as_bytes(), mode).map_err(fail)?;
                        }
                    }
                }
            }
        } else if v.empty_dir.is_some() {
            // World-writable, as kubelet makes it: any user of the pod writes there.
            std::fs::set_permissions(&dir, std::fs::Permissions::from_mode(0o777))
                .map_err(|e| fail(format!("chmod {}: {e}", dir.display())))?;
        } else {
            return Err(fail("volume type not emulated (only hostPath, emptyDir, configMap, secret, downwardAPI, projected)".into()));
        }
        out.insert(v.name.clone(), dir);
    }
    Ok(out)
}

fn host_path_check(path: &Path, ty: &str) -> Result<(), String> {
    let shown = path.display();
    match ty {
        "DirectoryOrCreate" => std::fs::create_dir_all(path).map_err(|e| format!("creating {shown}: {e}")),
        "Directory" if !path.is_dir() => {
            Err(format!("hostPath type check failed: {shown} is not a directory"))
        }
        "FileOrCreate" if !path.exists() => {
            if let Some(p) = path.parent() {
                std::fs::create_dir_all(p).map_err(|e| format!("creating {}: {e}", p.display()))?;
            }
            std::fs::write(path, b"").map_err(|e| format!("creating {shown}: {e}"))
        }
        "File" if !path.is_file() => Err(format!("hostPath type check failed: {shown} is not a file")),
        "Socket" | "CharDevice" | "BlockDevice" if !path.exists() => {
            Err(format!("hostPath type check failed: {shown} does not exist"))
        }
        _ => Ok(()),
    }
}

/// The bind mounts of one container (`run-container` creates missing mount points, on the
/// machine's file system: containers here share it).
pub fn mounts(
    c: &k8s_openapi::api::core::v1::Container,
    volumes: &BTreeMap<String, PathBuf>,
) -> Result<Vec<Mount>, String> {
    let mut out = Vec::new();
    for m in c.volume_mounts.iter().flatten() {
        let Some(src) = volumes.get(&m.name) else {
            return Err(format!("volumeMount {:?}: no volume of that name", m.name));
        };
        let source = match m.sub_path.as_deref().filter(|s| !s.is_empty()) {
            Some(sp) => src.join(safe_relative(sp)?),
            None => src.clone(),
        };
        let target = PathBuf::from(&m.mount_path);
        if !target.is_absolute() {
            return Err(format!(
                "volumeMount {:?}: mountPath {:?} is not absolute",
                m.name, m.mount_path
            ));
        }
        out.push(Mount {
            source,
            target,
            read_only: m.read_only.unwrap_or(false),
        });
    }
    Ok(out)
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn host_paths_map_by_longest_prefix() {
        let map = vec![
            parse_host_path("/etc/cni=/s/cni").unwrap(),
            parse_host_path("/etc/cni/net.d=/s/node-1/net.d").unwrap(),
        ];
        assert_eq!(
            map_host_path(&map, Path::new("/etc/cni/net.d")),
            PathBuf::from("/s/node-1/net.d")
        );
        assert_eq!(
            map_host_path(&map, Path::new("/etc/cni/net.d/x")),
            PathBuf::from("/s/node-1/net.d/x")
        );
        assert_eq!(
            map_host_path(&map, Path::new("/etc/cni/other")),
            PathBuf::from("/s/cni/other")
        );
        assert_eq!(
            map_host_path(&map, Path::new("/etc/cnix")),
            PathBuf::from("/etc/cnix")
        );
        assert!(parse_host_path("rel=/x").is_err());
    }

    #[test]
    fn volumes_are_written_with_items_tokens_and_fields() {
        let dir = tempfile::tempdir().unwrap();
        let pod: Pod = serde_json::from_value(json!({
            "metadata": {"name": "p", "namespace": "kube-system"},
            "spec": {"containers": [{"name": "c", "image": "i", "volumeMounts": [
                        {"name": "conf", "mountPath": dir.path().join("mnt/etc").to_str().unwrap(), "readOnly": true}]}],
                     "volumes": [
                        {"name": "conf", "configMap": {"name": "kuryr", "items": [{"key": "kuryr.conf", "path": "kuryr.conf"}]}},
                        {"name": "sa", "projected": {"sources": [
                            {"serviceAccountToken": {"path": "token"}},
                            {"downwardAPI": {"items": [{"path": "namespace", "fieldRef": {"fieldPath": "metadata.namespace"}}]}}]}},
                        {"name": "state", "hostPath": {"path": "/var/lib/kuryr", "type": "DirectoryOrCreate"}},
                        {"name": "missing", "secret": {"secretName": "gone", "optional": true}}]}
        }))
        .unwrap();
        let mut sources = Sources::new();
        sources.insert(
            ("ConfigMap", "kuryr".into()),
            [
                ("kuryr.conf".to_string(), "[DEFAULT]\n".to_string()),
                ("other".into(), "x".into()),
            ]
            .into(),
        );
        let tokens = [("sa".to_string(), "tok".to_string())].into();
        let state = dir.path().join("hosts/node-1/kuryr");
        let map = vec![(PathBuf::from("/var/lib/kuryr"), state.clone())];
        let vols = prepare(&pod, dir.path(), &sources, &tokens, &map, "10.0.0.1").unwrap();
        assert_eq!(
            std::fs::read_to_string(vols["conf"].join("kuryr.conf")).unwrap(),
            "[DEFAULT]\n"
        );
        assert!(!vols["conf"].join("other").exists());
        assert_eq!(std::fs::read_to_string(vols["sa"].join("token")).unwrap(), "tok");
        assert_eq!(
            std::fs::read_to_string(vols["sa"].join("namespace")).unwrap(),
            "kube-system"
        );
        assert_eq!(vols["state"], state);
        assert!(state.is_dir());
        let ms = mounts(&pod.spec.as_ref().unwrap().containers[0], &vols).unwrap();
        assert!(ms[0].read_only);
        sources.clear();
        let e = prepare(&pod, dir.path(), &sources, &tokens, &map, "10.0.0.1").unwrap_err();
        assert_eq!(
            e,
            "MountVolume.SetUp failed for volume \"conf\" : configmap \"kuryr\" not found"
        );
    }
}

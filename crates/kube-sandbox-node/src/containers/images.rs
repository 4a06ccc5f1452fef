//! The image table (`--image IMAGE=DIR`): which local directory of executables stands in for a
//! container image. An image matches an entry exactly or by its repository (the reference without
//! `:tag` or `@digest`), so `ghcr.io/x/kuryr-rs:0.2` matches an entry for `ghcr.io/x/kuryr-rs`.
//! A command is resolved inside the entry's directory first: `/usr/local/bin/kuryr-daemon` and
//! `kuryr-daemon` both become `<DIR>/kuryr-daemon` when it exists there; otherwise an absolute
//! path is the machine's own (an image's `/bin/sh` is the machine's).

use std::path::{Path, PathBuf};

/// One `IMAGE=DIR` entry.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Entry {
    /// The image reference (or repository) it serves.
    pub image: String,
    /// The directory holding its executables.
    pub dir: PathBuf,
}

/// Parses `IMAGE=DIR`.
pub fn parse_entry(s: &str) -> Result<Entry, String> {
    let (image, dir) = s
        .split_once('=')
        .ok_or_else(|| format!("--image {s:?}: expected IMAGE=DIR"))?;
    if image.is_empty() || dir.is_empty() {
        return Err(format!("--image {s:?}: expected IMAGE=DIR, both non-empty"));
    }
    Ok(Entry {
        image: image.to_string(),
        dir: PathBuf::from(dir),
    })
}

/// The repository of an image reference: without `@digest` and without a `:tag` in its last
/// path component (a registry's `:port` stays).
pub fn repository(image: &str) -> &str {
    let no_digest = image.split('@').next().unwrap_or(image);
    let last_slash = no_digest.rfind('/').map_or(0, |i| i + 1);
    match no_digest[last_slash..].rfind(':') {
        Some(i) => &no_digest[..last_slash + i],
        None => no_digest,
    }
}

/// The entry serving `image`, if any.
pub fn lookup<'a>(table: &'a [Entry], image: &str) -> Option<&'a Entry> {
    table
        .iter()
        .find(|e| e.image == image)
        .or_else(|| table.iter().find(|e| e.image == repository(image)))
}

/// The executable for a container's `command[0]` in `entry`'s image.
pub fn resolve(entry: &Entry, program: &str) -> Result<PathBuf, String> {
    let base = Path::new(program)
        .file_name()
        .ok_or_else(|| format!("command {program:?} names no executable"))?;
    let inside = entry.dir.join(base);
    if inside.is_file() {
        return Ok(inside);
    }
    if Path::new(program).is_absolute() && Path::new(program).is_file() {
        return Ok(PathBuf::from(program));
    }
    Err(format!(
        "exec: {program:?}: executable file not found in image {} ({} has no {})",
        entry.image,
        entry.dir.display(),
        base.to_string_lossy()
    ))
}

/// Where executables are unpacked for containers that do not run as root: a machine-wide store
/// whose directories everyone may traverse, as a runtime's image store is (the table's
/// directories may sit in a private build tree a non-root user cannot reach).
pub const STORE: &str = "/var/lib/kube-sandbox/image-store";

/// `program` as a user other than root can reach it: itself when every directory on its path
/// may be traversed by others, otherwise a hard link to it (a copy across file systems) in
/// `store`, named after the file's identity so that a rebuilt program gets a new name and
/// concurrent nodes agree on one.
pub fn stage_for_non_root(program: &Path, store: &Path) -> Result<PathBuf, String> {
    use std::os::unix::fs::{MetadataExt, PermissionsExt};
    let reachable = program
        .ancestors()
        .skip(1)
        .all(|d| std::fs::metadata(d).is_ok_and(|m| m.permissions().mode() & 0o001 != 0));
    let meta = std::fs::metadata(program).map_err(|e| format!("{}: {e}", program.display()))?;
    if reachable && meta.permissions().mode() & 0o005 == 0o005 {
        return Ok(program.to_path_buf());
    }
    let name = program
        .file_name()
        .ok_or_else(|| format!("{} names no file", program.display()))?;
    let dir = store.join(format!(
        "{:x}-{:x}-{:x}",
        meta.dev(),
        meta.ino(),
        meta.mtime_nsec() ^ meta.mtime()
    ));
    let staged = dir.join(name);
    if staged.is_file() {
        return Ok(staged);
    }
    let fail = |what: &str, e: std::io::Error| {
        format!(
            "staging {} in {}: {what}: {e}",
            program.display(),
            store.display()
        )
    };
    std::fs::create_dir_all(&dir).map_err(|e| fail("creating the directory", e))?;
    for d in dir.ancestors().take_while(|d| d.starts_with(store)) {
        let _ = std::fs::set_permissions(d, std::fs::Permissions::from_mode(0o755));
    }
    let tmp = dir.join(format!(".{}.{}", name.to_string_lossy(), std::process::id()));
    let _ = std::fs::remove_file(&tmp);
    if std::fs::hard_link(program, &tmp).is_err() {
        std::fs::copy(program, &tmp).map_err(|e| fail("copying", e))?;
    }
    std::fs::set_permissions(&tmp, std::fs::Permissions::from_mode(0o755)).map_err(|e| fail("chmod", e))?;
    std::fs::rename(&tmp, &staged).map_err(|e| fail("renaming", e))?;
    Ok(staged)
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    #[test]
    fn repositories_drop_tags_and_digests_but_keep_registry_ports() {
        assert_eq!(repository("ghcr.io/x/kuryr-rs:0.2"), "ghcr.io/x/kuryr-rs");
        assert_eq!(repository("localhost:5000/kuryr-rs"), "localhost:5000/kuryr-rs");
        assert_eq!(repository("localhost:5000/kuryr-rs:1"), "localhost:5000/kuryr-rs");
        assert_eq!(repository("busybox@sha256:abc"), "busybox");
        assert_eq!(repository("busybox"), "busybox");
    }

    #[test]
    fn entries_parse_match_and_resolve() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::write(dir.path().join("kuryr-daemon"), b"").unwrap();
        let e = parse_entry(&format!("ghcr.io/x/kuryr-rs={}", dir.path().display())).unwrap();
        assert!(parse_entry("nodir").is_err());
        assert!(parse_entry("=x").is_err());
        let table = vec![e.clone()];
        assert_eq!(lookup(&table, "ghcr.io/x/kuryr-rs:0.2"), Some(&e));
        assert_eq!(lookup(&table, "busybox"), None);
        assert_eq!(
            resolve(&e, "/usr/local/bin/kuryr-daemon").unwrap(),
            dir.path().join("kuryr-daemon")
        );
        assert_eq!(
            resolve(&e, "kuryr-daemon").unwrap(),
            dir.path().join("kuryr-daemon")
        );
        assert_eq!(resolve(&e, "/bin/sh").unwrap(), PathBuf::from("/bin/sh"));
        let err = resolve(&e, "nope").unwrap_err();
        assert!(err.contains("not found in image"), "{err}");
    }

    #[test]
    fn programs_in_private_trees_are_staged_where_others_reach_them() {
        use std::os::unix::fs::PermissionsExt;
        let private = tempfile::tempdir().unwrap();
        std::fs::set_permissions(private.path(), std::fs::Permissions::from_mode(0o700)).unwrap();
        let prog = private.path().join("tool");
        std::fs::write(&prog, b"#!/bin/sh\n").unwrap();
        std::fs::set_permissions(&prog, std::fs::Permissions::from_mode(0o755)).unwrap();
        let store = tempfile::tempdir().unwrap();
        std::fs::set_permissions(store.path(), std::fs::Permissions::from_mode(0o755)).unwrap();
        let staged = stage_for_non_root(&prog, store.path()).unwrap();
        assert!(
            staged.starts_with(store.path()) && staged.ends_with("tool"),
            "{staged:?}"
        );
        assert_eq!(std::fs::read(&staged).unwrap(), b"#!/bin/sh\n");
        assert_eq!(
            stage_for_non_root(&prog, store.path()).unwrap(),
            staged,
            "staged once"
        );
        // A program others already reach is used where it is.
        let sh = PathBuf::from("/bin/sh");
        assert_eq!(stage_for_non_root(&sh, store.path()).unwrap(), sh);
    }
}

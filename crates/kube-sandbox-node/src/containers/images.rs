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
}

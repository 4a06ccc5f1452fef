//! `kuryr-cni install`: what upstream's `cni_ds_init` script did, as the DaemonSet entry point.
//! Copies this executable into the host CNI bin dir and writes the conflist into the CNI conf
//! dir, both atomically (temporary file in the same directory, fsync, rename, fsync of the
//! directory), so the runtime never sees a half-written executable or config; then optionally
//! `exec`s the daemon (`--then kuryr-daemon ...`).

use std::ffi::OsString;
use std::fs::{self, OpenOptions};
use std::io::Write;
use std::os::unix::fs::OpenOptionsExt;
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};

use kuryr_cni_api::version::SUPPORTED_VERSIONS;
use serde_json::json;

/// Name of the installed executable (the conflist `type`).
pub const PLUGIN_NAME: &str = "kuryr-cni";

/// Failure of the install step.
#[derive(Debug, thiserror::Error)]
pub enum InstallError {
    /// Bad command line.
    #[error(
        "{0}\n\nusage: kuryr-cni install [--cni-bin-dir DIR] [--cni-conf-dir DIR] [--conflist-name NAME] [--daemon-address ADDR|unix:PATH] [--kuryr-conf PATH] [--cni-version V] [--log-file PATH] [--debug] [--source PATH] [--then CMD ARGS...]"
    )]
    Usage(String),
    /// `--help` was asked for.
    #[error(
        "kuryr-cni install: copy this executable and write the CNI conflist into the host (atomically), then optionally exec a command"
    )]
    Help,
    /// Locating this executable failed.
    #[error("cannot locate the kuryr-cni executable")]
    CurrentExe(#[source] std::io::Error),
    /// Reading the source executable failed.
    #[error("cannot read {0}")]
    ReadSource(PathBuf, #[source] std::io::Error),
    /// Writing a file atomically failed.
    #[error("cannot write {0}")]
    Write(PathBuf, #[source] std::io::Error),
    /// `exec` of the `--then` command failed.
    #[error("cannot exec {0:?}")]
    Exec(OsString, #[source] std::io::Error),
}

/// Parsed `install` options.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct InstallOptions {
    /// Host CNI bin dir.
    pub cni_bin_dir: PathBuf,
    /// Host CNI conf dir.
    pub cni_conf_dir: PathBuf,
    /// Conflist file name.
    pub conflist_name: String,
    /// `daemon_address` written into the conflist (absent: the plugin reads `kuryr_conf`).
    pub daemon_address: Option<String>,
    /// `kuryr_conf` written into the conflist.
    pub kuryr_conf: String,
    /// Conflist `cniVersion` (runtimes without `cniVersions` support use this).
    pub cni_version: String,
    /// `log_file` written into the conflist.
    pub log_file: Option<String>,
    /// `debug` written into the conflist.
    pub debug: bool,
    /// Executable to install (default: this one).
    pub source: Option<PathBuf>,
    /// Command to exec afterwards.
    pub then: Vec<OsString>,
}

impl Default for InstallOptions {
    fn default() -> Self {
        Self {
            cni_bin_dir: "/opt/cni/bin".into(),
            cni_conf_dir: "/etc/cni/net.d".into(),
            conflist_name: "10-kuryr.conflist".into(),
            daemon_address: None,
            kuryr_conf: "/etc/kuryr/kuryr.conf".into(),
            cni_version: "1.0.0".into(),
            log_file: None,
            debug: false,
            source: None,
            then: Vec::new(),
        }
    }
}

impl InstallOptions {
    /// Parses the arguments after `install` (`--opt value` or `--opt=value`).
    pub fn parse(args: &[OsString]) -> Result<Self, InstallError> {
        let mut o = Self::default();
        let mut i = 0;
        while i < args.len() {
            let arg = args[i]
                .to_str()
                .ok_or_else(|| InstallError::Usage(format!("argument {:?} is not UTF-8", args[i])))?;
            i += 1;
            if arg == "--then" {
                o.then = args[i..].to_vec();
                if o.then.is_empty() {
                    return Err(InstallError::Usage("--then needs a command".into()));
                }
                break;
            }
            if arg == "--help" || arg == "-h" {
                return Err(InstallError::Help);
            }
            if arg == "--debug" {
                o.debug = true;
                continue;
            }
            let (name, inline) = match arg.split_once('=') {
                Some((n, v)) => (n, Some(v.to_owned())),
                None => (arg, None),
            };
            let value = match inline {
                Some(v) => v,
                None => {
                    let v = args
                        .get(i)
                        .and_then(|v| v.to_str())
                        .ok_or_else(|| InstallError::Usage(format!("{name} needs a UTF-8 value")))?;
                    i += 1;
                    v.to_owned()
                }
            };
            match name {
                "--cni-bin-dir" => o.cni_bin_dir = value.into(),
                "--cni-conf-dir" => o.cni_conf_dir = value.into(),
                "--conflist-name" => o.conflist_name = value,
                "--daemon-address" => o.daemon_address = Some(value),
                "--kuryr-conf" => o.kuryr_conf = value,
                "--cni-version" => o.cni_version = value,
                "--log-file" => o.log_file = Some(value),
                "--source" => o.source = Some(value.into()),
                _ => return Err(InstallError::Usage(format!("unknown option {name:?}"))),
            }
        }
        if o.conflist_name.is_empty() || o.conflist_name.contains('/') || o.conflist_name.starts_with('.') {
            return Err(InstallError::Usage(format!(
                "bad --conflist-name {:?}",
                o.conflist_name
            )));
        }
        if !SUPPORTED_VERSIONS.contains(&o.cni_version.as_str()) {
            return Err(InstallError::Usage(format!(
                "--cni-version must be one of {}",
                SUPPORTED_VERSIONS.join(", ")
            )));
        }
        Ok(o)
    }

    /// The conflist JSON. `cniVersions` lets libcni ≥ 1.2 negotiate up to 1.1.0 (GC, STATUS)
    /// while older runtimes use `cniVersion`.
    pub fn conflist(&self) -> serde_json::Value {
        let mut plugin = json!({
            "type": PLUGIN_NAME,
            "kuryr_conf": self.kuryr_conf,
            "debug": self.debug,
        });
        if let Some(a) = &self.daemon_address {
            plugin["daemon_address"] = json!(a);
        }
        if let Some(l) = &self.log_file {
            plugin["log_file"] = json!(l);
        }
        let versions: Vec<&str> = SUPPORTED_VERSIONS
            .iter()
            .copied()
            .filter(|v| *v >= self.cni_version.as_str())
            .collect();
        json!({
            "cniVersion": self.cni_version,
            "cniVersions": versions,
            "name": "kuryr",
            "plugins": [plugin],
        })
    }
}

/// Writes `bytes` to `dir/name` atomically with `mode`.
pub fn write_atomic(dir: &Path, name: &str, bytes: &[u8], mode: u32) -> Result<PathBuf, InstallError> {
    let dest = dir.join(name);
    let tmp = dir.join(format!(".{name}.tmp.{}", std::process::id()));
    let werr = |e| InstallError::Write(dest.clone(), e);
    fs::create_dir_all(dir).map_err(werr)?;
    let _ = fs::remove_file(&tmp);
    let res = (|| {
        let mut f = OpenOptions::new()
            .write(true)
            .create_new(true)
            .mode(mode)
            .open(&tmp)?;
        f.write_all(bytes)?;
        // The umask may have narrowed `mode`.
        f.set_permissions(std::os::unix::fs::PermissionsExt::from_mode(mode))?;
        f.sync_all()?;
        drop(f);
        fs::rename(&tmp, &dest)?;
        fs::File::open(dir)?.sync_all()
    })();
    if let Err(e) = res {
        let _ = fs::remove_file(&tmp);
        return Err(werr(e));
    }
    Ok(dest)
}

/// Installs the binary and the conflist; returns the written paths.
pub fn install(o: &InstallOptions) -> Result<(PathBuf, PathBuf), InstallError> {
    let source = match &o.source {
        Some(s) => s.clone(),
        None => std::env::current_exe().map_err(InstallError::CurrentExe)?,
    };
    let bin_dest = o.cni_bin_dir.join(PLUGIN_NAME);
    let same = match (fs::canonicalize(&source), fs::canonicalize(&bin_dest)) {
        (Ok(a), Ok(b)) => a == b,
        _ => false,
    };
    if !same {
        let bytes = fs::read(&source).map_err(|e| InstallError::ReadSource(source.clone(), e))?;
        write_atomic(&o.cni_bin_dir, PLUGIN_NAME, &bytes, 0o755)?;
    }
    let mut text = serde_json::to_string_pretty(&o.conflist()).unwrap_or_default();
    text.push('\n');
    let conf_dest = write_atomic(&o.cni_conf_dir, &o.conflist_name, text.as_bytes(), 0o644)?;
    Ok((bin_dest, conf_dest))
}

/// `kuryr-cni install ...`: exit code 0 on success (or never returns with `--then`).
pub fn main(args: &[OsString]) -> std::process::ExitCode {
    let result = InstallOptions::parse(args).and_then(|o| {
        let (bin, conf) = install(&o)?;
        eprintln!("kuryr-cni: installed {} and {}", bin.display(), conf.display());
        if let Some((cmd, rest)) = o.then.split_first() {
            let err = std::process::Command::new(cmd).args(rest).exec();
            return Err(InstallError::Exec(cmd.clone(), err));
        }
        Ok(())
    });
    match result {
        Ok(()) => std::process::ExitCode::SUCCESS,
        Err(InstallError::Help) => {
            eprintln!(
                "{}\n\n{}",
                InstallError::Help,
                InstallError::Usage(String::new()).to_string().trim_start()
            );
            std::process::ExitCode::SUCCESS
        }
        Err(e) => {
            let mut msg = e.to_string();
            let mut src = std::error::Error::source(&e);
            while let Some(s) = src {
                msg.push_str(&format!(": {s}"));
                src = s.source();
            }
            eprintln!("kuryr-cni install: {msg}");
            std::process::ExitCode::from(if matches!(e, InstallError::Usage(_)) { 2 } else { 1 })
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn os(v: &[&str]) -> Vec<OsString> {
        v.iter().map(OsString::from).collect()
    }

    #[test]
    fn options() {
        let o = InstallOptions::parse(&os(&[
            "--cni-bin-dir=/b",
            "--daemon-address",
            "unix:/run/k.sock",
            "--debug",
            "--then",
            "kuryr-daemon",
            "--config-file",
            "x",
        ]))
        .unwrap();
        assert_eq!(o.cni_bin_dir, PathBuf::from("/b"));
        assert_eq!(o.daemon_address.as_deref(), Some("unix:/run/k.sock"));
        assert!(o.debug);
        assert_eq!(o.then, os(&["kuryr-daemon", "--config-file", "x"]));
        for bad in [
            &["--nope", "x"][..],
            &["--cni-bin-dir"],
            &["--then"],
            &["--conflist-name", "../x"],
            &["--cni-version", "0.2.0"],
        ] {
            assert!(
                matches!(InstallOptions::parse(&os(bad)), Err(InstallError::Usage(_))),
                "{bad:?}"
            );
        }
    }

    #[test]
    fn conflist_content() {
        let c = InstallOptions::default().conflist();
        assert_eq!(
            c,
            json!({"cniVersion": "1.0.0", "cniVersions": ["1.0.0", "1.1.0"], "name": "kuryr",
                   "plugins": [{"type": "kuryr-cni", "kuryr_conf": "/etc/kuryr/kuryr.conf", "debug": false}]})
        );
        let o = InstallOptions {
            cni_version: "0.3.1".into(),
            daemon_address: Some("127.0.0.1:5036".into()),
            ..Default::default()
        };
        let c = o.conflist();
        assert_eq!(c["cniVersions"], json!(["0.3.1", "0.4.0", "1.0.0", "1.1.0"]));
        assert_eq!(c["plugins"][0]["daemon_address"], "127.0.0.1:5036");
    }
}

//! `kuryr-cni install` into temporary host directories: files, modes, conflist content, atomic
//! replacement under concurrent readers, and `--then`.

#![allow(clippy::unwrap_used)]

mod common;

use std::os::unix::fs::PermissionsExt;
use std::process::Command;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};

use common::BIN;

fn install(args: &[&str]) -> std::process::Output {
    Command::new(BIN).arg("install").args(args).output().unwrap()
}

#[test]
fn installs_binary_and_conflist() {
    let dir = tempfile::tempdir().unwrap();
    let bin = dir.path().join("bin");
    let conf = dir.path().join("net.d");
    let out = install(&[
        "--cni-bin-dir",
        bin.to_str().unwrap(),
        "--cni-conf-dir",
        conf.to_str().unwrap(),
        "--daemon-address",
        "unix:/run/kuryr/cni.sock",
    ]);
    assert!(out.status.success(), "{out:?}");
    let installed = bin.join("kuryr-cni");
    assert_eq!(std::fs::read(&installed).unwrap(), std::fs::read(BIN).unwrap());
    assert_eq!(
        std::fs::metadata(&installed).unwrap().permissions().mode() & 0o777,
        0o755
    );
    let conflist = conf.join("10-kuryr.conflist");
    assert_eq!(
        std::fs::metadata(&conflist).unwrap().permissions().mode() & 0o777,
        0o644
    );
    let v: serde_json::Value = serde_json::from_slice(&std::fs::read(&conflist).unwrap()).unwrap();
    assert_eq!(
        v,
        serde_json::json!({"cniVersion": "1.0.0", "cniVersions": ["1.0.0", "1.1.0"], "name": "kuryr", "plugins": [
            {"type": "kuryr-cni", "kuryr_conf": "/etc/kuryr/kuryr.conf", "debug": false, "daemon_address": "unix:/run/kuryr/cni.sock"}]})
    );
    // No temporary files left behind.
    assert_eq!(std::fs::read_dir(&bin).unwrap().count(), 1);
    assert_eq!(std::fs::read_dir(&conf).unwrap().count(), 1);
    // The installed copy works.
    let out = Command::new(&installed)
        .env_clear()
        .env("CNI_COMMAND", "VERSION")
        .output()
        .unwrap();
    assert!(out.status.success());
    // Re-running from the installed copy itself (same file) is fine.
    let out = Command::new(&installed)
        .args([
            "install",
            "--cni-bin-dir",
            bin.to_str().unwrap(),
            "--cni-conf-dir",
            conf.to_str().unwrap(),
            "--cni-version",
            "0.3.1",
            "--conflist-name",
            "05-kuryr.conflist",
        ])
        .output()
        .unwrap();
    assert!(out.status.success(), "{out:?}");
    let v: serde_json::Value =
        serde_json::from_slice(&std::fs::read(conf.join("05-kuryr.conflist")).unwrap()).unwrap();
    assert_eq!(v["cniVersion"], "0.3.1");
}

#[test]
fn replacement_is_atomic_for_readers() {
    let dir = tempfile::tempdir().unwrap();
    let bin = dir.path().join("bin");
    let conf = dir.path().join("net.d");
    std::fs::create_dir_all(&bin).unwrap();
    // An old, different "binary" the reader may see until the rename.
    let old = vec![7u8; 1234];
    std::fs::write(bin.join("kuryr-cni"), &old).unwrap();
    let new = std::fs::read(BIN).unwrap();
    let stop = Arc::new(AtomicBool::new(false));
    let reader = {
        let (stop, bin, conf, old, new) = (stop.clone(), bin.clone(), conf.clone(), old.clone(), new.clone());
        std::thread::spawn(move || {
            let mut reads = 0u32;
            while !stop.load(Ordering::Relaxed) {
                let b = std::fs::read(bin.join("kuryr-cni")).unwrap();
                assert!(b == old || b == new, "torn binary of {} bytes", b.len());
                if let Ok(c) = std::fs::read(conf.join("10-kuryr.conflist")) {
                    serde_json::from_slice::<serde_json::Value>(&c).expect("torn conflist");
                }
                reads += 1;
            }
            reads
        })
    };
    for i in 0..10 {
        let addr = format!("127.0.0.1:{}", 5000 + i);
        let out = install(&[
            "--cni-bin-dir",
            bin.to_str().unwrap(),
            "--cni-conf-dir",
            conf.to_str().unwrap(),
            "--daemon-address",
            &addr,
        ]);
        assert!(out.status.success(), "{out:?}");
    }
    stop.store(true, Ordering::Relaxed);
    let reads = reader.join().unwrap();
    assert!(reads > 0);
}

#[test]
fn then_execs_the_daemon_and_bad_options_fail() {
    let dir = tempfile::tempdir().unwrap();
    let marker = dir.path().join("daemon-started");
    let script = format!("echo \"$0 $1\" > {}", marker.display());
    let out = install(&[
        "--cni-bin-dir",
        dir.path().join("b").to_str().unwrap(),
        "--cni-conf-dir",
        dir.path().join("c").to_str().unwrap(),
        "--then",
        "/bin/sh",
        "-c",
        &script,
        "kuryr-daemon",
        "--config-file",
    ]);
    assert!(out.status.success(), "{out:?}");
    assert_eq!(
        std::fs::read_to_string(&marker).unwrap().trim(),
        "kuryr-daemon --config-file"
    );

    let out = install(&["--bogus"]);
    assert_eq!(out.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&out.stderr).contains("usage"));
    let out = install(&[
        "--cni-bin-dir",
        "/proc/nope",
        "--cni-conf-dir",
        dir.path().to_str().unwrap(),
    ]);
    assert_eq!(out.status.code(), Some(1), "{out:?}");
    assert!(!String::from_utf8_lossy(&out.stderr).contains("panicked"));
}

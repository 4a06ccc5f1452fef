//! Whatever the plugin is given — random stdin, absurd or missing env, huge input — it prints a
//! CNI error object, exits 1 and never panics.

#![allow(clippy::unwrap_used)]

mod common;

use std::ffi::OsString;
use std::os::unix::ffi::OsStringExt;

use common::*;

const NETNS: &str = "/proc/self/ns/net";

/// A small deterministic PRNG (xorshift) so failures are reproducible.
struct Rng(u64);
impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        self.0
    }
    fn bytes(&mut self, n: usize) -> Vec<u8> {
        (0..n).map(|_| self.next() as u8).collect()
    }
}

#[test]
fn random_stdin_for_every_verb() {
    let mut rng = Rng(0x9e37_79b9_7f4a_7c15);
    for verb in ["ADD", "DEL", "CHECK", "GC", "STATUS"] {
        for len in [0usize, 1, 17, 500, 4096] {
            let r = run_plugin(&cni_env(verb, NETNS), rng.bytes(len));
            // Random bytes are almost never JSON (6); a lone digit would be JSON of the wrong
            // shape (7).
            assert!(!r.stderr.contains("panicked"), "{r:?}");
            let code = r.json()["code"].as_u64();
            assert!(matches!(code, Some(6 | 7)) && r.code == 1, "{r:?}");
        }
        // Valid JSON of the wrong shape.
        for doc in [
            "[]",
            "42",
            "null",
            "\"x\"",
            r#"{"cniVersion": 1}"#,
            r#"{"cniVersion": "0.3.1", "debug": "yes"}"#,
        ] {
            run_plugin(&cni_env(verb, NETNS), doc.as_bytes().to_vec()).assert_error(7);
        }
        run_plugin(&cni_env(verb, NETNS), br#"{"cniVersion": "9.9.9"}"#.to_vec()).assert_error(1);
        run_plugin(&cni_env(verb, NETNS), br#"{"name": "no version"}"#.to_vec()).assert_error(1);
    }
}

#[test]
fn huge_stdin() {
    let mut doc = br#"{"cniVersion": "1.0.0", "pad": ""#.to_vec();
    doc.extend(std::iter::repeat_n(b'a', 17 * 1024 * 1024));
    doc.extend_from_slice(br#""}"#);
    run_plugin(&cni_env("ADD", NETNS), doc).assert_error(7);
}

#[test]
fn missing_and_absurd_env() {
    let stdin = conf("1.0.0", "127.0.0.1:1");
    run_plugin(&[], stdin.clone()).assert_error(4);
    for cmd in ["", "add", "ADD ", "DELETE", "\u{1}"] {
        run_plugin(&[("CNI_COMMAND", cmd.into())], stdin.clone()).assert_error(4);
    }
    for (key, value) in [
        ("CNI_CONTAINERID", OsString::from("")),
        ("CNI_CONTAINERID", OsString::from("-starts-with-dash")),
        ("CNI_CONTAINERID", OsString::from("x".repeat(100_000) + " ")),
        ("CNI_IFNAME", OsString::from("")),
        ("CNI_IFNAME", OsString::from("a-name-that-is-way-too-long")),
        ("CNI_IFNAME", OsString::from("..")),
        ("CNI_IFNAME", OsString::from("a/b")),
        ("CNI_IFNAME", OsString::from_vec(vec![0xff, 0xfe, 0x01])),
        ("CNI_NETNS", OsString::from("")),
        ("CNI_ARGS", OsString::from("K8S_POD_NAME")),
        ("CNI_ARGS", OsString::from_vec(vec![b'a', b'=', 0xc3])),
    ] {
        for verb in ["ADD", "CHECK"] {
            let mut env = cni_env(verb, NETNS);
            env.retain(|(k, _)| *k != key);
            env.push((key, value.clone()));
            run_plugin(&env, stdin.clone()).assert_error(4);
        }
    }
    // Netns that does not exist (ADD) -> code 3, without contacting the daemon.
    for netns in ["/nonexistent/netns", "relative/path", &"/x".repeat(5000)] {
        run_plugin(&cni_env("ADD", netns), stdin.clone()).assert_error(3);
    }
    // Absurd daemon addresses: a clean error, never a panic.
    for addr in [
        "",
        "::::",
        "host-without-port",
        "unix:",
        "999.999.999.999:1",
        "127.0.0.1:99999",
    ] {
        let r = run_plugin(&cni_env("DEL", NETNS), conf("1.0.0", addr));
        r.assert_error(11);
    }
}

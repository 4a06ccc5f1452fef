//! Fuzzing of what Keystone and the version discovery answer, through the real connection path
//! ([`kuryr_openstack::connect::connect_session`] and openstack_sdk under it) against a local
//! HTTP server that serves the fuzzed body: Keystone's version document, a token response
//! (catalog included) or Neutron's version document. Never a panic, never a hang past the connect timeout, and a failure is an
//! error that names its step.

use std::{
    sync::{Arc, Mutex},
    time::Duration,
};

use kuryr_config::KeystoneAuth;
use kuryr_openstack::connect::{ConnectOptions, connect_session, keystone_config};
use tokio::{
    io::{AsyncReadExt, AsyncWriteExt},
    net::TcpListener,
};

/// What the server answers: the token body and the discovery body (`@BASE@` is its URL).
#[derive(Default)]
struct Answers {
    identity: Vec<u8>,
    token: Vec<u8>,
    discovery: Vec<u8>,
}

const IDENTITY: &str = r#"{"version": {"id": "v3.14", "status": "stable", "updated": "2020-04-07T00:00:00Z",
 "links": [{"rel": "self", "href": "@BASE@/identity/v3/"}],
 "media-types": [{"base": "application/json", "type": "application/vnd.openstack.identity-v3+json"}]}}"#;

const TOKEN: &str = r#"{"token": {"methods": ["password"], "expires_at": "2099-01-01T00:00:00.000000Z",
 "issued_at": "2026-01-01T00:00:00.000000Z", "user": {"id": "u", "name": "kuryr", "domain": {"id": "default", "name": "Default"}},
 "project": {"id": "p", "name": "k8s", "domain": {"id": "default", "name": "Default"}}, "roles": [{"id": "r", "name": "member"}],
 "catalog": [{"type": "network", "name": "neutron", "id": "s1", "endpoints": [
   {"id": "e1", "interface": "public", "region": "RegionOne", "region_id": "RegionOne", "url": "@BASE@/network"}]},
  {"type": "identity", "name": "keystone", "id": "s2", "endpoints": [
   {"id": "e2", "interface": "public", "region": "RegionOne", "region_id": "RegionOne", "url": "@BASE@/identity"}]}]}}"#;

const DISCOVERY: &str = r#"{"versions": [{"id": "v2.0", "status": "CURRENT",
 "links": [{"href": "@BASE@/network/v2.0/", "rel": "self"}]}]}"#;

async fn serve(listener: TcpListener, answers: Arc<Mutex<Answers>>, base: String) {
    loop {
        let Ok((mut s, _)) = listener.accept().await else {
            return;
        };
        let answers = answers.clone();
        let base = base.clone();
        tokio::spawn(async move {
            let mut head = Vec::new();
            let mut buf = [0u8; 4096];
            while !head.windows(4).any(|w| w == b"\r\n\r\n") {
                match s.read(&mut buf).await {
                    Ok(0) | Err(_) => return,
                    Ok(n) => head.extend_from_slice(&buf[..n]),
                }
                if head.len() > 1 << 20 {
                    return;
                }
            }
            let text = String::from_utf8_lossy(&head);
            let path = text.split_whitespace().nth(1).unwrap_or("");
            let auth = text.starts_with("POST") && path.ends_with("/auth/tokens");
            let body = {
                let a = answers.lock().unwrap_or_else(|p| p.into_inner());
                if auth {
                    a.token.clone()
                } else if path.starts_with("/identity") {
                    a.identity.clone()
                } else {
                    a.discovery.clone()
                }
            };
            let body = String::from_utf8_lossy(&body)
                .replace("@BASE@", &base)
                .into_bytes();
            let status = if auth { "201 Created" } else { "200 OK" };
            let head = format!(
                "HTTP/1.1 {status}\r\nContent-Type: application/json\r\nX-Subject-Token: tok\r\n\
                 Content-Length: {}\r\nConnection: close\r\n\r\n",
                body.len()
            );
            let _ = s.write_all(head.as_bytes()).await;
            let _ = s.write_all(&body).await;
            let _ = s.shutdown().await;
        });
    }
}

#[test]
fn keystone_and_discovery_answers() {
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .expect("runtime");
    let answers = Arc::new(Mutex::new(Answers::default()));
    let listener = rt.block_on(TcpListener::bind("127.0.0.1:0")).expect("listener");
    let base = format!("http://{}", listener.local_addr().expect("addr"));
    rt.spawn(serve(listener, answers.clone(), base.clone()));
    let auth = KeystoneAuth {
        auth_type: "password".into(),
        auth_url: Some(format!("{base}/identity/v3")),
        username: Some("kuryr".into()),
        password: Some("secret".into()),
        project_name: Some("k8s".into()),
        user_domain_name: Some("Default".into()),
        project_domain_name: Some("Default".into()),
        ..KeystoneAuth::default()
    };
    let cfg = keystone_config(&auth).expect("config");
    let opts = ConnectOptions {
        connect_timeout: Duration::from_secs(5),
        request_timeout: Duration::from_secs(2),
        ..Default::default()
    };
    let r = kuryr_fuzz::run("keystone", vec![], |b| {
        {
            let mut a = answers.lock().unwrap_or_else(|p| p.into_inner());
            // The body is served where its shape says (a token answer, Keystone's version, or
            // else Neutron's versions); the other two answers are good ones.
            let text = String::from_utf8_lossy(b);
            a.identity = IDENTITY.as_bytes().to_vec();
            a.token = TOKEN.as_bytes().to_vec();
            a.discovery = DISCOVERY.as_bytes().to_vec();
            if text.contains("\"token\"") {
                a.token = b.to_vec();
            } else if text.contains("\"version\"") {
                a.identity = b.to_vec();
            } else {
                a.discovery = b.to_vec();
            }
        }
        match rt.block_on(connect_session(&cfg, &opts)) {
            Ok(_) => true,
            Err(e) => {
                let msg = kuryr_openstack_chain(&e);
                if std::env::var_os("KEYSTONE_FUZZ_DEBUG").is_some() {
                    eprintln!("{msg}");
                }
                assert!(!msg.trim().is_empty(), "an error without words");
                assert!(
                    !msg.contains("no session within"),
                    "a hang on {:?}",
                    String::from_utf8_lossy(b)
                );
                false
            }
        }
    });
    eprintln!("keystone: {r:?}");
    assert!(r.accepted > 0, "the seeds never connected: {r:?}");
}

fn kuryr_openstack_chain(e: &dyn std::error::Error) -> String {
    let mut out = e.to_string();
    let mut cur = e.source();
    while let Some(c) = cur {
        out.push_str(": ");
        out.push_str(&c.to_string());
        cur = c.source();
    }
    out
}

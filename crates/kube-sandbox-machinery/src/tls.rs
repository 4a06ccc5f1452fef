//! Generated CA and serving certificate for the HTTPS mode, the rustls server configuration built
//! from them, and the kubeconfig written for clients (kubectl, kube-rs).
//!
//! The CA is self-signed and valid for ten years; the serving certificate is signed by it and
//! carries one SAN per host (IP addresses as IP SANs, anything else as a DNS name), so clients
//! verify the server with `certificate-authority-data` like against a real cluster.

use std::io::Write;
use std::path::Path;
use std::sync::Arc;

use base64::Engine as _;
use rcgen::{
    BasicConstraints, CertificateParams, DnType, ExtendedKeyUsagePurpose, IsCa, Issuer, KeyPair,
    KeyUsagePurpose,
};

/// PEM material for the HTTPS mode.
#[derive(Debug, Clone, serde::Serialize, serde::Deserialize)]
pub struct TlsMaterial {
    /// The CA certificate clients trust.
    pub ca_pem: String,
    /// The server certificate (signed by the CA, SANs for the given hosts).
    pub cert_pem: String,
    /// The server's private key.
    pub key_pem: String,
}

/// TLS setup failures.
#[derive(Debug, thiserror::Error)]
pub enum TlsError {
    /// Certificate generation failed.
    #[error("generating certificates: {0}")]
    Generate(String),
    /// Building the rustls config failed.
    #[error("building TLS config: {0}")]
    Config(String),
    /// Writing a file failed.
    #[error("writing {path}: {source}")]
    Write {
        /// The file.
        path: String,
        /// The cause.
        #[source]
        source: std::io::Error,
    },
}

/// (year, month, day) of today and of today + `years`, for certificate validity.
fn validity(years: i16) -> ((i32, u8, u8), (i32, u8, u8)) {
    let today = jiff::Timestamp::now().to_zoned(jiff::tz::TimeZone::UTC).date();
    // Start yesterday so clocks slightly behind still accept the certificate.
    let start = today.yesterday().unwrap_or(today);
    let end_year = today.year().saturating_add(years);
    // 29 Feb does not exist every year: clamp to the 28th.
    let end_day = if today.month() == 2 && today.day() == 29 {
        28
    } else {
        today.day()
    };
    (
        (
            i32::from(start.year()),
            start.month().unsigned_abs(),
            start.day().unsigned_abs(),
        ),
        (
            i32::from(end_year),
            today.month().unsigned_abs(),
            end_day.unsigned_abs(),
        ),
    )
}

fn gen_err(step: &str) -> impl Fn(rcgen::Error) -> TlsError + '_ {
    move |e| TlsError::Generate(format!("{step}: {e}"))
}

/// Generates a CA and a server certificate valid for `hosts` (IPs or DNS names).
pub fn generate(hosts: &[String]) -> Result<TlsMaterial, TlsError> {
    let ((sy, sm, sd), (ey, em, ed)) = validity(10);

    let ca_key = KeyPair::generate().map_err(gen_err("CA key"))?;
    let mut ca_params = CertificateParams::new(Vec::<String>::new()).map_err(gen_err("CA params"))?;
    ca_params
        .distinguished_name
        .push(DnType::CommonName, "kube-sandbox-ca");
    ca_params.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
    ca_params.key_usages = vec![
        KeyUsagePurpose::KeyCertSign,
        KeyUsagePurpose::CrlSign,
        KeyUsagePurpose::DigitalSignature,
    ];
    ca_params.not_before = rcgen::date_time_ymd(sy, sm, sd);
    ca_params.not_after = rcgen::date_time_ymd(ey, em, ed);
    let ca_cert = ca_params
        .self_signed(&ca_key)
        .map_err(gen_err("CA certificate"))?;
    let issuer = Issuer::new(ca_params, ca_key);

    let server_key = KeyPair::generate().map_err(gen_err("server key"))?;
    let mut params = CertificateParams::new(hosts.to_vec()).map_err(gen_err("server SANs"))?;
    params
        .distinguished_name
        .push(DnType::CommonName, "kube-sandbox-apiserver");
    params.key_usages = vec![
        KeyUsagePurpose::DigitalSignature,
        KeyUsagePurpose::KeyEncipherment,
    ];
    params.extended_key_usages = vec![ExtendedKeyUsagePurpose::ServerAuth];
    params.use_authority_key_identifier_extension = true;
    params.not_before = rcgen::date_time_ymd(sy, sm, sd);
    params.not_after = rcgen::date_time_ymd(ey, em, ed);
    let cert = params
        .signed_by(&server_key, &issuer)
        .map_err(gen_err("server certificate"))?;

    Ok(TlsMaterial {
        ca_pem: ca_cert.pem(),
        cert_pem: cert.pem(),
        key_pem: server_key.serialize_pem(),
    })
}

/// A rustls server configuration (aws-lc-rs provider, ALPN `http/1.1`) serving `m`'s certificate.
pub fn server_config(m: &TlsMaterial) -> Result<rustls::ServerConfig, TlsError> {
    use rustls::pki_types::pem::PemObject as _;
    use rustls::pki_types::{CertificateDer, PrivateKeyDer};

    let cfg_err = |step: &str| {
        let step = step.to_owned();
        move |e: &dyn std::fmt::Display| TlsError::Config(format!("{step}: {e}"))
    };
    let certs = CertificateDer::pem_slice_iter(m.cert_pem.as_bytes())
        .collect::<Result<Vec<_>, _>>()
        .map_err(|e| cfg_err("parsing certificate PEM")(&e))?;
    if certs.is_empty() {
        return Err(TlsError::Config("no certificate in cert PEM".into()));
    }
    let key =
        PrivateKeyDer::from_pem_slice(m.key_pem.as_bytes()).map_err(|e| cfg_err("parsing key PEM")(&e))?;
    let provider = Arc::new(rustls::crypto::aws_lc_rs::default_provider());
    let mut cfg = rustls::ServerConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()
        .map_err(|e| cfg_err("protocol versions")(&e))?
        .with_no_client_auth()
        .with_single_cert(certs, key)
        .map_err(|e| cfg_err("certificate and key")(&e))?;
    cfg.alpn_protocols = vec![b"http/1.1".to_vec()];
    Ok(cfg)
}

/// The kubeconfig document (cluster, user and context all named `kube-sandbox`).
pub fn kubeconfig_yaml(server: &str, ca_pem: Option<&str>, token: Option<&str>) -> String {
    let mut cluster = serde_json::Map::new();
    cluster.insert("server".into(), server.into());
    if let Some(ca) = ca_pem {
        cluster.insert(
            "certificate-authority-data".into(),
            base64::engine::general_purpose::STANDARD
                .encode(ca.as_bytes())
                .into(),
        );
    }
    let mut user = serde_json::Map::new();
    if let Some(t) = token {
        user.insert("token".into(), t.into());
    }
    let doc = serde_json::json!({
        "apiVersion": "v1",
        "kind": "Config",
        "preferences": {},
        "clusters": [{"name": "kube-sandbox", "cluster": cluster}],
        "users": [{"name": "kube-sandbox", "user": user}],
        "contexts": [{
            "name": "kube-sandbox",
            "context": {"cluster": "kube-sandbox", "user": "kube-sandbox", "namespace": "default"}
        }],
        "current-context": "kube-sandbox",
    });
    // Serialising a JSON value to YAML cannot fail (string keys only).
    serde_yaml::to_string(&doc).unwrap_or_default()
}

/// Writes a kubeconfig (atomically: temp file + rename) pointing at `server`.
pub fn write_kubeconfig(
    path: &Path,
    server: &str,
    ca_pem: Option<&str>,
    token: Option<&str>,
) -> Result<(), TlsError> {
    write_private_file(path, kubeconfig_yaml(server, ca_pem, token).as_bytes())
}

/// Writes `data` to `path` with mode 0600, atomically (temp file in the same directory, then
/// rename), creating the parent directory.
pub fn write_private_file(path: &Path, data: &[u8]) -> Result<(), TlsError> {
    use std::os::unix::fs::OpenOptionsExt as _;
    let werr = |p: &Path| {
        let p = p.display().to_string();
        move |source| TlsError::Write { path: p, source }
    };
    let dir = match path.parent() {
        Some(d) if !d.as_os_str().is_empty() => d.to_path_buf(),
        _ => std::path::PathBuf::from("."),
    };
    std::fs::create_dir_all(&dir).map_err(werr(&dir))?;
    let name = path
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_else(|| "kubeconfig".into());
    let tmp = dir.join(format!(".{name}.tmp.{}", std::process::id()));
    let result = (|| {
        let mut f = std::fs::OpenOptions::new()
            .write(true)
            .create(true)
            .truncate(true)
            .mode(0o600)
            .open(&tmp)?;
        f.write_all(data)?;
        f.sync_all()?;
        std::fs::rename(&tmp, path)
    })();
    if result.is_err() {
        let _ = std::fs::remove_file(&tmp);
    }
    result.map_err(werr(path))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn generates_ca_and_server_cert() {
        let m = generate(&["127.0.0.1".into(), "localhost".into(), "::1".into()]).unwrap();
        assert!(m.ca_pem.starts_with("-----BEGIN CERTIFICATE-----"));
        assert!(m.cert_pem.starts_with("-----BEGIN CERTIFICATE-----"));
        assert!(m.key_pem.contains("PRIVATE KEY-----"));
        assert_ne!(m.ca_pem, m.cert_pem);
    }

    #[test]
    fn server_config_has_alpn_and_verifies_with_ca() {
        use rustls::pki_types::pem::PemObject as _;
        let m = generate(&["127.0.0.1".into(), "localhost".into()]).unwrap();
        let cfg = server_config(&m).unwrap();
        assert_eq!(cfg.alpn_protocols, vec![b"http/1.1".to_vec()]);

        // A client trusting only our CA completes an in-memory handshake for both SANs.
        for host in ["localhost", "127.0.0.1"] {
            let mut roots = rustls::RootCertStore::empty();
            let ca = rustls::pki_types::CertificateDer::from_pem_slice(m.ca_pem.as_bytes()).unwrap();
            roots.add(ca).unwrap();
            let provider = Arc::new(rustls::crypto::aws_lc_rs::default_provider());
            let client_cfg = rustls::ClientConfig::builder_with_provider(provider)
                .with_safe_default_protocol_versions()
                .unwrap()
                .with_root_certificates(roots)
                .with_no_client_auth();
            let name = rustls::pki_types::ServerName::try_from(host.to_string()).unwrap();
            let mut client = rustls::ClientConnection::new(Arc::new(client_cfg), name).unwrap();
            let mut server = rustls::ServerConnection::new(Arc::new(cfg.clone())).unwrap();
            for _ in 0..10 {
                let mut buf = Vec::new();
                client.write_tls(&mut buf).unwrap();
                server.read_tls(&mut buf.as_slice()).unwrap();
                server.process_new_packets().unwrap();
                let mut buf = Vec::new();
                server.write_tls(&mut buf).unwrap();
                client.read_tls(&mut buf.as_slice()).unwrap();
                client.process_new_packets().unwrap();
                if !client.is_handshaking() && !server.is_handshaking() {
                    break;
                }
            }
            assert!(!client.is_handshaking(), "{host}: handshake did not finish");
        }
    }

    #[test]
    fn wrong_host_is_rejected() {
        use rustls::pki_types::pem::PemObject as _;
        let m = generate(&["127.0.0.1".into()]).unwrap();
        let cfg = server_config(&m).unwrap();
        let mut roots = rustls::RootCertStore::empty();
        roots
            .add(rustls::pki_types::CertificateDer::from_pem_slice(m.ca_pem.as_bytes()).unwrap())
            .unwrap();
        let provider = Arc::new(rustls::crypto::aws_lc_rs::default_provider());
        let client_cfg = rustls::ClientConfig::builder_with_provider(provider)
            .with_safe_default_protocol_versions()
            .unwrap()
            .with_root_certificates(roots)
            .with_no_client_auth();
        let name = rustls::pki_types::ServerName::try_from("example.org").unwrap();
        let mut client = rustls::ClientConnection::new(Arc::new(client_cfg), name).unwrap();
        let mut server = rustls::ServerConnection::new(Arc::new(cfg)).unwrap();
        let mut failed = false;
        for _ in 0..10 {
            let mut buf = Vec::new();
            client.write_tls(&mut buf).unwrap();
            server.read_tls(&mut buf.as_slice()).unwrap();
            if server.process_new_packets().is_err() {
                failed = true;
                break;
            }
            let mut buf = Vec::new();
            server.write_tls(&mut buf).unwrap();
            client.read_tls(&mut buf.as_slice()).unwrap();
            if client.process_new_packets().is_err() {
                failed = true;
                break;
            }
        }
        assert!(failed);
    }

    #[test]
    fn bad_pem_is_a_config_error() {
        let m = TlsMaterial {
            ca_pem: String::new(),
            cert_pem: "garbage".into(),
            key_pem: "garbage".into(),
        };
        assert!(matches!(server_config(&m), Err(TlsError::Config(_))));
    }

    #[test]
    fn kubeconfig_is_written_atomically_with_0600() {
        use std::os::unix::fs::PermissionsExt as _;
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("sub/dir/kubeconfig");
        write_kubeconfig(&path, "https://127.0.0.1:6443", Some("CA-PEM"), Some("tok")).unwrap();
        let mode = std::fs::metadata(&path).unwrap().permissions().mode();
        assert_eq!(mode & 0o777, 0o600);
        let doc: serde_json::Value = serde_yaml::from_str(&std::fs::read_to_string(&path).unwrap()).unwrap();
        assert_eq!(doc["current-context"], "kube-sandbox");
        assert_eq!(doc["kind"], "Config");
        assert_eq!(doc["clusters"][0]["name"], "kube-sandbox");
        assert_eq!(doc["clusters"][0]["cluster"]["server"], "https://127.0.0.1:6443");
        assert_eq!(
            doc["clusters"][0]["cluster"]["certificate-authority-data"],
            base64::engine::general_purpose::STANDARD.encode("CA-PEM")
        );
        assert_eq!(doc["users"][0]["user"]["token"], "tok");
        assert_eq!(doc["contexts"][0]["context"]["cluster"], "kube-sandbox");
        assert_eq!(doc["contexts"][0]["context"]["user"], "kube-sandbox");
        // No temp files left behind; overwrite works.
        write_kubeconfig(&path, "http://127.0.0.1:8080", None, None).unwrap();
        let entries: Vec<_> = std::fs::read_dir(path.parent().unwrap()).unwrap().collect();
        assert_eq!(entries.len(), 1);
        let doc: serde_json::Value = serde_yaml::from_str(&std::fs::read_to_string(&path).unwrap()).unwrap();
        assert!(
            doc["clusters"][0]["cluster"]
                .get("certificate-authority-data")
                .is_none()
        );
        assert!(doc["users"][0]["user"].get("token").is_none());
    }
}

//! Authentication: who a request is. The kubeconfig's bearer token (or no token at all when the
//! server runs without `--token`) is the cluster administrator; ServiceAccount tokens minted by
//! the `serviceaccounts/{name}/token` subresource (TokenRequest) are their ServiceAccount, and
//! only while the ServiceAccount (and the pod a token is bound to) still exists with the same
//! UID and the token has not expired.
//!
//! Knowingly different from a real API server: tokens are opaque random strings kept in memory
//! (not signed JWTs; with `--data-dir` they are kept in `tokens.json` there, so they survive a
//! restart as the objects do), and there are no client certificates, no anonymous user and no
//! legacy Secret-based tokens.

use std::collections::HashMap;

use http::HeaderMap;
use parking_lot::RwLock;
use serde_json::{Value, json};

use crate::{
    app::App,
    error::{ApiError, ApiResult},
    meta,
};

/// The longest and shortest lifetimes a TokenRequest may ask for (as the real server).
const MIN_EXPIRATION_S: i64 = 600;
const MAX_EXPIRATION_S: i64 = 48 * 3600;
const DEFAULT_EXPIRATION_S: i64 = 3600;

/// Who sent a request.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Identity {
    /// The kubeconfig's user: every request is allowed.
    Admin,
    /// A ServiceAccount token: requests are authorized by RBAC.
    ServiceAccount {
        /// Namespace of the ServiceAccount.
        namespace: String,
        /// Its name.
        name: String,
    },
}

impl Identity {
    /// The user name as RBAC and error messages spell it.
    pub fn user(&self) -> String {
        match self {
            Identity::Admin => "kubernetes-admin".into(),
            Identity::ServiceAccount { namespace, name } => {
                format!("system:serviceaccount:{namespace}:{name}")
            }
        }
    }
    /// The groups the user is in.
    pub fn groups(&self) -> Vec<String> {
        match self {
            Identity::Admin => vec!["system:masters".into(), "system:authenticated".into()],
            Identity::ServiceAccount { namespace, .. } => vec![
                "system:serviceaccounts".into(),
                format!("system:serviceaccounts:{namespace}"),
                "system:authenticated".into(),
            ],
        }
    }
}

/// One minted ServiceAccount token.
#[derive(Debug, Clone, serde::Serialize, serde::Deserialize)]
struct Minted {
    namespace: String,
    name: String,
    sa_uid: String,
    expires: jiff::Timestamp,
    /// `(name, uid)` of the pod the token is bound to.
    pod: Option<(String, String)>,
}

/// The tokens this server minted.
#[derive(Debug, Default)]
pub struct Tokens {
    minted: RwLock<HashMap<String, Minted>>,
    /// Where they are kept across restarts (`--data-dir`).
    file: Option<std::path::PathBuf>,
}

fn new_token() -> String {
    // Two v4 UUIDs: 244 random bits from the OS generator, printable as one bearer token.
    format!(
        "{}{}",
        uuid::Uuid::new_v4().simple(),
        uuid::Uuid::new_v4().simple()
    )
}

impl Tokens {
    /// The tokens kept in `file` (none yet when it does not exist); every change is written back.
    pub fn persisted(file: std::path::PathBuf) -> Result<Self, crate::persist::PersistError> {
        let minted = crate::persist::read_json(&file)?.unwrap_or_default();
        Ok(Self {
            minted: RwLock::new(minted),
            file: Some(file),
        })
    }
    fn lookup(&self, token: &str) -> Option<Minted> {
        self.minted.read().get(token).cloned()
    }
    fn forget(&self, token: &str) {
        let mut m = self.minted.write();
        if m.remove(token).is_some() {
            self.save(&m);
        }
    }
    /// Drops expired tokens (called now and then so the table does not grow without end).
    fn prune(&self, now: jiff::Timestamp) {
        self.minted.write().retain(|_, m| m.expires > now);
    }
    fn insert(&self, token: String, minted: Minted) {
        let mut m = self.minted.write();
        m.insert(token, minted);
        self.save(&m);
    }
    fn save(&self, minted: &HashMap<String, Minted>) {
        if let Some(f) = &self.file
            && let Err(e) = crate::persist::write_json(f, minted)
        {
            tracing::error!(error = %e, "the minted tokens will not survive a restart");
        }
    }
}

fn bearer(headers: &HeaderMap) -> Option<&str> {
    headers
        .get(http::header::AUTHORIZATION)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.strip_prefix("Bearer "))
        .map(str::trim)
}

/// Paths served to anybody (health and version), as the real server's public-info-viewer.
pub fn is_public(path: &str) -> bool {
    matches!(path, "/healthz" | "/livez" | "/readyz" | "/version")
}

/// Who sent the request, or `Err` (401) for a token that is not (or no longer) valid.
pub fn authenticate(app: &App, headers: &HeaderMap) -> Result<Identity, ApiError> {
    let Some(token) = bearer(headers) else {
        return match &app.token {
            None => Ok(Identity::Admin),
            Some(_) => Err(ApiError::unauthorized()),
        };
    };
    if app.token.as_deref() == Some(token) {
        return Ok(Identity::Admin);
    }
    let Some(m) = app.tokens.lookup(token) else {
        return Err(ApiError::unauthorized());
    };
    let now = jiff::Timestamp::now();
    let valid = m.expires > now
        && app.store.read(|t| {
            let sa_ok = t
                .get(&(String::new(), "serviceaccounts".into()), &m.namespace, &m.name)
                .is_some_and(|sa| meta::uid_of(sa) == m.sa_uid);
            let pod_ok = m.pod.as_ref().is_none_or(|(pod, uid)| {
                t.get(&(String::new(), "pods".into()), &m.namespace, pod)
                    .is_some_and(|p| meta::uid_of(p) == *uid)
            });
            sa_ok && pod_ok
        });
    if !valid {
        app.tokens.forget(token);
        return Err(ApiError::unauthorized());
    }
    Ok(Identity::ServiceAccount {
        namespace: m.namespace,
        name: m.name,
    })
}

/// `POST .../serviceaccounts/{name}/token`: mints a token for the ServiceAccount, optionally
/// bound to a pod (`spec.boundObjectRef`), and answers the TokenRequest with `status.token`.
pub fn token_request(app: &App, namespace: &str, name: &str, body: &[u8]) -> ApiResult<(u16, Value)> {
    let req: Value = if body.is_empty() {
        json!({})
    } else {
        serde_json::from_slice(body)
            .map_err(|e| ApiError::bad_request(format!("decoding TokenRequest: {e}")))?
    };
    let spec = req.get("spec").cloned().unwrap_or(json!({}));
    let secs = match spec.get("expirationSeconds") {
        None | Some(Value::Null) => DEFAULT_EXPIRATION_S,
        Some(v) => v.as_i64().ok_or_else(|| {
            ApiError::bad_request(format!("spec.expirationSeconds: expected an integer, got {v}"))
        })?,
    };
    if secs < MIN_EXPIRATION_S {
        return Err(ApiError::invalid_options(format!(
            "TokenRequest.authentication.k8s.io \"{name}\" is invalid: spec.expirationSeconds: Invalid value: {secs}: may not specify a duration less than 10 minutes"
        )));
    }
    let secs = secs.min(MAX_EXPIRATION_S);
    let (sa_uid, pod) = app.store.read(|t| {
        let sa = t
            .get(&(String::new(), "serviceaccounts".into()), namespace, name)
            .map(|sa| meta::uid_of(sa).to_string());
        let bound = &spec["boundObjectRef"];
        let pod = match bound.get("kind").and_then(Value::as_str) {
            None => Ok(None),
            Some("Pod") => {
                let pname = bound["name"].as_str().unwrap_or_default();
                match t.get(&(String::new(), "pods".into()), namespace, pname) {
                    Some(p) => {
                        let uid = meta::uid_of(p).to_string();
                        match bound.get("uid").and_then(Value::as_str) {
                            Some(want) if !want.is_empty() && want != uid => Err(format!(
                                "the UID in the bound object reference ({want}) does not match the UID in record. The object might have been deleted and then recreated"
                            )),
                            _ => Ok(Some((pname.to_string(), uid))),
                        }
                    }
                    None => Err(format!("pods \"{pname}\" not found")),
                }
            }
            Some(k) => Err(format!("cannot bind token to object of kind {k:?} (only Pod is emulated)")),
        };
        (sa, pod)
    });
    let Some(sa_uid) = sa_uid else {
        return Err(ApiError::not_found_message(format!(
            "serviceaccounts \"{name}\" not found"
        )));
    };
    let pod = pod.map_err(ApiError::not_found_message)?;
    let now = jiff::Timestamp::now();
    app.tokens.prune(now);
    let expires = now + jiff::SignedDuration::from_secs(secs);
    let token = new_token();
    app.tokens.insert(
        token.clone(),
        Minted {
            namespace: namespace.into(),
            name: name.into(),
            sa_uid,
            expires,
            pod,
        },
    );
    let mut out = req;
    out["apiVersion"] = json!("authentication.k8s.io/v1");
    out["kind"] = json!("TokenRequest");
    out["metadata"] = json!({"name": name, "namespace": namespace, "creationTimestamp": null});
    out["spec"]["expirationSeconds"] = json!(secs);
    out["spec"]["audiences"] = spec
        .get("audiences")
        .filter(|a| a.as_array().is_some_and(|a| !a.is_empty()))
        .cloned()
        .unwrap_or(json!(["https://kubernetes.default.svc"]));
    out["status"] =
        json!({"token": token, "expirationTimestamp": expires.strftime("%Y-%m-%dT%H:%M:%SZ").to_string()});
    Ok((201, out))
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    #[test]
    fn identities_spell_users_and_groups_as_kubernetes() {
        let sa = Identity::ServiceAccount {
            namespace: "kube-system".into(),
            name: "kuryr-daemon".into(),
        };
        assert_eq!(sa.user(), "system:serviceaccount:kube-system:kuryr-daemon");
        assert!(
            sa.groups()
                .contains(&"system:serviceaccounts:kube-system".to_string())
        );
        assert!(Identity::Admin.groups().contains(&"system:masters".to_string()));
    }

    #[test]
    fn tokens_are_long_and_distinct() {
        let a = new_token();
        assert_eq!(a.len(), 64);
        assert_ne!(a, new_token());
    }
}

//! The client of the controller's pool manager socket (`[pool_manager] sock_file`): one
//! HTTP/1.0 request per connection, the answer read to its end.
//!
//! Written by hand rather than with hyper's client: upstream's manager, which `kuryrctl pools
//! list` also reads, answers without a status line (an HTTP client library refuses that), and
//! a request here is one write and one read on a local socket.

use std::{
    path::{Path, PathBuf},
    time::Duration,
};

use tokio::io::{AsyncReadExt, AsyncWriteExt};

use crate::Error;

/// How long reads (`listPools`, `showPool`) may take.
pub const READ_TIMEOUT: Duration = Duration::from_secs(10);
/// How long writes may take: `populatePool` waits for Neutron's bulk creation and the trunk's
/// `add_subports`, `freePool` for the deletions.
pub const WRITE_TIMEOUT: Duration = Duration::from_secs(300);

/// A pool manager at a socket.
#[derive(Debug, Clone)]
pub struct PoolManager {
    /// The socket.
    pub socket: PathBuf,
}

/// An answer: its HTTP status (none from upstream's manager) and body.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Answer {
    /// Status code, when the answer had a status line.
    pub status: Option<u16>,
    /// Body.
    pub body: String,
}

/// Splits a raw answer into status and body: an HTTP answer has a status line and headers to
/// skip; upstream's bare text is the body as it is.
pub fn parse_answer(raw: &[u8]) -> Answer {
    let text = String::from_utf8_lossy(raw).into_owned();
    match text.split_once("\r\n\r\n") {
        Some((head, body)) if head.starts_with("HTTP/") => Answer {
            status: head.split_whitespace().nth(1).and_then(|c| c.parse().ok()),
            body: body.to_owned(),
        },
        _ => Answer {
            status: None,
            body: text,
        },
    }
}

/// The message of a refused request: the `error` of a JSON body, else the body itself.
pub fn refusal(body: &str) -> String {
    serde_json::from_str::<serde_json::Value>(body)
        .ok()
        .and_then(|v| v.get("error").and_then(|e| e.as_str()).map(str::to_owned))
        .unwrap_or_else(|| body.trim().to_owned())
}

/// `key=value&...` with the values percent-encoded; `None` values are left out.
pub fn query(pairs: &[(&str, Option<&str>)]) -> String {
    let mut q = form_urlencoded::Serializer::new(String::new());
    for (k, v) in pairs {
        if let Some(v) = v {
            q.append_pair(k, v);
        }
    }
    q.finish()
}

impl PoolManager {
    /// The manager at `socket`.
    pub fn new(socket: impl Into<PathBuf>) -> Self {
        Self {
            socket: socket.into(),
        }
    }

    /// Whether something listens there (a socket file exists).
    pub fn exists(&self) -> bool {
        self.socket.exists()
    }

    /// Sends `method target` with a JSON `body`; the raw answer.
    pub async fn send(
        &self,
        method: &str,
        target: &str,
        body: &str,
        timeout: Duration,
    ) -> Result<Answer, Error> {
        let request = format!("{method} {target}");
        let fut = async {
            let mut s = tokio::net::UnixStream::connect(&self.socket)
                .await
                .map_err(|source| Error::NoPoolManager {
                    socket: self.socket.clone(),
                    source,
                })?;
            let msg = format!(
                "{method} {target} HTTP/1.0\r\nContent-Type: application/json\r\nContent-Length: {}\r\n\r\n{body}",
                body.len()
            );
            let io = |source| Error::PoolManagerIo {
                socket: self.socket.clone(),
                request: request.clone(),
                source,
            };
            s.write_all(msg.as_bytes()).await.map_err(io)?;
            let mut buf = Vec::new();
            s.read_to_end(&mut buf).await.map_err(io)?;
            Ok(parse_answer(&buf))
        };
        tokio::time::timeout(timeout, fut)
            .await
            .map_err(|_| Error::PoolManagerTimeout {
                socket: self.socket.clone(),
                request: request.clone(),
                secs: timeout.as_secs(),
            })?
    }

    /// Sends a request that must succeed with a JSON answer: the answer parsed as `T`.
    pub async fn call<T: serde::de::DeserializeOwned>(
        &self,
        method: &str,
        target: &str,
        body: &serde_json::Value,
        timeout: Duration,
    ) -> Result<T, Error> {
        let request = format!("{method} {target}");
        let a = self.send(method, target, &body.to_string(), timeout).await?;
        match a.status {
            Some(200) => serde_json::from_str(&a.body).map_err(|e| Error::PoolManagerAnswer {
                socket: self.socket.clone(),
                request,
                status: "200".into(),
                message: format!(
                    "an answer that is not what kuryr-rs' manager sends ({e}): {}",
                    a.body.trim()
                ),
            }),
            status => Err(Error::PoolManagerAnswer {
                socket: self.socket.clone(),
                request,
                status: status.map_or_else(
                    || "no HTTP status (upstream's manager?)".into(),
                    |s| s.to_string(),
                ),
                message: refusal(&a.body),
            }),
        }
    }
}

/// The socket: `--socket`, else `[pool_manager] sock_file` of the configuration.
pub fn socket_of(given: Option<&Path>, config: &kuryr_config::Config) -> PathBuf {
    given
        .map(Path::to_path_buf)
        .unwrap_or_else(|| config.pool_manager.sock_file.clone().into())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn answers_with_and_without_a_status_line() {
        let a = parse_answer(b"HTTP/1.1 400 Bad Request\r\ncontent-type: application/json\r\n\r\n{\"error\":\"host is empty\"}");
        assert_eq!(a.status, Some(400));
        assert_eq!(refusal(&a.body), "host is empty");
        let a = parse_answer(b"Ports pool at ['10.0.0.5'] was populated with 3 ports.");
        assert_eq!(a.status, None);
        assert_eq!(
            refusal(&a.body),
            "Ports pool at ['10.0.0.5'] was populated with 3 ports."
        );
        let a = parse_answer(b"");
        assert_eq!((a.status, a.body.as_str()), (None, ""));
    }

    #[test]
    fn queries_leave_out_missing_values_and_encode_the_rest() {
        assert_eq!(
            query(&[
                ("trunk", Some("10.0.0.5")),
                ("project_id", None),
                ("network_id", Some("a b&c"))
            ]),
            "trunk=10.0.0.5&network_id=a+b%26c"
        );
        assert_eq!(query(&[("host", None)]), "");
    }
}

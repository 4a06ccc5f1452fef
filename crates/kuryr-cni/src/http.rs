//! A minimal blocking HTTP/1.1 client for the one request per invocation the plugin makes to
//! kuryr-daemon, over TCP or a unix socket.
//!
//! Why hand-written: a CNI plugin is exec'd for every pod operation, so start-up time and
//! binary size matter, and it needs exactly one request with `Content-Length` and
//! `Connection: close`, reading one response. Pulling an HTTP stack (and TLS, async runtimes)
//! for that would cost more than these ~150 lines.

use std::io::{Read, Write};
use std::net::{TcpStream, ToSocketAddrs};
use std::os::unix::net::UnixStream;
use std::time::{Duration, Instant};

/// Largest response body accepted.
const MAX_RESPONSE: usize = 8 * 1024 * 1024;

/// Where the daemon listens.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Address {
    /// `host:port`.
    Tcp(String),
    /// `unix:/path`.
    Unix(String),
}

impl Address {
    /// Parses `host:port`, `http://host:port` or `unix:/path`.
    pub fn parse(s: &str) -> Self {
        let s = s.trim();
        if let Some(p) = s.strip_prefix("unix://").or_else(|| s.strip_prefix("unix:")) {
            return Self::Unix(p.to_owned());
        }
        let s = s.strip_prefix("http://").unwrap_or(s);
        Self::Tcp(s.trim_end_matches('/').to_owned())
    }
}

impl std::fmt::Display for Address {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Self::Tcp(a) => f.write_str(a),
            Self::Unix(p) => write!(f, "unix:{p}"),
        }
    }
}

/// Failure of the HTTP exchange.
#[derive(Debug, thiserror::Error)]
pub enum HttpError {
    /// Could not connect (daemon down, socket missing, address unresolvable).
    #[error("cannot connect to kuryr-daemon at {address}")]
    Connect {
        /// The address tried.
        address: String,
        /// Cause.
        #[source]
        source: std::io::Error,
    },
    /// The overall deadline passed.
    #[error("kuryr-daemon did not answer within {0:?}")]
    Timeout(Duration),
    /// Sending the request failed after connecting: the daemon reset the connection before
    /// it took the whole request.
    #[error("sending the request to kuryr-daemon failed")]
    Send(#[source] std::io::Error),
    /// Receiving failed after the request was sent.
    #[error("I/O error talking to kuryr-daemon")]
    Io(#[source] std::io::Error),
    /// The response is not HTTP/1.x we understand.
    #[error("malformed HTTP response from kuryr-daemon: {0}")]
    Malformed(String),
}

impl HttpError {
    /// Whether the daemon is simply not listening (yet): the connection was refused, or its
    /// unix socket does not exist, or it was reset or aborted while connecting, or reset while
    /// the request was being sent. A daemon closing its listening socket (a DaemonSet rolling
    /// upgrade) resets the connections still in its accept queue, which the kernel had
    /// already completed: the plugin then sees its send fail with a broken pipe (seen in CI on
    /// 2026-11-29). The daemon never read a whole request in any of these (a send only fails
    /// once the peer is gone), so trying again cannot run a request twice. Not for addresses
    /// that cannot work (unparsable, unresolvable): waiting would not fix those; nor for a
    /// reset after the whole request was sent, when the daemon may have acted on it.
    pub fn is_not_listening(&self) -> bool {
        let reset = |k: std::io::ErrorKind| {
            matches!(
                k,
                std::io::ErrorKind::BrokenPipe
                    | std::io::ErrorKind::ConnectionReset
                    | std::io::ErrorKind::ConnectionAborted
            )
        };
        let (address, source) = match self {
            Self::Connect { address, source } => (address, source),
            Self::Send(source) => return reset(source.kind()),
            _ => return false,
        };
        match source.kind() {
            std::io::ErrorKind::ConnectionRefused
            | std::io::ErrorKind::ConnectionReset
            | std::io::ErrorKind::ConnectionAborted => true,
            std::io::ErrorKind::NotFound => address.strip_prefix("unix:").is_some_and(|p| !p.is_empty()),
            _ => false,
        }
    }
}

/// A response: status and body.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Response {
    /// HTTP status code.
    pub status: u16,
    /// Body (de-chunked).
    pub body: Vec<u8>,
}

trait Stream: Read + Write {
    fn set_timeouts(&self, d: Duration) -> std::io::Result<()>;
}
impl Stream for TcpStream {
    fn set_timeouts(&self, d: Duration) -> std::io::Result<()> {
        self.set_read_timeout(Some(d))?;
        self.set_write_timeout(Some(d))
    }
}
impl Stream for UnixStream {
    fn set_timeouts(&self, d: Duration) -> std::io::Result<()> {
        self.set_read_timeout(Some(d))?;
        self.set_write_timeout(Some(d))
    }
}

fn connect(addr: &Address, connect_timeout: Duration) -> Result<Box<dyn Stream>, HttpError> {
    let err = |source| HttpError::Connect {
        address: addr.to_string(),
        source,
    };
    match addr {
        Address::Unix(p) => Ok(Box::new(UnixStream::connect(p).map_err(err)?)),
        Address::Tcp(a) => {
            let mut last = std::io::Error::new(std::io::ErrorKind::NotFound, "address resolves to nothing");
            for sa in a.to_socket_addrs().map_err(err)? {
                match TcpStream::connect_timeout(&sa, connect_timeout) {
                    Ok(s) => {
                        let _ = s.set_nodelay(true);
                        return Ok(Box::new(s));
                    }
                    Err(e) => last = e,
                }
            }
            Err(err(last))
        }
    }
}

fn is_timeout(e: &std::io::Error) -> bool {
    matches!(
        e.kind(),
        std::io::ErrorKind::WouldBlock | std::io::ErrorKind::TimedOut
    )
}

/// Sends one request and reads the whole response within `timeout` (after connecting, which
/// has its own `connect_timeout`).
pub fn request(
    addr: &Address,
    method: &str,
    path: &str,
    body: Option<&[u8]>,
    connect_timeout: Duration,
    timeout: Duration,
) -> Result<Response, HttpError> {
    let deadline = Instant::now() + timeout;
    let mut s = connect(addr, connect_timeout)?;
    let host = match addr {
        Address::Tcp(a) => a.as_str(),
        Address::Unix(_) => "localhost",
    };
    let mut req = format!(
        "{method} {path} HTTP/1.1\r\nHost: {host}\r\nConnection: close\r\nAccept: application/json\r\n"
    );
    if let Some(b) = body {
        req.push_str(&format!(
            "Content-Type: application/json\r\nContent-Length: {}\r\n",
            b.len()
        ));
    }
    req.push_str("\r\n");
    let io = |e: std::io::Error| {
        if is_timeout(&e) {
            HttpError::Timeout(timeout)
        } else {
            HttpError::Io(e)
        }
    };
    let send = |e: std::io::Error| {
        if is_timeout(&e) {
            HttpError::Timeout(timeout)
        } else {
            HttpError::Send(e)
        }
    };
    s.set_timeouts(timeout).map_err(HttpError::Io)?;
    s.write_all(req.as_bytes()).map_err(send)?;
    if let Some(b) = body {
        s.write_all(b).map_err(send)?;
    }
    s.flush().map_err(send)?;

    let mut buf = Vec::with_capacity(4096);
    let mut chunk = [0u8; 16 * 1024];
    let mut head_end = None;
    let mut expected_total = None;
    loop {
        let now = Instant::now();
        if now >= deadline {
            return Err(HttpError::Timeout(timeout));
        }
        s.set_timeouts(deadline - now).map_err(HttpError::Io)?;
        let n = match s.read(&mut chunk) {
            Ok(n) => n,
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => continue,
            Err(e) => return Err(io(e)),
        };
        if n == 0 {
            break;
        }
        buf.extend_from_slice(&chunk[..n]);
        if buf.len() > MAX_RESPONSE {
            return Err(HttpError::Malformed("response too large".into()));
        }
        if head_end.is_none() {
            head_end = find(&buf, b"\r\n\r\n").map(|i| i + 4);
            if let Some(h) = head_end {
                let (_, headers) = parse_head(&buf[..h])?;
                expected_total = content_length(&headers)?.map(|cl| h + cl);
            }
        }
        if let Some(t) = expected_total {
            if buf.len() >= t {
                break;
            }
        }
    }
    let h =
        head_end.ok_or_else(|| HttpError::Malformed("connection closed before the response head".into()))?;
    let (status, headers) = parse_head(&buf[..h])?;
    let raw = &buf[h..];
    let body = if header(&headers, "transfer-encoding")
        .is_some_and(|v| v.to_ascii_lowercase().contains("chunked"))
    {
        dechunk(raw)?
    } else if let Some(cl) = content_length(&headers)? {
        if raw.len() < cl {
            return Err(HttpError::Malformed("body shorter than Content-Length".into()));
        }
        raw[..cl].to_vec()
    } else {
        raw.to_vec()
    };
    Ok(Response { status, body })
}

fn find(hay: &[u8], needle: &[u8]) -> Option<usize> {
    hay.windows(needle.len()).position(|w| w == needle)
}

type Headers = Vec<(String, String)>;

fn parse_head(head: &[u8]) -> Result<(u16, Headers), HttpError> {
    let text = std::str::from_utf8(head).map_err(|_| HttpError::Malformed("non-UTF-8 head".into()))?;
    let mut lines = text.split("\r\n");
    let status_line = lines.next().unwrap_or_default();
    let mut parts = status_line.splitn(3, ' ');
    let proto = parts.next().unwrap_or_default();
    if !proto.starts_with("HTTP/1.") {
        return Err(HttpError::Malformed(format!("bad status line {status_line:?}")));
    }
    let status = parts
        .next()
        .and_then(|c| c.parse::<u16>().ok())
        .filter(|c| (100..1000).contains(c))
        .ok_or_else(|| HttpError::Malformed(format!("bad status line {status_line:?}")))?;
    let headers = lines
        .filter(|l| !l.is_empty())
        .filter_map(|l| l.split_once(':'))
        .map(|(k, v)| (k.trim().to_ascii_lowercase(), v.trim().to_owned()))
        .collect();
    Ok((status, headers))
}

fn header<'a>(headers: &'a Headers, name: &str) -> Option<&'a str> {
    headers.iter().find(|(k, _)| k == name).map(|(_, v)| v.as_str())
}

fn content_length(headers: &Headers) -> Result<Option<usize>, HttpError> {
    if header(headers, "transfer-encoding").is_some() {
        return Ok(None);
    }
    header(headers, "content-length")
        .map(|v| {
            v.parse::<usize>()
                .map_err(|_| HttpError::Malformed(format!("bad Content-Length {v:?}")))
        })
        .transpose()
}

fn dechunk(mut raw: &[u8]) -> Result<Vec<u8>, HttpError> {
    let bad = || HttpError::Malformed("bad chunked encoding".into());
    let mut out = Vec::new();
    loop {
        let eol = find(raw, b"\r\n").ok_or_else(bad)?;
        let size_txt = std::str::from_utf8(&raw[..eol]).map_err(|_| bad())?;
        let size_txt = size_txt.split(';').next().unwrap_or_default().trim();
        let size = usize::from_str_radix(size_txt, 16).map_err(|_| bad())?;
        raw = &raw[eol + 2..];
        if size == 0 {
            return Ok(out);
        }
        if raw.len() < size {
            return Err(bad());
        }
        out.extend_from_slice(&raw[..size]);
        raw = raw.get(size + 2..).ok_or_else(bad)?;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_a_daemon_not_listening_is_worth_waiting_for() {
        let e = |address: &str, kind| HttpError::Connect {
            address: address.into(),
            source: std::io::Error::from(kind),
        };
        use std::io::ErrorKind::*;
        assert!(e("127.0.0.1:5036", ConnectionRefused).is_not_listening());
        // Reset while sending (a closed listener's accept queue): retried; after the whole
        // request was sent, or a send that timed out: not.
        assert!(HttpError::Send(std::io::Error::from(BrokenPipe)).is_not_listening());
        assert!(HttpError::Send(std::io::Error::from(ConnectionReset)).is_not_listening());
        assert!(!HttpError::Send(std::io::Error::from(PermissionDenied)).is_not_listening());
        assert!(!HttpError::Io(std::io::Error::from(BrokenPipe)).is_not_listening());
        assert!(!HttpError::Io(std::io::Error::from(ConnectionReset)).is_not_listening());
        assert!(e("127.0.0.1:5036", ConnectionReset).is_not_listening());
        assert!(e("127.0.0.1:5036", ConnectionAborted).is_not_listening());
        assert!(e("unix:/run/kuryr/cni.sock", NotFound).is_not_listening());
        assert!(!e("unix:", NotFound).is_not_listening());
        assert!(!e("127.0.0.1:5036", NotFound).is_not_listening());
        assert!(!e("127.0.0.1:99999", InvalidInput).is_not_listening());
        assert!(!HttpError::Timeout(Duration::from_secs(1)).is_not_listening());
    }

    #[test]
    fn addresses() {
        assert_eq!(
            Address::parse("127.0.0.1:5036"),
            Address::Tcp("127.0.0.1:5036".into())
        );
        assert_eq!(
            Address::parse("http://localhost:5036/"),
            Address::Tcp("localhost:5036".into())
        );
        assert_eq!(
            Address::parse("unix:/run/kuryr/cni.sock"),
            Address::Unix("/run/kuryr/cni.sock".into())
        );
        assert_eq!(
            Address::parse("unix:///run/x.sock"),
            Address::Unix("/run/x.sock".into())
        );
    }

    #[test]
    fn heads_and_chunks() {
        let (s, h) = parse_head(b"HTTP/1.1 202 ACCEPTED\r\nContent-Length: 5\r\nX: y\r\n\r\n").unwrap();
        assert_eq!(s, 202);
        assert_eq!(content_length(&h).unwrap(), Some(5));
        assert!(parse_head(b"SSH-2.0\r\n\r\n").is_err());
        assert!(parse_head(b"HTTP/1.1 abc\r\n\r\n").is_err());
        assert_eq!(
            dechunk(b"3\r\nabc\r\n2;x=y\r\nde\r\n0\r\n\r\n").unwrap(),
            b"abcde"
        );
        assert!(dechunk(b"zz\r\n").is_err());
        assert!(dechunk(b"10\r\nabc").is_err());
    }
}

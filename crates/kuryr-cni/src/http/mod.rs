//! A minimal blocking HTTP/1.1 client for the one request per invocation the plugin makes to
//! kuryr-daemon, over TCP or a unix socket.
//!
//! Why hand-written: a CNI plugin is exec'd for every pod operation, so start-up time and
//! binary size matter, and it needs exactly one request with `Content-Length`,
//! `Expect: 100-continue` and `Connection: close`, reading one response. Pulling an HTTP stack
//! (and TLS, async runtimes) for that would cost more than these few hundred lines.

mod conn;
#[cfg(test)]
mod tests;

use std::io::{Read, Write};

use conn::{Conn, Interim};
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
    /// The connection was closed or reset before the daemon answered the request's
    /// `Expect: 100-continue`: no handler took the request, it was not acted on.
    #[error("kuryr-daemon closed the connection before it took the request")]
    NotTaken(#[source] std::io::Error),
    /// Receiving failed after the request was sent.
    #[error("I/O error talking to kuryr-daemon")]
    Io(#[source] std::io::Error),
    /// The response is not HTTP/1.x we understand.
    #[error("malformed HTTP response from kuryr-daemon: {0}")]
    Malformed(String),
}

impl HttpError {
    /// Whether the daemon is simply not listening (yet), or let the request go untaken: the
    /// connection was refused, or its unix socket does not exist, or it was reset or aborted
    /// while connecting, or reset while the request was being sent, or closed before the daemon
    /// said `100 Continue` ([`HttpError::NotTaken`]). A daemon closing its listening socket (a
    /// DaemonSet rolling upgrade) resets the connections still in its accept queue, which the
    /// kernel had already completed: the plugin then sees its send fail with a broken pipe
    /// (seen in CI on 2026-11-29), or, having sent the head whole, its wait for `100 Continue`
    /// fail with a reset (seen in CI on 2026-12-06). The daemon never read a whole request in
    /// any of these, so trying again cannot run a request twice. Not for addresses that cannot
    /// work (unparsable, unresolvable): waiting would not fix those; nor for a reset after
    /// the body was sent, when the daemon may have acted on the request.
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
            Self::NotTaken(_) => return true,
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

/// How long a request with a body waits for the daemon's `100 Continue` before sending the
/// body anyway (a server that ignores `Expect`, RFC 9110 section 10.1.1). kuryr-daemon answers
/// at once, as soon as its handler reads the body.
pub const CONTINUE_WAIT: Duration = Duration::from_secs(2);

/// Sends one request and reads the whole response within `timeout` (after connecting, which
/// has its own `connect_timeout`).
///
/// A request with a body is sent with `Expect: 100-continue`: its head goes first and the
/// body only once the daemon says `100 Continue`, that is once a handler has taken the
/// request. A connection closed or reset before that is [`HttpError::NotTaken`]: the daemon
/// never had the request (a stopping daemon closing its listener resets the connections
/// still in its accept queue, and closes an accepted one it has not read yet), so sending it
/// again cannot run it twice. Without the handshake the plugin cannot tell that from a daemon
/// dying while it acts on the request, because the kernel takes the whole small request into
/// the queued connection before the reset.
pub fn request(
    addr: &Address,
    method: &str,
    path: &str,
    body: Option<&[u8]>,
    connect_timeout: Duration,
    timeout: Duration,
) -> Result<Response, HttpError> {
    request_with(addr, method, path, body, connect_timeout, timeout, CONTINUE_WAIT)
}

fn request_with(
    addr: &Address,
    method: &str,
    path: &str,
    body: Option<&[u8]>,
    connect_timeout: Duration,
    timeout: Duration,
    continue_wait: Duration,
) -> Result<Response, HttpError> {
    let deadline = Instant::now() + timeout;
    let s = connect(addr, connect_timeout)?;
    let host = match addr {
        Address::Tcp(a) => a.as_str(),
        Address::Unix(_) => "localhost",
    };
    let mut req = format!(
        "{method} {path} HTTP/1.1\r\nHost: {host}\r\nConnection: close\r\nAccept: application/json\r\n"
    );
    if let Some(b) = body {
        req.push_str(&format!(
            "Content-Type: application/json\r\nContent-Length: {}\r\nExpect: 100-continue\r\n",
            b.len()
        ));
    }
    req.push_str("\r\n");
    let mut c = Conn::new(s, timeout);
    c.send(req.as_bytes())?;
    let mut early = None;
    if let Some(b) = body {
        let wait_until = deadline.min(Instant::now() + continue_wait);
        match c.interim(wait_until)? {
            Interim::Continue | Interim::NoAnswer => c.send(b)?,
            // Answered without the body (a 4xx for the head): that is the response.
            Interim::Final(head) => early = Some(head),
        }
    }
    let head = match early {
        Some(h) => h,
        None => c.final_head(deadline)?,
    };
    c.body(head, deadline)
}

//! Reading the daemon's answer off one connection: the interim `100 Continue`, response heads,
//! bodies by `Content-Length` or chunked.

use std::time::{Duration, Instant};

use super::{HttpError, MAX_RESPONSE, Response, Stream, is_timeout};

/// A parsed response head: its length in the buffer, status and headers.
pub(super) struct Head {
    len: usize,
    status: u16,
    headers: Headers,
}

/// What came back while waiting for `100 Continue`.
pub(super) enum Interim {
    /// `100 Continue`: send the body.
    Continue,
    /// Nothing within the wait: a server that ignores `Expect`; send the body anyway.
    NoAnswer,
    /// A final response, sent without reading the body.
    Final(Head),
}

/// One connection: the stream and what was read from it and not consumed yet.
pub(super) struct Conn {
    s: Box<dyn Stream>,
    buf: Vec<u8>,
    timeout: Duration,
}

impl Conn {
    pub(super) fn new(s: Box<dyn Stream>, timeout: Duration) -> Self {
        Self {
            s,
            buf: Vec::with_capacity(4096),
            timeout,
        }
    }

    pub(super) fn send(&mut self, bytes: &[u8]) -> Result<(), HttpError> {
        let timeout = self.timeout;
        let send = |e: std::io::Error| {
            if is_timeout(&e) {
                HttpError::Timeout(timeout)
            } else {
                HttpError::Send(e)
            }
        };
        self.s.set_timeouts(timeout).map_err(HttpError::Io)?;
        self.s.write_all(bytes).map_err(send)?;
        self.s.flush().map_err(send)
    }

    /// Reads once (until `until`) and appends to the buffer: the bytes read, 0 at the end of
    /// the stream.
    fn fill(&mut self, until: Instant) -> Result<usize, HttpError> {
        let mut chunk = [0u8; 16 * 1024];
        loop {
            let now = Instant::now();
            if now >= until {
                return Err(HttpError::Timeout(self.timeout));
            }
            self.s.set_timeouts(until - now).map_err(HttpError::Io)?;
            match self.s.read(&mut chunk) {
                Ok(n) => {
                    self.buf.extend_from_slice(&chunk[..n]);
                    if self.buf.len() > MAX_RESPONSE {
                        return Err(HttpError::Malformed("response too large".into()));
                    }
                    return Ok(n);
                }
                Err(e) if e.kind() == std::io::ErrorKind::Interrupted => continue,
                Err(e) if is_timeout(&e) => return Err(HttpError::Timeout(self.timeout)),
                Err(e) => return Err(HttpError::Io(e)),
            }
        }
    }

    /// The next whole head in the buffer, reading until `until`; `None` when the stream
    /// ended first.
    fn head(&mut self, until: Instant) -> Result<Option<Head>, HttpError> {
        loop {
            if let Some(end) = find(&self.buf, b"\r\n\r\n").map(|i| i + 4) {
                let (status, headers) = parse_head(&self.buf[..end])?;
                return Ok(Some(Head {
                    len: end,
                    status,
                    headers,
                }));
            }
            if self.fill(until)? == 0 {
                return Ok(None);
            }
        }
    }

    /// Waits for the answer to `Expect: 100-continue`.
    pub(super) fn interim(&mut self, until: Instant) -> Result<Interim, HttpError> {
        let mut heard = false;
        loop {
            match self.head(until) {
                Ok(Some(h)) if h.status == 100 => {
                    self.buf.drain(..h.len);
                    return Ok(Interim::Continue);
                }
                // Another informational response (102, 103): not the answer yet.
                Ok(Some(h)) if h.status < 200 => {
                    heard = true;
                    self.buf.drain(..h.len);
                }
                Ok(Some(h)) => return Ok(Interim::Final(h)),
                // Whatever came so far stays in the buffer for the final response.
                Err(HttpError::Timeout(_)) => return Ok(Interim::NoAnswer),
                // Closed or reset before one byte of an answer: the daemon never took it.
                Ok(None) if !heard && self.buf.is_empty() => {
                    return Err(HttpError::NotTaken(std::io::ErrorKind::UnexpectedEof.into()));
                }
                Err(HttpError::Io(e)) if !heard && self.buf.is_empty() => {
                    return Err(HttpError::NotTaken(e));
                }
                Ok(None) => {
                    return Err(HttpError::Malformed(
                        "connection closed inside the response head".into(),
                    ));
                }
                Err(e) => return Err(e),
            }
        }
    }

    /// The final response's head (informational ones skipped).
    pub(super) fn final_head(&mut self, deadline: Instant) -> Result<Head, HttpError> {
        loop {
            match self.head(deadline)? {
                Some(h) if h.status < 200 => {
                    self.buf.drain(..h.len);
                }
                Some(h) => return Ok(h),
                None => {
                    return Err(HttpError::Malformed(
                        "connection closed before the response head".into(),
                    ));
                }
            }
        }
    }

    /// Reads the body of the response whose head starts the buffer.
    pub(super) fn body(mut self, head: Head, deadline: Instant) -> Result<Response, HttpError> {
        let chunked = header(&head.headers, "transfer-encoding")
            .is_some_and(|v| v.to_ascii_lowercase().contains("chunked"));
        let length = content_length(&head.headers)?;
        loop {
            if let Some(cl) = length {
                if self.buf.len() >= head.len + cl {
                    break;
                }
            }
            if self.fill(deadline)? == 0 {
                break;
            }
        }
        let raw = &self.buf[head.len..];
        let body = if chunked {
            dechunk(raw)?
        } else if let Some(cl) = length {
            if raw.len() < cl {
                return Err(HttpError::Malformed("body shorter than Content-Length".into()));
            }
            raw[..cl].to_vec()
        } else {
            raw.to_vec()
        };
        Ok(Response {
            status: head.status,
            body,
        })
    }
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

/// The fuzz target `http_response` (crate `kuryr-fuzz`): whatever answers on the daemon's
/// address, a head and a body as the plugin splits and decodes them.
#[cfg(test)]
mod fuzz {
    use super::*;

    #[test]
    fn http_response() {
        let r = kuryr_fuzz::run("http_response", vec![], |b| {
            let Some(end) = find(b, b"\r\n\r\n") else {
                return false;
            };
            let (status, headers) = match parse_head(&b[..end]) {
                Ok(h) => h,
                Err(e) => {
                    assert!(!e.to_string().is_empty());
                    return false;
                }
            };
            assert!((100..1000).contains(&status));
            let body = &b[end + 4..];
            let chunked =
                header(&headers, "transfer-encoding").is_some_and(|v| v.eq_ignore_ascii_case("chunked"));
            match content_length(&headers) {
                Ok(Some(n)) => n <= body.len(),
                Ok(None) if chunked => match dechunk(body) {
                    Ok(out) => {
                        assert!(out.len() <= body.len());
                        true
                    }
                    Err(e) => {
                        assert!(!e.to_string().is_empty());
                        false
                    }
                },
                Ok(None) => true,
                Err(e) => {
                    assert!(!e.to_string().is_empty());
                    false
                }
            }
        });
        assert!(r.accepted > 0, "{r:?}");
    }
}

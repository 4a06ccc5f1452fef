//! The exchange with the daemon: what is worth retrying, addresses, the `100 Continue`
//! handshake against fake daemons on loopback ports.

use super::*;
use std::io::{Read, Write};

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

/// A fake daemon on a loopback port: `serve` gets the accepted stream.
fn daemon(serve: impl FnOnce(std::net::TcpStream) + Send + 'static) -> Address {
    let l = std::net::TcpListener::bind("127.0.0.1:0").expect("bind");
    let addr = Address::Tcp(l.local_addr().expect("addr").to_string());
    std::thread::spawn(move || {
        let (s, _) = l.accept().expect("accept");
        serve(s);
    });
    addr
}

/// Reads up to the end of the request head.
fn read_head(s: &mut std::net::TcpStream) -> String {
    let mut head = Vec::new();
    let mut b = [0u8; 1];
    while !head.ends_with(b"\r\n\r\n") {
        s.read_exact(&mut b).expect("head");
        head.push(b[0]);
    }
    String::from_utf8(head).expect("utf-8").to_ascii_lowercase()
}

const BODY: &[u8] = b"{\"CNI_COMMAND\":\"ADD\"}";

fn post(addr: &Address, continue_wait: Duration) -> Result<Response, HttpError> {
    let t = Duration::from_secs(5);
    request_with(addr, "POST", "/addNetwork", Some(BODY), t, t, continue_wait)
}

#[test]
fn the_body_goes_only_after_100_continue() {
    let addr = daemon(|mut s| {
        let head = read_head(&mut s);
        assert!(head.contains("expect: 100-continue"), "{head}");
        // Nothing of the body before the daemon says so.
        s.set_read_timeout(Some(Duration::from_millis(200)))
            .expect("timeout");
        let mut b = [0u8; 1];
        assert!(s.read(&mut b).is_err(), "the body came before 100 Continue");
        s.set_read_timeout(None).expect("timeout");
        s.write_all(b"HTTP/1.1 100 Continue\r\n\r\n").expect("100");
        let mut body = vec![0u8; BODY.len()];
        s.read_exact(&mut body).expect("body");
        assert_eq!(body, BODY);
        s.write_all(b"HTTP/1.1 202 Accepted\r\nContent-Length: 2\r\n\r\n{}")
            .expect("answer");
    });
    let r = post(&addr, CONTINUE_WAIT).expect("answered");
    assert_eq!((r.status, r.body.as_slice()), (202, &b"{}"[..]));
}

/// A stopping daemon closes its listener with the connection still in its accept queue:
/// the kernel had completed it and taken the head, and now resets it.
#[test]
fn a_connection_reset_in_the_accept_queue_was_not_taken() {
    let l = std::net::TcpListener::bind("127.0.0.1:0").expect("bind");
    let addr = Address::Tcp(l.local_addr().expect("addr").to_string());
    let client = std::thread::spawn(move || post(&addr, CONTINUE_WAIT));
    std::thread::sleep(Duration::from_millis(300));
    drop(l);
    let e = client.join().expect("client").expect_err("no daemon took it");
    assert!(matches!(e, HttpError::NotTaken(_)), "{e:?}");
    assert!(e.is_not_listening());
}

/// Accepted, then closed before reading (a stopping server closing an idle connection).
#[test]
fn a_connection_closed_before_the_request_was_read_was_not_taken() {
    let addr = daemon(|s| {
        std::thread::sleep(Duration::from_millis(200));
        drop(s);
    });
    let e = post(&addr, CONTINUE_WAIT).expect_err("closed");
    assert!(matches!(e, HttpError::NotTaken(_)), "{e:?}");
    assert!(e.is_not_listening());
}

/// Gone after it took the body: it may have acted, so that is not retried.
#[test]
fn a_connection_lost_after_the_body_may_have_been_acted_on() {
    let addr = daemon(|mut s| {
        read_head(&mut s);
        s.write_all(b"HTTP/1.1 100 Continue\r\n\r\n").expect("100");
        let mut body = vec![0u8; BODY.len()];
        s.read_exact(&mut body).expect("body");
    });
    let e = post(&addr, CONTINUE_WAIT).expect_err("no answer");
    assert!(!e.is_not_listening(), "{e:?}");
}

/// A server that ignores `Expect` gets the body after the wait; a late `100 Continue`
/// before the answer is skipped.
#[test]
fn a_server_ignoring_expect_gets_the_body_after_the_wait() {
    let addr = daemon(|mut s| {
        read_head(&mut s);
        let mut body = vec![0u8; BODY.len()];
        s.read_exact(&mut body).expect("body");
        s.write_all(b"HTTP/1.1 100 Continue\r\n\r\nHTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok")
            .expect("answer");
    });
    let r = post(&addr, Duration::from_millis(100)).expect("answered");
    assert_eq!((r.status, r.body.as_slice()), (200, &b"ok"[..]));
}

/// An answer to the head alone is the response; the body is never sent.
#[test]
fn an_answer_before_the_body_is_the_response() {
    let addr = daemon(|mut s| {
        read_head(&mut s);
        s.write_all(b"HTTP/1.1 413 Payload Too Large\r\nContent-Length: 0\r\n\r\n")
            .expect("answer");
        s.set_read_timeout(Some(Duration::from_millis(300)))
            .expect("timeout");
        let mut b = [0u8; 1];
        assert!(
            matches!(s.read(&mut b), Ok(0) | Err(_)),
            "the body was sent anyway"
        );
    });
    let r = post(&addr, CONTINUE_WAIT).expect("answered");
    assert_eq!(r.status, 413);
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

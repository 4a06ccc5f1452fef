//! Loopback ports for the servers tests start (API server, daemons, controllers, probes),
//! chosen **below the kernel's ephemeral range** (`net.ipv4.ip_local_port_range`).
//!
//! Binding port 0 and releasing it hands out a port from that range, and until the server
//! binds it any outgoing connection of the namespace, or another test's port-0 pick, can take
//! it: CI saw a daemon exit on "binding the metrics server on 127.0.0.1:35069: Address already
//! in use", and the chaos suite saw a restarted API server stay down the same way. Real servers
//! listen on fixed ports outside the range (6443, 9696) for the same reason.

use std::{
    net::TcpListener,
    sync::{
        OnceLock,
        atomic::{AtomicU32, Ordering},
    },
};

/// Lowest port handed out.
const FROM: u16 = 20000;

/// Step of the walk: a prime above any possible span, so it shares no factor with the span and
/// the walk visits every port of the range once before it repeats one.
const STRIDE: u32 = 65_521;

/// First port of the kernel's ephemeral range (32768 when it cannot be read).
pub fn ephemeral_low() -> u16 {
    std::fs::read_to_string("/proc/sys/net/ipv4/ip_local_port_range")
        .ok()
        .and_then(|t| t.split_whitespace().next()?.parse::<u16>().ok())
        .unwrap_or(32768)
}

/// A TCP port free right now on 127.0.0.1 of the calling thread's network namespace, below the
/// ephemeral range.
///
/// Successive calls in one process walk the range from a per-process start (time and pid,
/// taken once) in steps coprime with its size, so **one process never gets the same port
/// twice** until it has used the whole range, and two processes started apart rarely meet
/// (a port another one already listens on is skipped by the bind check). CI once saw a
/// controller get the same port for health and metrics when every call drew a fresh start.
pub fn free_port() -> u16 {
    static START: OnceLock<u32> = OnceLock::new();
    static NEXT: AtomicU32 = AtomicU32::new(0);
    let start = *START.get_or_init(|| {
        std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |d| d.subsec_nanos())
            ^ std::process::id().rotate_left(16)
    });
    let to = ephemeral_low().max(FROM + 1);
    let span = u32::from(to - FROM);
    for _ in 0..span {
        let k = NEXT.fetch_add(1, Ordering::Relaxed) % span;
        let offset = (u64::from(start) + u64::from(k) * u64::from(STRIDE)) % u64::from(span);
        // `offset < span <= u16::MAX`, so the conversion cannot fail.
        let port = FROM + u16::try_from(offset).unwrap_or(0);
        if TcpListener::bind(("127.0.0.1", port)).is_ok() {
            return port;
        }
    }
    // Everything below the range taken: a port from it is better than none.
    TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .map_or(0, |a| a.port())
}

/// [`free_port`] as a `127.0.0.1` socket address.
pub fn free_addr() -> std::net::SocketAddr {
    std::net::SocketAddr::from(([127, 0, 0, 1], free_port()))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn free_ports_are_below_the_ephemeral_range_and_differ() {
        let low = ephemeral_low();
        let ports: Vec<u16> = (0..200).map(|_| free_port()).collect();
        for p in &ports {
            assert!((FROM..low).contains(p), "{p} (ephemeral range from {low})");
        }
        let distinct: std::collections::HashSet<&u16> = ports.iter().collect();
        assert_eq!(distinct.len(), ports.len(), "a port handed out twice: {ports:?}");
    }
}

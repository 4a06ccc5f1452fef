//! Service ClusterIP allocation from the configured service CIDR (IPv4 or IPv6).
//!
//! The real API server picks a random free address; we hand out the **lowest free** one instead,
//! so runs are reproducible. The network address and the last address of the range (the IPv4
//! broadcast) are never handed out. The first usable address ([`ClusterIpAllocator::first`]) is
//! the one the real cluster gives the `default/kubernetes` Service: the API server should
//! [`reserve`](ClusterIpAllocator::reserve) it for that Service at start, after which `allocate`
//! starts from the second one.

use std::collections::BTreeSet;
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};

/// Allocation failures.
#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub enum AllocError {
    /// No free address left.
    #[error("no ClusterIP left in {0}")]
    Exhausted(ipnet::IpNet),
    /// A requested address is outside the range.
    #[error("{ip} is not in the service CIDR {cidr}")]
    OutOfRange {
        /// Requested address.
        ip: IpAddr,
        /// The range.
        cidr: ipnet::IpNet,
    },
    /// A requested address is taken.
    #[error("provided IP {0} is already allocated")]
    Taken(IpAddr),
}

/// Tracks which ClusterIPs are in use.
#[derive(Debug, Clone)]
pub struct ClusterIpAllocator {
    cidr: ipnet::IpNet,
    /// Offsets from the network address of the addresses in use.
    used: BTreeSet<u128>,
}

fn to_u128(ip: IpAddr) -> u128 {
    match ip {
        IpAddr::V4(v) => u128::from(u32::from(v)),
        IpAddr::V6(v) => u128::from(v),
    }
}

impl ClusterIpAllocator {
    /// A new allocator over `cidr` (network and broadcast addresses are never handed out).
    pub fn new(cidr: ipnet::IpNet) -> Self {
        Self {
            cidr: cidr.trunc(),
            used: BTreeSet::new(),
        }
    }

    /// The service CIDR.
    pub fn cidr(&self) -> ipnet::IpNet {
        self.cidr
    }

    /// Number of host bits of the range.
    fn host_bits(&self) -> u32 {
        u32::from(self.cidr.max_prefix_len() - self.cidr.prefix_len())
    }

    /// Highest usable offset (inclusive); 0 when the range has no usable address.
    fn max_offset(&self) -> u128 {
        let bits = self.host_bits();
        if bits < 2 {
            return 0;
        }
        let size_minus_one = if bits >= 128 {
            u128::MAX
        } else {
            (1u128 << bits) - 1
        };
        size_minus_one - 1
    }

    fn ip_at(&self, offset: u128) -> IpAddr {
        let base = to_u128(self.cidr.network());
        let v = base.wrapping_add(offset);
        match self.cidr {
            // The offset stays inside an IPv4 range, so the value fits 32 bits.
            ipnet::IpNet::V4(_) => IpAddr::V4(Ipv4Addr::from(v as u32)),
            ipnet::IpNet::V6(_) => IpAddr::V6(Ipv6Addr::from(v)),
        }
    }

    /// The usable offset of `ip`, or why it is not usable.
    fn offset_of(&self, ip: IpAddr) -> Result<u128, AllocError> {
        let out = AllocError::OutOfRange { ip, cidr: self.cidr };
        if !self.cidr.contains(&ip) {
            return Err(out);
        }
        let off = to_u128(ip) - to_u128(self.cidr.network());
        if off == 0 || off > self.max_offset() {
            return Err(out);
        }
        Ok(off)
    }

    /// The first usable address (the one of the `default/kubernetes` Service).
    pub fn first(&self) -> Option<IpAddr> {
        (self.max_offset() >= 1).then(|| self.ip_at(1))
    }

    /// Hands out the lowest free address.
    pub fn allocate(&mut self) -> Result<IpAddr, AllocError> {
        let max = self.max_offset();
        let mut candidate = 1u128;
        for &u in &self.used {
            if u == candidate {
                candidate += 1;
            } else if u > candidate {
                break;
            }
        }
        if candidate > max || max == 0 {
            return Err(AllocError::Exhausted(self.cidr));
        }
        self.used.insert(candidate);
        Ok(self.ip_at(candidate))
    }

    /// Claims a specific address (a Service created with `spec.clusterIP` set).
    pub fn reserve(&mut self, ip: IpAddr) -> Result<(), AllocError> {
        let off = self.offset_of(ip)?;
        if !self.used.insert(off) {
            return Err(AllocError::Taken(ip));
        }
        Ok(())
    }

    /// Returns an address (unknown or out-of-range addresses are ignored).
    pub fn release(&mut self, ip: IpAddr) {
        if let Ok(off) = self.offset_of(ip) {
            self.used.remove(&off);
        }
    }

    /// True when `ip` is currently allocated.
    pub fn is_allocated(&self, ip: IpAddr) -> bool {
        self.offset_of(ip).is_ok_and(|o| self.used.contains(&o))
    }

    /// Number of addresses in use.
    pub fn used(&self) -> usize {
        self.used.len()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ip(s: &str) -> IpAddr {
        s.parse().unwrap()
    }

    #[test]
    fn v4_lowest_free_skips_network_and_broadcast() {
        let mut a = ClusterIpAllocator::new("10.96.0.0/30".parse().unwrap());
        assert_eq!(a.first(), Some(ip("10.96.0.1")));
        assert_eq!(a.allocate().unwrap(), ip("10.96.0.1"));
        assert_eq!(a.allocate().unwrap(), ip("10.96.0.2"));
        assert_eq!(
            a.allocate(),
            Err(AllocError::Exhausted("10.96.0.0/30".parse().unwrap()))
        );
        a.release(ip("10.96.0.1"));
        assert_eq!(a.allocate().unwrap(), ip("10.96.0.1"));
    }

    #[test]
    fn reserve_first_for_kubernetes_then_allocate() {
        let mut a = ClusterIpAllocator::new("10.96.0.0/12".parse().unwrap());
        let first = a.first().unwrap();
        a.reserve(first).unwrap();
        assert_eq!(a.allocate().unwrap(), ip("10.96.0.2"));
        assert_eq!(a.allocate().unwrap(), ip("10.96.0.3"));
        a.reserve(ip("10.96.0.4")).unwrap();
        assert_eq!(a.allocate().unwrap(), ip("10.96.0.5"));
        a.release(ip("10.96.0.3"));
        assert_eq!(a.allocate().unwrap(), ip("10.96.0.3"));
        assert_eq!(a.used(), 5);
        assert!(a.is_allocated(ip("10.96.0.4")));
    }

    #[test]
    fn reserve_errors() {
        let mut a = ClusterIpAllocator::new("10.0.0.0/24".parse().unwrap());
        assert_eq!(a.reserve(ip("10.0.0.7")), Ok(()));
        assert_eq!(a.reserve(ip("10.0.0.7")), Err(AllocError::Taken(ip("10.0.0.7"))));
        for bad in ["10.0.1.1", "10.0.0.0", "10.0.0.255", "fd00::1"] {
            assert!(
                matches!(a.reserve(ip(bad)), Err(AllocError::OutOfRange { .. })),
                "{bad}"
            );
        }
        assert_eq!(a.reserve(ip("10.0.0.254")), Ok(()));
        assert_eq!(
            AllocError::Taken(ip("10.0.0.7")).to_string(),
            "provided IP 10.0.0.7 is already allocated"
        );
    }

    #[test]
    fn v6_ranges() {
        let mut a = ClusterIpAllocator::new("fd00:10:96::/112".parse().unwrap());
        assert_eq!(a.allocate().unwrap(), ip("fd00:10:96::1"));
        assert_eq!(a.allocate().unwrap(), ip("fd00:10:96::2"));
        a.reserve(ip("fd00:10:96::ffff")).unwrap_err();
        a.reserve(ip("fd00:10:96::fffe")).unwrap();
        let mut big = ClusterIpAllocator::new("fd00::/64".parse().unwrap());
        assert_eq!(big.allocate().unwrap(), ip("fd00::1"));
        big.reserve(ip("fd00::ffff:ffff:ffff:fffe")).unwrap();
    }

    #[test]
    fn tiny_ranges_have_nothing() {
        let mut a = ClusterIpAllocator::new("10.0.0.0/31".parse().unwrap());
        assert!(a.first().is_none());
        assert!(a.allocate().is_err());
        let mut b = ClusterIpAllocator::new("10.0.0.5/32".parse().unwrap());
        assert!(b.allocate().is_err());
    }

    #[test]
    fn host_bits_are_truncated() {
        let mut a = ClusterIpAllocator::new("10.96.0.77/24".parse().unwrap());
        assert_eq!(a.cidr().to_string(), "10.96.0.0/24");
        assert_eq!(a.allocate().unwrap(), ip("10.96.0.1"));
    }
}

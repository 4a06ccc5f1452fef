//! IPv4 address and subnet-pool allocation for the fake: enough for pod ports and namespace
//! subnets (IPv6 subnets get no addresses).

use std::net::Ipv4Addr;

/// A parsed IPv4 CIDR.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Cidr {
    pub net: u32,
    pub prefix: u8,
}

impl Cidr {
    pub fn parse(s: &str) -> Option<Cidr> {
        let (a, p) = s.split_once('/')?;
        let addr: Ipv4Addr = a.parse().ok()?;
        let prefix: u8 = p.parse().ok()?;
        if prefix > 32 {
            return None;
        }
        let mask = Self::mask(prefix);
        Some(Cidr {
            net: u32::from(addr) & mask,
            prefix,
        })
    }

    fn mask(prefix: u8) -> u32 {
        if prefix == 0 { 0 } else { u32::MAX << (32 - prefix) }
    }

    fn size(&self) -> u64 {
        1u64 << (32 - self.prefix)
    }

    pub fn contains(&self, ip: u32) -> bool {
        ip & Self::mask(self.prefix) == self.net
    }

    pub fn overlaps(&self, other: &Cidr) -> bool {
        self.contains(other.net) || other.contains(self.net)
    }

    /// First usable host (`.1`, the usual gateway).
    pub fn first_host(&self) -> Ipv4Addr {
        Ipv4Addr::from(self.net.wrapping_add(1))
    }

    /// Lowest host address not in `used`, skipping network, gateway and broadcast addresses.
    #[cfg(test)]
    pub fn next_free(&self, gateway: Option<&str>, used: &[String]) -> Option<Ipv4Addr> {
        let used: std::collections::HashSet<u32> = used
            .iter()
            .filter_map(|u| u.parse::<Ipv4Addr>().ok())
            .map(u32::from)
            .collect();
        self.next_free_from(gateway, &used, 0)
    }

    /// The first host address not in `used` after offset `cursor` (wrapping once around the
    /// subnet), skipping network, gateway and broadcast addresses: amortized O(1) when
    /// `cursor` is the last allocation's offset.
    pub fn next_free_from(
        &self,
        gateway: Option<&str>,
        used: &std::collections::HashSet<u32>,
        cursor: u32,
    ) -> Option<Ipv4Addr> {
        let gw: Option<u32> = gateway.and_then(|g| g.parse::<Ipv4Addr>().ok()).map(u32::from);
        let last = self.size().saturating_sub(1);
        let from = (u64::from(cursor) + 1).max(1);
        (from..last)
            .chain(1..from.min(last))
            .map(|off| self.net.wrapping_add(off as u32))
            .find(|ip| Some(*ip) != gw && !used.contains(ip))
            .map(Ipv4Addr::from)
    }

    /// First block of `/prefixlen` inside `self` that overlaps none of `taken`.
    pub fn carve(&self, prefixlen: u8, taken: &[Cidr]) -> Option<Cidr> {
        if prefixlen < self.prefix || prefixlen > 32 {
            return None;
        }
        let step = 1u64 << (32 - prefixlen);
        (0..self.size() / step)
            .map(|i| Cidr {
                net: self.net.wrapping_add((i * step) as u32),
                prefix: prefixlen,
            })
            .find(|c| !taken.iter().any(|t| t.overlaps(c)))
    }
}

impl std::fmt::Display for Cidr {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}/{}", Ipv4Addr::from(self.net), self.prefix)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn allocates_hosts_and_blocks() {
        let c = Cidr::parse("10.10.0.0/29").unwrap();
        assert_eq!(c.first_host().to_string(), "10.10.0.1");
        let mut used = vec![];
        for _ in 0..5 {
            let ip = c.next_free(Some("10.10.0.1"), &used).unwrap();
            used.push(ip.to_string());
        }
        assert_eq!(
            used,
            ["10.10.0.2", "10.10.0.3", "10.10.0.4", "10.10.0.5", "10.10.0.6"]
        );
        assert!(c.next_free(Some("10.10.0.1"), &used).is_none());
        let pool = Cidr::parse("10.10.0.0/16").unwrap();
        let first = Cidr::parse("10.10.0.0/24").unwrap();
        assert_eq!(pool.carve(24, &[first]).unwrap().to_string(), "10.10.1.0/24");
        assert!(Cidr::parse("10.10.0.0/24").unwrap().carve(16, &[]).is_none());
        assert!(Cidr::parse("nope").is_none());
    }
}

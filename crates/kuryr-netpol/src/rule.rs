//! A Neutron security-group rule as the translator produces it, and the one question Neutron
//! answers with it: does this rule let that packet through.

use std::fmt;
use std::net::IpAddr;

use ipnet::IpNet;

use crate::model::Proto;

/// `ingress` or `egress`, seen from the port the group is on.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Direction {
    /// Into the port.
    Ingress,
    /// Out of the port.
    Egress,
}

impl Direction {
    /// Neutron's spelling.
    pub fn neutron(self) -> &'static str {
        match self {
            Self::Ingress => "ingress",
            Self::Egress => "egress",
        }
    }
}

/// `IPv4` or `IPv6`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Ethertype {
    /// IPv4.
    V4,
    /// IPv6.
    V6,
}

impl Ethertype {
    /// Neutron's spelling.
    pub fn neutron(self) -> &'static str {
        match self {
            Self::V4 => "IPv4",
            Self::V6 => "IPv6",
        }
    }

    /// The family of an address.
    pub fn of(ip: IpAddr) -> Self {
        if ip.is_ipv4() { Self::V4 } else { Self::V6 }
    }
}

/// One security-group rule (the fields Neutron matches on; upstream compared exactly these).
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct SgRule {
    /// Direction.
    pub direction: Direction,
    /// Address family.
    pub ethertype: Ethertype,
    /// Protocol; `None`: any.
    pub protocol: Option<Proto>,
    /// First and last port; `None`: all (always `None` without a protocol).
    pub ports: Option<(u16, u16)>,
    /// The other end; `None`: anywhere of `ethertype`.
    pub remote: Option<IpNet>,
}

impl SgRule {
    /// A rule with a remote prefix (the ethertype follows the prefix).
    pub fn to_prefix(
        direction: Direction,
        remote: IpNet,
        protocol: Option<Proto>,
        ports: Option<(u16, u16)>,
    ) -> Self {
        let ethertype = if remote.addr().is_ipv4() {
            Ethertype::V4
        } else {
            Ethertype::V6
        };
        Self {
            direction,
            ethertype,
            protocol,
            ports,
            remote: Some(remote),
        }
    }

    /// Rules for any remote: one per address family.
    pub fn anywhere(direction: Direction, protocol: Option<Proto>, ports: Option<(u16, u16)>) -> [Self; 2] {
        [Ethertype::V4, Ethertype::V6].map(|ethertype| Self {
            direction,
            ethertype,
            protocol,
            ports,
            remote: None,
        })
    }

    /// Whether a packet of `proto` to `port`, whose other end is `remote_ip`, travelling in
    /// `direction` through a port holding this rule's group, is admitted by the rule.
    pub fn admits(&self, direction: Direction, remote_ip: IpAddr, proto: Proto, port: u16) -> bool {
        self.direction == direction
            && self.ethertype == Ethertype::of(remote_ip)
            && self.protocol.is_none_or(|p| p == proto)
            && self.ports.is_none_or(|(lo, hi)| (lo..=hi).contains(&port))
            && self.remote.is_none_or(|r| r.contains(&remote_ip))
    }
}

impl fmt::Display for SgRule {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{} {}", self.direction.neutron(), self.ethertype.neutron())?;
        match self.protocol {
            Some(p) => write!(f, " {}", p.neutron())?,
            None => write!(f, " any")?,
        }
        if let Some((lo, hi)) = self.ports {
            if lo == hi {
                write!(f, ":{lo}")?
            } else {
                write!(f, ":{lo}-{hi}")?
            }
        }
        match self.remote {
            Some(r) => write!(f, " {r}"),
            None => write!(f, " anywhere"),
        }
    }
}

//! Service ClusterIP allocation from the configured service CIDR.

use std::net::IpAddr;

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
}

impl ClusterIpAllocator {
    /// A new allocator over `cidr` (network and broadcast addresses are never handed out).
    pub fn new(cidr: ipnet::IpNet) -> Self {
        Self { cidr }
    }
    /// Hands out a free address.
    pub fn allocate(&mut self) -> Result<IpAddr, AllocError> {
        Err(AllocError::Exhausted(self.cidr))
    }
    /// Claims a specific address (a Service created with `spec.clusterIP` set).
    pub fn reserve(&mut self, ip: IpAddr) -> Result<(), AllocError> {
        Err(AllocError::OutOfRange { ip, cidr: self.cidr })
    }
    /// Returns an address.
    pub fn release(&mut self, _ip: IpAddr) {}
}

//! Turning TX checksum offload off on an interface (`ethtool -K <if> tx off`) with the
//! `SIOCETHTOOL` ioctl, in the namespace of the calling thread.
//!
//! Why: with Open vSwitch's userspace (netdev) datapath, packets from a veth whose checksum was
//! left to "hardware" leave with a bad checksum and TCP fails (ICMP works, which hides it). Why
//! the ioctl rather than running `ethtool`: a fork+exec costs several milliseconds on a busy
//! node, the ioctl a few microseconds, and the daemon must wire a pod in well under 20 ms.

use std::os::fd::AsRawFd;

use nix::sys::socket::{AddressFamily, SockFlag, SockType, socket};

/// `SIOCETHTOOL` (linux/sockios.h).
const SIOCETHTOOL: u64 = 0x8946;
/// `ETHTOOL_STXCSUM` (linux/ethtool.h): set TX checksum offload.
const ETHTOOL_STXCSUM: u32 = 0x17;
/// `ETHTOOL_GTXCSUM`: get TX checksum offload.
const ETHTOOL_GTXCSUM: u32 = 0x16;

/// Why the offload setting could not be changed.
#[derive(Debug, thiserror::Error)]
pub enum EthtoolError {
    /// The interface name does not fit `ifr_name`.
    #[error("interface name {0:?} is too long")]
    Name(String),
    /// No socket for the ioctl.
    #[error("opening a socket for SIOCETHTOOL")]
    Socket(#[source] nix::Error),
    /// The ioctl failed.
    #[error("SIOCETHTOOL on {ifname}")]
    Ioctl {
        /// Interface.
        ifname: String,
        /// Cause.
        #[source]
        source: std::io::Error,
    },
}

#[repr(C)]
struct EthtoolValue {
    cmd: u32,
    data: u32,
}

#[repr(C)]
struct IfReq {
    name: [u8; 16],
    data: *mut EthtoolValue,
    _pad: [u8; 16],
}

#[allow(unsafe_code)]
fn ethtool_value(ifname: &str, cmd: u32, data: u32) -> Result<u32, EthtoolError> {
    let bytes = ifname.as_bytes();
    if bytes.is_empty() || bytes.len() > 15 {
        return Err(EthtoolError::Name(ifname.to_owned()));
    }
    let sock = socket(
        AddressFamily::Inet,
        SockType::Datagram,
        SockFlag::SOCK_CLOEXEC,
        None,
    )
    .map_err(EthtoolError::Socket)?;
    let mut value = EthtoolValue { cmd, data };
    let mut req = IfReq {
        name: [0; 16],
        data: &mut value,
        _pad: [0; 16],
    };
    req.name[..bytes.len()].copy_from_slice(bytes);
    // SAFETY: `req` is a properly laid out `struct ifreq` (16-byte name, then a pointer to an
    // `ethtool_value` that lives for the duration of the call, padded to the kernel's size);
    // the fd is a valid open socket owned by `sock`.
    let rc = unsafe { nix::libc::ioctl(sock.as_raw_fd(), SIOCETHTOOL as _, &mut req as *mut IfReq) };
    if rc < 0 {
        return Err(EthtoolError::Ioctl {
            ifname: ifname.to_owned(),
            source: std::io::Error::last_os_error(),
        });
    }
    Ok(value.data)
}

/// Turns TX checksum offload off on `ifname` (in the calling thread's namespace).
pub fn tx_checksum_off(ifname: &str) -> Result<(), EthtoolError> {
    ethtool_value(ifname, ETHTOOL_STXCSUM, 0).map(|_| ())
}

/// Whether TX checksum offload is on for `ifname`.
pub fn tx_checksum_on(ifname: &str) -> Result<bool, EthtoolError> {
    ethtool_value(ifname, ETHTOOL_GTXCSUM, 0).map(|v| v != 0)
}

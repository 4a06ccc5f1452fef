//! Creating and deleting named network namespaces in-process, the way a CRI runtime does
//! (containerd and CRI-O pin a fresh namespace with a bind mount; they do not run `ip netns`).
//!
//! The layout is iproute2's, so `ip netns`, `ip netns exec` and every other tool see the same
//! namespaces: a file per namespace under [`dir`] with the namespace bind-mounted on it,
//! and the directory itself a shared mount point, so that a namespace pinned here propagates to
//! the mount namespaces made later by `ip netns exec` (the sandbox's daemons run in those).
//!
//! Why by hand: iproute2 has no library, the runtime's libraries are Go, and spawning `ip`
//! twice per pod (`netns add`, then `link set lo up`) costs 30–40 ms of CPU per spawn inside
//! the software-emulated VM nodes, where all of a node's pods share one virtual CPU; the
//! syscalls below cost microseconds. Namespace work never runs on a runtime worker thread:
//! `unshare` changes the calling thread's namespace, so each creation gets a short-lived
//! thread of its own, which exits with the namespace it made.

use std::{
    io::ErrorKind,
    os::fd::AsRawFd,
    path::{Path, PathBuf},
    sync::Mutex,
};

use nix::{
    errno::Errno,
    mount::{MntFlags, MsFlags, mount, umount2},
    sched::{CloneFlags, unshare},
    sys::socket::{AddressFamily, SockFlag, SockType, socket},
};

use super::{Error, dir, path};

/// Serializes the one-time shared-mount setup of the directory (two creations racing on a
/// fresh node would otherwise stack two bind mounts on it).
static DIR_SETUP: Mutex<()> = Mutex::new(());

/// `SIOCGIFFLAGS` / `SIOCSIFFLAGS` (linux/sockios.h).
const SIOCGIFFLAGS: u64 = 0x8913;
const SIOCSIFFLAGS: u64 = 0x8914;

/// `struct ifreq` with its `ifr_flags` member (the union padded to the kernel's 24 bytes).
#[repr(C)]
struct IfReqFlags {
    name: [u8; 16],
    flags: nix::libc::c_short,
    _pad: [u8; 22],
}

/// Creates the named namespace `name` under [`dir`] and brings its `lo` up. On failure
/// nothing is left behind (no file, no mount).
pub async fn create(name: &str) -> Result<(), Error> {
    validate(name)?;
    let target = path(name);
    let (tx, rx) = tokio::sync::oneshot::channel();
    let thread_target = target.clone();
    std::thread::Builder::new()
        .name("netns-create".into())
        .spawn(move || {
            let _ = tx.send(create_blocking(&thread_target));
        })
        .map_err(|source| Error::Create {
            path: target.clone(),
            step: "spawn a thread",
            source,
        })?;
    rx.await.map_err(|_| Error::Thread)?
}

/// Deletes the named namespace: detaches its bind mount and removes its file (as
/// `ip netns delete`). A missing namespace is not an error. The namespace itself goes away
/// when nothing else holds it (a process inside, an open file).
pub async fn delete(name: &str) -> Result<(), Error> {
    validate(name)?;
    let target = path(name);
    tokio::task::spawn_blocking(move || delete_blocking(&target))
        .await
        .map_err(|_| Error::Thread)?
}

/// A namespace name must be one path component (it comes from the kubelet's own records, but
/// a record file edited by hand must not make it unmount or remove anything else).
fn validate(name: &str) -> Result<(), Error> {
    let ok =
        !name.is_empty() && name.len() <= 255 && name != "." && name != ".." && !name.contains(['/', '\0']);
    if ok {
        Ok(())
    } else {
        Err(Error::Name(name.to_owned()))
    }
}

/// Runs on a dedicated thread: its network namespace is replaced by the new one.
fn create_blocking(target: &Path) -> Result<(), Error> {
    let step = |step: &'static str| {
        let path = target.to_path_buf();
        move |source: std::io::Error| Error::Create { path, step, source }
    };
    shared_dir().map_err(step("make the directory a shared mount"))?;
    // The mount point: an empty file, created exclusively (a name in use is an error).
    std::fs::OpenOptions::new()
        .write(true)
        .create_new(true)
        .open(target)
        .map_err(step("create the mount point"))?;
    let pinned = unshare(CloneFlags::CLONE_NEWNET)
        .map_err(|e| step("unshare the network namespace")(e.into()))
        .and_then(|()| {
            let own = PathBuf::from(format!("/proc/self/task/{}/ns/net", nix::unistd::gettid()));
            mount(Some(&own), target, None::<&str>, MsFlags::MS_BIND, None::<&str>)
                .map_err(|e| step("bind-mount the namespace")(e.into()))
        });
    if let Err(e) = pinned {
        let _ = std::fs::remove_file(target);
        return Err(e);
    }
    // Still inside the new namespace: its loopback, as the CNI loopback plugin would.
    if let Err(e) = loopback_up().map_err(step("bring lo up")) {
        let _ = delete_blocking(target);
        return Err(e);
    }
    Ok(())
}

fn delete_blocking(target: &Path) -> Result<(), Error> {
    match umount2(target, MntFlags::MNT_DETACH) {
        // EINVAL: not a mount point (a half-made namespace); ENOENT: already gone.
        Ok(()) | Err(Errno::EINVAL) | Err(Errno::ENOENT) => {}
        Err(e) => {
            return Err(Error::Delete {
                path: target.to_path_buf(),
                step: "detach the bind mount",
                source: e.into(),
            });
        }
    }
    match std::fs::remove_file(target) {
        Ok(()) => Ok(()),
        Err(e) if e.kind() == ErrorKind::NotFound => Ok(()),
        Err(source) => Err(Error::Delete {
            path: target.to_path_buf(),
            step: "remove the mount point",
            source,
        }),
    }
}

/// Makes [`dir`] exist and be a shared mount point (bind-mounting it on itself first when
/// it is a plain directory), as iproute2 does before its first namespace.
fn shared_dir() -> std::io::Result<()> {
    let _guard = DIR_SETUP.lock().unwrap_or_else(|p| p.into_inner());
    std::fs::create_dir_all(dir())?;
    let make_shared = || {
        mount(
            None::<&str>,
            dir(),
            None::<&str>,
            MsFlags::MS_SHARED | MsFlags::MS_REC,
            None::<&str>,
        )
    };
    match make_shared() {
        Ok(()) => Ok(()),
        // Not a mount point yet.
        Err(Errno::EINVAL) => {
            mount(
                Some(dir()),
                dir(),
                None::<&str>,
                MsFlags::MS_BIND | MsFlags::MS_REC,
                None::<&str>,
            )?;
            Ok(make_shared()?)
        }
        Err(e) => Err(e.into()),
    }
}

/// Sets `IFF_UP` on `lo` in the calling thread's namespace.
#[allow(unsafe_code)]
fn loopback_up() -> std::io::Result<()> {
    let sock = socket(
        AddressFamily::Inet,
        SockType::Datagram,
        SockFlag::SOCK_CLOEXEC,
        None,
    )?;
    let mut req = IfReqFlags {
        name: [0; 16],
        flags: 0,
        _pad: [0; 22],
    };
    req.name[..2].copy_from_slice(b"lo");
    // SAFETY: `req` is laid out as the kernel's `struct ifreq` (a 16-byte NUL-terminated name,
    // then the union, here its `short ifr_flags`, padded to the union's 24 bytes) and lives
    // across both calls; the fd is an open socket owned by `sock`.
    let rc = unsafe { nix::libc::ioctl(sock.as_raw_fd(), SIOCGIFFLAGS as _, &mut req as *mut IfReqFlags) };
    if rc < 0 {
        return Err(std::io::Error::last_os_error());
    }
    req.flags |= nix::libc::IFF_UP as nix::libc::c_short;
    // SAFETY: as above.
    let rc = unsafe { nix::libc::ioctl(sock.as_raw_fd(), SIOCSIFFLAGS as _, &mut req as *mut IfReqFlags) };
    if rc < 0 {
        return Err(std::io::Error::last_os_error());
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::validate;

    #[test]
    fn names_are_one_path_component() {
        assert!(validate("cni-0b7c3e8e-1111-4e51-9a55-0123456789ab").is_ok());
        for bad in ["", ".", "..", "a/b", "../etc", "x\0y"] {
            assert!(validate(bad).is_err(), "{bad:?} accepted");
        }
        assert!(validate(&"n".repeat(256)).is_err());
    }
}

//! The netlink operations the bindings need (links, addresses, routes) over `rtnetlink`. Every
//! function works in the namespace the calling thread was in when [`Netlink::connect`] ran, so
//! use them inside [`crate::netns::on_thread`].

use std::net::IpAddr;
use std::os::fd::AsRawFd;

use futures::TryStreamExt;
use ipnet::IpNet;
use rtnetlink::{
    Handle, LinkMacVlan, LinkMessageBuilder, LinkUnspec, LinkVeth, LinkVlan, RouteMessageBuilder,
    packet_route::{
        address::AddressAttribute,
        link::{InfoData, InfoKind, InfoVeth, LinkAttribute, LinkFlags, LinkMessage, MacVlanMode},
    },
};

use crate::binding::spec::RouteSpec;

const EEXIST: i32 = 17;
const ENODEV: i32 = 19;
/// The loopback device's index in every namespace (`LOOPBACK_IFINDEX` in the kernel).
const LOOPBACK_IFINDEX: u32 = 1;

/// A failed netlink operation.
#[derive(Debug, thiserror::Error)]
pub enum NetlinkError {
    /// No netlink socket.
    #[error("opening a netlink socket")]
    Socket(#[source] std::io::Error),
    /// The kernel refused a request.
    #[error("netlink {op} {target}")]
    Request {
        /// What was attempted (`add veth`, `set link`, …).
        op: &'static str,
        /// On what.
        target: String,
        /// Cause.
        #[source]
        source: Box<rtnetlink::Error>,
    },
    /// A link that must exist does not.
    #[error("link {0} not found")]
    NoLink(String),
    /// A route cannot be expressed.
    #[error("invalid route {0}")]
    Route(String),
}

impl NetlinkError {
    /// The kernel refused because the object (a link name, an address) already exists.
    pub fn is_exists(&self) -> bool {
        matches!(self, NetlinkError::Request { source, .. } if errno(source) == Some(EEXIST))
    }
}

fn errno(e: &rtnetlink::Error) -> Option<i32> {
    match e {
        rtnetlink::Error::NetlinkError(m) => m.to_io().raw_os_error(),
        _ => None,
    }
}

/// What [`Netlink::link`] reports about an interface.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LinkInfo {
    /// Index.
    pub index: u32,
    /// MAC address.
    pub mac: Option<Vec<u8>>,
    /// MTU.
    pub mtu: Option<u32>,
    /// Administratively up.
    pub up: bool,
}

/// A netlink connection in the current thread's namespace.
pub struct Netlink {
    handle: Handle,
}

impl Netlink {
    /// Opens a connection; its I/O task runs on the current (thread-local) runtime.
    pub fn connect() -> Result<Self, NetlinkError> {
        let (conn, handle, _) = rtnetlink::new_connection().map_err(NetlinkError::Socket)?;
        tokio::spawn(conn);
        Ok(Self { handle })
    }

    fn req(op: &'static str, target: &str) -> impl FnOnce(rtnetlink::Error) -> NetlinkError {
        let target = target.to_owned();
        move |source| NetlinkError::Request {
            op,
            target,
            source: Box::new(source),
        }
    }

    /// The link called `name`, if any.
    pub async fn link(&self, name: &str) -> Result<Option<LinkInfo>, NetlinkError> {
        let res = self
            .handle
            .link()
            .get()
            .match_name(name.to_owned())
            .execute()
            .try_next()
            .await;
        let msg: LinkMessage = match res {
            Ok(Some(m)) => m,
            Ok(None) => return Ok(None),
            Err(e) if errno(&e) == Some(ENODEV) => return Ok(None),
            Err(e) => return Err(Self::req("get link", name)(e)),
        };
        let mut info = LinkInfo {
            index: msg.header.index,
            mac: None,
            mtu: None,
            up: msg.header.flags.contains(LinkFlags::Up),
        };
        for a in msg.attributes {
            match a {
                LinkAttribute::Address(m) => info.mac = Some(m),
                LinkAttribute::Mtu(m) => info.mtu = Some(m),
                _ => {}
            }
        }
        Ok(Some(info))
    }

    /// The index of link `name` ([`NetlinkError::NoLink`] when there is none).
    pub async fn index(&self, name: &str) -> Result<u32, NetlinkError> {
        self.link(name)
            .await?
            .map(|l| l.index)
            .ok_or_else(|| NetlinkError::NoLink(name.to_owned()))
    }

    /// Deletes `name` if it exists; returns whether it existed.
    pub async fn delete_link(&self, name: &str) -> Result<bool, NetlinkError> {
        let Some(l) = self.link(name).await? else {
            return Ok(false);
        };
        match self.handle.link().del(l.index).execute().await {
            Ok(()) => Ok(true),
            Err(e) if errno(&e) == Some(ENODEV) => Ok(false),
            Err(e) => Err(Self::req("delete link", name)(e)),
        }
    }

    /// Creates a veth pair: `name` here, its peer `peer` (with `peer_mac`) directly inside the
    /// namespace open as `peer_ns`, both with `mtu`, in one request; `name` comes up with it,
    /// the peer stays down (the kernel configures the peer before pairing it, and a veth cannot
    /// open without its peer: `ENOTCONN`). Creating the peer in place avoids moving a device
    /// between namespaces, which waits for an RCU grace period (tens of milliseconds). Fails
    /// with [`NetlinkError::is_exists`] when either name is taken.
    pub async fn add_veth_into(
        &self,
        name: &str,
        peer: &str,
        peer_mac: [u8; 6],
        mtu: Option<u32>,
        peer_ns: &impl AsRawFd,
    ) -> Result<(), NetlinkError> {
        // One TX and one RX queue per end, asked for explicitly: otherwise the kernel
        // allocates one per CPU and then trims the active ones to one, and that trim waits for
        // an expedited RCU grace period while holding RTNL (`veth_init_queues` →
        // `netif_set_real_num_tx_queues` → `synchronize_net`), once per end — seen in kernel
        // lock traces of a pod burst stalling the wiring and every other link operation on
        // the machine meanwhile. One active queue is what the kernel leaves anyway.
        fn queues<T>(b: LinkMessageBuilder<T>) -> LinkMessageBuilder<T> {
            b.append_extra_attribute(LinkAttribute::NumTxQueues(1))
                .append_extra_attribute(LinkAttribute::NumRxQueues(1))
        }
        let mut p = queues(
            LinkUnspec::new_with_name(peer)
                .address(peer_mac.to_vec())
                .setns_by_fd(peer_ns.as_raw_fd()),
        );
        let mut b = queues(
            LinkMessageBuilder::<LinkVeth>::new_with_info_kind(InfoKind::Veth)
                .name(name.to_owned())
                .up(),
        );
        if let Some(m) = mtu {
            p = p.mtu(m);
            b = b.mtu(m);
        }
        let msg = b.set_info_data(InfoData::Veth(InfoVeth::Peer(p.build()))).build();
        self.handle
            .link()
            .add(msg)
            .execute()
            .await
            .map_err(Self::req("add veth", name))
    }

    /// Creates VLAN `vlan_id` of link `parent` (an index in this connection's namespace)
    /// directly inside the namespace open as `into`, called `name` there, with `mac` and `mtu`,
    /// down. The parent stays where it is; the VLAN link lives in the pod's namespace. The
    /// kernel looks `name` up in *this* namespace first and would take an existing link there
    /// for a change request: the request is exclusive, so it fails with
    /// [`NetlinkError::is_exists`] when a link here has `name`, as when `name` or the VLAN ID is
    /// taken where the link would go.
    pub async fn add_vlan_into(
        &self,
        name: &str,
        parent: u32,
        vlan_id: u16,
        mac: [u8; 6],
        mtu: Option<u32>,
        into: &impl AsRawFd,
    ) -> Result<(), NetlinkError> {
        let b = LinkVlan::new(name, parent, vlan_id);
        self.add_child_into(b, "add vlan", name, mac, mtu, into).await
    }

    /// Creates macvlan `name` (bridge mode) of link `parent` with `mac` and `mtu`, directly in
    /// the namespace of `into`.
    pub async fn add_macvlan_into(
        &self,
        name: &str,
        parent: u32,
        mac: [u8; 6],
        mtu: Option<u32>,
        into: &impl AsRawFd,
    ) -> Result<(), NetlinkError> {
        let b = LinkMacVlan::new(name, parent, MacVlanMode::Bridge);
        self.add_child_into(b, "add macvlan", name, mac, mtu, into).await
    }

    /// Creates the link of `b` (a child of another link) with `mac` and `mtu` directly in the
    /// namespace of `into`.
    async fn add_child_into<T>(
        &self,
        b: LinkMessageBuilder<T>,
        what: &'static str,
        name: &str,
        mac: [u8; 6],
        mtu: Option<u32>,
        into: &impl AsRawFd,
    ) -> Result<(), NetlinkError> {
        let mut b = b.address(mac.to_vec()).setns_by_fd(into.as_raw_fd());
        if let Some(m) = mtu {
            b = b.mtu(m);
        }
        self.handle
            .link()
            .add(b.build())
            .execute()
            .await
            .map_err(Self::req(what, name))
    }

    /// Renames link `index` (down) from `from` to `to` and brings it up, in one request (the
    /// kernel applies the name before the flags).
    pub async fn rename_up(&self, index: u32, from: &str, to: &str) -> Result<(), NetlinkError> {
        self.handle
            .link()
            .set(LinkUnspec::new_with_index(index).name(to.to_owned()).up().build())
            .execute()
            .await
            .map_err(Self::req("rename link", from))
    }

    /// Brings link `index` (called `name` in errors) up.
    pub async fn set_up(&self, index: u32, name: &str) -> Result<(), NetlinkError> {
        self.handle
            .link()
            .set(LinkUnspec::new_with_index(index).up().build())
            .execute()
            .await
            .map_err(Self::req("set link up", name))
    }

    /// Brings the loopback device up. It is index 1 in every namespace (the kernel's
    /// `LOOPBACK_IFINDEX`), which saves looking it up; found by name should that ever fail.
    pub async fn loopback_up(&self) -> Result<(), NetlinkError> {
        match self.set_up(LOOPBACK_IFINDEX, "lo").await {
            Ok(()) => Ok(()),
            Err(NetlinkError::Request { source, .. }) if errno(&source) == Some(ENODEV) => {
                self.set_up(self.index("lo").await?, "lo").await
            }
            Err(e) => Err(e),
        }
    }

    /// Adds `addr` to link `index` (an existing identical address is fine).
    pub async fn add_address(&self, index: u32, addr: IpNet) -> Result<(), NetlinkError> {
        match self
            .handle
            .address()
            .add(index, addr.addr(), addr.prefix_len())
            .execute()
            .await
        {
            Ok(()) => Ok(()),
            Err(e) if errno(&e) == Some(EEXIST) => Ok(()),
            Err(e) => Err(Self::req("add address", &addr.to_string())(e)),
        }
    }

    /// The addresses of link `index`.
    pub async fn addresses(&self, index: u32) -> Result<Vec<IpAddr>, NetlinkError> {
        let mut out = Vec::new();
        let mut s = self.handle.address().get().set_link_index_filter(index).execute();
        while let Some(m) = s.try_next().await.map_err(Self::req("list addresses", "link"))? {
            for a in m.attributes {
                if let AddressAttribute::Address(ip) = a {
                    out.push(ip);
                }
            }
        }
        Ok(out)
    }

    /// Adds `route` via link `index` (an existing identical route is fine).
    pub async fn add_route(&self, index: u32, route: &RouteSpec) -> Result<(), NetlinkError> {
        let bad = || NetlinkError::Route(format!("{} via {}", route.dst, route.gateway));
        let msg = RouteMessageBuilder::<IpAddr>::new()
            .destination_prefix(route.dst.addr(), route.dst.prefix_len())
            .map_err(|_| bad())?
            .gateway(route.gateway)
            .map_err(|_| bad())?
            .output_interface(index)
            .build();
        match self.handle.route().add(msg).execute().await {
            Ok(()) => Ok(()),
            Err(e) if errno(&e) == Some(EEXIST) => Ok(()),
            Err(e) => Err(Self::req("add route", &route.dst.to_string())(e)),
        }
    }
}

#!/usr/bin/python3
"""Self-test of the sandbox cloud (run through sandbox/check).

1. ports: two Neutron ports bound to the local chassis, each plugged into its own network
   namespace (veth into br-int with iface-id), both ACTIVE, ping between them.
   With emulated nodes (sandbox/up --nodes N, N >= 2): the same between node-1 and node-2,
   so that the packets cross two OVN chassis (geneve over the node underlay); before that,
   each node's underlay address must be answered by ARP once, with its br-phy's MAC (pitfall
   12: a second answer with ul0's MAC could poison Open vSwitch's tunnel neighbour cache).
2. lb: an Octavia load balancer (ovn provider) on the service subnet, TCP listener, pool,
   two members served from two namespaces; a third namespace reaches both through the VIP.
3. cleanup: everything created here carries the tag/prefix below and is removed, also on
   failure (`--cleanup` removes leftovers of an interrupted run).
Exits non-zero with a clear message on the first failure; prints how long each step took.
"""
import argparse
import os
import re
import shlex
import socket
import struct
import subprocess
import sys
import time

import openstack

CHECK_TAG = "kuryr-sandbox-check"
PREFIX = "ksbx-chk"          # network namespaces, veths and resource names
SERVER_PORT = 8080
VIP_PORT = 80


class CheckFailed(Exception):
    pass


def log(msg):
    print(f"[{time.strftime('%H:%M:%S', time.gmtime())}] check: {msg}", flush=True)


def sh(cmd, check=True, timeout=30):
    p = subprocess.run(cmd, shell=isinstance(cmd, str), capture_output=True, text=True, timeout=timeout)
    if check and p.returncode != 0:
        c = cmd if isinstance(cmd, str) else " ".join(shlex.quote(a) for a in cmd)
        raise CheckFailed(f"command failed ({p.returncode}): {c}\n{p.stdout}{p.stderr}")
    return p.stdout


def load_env(path):
    env = {}
    with open(path) as f:
        for line in f:
            line = line.strip()
            if line and not line.startswith("#") and "=" in line:
                k, v = line.split("=", 1)
                env[k] = v.strip('"')
    return env


def wait(what, fn, timeout, interval=0.3):
    deadline = time.monotonic() + timeout
    while True:
        r = fn()
        if r:
            return r
        if time.monotonic() > deadline:
            raise CheckFailed(f"timed out after {timeout}s waiting for {what}")
        time.sleep(interval)


# ----------------------------------------------------------------------------- plumbing

class Plumbing:
    """Network namespaces plugged into an OVS br-int, like kuryr-daemon's ovs binding."""

    def __init__(self):
        self.servers = []

    @staticmethod
    def plug(port, ns, mtu, gateway, ovs_rundir="/var/run/openvswitch", host_netns=None):
        host_if = PREFIX + ns[len(PREFIX) + 1:]   # ksbx-chk-a -> ksbx-chka (IFNAMSIZ: 15)
        ip_addr = port.fixed_ips[0]["ip_address"]
        sh(["ip", "netns", "add", ns])
        sh(["ip", "link", "add", host_if, "type", "veth", "peer", "name", "eth0", "netns", ns])
        hx = []
        if host_netns:
            sh(["ip", "link", "set", host_if, "netns", host_netns])
            hx = ["ip", "netns", "exec", host_netns]
        sh(hx + ["ip", "link", "set", host_if, "mtu", str(mtu), "up"])
        nx = ["ip", "netns", "exec", ns]
        sh(nx + ["ip", "link", "set", "lo", "up"])
        sh(nx + ["ip", "link", "set", "eth0", "address", port.mac_address, "mtu", str(mtu), "up"])
        sh(nx + ["ip", "addr", "add", f"{ip_addr}/24", "dev", "eth0"])
        sh(nx + ["ip", "route", "add", "default", "via", gateway])
        # Pitfall 6: TCP through the netdev datapath needs TX checksum offload off.
        sh(nx + ["ethtool", "-K", "eth0", "tx", "off"])
        sh(hx + ["ethtool", "-K", host_if, "tx", "off"], check=False)
        sh(["ovs-vsctl", f"--db=unix:{ovs_rundir}/db.sock", "--timeout=10",
            "--may-exist", "add-port", "br-int", host_if, "--",
            "set", "Interface", host_if,
            f"external_ids:iface-id={port.id}",
            f"external_ids:attached-mac={port.mac_address}",
            "external_ids:iface-status=active"])
        return ip_addr

    def serve(self, ns, text):
        code = ("import socket\n"
                "s = socket.socket(); s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)\n"
                f"s.bind(('0.0.0.0', {SERVER_PORT})); s.listen(64)\n"
                "while True:\n"
                "    c, _ = s.accept(); c.sendall(b'%s\\n'); c.close()\n" % text)
        p = subprocess.Popen(["ip", "netns", "exec", ns, "/usr/bin/python3", "-c", code],
                             stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True)
        self.servers.append(p)
        wait(f"server in {ns}", lambda: f":{SERVER_PORT}" in sh(["ip", "netns", "exec", ns, "ss", "-ltn"]), 10)

    @staticmethod
    def cleanup():
        """Remove every namespace/veth/OVS port named with PREFIX, in any OVS instance."""
        for ns in sh(["ip", "netns", "list"], check=False).split("\n"):
            ns = ns.split(" ")[0]
            if ns.startswith(PREFIX):
                for pid in sh(["ip", "netns", "pids", ns], check=False).split():
                    sh(["kill", "-KILL", pid], check=False)
                sh(["ip", "netns", "del", ns], check=False)
        rundirs = ["/var/run/openvswitch"]
        home = os.environ.get("KURYR_SANDBOX_HOME", "/var/lib/kuryr-sandbox")
        run = os.path.join(home, "run")
        if os.path.isdir(run):
            rundirs += [os.path.join(run, d) for d in os.listdir(run) if d.startswith("ovs-")]
        for rd in rundirs:
            if not os.path.exists(os.path.join(rd, "db.sock")):
                continue
            vs = ["ovs-vsctl", f"--db=unix:{rd}/db.sock", "--timeout=5"]
            for p in sh(vs + ["list-ports", "br-int"], check=False).split():
                if p.startswith(PREFIX):
                    sh(vs + ["--if-exists", "del-port", "br-int", p], check=False)
        for line in sh(["ip", "-o", "link", "show"], check=False).split("\n"):
            if f" {PREFIX}" in line:
                name = line.split(":")[1].strip().split("@")[0]
                sh(["ip", "link", "del", name], check=False)


# ----------------------------------------------------------------------------- the check

class Check:
    def __init__(self, conn, env):
        self.conn = conn
        self.net = conn.network
        self.lb = conn.load_balancer
        self.env = env
        self.plumbing = Plumbing()
        self.mtu = int(env["POD_NETWORK_MTU"])
        self.gateway = env["POD_SUBNET_GATEWAY"]

    def port(self, name, host):
        p = self.net.create_port(name=f"{PREFIX}-{name}", network_id=self.env["POD_NETWORK_ID"],
                                 fixed_ips=[{"subnet_id": self.env["POD_SUBNET_ID"]}],
                                 security_group_ids=[self.env["POD_SG_ID"]],
                                 binding_host_id=host, device_owner="compute:kuryr")
        self.net.set_tags(p, [CHECK_TAG])
        return p

    def wait_active(self, ports, timeout=30):
        def all_active():
            states = {p.id: self.net.get_port(p.id) for p in ports}
            bad = [f"{s.name}: {s.status} (vif_type {s.binding_vif_type})" for s in states.values()
                   if s.status != "ACTIVE"]
            return not bad
        try:
            wait("ports ACTIVE", all_active, timeout, 0.5)
        except CheckFailed:
            states = [self.net.get_port(p.id) for p in ports]
            raise CheckFailed("ports not ACTIVE: " + ", ".join(
                f"{s.name}={s.status} vif_type={s.binding_vif_type} host={s.binding_host_id}" for s in states))

    def ping(self, ns, ip, count=3):
        p = subprocess.run(["ip", "netns", "exec", ns, "ping", "-c", str(count), "-i", "0.2", "-W", "2", ip],
                           capture_output=True, text=True)
        return p.returncode == 0, p.stdout.strip().split("\n")[-1]

    def ping_until(self, ns, ip, timeout=15):
        deadline = time.monotonic() + timeout
        while True:
            ok, summary = self.ping(ns, ip)
            if ok:
                return summary
            if time.monotonic() > deadline:
                raise CheckFailed(f"ping from {ns} to {ip} failed: {summary}")

    def step_ports(self):
        chassis = self.env["LOCAL_CHASSIS"]
        a, b = self.port("a", chassis), self.port("b", chassis)
        ip_a = self.plumbing.plug(a, f"{PREFIX}-a", self.mtu, self.gateway)
        ip_b = self.plumbing.plug(b, f"{PREFIX}-b", self.mtu, self.gateway)
        self.wait_active([a, b])
        log(f"ports {ip_a} and {ip_b} ACTIVE on chassis {chassis}")
        log(f"ping {ip_a} -> {ip_b}: {self.ping_until(f'{PREFIX}-a', ip_b)}")
        return (a, ip_a), (b, ip_b)

    def step_nodes(self):
        nodes = self.env.get("NODES", "").split()
        if len(nodes) < 2:
            log("no emulated nodes (sandbox/up --nodes 2): cross-chassis ping skipped")
            return False
        made = []
        for idx in ("1", "2"):
            node = self.env[f"NODE_{idx}_NAME"]
            p = self.port(f"n{idx}", self.env[f"NODE_{idx}_BINDING_HOST"])
            ip = self.plumbing.plug(p, f"{PREFIX}-n{idx}", self.mtu, self.gateway,
                                    ovs_rundir=self.env[f"NODE_{idx}_OVS_RUNDIR"],
                                    host_netns=self.env.get(f"NODE_{idx}_NETNS") or None)
            made.append((node, p, ip))
        self.wait_active([m[1] for m in made])
        (n1, _, ip1), (n2, _, ip2) = made
        log(f"ports {ip1} on {n1} and {ip2} on {n2} ACTIVE")
        before = self.tunnel_tx(1, 2)
        log(f"ping {ip1} ({n1}) -> {ip2} ({n2}): {self.ping_until(f'{PREFIX}-n1', ip2)}")
        sent = self.tunnel_tx(1, 2) - before
        if sent <= 0:
            raise CheckFailed(f"ping worked but no packet left {n1} through its geneve tunnel to {n2}")
        log(f"{sent} packets went {n1} -> {n2} through the geneve tunnel over the node underlay")
        return True

    def step_underlay_arp(self):
        """Every node's underlay address answered by ARP exactly once, by its br-phy."""
        nodes = self.env.get("NODES", "").split()
        for a in nodes:
            for b in nodes:
                if a == b:
                    continue
                ia, ib = a.split("-")[-1], b.split("-")[-1]
                target = self.env[f"NODE_{ib}_UNDERLAY_IP"]
                want = sh(["ip", "-n", self.env[f"NODE_{ib}_NETNS"], "-br", "link", "show", "br-phy"]).split()[2]
                out = sh(["ip", "netns", "exec", self.env[f"NODE_{ia}_NETNS"], sys.executable,
                          os.path.abspath(__file__), "--arp-probe", "br-phy", target])
                macs = out.split()
                if macs != [want]:
                    raise CheckFailed(
                        f"ARP for {b}'s underlay address {target} from {a} answered by {macs} "
                        f"(want only {b}'s br-phy, {want}): the node's kernel answers on ul0 (arp_ignore)")
                log(f"ARP {a} -> {b} ({target}): answered once, by br-phy {want}")

    def step_node_routes(self):
        """Pitfall 13: every node's vswitchd routes only by its own underlay route (it ignores
        the namespace's kernel routes, whose re-reads on each veth change lost tunnelled packets)."""
        for node in self.env.get("NODES", "").split():
            i = node.split("-")[-1]
            ctl = f"{self.env[f'NODE_{i}_OVS_RUNDIR']}/ovs-vswitchd.ctl"
            routes = [l.strip() for l in sh(["ovs-appctl", "-t", ctl, "ovs/route/show"]).splitlines()[1:]
                      if l.strip()]
            net = self.env[f"NODE_{i}_UNDERLAY_IP"].rsplit(".", 1)[0] + ".0/24"
            if len(routes) != 1 or not routes[0].startswith(f"User: {net} dev br-phy"):
                raise CheckFailed(
                    f"{node}'s ovs-vswitchd routes {routes} (want only 'User: {net} dev br-phy'): "
                    f"it follows kernel routes (--disable-system-route missing) or lost its underlay route")
            log(f"{node}: ovs-vswitchd routes only by its underlay route ({net} dev br-phy)")

    def tunnel_tx(self, src, dst):
        """tx_packets of chassis node-<src>'s geneve port towards node-<dst>'s underlay IP."""
        vs = ["ovs-vsctl", f"--db=unix:{self.env[f'NODE_{src}_OVS_RUNDIR']}/db.sock", "--timeout=5"]
        remote = self.env[f"NODE_{dst}_UNDERLAY_IP"]
        out = sh(vs + ["--bare", "--columns=name", "find", "Interface", "type=geneve",
                       f"options:remote_ip={remote}"]).split()
        if not out:
            raise CheckFailed(f"node-{src} has no geneve tunnel to {remote}")
        # Live counters through the bridge's OpenFlow socket (the DB copy lags by seconds).
        rundir = self.env[f"NODE_{src}_OVS_RUNDIR"]
        dump = sh(["ovs-ofctl", "dump-ports", f"unix:{rundir}/br-int.mgmt", out[0]])
        m = re.search(r"tx pkts=(\d+)", dump)
        if not m:
            raise CheckFailed(f"cannot read tunnel counters of node-{src}: {dump}")
        return int(m.group(1))

    def wait_lb(self, lb_id, what, timeout=60):
        def active():
            lb = self.lb.get_load_balancer(lb_id)
            if lb.provisioning_status == "ERROR":
                raise CheckFailed(f"load balancer went to ERROR after {what}")
            return lb.provisioning_status == "ACTIVE"
        wait(f"load balancer ACTIVE after {what}", active, timeout, 0.3)

    def step_lb(self, a, b):
        (pa, ip_a), (pb, ip_b) = a, b
        self.plumbing.serve(f"{PREFIX}-a", "member-a")
        self.plumbing.serve(f"{PREFIX}-b", "member-b")
        pc = self.port("c", self.env["LOCAL_CHASSIS"])
        self.plumbing.plug(pc, f"{PREFIX}-c", self.mtu, self.gateway)
        self.wait_active([pc])
        t = time.monotonic()
        lb = self.lb.create_load_balancer(name=f"{PREFIX}-lb", vip_subnet_id=self.env["SERVICE_SUBNET_ID"],
                                          provider="ovn", tags=[CHECK_TAG])
        self.wait_lb(lb.id, "create")
        listener = self.lb.create_listener(name=f"{PREFIX}-listener", loadbalancer_id=lb.id,
                                           protocol="TCP", protocol_port=VIP_PORT)
        self.wait_lb(lb.id, "listener")
        pool = self.lb.create_pool(name=f"{PREFIX}-pool", listener_id=listener.id, protocol="TCP",
                                   lb_algorithm="SOURCE_IP_PORT")
        self.wait_lb(lb.id, "pool")
        for ip in (ip_a, ip_b):
            self.lb.create_member(pool, address=ip, protocol_port=SERVER_PORT,
                                  subnet_id=self.env["POD_SUBNET_ID"])
            self.wait_lb(lb.id, f"member {ip}")
        vip = self.lb.get_load_balancer(lb.id).vip_address
        log(f"load balancer {vip}:{VIP_PORT} (ovn) with members {ip_a}, {ip_b} ACTIVE "
            f"in {time.monotonic() - t:.1f}s")
        seen = {}
        deadline = time.monotonic() + 20
        while len(seen) < 2:
            r = subprocess.run(["ip", "netns", "exec", f"{PREFIX}-c", "nc", "-w", "2", "-N", vip, str(VIP_PORT)],
                               stdin=subprocess.DEVNULL, capture_output=True, text=True, timeout=10)
            ans = r.stdout.strip()
            if ans:
                seen[ans] = seen.get(ans, 0) + 1
            if time.monotonic() > deadline:
                raise CheckFailed(f"connections to VIP {vip}:{VIP_PORT} reached only {seen or 'nothing'} "
                                  "(expected member-a and member-b)")
        log(f"connections from {PREFIX}-c to VIP {vip}:{VIP_PORT} answered by: {seen}")


def cleanup(conn, quiet=False):
    """Delete everything the check creates (by tag / name prefix), tolerant of partial state."""
    errors = []
    try:
        for lb in conn.load_balancer.load_balancers(tags=CHECK_TAG):
            conn.load_balancer.delete_load_balancer(lb, cascade=True, ignore_missing=True)
            deadline = time.monotonic() + 30
            while conn.load_balancer.find_load_balancer(lb.id, ignore_missing=True) is not None:
                if time.monotonic() > deadline:
                    errors.append(f"load balancer {lb.id} still there after 30s")
                    break
                time.sleep(0.5)
    except Exception as e:  # keep cleaning the rest
        errors.append(f"load balancers: {e}")
    try:
        for p in conn.network.ports(tags=CHECK_TAG):
            conn.network.delete_port(p, ignore_missing=True)
    except Exception as e:
        errors.append(f"ports: {e}")
    try:
        Plumbing.cleanup()
    except Exception as e:
        errors.append(f"namespaces: {e}")
    if errors:
        raise CheckFailed("cleanup incomplete: " + "; ".join(errors))


def arp_probe(ifname, target):
    """Sends one ARP request for `target` out of `ifname` (in the caller's namespace) and prints
    the MAC of every answer within a second, one per line."""
    s = socket.socket(socket.AF_PACKET, socket.SOCK_RAW, socket.htons(0x0806))
    s.bind((ifname, 0))
    mac = s.getsockname()[4]
    import fcntl
    addr = fcntl.ioctl(socket.socket(), 0x8915, struct.pack("256s", ifname.encode()[:15]))[20:24]
    req = (b"\xff" * 6 + mac + b"\x08\x06" + struct.pack("!HHBBH", 1, 0x0800, 6, 4, 1)
           + mac + addr + b"\x00" * 6 + socket.inet_aton(target))
    s.send(req)
    s.settimeout(0.2)
    end = time.monotonic() + 1.0
    while time.monotonic() < end:
        try:
            d = s.recv(2048)
        except socket.timeout:
            continue
        if d[20:22] == b"\x00\x02" and d[28:32] == socket.inet_aton(target):
            print(":".join("%02x" % x for x in d[22:28]))


def main():
    if len(sys.argv) == 4 and sys.argv[1] == "--arp-probe":
        arp_probe(sys.argv[2], sys.argv[3])
        return 0
    ap = argparse.ArgumentParser()
    ap.add_argument("--topology-env", default=os.path.join(os.environ.get("KURYR_SANDBOX_HOME", "/var/lib/kuryr-sandbox"), "topology.env"))
    ap.add_argument("--cleanup", action="store_true", help="only remove leftovers of a previous check")
    args = ap.parse_args()
    if not os.path.exists(args.topology_env):
        print(f"check: FAILED: {args.topology_env} missing; run sandbox/up first", file=sys.stderr)
        return 1
    env = load_env(args.topology_env)
    os.environ["OS_CLIENT_CONFIG_FILE"] = env["OS_CLIENT_CONFIG_FILE"]
    conn = openstack.connect(cloud=env["OS_CLOUD"])
    if args.cleanup:
        cleanup(conn)
        return 0

    total = time.monotonic()
    timings = []
    failed = None
    chk = Check(conn, env)
    try:
        t = time.monotonic()
        cleanup(conn)  # leftovers of an interrupted run
        timings.append(("pre-clean", time.monotonic() - t))
        t = time.monotonic()
        a, b = chk.step_ports()
        timings.append(("1 ports+ping (local chassis)", time.monotonic() - t))
        t = time.monotonic()
        if len(env.get("NODES", "").split()) >= 2:
            chk.step_underlay_arp()
            chk.step_node_routes()
            timings.append(("1a underlay ARP and routes", time.monotonic() - t))
        t = time.monotonic()
        if chk.step_nodes():
            timings.append(("1b ports+ping across node chassis", time.monotonic() - t))
        t = time.monotonic()
        chk.step_lb(a, b)
        timings.append(("2 load balancer", time.monotonic() - t))
    except CheckFailed as e:
        failed = str(e)
    except openstack.exceptions.SDKException as e:
        failed = f"OpenStack API error: {e}"
    finally:
        t = time.monotonic()
        try:
            cleanup(conn)
        except CheckFailed as e:
            failed = failed or str(e)
        timings.append(("3 cleanup", time.monotonic() - t))
    for name, secs in timings:
        log(f"step {name}: {secs:.1f}s")
    if failed:
        print(f"check: FAILED: {failed}", file=sys.stderr)
        return 1
    log(f"PASSED in {time.monotonic() - total:.1f}s")
    return 0


if __name__ == "__main__":
    sys.exit(main())

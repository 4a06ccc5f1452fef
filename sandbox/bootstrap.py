#!/usr/bin/python3
"""Bootstrap the sandbox cloud: Keystone projects/users/catalog and Kuryr's base topology.

Idempotent: everything is looked up first (by name, in its project) and only created when
missing; Neutron resources carry the tag `kuryr-sandbox`. Writes clouds.yaml, kuryr.conf and
topology.env. One Python process, so it costs seconds, not one CLI start-up per call.
Called by sandbox/up; see docs/sandbox.md.
"""
import argparse
import os
import sys
import time

import openstack
import yaml

TAG = "kuryr-sandbox"
AUTH_URL = "http://127.0.0.1:5000/v3"
REGION = "RegionOne"
K8S_PROJECT = "k8s"          # project owning Kuryr's resources (pods' ports, LBs, ...)
SERVICE_PROJECT = "service"  # service users' project

POD_POOL_CIDR = "10.10.0.0/16"      # pod subnet pool; namespace subnets are /24 from it
POD_POOL_PREFIXLEN = 24
POD_SUBNET_CIDR = "10.10.0.0/24"    # default pod subnet, allocated from the pool
SERVICE_SUBNET_CIDR = "10.96.0.0/16"
# Kubernetes allocates ClusterIPs from the lower half; Neutron allocates (router port,
# anything without a fixed IP) only from the upper half, so the two never collide.
SERVICE_CLUSTER_IP_RANGE = "10.96.0.0/17"
SERVICE_ALLOCATION_POOL = ("10.96.128.1", "10.96.255.253")
SERVICE_GATEWAY = "10.96.255.254"

ENDPOINTS = {  # service type -> (service name, URL)
    "network": ("neutron", "http://127.0.0.1:9696"),
    "load-balancer": ("octavia", "http://127.0.0.1:9876"),
}


def log(msg):
    print(f"[{time.strftime('%H:%M:%S', time.gmtime())}] bootstrap: {msg}", file=sys.stderr, flush=True)


def cloud(username, project, password):
    return {
        "auth": {
            "auth_url": AUTH_URL,
            "username": username,
            "password": password,
            "project_name": project,
            "user_domain_name": "Default",
            "project_domain_name": "Default",
        },
        "region_name": REGION,
        "interface": "public",
        "identity_api_version": 3,
    }


def connect(c):
    return openstack.connect(load_yaml_config=False, load_envvars=False, **c)


def retry(fn, what, attempts=20):
    """Keystone under uwsgi may still be warming up: retry transient failures briefly."""
    for i in range(attempts):
        try:
            return fn()
        except (openstack.exceptions.HttpException, openstack.exceptions.SDKException) as e:
            code = getattr(e, "status_code", None)
            if code is not None and code < 500 and code not in (401,):
                raise
            if i == attempts - 1:
                raise
            log(f"{what}: {e!s:.200} (retrying)")
            time.sleep(1)


# ----------------------------------------------------------------------------- Keystone

def ensure_keystone(admin, password):
    idn = admin.identity
    projects = {}
    for name in (SERVICE_PROJECT, K8S_PROJECT):
        p = idn.find_project(name, domain_id="default")
        if p is None:
            log(f"creating project {name}")
            p = idn.create_project(name=name, domain_id="default", description="kuryr sandbox")
        projects[name] = p
    role = idn.find_role("admin")
    users = {"neutron": SERVICE_PROJECT, "octavia": SERVICE_PROJECT, "kuryr": K8S_PROJECT}
    for uname, pname in users.items():
        u = idn.find_user(uname, domain_id="default")
        if u is None:
            log(f"creating user {uname}")
            u = idn.create_user(name=uname, password=password, domain_id="default",
                                default_project_id=projects[pname].id)
        for proj in {projects[pname].id, projects[SERVICE_PROJECT].id}:
            if not idn.validate_user_has_project_role(proj, u, role):
                log(f"granting admin on {proj} to {uname}")
                idn.assign_project_role_to_user(proj, u, role)
                # Pitfall 3: an assignment once failed silently; verify the one just made.
                if not idn.validate_user_has_project_role(proj, u, role):
                    raise SystemExit(f"role assignment admin/{uname}/{proj} did not stick")
    for stype, (sname, url) in ENDPOINTS.items():
        svc = next(iter(idn.services(type=stype)), None)
        if svc is None:
            log(f"creating service {sname} ({stype})")
            svc = idn.create_service(name=sname, type=stype, enabled=True)
        have = {e.interface for e in idn.endpoints(service_id=svc.id) if e.url == url}
        for iface in ("public", "internal", "admin"):
            if iface not in have:
                idn.create_endpoint(service_id=svc.id, interface=iface, url=url, region_id=REGION)
    return projects


# ----------------------------------------------------------------------------- Neutron

def tagged(net, res):
    if TAG not in (res.tags or []):
        net.set_tags(res, sorted(set(res.tags or []) | {TAG}))
    return res


def find_one(items, what):
    items = list(items)
    if len(items) > 1:
        raise SystemExit(f"more than one {what} found: {[i.id for i in items]}; run sandbox/down --purge")
    return items[0] if items else None


def ensure_topology(net, project_id):
    q = {"project_id": project_id}
    pool = find_one(net.subnet_pools(name=f"{TAG}-pod-pool", **q), "pod subnet pool")
    if pool is None:
        log("creating pod subnet pool")
        pool = net.create_subnet_pool(name=f"{TAG}-pod-pool", prefixes=[POD_POOL_CIDR],
                                      default_prefixlen=POD_POOL_PREFIXLEN, min_prefixlen=16,
                                      max_prefixlen=28)
    tagged(net, pool)

    def network(name):
        n = find_one(net.networks(name=name, **q), f"network {name}")
        if n is None:
            log(f"creating network {name}")
            n = net.create_network(name=name)
        return tagged(net, n)

    def subnet(name, network_id, **kw):
        s = find_one(net.subnets(name=name, network_id=network_id, **q), f"subnet {name}")
        if s is None:
            log(f"creating subnet {name}")
            s = net.create_subnet(name=name, network_id=network_id, ip_version=4, enable_dhcp=False, **kw)
        return tagged(net, s)

    pod_net = network(f"{TAG}-pod-net")
    pod_subnet = subnet(f"{TAG}-pod-subnet", pod_net.id, cidr=POD_SUBNET_CIDR, subnetpool_id=pool.id)
    svc_net = network(f"{TAG}-service-net")
    svc_subnet = subnet(f"{TAG}-service-subnet", svc_net.id, cidr=SERVICE_SUBNET_CIDR,
                        gateway_ip=SERVICE_GATEWAY,
                        allocation_pools=[{"start": SERVICE_ALLOCATION_POOL[0],
                                           "end": SERVICE_ALLOCATION_POOL[1]}])

    router = find_one(net.routers(name=f"{TAG}-router", **q), "router")
    if router is None:
        log("creating router")
        router = net.create_router(name=f"{TAG}-router")
    tagged(net, router)
    attached = {ip["subnet_id"] for p in net.ports(device_id=router.id) for ip in p.fixed_ips}
    for s in (pod_subnet, svc_subnet):
        if s.id not in attached:
            log(f"attaching subnet {s.name} to the router")
            net.add_interface_to_router(router, subnet_id=s.id)

    sg = find_one(net.security_groups(name=f"{TAG}-pod-sg", **q), "security group")
    if sg is None:
        log("creating cluster security group")
        sg = net.create_security_group(name=f"{TAG}-pod-sg",
                                       description="kuryr sandbox: pods and services of the cluster")
    tagged(net, sg)
    allow_ingress(net, sg, [POD_POOL_CIDR, SERVICE_SUBNET_CIDR])
    return dict(pool=pool, pod_net=pod_net, pod_subnet=pod_subnet, svc_net=svc_net,
                svc_subnet=svc_subnet, router=router, sg=sg)


def allow_ingress(net, sg, prefixes):
    have = {(r.direction, r.ether_type, r.protocol, r.remote_ip_prefix)
            for r in net.security_group_rules(security_group_id=sg.id)}
    for prefix in prefixes:
        if ("ingress", "IPv4", None, prefix) not in have:
            net.create_security_group_rule(security_group_id=sg.id, direction="ingress",
                                           ether_type="IPv4", remote_ip_prefix=prefix)


def ensure_external(admin_net, physnet, cidr, gateway):
    """The "outside": a flat provider network on `physnet` (bridged to the machine's root
    namespace by the gateway node's br-ex), router:external, with a subnet for floating IPs.
    Created by admin (provider attributes); any project may allocate floating IPs on it."""
    name = f"{TAG}-external"
    ext = find_one(admin_net.networks(name=name), f"network {name}")
    if ext is None:
        log(f"creating external network {name} (flat, physnet {physnet})")
        try:
            ext = admin_net.create_network(name=name, is_router_external=True,
                                           provider_network_type="flat",
                                           provider_physical_network=physnet)
        except openstack.exceptions.BadRequestException as e:
            raise SystemExit(f"creating the external network failed ({e}); a Neutron started by an "
                             f"older sandbox/up lacks [ml2_type_flat] flat_networks = {physnet}: "
                             "run sandbox/down, then sandbox/up")
    tagged(admin_net, ext)
    sname = f"{TAG}-external-subnet"
    sub = find_one(admin_net.subnets(name=sname, network_id=ext.id), f"subnet {sname}")
    if sub is None:
        log(f"creating external subnet {sname} ({cidr}, gateway {gateway})")
        base = cidr.rsplit(".", 1)[0]
        sub = admin_net.create_subnet(name=sname, network_id=ext.id, ip_version=4, cidr=cidr,
                                      gateway_ip=gateway, enable_dhcp=False,
                                      allocation_pools=[{"start": f"{base}.10", "end": f"{base}.250"}])
    tagged(admin_net, sub)
    return ext, sub


def ensure_router_gateway(net, router, ext):
    info = router.external_gateway_info or {}
    if info.get("network_id") != ext.id:
        log(f"setting the router's gateway on {ext.name}")
        net.update_router(router, external_gateway_info={"network_id": ext.id})


def ensure_quotas(admin_net, project_id):
    """NetworkPolicy: one security group per policy and one rule per (peer address x port);
    Neutron's defaults (10 groups, 100 rules) fit about one policy. Set on the project (the
    [quotas] of neutron.conf say the same, for a Neutron started before this was written)."""
    want = {"security_groups": 1000, "security_group_rules": 100000}
    q = admin_net.get_quota(project_id)
    if any(getattr(q, k, 0) not in (v, -1) for k, v in want.items()):
        log("raising the project's security group quotas")
        admin_net.update_quota(project_id, **want)


def wait_agents_alive(admin, chassis, timeout=40):
    """Neutron binds ports only to hosts whose OVN controller agent is alive."""
    deadline = time.monotonic() + timeout
    while True:
        alive = {a.host for a in admin.network.agents(binary="ovn-controller") if a.is_alive}
        missing = [c for c in chassis if c not in alive]
        if not missing:
            return
        if time.monotonic() > deadline:
            raise SystemExit(f"Neutron does not see a live OVN controller agent for: {', '.join(missing)} "
                             "(see the ovn-controller*.log files)")
        time.sleep(1)


# ----------------------------------------------------------------------------- outputs

def write(path, text, mode=0o644):
    tmp = f"{path}.tmp"
    with open(tmp, "w") as f:
        f.write(text)
    os.chmod(tmp, mode)
    os.replace(tmp, path)


def kuryr_conf(password, project_id, t):
    return f"""# Generated by sandbox/up for the kuryr-sandbox cloud. To use a real OpenStack instead,
# replace this file (and clouds.yaml); nothing else in the project points at the sandbox.
[kubernetes]
endpoints_driver_octavia_provider = ovn
pod_subnets_driver = default

[neutron]
auth_type = password
auth_url = {AUTH_URL}
username = kuryr
password = {password}
project_name = {K8S_PROJECT}
user_domain_name = Default
project_domain_name = Default
region_name = {REGION}

[neutron_defaults]
project = {project_id}
pod_subnet = {t['pod_subnet'].id}
pod_security_groups = {t['sg'].id}
ovs_bridge = br-int
service_subnet = {t['svc_subnet'].id}
external_svc_net = {t['ext_net'].id}
external_svc_subnet = {t['ext_subnet'].id}
network_device_mtu = {t['pod_net'].mtu}

[namespace_subnet]
pod_subnet_pool = {t['pool'].id}
pod_router = {t['router'].id}

[octavia_defaults]
lb_algorithm = SOURCE_IP_PORT
enforce_sg_rules = False
member_mode = L2
"""


def topology_env(args, project_id, t, nodes):
    lines = [
        "# Generated by sandbox/up; source it (set -a; . /var/lib/kuryr-sandbox/topology.env; set +a).",
        f"KURYR_SANDBOX_HOME={args.home}",
        f"OS_CLIENT_CONFIG_FILE={args.clouds_yaml}",
        "OS_CLOUD=kuryr-sandbox",
        "OS_CLOUD_ADMIN=kuryr-sandbox-admin",
        f"KURYR_CONF={args.kuryr_conf}",
        f"KURYR_SANDBOX_PROJECT_ID={project_id}",
        f"POD_NETWORK_ID={t['pod_net'].id}",
        f"POD_SUBNET_ID={t['pod_subnet'].id}",
        f"POD_SUBNET_CIDR={t['pod_subnet'].cidr}",
        f"POD_SUBNET_GATEWAY={t['pod_subnet'].gateway_ip}",
        f"POD_SUBNETPOOL_ID={t['pool'].id}",
        f"POD_SUBNETPOOL_CIDR={POD_POOL_CIDR}",
        f"POD_NETWORK_MTU={t['pod_net'].mtu}",
        f"SERVICE_NETWORK_ID={t['svc_net'].id}",
        f"SERVICE_SUBNET_ID={t['svc_subnet'].id}",
        f"SERVICE_SUBNET_CIDR={t['svc_subnet'].cidr}",
        f"SERVICE_CLUSTER_IP_RANGE={SERVICE_CLUSTER_IP_RANGE}",
        f"ROUTER_ID={t['router'].id}",
        f"EXTERNAL_NETWORK_ID={t['ext_net'].id}",
        f"EXTERNAL_SUBNET_ID={t['ext_subnet'].id}",
        f"EXTERNAL_SUBNET_CIDR={t['ext_subnet'].cidr}",
        f"EXTERNAL_GATEWAY={t['ext_subnet'].gateway_ip}",
        f"POD_SG_ID={t['sg'].id}",
        f"LOCAL_CHASSIS={args.chassis}",
        "LOCAL_OVS_RUNDIR=/var/run/openvswitch",
        "LOCAL_BRIDGE=br-int",
        f"NODES=\"{' '.join(nodes)}\"",
    ]
    for node in nodes:
        i = node.split("-", 1)[1]
        lines += [
            f"NODE_{i}_NAME={node}",
            f"NODE_{i}_BINDING_HOST={node}",
            f"NODE_{i}_NETNS=kuryr-{node}",
            f"NODE_{i}_OVS_RUNDIR={args.home}/run/ovs-{node}",
            f"NODE_{i}_BRIDGE=br-int",
            f"NODE_{i}_UNDERLAY_IP=172.30.0.{10 + int(i)}",
        ]
    return "\n".join(lines) + "\n"


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--home", required=True)
    ap.add_argument("--chassis", required=True)
    ap.add_argument("--nodes", default="")
    ap.add_argument("--clouds-yaml", required=True)
    ap.add_argument("--kuryr-conf", required=True)
    ap.add_argument("--topology-env", required=True)
    ap.add_argument("--external-physnet", required=True)
    ap.add_argument("--external-cidr", required=True)
    ap.add_argument("--external-gateway", required=True)
    args = ap.parse_args()
    password = os.environ["SBX_PASSWORD"]
    nodes = args.nodes.split()
    t0 = time.monotonic()

    admin_cloud = cloud("admin", "admin", password)
    kuryr_cloud = cloud("kuryr", K8S_PROJECT, password)
    admin = connect(admin_cloud)
    projects = retry(lambda: ensure_keystone(admin, password), "keystone bootstrap")
    log(f"keystone ready after {time.monotonic() - t0:.1f}s")
    project_id = projects[K8S_PROJECT].id

    clouds = {"clouds": {"kuryr-sandbox": kuryr_cloud, "kuryr-sandbox-admin": admin_cloud}}
    for path in (args.clouds_yaml, os.path.join(args.home, "etc", "clouds.yaml")):
        write(path, yaml.safe_dump(clouds, sort_keys=False), 0o600)

    # A new session: the first token's catalog may predate the endpoints created just now.
    admin = connect(admin_cloud)
    wait_agents_alive(admin, [args.chassis] + nodes)
    log(f"OVN controller agents alive ({', '.join([args.chassis] + nodes)}) after {time.monotonic() - t0:.1f}s")
    kuryr = connect(kuryr_cloud)
    topo = retry(lambda: ensure_topology(kuryr.network, project_id), "topology")
    retry(lambda: ensure_quotas(admin.network, project_id), "quotas")
    ext, ext_subnet = retry(lambda: ensure_external(admin.network, args.external_physnet,
                                                    args.external_cidr, args.external_gateway),
                            "external network")
    retry(lambda: ensure_router_gateway(kuryr.network, topo["router"], ext), "router gateway")
    # The OVN provider keeps clients' source addresses: LoadBalancer Services' clients on the
    # outside reach the pods as themselves, so the pods' security group admits the outside.
    retry(lambda: allow_ingress(kuryr.network, topo["sg"], [ext_subnet.cidr]), "outside ingress rule")
    topo.update(ext_net=ext, ext_subnet=ext_subnet)

    for path, text in ((args.kuryr_conf, kuryr_conf(password, project_id, topo)),
                       (args.topology_env, topology_env(args, project_id, topo, nodes))):
        write(path, text, 0o600)
        write(os.path.join(args.home, "etc", os.path.basename(path)), text, 0o600)
    log(f"done in {time.monotonic() - t0:.1f}s")


if __name__ == "__main__":
    main()

"""The sandbox cloud's own speed for bench/service-burst's comparison: N fully populated load
balancers (one TCP listener, a pool, M members) created at once straight through Octavia's API
(openstacksdk, one thread each, no kuryr-rs), timed until each is ACTIVE, then deleted.
Prints `octavia_baseline lbs=N active_p50_ms=… active_p99_ms=…`."""
import os, sys, time, threading, uuid
import openstack

n = int(sys.argv[1]) if len(sys.argv) > 1 else 20
members = int(sys.argv[2]) if len(sys.argv) > 2 else 3
env = {}
with open(os.environ.get("KURYR_SANDBOX_TOPOLOGY", "/var/lib/kuryr-sandbox/topology.env")) as f:
    for line in f:
        if "=" in line and not line.startswith("#"):
            k, v = line.strip().split("=", 1)
            env[k] = v.strip('"')
subnet = env["SERVICE_SUBNET_ID"]
tag = "octavia-baseline-" + uuid.uuid4().hex[:8]
conn = openstack.connect(cloud="kuryr-sandbox")
times, errors = [], []

def one(i):
    c = openstack.connect(cloud="kuryr-sandbox")
    body = {"loadbalancer": {"name": "%s-%d" % (tag, i), "vip_subnet_id": subnet, "provider": "ovn", "tags": [tag],
            "listeners": [{"name": "l", "protocol": "TCP", "protocol_port": 80,
                           "default_pool": {"name": "p", "protocol": "TCP", "lb_algorithm": "SOURCE_IP_PORT",
                                            "members": [{"address": "10.96.201.%d" % (10 + m), "protocol_port": 8080,
                                                         "subnet_id": subnet} for m in range(members)]}}]}}
    t = time.monotonic()
    try:
        r = c.load_balancer.post("lbaas/loadbalancers", json=body)
        if r.status_code != 201:
            errors.append(r.text[:200]); return
        lb = r.json()["loadbalancer"]["id"]
        while True:
            s = c.load_balancer.get("lbaas/loadbalancers/%s" % lb).json()["loadbalancer"]["provisioning_status"]
            if s == "ACTIVE":
                times.append((time.monotonic() - t) * 1000); return
            if s == "ERROR" or time.monotonic() - t > 300:
                errors.append(s); return
            time.sleep(0.1)
    except Exception as e:
        errors.append(str(e)[:200])

threads = [threading.Thread(target=one, args=(i,)) for i in range(n)]
for t in threads: t.start()
for t in threads: t.join()
for lb in conn.load_balancer.load_balancers(tags=tag):
    conn.load_balancer.delete_load_balancer(lb.id, cascade=True, ignore_missing=True)
times.sort()
pct = lambda q: times[min(len(times) - 1, max(0, -(-int(q * len(times)) // 100) - 1))] if times else float("nan")
for e in errors:
    print("error:", e, file=sys.stderr)
print("octavia_baseline lbs=%d active_p50_ms=%.0f active_p99_ms=%.0f errors=%d" % (n, pct(50), pct(99), len(errors)))

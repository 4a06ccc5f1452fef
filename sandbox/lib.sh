# shellcheck shell=bash
# Shared helpers for sandbox/{up,down,status,check}. Sourced, never executed.
#
# Everything the sandbox owns lives under $SBX_HOME:
#   logs/  one log file per component        run/  pid files, sockets of node OVS instances
#   etc/   generated configuration           data/ databases, keys, OVS/OVN db files
# The local chassis' Open vSwitch keeps its sockets in the standard place
# (/var/run/openvswitch) so that a plain `ovs-vsctl` talks to it, like on a real node.

SBX_HOME=${KURYR_SANDBOX_HOME:-/var/lib/kuryr-sandbox}
SBX_LOG=$SBX_HOME/logs
SBX_RUN=$SBX_HOME/run
SBX_ETC=$SBX_HOME/etc
SBX_DATA=$SBX_HOME/data
SBX_SRC=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)

# Outputs for developers and tests (stable paths, under the state root so that nothing is
# written into a user's home directory).
SBX_OUT_DIR=$SBX_HOME
SBX_CLOUDS_YAML=$SBX_OUT_DIR/clouds.yaml
SBX_KURYR_CONF=$SBX_OUT_DIR/kuryr.conf
SBX_TOPOLOGY_ENV=$SBX_OUT_DIR/topology.env
# Crashes of sandbox daemons, one line each, written by sandbox/supervise (read: sandbox/crashes).
SBX_CRASHES=$SBX_LOG/crashes.log

# Open vSwitch. Debian bookworm's only version, 3.1.0, aborts in its userspace conntrack under
# short pod-to-pod connections (docs/sandbox.md, "Open vSwitch"); the sandbox runs Open vSwitch
# 3.5 from Debian 13 (trixie) instead: its binary packages, unpacked by debootstrap into a root of
# their own, run through that root's own loader. `sandbox/up --ovs bookworm` runs 3.1.0 (to
# reproduce the crash). The root survives `down --purge`, like the installed packages.
SBX_OVS_ROOT=${KURYR_SANDBOX_OVS_ROOT:-/opt/kuryr-sandbox/ovs-debian13}
SBX_OVS_FLAVOUR_FILE=$SBX_ETC/ovs-flavour

# Local chassis (the machine itself).
SBX_LOCAL_CHASSIS=${KURYR_SANDBOX_CHASSIS:-$(hostname -s)}
LOCAL_OVS_RUNDIR=/var/run/openvswitch
OVN_RUNDIR_LOCAL=/var/run/ovn

# Underlay for emulated nodes (exists only in the node namespaces and one Linux bridge).
SBX_UNDERLAY_BRIDGE=ksbx-underlay
SBX_UNDERLAY_PREFIX=172.30.0      # node-i gets .(10+i)/24
# The "outside": a flat provider network (physnet `external`) bridged by the gateway node's
# br-ex to a veth whose root-namespace end carries the external subnet's gateway address.
# Floating IPs of LoadBalancer Services come from it and answer from the root namespace.
SBX_EXTERNAL_PHYSNET=external
SBX_EXTERNAL_VETH=ksbx-ex         # root-namespace end
SBX_EXTERNAL_CIDR=172.24.4.0/24
SBX_EXTERNAL_GATEWAY=172.24.4.1   # on $SBX_EXTERNAL_VETH
SBX_GATEWAY_NODE=node-1           # the OVN gateway chassis (router gateway ports live there)

export DEBIAN_FRONTEND=noninteractive

PACKAGES=(
  mariadb-server python3-pymysql
  keystone uwsgi-core uwsgi-plugin-python3
  neutron-server python3-ovsdbapp
  ovn-central ovn-host openvswitch-switch
  octavia-api octavia-driver-agent octavia-common python3-ovn-octavia-provider
  python3-openstacksdk python3-openstackclient python3-yaml
  iproute2 iputils-ping netcat-openbsd ethtool curl procps debootstrap
)

# ----------------------------------------------------------------------------- output

_ts() { date -u +%H:%M:%S; }
log()  { printf '[%s] %s\n' "$(_ts)" "$*" >&2; }
warn() { printf '[%s] WARNING: %s\n' "$(_ts)" "$*" >&2; }
die()  { printf '[%s] ERROR: %s\n' "$(_ts)" "$*" >&2; exit 1; }

# die_component NAME MESSAGE: fail loudly with the tail of the component's log.
die_component() {
  local name=$1; shift
  local logf=$SBX_LOG/$name.log
  printf '[%s] ERROR: component %s: %s\n' "$(_ts)" "$name" "$*" >&2
  if [[ -f $logf ]]; then
    printf -- '----- last 30 lines of %s -----\n' "$logf" >&2
    tail -n 30 "$logf" >&2
    printf -- '----- end of %s -----\n' "$logf" >&2
  fi
  exit 1
}

require_root() { [[ $(id -u) -eq 0 ]] || die "must run as root"; }

ensure_dirs() {
  mkdir -p "$SBX_LOG" "$SBX_RUN" "$SBX_ETC" "$SBX_DATA" "$LOCAL_OVS_RUNDIR" "$OVN_RUNDIR_LOCAL" /var/run/octavia
}

# ----------------------------------------------------------------------------- Open vSwitch

# ovs_flavour: debian13 (default) or bookworm, as chosen by the last `up`.
ovs_flavour() {
  local f=debian13
  [[ -f $SBX_OVS_FLAVOUR_FILE ]] && f=$(<"$SBX_OVS_FLAVOUR_FILE")
  echo "$f"
}

# ovs_prog NAME: the program NAME (ovsdb-server, ovs-vswitchd, ovsdb-tool) of the chosen flavour.
ovs_prog() {
  if [[ $(ovs_flavour) == debian13 ]]; then
    echo "$SBX_OVS_ROOT/bin/$1"
  else
    case $1 in
      ovs-vswitchd|ovsdb-server) echo "/usr/sbin/$1" ;;
      *) echo "/usr/bin/$1" ;;
    esac
  fi
}

# ovs_schema: the Open_vSwitch database schema of the chosen flavour.
ovs_schema() {
  if [[ $(ovs_flavour) == debian13 ]]; then
    echo "$SBX_OVS_ROOT/root/usr/share/openvswitch/vswitch.ovsschema"
  else
    echo /usr/share/openvswitch/vswitch.ovsschema
  fi
}

# ----------------------------------------------------------------------------- secrets

# One random password per sandbox, kept until `down --purge`.
load_secrets() {
  local f=$SBX_ETC/secrets.env
  if [[ ! -f $f ]]; then
    umask 077
    {
      echo "SBX_PASSWORD=$(head -c 18 /dev/urandom | base64 | tr -dc 'A-Za-z0-9' | head -c 20)"
    } >"$f"
    umask 022
  fi
  # shellcheck disable=SC1090
  source "$f"
}

# ----------------------------------------------------------------------------- processes

pidfile_of() { echo "$SBX_RUN/$1.pid"; }

# pid_of NAME: prints the pid of the component's supervisor (sandbox/supervise) if it is alive,
# else fails.
pid_of() {
  local pf pid
  pf=$(pidfile_of "$1")
  [[ -s $pf ]] || return 1
  pid=$(<"$pf")
  [[ $pid =~ ^[0-9]+$ ]] || return 1
  alive "$pid" || return 1
  # Guard against pid reuse: the command line must still be ours.
  local expect
  expect=$(<"$SBX_RUN/$1.cmd") 2>/dev/null || return 1
  tr '\0' ' ' <"/proc/$pid/cmdline" 2>/dev/null | grep -qF -- "$expect" || return 1
  echo "$pid"
}

# child_of NAME: prints the pid of the component's program (the supervisor's child) if it runs.
child_of() {
  local pid
  pid_of "$1" >/dev/null || return 1
  [[ -s $SBX_RUN/$1.child ]] || return 1
  pid=$(<"$SBX_RUN/$1.child")
  [[ $pid =~ ^[0-9]+$ ]] && alive "$pid" || return 1
  echo "$pid"
}

is_running() { pid_of "$1" >/dev/null; }

# is_supervised NAME: the component runs under sandbox/supervise (older sandboxes did not).
is_supervised() {
  local pid
  pid=$(pid_of "$1") || return 1
  tr '\0' ' ' <"/proc/$pid/cmdline" 2>/dev/null | grep -qF -- "supervise $1 "
}

# Crashes recorded before this script started do not fail it.
SBX_CRASH_MARK0=$(stat -c %s "$SBX_CRASHES" 2>/dev/null || echo 0)

# crash_lines_since MARK [NAME]: the crash records after MARK (of component NAME only).
crash_lines_since() {
  local mark=$1 name=${2:-} size
  size=$(stat -c %s "$SBX_CRASHES" 2>/dev/null || echo 0)
  ((mark <= size)) || mark=0
  [[ -s $SBX_CRASHES ]] || return 0
  tail -c +"$((mark + 1))" "$SBX_CRASHES" | if [[ -n $name ]]; then
    awk -F'\t' -v n="$name" '$2 == n'
  else
    cat
  fi
}

# die_if_crashed NAME WHAT: fail loudly when the component crashed since this script started.
die_if_crashed() {
  local line
  line=$(crash_lines_since "$SBX_CRASH_MARK0" "$1" | tail -n 1)
  [[ -z $line ]] || die_component "$1" "crashed while $2: $(cut -f4,6 <<<"$line" | tr '\t' ' ')"
}

# start_daemon NAME [--netns NS] [--after-restart CMD] PROGRAM ARGS...: run PROGRAM under
# sandbox/supervise (restarted when it dies, each crash recorded: sandbox/crashes) in its own
# session, output appended to logs/NAME.log, the supervisor's pid in run/NAME.pid, the program's
# in run/NAME.child. CMD runs (in the same namespace) after each restart. No-op if running.
SBX_STARTED_SOMETHING=0
start_daemon() {
  local name=$1; shift
  local netns="" after=()
  while :; do
    case ${1:-} in
      --netns) netns=$2; shift 2 ;;
      --after-restart) after=(--after-restart "$2"); shift 2 ;;
      *) break ;;
    esac
  done
  if is_running "$name"; then return 0; fi
  local logf=$SBX_LOG/$name.log
  printf '\n===== %s starting %s =====\n' "$(date -u +%FT%TZ)" "$name" >>"$logf"
  # The command-line fingerprint checked by pid_of.
  echo "supervise $name " >"$SBX_RUN/$name.cmd"
  rm -f "$SBX_RUN/$name.child" "$SBX_RUN/$name.expect-exit"
  # Where the crash record stood at this start: `status` counts this run's crashes from here.
  stat -c %s "$SBX_CRASHES" >"$SBX_RUN/$name.crash-mark" 2>/dev/null || echo 0 >"$SBX_RUN/$name.crash-mark"
  # The supervisors run a copy of sandbox/supervise (bash reads a script as it goes: editing the
  # checkout must not change what running supervisors execute); replaced by rename only.
  if ! cmp -s "$SBX_SRC/supervise" "$SBX_RUN/supervise"; then
    install -m 0755 "$SBX_SRC/supervise" "$SBX_RUN/supervise.new" && mv -f "$SBX_RUN/supervise.new" "$SBX_RUN/supervise"
  fi
  local sup=("$SBX_RUN/supervise" "$name" "${after[@]}" -- "$@")
  if [[ -n $netns ]]; then
    setsid ip netns exec "$netns" bash "${sup[@]}" </dev/null >>"$logf" 2>&1 &
  else
    setsid bash "${sup[@]}" </dev/null >>"$logf" 2>&1 &
  fi
  echo $! >"$(pidfile_of "$name")"
  SBX_STARTED_SOMETHING=1
  # `ip netns exec` execs the program, so $! is the supervisor itself.
  sleep 0.2
  is_running "$name" || die_component "$name" "its supervisor exited right after start"
  die_if_crashed "$name" "starting"
}

# alive PID: the process exists and is not a zombie (PID 1 here may reap late).
alive() {
  local state
  state=$(cat "/proc/$1/stat" 2>/dev/null) || return 1
  # The state follows the command name, which may hold spaces and parentheses.
  state=${state##*) }
  state=${state%% *}
  [[ -n $state && $state != Z ]]
}

# stop_daemon NAME [SECS]: TERM its process group (we made it a session leader), wait up
# to SECS (default 10), then KILL.
stop_daemon() {
  local name=$1 secs=${2:-10} pid i
  if ! pid=$(pid_of "$name"); then
    rm -f "$(pidfile_of "$name")"
    return 0
  fi
  kill -TERM -- "-$pid" 2>/dev/null || kill -TERM "$pid" 2>/dev/null || true
  for ((i = 0; i < secs * 10; i++)); do
    alive "$pid" || break
    sleep 0.1
  done
  if alive "$pid"; then
    warn "$name (pid $pid) did not stop on TERM, killing"
    kill -KILL -- "-$pid" 2>/dev/null || kill -KILL "$pid" 2>/dev/null || true
  fi
  # Children of the session that outlived the leader (e.g. forked workers).
  kill -KILL -- "-$pid" 2>/dev/null || true
  rm -f "$(pidfile_of "$name")"
  log "stopped $name"
}

# wait_for NAME SECONDS DESCRIPTION CMD...: poll CMD until it succeeds; on timeout fail
# loudly with the component's log tail. Also fails at once if the process died.
wait_for() {
  local name=$1 secs=$2 what=$3; shift 3
  local deadline=$((SECONDS + secs))
  until "$@" >/dev/null 2>&1; do
    if [[ -f $(pidfile_of "$name") ]] && ! is_running "$name"; then
      die_component "$name" "process died while waiting for: $what"
    fi
    [[ -f $(pidfile_of "$name") ]] && die_if_crashed "$name" "waiting for: $what"
    ((SECONDS < deadline)) || die_component "$name" "not ready after ${secs}s: $what"
    sleep 0.3
  done
}

http_ok() { # http_ok URL: any HTTP answer below 500 counts as "serving"
  local code
  code=$(curl -s -o /dev/null -m 3 -w '%{http_code}' "$1") || return 1
  [[ $code =~ ^[1-4][0-9][0-9]$ ]]
}

# ----------------------------------------------------------------------------- nodes

node_names() { # the nodes that `up --nodes` created, in order
  local f=$SBX_ETC/nodes
  [[ -f $f ]] && cat "$f"
  return 0
}
node_ns() { echo "kuryr-$1"; }
node_rundir() { echo "$SBX_RUN/ovs-$1"; }
node_index() { echo "${1#node-}"; }
node_underlay_ip() { echo "$SBX_UNDERLAY_PREFIX.$((10 + $(node_index "$1")))"; }

# ----------------------------------------------------------------------------- component table
# name | endpoint | what it is. Used by status and down (down walks it backwards).
component_table() {
  cat <<EOF
mariadb|tcp:127.0.0.1:3306|MariaDB (Keystone, Neutron, Octavia databases)
ovn-nb|tcp:127.0.0.1:6641|OVN northbound ovsdb-server
ovn-sb|tcp:127.0.0.1:6642|OVN southbound ovsdb-server
ovn-northd|unix:$SBX_RUN/ovn-northd.ctl|OVN northd
ovs-db|unix:$LOCAL_OVS_RUNDIR/db.sock|Open vSwitch ovsdb-server (local chassis $SBX_LOCAL_CHASSIS)
ovs-vswitchd|unix:$LOCAL_OVS_RUNDIR/ovs-vswitchd.ctl|Open vSwitch (netdev datapath, local chassis)
ovn-controller|chassis $SBX_LOCAL_CHASSIS (ovn-appctl: OVN_RUNDIR=$OVN_RUNDIR_LOCAL)|ovn-controller (local chassis)
keystone|http://127.0.0.1:5000/v3|Keystone (uwsgi)
neutron|http://127.0.0.1:9696|Neutron server (ML2/OVN, ovn-router, trunk)
octavia-driver-agent|unix:/var/run/octavia/{status,stats,get}.sock|Octavia driver agent (ovn)
octavia-api|http://127.0.0.1:9876|Octavia API (ovn provider)
EOF
  local n
  for n in $(node_names); do
    echo "ovs-db-$n|unix:$(node_rundir "$n")/db.sock|ovsdb-server of node $n"
    echo "ovs-vswitchd-$n|netns $(node_ns "$n"), underlay $(node_underlay_ip "$n")|Open vSwitch of node $n"
    echo "ovn-controller-$n|chassis $n|ovn-controller of node $n"
  done
}

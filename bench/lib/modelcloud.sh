# bench/lib/modelcloud.sh: sourced by the bench scripts that can run against the model cloud
# (--cloud model|both). Needs BIN_DIR, STATE_DIR, MODEL_FILE (may be empty) and say/die.
# model_up starts kuryr-modelcloud in the sandbox's layout and sets MODEL_URL, MODEL_PID and
# MODEL_SETS (the cluster's --set options pointing its controller at the model); model_down
# stops it.
MODEL_PID=""
MODEL_URL=""
# clouds_of VALUE: CLOUDS from --cloud real|model|both (both: the real cloud, then the model, in
# the same hour), and MODEL_FILE checked.
clouds_of() {
  case $1 in real) CLOUDS=(real) ;; model) CLOUDS=(model) ;; both) CLOUDS=(real model) ;;
    *) die "--cloud must be real, model or both" ;;
  esac
  [[ -z $MODEL_FILE || -r $MODEL_FILE ]] || die "--model $MODEL_FILE: not a readable file"
}
# model_stats FILE: what the model served, by operation (requests, queueing, service time);
# a figure beside the benchmark's, so its absence is said, not fatal.
model_stats() {
  if curl -fsS "$MODEL_URL/__model/stats" >"$1"; then
    say "the model's request statistics: $1"
  else
    say "could not read the model's request statistics from $MODEL_URL"
  fi
}
MODEL_SETS=()
# model_up: the model cloud in the sandbox's layout (the pod and service subnets' CIDRs), following
# every node's Open vSwitch database; MODEL_SETS point the cluster's controller at it.
model_up() {
  local topo=${KURYR_SANDBOX_HOME:-/var/lib/kuryr-sandbox}/topology.env out args=() n rundir
  [[ -x $BIN_DIR/kuryr-modelcloud ]] || die "$BIN_DIR/kuryr-modelcloud missing"
  # shellcheck disable=SC1090
  args=(--network "pods=$(. "$topo"; echo "$POD_SUBNET_CIDR")" --network "services=$(. "$topo"; echo "$SERVICE_SUBNET_CIDR")")
  for n in $(. "$topo"; echo "$NODES"); do
    rundir=$(. "$topo"; v="NODE_${n#node-}_OVS_RUNDIR"; echo "${!v}")
    [[ -S $rundir/db.sock ]] || die "node $n: no Open vSwitch database at $rundir/db.sock"
    args+=(--plugs-from-ovsdb "unix:$rundir/db.sock")
  done
  [[ -n $MODEL_FILE ]] && args+=(--model "$MODEL_FILE")
  # The sandbox's cloud shares this machine's cores with the cluster: the model's servers
  # spend theirs too (MODEL_CPU_SHARE=0 to compare without).
  args+=(--cpu-share "${MODEL_CPU_SHARE:-1}")
  out=$STATE_DIR.model.out
  RUST_LOG=${MODEL_LOG:-info} "$BIN_DIR/kuryr-modelcloud" "${args[@]}" >"$out" 2>"$STATE_DIR.model.log" &
  MODEL_PID=$!
  for _ in $(seq 50); do grep -q '^modelcloud url=' "$out" 2>/dev/null && break; sleep 0.2; done
  MODEL_URL=$(sed -n 's/^modelcloud url=\([^ ]*\).*/\1/p' "$out")
  local auth pods svc
  auth=$(sed -n 's/^modelcloud .*auth_url=\([^ ]*\).*/\1/p' "$out")
  pods=$(sed -n 's/^network name=pods .*subnet=\([^ ]*\).*/\1/p' "$out")
  svc=$(sed -n 's/^network name=services .*subnet=\([^ ]*\).*/\1/p' "$out")
  [[ -n $MODEL_URL && -n $auth && -n $pods && -n $svc ]] || die "the model cloud did not start (see $out and $STATE_DIR.model.log)"
  say "model cloud at $MODEL_URL (pid $MODEL_PID${MODEL_FILE:+, model $MODEL_FILE})"
  MODEL_SETS=(--set "neutron.auth_url=$auth" --set "neutron.password=model"
    --set "neutron_defaults.project=model-project" --set "neutron_defaults.pod_subnet=$pods"
    --set "neutron_defaults.service_subnet=$svc" --set "neutron_defaults.pod_security_groups=sg-model")
}
model_down() {
  [[ -n $MODEL_PID ]] || return 0
  kill "$MODEL_PID" 2>/dev/null || true
  wait "$MODEL_PID" 2>/dev/null || true
  MODEL_PID=""
}

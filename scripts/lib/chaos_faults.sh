# The faults of scripts/chaos and scripts/chaos-soak (sourced): each injected into a training job
# that scripts/cluster-run started (--restart, logs in DIR, hosts tagged TAG), as docs/reliability.md
# ("Faults at scale") describes them.
#   chaos_cases NAME LIST             # LIST (comma-separated; empty: all) into the array `list`;
#                                     # an unknown case: a message naming it, status 2
#   chaos_chief_step DIR              # the chief's last completed global step (0 before the first)
#   chaos_inject CASE DIR TAG WORKERS # injects CASE; returns once it is over (sleeps 10-30 s for
#                                     # link_down, throttle, stop); sets what, victim and job
CHAOS_CASES=link_down,throttle,stop,kill_worker,kill_ps,kill_chief,ps_and_worker

chaos_cases() {
  local name=$1 kase
  IFS=, read -r -a list <<<"${2:-$CHAOS_CASES}"
  for kase in "${list[@]}"; do
    [[ ,$CHAOS_CASES, == *,$kase,* ]] ||
      { echo "$name: unknown case '$kase' (cases: $CHAOS_CASES)" >&2; return 2; }
  done
}

chaos_chief_step() {
  tr '\r' '\n' 2>/dev/null <"$1/worker-0.log" |
    sed -n 's/.* step \([0-9][0-9]*\)\/[0-9]*.*/\1/p' | tail -n 1 | grep . || echo 0
}

chaos_inject() {
  local kase=$1 dir=$2 tag=$3 workers=$4
  victim=$((1 + RANDOM % (workers - 1))) job=worker # a worker that is not the chief
  local ns=${tag}h$victim dev=${tag}v${victim}b
  # A run that ended before its fault, or a host gone: the fault's commands fail, and the judge
  # says what that left (no step after the fault).
  set +e
  case $kase in
    link_down)
      what="worker $victim's link down 10 s"
      ip netns exec "$ns" ip link set "$dev" down
      sleep 10
      ip netns exec "$ns" ip link set "$dev" up ;;
    throttle)
      # A hundredth of the 1 Gbit/s link, not the issue's tenth: at 100 Mbit/s this job's worker
      # is held up by the shared cores about as much as by its link (its steps slower, but not
      # twice the usual ten in a row: no straggler); at 10 Mbit/s the 2 x 1.6 MB it moves a step
      # take ~2.6 s, over ten of its usual steps: a straggling link.
      what="worker $victim's link at 10mbit for 30 s"
      netns_set_rate "$tag" "$victim" 10mbit
      sleep 30
      netns_set_rate "$tag" "$victim" 1gbit ;;
    stop)
      what="worker $victim stopped 30 s"
      local pid
      pid=$(cat "$dir/worker-$victim.pid")
      kill -STOP "$pid"
      sleep 30
      kill -CONT "$pid" ;;
    kill_worker)
      what="worker $victim killed"
      kill -KILL "$(cat "$dir/worker-$victim.pid")" ;;
    kill_ps)
      what="ps 0 killed" victim=0 job=ps
      kill -KILL "$(cat "$dir/ps-0.pid")" ;;
    kill_chief)
      what="the chief killed" victim=0
      kill -KILL "$(cat "$dir/worker-0.pid")" ;;
    ps_and_worker)
      what="ps 0 and worker $victim killed"
      kill -KILL "$(cat "$dir/ps-0.pid")" "$(cat "$dir/worker-$victim.pid")" ;;
    *)
      echo "chaos: unknown case '$kase' (cases: $CHAOS_CASES)" >&2
      set -e
      return 2 ;;
  esac
  set -e
  return 0
}

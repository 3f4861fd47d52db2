#!/usr/bin/env bash
# Nothing left behind (issue 41): scripts/cluster-run, which scripts/cluster-demo runs, must stop
# every task it started and every progress reader, whether the workers finish, one fails, or the
# run is interrupted (Ctrl-C). Four runs, each followed by a check that no process of it remains
# and none still listens on its ports:
#   1, 2. the demo's own run (1 ps + 2 workers on loopback, Fashion-MNIST, live progress) twice
#         in a row: a second run must not meet the first's ps;
#   3.    a cluster whose worker 1 fails at once: exit status 1, the ps and worker 0 stopped;
#   4.    SIGINT to cluster-run while every task runs: exit status 130, all stopped.
# Usage: cluster_cleanup_test.sh FASHION_MNIST_BINARY RECORDS_DIR WORK
set -euo pipefail
bin=$1 records=$2 work=$3
root=$(cd "$(dirname "$0")/../.." && pwd)
rm -rf "$work" && mkdir -p "$work"
# A failure still ends what it found, so that the suite itself leaves nothing behind.
fail() {
  echo "cluster_cleanup_test: FAILED: $*" >&2
  pkill -KILL -f -- "$work/" || true
  exit 1
}

# Every process whose command line names a path in this test's work folder (the tasks, the shells and the
# progress readers around them), and whoever listens on the ports of the run's cluster spec.
leftovers() {
  local logs=$1 spec ports p
  pgrep -af -- "$work/" | grep -v -e pgrep -e cluster_cleanup_test || true
  spec=$(sed -n 's/^cluster-run: cluster //p' "$logs/run.out" 2>/dev/null || true)
  ports=$(grep -o ':[0-9]*' <<<"$spec" | tr -d : || true)
  for p in $ports; do ss -Hltn "sport = :$p" | sed "s/^/listening on $p: /"; done
}
check_clean() {
  local left
  left=$(leftovers "$1")
  [[ -z $left ]] || fail "$2 left behind:"$'\n'"$left"
  echo "cluster_cleanup_test: $2: nothing left behind"
}

# 1 and 2: as scripts/cluster-demo runs it (its placement, live progress), briefly.
for run in 1 2; do
  logs=$work/demo$run
  mkdir -p "$logs"
  "$root/scripts/cluster-run" --loopback --workers 2 --ps-hosts 1 --logs "$logs" -- \
    "$bin" --records-dir "$records" --model softmax --epochs 1 --max-steps 40 \
    --checkpoint-dir "$work/ckpt$run" >"$logs/run.out" 2>&1 ||
    { tail -n 20 "$logs/run.out"; fail "demo run $run exited with status $?"; }
  grep -q "^\[worker 0\] .*accuracy" "$logs/run.out" || { tail -n 20 "$logs/run.out"; fail "demo run $run: no accuracy from worker 0"; }
  check_clean "$logs" "demo run $run"
done

# A stand-in task: notes that it started, then worker 1 fails at once and the others serve until
# stopped. Its arguments carry the work folder, so leftovers() finds it.
fake=$work/fake-task
cat >"$fake" <<'EOF'
#!/usr/bin/env bash
marker=$1 job='' task=''
while (($#)); do case $1 in --job) job=$2; shift 2 ;; --task) task=$2; shift 2 ;; *) shift ;; esac; done
touch "$marker.$job-$task"
[[ $job == worker && $task == 1 && ! -e $marker.no-failure ]] && exit 3
exec sleep 600
EOF
chmod +x "$fake"

# 3: a worker fails.
logs=$work/failing
mkdir -p "$logs"
set +e
"$root/scripts/cluster-run" --loopback --workers 2 --ps-hosts 1 --logs "$logs" -- \
  "$fake" "$logs/started" >"$logs/run.out" 2>&1
rc=$?
set -e
((rc == 1)) || { cat "$logs/run.out"; fail "a failing worker: exit status $rc, not 1"; }
grep -q "worker 1 exited with status 3" "$logs/run.out" || { cat "$logs/run.out"; fail "the failing worker was not named"; }
check_clean "$logs" "a failing worker"

# 4 and 5: Ctrl-C (SIGINT to cluster-run's whole process group, as a terminal sends it) and a
# SIGTERM to cluster-run alone (a supervisor stopping it), once all three tasks have started.
interrupt() {
  local name=$1 target=$2 logs=$work/$3 run rc
  mkdir -p "$logs"
  touch "$logs/started.no-failure"
  set -m # a process group of its own, whose SIGINT is not ignored as a background job's is
  "$root/scripts/cluster-run" --loopback --workers 2 --ps-hosts 1 --logs "$logs" -- \
    "$fake" "$logs/started" >"$logs/run.out" 2>&1 &
  run=$!
  set +m
  for _ in $(seq 600); do # the event: each task's marker file (at most 60 s)
    [[ -e $logs/started.ps-0 && -e $logs/started.worker-0 && -e $logs/started.worker-1 ]] && break
    sleep 0.1
  done
  [[ -e $logs/started.worker-1 ]] || fail "$name: the cluster's tasks never started"
  if [[ $target == group ]]; then kill -INT -- -$run; else kill -TERM $run; fi
  set +e
  wait $run
  rc=$?
  set -e
  ((rc == 130)) || { cat "$logs/run.out"; fail "$name: exit status $rc, not 130"; }
  grep -q "interrupted: stopping every task" "$logs/run.out" || { cat "$logs/run.out"; fail "$name: no word of stopping"; }
  check_clean "$logs" "$name"
}
interrupt "Ctrl-C" group ctrl-c
interrupt "SIGTERM to cluster-run" leader sigterm

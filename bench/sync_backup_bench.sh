#!/usr/bin/env bash
# bench sync_backup_workers: synchronous training on real processes (1 ps + workers on loopback,
# fashion_mnist --sync), each worker's compute emulated by sleeping before its step (a sleep uses
# no core, so our 2 cores measure the runtime, not the arithmetic; the model is the softmax one).
#   baseline : 4 workers, 3 gradients per step, all workers 30 ms
#   backup   : the same with worker 3 three times slower (90 ms): the backup absorbs it
#   no backup: 3 workers, 3 gradients per step, worker 2 three times slower: every step waits
# Reports the chief's mean step time of each as a ratio to the baseline.
# Usage: sync_backup_bench.sh BUILD_DIR [STEPS]
set -euo pipefail
build=$1 steps=${2:-150}
bin=$build/apps/fashion_mnist
records=$build/bench-fmnist-records
work=$(mktemp -d)
trap 'kill $(jobs -p) 2>/dev/null || true; rm -rf "$work"' EXIT
fast=30 slow=90

ports() {
  python3 -c 'import socket
held, ports = [], []
for _ in range(int('"$1"')):
    s = socket.socket(); s.bind(("127.0.0.1", 0)); held.append(s); ports.append(s.getsockname()[1])
print(" ".join(map(str, ports)))'
}

# run NAME WORKERS AGGREGATE SLOW_TASK(-1: none) -> prints the chief's mean step time (ms)
run() {
  local name=$1 workers=$2 aggregate=$3 slow_task=$4
  read -r -a p <<<"$(ports $((workers + 1)))"
  local cluster="ps=127.0.0.1:${p[0]};worker="
  for ((t = 0; t < workers; ++t)); do
    cluster+="127.0.0.1:${p[t + 1]}"
    ((t + 1 < workers)) && cluster+=","
  done
  local common=(--cluster "$cluster" --model softmax --epochs 1 --max-steps "$steps"
                --records-dir "$records" --sync --replicas-to-aggregate "$aggregate")
  "$bin" "${common[@]}" --job ps --task 0 2>"$work/$name-ps.log" &
  local ps=$! pids=()
  for ((t = 0; t < workers; ++t)); do
    local delay=$fast
    ((t == slow_task)) && delay=$slow
    "$bin" "${common[@]}" --job worker --task $t --checkpoint-dir "$work/$name-ckpt$t" \
      --step-delay-ms $delay >"$work/$name-w$t.out" 2>"$work/$name-w$t.log" &
    pids+=($!)
  done
  for pid in "${pids[@]}"; do
    wait "$pid" || { echo "sync_backup_bench: $name: a worker failed:" >&2; tail -n 3 "$work/$name"-w*.log >&2; exit 1; }
  done
  kill $ps 2>/dev/null || true
  wait $ps 2>/dev/null || true
  sed -n 's/^step time: \([0-9.]*\) ms.*/\1/p' "$work/$name-w0.out"
}

# The record shards, converted once (a short local run).
[[ -f $records/test-00000-of-00001 ]] ||
  "$bin" --model softmax --epochs 1 --max-steps 1 --records-dir "$records" \
    --checkpoint-dir "$work/convert" >/dev/null 2>&1

base=$(run baseline 4 3 -1)
backup=$(run backup 4 3 3)
none=$(run nobackup 3 3 2)
python3 - "$base" "$backup" "$none" "$fast" "$slow" "$steps" <<'EOF'
import sys
base, backup, none, fast, slow, steps = map(float, sys.argv[1:])
print(f"sync_backup_workers: {steps:.0f} steps, compute {fast:.0f} ms per step ({slow:.0f} ms on the slow worker)")
print(f"  baseline (4 workers, 3 per step, none slow): {base:.1f} ms/step")
print(f"  one slow worker, with 1 backup:               {backup:.1f} ms/step")
print(f"  one slow worker, no backup (3 of 3):          {none:.1f} ms/step")
print(f"bench sync_backup_workers: {backup:.1f} ms/step with a worker 3x slower "
      f"({backup / base:.2f}x the {base:.1f} ms/step with none slow; target 1.15x); "
      f"without the backup {none / base:.2f}x (target >= 2.5x)")
EOF

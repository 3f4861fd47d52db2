#!/usr/bin/env bash
# client_master: fashion_mnist --connect (a client of runnel-node daemons that runs no node) as
# its own master, the default, against --daemon-master (through the worker daemon's master), on
# 1 ps + 1 worker daemon on loopback; REPS runs of each, alternating, each its mean step time.
#
#   bench/client_master_bench.sh BUILD_DIR [MODEL (softmax)] [REPS (3)] [STEPS (300)]
set -euo pipefail
build=$1 model=${2:-softmax} reps=${3:-3} steps=${4:-300}
root=$(cd "$(dirname "$0")/.." && pwd)
work=$(mktemp -d)
source "$root/scripts/lib/free_ports.sh"
read -r p0 p1 <<<"$(free_ports 2)"
printf 'ps     = 127.0.0.1:%s\nworker = 127.0.0.1:%s\n' "$p0" "$p1" >"$work/cluster.txt"
head -c 24 /dev/urandom | base64 >"$work/token"
pids=()
trap 'kill "${pids[@]}" 2>/dev/null || true; wait 2>/dev/null || true; rm -rf "$work"' EXIT
for job in ps worker; do
  "$build/apps/runnel-node" --cluster-file "$work/cluster.txt" --job $job --task 0 \
    --auth-token-file "$work/token" --port-file "$work/$job.port" 2>"$work/$job.log" &
  pids+=($!)
done
for job in ps worker; do
  for _ in $(seq 300); do [[ -f $work/$job.port ]] && break; sleep 0.1; done # the daemon's port file
  [[ -f $work/$job.port ]] || { echo "client_master_bench: the $job daemon did not start" >&2; exit 1; }
done
echo "client_master_bench: $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | xargs), $(nproc) cores; model $model, $steps steps"
for ((rep = 1; rep <= reps; ++rep)); do
  for master in client daemon; do
    extra=()
    [[ $master == client ]] || extra=(--daemon-master)
    ms=$("$build/apps/fashion_mnist" --cluster "ps=127.0.0.1:$p0;worker=127.0.0.1:$p1" --job worker \
      --task 0 --connect --model "$model" --epochs 1 --max-steps "$steps" \
      --checkpoint-dir "$work/ckpt" --auth-token-file "$work/token" "${extra[@]}" 2>/dev/null |
      sed -n 's/^step time: \([0-9.]*\) ms.*/\1/p')
    echo "bench client_master: run $rep, $master master: $ms ms/step"
  done
done

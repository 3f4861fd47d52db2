#!/usr/bin/env bash
# Several hosts for real: a ps and two workers each in its own network namespace, joined by veth
# pairs through a bridge with every link limited to 1 Gbit/s (tc tbf; no added latency: our
# kernel has no sch_netem). Fashion-MNIST trains there synchronously, then asynchronously, and
# every worker must reach the accuracy floor. Exits 77 (CTest: skipped) with the reason where the
# machine cannot create namespaces.
# Usage: netns_cluster_test.sh FASHION_MNIST_BINARY RECORDS_DIR WORK
set -euo pipefail
bin=$1 records=$2 work=$3
root=$(cd "$(dirname "$0")/../.." && pwd)
source "$root/scripts/lib/netns.sh"
netns_check || exit 77
rm -rf "$work" && mkdir -p "$work"
netns_up 3 1gbit
cluster="ps=${NETNS_ADDR[0]}:2222;worker=${NETNS_ADDR[1]}:2222,${NETNS_ADDR[2]}:2222"
# These addresses are reachable from other hosts: a node there needs the cluster's secret.
head -c 32 /dev/urandom | od -An -tx1 | tr -d ' \n' >"$work/token"
echo "hosts: $cluster (1 Gbit/s links)"
for mode in sync async; do
  extra=()
  [[ $mode == sync ]] && extra=(--sync --sync-timeout 30)
  common=(--cluster "$cluster" --model softmax --epochs 1 --max-steps 100 --records-dir "$records"
          --min-accuracy 0.6 --auth-token-file "$work/token" "${extra[@]}")
  netns_exec 0 "$bin" "${common[@]}" --job ps --task 0 2>"$work/$mode-ps.log" &
  ps=$!
  pids=()
  for t in 0 1; do
    netns_exec $((t + 1)) "$bin" "${common[@]}" --job worker --task $t \
      --checkpoint-dir "$work/$mode-ckpt$t" >"$work/$mode-w$t.out" 2>"$work/$mode-w$t.log" &
    pids+=($!)
  done
  for t in 0 1; do
    wait "${pids[$t]}" || { echo "FAILED: $mode worker $t"; tail -n 5 "$work/$mode-w$t.log"; exit 1; }
  done
  kill $ps 2>/dev/null || true
  wait $ps 2>/dev/null || true
  echo "$mode: $(grep -h 'test accuracy' "$work/$mode"-w*.out | tr '\n' ' ')"
done

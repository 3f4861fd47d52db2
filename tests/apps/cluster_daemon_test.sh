#!/usr/bin/env bash
# A shipped training program against runnel-node daemons, as systemd or Kubernetes start them
# (docs/cluster.md): a ps and a worker daemon with a shared secret, and fashion_mnist --connect
# training through the worker's master with the same secret; a wrong secret is refused.
# Usage: cluster_daemon_test.sh RUNNEL_NODE FASHION_MNIST WORK
set -euo pipefail
node=$1 bin=$2 work=$3
rm -rf "$work" && mkdir -p "$work"
source "$(dirname "$0")/../../scripts/lib/free_ports.sh"
ports=$(free_ports 2)
read -r p0 p1 <<<"$ports"
printf 'ps     = 127.0.0.1:%s\nworker = 127.0.0.1:%s\n' "$p0" "$p1" >"$work/cluster.txt"
head -c 24 /dev/urandom | base64 >"$work/token"
echo "not-the-secret" >"$work/wrong"
pids=()
trap 'kill "${pids[@]}" 2>/dev/null || true' EXIT
for job in ps worker; do
  "$node" --cluster-file "$work/cluster.txt" --job $job --task 0 --auth-token-file "$work/token" \
    --port-file "$work/$job.port" 2>"$work/$job.log" &
  pids+=($!)
done
for job in ps worker; do
  for _ in $(seq 300); do [[ -f $work/$job.port ]] && break; sleep 0.1; done
  [[ -f $work/$job.port ]] || { echo "FAILED: the $job daemon did not start"; cat "$work/$job.log"; exit 1; }
done
spec="ps=127.0.0.1:$p0;worker=127.0.0.1:$p1"
common=(--cluster "$spec" --job worker --task 0 --connect --model softmax --limit-train 3000
        --epochs 1 --max-steps 60 --checkpoint-dir "$work/ckpt")
if "$bin" "${common[@]}" --auth-token-file "$work/wrong" >"$work/wrong.out" 2>"$work/wrong.log"; then
  echo "FAILED: a client with the wrong secret trained"; exit 1
fi
grep -qi "token\|auth" "$work/wrong.log" || { echo "FAILED: the refusal does not say why:"; cat "$work/wrong.log"; exit 1; }
"$bin" "${common[@]}" --auth-token-file "$work/token" --min-accuracy 0.5 >"$work/w0.out" 2>"$work/w0.log" ||
  { echo "FAILED: training against the daemons:"; tail -n 5 "$work/w0.log"; tail -n 5 "$work/worker.log"; exit 1; }
cat "$work/w0.out"
grep -q "refused\|rejected" "$work/worker.log" "$work/ps.log" ||
  { echo "FAILED: the daemons did not log the refused connection"; exit 1; }

#!/usr/bin/env bash
# A shipped training program against runnel-node daemons, as systemd or Kubernetes start them
# (docs/cluster.md): a ps and a worker daemon with a shared secret, and fashion_mnist --connect
# training with the same secret, as its own master (the daemons' masters see no session) and
# then with --daemon-master through the worker daemon's; a wrong secret is refused.
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
        --epochs 1 --max-steps 60)
if "$bin" "${common[@]}" --auth-token-file "$work/wrong" >"$work/wrong.out" 2>"$work/wrong.log"; then
  echo "FAILED: a client with the wrong secret trained"; exit 1
fi
grep -qi "token\|auth" "$work/wrong.log" || { echo "FAILED: the refusal does not say why:"; cat "$work/wrong.log"; exit 1; }
for master in client daemon; do
  extra=(--checkpoint-dir "$work/ckpt-$master")
  [[ $master == client ]] || extra+=(--daemon-master)
  "$bin" "${common[@]}" "${extra[@]}" --auth-token-file "$work/token" --min-accuracy 0.5 \
    >"$work/$master.out" 2>"$work/$master.log" ||
    { echo "FAILED: training against the daemons ($master master):"; tail -n 5 "$work/$master.log"
      tail -n 5 "$work/worker.log"; exit 1; }
  cat "$work/$master.out"
  # The worker daemon's master logs each session it creates: none while the client is its own.
  created=$(grep -c "session-[0-9]* created" "$work/worker.log" || true)
  if [[ $master == client ]] && ((created != 0)); then
    echo "FAILED: the daemon's master ran the session of a client that is its own master"; exit 1
  fi
  if [[ $master == daemon ]] && ((created == 0)); then
    echo "FAILED: --daemon-master did not go through the daemon's master"; exit 1
  fi
done
grep -q "refused\|rejected" "$work/worker.log" "$work/ps.log" ||
  { echo "FAILED: the daemons did not log the refused connection"; exit 1; }

#!/usr/bin/env bash
# Asynchronous training of Fashion-MNIST on 1 ps + 2 worker processes on loopback: both workers
# must reach the accuracy floor, and worker 0's traced step must hold both tasks' nodes (and be
# drawn by scripts/trace-svg). Usage: cluster_train_test.sh FASHION_MNIST_BINARY RECORDS_DIR WORK
set -euo pipefail
bin=$1 records=$2 work=$3
rm -rf "$work" && mkdir -p "$work"
source "$(dirname "$0")/../../scripts/lib/free_ports.sh"
ports=$(free_ports 3)
read -r p0 p1 p2 <<<"$ports"
cluster="ps=127.0.0.1:$p0;worker=127.0.0.1:$p1,127.0.0.1:$p2"
common=(--cluster "$cluster" --model softmax --epochs 1 --max-steps 150 --records-dir "$records")
"$bin" "${common[@]}" --job ps --task 0 2>"$work/ps.log" &
ps_pid=$!
trap 'kill $ps_pid 2>/dev/null || true' EXIT
"$bin" "${common[@]}" --job worker --task 0 --checkpoint-dir "$work/ckpt" --min-accuracy 0.6 \
  --trace "$work/trace.json" >"$work/w0.out" 2>"$work/w0.log" &
w0=$!
"$bin" "${common[@]}" --job worker --task 1 --checkpoint-dir "$work/ckpt1" --min-accuracy 0.6 \
  >"$work/w1.out" 2>"$work/w1.log" &
w1=$!
status=0
wait $w0 || { echo "worker 0 failed:"; tail -5 "$work/w0.log"; status=1; }
wait $w1 || { echo "worker 1 failed:"; tail -5 "$work/w1.log"; status=1; }
((status == 0)) || { echo "ps log:"; tail -5 "$work/ps.log"; }
cat "$work/w0.out" "$work/w1.out"
ls "$work/ckpt"/model-*.h5 >/dev/null || { echo "the chief wrote no checkpoint"; status=1; }
[[ ! -e $work/ckpt1 ]] || ! ls "$work/ckpt1"/model-*.h5 >/dev/null 2>&1 ||
  { echo "worker 1 wrote a checkpoint"; status=1; }
# One distributed step in one trace: a track for each task's device and for the master's calls.
for track in /job:ps/replica:0/task:0/device:cpu:0 /job:worker/replica:0/task:0/device:cpu:0 \
  "master: runGraph calls"; do
  grep -q "\"$track\"" "$work/trace.json" || { echo "the trace has no track '$track'"; status=1; }
done
"$(dirname "$0")/../../scripts/trace-svg" "$work/trace.json" "$work/trace.svg" &&
  (($(grep -c '<rect' "$work/trace.svg") > 10)) || { echo "trace-svg drew no step"; status=1; }
exit $status

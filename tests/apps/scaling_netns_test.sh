#!/usr/bin/env bash
# Sharded synchronous training on 4 simulated hosts (scripts/cluster-run: a worker and a ps shard
# on each, 1 Gbit/s links) gives every worker the parameters of one process training the same 4
# replicas on the same inputs for the same steps: equal to 1e-5. And they moved: a run with a
# learning rate of 0 leaves them 1e-3 or more away. Each host's link carried parameters, gradients
# and calls in their own traffic classes. Exits 77 (CTest: skipped) with the reason
# where the machine cannot create namespaces.
# Usage: scaling_netns_test.sh SCALING_BINARY WORK
set -euo pipefail
bin=$1 work=$2
root=$(cd "$(dirname "$0")/../.." && pwd)
rm -rf "$work" && mkdir -p "$work"
common=(--scale 64 --compute-ms 20 --steps 6 --warmup 0)
"$bin" "${common[@]}" --replicas 4 --params-out "$work/local.bin" >"$work/local.out"
"$bin" "${common[@]}" --replicas 4 --lr 0 --steps 1 --params-out "$work/initial.bin" >/dev/null
set +e
"$root/scripts/cluster-run" --quiet --workers 4 --rate 1gbit --logs "$work/logs" -- \
  "$bin" "${common[@]}" --sync-timeout 60 --params-out "$work/params-{task}.bin"
rc=$?
set -e
((rc == 0)) || exit $rc # 77: no namespaces here (the reason was printed)
# Every host's link carried each traffic class the tasks mark (node_options::traffic_classes):
# its ps shard's parameters, its worker's gradients, calls and acks, each in its own class.
awk '$2 == "egress" { hosts++
       if ($3 == 0 || $4 == 0 || $6 == 0) { print "host " $1 " sent no calls, parameters or gradients in their classes: " $0; bad = 1 }
       if ($5 > $4 / 10) { print "host " $1 " sent much unmarked traffic: " $0; bad = 1 } }
     END { if (hosts != 4) { print "links.txt lists " hosts " hosts, not 4"; bad = 1 }; exit bad }' \
  "$work/logs/links.txt"
/usr/bin/python3 - "$work" <<'PY'
import sys
import numpy as np
work = sys.argv[1]
local = np.fromfile(f"{work}/local.bin", dtype=np.float32)
initial = np.fromfile(f"{work}/initial.bin", dtype=np.float32)
moved = np.abs(local - initial).max()
print(f"{local.size} parameters; the local run moved them up to {moved:.4g}")
assert moved >= 1e-3, "the local run did not train: the comparison would prove nothing"
for task in range(4):
    mine = np.fromfile(f"{work}/params-{task}.bin", dtype=np.float32)
    assert mine.size == local.size, f"worker {task}: {mine.size} parameters, local {local.size}"
    diff = np.abs(mine - local).max()
    print(f"worker {task}: largest difference from the local run {diff:.3g}")
    assert diff <= 1e-5, f"worker {task} differs from the one-process run by {diff}"
PY

#!/usr/bin/env bash
# The workers of a cluster that share a records folder convert the data at the same moment on
# their first run: each must end with whole shards and train, none may fail on another's rename.
# Usage: records_race_test.sh FASHION_MNIST_BINARY WORK
set -euo pipefail
bin=$1 work=$2
rm -rf "$work" && mkdir -p "$work"
pids=()
for i in 0 1 2; do
  "$bin" --model softmax --epochs 1 --max-steps 3 --limit-train 300 --records-dir "$work/records" \
    --checkpoint-dir "$work/ckpt$i" >"$work/out$i" 2>"$work/log$i" &
  pids+=($!)
done
for i in 0 1 2; do
  wait "${pids[$i]}" || { echo "FAILED: process $i"; tail -n 5 "$work/log$i"; exit 1; }
done
converted=$(grep -l "converting" "$work"/log* | wc -l)
shards=$(ls "$work/records" | grep -c -- '-of-0000' || true)
leftover=$(ls "$work/records" | grep -c partial || true)
echo "records: $converted processes converted, $shards shards (4 train, 1 test), $leftover temporary files left"
((converted >= 1 && shards == 5 && leftover == 0)) || { ls -l "$work/records"; exit 1; }

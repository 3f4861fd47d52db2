#!/usr/bin/env bash
# Synchronous training of Fashion-MNIST on real processes on loopback.
#   backup: 2 ps (the parameters sharded over them) + 3 workers, 2 gradients per step, worker 2
#           slowed on purpose: every worker reaches the accuracy floor, the steps do not wait for
#           worker 2 and the chief counts its dropped (stale) gradients. The gradients travel as
#           bfloat16 (--wire-bf16): training converges all the same.
#   kill:   1 ps + 2 workers; worker 1 is killed (SIGKILL) after the first epoch's checkpoint:
#           the chief's step fails with UNAVAILABLE naming replica 1 within the sync timeout,
#           and a restart of both workers with --resume finishes from the checkpoint.
# Usage: cluster_sync_test.sh FASHION_MNIST_BINARY RECORDS_DIR WORK backup|kill
set -euo pipefail
bin=$1 records=$2 work=$3 mode=$4
rm -rf "$work" && mkdir -p "$work"
source "$(dirname "$0")/../../scripts/lib/free_ports.sh"
ports=$(free_ports 5)
read -r p0 p1 p2 p3 p4 <<<"$ports"
pids=()
trap 'kill "${pids[@]}" 2>/dev/null || true' EXIT
fail() { echo "FAILED: $*"; for f in "$work"/*.log; do echo "== $f"; tail -n 5 "$f"; done; exit 1; }

if [[ $mode == backup ]]; then
  cluster="ps=127.0.0.1:$p0,127.0.0.1:$p4;worker=127.0.0.1:$p1,127.0.0.1:$p2,127.0.0.1:$p3"
  common=(--cluster "$cluster" --model mlp --epochs 1 --max-steps 120 --records-dir "$records"
          --sync --replicas-to-aggregate 2 --sync-timeout 30 --min-accuracy 0.6 --wire-bf16)
  "$bin" "${common[@]}" --job ps --task 0 2>"$work/ps.log" & pids+=($!)
  "$bin" "${common[@]}" --job ps --task 1 2>"$work/ps1.log" & pids+=($!)
  for t in 0 1 2; do
    delay=0
    ((t == 2)) && delay=40 # several times a step's compute
    "$bin" "${common[@]}" --job worker --task $t --checkpoint-dir "$work/ckpt$t" \
      --step-delay-ms $delay >"$work/w$t.out" 2>"$work/w$t.log" & pids+=($!)
  done
  for i in 2 3 4; do wait "${pids[$i]}" || fail "worker $((i - 2)) exited with $?"; done
  cat "$work"/w*.out
  dropped=$(sed -n 's/^sync: \([0-9]*\) stale gradients dropped,.*/\1/p' "$work/w0.out")
  [[ -n $dropped ]] || fail "the chief reported no dropped count"
  ((dropped > 0)) || fail "no stale gradient was dropped, but worker 2 was slow"
  exit 0
fi

cluster="ps=127.0.0.1:$p0;worker=127.0.0.1:$p1,127.0.0.1:$p2"
common=(--cluster "$cluster" --model softmax --epochs 3 --limit-train 6000 --records-dir "$records"
        --sync --sync-timeout 3 --checkpoint-dir "$work/ckpt")
"$bin" "${common[@]}" --job ps --task 0 2>"$work/ps.log" & pids+=($!)
"$bin" "${common[@]}" --job worker --task 0 --step-delay-ms 5 >"$work/w0.out" 2>"$work/w0.log" &
w0=$!
pids+=($w0)
"$bin" "${common[@]}" --job worker --task 1 --step-delay-ms 5 >"$work/w1.out" 2>"$work/w1.log" &
w1=$!
pids+=($w1)
# Once the first epoch's checkpoint is written, kill worker 1 (waits on the file, not a time).
for _ in $(seq 600); do
  compgen -G "$work/ckpt/model-*.h5" >/dev/null && break
  kill -0 $w0 2>/dev/null || fail "the chief ended before its first checkpoint"
  sleep 0.1
done
compgen -G "$work/ckpt/model-*.h5" >/dev/null || fail "no checkpoint after 60 s"
kill -9 $w1
start=$(date +%s)
if wait $w0; then fail "the chief finished although worker 1 was killed"; fi
elapsed=$(($(date +%s) - start))
grep -q "UNAVAILABLE" "$work/w0.log" || fail "the chief's error is not UNAVAILABLE"
grep -q "nothing from replica 1 (of 2)" "$work/w0.log" || fail "the chief's error does not name replica 1"
((elapsed < 30)) || fail "the chief took ${elapsed}s to fail (sync timeout 3 s)"
echo "the chief failed after ${elapsed}s: $(grep -m1 UNAVAILABLE "$work/w0.log")"
# Restart both workers: training resumes from the checkpoint and finishes.
"$bin" "${common[@]}" --job worker --task 0 --resume --min-accuracy 0.6 \
  >"$work/w0b.out" 2>"$work/w0b.log" & w0=$!
pids+=($w0)
"$bin" "${common[@]}" --job worker --task 1 --min-accuracy 0.6 \
  >"$work/w1b.out" 2>"$work/w1b.log" & w1=$!
pids+=($w1)
wait $w0 || fail "the restarted chief failed"
wait $w1 || fail "the restarted worker 1 failed"
grep -q "resumed from" "$work/w0b.log" || fail "the chief did not resume from the checkpoint"
cat "$work/w0b.out" "$work/w1b.out"

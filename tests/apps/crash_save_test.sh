#!/usr/bin/env bash
# Crash-safe checkpoints, shown: a training process (iris, a checkpoint every 3 steps) is killed
# with SIGKILL at a random moment, TRIALS times, each run resuming from where the last one died.
# After every kill the `checkpoint` state file must name complete, readable files (runnel ckpt
# verify), and the next run must resume from a step no earlier than the last verified one. Kills
# that landed inside a save are counted (a save leaves a .tmp file while it writes).
# Usage: crash_save_test.sh IRIS_BINARY RUNNEL_BINARY WORK [TRIALS]
set -euo pipefail
iris=$1 runnel=$2 work=$3 trials=${4:-40}
rm -rf "$work" && mkdir -p "$work"
ckpt=$work/ckpt
last_step=0 in_save=0 unreadable=0 no_state=0
for ((i = 1; i <= trials; i++)); do
  "$iris" --steps 100000000 --save-every 3 --checkpoint-dir "$ckpt" --resume \
    >"$work/run.out" 2>"$work/run.log" &
  pid=$!
  # A random moment in the run: the kill's time is the experiment, not a wait for an event.
  sleep "0.$(printf '%03d' $((RANDOM % 900 + 100)))"
  kill -KILL "$pid" 2>/dev/null || true
  wait "$pid" 2>/dev/null || true
  if compgen -G "$ckpt/*.tmp" >/dev/null; then in_save=$((in_save + 1)); fi
  if [[ ! -f $ckpt/checkpoint ]]; then
    # Killed before its first save: nothing may claim to be a checkpoint yet.
    no_state=$((no_state + 1))
    if compgen -G "$ckpt/*.h5" >/dev/null; then
      echo "FAILED: trial $i: checkpoint files but no state file naming them"; ls -l "$ckpt"; exit 1
    fi
    continue
  fi
  if ! "$runnel" ckpt verify "$ckpt" >"$work/verify.out" 2>&1; then
    unreadable=$((unreadable + 1))
    echo "FAILED: trial $i: the state file names a damaged or missing checkpoint:"
    cat "$work/verify.out"; ls -l "$ckpt"; exit 1
  fi
  latest=$(grep '(latest)' "$work/verify.out" | grep -oE 'iris-[0-9]+' | grep -oE '[0-9]+')
  if (( latest < last_step )); then
    echo "FAILED: trial $i: the latest checkpoint went back from step $last_step to $latest"; exit 1
  fi
  if grep -q "resumed from" "$work/run.log"; then
    resumed=$(grep -oE 'step [0-9]+' "$work/run.log" | head -1 | grep -oE '[0-9]+')
    if (( resumed < last_step )); then
      echo "FAILED: trial $i resumed from step $resumed, before the verified step $last_step"; exit 1
    fi
  fi
  last_step=$latest
done
# The run after the last kill resumes and finishes.
"$iris" --steps $((last_step + 30)) --save-every 3 --checkpoint-dir "$ckpt" --resume \
  >"$work/final.out" 2>"$work/final.log" || { echo "FAILED: the final resume"; tail -5 "$work/final.log"; exit 1; }
grep -q "resumed from" "$work/final.log" || { echo "FAILED: the final run did not resume"; exit 1; }
"$runnel" ckpt verify "$ckpt" >/dev/null
echo "crash-safe saves: $trials kills, $in_save inside a save, $no_state before the first save," \
  "$unreadable unreadable latest checkpoints; last verified step $last_step, resumed to $((last_step + 30))"

#!/usr/bin/env bash
# The lm app's benchmarks, each in one run:
#   lm_bucketing   training tokens/s with batches bucketed by length (--input bucket) against
#                  the same model fed batches padded to the longest sentence (--input padded),
#                  200 steps each, and the fraction of computed positions that is padding.
#                  Target >= 1.5x.
#   lm_perplexity  test perplexity after the same epochs (default 6) against the PyTorch peer
#                  (bench/peers/lm_torch.py) on the same split and vocabulary. Target: within 5%.
#                  Both train in full: about 10 minutes on 2 cores.
#   bench/lm_bench.sh BUILD_DIR [lm_bucketing|lm_perplexity|all] [WORK_DIR]
set -euo pipefail
build=$1
which=${2:-all}
work=${3:-$(mktemp -d)}
root=$(cd "$(dirname "$0")/.." && pwd)
mkdir -p "$work"
echo "lm_bench: CPU $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2- | sed 's/^ //'), $(nproc) cores"
records=(--records-dir "$work/records")
rate() { tr '\r' '\n' <"$1" | grep -oE 'at [0-9]+ tokens/s' | tail -1 | grep -oE '[0-9]+'; }
padding() { tr '\r' '\n' <"$1" | grep -oE '[0-9.]+% of computed' | tail -1 | cut -d% -f1; }
if [[ $which == all || $which == lm_bucketing ]]; then
  for input in bucket padded; do
    rm -rf "$work/ckpt-$input"
    "$build/apps/lm" "${records[@]}" --checkpoint-dir "$work/ckpt-$input" --input "$input" \
      --epochs 1 --max-steps 200 >/dev/null 2>"$work/$input.log"
  done
  python3 -c "
b, p = $(rate "$work/bucket.log"), $(rate "$work/padded.log")
print(f'bench lm_bucketing: {b} tokens/s ({b / p:.2f}x padded batches at {p} tokens/s; target >= 1.5); '
      f'padding computed: bucketed $(padding "$work/bucket.log")%, padded $(padding "$work/padded.log")%')"
fi
if [[ $which == all || $which == lm_perplexity ]]; then
  epochs=${LM_EPOCHS:-6}
  rm -rf "$work/ckpt-full"
  "$build/apps/lm" "${records[@]}" --checkpoint-dir "$work/ckpt-full" --epochs "$epochs" \
    >"$work/full.out" 2>"$work/full.log"
  ours=$(grep -oE 'test perplexity: [0-9.]+' "$work/full.out" | grep -oE '[0-9.]+$')
  /usr/bin/python3 "$root/bench/peers/lm_torch.py" "$work/records" --epochs "$epochs" | tee "$work/peer.out"
  peer=$(grep -oE 'lm_torch: .* test perplexity [0-9.]+' "$work/peer.out" | grep -oE '[0-9.]+$')
  python3 -c "print(f'bench lm_perplexity: {$ours:.1f} test perplexity after $epochs epochs ({$ours / $peer:.3f}x PyTorch\'s {$peer:.1f}; target <= 1.05)')"
fi

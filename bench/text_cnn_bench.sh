#!/usr/bin/env bash
# text_cnn_step: a training step of Runnel's text_cnn app against the PyTorch peer
# (bench/peers/text_cnn_torch.py, Debian's python3-torch), same model and batch (50), 2 threads,
# one epoch each, in the same run. Runnel's figure is the app's own rate (input pipeline
# included); PyTorch's is the median step (forward, backward, Adam) on tensors in memory.
#   bench/text_cnn_bench.sh BUILD_DIR [WORK_DIR]
set -euo pipefail
build=$1
work=${2:-$(mktemp -d)}
root=$(cd "$(dirname "$0")/.." && pwd)
mkdir -p "$work"
args=(--epochs 1 --records-dir "$work/records" --checkpoint-dir "$work/ckpt")
"$build/apps/text_cnn" "${args[@]}" --max-steps 1 >/dev/null 2>&1 # writes the records
rm -rf "$work/ckpt"
"$build/apps/text_cnn" "${args[@]}" 2>"$work/log" >/dev/null
rate=$(tr '\r' '\n' <"$work/log" | grep -oE '[0-9]+ ex/s' | tail -1 | cut -d' ' -f1)
(cd "$root/bench/peers" && /usr/bin/python3 text_cnn_torch.py --epochs 1 --threads 2) | tee "$work/peer"
peer=$(grep -oE 'text_cnn_torch_step: [0-9.]+' "$work/peer" | grep -oE '[0-9.]+$')
python3 -c "ms = 50 / $rate * 1000; print(f'bench text_cnn_step: {ms:.1f} ms ({ms / $peer:.2f}x PyTorch; target <= 1.0)')"

#!/usr/bin/env bash
# g2p_wer: the g2p app's held-out word error rate (beam search, width 4) after the same epochs
# (default 4) as the PyTorch peer with the same model (bench/peers/g2p_torch.py), in one run.
# Target: within 2 points. Both train in full: about 15 minutes for Runnel and 30 for the peer
# on 2 cores.
#   bench/g2p_bench.sh BUILD_DIR [WORK_DIR]
set -euo pipefail
build=$1
work=${2:-$(mktemp -d)}
root=$(cd "$(dirname "$0")/.." && pwd)
epochs=${G2P_EPOCHS:-4}
mkdir -p "$work"
echo "g2p_bench: CPU $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2- | sed 's/^ //'), $(nproc) cores"
rm -rf "$work/ckpt"
"$build/apps/g2p" --epochs "$epochs" --records-dir "$work/records" --checkpoint-dir "$work/ckpt" \
  >"$work/g2p.out" 2>"$work/g2p.log"
ours=$(grep -oE 'beam search \(width 4\): WER [0-9.]+' "$work/g2p.out" | grep -oE '[0-9.]+$')
/usr/bin/python3 "$root/bench/peers/g2p_torch.py" --epochs "$epochs" | tee "$work/peer.out"
peer=$(grep -oE 'g2p_torch: beam WER [0-9.]+' "$work/peer.out" | grep -oE '[0-9.]+$')
python3 -c "print(f'bench g2p_wer: {$ours:.2f}% held-out WER after $epochs epochs ({$ours - $peer:+.2f} points against PyTorch\'s {$peer:.2f}%; target within 2)')"

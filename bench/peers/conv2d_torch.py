# Peer for bench `conv2d_3x3_fwd`: PyTorch (oneDNN) Conv2D forward, channels-last, 2 threads.
# Input [32, 32, 32, 64] NHWC, 3x3 filter 64 -> 64, SAME padding, float32.
# Prints "ms_per_conv <best of 5 rounds>".
import sys, time
import torch

torch.set_num_threads(int(sys.argv[1]) if len(sys.argv) > 1 else 2)
x = torch.rand(32, 64, 32, 32).contiguous(memory_format=torch.channels_last)
w = torch.rand(64, 64, 3, 3).contiguous(memory_format=torch.channels_last)
with torch.no_grad():
    for _ in range(5):
        torch.nn.functional.conv2d(x, w, padding=1)
    best = 1e9
    for _ in range(5):
        start = time.perf_counter()
        for _ in range(20):
            torch.nn.functional.conv2d(x, w, padding=1)
        best = min(best, (time.perf_counter() - start) / 20 * 1e3)
print(f"ms_per_conv {best:.4f}")

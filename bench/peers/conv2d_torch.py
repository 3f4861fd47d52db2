# Peer for benches `conv2d_3x3_fwd` and `conv2d_3x3_bwd`: PyTorch (oneDNN) Conv2D, channels-last,
# 2 threads. Input [32, 32, 32, 64] NHWC, 3x3 filter 64 -> 64, SAME padding, float32.
#   conv2d_torch.py THREADS          forward: prints "ms_per_conv <best of 5 rounds>"
#   conv2d_torch.py THREADS bwd      the two backprops autograd runs for it (input and filter
#                                    gradients, aten::convolution_backward): "ms_per_bwd <best>"
import sys, time
import torch

torch.set_num_threads(int(sys.argv[1]) if len(sys.argv) > 1 else 2)
backward = len(sys.argv) > 2 and sys.argv[2] == "bwd"
x = torch.rand(32, 64, 32, 32).contiguous(memory_format=torch.channels_last)
w = torch.rand(64, 64, 3, 3).contiguous(memory_format=torch.channels_last)
dy = torch.ones(32, 64, 32, 32).contiguous(memory_format=torch.channels_last)


def once():
    if backward:
        torch.ops.aten.convolution_backward(dy, x, w, None, [1, 1], [1, 1], [1, 1], False, [0, 0],
                                            1, [True, True, False])
    else:
        torch.nn.functional.conv2d(x, w, padding=1)


with torch.no_grad():
    for _ in range(5):
        once()
    best = 1e9
    for _ in range(5):
        start = time.perf_counter()
        for _ in range(20):
            once()
        best = min(best, (time.perf_counter() - start) / 20 * 1e3)
print(f"ms_per_{'bwd' if backward else 'conv'} {best:.4f}")

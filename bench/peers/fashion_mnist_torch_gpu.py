# Peer for gpu_bench's `gpu_mlp_step` and `gpu_cnn_step`: the Fashion-MNIST models of
# apps/train/fashion_mnist_model.cpp in PyTorch on the GPU, one training step each (forward, backward,
# Adam), batch 100, float32 (TF32 off, as ours), the batch copied from host memory every step as
# our session feeds it. Prints "<model>_ms <median of 5 rounds>" and "<model>_peak_mib <the caching
# allocator's max_memory_allocated over the timed steps>" for mlp and cnn, and the device.
#   python3 fashion_mnist_torch_gpu.py [steps_per_round]
import sys
import time

import torch
import torch.nn as nn
import torch.nn.functional as F

if not torch.cuda.is_available():
    print("torch_gpu: no CUDA device (torch " + torch.__version__ + ")")
    sys.exit(2)
torch.backends.cuda.matmul.allow_tf32 = False
torch.backends.cudnn.allow_tf32 = False
torch.backends.cudnn.benchmark = True
dev = torch.device("cuda")
steps = int(sys.argv[1]) if len(sys.argv) > 1 else 200


class Mlp(nn.Module):
    def __init__(self):
        super().__init__()
        self.hidden = nn.Linear(784, 512)
        self.logits = nn.Linear(512, 10)

    def forward(self, x):
        return self.logits(F.relu(self.hidden(x)))


class Cnn(nn.Module):
    """Two 3x3 conv/pool blocks (32, 64 channels, SAME), dense 256 with dropout 0.5, logits."""

    def __init__(self):
        super().__init__()
        self.conv1 = nn.Conv2d(1, 32, 3, padding=1)
        self.conv2 = nn.Conv2d(32, 64, 3, padding=1)
        self.dense = nn.Linear(7 * 7 * 64, 256)
        self.logits = nn.Linear(256, 10)

    def forward(self, x):
        x = x.view(-1, 1, 28, 28)
        x = F.max_pool2d(F.relu(self.conv1(x)), 2)
        x = F.max_pool2d(F.relu(self.conv2(x)), 2)
        x = F.dropout(F.relu(self.dense(x.flatten(1))), 0.5, training=True)
        return self.logits(x)


def time_model(model):
    model = model.to(dev)
    opt = torch.optim.Adam(model.parameters(), lr=0.001)
    images = torch.rand(steps, 100, 784).pin_memory()
    labels = torch.randint(0, 10, (steps, 100), dtype=torch.int64).pin_memory()

    def step(i):
        x = images[i].to(dev, non_blocking=True)
        y = labels[i].to(dev, non_blocking=True)
        loss = F.cross_entropy(model(x), y)
        opt.zero_grad(set_to_none=True)
        loss.backward()
        opt.step()
        return loss

    for i in range(20):
        step(i)
    torch.cuda.synchronize()
    torch.cuda.reset_peak_memory_stats()
    rounds = []
    for _ in range(5):
        start = time.perf_counter()
        for i in range(steps):
            step(i)
        torch.cuda.synchronize()
        rounds.append((time.perf_counter() - start) / steps * 1e3)
    rounds.sort()
    return rounds[len(rounds) // 2], torch.cuda.max_memory_allocated() / 2**20


print(f"torch {torch.__version__} cuda {torch.version.cuda} cudnn {torch.backends.cudnn.version()} "
      f"on {torch.cuda.get_device_name(0)}")
torch.manual_seed(1)
for name, model in (("mlp", Mlp()), ("cnn", Cnn())):
    ms, peak = time_model(model)
    print(f"{name}_ms {ms:.4f}")
    print(f"{name}_peak_mib {peak:.2f}")

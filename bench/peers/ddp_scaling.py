#!/usr/bin/env python3
"""The peer of apps/train/scaling.cpp: the same synthetic model trained by PyTorch DDP.

ResNet-50 v1.5's variables with every layer's output channels divided by --scale (the same
table as apps/train/scaling/synthetic_model.cpp: each convolution's kernel [k, k, in, out] and
its batch norm's [2, out], the classifier [2048, 1000] and its bias), and layers whose forward
and backward passes sleep for the layer's FLOPs share of --compute-ms (backward twice forward)
and return gradients of the parameters' shapes: autograd Functions that sleep. DDP (gloo)
all-reduces the gradients in buckets of --bucket-mb (default 25 MB / scale, PyTorch's default
scaled with the model) as the backward pass produces them; SGD applies them.

Run it as scripts/cluster-run runs a task (bench/scaling_bench.sh does):
    ddp_scaling.py [options] --cluster SPEC --job ps|worker --task I [--auth-token-file F]
A ps task has nothing to do in DDP and waits to be stopped; worker I is rank I, worker 0's host
holds the rendezvous. Worker 0 prints the scaling app's line:
    scaling: N workers, K steps, step X ms mean (median ..., min ..., max ...), Y examples/s
"""
import argparse
import os
import signal
import subprocess
import sys
import time


def resnet50_layers(scale):
    def out(c):
        return max(1, c // scale)

    layers = []

    def conv(name, k, cin, cout, size):
        layers.append((name, [(k, k, cin, out(cout)), (2, out(cout))],
                       2.0 * k * k * cin * cout * size * size))

    conv("conv1", 7, 3, 64, 112)
    stages = [(3, 64, 256, 56), (4, 128, 512, 28), (6, 256, 1024, 14), (3, 512, 2048, 7)]
    cin = 64
    for s, (blocks, mid, cout, size) in enumerate(stages):
        for b in range(blocks):
            block = f"stage{s + 1}/block{b + 1}"
            in_size = size * 2 if (b == 0 and s > 0) else size
            conv(block + "/conv_a", 1, cin, mid, in_size)
            conv(block + "/conv_b", 3, mid, mid, size)
            conv(block + "/conv_c", 1, mid, cout, size)
            if b == 0:
                conv(block + "/shortcut", 1, cin, cout, size)
            cin = cout
    layers.append(("fc", [(2048, out(1000)), (out(1000),)], 2.0 * 2048 * 1000))
    return layers


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--scale", type=int, default=16)
    p.add_argument("--compute-ms", type=float, default=100)
    p.add_argument("--batch", type=int, default=32)
    p.add_argument("--steps", type=int, default=30)
    p.add_argument("--warmup", type=int, default=5)
    p.add_argument("--lr", type=float, default=0.5)
    p.add_argument("--bucket-mb", type=float, default=None)
    p.add_argument("--cluster", required=True)
    p.add_argument("--job", required=True)
    p.add_argument("--task", type=int, required=True)
    p.add_argument("--auth-token-file")
    a = p.parse_args()
    jobs = {}
    for part in a.cluster.split(";"):
        name, addrs = part.split("=", 1)
        jobs[name] = addrs.split(",")
    if a.job != "worker":
        # DDP has no parameter servers: wait until the harness stops this task.
        signal.pthread_sigmask(signal.SIG_BLOCK, [signal.SIGTERM, signal.SIGINT])
        signal.sigwait([signal.SIGTERM, signal.SIGINT])
        return 0
    workers = jobs["worker"]
    host, port = workers[a.task].rsplit(":", 1)
    master, master_port = workers[0].rsplit(":", 1)
    # gloo finds its interface from the hostname, which does not resolve to a simulated host's
    # address: name the interface that holds this task's address.
    for line in subprocess.run(["ip", "-o", "-4", "addr", "show"], capture_output=True,
                               text=True, check=True).stdout.splitlines():
        fields = line.split()
        if f"{host}/" in line:
            os.environ["GLOO_SOCKET_IFNAME"] = fields[1].split("@")[0]
    import torch
    import torch.distributed as dist
    torch.set_num_threads(1)
    dist.init_process_group("gloo", init_method=f"tcp://{master}:{int(master_port) + 1000}",
                            rank=a.task, world_size=len(workers))

    layers = resnet50_layers(a.scale)
    total_flops = sum(f for _, _, f in layers)
    forward_s = a.compute_ms / 1e3 / 3

    class Emulated(torch.autograd.Function):
        @staticmethod
        def forward(ctx, seconds, x, *params):
            ctx.seconds = seconds
            ctx.shapes = [q.shape for q in params]
            time.sleep(seconds)
            return x * 1.0

        @staticmethod
        def backward(ctx, grad):
            time.sleep(2 * ctx.seconds)
            value = float(grad.flatten()[0]) * 0.05
            return (None, grad) + tuple(torch.full(s, value) for s in ctx.shapes)

    class Layer(torch.nn.Module):
        def __init__(self, shapes, seconds):
            super().__init__()
            self.seconds = seconds
            self.params = torch.nn.ParameterList(
                [torch.nn.Parameter(torch.full(s, 0.01)) for s in shapes])

        def forward(self, x):
            return Emulated.apply(self.seconds, x, *self.params)

    model = torch.nn.Sequential(
        *[Layer(shapes, forward_s * f / total_flops) for _, shapes, f in layers])
    megabytes = sum(q.numel() for q in model.parameters()) * 4 / 1e6
    bucket = a.bucket_mb if a.bucket_mb is not None else 25.0 / a.scale
    ddp = torch.nn.parallel.DistributedDataParallel(model, bucket_cap_mb=bucket)
    sgd = torch.optim.SGD(ddp.parameters(), lr=a.lr)
    print(f"ddp worker {a.task} of {len(workers)}: {len(layers)} layers, {megabytes:.2f} MB, "
          f"buckets of {bucket:.2f} MB, {a.compute_ms:.1f} ms emulated compute a step",
          file=sys.stderr, flush=True)
    times = []
    for i in range(a.warmup + a.steps):
        x = torch.full((1,), 0.01 * (1 + (i * 7 + a.task * 3) % 11), requires_grad=True)
        t0 = time.perf_counter()
        sgd.zero_grad(set_to_none=True)
        ddp(x).sum().backward()
        sgd.step()
        if i >= a.warmup:
            times.append(time.perf_counter() - t0)
        print(f"ddp worker {a.task}: step {i + 1}/{a.warmup + a.steps}", file=sys.stderr,
              flush=True)
    mean = sum(times) / len(times)
    times.sort()
    n = len(workers)
    print(f"scaling: {n} workers, {len(times)} steps, step {mean * 1e3:.2f} ms mean (median "
          f"{times[len(times) // 2] * 1e3:.2f}, min {times[0] * 1e3:.2f}, max "
          f"{times[-1] * 1e3:.2f}), {a.batch * n / mean:.1f} examples/s", flush=True)
    dist.barrier()
    dist.destroy_process_group()
    return 0


if __name__ == "__main__":
    sys.exit(main())

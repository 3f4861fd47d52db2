#!/usr/bin/env python3
"""Python front-end benchmarks, each against the C++ API in the same run:
  python_run_overhead  a trivial Session.run from Python (a fed float32 scalar through Identity,
                       fetched), against the same session run from C++ (session::run in a loop,
                       the same feed), in 20 interleaved rounds of 2,000 runs each
  python_mlp_step      the Fashion-MNIST MLP trained from Python (examples/python/
                       fashion_mnist_mlp.py, one epoch), its mean step time against
                       apps/fashion_mnist --input memory (the same model, batches fed from memory)
Usage: bench/python_bench.py BUILD_DIR [NAME]. Prints `bench <name>: <figure> (<ratio>x <ref>)`.
"""
import os
import pathlib
import re
import statistics
import subprocess
import sys
import tempfile
import time

build = pathlib.Path(sys.argv[1] if len(sys.argv) > 1 else "build").resolve()
only = sys.argv[2] if len(sys.argv) > 2 else None
root = pathlib.Path(__file__).resolve().parents[1]
sys.path.insert(0, str(build / "python"))
env = dict(os.environ, PYTHONPATH=str(build / "python"))
with open("/proc/cpuinfo") as f:
    cpu = next((l.split(":", 1)[1].strip() for l in f if l.startswith("model name")), "?")
print("python_bench: %s, %d cores" % (cpu, os.cpu_count()), flush=True)


def run_overhead():
    """Python's and C++'s µs per run of the same session, in 20 interleaved rounds: the medians
    and the range of the rounds' ratios (this VM's speed drifts between seconds)."""
    import numpy as np
    import runnel as tf
    g = tf.Graph()
    with g.as_default():
        x = tf.placeholder(tf.float32, [], name="x")
        y = tf.identity(x)
    value = np.float32(1)
    feed = {x: value}
    py_us, cpp_us, ratios = [], [], []
    with tf.Session(graph=g) as s:
        s.run(y, feed)
        for _ in range(20):
            n = 2000
            t0 = time.perf_counter()
            for _ in range(n):
                s.run(y, feed)
            py_us.append((time.perf_counter() - t0) / n * 1e6)
            cpp_us.append(s._s.cpp_runs(y._t, x._t, value, n) * 1e6)
            ratios.append(py_us[-1] / cpp_us[-1])
    return statistics.median(py_us), statistics.median(cpp_us), sorted(ratios)


def mlp_steps():
    py = subprocess.run([sys.executable, str(root / "examples/python/fashion_mnist_mlp.py"),
                         "--epochs", "1"], capture_output=True, text=True, env=env, check=True)
    m = re.search(r"\(([0-9.]+) ms a step\)", py.stdout)
    with tempfile.TemporaryDirectory() as ck:
        cpp = subprocess.run([str(build / "apps/fashion_mnist"), "--input", "memory", "--epochs",
                              "1", "--checkpoint-dir", ck], capture_output=True, text=True,
                             check=True)
    c = re.search(r"step time: ([0-9.]+) ms", cpp.stdout + cpp.stderr)
    if not m or not c:
        raise SystemExit("python_bench: no step time in\n" + py.stdout + cpp.stdout)
    return float(m.group(1)), float(c.group(1))


if only in (None, "python_run_overhead"):
    pyt, cpp, ratios = run_overhead()
    print("bench python_run_overhead: %.2f us/run (%.2fx the same run from C++, %.2f us; "
          "median of 20 interleaved rounds, %.2f-%.2fx; targets 2x and 10 us)" %
          (pyt, statistics.median(ratios), cpp, ratios[0], ratios[-1]), flush=True)
if only in (None, "python_mlp_step"):
    py_ms, cpp_ms = mlp_steps()
    print("bench python_mlp_step: %.3f ms a step (%.2fx apps/fashion_mnist --input memory's "
          "%.3f ms; target 1.1x)" % (py_ms, py_ms / cpp_ms, cpp_ms), flush=True)

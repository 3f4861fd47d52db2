"""Sessions on a cluster from Python: a runnel-node process as the cluster's one task."""
import os
import pathlib
import socket
import subprocess
import time

import pytest

import runnel as tf

# CTest names the node binary; by hand, the build tree's beside the package.
NODE = os.environ.get("RUNNEL_NODE",
                      str(pathlib.Path(tf.__file__).resolve().parents[2] / "apps/runnel-node"))


@pytest.fixture
def node(tmp_path):
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    port_file = tmp_path / "port"
    proc = subprocess.Popen([NODE, "--cluster", "worker=127.0.0.1:%d" % port, "--job", "worker",
                             "--task", "0", "--port-file", str(port_file)],
                            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    try:
        deadline = time.monotonic() + 60
        while not port_file.exists():  # the node writes it once it serves
            if proc.poll() is not None:
                raise RuntimeError("runnel-node exited: %s" % proc.stderr.read().decode())
            if time.monotonic() > deadline:
                raise RuntimeError("runnel-node did not start within 60 s")
            time.sleep(0.01)
        yield "runnel://127.0.0.1:%d" % port
    finally:
        proc.terminate()
        proc.wait(30)


def test_ctrl_c_cancels_a_step_on_the_cluster(node, ctrl_c):
    q = tf.raw_ops.FIFOQueueV2(component_types=[tf.float32], shapes=[[]], capacity=2,
                               shared_name="cluster_ctrl_c")
    wait = tf.raw_ops.QueueDequeueV2(q, component_types=[tf.float32])
    v = tf.placeholder(tf.float32, [])
    put = tf.raw_ops.QueueEnqueueV2(q, [v])
    with tf.Session(node) as s:
        with ctrl_c(), pytest.raises(KeyboardInterrupt):
            s.run(wait)
        # The step was cancelled on the node too: its dequeue does not take the next element.
        s.run(put, {v: 7.0})
        assert s.run(wait) == 7.0

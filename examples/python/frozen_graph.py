"""Loads a frozen TensorFlow graph (GraphDef .pb or .pbtxt) and runs it on NumPy inputs.

    PYTHONPATH=build/python python3 examples/python/frozen_graph.py MODEL.pb INPUT:0 OUTPUT:0

Without arguments it first writes one — a small dense layer exported in TensorFlow's GraphDef
format — and loads that, so the example runs anywhere.
"""
import os
import sys
import tempfile

import numpy as np
import runnel as tf

if len(sys.argv) == 4:
    path, input_name, output_name = sys.argv[1:]
else:
    g = tf.Graph()
    with g.as_default():
        x = tf.placeholder(tf.float32, [None, 3], name="input")
        w = tf.constant([[1.0, -1.0], [0.5, 0.5], [2.0, 0.0]])
        tf.nn.softmax(tf.nn.bias_add(x @ w, tf.constant([0.1, -0.1])), name="probabilities")
    with tempfile.NamedTemporaryFile(suffix=".pb", delete=False) as f:
        f.write(g.as_graph_def("tensorflow"))
        path = f.name
    input_name, output_name = "input:0", "probabilities:0"

graph = tf.io.load_tf_graph(path)
print("loaded %s: %d nodes" % (path, len(graph)))
if len(sys.argv) != 4:
    os.unlink(path)
x = graph.get_tensor_by_name(input_name)
y = graph.get_tensor_by_name(output_name)
batch = np.random.default_rng(0).normal(size=[4] + [d or 1 for d in x.shape.as_list()[1:]])
with tf.Session(graph=graph) as s:
    out = s.run(y, {x: batch})
print("%s for a batch of %d: shape %s" % (output_name, len(batch), out.shape))
print(out)

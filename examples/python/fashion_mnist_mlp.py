"""Trains the 784-512-10 MLP on Fashion-MNIST from Python, as TensorFlow 1.x would.

    PYTHONPATH=build/python python3 examples/python/fashion_mnist_mlp.py [--epochs N]
        [--min-accuracy A]

Data: Debian's dataset-fashion-mnist (/usr/share/datasets/fashion-mnist). The same model, batch
and optimizer as apps/fashion_mnist (./scripts/demo), so the accuracies compare.
"""
import argparse
import gzip
import time

import numpy as np
import runnel as tf

DATA = "/usr/share/datasets/fashion-mnist"


def load(split):
    with gzip.open("%s/%s-images-idx3-ubyte.gz" % (DATA, split)) as f:
        images = np.frombuffer(f.read(), np.uint8, offset=16).reshape(-1, 784)
    with gzip.open("%s/%s-labels-idx1-ubyte.gz" % (DATA, split)) as f:
        labels = np.frombuffer(f.read(), np.uint8, offset=8)
    return (images / np.float32(255)).astype(np.float32), labels.astype(np.int32)


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--epochs", type=int, default=5)
    p.add_argument("--batch", type=int, default=100)
    p.add_argument("--min-accuracy", type=float, default=0.0)
    args = p.parse_args()
    (train_x, train_y), (test_x, test_y) = load("train"), load("t10k")

    tf.set_random_seed(1)
    x = tf.placeholder(tf.float32, [None, 784], name="x")
    y = tf.placeholder(tf.int32, [None], name="y")
    with tf.name_scope("hidden"):
        w1 = tf.Variable(tf.truncated_normal([784, 512], stddev=0.05), name="weights")
        b1 = tf.Variable(tf.zeros([512]), name="biases")
        hidden = tf.nn.relu(x @ w1 + b1)
    with tf.name_scope("logits"):
        w2 = tf.Variable(tf.truncated_normal([512, 10], stddev=0.05), name="weights")
        b2 = tf.Variable(tf.zeros([10]), name="biases")
        logits = hidden @ w2 + b2
    loss = tf.reduce_mean(tf.nn.sparse_softmax_cross_entropy_with_logits(labels=y, logits=logits))
    correct = tf.equal(tf.cast(tf.argmax(logits, 1), tf.int32), y)
    accuracy = tf.reduce_mean(tf.cast(correct, tf.float32))
    train = tf.train.AdamOptimizer(0.001).minimize(loss)

    rng = np.random.default_rng(1)
    with tf.Session() as s:
        s.run(tf.global_variables_initializer())
        for epoch in range(args.epochs):
            order, start = rng.permutation(len(train_x)), time.perf_counter()
            for i in range(0, len(order), args.batch):
                batch = order[i:i + args.batch]
                s.run(train, {x: train_x[batch], y: train_y[batch]})
            step_ms = (time.perf_counter() - start) * 1e3 / (len(order) // args.batch)
            acc = s.run(accuracy, {x: test_x, y: test_y})
            print("epoch %d: test accuracy %.4f (%.2f ms a step)" % (epoch + 1, acc, step_ms),
                  flush=True)
    if acc < args.min_accuracy:
        raise SystemExit("test accuracy %.4f is under --min-accuracy %.4f" %
                         (acc, args.min_accuracy))


if __name__ == "__main__":
    main()

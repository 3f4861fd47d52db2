"""TensorFlow 1.x's "MNIST for ML beginners" tutorial (mnist_softmax.py), ported to Runnel.

    PYTHONPATH=build/python python3 examples/python/mnist_softmax.py

What changed from the tutorial: the import (`import runnel as tf`), and the data — TensorFlow's
tutorial downloads MNIST through tensorflow.examples.tutorials.mnist.input_data; there is no
network here, so `read_data_sets` below reads Debian's Fashion-MNIST (same format, harder
classes: expect ~0.83 where digits give ~0.92). The model, loss, optimizer, session and
evaluation lines are the tutorial's.
"""
import gzip

import numpy as np
import runnel as tf


class _Split:
    def __init__(self, images, labels):
        self.images, self.labels, self._next = images, labels, 0

    def next_batch(self, n):
        if self._next + n > len(self.images):
            self._next = 0
        batch = slice(self._next, self._next + n)
        self._next += n
        return self.images[batch], self.labels[batch]


def read_data_sets(data_dir="/usr/share/datasets/fashion-mnist", one_hot=True):
    """input_data.read_data_sets's interface over the idx files in data_dir."""
    def load(split):
        with gzip.open("%s/%s-images-idx3-ubyte.gz" % (data_dir, split)) as f:
            images = np.frombuffer(f.read(), np.uint8, offset=16).reshape(-1, 784)
        with gzip.open("%s/%s-labels-idx1-ubyte.gz" % (data_dir, split)) as f:
            labels = np.frombuffer(f.read(), np.uint8, offset=8)
        if one_hot:
            labels = np.eye(10, dtype=np.float32)[labels]
        return _Split((images / 255.0).astype(np.float32), labels)

    class DataSets:
        train, test = load("train"), load("t10k")

    return DataSets


def main():
    mnist = read_data_sets(one_hot=True)

    # Create the model
    x = tf.placeholder(tf.float32, [None, 784])
    W = tf.Variable(tf.zeros([784, 10]))
    b = tf.Variable(tf.zeros([10]))
    y = tf.matmul(x, W) + b

    # Define loss and optimizer
    y_ = tf.placeholder(tf.float32, [None, 10])
    cross_entropy = tf.reduce_mean(
        tf.nn.softmax_cross_entropy_with_logits(labels=y_, logits=y))
    train_step = tf.train.GradientDescentOptimizer(0.5).minimize(cross_entropy)

    sess = tf.InteractiveSession()
    tf.global_variables_initializer().run()
    # Train
    for _ in range(1000):
        batch_xs, batch_ys = mnist.train.next_batch(100)
        sess.run(train_step, feed_dict={x: batch_xs, y_: batch_ys})

    # Test trained model
    correct_prediction = tf.equal(tf.argmax(y, 1), tf.argmax(y_, 1))
    accuracy = tf.reduce_mean(tf.cast(correct_prediction, tf.float32))
    print(sess.run(accuracy, feed_dict={x: mnist.test.images, y_: mnist.test.labels}))


if __name__ == "__main__":
    main()

# PYTHONPATH=build/python python3 examples/python/sequence_lstm.py [--steps N] [--min-accuracy A]
#
# A TensorFlow 1.x-style recurrent model: an LSTM reads sequences of 2 to 20 numbers (batches of
# mixed lengths, padded) and says whether the last number is larger than the first, which it
# must remember across the whole sequence. tf.nn.dynamic_rnn with sequence_length gives each
# example's state at its own length; tf.while_loop and tf.cond show up in the evaluation.
import argparse

import numpy as np
import runnel as tf

parser = argparse.ArgumentParser()
parser.add_argument("--steps", type=int, default=600)
parser.add_argument("--min-accuracy", type=float, default=0.0)
args = parser.parse_args()

rng = np.random.RandomState(0)
MAX_LEN, BATCH = 20, 64


def batch(n):
    lengths = rng.randint(2, MAX_LEN + 1, size=n).astype(np.int32)
    xs = np.zeros((n, MAX_LEN, 1), np.float32)
    for i, n_i in enumerate(lengths):
        xs[i, :n_i, 0] = rng.uniform(-1, 1, size=n_i)
    labels = (xs[np.arange(n), lengths - 1, 0] > xs[:, 0, 0]).astype(np.int32)
    return xs, lengths, labels


tf.set_random_seed(1)
x = tf.placeholder(tf.float32, [None, MAX_LEN, 1], name="x")
lengths = tf.placeholder(tf.int32, [None], name="lengths")
labels = tf.placeholder(tf.int32, [None], name="labels")
cell = tf.nn.rnn_cell.BasicLSTMCell(32)
outputs, state = tf.nn.dynamic_rnn(cell, x, sequence_length=lengths, dtype=tf.float32)
w = tf.Variable(tf.truncated_normal([32, 2], stddev=0.1), name="w")
b = tf.Variable(tf.zeros([2]), name="b")
logits = tf.matmul(state.h, w) + b
loss = tf.reduce_mean(tf.nn.sparse_softmax_cross_entropy_with_logits(labels=labels,
                                                                     logits=logits))
train = tf.train.AdamOptimizer(0.01).minimize(loss)
correct = tf.reduce_sum(tf.cast(tf.equal(tf.cast(tf.argmax(logits, 1), tf.int32), labels),
                                tf.int32))

# The number of right answers over several test batches, counted in a graph loop.
test_x, test_len, test_y = batch(4 * BATCH)
tests = tf.constant(test_x.reshape(4, BATCH, MAX_LEN, 1))
test_lengths, test_labels = tf.constant(test_len.reshape(4, BATCH)), \
    tf.constant(test_y.reshape(4, BATCH))


def count(i, total):
    _, s = tf.nn.dynamic_rnn(cell, tf.gather(tests, i),
                             sequence_length=tf.gather(test_lengths, i), dtype=tf.float32,
                             scope="eval")
    guess = tf.cast(tf.argmax(tf.matmul(s.h, w) + b, 1), tf.int32)
    right = tf.reduce_sum(tf.cast(tf.equal(guess, tf.gather(test_labels, i)), tf.int32))
    return i + 1, total + tf.cond(right > 0, lambda: right, lambda: tf.constant(0))


_, test_correct = tf.while_loop(lambda i, total: i < 4, count, [0, 0])

with tf.Session() as s:
    s.run(tf.global_variables_initializer())
    for step in range(1, args.steps + 1):
        xs, ls, ys = batch(BATCH)
        value, _ = s.run([loss, train], {x: xs, lengths: ls, labels: ys})
        if step % 100 == 0:
            print("step %d: loss %.4f" % (step, value))
    accuracy = s.run(test_correct) / float(4 * BATCH)
    print("test accuracy %.3f" % accuracy)
    if accuracy < args.min_accuracy:
        raise SystemExit("accuracy %.3f is under --min-accuracy %.3f" % (accuracy,
                                                                         args.min_accuracy))

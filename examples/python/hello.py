# python3 examples/python/hello.py
import numpy as np
import runnel as tf

x = tf.placeholder(tf.float32, [None, 1], name="x")
y = tf.placeholder(tf.float32, [None, 1], name="y")
w = tf.Variable(tf.zeros([1, 1]), name="w")
b = tf.Variable(tf.zeros([1]), name="b")
loss = tf.reduce_mean(tf.square(x @ w + b - y))
train = tf.train.GradientDescentOptimizer(0.1).minimize(loss)

with tf.Session() as s:
    s.run(tf.global_variables_initializer())
    xs = np.array([[0], [1], [2], [3]], np.float32)
    for step in range(200):
        s.run(train, {x: xs, y: 2 * xs - 1})  # NumPy arrays are fed without a copy
    print("w = %.3f, b = %.3f" % (s.run(w)[0, 0], s.run(b)[0]))

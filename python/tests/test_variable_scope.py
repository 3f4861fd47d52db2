"""tf.variable_scope, tf.get_variable and the initializers: names, sharing, reuse modes, the
errors TensorFlow gives, variables made while a loop is built, and initial values."""
import numpy as np
import pytest

import runnel as tf


def test_names_sharing_and_reuse_modes():
    with tf.variable_scope("layer1"):
        w = tf.get_variable("w", [3, 2])
        y = tf.matmul(tf.ones([1, 3]), w)
        with tf.variable_scope("inner"):
            b = tf.get_variable("b", [2], initializer=tf.zeros_initializer())
    assert w.name == "layer1/w:0" and b.name == "layer1/inner/b:0"
    assert y.name.startswith("layer1/")
    with tf.variable_scope("layer1", reuse=True):
        assert tf.get_variable("w", [3, 2]) is w
        with tf.variable_scope("inner", reuse=False):  # reuse=True is inherited
            assert tf.get_variable("b") is b
    with tf.variable_scope("layer1") as scope:
        scope.reuse_variables()
        assert tf.get_variable("w") is w
    with tf.variable_scope("shared", reuse=tf.AUTO_REUSE):
        first = tf.get_variable("v", [4])
    with tf.variable_scope("shared", reuse=tf.AUTO_REUSE):
        assert tf.get_variable("v", [4]) is first
    with tf.variable_scope(scope):  # a scope object: entered at its own full name
        assert tf.get_variable_scope().name == "layer1"
    with tf.variable_scope(None, default_name="dense"):
        d0 = tf.get_variable("k", [1])
    with tf.variable_scope(None, default_name="dense"):
        d1 = tf.get_variable("k", [1])
    assert (d0.name, d1.name) == ("dense/k:0", "dense_1/k:0")
    assert {v.name for v in tf.trainable_variables()} >= {"layer1/w:0", "shared/v:0"}


def test_errors_are_tensorflows():
    with tf.variable_scope("s"):
        tf.get_variable("v", [2])
        with pytest.raises(ValueError, match="Variable s/v already exists, disallowed"):
            tf.get_variable("v", [2])
    with tf.variable_scope("s", reuse=True):
        with pytest.raises(ValueError, match="Variable s/nope does not exist"):
            tf.get_variable("nope", [2])
        with pytest.raises(ValueError, match="Trying to share variable s/v, but specified shape"):
            tf.get_variable("v", [3])
    with pytest.raises(ValueError, match="must be fully defined"):
        tf.get_variable("partial", [None, 2])
    with pytest.raises(NotImplementedError, match="regularizer"):
        tf.get_variable("r", [2], regularizer=lambda v: v)
    tf.constant(1.0, name="taken")
    with pytest.raises(ValueError, match="a node named 'taken' already exists"):
        tf.get_variable("taken", [1])


def test_initial_values():
    tf.set_random_seed(3)
    with tf.variable_scope("init", initializer=tf.constant_initializer(0.5)):
        half = tf.get_variable("half", [2, 2])
        ints = tf.get_variable("ints", [3], dtype=tf.int32, initializer=tf.zeros_initializer())
        given = tf.get_variable("given", initializer=tf.constant([1.0, 2.0]))
        listed = tf.get_variable("listed", [2, 2], initializer=tf.constant_initializer(
            [1, 2, 3, 4]))
    glorot = tf.get_variable("glorot", [200, 300])  # the default for floats
    he = tf.get_variable("he", [3, 3, 16, 32], initializer=tf.initializers.he_normal(seed=1))
    normal = tf.get_variable("normal", [1000],
                             initializer=tf.random_normal_initializer(1.0, 0.1, seed=2))
    with tf.Session() as s:
        s.run(tf.global_variables_initializer())
        h, i, gv, ls, gl, hv, nv = s.run([half, ints, given, listed, glorot, he, normal])
    assert h.tolist() == [[0.5, 0.5], [0.5, 0.5]] and i.tolist() == [0, 0, 0]
    assert gv.tolist() == [1, 2] and ls.tolist() == [[1, 2], [3, 4]]
    limit = np.sqrt(6.0 / 500)
    assert np.abs(gl).max() <= limit and np.abs(gl).max() > 0.9 * limit
    assert abs(hv.std() - np.sqrt(2.0 / (3 * 3 * 16))) < 0.15 * np.sqrt(2.0 / (3 * 3 * 16))
    assert abs(nv.mean() - 1.0) < 0.02 and abs(nv.std() - 0.1) < 0.02


def test_a_variable_made_while_a_loop_is_built_is_made_once_outside_it():
    def body(i, acc):
        with tf.variable_scope("step", reuse=tf.AUTO_REUSE):
            w = tf.get_variable("w", [], initializer=tf.constant_initializer(2.0))
        return i + 1, acc * w

    _, out = tf.while_loop(lambda i, acc: i < 5, body, [0, 1.0])
    step = [v for v in tf.global_variables() if v.name == "step/w:0"]
    assert len(step) == 1
    with tf.Session() as s:
        s.run(tf.global_variables_initializer())
        assert s.run(out) == 32.0
        grad, = tf.gradients(out, step[0].value())
    with tf.Session() as s:
        s.run(tf.global_variables_initializer())
        assert s.run(grad) == pytest.approx(5 * 2.0 ** 4)

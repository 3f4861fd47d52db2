"""SavedModels from Python: simple_save a trained graph, load it back, run its signature."""
import os

import numpy as np
import pytest

import runnel as tf


def _trained_model(tmp_path):
    rng = np.random.default_rng(0)
    xs = rng.normal(size=(64, 4)).astype(np.float32)
    ys = (xs @ np.array([[1.0], [-2.0], [0.5], [3.0]], np.float32)).astype(np.float32)
    x = tf.placeholder(tf.float32, [None, 4], name="x")
    y_ = tf.placeholder(tf.float32, [None, 1], name="y_")
    w = tf.Variable(tf.zeros([4, 1]), name="w")
    b = tf.Variable(tf.zeros([1]), name="b")
    y = tf.identity(tf.matmul(x, w) + b, name="y")
    loss = tf.reduce_mean(tf.square(y - y_))
    train = tf.train.GradientDescentOptimizer(0.1).minimize(loss)
    export = tmp_path / "export" / "1"
    with tf.Session() as s:
        s.run(tf.global_variables_initializer())
        for _ in range(50):
            s.run(train, {x: xs, y_: ys})
        want = s.run(y, {x: xs[:5]})
        tf.saved_model.simple_save(s, export, inputs={"x": x}, outputs={"y": y})
    return export, xs, want


def test_simple_save_then_load_and_run(tmp_path):
    export, xs, want = _trained_model(tmp_path)
    assert (export / "saved_model.pb").exists()
    assert (export / "variables" / "variables.index").exists()
    m = tf.saved_model.load(export)
    assert m.tags == ["serve"]
    sig = m.signatures["serving_default"]
    assert sig["method"] == "tensorflow/serving/predict"
    assert sig["inputs"]["x"] == ("x:0", "float32", [None, 4])
    assert sig["outputs"]["y"][0] == "y:0"
    got = m.run({"x": xs[:5]})
    assert list(got) == ["y"]
    # The trained values came back: the same outputs as the session that saved them.
    np.testing.assert_allclose(got["y"], want, rtol=1e-6)
    assert "serving_default" in repr(m)


def test_load_errors_name_what_is_wrong(tmp_path):
    export, xs, _ = _trained_model(tmp_path)
    m = tf.saved_model.load(export, tags=["serve"])
    with pytest.raises(tf.errors.NotFoundError, match="no signature 'nope'.*serving_default"):
        m.run({"x": xs}, signature="nope")
    with pytest.raises(tf.errors.InvalidArgumentError,
                       match=r"input 'x': the signature takes shape \[\?,4\], got \[2,3\]"):
        m.run({"x": np.zeros((2, 3), np.float32)})
    with pytest.raises(tf.errors.NotFoundError, match="serve"):
        tf.saved_model.load(export, tags=["train"])
    with pytest.raises(tf.errors.OpError):
        tf.saved_model.load(tmp_path / "missing")
    # TensorFlow's builder refuses an existing directory; so does simple_save.
    x = tf.placeholder(tf.float32, [None, 4], name="x2")
    with tf.Session() as s:
        with pytest.raises(tf.errors.OpError, match="exist"):
            tf.saved_model.simple_save(s, export, inputs={"x": x}, outputs={"y": x})

"""Training from Python: variables, gradients, optimizers, the saver."""
import numpy as np
import pytest

import runnel as tf


def test_variables_and_assign():
    v = tf.Variable([1.0, 2.0], name="v")
    w = tf.Variable(lambda: tf.zeros([2]), trainable=False)
    assert v.name == "v:0" and v.shape.as_list() == [2]
    assert [x.name for x in tf.trainable_variables()] == ["v:0"]
    assert {x.name for x in tf.global_variables()} == {"v:0", "Variable:0"}
    with tf.Session() as s:
        s.run(tf.global_variables_initializer())
        np.testing.assert_array_equal(s.run(v + w), [1, 2])
        s.run(v.assign_add([1.0, 1.0]))
        np.testing.assert_array_equal(s.run(v), [2, 3])
        v.load([5.0, 6.0], s)
        np.testing.assert_array_equal(v.eval(s), [5, 6])


def test_gradients():
    x = tf.Variable(3.0)
    y = x * x + 2.0 * x
    z = tf.constant(1.0)
    gx, gz = tf.gradients(y, [x, z])
    assert gz is None
    with tf.Session() as s:
        s.run(tf.global_variables_initializer())
        assert s.run(gx) == pytest.approx(8.0)
    assert tf.gradients(tf.argmax(tf.stack([x, x])), x) == [None]  # not differentiable
    m = tf.Variable(tf.ones([2, 3]))
    with pytest.raises(tf.errors.OpError, match="BiasAddGrad"):  # differentiable, no gradient
        tf.gradients(tf.reduce_sum(tf.raw_ops.BiasAddGrad(m)), m)


@pytest.mark.parametrize("make", [
    lambda: tf.train.GradientDescentOptimizer(0.1),
    lambda: tf.train.MomentumOptimizer(0.05, 0.9),
    lambda: tf.train.AdamOptimizer(0.1),
    lambda: tf.train.AdagradOptimizer(0.5),
    lambda: tf.train.RMSPropOptimizer(0.01),
])
def test_optimizers_fit_a_line(make):
    rng = np.random.default_rng(0)
    xs = rng.normal(size=(64, 1)).astype(np.float32)
    ys = 3 * xs - 1
    x = tf.placeholder(tf.float32, [None, 1])
    y = tf.placeholder(tf.float32, [None, 1])
    w = tf.Variable(tf.zeros([1, 1]))
    b = tf.Variable(tf.zeros([1]))
    loss = tf.reduce_mean(tf.square(x @ w + b - y))
    step = tf.train.get_or_create_global_step()
    train = make().minimize(loss, global_step=step)
    with tf.Session() as s:
        s.run(tf.global_variables_initializer())
        for _ in range(500):
            s.run(train, {x: xs, y: ys})
        assert s.run(loss, {x: xs, y: ys}) < 1e-3
        assert s.run(step) == 500


def test_compute_and_apply_gradients():
    w = tf.Variable(2.0, name="w")
    loss = tf.square(w)
    opt = tf.train.GradientDescentOptimizer(0.25)
    gv = opt.compute_gradients(loss)
    assert len(gv) == 1 and gv[0][1].name == "w:0"
    clipped = [(tf.clip_by_value(g, -1.0, 1.0), v) for g, v in gv]
    train = opt.apply_gradients(clipped)
    with tf.Session() as s:
        s.run(tf.global_variables_initializer())
        s.run(train)
        assert s.run(w) == pytest.approx(1.75)  # the gradient 4 clipped to 1


@pytest.mark.parametrize("fmt", ["hdf5", "tensorflow"])
def test_saver_round_trip(tmp_path, fmt):
    v = tf.Variable([1.0, 2.0], name="v")
    saver = tf.train.Saver(format=fmt)
    with tf.Session() as s:
        s.run(tf.global_variables_initializer())
        path = saver.save(s, str(tmp_path / "model"), global_step=7)
        assert "model-7" in path
        s.run(v.assign([0.0, 0.0]))
        saver.restore(s, tf.train.latest_checkpoint(tmp_path))
        np.testing.assert_array_equal(s.run(v), [1, 2])
    with tf.Session() as s:
        with pytest.raises(tf.errors.OpError):
            saver.restore(s, str(tmp_path / "missing"))
    assert tf.train.latest_checkpoint(tmp_path / "empty") is None


def test_gathered_variables_get_indexed_slices_that_optimizers_apply_sparsely():
    table = tf.Variable(np.arange(12, dtype=np.float32).reshape(6, 2))
    ids = tf.placeholder(tf.int32, [None])
    rows = tf.nn.embedding_lookup(table, ids)
    loss = tf.reduce_sum(rows * rows)
    grad, = tf.gradients(loss, table)
    assert isinstance(grad, tf.IndexedSlices) and grad.dtype == tf.float32
    opt = tf.train.GradientDescentOptimizer(0.1)
    (sparse, var), = opt.compute_gradients(loss)
    assert isinstance(sparse, tf.IndexedSlices) and var.name == table.name
    clipped, norm = tf.clip_by_global_norm([sparse, None], 1.0)
    assert isinstance(clipped[0], tf.IndexedSlices) and clipped[1] is None
    step = opt.apply_gradients([(clipped[0], table)])
    with tf.Session() as s:
        s.run(tf.global_variables_initializer())
        dense, n = s.run([grad, norm], {ids: [1, 4, 1]})  # fetched dense; row 1 twice
        want = np.zeros((6, 2), np.float32)
        want[1] = 2 * 2 * np.array([2, 3])
        want[4] = 2 * np.array([8, 9])
        np.testing.assert_allclose(dense, want)
        assert n == pytest.approx(np.sqrt(2 * (4 + 9) * 4 + 4 * (64 + 81)))
        s.run(step, {ids: [1, 4, 1]})
        after = s.run(table)
    before = np.arange(12, dtype=np.float32).reshape(6, 2)
    # Only the gathered rows moved; each (2 * x per gather) is scaled by 1 / norm.
    scale = 1.0 / n
    np.testing.assert_allclose(after[[0, 2, 3, 5]], before[[0, 2, 3, 5]])
    np.testing.assert_allclose(after[1], before[1] - 0.1 * scale * 4 * before[1], rtol=1e-5)
    np.testing.assert_allclose(after[4], before[4] - 0.1 * scale * 2 * before[4], rtol=1e-5)


def test_clip_by_global_norm_and_clip_by_norm_match_numpy():
    a, b = tf.constant([3.0, 4.0]), tf.constant([[12.0]])
    clipped, norm = tf.clip_by_global_norm([a, b], 6.5)
    same, _ = tf.clip_by_global_norm([a], 100.0)
    by_norm = tf.clip_by_norm(tf.constant([[3.0, 4.0], [0.3, 0.4]]), 1.0, axes=[1])
    with tf.Session() as s:
        ca, cb, n, sa, bn = s.run([clipped[0], clipped[1], norm, same[0], by_norm])
    assert n == pytest.approx(13.0) and sa.tolist() == [3.0, 4.0]
    np.testing.assert_allclose(ca, [1.5, 2.0])
    np.testing.assert_allclose(cb, [[6.0]])
    np.testing.assert_allclose(bn, [[0.6, 0.8], [0.3, 0.4]], rtol=1e-6)
    assert tf.global_norm([a, None, b]).graph is a.graph


def test_a_variable_made_in_a_name_scope_reads_by_its_own_name_and_has_a_gradient():
    with tf.name_scope("layer"):
        w = tf.Variable([2.0], name="w")
    assert w.name == "layer/w:0" and w.value().name == "layer/w/read:0"
    grad, = tf.gradients(tf.reduce_sum(w * w), w)
    with tf.Session() as s:
        s.run(tf.global_variables_initializer())
        assert s.run(grad).tolist() == [4.0]

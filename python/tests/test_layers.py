"""tf.layers: variable names as TensorFlow gives them, each layer's numbers against NumPy,
dropout and batch normalization switched by a bool or a boolean tensor, the moving averages'
update ops, the errors, and a small conv net that learns."""
import numpy as np
import pytest

import runnel as tf


def test_names_reuse_and_dense_over_any_rank():
    x = tf.placeholder(tf.float32, [None, 4])
    tf.layers.dense(x, 3)
    tf.layers.dense(x, 3)
    with tf.variable_scope("model"):
        y = tf.layers.dense(x, 2, activation=tf.nn.relu, name="out")
    again = tf.layers.dense(x, 2, name="model/out", reuse=True)
    seq = tf.placeholder(tf.float32, [None, None, 4])
    z = tf.layers.dense(seq, 5, use_bias=False, name="proj")
    names = [v.name for v in tf.global_variables()]
    assert names == ["dense/kernel:0", "dense/bias:0", "dense_1/kernel:0", "dense_1/bias:0",
                     "model/out/kernel:0", "model/out/bias:0", "proj/kernel:0"]
    xs = np.random.RandomState(0).randn(6, 4).astype(np.float32)
    ss = np.random.RandomState(1).randn(2, 3, 4).astype(np.float32)
    with tf.Session() as s:
        s.run(tf.global_variables_initializer())
        s.run(tf.global_variables()[5].assign([0.5, -0.5]))
        k, b, k2 = s.run(["model/out/kernel:0", "model/out/bias:0", "proj/kernel:0"])
        got, shared, proj = s.run([y, again, z], {x: xs, seq: ss})
    np.testing.assert_allclose(got, np.maximum(xs @ k + b, 0), rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(shared, xs @ k + b, rtol=1e-5, atol=1e-6)
    assert proj.shape == (2, 3, 5)
    np.testing.assert_allclose(proj, ss @ k2, rtol=1e-5, atol=1e-6)


def _conv_valid(x, k, stride):
    """A plain NumPy NHWC convolution with VALID padding."""
    n, h, w, _ = x.shape
    kh, kw, _, f = k.shape
    oh, ow = (h - kh) // stride + 1, (w - kw) // stride + 1
    out = np.zeros((n, oh, ow, f), np.float32)
    for i in range(oh):
        for j in range(ow):
            patch = x[:, i * stride:i * stride + kh, j * stride:j * stride + kw, :]
            out[:, i, j, :] = np.tensordot(patch, k, axes=([1, 2, 3], [0, 1, 2]))
    return out


def test_conv_pooling_and_flatten_match_numpy():
    x = tf.placeholder(tf.float32, [None, 7, 7, 2])
    c = tf.layers.conv2d(x, 3, (3, 2), strides=2, bias_initializer=tf.constant_initializer(0.25))
    same = tf.layers.conv2d(x, 4, 3, padding="same")
    mp = tf.layers.max_pooling2d(x, 2, 2)
    ap = tf.layers.average_pooling2d(x, 3, 2, padding="valid")
    flat = tf.layers.flatten(mp)
    unknown = tf.placeholder(tf.float32, [None, None, 3])
    flat_unknown = tf.layers.flatten(unknown)
    assert [v.name for v in tf.trainable_variables()] == [
        "conv2d/kernel:0", "conv2d/bias:0", "conv2d_1/kernel:0", "conv2d_1/bias:0"]
    assert flat.shape.dims == [None, 3 * 3 * 2]
    xs = np.random.RandomState(2).randn(2, 7, 7, 2).astype(np.float32)
    with tf.Session() as s:
        s.run(tf.global_variables_initializer())
        k = s.run("conv2d/kernel:0")
        got, got_same, m, a, f, fu = s.run(
            [c, same, mp, ap, flat, flat_unknown],
            {x: xs, unknown: np.arange(24, dtype=np.float32).reshape(2, 4, 3)})
    assert k.shape == (3, 2, 2, 3)
    np.testing.assert_allclose(got, _conv_valid(xs, k, 2) + 0.25, rtol=1e-4, atol=1e-5)
    assert got_same.shape == (2, 7, 7, 4)
    want_max = xs[:, :6, :6, :].reshape(2, 3, 2, 3, 2, 2).max(axis=(2, 4))
    np.testing.assert_allclose(m, want_max)
    want_avg = np.stack([np.stack([xs[:, 2 * i:2 * i + 3, 2 * j:2 * j + 3, :].mean(axis=(1, 2))
                                   for j in range(3)], 1) for i in range(3)], 1)
    np.testing.assert_allclose(a, want_avg, rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(f, want_max.reshape(2, -1))
    assert fu.shape == (2, 12)


def test_dropout_follows_training_given_as_a_bool_or_a_tensor():
    x = tf.ones([1000])
    training = tf.placeholder(tf.bool, [])
    off = tf.layers.dropout(x, rate=0.5)  # training=False: the identity
    on = tf.layers.dropout(x, rate=0.5, training=True)
    switched = tf.layers.dropout(x, rate=0.25, training=training)
    with tf.Session() as s:
        o, n = s.run([off, on])
        train, test = s.run(switched, {training: True}), s.run(switched, {training: False})
    assert (o == 1).all()
    assert set(np.unique(n).tolist()) == {0.0, 2.0} and 350 < (n == 0).sum() < 650
    assert set(np.unique(train).tolist()) == {0.0, float(np.float32(1) / np.float32(0.75))} and 150 < (train == 0).sum() < 350
    assert (test == 1).all()


def test_batch_normalization_statistics_and_moving_averages():
    x = tf.placeholder(tf.float32, [None, 2, 3])
    training = tf.placeholder(tf.bool, [])
    y = tf.layers.batch_normalization(x, training=training, momentum=0.5, epsilon=1e-3)
    channels_first = tf.layers.batch_normalization(x, axis=1, training=True)
    frozen = tf.layers.batch_normalization(x, name="frozen")  # training=False: no updates
    updates = tf.get_collection(tf.GraphKeys.UPDATE_OPS)
    assert len(updates) == 4  # two per layer that trains
    assert [v.name for v in tf.trainable_variables()][:2] == [
        "batch_normalization/gamma:0", "batch_normalization/beta:0"]
    mean_var = [v for v in tf.global_variables()
                if v.name == "batch_normalization/moving_mean:0"][0]
    assert mean_var not in tf.trainable_variables()
    xs = np.random.RandomState(3).randn(4, 2, 3).astype(np.float32) * 2 + 1
    mean, var = xs.mean(axis=(0, 1)), xs.var(axis=(0, 1))
    with tf.Session() as s:
        s.run(tf.global_variables_initializer())
        got = s.run(y, {x: xs, training: True})
        np.testing.assert_allclose(got, (xs - mean) / np.sqrt(var + 1e-3), rtol=1e-4, atol=1e-4)
        cf = s.run(channels_first, {x: xs})
        m1, v1 = xs.mean(axis=(0, 2), keepdims=True), xs.var(axis=(0, 2), keepdims=True)
        np.testing.assert_allclose(cf, (xs - m1) / np.sqrt(v1 + 1e-3), rtol=1e-4, atol=1e-4)
        s.run(updates, {x: xs, training: True})
        np.testing.assert_allclose(s.run(mean_var), 0.5 * mean, rtol=1e-5)
        s.run(updates, {x: xs, training: False})  # not training: the averages stay
        np.testing.assert_allclose(s.run(mean_var), 0.5 * mean, rtol=1e-5)
        moving_var = 0.5 * 1.0 + 0.5 * var
        inference = s.run(y, {x: xs, training: False})
        np.testing.assert_allclose(inference, (xs - 0.5 * mean) / np.sqrt(moving_var + 1e-3),
                                   rtol=1e-4, atol=1e-4)
        np.testing.assert_allclose(s.run(frozen, {x: xs}), xs / np.sqrt(1 + 1e-3), rtol=1e-5)


def test_errors_name_the_layer_and_the_argument():
    x = tf.placeholder(tf.float32, [None, 8, 8, 3])
    with pytest.raises(ValueError, match="conv2d: only data_format='channels_last'"):
        tf.layers.conv2d(x, 4, 3, data_format="channels_first")
    with pytest.raises(ValueError, match="conv2d: dilation_rate other than 1"):
        tf.layers.conv2d(x, 4, 3, dilation_rate=2)
    with pytest.raises(ValueError, match="padding must be 'same' or 'valid', got 'full'"):
        tf.layers.max_pooling2d(x, 2, 2, padding="full")
    with pytest.raises(ValueError, match="kernel_size must be an int or two ints"):
        tf.layers.conv2d(x, 4, (3, 3, 3))
    with pytest.raises(ValueError, match="dense: the last dimension of the input must be known"):
        tf.layers.dense(tf.placeholder(tf.float32, [None, None]), 2)
    with pytest.raises(NotImplementedError, match="tf.layers.dense: kernel_regularizer"):
        tf.layers.dense(tf.placeholder(tf.float32, [None, 2]), 2, kernel_regularizer=abs)
    with pytest.raises(ValueError, match="batch_normalization: axis 5"):
        tf.layers.batch_normalization(x, axis=5)


def test_a_small_conv_net_with_batch_norm_learns():
    # Two classes: bright top half or bright bottom half, on noise.
    rng = np.random.RandomState(4)
    labels = rng.randint(0, 2, 64)
    images = rng.rand(64, 8, 8, 1).astype(np.float32) * 0.5
    for i, l in enumerate(labels):
        images[i, (0 if l == 0 else 4):(4 if l == 0 else 8), :, 0] += 1.0
    tf.set_random_seed(5)
    x = tf.placeholder(tf.float32, [None, 8, 8, 1])
    y = tf.placeholder(tf.int64, [None])
    training = tf.placeholder_with_default(False, [])
    h = tf.layers.conv2d(x, 4, 3, padding="same", activation=tf.nn.relu)
    h = tf.layers.batch_normalization(h, training=training)
    h = tf.layers.max_pooling2d(h, 2, 2)
    h = tf.layers.dropout(tf.layers.flatten(h), rate=0.1, training=training)
    logits = tf.layers.dense(h, 2)
    loss = tf.reduce_mean(tf.nn.sparse_softmax_cross_entropy_with_logits(labels=y,
                                                                         logits=logits))
    with tf.control_dependencies(tf.get_collection(tf.GraphKeys.UPDATE_OPS)):
        train = tf.train.AdamOptimizer(0.05).minimize(loss)
    correct = tf.reduce_mean(tf.cast(tf.equal(tf.argmax(logits, 1), y), tf.float32))
    with tf.Session() as s:
        s.run(tf.global_variables_initializer())
        first = s.run(loss, {x: images, y: labels})
        for _ in range(60):
            s.run(train, {x: images, y: labels, training: True})
        last, accuracy = s.run([loss, correct], {x: images, y: labels})
    assert last < 0.5 * first and accuracy >= 0.95


def test_a_dense_object_makes_its_variables_once_and_shares_them():
    x = tf.placeholder(tf.float32, [None, 3])
    layer = tf.layers.Dense(2, activation=tf.nn.tanh, name="projection")
    assert not layer.built
    first = layer(x)
    with tf.variable_scope("elsewhere"):
        second = layer(x)  # still projection/kernel, not elsewhere/projection/kernel
    # Called in a loop's body, as a decoder's output_layer is: the same variables.
    _, looped = tf.while_loop(lambda i, h: i < 2, lambda i, h: (i + 1, layer(x) + h * 0),
                              [tf.constant(0), tf.zeros([1, 2])],
                              shape_invariants=[tf.TensorShape([]), tf.TensorShape([None, 2])])
    unnamed = tf.layers.Dense(4)
    unnamed(x)
    assert [v.name for v in tf.global_variables()] == [
        "projection/kernel:0", "projection/bias:0", "dense/kernel:0", "dense/bias:0"]
    assert layer.built and [v.name for v in layer.variables] == ["projection/kernel:0",
                                                                 "projection/bias:0"]
    xs = np.array([[1, -2, 0.5]], np.float32)
    with tf.Session() as s:
        s.run(tf.global_variables_initializer())
        k, b = s.run(layer.variables)
        a, c, d = s.run([first, second, looped], {x: xs})
    np.testing.assert_allclose(a, np.tanh(xs @ k + b), rtol=1e-5)
    np.testing.assert_allclose(c, a)
    np.testing.assert_allclose(d, a, rtol=1e-5)
    with pytest.raises(NotImplementedError, match="tf.layers.Dense: kernel_regularizer"):
        tf.layers.Dense(2, kernel_regularizer=abs)


def test_layer_objects_share_their_variables_and_match_the_functions():
    x = tf.placeholder(tf.float32, [None, 6, 6, 2])
    training = tf.placeholder(tf.bool, [])
    conv = tf.layers.Conv2D(3, 3, padding="same", activation=tf.nn.relu, name="c")
    norm = tf.layers.BatchNormalization()
    pool, flat = tf.layers.MaxPooling2D(2, 2), tf.layers.Flatten()
    avg, drop = tf.layers.AveragePooling2D(2, 2), tf.layers.Dropout(rate=0.5)
    assert not conv.built and not norm.built
    h = norm(conv(x), training=training)
    again = norm(conv(x), training=training)  # the same variables, no new ones
    out = flat(pool(h))
    averaged = avg(h)
    dropped, kept = drop(out, training=True), drop(out, training=False)
    assert [v.name for v in tf.global_variables()] == [
        "c/kernel:0", "c/bias:0", "batch_normalization/gamma:0", "batch_normalization/beta:0",
        "batch_normalization/moving_mean:0", "batch_normalization/moving_variance:0"]
    assert [v.name for v in conv.variables] == ["c/kernel:0", "c/bias:0"]
    assert len(norm.variables) == 4 and conv.built and norm.built
    assert len(tf.get_collection(tf.GraphKeys.UPDATE_OPS)) == 2  # from the first call only
    xs = np.random.RandomState(2).randn(4, 6, 6, 2).astype(np.float32)
    with tf.Session() as s:
        s.run(tf.global_variables_initializer())
        k, b = s.run(conv.variables)
        hv, av, ov, avg_v, dv, kv = s.run([h, again, out, averaged, dropped, kept],
                                          {x: xs, training: False})
    # The conv against NumPy ('same' padding, stride 1), then batch norm at its initial moving
    # averages (mean 0, variance 1): x / sqrt(1 + 1e-3).
    padded = np.pad(xs, [(0, 0), (1, 1), (1, 1), (0, 0)])
    conv_np = np.zeros((4, 6, 6, 3), np.float32)
    for i in range(6):
        for j in range(6):
            conv_np[:, i, j, :] = np.tensordot(padded[:, i:i + 3, j:j + 3, :], k, axes=3)
    want = np.maximum(conv_np + b, 0) / np.sqrt(1 + 1e-3)
    np.testing.assert_allclose(hv, want, rtol=1e-4, atol=1e-5)
    np.testing.assert_allclose(av, hv)
    pooled = hv.reshape(4, 3, 2, 3, 2, 3).max(axis=(2, 4))
    np.testing.assert_allclose(ov, pooled.reshape(4, -1), rtol=1e-6)
    np.testing.assert_allclose(avg_v, hv.reshape(4, 3, 2, 3, 2, 3).mean(axis=(2, 4)), rtol=1e-5)
    np.testing.assert_allclose(kv, ov)
    assert np.all((dv == 0) | np.isclose(dv, 2 * ov))


def test_layer_objects_refuse_bad_arguments_when_made():
    with pytest.raises(TypeError, match="tf.layers.Conv2D: .*kernal_size"):
        tf.layers.Conv2D(3, kernal_size=3)
    with pytest.raises(TypeError, match="tf.layers.Dropout: training is given to each call"):
        tf.layers.Dropout(0.5, training=True)
    with pytest.raises(NotImplementedError, match="tf.layers.Conv2D: kernel_regularizer"):
        tf.layers.Conv2D(3, 3, kernel_regularizer=abs)
    with pytest.raises(TypeError, match="tf.layers.MaxPooling2D: unexpected call arguments"):
        tf.layers.MaxPooling2D(2, 2)(tf.zeros([1, 2, 2, 1]), training=True)

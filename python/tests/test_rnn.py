"""Recurrent cells and networks from Python (tf.nn.rnn_cell, dynamic_rnn and its kin) against
NumPy references of TensorFlow's cells; variable names, training, checkpoints and errors."""
import numpy as np
import pytest

import runnel as tf

cells = tf.nn.rnn_cell


def sigmoid(z):
    return 1.0 / (1.0 + np.exp(-z))


def lstm_step(x, state, kernel, bias, forget_bias=1.0):
    c, h = state
    i, j, f, o = np.split(np.concatenate([x, h], 1) @ kernel + bias, 4, axis=1)
    c2 = c * sigmoid(f + forget_bias) + sigmoid(i) * np.tanh(j)
    return np.tanh(c2) * sigmoid(o), (c2, np.tanh(c2) * sigmoid(o))


def gru_step(x, state, gk, gb, ck, cb):
    h, = state
    r, u = np.split(sigmoid(np.concatenate([x, h], 1) @ gk + gb), 2, axis=1)
    c = np.tanh(np.concatenate([x, r * h], 1) @ ck + cb)
    h2 = u * h + (1 - u) * c
    return h2, (h2,)


def rnn_step(x, state, kernel, bias):
    h2 = np.tanh(np.concatenate([x, state[0]], 1) @ kernel + bias)
    return h2, (h2,)


def unroll(step, xs, state, lengths=None):
    """Time-major xs; past an example's length: output zero, state kept."""
    outs = []
    for t in range(xs.shape[0]):
        y, new = step(xs[t], state)
        if lengths is not None:
            live = (t < lengths)[:, None]
            y = np.where(live, y, 0)
            new = tuple(np.where(live, n, s) for n, s in zip(new, state))
        outs.append(y)
        state = new
    return np.stack(outs), state


def values(names):
    g = tf.get_default_graph()
    return [g.get_tensor_by_name(n) for n in names]


XS = np.random.RandomState(3).randn(4, 5, 3).astype(np.float32)  # [batch, time, depth]
LENGTHS = np.array([5, 3, 0, 1], np.int32)


def test_basic_lstm_matches_numpy_with_lengths():
    x = tf.placeholder(tf.float32, [4, 5, 3])
    lengths = tf.placeholder(tf.int32, [4])
    cell = cells.BasicLSTMCell(6)
    out, state = tf.nn.dynamic_rnn(cell, x, sequence_length=lengths, dtype=tf.float32)
    assert isinstance(state, cells.LSTMStateTuple) and out.shape.as_list() == [4, None, 6]
    assert [v.name for v in cell.variables] == ["rnn/basic_lstm_cell/kernel:0",
                                                "rnn/basic_lstm_cell/bias:0"]
    with tf.Session() as s:
        s.run(tf.global_variables_initializer())
        got, (c, h), kernel, bias = s.run([out, state] + cell.variables, {x: XS, lengths: LENGTHS})
    zeros = np.zeros((4, 6), np.float32)
    want, (wc, wh) = unroll(lambda v, st: lstm_step(v, st, kernel, bias),
                            XS.transpose(1, 0, 2), (zeros, zeros), LENGTHS)
    np.testing.assert_allclose(got, want.transpose(1, 0, 2), atol=1e-5)
    np.testing.assert_allclose(c, wc, atol=1e-5)
    np.testing.assert_allclose(h, wh, atol=1e-5)
    assert not got[2].any() and not h[2].any()  # a zero length: zero outputs, initial state


def test_stacked_gru_and_basic_rnn_time_major_match_numpy():
    x = tf.placeholder(tf.float32, [5, 4, 3])
    stack = cells.MultiRNNCell([cells.GRUCell(4), cells.BasicRNNCell(2)])
    init = stack.zero_state(4, tf.float32)
    out, state = tf.nn.dynamic_rnn(stack, x, initial_state=init, time_major=True, scope="enc")
    names = [v.name for v in stack.variables]
    assert names == ["enc/multi_rnn_cell/cell_0/gru_cell/gates/kernel:0",
                     "enc/multi_rnn_cell/cell_0/gru_cell/gates/bias:0",
                     "enc/multi_rnn_cell/cell_0/gru_cell/candidate/kernel:0",
                     "enc/multi_rnn_cell/cell_0/gru_cell/candidate/bias:0",
                     "enc/multi_rnn_cell/cell_1/basic_rnn_cell/kernel:0",
                     "enc/multi_rnn_cell/cell_1/basic_rnn_cell/bias:0"]
    xs = XS.transpose(1, 0, 2)
    with tf.Session() as s:
        s.run(tf.global_variables_initializer())
        got, (s0, s1), *w = s.run([out, state] + stack.variables, {x: xs})

    def step(v, st):
        y0, (h0,) = gru_step(v, (st[0],), *w[:4])
        y1, (h1,) = rnn_step(y0, (st[1],), *w[4:])
        return y1, (h0, h1)

    want, (w0, w1) = unroll(step, xs, (np.zeros((4, 4)), np.zeros((4, 2))))
    np.testing.assert_allclose(got, want, atol=1e-5)
    np.testing.assert_allclose(s0, w0, atol=1e-5)
    np.testing.assert_allclose(s1, w1, atol=1e-5)


def test_bidirectional_reads_backwards_and_static_rnn_matches_dynamic():
    x = tf.placeholder(tf.float32, [4, 5, 3])
    fw, bw = cells.LSTMCell(3), cells.LSTMBlockCell(3)
    (out_f, out_b), (st_f, st_b) = tf.nn.bidirectional_dynamic_rnn(
        fw, bw, x, sequence_length=LENGTHS, dtype=tf.float32)
    assert fw.variables[0].name == "bidirectional_rnn/fw/lstm_cell/kernel:0"
    gru = cells.GRUCell(2)
    unrolled, last = tf.nn.static_rnn(gru, tf.unstack(x, axis=1), dtype=tf.float32)
    looped, last2 = tf.nn.dynamic_rnn(gru, x, dtype=tf.float32)  # the same weights again
    assert len(tf.trainable_variables()) == 8
    with tf.Session() as s:
        s.run(tf.global_variables_initializer())
        f, b, (bc, bh), kb, bb, u, l1, lp, l2 = s.run(
            [out_f, out_b, st_b] + bw.variables + [unrolled, last, looped, last2], {x: XS})
    reversed_xs = np.stack([np.concatenate([XS[i, :n][::-1], XS[i, n:]]) for i, n in
                            enumerate(LENGTHS)]).transpose(1, 0, 2)
    zeros = np.zeros((4, 3), np.float32)
    want, (wc, wh) = unroll(lambda v, st: lstm_step(v, st, kb, bb), reversed_xs, (zeros, zeros),
                            LENGTHS)
    want = want.transpose(1, 0, 2)
    want = np.stack([np.concatenate([want[i, :n][::-1], want[i, n:]]) for i, n in
                     enumerate(LENGTHS)])
    np.testing.assert_allclose(b, want, atol=1e-5)
    np.testing.assert_allclose(bh, wh, atol=1e-5)
    assert f.shape == (4, 5, 3) and not f[2].any()
    np.testing.assert_allclose(np.stack(u, 1), lp, atol=1e-5)
    np.testing.assert_allclose(l1, l2, atol=1e-5)


class Elman(cells.RNNCell):
    """A cell of one's own: its weights made in build()."""

    def __init__(self, units):
        self.units = units

    state_size = property(lambda self: self.units)
    output_size = property(lambda self: self.units)

    def build(self, inputs_shape):
        self.kernel = tf.Variable(
            tf.random_uniform([inputs_shape[1] + self.units, self.units], -0.5, 0.5, seed=1))

    def __call__(self, inputs, state, scope=None):
        h = tf.tanh(tf.matmul(tf.concat([inputs, state], 1), self.kernel))
        return h, h


def test_a_cell_of_ones_own_runs_in_a_python_loop_and_trains():
    x = tf.placeholder(tf.float32, [4, 5, 3])
    cell = Elman(2)
    out, state = tf.nn.dynamic_rnn(cell, x, sequence_length=LENGTHS, dtype=tf.float32,
                                   scope="mine")
    loss = tf.reduce_mean(tf.square(out - 0.5))
    train = tf.train.AdamOptimizer(0.05).minimize(loss)
    with tf.Session() as s:
        s.run(tf.global_variables_initializer())
        got, h, kernel = s.run([out, state, cell.kernel], {x: XS})
        losses = [s.run([loss, train], {x: XS})[0] for _ in range(40)]
    want, (wh,) = unroll(lambda v, st: rnn_step(v, st, kernel, 0.0), XS.transpose(1, 0, 2),
                         (np.zeros((4, 2)),), LENGTHS)
    np.testing.assert_allclose(got, want.transpose(1, 0, 2), atol=1e-5)
    np.testing.assert_allclose(h, wh, atol=1e-5)
    assert losses[-1] < 0.5 * losses[0]


def test_an_lstm_trains_and_restores_by_tensorflow_names(tmp_path):
    def model():
        x = tf.placeholder(tf.float32, [4, 5, 3])
        out, state = tf.nn.dynamic_rnn(cells.BasicLSTMCell(8), x, dtype=tf.float32)
        logits = tf.matmul(state.h, tf.Variable(tf.ones([8, 2]) * 0.1, name="w"))
        loss = tf.reduce_mean(tf.nn.sparse_softmax_cross_entropy_with_logits(
            labels=tf.constant([0, 1, 0, 1]), logits=logits))
        return x, loss

    x, loss = model()
    train = tf.train.AdamOptimizer(0.05).minimize(loss)
    saver = tf.train.Saver()
    with tf.Session() as s:
        s.run(tf.global_variables_initializer())
        first = s.run(loss, {x: XS})
        for _ in range(30):
            s.run(train, {x: XS})
        trained = s.run(loss, {x: XS})
        path = saver.save(s, str(tmp_path / "lstm"))
    assert trained < 0.5 * first
    tf.reset_default_graph()
    x, loss = model()
    with tf.Session() as s:
        tf.train.Saver().restore(s, path)
        assert s.run(loss, {x: XS}) == pytest.approx(trained, rel=1e-5)


def test_rnn_errors_name_what_is_wrong():
    x = tf.placeholder(tf.float32, [4, 5, None])
    with pytest.raises(ValueError, match="last dimension of inputs 'Placeholder:0'"):
        tf.nn.dynamic_rnn(cells.GRUCell(2), x, dtype=tf.float32)
    y = tf.placeholder(tf.float32, [4, 5, 3])
    with pytest.raises(ValueError, match="initial_state or a dtype"):
        tf.nn.dynamic_rnn(cells.GRUCell(2), y)
    with pytest.raises(ValueError, match="must be \\[batch, time, depth\\]"):
        tf.nn.dynamic_rnn(cells.GRUCell(2), tf.placeholder(tf.float32, [4, 3]), dtype=tf.float32)
    with pytest.raises(NotImplementedError, match="use_peepholes"):
        cells.LSTMCell(4, use_peepholes=True)
    with pytest.raises(NotImplementedError, match="activation"):
        cells.BasicRNNCell(4, activation=tf.nn.relu)
    cell = cells.BasicRNNCell(2)
    tf.nn.dynamic_rnn(cell, y, dtype=tf.float32)
    with pytest.raises(ValueError, match="built for inputs of width 3, got 7"):
        tf.nn.dynamic_rnn(cell, tf.placeholder(tf.float32, [4, 5, 7]), dtype=tf.float32)


def test_a_new_cell_in_a_reusing_scope_shares_the_weights_by_name():
    x = tf.placeholder(tf.float32, [4, 5, 3])
    with tf.variable_scope("model"):
        cell = cells.GRUCell(2)
        first, _ = tf.nn.dynamic_rnn(cell, x, dtype=tf.float32)
    n_vars = len(tf.global_variables())
    with tf.variable_scope("model", reuse=True):
        again, _ = tf.nn.dynamic_rnn(cell, x, dtype=tf.float32)  # the same object
        assert cell.variables[0].name == "model/rnn/gru_cell/gates/kernel:0"
        # A new cell object (an inference decoder's, say) finds the same weights by name.
        other = cells.GRUCell(2)
        third, _ = tf.nn.dynamic_rnn(other, x, dtype=tf.float32)
        assert [v.name for v in other.variables] == [v.name for v in cell.variables]
        with pytest.raises(ValueError, match="Trying to share variable "
                           "model/rnn/gru_cell/gates/kernel, but specified shape \\[4,4\\]"):
            tf.nn.dynamic_rnn(cells.GRUCell(2), tf.placeholder(tf.float32, [4, 5, 2]),
                              dtype=tf.float32)
    assert len(tf.global_variables()) == n_vars  # nothing new
    with tf.variable_scope("fresh", reuse=True):
        with pytest.raises(ValueError, match="Variable fresh/rnn/lstm_cell/kernel does not "
                           "exist, or was not created with tf.get_variable"):
            tf.nn.dynamic_rnn(cells.LSTMCell(2), x, dtype=tf.float32)
    with tf.variable_scope("auto", reuse=tf.AUTO_REUSE):
        made, _ = tf.nn.dynamic_rnn(cells.BasicLSTMCell(2), x, dtype=tf.float32)
    with tf.variable_scope("auto", reuse=tf.AUTO_REUSE):
        shared, _ = tf.nn.dynamic_rnn(cells.BasicLSTMCell(2), x, dtype=tf.float32)
    with tf.Session() as s:
        s.run(tf.global_variables_initializer())
        xs = np.random.RandomState(0).rand(4, 5, 3).astype(np.float32)
        a, b, c, d, e = s.run([first, again, third, made, shared], {x: xs})
    np.testing.assert_allclose(a, b)
    np.testing.assert_allclose(a, c)
    np.testing.assert_allclose(d, e)


def test_a_cell_first_called_in_a_while_loop_makes_its_variables_outside_it():
    # A greedy decoder's shape: the cell runs on its own output, one step per iteration.
    tf.set_random_seed(5)  # some initial weights make 20 steps at this rate diverge
    cell = cells.GRUCell(3)
    start = tf.placeholder(tf.float32, [2, 3])

    def step(i, x, h, total):
        y, h2 = cell(x, h)
        return i + 1, y, h2, total + tf.reduce_sum(y)

    _, _, h, total = tf.while_loop(lambda i, x, h, t: i < 4, step,
                                   [0, start, tf.zeros([2, 3]), 0.0])
    assert [v.name for v in cell.variables][:2] == ["gru_cell/gates/kernel:0",
                                                    "gru_cell/gates/bias:0"]
    train = tf.train.GradientDescentOptimizer(0.1).minimize(tf.square(total - 1.0))
    xs = np.ones((2, 3), np.float32)
    with tf.Session() as s:
        s.run(tf.global_variables_initializer())
        weights = s.run(cell.variables)
        got = s.run(h, {start: xs})
        before = s.run(tf.square(total - 1.0), {start: xs})
        for _ in range(20):
            s.run(train, {start: xs})
        after = s.run(tf.square(total - 1.0), {start: xs})
    x, state = xs, (np.zeros((2, 3), np.float32),)
    for _ in range(4):
        x, state = gru_step(x, state, *weights)
    np.testing.assert_allclose(got, state[0], atol=1e-5)
    assert after < 0.5 * before


def test_dropout_and_residual_wrappers():
    x = tf.placeholder(tf.float32, [None, 5, 3])
    keep = tf.placeholder_with_default(1.0, []) if hasattr(tf, "placeholder_with_default") \
        else tf.placeholder(tf.float32, [])
    inner = cells.BasicLSTMCell(3)
    wrapped = cells.ResidualWrapper(cells.DropoutWrapper(inner, input_keep_prob=keep,
                                                         output_keep_prob=keep,
                                                         state_keep_prob=keep, seed=5))
    out, state = tf.nn.dynamic_rnn(wrapped, x, sequence_length=LENGTHS, dtype=tf.float32)
    assert inner.variables[0].name == "rnn/basic_lstm_cell/kernel:0"
    assert isinstance(state, cells.LSTMStateTuple)
    with pytest.raises(ValueError, match="output_keep_prob"):
        cells.DropoutWrapper(inner, output_keep_prob=0.0)
    with tf.Session() as s:
        s.run(tf.global_variables_initializer())
        kernel, bias = s.run(inner.variables)
        kept = s.run(out, {x: XS, keep: 1.0})
        dropped = [s.run(out, {x: XS, keep: 0.5}) for _ in range(2)]

    def step(v, st):
        y, new = lstm_step(v, st, kernel, bias)
        return y + v, new

    zeros = np.zeros((4, 3), np.float32)
    want, _ = unroll(step, XS.transpose(1, 0, 2), (zeros, zeros), LENGTHS)
    # Keep probability 1: the wrapped cell computes the LSTM plus its input (zero past lengths).
    np.testing.assert_allclose(kept, want.transpose(1, 0, 2), atol=1e-5)
    assert not np.allclose(dropped[0], kept) and not np.allclose(dropped[0], dropped[1])


def test_variational_dropout_keeps_one_mask_for_every_step_and_example():
    tf.set_random_seed(7)  # the masks below are then always the same ones
    x = tf.placeholder(tf.float32, [4, 6, 3])
    inner = cells.GRUCell(8)
    with pytest.raises(ValueError, match="dtype must be provided"):
        cells.DropoutWrapper(inner, output_keep_prob=0.5, variational_recurrent=True)
    with pytest.raises(ValueError, match="input_size must be provided"):
        cells.DropoutWrapper(inner, input_keep_prob=0.5, variational_recurrent=True,
                             dtype=tf.float32)
    # (Inputs dropped too could zero every input of a run: 3 units.)
    wrapped = cells.DropoutWrapper(inner, output_keep_prob=0.5, state_keep_prob=0.5,
                                   variational_recurrent=True, dtype=tf.float32, seed=3)
    out, _ = tf.nn.dynamic_rnn(wrapped, x, dtype=tf.float32)
    with tf.variable_scope("inputs_dropped"):  # and of an LSTM's state, its h only
        lstm = cells.DropoutWrapper(cells.BasicLSTMCell(2), input_keep_prob=0.5,
                                    state_keep_prob=0.5, variational_recurrent=True,
                                    input_size=3, dtype=tf.float32)
        lstm_out, lstm_state = tf.nn.dynamic_rnn(lstm, x, dtype=tf.float32)
    xs = np.random.RandomState(1).rand(4, 6, 3).astype(np.float32) + 0.5
    with tf.Session() as s:
        s.run(tf.global_variables_initializer())
        runs = [s.run(out, {x: xs}) for _ in range(3)]
        assert s.run(lstm_out, {x: xs}).shape == (4, 6, 2)
    for got in runs:
        dropped = np.all(got == 0, axis=(0, 1))  # units zero at every step of every example
        assert dropped.any() and not dropped.all()
        kept = got[:, :, ~dropped]
        assert np.all(kept != 0)  # the others never dropped, at any step
    # A mask is drawn once a run: runs differ.
    masks = [tuple(np.all(g == 0, axis=(0, 1))) for g in runs]
    assert len(set(masks)) > 1 or not np.allclose(runs[0], runs[1])

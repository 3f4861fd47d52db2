"""tf.contrib.seq2seq's attention from Python (LuongAttention, BahdanauAttention,
AttentionWrapper) against NumPy references of TensorFlow's arithmetic; TensorFlow's variable
names and state; training through it; errors."""
import numpy as np
import pytest

import runnel as tf

seq2seq = tf.contrib.seq2seq

MEMORY = np.random.RandomState(3).randn(2, 4, 3).astype(np.float32)  # [batch, time, depth]
LENGTHS = np.array([4, 2], np.int32)
INPUTS = np.random.RandomState(4).randn(2, 3, 2).astype(np.float32)  # [batch, steps, depth]


def softmax(z):
    e = np.exp(z - z.max(axis=1, keepdims=True))
    return e / e.sum(axis=1, keepdims=True)


def values_of(s, names):
    by_name = {v.op.name: v for v in tf.global_variables()}
    return {n: s.run(by_name[n]) for n in names}


def reference(w, score, units, layer_size, output_attention=True):
    """TensorFlow's AttentionWrapper over a BasicRNNCell of ``units``, in NumPy."""
    mask = np.arange(4)[None, :] < LENGTHS[:, None]
    values = MEMORY * mask[:, :, None]
    keys = values @ w["memory_layer/kernel"]
    h = np.zeros((2, units), np.float32)
    attention = np.zeros((2, layer_size), np.float32)
    outs, history = [], []
    for t in range(INPUTS.shape[1]):
        cell_in = np.concatenate([INPUTS[:, t], attention], 1)
        h = np.tanh(np.concatenate([cell_in, h], 1) @
                    w["rnn/attention_wrapper/basic_rnn_cell/kernel"] +
                    w["rnn/attention_wrapper/basic_rnn_cell/bias"])
        s = score(keys, h)
        align = softmax(np.where(mask, s, -np.inf))
        context = np.einsum("bt,btd->bd", align, values)
        attention = np.concatenate([h, context], 1) @ w["rnn/attention_wrapper/attention_layer/kernel"]
        outs.append(attention if output_attention else h)
        history.append(align)
    return np.stack(outs, 1), h, attention, np.stack(history)


def test_luong_attention_wrapper_matches_tensorflows_arithmetic_and_names():
    with tf.Graph().as_default():
        att = seq2seq.LuongAttention(5, tf.constant(MEMORY), memory_sequence_length=LENGTHS)
        cell = seq2seq.AttentionWrapper(tf.nn.rnn_cell.BasicRNNCell(5), att,
                                        attention_layer_size=6, alignment_history=True)
        out, state = tf.nn.dynamic_rnn(cell, tf.constant(INPUTS), dtype=tf.float32)
        assert isinstance(state, seq2seq.AttentionWrapperState)
        assert out.shape.as_list()[0::2] == [2, 6]
        history = state.alignment_history.stack()
        names = sorted(v.op.name for v in tf.global_variables())
        assert names == ["memory_layer/kernel", "rnn/attention_wrapper/attention_layer/kernel",
                         "rnn/attention_wrapper/basic_rnn_cell/bias",
                         "rnn/attention_wrapper/basic_rnn_cell/kernel"]
        with tf.Session() as s:
            s.run(tf.global_variables_initializer())
            got = s.run([out, state.cell_state, state.attention, state.time, state.alignments,
                         history])
            w = values_of(s, names)
    want_out, want_h, want_att, want_hist = reference(
        w, lambda keys, h: np.einsum("btu,bu->bt", keys, h), 5, 6)
    np.testing.assert_allclose(got[0], want_out, rtol=1e-4, atol=1e-5)
    np.testing.assert_allclose(got[1], want_h, rtol=1e-4, atol=1e-5)
    np.testing.assert_allclose(got[2], want_att, rtol=1e-4, atol=1e-5)
    assert got[3] == 3
    np.testing.assert_allclose(got[4], want_hist[-1], rtol=1e-4, atol=1e-6)
    np.testing.assert_allclose(got[5], want_hist, rtol=1e-4, atol=1e-6)
    assert np.all(got[5][:, 1, 2:] == 0)  # past the second example's memory: no attention


def test_bahdanau_attention_with_lengths_and_the_cells_output():
    with tf.Graph().as_default():
        att = seq2seq.BahdanauAttention(7, tf.constant(MEMORY), memory_sequence_length=LENGTHS)
        cell = seq2seq.AttentionWrapper(tf.nn.rnn_cell.BasicRNNCell(5), att,
                                        attention_layer_size=6, output_attention=False)
        out, state = tf.nn.dynamic_rnn(cell, tf.constant(INPUTS), dtype=tf.float32,
                                       sequence_length=[3, 2])
        names = sorted(v.op.name for v in tf.global_variables())
        assert names == ["memory_layer/kernel", "rnn/attention_wrapper/attention_layer/kernel",
                         "rnn/attention_wrapper/bahdanau_attention/attention_v",
                         "rnn/attention_wrapper/bahdanau_attention/query_layer/kernel",
                         "rnn/attention_wrapper/basic_rnn_cell/bias",
                         "rnn/attention_wrapper/basic_rnn_cell/kernel"]
        with tf.Session() as s:
            s.run(tf.global_variables_initializer())
            got_out, got_time = s.run([out, state.time])
            w = values_of(s, names)
    v = w["rnn/attention_wrapper/bahdanau_attention/attention_v"]
    q = w["rnn/attention_wrapper/bahdanau_attention/query_layer/kernel"]
    want, _, _, _ = reference(
        w, lambda keys, h: (v * np.tanh(keys + (h @ q)[:, None, :])).sum(2), 5, 6,
        output_attention=False)
    want[1, 2] = 0  # the second decoder sequence is 2 steps long
    np.testing.assert_allclose(got_out, want, rtol=1e-4, atol=1e-5)
    assert got_time == 3  # a scalar state goes on as the cell left it


def test_an_attention_decoder_trains_and_its_gradients_reach_every_weight():
    rng = np.random.RandomState(0)
    for make in (lambda m: seq2seq.LuongAttention(4, m, LENGTHS, scale=True),
                 lambda m: seq2seq.BahdanauAttention(4, m, LENGTHS, normalize=True)):
        with tf.Graph().as_default():
            tf.set_random_seed(1)
            mechanism = make(tf.constant(MEMORY))
            with tf.variable_scope(type(mechanism).__name__):
                cell = seq2seq.AttentionWrapper(tf.nn.rnn_cell.BasicLSTMCell(4), mechanism,
                                                attention_layer_size=3)
                out, _ = tf.nn.dynamic_rnn(cell, tf.constant(INPUTS), dtype=tf.float32)
                target = tf.constant(rng.randn(2, 3, 3).astype(np.float32))
                loss = tf.reduce_mean(tf.square(out - target))
                weights = tf.trainable_variables()
                grads = tf.gradients(loss, weights)
                assert all(g is not None for g in grads), [
                    v.op.name for v, g in zip(weights, grads) if g is None]
                train = tf.train.AdamOptimizer(0.05).minimize(loss)
                with tf.Session() as s:
                    s.run(tf.global_variables_initializer())
                    first = s.run(loss)
                    for _ in range(60):
                        s.run(train)
                    assert s.run(loss) < 0.5 * first, type(mechanism).__name__


def test_attention_errors_name_what_is_wrong():
    with tf.Graph().as_default():
        memory = tf.constant(MEMORY)
        att = seq2seq.LuongAttention(8, memory)
        cell = seq2seq.AttentionWrapper(tf.nn.rnn_cell.BasicRNNCell(5), att)
        with pytest.raises(ValueError, match="5 wide but the attention's num_units is 8"):
            tf.nn.dynamic_rnn(cell, tf.constant(INPUTS), dtype=tf.float32)
        with pytest.raises(NotImplementedError, match="one attention mechanism, not a list"):
            seq2seq.AttentionWrapper(tf.nn.rnn_cell.BasicRNNCell(5), [att, att])
        with pytest.raises(ValueError, match=r"must be \[batch, max_time, depth\]"):
            seq2seq.BahdanauAttention(4, tf.constant(np.zeros((2, 3), np.float32)))
        with pytest.raises(TypeError, match="AttentionWrapperState"):
            cell(tf.constant(INPUTS[:, 0]), (tf.zeros([2, 5]),))


def test_sequence_mask_and_batched_matmul_as_in_tensorflow():
    with tf.Graph().as_default():
        mask = tf.sequence_mask([1, 3, 0], 4)
        mask_f = tf.sequence_mask(tf.constant([2, 1]), dtype=tf.float32)
        a = np.arange(12, dtype=np.float32).reshape(2, 2, 3)
        b = np.arange(18, dtype=np.float32).reshape(2, 3, 3)
        prod = tf.matmul(tf.constant(a), tf.constant(b), transpose_b=True)
        with tf.Session() as s:
            m, mf, p = s.run([mask, mask_f, prod])
    np.testing.assert_array_equal(m, np.arange(4)[None, :] < np.array([1, 3, 0])[:, None])
    np.testing.assert_array_equal(mf, [[1, 1], [1, 0]])
    np.testing.assert_allclose(p, a @ b.transpose(0, 2, 1))


def test_one_attention_cell_in_two_networks_shares_its_weights():
    # As a training decoder and a second network over the same cell object: TensorFlow's
    # layers keep their weights, so the second makes none.
    with tf.Graph().as_default():
        att = seq2seq.BahdanauAttention(4, tf.constant(MEMORY))
        cell = seq2seq.AttentionWrapper(tf.nn.rnn_cell.BasicLSTMCell(4), att,
                                        attention_layer_size=3)
        first, _ = tf.nn.dynamic_rnn(cell, tf.constant(INPUTS), dtype=tf.float32)
        count = len(tf.global_variables())
        second, _ = tf.nn.dynamic_rnn(cell, tf.constant(INPUTS), dtype=tf.float32)
        assert len(tf.global_variables()) == count == 6
        with tf.Session() as s:
            s.run(tf.global_variables_initializer())
            a, b = s.run([first, second])
    np.testing.assert_array_equal(a, b)


def rnn_reference_step(w, prefix):
    kernel, bias = w[prefix + "/kernel"], w[prefix + "/bias"]
    return lambda x, h: np.tanh(np.concatenate([x, h], 1) @ kernel + bias)


def test_dynamic_decode_with_teacher_forcing_is_dynamic_rnn_with_a_projection():
    x = np.random.RandomState(5).randn(2, 4, 3).astype(np.float32)
    with tf.Graph().as_default():
        cell = tf.nn.rnn_cell.BasicRNNCell(4)
        project = tf.get_variable("project", [4, 6])
        helper = seq2seq.TrainingHelper(tf.constant(x), [4, 2])
        decoder = seq2seq.BasicDecoder(cell, helper, cell.zero_state(2, tf.float32),
                                       output_layer=lambda h: tf.matmul(h, project))
        out, state, lengths = seq2seq.dynamic_decode(decoder, impute_finished=True)
        assert isinstance(out, seq2seq.BasicDecoderOutput)
        with tf.variable_scope("decoder", reuse=True):
            ref, ref_state = tf.nn.dynamic_rnn(cell, tf.constant(x), sequence_length=[4, 2],
                                               dtype=tf.float32)
        with tf.Session() as s:
            s.run(tf.global_variables_initializer())
            got, ids, final, n, want, want_final, p = s.run(
                [out.rnn_output, out.sample_id, state, lengths, ref, ref_state, project])
    np.testing.assert_array_equal(n, [4, 2])
    np.testing.assert_allclose(got, want @ p, rtol=1e-5, atol=1e-6)  # zeros past a length
    np.testing.assert_array_equal(ids[0], np.argmax(got[0], 1))
    np.testing.assert_allclose(final, want_final, rtol=1e-5, atol=1e-6)


def test_greedy_decoding_feeds_back_the_argmax_and_stops_at_the_end_token():
    rng = np.random.RandomState(6)
    emb = rng.randn(5, 3).astype(np.float32)
    with tf.Graph().as_default():
        cell = tf.nn.rnn_cell.BasicRNNCell(4)
        project = tf.constant(rng.randn(4, 5).astype(np.float32) * 3)
        helper = seq2seq.GreedyEmbeddingHelper(tf.constant(emb), tf.constant([1, 2, 3]), 0)
        decoder = seq2seq.BasicDecoder(cell, helper, cell.zero_state(3, tf.float32),
                                       output_layer=lambda h: tf.matmul(h, project))
        out, _, lengths = seq2seq.dynamic_decode(decoder, maximum_iterations=7)
        with tf.Session() as s:
            s.run(tf.global_variables_initializer())
            ids, n = s.run([out.sample_id, lengths])
            w = values_of(s, ["decoder/basic_rnn_cell/kernel", "decoder/basic_rnn_cell/bias"])
            p = s.run(project)
    step = rnn_reference_step(w, "decoder/basic_rnn_cell")
    x, h = emb[[1, 2, 3]], np.zeros((3, 4), np.float32)
    want, ended = [], np.full(3, 7)
    for t in range(7):
        h = step(x, h)
        sample = np.argmax(h @ p, 1)
        want.append(sample)
        for b in range(3):
            if sample[b] == 0 and ended[b] == 7:
                ended[b] = t + 1
        if np.all(ended < 7) and ended.max() == t + 1:
            break
        x = emb[sample]
    want = np.stack(want, 1)
    np.testing.assert_array_equal(n, ended)
    assert ids.shape == want.shape
    for b in range(3):
        np.testing.assert_array_equal(ids[b, :n[b]], want[b, :n[b]])


def test_an_attention_decoder_decodes_greedily():
    with tf.Graph().as_default():
        att = seq2seq.LuongAttention(4, tf.constant(MEMORY), memory_sequence_length=LENGTHS)
        cell = seq2seq.AttentionWrapper(tf.nn.rnn_cell.BasicRNNCell(4), att,
                                        attention_layer_size=5)
        emb = tf.get_variable("embedding", [7, 3])
        helper = seq2seq.GreedyEmbeddingHelper(emb, tf.fill([2], 1), 2)
        decoder = seq2seq.BasicDecoder(cell, helper, cell.zero_state(2, tf.float32),
                                       output_layer=lambda a: tf.matmul(
                                           a, tf.get_variable("out", [5, 7])))
        out, state, lengths = seq2seq.dynamic_decode(decoder, maximum_iterations=6)
        with tf.Session() as s:
            s.run(tf.global_variables_initializer())
            logits, ids, n, steps = s.run([out.rnn_output, out.sample_id, lengths, state.time])
    assert logits.shape[0] == 2 and logits.shape[2] == 7 and logits.shape[1] == n.max() <= 6
    assert steps == n.max()
    np.testing.assert_array_equal(ids, np.argmax(logits, 2))


def test_decoder_errors_name_what_is_wrong():
    with tf.Graph().as_default():
        with pytest.raises(ValueError, match="start_tokens must be a vector"):
            seq2seq.GreedyEmbeddingHelper(tf.zeros([3, 3]), tf.zeros([2, 2], tf.int32), 0)
        with pytest.raises(ValueError, match="end_token must be a scalar"):
            seq2seq.GreedyEmbeddingHelper(tf.zeros([3, 3]), [0, 1], [0, 1])
        with pytest.raises(ValueError, match="sequence_length must be a vector"):
            seq2seq.TrainingHelper(tf.zeros([2, 3, 4]), [[1, 2]])
        with pytest.raises(TypeError, match="output_layer must be callable"):
            seq2seq.BasicDecoder(tf.nn.rnn_cell.BasicRNNCell(2), None, None, output_layer=3)


def test_sparse_softmax_cross_entropy_takes_a_decoders_time_axis():
    rng = np.random.RandomState(7)
    logits = rng.randn(2, 3, 5).astype(np.float32)
    labels = rng.randint(0, 5, size=(2, 3)).astype(np.int32)
    with tf.Graph().as_default():
        loss = tf.nn.sparse_softmax_cross_entropy_with_logits(labels=tf.constant(labels),
                                                              logits=tf.constant(logits))
        with tf.Session() as s:
            got = s.run(loss)
    z = logits - logits.max(-1, keepdims=True)
    log_p = z - np.log(np.exp(z).sum(-1, keepdims=True))
    want = -np.take_along_axis(log_p, labels[..., None], -1)[..., 0]
    assert got.shape == (2, 3)
    np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-6)


def test_sampling_draws_each_step_from_the_softmax_of_its_logits():
    # An output layer that ignores the cell: every step's logits are the same row, so the ids
    # drawn must follow softmax(row / temperature); a temperature near zero is the argmax.
    row = np.log(np.array([0.6, 0.3, 0.1, 1e-9], np.float32))
    with tf.Graph().as_default():
        cell = tf.nn.rnn_cell.BasicRNNCell(2)
        emb = tf.constant(np.eye(4, 3, dtype=np.float32))
        logits = tf.constant(np.tile(row, (2000, 1)))

        def decode(temperature, seed):
            helper = seq2seq.SampleEmbeddingHelper(emb, tf.fill([2000], 1), 3,
                                                   softmax_temperature=temperature, seed=seed)
            decoder = seq2seq.BasicDecoder(cell, helper, cell.zero_state(2000, tf.float32),
                                           output_layer=lambda h: logits + 0 * h[:, :1])
            return seq2seq.dynamic_decode(decoder, maximum_iterations=3)[0].sample_id

        warm, sharp = decode(None, 7), decode(0.01, 8)
        with tf.Session() as s:
            s.run(tf.global_variables_initializer())
            ids, argmax = s.run([warm, sharp])
    first = np.bincount(ids[:, 0], minlength=4) / 2000
    np.testing.assert_allclose(first[:3], [0.6, 0.3, 0.1], atol=0.04)
    assert first[3] == 0 and ids.dtype == np.int32
    assert np.all(argmax == 0)


def test_multinomial_and_random_categorical():
    ninf = -np.inf
    logits = np.array([[np.log(0.5), np.log(0.5), ninf], [ninf, ninf, 0.0]], np.float32)
    with tf.Graph().as_default():
        m = tf.multinomial(tf.constant(logits), 4000, seed=1)
        c = tf.random.categorical(tf.constant(logits), 5, dtype=tf.int32, seed=2)
        n = tf.placeholder(tf.int32, [])
        dynamic = tf.multinomial(tf.constant(logits), n)
        with tf.Session() as s:
            a, b = s.run([m, c])
            assert s.run(dynamic, {n: 3}).shape == (2, 3)
            with pytest.raises(tf.errors.InvalidArgumentError, match="num_samples must be"):
                s.run(dynamic, {n: -1})
            bad = tf.multinomial(tf.constant([[np.nan, 0.0]]), 1)
            with pytest.raises(tf.errors.InvalidArgumentError, match="row 0 .* NaN"):
                s.run(bad)
    assert a.dtype == np.int64 and a.shape == (2, 4000) and b.dtype == np.int32
    assert set(a[0]) == {0, 1} and abs(np.mean(a[0]) - 0.5) < 0.05 and np.all(a[1] == 2)
    assert np.all(b[1] == 2)

# PYTHONPATH=build/python python3 examples/python/attention_reverse.py [--steps N] [--min-accuracy A]
#
# A TensorFlow 1.x encoder-decoder with attention, as tf.contrib.seq2seq scripts write it: an
# LSTM encoder reads 3 to 7 digits, a decoder with Luong attention over the encoder's outputs
# writes them reversed, trained with teacher forcing (TrainingHelper) and then decoding greedily
# (GreedyEmbeddingHelper) until it writes the end token. Prints the share of test sequences
# reversed exactly.
import argparse

import numpy as np
import runnel as tf

parser = argparse.ArgumentParser()
parser.add_argument("--steps", type=int, default=400)
parser.add_argument("--min-accuracy", type=float, default=0.0)
args = parser.parse_args()

PAD, GO, EOS, VOCAB = 0, 1, 2, 13  # digits are tokens 3..12
MIN_LEN, MAX_LEN, BATCH, UNITS = 3, 7, 64, 64
rng = np.random.RandomState(0)


def batch(n):
    lengths = rng.randint(MIN_LEN, MAX_LEN + 1, size=n).astype(np.int32)
    source = np.full((n, MAX_LEN), PAD, np.int32)
    decoder_in = np.full((n, MAX_LEN + 1), PAD, np.int32)
    target = np.full((n, MAX_LEN + 1), PAD, np.int32)
    for i, k in enumerate(lengths):
        digits = rng.randint(3, VOCAB, size=k)
        source[i, :k] = digits
        decoder_in[i, :k + 1] = np.concatenate([[GO], digits[::-1]])
        target[i, :k + 1] = np.concatenate([digits[::-1], [EOS]])
    return source, lengths, decoder_in, target, lengths + 1


tf.set_random_seed(1)
source = tf.placeholder(tf.int32, [None, MAX_LEN], name="source")
source_len = tf.placeholder(tf.int32, [None], name="source_len")
decoder_in = tf.placeholder(tf.int32, [None, MAX_LEN + 1], name="decoder_in")
target = tf.placeholder(tf.int32, [None, MAX_LEN + 1], name="target")
target_len = tf.placeholder(tf.int32, [None], name="target_len")
embedding = tf.get_variable("embedding", [VOCAB, 16])
batch_size = tf.shape(source)[0]

with tf.variable_scope("encoder"):
    memory, _ = tf.nn.dynamic_rnn(tf.nn.rnn_cell.BasicLSTMCell(UNITS),
                                  tf.nn.embedding_lookup(embedding, source),
                                  sequence_length=source_len, dtype=tf.float32)
attention = tf.contrib.seq2seq.LuongAttention(UNITS, memory, memory_sequence_length=source_len)
cell = tf.contrib.seq2seq.AttentionWrapper(tf.nn.rnn_cell.BasicLSTMCell(UNITS), attention,
                                           attention_layer_size=UNITS)
projection = tf.get_variable("projection", [UNITS, VOCAB])


def project(outputs):
    return tf.matmul(outputs, projection)


with tf.variable_scope("decoder"):
    helper = tf.contrib.seq2seq.TrainingHelper(tf.nn.embedding_lookup(embedding, decoder_in),
                                               target_len)
    decoder = tf.contrib.seq2seq.BasicDecoder(cell, helper,
                                              cell.zero_state(batch_size, tf.float32),
                                              output_layer=project)
    train_out, _, _ = tf.contrib.seq2seq.dynamic_decode(decoder, scope="decode")
logits = train_out.rnn_output
steps = tf.shape(logits)[1]
weights = tf.sequence_mask(target_len, steps, dtype=tf.float32)
losses = tf.nn.sparse_softmax_cross_entropy_with_logits(  # decoded as long as the longest
    labels=tf.slice(target, [0, 0], tf.stack([-1, steps])), logits=logits)
loss = tf.reduce_sum(losses * weights) / tf.reduce_sum(weights)
train = tf.train.AdamOptimizer(0.005).minimize(loss)

with tf.variable_scope("decoder", reuse=True):
    greedy = tf.contrib.seq2seq.GreedyEmbeddingHelper(embedding, tf.fill([batch_size], GO), EOS)
    infer = tf.contrib.seq2seq.BasicDecoder(cell, greedy, cell.zero_state(batch_size, tf.float32),
                                            output_layer=project)
    infer_out, _, infer_len = tf.contrib.seq2seq.dynamic_decode(infer, maximum_iterations=MAX_LEN + 2,
                                                                scope="decode")

with tf.Session() as s:
    s.run(tf.global_variables_initializer())
    for step in range(1, args.steps + 1):
        src, src_len, dec_in, tgt, tgt_len = batch(BATCH)
        feed = {source: src, source_len: src_len, decoder_in: dec_in, target: tgt,
                target_len: tgt_len}
        _, l = s.run([train, loss], feed)
        if step % 100 == 0:
            print("step %d: loss %.3f" % (step, l), flush=True)
    src, src_len, _, tgt, tgt_len = batch(500)
    ids, n = s.run([infer_out.sample_id, infer_len], {source: src, source_len: src_len})
    right = sum(int(n[i] == tgt_len[i] and np.array_equal(ids[i, :n[i]], tgt[i, :tgt_len[i]]))
                for i in range(len(src)))
    accuracy = right / len(src)
    print("reversed exactly: %d of %d test sequences (%.3f)" % (right, len(src), accuracy))
    if accuracy < args.min_accuracy:
        raise SystemExit("accuracy %.3f is under --min-accuracy %.3f" % (accuracy,
                                                                         args.min_accuracy))

"""TensorFlow 1.x's decoders (``tf.contrib.seq2seq``): ``dynamic_decode`` running a
``BasicDecoder`` — a cell, a helper that chooses each step's input, and an optional output
layer — until every example has finished, with ``TrainingHelper`` (teacher forcing) and
``GreedyEmbeddingHelper`` (each step's argmax fed back through an embedding)::

    helper = tf.contrib.seq2seq.GreedyEmbeddingHelper(embedding, start_tokens, end_token)
    decoder = tf.contrib.seq2seq.BasicDecoder(cell, helper, cell.zero_state(batch, tf.float32),
                                              output_layer=project)
    outputs, state, lengths = tf.contrib.seq2seq.dynamic_decode(decoder, maximum_iterations=50)
    ids = outputs.sample_id                                  # [batch, time] int32
"""
import collections

from . import api as _api
from . import dtypes as _dtypes
from . import framework as _fw
from . import nest as _nest
from . import nn as _nn
from . import raw_ops as _raw
from . import rnn as _rnn
from .control_flow import TensorArray, cond
from .loops import while_loop
from .variable_scope import variable_scope


class BasicDecoderOutput(collections.namedtuple("BasicDecoderOutput",
                                                ("rnn_output", "sample_id"))):
    """A decoding step's output: the cell's (after the output layer) and the sampled ids."""


def _shaped_like(x, like):
    """``x`` with ``like``'s static shape past the batch (a cond's result has none)."""
    dims = like.shape.dims
    if dims is None or any(d is None for d in dims[1:]):
        return x
    return _api.reshape(x, [-1] + [int(d) for d in dims[1:]])


def _batch_major(x):
    x = _fw.convert_to_tensor(x)
    if x.shape.ndims is not None and x.shape.ndims < 2:
        raise ValueError("TrainingHelper: inputs '%s' must be [batch, time, ...], got %s" %
                         (x.name, x.shape))
    if x.shape.ndims is not None:
        return _api.transpose(x, [1, 0] + list(range(2, x.shape.ndims)))
    return _api.transpose(x, _api.concat([_api.constant([1, 0]), _api.range(2, _api.rank(x))],
                                         0))


class TrainingHelper:
    """Teacher forcing: step t's input is ``inputs[:, t]``; an example has finished once t
    reaches its ``sequence_length``; the sample is the output's argmax."""

    def __init__(self, inputs, sequence_length, time_major=False, name=None):
        inputs = _fw.convert_to_tensor(inputs)
        self._inputs = inputs if time_major else _batch_major(inputs)
        self._lengths = _api.cast(_fw.convert_to_tensor(sequence_length), _dtypes.int32)
        if self._lengths.shape.ndims not in (None, 1):
            raise ValueError("TrainingHelper: sequence_length must be a vector [batch], got %s"
                             % self._lengths.shape)
        self._steps = TensorArray(self._inputs.dtype, size=_api.shape(self._inputs)[0],
                                  element_shape=self._inputs.shape.dims[1:]
                                  if self._inputs.shape.dims else None).unstack(self._inputs)
        self._zero = _api.zeros_like(self._inputs[0])

    batch_size = property(lambda self: _api.size(self._lengths))
    sample_ids_dtype = _dtypes.int32

    def initialize(self, name=None):
        finished = _raw.LessEqual(self._lengths, 0)
        first = cond(_api.reduce_all(finished), lambda: self._zero,
                     lambda: self._steps.read(0))
        return finished, _shaped_like(first, self._zero)

    def sample(self, time, outputs, state, name=None):
        return _api.cast(_api.argmax(outputs, axis=-1), _dtypes.int32)

    def next_inputs(self, time, outputs, state, sample_ids, name=None):
        t = time + 1
        finished = _raw.GreaterEqual(t, self._lengths)
        nxt = cond(_api.reduce_all(finished), lambda: self._zero, lambda: self._steps.read(t))
        return finished, _shaped_like(nxt, self._zero), state


class GreedyEmbeddingHelper:
    """Greedy decoding: the first input is ``embedding(start_tokens)``, each next one the
    embedding of the last step's argmax; an example has finished when it samples
    ``end_token``. ``embedding`` is a [vocab, depth] tensor or a function of int32 ids."""

    def __init__(self, embedding, start_tokens, end_token):
        self._embed = (embedding if callable(embedding)
                       else lambda ids: _nn.embedding_lookup(embedding, ids))
        self._start = _api.cast(_fw.convert_to_tensor(start_tokens), _dtypes.int32)
        if self._start.shape.ndims not in (None, 1):
            raise ValueError("GreedyEmbeddingHelper: start_tokens must be a vector [batch], "
                             "got %s" % self._start.shape)
        self._end = _api.cast(_fw.convert_to_tensor(end_token), _dtypes.int32)
        if self._end.shape.ndims not in (None, 0):
            raise ValueError("GreedyEmbeddingHelper: end_token must be a scalar, got %s" %
                             self._end.shape)
        self._start_inputs = self._embed(self._start)

    batch_size = property(lambda self: _api.size(self._start))
    sample_ids_dtype = _dtypes.int32

    def initialize(self, name=None):
        return _api.zeros_like(self._start, dtype=_dtypes.bool), self._start_inputs

    def sample(self, time, outputs, state, name=None):
        if outputs.shape.ndims is not None and outputs.shape.ndims != 2:
            raise ValueError("GreedyEmbeddingHelper: the outputs must be [batch, vocab] "
                             "logits, got %s" % outputs.shape)
        return _api.cast(_api.argmax(outputs, axis=-1), _dtypes.int32)

    def next_inputs(self, time, outputs, state, sample_ids, name=None):
        finished = _raw.Equal(sample_ids, self._end)
        nxt = cond(_api.reduce_all(finished), lambda: self._start_inputs,
                   lambda: self._embed(sample_ids))
        return finished, _shaped_like(nxt, self._start_inputs), state


class SampleEmbeddingHelper(GreedyEmbeddingHelper):
    """Decoding by sampling: as GreedyEmbeddingHelper, but each step's id is drawn from
    softmax(logits / softmax_temperature) (tf.multinomial) instead of taken as the argmax; a
    temperature under 1 sharpens the distribution, over 1 flattens it."""

    def __init__(self, embedding, start_tokens, end_token, softmax_temperature=None, seed=None):
        super().__init__(embedding, start_tokens, end_token)
        self._temperature, self._seed = softmax_temperature, seed

    def sample(self, time, outputs, state, name=None):
        if outputs.shape.ndims is not None and outputs.shape.ndims != 2:
            raise ValueError("SampleEmbeddingHelper: the outputs must be [batch, vocab] "
                             "logits, got %s" % outputs.shape)
        logits = outputs if self._temperature is None else outputs / self._temperature
        ids = _api.multinomial(logits, 1, seed=self._seed, output_dtype=_dtypes.int32)
        return _api.reshape(ids, [-1])


class BasicDecoder:
    """One step: the cell on the helper's input, the output layer (any function of the
    cell's output, e.g. a projection to the vocabulary) on its output, then the helper's
    sample and next input."""

    def __init__(self, cell, helper, initial_state, output_layer=None):
        if not callable(cell):
            raise TypeError("BasicDecoder: cell must be an RNNCell, got %s" %
                            type(cell).__name__)
        if output_layer is not None and not callable(output_layer):
            raise TypeError("BasicDecoder: output_layer must be callable, got %s" %
                            type(output_layer).__name__)
        self.cell, self.helper = cell, helper
        self._initial_state, self._output_layer = initial_state, output_layer

    batch_size = property(lambda self: self.helper.batch_size)

    @property
    def output_dtype(self):
        """The dtypes of a step's outputs: the state's float type, the helper's ids'."""
        floats = [t.dtype for t in _nest.flatten(self._initial_state)
                  if isinstance(t, _fw.Tensor) and t.dtype.is_floating]
        return BasicDecoderOutput(floats[0] if floats else _dtypes.float32,
                                  self.helper.sample_ids_dtype)

    def initialize(self, name=None):
        finished, first = self.helper.initialize()
        return finished, first, self._initial_state

    def step(self, time, inputs, state, name=None):
        out, cell_state = self.cell(inputs, state)
        if self._output_layer is not None:
            out = self._output_layer(out)
        ids = self.helper.sample(time, out, cell_state)
        finished, nxt, next_state = self.helper.next_inputs(time, out, cell_state, ids)
        return BasicDecoderOutput(out, ids), next_state, nxt, finished


def dynamic_decode(decoder, output_time_major=False, impute_finished=False,
                   maximum_iterations=None, parallel_iterations=32, swap_memory=False,
                   scope=None):
    """Runs ``decoder`` step after step in a while loop until every example has finished (or
    after ``maximum_iterations``); returns (outputs, final state, sequence lengths). Outputs
    are ``[batch, time, ...]`` (``[time, batch, ...]`` with ``output_time_major``); with
    ``impute_finished`` a finished example's outputs are zeros and its state is kept."""
    with variable_scope(scope or "decoder", auxiliary_name_scope=False), \
            _api.name_scope(scope or "decoder"):
        finished, inputs, state = decoder.initialize()
        limit = (None if maximum_iterations is None else
                 _api.cast(_fw.convert_to_tensor(maximum_iterations), _dtypes.int32))
        if limit is not None:
            finished = _raw.LogicalOr(finished, _raw.GreaterEqual(0, limit))
        if not hasattr(decoder, "output_dtype"):
            raise TypeError("dynamic_decode: the decoder (%s) must say the dtypes of its "
                            "outputs in output_dtype, as TensorFlow's Decoder does" %
                            type(decoder).__name__)
        template = decoder.output_dtype
        arrays = [TensorArray(_dtypes.as_dtype(d), size=0, dynamic_size=True)
                  for d in _nest.flatten(template)]
        lengths = _api.zeros_like(finished, dtype=_dtypes.int32)
        ranks = []  # of a step's outputs, seen as the body is built

        def body(time, arrays, state, inputs, finished, lengths):
            out, next_state, next_inputs, step_finished = decoder.step(time, inputs, state)
            next_finished = _raw.LogicalOr(finished, step_finished)
            if limit is not None:
                next_finished = _raw.LogicalOr(next_finished, _raw.GreaterEqual(time + 1, limit))
            lengths = _api.where(_raw.LogicalAnd(_raw.LogicalNot(finished), next_finished),
                                 _api.fill(_api.shape(finished), time + 1), lengths)
            flat = _nest.flatten(out)
            if impute_finished:  # a finished example's outputs are zeros, its state kept
                running = _raw.LogicalNot(finished)
                flat = [_rnn._copy_through(o, _api.zeros_like(o), running) for o in flat]
                next_state = _nest.map_structure(
                    lambda n, o: _rnn._copy_through(n, o, running), next_state, state)
            ranks[:] = [o.shape.ndims for o in flat]
            arrays = [a.write(time, o) for a, o in zip(arrays, flat)]
            return time + 1, arrays, next_state, next_inputs, next_finished, lengths

        loop = while_loop(lambda time, arrays, state, inputs, finished, lengths:
                          _raw.LogicalNot(_api.reduce_all(finished)),
                          body, (_api.constant(0), arrays, state, inputs, finished, lengths),
                          parallel_iterations=parallel_iterations, name="while")
        _, arrays, state, _, _, lengths = loop
        outputs = [a.stack() for a in arrays]
        if not output_time_major:  # a static permutation, which has a gradient
            outputs = [_batch_major(o) if r is None else
                       _api.transpose(o, [1, 0] + list(range(2, r + 1)))
                       for o, r in zip(outputs, ranks)]
        return _nest.pack_sequence_as(template, outputs), state, lengths

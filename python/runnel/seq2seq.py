"""TensorFlow 1.x's attention for encoder-decoder models (``tf.contrib.seq2seq``):
``LuongAttention``, ``BahdanauAttention`` and ``AttentionWrapper``, with TensorFlow's
arithmetic, state and variable names, so that an attention decoder ports by its import::

    att = tf.contrib.seq2seq.LuongAttention(256, encoder_outputs, memory_sequence_length=lens)
    cell = tf.contrib.seq2seq.AttentionWrapper(tf.nn.rnn_cell.BasicLSTMCell(256), att,
                                               attention_layer_size=256)
    outputs, state = tf.nn.dynamic_rnn(cell, decoder_inputs, target_lengths, dtype=tf.float32)

Built from Runnel's ops in Python (every one has a gradient). The decoders (``dynamic_decode``,
``BasicDecoder``, ``TrainingHelper``, ``GreedyEmbeddingHelper``, ``SampleEmbeddingHelper``) are
in decoding.py and here too; ``BeamSearchDecoder`` is not there yet (docs/python.md)."""
import collections
import math

from . import api as _api
from . import dtypes as _dtypes
from . import framework as _fw
from . import nn as _nn
from . import raw_ops as _raw
from . import rnn as _rnn
from .control_flow import TensorArray
from .initializers import constant_initializer, ones_initializer, zeros_initializer
from .variable_scope import get_variable, variable_scope


class _Dense:
    """``x @ kernel`` over the last axis: TensorFlow's Dense layer without bias. Its kernel is
    made on the first call, as ``<scope>/<name>/kernel`` (``name_1``, ... when that is taken),
    and used by every later call."""

    def __init__(self, units, name, what):
        self._units, self._name, self._what, self.kernel = int(units), name, what, None

    def __call__(self, x):
        depth = x.shape.dims[-1] if x.shape.dims else None
        if depth is None:
            raise ValueError("%s: the last dimension of '%s' must be known, got %s" %
                             (self._what, x.name, x.shape))
        if self.kernel is None:
            with variable_scope(None, default_name=self._name):
                self.kernel = get_variable("kernel", [int(depth), self._units], dtype=x.dtype)
        elif self.kernel.shape.dims[0] != depth:
            raise ValueError("%s: %s was made for inputs %d wide, got '%s' of %s" %
                             (self._what, self.kernel.op.name, self.kernel.shape.dims[0],
                              x.name, x.shape))
        if x.shape.ndims == 2:
            return _api.matmul(x, self.kernel)
        flat = _api.reshape(x, [-1, int(depth)])
        out_shape = _api.concat([_api.shape(x)[:-1], _api.constant([self._units])], 0)
        return _api.reshape(_api.matmul(flat, self.kernel), out_shape)


def _once(holder, attr, make):
    """``holder.attr``, made by ``make()`` on first use (a mechanism's own weights)."""
    if getattr(holder, attr, None) is None:
        setattr(holder, attr, make())
    return getattr(holder, attr)


class _BaseAttention:
    """Keys from ``memory`` [batch, max_time, depth] (a Dense layer ``memory_layer``, made
    where the mechanism is); positions at or past ``memory_sequence_length`` get no attention
    (their values are zeroed and their scores masked, as TensorFlow does)."""

    def __init__(self, num_units, memory, memory_sequence_length, probability_fn,
                 score_mask_value, dtype, name):
        if int(num_units) < 1:
            raise ValueError("%s: num_units must be positive, got %r" % (name, num_units))
        memory = _fw.convert_to_tensor(memory)
        if memory.shape.ndims is not None and memory.shape.ndims != 3:
            raise ValueError("%s: memory '%s' must be [batch, max_time, depth], got %s" %
                             (name, memory.name, memory.shape))
        self._num_units, self._name = int(num_units), name
        self._dtype = _dtypes.as_dtype(dtype or memory.dtype)
        self._probability_fn = probability_fn or (lambda score, state: _nn.softmax(score))
        with _api.name_scope(name + "Init" if name else "memory_layer"):
            if memory_sequence_length is not None:
                lengths = _api.cast(_fw.convert_to_tensor(memory_sequence_length),
                                    _dtypes.int32)
                self._mask = _api.sequence_mask(lengths, _api.shape(memory)[1])
                memory = memory * _api.expand_dims(_api.cast(self._mask, memory.dtype), 2)
            else:
                self._mask = None
            self._values = memory
        self._keys = _Dense(num_units, "memory_layer", name)(memory)
        self._score_mask_value = (-math.inf if score_mask_value is None
                                  else float(score_mask_value))
        time = memory.shape.dims[1] if memory.shape.dims else None
        self._alignments_size = time if time is not None else _api.shape(memory)[1]

    values = property(lambda self: self._values)
    keys = property(lambda self: self._keys)
    alignments_size = property(lambda self: self._alignments_size)
    state_size = alignments_size
    batch_size = property(lambda self: _api.shape(self._values)[0])

    def initial_alignments(self, batch_size, dtype):
        """Zeros [batch_size, max_time]."""
        dims = _api.stack([_fw.convert_to_tensor(batch_size, dtype=_dtypes.int32),
                           _api.cast(_fw.convert_to_tensor(self._alignments_size),
                                     _dtypes.int32)])
        return _api.fill(dims, _api.cast(0, dtype))

    initial_state = initial_alignments

    def _probabilities(self, score, state):
        if self._mask is not None:
            score = _api.where(self._mask, score,
                               _api.ones_like(score) * self._score_mask_value)
        return self._probability_fn(score, state)


class LuongAttention(_BaseAttention):
    """Luong's multiplicative score: ``score = query · keys`` (``g ·`` it with ``scale``); the
    query (the cell's output) must be ``num_units`` wide."""

    def __init__(self, num_units, memory, memory_sequence_length=None, scale=False,
                 probability_fn=None, score_mask_value=None, dtype=None,
                 name="LuongAttention"):
        super().__init__(num_units, memory, memory_sequence_length, probability_fn,
                         score_mask_value, dtype, name)
        self._scale = scale

    def __call__(self, query, state):
        query = _fw.convert_to_tensor(query)
        depth = query.shape.dims[-1] if query.shape.dims else None
        if depth is not None and depth != self._num_units:
            raise ValueError("LuongAttention: the query (the cell's output, '%s') is %d wide "
                             "but the attention's num_units is %d; they must be equal" %
                             (query.name, depth, self._num_units))
        score = _api.squeeze(_api.matmul(_api.expand_dims(query, 1), self._keys,
                                         transpose_b=True), [1])
        if self._scale:
            def make():
                with variable_scope(None, default_name="luong_attention"):
                    return get_variable("attention_g", [], dtype=query.dtype,
                                        initializer=ones_initializer())
            score = _once(self, "_g", make) * score
        alignments = self._probabilities(score, state)
        return alignments, alignments


class BahdanauAttention(_BaseAttention):
    """Bahdanau's additive score: ``score = sum(v * tanh(keys + query_layer(query)))`` (with
    ``normalize``, weight normalization of ``v`` and a bias)."""

    def __init__(self, num_units, memory, memory_sequence_length=None, normalize=False,
                 probability_fn=None, score_mask_value=None, dtype=None,
                 name="BahdanauAttention"):
        super().__init__(num_units, memory, memory_sequence_length, probability_fn,
                         score_mask_value, dtype, name)
        self._normalize = normalize

    def __call__(self, query, state):
        query = _fw.convert_to_tensor(query)
        def make():
            with variable_scope(None, default_name="bahdanau_attention"):
                weights = {"query_layer": _Dense(self._num_units, "query_layer",
                                                 "BahdanauAttention"),
                           "v": get_variable("attention_v", [self._num_units],
                                             dtype=query.dtype)}
                if self._normalize:
                    weights["g"] = get_variable("attention_g", [], dtype=query.dtype,
                                                initializer=constant_initializer(
                                                    math.sqrt(1.0 / self._num_units)))
                    weights["b"] = get_variable("attention_b", [self._num_units],
                                                dtype=query.dtype,
                                                initializer=zeros_initializer())
                weights["query_layer"](query)  # its kernel under bahdanau_attention/ too
                return weights
        w = _once(self, "_weights", make)
        processed = _api.expand_dims(w["query_layer"](query), 1)
        v = w["v"]
        if self._normalize:
            v = w["g"] * v * _raw.Rsqrt(_api.reduce_sum(v * v))
            score = _api.reduce_sum(v * _nn.tanh(self._keys + processed + w["b"]), [2])
        else:
            score = _api.reduce_sum(v * _nn.tanh(self._keys + processed), [2])
        alignments = self._probabilities(score, state)
        return alignments, alignments


class AttentionWrapperState(collections.namedtuple(
        "AttentionWrapperState", ("cell_state", "attention", "time", "alignments",
                                  "alignment_history", "attention_state"))):
    """The state of an AttentionWrapper: the wrapped cell's, the last attention vector, the
    step, the last alignments, their history (a TensorArray, or () without
    ``alignment_history``) and the mechanism's state."""

    def clone(self, **kwargs):
        return self._replace(**kwargs)


class AttentionWrapper(_rnn.RNNCell):
    """``cell`` followed by attention over ``attention_mechanism`` at every step, as
    TensorFlow's: the cell's input is ``cell_input_fn(inputs, attention)`` (by default the two
    joined), the cell's output queries the mechanism, the context is the alignments' weighted
    sum of the memory, and the attention is ``attention_layer([output, context])`` (a Dense
    layer without bias, ``attention_layer_size`` wide) or the context itself. Its output is the
    attention (or the cell's output with ``output_attention=False``)."""

    def __init__(self, cell, attention_mechanism, attention_layer_size=None,
                 alignment_history=False, cell_input_fn=None, output_attention=True,
                 initial_cell_state=None, name=None, attention_layer=None):
        if isinstance(attention_mechanism, (list, tuple)):
            raise NotImplementedError("AttentionWrapper: one attention mechanism, not a list of "
                                      "%d (several are not supported yet)" %
                                      len(attention_mechanism))
        if not isinstance(attention_mechanism, _BaseAttention):
            raise TypeError("AttentionWrapper: attention_mechanism must be a LuongAttention or "
                            "BahdanauAttention, got %s" % type(attention_mechanism).__name__)
        if attention_layer is not None:
            raise NotImplementedError("AttentionWrapper: attention_layer (a Keras layer) is not "
                                      "supported; give attention_layer_size")
        self._cell, self._mechanism = cell, attention_mechanism
        depth = attention_mechanism.values.shape.dims[-1]
        if attention_layer_size is None and depth is None:
            raise ValueError("AttentionWrapper: the memory's depth must be known when there is "
                             "no attention_layer_size")
        self._layer_size = None if attention_layer_size is None else int(attention_layer_size)
        self._attention_size = self._layer_size or int(depth)
        self._layer = (_Dense(self._layer_size, "attention_layer", "AttentionWrapper")
                       if self._layer_size else None)
        self._history = bool(alignment_history)
        self._input_fn = cell_input_fn or (lambda inputs, attention:
                                           _api.concat([inputs, attention], -1))
        self._output_attention = output_attention
        self._initial_cell_state = initial_cell_state
        self._name = name or "attention_wrapper"

    @property
    def output_size(self):
        return self._attention_size if self._output_attention else self._cell.output_size

    @property
    def state_size(self):
        a = self._mechanism.alignments_size
        return AttentionWrapperState(cell_state=self._cell.state_size,
                                     attention=self._attention_size, time=(), alignments=a,
                                     alignment_history=(), attention_state=a)

    def zero_state(self, batch_size, dtype):
        with _api.name_scope(self._name + "ZeroState"):
            cell_state = (self._initial_cell_state if self._initial_cell_state is not None
                          else self._cell.zero_state(batch_size, dtype))
            alignments = self._mechanism.initial_alignments(batch_size, dtype)
            history = (TensorArray(dtype, size=0, dynamic_size=True) if self._history
                       else ())
            return AttentionWrapperState(
                cell_state=cell_state,
                attention=_rnn._zeros(batch_size, self._attention_size, dtype),
                time=_api.zeros([], _dtypes.int32), alignments=alignments,
                alignment_history=history,
                attention_state=self._mechanism.initial_state(batch_size, dtype))

    def _prebuild(self, graph, width, dtype, scope):
        """Where dynamic_rnn builds a built-in wrapped cell: under ``scope/attention_wrapper``,
        for its input joined with the attention."""
        _rnn._prebuild(self._cell, graph, width + self._attention_size, dtype,
                       "/".join(p for p in (scope, self._name) if p))

    def __call__(self, inputs, state, scope=None):
        if not isinstance(state, AttentionWrapperState):
            raise TypeError("AttentionWrapper: state must be an AttentionWrapperState (from "
                            "zero_state), got %s" % type(state).__name__)
        with variable_scope(scope or self._name):
            cell_inputs = self._input_fn(_fw.convert_to_tensor(inputs), state.attention)
            cell_output, cell_state = self._cell(cell_inputs, state.cell_state)
            alignments, attention_state = self._mechanism(cell_output, state.attention_state)
            context = _api.squeeze(_api.matmul(_api.expand_dims(alignments, 1),
                                               self._mechanism.values), [1])
            both = _api.concat([cell_output, context], 1)
            attention = self._layer(both) if self._layer else context
        history = (state.alignment_history.write(state.time, alignments) if self._history
                   else ())
        next_state = AttentionWrapperState(time=state.time + 1, cell_state=cell_state,
                                           attention=attention, alignments=alignments,
                                           alignment_history=history,
                                           attention_state=attention_state)
        return (attention if self._output_attention else cell_output), next_state


from .decoding import (BasicDecoder, BasicDecoderOutput, GreedyEmbeddingHelper,  # noqa: E402,F401
                       SampleEmbeddingHelper, TrainingHelper, dynamic_decode)

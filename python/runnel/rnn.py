"""Recurrent cells and networks with TensorFlow 1.x's names: ``tf.nn.rnn_cell.BasicRNNCell``,
``BasicLSTMCell``, ``LSTMCell``, ``GRUCell``, ``MultiRNNCell``, ``LSTMStateTuple``, and
``tf.nn.dynamic_rnn``, ``bidirectional_dynamic_rnn``, ``static_rnn``.

The built-in cells are Runnel's C++ cells (ops/layers/rnn.hpp), made when first used (their
input width is known then), with TensorFlow's variable names (``rnn/basic_lstm_cell/kernel``,
``rnn/multi_rnn_cell/cell_0/gru_cell/gates/kernel``), so TensorFlow checkpoints of these models
restore by name. A cell of your own subclasses ``RNNCell`` (``state_size``, ``output_size``,
``__call__``); ``dynamic_rnn`` runs it in a ``while_loop``, calling its ``build(inputs_shape)``
first when it has one: make its variables there or in ``__init__``, not in ``__call__`` (a
variable cannot be made inside a loop, as in TensorFlow).
"""
import collections
import contextlib

from . import _runnel
from . import api as _api
from . import dtypes as _dtypes
from . import errors as _errors
from . import framework as _fw
from . import nest as _nest
from . import raw_ops as _raw
from .control_flow import TensorArray
from .loops import while_loop


class LSTMStateTuple(collections.namedtuple("LSTMStateTuple", ("c", "h"))):
    """An LSTM's state: the cell ``c`` and the output ``h``."""
    __slots__ = ()

    @property
    def dtype(self):
        return self.c.dtype


class RNNCell:
    """A cell: ``output, new_state = cell(inputs, state)`` for one time step."""

    @property
    def state_size(self):
        raise NotImplementedError("%s does not define state_size" % type(self).__name__)

    @property
    def output_size(self):
        raise NotImplementedError("%s does not define output_size" % type(self).__name__)

    def __call__(self, inputs, state, scope=None):
        raise NotImplementedError("%s does not define __call__" % type(self).__name__)

    def zero_state(self, batch_size, dtype):
        """Zeros of ``state_size`` for ``batch_size`` (an int or an int32 scalar) examples."""
        return _nest.map_structure(lambda width: _zeros(batch_size, width, dtype),
                                   self.state_size)


def _zeros(batch_size, width, dtype):
    """Zeros [batch_size, width]: ``batch_size`` an int or an int32 scalar, ``width`` an int."""
    if isinstance(batch_size, int):
        return _api.zeros([batch_size, width], dtype=dtype)
    dims = _api.stack([_fw.convert_to_tensor(batch_size, dtype=_dtypes.int32),
                       _api.constant(int(width))])
    return _api.reshape(_api.fill(dims, _api.cast(0, dtype)), [-1, int(width)])


def _width(inputs, what):
    dims = inputs.shape.dims
    if dims is None or dims[-1] is None:
        raise ValueError("%s: the last dimension of inputs '%s' must be known, got %s" %
                         (what, inputs.name, inputs.shape))
    return int(dims[-1])


@contextlib.contextmanager
def _variables_at(graph, scope):
    """Where a cell makes its variables, as TensorFlow's get_variable does: outside any loop or
    cond being built (a cell first called in a while_loop body), named by the variable scope
    and ``scope`` ("rnn", ...), not by the name scope (a loop's "while/")."""
    from .variable_scope import get_variable_scope
    full = "/".join(p for p in (get_variable_scope().name, scope) if p)
    with graph._g.outside_control_flow(), graph._g.name_scope(""):
        if full:
            with graph._g.name_scope(full):
                yield
        else:
            yield


def _share(scope, cell_name, reuse):
    """Where a cell in a variable scope that reuses (or a cell made with reuse=True) finds the
    weights it shares by name, as TensorFlow's get_variable would: ("outer/rnn/gru_cell/",
    strict), strict when a missing one is an error (reuse=True), not when it is made (AUTO_REUSE);
    ("", False) when the cell makes its own."""
    from .variable_scope import AUTO_REUSE, get_variable_scope
    vs = get_variable_scope()
    mode = vs.reuse if reuse in (None, False) else reuse
    if mode not in (True, AUTO_REUSE):
        return "", False
    return "/".join(p for p in (vs.name, scope, cell_name) if p) + "/", mode is True


class _NativeCell(RNNCell):
    """A cell built in C++ on first use."""

    _scope = None

    def __init__(self, num_units, name, dtype, reuse=None):
        if int(num_units) < 1:
            raise ValueError("%s: num_units must be positive, got %r" % (type(self).__name__,
                                                                        num_units))
        self._units = int(num_units)
        self._name = name or self._scope
        self._reuse = reuse
        self._dtype = dtype
        self._cell = None
        self._graph = None
        self._input_size = None

    output_size = property(lambda self: self._units)

    def _make(self, graph, input_size, dtype, share):
        """The C++ cell; ``share`` is _share's (prefix, strict)."""
        raise NotImplementedError

    def _build(self, graph, input_size, dtype, scope=""):
        if self._cell is None:
            dtype = _dtypes.as_dtype(self._dtype or dtype)
            share = _share(scope, self._name, self._reuse)
            with _variables_at(graph, scope):
                try:
                    self._cell = self._make(graph, input_size, dtype.name, share)
                except _errors.InvalidArgumentError as e:
                    if not e.message.startswith("Trying to share variable"):
                        raise
                    raise ValueError(e.message) from None  # TensorFlow's type for it
            self._graph, self._input_size = graph, input_size
        elif graph is not self._graph:
            raise ValueError("cell '%s' was built in another graph" % self._name)
        elif input_size != self._input_size:
            raise ValueError("cell '%s' was built for inputs of width %d, got %d" %
                             (self._name, self._input_size, input_size))

    def _seed(self, graph):
        return int(_runnel._seeds(graph._g, 0)[1])

    @property
    def variables(self):
        """The cell's variables (empty until it is first used)."""
        if self._cell is None:
            return []
        from .variables import Variable
        names = set(self._cell.variables)
        return [Variable(_v=v, _graph=self._graph)
                for v in _runnel._variables(self._graph._g, "variables") if v.name in names]

    trainable_variables = trainable_weights = weights = variables

    def _pack_state(self, flat):
        return _nest.pack_sequence_as(self.state_size, flat)

    def __call__(self, inputs, state, scope=None):
        inputs = _fw.convert_to_tensor(inputs)
        self._build(inputs.graph, _width(inputs, self._name), inputs.dtype)
        flat = [_fw.convert_to_tensor(s, graph=inputs.graph)._t for s in _nest.flatten(state)]
        y, new = self._cell.step(inputs._t, flat)
        return _fw.Tensor(inputs.graph, y), self._pack_state(
            [_fw.Tensor(inputs.graph, t) for t in new])


def _tanh_only(cls, activation):
    if activation is not None and getattr(activation, "__name__", "").lower() != "tanh":
        raise NotImplementedError("%s: only the default activation (tanh) is built in; write "
                                  "an RNNCell of your own for another" % cls)


class BasicRNNCell(_NativeCell):
    """h' = tanh([x, h] W + b)."""
    _scope = "basic_rnn_cell"

    def __init__(self, num_units, activation=None, reuse=None, name=None, dtype=None):
        _tanh_only("BasicRNNCell", activation)
        super().__init__(num_units, name, dtype, reuse)

    state_size = property(lambda self: self._units)

    def _make(self, graph, input_size, dtype, share):
        return _runnel._basic_rnn_cell(graph._g, input_size, self._units, dtype, self._name,
                                       self._seed(graph), *share)


class BasicLSTMCell(_NativeCell):
    """TensorFlow's BasicLSTMCell: gates i, j, f, o from [x, h] W + b; state (c, h)."""
    _scope = "basic_lstm_cell"
    _fused = False

    def __init__(self, num_units, forget_bias=1.0, state_is_tuple=True, activation=None,
                 reuse=None, name=None, dtype=None):
        if not state_is_tuple:
            raise NotImplementedError("%s(state_is_tuple=False): the state is an "
                                      "LSTMStateTuple" % type(self).__name__)
        _tanh_only(type(self).__name__, activation)
        super().__init__(num_units, name, dtype, reuse)
        self._forget_bias = float(forget_bias)

    state_size = property(lambda self: LSTMStateTuple(self._units, self._units))

    def _make(self, graph, input_size, dtype, share):
        return _runnel._lstm_cell(graph._g, input_size, self._units, dtype, self._name,
                                  self._seed(graph), self._forget_bias, self._fused, *share)


class LSTMCell(BasicLSTMCell):
    """TensorFlow's LSTMCell without peepholes, clipping or projection (those raise)."""
    _scope = "lstm_cell"

    def __init__(self, num_units, use_peepholes=False, cell_clip=None, initializer=None,
                 num_proj=None, proj_clip=None, num_unit_shards=None, num_proj_shards=None,
                 forget_bias=1.0, state_is_tuple=True, activation=None, reuse=None, name=None,
                 dtype=None):
        for arg, value in (("use_peepholes", use_peepholes), ("cell_clip", cell_clip),
                           ("initializer", initializer), ("num_proj", num_proj),
                           ("proj_clip", proj_clip), ("num_unit_shards", num_unit_shards),
                           ("num_proj_shards", num_proj_shards)):
            if value:
                raise NotImplementedError("LSTMCell(%s=...) is not built in" % arg)
        super().__init__(num_units, forget_bias, state_is_tuple, activation, reuse, name, dtype)


class LSTMBlockCell(BasicLSTMCell):
    """The same LSTM as one fused op a step (TensorFlow's contrib LSTMBlockCell; float32); with
    ``dynamic_rnn`` and no ``sequence_length`` the whole sequence is one op."""
    _scope = "lstm_cell"
    _fused = True

    def __init__(self, num_units, forget_bias=1.0, cell_clip=None, use_peephole=False,
                 reuse=None, dtype=None, name="lstm_cell"):
        if cell_clip is not None or use_peephole:
            raise NotImplementedError("LSTMBlockCell: cell_clip and use_peephole are not "
                                      "built in")
        super().__init__(num_units, forget_bias, True, None, reuse, name, dtype)


class GRUCell(_NativeCell):
    """TensorFlow's GRUCell: gates r, u; candidate from [x, r h]; state h."""
    _scope = "gru_cell"

    def __init__(self, num_units, activation=None, reuse=None, kernel_initializer=None,
                 bias_initializer=None, name=None, dtype=None):
        _tanh_only("GRUCell", activation)
        if kernel_initializer is not None or bias_initializer is not None:
            raise NotImplementedError("GRUCell: custom initializers are not built in")
        super().__init__(num_units, name, dtype, reuse)

    state_size = property(lambda self: self._units)

    def _make(self, graph, input_size, dtype, share):
        return _runnel._gru_cell(graph._g, input_size, self._units, dtype, self._name,
                                 self._seed(graph), *share)


class MultiRNNCell(RNNCell):
    """Cells stacked: each one's output is the next one's input; the state is the tuple of
    their states."""

    def __init__(self, cells, state_is_tuple=True):
        if not cells:
            raise ValueError("MultiRNNCell needs at least one cell")
        if not state_is_tuple:
            raise NotImplementedError("MultiRNNCell(state_is_tuple=False)")
        self._cells = list(cells)
        self._cell = None
        self._graph = None

    state_size = property(lambda self: tuple(c.state_size for c in self._cells))
    output_size = property(lambda self: self._cells[-1].output_size)
    _native = property(lambda self: all(_native(c) for c in self._cells))

    def _build(self, graph, input_size, dtype, scope=""):
        if self._cell is not None:
            self._cells[0]._build(graph, input_size, dtype)  # checks the width
            return
        width = input_size
        for i, c in enumerate(self._cells):
            c._build(graph, width, dtype,
                     "/".join(p for p in (scope, "multi_rnn_cell", "cell_%d" % i) if p))
            width = c.output_size
        self._cell = _runnel._multi_rnn_cell([c._cell for c in self._cells])
        self._graph = graph

    def _pack_state(self, flat):
        return _nest.pack_sequence_as(self.state_size, flat)

    @property
    def variables(self):
        return [v for c in self._cells for v in c.variables]

    trainable_variables = trainable_weights = weights = variables

    def __call__(self, inputs, state, scope=None):
        if len(state) != len(self._cells):
            raise ValueError("MultiRNNCell of %d cells got a state of %d" %
                             (len(self._cells), len(state)))
        x, new = _fw.convert_to_tensor(inputs), []
        for i, (c, s) in enumerate(zip(self._cells, state)):
            if isinstance(c, _NativeCell) and c._cell is None:  # TensorFlow's variable names
                c._build(x.graph, _width(x, "MultiRNNCell"), x.dtype,
                         "multi_rnn_cell/cell_%d" % i)
            with x.graph.name_scope("cell_%d" % i):
                x, s2 = c(x, s)
            new.append(s2)
        return x, tuple(new)


class _Wrapper(RNNCell):
    def __init__(self, cell):
        self._cell = cell

    state_size = property(lambda self: self._cell.state_size)
    output_size = property(lambda self: self._cell.output_size)

    def zero_state(self, batch_size, dtype):
        return self._cell.zero_state(batch_size, dtype)

    @property
    def variables(self):
        return getattr(self._cell, "variables", [])

    trainable_variables = trainable_weights = weights = variables


def _is_one(p):
    return isinstance(p, (int, float)) and float(p) == 1.0


class DropoutWrapper(_Wrapper):
    """Dropout on a cell's inputs, outputs and state (TensorFlow's DropoutWrapper; of an LSTM's
    state only h, as its default filter does). Keep probabilities may be tensors (a placeholder
    set to 1 for evaluation). With ``variational_recurrent`` one mask per unit, drawn once a
    run outside the loop, serves every time step and every example (TensorFlow's [1, size]
    noise): give ``dtype``, and ``input_size`` when inputs are dropped."""

    def __init__(self, cell, input_keep_prob=1.0, output_keep_prob=1.0, state_keep_prob=1.0,
                 variational_recurrent=False, input_size=None, dtype=None, seed=None,
                 dropout_state_filter_visitor=None):
        if dropout_state_filter_visitor is not None:
            raise NotImplementedError("DropoutWrapper(dropout_state_filter_visitor=...)")
        for name, p in (("input_keep_prob", input_keep_prob),
                        ("output_keep_prob", output_keep_prob),
                        ("state_keep_prob", state_keep_prob)):
            if isinstance(p, (int, float)) and not 0.0 < float(p) <= 1.0:
                raise ValueError("DropoutWrapper: %s must be in (0, 1], got %r" % (name, p))
        super().__init__(cell)
        self._keep = (input_keep_prob, output_keep_prob, state_keep_prob)
        self._seed = seed
        self._noise = None
        if variational_recurrent:
            if dtype is None:
                raise ValueError("When variational_recurrent=True, dtype must be provided")
            if not _is_one(input_keep_prob) and input_size is None:
                raise ValueError("When variational_recurrent=True and input_keep_prob < 1.0 or "
                                 "is unknown, input_size must be provided")
            sizes = (input_size if not _is_one(input_keep_prob) else None,
                     cell.output_size, cell.state_size)
            self._noise = [None if size is None else
                           _nest.map_structure(lambda n, k=k: self._make_noise(n, dtype, k),
                                               size)
                           for k, size in enumerate((sizes[0], sizes[1], sizes[2]))]

    def _make_noise(self, size, dtype, k):
        from . import api
        width = int(size[-1]) if isinstance(size, (list, tuple)) else int(size)
        with _fw.get_default_graph()._g.outside_control_flow():
            return api.random_uniform([1, width], dtype=dtype,
                                      seed=None if self._seed is None else self._seed + 10 + k)

    def _drop(self, x, keep, k, noise=None):
        from . import api, nn
        if _is_one(keep):
            return x
        if noise is not None:  # variational: the wrapper's one mask, scaled as dropout is
            return api.divide(x, keep) * _raw.Floor(x=keep + noise)
        return nn.dropout(x, keep_prob=keep, seed=None if self._seed is None else self._seed + k)

    def __call__(self, inputs, state, scope=None):
        noise = self._noise or [None, None, None]
        inputs = self._drop(_fw.convert_to_tensor(inputs), self._keep[0], 0, noise[0])
        out, new = self._cell(inputs, state, scope)
        if not _is_one(self._keep[2]):
            def drop_state(s, n):
                if isinstance(s, LSTMStateTuple):
                    return LSTMStateTuple(s.c, self._drop(s.h, self._keep[2], 2,
                                                          n.h if n is not None else None))
                if isinstance(s, (list, tuple)):
                    return type(s)(drop_state(p, None if n is None else q)
                                   for p, q in zip(s, n if n is not None else [None] * len(s)))
                return self._drop(s, self._keep[2], 2, n)
            new = drop_state(new, noise[2])
        return self._drop(out, self._keep[1], 1, noise[1]), new


class ResidualWrapper(_Wrapper):
    """The cell's output plus its input (their widths must match)."""

    def __call__(self, inputs, state, scope=None):
        inputs = _fw.convert_to_tensor(inputs)
        out, new = self._cell(inputs, state, scope)
        return out + inputs, new


def _prebuild(cell, graph, width, dtype, scope):
    """Builds the built-in cells a Python loop will call (inside wrappers too) where dynamic_rnn
    would: their variables named under ``scope``, as TensorFlow's are."""
    if _native(cell):
        cell._build(graph, width, dtype, scope)
    elif isinstance(cell, _Wrapper):
        _prebuild(cell._cell, graph, width, dtype, scope)
    elif hasattr(cell, "_prebuild"):  # seq2seq.AttentionWrapper
        cell._prebuild(graph, width, dtype, scope)


def _native(cell):
    return isinstance(cell, _NativeCell) or (isinstance(cell, MultiRNNCell) and cell._native)


# ---- networks -------------------------------------------------------------------------------
def _time_major(inputs, time_major, what):
    x = _fw.convert_to_tensor(inputs)
    if x.shape.ndims is not None and x.shape.ndims != 3:
        raise ValueError("%s: inputs '%s' must be [%s], got %s" % (
            what, x.name, "time, batch, depth" if time_major else "batch, time, depth", x.shape))
    _width(x, what)
    return x if time_major else _api.transpose(x, [1, 0, 2])


def _initial_state(cell, x, initial_state, dtype, what):
    if initial_state is not None:
        return initial_state
    if dtype is None:
        raise ValueError("%s: give an initial_state or a dtype" % what)
    batch = x.shape.dims[1] if x.shape.dims and x.shape.dims[1] is not None else \
        _api.shape(x)[1]
    return cell.zero_state(batch, dtype)


def _lengths(sequence_length):
    if sequence_length is None:
        return None
    return _api.cast(_fw.convert_to_tensor(sequence_length), _dtypes.int32)


def _flat(state, graph):
    return [_fw.convert_to_tensor(s, graph=graph)._t for s in _nest.flatten(state)]


def _copy_through(new, old, running):
    """A state entry where ``running`` ([batch]) is false: the old one, as TensorFlow's
    dynamic_rnn keeps a state past an example's length; a TensorArray or a scalar (an
    AttentionWrapper's history and step) goes on as the step left it."""
    if isinstance(new, TensorArray) or new.shape.ndims == 0:
        return new
    m = _api.cast(running, new.dtype)
    for _ in range((new.shape.ndims or 1) - 1):
        m = _api.expand_dims(m, -1)
    return new * m + old * (1 - m)


def _python_rnn(cell, x, lengths, state, parallel_iterations, name):
    """Any RNNCell over time-major ``x``, in a while_loop: past an example's length its output
    is zero and its state kept."""
    g = x.graph
    _prebuild(cell, g, _width(x, name), x.dtype, name)
    from .variable_scope import variable_scope
    # Variables a Python cell makes with get_variable are named under "rnn/", as TensorFlow's.
    with variable_scope(name, auxiliary_name_scope=False), g.name_scope(name):
        if hasattr(cell, "build") and not getattr(cell, "built", False):
            cell.build(_fw.TensorShape([x.shape.dims[1] if x.shape.dims else None,
                                        _width(x, name)]))
            cell.built = True
        steps = _api.shape(x)[0]
        inputs = TensorArray(x.dtype, size=steps, element_shape=x.shape.dims[1:]
                             if x.shape.dims else None).unstack(x)
        batch = x.shape.dims[1] if x.shape.dims else None
        outputs = TensorArray(x.dtype, size=steps, element_shape=[batch, cell.output_size])

        def body(t, out, s):
            y, new = cell(inputs.read(t), s)
            if lengths is not None:
                running = _raw.Less(t, lengths)
                y = y * _api.expand_dims(_api.cast(running, y.dtype), 1)
                new = _nest.map_structure(lambda n, o: _copy_through(n, o, running), new, s)
            return t + 1, out.write(t, y), new

        _, outputs, state = while_loop(lambda t, out, s: _raw.Less(t, steps), body,
                                       (_api.constant(0), outputs, state),
                                       parallel_iterations=parallel_iterations, name="while")
        return outputs.stack(), state


def dynamic_rnn(cell, inputs, sequence_length=None, initial_state=None, dtype=None,
                parallel_iterations=None, swap_memory=False, time_major=False, scope=None):
    """``cell`` over every time step of ``inputs`` ([batch, time, depth], or [time, batch,
    depth] with ``time_major``) in a while loop; returns (outputs, final state). With
    ``sequence_length``, outputs past an example's length are zero and its final state is the
    one at its length. Built-in cells run in C++ (a fused LSTM without sequence_length in one
    op); other cells in a Python-built while_loop."""
    what = "dynamic_rnn"
    name = scope or "rnn"
    x = _time_major(inputs, time_major, what)
    g = x.graph
    state = _initial_state(cell, x, initial_state, dtype, what)
    lengths = _lengths(sequence_length)
    if _native(cell):
        cell._build(g, _width(x, what), x.dtype, name)
        out, final = _runnel._dynamic_rnn(cell._cell, x._t, _flat(state, g),
                                          None if lengths is None else lengths._t,
                                          int(parallel_iterations or 32), name)
        out, final = _fw.Tensor(g, out), cell._pack_state([_fw.Tensor(g, t) for t in final])
    else:
        out, final = _python_rnn(cell, x, lengths, state, int(parallel_iterations or 32), name)
    return (out if time_major else _api.transpose(out, [1, 0, 2])), final


def bidirectional_dynamic_rnn(cell_fw, cell_bw, inputs, sequence_length=None,
                              initial_state_fw=None, initial_state_bw=None, dtype=None,
                              parallel_iterations=None, swap_memory=False, time_major=False,
                              scope=None):
    """``cell_fw`` reading each sequence forwards and ``cell_bw`` backwards (its outputs put back
    in input order); returns ((outputs_fw, outputs_bw), (state_fw, state_bw))."""
    what = "bidirectional_dynamic_rnn"
    name = scope or "bidirectional_rnn"
    x = _time_major(inputs, time_major, what)
    g = x.graph
    s_fw = _initial_state(cell_fw, x, initial_state_fw, dtype, what)
    s_bw = _initial_state(cell_bw, x, initial_state_bw, dtype, what)
    lengths = _lengths(sequence_length)
    if not (_native(cell_fw) and _native(cell_bw)):
        raise NotImplementedError("bidirectional_dynamic_rnn runs the built-in cells; for "
                                  "cells of your own, run dynamic_rnn on reverse_sequence(x)")
    cell_fw._build(g, _width(x, what), x.dtype, name + "/fw")
    cell_bw._build(g, _width(x, what), x.dtype, name + "/bw")
    fw, bw, f_state, b_state = _runnel._bidirectional_dynamic_rnn(
        cell_fw._cell, cell_bw._cell, x._t, _flat(s_fw, g), _flat(s_bw, g),
        None if lengths is None else lengths._t, int(parallel_iterations or 32), name)
    fw, bw = _fw.Tensor(g, fw), _fw.Tensor(g, bw)
    if not time_major:
        fw, bw = _api.transpose(fw, [1, 0, 2]), _api.transpose(bw, [1, 0, 2])
    return (fw, bw), (cell_fw._pack_state([_fw.Tensor(g, t) for t in f_state]),
                      cell_bw._pack_state([_fw.Tensor(g, t) for t in b_state]))


def static_rnn(cell, inputs, initial_state=None, dtype=None, sequence_length=None, scope=None):
    """``cell`` unrolled over ``inputs``, a list of [batch, depth] tensors, one per step;
    returns (a list of outputs, the final state)."""
    if not isinstance(inputs, (list, tuple)) or not inputs:
        raise TypeError("static_rnn: inputs must be a non-empty list of [batch, depth] tensors")
    x = _api.stack([_fw.convert_to_tensor(i) for i in inputs])
    g = x.graph
    state = _initial_state(cell, x, initial_state, dtype, "static_rnn")
    lengths = _lengths(sequence_length)
    if not _native(cell):
        raise NotImplementedError("static_rnn runs the built-in cells; call a cell of your own "
                                  "step by step")
    cell._build(g, _width(x, "static_rnn"), x.dtype, scope or "rnn")
    with g.name_scope(scope or "rnn"):
        out, final = _runnel._static_rnn(cell._cell, x._t, _flat(state, g),
                                         None if lengths is None else lengths._t)
    outs = _api.unstack(_fw.Tensor(g, out), num=len(inputs))
    return outs, cell._pack_state([_fw.Tensor(g, t) for t in final])

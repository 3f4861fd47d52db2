"""Graphs, tensors and operations (tf.Graph, tf.Tensor, tf.Operation), the default graph, and
the conversion of Python values to tensors."""
import contextlib
import threading

import numpy as np

from . import _runnel
from . import dtypes as _dtypes


class Graph:
    """A dataflow graph. Nodes are checked as they are added (op, attributes, dtypes, shapes);
    errors name the node. ``with g.as_default():`` makes it the graph new ops go to."""

    def __init__(self, _graph=None):
        self._g = _graph if _graph is not None else _runnel._Graph()
        self._seed = None

    # -- the default graph --------------------------------------------------------------
    @contextlib.contextmanager
    def as_default(self):
        _stack().append(self)
        try:
            yield self
        finally:
            _stack().pop()

    # -- nodes --------------------------------------------------------------------------
    def _build(self, op_type, name, inputs, attrs):
        """Adds a node; returns its outputs as Tensors (an Operation when it has none)."""
        node, outs = self._g.build(op_type, name or "", [t._t for t in inputs], attrs)
        if not outs:
            return Operation(self, self._g.operation_at(node))
        return [Tensor(self, t) for t in outs]

    def get_tensor_by_name(self, name):
        return Tensor(self, self._g.tensor(name))

    def get_operation_by_name(self, name):
        return Operation(self, self._g.operation(name))

    def as_graph_element(self, obj):
        """A Tensor for "name:index", an Operation for "name", or the object itself."""
        if isinstance(obj, (Tensor, Operation)):
            return obj
        if isinstance(obj, str):
            return self.get_tensor_by_name(obj) if ":" in obj else self.get_operation_by_name(obj)
        if hasattr(obj, "_as_graph_element"):
            return obj._as_graph_element()
        raise TypeError("cannot interpret %r as a tensor or an operation" % (obj,))

    def get_operations(self):
        return [Operation(self, self._g.operation_at(i)) for i in range(self._g.num_nodes())]

    def get_collection(self, key):
        return [Operation(self, o) for o in self._g.collection(key)]

    def add_to_collection(self, key, op):
        self._g.add_to_collection(key, as_operation(op)._op)

    # -- scopes -------------------------------------------------------------------------
    def name_scope(self, name):
        return self._g.name_scope(name or "")

    def device(self, spec):
        return self._g.device(spec or "")

    def control_dependencies(self, ops):
        return self._g.control_dependencies([as_operation(o)._op for o in (ops or [])])

    def colocate_with(self, op):
        return self._g.colocate_with(as_operation(op)._op)

    # -- files and text -----------------------------------------------------------------
    def seed(self, value):
        self._g.set_seed(int(value))

    def as_text(self):
        """One line per node: ``y = MatMul(x, w) {...} -> float32[?,10]``."""
        return self._g.to_text()

    def as_graph_def(self, format="runnel"):
        """The graph as file bytes: Runnel's ("runnel") or TensorFlow's GraphDef ("tensorflow",
        "tensorflow_text")."""
        if format == "runnel":
            return self._g.serialize()
        if format in ("tensorflow", "tensorflow_text"):
            return self._g.export_tf(format == "tensorflow_text")
        raise ValueError("format %r: 'runnel', 'tensorflow' or 'tensorflow_text'" % format)

    def save(self, path):
        """Writes the graph in Runnel's format (atomically)."""
        self._g.save(str(path))

    def __len__(self):
        return self._g.num_nodes()


_state = threading.local()
_global_default = [None]


def _stack():
    if not hasattr(_state, "stack"):
        _state.stack = []
    return _state.stack


def get_default_graph():
    """The graph ops go to: the innermost ``as_default()``, else the process's global graph."""
    s = _stack()
    if s:
        return s[-1]
    if _global_default[0] is None:
        _global_default[0] = Graph()
    return _global_default[0]


def reset_default_graph():
    """A fresh global default graph (outside any ``as_default()`` block)."""
    if _stack():
        raise AssertionError("reset_default_graph inside a Graph.as_default() block")
    _global_default[0] = Graph()


class Operation:
    """A node (tf.Operation): what a session runs as a target."""

    __slots__ = ("graph", "_op")

    def __init__(self, graph, op):
        self.graph = graph
        self._op = op

    name = property(lambda self: self._op.name)
    type = property(lambda self: self._op.type)
    device = property(lambda self: self._op.device)
    inputs = property(lambda self: [Tensor(self.graph, t) for t in self._op.inputs])
    outputs = property(lambda self: [Tensor(self.graph, t) for t in self._op.outputs])

    def get_attr(self, name):
        return self._op.get_attr(name)

    def run(self, feed_dict=None, session=None):
        from .session import _session_for
        _session_for(session).run(self, feed_dict)

    def __eq__(self, other):
        return isinstance(other, Operation) and other._op.node_id == self._op.node_id and \
            other.graph is self.graph

    def __hash__(self):
        return hash((id(self.graph), self._op.node_id))

    def __repr__(self):
        return "<runnel.Operation '%s' type=%s>" % (self.name, self.type)


class Tensor:
    """An output of a node (tf.Tensor). Python's operators build ops: ``x @ w + b``."""

    __slots__ = ("graph", "_t")
    __array_priority__ = 100  # numpy_array + tensor builds an op, not an object array

    def __init__(self, graph, t):
        self.graph = graph
        self._t = t

    name = property(lambda self: self._t.name)
    value_index = property(lambda self: self._t.value_index)
    op = property(lambda self: Operation(self.graph, self.graph._g.operation(self._t.op_name)))

    @property
    def dtype(self):
        return _dtypes.as_dtype(self._t.dtype)

    @property
    def shape(self):
        """The inferred shape: a list with None for unknown dimensions, None for unknown rank."""
        return TensorShape(self._t.shape)

    def get_shape(self):
        return self.shape

    def eval(self, feed_dict=None, session=None):
        from .session import _session_for
        return _session_for(session).run(self, feed_dict)

    def __eq__(self, other):
        return self is other or (isinstance(other, Tensor) and other.graph is self.graph and
                                 other.name == self.name)

    def __hash__(self):
        return hash((id(self.graph), self.name))

    def __bool__(self):
        raise TypeError("a graph Tensor has no truth value until a Session runs it")

    def __repr__(self):
        return "<runnel.Tensor '%s' shape=%s dtype=%s>" % (self.name, self.shape, self.dtype.name)


class TensorShape:
    """A possibly partial shape: ``dims`` (None unknown), ``as_list()``, ``ndims``."""

    def __init__(self, dims):
        self.dims = None if dims is None else list(dims)

    @property
    def ndims(self):
        return None if self.dims is None else len(self.dims)

    rank = ndims

    def as_list(self):
        if self.dims is None:
            raise ValueError("as_list() is not defined on an unknown TensorShape")
        return list(self.dims)

    def is_fully_defined(self):
        return self.dims is not None and all(d is not None for d in self.dims)

    def __iter__(self):
        return iter(self.dims or [])

    def __len__(self):
        if self.dims is None:
            raise ValueError("a shape of unknown rank has no length")
        return len(self.dims)

    def __getitem__(self, i):
        return self.dims[i]

    def __eq__(self, other):
        if isinstance(other, TensorShape):
            return self.dims == other.dims
        return self.dims == (None if other is None else list(other))

    def __repr__(self):
        if self.dims is None:
            return "<unknown>"
        return "(" + ", ".join("?" if d is None else str(d) for d in self.dims) + \
            ("," if len(self.dims) == 1 else "") + ")"


class IndexedSlices:
    """A sparse gradient (tf.IndexedSlices): rows ``indices`` of a tensor of ``dense_shape``
    hold ``values`` (a row may come more than once: they add up). What ``tf.gradients`` gives
    for a variable read only through gathers (``embedding_lookup``); optimizers apply it to
    those rows alone. Used as a tensor, it is made dense."""

    __slots__ = ("values", "indices", "dense_shape", "_dense")

    def __init__(self, values, indices, dense_shape=None):
        self.values, self.indices, self.dense_shape = values, indices, dense_shape
        self._dense = None

    graph = property(lambda self: self.values.graph)
    dtype = property(lambda self: self.values.dtype)
    name = property(lambda self: self.values.name)
    op = property(lambda self: self.values.op)

    def _as_graph_element(self):
        if self._dense is None:  # made once: a fetch or an op may ask many times
            from . import raw_ops
            if self.dense_shape is None:
                raise ValueError("IndexedSlices '%s' without a dense_shape cannot be made dense"
                                 % self.values.name)
            rows = raw_ops.StridedSlice(self.dense_shape, [0], [1], [1], shrink_axis_mask=1)
            self._dense = raw_ops.UnsortedSegmentSum(self.values, self.indices, rows)
        return self._dense

    def __repr__(self):
        return "<runnel.IndexedSlices values='%s' indices='%s'>" % (self.values.name,
                                                                  self.indices.name)


def _gradient_in(g):
    """A gradient for the C++ side: a tensor's handle, or indexed slices as a tuple."""
    if isinstance(g, IndexedSlices):
        return (g.values._t, g.indices._t, g.dense_shape._t)
    return convert_to_tensor(g)._t


def _gradient_out(graph, g):
    """A gradient from the C++ side: None, a Tensor, or IndexedSlices."""
    if g is None:
        return None
    if isinstance(g, tuple):
        return IndexedSlices(*[Tensor(graph, t) for t in g])
    return Tensor(graph, g)


def as_operation(x):
    """An Operation from an Operation, a Tensor (its node) or a Variable (its initializer's
    variable node)."""
    if isinstance(x, Operation):
        return x
    if isinstance(x, Tensor):
        return x.op
    if hasattr(x, "op"):
        return x.op
    raise TypeError("not an operation: %r" % (x,))


def _python_dtype(value):
    """TensorFlow's rule for Python values: floats are float32, ints int32."""
    arr = np.asarray(value)
    if arr.dtype == np.float64 and not isinstance(value, np.ndarray):
        return _dtypes.float32
    if arr.dtype == np.int64 and not isinstance(value, np.ndarray):
        return _dtypes.int32
    return _dtypes.as_dtype(arr.dtype)


def convert_to_tensor(value, dtype=None, name=None, graph=None):
    """A Tensor for ``value``: a Tensor as it is (its dtype checked), a Variable's value, or a
    constant made of a Python or NumPy value in ``graph`` (default: the default graph)."""
    if isinstance(value, Tensor):
        if dtype is not None and _dtypes.as_dtype(dtype) != value.dtype:
            raise ValueError("tensor '%s' has dtype %s, %s was asked for" %
                             (value.name, value.dtype.name, _dtypes.as_dtype(dtype).name))
        return value
    if hasattr(value, "_as_graph_element"):
        return convert_to_tensor(value._as_graph_element(), dtype, name, graph)
    if isinstance(value, Operation):
        raise TypeError("operation '%s' has no value to use as a tensor" % value.name)
    if isinstance(value, (list, tuple)) and any(isinstance(v, Tensor) for v in value):
        from . import api
        return api.stack(list(value), name=name)
    g = graph or get_default_graph()
    t = _dtypes.as_dtype(dtype) if dtype is not None else _python_dtype(value)
    return Tensor(g, _runnel._constant(g._g, value, t.name, name or "Const"))


def graph_of(values, default=None):
    """The graph of the first Tensor (or Variable) among ``values``, else ``default`` or the
    default graph."""
    for v in values:
        if isinstance(v, Tensor):
            return v.graph
        if hasattr(v, "_as_graph_element"):
            return v._as_graph_element().graph
        if isinstance(v, (list, tuple)):
            g = graph_of(v, None)
            if g is not None:
                return g
    return default if default is not None else get_default_graph()

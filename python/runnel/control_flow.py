"""Conditionals, loops and TensorArrays with TensorFlow 1.x's names: ``tf.cond``, ``tf.case``,
``tf.switch_case``, ``tf.while_loop``, ``tf.TensorArray`` and, built on them, ``tf.map_fn``,
``tf.scan``, ``tf.foldl`` and ``tf.foldr``.

The branches and bodies are Python functions called once, while the graph is built (the C++
builder runs them inside the cond's or loop's context); tensors from outside may be used in them
directly. Loop variables and results may be nested lists, tuples, namedtuples and dicts of
tensors and TensorArrays. Gradients flow through all of them (``tf.gradients``, optimizers).
"""
from . import _runnel
from . import api as _api
from . import dtypes as _dtypes
from . import framework as _fw
from . import nest as _nest
from . import raw_ops as _raw


# ---- TensorArray ----------------------------------------------------------------------------
class TensorArray:
    """A list of tensors that lives for one step (tf.TensorArray): written and read by index,
    typically one element per loop iteration. Each ``write``/``scatter``/``unstack``/``split``
    returns a new TensorArray whose ``flow`` orders later reads after it (use the returned one,
    as in TensorFlow); inside ``while_loop`` a TensorArray may be a loop variable."""

    def __init__(self, dtype, size=None, dynamic_size=None, clear_after_read=None,
                 tensor_array_name=None, handle=None, flow=None, infer_shape=True,
                 element_shape=None, colocate_with_first_write_call=True, name=None, _ta=None,
                 _graph=None):
        if _ta is not None:
            self._ta, self._graph = _ta, _graph
            return
        if handle is not None or flow is not None:
            raise NotImplementedError("TensorArray(handle=..., flow=...): make the array with a "
                                      "dtype and size, and pass it (not its handle) around")
        if size is None:
            if not dynamic_size:
                raise ValueError("TensorArray: size must be given unless dynamic_size=True")
            size = 0
        size = _fw.convert_to_tensor(size, dtype=_dtypes.int32)
        dims = None
        if element_shape is not None:
            dims = element_shape.dims if isinstance(element_shape, _fw.TensorShape) \
                else list(element_shape)
        self._graph = size.graph
        self._ta = _runnel._TensorArray(
            size._t, _dtypes.as_dtype(dtype).name, bool(dynamic_size),
            True if clear_after_read is None else bool(clear_after_read), dims,
            tensor_array_name or name or "TensorArray")

    def _same(self, ta):
        return TensorArray(None, _ta=ta, _graph=self._graph)

    def _tensor(self, t):
        return _fw.Tensor(self._graph, t)

    def _index(self, index):
        return _fw.convert_to_tensor(index, dtype=_dtypes.int32, graph=self._graph)._t

    def _value(self, value):
        return _fw.convert_to_tensor(value, dtype=self.dtype, graph=self._graph)._t

    handle = property(lambda self: self._tensor(self._ta.handle))
    flow = property(lambda self: self._tensor(self._ta.flow))
    dtype = property(lambda self: _dtypes.as_dtype(self._ta.dtype))
    element_shape = property(lambda self: _fw.TensorShape(self._ta.element_shape))

    def _with_flow(self, flow):
        return self._same(self._ta.with_flow(flow._t))

    def identity(self):
        return self._with_flow(_api.identity(self.flow))

    def read(self, index, name=None):
        return self._tensor(self._ta.read(self._index(index)))

    def write(self, index, value, name=None):
        return self._same(self._ta.write(self._index(index), self._value(value)))

    def gather(self, indices, name=None):
        return self._tensor(self._ta.gather(self._index(indices)))

    def stack(self, name=None):
        return self._tensor(self._ta.stack())

    def concat(self, name=None):
        return self._tensor(self._ta.concat())

    def unstack(self, value, name=None):
        return self._same(self._ta.unstack(self._value(value)))

    def scatter(self, indices, value, name=None):
        return self._same(self._ta.scatter(self._index(indices), self._value(value)))

    def split(self, value, lengths, name=None):
        lengths = _fw.convert_to_tensor(lengths, dtype=_dtypes.int64, graph=self._graph)
        return self._same(self._ta.split(self._value(value), lengths._t))

    def size(self, name=None):
        return self._tensor(self._ta.size())

    def close(self, name=None):
        return _fw.Operation(self._graph, self._ta.close())

    def __repr__(self):
        return "<runnel.TensorArray dtype=%s element_shape=%s>" % (self.dtype.name,
                                                                  self.element_shape)


# ---- leaves in and out of the C++ builder ---------------------------------------------------
def _leaf_tensor(value, graph, what, dtype=None):
    """The tensor standing for one leaf: a TensorArray's flow, a Variable's value, an
    Operation's completion (a bool scalar that runs after it), or a constant of a value."""
    if isinstance(value, TensorArray):
        return value.flow
    if isinstance(value, _fw.Operation):
        with graph.control_dependencies([value]):
            return _api.constant(True, name="done")
    if value is None:
        raise ValueError("%s returned None where a tensor was expected" % what)
    return _fw.convert_to_tensor(value, dtype=dtype, graph=graph)


def _repack(structure, tensors):
    """The C++ results in the shape of ``structure``: TensorArrays rebuilt around their new
    flows, Operations as the node a merged completion comes from."""
    leaves = []
    for like, t in zip(_nest.flatten(structure), tensors):
        if isinstance(like, TensorArray):
            leaves.append(like._with_flow(t))
        elif isinstance(like, _fw.Operation):
            leaves.append(t.op)
        else:
            leaves.append(t)
    return _nest.pack_sequence_as(structure, leaves)


def _unpack_singleton(x):
    if isinstance(x, (list, tuple)) and len(x) == 1:
        return x[0]
    return x


# ---- conditionals ---------------------------------------------------------------------------
def _branch(fn, graph, what, seen):
    def build():
        result = fn()
        if result is None:
            raise ValueError("%s returned None: a branch must return what the cond gives" % what)
        seen.append(result)
        return [_leaf_tensor(v, graph, what)._t for v in _nest.flatten(result)]
    return build


def cond(pred, true_fn=None, false_fn=None, strict=False, name=None, fn1=None, fn2=None):
    """``true_fn()`` when the bool scalar ``pred`` is true, else ``false_fn()``; only the branch
    taken runs. Both return the same structure of tensors with the same dtypes. A structure
    of one element is unpacked unless ``strict``."""
    true_fn = true_fn if true_fn is not None else fn1
    false_fn = false_fn if false_fn is not None else fn2
    if not callable(true_fn) or not callable(false_fn):
        raise TypeError("cond: true_fn and false_fn must be callable")
    name = name or "cond"
    pred = _fw.convert_to_tensor(pred, dtype=_dtypes.bool)
    g = pred.graph
    seen_true, seen_false = [], []
    outs = _runnel._cond(pred._t, _branch(true_fn, g, "cond '%s': true_fn" % name, seen_true),
                         _branch(false_fn, g, "cond '%s': false_fn" % name, seen_false), name)
    _nest.assert_same_structure(seen_true[0], seen_false[0],
                                "cond '%s': the two branches' results" % name)
    result = _repack(seen_true[0], [_fw.Tensor(g, t) for t in outs])
    return result if strict else _unpack_singleton(result)


def case(pred_fn_pairs, default=None, exclusive=False, strict=False, name="case"):
    """The result of the first function whose predicate is true, else of ``default`` (when
    ``default`` is None, the last pair's function is the default and its predicate is not
    consulted, as in TensorFlow). ``exclusive`` checks at run time that at most one predicate
    holds."""
    pairs = list(pred_fn_pairs.items()) if isinstance(pred_fn_pairs, dict) else \
        list(pred_fn_pairs)
    if not pairs:
        raise ValueError("case: pred_fn_pairs is empty")
    for p, f in pairs:
        if not callable(f):
            raise TypeError("case '%s': %r is not callable" % (name, f))
    preds = [_fw.convert_to_tensor(p, dtype=_dtypes.bool) for p, _ in pairs]
    fns = [f for _, f in pairs]
    g = preds[0].graph
    if default is None:
        default, fns, checked = fns[-1], fns[:-1], preds
        preds = preds[:-1]
    else:
        checked = preds
    if not preds:  # only a default: it is the result
        return _unpack_singleton(default()) if not strict else default()
    if exclusive and len(checked) > 1:
        # The predicates are read after the check (a Merge takes no control inputs).
        count = _api.add_n([_api.cast(p, _dtypes.int32) for p in checked])
        check = Assert(_raw.LessEqual(count, 1),
                       ["case '%s': more than one predicate is true:" % name, count])
        with g.control_dependencies([check]):
            preds = [_api.identity(p) for p in preds]
    seen = []
    builders = [_branch(f, g, "case '%s': branch %d" % (name, i), seen)
                for i, f in enumerate(fns)]
    outs = _runnel._case([p._t for p in preds], builders,
                         _branch(default, g, "case '%s': default" % name, seen), name)
    for other in seen[1:]:
        _nest.assert_same_structure(seen[0], other, "case '%s': the branches' results" % name)
    result = _repack(seen[0], [_fw.Tensor(g, t) for t in outs])
    return result if strict else _unpack_singleton(result)


def switch_case(branch_index, branch_fns, default=None, name="switch_case"):
    """``branch_fns[branch_index]()``; ``default`` (else the last branch) for an index out of
    range. ``branch_fns`` is a list or a dict from 0..n-1."""
    if isinstance(branch_fns, dict):
        keys = sorted(branch_fns)
        if keys != list(range(len(keys))):
            raise ValueError("switch_case '%s': the branches' keys must be 0..%d, got %s" %
                             (name, len(keys) - 1, keys))
        branch_fns = [branch_fns[k] for k in keys]
    fns = list(branch_fns) + ([default] if default is not None else [])
    if not fns:
        raise ValueError("switch_case '%s': no branches" % name)
    index = _fw.convert_to_tensor(branch_index, dtype=_dtypes.int32)
    g = index.graph
    seen = []
    builders = [_branch(f, g, "switch_case '%s': branch %d" % (name, i), seen)
                for i, f in enumerate(fns)]
    outs = _runnel._switch_case(index._t, builders, name)
    for other in seen[1:]:
        _nest.assert_same_structure(seen[0], other,
                                    "switch_case '%s': the branches' results" % name)
    return _unpack_singleton(_repack(seen[0], [_fw.Tensor(g, t) for t in outs]))


def Assert(condition, data, summarize=None, name=None):
    """An operation failing the step with ``data`` in its message when ``condition`` is false."""
    condition = _fw.convert_to_tensor(condition, dtype=_dtypes.bool)
    data = [_fw.convert_to_tensor(d, graph=condition.graph) for d in data]
    attrs = {} if summarize is None else {"summarize": int(summarize)}
    return _raw.Assert(condition, data, name=name, **attrs)

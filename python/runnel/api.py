"""TensorFlow 1.x's top-level functions (tf.matmul, tf.reduce_mean, ...) over Runnel's ops.
Each builds nodes in the graph of its tensor inputs (else the default graph)."""
import numpy as np

from . import _runnel
from . import dtypes as _dtypes
from . import framework as _fw
from . import raw_ops as _raw

_t = _fw.convert_to_tensor


def _graph(*values):
    return _fw.graph_of(values)


# ---- making tensors ------------------------------------------------------------------------
def placeholder(dtype, shape=None, name=None):
    """A tensor fed at run time: ``shape`` may hold None for unknown dimensions."""
    g = _fw.get_default_graph()
    dims = None if shape is None else list(shape)
    return _fw.Tensor(g, _runnel._placeholder(g._g, _dtypes.as_dtype(dtype).name, dims,
                                              name or "Placeholder"))


def placeholder_with_default(input, shape, name=None):
    """``input`` unless a value is fed for it (with the declared ``shape``, which may hold None
    where the default's shape is known): a ``training`` flag that inference need not feed."""
    value = _fw.convert_to_tensor(input)
    return _raw.PlaceholderWithDefault(value, shape=None if shape is None else list(shape),
                                       name=name or "PlaceholderWithDefault")


def constant(value, dtype=None, shape=None, name="Const"):
    """A constant of ``value`` (copied into the graph); ``shape`` broadcasts a scalar or
    reshapes a value with as many elements."""
    if shape is not None:
        t = _dtypes.as_dtype(dtype) if dtype is not None else _fw._python_dtype(value)
        arr = np.asarray(value, dtype=t.as_numpy_dtype if t != _dtypes.string else object)
        shape = [int(d) for d in shape]
        arr = np.broadcast_to(arr, shape) if arr.size == 1 else arr.reshape(shape)
        # np.array, not np.ascontiguousarray: that makes a scalar a vector of one.
        return _fw.convert_to_tensor(np.array(arr, order="C"), dtype=t, name=name)
    return _fw.convert_to_tensor(value, dtype=dtype, name=name)


def fill(dims, value, name=None):
    return _raw.Fill(dims, value, name=name or "Fill")


def zeros(shape, dtype=_dtypes.float32, name=None):
    return constant(0, dtype=dtype, shape=shape, name=name or "zeros")


def ones(shape, dtype=_dtypes.float32, name=None):
    return constant(1, dtype=dtype, shape=shape, name=name or "ones")


def zeros_like(tensor, dtype=None, name=None):
    return _raw.ZerosLike(tensor if dtype is None else cast(tensor, dtype), name=name)


def ones_like(tensor, dtype=None, name=None):
    return _raw.OnesLike(tensor if dtype is None else cast(tensor, dtype), name=name)


def _random(op, shape, dtype, seed, name, **attrs):
    g = _fw.get_default_graph()
    s1, s2 = _runnel._seeds(g._g, int(seed or 0))
    shape_t = _fw.convert_to_tensor(list(shape), dtype=_dtypes.int32, graph=g)
    return getattr(_raw, op)(shape_t, dtype=_dtypes.as_dtype(dtype), seed=s1, seed2=s2,
                             name=name, **attrs)


def random_normal(shape, mean=0.0, stddev=1.0, dtype=_dtypes.float32, seed=None, name=None):
    x = _random("RandomStandardNormal", shape, dtype, seed, name)
    return x * stddev + mean if (stddev != 1.0 or mean != 0.0) else x


def truncated_normal(shape, mean=0.0, stddev=1.0, dtype=_dtypes.float32, seed=None, name=None):
    x = _random("TruncatedNormal", shape, dtype, seed, name)
    return x * stddev + mean if (stddev != 1.0 or mean != 0.0) else x


def random_uniform(shape, minval=0, maxval=None, dtype=_dtypes.float32, seed=None, name=None):
    if maxval is None:
        maxval = 1
    x = _random("RandomUniform", shape, dtype, seed, name)
    return x * (maxval - minval) + minval if (minval != 0 or maxval != 1) else x


def multinomial(logits, num_samples, seed=None, name=None, output_dtype=None):
    """``num_samples`` class indices per row of ``logits`` [batch, classes], drawn with the
    probabilities softmax(row): [batch, num_samples] of int64 (or ``output_dtype``)."""
    g = _fw.get_default_graph()
    s1, s2 = _runnel._seeds(g._g, int(seed or 0))
    n = _fw.convert_to_tensor(num_samples, dtype=_dtypes.int32, graph=g)
    return _raw.Multinomial(logits, n, seed=s1, seed2=s2,
                            output_dtype=_dtypes.as_dtype(output_dtype or _dtypes.int64),
                            name=name or "Multinomial")


def _categorical(logits, num_samples, dtype=None, seed=None, name=None):
    """``tf.random.categorical``: tf.multinomial with its later argument names."""
    return multinomial(logits, num_samples, seed=seed, name=name, output_dtype=dtype)


# ---- arithmetic ----------------------------------------------------------------------------
def add(x, y, name=None):
    return _raw.Add(x, y, name=name)


def subtract(x, y, name=None):
    return _raw.Sub(x, y, name=name)


def multiply(x, y, name=None):
    return _raw.Mul(x, y, name=name)


def divide(x, y, name=None):
    return _raw.Div(x, y, name=name)


truediv = div = divide
negative = lambda x, name=None: _raw.Neg(x, name=name)  # noqa: E731


def matmul(a, b, transpose_a=False, transpose_b=False, name=None):
    """``a @ b``; of rank 3 or more, a matrix product per batch entry (BatchMatMul), as in
    TensorFlow."""
    a, b = _t(a), _t(b)
    if (a.shape.ndims or 0) > 2 or (b.shape.ndims or 0) > 2:
        return _raw.BatchMatMul(a, b, adj_x=transpose_a, adj_y=transpose_b,
                                name=name or "MatMul")
    return _raw.MatMul(a, b, transpose_a=transpose_a, transpose_b=transpose_b, name=name)


def sequence_mask(lengths, maxlen=None, dtype=_dtypes.bool, name=None):
    """``mask[i, j] = j < lengths[i]``: [batch, maxlen] (``maxlen``: the longest length)."""
    with name_scope(name or "SequenceMask"):
        lengths = _t(lengths)
        if maxlen is None:
            maxlen = reduce_max(lengths)
        steps = range(0, cast(maxlen, lengths.dtype), 1, dtype=lengths.dtype)
        mask = _raw.Less(expand_dims(steps, 0), expand_dims(lengths, 1))
        return mask if _dtypes.as_dtype(dtype) == _dtypes.bool else cast(mask, dtype)


def cast(x, dtype, name=None):
    x = _t(x)
    dtype = _dtypes.as_dtype(dtype)
    if x.dtype == dtype:
        return x
    return _raw.Cast(x, DstT=dtype, name=name)


def where(condition, x, y, name=None):
    return _raw.Select(condition, x, y, name=name)


def clip_by_value(t, clip_value_min, clip_value_max, name=None):
    return _raw.Minimum(_raw.Maximum(t, clip_value_min), clip_value_max, name=name)


def add_n(inputs, name=None):
    return _raw.AddN(list(inputs), name=name)


def _reduce(kind):
    def reduce(input_tensor, axis=None, keepdims=False, name=None, reduction_indices=None,
               keep_dims=None):
        axis = reduction_indices if axis is None else axis
        keep = keepdims if keep_dims is None else keep_dims
        x = _t(input_tensor)
        axes = None if axis is None else [int(a) for a in np.atleast_1d(axis)]
        if axes is None and x.shape.ndims is None and not keep:
            # Every axis of a tensor whose rank is known only at run time (a stacked
            # TensorArray's, say): the axes as a tensor.
            ops = {"sum": _raw.Sum, "mean": _raw.Mean, "max": _raw.Max, "min": _raw.Min,
                   "prod": _raw.Prod}
            every = _raw.Range(0, _raw.Rank(x), 1)
            return ops[kind](x, every, name=name or None)
        return _fw.Tensor(x.graph, _runnel._reduce(kind, x._t, axes, bool(keep), name or ""))

    reduce.__name__ = "reduce_" + kind
    return reduce


def _logical_reduce(op, kind):
    def reduce(input_tensor, axis=None, keepdims=False, name=None, reduction_indices=None,
               keep_dims=None):
        axis = reduction_indices if axis is None else axis
        keep = keepdims if keep_dims is None else keep_dims
        x = _t(input_tensor, dtype=_dtypes.bool)
        axes = (_raw.Range(0, _raw.Rank(x), 1) if axis is None
                else _t(np.atleast_1d(axis).astype(np.int32)))
        return op(x, axes, keep_dims=bool(keep), name=name or None)

    reduce.__name__ = "reduce_" + kind
    return reduce


reduce_all = _logical_reduce(_raw.All, "all")
reduce_any = _logical_reduce(_raw.Any, "any")
reduce_sum, reduce_mean = _reduce("sum"), _reduce("mean")
reduce_max, reduce_min, reduce_prod = _reduce("max"), _reduce("min"), _reduce("prod")


def argmax(input, axis=None, output_type=_dtypes.int64, name=None, dimension=None):
    axis = dimension if axis is None else axis
    return _raw.ArgMax(input, 0 if axis is None else axis, output_type=output_type, name=name)


def argmin(input, axis=None, output_type=_dtypes.int64, name=None, dimension=None):
    axis = dimension if axis is None else axis
    return _raw.ArgMin(input, 0 if axis is None else axis, output_type=output_type, name=name)


# ---- shapes and arrays ---------------------------------------------------------------------
def shape(input, out_type=_dtypes.int32, name=None):
    return _raw.Shape(input, out_type=out_type, name=name)


def size(input, out_type=_dtypes.int32, name=None):
    return _raw.Size(input, out_type=out_type, name=name)


def rank(input, name=None):
    return _raw.Rank(input, name=name)


def reshape(tensor, shape, name=None):
    return _raw.Reshape(tensor, shape, name=name)


def transpose(a, perm=None, name=None):
    a = _t(a)
    if perm is None:
        r = a.shape.ndims
        if r is None:
            raise ValueError("transpose of '%s' needs perm: its rank is unknown" % a.name)
        perm = list(range(r))[::-1]
    return _raw.Transpose(a, perm, name=name)


def expand_dims(input, axis, name=None):
    return _raw.ExpandDims(input, axis, name=name)


def squeeze(input, axis=None, name=None):
    dims = [] if axis is None else [int(a) for a in np.atleast_1d(axis)]
    return _raw.Squeeze(input, squeeze_dims=dims, name=name)


def concat(values, axis, name="concat"):
    return _raw.ConcatV2(list(values), axis, name=name)


def stack(values, axis=0, name="stack"):
    return _raw.Pack(list(values), axis=axis, name=name)


def unstack(value, num=None, axis=0, name="unstack"):
    value = _t(value)
    if num is None:
        num = value.shape.dims[axis] if value.shape.dims else None
        if num is None:
            raise ValueError("unstack of '%s' needs num: dimension %d is unknown" %
                             (value.name, axis))
    out = _raw.Unpack(value, num=num, axis=axis, name=name)
    return list(out) if isinstance(out, tuple) else [out]


def gather(params, indices, axis=0, name=None):
    return _raw.GatherV2(params, indices, axis, name=name)


def one_hot(indices, depth, on_value=None, off_value=None, axis=-1, dtype=None, name=None):
    dtype = _dtypes.as_dtype(dtype or _dtypes.float32)
    on = _t(1 if on_value is None else on_value, dtype=dtype)
    off = _t(0 if off_value is None else off_value, dtype=dtype)
    return _raw.OneHot(indices, depth, on, off, axis=axis, name=name)


def range(start, limit=None, delta=1, dtype=None, name="range"):  # noqa: A001
    if limit is None:
        start, limit = 0, start
    dtype = dtype or (_dtypes.float32 if any(isinstance(v, float) for v in (start, limit, delta))
                      else _dtypes.int32)
    return _raw.Range(_t(start, dtype=dtype), _t(limit, dtype=dtype), _t(delta, dtype=dtype),
                      name=name)


def tile(input, multiples, name=None):
    return _raw.Tile(input, multiples, name=name)


def pad(tensor, paddings, name=None):
    return _raw.Pad(tensor, paddings, name=name)


def slice(input_, begin, size, name=None):  # noqa: A001
    return _raw.Slice(input_, begin, size, name=name)


def identity(input, name=None):
    return _raw.Identity(input, name=name)


def stop_gradient(input, name=None):
    return _raw.StopGradient(input, name=name)


# ---- graphs --------------------------------------------------------------------------------
def no_op(name=None):
    return _raw.NoOp(name=name)


def group(*inputs, name=None):
    """An operation that runs after all of ``inputs``."""
    g = _graph(*inputs)
    with g.control_dependencies([_fw.as_operation(i) for i in inputs]):
        return _raw.NoOp(name=name or "group_deps")


def name_scope(name, default_name=None, values=None):
    return _fw.get_default_graph().name_scope(name or default_name)


def device(spec):
    return _fw.get_default_graph().device(spec)


def control_dependencies(control_inputs):
    return _fw.get_default_graph().control_dependencies(control_inputs)


def set_random_seed(seed):
    """The default graph's seed (tf.set_random_seed): random ops are reproducible from it."""
    _fw.get_default_graph().seed(seed)


def gradients(ys, xs, grad_ys=None, name="gradients"):
    """d(sum of ys)/d(x) for each x: a list with None where an x does not affect ys, and
    IndexedSlices where an x is read only through gathers (embedding_lookup)."""
    ys = [_t(y) for y in (ys if isinstance(ys, (list, tuple)) else [ys])]
    xs_list = xs if isinstance(xs, (list, tuple)) else [xs]
    xs_t = [_t(x) for x in xs_list]  # a Variable: its value, through which its uses flow
    gys = [] if grad_ys is None else [_t(g) for g in
                                      (grad_ys if isinstance(grad_ys, (list, tuple)) else [grad_ys])]
    out = _runnel._gradients([y._t for y in ys], [x._t for x in xs_t], [g._t for g in gys], True)
    return [_fw._gradient_out(ys[0].graph, o) for o in out]


def global_norm(t_list, name=None):
    """sqrt of the sum of every element squared over the tensors (None skipped; the values of
    IndexedSlices)."""
    squares = [reduce_sum(_raw.Square(t.values if isinstance(t, _fw.IndexedSlices) else _t(t)))
               for t in t_list if t is not None]
    if not squares:
        raise ValueError("global_norm: no tensors (all None)")
    return _raw.Sqrt(squares[0] if len(squares) == 1 else add_n(squares), name=name)


def clip_by_global_norm(t_list, clip_norm, use_norm=None, name=None):
    """Each t times clip_norm / max(global_norm, clip_norm) (None stays None, IndexedSlices stay
    sparse); returns (the clipped list, the global norm before clipping)."""
    t_list = list(t_list)
    if use_norm is None:
        g = next((t.graph for t in t_list if t is not None), None)
        if g is None:
            raise ValueError("clip_by_global_norm: no tensors (all None)")
        clipped, norm = _runnel._clip_by_global_norm(
            [None if t is None else _fw._gradient_in(t) for t in t_list], float(clip_norm))
        return [_fw._gradient_out(g, c) for c in clipped], _fw.Tensor(g, norm)
    scale = clip_norm / _raw.Maximum(use_norm, clip_norm)
    out = []
    for t in t_list:
        if isinstance(t, _fw.IndexedSlices):
            out.append(_fw.IndexedSlices(t.values * scale, t.indices, t.dense_shape))
        else:
            out.append(None if t is None else _t(t) * scale)
    return out, use_norm


def clip_by_norm(t, clip_norm, axes=None, name=None):
    """t scaled so that its L2 norm (over ``axes``, default all) is at most clip_norm."""
    t = _t(t)
    norm = _raw.Sqrt(reduce_sum(_raw.Square(t), axis=axes, keepdims=axes is not None))
    return _raw.Mul(t, clip_norm / _raw.Maximum(norm, clip_norm), name=name)

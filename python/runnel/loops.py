"""Loops with TensorFlow 1.x's names: ``tf.while_loop`` and, over it and TensorArrays,
``tf.map_fn``, ``tf.scan``, ``tf.foldl`` and ``tf.foldr`` (docs/python.md)."""
from . import _runnel
from . import api as _api
from . import dtypes as _dtypes
from . import framework as _fw
from . import nest as _nest
from . import raw_ops as _raw
from .control_flow import TensorArray, _leaf_tensor, _repack


def _invariant_dims(s):
    if s is None:
        return None
    if isinstance(s, _fw.TensorShape):
        return s.dims
    return list(s)


def _body_results(result, loop_vars, flat_vars, graph, what):
    """The body's results as flat tensors, in the loop variables' order, checked against
    them."""
    if not isinstance(result, (list, tuple, dict)) and len(flat_vars) == 1:
        result = [result]
    _nest.assert_same_structure(list(loop_vars) if isinstance(loop_vars, tuple) else loop_vars,
                                list(result) if isinstance(result, tuple) else result,
                                what + ": the body's results and the loop variables")
    out = []
    for like, value in zip(flat_vars, _nest.flatten(result)):
        if isinstance(like, TensorArray) != isinstance(value, TensorArray):
            raise TypeError("%s: the body returned %r where the loop variable is %r" %
                            (what, value, like))
        dtype = None if isinstance(like, TensorArray) else like.dtype
        if isinstance(value, _fw.Tensor) and value.dtype != dtype:
            raise TypeError("%s: the body returned '%s' of dtype %s for the loop variable '%s' "
                            "of dtype %s" % (what, value.name, value.dtype.name, like.name,
                                             dtype.name))
        out.append(_leaf_tensor(value, graph, what + "'s body", dtype))
    return out


def while_loop(cond, body, loop_vars, shape_invariants=None, parallel_iterations=10,
               back_prop=True, swap_memory=False, name=None, maximum_iterations=None,
               return_same_structure=False):
    """Repeats ``body(*loop_vars)`` while ``cond(*loop_vars)`` holds (tf.while_loop).
    ``loop_vars`` is a (nested) list or tuple of tensors, values and TensorArrays; the body
    returns the same structure. ``maximum_iterations`` (an int or an int32 scalar tensor) ends
    the loop after that many iterations. ``shape_invariants`` gives, per loop variable, the
    shape it may take across iterations. A single loop variable comes back unpacked unless
    ``return_same_structure``. ``swap_memory`` is accepted and does nothing (no device memory
    to swap to the host)."""
    if not callable(cond) or not callable(body):
        raise TypeError("while_loop: cond and body must be callable")
    if int(parallel_iterations) < 1:
        raise ValueError("while_loop: parallel_iterations must be positive, got %r" %
                         (parallel_iterations,))
    name = name or "while"
    single = not isinstance(loop_vars, (list, tuple))
    if single:
        loop_vars = (loop_vars,)
    if isinstance(maximum_iterations, _fw.Tensor):
        # A limit known only at run time: a counter in the loop, as TensorFlow does.
        limit = maximum_iterations
        outer_cond, outer_body = cond, body

        def counted_body(i, lv):
            r = outer_body(*lv)
            if not isinstance(r, (list, tuple, dict)) and len(lv) == 1:
                r = [r]
            return i + 1, r

        result = while_loop(
            lambda i, lv: _raw.LogicalAnd(_raw.Less(i, limit), outer_cond(*lv)), counted_body,
            (_api.constant(0), tuple(loop_vars)),
            None if shape_invariants is None else ([], shape_invariants),
            parallel_iterations, back_prop, swap_memory, name, None, True)[1]
        return result[0] if (single or len(result) == 1) and not return_same_structure \
            else result
    g = _fw.graph_of(_nest.flatten(loop_vars))
    flat_vars = []
    for v in _nest.flatten(loop_vars):
        flat_vars.append(v if isinstance(v, TensorArray) else
                         _leaf_tensor(v, g, "while_loop '%s': a loop variable" % name))
    structure = _nest.pack_sequence_as(loop_vars, flat_vars)
    invariants = None
    if shape_invariants is not None:
        _nest.assert_same_structure(list(loop_vars), list(shape_invariants) if isinstance(
            shape_invariants, tuple) else shape_invariants,
            "while_loop '%s': shape_invariants and loop_vars" % name)
        invariants = [[] if isinstance(v, TensorArray) else _invariant_dims(s)
                      for v, s in zip(flat_vars, _nest.flatten(shape_invariants))]
    what = "while_loop '%s'" % name

    def packed(ts):
        return _repack(structure, [_fw.Tensor(g, t) for t in ts])

    def cond_fn(ts):
        return _fw.convert_to_tensor(cond(*packed(ts)), dtype=_dtypes.bool, graph=g)._t

    def body_fn(ts):
        return [t._t for t in _body_results(body(*packed(ts)), structure, flat_vars, g, what)]

    outs = _runnel._while_loop(cond_fn, body_fn, [_leaf_tensor(v, g, what)._t for v in flat_vars],
                               int(parallel_iterations),
                               -1 if maximum_iterations is None else int(maximum_iterations),
                               invariants, name)
    result = packed(outs)
    if not back_prop:
        result = _nest.map_structure(
            lambda t: t if isinstance(t, TensorArray) else _api.stop_gradient(t), result)
    if (single or len(loop_vars) == 1) and not return_same_structure:
        return result[0]
    return result


# ---- map_fn, scan and folds -----------------------------------------------------------------
def _sequences(elems, what):
    """The flat tensors of ``elems``, their common first dimension n (a tensor), and
    TensorArrays holding each one's rows."""
    flat = [_fw.convert_to_tensor(e) for e in _nest.flatten(elems)]
    if not flat:
        raise ValueError("%s: elems is empty" % what)
    for e in flat:
        if e.shape.ndims == 0:
            raise ValueError("%s: elems '%s' is a scalar; it needs a first dimension to iterate"
                             % (what, e.name))
    n = _api.shape(flat[0])[0]
    arrays = [TensorArray(e.dtype, size=n, element_shape=e.shape.dims[1:]
                          if e.shape.ndims else None).unstack(e) for e in flat]
    return flat, n, arrays


def _outputs(structure_like, n, infer_shape):
    return [TensorArray(t.dtype, size=n, infer_shape=infer_shape)
            for t in _nest.flatten(structure_like)]


def map_fn(fn, elems, dtype=None, parallel_iterations=None, back_prop=True, swap_memory=False,
           infer_shape=True, name=None):
    """``fn`` applied to each row of ``elems`` (unstacked along the first dimension), the
    results stacked (tf.map_fn). ``dtype`` gives the results' structure of dtypes when it
    differs from ``elems``'."""
    what = "map_fn '%s'" % (name or "map")
    flat, n, arrays = _sequences(elems, what)

    def row(i):
        return _nest.pack_sequence_as(elems, [a.read(i) for a in arrays])

    if dtype is None:
        out_types = _nest.map_structure(lambda t: t.dtype, elems)
    else:
        out_types = dtype
    outs = [TensorArray(t, size=n, infer_shape=infer_shape) for t in _nest.flatten(out_types)]

    def body(i, tas):
        y = _nest.flatten(fn(row(i)))
        if len(y) != len(tas):
            raise ValueError("%s: fn returned %d tensors where dtype gives %d" %
                             (what, len(y), len(tas)))
        return i + 1, [ta.write(i, v) for ta, v in zip(tas, y)]

    _, tas = while_loop(lambda i, tas: _raw.Less(i, n), body, (_api.constant(0), outs),
                        parallel_iterations=parallel_iterations or 10, back_prop=back_prop,
                        name=name or "map")
    return _nest.pack_sequence_as(out_types, [ta.stack() for ta in tas])


def scan(fn, elems, initializer=None, parallel_iterations=10, back_prop=True,
         swap_memory=False, infer_shape=True, reverse=False, name=None):
    """The accumulator after each row: ``a = fn(a, row)`` starting from ``initializer`` (else
    from the first row, which is then the first output), stacked (tf.scan); ``reverse`` runs
    from the last row."""
    what = "scan '%s'" % (name or "scan")
    flat, n, arrays = _sequences(elems, what)

    def row(i):
        return _nest.pack_sequence_as(elems, [a.read(i) for a in arrays])

    index = (lambda k: n - 1 - k) if reverse else (lambda k: k)
    if initializer is None:
        acc = row(index(_api.constant(0)))
        start = 1
    else:
        acc = _nest.map_structure(_fw.convert_to_tensor, initializer)
        start = 0
    flat_acc = _nest.flatten(acc)
    outs = [TensorArray(t.dtype, size=n, infer_shape=infer_shape) for t in flat_acc]
    if start:
        outs = [ta.write(index(_api.constant(0)), t) for ta, t in zip(outs, flat_acc)]

    def body(k, a, tas):
        i = index(k)
        new = fn(_nest.pack_sequence_as(acc, a), row(i))
        flat_new = _nest.flatten(new)
        if len(flat_new) != len(flat_acc):
            raise ValueError("%s: fn returned %d tensors for an accumulator of %d" %
                             (what, len(flat_new), len(flat_acc)))
        return k + 1, flat_new, [ta.write(i, v) for ta, v in zip(tas, flat_new)]

    _, _, tas = while_loop(lambda k, a, tas: _raw.Less(k, n), body,
                           (_api.constant(start), flat_acc, outs),
                           parallel_iterations=parallel_iterations, back_prop=back_prop,
                           name=name or "scan")
    return _nest.pack_sequence_as(acc, [ta.stack() for ta in tas])


def _fold(fn, elems, initializer, parallel_iterations, back_prop, name, reverse):
    what = "%s '%s'" % ("foldr" if reverse else "foldl", name)
    flat, n, arrays = _sequences(elems, what)

    def row(i):
        return _nest.pack_sequence_as(elems, [a.read(i) for a in arrays])

    index = (lambda k: n - 1 - k) if reverse else (lambda k: k)
    if initializer is None:
        acc, start = row(index(_api.constant(0))), 1
    else:
        acc, start = _nest.map_structure(_fw.convert_to_tensor, initializer), 0
    flat_acc = _nest.flatten(acc)

    def body(k, a):
        new = _nest.flatten(fn(_nest.pack_sequence_as(acc, a), row(index(k))))
        if len(new) != len(flat_acc):
            raise ValueError("%s: fn returned %d tensors for an accumulator of %d" %
                             (what, len(new), len(flat_acc)))
        return k + 1, new

    _, result = while_loop(lambda k, a: _raw.Less(k, n), body, (_api.constant(start), flat_acc),
                           parallel_iterations=parallel_iterations, back_prop=back_prop,
                           name=name)
    return _nest.pack_sequence_as(acc, result)


def foldl(fn, elems, initializer=None, parallel_iterations=10, back_prop=True,
          swap_memory=False, name=None):
    """``fn(a, row)`` over the rows of ``elems`` from the first, starting from ``initializer``
    (else the first row); the final accumulator (tf.foldl)."""
    return _fold(fn, elems, initializer, parallel_iterations, back_prop, name or "foldl", False)


def foldr(fn, elems, initializer=None, parallel_iterations=10, back_prop=True,
          swap_memory=False, name=None):
    """As foldl, from the last row (tf.foldr)."""
    return _fold(fn, elems, initializer, parallel_iterations, back_prop, name or "foldr", True)

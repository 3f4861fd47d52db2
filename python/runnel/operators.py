"""Python's operators on Tensors and Variables: ``x @ w + b``, ``-x``, ``x[1:, 0]``, ..."""
from . import framework as _fw
from . import raw_ops as _raw
from .variables import Variable


def _binary(op, reverse=False):
    def f(a, b):
        return op(b, a) if reverse else op(a, b)
    return f


_BINARY = {
    "add": _raw.Add, "sub": _raw.Sub, "mul": _raw.Mul, "truediv": _raw.Div,
    "floordiv": _raw.FloorDiv, "mod": _raw.FloorMod, "pow": _raw.Pow, "matmul": _raw.MatMul,
}


def _getitem(x, index):
    """Basic indexing through StridedSlice: ints, slices, Ellipsis and None (new axis)."""
    if not isinstance(index, tuple):
        index = (index,)
    begin, end, strides = [], [], []
    masks = dict(begin_mask=0, end_mask=0, ellipsis_mask=0, new_axis_mask=0,
                 shrink_axis_mask=0)
    for i, item in enumerate(index):
        bit = 1 << i
        if item is Ellipsis:
            masks["ellipsis_mask"] |= bit
            begin.append(0), end.append(0), strides.append(1)
        elif item is None:
            masks["new_axis_mask"] |= bit
            begin.append(0), end.append(0), strides.append(1)
        elif isinstance(item, slice):
            if item.start is None:
                masks["begin_mask"] |= bit
            if item.stop is None:
                masks["end_mask"] |= bit
            begin.append(item.start or 0)
            end.append(item.stop or 0)
            strides.append(1 if item.step is None else item.step)
        elif isinstance(item, int):
            masks["shrink_axis_mask"] |= bit
            begin.append(item), end.append(item + 1 if item != -1 else 0), strides.append(1)
            if item == -1:
                masks["end_mask"] |= bit
        else:
            raise TypeError("tensors are indexed by ints, slices, ... and None; got %r" % (item,))
    return _raw.StridedSlice(x, begin, end, strides, **masks)


def _install(cls):
    for name, op in _BINARY.items():
        setattr(cls, "__%s__" % name, _binary(op))
        setattr(cls, "__r%s__" % name, _binary(op, reverse=True))
    cls.__neg__ = lambda x: _raw.Neg(x)
    cls.__abs__ = lambda x: _raw.Abs(x)
    cls.__lt__ = lambda a, b: _raw.Less(a, b)
    cls.__le__ = lambda a, b: _raw.LessEqual(a, b)
    cls.__gt__ = lambda a, b: _raw.Greater(a, b)
    cls.__ge__ = lambda a, b: _raw.GreaterEqual(a, b)
    cls.__and__ = lambda a, b: _raw.LogicalAnd(a, b)
    cls.__or__ = lambda a, b: _raw.LogicalOr(a, b)
    cls.__invert__ = lambda a: _raw.LogicalNot(a)
    cls.__getitem__ = _getitem


_install(_fw.Tensor)
_install(Variable)

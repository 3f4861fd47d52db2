"""Nested structures of tensors (TensorFlow's ``tf.nest``): lists, tuples, namedtuples and dicts
(in sorted key order) around leaves. What ``cond``, ``while_loop``, ``map_fn`` and the RNN
functions take and give."""


def is_nested(x):
    return isinstance(x, (list, tuple, dict))


def _is_namedtuple(x):
    return isinstance(x, tuple) and hasattr(x, "_fields")


def flatten(structure):
    """The leaves of ``structure`` in order (a leaf is a list of one)."""
    if isinstance(structure, dict):
        return [leaf for k in sorted(structure) for leaf in flatten(structure[k])]
    if isinstance(structure, (list, tuple)):
        return [leaf for x in structure for leaf in flatten(x)]
    return [structure]


def _pack(structure, leaves):
    if isinstance(structure, dict):
        packed = {k: _pack(structure[k], leaves) for k in sorted(structure)}
        return type(structure)((k, packed[k]) for k in structure)
    if _is_namedtuple(structure):
        return type(structure)(*[_pack(x, leaves) for x in structure])
    if isinstance(structure, (list, tuple)):
        return type(structure)(_pack(x, leaves) for x in structure)
    return next(leaves)


def pack_sequence_as(structure, flat_sequence):
    """``flat_sequence`` put back into the shape of ``structure``."""
    flat_sequence = list(flat_sequence)
    want = len(flatten(structure))
    if want != len(flat_sequence):
        raise ValueError("a structure of %d leaves cannot take %d values" %
                         (want, len(flat_sequence)))
    return _pack(structure, iter(flat_sequence))


def map_structure(fn, *structures):
    """``fn`` applied leaf by leaf, in the shape of the first structure."""
    for s in structures[1:]:
        assert_same_structure(structures[0], s)
    flats = [flatten(s) for s in structures]
    return pack_sequence_as(structures[0], [fn(*leaves) for leaves in zip(*flats)])


def _describe(x):
    if isinstance(x, dict):
        return "a dict with keys %s" % sorted(x)
    if isinstance(x, (list, tuple)):
        return "a %s of %d" % (type(x).__name__, len(x))
    return "a single value"


def assert_same_structure(a, b, what="the structures"):
    """Raises ValueError when ``a`` and ``b`` nest differently (a list and a tuple of the same
    length match, as TensorFlow's loops allow)."""
    def same(x, y):
        if isinstance(x, dict) or isinstance(y, dict):
            return isinstance(x, dict) and isinstance(y, dict) and sorted(x) == sorted(y) and \
                all(same(x[k], y[k]) for k in x)
        if isinstance(x, (list, tuple)) or isinstance(y, (list, tuple)):
            return isinstance(x, (list, tuple)) and isinstance(y, (list, tuple)) and \
                len(x) == len(y) and all(same(p, q) for p, q in zip(x, y))
        return True
    if not same(a, b):
        raise ValueError("%s differ: %s (%d leaves) against %s (%d leaves)" %
                         (what, _describe(a), len(flatten(a)), _describe(b), len(flatten(b))))

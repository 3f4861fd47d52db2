"""Variables shared by name (tf.variable_scope, tf.get_variable, tf.AUTO_REUSE): what most
TensorFlow 1.x models build their weights with.

    with tf.variable_scope("layer1"):
        w = tf.get_variable("w", [784, 256])            # "layer1/w"
    with tf.variable_scope("layer1", reuse=True):
        assert tf.get_variable("w") is w               # the same variable

A variable scope prefixes the names of the variables ``get_variable`` makes and opens a name scope
of the same name for the ops built inside. Each graph keeps the variables ``get_variable`` made,
by full name; asking for one again needs ``reuse=True`` or ``tf.AUTO_REUSE`` (an error names the
variable otherwise), and asking with ``reuse=True`` for one never made is an error too.
"""
import contextlib

from . import framework as _fw
from . import dtypes as _dtypes
from . import initializers as _init


class _AutoReuse:
    def __repr__(self):
        return "AUTO_REUSE"


AUTO_REUSE = _AutoReuse()


class VariableScope:
    """A variable scope: its ``name``, ``reuse`` mode, default ``initializer`` and ``dtype``."""

    def __init__(self, name="", reuse=None, initializer=None, dtype=None):
        self.name, self._reuse, self.initializer, self.dtype = name, reuse, initializer, dtype
        self.original_name_scope = name + "/" if name else ""

    @property
    def reuse(self):
        return self._reuse

    def reuse_variables(self):
        """From now on, ``get_variable`` in this scope returns existing variables."""
        self._reuse = True

    def set_initializer(self, initializer):
        self.initializer = initializer

    def set_dtype(self, dtype):
        self.dtype = dtype

    def __repr__(self):
        return "<runnel.VariableScope '%s' reuse=%r>" % (self.name, self._reuse)


def _refuse(function, **args):
    """NotImplementedError naming the first argument given that is not supported."""
    for arg, value in args.items():
        if value is not None:
            raise NotImplementedError("%s(%s=...) is not supported" % (function, arg))


def _state(graph):
    """The graph's variable scopes (a stack, the root first), the variables get_variable made,
    and how often each default name was used."""
    if not hasattr(graph, "_var_scopes"):
        graph._var_scopes = [VariableScope()]
        graph._var_store = {}
        graph._default_names = {}
    return graph


def get_variable_scope():
    """The innermost variable scope of the default graph."""
    return _state(_fw.get_default_graph())._var_scopes[-1]


@contextlib.contextmanager
def variable_scope(name_or_scope, default_name=None, values=None, initializer=None,
                   regularizer=None, caching_device=None, partitioner=None, custom_getter=None,
                   reuse=None, dtype=None, use_resource=None, constraint=None,
                   auxiliary_name_scope=True):
    """A variable scope (and a name scope of the same name for ops). ``name_or_scope`` is a name
    (nested under the current scope), a VariableScope (entered again, at its own full name), or
    None with ``default_name`` (made unique: "dense", "dense_1", ...). ``reuse``: True, False
    or None (inherit; True is inherited and cannot be undone inside), or ``tf.AUTO_REUSE``."""
    _refuse("variable_scope", regularizer=regularizer, partitioner=partitioner,
            custom_getter=custom_getter, constraint=constraint)
    g = _state(_fw.graph_of(values or []))
    parent = g._var_scopes[-1]
    if isinstance(name_or_scope, VariableScope):
        name = name_or_scope.name
        inherited = name_or_scope.reuse
        initializer = initializer or name_or_scope.initializer
        dtype = dtype or name_or_scope.dtype
    else:
        if name_or_scope is None:
            if default_name is None:
                raise TypeError("variable_scope: give a name_or_scope or a default_name")
            key = (parent.name, default_name)
            used = g._default_names.get(key, 0)
            g._default_names[key] = used + 1
            name_or_scope = default_name if used == 0 else "%s_%d" % (default_name, used)
        name = parent.name + "/" + name_or_scope if parent.name else name_or_scope
        inherited = parent.reuse
    if parent.reuse is True or reuse is True:
        mode = True
    elif reuse is AUTO_REUSE or (reuse is None and inherited is AUTO_REUSE):
        mode = AUTO_REUSE
    else:
        mode = reuse if reuse is not None else inherited
    scope = VariableScope(name, mode, initializer or parent.initializer, dtype or parent.dtype)
    g._var_scopes.append(scope)
    try:
        if auxiliary_name_scope and name:
            with g._g.name_scope(""), g._g.name_scope(name):
                yield scope
        else:
            yield scope
    finally:
        g._var_scopes.pop()


def _default_initializer(dtype):
    if dtype.is_floating:
        return _init.glorot_uniform_initializer()
    if dtype.is_integer or dtype == _dtypes.bool:
        return _init.zeros_initializer()
    raise ValueError("get_variable: a variable of dtype %s needs an initializer" % dtype.name)


def get_variable(name, shape=None, dtype=None, initializer=None, regularizer=None,
                 trainable=None, collections=None, caching_device=None, partitioner=None,
                 validate_shape=True, use_resource=None, custom_getter=None, constraint=None,
                 synchronization=None, aggregation=None):
    """The variable ``scope/name``: made (its initial value from ``initializer``, the scope's,
    or Glorot-uniform for floats and zeros for integers) or, where the scope reuses, the one
    made before, its shape and dtype checked."""
    _refuse("get_variable", regularizer=regularizer, partitioner=partitioner,
            custom_getter=custom_getter, constraint=constraint)
    from .variables import Variable
    g = _state(_fw.get_default_graph())
    scope = g._var_scopes[-1]
    full = scope.name + "/" + name if scope.name else name
    existing = g._var_store.get(full)
    if existing is not None:
        if scope.reuse is not True and scope.reuse is not AUTO_REUSE:
            raise ValueError("Variable %s already exists, disallowed. Did you mean to set "
                             "reuse=True or reuse=tf.AUTO_REUSE in VarScope?" % full)
        found = existing.shape.dims
        if shape is not None and validate_shape and list(shape) != found:
            raise ValueError("Trying to share variable %s, but specified shape %s and found "
                             "shape %s." % (full, list(shape), found))
        if dtype is not None and _dtypes.as_dtype(dtype) != existing.dtype:
            raise ValueError("Trying to share variable %s, but specified dtype %s and found "
                             "dtype %s." % (full, _dtypes.as_dtype(dtype).name,
                                            existing.dtype.name))
        return existing
    if scope.reuse is True:
        raise ValueError("Variable %s does not exist, or was not created with "
                         "tf.get_variable(). Did you mean to set reuse=tf.AUTO_REUSE in "
                         "VarScope?" % full)
    try:
        g.get_operation_by_name(full)
        raise ValueError("get_variable: a node named '%s' already exists (not made by "
                         "get_variable); give the variable another name" % full)
    except KeyError:
        pass
    dtype = _dtypes.as_dtype(dtype or scope.dtype or _dtypes.float32)
    initializer = initializer if initializer is not None else scope.initializer
    with g._g.outside_control_flow(), g._g.name_scope(""), g._g.name_scope(full):
        if initializer is None or callable(initializer):
            if shape is None or any(d is None for d in shape):
                raise ValueError("Shape of a new variable (%s) must be fully defined, but "
                                 "instead was %s." % (full, shape))
            init = (initializer or _default_initializer(dtype))
            value = init([int(d) for d in shape], dtype=dtype)
        else:
            value = _fw.convert_to_tensor(initializer, dtype=dtype, name="Initializer")
            if shape is not None and validate_shape and value.shape.dims != list(shape):
                raise ValueError("get_variable %s: the initializer's shape %s is not the "
                                 "shape asked for, %s" % (full, value.shape, list(shape)))
    with g._g.outside_control_flow(), g._g.name_scope(""):
        v = Variable(value, trainable=True if trainable is None else bool(trainable), name=full,
                     dtype=dtype)
    g._var_store[full] = v
    return v

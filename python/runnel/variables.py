"""Variables (tf.Variable) and the collections that list them."""
from . import _runnel
from . import dtypes as _dtypes
from . import framework as _fw


class Variable:
    """State that outlives steps: ``initial_value`` (a tensor, a value, or a callable giving
    one; its shape must be fully defined) is assigned by ``initializer``. Used in ops, a
    Variable stands for its current value."""

    def __init__(self, initial_value=None, trainable=True, name=None, dtype=None, _v=None,
                 _graph=None):
        if _v is not None:
            self._v, self.graph = _v, _graph
            return
        if initial_value is None:
            raise ValueError("a Variable needs an initial_value")
        if callable(initial_value):
            # Made outside any loop or cond being built, as TensorFlow's init_scope does.
            with _fw.get_default_graph()._g.outside_control_flow():
                initial_value = initial_value()
        init = _fw.convert_to_tensor(initial_value, dtype=dtype)
        self.graph = init.graph
        with self.graph._g.outside_control_flow():
            self._v = _runnel._variable(init._t, name or "Variable", bool(trainable))

    # -- what it stands for ----------------------------------------------------------------
    def _as_graph_element(self):
        return _fw.Tensor(self.graph, self._v.value)

    def value(self):
        """The variable's current value (an Identity reading it)."""
        return self._as_graph_element()

    read_value = value

    def _ref(self):
        return _fw.Tensor(self.graph, self._v.ref)

    @property
    def name(self):
        return self._v.name + ":0"

    @property
    def op(self):
        return _fw.Operation(self.graph, self.graph._g.operation(self._v.name))

    @property
    def initializer(self):
        return _fw.Operation(self.graph, self._v.initializer)

    @property
    def dtype(self):
        return self.value().dtype

    @property
    def shape(self):
        return self.value().shape

    def get_shape(self):
        return self.shape

    # -- updates -----------------------------------------------------------------------------
    def _assign(self, kind, value, name):
        value = _fw.convert_to_tensor(value, dtype=self.dtype, graph=self.graph)
        return _fw.Tensor(self.graph, _runnel._assign(self._v, value._t, kind, name or ""))

    def assign(self, value, use_locking=None, name=None, read_value=True):
        return self._assign("assign", value, name)

    def assign_add(self, delta, use_locking=None, name=None, read_value=True):
        return self._assign("add", delta, name)

    def assign_sub(self, delta, use_locking=None, name=None, read_value=True):
        return self._assign("sub", delta, name)

    def eval(self, session=None):
        return self.value().eval(session=session)

    def load(self, value, session=None):
        """Assigns ``value`` now, in ``session`` (default: the default session)."""
        from .session import _session_for
        _session_for(session).run(self.assign(value))

    def __repr__(self):
        return "<runnel.Variable '%s' shape=%s dtype=%s>" % (self.name, self.shape,
                                                            self.dtype.name)


def _listed(collection, graph=None):
    g = graph or _fw.get_default_graph()
    return [Variable(_v=v, _graph=g) for v in _runnel._variables(g._g, collection)]


def global_variables(scope=None):
    return [v for v in _listed("variables") if not scope or v.name.startswith(scope)]


all_variables = global_variables


def trainable_variables(scope=None):
    return [v for v in _listed("trainable_variables") if not scope or v.name.startswith(scope)]


def local_variables(scope=None):
    return [v for v in _listed("local_variables") if not scope or v.name.startswith(scope)]


def global_variables_initializer():
    """An operation running every global variable's initializer."""
    g = _fw.get_default_graph()
    return _fw.Operation(g, _runnel._global_variables_initializer(g._g))


def variables_initializer(var_list, name="init"):
    from .api import group
    return group(*[v.initializer for v in var_list], name=name)


initialize_all_variables = global_variables_initializer

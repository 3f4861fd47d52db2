"""Training (tf.train): optimizers, the global step, and saving and restoring variables."""
from . import _runnel
from . import dtypes as _dtypes
from . import framework as _fw
from . import variables as _vars


def _var_list(var_list):
    return [v._v for v in (var_list or [])]


def _rate(lr):
    if isinstance(lr, (_fw.Tensor, _vars.Variable)):
        return _fw.convert_to_tensor(lr)._t
    return float(lr)


class Optimizer:
    """The optimizers' shared API: ``minimize(loss)`` is compute_gradients then
    apply_gradients; the update of each variable runs at the variable."""

    def __init__(self, impl, name):
        self._o = impl
        self._name = name

    def get_name(self):
        return self._name

    def minimize(self, loss, global_step=None, var_list=None, name=None, **unused):
        loss = _fw.convert_to_tensor(loss)
        op = self._o.minimize(loss._t, _var_list(var_list),
                              None if global_step is None else global_step._v, name or "")
        return _fw.Operation(loss.graph, op)

    def compute_gradients(self, loss, var_list=None, **unused):
        """(gradient, variable) pairs; variables the loss does not depend on are left out."""
        loss = _fw.convert_to_tensor(loss)
        by_name = {v._v.name: v for v in _vars._listed("variables", loss.graph)}
        return [(_fw._gradient_out(loss.graph, grad), by_name[ref.op_name])
                for grad, ref in self._o.compute_gradients(loss._t, _var_list(var_list))]

    def apply_gradients(self, grads_and_vars, global_step=None, name=None):
        pairs = [(_fw._gradient_in(g), v._ref()._t) for g, v in grads_and_vars if g is not None]
        graph = grads_and_vars[0][1].graph
        op = self._o.apply_gradients(pairs, None if global_step is None else global_step._v,
                                     name or "")
        return _fw.Operation(graph, op)


class GradientDescentOptimizer(Optimizer):
    def __init__(self, learning_rate, use_locking=False, name="GradientDescent"):
        super().__init__(_runnel._gradient_descent(_rate(learning_rate)), name)


class MomentumOptimizer(Optimizer):
    def __init__(self, learning_rate, momentum, use_locking=False, name="Momentum",
                 use_nesterov=False):
        super().__init__(_runnel._momentum(_rate(learning_rate), float(momentum),
                                           bool(use_nesterov)), name)


class AdagradOptimizer(Optimizer):
    def __init__(self, learning_rate, initial_accumulator_value=0.1, use_locking=False,
                 name="Adagrad"):
        super().__init__(_runnel._adagrad(_rate(learning_rate),
                                          float(initial_accumulator_value)), name)


class RMSPropOptimizer(Optimizer):
    def __init__(self, learning_rate, decay=0.9, momentum=0.0, epsilon=1e-10,
                 use_locking=False, centered=False, name="RMSProp"):
        if centered:
            raise NotImplementedError("RMSPropOptimizer(centered=True) is not supported")
        super().__init__(_runnel._rmsprop(_rate(learning_rate), float(decay), float(momentum),
                                          float(epsilon)), name)


class AdamOptimizer(Optimizer):
    def __init__(self, learning_rate=0.001, beta1=0.9, beta2=0.999, epsilon=1e-8,
                 use_locking=False, name="Adam"):
        super().__init__(_runnel._adam(_rate(learning_rate), float(beta1), float(beta2),
                                       float(epsilon)), name)


def get_global_step(graph=None):
    g = graph or _fw.get_default_graph()
    for v in _vars._listed("variables", g):
        if v._v.name == "global_step":
            return v
    return None


def create_global_step(graph=None):
    g = graph or _fw.get_default_graph()
    if get_global_step(g) is not None:
        raise ValueError("the graph already has a global_step")
    with g.as_default():
        return _vars.Variable(_fw.convert_to_tensor(0, dtype=_dtypes.int64), trainable=False,
                              name="global_step")


def get_or_create_global_step(graph=None):
    return get_global_step(graph) or create_global_step(graph)


def global_step(sess, global_step_tensor):
    return int(sess.run(global_step_tensor))


class Saver:
    """Saves and restores variables (default: all global ones) as HDF5 files (``prefix.h5``)
    or, with ``format="tensorflow"``, TensorFlow's checkpoint format; restore reads either."""

    def __init__(self, var_list=None, max_to_keep=5, format="hdf5", **unused):
        g = _fw.get_default_graph()
        if isinstance(var_list, dict):
            var_list = list(var_list.values())
        self._graph = g
        self._s = _runnel._Saver(g._g, _var_list(var_list), int(max_to_keep or 0), format)
        self._name_map = {}  # variable -> checkpoint key, for an imported MetaGraph's saver
        self._refuse = None  # why restore cannot work (set by import_meta_graph)

    def save(self, sess, save_path, global_step=None, latest_filename=None,
             meta_graph_suffix="meta", write_meta_graph=True, **unused):
        """Writes the checkpoint and, as TensorFlow does, the graph beside it as
        ``<checkpoint>.meta`` (for ``import_meta_graph``); returns the checkpoint's path."""
        if isinstance(global_step, (_fw.Tensor, _vars.Variable)):
            global_step = int(sess.run(global_step))
        path = self._s.save(sess._s, str(save_path),
                            None if global_step is None else int(global_step))
        if write_meta_graph:
            stem = path[:-3] if path.endswith(".h5") else path
            export_meta_graph(stem + "." + meta_graph_suffix, graph=self._graph)
        return path

    def restore(self, sess, save_path):
        if self._refuse:
            raise NotImplementedError("Saver.restore: " + self._refuse)
        if save_path is None:
            raise ValueError("Saver.restore: save_path is None (no checkpoint found?)")
        self._s.restore(sess._s, str(save_path), self._name_map)


def latest_checkpoint(checkpoint_dir, latest_filename=None):
    """The newest complete checkpoint in the directory, or None."""
    return _runnel._latest_checkpoint(str(checkpoint_dir))


from .meta_graph import import_meta_graph, export_meta_graph  # noqa: E402,F401

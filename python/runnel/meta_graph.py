"""TensorFlow 1.x MetaGraphs and SavedModels in a graph of your own: ``tf.train.import_meta_graph``
(the resume pattern: the ``.meta`` file ``Saver.save`` writes beside each checkpoint),
``tf.train.export_meta_graph``, and ``tf.saved_model.loader.load(sess, tags, dir)``.

    tf.reset_default_graph()
    saver = tf.train.import_meta_graph("train/model.ckpt-1000.meta")
    with tf.Session() as s:
        saver.restore(s, "train/model.ckpt-1000")
        loss = tf.get_default_graph().get_tensor_by_name("loss:0")

The nodes are copied into the graph (under ``import_scope/`` when given; a loop's frame names
too). The nodes of the file's own savers are left out: the Saver returned restores the variables
by the checkpoint keys that saver used (docs/interop.md has the importer's rules).
"""
import os as _os

from . import _runnel
from . import framework as _fw


def _saver_for(graph, info, import_scope):
    """A Saver over the imported variables, restoring each from the key the file's saver used
    (its own name without the import scope when the file has no saver)."""
    from .train import Saver
    from .variables import Variable
    names = info["variables"]
    keys = dict(info["checkpoint_keys"])
    if keys:
        names = [n for n in names if n in keys]
    if not names:
        return None
    prefix = import_scope + "/" if import_scope else ""
    for n in names:
        keys.setdefault(n, n[len(prefix):] if prefix and n.startswith(prefix) else n)
    wanted = set(names)
    var_list = [Variable(_v=v, _graph=graph) for v in _runnel._variables(graph._g, "variables")
                if v.name in wanted]
    with graph.as_default():
        saver = Saver(var_list=var_list)
    saver._name_map = keys
    if info["sliced_variables"]:
        saver._refuse = ("the checkpoint holds partitioned variables restored part by part, "
                         "which this Saver does not do: %s" % ", ".join(info["sliced_variables"]))
    return saver


def import_meta_graph(meta_graph_or_file, clear_devices=False, import_scope=None, **unused):
    """Copies a MetaGraph (a ``.meta`` path, or its bytes) into the default graph; returns a
    Saver for its variables (None when it has none)."""
    g = _fw.get_default_graph()
    if isinstance(meta_graph_or_file, (bytes, bytearray)):
        info = _runnel._import_meta_graph(g._g, "", bytes(meta_graph_or_file), import_scope or "",
                                          bool(clear_devices))
    else:
        info = _runnel._import_meta_graph(g._g, _os.fspath(meta_graph_or_file), None,
                                          import_scope or "", bool(clear_devices))
    return _saver_for(g, info, import_scope)


def export_meta_graph(filename=None, graph=None, tags=None, **unused):
    """Writes ``graph`` (default: the default graph) with its variables as a ``.meta`` file
    TensorFlow's ``import_meta_graph`` reads."""
    if filename is None:
        raise ValueError("export_meta_graph: give a filename (the MetaGraphDef proto is not "
                         "returned as an object)")
    g = graph or _fw.get_default_graph()
    names = [v.name for v in _runnel._variables(g._g, "variables")]
    _runnel._export_meta_graph(g._g, _os.fspath(filename), names, list(tags or []))


class TensorInfo:
    """A signature's tensor: ``name`` ("x:0"), ``dtype`` (a name) and ``tensor_shape`` (a list
    with None for unknown dimensions, None for an unknown rank)."""

    def __init__(self, name, dtype, shape):
        self.name, self.dtype, self.tensor_shape = name, dtype, shape

    def __repr__(self):
        return "TensorInfo(%r, %s, %s)" % (self.name, self.dtype, self.tensor_shape)


class SignatureDef:
    def __init__(self, d):
        self.method_name = d["method"]
        self.inputs = {k: TensorInfo(*v) for k, v in d["inputs"].items()}
        self.outputs = {k: TensorInfo(*v) for k, v in d["outputs"].items()}


class MetaGraphDef:
    """What ``loader.load`` returns: ``signature_def`` (key -> SignatureDef) and
    ``meta_info_def.tags``."""

    class _Info:
        def __init__(self, tags, version):
            self.tags, self.tensorflow_version = tags, version

    def __init__(self, info):
        self.signature_def = {k: SignatureDef(v) for k, v in info["signatures"].items()}
        self.meta_info_def = MetaGraphDef._Info(list(info["tags"]), info["tensorflow_version"])


def load_saved_model(sess, tags, export_dir, import_scope=None, clear_devices=False, **unused):
    """tf.saved_model.loader.load: the SavedModel's MetaGraph tagged ``tags`` copied into
    ``sess``'s graph, its variables restored and its main op run there."""
    g = sess.graph
    info = _runnel._import_saved_model(g._g, _os.fspath(export_dir), list(tags),
                                       import_scope or "", bool(clear_devices))
    saver = _saver_for(g, info, import_scope) if info["variables_prefix"] else None
    if saver is not None:
        saver.restore(sess, info["variables_prefix"])
    if info["init_op"]:
        sess.run(g.get_operation_by_name(info["init_op"]))
    return MetaGraphDef(info)

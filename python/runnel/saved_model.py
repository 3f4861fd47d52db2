"""TensorFlow 1.x SavedModels: export a session's graph as one, load one and run its signatures.

    import runnel as tf
    tf.saved_model.simple_save(sess, "export/1", inputs={"x": x}, outputs={"y": y})
    m = tf.saved_model.load("export/1")                # tags=["serve"]
    m.signatures["serving_default"]["inputs"]          # {"x": ("x:0", "float32", [None, 784])}
    m.run({"x": images})["y"]                          # NumPy arrays by the signature's keys

Loading restores the variables through the MetaGraph's own saver and runs its main op, as
TensorFlow's loader does; the model runs in a session of its own. Directories written by
TensorFlow 1.x (or by simple_save here) load alike, and simple_save's output loads in
TensorFlow 1.x.
"""
import os as _os

from . import _runnel

SERVING = "serve"
TRAINING = "train"
PREDICT_METHOD_NAME = "tensorflow/serving/predict"
DEFAULT_SERVING_SIGNATURE_DEF_KEY = "serving_default"


class tag_constants:  # noqa: N801 (TensorFlow's name)
    SERVING = SERVING
    TRAINING = TRAINING


class signature_constants:  # noqa: N801
    PREDICT_METHOD_NAME = PREDICT_METHOD_NAME
    DEFAULT_SERVING_SIGNATURE_DEF_KEY = DEFAULT_SERVING_SIGNATURE_DEF_KEY


class LoadedModel:
    """A SavedModel loaded and initialised: its signatures, run by key."""

    def __init__(self, m, export_dir):
        self._m = m
        self.export_dir = export_dir

    @property
    def signatures(self):
        """{key: {"method": ..., "inputs": {key: (tensor name, dtype, shape)}, "outputs": ...}}"""
        return self._m.signatures

    @property
    def tags(self):
        return list(self._m.tags)

    def run(self, inputs, signature=DEFAULT_SERVING_SIGNATURE_DEF_KEY, outputs=None):
        """Runs `signature` on `inputs` (a dict by its input keys; NumPy arrays or anything
        np.asarray takes) and returns its outputs (all, or those named) as NumPy arrays by key.
        An unknown key, or an input of a dtype or shape the signature does not allow, raises an
        error listing what the signature has."""
        return self._m.run(signature, dict(inputs), list(outputs or []))

    def __repr__(self):
        return "<runnel.saved_model.LoadedModel %s tags=%s signatures=%s>" % (
            self.export_dir, self.tags, sorted(self.signatures))


def load(export_dir, tags=(SERVING,)):
    """Loads the MetaGraph of `export_dir` tagged `tags` (in any order): restores its variables
    and runs its main op. No MetaGraph with those tags is a NotFoundError listing the tag sets
    there are."""
    if isinstance(tags, str):
        tags = [tags]
    return LoadedModel(_runnel._load_saved_model(_os.fspath(export_dir), list(tags)),
                       _os.fspath(export_dir))


def simple_save(session, export_dir, inputs, outputs, legacy_init_op=None):
    """TensorFlow 1.x's simple_save: writes the session's graph with its variables' current
    values to `export_dir` (which must not exist yet), tagged "serve", with one
    "serving_default" predict signature of `inputs` and `outputs` (dicts of key -> Tensor)."""
    if legacy_init_op is not None:
        raise NotImplementedError("simple_save: legacy_init_op is not supported")
    sigs = {DEFAULT_SERVING_SIGNATURE_DEF_KEY:
            (PREDICT_METHOD_NAME, {k: t._t for k, t in inputs.items()},
             {k: t._t for k, t in outputs.items()})}
    _runnel._save_saved_model(session._s, _os.fspath(export_dir), sigs, [SERVING])


class loader:  # noqa: N801 (TensorFlow's module name)
    """tf.saved_model.loader: ``load(sess, tags, export_dir)`` copies the SavedModel into the
    session's graph, restores its variables and runs its main op (python/runnel/meta_graph.py);
    ``runnel.saved_model.load`` serves one in a session of its own instead."""

    @staticmethod
    def load(sess, tags, export_dir, import_scope=None, **saver_kwargs):
        from .meta_graph import load_saved_model
        return load_saved_model(sess, tags, export_dir, import_scope, **saver_kwargs)

    @staticmethod
    def maybe_saved_model_directory(export_dir):
        return _os.path.isfile(_os.path.join(export_dir, "saved_model.pb")) or \
            _os.path.isfile(_os.path.join(export_dir, "saved_model.pbtxt"))

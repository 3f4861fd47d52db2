"""Keras ``.h5`` models from Python (``tf.keras.models.load_model``), for inference: the file's
layers become a Runnel graph with the weights as constants (storage/keras/keras_import.hpp has the
layers it knows; docs/keras.md). An unknown layer is an error naming it and its class.

    model = tf.keras.models.load_model("model.h5")
    probabilities = model.predict(images)      # NumPy in and out
"""
import os as _os

import numpy as _np

from . import _runnel
from . import framework as _fw


class Model:
    """A loaded Keras model: ``predict``, its ``inputs``/``outputs`` (tensors of ``graph``),
    ``input_names``/``output_names``, ``name``, ``keras_version``."""

    def __init__(self, info, path):
        self.graph = _fw.Graph(info["graph"])
        self.name = info["name"]
        self.class_name = info["class_name"]
        self.keras_version = info["keras_version"]
        self.input_names = list(info["inputs"])
        self.output_names = list(info["outputs"])
        self.inputs = [self.graph.get_tensor_by_name(n + ":0") for n in self.input_names]
        self.outputs = [self.graph.get_tensor_by_name(n if ":" in n else n + ":0")
                        for n in self.output_names]
        self.layers_count = info["layers"]
        self._path = path
        self._session = None

    def _session_for_predict(self):
        if self._session is None:
            from .session import Session
            self._session = Session(graph=self.graph)
        return self._session

    def predict(self, x, batch_size=None, verbose=0, steps=None):
        """The model's outputs for ``x`` (an array, or a list of arrays for several inputs), in
        batches of ``batch_size`` (default: all at once)."""
        xs = list(x) if isinstance(x, (list, tuple)) else [x]
        if len(xs) != len(self.inputs):
            raise ValueError("model '%s' takes %d inputs (%s), got %d" % (
                self.name, len(self.inputs), ", ".join(self.input_names), len(xs)))
        xs = [_np.asarray(a) for a in xs]
        n = xs[0].shape[0] if xs[0].ndim else 1
        size = int(batch_size or n) or 1
        s = self._session_for_predict()
        parts = []
        for start in range(0, max(n, 1), size):
            feeds = {t: a[start:start + size] for t, a in zip(self.inputs, xs)}
            parts.append(s.run(self.outputs, feeds))
        outs = [_np.concatenate([p[i] for p in parts]) if len(parts) > 1 else parts[0][i]
                for i in range(len(self.outputs))]
        return outs[0] if len(outs) == 1 else outs

    def __repr__(self):
        return "<runnel.keras.Model '%s' (%s, Keras %s) inputs=%s outputs=%s>" % (
            self.name, self.class_name, self.keras_version or "?", self.input_names,
            self.output_names)


class models:  # noqa: N801 (tf.keras.models)
    @staticmethod
    def load_model(filepath, custom_objects=None, compile=True):
        """A Keras ``.h5`` file as a Model for inference (``compile`` has no effect: there is
        no training configuration to restore)."""
        if custom_objects:
            raise NotImplementedError("load_model(custom_objects=...): custom layers are not "
                                      "built in")
        path = _os.fspath(filepath)
        return Model(_runnel._import_keras(path), path)

"""Keras .h5 files from Python (tf.keras.models.load_model): the files tests/keras/
make_keras_models.py writes as Keras 2 and 3 lay them out, predicted against NumPy."""
import os
import subprocess
import sys

import numpy as np
import pytest

import runnel as tf

ROOT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..")


@pytest.fixture(scope="module")
def models(tmp_path_factory):
    d = tmp_path_factory.mktemp("keras")
    subprocess.run([sys.executable, os.path.join(ROOT, "tests", "keras", "make_keras_models.py"),
                    str(d)], check=True)
    return d


@pytest.mark.parametrize("name,version", [("mlp_k2", "2.11.0"), ("cnn_k3", "3.3.3"),
                                          ("rnn_k2", "2.11.0"), ("gru_k3", "3.3.3")])
def test_load_model_predicts_what_numpy_computes(models, name, version):
    model = tf.keras.models.load_model(models / (name + ".h5"))
    x, want = np.load(models / (name + "_in.npy")), np.load(models / (name + "_out.npy"))
    assert model.keras_version == version and len(model.inputs) == 1
    np.testing.assert_allclose(model.predict(x), want, rtol=1e-4, atol=1e-5)
    if x.shape[0] > 1:  # in batches, the same
        np.testing.assert_allclose(model.predict(x, batch_size=1), want, rtol=1e-4, atol=1e-5)
    assert name.split("_")[0] in repr(model) or model.name in repr(model)


def test_load_model_errors_name_the_layers_and_inputs(models):
    with pytest.raises(tf.errors.OpError, match="Lambda"):
        tf.keras.models.load_model(models / "unsupported.h5")
    model = tf.keras.models.load_model(models / "mlp_k2.h5")
    with pytest.raises(ValueError, match="takes 1 inputs"):
        model.predict([np.zeros((1, 4)), np.zeros((1, 4))])
    with pytest.raises(tf.errors.OpError):
        tf.keras.models.load_model(models / "missing.h5")

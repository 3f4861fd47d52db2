"""TensorFlow 1.x MetaGraphs and SavedModels imported into the caller's graph from Python:
tf.train.import_meta_graph (a training directory laid out as TensorFlow 1.15 leaves it, and the
.meta Runnel's Saver writes), import_scope, and tf.saved_model.loader.load with a SaverDef's
renamed keys and a legacy init op (tests/tf/make_tf_*.py write the TensorFlow files)."""
import os
import subprocess
import sys

import numpy as np
import pytest

import runnel as tf

ROOT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..")


def tensorflow_files(tmp_path, script):
    subprocess.run([sys.executable, os.path.join(ROOT, "tests", "tf", script), str(tmp_path),
                    os.path.join(ROOT, "storage", "tf")], check=True)
    return tmp_path


def test_import_meta_graph_resumes_a_tensorflow_training_directory(tmp_path):
    d = tensorflow_files(tmp_path, "make_tf_meta_graph.py")
    x_value = np.load(d / "x.npy")
    saver = tf.train.import_meta_graph(str(d / "model.ckpt-5.meta"))
    g = tf.get_default_graph()
    x, y = g.get_tensor_by_name("x:0"), g.get_tensor_by_name("y:0")
    assert sorted(v.name for v in tf.global_variables()) == ["b:0", "w:0"]
    with pytest.raises(KeyError):
        g.get_operation_by_name("save/RestoreV2")  # the file's saver is left out
    with tf.Session() as s:
        saver.restore(s, tf.train.latest_checkpoint(str(d)))
        np.testing.assert_allclose(s.run(y, {x: x_value}), np.load(d / "expected_y.npy"),
                                   rtol=1e-6)
    # The same file again under an import scope, beside the first: its variables restore from
    # the checkpoint's keys, which have no scope.
    scoped = tf.train.import_meta_graph(str(d / "model.ckpt-5.meta"), import_scope="copy")
    xc, yc = g.get_tensor_by_name("copy/x:0"), g.get_tensor_by_name("copy/y:0")
    with tf.Session() as s:
        scoped.restore(s, str(d / "model.ckpt-5"))
        np.testing.assert_allclose(s.run(yc, {xc: x_value}), np.load(d / "expected_y.npy"),
                                   rtol=1e-6)


def test_saver_writes_a_meta_graph_that_import_meta_graph_resumes(tmp_path):
    x = tf.placeholder(tf.float32, [None, 2], name="x")
    w = tf.Variable([[1.0], [2.0]], name="w")
    tf.identity(tf.matmul(x, w), name="y")
    step = w.assign_add([[1.0], [1.0]], name="step")
    with tf.Session() as s:
        s.run(tf.global_variables_initializer())
        s.run(step)
        path = tf.train.Saver().save(s, str(tmp_path / "model"), global_step=1)
    meta = path[:-3] + ".meta" if path.endswith(".h5") else path + ".meta"
    assert os.path.exists(meta)
    tf.reset_default_graph()
    saver = tf.train.import_meta_graph(meta)
    g = tf.get_default_graph()
    with tf.Session() as s:
        saver.restore(s, path)
        got = s.run("y:0", {"x:0": np.ones((1, 2), np.float32)})
        s.run("step")  # the training op came back too
        assert s.run("w:0").tolist() == [[3.0], [4.0]]
    assert got.tolist() == [[5.0]] and g.get_operation_by_name("step").type == "AssignAdd"
    with pytest.raises(tf.errors.OpError):
        tf.train.import_meta_graph(str(tmp_path / "missing.meta"))


def test_loader_load_restores_through_the_savers_keys_and_runs_the_init_op(tmp_path):
    d = tensorflow_files(tmp_path, "make_tf_saved_model.py")
    with tf.Session(graph=tf.Graph()) as s:
        meta = tf.saved_model.loader.load(s, ["serve"], str(d / "model"))
        sig = meta.signature_def["serving_default"]
        assert meta.meta_info_def.tags == ["serve"]
        x, y = sig.inputs["x"].name, sig.outputs["y"].name
        got = s.run(y, {x: np.load(d / "x.npy")})
    np.testing.assert_allclose(got, np.load(d / "expected_y.npy"), rtol=1e-5)
    with tf.Session(graph=tf.Graph()) as s:
        with pytest.raises(tf.errors.NotFoundError, match="serve"):
            tf.saved_model.loader.load(s, ["nope"], str(d / "model"))


def test_loader_load_of_a_simple_save_export(tmp_path):
    x = tf.placeholder(tf.float32, [None, 1], name="x")
    v = tf.Variable([[3.0]], name="v")
    y = tf.identity(x @ v, name="y")
    with tf.Session() as s:
        s.run(tf.global_variables_initializer())
        s.run(v.assign([[4.0]]))
        tf.saved_model.simple_save(s, str(tmp_path / "e"), inputs={"x": x}, outputs={"y": y})
    with tf.Session(graph=tf.Graph()) as s:
        meta = tf.saved_model.loader.load(s, [tf.saved_model.tag_constants.SERVING],
                                          str(tmp_path / "e"), import_scope="served")
        name = meta.signature_def["serving_default"].outputs["y"].name
        assert name == "served/y:0"
        assert s.run(name, {"served/x:0": [[2.0]]}).tolist() == [[8.0]]

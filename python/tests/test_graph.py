"""Building graphs from Python: names, scopes, dtypes, shapes, generated ops, operators."""
import numpy as np
import pytest

import runnel as tf


def test_placeholder_constant_and_names():
    x = tf.placeholder(tf.float32, [None, 3], name="x")
    c = tf.constant([[1.0], [2.0], [3.0]], name="c")
    y = tf.matmul(x, c)
    assert x.name == "x:0" and x.dtype == tf.float32
    assert x.shape.as_list() == [None, 3] and c.shape.as_list() == [3, 1]
    assert y.shape.as_list() == [None, 1]
    assert y.op.type == "MatMul" and y.op.name == "MatMul"
    assert tf.matmul(x, c).op.name == "MatMul_1"  # unique names, as TensorFlow makes them
    assert [t.name for t in y.op.inputs] == ["x:0", "c:0"]
    assert "MatMul" in tf.get_default_graph().as_text()


def test_python_values_follow_tensorflow_dtypes():
    assert tf.constant(1.5).dtype == tf.float32
    assert tf.constant(3).dtype == tf.int32
    assert tf.constant(np.arange(3)).dtype == tf.int64  # NumPy arrays keep their dtype
    assert tf.constant([b"a", b"bc"]).dtype == tf.string
    assert tf.constant(0, dtype=tf.float64, shape=[2, 2]).shape.as_list() == [2, 2]


def test_scopes_devices_and_control_dependencies():
    a = tf.constant(1.0, name="a")
    with tf.name_scope("layer"):
        b = tf.add(a, a, name="sum")
        with tf.name_scope("inner"):
            c = tf.identity(b)
    assert b.op.name == "layer/sum" and c.op.name == "layer/inner/Identity"
    with tf.device("/device:cpu:0"):
        d = tf.identity(a)
    assert d.op.device == "/device:cpu:0"
    with tf.control_dependencies([c.op]):
        e = tf.identity(a)
    assert e.op.type == "Identity"


def test_graphs_are_separate_and_default_stacks():
    g = tf.Graph()
    with g.as_default():
        x = tf.constant(1.0)
        assert tf.get_default_graph() is g
    assert x.graph is g and tf.get_default_graph() is not g
    y = tf.constant(2.0)
    with pytest.raises(ValueError, match="another graph"):
        tf.add(x, y)


def test_every_op_is_generated():
    defs = tf.raw_ops.OP_DEFS
    assert len(defs) > 200
    for name in defs:
        fn = getattr(tf.raw_ops, name)
        assert callable(fn) and fn.__name__ == name and name in fn.__doc__
    assert tf.gen_ops.mat_mul is tf.raw_ops.MatMul
    assert tf.gen_ops.sparse_softmax_cross_entropy_with_logits is \
        tf.raw_ops.SparseSoftmaxCrossEntropyWithLogits
    assert tf.squared_difference is tf.raw_ops.SquaredDifference  # no hand-written wrapper
    # Attributes by keyword, inferred type and list-length attributes.
    a = tf.constant([[1.0, 2.0]])
    p = tf.raw_ops.Pack([a, a, a], axis=0)
    assert p.op.get_attr("N") == 3 and p.op.get_attr("T") == "float32"
    assert p.shape.as_list() == [3, 1, 2]
    m = tf.raw_ops.MatMul(a, a, transpose_b=True)
    assert m.op.get_attr("transpose_b") is True and m.shape.as_list() == [1, 1]
    with pytest.raises(TypeError, match="has no input or attribute 'bogus'"):
        tf.raw_ops.MatMul(a, a, bogus=1)
    with pytest.raises(TypeError, match="missing input 'b'"):
        tf.raw_ops.MatMul(a)


def test_build_errors_name_the_node():
    a = tf.constant(np.zeros((2, 3), np.float32))
    with pytest.raises(tf.errors.InvalidArgumentError) as e:
        tf.matmul(a, a, name="bad")
    assert "bad" in str(e.value) and e.value.node_name == "bad" and e.value.op_type == "MatMul"
    with pytest.raises(TypeError, match="not a Runnel dtype"):
        tf.placeholder("complex64")
    with pytest.raises(tf.errors.InvalidArgumentError):  # thrown by the C++ builder
        tf.Variable(tf.placeholder(tf.float32, [None, 2]))  # a variable needs a known shape
    with pytest.raises(ValueError, match="placement"):
        tf.Session(config={"placement": "fastest"})


def test_operators():
    x = tf.placeholder(tf.float32, [2, 2])
    for expr, op in [(x + 1, "Add"), (1 - x, "Sub"), (x * x, "Mul"), (x / 2, "Div"),
                     (x @ x, "MatMul"), (-x, "Neg"), (x < 1.0, "Less"), (x ** 2, "Pow"),
                     (x[0], "StridedSlice"), (x[:, 1:], "StridedSlice")]:
        assert expr.op.type == op, op
    assert (1 - x).op.inputs[0].dtype == tf.float32  # the scalar takes the tensor's dtype
    assert x[0].shape.as_list() == [2] and x[:, 1:].shape.as_list() == [2, 1]
    with pytest.raises(TypeError, match="truth value"):
        bool(x)


def test_tensorflow_graphdef_round_trip():
    x = tf.placeholder(tf.float32, [None, 2], name="x")
    tf.nn.relu(x @ tf.constant([[1.0], [-1.0]]), name="y")
    pb = tf.get_default_graph().as_graph_def("tensorflow")
    g = tf.io.import_graph_def(pb)
    with tf.Session(graph=g) as s:
        out = s.run("y:0", {"x:0": np.array([[3, 1], [1, 3]], np.float32)})
    np.testing.assert_array_equal(out, [[2], [0]])
    text = tf.get_default_graph().as_graph_def("tensorflow_text")
    assert b'op: "MatMul"' in text
    assert len(tf.io.import_graph_def(text, text=True)) == len(tf.get_default_graph())


def test_graph_files(tmp_path):
    x = tf.placeholder(tf.float32, [2], name="x")
    tf.multiply(x, 2.0, name="y")
    tf.get_default_graph().save(tmp_path / "g.runnel")
    g = tf.io.load_graph(tmp_path / "g.runnel")
    with tf.Session(graph=g) as s:
        np.testing.assert_array_equal(s.run("y:0", {"x:0": [1, 2]}), [2, 4])
    with pytest.raises(tf.errors.OpError, match="nothing"):
        tf.io.load_graph(tmp_path / "nothing")


def test_constant_with_a_shape_keeps_a_scalar_a_scalar():
    assert tf.constant(2.0, shape=[]).shape == []
    assert tf.constant(2.0, shape=[2, 1]).shape == [2, 1]


def test_placeholder_with_default_is_its_input_unless_fed():
    training = tf.placeholder_with_default(False, [], name="training")
    x = tf.placeholder_with_default(np.ones((1, 2), np.float32), [None, 2])
    assert training.name == "training:0" and x.shape.dims == [None, 2]
    picked = tf.cond(training, lambda: tf.constant(1), lambda: tf.constant(2))
    total = tf.reduce_sum(x * 2.0)
    (grad,) = tf.gradients(total, [x])
    with tf.Session() as s:
        assert s.run(picked) == 2 and s.run(picked, {training: True}) == 1
        assert s.run(total) == 4.0 and s.run(total, {x: np.ones((5, 2), np.float32)}) == 20.0
        np.testing.assert_array_equal(s.run(grad), [[2.0, 2.0]])
    # Saved and loaded as TensorFlow writes it: still a placeholder with a default.
    text = tf.get_default_graph().as_graph_def("tensorflow_text")
    assert b'op: "PlaceholderWithDefault"' in text
    with pytest.raises(tf.errors.InvalidArgumentError,
                       match=r"default value's shape \[3\] does not fit the declared shape \[2\]"):
        tf.placeholder_with_default(np.ones(3, np.float32), [2])

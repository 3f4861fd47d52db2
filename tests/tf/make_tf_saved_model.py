#!/usr/bin/env python3
"""Writes a TensorFlow 1.x SavedModel directory for Runnel's loader tests, laid out as
tf.saved_model.builder.SavedModelBuilder leaves it: saved_model.pb (text written first as
saved_model.pbtxt, then encoded by `protoc --encode=tensorflow.SavedModel` with Runnel's
schema's published field numbers) and variables/variables.{index,data-00000-of-00001}
(make_tf_checkpoint.py's encoders). NumPy computes the expected outputs.

usage: make_tf_saved_model.py OUTDIR PROTO_DIR
  OUTDIR/model/{saved_model.pb,saved_model.pbtxt,variables/}, OUTDIR/x.npy (4x3),
  OUTDIR/expected_y.npy, OUTDIR/h.npy and OUTDIR/expected_from_h.npy

MetaGraph {serve}: y = x @ w + b + offset. The checkpoint holds w and b under the keys
dense/kernel and dense/bias: the SaverDef's saver (save/) maps them so; a second saver (save_1/)
maps them by their node names, which the checkpoint lacks, so only a loader that restores through
the SaverDef's saver succeeds. offset is in neither saver: the legacy_init_op (a group of
offset/Assign) sets it to 10; the variables' own initializers (zeros) must not run. Signatures:
serving_default (x -> y), from_hidden (h = MatMul:0, not a placeholder -> y), classify
(serialized tf.Examples with features x, float [3], tags, int64, and words, bytes, of any
length, through ParseExample -> y computed from x, tags' values and words' dense shape).
MetaGraph {train}: the same graph, with no signatures.
"""
import os
import subprocess
import sys

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import make_tf_checkpoint as ck  # noqa: E402
from make_tf_meta_graph import (FLOAT, SAVER_DEF, attr, node, saver_nodes, shape,  # noqa: E402
                                strings, text_bytes, variable, variable_def)


def tensor_info(name, dims, dtype="DT_FLOAT"):
    return 'name: "%s" dtype: %s tensor_shape { %s }' % (
        name, dtype, " ".join("dim { size: %d }" % d for d in dims))


def parse_example_nodes():
    """tf.parse_example(tf_example, {"x": FixedLenFeature([3], tf.float32),
    "tags": VarLenFeature(tf.int64), "words": VarLenFeature(tf.string)}) as TensorFlow 1.15 lays
    it out: the sparse features' indices (outputs 0, 1), values (2, 3) and shapes (4, 5), then the
    dense x (6)."""
    def const(name, dtype, body):
        return node(name, "Const", (), attr("dtype", "type: " + dtype),
                    attr("value", "tensor { dtype: %s %s }" % (dtype, body)))
    scope = "ParseExample/"
    return [
        node("tf_example", "Placeholder", (), attr("dtype", "type: DT_STRING"),
             attr("shape", shape([-1]))),
        const(scope + "names", "DT_STRING", "tensor_shape { dim { size: 0 } }"),
        const(scope + "sparse_keys_0", "DT_STRING", 'tensor_shape { } string_val: "tags"'),
        const(scope + "sparse_keys_1", "DT_STRING", 'tensor_shape { } string_val: "words"'),
        const(scope + "dense_keys_0", "DT_STRING", 'tensor_shape { } string_val: "x"'),
        const(scope + "Const", "DT_FLOAT", "tensor_shape { dim { size: 0 } }"),
        node(scope + "ParseExample", "ParseExample",
             ("tf_example", scope + "names", scope + "sparse_keys_0", scope + "sparse_keys_1",
              scope + "dense_keys_0", scope + "Const"),
             attr("Nsparse", "i: 2"), attr("Ndense", "i: 1"),
             attr("sparse_types", "list { type: DT_INT64 type: DT_STRING }"),
             attr("Tdense", "list { type: DT_FLOAT }"),
             attr("dense_shapes", "list { shape { dim { size: 3 } } }")),
        node("MatMul_1", "MatMul", (scope + "ParseExample:6", "w/read"), FLOAT,
             attr("transpose_a", "b: false"), attr("transpose_b", "b: false")),
        node("BiasAdd_1", "BiasAdd", ("MatMul_1", "b/read"), FLOAT,
             attr("data_format", 's: "NHWC"')),
        node("y_ex", "Add", ("BiasAdd_1", "offset/read"), FLOAT),
    ]


def main():
    out, proto_dir = sys.argv[1], sys.argv[2]
    model = os.path.join(out, "model")
    os.makedirs(os.path.join(model, "variables"), exist_ok=True)
    nodes = [node("x", "Placeholder", (), attr("dtype", "type: DT_FLOAT"),
                  attr("shape", shape([-1, 3])))]
    nodes += variable("w", [3, 2]) + variable("b", [2]) + variable("offset", [])
    nodes += [
        node("offset/ten", "Const", (), attr("dtype", "type: DT_FLOAT"),
             attr("value", "tensor { dtype: DT_FLOAT tensor_shape { } float_val: 10 }")),
        node("offset/set", "Assign", ("offset", "offset/ten"), FLOAT),
        node("legacy_init", "NoOp", ("^offset/set",)),
        node("MatMul", "MatMul", ("x", "w/read"), FLOAT, attr("transpose_a", "b: false"),
             attr("transpose_b", "b: false")),
        node("BiasAdd", "BiasAdd", ("MatMul", "b/read"), FLOAT, attr("data_format", 's: "NHWC"')),
        node("y", "Add", ("BiasAdd", "offset/read"), FLOAT),
        node("init", "NoOp", ("^w/Assign", "^b/Assign", "^offset/Assign")),
    ]
    nodes += parse_example_nodes()
    nodes += saver_nodes("save", ["dense/bias", "dense/kernel"]) + saver_nodes("save_1", ["b", "w"])
    variables = " ".join('value: "%s"' % text_bytes(variable_def(v)) for v in ("w", "b", "offset"))
    graph = """meta_info_def {
    meta_graph_version: "v1.15.0" tags: "%s" tensorflow_version: "1.15.0" }
  graph_def {
    %s
    versions { producer: 134 }
  }
  %s
  collection_def { key: "variables" value { bytes_list { %s } } }
  collection_def { key: "legacy_init_op" value { node_list { value: "legacy_init" } } }
"""
    serve = graph % ("serve", "\n    ".join(nodes), SAVER_DEF, variables) + """
  signature_def { key: "serving_default" value {
    inputs { key: "x" value { %s } }
    outputs { key: "y" value { %s } }
    method_name: "tensorflow/serving/predict" } }
  signature_def { key: "classify" value {
    inputs { key: "examples" value { %s } }
    outputs { key: "y" value { %s } }
    outputs { key: "tags" value { %s } }
    outputs { key: "word_shape" value { %s } }
    method_name: "tensorflow/serving/classify" } }
  signature_def { key: "from_hidden" value {
    inputs { key: "h" value { %s } }
    outputs { key: "y" value { %s } }
    method_name: "tensorflow/serving/predict" } }
""" % (tensor_info("x:0", [-1, 3]), tensor_info("y:0", [-1, 2]),
       tensor_info("tf_example:0", [-1], "DT_STRING"), tensor_info("y_ex:0", [-1, 2]),
       tensor_info("ParseExample/ParseExample:2", [-1], "DT_INT64"),
       tensor_info("ParseExample/ParseExample:5", [2], "DT_INT64"),
       tensor_info("MatMul:0", [-1, 2]), tensor_info("y:0", [-1, 2]))
    train = graph % ("train", "\n    ".join(nodes), SAVER_DEF, variables)
    text = "saved_model_schema_version: 1\nmeta_graphs {\n  %s}\nmeta_graphs {\n  %s}\n" % (serve,
                                                                                           train)
    pbtxt = os.path.join(model, "saved_model.pbtxt")
    with open(pbtxt, "w") as f:
        f.write(text)
    with open(pbtxt) as src, open(os.path.join(model, "saved_model.pb"), "wb") as dst:
        subprocess.run(["protoc", "--encode=tensorflow.SavedModel", "--proto_path=" + proto_dir,
                        "tensorflow.proto"], stdin=src, stdout=dst, check=True)
    w = (np.arange(6, dtype=np.float32).reshape(3, 2) - 2.5) * 0.5
    b = np.array([0.25, -1.0], dtype=np.float32)
    tensors = [("dense/bias", [2], b), ("dense/kernel", [3, 2], w)]
    data, rows = bytearray(), [(b"", ck.header_proto(1))]
    for name, dims, value in tensors:
        body, crc = ck.tensor_bytes(ck.DT_FLOAT, value.tobytes())
        rows.append((name.encode(), ck.entry_proto(ck.DT_FLOAT, dims, 0, len(data), len(body),
                                                   ck.mask(crc))))
        data += body
    prefix = os.path.join(model, "variables", "variables")
    with open(prefix + ".data-00000-of-00001", "wb") as f:
        f.write(data)
    with open(prefix + ".index", "wb") as f:
        f.write(ck.build_table(rows))
    x = np.array([[1, 0, 0], [0, 1, 0], [0, 0, 1], [1, -2, 0.5]], dtype=np.float32)
    h = np.array([[1, 2], [-3, 0.5]], dtype=np.float32)
    np.save(os.path.join(out, "x.npy"), x)
    np.save(os.path.join(out, "expected_y.npy"), x @ w + b + 10)
    np.save(os.path.join(out, "h.npy"), h)
    np.save(os.path.join(out, "expected_from_h.npy"), h + b + 10)


if __name__ == "__main__":
    main()

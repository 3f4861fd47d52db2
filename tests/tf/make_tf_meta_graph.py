#!/usr/bin/env python3
"""Writes what tf.train.Saver leaves in a training directory of TensorFlow 1.x, for Runnel's
MetaGraphDef tests: model.ckpt-5.meta (the graph, its variables' collections and the saver's
nodes and SaverDef, as TensorFlow 1.15 lays them out) and the checkpoint beside it. The .meta
is written as protobuf text (model.ckpt-5.meta.pbtxt) and encoded to binary by `protoc
--encode` with Runnel's schema's published field numbers; the checkpoint by
make_tf_checkpoint.py's encoders. NumPy computes the expected output.

usage: make_tf_meta_graph.py OUTDIR PROTO_DIR
  OUTDIR/model.ckpt-5.{meta,meta.pbtxt,index,data-00000-of-00001}, OUTDIR/checkpoint
  OUTDIR/x.npy (4x3 inputs), OUTDIR/expected_y.npy (x @ w + b with the checkpoint's w and b)
The graph: y = BiasAdd(MatMul(x, w/read), b/read); w [3,2], b [2] variables initialized to
zeros (w/Assign, b/Assign, init); save/ holds SaveV2, RestoreV2 and their Assigns.
"""
import os
import subprocess
import sys

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import make_tf_checkpoint as ck  # noqa: E402


def text_bytes(b):
    return "".join(chr(c) if 32 <= c < 127 and c not in (34, 92) else "\\%03o" % c for c in b)


def variable_def(name):
    return (ck.field_bytes(1, (name + ":0").encode()) + ck.field_bytes(2, (name + "/Assign").encode())
            + ck.field_bytes(3, (name + "/read:0").encode())
            + ck.field_bytes(6, (name + "/initial_value:0").encode()) + ck.field_varint(7, 1))


def shape(dims):
    return "shape { %s }" % " ".join("dim { size: %d }" % d for d in dims)


def attr(key, value):
    return 'attr { key: "%s" value { %s } }' % (key, value)


FLOAT = attr("T", "type: DT_FLOAT")
# What tf.train.Saver() puts in a MetaGraphDef for its scope save/.
SAVER_DEF = """saver_def {
  filename_tensor_name: "save/Const:0"
  save_tensor_name: "save/control_dependency:0"
  restore_op_name: "save/restore_all"
  max_to_keep: 5
  keep_checkpoint_every_n_hours: 10000
  version: V2
}"""


def node(name, op, inputs=(), *attrs):
    ins = " ".join('input: "%s"' % i for i in inputs)
    return 'node { name: "%s" op: "%s" %s %s }' % (name, op, ins, " ".join(attrs))


def variable(name, dims):
    return [
        node(name + "/initial_value", "Const", (), attr("dtype", "type: DT_FLOAT"),
             attr("value", "tensor { dtype: DT_FLOAT tensor_shape { %s } float_val: 0 }" %
                  " ".join("dim { size: %d }" % d for d in dims))),
        node(name, "VariableV2", (), attr("container", 's: ""'), attr("dtype", "type: DT_FLOAT"),
             attr("shape", shape(dims)), attr("shared_name", 's: ""')),
        node(name + "/Assign", "Assign", (name, name + "/initial_value"), FLOAT,
             attr("_class", 'list { s: "loc:@%s" }' % name), attr("use_locking", "b: true"),
             attr("validate_shape", "b: true")),
        node(name + "/read", "Identity", (name,), FLOAT,
             attr("_class", 'list { s: "loc:@%s" }' % name)),
    ]


def strings(name, values):
    return node(name, "Const", (), attr("dtype", "type: DT_STRING"), attr(
        "value", "tensor { dtype: DT_STRING tensor_shape { dim { size: %d } } %s }" %
        (len(values), " ".join('string_val: "%s"' % v for v in values))))


def saver_nodes(scope, keys=("b", "w")):
    """A tf.train.Saver's nodes saving b and w under checkpoint keys `keys`."""
    two = attr("dtypes", "list { type: DT_FLOAT type: DT_FLOAT }")
    return [
        node(scope + "/filename/input", "Const", (), attr("dtype", "type: DT_STRING"),
             attr("value", 'tensor { dtype: DT_STRING tensor_shape { } string_val: "model" }')),
        node(scope + "/filename", "PlaceholderWithDefault", (scope + "/filename/input",),
             attr("dtype", "type: DT_STRING"), attr("shape", "shape { }")),
        node(scope + "/Const", "PlaceholderWithDefault", (scope + "/filename",),
             attr("dtype", "type: DT_STRING"), attr("shape", "shape { }")),
        strings(scope + "/SaveV2/tensor_names", keys),
        strings(scope + "/SaveV2/shape_and_slices", ["", ""]),
        node(scope + "/SaveV2", "SaveV2", (scope + "/Const", scope + "/SaveV2/tensor_names",
                                          scope + "/SaveV2/shape_and_slices", "b", "w"), two),
        node(scope + "/control_dependency", "Identity", (scope + "/Const", "^" + scope + "/SaveV2"),
             attr("T", "type: DT_STRING")),
        strings(scope + "/RestoreV2/tensor_names", keys),
        strings(scope + "/RestoreV2/shape_and_slices", ["", ""]),
        node(scope + "/RestoreV2", "RestoreV2", (scope + "/Const", scope + "/RestoreV2/tensor_names",
                                                scope + "/RestoreV2/shape_and_slices"), two),
        node(scope + "/Assign", "Assign", ("b", scope + "/RestoreV2"), FLOAT),
        node(scope + "/Assign_1", "Assign", ("w", scope + "/RestoreV2:1"), FLOAT),
        node(scope + "/restore_all", "NoOp", ("^" + scope + "/Assign", "^" + scope + "/Assign_1")),
    ]


def main():
    out, proto_dir = sys.argv[1], sys.argv[2]
    os.makedirs(out, exist_ok=True)
    nodes = [node("x", "Placeholder", (), attr("dtype", "type: DT_FLOAT"),
                  attr("shape", shape([-1, 3])))]
    nodes += variable("w", [3, 2]) + variable("b", [2])
    nodes += [
        node("MatMul", "MatMul", ("x", "w/read"), FLOAT, attr("transpose_a", "b: false"),
             attr("transpose_b", "b: false")),
        node("y", "BiasAdd", ("MatMul", "b/read"), FLOAT, attr("data_format", 's: "NHWC"')),
        node("init", "NoOp", ("^w/Assign", "^b/Assign")),
    ]
    # Two savers, as graphs often hold: tf.train.Saver() made twice.
    nodes += saver_nodes("save") + saver_nodes("save_1")
    variables = " ".join('value: "%s"' % text_bytes(variable_def(v)) for v in ("w", "b"))
    text = """meta_info_def {
  meta_graph_version: "v1.15.0"
  tensorflow_version: "1.15.0"
  tensorflow_git_version: "v1.15.0-rc3-22-g590d6ee"
}
graph_def {
  %s
  versions { producer: 134 }
}
%s
collection_def { key: "trainable_variables" value { bytes_list { %s } } }
collection_def { key: "variables" value { bytes_list { %s } } }
collection_def { key: "train_op" value { node_list { value: "init" } } }
""" % ("\n  ".join(nodes), SAVER_DEF, variables, variables)
    meta = os.path.join(out, "model.ckpt-5.meta")
    with open(meta + ".pbtxt", "w") as f:
        f.write(text)
    with open(meta + ".pbtxt") as src, open(meta, "wb") as dst:
        subprocess.run(["protoc", "--encode=tensorflow.MetaGraphDef", "--proto_path=" + proto_dir,
                        "tensorflow.proto"], stdin=src, stdout=dst, check=True)
    # The checkpoint: w and b by formula, as Saver.save(sess, "model.ckpt", global_step=5) leaves.
    w = (np.arange(6, dtype=np.float32).reshape(3, 2) - 2.5) * 0.5
    b = np.array([0.25, -1.0], dtype=np.float32)
    tensors = [("b", ck.DT_FLOAT, [2], b.tobytes()), ("w", ck.DT_FLOAT, [3, 2], w.tobytes())]
    data, rows = bytearray(), [(b"", ck.header_proto(1))]
    for name, dtype, dims, value in tensors:
        body, crc = ck.tensor_bytes(dtype, value)
        rows.append((name.encode(), ck.entry_proto(dtype, dims, 0, len(data), len(body),
                                                   ck.mask(crc))))
        data += body
    with open(os.path.join(out, "model.ckpt-5.data-00000-of-00001"), "wb") as f:
        f.write(data)
    with open(os.path.join(out, "model.ckpt-5.index"), "wb") as f:
        f.write(ck.build_table(rows))
    with open(os.path.join(out, "checkpoint"), "w") as f:
        f.write('model_checkpoint_path: "model.ckpt-5"\nall_model_checkpoint_paths: "model.ckpt-5"\n')
    x = np.array([[1, 0, 0], [0, 1, 0], [0, 0, 1], [1, -2, 0.5]], dtype=np.float32)
    np.save(os.path.join(out, "x.npy"), x)
    np.save(os.path.join(out, "expected_y.npy"), x @ w + b)


if __name__ == "__main__":
    main()

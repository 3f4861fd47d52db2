#!/usr/bin/env python3
"""Writes TensorFlow GraphDef files for Runnel's import tests, the way TensorFlow 1.x writes a
frozen graph, with an independent protobuf encoder (wire format by hand from the published field
numbers of tensorflow/core/framework/*.proto) so that Runnel's own schema is checked, not reused.

usage: make_tf_graphs.py OUTDIR [IMAGES]
Writes, in OUTDIR:
  mnist_cnn.pb        a frozen MNIST CNN (Placeholder x [?,784] ... softmax, prediction)
  mnist_cnn.pbtxt     the same graph in text format
  mnist_cnn_b100.pb   the same with a fixed batch of 100 (x is [100,784])
  legacy_mlp.pbtxt    a legacy graph (no versions; x's shape is empty, i.e. unknown)
  unsupported.pbtxt   a graph with two ops Runnel lacks
  images.npy          IMAGES (default 64) random images, float32 [N,784]
  expected_softmax.npy, expected_prediction.npy, expected_mlp.npy   NumPy's answers
  events.out.tfevents.1700000000.tfhost   an event file as TensorFlow writes one: the file
                      version, the CNN's graph, 100 steps of "loss" (TF 1 simple_value), 10 of
                      "accuracy" (TF 2: a scalar tensor for the "scalars" plugin), a histogram
"""
import os
import struct
import sys

import numpy as np

DT_FLOAT, DT_INT32, DT_INT64 = 1, 3, 9


def varint(n):
    n &= (1 << 64) - 1
    out = bytearray()
    while True:
        b = n & 0x7F
        n >>= 7
        out.append(b | (0x80 if n else 0))
        if not n:
            return bytes(out)


def field(num, wire, payload):
    key = varint(num << 3 | wire)
    if wire == 0:
        return key + varint(payload)
    if wire == 2:
        return key + varint(len(payload)) + payload
    if wire == 5:
        return key + payload
    raise ValueError(wire)


def msg(num, body):
    return field(num, 2, body)


def string(num, s):
    return field(num, 2, s.encode() if isinstance(s, str) else s)


def shape_proto(dims):  # TensorShapeProto: dim = 2 {size = 1}; unknown_rank = 3
    if dims is None:
        return field(3, 0, 1)
    return b"".join(msg(2, field(1, 0, d)) for d in dims)


def tensor_proto(arr, typed=False):  # TensorProto
    dt = {np.float32: DT_FLOAT, np.int32: DT_INT32, np.int64: DT_INT64}[arr.dtype.type]
    out = field(1, 0, dt) + msg(2, shape_proto(list(arr.shape)))
    if typed:  # one typed value fills the shape
        v = arr.reshape(-1)[0]
        if dt == DT_FLOAT:
            out += string(5, struct.pack("<f", float(v)))  # packed float_val = 5
        elif dt == DT_INT32:
            out += string(7, varint(int(v)))  # packed int_val = 7
        else:
            out += string(10, varint(int(v)))  # packed int64_val = 10
    else:
        out += string(4, arr.astype(arr.dtype.newbyteorder("<")).tobytes())  # tensor_content
    return out


# AttrValue: list = 1 {s 2, i 3 packed, type 6 packed, shape 7}, s 2, i 3, f 4, b 5, type 6,
# shape 7, tensor 8
def a_type(t): return field(6, 0, t)
def a_bool(b): return field(5, 0, int(b))
def a_str(s): return string(2, s)
def a_int(i): return field(3, 0, i)
def a_shape(dims): return msg(7, shape_proto(dims))
def a_tensor(arr, typed=False): return msg(8, tensor_proto(arr, typed))
def a_ints(xs): return msg(1, string(3, b"".join(varint(x) for x in xs)) if xs else b"")
def a_shapes(shapes): return msg(1, b"".join(msg(7, shape_proto(s)) for s in shapes))


def node(name, op, inputs=(), attrs=None, device=""):
    out = string(1, name) + string(2, op)
    for i in inputs:
        out += string(3, i)
    if device:
        out += string(4, device)
    for k, v in sorted((attrs or {}).items()):  # map<string, AttrValue> attr = 5
        out += msg(5, string(1, k) + msg(2, v))
    return msg(1, out)  # GraphDef.node = 1


def graph(nodes, producer=27):
    out = b"".join(nodes)
    if producer is not None:
        out += msg(4, field(1, 0, producer))  # versions = 4 {producer = 1}
    return out


# ---- text format, as TensorFlow's text_format prints it ----
def t_shape(dims, ind):
    if dims is None:
        return f"{ind}  unknown_rank: true\n"
    return "".join(f"{ind}  dim {{\n{ind}    size: {d}\n{ind}  }}\n" for d in dims)


def t_node(name, op, inputs=(), attrs=None):
    s = f'node {{\n  name: "{name}"\n  op: "{op}"\n'
    for i in inputs:
        s += f'  input: "{i}"\n'
    for k, (kind, v) in sorted((attrs or {}).items()):
        s += f'  attr {{\n    key: "{k}"\n    value {{\n'
        if kind == "type":
            s += f"      type: {v}\n"
        elif kind == "shape":
            s += "      shape {\n" + t_shape(v, "      ") + "      }\n"
        elif kind == "b":
            s += f"      b: {'true' if v else 'false'}\n"
        elif kind == "s":
            s += f'      s: "{v}"\n'
        elif kind == "ints":
            s += "      list {\n" + "".join(f"        i: {x}\n" for x in v) + "      }\n"
        elif kind == "tensor":
            arr = v
            s += "      tensor {\n        dtype: DT_FLOAT\n        tensor_shape {\n"
            s += t_shape(list(arr.shape), "        ") + "        }\n"
            s += "".join(f"        float_val: {float(x)!r}\n" for x in arr.reshape(-1))
            s += "      }\n"
        s += "    }\n  }\n"
    return s + "}\n"


def conv_same(x, w, stride):
    n, h, wd, c = x.shape
    kh, kw, _, o = w.shape
    oh, ow = -(-h // stride), -(-wd // stride)
    ph = max((oh - 1) * stride + kh - h, 0)
    pw = max((ow - 1) * stride + kw - wd, 0)
    xp = np.pad(x, ((0, 0), (ph // 2, ph - ph // 2), (pw // 2, pw - pw // 2), (0, 0)))
    out = np.zeros((n, oh, ow, o), np.float64)
    for i in range(kh):
        for j in range(kw):
            patch = xp[:, i:i + stride * oh:stride, j:j + stride * ow:stride, :]
            out += patch @ w[i, j]
    return out


def pool(x, k, stride, mode, padding):
    n, h, w, c = x.shape
    if padding == "VALID":
        oh, ow = (h - k) // stride + 1, (w - k) // stride + 1
        xp, ph0, pw0 = x, 0, 0
    else:
        oh, ow = -(-h // stride), -(-w // stride)
        ph = max((oh - 1) * stride + k - h, 0)
        pw = max((ow - 1) * stride + k - w, 0)
        ph0, pw0 = ph // 2, pw // 2
        xp = np.pad(x, ((0, 0), (ph0, ph - ph0), (pw0, pw - pw0), (0, 0)), constant_values=-np.inf)
    out = np.full((n, oh, ow, c), -np.inf)
    for i in range(k):
        for j in range(k):
            patch = xp[:, i:i + stride * oh:stride, j:j + stride * ow:stride, :]
            out = np.maximum(out, patch) if mode == "max" else np.where(np.isinf(out), 0, out) + patch
    return out if mode == "max" else out / (k * k)


def main():
    outdir = sys.argv[1]
    n_images = int(sys.argv[2]) if len(sys.argv) > 2 else 64
    os.makedirs(outdir, exist_ok=True)
    rng = np.random.default_rng(7)
    w1 = (rng.standard_normal((5, 5, 1, 8)) * 0.3).astype(np.float32)
    b1 = (rng.standard_normal(8) * 0.1).astype(np.float32)
    w2 = (rng.standard_normal((5, 5, 8, 16)) * 0.1).astype(np.float32)
    b2 = np.full(16, 0.05, np.float32)  # written as one float_val filling the shape
    w3 = (rng.standard_normal((784, 32)) * 0.05).astype(np.float32)
    b3 = (rng.standard_normal(32) * 0.1).astype(np.float32)
    w4 = (rng.standard_normal((32, 10)) * 0.3).astype(np.float32)
    b4 = (rng.standard_normal(10) * 0.1).astype(np.float32)
    f = lambda: a_type(DT_FLOAT)
    out_shapes = lambda *s: a_shapes(list(s))

    def cnn(batch):
        b = -1 if batch is None else batch
        return [
            node("x", "Placeholder", (), {"dtype": f(), "shape": a_shape([b, 784])}),
            node("reshape/shape", "Const", (), {"dtype": a_type(DT_INT32),
                 "value": a_tensor(np.array([-1, 28, 28, 1], np.int32))}),
            node("reshape", "Reshape", ("x", "reshape/shape"),
                 {"T": f(), "Tshape": a_type(DT_INT32), "_output_shapes": out_shapes([b, 28, 28, 1])}),
            node("conv1/w", "Const", (), {"dtype": f(), "value": a_tensor(w1)}),
            node("conv1/Conv2D", "Conv2D", ("reshape", "conv1/w"),
                 {"T": f(), "strides": a_ints([1, 1, 1, 1]), "padding": a_str("SAME"),
                  "data_format": a_str("NHWC"), "dilations": a_ints([1, 1, 1, 1]),
                  "use_cudnn_on_gpu": a_bool(True), "explicit_paddings": a_ints([])},
                 device="/device:GPU:0"),
            node("conv1/b", "Const", (), {"dtype": f(), "value": a_tensor(b1)}),
            node("conv1/BiasAdd", "BiasAdd", ("conv1/Conv2D", "conv1/b"),
                 {"T": f(), "data_format": a_str("NHWC")}),
            node("conv1/Relu", "Relu", ("conv1/BiasAdd",), {"T": f()}),
            node("pool1", "MaxPool", ("conv1/Relu",),
                 {"T": f(), "ksize": a_ints([1, 2, 2, 1]), "strides": a_ints([1, 2, 2, 1]),
                  "padding": a_str("SAME"), "data_format": a_str("NHWC")}),
            node("conv2/w", "Const", (), {"dtype": f(), "value": a_tensor(w2)}),
            node("conv2/Conv2D", "Conv2D", ("pool1", "conv2/w"),
                 {"T": f(), "strides": a_ints([1, 1, 1, 1]), "padding": a_str("SAME"),
                  "data_format": a_str("NHWC"), "dilations": a_ints([1, 1, 1, 1])}),
            node("conv2/b", "Const", (), {"dtype": f(), "value": a_tensor(b2, typed=True)}),
            node("conv2/BiasAdd", "BiasAdd", ("conv2/Conv2D", "conv2/b"), {"T": f()}),
            node("conv2/Relu", "Relu", ("conv2/BiasAdd",), {"T": f()}),
            node("pool2", "AvgPool", ("conv2/Relu",),
                 {"T": f(), "ksize": a_ints([1, 2, 2, 1]), "strides": a_ints([1, 2, 2, 1]),
                  "padding": a_str("VALID"), "data_format": a_str("NHWC")}),
            node("flat/shape", "Const", (), {"dtype": a_type(DT_INT32),
                 "value": a_tensor(np.array([-1, 784], np.int32))}),
            node("flat", "Reshape", ("pool2", "flat/shape"), {"T": f(), "Tshape": a_type(DT_INT32)}),
            node("fc1/w", "Const", (), {"dtype": f(), "value": a_tensor(w3)}),
            node("fc1/MatMul", "MatMul", ("flat", "fc1/w"),
                 {"T": f(), "transpose_a": a_bool(False), "transpose_b": a_bool(False)}),
            node("fc1/b", "Const", (), {"dtype": f(), "value": a_tensor(b3)}),
            node("fc1/add", "AddV2", ("fc1/MatMul", "fc1/b"), {"T": f()}),
            node("fc1/Relu", "Relu", ("fc1/add",), {"T": f()}),
            node("fc2/w", "Const", (), {"dtype": f(), "value": a_tensor(w4)}),
            node("fc2/MatMul", "MatMul", ("fc1/Relu", "fc2/w"),
                 {"T": f(), "transpose_a": a_bool(False), "transpose_b": a_bool(False)}),
            node("fc2/b", "Const", (), {"dtype": f(), "value": a_tensor(b4)}),
            node("logits", "Add", ("fc2/MatMul", "fc2/b"), {"T": f()}),
            node("softmax", "Softmax", ("logits",), {"T": f()}),
            node("axis", "Const", (), {"dtype": a_type(DT_INT32), "value": a_tensor(np.array(1, np.int32))}),
            node("prediction", "ArgMax", ("softmax", "axis"),
                 {"T": f(), "Tidx": a_type(DT_INT32), "output_type": a_type(DT_INT64)}),
        ]

    open(os.path.join(outdir, "mnist_cnn.pb"), "wb").write(graph(cnn(None)))
    write_events(os.path.join(outdir, "events.out.tfevents.1700000000.tfhost"), graph(cnn(None)))
    open(os.path.join(outdir, "mnist_cnn_b100.pb"), "wb").write(graph(cnn(100)))

    # The same CNN in text format, printed from the binary bytes as TensorFlow's text_format
    # lays it out (tensor_content as octal escapes).
    T = lambda: ("type", "DT_FLOAT")
    text = pbtxt_from_binary(graph(cnn(None)))
    open(os.path.join(outdir, "mnist_cnn.pbtxt"), "w").write(text)

    # A legacy MLP: no versions, and x's shape attribute empty (unknown in legacy graphs).
    legacy = (t_node("x", "Placeholder", (), {"dtype": T(), "shape": ("shape", [])}) +
              t_node("w", "Const", (), {"dtype": T(), "value": ("tensor", w4)}) +
              t_node("xw", "MatMul", ("x", "w"), {"T": T()}) +
              t_node("y", "Relu", ("xw",), {"T": T()}))
    open(os.path.join(outdir, "legacy_mlp.pbtxt"), "w").write(legacy)
    unsupported = (t_node("x", "Placeholder", (), {"dtype": T(), "shape": ("shape", [-1, 4])}) +
                   t_node("lrn", "LRN", ("x",), {"T": T()}) +
                   t_node("y", "Relu", ("lrn",), {"T": T()}) +
                   t_node("z", "FancyUnknownOp", ("y",), {"T": T()}))
    open(os.path.join(outdir, "unsupported.pbtxt"), "w").write(unsupported)

    x = rng.random((n_images, 784), dtype=np.float32)
    np.save(os.path.join(outdir, "images.npy"), x)
    h = x.astype(np.float64).reshape(-1, 28, 28, 1)
    h = np.maximum(conv_same(h, w1, 1) + b1, 0)
    h = pool(h, 2, 2, "max", "SAME")
    h = np.maximum(conv_same(h, w2, 1) + b2, 0)
    h = pool(h, 2, 2, "avg", "VALID").reshape(-1, 784)
    h = np.maximum(h @ w3 + b3, 0)
    logits = h @ w4 + b4
    e = np.exp(logits - logits.max(axis=1, keepdims=True))
    sm = e / e.sum(axis=1, keepdims=True)
    np.save(os.path.join(outdir, "expected_softmax.npy"), sm.astype(np.float32))
    np.save(os.path.join(outdir, "expected_prediction.npy"), sm.argmax(axis=1).astype(np.int64))
    mlp_in = x[:, :32]
    np.save(os.path.join(outdir, "mlp_in.npy"), mlp_in)
    np.save(os.path.join(outdir, "expected_mlp.npy"),
            np.maximum(mlp_in.astype(np.float64) @ w4, 0).astype(np.float32))


# ---- a minimal protobuf wire decoder + text printer (TensorFlow's text_format layout) ----
SCHEMA = {  # message -> field number -> (name, kind, submessage or enum)
    "GraphDef": {1: ("node", "msg", "NodeDef"), 4: ("versions", "msg", "VersionDef")},
    "VersionDef": {1: ("producer", "int", None)},
    "NodeDef": {1: ("name", "str", None), 2: ("op", "str", None), 3: ("input", "str", None),
                4: ("device", "str", None), 5: ("attr", "msg", "AttrEntry")},
    "AttrEntry": {1: ("key", "str", None), 2: ("value", "msg", "AttrValue")},
    "AttrValue": {1: ("list", "msg", "ListValue"), 2: ("s", "str", None), 3: ("i", "int", None),
                  5: ("b", "bool", None), 6: ("type", "enum", None),
                  7: ("shape", "msg", "TensorShapeProto"), 8: ("tensor", "msg", "TensorProto")},
    "ListValue": {2: ("s", "str", None), 3: ("i", "packed", None), 7: ("shape", "msg", "TensorShapeProto")},
    "TensorShapeProto": {2: ("dim", "msg", "Dim"), 3: ("unknown_rank", "bool", None)},
    "Dim": {1: ("size", "int", None)},
    "TensorProto": {1: ("dtype", "enum", None), 2: ("tensor_shape", "msg", "TensorShapeProto"),
                    4: ("tensor_content", "bytes", None), 5: ("float_val", "packedf", None),
                    7: ("int_val", "packed", None), 10: ("int64_val", "packed", None)},
}
ENUM = {1: "DT_FLOAT", 3: "DT_INT32", 9: "DT_INT64"}


def read_varint(b, i):
    n = shift = 0
    while True:
        c = b[i]
        i += 1
        n |= (c & 0x7F) << shift
        shift += 7
        if not c & 0x80:
            return n, i


def signed(n):
    return n - (1 << 64) if n >= 1 << 63 else n


def to_text(b, kind, ind):
    out = ""
    i = 0
    while i < len(b):
        key, i = read_varint(b, i)
        num, wire = key >> 3, key & 7
        name, k, sub = SCHEMA[kind][num]
        if wire == 0:
            v, i = read_varint(b, i)
            if k == "enum":
                out += f"{ind}{name}: {ENUM[v]}\n"
            elif k == "bool":
                out += f"{ind}{name}: {'true' if v else 'false'}\n"
            else:
                out += f"{ind}{name}: {signed(v)}\n"
            continue
        length, i = read_varint(b, i)
        payload = b[i:i + length]
        i += length
        if k == "msg":
            out += f"{ind}{name} {{\n" + to_text(payload, sub, ind + "  ") + f"{ind}}}\n"
        elif k == "str":
            out += f'{ind}{name}: "{payload.decode()}"\n'
        elif k == "bytes":
            out += f'{ind}{name}: "' + "".join(f"\\{c:03o}" for c in payload) + '"\n'
        elif k == "packed":
            j = 0
            while j < len(payload):
                v, j = read_varint(payload, j)
                out += f"{ind}{name}: {signed(v)}\n"
        elif k == "packedf":
            for (v,) in struct.iter_unpack("<f", payload):
                out += f"{ind}{name}: {v!r}\n"
    return out


def pbtxt_from_binary(b):
    return to_text(b, "GraphDef", "")


# ---- TFRecord framing and Event messages (tensorflow/core/util/event.proto) ----
def crc32c(data):
    crc = 0xFFFFFFFF
    for b in data:
        crc ^= b
        for _ in range(8):
            crc = (crc >> 1) ^ (0x82F63B78 if crc & 1 else 0)
    return crc ^ 0xFFFFFFFF


def masked(crc):
    return ((((crc >> 15) | (crc << 17)) & 0xFFFFFFFF) + 0xA282EAD8) & 0xFFFFFFFF


def record(data):
    length = struct.pack("<Q", len(data))
    return (length + struct.pack("<I", masked(crc32c(length))) + data +
            struct.pack("<I", masked(crc32c(data))))


def event(wall_time, step, what):  # wall_time = 1 (a double: wire type 1), step = 2, the oneof
    return varint(1 << 3 | 1) + struct.pack("<d", wall_time) + field(2, 0, step) + what


def write_events(path, graph_bytes):
    out = record(event(1700000000.0, 0, string(3, "brain.Event:2")))       # file_version = 3
    out += record(event(1700000000.5, 0, string(4, graph_bytes)))           # graph_def = 4
    for step in range(1, 101):
        value = string(1, "loss") + field(2, 5, struct.pack("<f", 2.0 / step))  # tag, simple_value
        out += record(event(1700000001.0 + step, step, msg(5, msg(1, value))))  # summary = 5
        if step % 10 == 0:
            meta = msg(1, string(1, "scalars"))  # SummaryMetadata.plugin_data.plugin_name
            tensor = field(1, 0, DT_FLOAT) + msg(2, b"") + string(5, struct.pack("<f", step / 100))
            value = string(1, "accuracy") + msg(9, meta) + msg(8, tensor)
            out += record(event(1700000001.0 + step, step, msg(5, msg(1, value))))
    histo = b"".join(varint(n << 3 | 1) + struct.pack("<d", v)  # min = 1, max = 2, num = 3
                     for n, v in ((1, -1.0), (2, 3.0), (3, 1000.0)))
    out += record(event(1700000200.0, 100, msg(5, msg(1, string(1, "weights") + msg(5, histo)))))
    open(path, "wb").write(out)


if __name__ == "__main__":
    main()

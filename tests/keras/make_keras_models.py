#!/usr/bin/env python3
"""Writes Keras .h5 model files for Runnel's Keras import tests, laid out as Keras writes them
(the `model_config` JSON root attribute, `model_weights/<layer>/...` datasets with Keras 2's
`<layer>/<name>:0` or Keras 3's `<model>/<layer>/<name>` weight paths, `weight_names` and
`layer_names` attributes), with h5py, and the models' outputs computed by NumPy.

usage: make_keras_models.py OUTDIR
Writes in OUTDIR, for each model M: M.h5, M_in.npy (the input) and M_out.npy (NumPy's output):
  mlp_k2       Sequential, Keras 2: Dense(16, relu) -> Dropout -> BatchNormalization -> Dense(3, softmax)
  cnn_k3       Functional, Keras 3: Conv2D(4, 3x3, same, relu) -> MaxPooling2D -> Conv2D(6, 3x3,
               valid, strides 1) -> AveragePooling2D -> Flatten -> Dense(10) -> Activation(softmax)
  rnn_k2       Sequential, Keras 2: Embedding(50, 8) -> LSTM(5, sequences) -> GRU(4, reset_after) -> Dense(2)
  gru_k3       Functional, Keras 3: Input(6, 3) -> GRU(4, reset_after=False, tanh/hard_sigmoid) -> Dense(1)
and unsupported.h5 (a Lambda and a MultiHeadAttention layer).
"""
import json
import os
import sys

import h5py
import numpy as np

rng = np.random.default_rng(11)


def w(*shape, scale=0.5):
    return (rng.standard_normal(shape) * scale).astype(np.float32)


def sigmoid(x):
    return 1 / (1 + np.exp(-x))


def hard_sigmoid_k3(x):
    return np.clip(x / 6 + 0.5, 0, 1)


def act(name, x):
    return {"linear": lambda v: v, "relu": lambda v: np.maximum(v, 0), "tanh": np.tanh,
            "sigmoid": sigmoid, "hard_sigmoid": hard_sigmoid_k3,
            "softmax": lambda v: np.exp(v - v.max(-1, keepdims=True)) /
            np.exp(v - v.max(-1, keepdims=True)).sum(-1, keepdims=True)}[name](x)


def save(path, config, weights, keras_version, model_name):
    """weights: [(layer, {name: array})] in layer order."""
    with h5py.File(path, "w") as f:
        # Bytes (an ASCII string) for Keras 2 files, str (a UTF-8 string) for Keras 3's: both
        # occur, and HDF5 does not convert between the two character sets by itself.
        text = json.dumps(config)
        f.attrs["model_config"] = text.encode("utf8") if keras_version.startswith("2") else text
        f.attrs["keras_version"] = keras_version.encode("utf8")
        f.attrs["backend"] = b"tensorflow"
        g = f.create_group("model_weights")
        layer_names = [l["config"]["name"] for l in config["config"]["layers"]]
        g.attrs["layer_names"] = [n.encode("utf8") for n in layer_names]
        for layer in layer_names:
            lg = g.create_group(layer)
            names = []
            for wname, value in dict(weights).get(layer, {}).items():
                if keras_version.startswith("2"):
                    # Keras 2: <layer>/<layer>/<name>:0 (a recurrent layer's cell one level down)
                    cell = wname.split("/")
                    path = f"{layer}/" + "/".join(cell[:-1] + [cell[-1] + ":0"])
                else:
                    path = f"{model_name}/{layer}/{wname.split('/')[-1]}"
                lg.create_dataset(path, data=value)
                names.append(path.encode("utf8"))
            lg.attrs["weight_names"] = names


def layer(cls, name, inbound=None, k3=False, **cfg):
    cfg = dict(cfg, name=name, trainable=True, dtype="float32")
    out = {"class_name": cls, "config": cfg}
    if k3:
        out["module"] = "keras.layers"
        out["name"] = name
    if inbound is not None:
        if k3:  # Keras 3's nodes: keras tensors naming (layer, node, tensor)
            out["inbound_nodes"] = [{"args": [{"class_name": "__keras_tensor__", "config": {
                "shape": None, "dtype": "float32", "keras_history": [inbound, 0, 0]}}], "kwargs": {}}]
        else:   # Keras 2's: [[[layer, node, tensor, kwargs]]]
            out["inbound_nodes"] = [[[inbound, 0, 0, {}]]]
    elif k3 and cls != "InputLayer":
        out["inbound_nodes"] = []
    return out


def mlp_k2(out):
    x = rng.random((5, 8), dtype=np.float32)
    k1, b1 = w(8, 16), w(16, scale=0.1)
    gamma, beta = w(16, scale=0.2) + 1, w(16, scale=0.1)
    mean, var = w(16, scale=0.3), np.abs(w(16)) + 0.5
    k2, b2 = w(16, 3), w(3, scale=0.1)
    config = {"class_name": "Sequential", "config": {"name": "sequential", "layers": [
        layer("InputLayer", "dense_input", batch_input_shape=[None, 8], sparse=False, ragged=False),
        layer("Dense", "dense", units=16, activation="relu", use_bias=True),
        layer("Dropout", "dropout", rate=0.5),
        layer("BatchNormalization", "batch_normalization", axis=[1], momentum=0.99,
              epsilon=0.001, center=True, scale=True),
        layer("Dense", "dense_1", units=3, activation="softmax", use_bias=True)]}}
    save(f"{out}/mlp_k2.h5", config, [
        ("dense", {"kernel": k1, "bias": b1}),
        ("batch_normalization", {"gamma": gamma, "beta": beta, "moving_mean": mean,
                                 "moving_variance": var}),
        ("dense_1", {"kernel": k2, "bias": b2})], "2.11.0", "sequential")
    h = np.maximum(x @ k1 + b1, 0)
    h = gamma * (h - mean) / np.sqrt(var + 0.001) + beta
    return x, act("softmax", h @ k2 + b2)


def conv_same(x, k, stride=1, padding="same"):
    n, hgt, wid, c = x.shape
    kh, kw, _, o = k.shape
    if padding == "same":
        oh, ow = -(-hgt // stride), -(-wid // stride)
        ph, pw = max((oh - 1) * stride + kh - hgt, 0), max((ow - 1) * stride + kw - wid, 0)
        x = np.pad(x, ((0, 0), (ph // 2, ph - ph // 2), (pw // 2, pw - pw // 2), (0, 0)))
    else:
        oh, ow = (hgt - kh) // stride + 1, (wid - kw) // stride + 1
    out = np.zeros((n, oh, ow, o))
    for i in range(kh):
        for j in range(kw):
            out += x[:, i:i + stride * oh:stride, j:j + stride * ow:stride, :] @ k[i, j]
    return out


def pool(x, mode):
    n, hgt, wid, c = x.shape
    x = x[:, :hgt // 2 * 2, :wid // 2 * 2, :].reshape(n, hgt // 2, 2, wid // 2, 2, c)
    return x.max(axis=(2, 4)) if mode == "max" else x.mean(axis=(2, 4))


def cnn_k3(out):
    x = rng.random((3, 12, 12, 1), dtype=np.float32)
    k1, b1 = w(3, 3, 1, 4), w(4, scale=0.1)
    k2, b2 = w(3, 3, 4, 6, scale=0.3), w(6, scale=0.1)
    k3, b3 = w(24, 10, scale=0.3), w(10, scale=0.1)
    conv = dict(kernel_size=[3, 3], strides=[1, 1], data_format="channels_last",
                dilation_rate=[1, 1], groups=1, use_bias=True)
    layers = [
        layer("InputLayer", "input_layer", k3=True, batch_shape=[None, 12, 12, 1], sparse=False),
        layer("Conv2D", "conv2d", "input_layer", k3=True, filters=4, padding="same",
              activation="relu", **conv),
        layer("MaxPooling2D", "max_pooling2d", "conv2d", k3=True, pool_size=[2, 2],
              strides=[2, 2], padding="valid", data_format="channels_last"),
        layer("Conv2D", "conv2d_1", "max_pooling2d", k3=True, filters=6, padding="valid",
              activation="linear", **conv),
        layer("AveragePooling2D", "average_pooling2d", "conv2d_1", k3=True, pool_size=[2, 2],
              strides=None, padding="valid", data_format="channels_last"),
        layer("Flatten", "flatten", "average_pooling2d", k3=True, data_format="channels_last"),
        layer("Dense", "dense", "flatten", k3=True, units=10, activation="linear", use_bias=True),
        layer("Activation", "activation", "dense", k3=True, activation="softmax")]
    config = {"module": "keras.src.models.functional", "class_name": "Functional",
              "config": {"name": "functional", "trainable": True, "layers": layers,
                         "input_layers": [["input_layer", 0, 0]],
                         "output_layers": [["activation", 0, 0]]}}
    save(f"{out}/cnn_k3.h5", config, [("conv2d", {"kernel": k1, "bias": b1}),
                                      ("conv2d_1", {"kernel": k2, "bias": b2}),
                                      ("dense", {"kernel": k3, "bias": b3})], "3.3.3", "functional")
    h = np.maximum(conv_same(x, k1) + b1, 0)
    h = pool(h, "max")
    h = conv_same(h, k2, padding="valid") + b2
    h = pool(h, "avg").reshape(3, -1)
    return x, act("softmax", h @ k3 + b3)


def lstm(xs, k, r, b, units, seq):
    n, t, _ = xs.shape
    h, c = np.zeros((n, units)), np.zeros((n, units))
    outs = []
    for s in range(t):
        z = xs[:, s] @ k + h @ r + b
        i, f, g, o = (z[:, q * units:(q + 1) * units] for q in range(4))
        c = sigmoid(f) * c + sigmoid(i) * np.tanh(g)
        h = sigmoid(o) * np.tanh(c)
        outs.append(h)
    return np.stack(outs, 1) if seq else h


def gru(xs, k, r, b, units, reset_after, rec_act="sigmoid"):
    n, t, _ = xs.shape
    h = np.zeros((n, units))
    ra = lambda v: act(rec_act, v)
    for s in range(t):
        if reset_after:
            xz = xs[:, s] @ k + b[0]
            hz = h @ r + b[1]
            z = ra(xz[:, :units] + hz[:, :units])
            rr = ra(xz[:, units:2 * units] + hz[:, units:2 * units])
            hh = np.tanh(xz[:, 2 * units:] + rr * hz[:, 2 * units:])
        else:
            xz = xs[:, s] @ k + b
            z = ra(xz[:, :units] + h @ r[:, :units])
            rr = ra(xz[:, units:2 * units] + h @ r[:, units:2 * units])
            hh = np.tanh(xz[:, 2 * units:] + (rr * h) @ r[:, 2 * units:])
        h = z * h + (1 - z) * hh
    return h


def rnn_k2(out):
    ids = rng.integers(0, 50, (4, 6)).astype(np.float32)  # Keras feeds ids as float32 by default
    emb = w(50, 8)
    lk, lr, lb = w(8, 20), w(5, 20), w(20, scale=0.1)
    gk, gr, gb = w(5, 12), w(4, 12), w(2, 12, scale=0.1)
    dk, db = w(4, 2), w(2, scale=0.1)
    rnn = dict(return_state=False, go_backwards=False, stateful=False, unroll=False,
               time_major=False, use_bias=True, dropout=0.0, recurrent_dropout=0.0)
    config = {"class_name": "Sequential", "config": {"name": "sequential_1", "layers": [
        layer("InputLayer", "embedding_input", batch_input_shape=[None, 6], dtype="float32"),
        layer("Embedding", "embedding", input_dim=50, output_dim=8, input_length=6,
              mask_zero=False),
        layer("LSTM", "lstm", units=5, activation="tanh", recurrent_activation="sigmoid",
              return_sequences=True, unit_forget_bias=True, **rnn),
        layer("GRU", "gru", units=4, activation="tanh", recurrent_activation="sigmoid",
              return_sequences=False, reset_after=True, **rnn),
        layer("Dense", "dense_2", units=2, activation="linear", use_bias=True)]}}
    save(f"{out}/rnn_k2.h5", config, [
        ("embedding", {"embeddings": emb}),
        ("lstm", {"lstm_cell/kernel": lk, "lstm_cell/recurrent_kernel": lr, "lstm_cell/bias": lb}),
        ("gru", {"gru_cell/kernel": gk, "gru_cell/recurrent_kernel": gr, "gru_cell/bias": gb}),
        ("dense_2", {"kernel": dk, "bias": db})], "2.11.0", "sequential_1")
    h = emb[ids.astype(np.int64)]
    h = lstm(h, lk, lr, lb, 5, True)
    h = gru(h, gk, gr, gb, 4, True)
    return ids, h @ dk + db


def gru_k3(out):
    x = rng.random((4, 6, 3), dtype=np.float32)
    gk, gr, gb = w(3, 12), w(4, 12), w(12, scale=0.1)
    dk, db = w(4, 1), w(1, scale=0.1)
    layers = [
        layer("InputLayer", "inputs", k3=True, batch_shape=[None, 6, 3]),
        layer("GRU", "gru", "inputs", k3=True, units=4, activation="tanh",
              recurrent_activation="hard_sigmoid", return_sequences=False, reset_after=False,
              use_bias=True, go_backwards=False, stateful=False, unroll=False),
        layer("Dense", "score", "gru", k3=True, units=1, activation="linear", use_bias=True)]
    config = {"module": "keras.src.models.functional", "class_name": "Functional",
              "config": {"name": "scorer", "layers": layers, "input_layers": [["inputs", 0, 0]],
                         "output_layers": [["score", 0, 0]]}}
    save(f"{out}/gru_k3.h5", config, [("gru", {"kernel": gk, "recurrent_kernel": gr, "bias": gb}),
                                      ("score", {"kernel": dk, "bias": db})], "3.3.3", "scorer")
    return x, gru(x, gk, gr, gb, 4, False, "hard_sigmoid") @ dk + db


def unsupported(out):
    config = {"class_name": "Sequential", "config": {"name": "odd", "layers": [
        layer("InputLayer", "x", batch_input_shape=[None, 4]),
        layer("Lambda", "lambda", function="x * 2"),
        layer("Dense", "dense", units=2, activation="linear", use_bias=False),
        layer("MultiHeadAttention", "attention", num_heads=2, key_dim=2)]}}
    save(f"{out}/unsupported.h5", config, [("dense", {"kernel": w(4, 2)})], "2.11.0", "odd")


def main():
    out = sys.argv[1]
    os.makedirs(out, exist_ok=True)
    for name, make in (("mlp_k2", mlp_k2), ("cnn_k3", cnn_k3), ("rnn_k2", rnn_k2),
                       ("gru_k3", gru_k3)):
        x, y = make(out)
        np.save(f"{out}/{name}_in.npy", x)
        np.save(f"{out}/{name}_out.npy", y.astype(np.float32))
    unsupported(out)


if __name__ == "__main__":
    main()

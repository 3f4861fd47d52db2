"""Neural-network ops (tf.nn)."""
from . import api as _api
from . import framework as _fw
from . import raw_ops as _raw


def relu(features, name=None):
    return _raw.Relu(features, name=name)


def relu6(features, name=None):
    return _raw.Relu6(features, name=name)


def elu(features, name=None):
    return _raw.Elu(features, name=name)


def selu(features, name=None):
    return _raw.Selu(features, name=name)


def softplus(features, name=None):
    return _raw.Softplus(features, name=name)


def softsign(features, name=None):
    return _raw.Softsign(features, name=name)


def sigmoid(x, name=None):
    return _raw.Sigmoid(x, name=name)


def tanh(x, name=None):
    return _raw.Tanh(x, name=name)


def _last_axis(op, logits, axis, name):
    logits = _fw.convert_to_tensor(logits)
    rank = logits.shape.ndims
    if axis in (None, -1) or (rank is not None and axis == rank - 1):
        return op(logits, name=name)
    perm = list(range(rank))
    perm[axis], perm[-1] = perm[-1], perm[axis]
    return _api.transpose(op(_api.transpose(logits, perm)), perm, name=name)


def softmax(logits, axis=None, name=None, dim=None):
    return _last_axis(_raw.Softmax, logits, dim if axis is None else axis, name)


def log_softmax(logits, axis=None, name=None, dim=None):
    return _last_axis(_raw.LogSoftmax, logits, dim if axis is None else axis, name)


def bias_add(value, bias, data_format=None, name=None):
    return _raw.BiasAdd(value, bias, name=name)


def xw_plus_b(x, weights, biases, name=None):
    return bias_add(_api.matmul(x, weights), biases, name=name)


def sparse_softmax_cross_entropy_with_logits(_sentinel=None, labels=None, logits=None,
                                             name=None):
    """The loss per example (TensorFlow's keyword-only form: labels=, logits=); labels of any
    rank r with logits of rank r + 1 (a decoder's [batch, time] against [batch, time, vocab])
    give losses shaped as the labels."""
    if _sentinel is not None:
        raise ValueError("sparse_softmax_cross_entropy_with_logits takes labels= and logits=")
    logits, labels = _fw.convert_to_tensor(logits), _fw.convert_to_tensor(labels)
    if (logits.shape.ndims or 0) > 2 or (labels.shape.ndims or 0) > 1:
        depth = logits.shape.dims[-1] if logits.shape.dims else None
        flat_logits = (_api.reshape(logits, [-1, int(depth)]) if depth is not None else
                       _api.reshape(logits, _api.stack([-1, _api.shape(logits)[-1]])))
        loss, _ = _raw.SparseSoftmaxCrossEntropyWithLogits(flat_logits,
                                                            _api.reshape(labels, [-1]))
        return _api.reshape(loss, _api.shape(labels), name=name)
    loss, _backprop = _raw.SparseSoftmaxCrossEntropyWithLogits(logits, labels, name=name)
    return loss


def softmax_cross_entropy_with_logits(_sentinel=None, labels=None, logits=None, dim=-1,
                                      name=None, axis=None):
    if _sentinel is not None:
        raise ValueError("softmax_cross_entropy_with_logits takes labels= and logits=")
    loss, _backprop = _raw.SoftmaxCrossEntropyWithLogits(logits, labels, name=name)
    return loss


softmax_cross_entropy_with_logits_v2 = softmax_cross_entropy_with_logits


def l2_loss(t, name=None):
    return _raw.L2Loss(t, name=name)


def conv2d(input, filter=None, strides=None, padding=None, use_cudnn_on_gpu=True,
           data_format="NHWC", dilations=None, name=None, filters=None):
    filter = filters if filter is None else filter
    return _raw.Conv2D(input, filter, strides=list(strides), padding=padding,
                       data_format=data_format, name=name)


def max_pool(value, ksize, strides, padding, data_format="NHWC", name=None, input=None):
    value = input if value is None else value
    return _raw.MaxPool(value, ksize=list(ksize), strides=list(strides), padding=padding,
                        name=name)


def avg_pool(value, ksize, strides, padding, data_format="NHWC", name=None):
    return _raw.AvgPool(value, ksize=list(ksize), strides=list(strides), padding=padding,
                        name=name)


def dropout(x, keep_prob=None, noise_shape=None, seed=None, name=None, rate=None):
    """Keeps each element with probability keep_prob (or 1 - rate), scaled by 1/keep_prob."""
    if keep_prob is None:
        keep_prob = 1.0 - (rate or 0.0)
    x = _fw.convert_to_tensor(x)
    keep = _fw.convert_to_tensor(keep_prob, dtype=x.dtype, graph=x.graph)
    shape = noise_shape if noise_shape is not None else x.shape.dims
    if shape is None or any(d is None for d in shape):
        # A shape known only at run time (a batch of None): the noise takes it from x.
        from . import _runnel
        s1, s2 = _runnel._seeds(x.graph._g, int(seed or 0))
        noise = _raw.RandomUniform(_api.shape(x) if noise_shape is None else noise_shape,
                                   dtype=x.dtype, seed=s1, seed2=s2)
    else:
        noise = _api.random_uniform(shape, dtype=x.dtype, seed=seed)
    mask = _raw.Floor(keep + noise)
    return _raw.Mul(_raw.Div(x, keep), mask, name=name)


def embedding_lookup(params, ids, name=None):
    if isinstance(params, (list, tuple)):
        if len(params) != 1:
            raise ValueError("embedding_lookup over several shards: concatenate them first")
        params = params[0]
    return _api.gather(params, ids, name=name)


def in_top_k(predictions, targets, k, name=None):
    return _raw.InTopK(predictions, targets, k=k, name=name)


def top_k(input, k=1, sorted=True, name=None):
    return _raw.TopKV2(input, k, sorted=sorted, name=name)


def moments(x, axes, keepdims=False, name=None):
    mean = _api.reduce_mean(x, axes, keepdims=True)
    variance = _api.reduce_mean(_raw.SquaredDifference(x, _api.stop_gradient(mean)), axes,
                                keepdims=keepdims)
    if not keepdims:
        mean = _api.squeeze(mean, axes)
    return mean, variance



# ---- recurrent networks (python/runnel/rnn.py) ----------------------------------------------
from types import SimpleNamespace as _Namespace  # noqa: E402

from . import rnn as _rnn  # noqa: E402
from .rnn import dynamic_rnn, bidirectional_dynamic_rnn, static_rnn  # noqa: E402,F401

#: tf.nn.rnn_cell
rnn_cell = _Namespace(RNNCell=_rnn.RNNCell, BasicRNNCell=_rnn.BasicRNNCell,
                      DropoutWrapper=_rnn.DropoutWrapper, ResidualWrapper=_rnn.ResidualWrapper,
                      BasicLSTMCell=_rnn.BasicLSTMCell, LSTMCell=_rnn.LSTMCell,
                      LSTMBlockCell=_rnn.LSTMBlockCell, GRUCell=_rnn.GRUCell,
                      MultiRNNCell=_rnn.MultiRNNCell, LSTMStateTuple=_rnn.LSTMStateTuple)

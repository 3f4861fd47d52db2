"""``tf.layers``: TensorFlow 1.x's functional layers, as scripts of its era build models.

    h = tf.layers.conv2d(images, 32, 5, padding="same", activation=tf.nn.relu)
    h = tf.layers.max_pooling2d(h, 2, 2)
    h = tf.layers.dense(tf.layers.flatten(h), 1024, activation=tf.nn.relu)
    h = tf.layers.dropout(h, rate=0.4, training=is_training)
    logits = tf.layers.dense(h, 10)

Each layer opens a variable scope named as TensorFlow names it ("dense", "dense_1", ...; or
``name``), so its variables are ``dense/kernel`` and ``dense/bias`` as in a TensorFlow checkpoint,
and ``reuse=True`` shares them. ``batch_normalization`` puts its moving-average updates in
``tf.GraphKeys.UPDATE_OPS``, to be run with the train op, as in TensorFlow.

The class forms (``Dense``, ``Conv2D``, ``BatchNormalization``, ``MaxPooling2D``,
``AveragePooling2D``, ``Flatten``, ``Dropout``) take the same arguments less the inputs; one
object's calls share the variables its first call made (``training`` goes to each call).
"""
import inspect as _inspect

from . import api as _api
from . import dtypes as _dtypes
from . import framework as _fw
from . import initializers as _init
from . import nn as _nn
from . import raw_ops as _raw
from .control_flow import cond as _cond
from .variable_scope import get_variable as _get_variable, variable_scope as _variable_scope


class GraphKeys:
    """Collection names, as TensorFlow 1.x calls them."""
    UPDATE_OPS = "update_ops"
    GLOBAL_VARIABLES = "variables"
    TRAINABLE_VARIABLES = "trainable_variables"


def _pair(value, what, layer):
    """An int or a pair of ints, as a pair."""
    if isinstance(value, int):
        return (value, value)
    value = tuple(value)
    if len(value) != 2 or not all(isinstance(v, int) for v in value):
        raise ValueError("%s: %s must be an int or two ints, got %r" % (layer, what, value))
    return value


def _padding(padding, layer):
    p = str(padding).upper()
    if p not in ("SAME", "VALID"):
        raise ValueError("%s: padding must be 'same' or 'valid', got %r" % (layer, padding))
    return p


def _channels_last(data_format, layer):
    if data_format not in ("channels_last", "NHWC"):
        raise ValueError("%s: only data_format='channels_last' (NHWC) is supported, got %r; "
                         "transpose the input first" % (layer, data_format))


def _last_dim(inputs, layer):
    dims = inputs.shape.dims
    if dims is None or not dims or dims[-1] is None:
        raise ValueError("%s: the last dimension of the input must be known, but the input "
                         "'%s' has shape %s" % (layer, inputs.name, inputs.shape))
    return int(dims[-1])


def _training_switch(training, when_training, otherwise):
    """when_training() if ``training`` is True, otherwise() if False; a boolean tensor picks
    one of the two at run time."""
    if isinstance(training, bool):
        return when_training() if training else otherwise()
    return _cond(_fw.convert_to_tensor(training, dtype=_dtypes.bool), when_training, otherwise)


def dense(inputs, units, activation=None, use_bias=True, kernel_initializer=None,
          bias_initializer=None, kernel_regularizer=None, bias_regularizer=None,
          activity_regularizer=None, kernel_constraint=None, bias_constraint=None,
          trainable=True, name=None, reuse=None):
    """``activation(inputs @ kernel + bias)`` over the last axis of inputs of any rank >= 2."""
    _unsupported("dense", kernel_regularizer=kernel_regularizer, bias_regularizer=bias_regularizer,
                 activity_regularizer=activity_regularizer, kernel_constraint=kernel_constraint,
                 bias_constraint=bias_constraint)
    inputs = _fw.convert_to_tensor(inputs)
    with _variable_scope(name, default_name="dense", values=[inputs], reuse=reuse):
        return _dense_body(inputs, units, activation, use_bias, kernel_initializer,
                           bias_initializer, trainable)[0]


def _dense_body(inputs, units, activation, use_bias, kernel_initializer, bias_initializer,
                trainable):
    """dense()'s ops and variables, in the scope the caller opened: (output, kernel, bias)."""
    depth = _last_dim(inputs, "dense")
    kernel = _get_variable("kernel", [depth, int(units)], dtype=inputs.dtype,
                           initializer=kernel_initializer, trainable=trainable)
    rank = len(inputs.shape.dims)
    if rank == 2:
        out = _api.matmul(inputs, kernel)
    else:
        # Rows of any leading shape: one product over all of them, then the shape back.
        flat = _api.reshape(inputs, [-1, depth])
        lead = _raw.StridedSlice(_api.shape(inputs), [0], [rank - 1], [1])
        out = _api.reshape(_api.matmul(flat, kernel), _api.concat([lead, [int(units)]], 0))
    bias = None
    if use_bias:
        bias = _get_variable("bias", [int(units)], dtype=inputs.dtype,
                             initializer=bias_initializer or _init.zeros_initializer(),
                             trainable=trainable)
        out = _nn.bias_add(out, bias)
    return (activation(out) if activation is not None else out), kernel, bias


class Dense:
    """dense() as an object (``tf.layers.Dense``): its variables are made by the first call,
    under the scope current then ("dense", "dense_1", ... or ``name``), and every later call
    uses them (a decoder's ``output_layer`` called once per step)."""

    def __init__(self, units, activation=None, use_bias=True, kernel_initializer=None,
                 bias_initializer=None, kernel_regularizer=None, bias_regularizer=None,
                 activity_regularizer=None, kernel_constraint=None, bias_constraint=None,
                 trainable=True, name=None, **kwargs):
        _unsupported("Dense", kernel_regularizer=kernel_regularizer,
                     bias_regularizer=bias_regularizer, activity_regularizer=activity_regularizer,
                     kernel_constraint=kernel_constraint, bias_constraint=bias_constraint)
        if kwargs:
            raise TypeError("tf.layers.Dense: unexpected arguments %s" % sorted(kwargs))
        self.units, self.activation, self.use_bias = int(units), activation, use_bias
        self.kernel_initializer, self.bias_initializer = kernel_initializer, bias_initializer
        self.trainable, self.name = trainable, name
        self.kernel = self.bias = None
        self._scope = None

    built = property(lambda self: self._scope is not None)

    def __call__(self, inputs):
        inputs = _fw.convert_to_tensor(inputs)
        args = (self.units, self.activation, self.use_bias, self.kernel_initializer,
                self.bias_initializer, self.trainable)
        if self._scope is not None:
            with _variable_scope(self._scope, reuse=True):
                return _dense_body(inputs, *args)[0]
        with _variable_scope(self.name, default_name="dense", values=[inputs]) as scope:
            out, self.kernel, self.bias = _dense_body(inputs, *args)
            self._scope = scope
            return out

    apply = __call__

    @property
    def variables(self):
        return [v for v in (self.kernel, self.bias) if v is not None]

    trainable_variables = trainable_weights = weights = variables


def dropout(inputs, rate=0.5, noise_shape=None, seed=None, training=False, name=None):
    """Drops each element with probability ``rate`` while ``training`` (a bool or a boolean
    tensor), scaling the rest by 1 / (1 - rate); the identity otherwise."""
    inputs = _fw.convert_to_tensor(inputs)
    with _fw.get_default_graph().name_scope(name or "dropout"):
        return _training_switch(
            training,
            lambda: _nn.dropout(inputs, rate=rate, noise_shape=noise_shape, seed=seed),
            lambda: _api.identity(inputs))


def conv2d(inputs, filters, kernel_size, strides=(1, 1), padding="valid",
           data_format="channels_last", dilation_rate=(1, 1), activation=None, use_bias=True,
           kernel_initializer=None, bias_initializer=None, kernel_regularizer=None,
           bias_regularizer=None, activity_regularizer=None, kernel_constraint=None,
           bias_constraint=None, trainable=True, name=None, reuse=None):
    """A 2-D convolution over NHWC inputs: ``kernel`` of shape [kh, kw, in, filters]."""
    _unsupported("conv2d", kernel_regularizer=kernel_regularizer,
                 bias_regularizer=bias_regularizer, activity_regularizer=activity_regularizer,
                 kernel_constraint=kernel_constraint, bias_constraint=bias_constraint)
    _channels_last(data_format, "conv2d")
    if _pair(dilation_rate, "dilation_rate", "conv2d") != (1, 1):
        raise ValueError("conv2d: dilation_rate other than 1 is not supported, got %r"
                         % (dilation_rate,))
    inputs = _fw.convert_to_tensor(inputs)
    kh, kw = _pair(kernel_size, "kernel_size", "conv2d")
    sh, sw = _pair(strides, "strides", "conv2d")
    depth = _last_dim(inputs, "conv2d")
    with _variable_scope(name, default_name="conv2d", values=[inputs], reuse=reuse):
        kernel = _get_variable("kernel", [kh, kw, depth, int(filters)], dtype=inputs.dtype,
                               initializer=kernel_initializer, trainable=trainable)
        out = _nn.conv2d(inputs, kernel, strides=[1, sh, sw, 1],
                         padding=_padding(padding, "conv2d"))
        if use_bias:
            bias = _get_variable("bias", [int(filters)], dtype=inputs.dtype,
                                 initializer=bias_initializer or _init.zeros_initializer(),
                                 trainable=trainable)
            out = _nn.bias_add(out, bias)
        return activation(out) if activation is not None else out


def _pooling(op, layer, inputs, pool_size, strides, padding, data_format, name):
    _channels_last(data_format, layer)
    ph, pw = _pair(pool_size, "pool_size", layer)
    sh, sw = _pair(strides, "strides", layer)
    return op(_fw.convert_to_tensor(inputs), [1, ph, pw, 1], [1, sh, sw, 1],
              _padding(padding, layer), name=name)


def max_pooling2d(inputs, pool_size, strides, padding="valid", data_format="channels_last",
                  name=None):
    """The maximum of each window, over NHWC inputs."""
    return _pooling(_nn.max_pool, "max_pooling2d", inputs, pool_size, strides, padding,
                    data_format, name)


def average_pooling2d(inputs, pool_size, strides, padding="valid", data_format="channels_last",
                      name=None):
    """The mean of each window, over NHWC inputs."""
    return _pooling(_nn.avg_pool, "average_pooling2d", inputs, pool_size, strides, padding,
                    data_format, name)


def flatten(inputs, name=None, data_format="channels_last"):
    """Each example's values as one row: [batch, d1 * d2 * ...]."""
    _channels_last(data_format, "flatten")
    inputs = _fw.convert_to_tensor(inputs)
    dims = inputs.shape.dims
    if dims is not None and all(d is not None for d in dims[1:]):
        size = 1
        for d in dims[1:]:
            size *= int(d)
        return _api.reshape(inputs, [-1, size], name=name)
    # Unknown inner dimensions: the row length comes from the shape at run time.
    batch = _raw.StridedSlice(_api.shape(inputs), [0], [1], [1])
    return _api.reshape(inputs, _api.concat([batch, [-1]], 0), name=name)


def batch_normalization(inputs, axis=-1, momentum=0.99, epsilon=1e-3, center=True, scale=True,
                        beta_initializer=None, gamma_initializer=None,
                        moving_mean_initializer=None, moving_variance_initializer=None,
                        training=False, trainable=True, name=None, reuse=None, fused=None):
    """Normalizes over every axis but ``axis``: with the batch's statistics while ``training``
    (and their moving averages updated by ops in ``GraphKeys.UPDATE_OPS``), with the moving
    averages otherwise."""
    inputs = _fw.convert_to_tensor(inputs)
    dims = inputs.shape.dims
    if dims is None:
        raise ValueError("batch_normalization: the input's rank must be known")
    rank = len(dims)
    axis = axis + rank if axis < 0 else axis
    if not 0 <= axis < rank or dims[axis] is None:
        raise ValueError("batch_normalization: axis %d of input shape %s must exist and be known"
                         % (axis, inputs.shape))
    depth = int(dims[axis])
    reduce = [a for a in range(rank) if a != axis]
    # Per-channel parameters broadcast against the input: [depth] on the last axis, otherwise
    # reshaped to [1, .., depth, .., 1].
    bshape = [1] * rank
    bshape[axis] = depth

    def per_channel(t):
        return t if axis == rank - 1 else _api.reshape(t, bshape)

    with _variable_scope(name, default_name="batch_normalization", values=[inputs],
                         reuse=reuse) as scope:
        def make(var_name, initializer, default, train):
            return _get_variable(var_name, [depth], dtype=inputs.dtype,
                                 initializer=initializer or default, trainable=train)
        gamma = make("gamma", gamma_initializer, _init.ones_initializer(),
                     trainable) if scale else None
        beta = make("beta", beta_initializer, _init.zeros_initializer(),
                    trainable) if center else None
        moving_mean = make("moving_mean", moving_mean_initializer, _init.zeros_initializer(),
                           False)
        moving_var = make("moving_variance", moving_variance_initializer,
                          _init.ones_initializer(), False)

        def normalize(mean, variance):
            inv = _raw.Rsqrt(variance + epsilon)
            if gamma is not None:
                inv = inv * gamma
            shift = (beta - mean * inv) if beta is not None else -mean * inv
            return inputs * per_channel(inv) + per_channel(shift)

        if training is False:
            return normalize(moving_mean, moving_var)
        mean, variance = _nn.moments(inputs, reduce)
        # The moving averages move only while training: a boolean tensor scales the step.
        # Built outside any cond, so that the update ops can be run from the collection.
        decay = _fw.convert_to_tensor(1.0 - momentum, dtype=inputs.dtype)
        if not isinstance(training, bool):
            decay = decay * _api.cast(_fw.convert_to_tensor(training, dtype=_dtypes.bool),
                                      inputs.dtype)
        if scope.reuse is not True:
            g = _fw.get_default_graph()
            g.add_to_collection(GraphKeys.UPDATE_OPS, moving_mean.assign_sub(
                (moving_mean - _api.stop_gradient(mean)) * decay))
            g.add_to_collection(GraphKeys.UPDATE_OPS, moving_var.assign_sub(
                (moving_var - _api.stop_gradient(variance)) * decay))
        return _training_switch(training, lambda: normalize(mean, variance),
                                lambda: normalize(moving_mean, moving_var))


class _Layer:
    """A functional layer as an object (``tf.layers.Conv2D`` and the like): the arguments are
    kept, the first call makes the variables under the scope current then (the function's
    default name made unique, or ``name``), and later calls share them."""

    _function = None  # the functional form; name= and reuse= are passed to it
    _default_name = None
    _call_args = ()  # what __call__ takes besides the inputs (e.g. training)

    def __init__(self, *args, **kwargs):
        self.name = kwargs.pop("name", None)
        _check_arguments(self, args, kwargs)
        self._args, self._kwargs = args, kwargs
        self._scope = None
        self._variables = []

    built = property(lambda self: self._scope is not None)

    def __call__(self, inputs, **call_kwargs):
        unknown = sorted(set(call_kwargs) - set(self._call_args))
        if unknown:
            raise TypeError("tf.layers.%s: unexpected call arguments %s"
                            % (type(self).__name__, unknown))
        inputs = _fw.convert_to_tensor(inputs)
        kwargs = dict(self._kwargs, **call_kwargs)
        fn = type(self)._function
        if self._scope is not None:
            return fn(inputs, *self._args, name=self._scope, reuse=True, **kwargs)
        before = set(v.name for v in _variables_now())
        with _variable_scope(self.name, default_name=self._default_name,
                             values=[inputs]) as scope:
            out = fn(inputs, *self._args, name=scope, **kwargs)
        self._scope = scope
        self._variables = [v for v in _variables_now() if v.name not in before]
        return out

    apply = __call__

    @property
    def variables(self):
        return list(self._variables)

    trainable_variables = trainable_weights = weights = variables


def _check_arguments(layer, args, kwargs):
    """Raises now, not at the first call, for arguments the layer's function does not take
    (or takes per call, as ``training``) and for the regularizers and constraints not
    supported."""
    kind = type(layer).__name__
    fn = type(layer)._function
    per_call = sorted(set(kwargs) & set(type(layer)._call_args))
    if per_call:
        raise TypeError("tf.layers.%s: %s is given to each call, not to the constructor"
                        % (kind, ", ".join(per_call)))
    try:
        _inspect.signature(fn).bind_partial(None, *args, **kwargs)
    except TypeError as e:
        raise TypeError("tf.layers.%s: %s" % (kind, e)) from None
    _unsupported(kind, **{k: v for k, v in kwargs.items()
                          if k.endswith("_regularizer") or k.endswith("_constraint")})


def _variables_now():
    from .variables import global_variables
    return global_variables()


class Conv2D(_Layer):
    """conv2d() as an object: Conv2D(filters, kernel_size, strides=..., ...)(inputs)."""
    _function, _default_name = staticmethod(conv2d), "conv2d"


class BatchNormalization(_Layer):
    """batch_normalization() as an object; ``training`` is given to each call."""
    _function, _default_name = staticmethod(batch_normalization), "batch_normalization"
    _call_args = ("training",)


class _Stateless:
    """A layer without variables as an object: the function called with the kept arguments."""

    _function = None
    _call_args = ()

    def __init__(self, *args, **kwargs):
        self.name = kwargs.pop("name", None)
        _check_arguments(self, args, kwargs)
        self._args, self._kwargs = args, kwargs

    def __call__(self, inputs, **call_kwargs):
        unknown = sorted(set(call_kwargs) - set(self._call_args))
        if unknown:
            raise TypeError("tf.layers.%s: unexpected call arguments %s"
                            % (type(self).__name__, unknown))
        return type(self)._function(inputs, *self._args, name=self.name,
                                    **dict(self._kwargs, **call_kwargs))

    apply = __call__
    built = True
    variables = trainable_variables = trainable_weights = weights = property(lambda self: [])


class MaxPooling2D(_Stateless):
    _function = staticmethod(max_pooling2d)


class AveragePooling2D(_Stateless):
    _function = staticmethod(average_pooling2d)


class Flatten(_Stateless):
    _function = staticmethod(flatten)

    def __init__(self, data_format="channels_last", name=None):
        super().__init__(data_format=data_format, name=name)


class Dropout(_Stateless):
    """dropout() as an object; ``training`` is given to each call."""
    _function = staticmethod(dropout)
    _call_args = ("training",)


def _unsupported(layer, **args):
    given = sorted(k for k, v in args.items() if v is not None)
    if given:
        raise NotImplementedError("tf.layers.%s: %s not supported by Runnel yet"
                                  % (layer, ", ".join(given)))

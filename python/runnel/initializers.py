"""Initializers (tf.zeros_initializer, tf.glorot_uniform_initializer, ...): callables
``init(shape, dtype)`` giving a variable's initial value, for ``tf.get_variable`` and
``tf.variable_scope(initializer=...)``. Seeds combine with the graph seed as TensorFlow's do."""
import math

import numpy as np

from . import api as _api
from . import dtypes as _dtypes


class Initializer:
    dtype = None

    def _type(self, dtype):
        return _dtypes.as_dtype(dtype or self.dtype or _dtypes.float32)

    def __call__(self, shape, dtype=None, partition_info=None):
        raise NotImplementedError


class Zeros(Initializer):
    def __init__(self, dtype=None):
        self.dtype = dtype

    def __call__(self, shape, dtype=None, partition_info=None):
        return _api.zeros(list(shape), dtype=self._type(dtype))


class Ones(Initializer):
    def __init__(self, dtype=None):
        self.dtype = dtype

    def __call__(self, shape, dtype=None, partition_info=None):
        return _api.ones(list(shape), dtype=self._type(dtype))


class Constant(Initializer):
    """A scalar broadcast to the shape, or a value with as many elements (reshaped)."""

    def __init__(self, value=0, dtype=None, verify_shape=False):
        self.value, self.dtype, self.verify_shape = value, dtype, verify_shape

    def __call__(self, shape, dtype=None, partition_info=None):
        t = self._type(dtype)
        value = np.asarray(self.value)
        if self.verify_shape and list(value.shape) != list(shape):
            raise ValueError("constant_initializer: the value's shape %s is not the variable's "
                             "%s" % (list(value.shape), list(shape)))
        if value.size != 1 and value.size != int(np.prod(shape)):
            raise ValueError("constant_initializer: %d values cannot fill a variable of shape %s"
                             % (value.size, list(shape)))
        return _api.constant(value, dtype=t, shape=list(shape))


class RandomNormal(Initializer):
    def __init__(self, mean=0.0, stddev=1.0, seed=None, dtype=None):
        self.mean, self.stddev, self.seed, self.dtype = mean, stddev, seed, dtype

    def __call__(self, shape, dtype=None, partition_info=None):
        return _api.random_normal(list(shape), self.mean, self.stddev, self._type(dtype),
                                  self.seed)


class TruncatedNormal(RandomNormal):
    def __call__(self, shape, dtype=None, partition_info=None):
        return _api.truncated_normal(list(shape), self.mean, self.stddev, self._type(dtype),
                                     self.seed)


class RandomUniform(Initializer):
    def __init__(self, minval=0.0, maxval=None, seed=None, dtype=None):
        self.minval, self.maxval, self.seed, self.dtype = minval, maxval, seed, dtype

    def __call__(self, shape, dtype=None, partition_info=None):
        return _api.random_uniform(list(shape), self.minval,
                                   1.0 if self.maxval is None else self.maxval,
                                   self._type(dtype), self.seed)


def _fans(shape):
    """TensorFlow's fan-in and fan-out: the last two dimensions, times the receptive field of
    a convolution's kernel."""
    shape = [int(d) for d in shape]
    if not shape:
        return 1, 1
    if len(shape) == 1:
        return shape[0], shape[0]
    field = int(np.prod(shape[:-2])) if len(shape) > 2 else 1
    return shape[-2] * field, shape[-1] * field


class VarianceScaling(Initializer):
    """Values of variance scale / n, n the fan-in, fan-out or their mean (``mode``), drawn from
    a truncated normal or a uniform distribution."""

    def __init__(self, scale=1.0, mode="fan_in", distribution="truncated_normal", seed=None,
                 dtype=None):
        if scale <= 0:
            raise ValueError("variance_scaling_initializer: scale must be positive, got %r"
                             % (scale,))
        if mode not in ("fan_in", "fan_out", "fan_avg"):
            raise ValueError("variance_scaling_initializer: mode %r is not fan_in, fan_out or "
                             "fan_avg" % (mode,))
        if distribution == "normal":
            distribution = "truncated_normal"
        if distribution not in ("truncated_normal", "untruncated_normal", "uniform"):
            raise ValueError("variance_scaling_initializer: distribution %r is not "
                             "truncated_normal, untruncated_normal or uniform" % (distribution,))
        self.scale, self.mode, self.distribution = scale, mode, distribution
        self.seed, self.dtype = seed, dtype

    def __call__(self, shape, dtype=None, partition_info=None):
        fan_in, fan_out = _fans(shape)
        n = {"fan_in": fan_in, "fan_out": fan_out, "fan_avg": (fan_in + fan_out) / 2.0}[self.mode]
        variance = self.scale / max(1.0, n)
        t = self._type(dtype)
        if self.distribution == "uniform":
            limit = math.sqrt(3.0 * variance)
            return _api.random_uniform(list(shape), -limit, limit, t, self.seed)
        if self.distribution == "untruncated_normal":
            return _api.random_normal(list(shape), 0.0, math.sqrt(variance), t, self.seed)
        # A normal truncated at two deviations has a deviation of 0.8796 of the untruncated.
        stddev = math.sqrt(variance) / 0.87962566103423978
        return _api.truncated_normal(list(shape), 0.0, stddev, t, self.seed)


def glorot_uniform_initializer(seed=None, dtype=None):
    return VarianceScaling(1.0, "fan_avg", "uniform", seed, dtype)


def glorot_normal_initializer(seed=None, dtype=None):
    return VarianceScaling(1.0, "fan_avg", "truncated_normal", seed, dtype)


def he_normal(seed=None):
    return VarianceScaling(2.0, "fan_in", "truncated_normal", seed)


def he_uniform(seed=None):
    return VarianceScaling(2.0, "fan_in", "uniform", seed)


zeros_initializer = Zeros
ones_initializer = Ones
constant_initializer = Constant
random_normal_initializer = RandomNormal
truncated_normal_initializer = TruncatedNormal
random_uniform_initializer = RandomUniform
variance_scaling_initializer = VarianceScaling

# tf.initializers.*
zeros = Zeros
ones = Ones
constant = Constant
random_normal = RandomNormal
truncated_normal = TruncatedNormal
random_uniform = RandomUniform
variance_scaling = VarianceScaling
glorot_uniform = glorot_uniform_initializer
glorot_normal = glorot_normal_initializer

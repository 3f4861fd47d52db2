"""Runnel from Python, with TensorFlow 1.x's names: ``import runnel as tf``.

    import numpy as np, runnel as tf
    x = tf.placeholder(tf.float32, [None, 784])
    w = tf.Variable(tf.truncated_normal([784, 10], stddev=0.1))
    b = tf.Variable(tf.zeros([10]))
    logits = x @ w + b
    with tf.Session() as s:
        s.run(tf.global_variables_initializer())
        s.run(logits, {x: np.zeros((2, 784), np.float32)})

Every op Runnel defines is in ``runnel.raw_ops`` (generated from the op definitions) and, under
its snake_case name, at the top level when TensorFlow's API has no function of that name.
docs/python.md has the whole story.
"""
import os as _os
import types as _types

# OpenBLAS reads its core type once, when the extension loads it: it does not know our CPUs and
# falls back to slow generic kernels (docs/models.md), so pick the kernels the CPU can run first.
if "OPENBLAS_CORETYPE" not in _os.environ:
    try:
        with open("/proc/cpuinfo") as _f:
            _flags = next((l.split(":", 1)[1].split() for l in _f if l.startswith("flags")), [])
        if {"avx512f", "avx512bw", "avx512vl", "avx512dq"} <= set(_flags):
            _os.environ["OPENBLAS_CORETYPE"] = "SkylakeX"
        elif {"avx2", "fma"} <= set(_flags):
            _os.environ["OPENBLAS_CORETYPE"] = "Haswell"
    except OSError:
        pass

from . import _runnel  # noqa: E402
from . import errors, dtypes, raw_ops  # noqa: E402
from .dtypes import (DType, as_dtype, float16, half, bfloat16, float32, float64, double,  # noqa
                     int8, uint8, int32, int64, bool, string)
from .framework import (Graph, Tensor, Operation, TensorShape, get_default_graph,  # noqa
                        reset_default_graph, convert_to_tensor, IndexedSlices)
from .api import *  # noqa: F401,F403,E402
from .api import range, slice  # noqa: E402 (shadow the builtins on purpose, as tf does)
from .api import _categorical  # noqa: E402
from .variables import (Variable, global_variables, all_variables, trainable_variables,  # noqa
                        local_variables, global_variables_initializer, variables_initializer,
                        initialize_all_variables)
from .session import (Session, InteractiveSession, RunOptions, RunMetadata,  # noqa: E402
                      get_default_session)
from . import operators as _operators  # noqa: E402,F401 (installs x @ w + b)
from .control_flow import cond, case, switch_case, TensorArray, Assert  # noqa: E402,F401
from .loops import while_loop, map_fn, scan, foldl, foldr  # noqa: E402,F401
from .variable_scope import (variable_scope, get_variable, get_variable_scope,  # noqa: E402
                             VariableScope, AUTO_REUSE)
from .initializers import (zeros_initializer, ones_initializer, constant_initializer,  # noqa
                           random_normal_initializer, truncated_normal_initializer,
                           random_uniform_initializer, variance_scaling_initializer,
                           glorot_uniform_initializer, glorot_normal_initializer)
from . import initializers  # noqa: E402,F401
from . import nn, train, io, data, saved_model, nest, keras  # noqa: E402
from . import seq2seq as _seq2seq  # noqa: E402
from . import layers  # noqa: E402,F401
from .layers import GraphKeys  # noqa: E402,F401
from types import SimpleNamespace as _Namespace  # noqa: E402

#: tf.contrib: what of TensorFlow 1.x's contrib Runnel has (seq2seq's attention, rnn's cells)
contrib = _Namespace(seq2seq=_seq2seq, rnn=nn.rnn_cell)


class _GenOps:
    """Every op under its snake_case name (runnel.gen_ops.mat_mul)."""


gen_ops = _GenOps()
for _name, _fn in raw_ops.SNAKE_NAMES.items():
    setattr(gen_ops, _name, _fn)
    if not _name.startswith("_") and _name not in globals():
        globals()[_name] = _fn
del _name, _fn


# tf.random (TensorFlow 1.13 and later): the random ops under their later names.
random = _types.SimpleNamespace(categorical=_categorical, normal=random_normal,  # noqa: F405
                                uniform=random_uniform, truncated_normal=truncated_normal,  # noqa
                                set_random_seed=set_random_seed)  # noqa: F405


def get_collection(key, scope=None):
    """The operations in the default graph's collection ``key`` (``tf.GraphKeys.UPDATE_OPS``:
    batch normalization's moving-average updates), those under ``scope`` when given."""
    ops = get_default_graph().get_collection(key)
    return [o for o in ops if o.name.startswith(scope)] if scope else ops


def add_to_collection(name, value):
    """Adds an operation (or a tensor's operation) to the default graph's collection."""
    get_default_graph().add_to_collection(name, value)


def set_runtime_options(cpu_devices=1, intra_op_threads=0, scheduler_threads=0):
    """The process's runtime (its devices and threads), before the first Session is made."""
    _runnel._set_runtime_options(int(cpu_devices), int(intra_op_threads), int(scheduler_threads))


def list_devices():
    """Full names of the runtime's devices ("/job:localhost/replica:0/task:0/device:cpu:0")."""
    return _runnel._devices()


__version__ = "0.16.0"

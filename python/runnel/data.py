"""Input pipelines from Python (tf.data): datasets of record files, arrays or ranges, transformed
by Runnel's pipeline stages and iterated as NumPy arrays; record files and tf.train.Example.

    ds = (runnel.data.TFRecordDataset(["train-00000-of-00004", ...])
          .shuffle(10000).batch(100)
          .parse_examples({"image": FixedLenFeature([784], runnel.float32),
                           "label": FixedLenFeature([], runnel.int64)})
          .prefetch(4))
    for batch in ds:          # dicts of NumPy arrays
        s.run(train, {x: batch["image"], y: batch["label"]})

Iterating releases the GIL while the pipeline works; Python functions given to map and filter
run on the pipeline's threads and take the GIL for each call. ``AUTOTUNE`` for
``num_parallel_calls`` or a prefetch's ``buffer_size`` lets the pipeline choose them from its
measured rates; ``it = iter(ds)`` then ``it.stats()`` says what each stage did and chose.
"""
import collections

import numpy as np

from . import _runnel
from . import dtypes as _dtypes

# Parallelism or buffer size chosen while the pipeline runs (tf.data.AUTOTUNE).
AUTOTUNE = _runnel._AUTOTUNE


class experimental:
    """tf.data.experimental's names that Runnel has."""
    AUTOTUNE = AUTOTUNE


# ---- features ---------------------------------------------------------------------------------
FixedLenFeature = collections.namedtuple("FixedLenFeature", "shape dtype default_value")
FixedLenFeature.__new__.__defaults__ = (None,)
VarLenFeature = collections.namedtuple("VarLenFeature", "dtype")
# A variable-length feature batched densely: values padded with zeros, and each record's length.
PaddedFeature = collections.namedtuple("PaddedFeature", "dtype")
SparseTensorValue = collections.namedtuple("SparseTensorValue", "indices values dense_shape")


def _spec(key, f):
    if isinstance(f, FixedLenFeature):
        return (key, _dtypes.as_dtype(f.dtype).name, list(f.shape), "fixed", f.default_value)
    if isinstance(f, VarLenFeature):
        return (key, _dtypes.as_dtype(f.dtype).name, None, "sparse", None)
    if isinstance(f, PaddedFeature):
        return (key, _dtypes.as_dtype(f.dtype).name, None, "padded", None)
    raise TypeError("feature '%s': FixedLenFeature, VarLenFeature or PaddedFeature, got %r" %
                    (key, f))


# ---- structure: elements are flat lists in C++ ------------------------------------------------
def _flatten(value):
    """(flat list, structure) of a nested tuple/list/dict of arrays."""
    if isinstance(value, dict):
        flat, parts = [], []
        for k in sorted(value):
            f, s = _flatten(value[k])
            flat += f
            parts.append((k, s))
        return flat, ("dict", parts)
    if isinstance(value, (tuple, list)):
        flat, parts = [], []
        for v in value:
            f, s = _flatten(v)
            flat += f
            parts.append(s)
        return flat, ("tuple", parts)
    return [value], "leaf"


def _unflatten(flat, structure, pos=0):
    if structure == "leaf":
        return flat[pos], pos + 1
    kind = structure[0]
    if kind == "sparse":
        return SparseTensorValue(*flat[pos:pos + 3]), pos + 3
    if kind == "padded":
        return (flat[pos], flat[pos + 1]), pos + 2
    if kind == "dict":
        out = {}
        for k, s in structure[1]:
            out[k], pos = _unflatten(flat, s, pos)
        return out, pos
    out = []
    for s in structure[1]:
        v, pos = _unflatten(flat, s, pos)
        out.append(v)
    return tuple(out), pos


class _Structure:
    """An element's structure, known when built or (after map) from the first call."""

    def __init__(self, value=None):
        self.value = value


class Dataset:
    """An immutable description of a pipeline; each iteration reads it from the start."""

    def __init__(self, d, structure):
        self._d = d
        self._structure = structure

    # -- sources ---------------------------------------------------------------------------
    @staticmethod
    def records(filenames, compression_type=None, cycle_length=0, block_length=1,
                shuffle_files_seed=0, skip_corrupt=False):
        """Records of TFRecord files (names, sharded names "f@8" or globs): bytes scalars."""
        if isinstance(filenames, str):
            filenames = [filenames]
        d = _runnel._Dataset.records([str(f) for f in filenames], compression_type or "auto",
                                     int(cycle_length), int(block_length),
                                     int(shuffle_files_seed), bool(skip_corrupt))
        return Dataset(d, _Structure("leaf"))

    @staticmethod
    def from_tensors(tensors):
        flat, s = _flatten(tensors)
        return Dataset(_runnel._Dataset.from_tensors([np.asarray(v) for v in flat]),
                       _Structure(s))

    @staticmethod
    def from_tensor_slices(tensors):
        flat, s = _flatten(tensors)
        return Dataset(_runnel._Dataset.from_tensor_slices([np.asarray(v) for v in flat]),
                       _Structure(s))

    @staticmethod
    def range(n):
        return Dataset(_runnel._Dataset.range(int(n)), _Structure("leaf"))

    # -- transformations -------------------------------------------------------------------
    def _with(self, d, structure=None):
        return Dataset(d, structure or self._structure)

    def map(self, map_func, num_parallel_calls=1):
        """``map_func`` takes an element (as the dataset gives it) and returns one."""
        source, out = self._structure, _Structure()

        def call(flat):
            value, _ = _unflatten(flat, source.value)
            result_flat, s = _flatten(map_func(*value) if isinstance(value, tuple)
                                      else map_func(value))
            out.value = s
            return result_flat

        return Dataset(self._d.map(call, int(num_parallel_calls or 1)), out)

    def filter(self, predicate):
        source = self._structure

        def call(flat):
            value, _ = _unflatten(flat, source.value)
            return bool(predicate(*value) if isinstance(value, tuple) else predicate(value))

        return self._with(self._d.filter(call))

    def parse_examples(self, features, num_parallel_calls=1):
        """Parses serialized tf.train.Examples (or batches of them) into a dict by feature:
        FixedLenFeature → an array, VarLenFeature → SparseTensorValue, PaddedFeature → (values,
        lengths). Directly after records()[.shuffle()].batch() no record is copied."""
        keys = list(features)
        specs = [_spec(k, features[k]) for k in keys]
        parts = []
        for k in keys:
            f = features[k]
            parts.append((k, ("sparse",) if isinstance(f, VarLenFeature) else
                          ("padded",) if isinstance(f, PaddedFeature) else "leaf"))
        structure = ("dict", parts)
        d = self._d.parse_examples(specs, int(num_parallel_calls or 1))
        return Dataset(d, _Structure(structure))

    def shuffle(self, buffer_size, seed=None, reshuffle_each_iteration=True):
        return self._with(self._d.shuffle(int(buffer_size), int(seed or 0),
                                          bool(reshuffle_each_iteration)))

    def batch(self, batch_size, drop_remainder=False):
        return self._with(self._d.batch(int(batch_size), bool(drop_remainder)))

    def padded_batch(self, batch_size, padded_shapes=None, drop_remainder=False):
        shapes = [] if padded_shapes is None else _flatten(padded_shapes)[0]
        return self._with(self._d.padded_batch(int(batch_size), [list(s) if s is not None
                                                                  else None for s in shapes],
                                               bool(drop_remainder)))

    def repeat(self, count=None):
        return self._with(self._d.repeat(-1 if count is None else int(count)))

    def take(self, count):
        return self._with(self._d.take(int(count)))

    def skip(self, count):
        return self._with(self._d.skip(int(count)))

    def shard(self, num_shards, index):
        return self._with(self._d.shard(int(num_shards), int(index)))

    def prefetch(self, buffer_size):
        return self._with(self._d.prefetch(int(buffer_size)))

    # -- reading -----------------------------------------------------------------------------
    def __iter__(self):
        return Iterator(self._d.open(), self._structure)


class Iterator:
    """One pass over a dataset (``iter(ds)``); ``stats()`` gives what its stages did so far."""

    def __init__(self, stream, structure):
        self._stream, self._structure = stream, structure

    def __iter__(self):
        return self

    def __next__(self):
        return _unflatten(self._stream.next(), self._structure.value)[0]

    def stats(self):
        """A dict per stage, source first: stage, elements handed on, calls, seconds of its own
        work, rate (elements/s of its own time), latency (s a call), buffer_fill (buffering
        stages: how full the consumer found it, 0-1) and autotuned (the parallelism or buffer
        size AUTOTUNE chose); None where it does not apply."""
        return self._stream.stats()

    def stats_table(self):
        """stats() as the table the C++ API prints (format_stage_stats)."""
        return self._stream.stats_table()


TFRecordDataset = Dataset.records


# ---- record files ---------------------------------------------------------------------------
class TFRecordWriter:
    """Writes records (bytes) to a TFRecord file; compression "ZLIB" or "GZIP" optional."""

    def __init__(self, path, options=None):
        self._w = _runnel._RecordWriter(str(path), options or "")

    def write(self, record):
        self._w.write(bytes(record))

    def flush(self):
        self._w.flush()

    def close(self):
        self._w.close()

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()
        return False


def tf_record_iterator(path, options=None, skip_corrupt=False):
    """The records of a TFRecord file, as bytes; a damaged record raises DataLossError naming
    the file and byte offset (or is skipped, with skip_corrupt)."""
    r = _runnel._RecordReader(str(path), options or "auto", bool(skip_corrupt))
    while True:
        rec = r.next()
        if rec is None:
            return
        yield rec


# ---- tf.train.Example -----------------------------------------------------------------------
def encode_example(features):
    """A serialized tf.train.Example from a dict: bytes/str values (or lists of them) become
    bytes features, floats float features, ints int64 features; arrays by their dtype."""
    out = {}
    for key, value in features.items():
        arr = np.asarray(value)
        if arr.dtype.kind in "SUO":
            items = [v.encode() if isinstance(v, str) else bytes(v) for v in arr.ravel().tolist()]
            out[key] = ("bytes", items)
        elif arr.dtype.kind == "f":
            out[key] = ("float", arr.astype(np.float32).ravel().tolist())
        elif arr.dtype.kind in "iub":
            out[key] = ("int64", arr.astype(np.int64).ravel().tolist())
        else:
            raise TypeError("feature '%s': %s values do not fit an Example" % (key, arr.dtype))
    return _runnel._encode_example(out)


def decode_example(serialized):
    """A dict of feature → NumPy array (float32, int64, or an object array of bytes)."""
    out = {}
    for key, (kind, values) in _runnel._decode_example(bytes(serialized)).items():
        out[key] = np.array(values, dtype=object) if kind == "bytes" else values
    return out

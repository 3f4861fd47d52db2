"""Writes a TFRecord file of tf.train.Examples from NumPy, then reads it back twice: record by
record, and as parsed batches through a dataset.

    PYTHONPATH=build/python python3 examples/python/records_round_trip.py DIR
"""
import pathlib
import sys

import numpy as np
import runnel as tf
from runnel import data

out = pathlib.Path(sys.argv[1] if len(sys.argv) > 1 else "records-example")
out.mkdir(parents=True, exist_ok=True)
path = out / "points.tfrecord"
rng = np.random.default_rng(0)
points = rng.normal(size=(1000, 3)).astype(np.float32)

with data.TFRecordWriter(path) as w:
    for i, p in enumerate(points):
        w.write(data.encode_example({"point": p, "id": i, "name": "point-%d" % i}))

first = data.decode_example(next(data.tf_record_iterator(path)))
print("first record:", {k: v.tolist() for k, v in first.items()})

seen = 0
for batch in (data.TFRecordDataset(str(path)).batch(256)
              .parse_examples({"point": data.FixedLenFeature([3], tf.float32),
                               "id": data.FixedLenFeature([], tf.int64)})):
    np.testing.assert_array_equal(batch["point"], points[batch["id"]])
    seen += len(batch["id"])
print("read back %d records in batches of 256: every point matches" % seen)
assert seen == len(points)

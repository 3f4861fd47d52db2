"""Data from Python: record files, tf.train.Example, datasets."""
import os
import pathlib

import numpy as np
import pytest

import runnel as tf
from runnel import data

TESTDATA = pathlib.Path(os.environ.get("RUNNEL_TESTDATA",
                                       pathlib.Path(__file__).parents[3] / "shared/testdata"))


def write_examples(path, n):
    with data.TFRecordWriter(path) as w:
        for i in range(n):
            w.write(data.encode_example({"image": np.full(4, i, np.float32), "label": i,
                                         "name": "item%d" % i,
                                         "tags": np.arange(i % 3, dtype=np.int64)}))


def test_example_round_trip():
    rec = data.encode_example({"f": [1.5, 2.5], "i": np.array([3, 4]), "b": [b"x", "y"]})
    back = data.decode_example(rec)
    np.testing.assert_array_equal(back["f"], [1.5, 2.5])
    assert back["i"].dtype == np.int64 and list(back["i"]) == [3, 4]
    assert list(back["b"]) == [b"x", b"y"]
    with pytest.raises(tf.errors.OpError):
        data.decode_example(b"\xff\xff\xff")


def test_records_round_trip_and_damage(tmp_path):
    path = tmp_path / "a.tfrecord"
    write_examples(path, 5)
    records = list(data.tf_record_iterator(path))
    assert len(records) == 5 and data.decode_example(records[2])["label"][0] == 2
    raw = bytearray(path.read_bytes())
    raw[len(raw) // 2] ^= 0xFF
    (tmp_path / "bad.tfrecord").write_bytes(bytes(raw))
    with pytest.raises(tf.errors.DataLossError, match="bad.tfrecord"):
        list(data.tf_record_iterator(tmp_path / "bad.tfrecord"))
    assert len(list(data.tf_record_iterator(tmp_path / "bad.tfrecord", skip_corrupt=True))) < 5


def test_dataset_parses_batches(tmp_path):
    for shard in range(2):
        write_examples(tmp_path / ("s-%05d-of-00002" % shard), 10)
    ds = (data.TFRecordDataset(sorted(str(p) for p in tmp_path.iterdir()))
          .batch(4)
          .parse_examples({"image": data.FixedLenFeature([4], tf.float32),
                           "label": data.FixedLenFeature([], tf.int64),
                           "name": data.FixedLenFeature([], tf.string),
                           "tags": data.VarLenFeature(tf.int64)}))
    batches = list(ds)
    assert [len(b["label"]) for b in batches] == [4, 4, 4, 4, 4]
    labels = np.concatenate([b["label"] for b in batches])
    assert sorted(labels.tolist()) == sorted(list(range(10)) * 2)
    first = batches[0]
    np.testing.assert_array_equal(first["image"][:, 0], first["label"])
    assert first["name"][0] == b"item%d" % first["label"][0]
    assert isinstance(first["tags"], data.SparseTensorValue)


def test_dataset_from_arrays_map_filter_shuffle():
    xs = np.arange(20, dtype=np.float32)
    ds = (data.Dataset.from_tensor_slices({"x": xs, "y": xs * 2})
          .filter(lambda e: e["x"] % 2 == 0)
          .map(lambda e: (e["x"], e["y"] + 1))
          .shuffle(100, seed=3)
          .batch(5)
          .prefetch(2))
    got = list(ds)
    assert len(got) == 2
    x = np.concatenate([g[0] for g in got])
    y = np.concatenate([g[1] for g in got])
    assert sorted(x.tolist()) == list(range(0, 20, 2))
    np.testing.assert_array_equal(y, x * 2 + 1)
    assert [int(v) for v in data.Dataset.range(7).skip(2).take(3)] == [2, 3, 4]
    assert len(list(data.Dataset.range(3).repeat(2))) == 6


def test_map_errors_end_the_iteration_with_the_python_error():
    ds = data.Dataset.range(3).map(lambda v: 1 / 0)
    with pytest.raises(tf.errors.InvalidArgumentError, match="ZeroDivisionError"):
        list(ds)


def test_files_tensorflow_wrote():
    train = sorted((TESTDATA / "tfrecord/spotify_featran/train").glob("*.tfrecords"))
    ds = data.TFRecordDataset([str(p) for p in train]).batch(1000).parse_examples(
        {"f1": data.FixedLenFeature([], tf.float32), "label": data.FixedLenFeature([], tf.float32)})
    (batch,) = list(ds)
    assert len(batch["label"]) == 158 + 158 + 159 + 159 + 158
    taxi = TESTDATA / "tfrecord/spotify_taxi_part-00000-of-00004.tfrecords.gz"
    first = next(data.tf_record_iterator(taxi))
    assert len(first) == 504
    assert "trip_seconds" in data.decode_example(first)


def test_autotune_and_stage_stats(tmp_path):
    for shard in range(2):
        write_examples(tmp_path / ("s-%05d-of-00002" % shard), 50)
    files = sorted(str(p) for p in tmp_path.iterdir())
    features = {"label": data.FixedLenFeature([], tf.int64)}

    def labels(ds):
        return np.concatenate([b["label"] for b in ds]).tolist()

    base = data.TFRecordDataset(files).shuffle(30, seed=2, reshuffle_each_iteration=False)
    hand = base.batch(8).parse_examples(features, num_parallel_calls=2).prefetch(2)
    tuned = (base.batch(8).parse_examples(features, num_parallel_calls=data.AUTOTUNE)
             .prefetch(data.experimental.AUTOTUNE))
    assert labels(tuned) == labels(hand)
    it = iter(tuned)
    assert sum(len(b["label"]) for b in it) == 100
    stages = it.stats()
    assert [s["stage"] for s in stages] == [
        "records -> shuffle(30) -> batch(8) -> parse_examples(parallelism autotune), fused",
        "prefetch(autotune)"]
    assert stages[0]["elements"] == 13 and stages[0]["autotuned"] >= 1
    assert 1 <= stages[1]["autotuned"] <= 64 and 0 <= stages[1]["buffer_fill"] <= 1
    assert stages[0]["buffer_fill"] is None
    assert "[autotune chose" in it.stats_table()
    squares = data.Dataset.range(50).map(lambda v: v * v, num_parallel_calls=data.AUTOTUNE)
    assert [int(v) for v in squares] == [v * v for v in range(50)]
    with pytest.raises(tf.errors.InvalidArgumentError, match="prefetch: buffer size"):
        data.Dataset.range(3).prefetch(0)

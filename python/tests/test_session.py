"""Running graphs from Python: fetch structures, feeds, NumPy without copies, errors, threads,
Ctrl-C, traces."""
import collections
import json
import threading

import numpy as np
import pytest

import runnel as tf


def address(a):
    return a.__array_interface__["data"][0]


def test_fetch_structures():
    a, b = tf.constant(1.0), tf.constant([2, 3])
    Pair = collections.namedtuple("Pair", "x y")
    with tf.Session() as s:
        out = s.run({"a": a, "both": [a, (b, a)], "pair": Pair(a, b), "op": tf.no_op()})
    assert out["a"] == 1.0 and out["op"] is None
    assert isinstance(out["both"][1], tuple)
    np.testing.assert_array_equal(out["both"][1][0], [2, 3])
    assert isinstance(out["pair"], Pair) and out["pair"].x == 1.0
    with tf.Session() as s:
        assert s.run(a) == 1.0 and s.run("Const:0") == 1.0


def test_feeds_convert_to_the_placeholder_dtype():
    x = tf.placeholder(tf.float32, [None])
    with tf.Session() as s:
        out = s.run(x * 2, {x: [1, 2, 3]})  # a list of ints, fed as float32
    assert out.dtype == np.float32
    np.testing.assert_array_equal(out, [2, 4, 6])


def test_feeds_and_fetches_share_buffers():
    x = tf.placeholder(tf.float32, [4])
    y = tf.identity(x)
    fed = np.arange(4, dtype=np.float32)
    with tf.Session() as s:
        out = s.run(y, {x: fed})
        # The fed array's memory went through the step and came back: no copy either way.
        assert address(out) == address(fed)
        assert not out.flags.writeable  # it is the caller's array: read-only through runnel
        z = s.run(x * 2, {x: fed})
        assert z.flags.writeable  # a buffer no one else holds is the caller's to change
        z[0] = 7
    # A layout NumPy must convert is copied (int64 into float32): still correct.
    with tf.Session() as s:
        np.testing.assert_array_equal(s.run(y, {x: np.arange(4)}), fed)


def test_fed_arrays_are_never_written():
    x = tf.placeholder(tf.float32, [3])
    v = tf.Variable(tf.zeros([3]))
    update = v.assign(x)
    bump = tf.raw_ops.AssignAdd(v._ref(), tf.ones([3]))  # in place on the variable's buffer
    fed = np.array([-1.0, 2.0, -3.0], np.float32)
    with tf.Session() as s:
        s.run(tf.global_variables_initializer())
        s.run(tf.nn.relu(x), {x: fed})
        s.run(update, {x: fed})
        s.run(bump)
        np.testing.assert_array_equal(fed, [-1, 2, -3])  # neither relu nor the update wrote it
        fed[0] = 100  # nor does the variable see later changes of the array
        np.testing.assert_array_equal(s.run(v), [0, 3, -2])


def test_errors_are_python_exceptions_naming_the_node():
    x = tf.placeholder(tf.float32, [None, 2], name="x")
    v = tf.Variable(tf.zeros([2]), name="v")
    with tf.Session() as s:
        with pytest.raises(tf.errors.InvalidArgumentError, match="x"):
            s.run(x, {x: np.zeros((2, 3), np.float32)})
        with pytest.raises(tf.errors.FailedPreconditionError) as e:
            s.run(v)
        assert "v" in str(e.value)
        with pytest.raises(tf.errors.InvalidArgumentError):
            s.run(x)  # not fed
        with pytest.raises(KeyError, match="nope"):
            s.run("nope")
    s.close()
    with pytest.raises(tf.errors.CancelledError, match="closed"):
        s.run(x, {x: np.zeros((1, 2))})


def test_threads_run_concurrently():
    x = tf.placeholder(tf.float32, [None])
    y = tf.reduce_sum(x * x)
    errors, results = [], {}
    with tf.Session() as s:
        def worker(k):
            try:
                for i in range(50):
                    a = np.full(10, k + i, np.float32)
                    results[(k, i)] = (float(s.run(y, {x: a})), float((a * a).sum()))
            except Exception as e:  # noqa: BLE001
                errors.append(e)

        threads = [threading.Thread(target=worker, args=(k,)) for k in range(8)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
    assert not errors and len(results) == 400
    assert all(got == want for got, want in results.values())


def test_run_async():
    x = tf.placeholder(tf.float32, [])
    with tf.Session() as s:
        futures = [s.run_async(x + 1, {x: float(i)}) for i in range(10)]
        assert [f.result() for f in futures] == [float(i + 1) for i in range(10)]


def test_ctrl_c_interrupts_a_running_step(ctrl_c):
    q = tf.raw_ops.FIFOQueueV2(component_types=[tf.float32], shapes=[[]], capacity=1)
    wait_forever = tf.raw_ops.QueueDequeueV2(q, component_types=[tf.float32])
    with tf.Session() as s:
        with ctrl_c(), pytest.raises(KeyboardInterrupt):
            s.run(wait_forever)
        assert s.run(tf.constant(5.0)) == 5.0  # the session carries on


def test_timeout_and_trace():
    q = tf.raw_ops.FIFOQueueV2(component_types=[tf.float32], shapes=[[]], capacity=1)
    stuck = tf.raw_ops.QueueDequeueV2(q, component_types=[tf.float32])
    x = tf.placeholder(tf.float32, [2, 2])
    with tf.Session() as s:
        with pytest.raises(tf.errors.DeadlineExceededError):
            s.run(stuck, options=tf.RunOptions(timeout_in_ms=50))
        md = tf.RunMetadata()
        s.run(x @ x, {x: np.eye(2)}, options=tf.RunOptions(tf.RunOptions.FULL_TRACE),
              run_metadata=md)
    events = json.loads(md.chrome_trace)
    names = [e.get("name") for e in (events["traceEvents"] if isinstance(events, dict)
                                     else events)]
    assert "MatMul" in names


def test_default_session_eval():
    a = tf.constant(3.0)
    with tf.Session():
        assert a.eval() == 3.0
        assert (a * 2).eval() == 6.0
    with pytest.raises(ValueError, match="no default session"):
        a.eval()
    s = tf.InteractiveSession()
    assert a.eval() == 3.0
    s.close()


def test_strings_and_bfloat16():
    x = tf.placeholder(tf.string, [2])
    with tf.Session() as s:
        out = s.run(tf.identity(x), {x: [b"ab", "cd"]})
        assert list(out) == [b"ab", b"cd"]
        h = s.run(tf.cast(tf.constant([1.5, 2.25]), tf.bfloat16))
        assert h.dtype == np.float32 and list(h) == [1.5, 2.25]


def test_scalars_feed_as_numbers_and_numpy_scalars_of_any_dtype():
    f = tf.placeholder(tf.float32, [])
    d = tf.placeholder(tf.float64, [])
    i = tf.placeholder(tf.int32, [])
    q = tf.placeholder(tf.int64, [])
    b = tf.placeholder(tf.bool, [])
    with tf.Session() as s:
        assert s.run(f * 2, {f: 1.5}) == 3.0
        assert s.run(f * 2, {f: np.float32(1.25)}) == 2.5
        assert s.run(f * 2, {f: np.float64(0.5)}) == 1.0  # converted to float32
        assert s.run(d, {d: 0.1}) == 0.1 and s.run(d, {d: np.float32(0.5)}) == 0.5
        assert s.run(i + 1, {i: 41}) == 42 and s.run(i + 1, {i: np.int64(1)}) == 2
        assert s.run(q, {q: np.int64(2 ** 40)}) == 2 ** 40 and s.run(q, {q: 7}) == 7
        assert s.run(tf.logical_not(b), {b: True}) == False  # noqa: E712
        assert s.run(tf.logical_not(b), {b: np.bool_(False)}) == True  # noqa: E712
        assert s.run(i * 2, {i: np.int32(-21)}) == -42 and s.run(q, {q: np.int32(5)}) == 5
        with pytest.raises((TypeError, ValueError, tf.errors.InvalidArgumentError)):
            s.run(f, {f: "one"})


def test_fetched_scalars_are_numpy_scalars_as_in_tensorflow():
    x = tf.placeholder(tf.float32, [])
    with tf.Session() as s:
        for value, kind in [(tf.constant(2.5), np.float32), (tf.constant(3, tf.int64), np.int64),
                            (tf.constant(True), np.bool_), (tf.constant(1.5, tf.float64),
                                                            np.float64)]:
            assert type(s.run(value)) is kind
        for dtype, kind in [(tf.int8, np.int8), (tf.uint8, np.uint8), (tf.int32, np.int32),
                            (tf.float16, np.float16), (tf.bfloat16, np.float32)]:
            got = s.run(tf.cast(tf.constant(-3.0 if kind is not np.uint8 else 3.0), dtype))
            assert type(got) is kind and got == (-3 if kind is not np.uint8 else 3)
        assert s.run(tf.constant(False)) is np.False_
        assert s.run(tf.constant(b"ab")) == b"ab"
        assert type(s.run(x, {x: 4.0})) is np.float32 and s.run(x, {x: 4.0}) == 4.0
        a, b = s.run([x * 2, tf.constant([1.0])], {x: 4.0})  # a list's scalar too
        assert type(a) is np.float32 and a == 8.0 and b.shape == (1,)


def test_the_common_case_and_what_falls_back_from_it():
    # One tensor fetched with at most one fed takes one C++ call (Session.run's fast path);
    # everything else must behave as before, through the general path.
    import collections
    g, other = tf.Graph(), tf.Graph()
    with g.as_default():
        x = tf.placeholder(tf.float32, [], name="x")
        k = tf.placeholder(tf.float32, [], name="k")
        y = x * k
    with other.as_default():
        z = tf.placeholder(tf.float32, [], name="z")
    with tf.Session(graph=g) as s:
        assert s.run(x, {x: 2.0}) == 2.0 and s.run(y, {x: 2.0, k: 3.0}) == 6.0
        assert s.run(y, collections.OrderedDict([(x, 2.0), (k, 4.0)])) == 8.0
        assert s.run(x, {"x:0": 5.0}) == 5.0 and s.run("x:0", {x: 6.0}) == 6.0
        assert s.run(y, {x: 1.0, "k:0": 1.5}) == 1.5
        with pytest.raises(ValueError):
            s.run(z, {z: 1.0})  # a tensor of another graph
        with pytest.raises(ValueError):
            s.run(x, {z: 1.0})
        with pytest.raises(tf.errors.InvalidArgumentError, match="x"):
            s.run(x, {})  # the placeholder not fed
        # Session.run is C++'s: keyword arguments, options and a subclass reach the same answers.
        assert s.run(x, feed_dict={x: 7.0}) == 7.0 and s.run(fetches=x, feed_dict={x: 8.0}) == 8.0
        assert s.run(x, {x: 9.0}, None, None) == 9.0
        assert s.run(x, {x: 1.0}, options=tf.RunOptions(timeout_in_ms=10000)) == 1.0
        assert tf.Session.run(s, x, {x: 3.0}) == 3.0
        with pytest.raises(TypeError, match="fetches"):
            s.run()
        with pytest.raises(TypeError):
            s.run(x, {x: 1.0}, unknown=1)
    import inspect
    assert list(inspect.signature(tf.Session.run).parameters) == [
        "self", "fetches", "feed_dict", "options", "run_metadata"]
    assert "feed_dict" in tf.Session.run.__doc__
    with g.as_default(), tf.InteractiveSession() as s:
        assert s.run(x, {x: 4.0}) == 4.0

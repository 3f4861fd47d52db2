"""cond, case, switch_case, while_loop, TensorArray, map_fn, scan and the folds from Python:
values against NumPy, nested structures, gradients, and the errors."""
import collections

import pytest

import runnel as tf


def run(fetches, feeds=None):
    with tf.Session() as s:
        s.run(tf.global_variables_initializer())
        return s.run(fetches, feeds)


def test_cond_takes_one_branch_with_nested_results_and_gradients():
    x = tf.placeholder(tf.float32, [])
    pair = tf.cond(x > 0, lambda: {"a": x * 2, "b": (x, 1.0)},
                   lambda: {"a": -x, "b": (x * x, 2.0)})
    single = tf.cond(x > 0, lambda: [x * 3], lambda: [x])
    strict = tf.cond(x > 0, lambda: [x * 3], lambda: [x], strict=True)
    grad, = tf.gradients(pair["a"] + pair["b"][0], x)
    assert isinstance(single, tf.Tensor) and isinstance(strict, list)
    for v in (3.0, -2.0):
        a, b, one, g = run([pair["a"], pair["b"], single, grad], {x: v})
        assert a == (v * 2 if v > 0 else -v)
        assert b[0] == (v if v > 0 else v * v) and b[1] == (1.0 if v > 0 else 2.0)
        assert one == (v * 3 if v > 0 else v)
        assert g == (3.0 if v > 0 else -1.0 + 2 * v)


def test_cond_branch_that_only_assigns_runs_only_when_taken():
    v = tf.Variable(0.0)
    p = tf.placeholder(tf.bool, [])
    op = tf.cond(p, lambda: v.assign_add(1.0).op, lambda: tf.no_op())
    assert isinstance(op, tf.Operation)
    with tf.Session() as s:
        s.run(tf.global_variables_initializer())
        for taken in (True, False, True, False, False):
            s.run(op, {p: taken})
        assert s.run(v) == 2.0


def test_cond_errors_name_the_cond():
    x = tf.constant(1.0)
    with pytest.raises(TypeError, match="callable"):
        tf.cond(x > 0, x, lambda: x)
    with pytest.raises(ValueError, match="cond 'pick'.*None"):
        tf.cond(x > 0, lambda: None, lambda: x, name="pick")
    with pytest.raises((ValueError, tf.errors.InvalidArgumentError), match="pick"):
        tf.cond(x > 0, lambda: (x, x), lambda: x, name="pick")


def test_case_and_switch_case():
    x = tf.placeholder(tf.int32, [])
    c = tf.case([(x > 5, lambda: tf.constant(50)), (x > 0, lambda: tf.constant(10))],
                default=lambda: tf.constant(-1))
    no_default = tf.case({x > 0: lambda: tf.constant(1), x < 0: lambda: tf.constant(2)})
    sw = tf.switch_case(x, {0: lambda: tf.constant(100), 1: lambda: tf.constant(101)},
                        default=lambda: tf.constant(-100))
    for v, want_c, want_sw in ((7, 50, -100), (1, 10, 101), (0, -1, 100), (-3, -1, -100)):
        assert run([c, sw], {x: v}) == [want_c, want_sw]
    assert run(no_default, {x: -3}) == 2  # the last pair is the default
    exclusive = tf.case([(x > 0, lambda: tf.constant(1)), (x > 1, lambda: tf.constant(2))],
                        default=lambda: tf.constant(0), exclusive=True, name="only_one")
    assert run(exclusive, {x: 1}) == 1
    with pytest.raises(tf.errors.InvalidArgumentError, match="more than one predicate"):
        run(exclusive, {x: 5})


def test_while_loop_values_structures_and_limits():
    Pair = collections.namedtuple("Pair", "i total")
    n = tf.placeholder(tf.int32, [])
    out = tf.while_loop(lambda p: p.i < n, lambda p: [Pair(p.i + 1, p.total + p.i)],
                        [Pair(tf.constant(0), tf.constant(0))])
    assert isinstance(out, Pair)
    capped = tf.while_loop(lambda i: i < 100, lambda i: i + 1, [0], maximum_iterations=7)
    limit = tf.placeholder(tf.int32, [])
    capped_at_run = tf.while_loop(lambda i: i < 100, lambda i: i + 1, [0],
                                  maximum_iterations=limit)
    same = tf.while_loop(lambda i: i < 3, lambda i: [i + 1], [0], return_same_structure=True)
    assert isinstance(same, list)
    grown = tf.while_loop(lambda i, v: i < 3, lambda i, v: (i + 1, tf.concat([v, v], 0)),
                          [0, tf.ones([1, 2])],
                          shape_invariants=[tf.TensorShape([]), tf.TensorShape([None, 2])])
    p, c, r, s, gr = run([out, capped, capped_at_run, same, grown[1]], {n: 5, limit: 4})
    assert tuple(p) == (5, 10) and c == 7 and r == 4 and s == [3] and gr.shape == (8, 2)


def test_while_loop_gradient_and_back_prop():
    x = tf.placeholder(tf.float32, [])
    _, power = tf.while_loop(lambda i, y: i < 4, lambda i, y: (i + 1, y * x), [0, 1.0])
    grad, = tf.gradients(power, x)
    _, frozen = tf.while_loop(lambda i, y: i < 4, lambda i, y: (i + 1, y * x), [0, 1.0],
                              back_prop=False)
    assert tf.gradients(frozen, x) == [None]
    assert run([power, grad], {x: 1.5}) == pytest.approx([1.5 ** 4, 4 * 1.5 ** 3])


def test_while_loop_errors():
    with pytest.raises(ValueError, match="body's results"):
        tf.while_loop(lambda i, j: i < 3, lambda i, j: i + 1, [0, 0], name="bad")
    with pytest.raises(ValueError, match="parallel_iterations"):
        tf.while_loop(lambda i: i < 3, lambda i: i + 1, [0], parallel_iterations=0)
    with pytest.raises(TypeError, match="'typed'.*Cast:0' of dtype float32.*int32"):
        tf.while_loop(lambda i: i < 3, lambda i: tf.cast(i, tf.float32), [0], name="typed")


def test_tensor_array_operations():
    ta = tf.TensorArray(tf.float32, size=3, element_shape=[2], clear_after_read=False)
    ta = ta.write(0, [1.0, 2.0]).write(2, [5.0, 6.0]).write(1, [3.0, 4.0])
    grown = tf.TensorArray(tf.float32, size=0, dynamic_size=True)
    grown = grown.unstack(tf.constant([[1.0], [2.0], [3.0], [4.0]]))
    scattered = tf.TensorArray(tf.int32, size=3).scatter([2, 0, 1], tf.constant([30, 10, 20]))
    pieces = tf.TensorArray(tf.float32, size=2).split(tf.constant([1., 2., 3.]), [1, 2])
    assert ta.element_shape == [2] and ta.dtype == tf.float32
    stacked, read, gathered, size, sc, cat = run(
        [ta.stack(), ta.read(1), grown.gather([3, 0]), grown.size(), scattered.stack(),
         pieces.concat()])
    assert stacked.tolist() == [[1, 2], [3, 4], [5, 6]] and read.tolist() == [3, 4]
    assert gathered.tolist() == [[4], [1]] and size == 4
    assert sc.tolist() == [10, 20, 30] and cat.tolist() == [1, 2, 3]


def test_tensor_array_as_a_loop_variable():
    n = tf.placeholder(tf.int32, [])
    ta = tf.TensorArray(tf.float32, size=n)
    _, ta = tf.while_loop(lambda i, a: i < n,
                          lambda i, a: (i + 1, a.write(i, tf.cast(i * i, tf.float32))), [0, ta])
    assert isinstance(ta, tf.TensorArray)
    assert run(ta.stack(), {n: 4}).tolist() == [0, 1, 4, 9]


def test_map_fn_scan_and_folds():
    xs = tf.constant([1.0, 2.0, 3.0, 4.0])
    ints = tf.constant([1, 2, 3, 4])
    squares = tf.map_fn(lambda v: v * v, xs)
    pairs = tf.map_fn(lambda p: (p[0] * 2.0, p[1] + 1), (xs, ints), dtype=(tf.float32, tf.int32))
    as_int = tf.map_fn(lambda v: tf.cast(v, tf.int32), xs, dtype=tf.int32)
    sums = tf.scan(lambda a, v: a + v, xs)
    from_ten = tf.scan(lambda a, v: a + v, xs, initializer=10.0)
    backwards = tf.scan(lambda a, v: a + v, xs, reverse=True)
    left = tf.foldl(lambda a, v: a * 10 + v, xs, initializer=0.0)
    right = tf.foldr(lambda a, v: a * 10 + v, xs, initializer=0.0)
    first = tf.foldl(lambda a, v: a - v, xs)
    r = run([squares, pairs, as_int, sums, from_ten, backwards, left, right, first])
    assert r[0].tolist() == [1, 4, 9, 16]
    assert r[1][0].tolist() == [2, 4, 6, 8] and r[1][1].tolist() == [2, 3, 4, 5]
    assert r[2].tolist() == [1, 2, 3, 4]
    assert r[3].tolist() == [1, 3, 6, 10] and r[4].tolist() == [11, 13, 16, 20]
    assert r[5].tolist() == [10, 9, 7, 4]
    assert r[6] == 1234 and r[7] == 4321 and r[8] == 1 - 2 - 3 - 4
    grad, = tf.gradients(tf.reduce_sum(tf.map_fn(lambda v: v * v, xs)), xs)
    assert run(grad).tolist() == [2, 4, 6, 8]
    with pytest.raises(ValueError, match="scalar"):
        tf.map_fn(lambda v: v, tf.constant(1.0))

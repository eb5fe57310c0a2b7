"""Derived ops (compositions with no rules of their own) against numpy's and TF1's semantics.

The op table checks their gradients, the reference and PTX; here each is compared with what numpy
(or TF1's documentation) says it computes, on the compiled target, with the errors for bad input.
"""
from __future__ import annotations

import re

import numpy as np
import pytest

import compiler as cc
from compiler.errors import DTypeError, ShapeError
from runtime import Session

EINSUM_CASES = [
    ("ij,jk->ik", [(3, 4), (4, 5)]), ("ij,jk", [(3, 4), (4, 5)]), ("bhqd,bhkd->bhqk", [(2, 3, 4, 5), (2, 3, 6, 5)]),
    ("...ij,jk->...ik", [(2, 3, 4), (4, 5)]), ("ij->ji", [(3, 4)]), ("ij->", [(3, 4)]), ("ij->j", [(3, 4)]),
    ("i,i->", [(5,), (5,)]), ("i,j->ij", [(3,), (4,)]), ("abc,cd->abd", [(2, 3, 4), (4, 5)]),
    ("abc,bcd->ad", [(2, 3, 4), (3, 4, 5)]), ("ab,cd->abcd", [(2, 3), (4, 5)]), ("ijk,ikl->ijl", [(2, 3, 4), (2, 4, 5)]),
    ("ij,ij->ij", [(3, 4), (3, 4)]), ("ij,ij->i", [(3, 4), (3, 4)]), ("ij,jk,kl->il", [(2, 3), (3, 4), (4, 5)]),
    ("abcd,dcef->abef", [(2, 3, 4, 5), (5, 4, 6, 2)]), ("bi,bj->ij", [(6, 3), (6, 4)]), ("ijk,jl->ilk", [(2, 3, 4), (3, 5)]),
    ("ij,kj->ik", [(3, 0), (4, 0)]), ("ab,bcd->acd", [(2, 3), (3, 4, 5)]), ("xyz,zw->wyx", [(2, 3, 4), (4, 5)]),
    ("...i,...i->...", [(2, 3, 4), (3, 4)]), ("a,abc->bc", [(3,), (3, 4, 5)]), ("abc,a->", [(3, 4, 5), (3,)]),
    ("ijk,kji->", [(2, 3, 4), (4, 3, 2)]), ("ab,ab,ab->b", [(2, 3), (2, 3), (1, 3)]), ("Ab,bC->CA", [(2, 3), (3, 4)]),
]


@pytest.mark.parametrize("equation, shapes", EINSUM_CASES, ids=[e for e, _ in EINSUM_CASES])
def test_einsum_equals_numpy(equation: str, shapes: list[tuple[int, ...]]) -> None:
    rng = np.random.default_rng(0)
    values = [rng.normal(size=shape) for shape in shapes]
    inputs = [cc.placeholder("float64", shape) for shape in shapes]
    with Session(inputs[0].graph) as sess:
        got = sess.run(cc.einsum(equation, *inputs), dict(zip(inputs, values)))
    expected = np.einsum(equation, *values)
    assert got.shape == expected.shape
    np.testing.assert_allclose(got, expected, rtol=1e-12, atol=1e-12)


@pytest.mark.parametrize("equation, left_shape, left_value_shape, right_shape, left_gradient", [
    ("bi,ij->bj", (None, 3), (5, 3), (3, 4), "bj,ij->bi"),
    ("bij,ijk->bk", (None, 3, 4), (5, 3, 4), (3, 4, 5), "bk,ijk->bij"),    # two depth axes, one size unknown
    ("...d,de->...e", (None, None, 3), (2, 1, 3), (3, 2), "...e,de->...d"),
])
def test_einsum_with_sizes_known_only_when_compiled(equation: str, left_shape: tuple, left_value_shape: tuple,
                                                    right_shape: tuple, left_gradient: str) -> None:
    rng = np.random.default_rng(1)
    left = cc.placeholder("float64", left_shape)
    right = cc.placeholder("float64", right_shape)
    result = cc.einsum(equation, left, right)
    (gradient,) = cc.gradients(cc.reduce_sum(result * result), [left])
    left_value, right_value = rng.normal(size=left_value_shape), rng.normal(size=right_shape)
    with Session(left.graph) as sess:
        got, got_gradient = sess.run([result, gradient], {left: left_value, right: right_value})
    expected = np.einsum(equation, left_value, right_value)
    np.testing.assert_allclose(got, expected, rtol=1e-12)
    np.testing.assert_allclose(got_gradient, np.einsum(left_gradient, 2 * expected, right_value), rtol=1e-12)


def test_tensordot_equals_numpy() -> None:
    rng = np.random.default_rng(2)
    a, b = rng.normal(size=(2, 3, 4)), rng.normal(size=(4, 3, 5))
    with Session(cc.Graph()) as sess, sess.graph.as_default():
        got = sess.run([cc.tensordot(a, b, [[1, 2], [1, 0]]), cc.tensordot(a, b[:, 0, :], 1),
                        cc.tensordot(a, b, 0), cc.tensordot(a, b, [2, 0])])
    for value, axes in zip(got, [[[1, 2], [1, 0]], 1, 0, [2, 0]]):
        second = b[:, 0, :] if axes == 1 else b
        np.testing.assert_allclose(value, np.tensordot(a, second, axes), rtol=1e-12)


@pytest.mark.parametrize("make, message", [
    (lambda x, y: cc.einsum("ii->i", x), "repeats 'i'"),
    (lambda x, y: cc.einsum("ij,jk->ik", x), "2 operand"),
    (lambda x, y: cc.einsum("ijk->i", x), "names 3 axes"),
    (lambda x, y: cc.einsum("ij,jk->iz", x, y), "'z' of"),
    (lambda x, y: cc.einsum("ij,kj->ik", x, y), "has size 3 in one operand and 4"),
    (lambda x, y: cc.einsum("i1,jk->ik", x, y), "indices are letters"),
    (lambda x, y: cc.tensordot(x, y, 3), "axes=3"),
    (lambda x, y: cc.tensordot(x, y, [[0], [0, 1]]), "differ in length"),
    (lambda x, y: cc.tensordot(y, y, [[0, 1], [0, 0]]), r"axes \[0, 0\] of b repeat an axis"),
    (lambda x, y: cc.tensordot(x[:1], y, [[0], [0]]), "summed together but differ in size"),
], ids=["diagonal", "operand-count", "rank", "unknown-output", "sizes", "not-a-letter", "tensordot-count",
        "tensordot-lists", "tensordot-repeated-axis", "tensordot-no-broadcasting"])
def test_einsum_and_tensordot_errors_name_the_problem_and_the_line(make, message: str) -> None:
    x = cc.placeholder("float32", (2, 3), name="x")
    y = cc.placeholder("float32", (4, 4), name="y")
    with pytest.raises(ValueError, match=message) as error:
        make(x, y)
    assert "test_derived_ops.py:" in str(error.value)


def test_floordiv_and_floormod_follow_python_and_numpy() -> None:
    ints = np.array([7, -7, 7, -7, 0, 5, -2147483648, 2147483647, -1, 6, -2147483648, 9], "int32")
    divisors = np.array([2, 2, -2, -2, 3, 0, 3, -7, 2147483647, 0, -1, -1], "int32")   # -2**31 // -1 wraps
    floats = np.array([7.5, -7.5, 7.5, -7.5, 0.0, 1e-8, -1e-8, 5.25], "float32")
    float_divisors = np.array([2.0, 2.0, -2.0, -2.0, 3.0, 1.0, 1.0, 0.5], "float32")
    with Session(cc.Graph()) as sess, sess.graph.as_default():
        i, d = cc.constant(ints), cc.constant(divisors)
        f, g = cc.constant(floats), cc.constant(float_divisors)
        got = sess.run([i // d, i % d, cc.floordiv(f, g), f % g, 17 // d[:4], 17 % d[:4], 7.5 % g])
    with np.errstate(divide="ignore", invalid="ignore", over="ignore"):
        expected = [ints // divisors, ints % divisors, floats // float_divisors, floats % float_divisors,
                    17 // divisors[:4], 17 % divisors[:4], np.float32(7.5) % float_divisors]
    for value, want in zip(got, expected):
        assert value.dtype == want.dtype
        np.testing.assert_array_equal(value, want)


@pytest.mark.parametrize("target", ["cpu", "cuda-emulated", "reference"])
def test_int64_floordiv_floormod_truncatediv_are_exact_past_float64s_integers(target: str) -> None:
    # Through float64 (as int32's), 2**62 + 1 // 3 was off; -2**63 // -1 and // 0 must not trap.
    ints = np.array([7, -7, 7, -7, 0, 2**62 + 1, -2**62 - 5, -2**63, -2**63, 5, 2**63 - 1, 2**53 + 3], "int64")
    divisors = np.array([2, 2, -2, -2, 3, 3, 7, -1, 1, 0, -2**63, -3], "int64")
    with Session(cc.Graph(), target=target) as sess, sess.graph.as_default():
        i, d = cc.placeholder("int64", (None,)), cc.placeholder("int64", (None,))
        got = sess.run([i // d, i % d, cc.truncatediv(i, d), cc.truncatemod(i, d)], {i: ints, d: divisors})
    safe = np.where(divisors == 0, 1, divisors)
    with np.errstate(divide="ignore", over="ignore"):
        floored, remainder = ints // safe, ints % safe
        truncated = np.where((remainder != 0) & ((ints < 0) != (safe < 0)), floored + 1, floored)
    expected = [np.where(divisors == 0, 0, floored), np.where(divisors == 0, 0, remainder),
                np.where(divisors == 0, 0, truncated), np.where(divisors == 0, 0, ints - truncated * safe)]
    for value, want in zip(got, expected):
        assert value.dtype == np.int64
        np.testing.assert_array_equal(value, want)


@pytest.mark.parametrize("target", ["cpu", "cuda-emulated", "reference"])
def test_integer_tensors_to_python_int_powers_equal_numpy_and_wrap_as_it_does(target: str) -> None:
    ints = np.array([0, 1, -2, 3, 46341, -7, 2**31 - 1], "int32")
    longs = np.array([3, -5, 2**10, 7, -(2**62)], "int64")
    with Session(cc.Graph(), target=target) as sess, sess.graph.as_default():
        k, q = cc.placeholder("int32", (None,)), cc.placeholder("int64", (None,))
        got = sess.run([k ** 2, k ** 3, k ** 0, cc.pow(k, 5), q ** 7, (k - 2) ** 31], {k: ints, q: longs})
        with pytest.raises(ValueError, match=r"pow: integers to negative integer powers are not allowed"):
            k ** -1
    with np.errstate(over="ignore"):
        expected = [ints ** 2, ints ** 3, ints ** 0, ints ** 5, longs ** 7, (ints - 2) ** 31]
    for value, want in zip(got, expected):
        assert value.dtype == want.dtype
        np.testing.assert_array_equal(value, want)


def test_floordiv_refuses_what_it_cannot_compute_exactly() -> None:
    with pytest.raises(DTypeError, match="floordiv takes float, int32 or int64 tensors, got bool"):
        cc.floordiv(cc.constant(np.array([True])), cc.constant(np.array([True])))
    with pytest.raises(DTypeError, match="floormod.*float32.*int32"):
        cc.floormod(cc.constant([1.0]), cc.constant([2]))


def test_bool_operators_and_reductions_equal_numpy() -> None:
    rng = np.random.default_rng(3)
    a, b = rng.random((3, 4)) < 0.5, rng.random((3, 4)) < 0.5
    with Session(cc.Graph()) as sess, sess.graph.as_default():
        x, y = cc.constant(a), cc.constant(b)
        empty = cc.constant(np.zeros((0, 3), bool))
        got = sess.run([x & y, x | y, x ^ y, ~x, True & x, cc.reduce_any(x, axis=1), cc.reduce_all(x, axis=0),
                        cc.reduce_any(x), cc.reduce_all(x, keep_dims=True), cc.reduce_any(empty, axis=0),
                        cc.reduce_all(empty, axis=0)])
    expected = [a & b, a | b, a ^ b, ~a, a, a.any(axis=1), a.all(axis=0), a.any(), a.all(keepdims=True),
                np.zeros(3, bool), np.ones(3, bool)]
    for value, want in zip(got, expected):
        assert value.dtype == bool
        np.testing.assert_array_equal(value, want)
    with pytest.raises(DTypeError, match="reduce_any needs a bool tensor, got float32"):
        cc.reduce_any(cc.constant([1.0]))


def test_creation_ops_equal_numpy_and_tf1() -> None:
    with Session(cc.Graph()) as sess, sess.graph.as_default():
        got = sess.run([cc.zeros((2, 3)), cc.ones(3, "int32"), cc.zeros([2], "bool"), cc.fill([2, 2], 7),
                        cc.fill([2], 0.5), cc.range(5), cc.range(1.0, 2.0, 0.25), cc.range(10, 2, -3), cc.range(3, 3),
                        cc.range(4, dtype="float64"), cc.eye(2, 3, batch_shape=[2]), cc.eye(3, dtype="int32"),
                        cc.linspace(0.0, 1.0, 5), cc.sequence_mask([1, 3, 0], 4),
                        cc.sequence_mask(np.array([[2]], "int64"), 3, "float32")])
    expected = [np.zeros((2, 3), "float32"), np.ones(3, "int32"), np.zeros(2, bool), np.full((2, 2), 7, "int32"),
                np.full(2, 0.5, "float32"), np.arange(5, dtype="int32"), np.arange(1.0, 2.0, 0.25, dtype="float32"),
                np.arange(10, 2, -3, dtype="int32"), np.zeros(0, "int32"), np.arange(4.0),
                np.broadcast_to(np.eye(2, 3, dtype="float32"), (2, 2, 3)), np.eye(3, dtype="int32"),
                np.linspace(0, 1, 5, dtype="float32"), np.arange(4) < np.array([1, 3, 0])[:, None],
                (np.arange(3) < 2)[None, None, :].astype("float32")]
    for value, want in zip(got, expected):
        assert value.dtype == want.dtype and value.shape == want.shape
        np.testing.assert_array_equal(value, want)


def test_fill_passes_the_summed_gradient_to_its_value() -> None:
    value = cc.placeholder("float64", (), name="value")
    (gradient,) = cc.gradients(cc.reduce_sum(cc.fill([2, 3], value) * 2.0), [value])
    with Session(value.graph) as sess:
        assert sess.run(gradient, {value: 1.5}) == 12.0


@pytest.mark.parametrize("make, error, message", [
    (lambda: cc.zeros(cc.placeholder("int32", (2,))), TypeError,
     r"zeros: a shape given as a tensor must be known when the graph is built or be shape\(t\)"),
    (lambda: cc.ones((2, -1)), ShapeError, "non-negative ints"),
    (lambda: cc.fill([2], cc.constant([1.0, 2.0])), ShapeError, "must be a scalar"),
    (lambda: cc.range(cc.placeholder("int32", ())), TypeError,
     r"range: the limit .* must be known when the graph is built or be a size from shapes"),
    (lambda: cc.range(0, 5, 0), ValueError, "delta must not be 0"),
    (lambda: cc.sequence_mask(cc.constant([1, 2])), ValueError, "sequence_mask needs maxlen"),
    (lambda: cc.sequence_mask(cc.constant([1.0]), 3), TypeError, "lengths must be integers"),
    (lambda: cc.eye(3, batch_shape=[cc.shape(cc.placeholder("float32", (None,)))[0]]), TypeError,
     "eye: the shape must be known when the graph is built"),
    (lambda: cc.range(0, 10 ** 12), ValueError, "more than a constant may hold"),
    (lambda: cc.tensordot(cc.constant([1.0]), cc.constant([1.0]), cc.constant(1)), TypeError, "not tensors"),
], ids=["zeros-tensor-shape", "ones-negative", "fill-vector", "range-tensor", "range-zero-delta",
        "sequence_mask-no-maxlen", "sequence_mask-floats", "eye-tensor-batch", "range-too-long",
        "tensordot-tensor-axes"])
def test_creation_errors_name_the_problem(make, error: type, message: str) -> None:
    with cc.Graph().as_default(), pytest.raises(error, match=message) as caught:
        make()
    assert "test_derived_ops.py:" in str(caught.value)


def test_range_counts_python_ints_exactly_and_changes_no_number() -> None:
    with Session(cc.Graph()) as sess, sess.graph.as_default():
        wide, huge_step = sess.run([cc.range(2 ** 31 - 2, 2 ** 31 + 2), cc.range(0, 10 ** 17 + 1, 10 ** 17)])
    assert wide.dtype == np.int64 and wide.tolist() == [2 ** 31 - 2, 2 ** 31 - 1, 2 ** 31, 2 ** 31 + 1]
    assert huge_step.tolist() == [0, 10 ** 17]
    with cc.Graph().as_default(), pytest.raises(DTypeError, match="cannot be int32 without changing"):
        cc.range(0.5, 3, dtype="int32")


def test_strided_slice_takes_tf1_s_begin_end_strides_and_masks() -> None:
    a = np.arange(24.0).reshape(2, 3, 4)
    cases = [
        (dict(begin=[0, 1], end=[2, 3], strides=[1, 2], end_mask=1), a[:, 1:3:2]),
        (dict(begin=[0, 1], end=[2, 3]), a[0:2, 1:3]),
        (dict(begin=[1, 0], end=[0, 0], strides=[1, 1], shrink_axis_mask=1, end_mask=2), a[1, :]),
        (dict(begin=[0, 0, 0], end=[0, 0, 0], strides=[1, 1, -1], ellipsis_mask=1, new_axis_mask=2, begin_mask=4,
              end_mask=4), a[..., None, ::-1]),
        (dict(begin=[-1], end=[0], strides=[-1], end_mask=1), a[-1::-1]),
    ]
    with Session(cc.Graph()) as sess, sess.graph.as_default():
        got = sess.run([cc.strided_slice(cc.constant(a), **kwargs) for kwargs, _ in cases])
        with pytest.raises(ValueError, match="one each per index"):
            cc.strided_slice(cc.constant(a), [0, 1], [2])
    for value, (_, expected) in zip(got, cases):
        assert value.shape == expected.shape
        np.testing.assert_array_equal(value, expected)


def test_reshape_takes_tf1_s_sizes_from_shape() -> None:
    graph = cc.Graph()
    with graph.as_default():
        x = cc.placeholder("float32", (None, 3, 4), name="x")
        flat = cc.reshape(x, [cc.shape(x)[0], -1])
        product = cc.reshape(x, [cc.shape(x)[0], cc.shape(x)[1] * cc.shape(x)[2]])   # 12, known now
        split = cc.reshape(x, [cc.shape(x)[0], 2, -1])
        with pytest.raises(ValueError, match="more than one dimension to infer"):
            cc.reshape(x, [cc.shape(x)[0] * 2, -1])
        (slope,) = cc.gradients(cc.reduce_sum(split * split * cc.constant(np.arange(12.0, dtype="float32")
                                                                            .reshape(2, 6))), [x])
    assert split.op.type == "ReshapeTo"
    value = np.arange(60, dtype="float32").reshape(5, 3, 4)
    with Session(graph) as sess:
        got = sess.run([flat, product, split, slope], {x: value})
    for array, shape in zip(got, [(5, 12), (5, 12), (5, 2, 6)]):
        np.testing.assert_array_equal(array, value.reshape(shape))
    np.testing.assert_array_equal(got[3], (2.0 * value.reshape(5, 2, 6) * np.arange(12.0).reshape(2, 6))
                                  .reshape(5, 3, 4))


def test_float_floormod_stays_within_the_divisor_and_takes_an_infinite_one() -> None:
    rng = np.random.default_rng(8)
    x = (rng.standard_normal(2000) * 10.0 ** rng.integers(-3, 8, 2000)).astype("float32")
    y = (rng.standard_normal(2000) * 10.0 ** rng.integers(-4, 2, 2000)).astype("float32")
    special_x = np.array([3.0, -3.0, 0.0, 3.0, -3.0], "float32")
    special_y = np.array([np.inf, np.inf, np.inf, -np.inf, -np.inf], "float32")
    with Session(cc.Graph()) as sess, sess.graph.as_default():
        remainder, special = sess.run([cc.constant(x) % cc.constant(y),
                                       cc.constant(special_x) % cc.constant(special_y)])
    assert ((np.abs(remainder) < np.abs(y)) & ((remainder == 0) | (np.sign(remainder) == np.sign(y)))).all()
    np.testing.assert_allclose(remainder, np.remainder(x.astype("float64"), y.astype("float64")),
                               atol=1e-6 * np.abs(x).max())
    np.testing.assert_array_equal(special, [3.0, np.inf, 0.0, -np.inf, -3.0])   # Python's and numpy's
    # An infinite or NaN dividend has no remainder, whatever the divisor (it was +-inf by an infinite one).
    graph = cc.Graph()
    with graph.as_default():
        a, b = cc.placeholder("float32", (None,), name="a"), cc.placeholder("float32", (None,), name="b")
        mod = a % b
    dividends = np.array([np.inf, -np.inf, np.inf, np.nan, np.inf, 5.0], "float32")
    divisors = np.array([np.inf, np.inf, -np.inf, -np.inf, 3.0, np.nan], "float32")
    for target in ("cpu", "reference"):
        with Session(graph, target=target) as sess:
            assert np.isnan(sess.run(mod, {a: dividends, b: divisors})).all()


def test_concat_and_stack_take_any_number_of_tensors() -> None:
    graph = cc.Graph()
    with graph.as_default():
        pieces = [cc.placeholder("float32", (2,), name=f"p{i}") for i in range(150)]
        stacked = cc.stack(pieces)
        joined = cc.concat(pieces, axis=0)
        slopes = cc.gradients(cc.reduce_sum(stacked * stacked) + cc.reduce_sum(joined), [pieces[0], pieces[-1]])
    feeds = {p: np.full(2, i, "float32") for i, p in enumerate(pieces)}
    with Session(graph) as sess:
        got_stacked, got_joined, first, last = sess.run([stacked, joined] + slopes, feeds)
    np.testing.assert_array_equal(got_stacked, np.repeat(np.arange(150.0), 2).reshape(150, 2))
    np.testing.assert_array_equal(got_joined, np.repeat(np.arange(150.0), 2))
    np.testing.assert_array_equal(first, [1.0, 1.0])
    np.testing.assert_array_equal(last, [299.0, 299.0])


def test_stack_of_different_shapes_names_the_tensors_given() -> None:
    graph = cc.Graph()
    with graph.as_default():
        a, b = cc.placeholder("float32", (3,), name="a"), cc.placeholder("float32", (4,), name="b")
        with pytest.raises(cc.ShapeError, match=r"stack: 'a:0' \(3,\) and 'b:0' \(4,\) must have the same shape "
                                                rf"\(at {re.escape(__file__)}:\d+\)"):
            cc.stack([a, b])
        with pytest.raises(cc.ShapeError, match=r"stack: 'a:0' \(3,\) and 'c:0' \(3, 1\) must have the same shape"):
            cc.stack([a, cc.placeholder("float32", (3, 1), name="c")])
        assert cc.stack([a, cc.placeholder("float32", (None,))]).shape == (2, 3)


def test_zeros_ones_and_fill_take_sizes_read_from_shapes_as_tf1() -> None:
    """tf.zeros([tf.shape(x)[0], 4]) (an RNN's zero state for the fed batch) and tf.zeros(tf.shape(x))
    were refused: a constant's shape had to be Python ints."""
    graph = cc.Graph()
    with graph.as_default():
        x = cc.placeholder("float32", (None, 5, 3), name="x")
        value = cc.placeholder("float64", (), name="value")
        built = [cc.zeros([cc.shape(x)[0], 4]), cc.ones([2, cc.shape(x)[0]], "int32"),
                 cc.fill([cc.shape(x)[0], cc.shape(x)[1]], value), cc.zeros(cc.shape(x)), cc.zeros([cc.shape(x)[1], 2])]
        assert [t.shape for t in built] == [(None, 4), (2, None), (None, 5), (None, 5, 3), (5, 2)]
        (gradient,) = cc.gradients(cc.reduce_sum(built[2] * 3.0), [value])
        with pytest.raises(TypeError, match=r"zeros: the size 'Add:0' must be shape\(t\)\[i\]"):
            cc.zeros([cc.shape(x)[0] + 1])
        with pytest.raises(TypeError, match="a bool tensor of a size known only when the step is compiled"):
            cc.zeros([cc.shape(x)[0]], "bool")
    for target in ("cpu", "reference", "cuda-emulated"):
        with Session(graph, target=target) as sess:
            for batch in (3, 1, 0):
                got = sess.run(built + [gradient], {x: np.ones((batch, 5, 3), "float32"), value: 2.5})
                expected = [np.zeros((batch, 4), "float32"), np.ones((2, batch), "int32"), np.full((batch, 5), 2.5),
                            np.zeros((batch, 5, 3), "float32"), np.zeros((5, 2), "float32"), 3.0 * batch * 5]
                for array, want in zip(got, expected):
                    np.testing.assert_array_equal(array, want)
                    assert np.asarray(array).dtype == np.asarray(want).dtype


@pytest.mark.parametrize("target", ["cpu", "reference", "cuda-emulated"])
def test_top_k_picks_the_largest_lower_positions_first_on_ties(target: str) -> None:
    values = np.random.default_rng(9).integers(-3, 4, size=(5, 2, 7)).astype("float32")   # many ties
    graph = cc.Graph()
    with graph.as_default():
        top_values, top_indices = cc.nn.top_k(cc.constant(values), k=4)
        everything = cc.nn.top_k(cc.constant(values[0, 0]), k=7)
        with pytest.raises(ValueError, match=r"top_k: k must be an int in \[0, 7\]"):
            cc.nn.top_k(cc.constant(values), k=8)
    with Session(graph, target=target) as sess:
        got_values, got_indices, (all_values, all_indices) = sess.run([top_values, top_indices, everything])
    expected = np.argsort(-values, axis=-1, kind="stable")[..., :4]
    np.testing.assert_array_equal(got_indices, expected)
    np.testing.assert_array_equal(got_values, np.take_along_axis(values, expected, axis=-1))
    np.testing.assert_array_equal(all_indices, np.argsort(-values[0, 0], kind="stable"))
    assert got_indices.dtype == np.int32


def test_gather_nd_reads_entries_and_slices_as_numpy_and_zeros_outside() -> None:
    params = np.arange(24.0).reshape(2, 3, 4)
    indices = np.array([[[1, 2], [0, 0]], [[1, 1], [2, 0]]])              # (2, 0): batch 2 of 2, zeros
    graph = cc.Graph()
    with graph.as_default():
        entries = cc.gather_nd(cc.constant(params), cc.constant(np.array([[1, 2, 3], [0, 1, 0], [0, 3, 0]])))
        slices = cc.gather_nd(cc.constant(params), cc.constant(indices))
        with pytest.raises(cc.ShapeError, match="gather_nd: indices must be integers"):
            cc.gather_nd(cc.constant(params), cc.constant(np.zeros((2, 4), "int32")))
    with Session(graph) as sess:
        got_entries, got_slices = sess.run([entries, slices])
    np.testing.assert_array_equal(got_entries, [params[1, 2, 3], params[0, 1, 0], 0.0])   # (0, 3, 0): row 3 of 3
    expected = np.zeros((2, 2, 4))
    for position in np.ndindex(2, 2):
        i, j = indices[position]
        if i < 2 and j < 3:
            expected[position] = params[i, j]
    np.testing.assert_array_equal(got_slices, expected)


def test_top_k_ranks_nan_above_numbers_norm_refuses_a_matrix_2_norm_and_sizes_read_shape_t_minus_1() -> None:
    """NaN made top_k's ranks collide (index 3 of a row of 3); norm(ord=2) of a matrix gave its
    Frobenius norm; zeros([shape(x)[-1]]) was refused."""
    graph = cc.Graph()
    with graph.as_default():
        values, indices = cc.nn.top_k(cc.constant([[1.0, np.nan, 3.0], [np.nan, np.nan, 0.0]]), k=3)
        with pytest.raises(ValueError, match=r"norm: ord 2 is not available for a matrix"):
            cc.norm(cc.constant(np.eye(2)), ord=2, axis=[0, 1])
        x = cc.placeholder("float32", (2, None), name="x")
        last = cc.zeros([cc.shape(x)[-1]])
    with Session(graph) as sess:
        got_values, got_indices = sess.run([values, indices])
        assert sess.run(last, {x: np.ones((2, 5), "float32")}).shape == (5,)
    assert got_indices.tolist() == [[1, 2, 0], [0, 1, 2]]
    np.testing.assert_array_equal(got_values, [[np.nan, 3.0, 1.0], [np.nan, np.nan, 0.0]])


SPECIAL = [0.0, -0.0, 1e-30, -1e-30, 0.5, 1.5, 2.5, -0.5, -2.5, 1e30, -1e30, np.inf, -np.inf, np.nan, 1.0, -1.0,
           0.999, 1e10, 4503599627370497.0, 88.9, -88.9, 710.0, -710.0]   # sinh/cosh near overflow
ELEMENTWISE_AGAINST_NUMPY = {   # op -> (graphgrad, numpy, ulps allowed)
    "round": (cc.round, np.rint, 0), "sinh": (cc.sinh, np.sinh, 4), "cosh": (cc.cosh, np.cosh, 4),
    "asinh": (cc.asinh, np.arcsinh, 4), "acosh": (cc.acosh, np.arccosh, 4), "atanh": (cc.atanh, np.arctanh, 4),
    "is_finite": (cc.is_finite, np.isfinite, 0), "is_inf": (cc.is_inf, np.isinf, 0),
}


@pytest.mark.parametrize("dtype", ["float32", "float64"])
@pytest.mark.parametrize("name", ELEMENTWISE_AGAINST_NUMPY)
def test_hyperbolic_rounding_and_finiteness_equal_numpy(name: str, dtype: str) -> None:
    ours, theirs, ulps = ELEMENTWISE_AGAINST_NUMPY[name]
    values = np.concatenate([np.random.default_rng(0).normal(size=1000) * 3, SPECIAL]).astype(dtype)
    x = cc.placeholder(dtype, (None,))
    with Session(x.graph) as sess, np.errstate(all="ignore"):
        got, expected = sess.run(ours(x), {x: values}), theirs(values)
    assert got.dtype == expected.dtype
    if got.dtype == bool:
        np.testing.assert_array_equal(got, expected)
        return
    np.testing.assert_allclose(got, expected, rtol=max(ulps, 1) * np.finfo(dtype).eps if ulps else 0, atol=0)
    zeros = expected == 0
    np.testing.assert_array_equal(np.signbit(got[zeros]), np.signbit(expected[zeros]))   # -0.0 stays -0.0


@pytest.mark.parametrize("dtype", ["float32", "float64"])
def test_hyperbolic_gradients_near_zero_and_at_the_branch_points(dtype: str) -> None:
    # cosh' = sinh without cancelling near 0; acosh' and atanh' are inf at 1 and ±1 (TF1's), not NaN.
    small = np.array([1e-30, 1e-10, 1e-4, -1e-3, 0.3], dtype)
    x = cc.placeholder(dtype, (None,))
    derivatives = [cc.gradients(cc.reduce_sum(op(x)), [x])[0] for op in (cc.cosh, cc.acosh, cc.atanh)]
    with Session(x.graph) as sess:
        cosh_slope = sess.run(derivatives[0], {x: small})
        acosh_slope = sess.run(derivatives[1], {x: np.array([1.0, 2.0], dtype)})
        atanh_slope = sess.run(derivatives[2], {x: np.array([1.0, -1.0, 0.5, 0.0], dtype)})
    np.testing.assert_allclose(cosh_slope, np.sinh(small), rtol=4 * np.finfo(dtype).eps, atol=0)
    np.testing.assert_allclose(acosh_slope, [np.inf, 1 / np.sqrt(3.0)], rtol=4 * np.finfo(dtype).eps)
    np.testing.assert_allclose(atanh_slope, [np.inf, np.inf, 4 / 3, 1.0], rtol=4 * np.finfo(dtype).eps)


@pytest.mark.parametrize("dtype", ["int32", "float64"])
def test_truncatediv_and_truncatemod_are_c_s_division(dtype: str) -> None:
    rng = np.random.default_rng(1)
    if dtype == "int32":
        x, y = rng.integers(-50, 50, 500).astype(dtype), rng.integers(-7, 8, 500).astype(dtype)
        y[y == 0] = 3
    else:
        x, y = rng.normal(size=500) * 10, rng.normal(size=500)
    a, b = cc.placeholder(dtype, (None,)), cc.placeholder(dtype, (None,))
    with Session(a.graph) as sess:
        quotient, remainder = sess.run([cc.truncatediv(a, b), cc.truncatemod(a, b)], {a: x, b: y})
    np.testing.assert_array_equal(quotient, np.trunc(x / y).astype(dtype))
    np.testing.assert_array_equal(remainder, np.fmod(x, y))


@pytest.mark.parametrize("shape", [(3, 3), (2, 3), (4, 2), (2, 3, 5), (0, 2, 2)])
def test_matrix_diagonal_ops_equal_numpy(shape: tuple[int, ...]) -> None:
    rng = np.random.default_rng(2)
    x = rng.normal(size=shape)
    length = min(shape[-2:])
    d = rng.normal(size=shape[:-2] + (length,))
    with Session(cc.Graph()) as sess, sess.graph.as_default():
        part, total, replaced, built = sess.run([cc.matrix_diag_part(x), cc.trace(x), cc.matrix_set_diag(x, d),
                                                 cc.matrix_diag(d)])
    index = np.arange(length)
    expected_replaced, expected_built = x.copy(), np.zeros(d.shape + (length,))
    expected_replaced[..., index, index] = d
    expected_built[..., index, index] = d
    np.testing.assert_array_equal(part, np.diagonal(x, axis1=-2, axis2=-1))
    np.testing.assert_allclose(total, np.trace(x, axis1=-2, axis2=-1), rtol=1e-12)
    np.testing.assert_array_equal(replaced, expected_replaced)
    np.testing.assert_array_equal(built, expected_built)


@pytest.mark.parametrize("shift, axis", [(1, 0), (-1, 1), (5, 2), ([1, 2], [0, 2]), (0, 1), (3, -1), (7, 0)])
def test_roll_equals_numpy(shift, axis) -> None:
    values = np.arange(24).reshape(2, 3, 4)
    with Session(cc.Graph()) as sess, sess.graph.as_default():
        np.testing.assert_array_equal(sess.run(cc.roll(values, shift, axis)), np.roll(values, shift, axis))


def test_variance_std_and_euclidean_norm_equal_numpy() -> None:
    x = np.random.default_rng(3).normal(size=(3, 4, 5))
    with Session(cc.Graph()) as sess, sess.graph.as_default():
        variance, std, norm = sess.run([cc.reduce_variance(x, axis=1), cc.reduce_std(x, axis=[0, 2], keepdims=True),
                                        cc.reduce_euclidean_norm(x)])
    np.testing.assert_allclose(variance, x.var(axis=1), rtol=1e-12)
    np.testing.assert_allclose(std, x.std(axis=(0, 2), keepdims=True), rtol=1e-12)
    np.testing.assert_allclose(norm, np.sqrt((x * x).sum()), rtol=1e-12)


@pytest.mark.parametrize("call, error, match", [
    (lambda: cc.sinh(cc.constant([1, 2])), DTypeError, "sinh takes float32 or float64 tensors, got int32"),
    (lambda: cc.roll(cc.constant([1, 2]), 1.5, 0), TypeError, "roll: shift and axis must be ints"),
    (lambda: cc.roll(cc.constant([1, 2]), 1, 3), ShapeError, "roll: axis 3 is out of range"),
    (lambda: cc.matrix_set_diag(np.zeros((3, 4)), np.zeros(4)), ValueError,
     r"matrix_set_diag: the diagonal .* of shape \[4\] must end in 3"),
    (lambda: cc.diag(np.zeros((2, 2))), ValueError, "diag: takes a vector"),
    (lambda: cc.trace(cc.placeholder("float32", (None, 3))), ValueError, "matrix_diag_part: needs matrices of known size"),
])
def test_new_derived_op_errors_name_the_users_line(call, error, match) -> None:
    with cc.Graph().as_default(), pytest.raises(error, match=match) as raised:
        call()
    assert "test_derived_ops.py" in str(raised.value)


@pytest.mark.parametrize("dtype", ["float32", "float64"])
def test_truncatemod_is_exact_where_x_is_tiny_beside_y_and_keeps_x_s_sign(dtype: str) -> None:
    x = np.array([-1e-30, -0.1, 0.1, -5.0, -0.0, 7.5, -7.5], dtype)
    y = np.array([1.0, 1e8, -1e8, 5.0, 3.0, -2.0, 2.0], dtype)
    with Session(cc.Graph()) as sess, sess.graph.as_default():
        got = sess.run(cc.truncatemod(x, y))
    np.testing.assert_array_equal(got, np.fmod(x, y))
    np.testing.assert_array_equal(np.signbit(got), np.signbit(np.fmod(x, y)))


def test_integer_division_with_slash_is_true_division_and_top_k_takes_integers() -> None:
    with Session(cc.Graph()) as sess, sess.graph.as_default():
        k = cc.constant([7, -7])
        quotients = sess.run([k / 2, 7 / k, cc.divide(cc.constant([1], "int64"), 4)])
        values, indices = sess.run(cc.nn.top_k(cc.constant([3, 7, 7, 1]), k=2))
    assert [q.dtype for q in quotients] == [np.float64] * 3
    assert [q.tolist() for q in quotients] == [[3.5, -3.5], [1.0, -1.0], [0.25]]
    assert values.tolist() == [7, 7] and values.dtype == np.int32 and indices.tolist() == [1, 2]


def test_literal_params_keep_their_own_dtype_and_a_vector_condition_selects_rows() -> None:
    with Session(cc.Graph()) as sess, sess.graph.as_default():
        ids = cc.constant([1], "int64")
        rows = sess.run(cc.gather([[1, 2], [3, 4]], ids))
        picked = sess.run(cc.gather([0.5, 1.5], ids))
        sums = sess.run(cc.unsorted_segment_sum([1.0, 2.0, 4.0], cc.constant([0, 1, 0]), 2))
        selected = sess.run(cc.where(cc.constant([True, False]), [[1.0, 2.0], [3.0, 4.0]], [[5.0, 6.0], [7.0, 8.0]]))
        squeezed = cc.squeeze(cc.zeros((2, 1)), np.int64(1))
    assert rows.dtype == np.int32 and rows.tolist() == [[3, 4]]
    assert picked.dtype == np.float32 and picked.tolist() == [1.5]
    assert sums.tolist() == [5.0, 2.0]
    assert selected.tolist() == [[1.0, 2.0], [7.0, 8.0]]
    assert squeezed.shape == (2,)


def test_a_vector_condition_selects_rows_also_when_the_batch_is_fed() -> None:
    condition, x = cc.placeholder("bool", (None,)), cc.placeholder("float32", (None, 3))
    picked = cc.where(condition, x, -x)
    with Session(condition.graph) as sess:
        for rows in ([True, False, False], [False, True]):
            got = sess.run(picked, {condition: rows, x: np.ones((len(rows), 3), "float32")})
            np.testing.assert_array_equal(got, np.where(np.array(rows)[:, None], 1.0, -1.0) * np.ones((1, 3)))


@pytest.mark.parametrize("indices, shape", [
    ([[0, 1], [1, 0], [0, 1]], [2, 2]), ([[1], [0], [1]], [3, 2]), ([[0, 1, 2]], [2, 3, 4]),
    ([[5, 0], [-1, 1], [1, 1]], [2, 2]),   # outside the shape: dropped
])
def test_scatter_nd_adds_as_numpy(indices: list, shape: list) -> None:
    index = np.array(indices)
    updates = np.random.default_rng(5).normal(size=index.shape[:-1] + tuple(shape[index.shape[-1]:]))
    expected = np.zeros(shape)
    for position, update in zip(index, updates):
        if all(0 <= i < n for i, n in zip(position, shape)):
            expected[tuple(position)] += update
    with Session(cc.Graph()) as sess, sess.graph.as_default():
        np.testing.assert_allclose(sess.run(cc.scatter_nd(index, updates, shape)), expected, rtol=1e-12)
        np.testing.assert_allclose(sess.run(cc.tensor_scatter_nd_add(np.ones(shape), index, updates)),
                                   expected + 1.0, rtol=1e-12)


@pytest.mark.parametrize("target", ["cpu", "reference"])
def test_scatter_add_and_sub_update_a_variable_with_repeated_indices(target: str) -> None:
    with cc.Graph().as_default() as graph:
        v = cc.Variable(np.zeros((3, 2)), name="v")
        added = cc.scatter_add(v, [0, 2, 0], np.ones((3, 2)))
        removed = cc.scatter_sub(v, cc.constant([[1, 1]]), np.full((1, 2, 2), 0.5))
        with pytest.raises(cc.ShapeError, match=r"scatter_add: updates \(2, 2\) must be indices' shape then the "
                                                r"rows' shape, \(3, 2\)"):
            cc.scatter_add(v, [0, 1, 2], np.ones((2, 2)))
        with pytest.raises(TypeError, match="scatter_nd: shape must be a list of Python ints"):
            cc.scatter_nd([[0]], [1.0], cc.constant([2]))
    with Session(graph, target=target) as sess:
        assert sess.run(added).tolist() == [[2.0, 2.0], [0.0, 0.0], [1.0, 1.0]]
        assert sess.run(removed).tolist() == [[2.0, 2.0], [-1.0, -1.0], [1.0, 1.0]]


def test_range_of_a_size_known_when_compiled() -> None:
    x = cc.placeholder("float32", (None, 3), name="x")
    rows, columns = cc.range(cc.shape(x)[0]), cc.range(cc.shape(x)[1], dtype="int64")
    assert rows.shape == (None,) and rows.dtype == np.int32 and columns.shape == (3,)
    last = cc.gather_nd(cc.placeholder("float32", (5, 3)), cc.stack([cc.range(5), cc.fill([5], 2)], axis=1))
    with Session(x.graph) as sess:
        got_rows, got_columns = sess.run([rows, columns], {x: np.zeros((4, 3), "float32")})
    assert got_rows.tolist() == [0, 1, 2, 3] and got_columns.tolist() == [0, 1, 2] and got_columns.dtype == np.int64
    assert last.shape == (5,)
    with pytest.raises(TypeError, match=r"range: with a limit known only when the step is compiled, start must be 0"):
        cc.range(1, cc.shape(x)[0])


@pytest.mark.parametrize("target", ["cpu", "reference"])
def test_gather_nd_reads_the_last_relevant_output_of_a_fed_batch(target: str) -> None:
    outputs, lengths = cc.placeholder("float32", (None, 10, 8)), cc.placeholder("int32", (None,))
    last = cc.gather_nd(outputs, cc.stack([cc.range(cc.shape(outputs)[0]), lengths - 1], axis=1))
    (slope,) = cc.gradients(cc.reduce_sum(last), [outputs])
    values = np.random.default_rng(0).normal(size=(4, 10, 8)).astype("float32")
    picked = np.array([10, 3, 1, 5], "int32")
    with Session(outputs.graph, target=target) as sess:
        got, got_slope = sess.run([last, slope], {outputs: values, lengths: picked})
    np.testing.assert_array_equal(got, values[np.arange(4), picked - 1])
    expected_slope = np.zeros_like(values)
    expected_slope[np.arange(4), picked - 1] = 1.0
    np.testing.assert_array_equal(got_slope, expected_slope)
    assert last.shape == (None, 8)
    with pytest.raises(cc.ShapeError, match="the first may be fed when all the others are known"):
        cc.gather_nd(cc.placeholder("float32", (None, None)), [[0, 1]])


@pytest.mark.parametrize("target", ["cpu", "reference"])
def test_a_vector_condition_must_have_one_entry_per_row(target: str) -> None:
    condition, x = cc.placeholder("bool", (None,)), cc.placeholder("float32", (None, 3))
    picked = cc.where(condition, x, -x)
    with Session(condition.graph, target=target) as sess:
        for entries, rows in (([False], 3), ([True, False, True], 1)):   # no broadcasting from a size 1
            with pytest.raises(cc.InvalidArgumentError, match="where: a vector condition needs one entry per row"):
                sess.run(picked, {condition: entries, x: np.ones((rows, 3), "float32")})
    with pytest.raises(cc.ShapeError, match=r"where: the condition has 1 entries for 3 rows"):
        cc.where(cc.constant([True]), np.ones((3, 3)), np.zeros((3, 3)))


def test_new_op_argument_mends() -> None:
    with Session(cc.Graph()) as sess, sess.graph.as_default():
        replaced = sess.run(cc.matrix_set_diag(np.zeros((2, 2)), [10.0, 20.0]))   # a list takes the matrix's dtype
        assert replaced.dtype == np.float64 and replaced.tolist() == [[10.0, 0.0], [0.0, 20.0]]
        with pytest.raises(TypeError, match="scatter_add: ref must be a Variable"):
            cc.scatter_add(cc.zeros((3, 2)), [0], np.ones((1, 2)))
        with pytest.raises(DTypeError, match="div_no_nan takes float32 or float64 tensors"):
            cc.div_no_nan(cc.constant([1, 2]), cc.constant([1, 0]))
        with pytest.raises(DTypeError, match="reduce_euclidean_norm: needs a float tensor"):
            cc.reduce_euclidean_norm(cc.constant([3, 4]))


def test_reduce_mean_of_int32_is_tf1_s_integer_mean() -> None:
    values = np.array([[-7, 2], [5, 5], [1, 2]], "int32")
    with Session(cc.Graph()) as sess, sess.graph.as_default():
        rows, everything = sess.run([cc.reduce_mean(values, axis=1), cc.reduce_mean(values)])
    assert rows.dtype == np.int32 and rows.tolist() == [-2, 5, 1]   # rounded toward zero, as C's division
    assert everything == int(np.trunc(values.sum() / values.size))


@pytest.mark.parametrize("exclusive", [False, True])
@pytest.mark.parametrize("reverse", [False, True])
@pytest.mark.parametrize("axis", [0, 1, -1])
def test_cumprod_equals_numpy_with_zeros_and_signs(axis: int, exclusive: bool, reverse: bool) -> None:
    values = np.array([[2.0, -3.0, 0.0, 5.0], [1.5, 2.0, -1.0, 0.5], [0.0, 0.0, 2.0, 3.0]])
    flipped = np.flip(values, axis) if reverse else values
    if exclusive:
        flipped = np.concatenate([np.ones_like(np.take(flipped, [0], axis)), np.delete(flipped, -1, axis)], axis)
    expected = np.cumprod(flipped, axis)
    expected = np.flip(expected, axis) if reverse else expected
    with Session(cc.Graph()) as sess, sess.graph.as_default():
        np.testing.assert_allclose(sess.run(cc.cumprod(values, axis, exclusive, reverse)), expected, rtol=1e-12)


def _depthwise_numpy(x: np.ndarray, w: np.ndarray, strides: tuple[int, int], rate: int, padding: str) -> np.ndarray:
    """TF1's depthwise_conv2d written out: out[b, i, j, k*m + q] = sum x[b, i*s + di*r - pad, ...] * w[di, dj, k, q]."""
    batch, height, width, channels = x.shape
    kernel_h, kernel_w, _, multiplier = w.shape
    sizes, befores = [], []
    for size, kernel, stride in ((height, kernel_h, strides[0]), (width, kernel_w, strides[1])):
        span = (kernel - 1) * rate + 1
        out = -(-(size - span + 1) // stride) if padding == "VALID" else -(-size // stride)
        sizes.append(out)
        befores.append(0 if padding == "VALID" else max((out - 1) * stride + span - size, 0) // 2)
    result = np.zeros((batch, sizes[0], sizes[1], channels, multiplier))
    for i, j, di, dj in np.ndindex(sizes[0], sizes[1], kernel_h, kernel_w):
        row, column = i * strides[0] + di * rate - befores[0], j * strides[1] + dj * rate - befores[1]
        if 0 <= row < height and 0 <= column < width:
            result[:, i, j] += x[:, row, column, :, None] * w[di, dj]
    return result.reshape(batch, sizes[0], sizes[1], channels * multiplier)


@pytest.mark.parametrize("image, filters, strides, rate, padding", [
    ((2, 7, 6, 3), (3, 3, 3, 2), [1, 2, 2, 1], None, "SAME"),
    ((2, 7, 6, 3), (3, 2, 3, 1), 1, 2, "SAME"),
    ((1, 5, 5, 2), (2, 2, 2, 3), [1, 2, 1, 1], None, "VALID"),
    ((3, 4, 4, 1), (4, 4, 1, 1), 1, None, "SAME"),           # even kernel: the larger pad after
])
def test_depthwise_and_separable_conv2d_equal_tf1_s_definition(image, filters, strides, rate, padding) -> None:
    rng = np.random.default_rng(3)
    x = cc.placeholder("float64", (None,) + image[1:])
    w = cc.placeholder("float64", filters)
    pointwise = rng.normal(size=(1, 1, filters[2] * filters[3], 2))
    depthwise = cc.nn.depthwise_conv2d(x, w, strides, padding, rate=rate)
    separable = cc.nn.separable_conv2d(x, w, cc.constant(pointwise), strides, padding, rate=rate)
    x_value, w_value = rng.normal(size=image), rng.normal(size=filters)
    with Session() as sess:
        got, got_separable = sess.run([depthwise, separable], {x: x_value, w: w_value})
    pair = (strides, strides) if isinstance(strides, int) else (strides[1], strides[2])
    expected = _depthwise_numpy(x_value, w_value, pair, rate or 1, padding)
    np.testing.assert_allclose(got, expected, rtol=1e-12, atol=1e-12)
    np.testing.assert_allclose(got_separable, expected @ pointwise[0, 0], rtol=1e-12, atol=1e-12)


def test_space_depth_meshgrid_and_math_names_equal_tf1_and_numpy() -> None:
    image = np.arange(2 * 4 * 6 * 3, dtype=np.float64).reshape(2, 4, 6, 3)
    x = cc.placeholder("float64", (None, 4, 6, 3))
    with Session() as sess:
        # TF1's documented example: [[[[1], [2]], [[3], [4]]]] -> [[[[1, 2, 3, 4]]]]
        assert sess.run(cc.space_to_depth(cc.constant([[[[1.0], [2.0]], [[3.0], [4.0]]]]), 2)).tolist() == \
            [[[[1.0, 2.0, 3.0, 4.0]]]]
        to_depth, back = sess.run([cc.space_to_depth(x, 2), cc.depth_to_space(cc.space_to_depth(x, 2), 2)], {x: image})
        grids = sess.run(cc.meshgrid(cc.constant([1, 2, 3]), cc.constant([4.0, 5.0]), cc.constant([7, 8, 9, 10])))
        grids_ij = sess.run(cc.meshgrid(cc.constant([1, 2, 3]), cc.constant([4, 5]), indexing="ij"))
        logs = sess.run(cc.math.xlogy(cc.constant([0.0, 0.0, 2.0]), cc.constant([0.0, np.nan, 3.0])))
        divisions = sess.run(cc.math.xdivy(cc.constant([0.0, 1.0]), cc.constant([0.0, 4.0])))
        reciprocals = sess.run(cc.math.reciprocal_no_nan(cc.constant([0.0, 4.0])))
        diagonal = sess.run(cc.diag_part(cc.constant(np.arange(36.0).reshape(2, 3, 2, 3))))
        moments = sess.run(cc.nn.weighted_moments(cc.constant(image[0, 0]), [0], cc.constant([[1], [2], [3], [0], [1], [1]])))
        normalized = sess.run(cc.nn.normalize_moments(4.0, cc.constant([2.0]), cc.constant([10.0]), cc.constant([1.0])))
    blocks = image.reshape(2, 2, 2, 3, 2, 3).transpose(0, 1, 3, 2, 4, 5).reshape(2, 2, 3, 12)
    np.testing.assert_array_equal(to_depth, blocks)
    np.testing.assert_array_equal(back, image)
    for got, expected in zip(grids, np.meshgrid([1, 2, 3], [4.0, 5.0], [7, 8, 9, 10])):
        np.testing.assert_array_equal(got, expected)
    for got, expected in zip(grids_ij, np.meshgrid([1, 2, 3], [4, 5], indexing="ij")):
        np.testing.assert_array_equal(got, expected)
    np.testing.assert_allclose(logs, [0.0, 0.0, 2.0 * np.log(3.0)])
    np.testing.assert_array_equal(divisions, [0.0, 0.25])
    np.testing.assert_array_equal(reciprocals, [0.0, 0.25])
    np.testing.assert_array_equal(diagonal, np.arange(36.0).reshape(6, 6).diagonal().reshape(2, 3))
    weights = np.array([1, 2, 3, 0, 1, 1], float)[:, None]
    mean = (weights * image[0, 0]).sum(0) / weights.sum()
    np.testing.assert_allclose(moments[0], mean)
    np.testing.assert_allclose(moments[1], (weights * (image[0, 0] - mean) ** 2).sum(0) / weights.sum())
    np.testing.assert_allclose(normalized, [[1.5], [2.25]])    # mean = 2/4 + 1, variance = 10/4 - 0.5**2
    assert cc.math.reduce_sum is cc.reduce_sum and cc.linalg.matmul is cc.matmul
    assert cc.matrix_transpose(cc.placeholder("float32", (None, 2, 3))).shape == (None, 3, 2)


@pytest.mark.parametrize("call, error, match", [
    (lambda: cc.nn.depthwise_conv2d(cc.placeholder("float32", (1, 4, 4, 3)), np.ones((3, 3, 2, 1), "float32"),
                                    1, "SAME"), ShapeError, "has 3 channels but the filter"),
    (lambda: cc.nn.depthwise_conv2d(cc.placeholder("float32", (1, 4, 4, 3)), np.ones((3, 3, 3, 1), "float32"),
                                    2, "SAME", rate=2), ValueError, "strides and rate"),
    (lambda: cc.nn.depthwise_conv2d(cc.placeholder("float32", (1, 2, 2, 3)), np.ones((3, 3, 3, 1), "float32"),
                                    1, "VALID"), ShapeError, "does not fit"),
    (lambda: cc.space_to_depth(cc.placeholder("float32", (1, 3, 4, 1)), 2), ValueError, "multiples of block_size"),
    (lambda: cc.depth_to_space(cc.placeholder("float32", (1, 3, 4, 6)), 2), ValueError, "multiple of block_size"),
    (lambda: cc.meshgrid(cc.constant([1.0]), indexing="xz"), ValueError, "indexing"),
    (lambda: cc.diag_part(cc.placeholder("float32", (2, 3))), ValueError, "D1, ..., Dk"),
    (lambda: cc.matrix_transpose(cc.placeholder("float32", (3,))), ValueError, "rank 2 or more"),
    (lambda: cc.scalar_mul([1.0, 2.0], cc.constant([1.0])), ShapeError, "rank 0"),
])
def test_tf1_api_additions_refuse_bad_input_naming_the_line(call, error, match) -> None:
    with pytest.raises(error, match=match) as caught:
        call()
    assert "test_derived_ops.py" in str(caught.value)


def test_pad_takes_a_scalar_tensor_fill_as_tf1() -> None:
    x = cc.placeholder("float64", (2, 3))
    fill = cc.placeholder("float64", ())
    fed = cc.pad(x, [[1, 0], [0, 2]], constant_values=fill)
    known = cc.pad(x, [[1, 0], [0, 2]], constant_values=cc.constant(7.0, "float64"))
    assert known.op.type == "Pad"       # a value known now is the op's own fill
    slopes = cc.gradients(cc.reduce_sum(fed * fed), [x, fill])
    with Session() as sess:
        got, got_known, slope_x, slope_fill = sess.run([fed, known] + slopes, {x: np.ones((2, 3)), fill: 2.0})
    np.testing.assert_array_equal(got, np.pad(np.ones((2, 3)), [[1, 0], [0, 2]], constant_values=2.0))
    np.testing.assert_array_equal(got_known, np.pad(np.ones((2, 3)), [[1, 0], [0, 2]], constant_values=7.0))
    np.testing.assert_array_equal(slope_x, np.full((2, 3), 2.0))
    assert slope_fill == 2 * 2.0 * 9      # nine border entries
    with pytest.raises(DTypeError, match="constant_values .* is float32"):
        cc.pad(x, [[1, 1], [0, 0]], constant_values=cc.constant(1.0))


@pytest.mark.parametrize("call, error, match", [
    (lambda: cc.placeholder("float32", (4, 5))[np.array([0, 1])], TypeError, "use cc.gather"),
    (lambda: cc.scatter_add(cc.Variable(np.zeros((3, 2), np.float32)), [0], cc.constant(np.array([[7, 8]], np.int32))),
     DTypeError, "updates .* are int32 but .* is float32"),
    (lambda: cc.map_fn(lambda e: e * 2.0, cc.placeholder("float32", (None, 3))), ShapeError,
     "map_fn: the length of elems"),
    (lambda: cc.cumprod(cc.placeholder("float32", (None, 3))), ShapeError, "cumprod: the length of axis 0"),
])
def test_errors_name_the_function_the_user_called(call, error, match) -> None:
    with pytest.raises(error, match=match) as caught:
        call()
    assert "test_derived_ops.py" in str(caught.value)


@pytest.mark.parametrize("dtype", ["float32", "float64"])
def test_atan2_asin_acos_equal_numpy_at_special_values_and_within_an_ulp_or_two(dtype: str) -> None:
    special = np.array([0.0, -0.0, 1.0, -1.0, np.inf, -np.inf, np.nan, 1e-30, 0.5, -2.5, 1e30], dtype)
    grid_y, grid_x = np.meshgrid(special, special, indexing="ij")
    rng = np.random.default_rng(0)
    spread_y = (rng.normal(size=20000) * np.exp(rng.uniform(-5, 5, 20000))).astype(dtype)
    spread_x = (rng.normal(size=20000) * np.exp(rng.uniform(-5, 5, 20000))).astype(dtype)
    unit = np.concatenate([np.linspace(-1.1, 1.1, 2001), [1.0, -1.0, np.nextafter(1.0, 0.0)]]).astype(dtype)
    with Session() as sess:
        got_grid, got_spread, got_asin, got_acos, got_atan = sess.run([
            cc.atan2(cc.constant(grid_y), cc.constant(grid_x)), cc.atan2(cc.constant(spread_y), cc.constant(spread_x)),
            cc.asin(cc.constant(unit)), cc.acos(cc.constant(unit)), cc.atan(cc.constant(spread_y))])
    # C's atan2 at zeros of either sign, infinities and NaN, bit for bit (signed zeros included)
    np.testing.assert_array_equal(got_grid, np.arctan2(grid_y, grid_x))
    assert (np.signbit(got_grid) == np.signbit(np.arctan2(grid_y, grid_x))).all()
    wide = np.longdouble if dtype == "float64" else np.float64
    limit = 1.5 if dtype == "float64" else 0.5001         # float32: computed in double, rounded once

    def ulps(got: np.ndarray, exact: np.ndarray) -> float:
        spacing = np.spacing(np.abs(exact.astype(dtype))).astype(wide)
        with np.errstate(invalid="ignore"):
            return float(np.nanmax(np.abs(got.astype(wide) - exact) / spacing))
    assert ulps(got_spread, np.arctan2(spread_y.astype(wide), spread_x.astype(wide))) <= limit
    assert ulps(got_atan, np.arctan(spread_y.astype(wide))) <= 1.0
    with np.errstate(invalid="ignore"):
        np.testing.assert_allclose(got_asin, np.arcsin(unit.astype(wide)), rtol=4 * np.finfo(dtype).eps, atol=0)
        np.testing.assert_allclose(got_acos, np.arccos(unit.astype(wide)), rtol=4 * np.finfo(dtype).eps, atol=0)
    assert np.isnan(got_asin[np.abs(unit) > 1]).all() and np.isnan(got_acos[np.abs(unit) > 1]).all()


def test_reduce_mean_of_int64_is_tf1_s_integer_mean_exact_past_float64() -> None:
    values = np.array([[-7, -4, 0], [2 ** 40, 3, 2 ** 40 + 1]], np.int64)
    with Session() as sess:
        everything, rows, empty = sess.run([cc.reduce_mean(cc.constant(values)),
                                            cc.reduce_mean(cc.constant(values), axis=1),
                                            cc.reduce_mean(cc.constant(values[:, :0]), axis=1)])
    assert everything.dtype == np.int64 and int(everything) == (2 ** 41 - 7) // 6     # positive: floor = trunc
    assert rows.tolist() == [-3, (2 ** 41 + 4) // 3] and empty.tolist() == [0, 0]    # -11/3 rounds toward 0


def test_sizes_given_as_tensors_known_now_are_taken_as_tf1_and_others_name_the_function() -> None:
    x = cc.placeholder("float32", (4, 6), name="x")
    fed = cc.placeholder("float32", (None, 6), name="fed")
    other = cc.placeholder("float32", (None, 3), name="other")
    results = [x[:, :cc.constant(2)], x[:cc.shape(x)[0] - 1], cc.reshape(x, cc.shape(cc.zeros((6, 4)))),
               cc.reshape(x, cc.constant([3, 8])), cc.tile(x, cc.constant([1, 2])), cc.slice(x, [0, 0], cc.shape(x) - 1),
               cc.one_hot(cc.constant([0, 2]), cc.constant(3)), cc.reshape(cc.reshape(fed, [-1]), cc.shape(fed))]
    value = np.arange(24, dtype="float32").reshape(4, 6)
    with Session() as sess:
        got = sess.run(results, {x: value, fed: np.ones((2, 6), "float32")})
    expected = [value[:, :2], value[:3], value.reshape(6, 4), value.reshape(3, 8), np.tile(value, (1, 2)), value[:3, :5],
                np.eye(3, dtype="float32")[[0, 2]], np.ones((2, 6), "float32")]
    for a, b in zip(got, expected):
        np.testing.assert_array_equal(a, b)
    for call, match in [(lambda: x[:, :cc.shape(other)[0]], "slice bound"), (lambda: cc.tile(x, cc.shape(other)), "tile: multiples"),
                        (lambda: cc.reshape(x, cc.shape(other) * 2), "reshape: the shape"),
                        (lambda: cc.one_hot(cc.constant([1]), cc.shape(other)[0]), "one_hot: depth")]:
        with pytest.raises(TypeError, match=match) as caught:
            call()
        assert "has a value only when a step runs" in str(caught.value) and "test_derived_ops.py" in str(caught.value)


def test_unsorted_segment_mean_and_sqrt_n_equal_tf1_s_definition() -> None:
    data = np.array([[1.0, 2.0], [3.0, 4.0], [5.0, 6.0], [7.0, 8.0]])
    ids = np.array([0, 2, 0, -1])            # -1: dropped, as unsorted_segment_sum drops it
    with Session() as sess:
        mean, scaled = sess.run([cc.unsorted_segment_mean(cc.constant(data), cc.constant(ids), 3),
                                 cc.unsorted_segment_sqrt_n(cc.constant(data), cc.constant(ids), cc.constant(3))])
    np.testing.assert_allclose(mean, [[3.0, 4.0], [0.0, 0.0], [3.0, 4.0]])
    np.testing.assert_allclose(scaled, [[6.0 / np.sqrt(2.0), 8.0 / np.sqrt(2.0)], [0.0, 0.0], [3.0, 4.0]])


@pytest.mark.parametrize("target", ["cpu", "reference"])
@pytest.mark.parametrize("dtype", ["int32", "int64"])
def test_integer_tensor_powers_equal_numpy_and_wrap_as_it_does(target: str, dtype: str) -> None:
    bases = np.array([2, -3, 0, 1, -1, 7, 5, -2, 3], dtype)
    exponents = np.array([10, 3, 0, -5, -3, 2, 13, 31, 40], dtype)
    graph = cc.Graph()
    with graph.as_default():
        b, e = cc.constant(bases), cc.constant(exponents)
        results = [b ** e, 2 ** e, cc.pow(b, cc.abs(e))]
    with Session(graph, target=target) as sess:
        powers, of_two, absolute = sess.run(results)
    with np.errstate(over="ignore"):
        expected = np.where(exponents >= 0, bases ** np.abs(exponents),
                            np.where(np.abs(bases) == 1, bases ** np.abs(exponents), 0))   # truncated 1 / x**n
        np.testing.assert_array_equal(powers, expected)
        np.testing.assert_array_equal(of_two, np.where(exponents >= 0, np.array(2, dtype) ** np.abs(exponents), 0))
        np.testing.assert_array_equal(absolute, bases ** np.abs(exponents))
    assert powers.dtype == np.dtype(dtype)


def test_tile_by_a_size_read_from_a_shape_broadcasts_a_size_1_dimension() -> None:
    # TF1's tile(row, [shape(batch)[0], 1]): the multiple is the fed batch size.
    x = cc.placeholder("float32", (None, 3), name="x")
    row = cc.constant([[1.0, 2.0, 3.0]])
    tiled = cc.tile(row, [cc.shape(x)[0], 2])
    (slope,) = cc.gradients(cc.reduce_sum(tiled * 2.0), [row])
    assert tiled.shape == (None, 6)
    with Session() as sess:
        got, got_slope = sess.run([tiled, slope], {x: np.ones((4, 3))})
    np.testing.assert_array_equal(got, np.tile([[1.0, 2.0, 3.0]], (4, 2)))
    np.testing.assert_array_equal(got_slope, [[16.0, 16.0, 16.0]])
    with pytest.raises(cc.ShapeError, match="needs dimension 0 of .* to be 1"):
        cc.tile(cc.constant([[1.0, 2.0]] * 2), [cc.shape(x)[0], 1])


def _bilinear_tf1(images: np.ndarray, size: list[int], align_corners: bool) -> np.ndarray:
    """TF1's resize_bilinear (half_pixel_centers=False) written out: source = out * scale."""
    result = images
    for axis, (size_in, size_out) in enumerate(zip(images.shape[1:3], size), start=1):
        scale = (size_in - 1) / (size_out - 1) if align_corners and size_out > 1 else size_in / size_out
        source = np.arange(size_out) * scale
        low = np.floor(source).astype(int)
        high = np.minimum(low + 1, size_in - 1)
        shape = [1, 1, 1, 1]
        shape[axis] = size_out
        below, above = np.take(result, low, axis=axis), np.take(result, high, axis=axis)
        result = below + (above - below) * (source - low).reshape(shape)
    return result


def test_image_ops_equal_tf1_s_definitions() -> None:
    rng = np.random.default_rng(0)
    images = rng.uniform(size=(2, 4, 5, 3))
    x = cc.placeholder("float64", (None, 4, 5, 3), name="images")
    results = dict(variation=cc.image.total_variation(x), mirrored=cc.image.flip_left_right(x),
                   upside=cc.image.flip_up_down(x[0]), maybe=cc.image.random_flip_left_right(x, seed=1),
                   standard=cc.image.per_image_standardization(x), gray=cc.image.rgb_to_grayscale(x),
                   centre=cc.image.central_crop(x, 0.5), nearest=cc.image.resize_nearest_neighbor(x, [8, 3]),
                   bilinear=cc.image.resize_images(x, [8, 3]),
                   corners=cc.image.resize_bilinear(x, [7, 9], align_corners=True),
                   contrast=cc.image.adjust_contrast(x, 2.0))
    with Session() as sess:
        got = sess.run(results, {x: images})
    variation = np.abs(np.diff(images, axis=1)).sum((1, 2, 3)) + np.abs(np.diff(images, axis=2)).sum((1, 2, 3))
    np.testing.assert_allclose(got["variation"], variation, rtol=1e-12)
    np.testing.assert_array_equal(got["mirrored"], images[:, :, ::-1])
    np.testing.assert_array_equal(got["upside"], images[0, ::-1])
    for k in range(2):
        assert np.array_equal(got["maybe"][k], images[k]) or np.array_equal(got["maybe"][k], images[k, :, ::-1])
    mean = images.mean((1, 2, 3), keepdims=True)
    deviation = np.maximum(images.std((1, 2, 3), keepdims=True), 1 / np.sqrt(60))
    np.testing.assert_allclose(got["standard"], (images - mean) / deviation, rtol=1e-12, atol=1e-12)
    np.testing.assert_allclose(got["gray"][..., 0], images @ np.array([0.2989, 0.5870, 0.1140]), rtol=1e-12)
    np.testing.assert_array_equal(got["centre"], images[:, 1:3, 1:4])        # TF1's int((size - size * f) / 2)
    rows, columns = np.floor(np.arange(8) * 4 / 8).astype(int), np.floor(np.arange(3) * 5 / 3).astype(int)
    np.testing.assert_array_equal(got["nearest"], images[:, rows][:, :, columns])
    np.testing.assert_allclose(got["bilinear"], _bilinear_tf1(images, [8, 3], False), rtol=1e-12)
    np.testing.assert_allclose(got["corners"], _bilinear_tf1(images, [7, 9], True), rtol=1e-12)
    channel_mean = images.mean((1, 2), keepdims=True)
    np.testing.assert_allclose(got["contrast"], (images - channel_mean) * 2.0 + channel_mean, rtol=1e-12)


def test_batch_gather_and_gather_with_batch_dims_pick_within_each_batch_entry() -> None:
    rng = np.random.default_rng(0)
    values = rng.normal(size=(3, 5, 2))
    picks = np.array([[4, 0, -1], [2, 2, 7], [1, 3, 0]])       # -1 and 7: outside the entry's rows, zeros
    params = cc.placeholder("float64", (None, 5, 2), name="params")
    indices = cc.placeholder("int32", (None, 3), name="indices")
    picked, same = cc.batch_gather(params, indices), cc.gather(params, indices, batch_dims=1)
    (slope,) = cc.gradients(cc.reduce_sum(picked * picked), [params])
    deep = rng.normal(size=(2, 3, 5, 2))
    deep_picks = rng.integers(0, 5, size=(2, 3, 4))
    two_levels = cc.gather(cc.constant(deep), cc.constant(deep_picks), batch_dims=2)
    with Session() as sess:
        got, got_same, got_slope, got_deep = sess.run([picked, same, slope, two_levels], {params: values, indices: picks})
    inside = (picks >= 0) & (picks < 5)
    expected = np.where(inside[..., None], np.take_along_axis(values, np.clip(picks, 0, 4)[..., None], 1), 0.0)
    np.testing.assert_array_equal(got, expected)
    np.testing.assert_array_equal(got_same, expected)
    expected_slope = np.zeros_like(values)
    for b, k in zip(*np.nonzero(inside)):
        expected_slope[b, picks[b, k]] += 2 * values[b, picks[b, k]]
    np.testing.assert_allclose(got_slope, expected_slope)
    np.testing.assert_array_equal(got_deep, np.take_along_axis(deep, deep_picks[..., None], 2))

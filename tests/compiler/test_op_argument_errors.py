"""Bad arguments to the indexing, reduction, convolution and pooling ops: each error names the op
or tensor and the user's own file:line, and is raised when the node is built (or compiled, for
shapes only known from the feeds)."""
from __future__ import annotations

import re

import numpy as np
import pytest

import compiler as cc
from runtime import Session

HERE = re.escape(__file__.rsplit("/", 1)[-1])


def _placeholder(shape, dtype="float32", name="x"):
    return cc.placeholder(dtype, shape, name=name)


BUILD_ERRORS = [
    ("getitem-out-of-range", lambda: _placeholder((3, 4))[5], cc.ShapeError, r"index 5 is out of range.*'x"),
    ("getitem-too-many", lambda: _placeholder((3,))[1, 2], cc.ShapeError, r"too many indices"),
    ("getitem-tensor-index", lambda: _placeholder((3,))[[0, 1]], TypeError, r"use cc.gather"),
    ("slice-zero-step", lambda: _placeholder((3,))[::0], cc.ShapeError, r"step cannot be zero"),
    ("split-uneven", lambda: cc.split(_placeholder((3, 4)), 3, axis=1), cc.ShapeError, r"does not divide"),
    ("split-sizes", lambda: cc.split(_placeholder((3, 4)), [1, 2], axis=1), cc.ShapeError, r"do not add up"),
    ("pad-mode", lambda: cc.pad(_placeholder((3,)), [[1, 1]], mode="EDGE"), ValueError, r"'EDGE'"),
    ("pad-reflect-too-wide", lambda: cc.pad(_placeholder((3,)), [[3, 0]], mode="REFLECT"), cc.ShapeError,
     r"at most 2"),
    ("pad-symmetric-too-wide", lambda: cc.pad(_placeholder((3,)), [[0, 4]], mode="SYMMETRIC"), cc.ShapeError,
     r"at most 3"),
    ("pad-rows", lambda: cc.pad(_placeholder((3, 4)), [[1, 1]]), cc.ShapeError, r"paddings has 1 rows"),
    ("pad-negative", lambda: cc.pad(_placeholder((3,)), [[-1, 0]]), cc.ShapeError, r"negative"),
    ("concat-mismatch", lambda: cc.concat([_placeholder((3, 4)), _placeholder((2, 4), name="y")], axis=1),
     cc.ShapeError, r"cannot concatenate"),
    ("add_n-shapes", lambda: cc.add_n([_placeholder((3, 4)), _placeholder((4,), name="y")]), cc.ShapeError,
     r"add_n: inputs 'x.*' \(3, 4\) and 'y.*' \(4,\) differ in shape"),
    ("add_n-dtypes", lambda: cc.add_n([_placeholder((3,)), _placeholder((3,), "float64", "y")]), cc.DTypeError,
     r"add_n: inputs are float32"),
    ("add_n-empty", lambda: cc.add_n([]), ValueError, r"add_n: inputs must be a non-empty list"),
    ("concat-dtype", lambda: cc.concat([_placeholder((3,)), _placeholder((2,), "float64", "y")], axis=0),
     cc.DTypeError, r"different dtypes"),
    ("unstack-unknown-size", lambda: cc.unstack(_placeholder((3, None)), axis=-1), cc.ShapeError,
     r"unstack: axis 1 of 'x.*' \(3, \?\) has an unknown size"),
    ("unstack-axis", lambda: cc.unstack(_placeholder((3, 4)), axis=2), cc.ShapeError,
     r"unstack of 'x.*axis 2 is out of range"),
    ("split-axis", lambda: cc.split(_placeholder((3, 4)), 2, axis=5), cc.ShapeError,
     r"split of 'x.*axis 5 is out of range"),
    ("tile-rank", lambda: cc.tile(_placeholder((3, 4)), [2]), cc.ShapeError, r"multiples"),
    ("gather-float-indices", lambda: cc.gather(_placeholder((3, 4)), _placeholder((2,), name="i")),
     cc.DTypeError, r"indices must be int32 or int64"),
    ("argmax-empty-axis", lambda: cc.argmax(_placeholder((3, 0)), axis=1), cc.ShapeError, r"empty axis"),
    ("argmax-axis", lambda: cc.argmax(_placeholder((3, 4)), axis=2), cc.ShapeError, r"axis 2 is out of range"),
    ("conv2d-rank", lambda: cc.nn.conv2d(_placeholder((8, 8, 1)), _placeholder((3, 3, 1, 2), name="w")),
     cc.ShapeError, r"4-D NHWC"),
    ("conv2d-channels", lambda: cc.nn.conv2d(_placeholder((1, 8, 8, 3)), _placeholder((3, 3, 2, 2), name="w")),
     cc.ShapeError, r"3 channels but the filter expects 2"),
    ("conv2d-padding", lambda: cc.nn.conv2d(_placeholder((1, 8, 8, 1)), _placeholder((3, 3, 1, 2), name="w"),
                                            padding="FULL"), ValueError, r"padding must be"),
    ("conv2d-stride-and-dilation", lambda: cc.nn.conv2d(_placeholder((1, 8, 8, 1)), _placeholder((3, 3, 1, 2), name="w"),
                                                        strides=2, dilations=2), ValueError, r"cannot both"),
    ("max_pool-strides", lambda: cc.nn.max_pool(_placeholder((1, 8, 8, 1)), 2, [2, 2, 2, 2]), ValueError,
     r"only the spatial entries"),
    # window arguments are ints, as TF1's list(int) attributes (1.5 ran as 1)
    ("conv2d-float-strides", lambda: cc.nn.conv2d(_placeholder((1, 8, 8, 1)), _placeholder((3, 3, 1, 2), name="w"),
                                                  strides=1.5), ValueError,
     r"conv2d: strides must be an int or a list of ints, got 1.5"),
    ("max_pool-float-ksize", lambda: cc.nn.max_pool(_placeholder((1, 8, 8, 1)), 2.9, 2), ValueError,
     r"max_pool: ksize must be an int or a list of ints, got 2.9"),
    ("conv1d-float-stride", lambda: cc.nn.conv1d(_placeholder((1, 8, 1)), _placeholder((3, 1, 2), name="w"),
                                                 stride=1.5), ValueError, r"conv1d: stride must be an int"),
    # a VALID window larger than the input: TF1's "Negative dimension size" (not an empty result)
    ("conv2d-valid-window-one-too-big", lambda: cc.nn.conv2d(_placeholder((1, 2, 2, 1)),
                                                             _placeholder((3, 3, 1, 2), name="w")), cc.ShapeError,
     r"Conv2D: a VALID window spanning 3 does not fit an input of size 2"),
    ("max_pool-valid-window-one-too-wide", lambda: cc.nn.max_pool(_placeholder((2, 7, 4, 1)), (2, 5), 2, "VALID"),
     cc.ShapeError, r"MaxPool: a VALID window spanning 5 does not fit an input of size 4"),
    ("conv2d-valid-window-too-big", lambda: cc.nn.conv2d(_placeholder((1, 2, 2, 1)),
                                                         _placeholder((5, 5, 1, 2), name="w")), cc.ShapeError,
     r"Conv2D: a VALID window spanning 5 does not fit an input of size 2"),
    ("max_pool-valid-window-too-big", lambda: cc.nn.max_pool(_placeholder((1, 2, 2, 1)), 4, 1, "VALID"),
     cc.ShapeError, r"MaxPool: a VALID window spanning 4 does not fit an input of size 2"),
    ("avg_pool-int", lambda: cc.nn.avg_pool(_placeholder((1, 8, 8, 1), "int32"), 2, 2), cc.DTypeError,
     r"float32 or float64"),
    ("slice-past-the-end", lambda: cc.slice(_placeholder((4, 6)), [3, 0], [2, 1]), cc.ShapeError,
     r"slice of 'x.*begin 3 and size 2 do not fit dimension 0"),
    ("slice-negative-begin", lambda: cc.slice(_placeholder((4, 6)), [-1, 0], [1, 1]), cc.ShapeError,
     r"begin -1 and size 1"),
    ("slice-size-below-minus-one", lambda: cc.slice(_placeholder((4, 6)), [0, 0], [1, -2]), cc.ShapeError,
     r"begin 0 and size -2"),
    ("cumsum-axis", lambda: cc.cumsum(_placeholder((3, 4)), axis=2), cc.ShapeError,
     r"cumsum of 'x.*axis 2 is out of range"),
    ("stack-axis", lambda: cc.stack([_placeholder((3, 4))], axis=4), cc.ShapeError,
     r"stack of tensors of shape \(3, 4\): axis 4 is out of range"),
    ("reverse-axis", lambda: cc.reverse(_placeholder((3, 4)), axis=[2]), cc.ShapeError,
     r"reverse of 'x.*axis 2 is out of range"),
    ("reduce-float-axis", lambda: cc.reduce_sum(_placeholder((3, 4)), axis=1.0), cc.ShapeError,
     r"ReduceSum: axis must be an int or a list of ints, got 1.0"),
    ("one_hot-negative-depth", lambda: cc.one_hot(_placeholder((3,), "int32"), -1), ValueError,
     r"depth must be at least 0, got -1"),
    ("one_hot-float-on-int", lambda: cc.one_hot(_placeholder((3,), "int32"), 2, on_value=2.5, dtype="int32"),
     cc.DTypeError, r"OneHot: cannot use the float 2.5 with an int32 tensor"),
    ("one_hot-mixed-values", lambda: cc.one_hot(_placeholder((3,), "int32"), 2, on_value=1, off_value=0.5),
     cc.DTypeError, r"one_hot: on_value and off_value must have one dtype, got float32 and int32"),
    ("one_hot-axis", lambda: cc.one_hot(_placeholder((3,), "int32"), 2, axis=2), ValueError,
     r"one_hot: axis must be -1 or in \[0, 1\] for indices of rank 1, got 2"),
    ("huge-int-into-float", lambda: _placeholder((2,)) + 10 ** 400, cc.DTypeError,
     r"Add: 1000.* does not fit in a float32 tensor"),
    ("int-into-bool", lambda: cc.equal(_placeholder((2,), "bool"), 2), cc.DTypeError,
     r"Equal: 2 does not fit in a bool tensor"),
    ("constant-int-into-bool", lambda: cc.constant([0, 1, 2], "bool"), cc.DTypeError,
     r"constant: .* cannot be bool without changing its value"),
    ("pad-float-into-int", lambda: cc.pad(_placeholder((2,), "int32"), [[1, 1]], constant_values=1.5),
     cc.DTypeError, r"Pad: cannot use the float 1.5 with an int32 tensor"),
    ("int-too-big-for-tensor", lambda: _placeholder((2,), "int32") + 2 ** 40, cc.DTypeError,
     r"Add: 1099511627776 does not fit in an int32 tensor"),
    ("constant-float-into-int", lambda: cc.constant(2.5, "int32"), cc.DTypeError,
     r"constant: 2.5 cannot be int32 without changing its value"),
    ("constant-int-too-big", lambda: cc.constant(2 ** 63), cc.DTypeError, r"9223372036854775808 cannot be int64"),
    ("constant-int-beyond-64-bits", lambda: cc.constant(2 ** 70), cc.DTypeError, r"is not numbers of one kind"),
    ("constant-not-numbers", lambda: cc.constant("abc"), cc.DTypeError, r"'abc' is not numbers of one kind"),
    ("constant-ragged", lambda: cc.constant([[1.0, 2.0], [3.0]]), cc.ShapeError,
     r"a ragged nested list: value\[1\] has length 1 but value\[0\] has length 2"),
    ("constant-complex", lambda: cc.constant(np.array([1 + 2j])), cc.DTypeError, r"it holds complex128 data"),
    ("constant-object-array", lambda: cc.constant(np.array([1.0, 2.0], dtype=object)), cc.DTypeError,
     r"it is an array of dtype object; convert it first \(e.g. .astype\('float32'\)\)"),
    ("assign-floats-to-int", lambda: cc.Variable(np.array([1, 2], "int32")).assign([1.5, 2.7]), cc.DTypeError,
     r"\[1.5, 2.7\] cannot be int32"),
    ("segment-sum-tensor-count",
     lambda: cc.unsorted_segment_sum(_placeholder((4, 2)), _placeholder((4,), "int32", "i"),
                                     _placeholder((), "int32", "n")),
     TypeError, r"unsorted_segment_sum: num_segments .* 'n:0' .* has a value only when a step runs"),
    ("reshape-tensor-shape", lambda: cc.reshape(_placeholder((4, 2)), _placeholder((1,), "int32", "s")), TypeError,
     r"reshape: the shape 's:0' has a value only when a step runs"),
    ("where-float-with-int", lambda: cc.where(_placeholder((2,), "bool"), 2.5, _placeholder((2,), "int32", "y")),
     cc.DTypeError, r"Where: cannot use the float 2.5 with an int32 tensor"),
]


@pytest.mark.parametrize("build, error, pattern", [r[1:] for r in BUILD_ERRORS], ids=[r[0] for r in BUILD_ERRORS])
def test_bad_arguments_raise_at_build_time_with_the_users_line(build, error, pattern) -> None:
    with cc.Graph().as_default():
        with pytest.raises(error, match=pattern) as info:
            build()
    assert re.search(HERE + r":\d+", str(info.value)), str(info.value)


def test_shapes_known_only_from_feeds_are_checked_at_compile_time() -> None:
    with cc.Graph().as_default() as graph:
        x = cc.placeholder("float32", (None, 4), name="x")
        y = cc.placeholder("float32", (None, 4), name="y")
        joined = cc.concat([x, y], axis=1)            # fine: rows are checked when fed
        first = cc.argmax(x, axis=0)
        fifth = x[5]
    with Session(graph) as sess:
        with pytest.raises(cc.ShapeError, match=r"cannot concatenate.*" + HERE):
            sess.run(joined, {x: np.zeros((2, 4), "float32"), y: np.zeros((3, 4), "float32")})
        with pytest.raises(cc.ShapeError, match=r"empty axis"):
            sess.run(first, {x: np.zeros((0, 4), "float32")})
        with pytest.raises(cc.ShapeError, match=r"index 5 is out of range for dimension 0 of size 2.*" + HERE):
            sess.run(fifth, {x: np.zeros((2, 4), "float32")})
        np.testing.assert_equal(sess.run(fifth, {x: np.arange(24, dtype="float32").reshape(6, 4)}), [20, 21, 22, 23])
        # the session still works afterwards
        assert sess.run(joined, {x: np.ones((2, 4), "float32"), y: np.ones((2, 4), "float32")}).shape == (2, 8)


def test_third_derivative_of_reduce_prod_is_refused_by_name() -> None:
    with cc.Graph().as_default():
        x = cc.placeholder("float64", (3,), name="x")
        (g,) = cc.gradients(cc.reduce_prod(x), [x])
        (h,) = cc.gradients(cc.reduce_sum(g), [x])
        with pytest.raises(cc.NoGradientError, match=r"third derivative of reduce_prod.*" + HERE):
            cc.gradients(cc.reduce_sum(h), [x])


def test_a_derivative_of_reduce_prod_that_is_second_order_in_its_input_is_computed() -> None:
    """d/dy of a Hessian-vector product in x of prod(x) * y**2 is second order in x: it used to
    be refused as a third derivative (checked against jax's value)."""
    x0, y0 = np.array([0.7, -1.3, 2.0]), 1.5
    u, w = np.array([1.0, 0.5, -0.3]), np.array([0.2, -0.4, 0.9])
    graph = cc.Graph()
    with graph.as_default():
        x = cc.placeholder("float64", (3,), name="x")
        y = cc.placeholder("float64", (), name="y")
        (gx,) = cc.gradients(cc.reduce_prod(x) * y * y, [x])
        (hx,) = cc.gradients(cc.reduce_sum(gx * u), [x])
        (dy,) = cc.gradients(cc.reduce_sum(hx * w), [y])
    # Hessian of prod(x): H[j, k] = prod(x) / (x_j x_k) off the diagonal; d/dy of y**2 H u . w.
    hessian = np.prod(x0) / np.outer(x0, x0) * (1 - np.eye(3))
    for target in ("reference", "cpu"):
        with Session(graph, target=target) as sess:
            np.testing.assert_allclose(sess.run(dy, {x: x0, y: y0}), 2 * y0 * (hessian @ u) @ w, rtol=1e-12)


def test_hessian_vector_product_of_an_x_that_reaches_ys_linearly_is_zero() -> None:
    with cc.Graph().as_default() as graph:
        x = cc.placeholder("float64", (3,), name="x")
        w = cc.placeholder("float64", (3,), name="w")
        unused = cc.placeholder("float64", (2,), name="unused")
        y = cc.reduce_sum(3.0 * x) + cc.reduce_sum(w * w * w)
        products = cc.hessian_vector_product(y, [x, w, unused], [np.ones(3), np.ones(3), np.ones(2)])
    assert products[2] is None        # does not reach y
    with Session(graph) as sess:
        got = sess.run(products[:2], {x: np.ones(3), w: np.full(3, 2.0)})
    np.testing.assert_array_equal(got[0], np.zeros(3))
    np.testing.assert_allclose(got[1], 6.0 * np.full(3, 2.0))


def test_gather_out_of_range_gives_zeros_and_no_gradient_rows() -> None:
    with cc.Graph().as_default() as graph:
        table = cc.Variable(np.arange(6.0).reshape(3, 2), name="table")
        ids = cc.placeholder("int32", (4,), name="ids")
        rows = cc.gather(table, ids)
        (grad,) = cc.gradients(cc.reduce_sum(rows), [table])
    feed = {ids: np.array([2, -1, 3, 2], np.int32)}
    for target in ("cpu", "reference"):
        with Session(graph, target=target) as sess:
            got_rows, got_grad = sess.run([rows, grad], feed)
        np.testing.assert_array_equal(got_rows, [[4, 5], [0, 0], [0, 0], [4, 5]])
        np.testing.assert_array_equal(got_grad, [[0, 0], [0, 0], [2, 2]])


def test_python_numbers_keep_their_values() -> None:
    """Ints past int32 become int64 constants (TF1), a Python int with a float tensor becomes a
    float however large, where's two Python branches share one dtype, numpy axes are axes, and a
    scalar padded by nothing is itself on every target."""
    with cc.Graph().as_default() as graph:
        x = cc.placeholder("float32", (2, 3), name="x")
        big = cc.constant(2 ** 40)
        huge = cc.constant([3.0], "float32") + 2 ** 70
        wide = cc.constant([1, 2], "int64") + 2 ** 40
        chosen = cc.where(cc.constant([True, False]), 1, 2.5)
        total = cc.reduce_sum(x, axis=np.int64(1))
        mean, variance = cc.nn.moments(x, axes=[np.int32(0)])
        padded = cc.pad(cc.constant(2.5), [])
    assert big.dtype == np.int64 and chosen.dtype == np.float32
    feeds = {x: np.arange(6, dtype="float32").reshape(2, 3)}
    fetches = [big, huge, wide, chosen, total, mean, variance, padded]
    for target in ("cpu", "reference"):
        with Session(graph, target=target) as sess:
            values = sess.run(fetches, feeds)
        np.testing.assert_equal(values[:4], [2 ** 40, np.float32([2.0 ** 70]), [2 ** 40 + 1, 2 ** 40 + 2], [1.0, 2.5]])
        np.testing.assert_allclose(values[4], [3.0, 12.0])
        np.testing.assert_allclose(values[5], [1.5, 2.5, 3.5])
        np.testing.assert_allclose(values[6], [2.25] * 3)
        assert values[7] == np.float32(2.5)


def test_tf1_dtype_names_mean_what_they_mean_in_tf1() -> None:
    """"float" and Python's float are float32 in TF1 (numpy reads both as float64): a classic
    ``placeholder("float", [None, 784]) @ W`` with a float32 W used to be a dtype mismatch."""
    with cc.Graph().as_default():
        x = cc.placeholder("float", (None, 3))
        assert x.dtype == np.float32 and cc.placeholder(float, (2,)).dtype == np.float32
        assert cc.cast(x, "double").dtype == np.float64 and cc.cast(x, "float").dtype == np.float32
        assert (x @ cc.Variable(np.zeros((3, 2), "float32"))).dtype == np.float32


@pytest.mark.parametrize("build, error, message", [
    (lambda: cc.placeholder("float31", (2, 3)), TypeError, r"not a dtype: 'float31' \(supported: float32"),
    (lambda: cc.placeholder((None, 3)), TypeError, r"not a dtype: \(None, 3\)"),
    (lambda: cc.placeholder("float32", (2.7, 3)), cc.ShapeError, r"placeholder: the shape must be a list of ints"),
    (lambda: cc.Variable(None, name="w"), cc.DTypeError, r"Variable 'w' \(its initial value\): None is not numbers"),
    (lambda: cc.Variable([[1.0], [2.0, 3.0]]), cc.ShapeError,
     r"Variable \(its initial value\): a ragged nested list: value\[1\] has length 2 but value\[0\] has length 1"),
    (lambda: cc.expand_dims(cc.placeholder("float32", (2,)), cc.constant(0)), TypeError,
     r"the symbolic Tensor 'Const:0' has no value while the graph is built"),
    (lambda: cc.placeholder("float32", (None, 3))[:cc.placeholder("int32", (), name="n")], TypeError,
     r"the slice bound 'n:0' \(int32 \(\)\) has a value only when a step runs"),
    (lambda: cc.reshape(cc.constant(np.zeros((2, 6))), [1.9, 6.5]), TypeError,
     r"reshape: the shape must be Python ints, shape tensors or None / -1, got 1.9"),
    (lambda: cc.reverse(cc.constant(np.zeros((2, 6))), [1, -1]), cc.ShapeError,
     r"axis \[1, -1\] names an axis more than once"),
    # scopes written as generators raise from inside contextlib: the location skips its frames
    (lambda: cc.variable_scope("x//y").__enter__(), ValueError, r"variable_scope: name_or_scope must be a name"),
    (lambda: cc.variable_scope("v", reuse="yes").__enter__(), ValueError, r"variable_scope: reuse must be"),
])
def test_values_that_are_not_what_an_argument_takes_are_named_with_the_users_line(build, error, message) -> None:
    with cc.Graph().as_default(), pytest.raises(error, match=message) as raised:
        build()
    assert f"(at {__file__}:" in str(raised.value)


def test_a_placeholder_shape_may_be_one_number_as_in_tf1() -> None:
    with cc.Graph().as_default():
        assert cc.placeholder("float32", 3).shape == (3,)
        assert cc.placeholder("float32", np.array([2, 4])).shape == (2, 4)


def test_an_error_inside_a_composite_names_the_function_the_user_called() -> None:
    """The op that refuses is one the function is made of (a ReduceMax inside a cross-entropy);
    the message says which function it was called from."""
    with cc.Graph().as_default():
        logits = cc.placeholder("float32", (4, 3), name="logits")
        with pytest.raises(cc.ShapeError, match=r"^in softmax_cross_entropy_with_logits: ReduceMax: axis 4 is out of "
                                                r"range") as raised:
            cc.nn.softmax_cross_entropy_with_logits(labels=cc.zeros((4, 3)), logits=logits, axis=4)
        with pytest.raises(cc.ShapeError, match=r"^in Softmax: ReduceMax: axis 5 is out of range"):
            cc.nn.softmax(logits, axis=5)
    assert f"(at {__file__}:" in str(raised.value)

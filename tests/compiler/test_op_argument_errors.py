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
    ("avg_pool-int", lambda: cc.nn.avg_pool(_placeholder((1, 8, 8, 1), "int32"), 2, 2), cc.DTypeError,
     r"float32 or float64"),
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
    with Session(graph) as sess:
        with pytest.raises(cc.ShapeError, match=r"cannot concatenate.*" + HERE):
            sess.run(joined, {x: np.zeros((2, 4), "float32"), y: np.zeros((3, 4), "float32")})
        with pytest.raises(cc.ShapeError, match=r"empty axis"):
            sess.run(first, {x: np.zeros((0, 4), "float32")})
        # the session still works afterwards
        assert sess.run(joined, {x: np.ones((2, 4), "float32"), y: np.ones((2, 4), "float32")}).shape == (2, 8)


def test_third_derivative_of_reduce_prod_is_refused_by_name() -> None:
    with cc.Graph().as_default():
        x = cc.placeholder("float64", (3,), name="x")
        (g,) = cc.gradients(cc.reduce_prod(x), [x])
        (h,) = cc.gradients(cc.reduce_sum(g), [x])
        with pytest.raises(cc.NoGradientError, match=r"third derivative of reduce_prod.*" + HERE):
            cc.gradients(cc.reduce_sum(h), [x])


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

"""Property: binary ops broadcast shapes as numpy does (size-0 and size-1 dimensions included), and
the shapes numpy refuses are a ``ShapeError`` when the node is built, naming the op and the line."""
from __future__ import annotations

import re
from typing import Callable

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from hypothesis.extra import numpy as hnp

import compiler as cc

Shape = tuple[int, ...]
HERE = re.escape(__file__.rsplit("/", 1)[-1])
# Only graphs are built here (nothing is compiled), so many examples stay fast.
PROPERTY = settings(max_examples=150, deadline=None, database=None)
BINARY_OPS: dict[str, Callable[[cc.Tensor, cc.Tensor], cc.Tensor]] = {
    "Add": cc.add,
    "Sub": cc.subtract,
    "Mul": cc.multiply,
    "Maximum": cc.maximum,
    "Less": cc.less,
}
DIMS = dict(min_dims=0, max_dims=4, min_side=0, max_side=3)


@st.composite
def incompatible_shapes(draw: st.DrawFn) -> tuple[Shape, Shape]:
    """Two shapes that clash in one aligned dimension (both sizes differ and neither is 1); the
    other dimensions are equal or 1, and the second shape may have fewer leading dimensions."""
    first = draw(hnp.array_shapes(min_dims=1, max_dims=4, min_side=0, max_side=3).filter(lambda s: set(s) != {1}))
    axis = draw(st.sampled_from([i for i, size in enumerate(first) if size != 1]))
    second = [draw(st.sampled_from([size, 1])) for size in first]
    second[axis] = first[axis] + 1 if first[axis] else 2
    second = tuple(second[draw(st.integers(0, axis)):])
    return (first, second) if draw(st.booleans()) else (second, first)


def _placeholders(a: Shape, b: Shape) -> tuple[cc.Tensor, cc.Tensor]:
    return cc.placeholder("float32", a, name="a"), cc.placeholder("float32", b, name="b")


@PROPERTY
@given(shapes=hnp.mutually_broadcastable_shapes(num_shapes=2, **DIMS), op_type=st.sampled_from(sorted(BINARY_OPS)))
def test_broadcast_shape_is_numpys(shapes: hnp.BroadcastableShapes, op_type: str) -> None:
    a, b = shapes.input_shapes
    with cc.Graph().as_default():
        out = BINARY_OPS[op_type](*_placeholders(a, b))
    assert out.shape == np.broadcast_shapes(a, b) == shapes.result_shape
    assert out.op.type == op_type


@PROPERTY
@given(shapes=incompatible_shapes(), op_type=st.sampled_from(sorted(BINARY_OPS)))
def test_shapes_numpy_refuses_are_a_shape_error_at_build_time(shapes: tuple[Shape, Shape], op_type: str) -> None:
    with pytest.raises(ValueError):
        np.broadcast_shapes(*shapes)
    with cc.Graph().as_default():
        a, b = _placeholders(*shapes)
        with pytest.raises(cc.ShapeError) as info:
            BINARY_OPS[op_type](a, b)
    assert str(info.value).startswith(op_type) and re.search(HERE + r":\d+", str(info.value)), str(info.value)

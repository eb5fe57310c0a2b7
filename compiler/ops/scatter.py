"""Scatters (TF1's ``scatter_add``, ``scatter_sub``, ``scatter_nd``, ``tensor_scatter_nd_add`` and
``tensor_scatter_nd_sub``): compositions of ``unsorted_segment_sum``, which adds the rows that share
an index, so repeated indices accumulate, as in TF1. An index outside the target is dropped (TF1's
CPU kernels raise), as ``gather`` reads zeros there."""
from __future__ import annotations

import math
from typing import Any

import numpy as np

from .. import dtypes
from ..errors import DTypeError, ShapeError
from ..graph import Tensor, located
from ..shapes import format_shape
from .array import reshape
from .base import composite_scope, convert_to_tensor
from .elementwise import add, cast, greater_equal, less, logical_and, multiply, subtract, where
from .gather import unsorted_segment_sum
from .state import assign_add, assign_sub, check_flags


def _indices(function: str, indices: Any) -> Tensor:
    indices = convert_to_tensor(indices)
    if not dtypes.is_integer(indices.dtype):
        raise DTypeError(located(f"{function}: indices must be int32 or int64, got {indices.dtype.name} "
                                 f"{indices.name!r}"))
    return indices


def _rows_added(function: str, ref: Tensor, indices: Any, updates: Any) -> Tensor:
    """``updates`` summed into rows of ``ref``'s shape (the rows ``indices`` names)."""
    if not isinstance(ref, Tensor) or ref.op.type != "Variable":
        raise TypeError(located(f"{function}: ref must be a Variable, got {ref!r} (tensor_scatter_nd_add adds into a "
                                "tensor)"))
    if not ref.shape or ref.shape[0] is None:
        raise ShapeError(located(f"{function}: {ref.name!r} {format_shape(ref.shape)} must have a first size"))
    indices = _indices(function, indices)
    updates = convert_to_tensor(updates, ref.dtype) if not isinstance(updates, Tensor) else updates
    if updates.dtype != ref.dtype:   # as TF1: no silent conversion
        raise DTypeError(located(f"{function}: updates {updates.name!r} are {updates.dtype.name} but {ref.name!r} is "
                                 f"{ref.dtype.name} (use cc.cast)"))
    expected = tuple(indices.shape) + tuple(ref.shape[1:])
    if len(updates.shape) != len(expected) or any(
            a is not None and b is not None and a != b for a, b in zip(updates.shape, expected)):
        raise ShapeError(located(f"{function}: updates {format_shape(updates.shape)} must be indices' shape then "
                                 f"the rows' shape, {format_shape(expected)}, for {ref.name!r} "
                                 f"{format_shape(ref.shape)}"))
    return unsorted_segment_sum(updates, indices, ref.shape[0])


def scatter_add(ref: Any, indices: Any, updates: Any, use_locking: bool | None = None,
                name: str | None = None) -> Tensor:
    """``ref[indices[...]] += updates[...]`` when run, repeated indices adding up (TF1's
    ``scatter_add``); returns the variable's new value.

    >>> import numpy as np, compiler as cc
    >>> from runtime import Session
    >>> v = cc.Variable(np.zeros((3, 2)), name="v")
    >>> add = cc.scatter_add(v, [0, 2, 0], np.ones((3, 2)))
    >>> with Session() as sess:
    ...     sess.run(add).tolist()
    [[2.0, 2.0], [0.0, 0.0], [1.0, 1.0]]
    """
    check_flags("scatter_add", use_locking)
    with composite_scope(name or "ScatterAdd", [ref]):
        return assign_add(ref, _rows_added("scatter_add", ref, indices, updates))


def scatter_sub(ref: Any, indices: Any, updates: Any, use_locking: bool | None = None,
                name: str | None = None) -> Tensor:
    """``ref[indices[...]] -= updates[...]`` when run (TF1's ``scatter_sub``; see ``scatter_add``)."""
    check_flags("scatter_sub", use_locking)
    with composite_scope(name or "ScatterSub", [ref]):
        return assign_sub(ref, _rows_added("scatter_sub", ref, indices, updates))


def scatter_nd(indices: Any, updates: Any, shape: Any, name: str | None = None) -> Tensor:
    """Zeros of ``shape`` with ``updates`` added at ``indices`` (TF1's ``scatter_nd``): the last
    axis of ``indices`` (length K) indexes the first K dimensions of ``shape``, and ``updates`` has
    ``indices.shape[:-1] + shape[K:]``. Repeated indices add up.

    >>> import numpy as np, compiler as cc
    >>> from runtime import Session
    >>> with Session() as sess:
    ...     sess.run(cc.scatter_nd([[0, 1], [1, 0], [0, 1]], [1.0, 2.0, 3.0], [2, 2])).tolist()
    [[0.0, 4.0], [2.0, 0.0]]
    """
    if isinstance(shape, Tensor) or not all(isinstance(n, (int, np.integer)) and not isinstance(n, bool) and n >= 0
                                            for n in np.atleast_1d(np.asarray(shape, dtype=object))):
        raise TypeError(located(f"scatter_nd: shape must be a list of Python ints (fixed when the graph is built), "
                                f"got {shape!r}"))
    shape = tuple(int(n) for n in shape)
    with composite_scope(name or "ScatterNd", []):
        indices = _indices("scatter_nd", indices)
        updates = convert_to_tensor(updates)
        return _scattered("scatter_nd", indices, updates, shape)


def _scattered(function: str, indices: Tensor, updates: Tensor, shape: tuple[int, ...]) -> Tensor:
    if not indices.shape or indices.shape[-1] is None or not 0 < indices.shape[-1] <= len(shape):
        raise ShapeError(located(f"{function}: the last axis of indices {format_shape(indices.shape)} must be known "
                                 f"and from 1 to the rank of {format_shape(shape)}"))
    depth = indices.shape[-1]
    expected = tuple(indices.shape[:-1]) + shape[depth:]
    if len(updates.shape) != len(expected) or any(
            a is not None and b is not None and a != b for a, b in zip(updates.shape, expected)):
        raise ShapeError(located(f"{function}: updates {format_shape(updates.shape)} must be "
                                 f"{format_shape(expected)}: indices' shape without its last axis, then "
                                 f"{format_shape(shape[depth:])}"))
    strides = [math.prod(shape[k + 1:depth]) for k in range(depth)]
    position, inside = None, None
    for k in range(depth):
        component = cast(indices[..., k], dtypes.int64)
        term = multiply(component, strides[k]) if strides[k] != 1 else component
        position = term if position is None else add(position, term)
        fits = logical_and(greater_equal(component, 0), less(component, shape[k]))
        inside = fits if inside is None else logical_and(inside, fits)
    # an index outside the shape goes nowhere (not to another place its sum would alias)
    position = where(inside, position, -1)
    rows = math.prod(shape[:depth])
    summed = unsorted_segment_sum(updates, position, rows)
    return reshape(summed, shape)


def _tensor_scatter(function: str, tensor: Any, indices: Any, updates: Any, subtracting: bool) -> Tensor:
    tensor = convert_to_tensor(tensor)
    if None in tensor.shape:
        raise ShapeError(located(f"{function}: the shape of {tensor.name!r} {format_shape(tensor.shape)} must be "
                                 "known"))
    updates = convert_to_tensor(updates, tensor.dtype) if not isinstance(updates, Tensor) else updates
    scattered = _scattered(function, _indices(function, indices), updates, tuple(tensor.shape))
    return subtract(tensor, scattered) if subtracting else add(tensor, scattered)


def tensor_scatter_nd_add(tensor: Any, indices: Any, updates: Any, name: str | None = None) -> Tensor:
    """``tensor`` with ``updates`` added at ``indices`` (TF's ``tensor_scatter_nd_add``; indices as
    ``scatter_nd``'s)."""
    with composite_scope(name or "TensorScatterAdd", [tensor]):
        return _tensor_scatter("tensor_scatter_nd_add", tensor, indices, updates, subtracting=False)


def tensor_scatter_nd_sub(tensor: Any, indices: Any, updates: Any, name: str | None = None) -> Tensor:
    """``tensor`` with ``updates`` subtracted at ``indices`` (TF's ``tensor_scatter_nd_sub``)."""
    with composite_scope(name or "TensorScatterSub", [tensor]):
        return _tensor_scatter("tensor_scatter_nd_sub", tensor, indices, updates, subtracting=True)


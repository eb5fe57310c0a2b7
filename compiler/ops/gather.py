"""Reads and writes at positions held in a tensor: ``gather``, its gradient (a scatter-add), and
``unsorted_segment_sum`` (a scatter-add whose gradient gathers).

Gather is elementwise over its output and reads ``params`` through an ``IndexedInput``; an index
outside the gathered dimension gives 0 (as TF does on GPUs), so a bad index never reads outside a
buffer. A scatter-add is a loop nest with one point per source element that adds into the output
element it names; out-of-range ids are dropped.
"""
from __future__ import annotations

import math
from typing import Any, Mapping, Sequence

import numpy as np

from .. import dtypes
from ..graph import Operation, Tensor, located
from ..kernel_ir import IndexedInput, contiguous_strides
from ..shapes import RuleError, format_shape, normalize_axis
from .array import known_int, ones_like, reshape
from .base import LoopNest, OpDef, composite_scope, convert_to_tensor, literal_as
from .elementwise import divide, maximum, sqrt
from .rules import clamp_index, first_dtype, same_shape_as_third

I64 = dtypes.int64


# -- gather and its gradient (a scatter-add) ----------------------------------------------------

def _gather_axis(shapes: Sequence[tuple], attrs: Mapping[str, Any]) -> int:
    return normalize_axis(attrs["axis"], len(shapes[0]))


def _gather_shape(shapes: Sequence[tuple], attrs: Mapping[str, Any]) -> tuple:
    params, indices = shapes
    if not params:
        raise RuleError("params must have at least one dimension")
    axis = _gather_axis(shapes, attrs)
    return tuple(params[:axis]) + tuple(indices) + tuple(params[axis + 1:])


def _gather_dtype(types: Sequence[np.dtype], attrs: Mapping[str, Any]) -> np.dtype:
    if not dtypes.is_integer(types[1]):
        raise RuleError(f"indices must be int32 or int64, got {types[1].name}", "dtype")
    return types[0]


def _gather_dim_map(shapes: Sequence[tuple], out: tuple, attrs: Mapping[str, Any]) -> list[tuple]:
    axis = _gather_axis(shapes, attrs)
    return [(None,) * len(shapes[0]), tuple(axis + d for d in range(len(shapes[1])))]


def _gather_lower(sb: Any, args: Sequence[Any], attrs: Mapping[str, Any]) -> Any:
    params: IndexedInput = args[0]
    index = sb.cast(args[1], I64)
    axis = normalize_axis(attrs["axis"], len(params.shape))
    depth = params.shape[axis]
    zero = sb.literal(0, params.dtype)
    if 0 in params.shape:
        return zero
    rank = attrs["_indices_rank"]
    positions: list[Any] = [sb.index(d) for d in range(axis)]
    positions.append(clamp_index(sb, index, depth))
    positions += [sb.index(axis + rank + d) for d in range(len(params.shape) - axis - 1)]
    inside = sb.logical_and(sb.ge(index, 0), sb.lt(index, depth))
    return sb.select(inside, params.at(sb, positions), zero)


def _gather_reference(values: Sequence[np.ndarray], attrs: Mapping[str, Any]) -> np.ndarray:
    params, indices = np.asarray(values[0]), np.asarray(values[1]).astype(np.int64)
    axis = normalize_axis(attrs["axis"], params.ndim)
    depth = params.shape[axis]
    inside = (indices >= 0) & (indices < depth)
    if depth == 0:
        return np.zeros(params.shape[:axis] + indices.shape + params.shape[axis + 1:], params.dtype)
    taken = np.take(params, np.where(inside, indices, 0), axis=axis)
    mask = inside.reshape((1,) * axis + indices.shape + (1,) * (params.ndim - axis - 1))
    return np.where(mask, taken, np.zeros((), params.dtype))


def _gather_grad(op: Operation, g: Tensor) -> list[Tensor | None]:
    params, indices = op.inputs
    return [ScatterAddGrad(g, indices, params, axis=_gather_axis([params.shape, indices.shape], op.attrs),
                           _indices_rank=len(indices.shape)), None]


Gather = OpDef("GatherV2", "elementwise", _gather_shape, _gather_dtype, reference=_gather_reference,
               grad_rule=_gather_grad, lower_scalar=_gather_lower, dim_map=_gather_dim_map,
               indexed_inputs=(0,))


def _scatter_nest(shapes: Sequence[tuple], out: tuple, attrs: Mapping[str, Any]) -> LoopNest:
    # One point per gradient element: grad[pre, r, post] is added into out[pre, indices[r], post].
    grad_shape, indices_shape, params_shape = shapes
    axis, rank = attrs["axis"], len(indices_shape)
    space = tuple(grad_shape)
    depth = params_shape[axis]
    out_strides = contiguous_strides(params_shape)

    def body(sb: Any, args: Sequence[Any]) -> tuple[Any, Any]:
        grad, index = args[0], sb.cast(args[1], I64)
        zero = sb.literal(0, grad.dtype)
        if depth == 0:
            return sb.literal(0, I64), zero
        inside = sb.logical_and(sb.ge(index, 0), sb.lt(index, depth))
        positions = [sb.axis_index(d) for d in range(axis)] + [clamp_index(sb, index, depth)] + [
            sb.axis_index(axis + rank + d) for d in range(len(params_shape) - axis - 1)]
        flat = None
        for position, stride, size in zip(positions, out_strides, params_shape):
            if size == 1:
                continue
            term = position if stride == 1 else sb.mul(position, stride)
            flat = term if flat is None else sb.add(flat, term)
        return (flat if flat is not None else sb.literal(0, I64)), sb.select(inside, grad, zero)
    indices_axes = tuple(axis + d for d in range(rank))
    return LoopNest(space, (tuple(range(len(space))), indices_axes, (None,) * len(params_shape)), (), "sum",
                    body, scatter=True)


def _scatter_reference(values: Sequence[np.ndarray], attrs: Mapping[str, Any]) -> np.ndarray:
    grad, indices, params = np.asarray(values[0]), np.asarray(values[1]).astype(np.int64), np.asarray(values[2])
    axis = attrs["axis"]
    result = np.zeros(params.shape, grad.dtype)
    grad_moved = grad.reshape(params.shape[:axis] + (indices.size,) + params.shape[axis + 1:])
    _add_rows(np.moveaxis(result, axis, 0), indices, np.moveaxis(grad_moved, axis, 0))
    return result


def _add_rows(target: np.ndarray, ids: np.ndarray, rows: np.ndarray) -> None:
    """``target[ids[r]] += rows[r]`` for every ``r`` (row-major over ``ids``) whose id is in range."""
    for r, row_id in enumerate(ids.reshape(-1)):
        if 0 <= row_id < len(target):
            target[row_id] += rows[r]


ScatterAddGrad = OpDef(
    "GatherGrad", "reduce", same_shape_as_third, first_dtype, reference=_scatter_reference,
    grad_rule=lambda op, g: [Gather(g, op.inputs[1], axis=op.attrs["axis"],
                                    _indices_rank=op.attrs["_indices_rank"]), None, None],
    loop_nest=_scatter_nest, shape_only_inputs=(2,))


def gather(params: Any, indices: Any, validate_indices: Any = None, name: str | None = None, axis: int | None = None,
           batch_dims: int = 0) -> Tensor:
    """Rows of ``params`` (along ``axis``, 0 when None) picked by integer ``indices`` (an embedding
    lookup). TF1's signature: ``validate_indices`` is ignored (as TF1 does on CPU); with
    ``batch_dims`` (the leading dimensions params and indices share) see ``batch_gather``.

    The result has shape ``params.shape[:axis] + indices.shape + params.shape[axis+1:]``. An index
    outside ``[0, params.shape[axis])`` gives zeros. The gradient adds into the rows it read.

    >>> import compiler as cc
    >>> table = cc.constant(np.arange(12.0).reshape(4, 3))
    >>> cc.gather(table, cc.constant(np.array([3, 0]))).shape
    (2, 3)
    """
    if batch_dims != 0:   # (cc.gather, ops/nn.py's, takes them to batch_gather)
        raise ValueError(located(f"gather: batch_dims={batch_dims!r}: use batch_gather"))
    indices = convert_to_tensor(indices)
    params = convert_to_tensor(params)   # a Python list has its own dtype, not the indices'
    return Gather(params, indices, axis=0 if axis is None else int(axis), _indices_rank=len(indices.shape), name=name)


# -- unsorted_segment_sum: a scatter-add with a given number of segments ---------------------------

def _segment_shape(shapes: Sequence[tuple], attrs: Mapping[str, Any]) -> tuple:
    data, ids = shapes
    if len(ids) > len(data) or any(a is not None and b is not None and a != b for a, b in zip(ids, data)):
        raise RuleError(f"segment_ids of shape {format_shape(ids)} must be a prefix of the data's shape "
                        f"{format_shape(data)}")
    return (attrs["num_segments"],) + tuple(data[len(ids):])


def _segment_dtype(types: Sequence[np.dtype], attrs: Mapping[str, Any]) -> np.dtype:
    if not dtypes.is_integer(types[1]):
        raise RuleError(f"segment_ids must be int32 or int64, got {types[1].name}", "dtype")
    if types[0] == dtypes.bool_:
        raise RuleError("needs numeric data, got bool", "dtype")
    return types[0]


def _segment_nest(shapes: Sequence[tuple], out: tuple, attrs: Mapping[str, Any]) -> LoopNest:
    # One point per data element: data[r, rest] is added into out[ids[r], rest] (skipped when out of range).
    data, ids = shapes
    rank, depth = len(ids), attrs["num_segments"]
    inner = math.prod(data[rank:])

    def body(sb: Any, args: Sequence[Any]) -> tuple[Any, Any]:
        value, segment = args[0], sb.cast(args[1], I64)
        if depth == 0:
            return sb.literal(0, I64), sb.literal(0, value.dtype)
        inside = sb.logical_and(sb.ge(segment, 0), sb.lt(segment, depth))
        flat = sb.mul(clamp_index(sb, segment, depth), inner) if inner != 1 else clamp_index(sb, segment, depth)
        rest_strides = contiguous_strides(data[rank:])
        for d, (stride, size) in enumerate(zip(rest_strides, data[rank:])):
            if size != 1:
                position = sb.axis_index(rank + d)
                flat = sb.add(flat, position if stride == 1 else sb.mul(position, stride))
        return flat, sb.select(inside, value, sb.literal(0, value.dtype))
    return LoopNest(tuple(data), (tuple(range(len(data))), tuple(range(rank))), (), "sum", body, scatter=True)


def _segment_reference(values: Sequence[np.ndarray], attrs: Mapping[str, Any]) -> np.ndarray:
    data, ids = np.asarray(values[0]), np.asarray(values[1]).astype(np.int64)
    result = np.zeros((attrs["num_segments"],) + data.shape[ids.ndim:], data.dtype)
    _add_rows(result, ids, data.reshape((ids.size,) + data.shape[ids.ndim:]))   # (-1 fails for size 0)
    return result


UnsortedSegmentSum = OpDef(
    "UnsortedSegmentSum", "reduce", _segment_shape, _segment_dtype, reference=_segment_reference,
    grad_rule=lambda op, g: [Gather(g, op.inputs[1], axis=0, _indices_rank=len(op.inputs[1].shape)), None],
    loop_nest=_segment_nest)


def unsorted_segment_sum(data: Any, segment_ids: Any, num_segments: int, name: str | None = None) -> Tensor:
    """Sums of the rows of ``data`` that share a segment id: ``out[s] = sum of data[r] where
    segment_ids[r] == s`` (``segment_ids``' shape is a prefix of ``data``'s). Ids outside
    ``[0, num_segments)`` are dropped; empty segments are 0. The gradient gathers.

    >>> import numpy as np, compiler as cc
    >>> cc.unsorted_segment_sum(cc.constant(np.ones((4, 2))), cc.constant(np.array([0, 2, 0, 1])), 3).shape
    (3, 2)
    """
    segment_ids = convert_to_tensor(segment_ids)
    if isinstance(num_segments, Tensor):
        num_segments = known_int(num_segments, "unsorted_segment_sum", "num_segments (a size of the result)")
    if isinstance(num_segments, (bool, np.bool_)) or not isinstance(num_segments, (int, np.integer)) \
            or int(num_segments) < 0:
        raise ValueError(located(f"unsorted_segment_sum: num_segments must be an int >= 0, got {num_segments!r}"))
    return UnsortedSegmentSum(convert_to_tensor(data), segment_ids, num_segments=int(num_segments), name=name)


def _segment_counts(function: str, data: Any, segment_ids: Any, num_segments: int) -> tuple[Tensor, Tensor, Tensor]:
    """(data, the sums of its segments, how many rows each segment has, shaped to divide the sums)."""
    data, segment_ids = convert_to_tensor(data), convert_to_tensor(segment_ids)
    if not dtypes.is_floating(data.dtype):
        raise TypeError(located(f"{function}: needs float data, got {data.dtype.name} {data.name!r}"))
    sums = unsorted_segment_sum(data, segment_ids, num_segments)
    rows = unsorted_segment_sum(ones_like(segment_ids, dtype=data.dtype), segment_ids, num_segments)
    counts = reshape(rows, [-1] + [1] * (len(data.shape) - len(segment_ids.shape)))
    return data, sums, counts


def unsorted_segment_mean(data: Any, segment_ids: Any, num_segments: int, name: str | None = None) -> Tensor:
    """The mean of the rows of each segment (``unsorted_segment_sum`` divided by the segment's row
    count; an empty segment is 0), TF1's ``math.unsorted_segment_mean``.

    >>> import numpy as np, compiler as cc
    >>> from runtime import Session
    >>> with Session() as sess:
    ...     sess.run(cc.math.unsorted_segment_mean(cc.constant([1.0, 2.0, 6.0]), cc.constant([0, 0, 2]), 3)).tolist()
    [1.5, 0.0, 6.0]
    """
    with composite_scope(name or "unsorted_segment_mean", [data, segment_ids]):
        data, sums, counts = _segment_counts("unsorted_segment_mean", data, segment_ids, num_segments)
        return divide(sums, maximum(counts, literal_as(1, data.dtype, "unsorted_segment_mean")))


def unsorted_segment_sqrt_n(data: Any, segment_ids: Any, num_segments: int, name: str | None = None) -> Tensor:
    """The sum of the rows of each segment divided by the square root of its row count (an empty
    segment is 0), TF1's ``math.unsorted_segment_sqrt_n``."""
    with composite_scope(name or "unsorted_segment_sqrt_n", [data, segment_ids]):
        data, sums, counts = _segment_counts("unsorted_segment_sqrt_n", data, segment_ids, num_segments)
        return divide(sums, sqrt(maximum(counts, literal_as(1, data.dtype, "unsorted_segment_sqrt_n"))))


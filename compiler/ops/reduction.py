"""Reductions: reduce_sum, reduce_max and sum_to are loop nests; reduce_mean, reduce_logsumexp compose.

A reduction lowers to one loop nest over the input's shape with the reduced axes summed (or maxed)
into the output; the elementwise expression producing the input is fused into it.
"""
from __future__ import annotations

from typing import Any, Mapping, Sequence

import numpy as np

from .. import dtypes
from ..errors import DTypeError
from ..graph import Operation, Tensor, user_location
from ..shapes import RuleError, format_shape, normalize_axes
from . import array as _array
from . import elementwise as _ew
from .base import LoopNest, OpDef, numeric_dtype


def _reduced_shape(shape: tuple, axes: tuple[int, ...], keepdims: bool) -> tuple:
    if keepdims:
        return tuple(1 if i in axes else d for i, d in enumerate(shape))
    return tuple(d for i, d in enumerate(shape) if i not in axes)


def _reduce_shape_rule(shapes: Sequence[tuple], attrs: Mapping[str, Any]) -> tuple:
    axes = normalize_axes(attrs["axis"], len(shapes[0]))
    return _reduced_shape(shapes[0], axes, attrs["keepdims"])


def _reduce_nest(combiner: str):
    def loop_nest(shapes: Sequence[tuple], out: tuple, attrs: Mapping[str, Any]) -> LoopNest:
        space = tuple(shapes[0])
        axes = normalize_axes(attrs["axis"], len(space))
        return LoopNest(space, (tuple(range(len(space))),), axes, combiner, lambda sb, args: args[0])
    return loop_nest


def _with_reduced_dims(t: Tensor, op: Operation) -> Tensor:
    """Re-insert the reduced axes (size 1) so ``t`` broadcasts against the op's input."""
    if op.attrs["keepdims"]:
        return t
    for axis in normalize_axes(op.attrs["axis"], len(op.inputs[0].shape)):
        t = _array.expand_dims(t, axis)
    return t


def _sum_grad(op: Operation, g: Tensor) -> list[Tensor]:
    return [_array.broadcast_like(_with_reduced_dims(g, op), op.inputs[0])]


def _max_grad(op: Operation, g: Tensor) -> list[Tensor]:
    # The gradient is shared equally among the positions that attain the max (as TF does).
    x = op.inputs[0]
    y = _with_reduced_dims(op.outputs[0], op)
    indicators = _ew.cast(_ew.equal(x, y), x.dtype)
    count = reduce_sum(indicators, op.attrs["axis"], keepdims=True)
    return [indicators / count * _with_reduced_dims(g, op)]


def _reference_sum(values: Sequence[np.ndarray], attrs: Mapping[str, Any]) -> np.ndarray:
    x = np.asarray(values[0])
    axes = normalize_axes(attrs["axis"], x.ndim)
    return np.asarray(np.sum(x, axis=axes, keepdims=attrs["keepdims"], dtype=x.dtype))


def _reference_max(values: Sequence[np.ndarray], attrs: Mapping[str, Any]) -> np.ndarray:
    x = np.asarray(values[0])
    axes = normalize_axes(attrs["axis"], x.ndim)
    lowest = -np.inf if x.dtype.kind == "f" else np.iinfo(x.dtype).min
    return np.asarray(np.max(x, axis=axes, keepdims=attrs["keepdims"], initial=lowest))


ReduceSum = OpDef("ReduceSum", "reduce", _reduce_shape_rule, numeric_dtype, reference=_reference_sum,
                  grad_rule=_sum_grad, loop_nest=_reduce_nest("sum"))
ReduceMax = OpDef("ReduceMax", "reduce", _reduce_shape_rule, numeric_dtype, reference=_reference_max,
                  grad_rule=_max_grad, loop_nest=_reduce_nest("max"))


def _sum_to_axes(source: tuple, target: tuple) -> tuple[int, ...]:
    lead = len(source) - len(target)
    if lead < 0:
        raise RuleError(f"cannot sum {format_shape(source)} down to the larger rank of {format_shape(target)}")
    return tuple(range(lead)) + tuple(lead + i for i, d in enumerate(target)
                                      if d == 1 and source[lead + i] != 1)


def _sum_to_nest(shapes: Sequence[tuple], out: tuple, attrs: Mapping[str, Any]) -> LoopNest:
    space = tuple(shapes[0])
    return LoopNest(space, (tuple(range(len(space))), (None,) * len(shapes[1])),
                    _sum_to_axes(space, tuple(shapes[1])), "sum", lambda sb, args: args[0])


def _sum_to_shape(shapes: Sequence[tuple], attrs: Mapping[str, Any]) -> tuple:
    _sum_to_axes(shapes[0], shapes[1])
    return tuple(shapes[1])


SumTo = OpDef("SumTo", "reduce", _sum_to_shape, lambda types, attrs: types[0],
              reference=lambda values, attrs: np.asarray(np.sum(
                  values[0], axis=_sum_to_axes(np.shape(values[0]), np.shape(values[1])),
                  dtype=np.asarray(values[0]).dtype)).reshape(np.shape(values[1])),
              grad_rule=lambda op, g: [_array.broadcast_like(g, op.inputs[0]), None],
              loop_nest=_sum_to_nest, shape_only_inputs=(1,))


def sum_to(x: Tensor, like: Tensor, name: str | None = None) -> Tensor:
    """Sum ``x`` over the axes along which ``like`` was broadcast to get ``x``'s shape."""
    return SumTo(x, like, name=name)


def reduce_sum(x: Any, axis: int | Sequence[int] | None = None, keepdims: bool = False,
               name: str | None = None) -> Tensor:
    """Sum over ``axis`` (all axes when None).

    >>> reduce_sum(constant([[1.0, 2.0], [3.0, 4.0]]), axis=1).shape
    (2,)
    """
    return ReduceSum(x, axis=_axis_attr(axis), keepdims=bool(keepdims), name=name)


def reduce_max(x: Any, axis: int | Sequence[int] | None = None, keepdims: bool = False,
               name: str | None = None) -> Tensor:
    """Max over ``axis``; NaN propagates; an empty reduction gives -inf."""
    return ReduceMax(x, axis=_axis_attr(axis), keepdims=bool(keepdims), name=name)


def reduce_mean(x: Any, axis: int | Sequence[int] | None = None, keepdims: bool = False,
                name: str | None = None) -> Tensor:
    """Mean over ``axis`` (a sum divided by the count, which is known at compile time)."""
    total = reduce_sum(x, axis, keepdims, name=name)
    if not dtypes.is_floating(total.dtype):
        raise DTypeError(f"reduce_mean needs a float tensor, got {total.dtype.name} {x.name!r} "
                         f"(cast it first) (at {user_location()})")
    return _ew.divide(total, _array.element_count(x, _axis_attr(axis), total.dtype))


def reduce_logsumexp(x: Any, axis: int | Sequence[int] | None = None, keepdims: bool = False,
                     name: str | None = None) -> Tensor:
    """``log(sum(exp(x)))`` computed stably by shifting by the max (which gets no gradient)."""
    axis = _axis_attr(axis)
    peak = _array.stop_gradient(reduce_max(x, axis, keepdims=True))
    # An infinite max would make x - max NaN; shift by 0 there instead (as TF does).
    peak = _ew.where(_ew.equal(_ew.abs(peak), float("inf")), 0.0, peak)
    total = reduce_sum(_ew.exp(x - peak), axis, keepdims=True)
    result = _ew.log(total) + peak
    if keepdims:
        return result
    return _array.squeeze(result, normalize_axes(axis, len(result.shape)))


def _axis_attr(axis: Any) -> Any:
    if axis is None or isinstance(axis, int):
        return axis
    return tuple(int(a) for a in axis)

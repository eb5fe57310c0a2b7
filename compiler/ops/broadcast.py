"""Broadcasting and its inverse: ``broadcast_to``, ``broadcast_like`` and ``sum_to``.

Each is the other's gradient, so they are declared together; ``unbroadcast`` (a gradient summed down
to an input's shape) is what the gradient of every broadcasting op ends with. Broadcasts are
elementwise ops whose ``dim_map`` gives an input dimension stride 0; ``sum_to`` is a reduction.
"""
from __future__ import annotations

from typing import Any, Mapping, Sequence

import numpy as np

from ..graph import Tensor
from ..shapes import RuleError, broadcast_dim_map, broadcast_shapes, format_shape
from .base import LoopNest, OpDef
from .rules import first_dtype, pass_through


def _broadcast_to_shape(shapes: Sequence[tuple], attrs: Mapping[str, Any]) -> tuple:
    target = tuple(attrs["shape"])
    result = broadcast_shapes(shapes[0], target)
    if len(shapes[0]) > len(target) or any(
            r is not None and t is not None and r != t for r, t in zip(result, target)):
        raise RuleError(f"cannot broadcast {format_shape(shapes[0])} to {format_shape(target)}")
    return target


BroadcastTo = OpDef("BroadcastTo", "elementwise", _broadcast_to_shape, first_dtype,
                    reference=lambda values, attrs: np.broadcast_to(values[0], attrs["shape"]).copy(),
                    grad_rule=lambda op, g: [sum_to(g, op.inputs[0])],
                    lower_scalar=pass_through,
                    dim_map=lambda shapes, out, attrs: [broadcast_dim_map(shapes[0], out)])

BroadcastLike = OpDef(
    "BroadcastLike", "elementwise",
    lambda shapes, attrs: _broadcast_to_shape(shapes[:1], {"shape": shapes[1]}), first_dtype,
    reference=lambda values, attrs: np.broadcast_to(values[0], np.shape(values[1])).copy(),
    grad_rule=lambda op, g: [sum_to(g, op.inputs[0]), None],
    lower_scalar=pass_through,
    dim_map=lambda shapes, out, attrs: [broadcast_dim_map(shapes[0], out), (None,) * len(shapes[1])],
    shape_only_inputs=(1,))


def broadcast_to(x: Any, shape: Sequence[int | None], name: str | None = None) -> Tensor:
    """Broadcast ``x`` to ``shape`` (numpy rules)."""
    return BroadcastTo(x, shape=tuple(shape), name=name)


def broadcast_like(x: Any, like: Tensor, name: str | None = None) -> Tensor:
    """Broadcast ``x`` to the (compile-time) shape of ``like``; ``like``'s values are not read."""
    if isinstance(x, Tensor) and x.shape == like.shape and None not in like.shape:
        return x
    return BroadcastLike(x, like, name=name)


# -- sum_to: the sum over the broadcast axes ---------------------------------------------------------

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


SumTo = OpDef("SumTo", "reduce", _sum_to_shape, first_dtype,
              reference=lambda values, attrs: np.asarray(np.sum(
                  values[0], axis=_sum_to_axes(np.shape(values[0]), np.shape(values[1])),
                  dtype=np.asarray(values[0]).dtype)).reshape(np.shape(values[1])),
              grad_rule=lambda op, g: [broadcast_like(g, op.inputs[0]), None],
              loop_nest=_sum_to_nest, shape_only_inputs=(1,))


def sum_to(x: Tensor, like: Tensor, name: str | None = None) -> Tensor:
    """Sum ``x`` over the axes along which ``like`` was broadcast to get ``x``'s shape."""
    return SumTo(x, like, name=name)


def unbroadcast(grad: Tensor, like: Tensor) -> Tensor:
    """``grad`` summed down to ``like``'s shape (undoing broadcasting); as it is when the shapes
    already agree."""
    if grad.shape == like.shape and None not in like.shape:
        return grad
    return sum_to(grad, like)

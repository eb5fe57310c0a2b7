"""Pieces of op rules that many declarations share: dtype and shape rules, dim maps, the "no gradient"
rule and a lowering helper. Each is a plain function of its arguments; none builds a node, so this
module imports no other op module.
"""
from __future__ import annotations

from typing import Any, Mapping, Sequence

import numpy as np

from .. import dtypes
from ..graph import Operation, Tensor
from ..shapes import RuleError

# -- dtype rules -------------------------------------------------------------------------------


def same_dtype(types: Sequence[np.dtype], attrs: Mapping[str, Any]) -> np.dtype:
    first = types[0]
    for other in types[1:]:
        if other != first:
            raise RuleError("operands have different dtypes "
                            + " and ".join(t.name for t in types) + " (use cc.cast)", "dtype")
    return first


def floating_dtype(types: Sequence[np.dtype], attrs: Mapping[str, Any]) -> np.dtype:
    dtype = same_dtype(types, attrs)
    if not dtypes.is_floating(dtype):
        raise RuleError(f"needs a float32 or float64 operand, got {dtype.name}", "dtype")
    return dtype


def numeric_dtype(types: Sequence[np.dtype], attrs: Mapping[str, Any]) -> np.dtype:
    dtype = same_dtype(types, attrs)
    if dtype == dtypes.bool_:
        raise RuleError("needs a numeric operand, got bool", "dtype")
    return dtype


def first_dtype(types: Sequence[np.dtype], attrs: Mapping[str, Any]) -> np.dtype:
    """The dtype of the first input (ops that move elements, and gradients shaped like an input)."""
    return types[0]


def dtype_from_attrs(types: Sequence[np.dtype], attrs: Mapping[str, Any]) -> np.dtype:
    """``attrs["dtype"]``: sources, fills and casts."""
    return attrs["dtype"]


# -- shape rules -------------------------------------------------------------------------------

def same_shape_as_first(shapes: Sequence[tuple], attrs: Mapping[str, Any]) -> tuple:
    return tuple(shapes[0])


def same_shape_as_second(shapes: Sequence[tuple], attrs: Mapping[str, Any]) -> tuple:
    """The shape of input 1: gradients that take their shape from a shape-only input."""
    return tuple(shapes[1])


def same_shape_as_third(shapes: Sequence[tuple], attrs: Mapping[str, Any]) -> tuple:
    return tuple(shapes[2])


def shape_from_attrs(shapes: Sequence[tuple], attrs: Mapping[str, Any]) -> tuple:
    """``attrs["shape"]``: sources."""
    return tuple(attrs["shape"])


# -- dim maps, gradients, lowering ----------------------------------------------------------------

def no_broadcast_dims(shapes: Sequence[tuple], out: tuple, attrs: Mapping[str, Any]) -> list[tuple]:
    """The dim map of ops whose inputs are all indexed or shape-only (nothing is broadcast)."""
    return [(None,) * len(s) for s in shapes]


def no_gradient(op: Operation, grad: Tensor) -> list[None]:
    return [None] * len(op.inputs)


def pass_through(sb: Any, args: Sequence[Any], attrs: Mapping[str, Any]) -> Any:
    """The lowering of an op that only moves elements: the element its dim map reads."""
    return args[0]


def clamp_index(sb: Any, index: Any, size: int) -> Any:
    """``index`` kept inside ``[0, size)``, so that a computed read never leaves its buffer."""
    return sb.maximum(sb.minimum(index, size - 1), 0)

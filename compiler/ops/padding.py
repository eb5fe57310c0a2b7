"""Padding: ``pad`` with a constant, or with the input mirrored at its edges (REFLECT, SYMMETRIC).

Each pad is elementwise over its output and reads its input through an ``IndexedInput``, keeping
every computed position inside the input. A constant pad's gradient is a strided slice; a mirror
pad's gradient adds, into each input element, the padded positions that read it.
"""
from __future__ import annotations

from typing import Any, Mapping, Sequence

import numpy as np

from .. import dtypes
from ..errors import DTypeError, ShapeError
from ..graph import Operation, Tensor, located
from ..kernel_ir import IndexedInput, contiguous_strides
from ..shapes import RuleError, format_shape
from .array import identity, static_value, zeros_like
from .elementwise import add, multiply
from .base import CopyPart, OpDef, composite_scope, convert_to_tensor, fit_literal
from .rules import clamp_index, first_dtype, no_broadcast_dims, same_shape_as_second
from .slicing import StridedSlice

I64 = dtypes.int64


def _pad_shape(shapes: Sequence[tuple], attrs: Mapping[str, Any]) -> tuple:
    paddings = attrs["paddings"]
    if len(paddings) != len(shapes[0]):
        raise RuleError(f"paddings has {len(paddings)} rows for the rank-{len(shapes[0])} shape "
                        f"{format_shape(shapes[0])}")
    if any(before < 0 or after < 0 for before, after in paddings):
        raise RuleError(f"paddings {paddings} has a negative entry")
    return tuple(None if n is None else n + before + after for n, (before, after) in zip(shapes[0], paddings))


def _pad_lower(sb: Any, args: Sequence[Any], attrs: Mapping[str, Any]) -> Any:
    source: IndexedInput = args[0]
    fill = sb.literal(attrs["constant_values"], source.dtype)
    if 0 in source.shape:
        return fill
    inside, indices = None, []
    for dim, ((before, _), size) in enumerate(zip(attrs["paddings"], source.shape)):
        index = sb.index(dim)
        if before:
            index = sb.sub(index, before)
            check = sb.ge(index, 0)
            inside = check if inside is None else sb.logical_and(inside, check)
        if attrs["paddings"][dim][1]:
            check = sb.lt(index, size)
            inside = check if inside is None else sb.logical_and(inside, check)
        indices.append(clamp_index(sb, index, size) if (before or attrs["paddings"][dim][1]) else index)
    value = source.at(sb, indices)
    return value if inside is None else sb.select(inside, value, fill)


def _pad_grad(op: Operation, g: Tensor) -> list[Tensor]:
    spec = tuple((before, -after if after else None, 1) for before, after in op.attrs["paddings"])
    return [StridedSlice(g, spec=spec)]


def _pad_copies(shapes: Sequence[tuple], out: tuple, attrs: Mapping[str, Any]) -> list[CopyPart] | None:
    # The input into the middle of the output, and a fill per border slab (corners twice, with the
    # same value); the index tests and clamps of the one-kernel form gathered the input.
    source = shapes[0]
    if 0 in source:
        return None
    strides = contiguous_strides(out)
    paddings = attrs["paddings"]
    middle = sum(before * stride for (before, _), stride in zip(paddings, strides))
    parts = [CopyPart(tuple(source), strides, middle, 0, tuple(range(len(source))))]
    for dim, (before, after) in enumerate(paddings):
        for width, start in ((before, 0), (after, before + source[dim])):
            if width:
                parts.append(CopyPart(out[:dim] + (width,) + out[dim + 1:], strides, start * strides[dim],
                                      fill=attrs["constant_values"]))
    return parts


Pad = OpDef("Pad", "elementwise", _pad_shape, first_dtype,
            # np.pad refuses the empty paddings of a scalar, which it is unchanged by.
            reference=lambda values, attrs: np.pad(np.asarray(values[0]), attrs["paddings"],
                                                   constant_values=attrs["constant_values"])
            if attrs["paddings"] else np.asarray(values[0]).copy(),
            grad_rule=_pad_grad, lower_scalar=_pad_lower, dim_map=no_broadcast_dims, indexed_inputs=(0,),
            copies=_pad_copies)


# Mirror padding, one dimension at a time: output i reads input i - before, reflected at the edges
# (REFLECT: ... 2 1 | 0 1 2 | 1 0 ...; SYMMETRIC repeats the edge: ... 1 0 | 0 1 2 | 2 1 ...).

def _mirror(sb: Any, offset: Any, size: int, symmetric: bool) -> Any:
    """The input position that padded position ``offset`` (relative to the first input element)
    reads along a dimension of ``size``."""
    shift = 1 if symmetric else 0
    low = sb.sub(sb.literal(-shift, I64), offset)                       # left of the input
    high = sb.sub(sb.literal(2 * size - 2 + shift, I64), offset)        # right of it
    inner = sb.select(sb.lt(offset, 0), low, sb.select(sb.ge(offset, size), high, offset))
    return clamp_index(sb, inner, size)


def _mirror_shape(shapes: Sequence[tuple], attrs: Mapping[str, Any]) -> tuple:
    shape = list(shapes[0])
    dim, before, after = attrs["dim"], attrs["before"], attrs["after"]
    size = shape[dim]
    limit = None if size is None else (size if attrs["symmetric"] else size - 1)
    if limit is not None and max(before, after) > limit:
        raise RuleError(f"{'SYMMETRIC' if attrs['symmetric'] else 'REFLECT'} padding of ({before}, {after}) "
                        f"along dimension {dim} needs at most {limit} (its size is {size})")
    shape[dim] = None if size is None else size + before + after
    return tuple(shape)


def _mirror_lower(sb: Any, args: Sequence[Any], attrs: Mapping[str, Any]) -> Any:
    source: IndexedInput = args[0]
    dim = attrs["dim"]
    if 0 in source.shape:
        return sb.literal(0, source.dtype)
    indices: list[Any] = [sb.index(d) for d in range(len(source.shape))]
    offset = sb.sub(indices[dim], attrs["before"]) if attrs["before"] else indices[dim]
    indices[dim] = _mirror(sb, offset, source.shape[dim], attrs["symmetric"])
    return source.at(sb, indices)


def _mirror_reference(values: Sequence[np.ndarray], attrs: Mapping[str, Any]) -> np.ndarray:
    x = np.asarray(values[0])
    widths = [(0, 0)] * x.ndim
    widths[attrs["dim"]] = (attrs["before"], attrs["after"])
    return np.pad(x, widths, mode="symmetric" if attrs["symmetric"] else "reflect")


def _mirror_attrs(op: Operation) -> dict[str, Any]:
    return {k: op.attrs[k] for k in ("dim", "before", "after", "symmetric")}


def _mirror_grad_lower(sb: Any, args: Sequence[Any], attrs: Mapping[str, Any]) -> Any:
    # Input j collects the padded positions that read it: j itself, its mirror on the left and
    # its mirror on the right (each only if it lies in the padding).
    grad: IndexedInput = args[0]
    dim, before, after = attrs["dim"], attrs["before"], attrs["after"]
    size = sb.output_shape[dim]
    zero = sb.literal(0, grad.dtype)
    if 0 in grad.shape:
        return zero
    shift = 1 if attrs["symmetric"] else 0
    j = sb.index(dim)
    total = None
    candidates = [(sb.add(j, before) if before else j, None),
                  # left: offset = -shift - j, i.e. padded position before - shift - j, in [0, before)
                  (sb.sub(sb.literal(before - shift, I64), j), (0, before)),
                  # right: offset = 2 * size - 2 + shift - j, in [before + size, before + size + after)
                  (sb.sub(sb.literal(before + 2 * size - 2 + shift, I64), j), (before + size, before + size + after))]
    for position, bounds in candidates:
        if bounds is not None and bounds[0] >= bounds[1]:
            continue
        indices: list[Any] = [sb.index(d) for d in range(len(grad.shape))]
        indices[dim] = clamp_index(sb, position, grad.shape[dim])
        value = grad.at(sb, indices)
        if bounds is not None:
            inside = sb.logical_and(sb.ge(position, bounds[0]), sb.lt(position, bounds[1]))
            value = sb.select(inside, value, zero)
        total = value if total is None else sb.add(total, value)
    return total


def _mirror_grad_reference(values: Sequence[np.ndarray], attrs: Mapping[str, Any]) -> np.ndarray:
    grad, like = np.asarray(values[0]), np.asarray(values[1])
    dim, before = attrs["dim"], attrs["before"]
    size = like.shape[dim]
    result = np.zeros(like.shape, grad.dtype)
    moved_result, moved_grad = np.moveaxis(result, dim, 0), np.moveaxis(grad, dim, 0)
    shift = 1 if attrs["symmetric"] else 0
    for i in range(grad.shape[dim]):
        offset = i - before
        j = (-shift - offset) if offset < 0 else (2 * size - 2 + shift - offset) if offset >= size else offset
        moved_result[j] += moved_grad[i]
    return result


MirrorPad = OpDef("MirrorPad", "elementwise", _mirror_shape, first_dtype, reference=_mirror_reference,
                  grad_rule=lambda op, g: [MirrorPadGrad(g, op.inputs[0], **_mirror_attrs(op))],
                  lower_scalar=_mirror_lower, dim_map=no_broadcast_dims, indexed_inputs=(0,))
MirrorPadGrad = OpDef("MirrorPadGrad", "elementwise", same_shape_as_second, first_dtype,
                      reference=_mirror_grad_reference,
                      grad_rule=lambda op, g: [MirrorPad(g, **_mirror_attrs(op)), None],
                      lower_scalar=_mirror_grad_lower, dim_map=no_broadcast_dims, indexed_inputs=(0,),
                      shape_only_inputs=(1,))


def pad(x: Any, paddings: Sequence[Sequence[int]], mode: str = "CONSTANT", name: str | None = None,
        constant_values: float = 0) -> Tensor:
    """Pad dimension ``d`` with ``paddings[d] = (before, after)`` elements: ``constant_values``
    (``mode="CONSTANT"``), or the input mirrored at its edges (``"REFLECT"``: without repeating the
    edge, at most size - 1 per side; ``"SYMMETRIC"``: repeating it, at most size), as TF1.

    >>> import compiler as cc
    >>> cc.pad(cc.constant(np.ones((2, 3))), [[1, 1], [0, 2]]).shape
    (4, 5)
    """
    mode = str(mode).upper()
    if mode not in ("CONSTANT", "REFLECT", "SYMMETRIC"):
        raise ValueError(located(f"pad: mode must be 'CONSTANT', 'REFLECT' or 'SYMMETRIC', got {mode!r}"))
    if isinstance(paddings, Tensor):
        raise TypeError(located("pad: paddings must be Python ints (shapes are fixed when a step is compiled), "
                                f"not the tensor {paddings.name!r}"))
    table = np.asarray(paddings)
    if table.size == 0:
        table = np.zeros((0, 2), np.int64)    # a scalar's paddings
    if table.ndim != 2 or table.shape[1] != 2 or table.dtype.kind not in "iu":
        raise ShapeError(located(f"pad: paddings must be integers of shape [rank, 2] (before and after, per "
                                 f"dimension), got {paddings!r}"))
    rows = tuple((int(a), int(b)) for a, b in table)
    if mode == "CONSTANT":
        if isinstance(constant_values, Tensor):
            return _padded_with_tensor(x, rows, constant_values, name)
        if isinstance(x, Tensor):
            constant_values = fit_literal(constant_values, x.dtype, "Pad").item()
        return Pad(x, paddings=rows, constant_values=constant_values, name=name)
    x = convert_to_tensor(x)
    if len(rows) != len(x.shape):
        raise ShapeError(located(f"pad: paddings has {len(rows)} rows for {x.name!r} of rank {len(x.shape)}"))
    if any(before < 0 or after < 0 for before, after in rows):
        raise ShapeError(located(f"pad: paddings {rows} has a negative entry"))
    result = x
    for dim, (before, after) in enumerate(rows):
        if before or after:
            result = MirrorPad(result, dim=dim, before=before, after=after, symmetric=mode == "SYMMETRIC")
    return result if result is not x else identity(x, name=name)


def _padded_with_tensor(x: Any, rows: tuple[tuple[int, int], ...], value: Tensor, name: str | None) -> Tensor:
    """``pad`` with a scalar tensor as the fill (TF1 takes one): its value when it is known now,
    else zeros padded and ``value`` times a border of ones added, so its gradient is the border's
    sum of the upstream gradient."""
    x = convert_to_tensor(x)
    if value.shape != ():
        raise ShapeError(located(f"pad: constant_values must be a scalar, got {value.name!r} "
                                 f"{format_shape(value.shape)}"))
    if value.dtype != x.dtype:
        raise DTypeError(located(f"pad: constant_values {value.name!r} is {value.dtype.name} but {x.name!r} is "
                                 f"{x.dtype.name}"))
    known = static_value(value)
    if known is not None:
        return Pad(x, paddings=rows, constant_values=known.item(), name=name)
    with composite_scope(name or "Pad", [x, value]):
        border = Pad(zeros_like(x), paddings=rows, constant_values=1)
        return add(Pad(x, paddings=rows, constant_values=0), multiply(border, value))

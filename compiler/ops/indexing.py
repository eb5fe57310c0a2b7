"""Ops that read their inputs at computed positions: slices, pad, concat, tile and gather.

Each is elementwise over its output (so it fuses into its consumer) and reads its input through an
``IndexedInput``: the input is materialised in a buffer and the op computes, per output element,
which element to read. Every computed position is kept inside the input, so a bad index never
reads outside a buffer: gather gives 0 for an index out of range (as TF does on GPUs).
Split and stack are compositions of these.
"""
from __future__ import annotations

import math
from typing import Any, Mapping, Sequence

import numpy as np

from .. import dtypes
from ..errors import ShapeError
from ..graph import Operation, Tensor, user_location
from ..kernel_ir import IndexedInput, contiguous_strides
from ..shapes import RuleError, format_shape, normalize_axis
from . import array as _array
from .base import LoopNest, OpDef, convert_to_tensor, same_dtype

I64 = dtypes.int64


def _first_dtype(types: Sequence[np.dtype], attrs: Mapping[str, Any]) -> np.dtype:
    return types[0]


def _no_dims(shapes: Sequence[tuple], out: tuple, attrs: Mapping[str, Any]) -> list[tuple]:
    """Dim maps for ops whose inputs are all indexed or shape-only (nothing is broadcast)."""
    return [(None,) * len(s) for s in shapes]


def _clamp(sb: Any, index: Any, size: int) -> Any:
    return sb.maximum(sb.minimum(index, size - 1), 0)


# -- strided slice ---------------------------------------------------------------------------
# attrs["spec"]: one (start, stop, step) per input dimension, Python slice semantics (None allowed).

def _slice_range(spec: tuple, size: int) -> range:
    return range(*slice(*spec).indices(size))


def _slice_shape(shapes: Sequence[tuple], attrs: Mapping[str, Any]) -> tuple:
    shape, spec = shapes[0], attrs["spec"]
    if len(spec) != len(shape):
        raise RuleError(f"{len(spec)} slice dimensions for the rank-{len(shape)} shape {format_shape(shape)}")
    for start, stop, step in spec:
        if step == 0:
            raise RuleError("slice step cannot be zero")
    return tuple(None if n is None else len(_slice_range(s, n)) for s, n in zip(spec, shape))


def _slice_lower(sb: Any, args: Sequence[Any], attrs: Mapping[str, Any]) -> Any:
    source: IndexedInput = args[0]
    indices = []
    for dim, (spec, size) in enumerate(zip(attrs["spec"], source.shape)):
        positions = _slice_range(spec, size)
        if len(positions) == 0:
            return sb.literal(0, source.dtype)  # an empty result: no element is ever computed
        index = sb.index(dim)
        if positions.step != 1:
            index = sb.mul(index, positions.step)
        if positions.start != 0:
            index = sb.add(index, positions.start)
        indices.append(index)
    return source.at(sb, indices)


def _slice_reference(values: Sequence[np.ndarray], attrs: Mapping[str, Any]) -> np.ndarray:
    return np.array(np.asarray(values[0])[tuple(slice(*s) for s in attrs["spec"])])


def _slice_grad(op: Operation, g: Tensor) -> list[Tensor]:
    return [SliceGrad(g, op.inputs[0], spec=op.attrs["spec"])]


StridedSlice = OpDef("StridedSlice", "elementwise", _slice_shape, _first_dtype, reference=_slice_reference,
                     grad_rule=_slice_grad, lower_scalar=_slice_lower, dim_map=_no_dims,
                     indexed_inputs=(0,))


def _slice_grad_lower(sb: Any, args: Sequence[Any], attrs: Mapping[str, Any]) -> Any:
    # Input element i came from output element q = (i - start) / step when that is whole and in range.
    grad: IndexedInput = args[0]
    zero = sb.literal(0, grad.dtype)
    inside, indices = None, []
    for dim, (spec, size) in enumerate(zip(attrs["spec"], sb.output_shape)):
        positions = _slice_range(spec, size)
        if len(positions) == 0:
            return zero
        offset = sb.index(dim)
        if positions.start != 0:
            offset = sb.sub(offset, positions.start)
        checks = []
        if positions.step != 1:
            checks.append(sb.eq(sb.index_rem(offset, positions.step), 0))
            offset = sb.index_div(offset, positions.step)
        checks += [sb.ge(offset, 0), sb.lt(offset, len(positions))]
        for check in checks:
            inside = check if inside is None else sb.logical_and(inside, check)
        indices.append(_clamp(sb, offset, len(positions)))
    value = grad.at(sb, indices)
    return value if inside is None else sb.select(inside, value, zero)


def _slice_grad_reference(values: Sequence[np.ndarray], attrs: Mapping[str, Any]) -> np.ndarray:
    grad, like = np.asarray(values[0]), np.asarray(values[1])
    result = np.zeros(like.shape, grad.dtype)
    result[tuple(slice(*s) for s in attrs["spec"])] = grad
    return result


def _slice_grad_shape(shapes: Sequence[tuple], attrs: Mapping[str, Any]) -> tuple:
    expected = _slice_shape(shapes[1:], attrs)
    if any(a is not None and b is not None and a != b for a, b in zip(expected, shapes[0])):
        raise RuleError(f"gradient of shape {format_shape(shapes[0])} for a slice of shape "
                        f"{format_shape(expected)}")
    return tuple(shapes[1])


SliceGrad = OpDef(
    "StridedSliceGrad", "elementwise", _slice_grad_shape, _first_dtype, reference=_slice_grad_reference,
    grad_rule=lambda op, g: [StridedSlice(g, spec=op.attrs["spec"]), None],
    lower_scalar=_slice_grad_lower, dim_map=_no_dims,
    indexed_inputs=(0,), shape_only_inputs=(1,))


def strided_slice(x: Any, spec: Sequence[slice | tuple], name: str | None = None) -> Tensor:
    """``x[s0, s1, …]`` for one Python slice (or ``(start, stop, step)``) per dimension.

    >>> import compiler as cc
    >>> cc.strided_slice(cc.constant(np.arange(10.0)), [slice(1, None, 3)]).shape
    (3,)
    """
    triples = tuple((s.start, s.stop, s.step if s.step is not None else 1) if isinstance(s, slice)
                    else (s[0], s[1], s[2] if len(s) > 2 and s[2] is not None else 1) for s in spec)
    triples = tuple(tuple(None if v is None else int(v) for v in t) for t in triples)
    return StridedSlice(x, spec=triples, name=name)


def reverse(x: Any, axis: int | Sequence[int], name: str | None = None) -> Tensor:
    """The elements of ``x`` in reverse order along each dimension in ``axis`` (TF1's ``tf.reverse``).

    >>> import compiler as cc
    >>> cc.reverse(cc.constant(np.arange(6.0).reshape(2, 3)), axis=[1]).shape
    (2, 3)
    """
    x = convert_to_tensor(x)
    axes = {normalize_axis(int(a), len(x.shape)) for a in ([axis] if isinstance(axis, (int, np.integer)) else axis)}
    if not axes:
        return _array.identity(x, name=name)
    spec = tuple((None, None, -1) if d in axes else (None, None, 1) for d in range(len(x.shape)))
    return StridedSlice(x, spec=spec, name=name)


def slice_(x: Any, begin: Sequence[int], size: Sequence[int], name: str | None = None) -> Tensor:
    """TF1's ``tf.slice``: ``size[d]`` elements from ``begin[d]`` along each dimension (-1: to the end)."""
    spec = [(int(b), None if int(n) == -1 else int(b) + int(n), 1) for b, n in zip(begin, size)]
    if isinstance(x, Tensor) and len(spec) != len(x.shape):
        raise ShapeError(f"slice: begin has {len(spec)} entries for {x.name!r} of rank {len(x.shape)} "
                         f"(at {user_location()})")
    return StridedSlice(x, spec=tuple(spec), name=name)


def getitem(x: Tensor, key: Any) -> Tensor:
    """``x[key]`` with ints, slices (steps and negative indices), ``...`` and ``None``, as numpy's
    basic indexing. An int index out of range is a ``ShapeError`` when the dimension is known."""
    if not isinstance(key, tuple):
        key = (key,)
    if sum(1 for k in key if k is Ellipsis) > 1:
        raise ShapeError(f"{x.name!r}[…]: an index can only have one ellipsis (at {user_location()})")
    consuming = sum(1 for k in key if k is not None and k is not Ellipsis)
    rank = len(x.shape)
    if consuming > rank:
        raise ShapeError(f"{x.name!r}: too many indices ({consuming}) for shape {format_shape(x.shape)} "
                         f"(at {user_location()})")
    if Ellipsis in key:
        at = key.index(Ellipsis)
        key = key[:at] + (slice(None),) * (rank - consuming) + key[at + 1:]
    else:
        key = key + (slice(None),) * (rank - consuming)
    spec, drop, insert = [], [], []
    dim = 0
    for position, k in enumerate(key):
        if k is None:
            insert.append(position)
            continue
        if isinstance(k, slice):
            spec.append((k.start, k.stop, 1 if k.step is None else k.step))
        elif isinstance(k, (int, np.integer)) and not isinstance(k, bool):
            k = int(k)
            size = x.shape[dim]
            if size is not None and not -size <= k < size:
                raise ShapeError(f"index {k} is out of range for dimension {dim} of {x.name!r} with shape "
                                 f"{format_shape(x.shape)} (at {user_location()})")
            spec.append((k, k + 1 if k != -1 else None, 1))
            drop.append(dim)
        else:
            raise TypeError(f"{x.name!r}[…]: only ints, slices, ... and None are supported, got {k!r} "
                            f"(use cc.gather for tensor indices) (at {user_location()})")
        dim += 1
    result = x
    if any(s != (None, None, 1) for s in spec):
        result = StridedSlice(x, spec=tuple(tuple(None if v is None else int(v) for v in s) for s in spec))
    if drop:
        result = _array.squeeze(result, drop)
    for position in insert:
        result = _array.expand_dims(result, position)
    return result


# -- pad -------------------------------------------------------------------------------------

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
        indices.append(_clamp(sb, index, size) if (before or attrs["paddings"][dim][1]) else index)
    value = source.at(sb, indices)
    return value if inside is None else sb.select(inside, value, fill)


def _pad_grad(op: Operation, g: Tensor) -> list[Tensor]:
    spec = tuple((before, -after if after else None, 1) for before, after in op.attrs["paddings"])
    return [StridedSlice(g, spec=spec)]


Pad = OpDef("Pad", "elementwise", _pad_shape, _first_dtype,
            reference=lambda values, attrs: np.pad(np.asarray(values[0]), attrs["paddings"],
                                                   constant_values=attrs["constant_values"]),
            grad_rule=_pad_grad, lower_scalar=_pad_lower, dim_map=_no_dims, indexed_inputs=(0,))


# Mirror padding, one dimension at a time: output i reads input i - before, reflected at the edges
# (REFLECT: ... 2 1 | 0 1 2 | 1 0 ...; SYMMETRIC repeats the edge: ... 1 0 | 0 1 2 | 2 1 ...).

def _mirror(sb: Any, offset: Any, size: int, symmetric: bool) -> Any:
    """The input position that padded position ``offset`` (relative to the first input element)
    reads along a dimension of ``size``."""
    shift = 1 if symmetric else 0
    low = sb.sub(sb.literal(-shift, I64), offset)                       # left of the input
    high = sb.sub(sb.literal(2 * size - 2 + shift, I64), offset)        # right of it
    inner = sb.select(sb.lt(offset, 0), low, sb.select(sb.ge(offset, size), high, offset))
    return _clamp(sb, inner, size)


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
        indices[dim] = _clamp(sb, position, grad.shape[dim])
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


MirrorPad = OpDef("MirrorPad", "elementwise", _mirror_shape, _first_dtype, reference=_mirror_reference,
                  grad_rule=lambda op, g: [MirrorPadGrad(g, op.inputs[0], **_mirror_attrs(op))],
                  lower_scalar=_mirror_lower, dim_map=_no_dims, indexed_inputs=(0,))
MirrorPadGrad = OpDef("MirrorPadGrad", "elementwise", lambda shapes, attrs: tuple(shapes[1]), _first_dtype,
                      reference=_mirror_grad_reference,
                      grad_rule=lambda op, g: [MirrorPad(g, **_mirror_attrs(op)), None],
                      lower_scalar=_mirror_grad_lower, dim_map=_no_dims, indexed_inputs=(0,),
                      shape_only_inputs=(1,))


def pad(x: Any, paddings: Sequence[Sequence[int]], mode: str = "CONSTANT", constant_values: float = 0,
        name: str | None = None) -> Tensor:
    """Pad dimension ``d`` with ``paddings[d] = (before, after)`` elements: ``constant_values``
    (``mode="CONSTANT"``), or the input mirrored at its edges (``"REFLECT"``: without repeating the
    edge, at most size - 1 per side; ``"SYMMETRIC"``: repeating it, at most size), as TF1.

    >>> import compiler as cc
    >>> cc.pad(cc.constant(np.ones((2, 3))), [[1, 1], [0, 2]]).shape
    (4, 5)
    """
    mode = str(mode).upper()
    if mode not in ("CONSTANT", "REFLECT", "SYMMETRIC"):
        raise ValueError(f"pad: mode must be 'CONSTANT', 'REFLECT' or 'SYMMETRIC', got {mode!r} "
                         f"(at {user_location()})")
    rows = tuple((int(a), int(b)) for a, b in np.asarray(paddings, dtype=np.int64).reshape(-1, 2))
    if mode == "CONSTANT":
        return Pad(x, paddings=rows, constant_values=constant_values, name=name)
    x = convert_to_tensor(x)
    if len(rows) != len(x.shape):
        raise ShapeError(f"pad: paddings has {len(rows)} rows for {x.name!r} of rank {len(x.shape)} "
                         f"(at {user_location()})")
    if any(before < 0 or after < 0 for before, after in rows):
        raise ShapeError(f"pad: paddings {rows} has a negative entry (at {user_location()})")
    result = x
    for dim, (before, after) in enumerate(rows):
        if before or after:
            result = MirrorPad(result, dim=dim, before=before, after=after, symmetric=mode == "SYMMETRIC")
    return result if result is not x else _array.identity(x, name=name)


# -- concat, split, stack --------------------------------------------------------------------

def _concat_axis(shapes: Sequence[tuple], attrs: Mapping[str, Any]) -> int:
    return normalize_axis(attrs["axis"], len(shapes[0]))


def _concat_shape(shapes: Sequence[tuple], attrs: Mapping[str, Any]) -> tuple:
    axis = _concat_axis(shapes, attrs)
    first = shapes[0]
    for other in shapes[1:]:
        if len(other) != len(first) or any(
                d != axis and a is not None and b is not None and a != b for d, (a, b) in enumerate(zip(first, other))):
            raise RuleError(f"cannot concatenate {' and '.join(format_shape(s) for s in shapes)} along axis {axis}")
    total = None if any(s[axis] is None for s in shapes) else sum(s[axis] for s in shapes)
    merged = [next((s[d] for s in shapes if s[d] is not None), None) for d in range(len(first))]
    merged[axis] = total
    return tuple(merged)


def _concat_lower(sb: Any, args: Sequence[Any], attrs: Mapping[str, Any]) -> Any:
    axis = normalize_axis(attrs["axis"], len(args[0].shape))
    position = sb.index(axis)
    parts, start = [], 0
    for source in args:
        if source.shape[axis] and 0 not in source.shape:
            parts.append((start, source))
        start += source.shape[axis]
    if not parts:
        return sb.literal(0, args[0].dtype)
    result = None
    for begin, source in reversed(parts):
        indices: list[Any] = [sb.index(d) for d in range(len(source.shape))]
        local = sb.sub(position, begin) if begin else position
        indices[axis] = _clamp(sb, local, source.shape[axis]) if len(parts) > 1 else local
        value = source.at(sb, indices)
        result = value if result is None else sb.select(sb.lt(position, begin + source.shape[axis]), value, result)
    return result


def _concat_grad(op: Operation, g: Tensor) -> list[Tensor]:
    axis = _concat_axis([t.shape for t in op.inputs], op.attrs)
    return [ConcatGradPart(g, *op.inputs, axis=axis, part=k) for k in range(len(op.inputs))]


Concat = OpDef("ConcatV2", "elementwise", _concat_shape, same_dtype,
               reference=lambda values, attrs: np.concatenate([np.asarray(v) for v in values], attrs["axis"]),
               grad_rule=_concat_grad, lower_scalar=_concat_lower, dim_map=_no_dims,
               indexed_inputs=tuple(range(64)))


def _part_spec(shapes: Sequence[tuple], attrs: Mapping[str, Any]) -> tuple:
    """The slice of the concatenated gradient that belongs to input ``part``."""
    axis, part = attrs["axis"], attrs["part"]
    sizes = [s[axis] for s in shapes[1:]]
    begin = sum(sizes[:part])
    return tuple((begin, begin + sizes[part], 1) if d == axis else (None, None, 1) for d in range(len(shapes[0])))


def _concat_part_grad(op: Operation, g: Tensor) -> list[Tensor | None]:
    # Taking part k of the gradient is undone by putting g at part k, zeros elsewhere.
    pieces = [g if k == op.attrs["part"] else _array.zeros_like(x) for k, x in enumerate(op.inputs[1:])]
    return [Concat(*pieces, axis=op.attrs["axis"])] + [None] * (len(op.inputs) - 1)


def _concat_part_shape(shapes: Sequence[tuple], attrs: Mapping[str, Any]) -> tuple:
    return tuple(shapes[1 + attrs["part"]])


def _concat_part_lower(sb: Any, args: Sequence[Any], attrs: Mapping[str, Any]) -> Any:
    shapes = [args[0].shape] + list(sb.input_shapes[1:])
    return _slice_lower(sb, args[:1], {"spec": _part_spec(shapes, attrs)})


def _concat_part_reference(values: Sequence[np.ndarray], attrs: Mapping[str, Any]) -> np.ndarray:
    spec = _part_spec([np.shape(v) for v in values], attrs)
    return np.array(np.asarray(values[0])[tuple(slice(*s) for s in spec)])


ConcatGradPart = OpDef(
    "ConcatGradPart", "elementwise", _concat_part_shape, _first_dtype, reference=_concat_part_reference,
    grad_rule=lambda op, g: _concat_part_grad(op, g),
    lower_scalar=_concat_part_lower, dim_map=_no_dims, indexed_inputs=(0,),
    shape_only_inputs=tuple(range(1, 65)))


def concat(values: Sequence[Any], axis: int, name: str | None = None) -> Tensor:
    """Join tensors along ``axis`` (TF1 argument order).

    >>> import compiler as cc
    >>> cc.concat([cc.constant(np.ones((2, 3))), cc.constant(np.zeros((2, 1)))], axis=1).shape
    (2, 4)
    """
    values = list(values)
    if not values:
        raise ValueError(f"concat needs at least one tensor (at {user_location()})")
    if len(values) > 64:
        raise ValueError(f"concat of {len(values)} tensors: at most 64 at once (concatenate in groups) "
                         f"(at {user_location()})")
    if len(values) == 1:
        return _array.identity(values[0], name=name)
    return Concat(*values, axis=int(axis), name=name)


def split(value: Tensor, num_or_size_splits: int | Sequence[int], axis: int = 0,
          name: str | None = None) -> list[Tensor]:
    """Cut ``value`` along ``axis`` into ``num_or_size_splits`` equal parts, or parts of the given
    sizes (one size may be -1: the rest)."""
    axis = normalize_axis(int(axis), len(value.shape))
    size = value.shape[axis]
    if isinstance(num_or_size_splits, (int, np.integer)):
        count = int(num_or_size_splits)
        if size is None:
            raise ShapeError(f"split of {value.name!r} into {count} parts needs dimension {axis} known "
                             f"(at {user_location()})")
        if count <= 0 or size % count:
            raise ShapeError(f"split: dimension {axis} of {value.name!r} (size {size}) does not divide into "
                             f"{count} parts (at {user_location()})")
        sizes = [size // count] * count
    else:
        sizes = [int(s) for s in num_or_size_splits]
        if sizes.count(-1) > 1:
            raise ShapeError(f"split: at most one size may be -1, got {sizes} (at {user_location()})")
        if -1 in sizes:
            if size is None:
                raise ShapeError(f"split with a -1 size needs dimension {axis} of {value.name!r} known "
                                 f"(at {user_location()})")
            sizes[sizes.index(-1)] = size - (sum(sizes) + 1)
        if size is not None and sum(sizes) != size or any(s < 0 for s in sizes):
            raise ShapeError(f"split: sizes {sizes} do not add up to dimension {axis} of {value.name!r} "
                             f"(size {size}) (at {user_location()})")
    parts, begin = [], 0
    for k, part in enumerate(sizes):
        spec = tuple((begin, begin + part, 1) if d == axis else (None, None, 1) for d in range(len(value.shape)))
        parts.append(StridedSlice(value, spec=spec, name=None if name is None else f"{name}_{k}"))
        begin += part
    return parts


def stack(values: Sequence[Any], axis: int = 0, name: str | None = None) -> Tensor:
    """Join tensors of one shape along a new dimension ``axis``."""
    values = [convert_to_tensor(v) for v in values]
    if not values:
        raise ValueError(f"stack needs at least one tensor (at {user_location()})")
    rank = len(values[0].shape)
    axis = normalize_axis(int(axis), rank + 1)
    return concat([_array.expand_dims(v, axis) for v in values], axis, name=name)


def unstack(value: Tensor, axis: int = 0) -> list[Tensor]:
    """The slices of ``value`` along ``axis`` (its size must be known)."""
    axis = normalize_axis(int(axis), len(value.shape))
    return [getitem(value, (slice(None),) * axis + (k,)) for k in range(value.shape[axis])]


# -- tile -------------------------------------------------------------------------------------

def _tile_shape(shapes: Sequence[tuple], attrs: Mapping[str, Any]) -> tuple:
    multiples = attrs["multiples"]
    if len(multiples) != len(shapes[0]):
        raise RuleError(f"multiples {multiples} has {len(multiples)} entries for the rank-{len(shapes[0])} "
                        f"shape {format_shape(shapes[0])}")
    if any(m < 0 for m in multiples):
        raise RuleError(f"multiples {multiples} has a negative entry")
    return tuple(None if n is None else n * m for n, m in zip(shapes[0], multiples))


def _tile_lower(sb: Any, args: Sequence[Any], attrs: Mapping[str, Any]) -> Any:
    source: IndexedInput = args[0]
    if 0 in source.shape:
        return sb.literal(0, source.dtype)
    indices = [sb.index(d) if m == 1 else sb.index_rem(sb.index(d), n)
               for d, (n, m) in enumerate(zip(source.shape, attrs["multiples"]))]
    return source.at(sb, indices)


def _tile_grad_nest(shapes: Sequence[tuple], out: tuple, attrs: Mapping[str, Any]) -> LoopNest:
    # space (m0, n0, m1, n1, …): sum over the copies m_d of each input element n_d.
    source = shapes[1]
    space = tuple(x for n, m in zip(source, attrs["multiples"]) for x in (m, n))

    def body(sb: Any, args: Sequence[Any]) -> Any:
        grad: IndexedInput = args[0]
        if 0 in space:
            return sb.literal(0, grad.dtype)
        indices = []
        for d, n in enumerate(source):
            copy, element = sb.axis_index(2 * d), sb.axis_index(2 * d + 1)
            indices.append(sb.add(sb.mul(copy, n), element) if n != 1 else copy)
        return grad.at(sb, indices)
    return LoopNest(space, ((None,) * len(space), (None,) * len(source)),
                    tuple(range(0, len(space), 2)), "sum", body)


def _tile_grad_reference(values: Sequence[np.ndarray], attrs: Mapping[str, Any]) -> np.ndarray:
    grad, like = np.asarray(values[0]), np.asarray(values[1])
    split = tuple(x for n, m in zip(like.shape, attrs["multiples"]) for x in (m, n))
    return np.sum(grad.reshape(split), axis=tuple(range(0, len(split), 2)), dtype=grad.dtype).reshape(like.shape)


TileGrad = OpDef("TileGrad", "reduce", lambda shapes, attrs: tuple(shapes[1]), _first_dtype,
                 reference=_tile_grad_reference,
                 grad_rule=lambda op, g: [Tile(g, multiples=op.attrs["multiples"]), None],
                 loop_nest=_tile_grad_nest, indexed_inputs=(0,), shape_only_inputs=(1,))

Tile = OpDef("Tile", "elementwise", _tile_shape, _first_dtype,
             reference=lambda values, attrs: np.tile(np.asarray(values[0]), attrs["multiples"]),
             grad_rule=lambda op, g: [TileGrad(g, op.inputs[0], multiples=op.attrs["multiples"])],
             lower_scalar=_tile_lower, dim_map=_no_dims, indexed_inputs=(0,))


def tile(x: Any, multiples: Sequence[int], name: str | None = None) -> Tensor:
    """Repeat ``x`` ``multiples[d]`` times along each dimension ``d`` (as ``np.tile``)."""
    return Tile(x, multiples=tuple(int(m) for m in multiples), name=name)


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
    positions.append(_clamp(sb, index, depth))
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
        positions = [sb.axis_index(d) for d in range(axis)] + [_clamp(sb, index, depth)] + [
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
    depth = params.shape[axis]
    moved = np.moveaxis(result, axis, 0)
    grad_moved = grad.reshape(params.shape[:axis] + (indices.size,) + params.shape[axis + 1:])
    grad_moved = np.moveaxis(grad_moved, axis, 0)
    for r, v in enumerate(indices.reshape(-1)):
        if 0 <= v < depth:
            moved[v] += grad_moved[r]
    return result


ScatterAddGrad = OpDef(
    "GatherGrad", "reduce", lambda shapes, attrs: tuple(shapes[2]), _first_dtype, reference=_scatter_reference,
    grad_rule=lambda op, g: [Gather(g, op.inputs[1], axis=op.attrs["axis"],
                                    _indices_rank=op.attrs["_indices_rank"]), None, None],
    loop_nest=_scatter_nest, shape_only_inputs=(2,))


def gather(params: Any, indices: Any, axis: int = 0, name: str | None = None) -> Tensor:
    """Rows of ``params`` (along ``axis``) picked by integer ``indices`` (an embedding lookup).

    The result has shape ``params.shape[:axis] + indices.shape + params.shape[axis+1:]``. An index
    outside ``[0, params.shape[axis])`` gives zeros. The gradient adds into the rows it read.

    >>> import compiler as cc
    >>> table = cc.constant(np.arange(12.0).reshape(4, 3))
    >>> cc.gather(table, cc.constant(np.array([3, 0]))).shape
    (2, 3)
    """
    indices = convert_to_tensor(indices)
    return Gather(params, indices, axis=int(axis), _indices_rank=len(indices.shape), name=name)


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
        flat = sb.mul(_clamp(sb, segment, depth), inner) if inner != 1 else _clamp(sb, segment, depth)
        rest_strides = contiguous_strides(data[rank:])
        for d, (stride, size) in enumerate(zip(rest_strides, data[rank:])):
            if size != 1:
                position = sb.axis_index(rank + d)
                flat = sb.add(flat, position if stride == 1 else sb.mul(position, stride))
        return flat, sb.select(inside, value, sb.literal(0, value.dtype))
    return LoopNest(tuple(data), (tuple(range(len(data))), tuple(range(rank))), (), "sum", body, scatter=True)


def _segment_reference(values: Sequence[np.ndarray], attrs: Mapping[str, Any]) -> np.ndarray:
    data, ids = np.asarray(values[0]), np.asarray(values[1]).astype(np.int64)
    depth = attrs["num_segments"]
    result = np.zeros((depth,) + data.shape[ids.ndim:], data.dtype)
    rows = data.reshape((-1,) + data.shape[ids.ndim:])
    for r, segment in enumerate(ids.reshape(-1)):
        if 0 <= segment < depth:
            result[segment] += rows[r]
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
    if int(num_segments) < 0:
        raise ValueError(f"unsorted_segment_sum: num_segments must be >= 0, got {num_segments} "
                         f"(at {user_location()})")
    return UnsortedSegmentSum(data, segment_ids, num_segments=int(num_segments), name=name)

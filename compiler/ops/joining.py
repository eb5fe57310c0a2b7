"""Joining and cutting: ``concat``, ``split``, ``stack``, ``unstack`` and ``tile``.

Concat and tile are elementwise over their output and read their inputs through ``IndexedInput``s
(every computed position kept inside its input); split, stack and unstack are compositions of
slices, concat and ``expand_dims``. Tile's gradient sums the copies in one loop nest.
"""
from __future__ import annotations

from typing import Any, Mapping, Sequence

import numpy as np

from .. import dtypes
from ..errors import ShapeError
from ..graph import Operation, Tensor, located
from ..kernel_ir import IndexedInput, contiguous_strides
from ..shapes import RuleError, format_shape, normalize_axis
from .array import expand_dims, identity, known_int, known_ints, size_from_tensor, zeros_like
from .creation import zeros
from .elementwise import add
from .base import CopyPart, LoopNest, OpDef, composite_scope, convert_to_tensor
from .rules import clamp_index, first_dtype, no_broadcast_dims, same_dtype, same_shape_as_second
from .slicing import StridedSlice, getitem, lower_strided_slice


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
        indices[axis] = clamp_index(sb, local, source.shape[axis]) if len(parts) > 1 else local
        value = source.at(sb, indices)
        result = value if result is None else sb.select(sb.lt(position, begin + source.shape[axis]), value, result)
    return result


def _concat_grad(op: Operation, g: Tensor) -> list[Tensor]:
    axis = _concat_axis([t.shape for t in op.inputs], op.attrs)
    return [ConcatGradPart(g, *op.inputs, axis=axis, part=k) for k in range(len(op.inputs))]


def _concat_copies(shapes: Sequence[tuple], out: tuple, attrs: Mapping[str, Any]) -> list[CopyPart] | None:
    # Each input that holds anything copied into its slice of the output.
    axis = _concat_axis(shapes, attrs)
    if sum(0 not in shape for shape in shapes) < 2:
        return None
    strides = contiguous_strides(out)
    starts = np.cumsum([0] + [shape[axis] for shape in shapes])
    return [CopyPart(tuple(shape), strides, int(start) * strides[axis], k, tuple(range(len(shape))))
            for k, (shape, start) in enumerate(zip(shapes, starts)) if 0 not in shape]


Concat = OpDef("ConcatV2", "elementwise", _concat_shape, same_dtype,
               reference=lambda values, attrs: np.concatenate([np.asarray(v) for v in values], attrs["axis"]),
               grad_rule=_concat_grad, lower_scalar=_concat_lower, dim_map=no_broadcast_dims,
               indexed_inputs=tuple(range(64)), copies=_concat_copies)


def _part_spec(shapes: Sequence[tuple], attrs: Mapping[str, Any]) -> tuple:
    """The slice of the concatenated gradient that belongs to input ``part``."""
    axis, part = attrs["axis"], attrs["part"]
    sizes = [s[axis] for s in shapes[1:]]
    begin = sum(sizes[:part])
    return tuple((begin, begin + sizes[part], 1) if d == axis else (None, None, 1) for d in range(len(shapes[0])))


def _concat_part_grad(op: Operation, g: Tensor) -> list[Tensor | None]:
    # Taking part k of the gradient is undone by putting g at part k, zeros elsewhere.
    pieces = [g if k == op.attrs["part"] else zeros_like(x) for k, x in enumerate(op.inputs[1:])]
    return [Concat(*pieces, axis=op.attrs["axis"])] + [None] * (len(op.inputs) - 1)


def _concat_part_shape(shapes: Sequence[tuple], attrs: Mapping[str, Any]) -> tuple:
    return tuple(shapes[1 + attrs["part"]])


def _concat_part_lower(sb: Any, args: Sequence[Any], attrs: Mapping[str, Any]) -> Any:
    shapes = [args[0].shape] + list(sb.input_shapes[1:])
    return lower_strided_slice(sb, args[:1], {"spec": _part_spec(shapes, attrs)})


def _concat_part_reference(values: Sequence[np.ndarray], attrs: Mapping[str, Any]) -> np.ndarray:
    spec = _part_spec([np.shape(v) for v in values], attrs)
    return np.array(np.asarray(values[0])[tuple(slice(*s) for s in spec)])


ConcatGradPart = OpDef(
    "ConcatGradPart", "elementwise", _concat_part_shape, first_dtype, reference=_concat_part_reference,
    grad_rule=lambda op, g: _concat_part_grad(op, g),
    lower_scalar=_concat_part_lower, dim_map=no_broadcast_dims, indexed_inputs=(0,),
    shape_only_inputs=tuple(range(1, 65)))


def concat(values: Sequence[Any], axis: int, name: str | None = None) -> Tensor:
    """Join tensors along ``axis`` (TF1 argument order).

    >>> import compiler as cc
    >>> cc.concat([cc.constant(np.ones((2, 3))), cc.constant(np.zeros((2, 1)))], axis=1).shape
    (2, 4)
    """
    values = [values] if isinstance(values, Tensor) else list(values)   # TF1 takes a lone tensor
    if not values:
        raise ValueError(located("concat needs at least one tensor"))
    if len(values) == 1:
        return identity(values[0], name=name)
    if len(values) > _CONCAT_INPUTS:   # one op takes 64 tensors: join groups of them, then the groups
        groups = [values[i:i + _CONCAT_INPUTS] for i in range(0, len(values), _CONCAT_INPUTS)]
        values = [Concat(*group, axis=int(axis)) if len(group) > 1 else group[0] for group in groups]
        return concat(values, axis, name=name)
    return Concat(*values, axis=int(axis), name=name)


_CONCAT_INPUTS = 64


def split(value: Tensor, num_or_size_splits: int | Sequence[int], axis: int = 0, num: int | None = None,
          name: str | None = None) -> list[Tensor]:
    """Cut ``value`` along ``axis`` into ``num_or_size_splits`` equal parts, or parts of the given
    sizes (one size may be -1: the rest). ``num`` (TF1's, for sizes whose count it cannot infer)
    must agree with the count when given."""
    value = convert_to_tensor(value)
    try:
        axis = normalize_axis(int(axis), len(value.shape))
    except RuleError as exc:
        raise ShapeError(located(f"split of {value.name!r} {format_shape(value.shape)}: {exc}")) from None
    size = value.shape[axis]
    if isinstance(num_or_size_splits, (int, np.integer)):
        count = int(num_or_size_splits)
        if size is None:
            raise ShapeError(located(f"split of {value.name!r} into {count} parts needs dimension {axis} known"))
        if count <= 0 or size % count:
            raise ShapeError(located(f"split: dimension {axis} of {value.name!r} (size {size}) does not divide into "
                                     f"{count} parts"))
        sizes = [size // count] * count
    else:
        sizes = [int(s) for s in num_or_size_splits]
        if sizes.count(-1) > 1:
            raise ShapeError(located(f"split: at most one size may be -1, got {sizes}"))
        if -1 in sizes:
            if size is None:
                raise ShapeError(located(f"split with a -1 size needs dimension {axis} of {value.name!r} known"))
            sizes[sizes.index(-1)] = size - (sum(sizes) + 1)
        if size is not None and sum(sizes) != size or any(s < 0 for s in sizes):
            raise ShapeError(located(f"split: sizes {sizes} do not add up to dimension {axis} of {value.name!r} "
                                     f"(size {size})"))
    if num is not None and int(num) != len(sizes):
        raise ValueError(located(f"split: num={num} but {len(sizes)} parts are asked for"))
    parts, begin = [], 0
    for k, part in enumerate(sizes):
        spec = tuple((begin, begin + part, 1) if d == axis else (None, None, 1) for d in range(len(value.shape)))
        # A dimension known only when fed: the parts must add up to it, as TF's split
        checks = {} if size is not None else {"split_total": ((axis, sum(sizes)),)}
        parts.append(StridedSlice(value, spec=spec, name=f"{name or 'split'}_{k}", **checks))
        begin += part
    return parts


def stack(values: Sequence[Any], axis: int = 0, name: str | None = None) -> Tensor:
    """Join tensors of one shape along a new dimension ``axis``."""
    values = [convert_to_tensor(v) for v in values]
    if not values:
        raise ValueError(located("stack needs at least one tensor"))
    rank = len(values[0].shape)
    try:
        axis = normalize_axis(axis, rank + 1)
    except RuleError as exc:
        raise ShapeError(located(f"stack of tensors of shape {format_shape(values[0].shape)}: {exc}")) from None
    first = values[0]
    for value in values[1:]:   # said of the tensors given, not of the concat of their expanded copies
        if len(value.shape) != rank or any(a is not None and b is not None and a != b
                                           for a, b in zip(value.shape, first.shape)):
            raise ShapeError(located(f"stack: {first.name!r} {format_shape(first.shape)} and {value.name!r} "
                                     f"{format_shape(value.shape)} must have the same shape"))
    return concat([expand_dims(v, axis) for v in values], axis, name=name)


def unstack(value: Tensor, num: int | None = None, axis: int = 0, name: str | None = None) -> list[Tensor]:
    """The slices of ``value`` along ``axis``, whose size must be known when the graph is built
    (it decides how many tensors come back), as TF1's ``unstack``: ``num``, when given, must be
    that size.

    >>> import compiler as cc
    >>> x = cc.placeholder("float32", shape=(None, 3))
    >>> [t.shape for t in cc.unstack(x, axis=1)]
    [(None,), (None,), (None,)]
    """
    value = convert_to_tensor(value)
    try:
        axis = normalize_axis(axis, len(value.shape))
    except RuleError as exc:
        raise ShapeError(located(f"unstack of {value.name!r} {format_shape(value.shape)}: {exc}")) from None
    if value.shape[axis] is None:
        raise ShapeError(located(f"unstack: axis {axis} of {value.name!r} {format_shape(value.shape)} has an "
                                 f"unknown size; it must be known to decide how many tensors to return"))
    if num is not None and num != value.shape[axis]:
        raise ShapeError(located(f"unstack: num is {num} but axis {axis} of {value.name!r} "
                                 f"{format_shape(value.shape)} has {value.shape[axis]} entries"))
    with composite_scope(name or "unstack", [value]):
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


TileGrad = OpDef("TileGrad", "reduce", same_shape_as_second, first_dtype,
                 reference=_tile_grad_reference,
                 grad_rule=lambda op, g: [Tile(g, multiples=op.attrs["multiples"]), None],
                 loop_nest=_tile_grad_nest, indexed_inputs=(0,), shape_only_inputs=(1,))

def _tile_copies(shapes: Sequence[tuple], out: tuple, attrs: Mapping[str, Any]) -> list[CopyPart] | None:
    # One kernel over (multiple, position) pairs of each dimension: every access affine, the input
    # strided 0 along the multiples (index remainders per element gathered it).
    if 0 in out or not out:
        return None
    space: list[int] = []
    strides: list[int] = []
    for multiple, size, stride in zip(attrs["multiples"], shapes[0], contiguous_strides(out)):
        space += [multiple, size]
        strides += [size * stride, stride]
    return [CopyPart(tuple(space), tuple(strides), 0, 0, tuple(range(1, len(space), 2)))]


Tile = OpDef("Tile", "elementwise", _tile_shape, first_dtype,
             reference=lambda values, attrs: np.tile(np.asarray(values[0]), attrs["multiples"]),
             grad_rule=lambda op, g: [TileGrad(g, op.inputs[0], multiples=op.attrs["multiples"])],
             lower_scalar=_tile_lower, dim_map=no_broadcast_dims, indexed_inputs=(0,), copies=_tile_copies)


def tile(x: Any, multiples: Sequence[int], name: str | None = None) -> Tensor:
    """Repeat ``x`` ``multiples[d]`` times along each dimension ``d`` (as ``np.tile``). A multiple
    may be a size read from a shape, ``shape(t)[i]``, where ``x``'s dimension is 1 (TF1's
    ``tile(row, [shape(batch)[0], 1])``): that dimension takes the size the step is compiled for."""
    if isinstance(multiples, Tensor) or not any(isinstance(m, Tensor) for m in multiples):
        return Tile(x, multiples=tuple(int(m) for m in known_ints(multiples, "tile", "multiples")), name=name)
    x = convert_to_tensor(x)
    static, sizes = [], []
    for d, m in enumerate(multiples):
        value, read_from = size_from_tensor(m, "tile") if isinstance(m, Tensor) else (m, None)
        if value is not None:
            static.append(int(value))
            sizes.append(None)
            continue
        if read_from is None:
            known_int(m, "tile", "multiples")   # the error for a value that is not a size read from a shape
        if d >= len(x.shape) or x.shape[d] != 1 or x.dtype == dtypes.bool_:
            raise ShapeError(located(f"tile: the multiple {m.name!r} (a size known when the step is compiled) needs "
                                     f"dimension {d} of {x.name!r} {format_shape(x.shape)} to be 1, and numbers"))
        static.append(1)
        sizes.append(m)
    with composite_scope(name or "Tile", [x]):
        tiled = Tile(x, multiples=tuple(static))
        # broadcast along the sizes read from shapes (size 1 elsewhere)
        return add(tiled, zeros([1 if size is None else size for size in sizes], dtype=tiled.dtype))


def roll(input: Any, shift: int | Sequence[int], axis: int | Sequence[int], name: str | None = None) -> Tensor:  # noqa: A002
    """The elements shifted by ``shift`` along ``axis`` (ints, or lists of them, applied in turn),
    those pushed past the end coming back at the start (TF's ``roll``, numpy's ``roll``): two
    slices concatenated per axis.

    >>> import numpy as np, compiler as cc
    >>> from runtime import Session
    >>> with Session() as sess:
    ...     sess.run(cc.roll(cc.constant([0, 1, 2, 3, 4]), 2, 0)).tolist()
    [3, 4, 0, 1, 2]
    """
    shifts = [shift] if not isinstance(shift, (list, tuple)) else list(shift)
    axes = [axis] if not isinstance(axis, (list, tuple)) else list(axis)
    if len(shifts) != len(axes) or not all(isinstance(v, (int, np.integer)) and not isinstance(v, bool)
                                           for v in shifts + axes):
        raise TypeError(located(f"roll: shift and axis must be ints or lists of ints of one length (fixed when the "
                                f"graph is built), got {shift!r} and {axis!r}"))
    with composite_scope(name or "Roll", [input]):
        x = convert_to_tensor(input)
        for amount, along in zip(shifts, axes):
            try:
                along = normalize_axis(int(along), len(x.shape))
            except RuleError as error:
                raise ShapeError(located(f"roll: {error} for {x.name!r} of shape {format_shape(x.shape)}")) from None
            size = x.shape[along]
            if size is None:
                raise ShapeError(located(f"roll: axis {along} of {x.name!r} {format_shape(x.shape)} must be known"))
            cut = size - int(amount) % size if size else 0
            if cut in (0, size):
                continue
            before = (slice(None),) * along
            x = concat([getitem(x, before + (slice(cut, None),)),
                        getitem(x, before + (slice(0, cut),))], axis=along)
        return identity(x)


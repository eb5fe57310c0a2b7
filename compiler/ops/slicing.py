"""Slices: ``strided_slice``, ``slice``, ``reverse`` and ``x[key]`` (numpy's basic indexing).

A strided slice is elementwise over its output (so it fuses into its consumer) and reads its input
through an ``IndexedInput``: the input is materialised in a buffer and the op computes, per output
element, which element to read. Its gradient puts each element back where it was read from.
"""
from __future__ import annotations

from typing import Any, Mapping, Sequence

import numpy as np

from .. import dtypes
from ..errors import ShapeError
from ..graph import Operation, Tensor, located
from ..kernel_ir import IndexedInput
from ..shapes import RuleError, format_shape, normalize_axis
from .array import element_count, expand_dims, identity, known_int, known_ints, squeeze
from .base import OpDef, convert_to_tensor
from .rules import clamp_index, first_dtype, no_broadcast_dims


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
    # Dimensions indexed by an int (x[5]), checked once their size is known (from the feeds).
    for dim in attrs.get("indexed", ()):
        index, size = spec[dim][0], shape[dim]
        if size is not None and not -size <= index < size:
            raise RuleError(f"index {index} is out of range for dimension {dim} of size {size}")
    # Dimensions of TF's slice, whose bounds must fit (no clamping), and of a split, whose parts
    # must add up to the dimension: checked once the sizes are known.
    for dim in attrs.get("fitted", ()):
        start, stop, size = spec[dim][0], spec[dim][1], shape[dim]
        if size is not None and (start > size or (stop is not None and stop > size)):
            raise RuleError(f"elements {start} to {stop} do not fit dimension {dim} of size {size}")
    for dim, total in attrs.get("split_total", ()):
        if shape[dim] is not None and shape[dim] != total:
            raise RuleError(f"the split's sizes add up to {total}, not to dimension {dim}'s size {shape[dim]}")
    return tuple(None if n is None else len(_slice_range(s, n)) for s, n in zip(spec, shape))


def lower_strided_slice(sb: Any, args: Sequence[Any], attrs: Mapping[str, Any]) -> Any:
    """The element of ``args[0]`` (an ``IndexedInput``) that ``attrs["spec"]`` reads."""
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


StridedSlice = OpDef("StridedSlice", "elementwise", _slice_shape, first_dtype, reference=_slice_reference,
                     grad_rule=_slice_grad, lower_scalar=lower_strided_slice, dim_map=no_broadcast_dims,
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
        indices.append(clamp_index(sb, offset, len(positions)))
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
    "StridedSliceGrad", "elementwise", _slice_grad_shape, first_dtype, reference=_slice_grad_reference,
    grad_rule=lambda op, g: [StridedSlice(g, spec=op.attrs["spec"]), None],
    lower_scalar=_slice_grad_lower, dim_map=no_broadcast_dims,
    indexed_inputs=(0,), shape_only_inputs=(1,))


def strided_slice(x: Any, begin: Any, end: Any = None, strides: Any = None, begin_mask: int = 0,
                  end_mask: int = 0, ellipsis_mask: int = 0, new_axis_mask: int = 0, shrink_axis_mask: int = 0,
                  name: str | None = None) -> Tensor:
    """TF1's ``strided_slice(x, begin, end, strides, *masks)``: ``x[begin[i]:end[i]:strides[i], ...]``,
    where bit ``i`` of ``begin_mask``/``end_mask`` leaves that bound open, of ``ellipsis_mask`` makes
    entry ``i`` an ``...``, of ``new_axis_mask`` a new axis of size 1 and of ``shrink_axis_mask`` the
    single index ``begin[i]`` (the axis dropped). Also ``strided_slice(x, spec)`` with one Python
    slice (or ``(start, stop, step)``) per dimension.

    >>> import compiler as cc
    >>> x = cc.constant(np.arange(24.0).reshape(2, 3, 4))
    >>> cc.strided_slice(x, [0, 1], [2, 3], [1, 2], end_mask=1).shape
    (2, 1, 4)
    >>> cc.strided_slice(cc.constant(np.arange(10.0)), [slice(1, None, 3)]).shape
    (3,)
    """
    if end is None and strides is None and not any((begin_mask, end_mask, ellipsis_mask, new_axis_mask,
                                                    shrink_axis_mask)):
        spec = begin
        if all(isinstance(s, (slice, tuple, list)) for s in spec):
            triples = tuple((s.start, s.stop, s.step if s.step is not None else 1) if isinstance(s, slice)
                            else (s[0], s[1], s[2] if len(s) > 2 and s[2] is not None else 1) for s in spec)
            triples = tuple(tuple(None if v is None else int(v) for v in t) for t in triples)
            return StridedSlice(x, spec=triples, name=name)
        raise TypeError(located("strided_slice: give begin and end (TF1's form) or one slice per dimension"))
    bounds = []
    for what, values in (("begin", begin), ("end", end), ("strides", strides)):
        if isinstance(values, Tensor) or (values is not None and any(isinstance(v, Tensor) for v in values)):
            raise TypeError(located(f"strided_slice: {what} must be Python ints (slices are fixed when the step is "
                                    f"compiled)"))
        bounds.append(None if values is None else [int(v) for v in values])
    begin, end, strides = bounds
    end = end if end is not None else [0] * len(begin)
    strides = strides if strides is not None else [1] * len(begin)
    if not len(begin) == len(end) == len(strides):
        raise ValueError(located(f"strided_slice: begin, end and strides have {len(begin)}, {len(end)} and "
                                 f"{len(strides)} entries; they must have one each per index"))
    index: list[Any] = []
    for i, (start, stop, step) in enumerate(zip(begin, end, strides)):
        bit = 1 << i
        if ellipsis_mask & bit:
            index.append(Ellipsis)
        elif new_axis_mask & bit:
            index.append(None)
        elif shrink_axis_mask & bit:
            index.append(start)
        else:
            if step == 0:
                raise ValueError(located(f"strided_slice: strides[{i}] is 0"))
            index.append(slice(None if begin_mask & bit else start, None if end_mask & bit else stop, step))
    result = getitem(convert_to_tensor(x), tuple(index))
    return identity(result, name=name) if name else result


def reverse(x: Any, axis: int | Sequence[int], name: str | None = None) -> Tensor:
    """The elements of ``x`` in reverse order along each dimension in ``axis`` (TF1's ``tf.reverse``).

    >>> import compiler as cc
    >>> cc.reverse(cc.constant(np.arange(6.0).reshape(2, 3)), axis=[1]).shape
    (2, 3)
    """
    x = convert_to_tensor(x)
    try:
        listed = [normalize_axis(a, len(x.shape)) for a in ([axis] if isinstance(axis, (int, np.integer)) else axis)]
    except RuleError as exc:
        raise ShapeError(located(f"reverse of {x.name!r} {format_shape(x.shape)}: {exc}")) from None
    axes = set(listed)
    if len(axes) != len(listed):   # TF1 refuses it (reversing twice would be no reversal)
        raise ShapeError(located(f"reverse of {x.name!r} {format_shape(x.shape)}: axis {list(axis)} names an "
                                 "axis more than once"))
    if not axes:
        return identity(x, name=name)
    spec = tuple((None, None, -1) if d in axes else (None, None, 1) for d in range(len(x.shape)))
    return StridedSlice(x, spec=spec, name=name)


def _getitem_with_tensors(x: Tensor, key: tuple) -> Tensor:
    """``x[key]`` (``key`` one entry per dimension, plus None) where some entries are scalar integer
    tensors: each is a gather along its dimension (the last first, so the others keep their
    place), then the rest of the key indexes what is left."""
    from .elementwise import add, less, where
    from .gather import gather
    positions = []
    dim = 0
    for k in key:
        if k is None:
            continue
        if isinstance(k, Tensor):
            if k.shape != () or not dtypes.is_integer(k.dtype):
                raise TypeError(located(f"{x.name!r}[…]: a tensor index must be a scalar int32 or int64, got "
                                        f"{k.dtype.name} {format_shape(k.shape)} {k.name!r} (use cc.gather for "
                                        f"tensors of indices)"))
            positions.append((dim, k))
        dim += 1
    result = x
    for dim, index in reversed(positions):
        size = element_count(result, dim, index.dtype)
        result = gather(result, where(less(index, 0), add(index, size), index), axis=dim)
    rest = tuple(k for k in key if not isinstance(k, Tensor))
    return getitem(result, rest) if rest else result


def slice_(x: Any, begin: Sequence[int], size: Sequence[int], name: str | None = None) -> Tensor:
    """TF1's ``tf.slice``: ``size[d]`` elements from ``begin[d]`` along each dimension (-1: to the end)."""
    x = convert_to_tensor(x)
    begin = [int(b) for b in known_ints(begin, "slice", "begin")]
    size = [int(n) for n in known_ints(size, "slice", "size")]
    if len(begin) != len(x.shape) or len(size) != len(x.shape):
        raise ShapeError(located(f"slice: begin has {len(begin)} entries and size {len(size)} for {x.name!r} of "
                                 f"rank {len(x.shape)}"))
    for d, (b, n, extent) in enumerate(zip(begin, size, x.shape)):
        # As TF: no Python-style wrapping or clamping, which would give another shape silently.
        end = (extent if n == -1 else b + n) if extent is not None else None
        if b < 0 or n < -1 or (end is not None and not b <= end <= extent):
            raise ShapeError(located(f"slice of {x.name!r} {format_shape(x.shape)}: begin {b} and size {n} do not fit "
                                     f"dimension {d}; begin must be at least 0 and size at least 0 (or -1: to the "
                                     f"end), with begin + size at most the dimension"))
    spec = [(b, None if n == -1 else b + n, 1) for b, n in zip(begin, size)]
    unknown = tuple(d for d, extent in enumerate(x.shape) if extent is None)
    return StridedSlice(x, spec=tuple(spec), name=name or "Slice", **({"fitted": unknown} if unknown else {}))


def getitem(x: Tensor, key: Any) -> Tensor:
    """``x[key]`` with ints, slices (steps and negative indices), ``...`` and ``None``, as numpy's
    basic indexing, and scalar integer tensors (TF1's ``x[t]`` in a loop body: a ``gather`` of
    that position, negative counting from the end, out of range giving zeros as ``gather``). An
    int index out of range is a ``ShapeError`` when the dimension is known."""
    if not isinstance(key, tuple):
        key = (key,)
    if sum(1 for k in key if k is Ellipsis) > 1:
        raise ShapeError(located(f"{x.name!r}[…]: an index can only have one ellipsis"))
    consuming = sum(1 for k in key if k is not None and k is not Ellipsis)
    rank = len(x.shape)
    if consuming > rank:
        raise ShapeError(located(f"{x.name!r}: too many indices ({consuming}) for shape {format_shape(x.shape)}"))
    at = next((position for position, k in enumerate(key) if k is Ellipsis), None)   # not ==: arrays compare
    if at is not None:
        key = key[:at] + (slice(None),) * (rank - consuming) + key[at + 1:]
    else:
        key = key + (slice(None),) * (rank - consuming)
    if any(isinstance(k, Tensor) for k in key):
        return _getitem_with_tensors(x, key)
    spec, drop, insert = [], [], []
    dim = 0
    kept = 0  # dimensions of the result so far: a new axis goes where it stands in the result
    for k in key:
        if k is None:
            insert.append(kept)
            kept += 1
            continue
        if isinstance(k, slice):
            if any(isinstance(bound, Tensor) for bound in (k.start, k.stop, k.step)):   # known now, or an error
                k = slice(*(known_int(bound, f"{x.name!r}[…]", "the slice bound") for bound in (k.start, k.stop, k.step)))
            for bound in (k.start, k.stop, k.step):
                if isinstance(bound, (bool, float, np.bool_, np.floating)):   # (a tensor is refused below)
                    raise TypeError(located(f"{x.name!r}[…]: slice bounds and steps must be ints or None, got "
                                            f"{bound!r}"))
            spec.append((k.start, k.stop, 1 if k.step is None else k.step))
            kept += 1
        elif isinstance(k, (int, np.integer)) and not isinstance(k, bool):
            k = int(k)
            size = x.shape[dim]
            if size is not None and not -size <= k < size:
                raise ShapeError(located(f"index {k} is out of range for dimension {dim} of {x.name!r} with shape "
                                         f"{format_shape(x.shape)}"))
            spec.append((k, k + 1 if k != -1 else None, 1))
            drop.append(dim)
        else:
            raise TypeError(located(f"{x.name!r}[…]: only ints, slices, ... and None are supported, got {k!r} "
                                    f"(use cc.gather for tensor indices)"))
        dim += 1
    result = x
    if any(s != (None, None, 1) for s in spec):
        result = StridedSlice(x, spec=tuple(tuple(None if v is None else int(v) for v in s) for s in spec),
                              **({"indexed": tuple(drop)} if drop else {}))
    if drop:
        result = squeeze(result, drop)
    for position in insert:
        result = expand_dims(result, position)
    return result

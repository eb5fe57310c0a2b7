"""Ops that move or relabel elements: transpose, expand/squeeze, reshape, one_hot, fill (broadcasts
are in ``broadcast.py``).

All but reshape are elementwise with a ``dim_map`` (which output dimension each input dimension
walks), so they fuse into neighbouring kernels as strided loads. Reshape is a ``layout`` op: a new
view of a contiguous buffer.
"""
from __future__ import annotations

import math
from typing import Any, Mapping, Sequence

import numpy as np

from .. import dtypes
from ..errors import DTypeError
from ..graph import Operation, Tensor, located
from ..shapes import RuleError, format_shape, normalize_axes, normalize_axis
from .base import OpDef, composite_scope, constant, convert_to_tensor, fit_literal, renamed_argument
from .broadcast import BroadcastTo
from .rules import dtype_from_attrs, first_dtype, pass_through, same_shape_as_first


# -- identity and stop_gradient ------------------------------------------------------------

Identity = OpDef("Identity", "elementwise", same_shape_as_first, first_dtype,
                 reference=lambda values, attrs: np.array(values[0]),
                 grad_rule=lambda op, g: [g], lower_scalar=pass_through)
StopGradient = OpDef("StopGradient", "elementwise", same_shape_as_first, first_dtype,
                     reference=lambda values, attrs: np.array(values[0]),
                     grad_rule=lambda op, g: [None], lower_scalar=pass_through)


def identity(x: Any, name: str | None = None) -> Tensor:
    return Identity(x, name=name)


def stop_gradient(x: Any, name: str | None = None) -> Tensor:
    """The same value, through which ``gradients`` does not propagate."""
    return StopGradient(x, name=name)


# -- transpose -----------------------------------------------------------------------------

def _perm(rank: int, attrs: Mapping[str, Any]) -> tuple[int, ...]:
    perm = attrs.get("perm")
    if perm is None:
        return tuple(reversed(range(rank)))
    perm = tuple(normalize_axis(p, rank) for p in perm)
    if sorted(perm) != list(range(rank)):
        raise RuleError(f"perm {tuple(attrs['perm'])} is not a permutation of {rank} axes")
    return perm


Transpose = OpDef(
    "Transpose", "elementwise",
    lambda shapes, attrs: tuple(shapes[0][p] for p in _perm(len(shapes[0]), attrs)), first_dtype,
    reference=lambda values, attrs: np.transpose(values[0], _perm(np.ndim(values[0]), attrs)).copy(),
    grad_rule=lambda op, g: [transpose(g, list(np.argsort(_perm(len(op.inputs[0].shape), op.attrs))))],
    lower_scalar=pass_through,
    dim_map=lambda shapes, out, attrs: [tuple(int(k) for k in np.argsort(_perm(len(shapes[0]), attrs)))])


def transpose(x: Any, perm: Sequence[int] | None = None, name: str | None = None, conjugate: bool = False) -> Tensor:
    """Permute axes (reverse them when ``perm`` is None), as ``np.transpose``; ``conjugate`` (TF1's)
    changes nothing for real dtypes."""
    return Transpose(x, perm=None if perm is None else tuple(int(p) for p in perm), name=name)


# -- expand_dims / squeeze -----------------------------------------------------------------

def _expand_axis(rank: int, attrs: Mapping[str, Any]) -> int:
    return normalize_axis(attrs["axis"], rank + 1)


def _expand_shape(shapes: Sequence[tuple], attrs: Mapping[str, Any]) -> tuple:
    shape = list(shapes[0])
    shape.insert(_expand_axis(len(shape), attrs), 1)
    return tuple(shape)


def _expand_dim_map(shapes: Sequence[tuple], out: tuple, attrs: Mapping[str, Any]) -> list[tuple]:
    axis = _expand_axis(len(shapes[0]), attrs)
    return [tuple(d if d < axis else d + 1 for d in range(len(shapes[0])))]


ExpandDims = OpDef("ExpandDims", "elementwise", _expand_shape, first_dtype,
                   reference=lambda values, attrs: np.expand_dims(
                       values[0], _expand_axis(np.ndim(values[0]), attrs)),
                   grad_rule=lambda op, g: [squeeze(g, [_expand_axis(len(op.inputs[0].shape), op.attrs)])],
                   lower_scalar=pass_through, dim_map=_expand_dim_map)


def _squeeze_axes(shape: tuple, attrs: Mapping[str, Any]) -> tuple[int, ...]:
    if attrs.get("axis") is None:
        if None in shape:
            raise RuleError(f"squeeze of {format_shape(shape)} with unknown dims needs an explicit axis")
        return tuple(i for i, d in enumerate(shape) if d == 1)
    axes = normalize_axes(attrs["axis"], len(shape))
    for a in axes:
        if shape[a] is not None and shape[a] != 1:
            raise RuleError(f"cannot squeeze axis {a} of size {shape[a]} in {format_shape(shape)}")
    return axes


def _squeeze_dim_map(shapes: Sequence[tuple], out: tuple, attrs: Mapping[str, Any]) -> list[tuple]:
    axes = _squeeze_axes(shapes[0], attrs)
    mapping, k = [], 0
    for d in range(len(shapes[0])):
        if d in axes:
            mapping.append(None)
        else:
            mapping.append(k)
            k += 1
    return [tuple(mapping)]


def _squeeze_grad(op: Operation, g: Tensor) -> list[Tensor]:
    for axis in _squeeze_axes(op.inputs[0].shape, op.attrs):
        g = expand_dims(g, axis)
    return [g]


Squeeze = OpDef("Squeeze", "elementwise",
                lambda shapes, attrs: tuple(d for i, d in enumerate(shapes[0])
                                            if i not in _squeeze_axes(shapes[0], attrs)),
                first_dtype,
                reference=lambda values, attrs: np.reshape(values[0], tuple(
                    d for i, d in enumerate(np.shape(values[0]))
                    if i not in _squeeze_axes(np.shape(values[0]), attrs))),
                grad_rule=_squeeze_grad, lower_scalar=pass_through, dim_map=_squeeze_dim_map)


def expand_dims(x: Any, axis: int | None = None, name: str | None = None, dim: int | None = None) -> Tensor:
    """Insert a dimension of size 1 at ``axis`` (negative counts from the end of the result;
    TF1's older name: ``dim``)."""
    axis = renamed_argument("expand_dims", "axis", axis, "dim", dim)
    if axis is None:
        raise ValueError(located("expand_dims: axis is required"))
    return ExpandDims(x, axis=int(axis), name=name)


def squeeze(x: Any, axis: int | Sequence[int] | None = None, name: str | None = None,
            squeeze_dims: int | Sequence[int] | None = None) -> Tensor:
    """Remove dimensions of size 1 (all of them when ``axis`` is None; TF1's older name:
    ``squeeze_dims``)."""
    axis = renamed_argument("squeeze", "axis", axis, "squeeze_dims", squeeze_dims)
    if isinstance(axis, np.integer):
        axis = int(axis)
    if axis is not None and not isinstance(axis, int):
        axis = tuple(int(a) for a in axis)
    return Squeeze(x, axis=axis, name=name)


# -- reshape ---------------------------------------------------------------------------------

def _reshape_shape(shapes: Sequence[tuple], attrs: Mapping[str, Any]) -> tuple:
    source = shapes[0]
    target = list(attrs["shape"])
    if sum(1 for d in target if d == -1) > 1:
        raise RuleError(f"shape {tuple(target)} has more than one -1")
    if any(d is not None and d < -1 for d in target):
        raise RuleError(f"shape {tuple(target)} has a negative dimension")
    known_target = math.prod(d for d in target if d not in (-1, None))
    if None in source or None in target:
        return tuple(None if d == -1 else d for d in target)
    size = math.prod(source)
    if -1 in target:
        if known_target == 0 or size % known_target:
            raise RuleError(f"cannot reshape {format_shape(source)} ({size} elements) to {tuple(target)}")
        target[target.index(-1)] = size // known_target
    elif known_target != size:
        raise RuleError(f"cannot reshape {format_shape(source)} ({size} elements) to "
                        f"{tuple(target)} ({known_target} elements)")
    return tuple(target)


Reshape = OpDef("Reshape", "layout", _reshape_shape, first_dtype,
                reference=lambda values, attrs: np.reshape(values[0], _reshape_shape(
                    [np.shape(values[0])], attrs)).copy(),
                grad_rule=lambda op, g: [reshape_like(g, op.inputs[0])])

ReshapeLike = OpDef("ReshapeLike", "layout",
                    lambda shapes, attrs: _reshape_shape(shapes[:1], {"shape": shapes[1]}), first_dtype,
                    reference=lambda values, attrs: np.reshape(values[0], np.shape(values[1])).copy(),
                    grad_rule=lambda op, g: [reshape_like(g, op.inputs[0]), None],
                    shape_only_inputs=(1,))


def _reshape_to_shape(shapes: Sequence[tuple], attrs: Mapping[str, Any]) -> tuple:
    """``Reshape``'s rule, with the entries ``attrs["dims"]`` names, ``(position, input, axis)``,
    taken from the shapes of the other (shape-only) inputs: known once the step is compiled."""
    target = list(attrs["shape"])
    for position, source, axis in attrs["dims"]:
        target[position] = shapes[source][axis]
    return _reshape_shape(shapes[:1], {"shape": tuple(target)})


_MAX_SHAPE_SOURCES = 8
ReshapeTo = OpDef("ReshapeTo", "layout", _reshape_to_shape, first_dtype,
                  reference=lambda values, attrs: np.reshape(values[0], _reshape_to_shape(
                      [np.shape(v) for v in values], attrs)).copy(),
                  grad_rule=lambda op, g: [reshape_like(g, op.inputs[0])] + [None] * (len(op.inputs) - 1),
                  shape_only_inputs=tuple(range(1, _MAX_SHAPE_SOURCES + 1)))


def size_of_axis(d: Tensor) -> tuple[Tensor, int] | None:
    """``(t, axis)`` when ``d`` is ``shape(t)[axis]`` (possibly cast), else None."""
    op = d.op
    while op.type in ("Cast", "Identity") and op.inputs:
        op = op.inputs[0].op
    if op.type != "Squeeze" or op.inputs[0].op.type != "StridedSlice":
        return None
    sliced = op.inputs[0].op
    (start, stop, step), = sliced.attrs["spec"] if len(sliced.attrs["spec"]) == 1 else ((None, None, None),)
    shape_op = sliced.inputs[0].op
    last = start == -1 and stop is None                   # shape(t)[-1]
    if shape_op.type != "Shape" or step != 1 or start is None or (not last and (stop is None or stop - start != 1)):
        return None
    source = shape_op.inputs[0]
    axis = start % len(source.shape) if source.shape else None
    return None if axis is None else (source, axis)


def size_from_tensor(size: Tensor, function: str) -> tuple[Any, tuple[Tensor, int] | None]:
    """A size given as a scalar integer tensor: (its value when known now, else None; and
    ``(t, axis)`` when it is ``shape(t)[axis]`` and not known now, else None)."""
    if size.shape != () or not dtypes.is_integer(size.dtype):
        raise TypeError(located(f"{function}: {size.name!r} {size.dtype.name} {size.shape} is not a scalar integer "
                                f"size"))
    value = static_value(size)
    return value, (size_of_axis(size) if value is None else None)


def known_int(value: Any, function: str, what: str) -> Any:
    """``value`` as it is, unless it is a tensor: then its value when the graph is built (a
    constant, or computed from shapes known now), or an error naming ``function`` and ``what``."""
    if not isinstance(value, Tensor):
        return value
    known = static_value(value) if value.shape == () and dtypes.is_integer(value.dtype) else None
    if known is None:
        raise TypeError(located(f"{function}: {what} {value.name!r} ({value.dtype.name} {format_shape(value.shape)}) "
                                f"has a value only when a step runs, and it is fixed when the graph is built here: "
                                f"give a Python int (or one computed from shapes known now)"))
    return int(known)


def known_ints(values: Any, function: str, what: str) -> list[Any]:
    """A list of ints given as a list (entries may be scalar tensors known now) or as a 1-D integer
    tensor known now (``cc.constant([1, 2])``, ``cc.shape(x)`` of a known shape); else an error."""
    if isinstance(values, Tensor):
        known = static_value(values) if len(values.shape) == 1 and dtypes.is_integer(values.dtype) else None
        if known is None:
            raise TypeError(located(f"{function}: {what} {values.name!r} ({values.dtype.name} "
                                    f"{format_shape(values.shape)}) has a value only when a step runs; give Python "
                                    f"ints (or a tensor computed from shapes known now)"))
        return [int(v) for v in known]
    return [known_int(v, function, what) for v in values]


def reshape(x: Any, shape: Sequence[Any], name: str | None = None) -> Tensor:
    """Same elements in a new shape; one dimension may be -1 (inferred). An entry may also be a
    scalar integer tensor computed from shapes (TF1's ``reshape(x, [shape(x)[0], -1])``): its value
    when the sizes it reads are known now, else the one inferred dimension."""
    if isinstance(shape, Tensor):   # TF1's reshape(x, shape(y)) or a constant
        known = static_value(shape) if len(shape.shape) == 1 and dtypes.is_integer(shape.dtype) else None
        if known is not None:
            shape = [int(v) for v in known]
        elif shape.op.type == "Shape" and len(shape.shape) == 1 and shape.shape[0] is not None:
            shape = [shape[i] if size is None else size for i, size in enumerate(shape.op.inputs[0].shape)]
        else:
            raise TypeError(located(f"reshape: the shape {shape.name!r} has a value only when a step runs; give a "
                                    f"list of Python ints and shape tensors (shape(t)[i]; None / -1 for one "
                                    f"inferred dimension), or shape(t) itself"))
    sizes: list[int] = []
    sources: list[Tensor] = []
    dims: list[tuple[int, int, int]] = []
    for position, d in enumerate(shape):
        if isinstance(d, Tensor):
            value, axis_of = size_from_tensor(d, "reshape")
            if axis_of is not None and len(sources) < _MAX_SHAPE_SOURCES:
                if axis_of[0] not in sources:
                    sources.append(axis_of[0])
                dims.append((position, 1 + sources.index(axis_of[0]), axis_of[1]))
                d = 0    # taken from that input's shape when the step is compiled
            else:
                d = -1 if value is None else int(value)
        elif d is not None and (isinstance(d, bool) or not isinstance(d, (int, np.integer))):
            raise TypeError(located(f"reshape: the shape must be Python ints, shape tensors or None / -1, got "
                                    f"{d!r} in {list(shape)!r}"))
        sizes.append(-1 if d is None else int(d))
    inferred_tensors = sum(1 for d, size in zip(shape, sizes) if isinstance(d, Tensor) and size == -1)
    if inferred_tensors and sizes.count(-1) > 1:   # (two -1 given as numbers: Reshape's own error)
        raise ValueError(located(f"reshape: more than one dimension to infer in {list(shape)!r} (a size computed "
                                 f"from a shape not known yet, other than shape(t)[i], counts as one)"))
    if dims:
        return ReshapeTo(x, *sources, shape=tuple(sizes), dims=tuple(dims), name=name)
    return Reshape(x, shape=tuple(sizes), name=name)


def static_value(tensor: Tensor) -> np.ndarray | None:
    """``tensor``'s value if it is known now, when the graph is built: computed from constants and
    from shapes that are known (``shape(x)`` with every size of ``x`` known); None otherwise."""
    known: dict[Tensor, np.ndarray | None] = {}

    def value(t: Tensor) -> np.ndarray | None:
        if t in known:
            return known[t]
        op = t.op
        result = None
        if op.type == "Const":
            result = op.attrs["value"]
        elif op.opdef.kind == "shape":
            if all(None not in i.shape for i in op.inputs):
                result = op.opdef.reference([np.broadcast_to(np.zeros((), i.dtype), i.shape) for i in op.inputs],
                                            op.attrs)
        elif op.opdef.kind in ("elementwise", "layout", "reduce") and op.opdef.reference is not None \
                and op.inputs and len(op.outputs) == 1:
            inputs = [value(i) for i in op.inputs]
            if all(v is not None for v in inputs):
                with np.errstate(all="ignore"):
                    result = np.asarray(op.opdef.reference(inputs, op.attrs), dtype=t.dtype)
        known[t] = result
        return result
    return value(tensor)


def reshape_like(x: Any, like: Tensor, name: str | None = None) -> Tensor:
    """Reshape to the compile-time shape of ``like`` (used by gradients of reshape)."""
    if isinstance(x, Tensor) and x.shape == like.shape and None not in like.shape:
        return x
    return ReshapeLike(x, like, name=name)


# -- one_hot and fills -----------------------------------------------------------------------

def _one_hot_lower(sb: Any, args: Sequence[Any], attrs: Mapping[str, Any]) -> Any:
    (indices,) = args
    dtype = attrs["dtype"]
    position = sb.index(attrs["_rank"])
    hit = sb.eq(sb.cast(indices, dtypes.int64), position)
    return sb.select(hit, sb.literal(attrs["on_value"], dtype), sb.literal(attrs["off_value"], dtype))


def _one_hot_reference(values: Sequence[np.ndarray], attrs: Mapping[str, Any]) -> np.ndarray:
    indices = np.asarray(values[0])
    hits = indices[..., None] == np.arange(attrs["depth"])
    return np.where(hits, attrs["on_value"], attrs["off_value"]).astype(attrs["dtype"])


def _one_hot_dtype(types: Sequence[np.dtype], attrs: Mapping[str, Any]) -> np.dtype:
    if not dtypes.is_integer(types[0]):
        raise RuleError(f"indices must be int32 or int64, got {types[0].name}", "dtype")
    return attrs["dtype"]


OneHot = OpDef("OneHot", "elementwise", lambda shapes, attrs: tuple(shapes[0]) + (attrs["depth"],),
               _one_hot_dtype, reference=_one_hot_reference, grad_rule=lambda op, g: [None],
               lower_scalar=_one_hot_lower,
               dim_map=lambda shapes, out, attrs: [tuple(range(len(shapes[0])))])


def _one_hot_value_dtype(value: Any) -> np.dtype | None:
    """The dtype TF1 gives an ``on_value``/``off_value`` (None when it is not given)."""
    if value is None:
        return None
    if isinstance(value, Tensor):
        return value.dtype
    if isinstance(value, (bool, np.bool_)):
        return dtypes.bool_
    if isinstance(value, (np.generic, np.ndarray)):
        return dtypes.as_dtype(value.dtype)
    if isinstance(value, int):
        return dtypes.int32 if -2**31 <= value < 2**31 else dtypes.int64
    return dtypes.float32


def one_hot(indices: Any, depth: int, on_value: Any = None, off_value: Any = None, axis: int | None = None,
            dtype: Any = None, name: str | None = None) -> Tensor:
    """``on_value`` where the new axis's position equals the index and ``off_value`` elsewhere
    (defaults 1 and 0), as TF1's ``one_hot``: the new axis of size ``depth`` goes last, or at
    ``axis``; an index outside ``[0, depth)`` gives a row of ``off_value``. The dtype is ``dtype``,
    else that of ``on_value``/``off_value`` (a tensor's; a Python int is int32, a float float32, a
    bool bool), else float32.

    >>> import compiler as cc
    >>> from runtime import Session
    >>> with Session() as sess:
    ...     sess.run(cc.one_hot([2, 0], 3, on_value=5, off_value=-1)).tolist()
    [[-1, -1, 5], [5, -1, -1]]
    """
    rank = len(indices.shape) if isinstance(indices, Tensor) else np.ndim(indices)
    values = [value for value in (on_value, off_value) if value is not None]
    # A tensor's or numpy value's dtype rules; a Python number takes it, as elsewhere.
    given = {_one_hot_value_dtype(value) for value in values if isinstance(value, (Tensor, np.generic, np.ndarray))}
    given = given or {_one_hot_value_dtype(value) for value in values}
    if dtype is None:
        if len(given) > 1:
            raise DTypeError(located(f"one_hot: on_value and off_value must have one dtype, got "
                                     f"{' and '.join(sorted(d.name for d in given))}"))
        dtype = given.pop() if given else dtypes.float32
    dtype = dtypes.as_dtype(dtype)
    depth = known_int(depth, "one_hot", "depth")
    if int(depth) < 0:
        raise ValueError(located(f"one_hot: depth must be at least 0, got {depth}"))
    if axis is not None and not (axis == -1 or 0 <= axis <= rank):
        raise ValueError(located(f"one_hot: axis must be -1 or in [0, {rank}] for indices of rank {rank}, "
                                 f"got {axis}"))
    on_value = 1 if on_value is None else on_value
    off_value = 0 if off_value is None else off_value
    if isinstance(on_value, Tensor) or isinstance(off_value, Tensor):
        from .elementwise import where   # a value computed in the step: select between the two
        for value in (on_value, off_value):
            if isinstance(value, Tensor) and (value.dtype != dtype or value.shape != ()):
                raise DTypeError(located(f"one_hot: on_value and off_value must be {dtype.name} scalars, got "
                                         f"{value.dtype.name} {format_shape(value.shape)} {value.name!r}"))
        hits = OneHot(indices, depth=int(depth), on_value=True, off_value=False, dtype=dtypes.bool_, _rank=rank,
                      name=name)
        with composite_scope("OneHot", [hits]):
            result = where(hits, on_value, off_value)
    else:
        on_value, off_value = (fit_literal(value, dtype, "OneHot").item() for value in (on_value, off_value))
        result = OneHot(indices, depth=int(depth), on_value=on_value, off_value=off_value, dtype=dtype,
                        _rank=rank, name=name)
    if axis is None or axis == -1 or axis == rank:
        return result
    return transpose(result, list(range(axis)) + [rank] + list(range(axis, rank)))


Fill = OpDef("Fill", "elementwise", same_shape_as_first, dtype_from_attrs,
             reference=lambda values, attrs: np.full(np.shape(values[0]), attrs["value"], attrs["dtype"]),
             grad_rule=lambda op, g: [None],
             lower_scalar=lambda sb, args, attrs: sb.literal(attrs["value"], attrs["dtype"]),
             dim_map=lambda shapes, out, attrs: [(None,) * len(shapes[0])],
             shape_only_inputs=(0,))


def _filled_like(x: Tensor, value: int, dtype: Any, name: str | None) -> Tensor:
    """``value`` in ``x``'s shape. As TF1, a shape known now makes it without reading ``x`` at all
    (so a placeholder need not be fed for it); else its size is ``x``'s when the step runs."""
    dtype = dtypes.as_dtype(dtype or x.dtype)
    if None not in x.shape:
        return BroadcastTo(constant(np.array(value, dtype), dtype), shape=tuple(x.shape), name=name)
    return Fill(x, value=value, dtype=dtype, name=name)


def zeros_like(x: Tensor, dtype: Any = None, name: str | None = None) -> Tensor:
    return _filled_like(x, 0, dtype, name)


def ones_like(x: Tensor, dtype: Any = None, name: str | None = None) -> Tensor:
    return _filled_like(x, 1, dtype, name)


def _count_reference(values: Sequence[np.ndarray], attrs: Mapping[str, Any]) -> np.ndarray:
    shape = np.shape(values[0])
    axes = normalize_axes(attrs["axis"], len(shape))
    return np.array(math.prod(shape[a] for a in axes), dtype=attrs["dtype"])


def _count_shape(shapes: Sequence[tuple], attrs: Mapping[str, Any]) -> tuple:
    normalize_axes(attrs["axis"], len(shapes[0]))  # checks the axes
    return ()


ElementCount = OpDef("ElementCount", "shape", _count_shape, dtype_from_attrs, reference=_count_reference,
                     grad_rule=lambda op, g: [None], shape_only_inputs=(0,))


def element_count(x: Tensor, axis: int | Sequence[int] | None = None, dtype: Any = None,
                  name: str | None = None) -> Tensor:
    """The number of elements of ``x`` along ``axis`` (all axes when None), known at compile time."""
    return ElementCount(x, axis=axis, dtype=dtypes.as_dtype(dtype or x.dtype), name=name)


def _shape_of_reference(values: Sequence[np.ndarray], attrs: Mapping[str, Any]) -> np.ndarray:
    return np.array(np.shape(values[0]), dtype=attrs["dtype"])


ShapeOf = OpDef("Shape", "shape", lambda shapes, attrs: (len(shapes[0]),), dtype_from_attrs,
                reference=_shape_of_reference, grad_rule=lambda op, g: [None], shape_only_inputs=(0,))


def _index_dtype(function: str, out_type: Any) -> np.dtype:
    dtype = dtypes.as_dtype(out_type)
    if dtype not in (dtypes.int32, dtypes.int64):
        raise TypeError(located(f"{function}: out_type must be int32 or int64, got {dtype.name}"))
    return dtype


def shape(input: Any, name: str | None = None, out_type: Any = dtypes.int32) -> Tensor:  # noqa: A002
    """The shape of ``input`` as a 1-D integer tensor (TF1's ``tf.shape``), known when the step is
    compiled (so ``shape(x)[0]`` is the fed batch size). ``x.shape`` gives it at build time, with
    None where it is not known yet.

    >>> import compiler as cc
    >>> cc.shape(cc.placeholder("float32", (None, 3))).shape
    (2,)
    """
    x = convert_to_tensor(input)
    return ShapeOf(x, dtype=_index_dtype("shape", out_type), name=name)


def size(input: Any, name: str | None = None, out_type: Any = dtypes.int32) -> Tensor:  # noqa: A002
    """The number of elements of ``input`` as an integer scalar (TF1's ``tf.size``)."""
    x = convert_to_tensor(input)
    return ElementCount(x, axis=None, dtype=_index_dtype("size", out_type), name=name)


def rank(input: Any, name: str | None = None) -> Tensor:  # noqa: A002
    """The number of dimensions of ``input`` as an int32 scalar (TF1's ``tf.rank``)."""
    x = convert_to_tensor(input)
    return constant(np.int32(len(x.shape)), dtypes.int32, name=name or "Rank")



def shape_n(input: Sequence[Any], out_type: Any = dtypes.int32, name: str | None = None) -> list[Tensor]:  # noqa: A002
    """``[shape(t) for t in input]`` (TF1's ``shape_n``)."""
    with composite_scope(name or "ShapeN", list(input)):
        return [shape(t, out_type=out_type) for t in input]


def identity_n(input: Sequence[Any], name: str | None = None) -> list[Tensor]:  # noqa: A002
    """``[identity(t) for t in input]`` (TF1's ``identity_n``)."""
    with composite_scope(name or "IdentityN", list(input)):
        return [identity(t) for t in input]


def matrix_transpose(a: Any, name: str | None = None, conjugate: bool = False) -> Tensor:
    """Each innermost matrix transposed: the last two axes swapped (TF1's ``matrix_transpose``,
    also ``linalg.transpose``); ``conjugate`` changes nothing for real dtypes.

    >>> import compiler as cc
    >>> cc.matrix_transpose(cc.placeholder("float32", (None, 2, 3))).shape
    (None, 3, 2)
    """
    x = convert_to_tensor(a)
    if len(x.shape) < 2:
        raise ValueError(located(f"matrix_transpose: needs a tensor of rank 2 or more, got {x.name!r} of shape "
                                 f"{format_shape(x.shape)}"))
    rank = len(x.shape)
    return transpose(x, tuple(range(rank - 2)) + (rank - 1, rank - 2), name=name or "matrix_transpose")


def _block_layout(function: str, x: Tensor, block_size: Any, data_format: str) -> int:
    """The block size, after checking the image is NHWC with known height, width and channels."""
    if data_format != "NHWC":
        raise ValueError(located(f"{function}: only data_format='NHWC' is supported, got {data_format!r}"))
    if isinstance(block_size, bool) or not isinstance(block_size, (int, np.integer)) or block_size < 2:
        raise ValueError(located(f"{function}: block_size must be an int of at least 2, got {block_size!r}"))
    if len(x.shape) != 4 or any(d is None for d in x.shape[1:]):
        raise ValueError(located(f"{function}: needs a 4-D NHWC tensor of known height, width and channels, got "
                                 f"{x.name!r} of shape {format_shape(x.shape)}"))
    return int(block_size)


def space_to_depth(input: Any, block_size: int, name: str | None = None, data_format: str = "NHWC") -> Tensor:  # noqa: A002
    """Each ``block_size`` x ``block_size`` block of pixels moved into the channels: ``[b, h, w, c]``
    to ``[b, h/bs, w/bs, bs*bs*c]``, the block's rows, then its columns, then the channels (TF1's
    ``space_to_depth``).

    >>> import numpy as np, compiler as cc
    >>> from runtime import Session
    >>> with Session() as sess:
    ...     sess.run(cc.space_to_depth(cc.constant(np.arange(4.0).reshape(1, 2, 2, 1)), 2)).tolist()
    [[[[0.0, 1.0, 2.0, 3.0]]]]
    """
    with composite_scope(name or "SpaceToDepth", [input]):
        x = convert_to_tensor(input)
        block = _block_layout("space_to_depth", x, block_size, data_format)
        _, height, width, channels = x.shape
        if height % block or width % block:
            raise ValueError(located(f"space_to_depth: the height and width of {x.name!r} "
                                     f"{format_shape(x.shape)} must be multiples of block_size {block}"))
        batch = -1 if x.shape[0] is None else x.shape[0]
        blocks = reshape(x, [batch, height // block, block, width // block, block, channels])
        return reshape(transpose(blocks, (0, 1, 3, 2, 4, 5)),
                       [batch, height // block, width // block, block * block * channels])


def depth_to_space(input: Any, block_size: int, name: str | None = None, data_format: str = "NHWC") -> Tensor:  # noqa: A002
    """The inverse of ``space_to_depth``: ``[b, h, w, bs*bs*c]`` to ``[b, h*bs, w*bs, c]`` (TF1's
    ``depth_to_space``)."""
    with composite_scope(name or "DepthToSpace", [input]):
        x = convert_to_tensor(input)
        block = _block_layout("depth_to_space", x, block_size, data_format)
        _, height, width, depth = x.shape
        if depth % (block * block):
            raise ValueError(located(f"depth_to_space: the channels of {x.name!r} {format_shape(x.shape)} must be "
                                     f"a multiple of block_size**2 = {block * block}"))
        channels = depth // (block * block)
        batch = -1 if x.shape[0] is None else x.shape[0]
        blocks = reshape(x, [batch, height, width, block, block, channels])
        return reshape(transpose(blocks, (0, 1, 3, 2, 4, 5)), [batch, height * block, width * block, channels])

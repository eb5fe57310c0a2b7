"""Reductions: sum, max, min, prod, argmax/argmin and cumsum are loop nests; reduce_mean and
reduce_logsumexp compose (``sum_to``, the inverse of broadcasting, is in ``broadcast.py``).

A reduction lowers to one loop nest over the input's shape with the reduced axes summed (or maxed)
into the output; the elementwise expression producing the input is fused into it.
"""
from __future__ import annotations

import collections
from typing import Any, Mapping, Sequence

import numpy as np

from .. import dtypes
from ..errors import DTypeError, NoGradientError, ShapeError
from ..graph import Operation, Tensor, located
from ..shapes import RuleError, format_shape, normalize_axes, normalize_axis
from . import elementwise as _ew
from .array import element_count, expand_dims, reshape, squeeze, stop_gradient, transpose
from .base import LoopNest, OpDef, composite_scope, convert_to_tensor, renamed_argument
from .broadcast import broadcast_like
from .padding import Pad
from .rules import numeric_dtype, same_shape_as_first, same_shape_as_second
from .slicing import StridedSlice
from .slicing import reverse as reversed_along  # cumsum has an argument named reverse


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
        t = expand_dims(t, axis)
    return t


def _sum_grad(op: Operation, g: Tensor) -> list[Tensor]:
    return [broadcast_like(_with_reduced_dims(g, op), op.inputs[0])]


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


def reduce_sum(x: Any, axis: int | Sequence[int] | None = None, keepdims: bool | None = None,
               name: str | None = None, reduction_indices: int | Sequence[int] | None = None,
               keep_dims: bool | None = None) -> Tensor:
    """Sum over ``axis`` (all axes when None).

    >>> import compiler as cc
    >>> cc.reduce_sum(cc.constant([[1.0, 2.0], [3.0, 4.0]]), axis=1).shape
    (2,)
    """
    axis, keepdims = _tf1_reduce_arguments("reduce_sum", axis, keepdims, reduction_indices, keep_dims)
    return ReduceSum(x, axis=_axis_attr(axis), keepdims=bool(keepdims), name=name)


def reduce_max(x: Any, axis: int | Sequence[int] | None = None, keepdims: bool | None = None,
               name: str | None = None, reduction_indices: int | Sequence[int] | None = None,
               keep_dims: bool | None = None) -> Tensor:
    """Max over ``axis``; NaN propagates; an empty reduction gives -inf."""
    axis, keepdims = _tf1_reduce_arguments("reduce_max", axis, keepdims, reduction_indices, keep_dims)
    return ReduceMax(x, axis=_axis_attr(axis), keepdims=bool(keepdims), name=name)


def reduce_mean(x: Any, axis: int | Sequence[int] | None = None, keepdims: bool | None = None,
                name: str | None = None, reduction_indices: int | Sequence[int] | None = None,
                keep_dims: bool | None = None) -> Tensor:
    """Mean over ``axis`` (a sum divided by the count, which is known at compile time); of int32 or
    int64 values, TF1's integer mean: the sum divided by the count, rounded toward zero."""
    axis, keepdims = _tf1_reduce_arguments("reduce_mean", axis, keepdims, reduction_indices, keep_dims)
    total = reduce_sum(x, axis, keepdims, name=name)
    if total.dtype in (dtypes.int32, dtypes.int64):
        count = element_count(x, _axis_attr(axis), total.dtype)
        return _ew.truncatediv(total, _ew.maximum(count, 1))   # no values: 0 (TF1 would divide by zero)
    if not dtypes.is_floating(total.dtype):
        raise DTypeError(located(f"reduce_mean needs a float or integer tensor, got {total.dtype.name} {x.name!r} "
                                 f"(cast it first)"))
    return _ew.divide(total, element_count(x, _axis_attr(axis), total.dtype))


def reduce_variance(input_tensor: Any, axis: int | Sequence[int] | None = None, keepdims: bool = False,
                    name: str | None = None) -> Tensor:
    """The biased variance over ``axis``, ``mean((x - mean(x))**2)`` (TF's ``reduce_variance``).

    >>> import compiler as cc
    >>> from runtime import Session
    >>> with Session() as sess:
    ...     sess.run(cc.reduce_variance(cc.constant([[1.0, 3.0], [2.0, 6.0]]), axis=1)).tolist()
    [1.0, 4.0]
    """
    with composite_scope(name or "reduce_variance", [input_tensor]):
        x = convert_to_tensor(input_tensor)
        centred = x - reduce_mean(x, axis, keepdims=True)
        return reduce_mean(_ew.square(centred), axis, keepdims=keepdims)


def reduce_std(input_tensor: Any, axis: int | Sequence[int] | None = None, keepdims: bool = False,
               name: str | None = None) -> Tensor:
    """The square root of ``reduce_variance`` (TF's ``reduce_std``)."""
    with composite_scope(name or "reduce_std", [input_tensor]):
        return _ew.sqrt(reduce_variance(input_tensor, axis, keepdims))


def reduce_euclidean_norm(input_tensor: Any, axis: int | Sequence[int] | None = None, keepdims: bool = False,
                          name: str | None = None) -> Tensor:
    """``sqrt(sum(x**2))`` over ``axis`` (TF's ``reduce_euclidean_norm``); ``norm``'s default."""
    with composite_scope(name or "reduce_euclidean_norm", [input_tensor]):
        x = convert_to_tensor(input_tensor)
        if not dtypes.is_floating(x.dtype):
            raise DTypeError(located(f"reduce_euclidean_norm: needs a float tensor, got {x.dtype.name} {x.name!r} "
                                     "(cast it first)"))
        return _ew.sqrt(reduce_sum(_ew.square(x), axis, keepdims))


def reduce_logsumexp(x: Any, axis: int | Sequence[int] | None = None, keepdims: bool | None = None,
                     name: str | None = None, reduction_indices: int | Sequence[int] | None = None,
                     keep_dims: bool | None = None) -> Tensor:
    """``log(sum(exp(x)))`` computed stably by shifting by the max (which gets no gradient)."""
    axis, keepdims = _tf1_reduce_arguments("reduce_logsumexp", axis, keepdims, reduction_indices, keep_dims)
    axis = _axis_attr(axis)
    with composite_scope(name or "ReduceLogSumExp", [x]):
        peak = stop_gradient(reduce_max(x, axis, keepdims=True))
        # An infinite max would make x - max NaN; shift by 0 there instead (as TF does).
        peak = _ew.where(_ew.equal(_ew.abs(peak), float("inf")), 0.0, peak)
        total = reduce_sum(_ew.exp(x - peak), axis, keepdims=True)
        result = _ew.log(total) + peak
        if keepdims:
            return result
        return squeeze(result, normalize_axes(axis, len(result.shape)))


def _tf1_reduce_arguments(function: str, axis: Any, keepdims: bool | None, reduction_indices: Any,
                          keep_dims: bool | None) -> tuple[Any, bool]:
    """(axis, keepdims) from TF1's older names too: ``reduction_indices`` and ``keep_dims``."""
    return (renamed_argument(function, "axis", axis, "reduction_indices", reduction_indices),
            bool(renamed_argument(function, "keepdims", keepdims, "keep_dims", keep_dims, default=False)))


def _axis_attr(axis: Any) -> Any:
    if isinstance(axis, np.integer):
        return int(axis)
    if isinstance(axis, (list, tuple, np.ndarray)):
        return tuple(int(a) if isinstance(a, np.integer) else a for a in axis)
    return axis   # None, an int, or something the shape rule names in its error


# -- min, prod ---------------------------------------------------------------------------------

def _reference_min(values: Sequence[np.ndarray], attrs: Mapping[str, Any]) -> np.ndarray:
    x = np.asarray(values[0])
    axes = normalize_axes(attrs["axis"], x.ndim)
    highest = np.inf if x.dtype.kind == "f" else np.iinfo(x.dtype).max
    return np.asarray(np.min(x, axis=axes, keepdims=attrs["keepdims"], initial=highest))


def _reference_prod(values: Sequence[np.ndarray], attrs: Mapping[str, Any]) -> np.ndarray:
    x = np.asarray(values[0])
    axes = normalize_axes(attrs["axis"], x.ndim)
    return np.asarray(np.prod(x, axis=axes, keepdims=attrs["keepdims"], dtype=x.dtype))


# Above this many factors per product, the product of the others is formed from prefix and suffix
# products (n log n work) rather than directly (n**2, exact to the last digit but slow: a reduce_prod
# of a million elements took minutes).
_DIRECT_OTHERS_LIMIT = 64


def _exclusive_prefix_products(t: Tensor) -> Tensor:
    """``out[i] = t[0] * ... * t[i-1]`` along axis 0 (1 for i = 0): log2(n) doubling steps of
    elementwise products (Hillis and Steele's scan), no division, so zeros work."""
    count, rank = t.shape[0], len(t.shape)

    def shifted(v: Tensor, k: int) -> Tensor:   # v moved down k rows along axis 0, ones above
        padded = Pad(v, paddings=((k, 0),) + ((0, 0),) * (rank - 1), constant_values=1)
        return StridedSlice(padded, spec=((None, count, 1),) + ((None, None, 1),) * (rank - 1))
    product, step = shifted(t, 1), 1
    while step < count:
        product = _ew.multiply(product, shifted(product, step))
        step *= 2
    return product


def _product_of_others_by_scans(x: Tensor, axes: tuple[int, ...]) -> Tensor:
    """For every element, the product of the other elements of its reduction (x's sizes known)."""
    kept = [d for d in range(len(x.shape)) if d not in axes]
    order = list(axes) + kept
    count = int(np.prod([x.shape[a] for a in axes], dtype=np.int64))
    rows = reshape(transpose(x, order), [count] + [x.shape[d] for d in kept])
    before = _exclusive_prefix_products(rows)
    after = reversed_along(_exclusive_prefix_products(reversed_along(rows, [0])), [0])
    others = reshape(_ew.multiply(before, after), [x.shape[d] for d in order])
    return transpose(others, [order.index(d) for d in range(len(x.shape))])


def _prod_grad(op: Operation, g: Tensor) -> list[Tensor]:
    # d prod / d x_i = product of the other elements: computed without division, so zeros work.
    x = op.inputs[0]
    axes = normalize_axes(op.attrs["axis"], len(x.shape))
    if None not in x.shape and np.prod([x.shape[a] for a in axes], dtype=np.int64) > _DIRECT_OTHERS_LIMIT:
        others = _product_of_others_by_scans(x, axes)
    else:
        others = ProdOfOthers(x, axis=op.attrs["axis"])
    return [others * _with_reduced_dims(g, op)]


ReduceMin = OpDef("ReduceMin", "reduce", _reduce_shape_rule, numeric_dtype, reference=_reference_min,
                  grad_rule=_max_grad, loop_nest=_reduce_nest("min"))
ReduceProd = OpDef("ReduceProd", "reduce", _reduce_shape_rule, numeric_dtype, reference=_reference_prod,
                   grad_rule=_prod_grad, loop_nest=_reduce_nest("prod"))


def _prod_of_others_nest(shapes: Sequence[tuple], out: tuple, attrs: Mapping[str, Any]) -> LoopNest:
    # space: the output position (x's shape), then one more axis per reduced axis (the factor's position).
    shape = tuple(shapes[0])
    axes = normalize_axes(attrs["axis"], len(shape))
    extra = {a: len(shape) + k for k, a in enumerate(axes)}
    space = shape + tuple(shape[a] for a in axes)
    input_axes = tuple(extra.get(d, d) for d in range(len(shape)))

    def body(sb: Any, args: Sequence[Any]) -> Any:
        same = None
        for a in axes:
            check = sb.eq(sb.axis_index(a), sb.axis_index(extra[a]))
            same = check if same is None else sb.logical_and(same, check)
        if same is None:
            return sb.literal(1, args[0].dtype)
        return sb.select(same, sb.literal(1, args[0].dtype), args[0])
    return LoopNest(space, (input_axes,), tuple(extra.values()), "prod", body)


def _prod_of_others_reference(values: Sequence[np.ndarray], attrs: Mapping[str, Any]) -> np.ndarray:
    x = np.asarray(values[0])
    axes = normalize_axes(attrs["axis"], x.ndim)
    kept = tuple(n for d, n in enumerate(x.shape) if d not in axes)
    moved = np.moveaxis(x, axes, tuple(range(len(axes)))).reshape(
        (int(np.prod([x.shape[a] for a in axes], dtype=np.int64)),) + kept)   # (-1 fails for size 0)
    count = moved.shape[0]
    result = np.empty_like(moved)
    for i in range(count):
        result[i] = np.prod(np.delete(moved, i, axis=0), axis=0, dtype=x.dtype)
    shaped = result.reshape(tuple(x.shape[a] for a in axes) + tuple(n for d, n in enumerate(x.shape) if d not in axes))
    return np.moveaxis(shaped, tuple(range(len(axes))), axes)


def _prod_of_others_grad(op: Operation, g: Tensor) -> list[Tensor]:
    # d P_i / d x_j = product of the factors other than i and j (i != j): sum those against g_i.
    x = op.inputs[0]
    pairs = ProdOfOthersPairs(x, axis=op.attrs["axis"])
    return [SumOverOthers(pairs, g, axis=op.attrs["axis"])]


def _pair_layout(shape: tuple, attrs: Mapping[str, Any]) -> tuple[tuple[int, ...], dict[int, int]]:
    """(reduced axes, reduced axis -> the extra axis holding the second position)."""
    axes = normalize_axes(attrs["axis"], len(shape))
    return axes, {a: len(shape) + k for k, a in enumerate(axes)}


def _same_position(sb: Any, axes: Sequence[int], first: Mapping[int, int] | None, second: Mapping[int, int]) -> Any:
    same = None
    for a in axes:
        check = sb.eq(sb.axis_index(a if first is None else first[a]), sb.axis_index(second[a]))
        same = check if same is None else sb.logical_and(same, check)
    return same


def _pairs_nest(shapes: Sequence[tuple], out: tuple, attrs: Mapping[str, Any]) -> LoopNest:
    # out[j, i] = product over k of x[k], skipping k == i and k == j (positions along the reduced axes).
    shape = tuple(shapes[0])
    axes, second = _pair_layout(shape, attrs)
    third = {a: len(shape) + len(axes) + k for k, a in enumerate(axes)}
    space = shape + tuple(shape[a] for a in axes) * 2

    def body(sb: Any, args: Sequence[Any]) -> Any:
        one = sb.literal(1, args[0].dtype)
        if not axes:
            return one
        skip = sb.logical_or(_same_position(sb, axes, None, third), _same_position(sb, axes, second, third))
        return sb.select(skip, one, args[0])
    return LoopNest(space, (tuple(third.get(d, d) for d in range(len(shape))),), tuple(third.values()), "prod", body)


def _pairs_reference(values: Sequence[np.ndarray], attrs: Mapping[str, Any]) -> np.ndarray:
    x = np.asarray(values[0])
    axes, _ = _pair_layout(x.shape, attrs)
    reduced = [x.shape[a] for a in axes]
    result = np.empty(x.shape + tuple(reduced), x.dtype)
    for j in np.ndindex(*x.shape):
        for i in np.ndindex(*reduced):
            factors = x.copy()
            own = list(j)
            for a, position in zip(axes, i):
                own[a] = position
            mask = np.ones(x.shape, bool)
            mask[tuple(j)] = False
            mask[tuple(own)] = False
            keep = [slice(None) if d in axes else j[d] for d in range(x.ndim)]
            result[j + i] = np.prod(factors[tuple(keep)][mask[tuple(keep)]], dtype=x.dtype)
    return result


def _third_order(op: Operation, g: Tensor) -> list[Tensor]:
    raise NoGradientError(f"the third derivative of reduce_prod is not implemented ({op.describe()} "
                          f"at {op.location})")


def _pairs_shape(shapes: Sequence[tuple], attrs: Mapping[str, Any]) -> tuple:
    # x's shape, then the reduced dims again: the position of the second factor left out.
    shape = tuple(shapes[0])
    return shape + tuple(shape[a] for a in normalize_axes(attrs["axis"], len(shape)))


ProdOfOthersPairs = OpDef("ProdOfOthersPairs", "reduce", _pairs_shape, numeric_dtype, reference=_pairs_reference, grad_rule=_third_order, loop_nest=_pairs_nest)


def _sum_over_others_nest(shapes: Sequence[tuple], out: tuple, attrs: Mapping[str, Any]) -> LoopNest:
    # out[j] = sum over reduced positions i != j of pairs[j, i] * g[i] (g's other dims follow j).
    shape = tuple(shapes[1])
    axes, second = _pair_layout(shape, attrs)
    space = shape + tuple(shape[a] for a in axes)

    def body(sb: Any, args: Sequence[Any]) -> Any:
        pairs, g = args[0], args[1]
        same = _same_position(sb, axes, None, second) if axes else None
        product = sb.mul(pairs, g)
        return product if same is None else sb.select(same, sb.literal(0, g.dtype), product)
    return LoopNest(space, (tuple(range(len(space))), tuple(second.get(d, d) for d in range(len(shape)))),
                    tuple(second.values()), "sum", body)


def _sum_over_others_reference(values: Sequence[np.ndarray], attrs: Mapping[str, Any]) -> np.ndarray:
    pairs, g = np.asarray(values[0]), np.asarray(values[1])
    axes, _ = _pair_layout(g.shape, attrs)
    result = np.zeros(g.shape, g.dtype)
    reduced = [g.shape[a] for a in axes]
    for j in np.ndindex(*g.shape):
        for i in np.ndindex(*reduced):
            own = list(j)
            for a, position in zip(axes, i):
                own[a] = position
            if tuple(own) != j:
                result[j] += pairs[j + i] * g[tuple(own)]
    return result


def _sum_over_others_grad(op: Operation, g: Tensor) -> list[Any]:
    # Linear in its second input, whose pairs are symmetric (the product of all factors but j's
    # and i's): that gradient is the op itself again. Through the pairs it is a third derivative.
    pairs = op.inputs[0]
    refusal = NoGradientError(f"the third derivative of reduce_prod is not implemented ({op.describe()} "
                              f"at {op.location})")
    return [refusal, SumOverOthers(pairs, g, axis=op.attrs["axis"])]


SumOverOthers = OpDef("SumOverOthers", "reduce", same_shape_as_second, numeric_dtype,
                      reference=_sum_over_others_reference, grad_rule=_sum_over_others_grad,
                      loop_nest=_sum_over_others_nest)


ProdOfOthers = OpDef("ProdOfOthers", "reduce", same_shape_as_first, numeric_dtype,
                     reference=_prod_of_others_reference, grad_rule=_prod_of_others_grad,
                     loop_nest=_prod_of_others_nest)


def reduce_min(x: Any, axis: int | Sequence[int] | None = None, keepdims: bool | None = None,
               name: str | None = None, reduction_indices: int | Sequence[int] | None = None,
               keep_dims: bool | None = None) -> Tensor:
    """Min over ``axis``; NaN propagates; an empty reduction gives +inf (the largest int)."""
    axis, keepdims = _tf1_reduce_arguments("reduce_min", axis, keepdims, reduction_indices, keep_dims)
    return ReduceMin(x, axis=_axis_attr(axis), keepdims=bool(keepdims), name=name)


def reduce_prod(x: Any, axis: int | Sequence[int] | None = None, keepdims: bool | None = None,
                name: str | None = None, reduction_indices: int | Sequence[int] | None = None,
                keep_dims: bool | None = None) -> Tensor:
    """Product over ``axis`` (1 for an empty reduction). Its gradient is exact with zeros in ``x``
    (no division); it costs the reduced size squared per element, its second derivative the cube.

    >>> import compiler as cc
    >>> cc.reduce_prod(cc.constant([[1.0, 2.0], [3.0, 4.0]]), axis=0).shape
    (2,)
    """
    axis, keepdims = _tf1_reduce_arguments("reduce_prod", axis, keepdims, reduction_indices, keep_dims)
    return ReduceProd(x, axis=_axis_attr(axis), keepdims=bool(keepdims), name=name)


def _bool_reduction(function: str, combine: Any, x: Any, axis: Any, keepdims: bool | None, name: str | None,
                    reduction_indices: Any, keep_dims: bool | None) -> Tensor:
    axis, keepdims = _tf1_reduce_arguments(function, axis, keepdims, reduction_indices, keep_dims)
    x = convert_to_tensor(x)
    if x.dtype != dtypes.bool_:
        raise DTypeError(located(f"{function} needs a bool tensor, got {x.dtype.name} {x.name!r} (compare it "
                                 f"first, e.g. x > 0)"))
    with composite_scope(name or function.title().replace("_", ""), [x]):
        return _ew.greater(combine(_ew.cast(x, dtypes.int32), axis, keepdims), 0)


def reduce_any(x: Any, axis: int | Sequence[int] | None = None, keepdims: bool | None = None,
               name: str | None = None, reduction_indices: int | Sequence[int] | None = None,
               keep_dims: bool | None = None) -> Tensor:
    """Logical or of a bool tensor over ``axis`` (all axes when None); False for an empty reduction.

    >>> import compiler as cc
    >>> cc.reduce_any(cc.constant([[True, False], [False, False]]), axis=1).shape
    (2,)
    """
    return _bool_reduction("reduce_any", reduce_max, x, axis, keepdims, name, reduction_indices, keep_dims)


def reduce_all(x: Any, axis: int | Sequence[int] | None = None, keepdims: bool | None = None,
               name: str | None = None, reduction_indices: int | Sequence[int] | None = None,
               keep_dims: bool | None = None) -> Tensor:
    """Logical and of a bool tensor over ``axis`` (all axes when None); True for an empty reduction."""
    return _bool_reduction("reduce_all", reduce_min, x, axis, keepdims, name, reduction_indices, keep_dims)


# -- argmax / argmin ---------------------------------------------------------------------------

def _arg_shape(shapes: Sequence[tuple], attrs: Mapping[str, Any]) -> tuple:
    shape = shapes[0]
    axis = normalize_axes(attrs["axis"], len(shape))[0]
    if shape[axis] == 0:
        raise RuleError(f"cannot take the {attrs['kind']} over the empty axis {axis} of {format_shape(shape)}")
    return tuple(d for i, d in enumerate(shape) if i != axis)


def _arg_nest(shapes: Sequence[tuple], out: tuple, attrs: Mapping[str, Any]) -> LoopNest:
    # The first position that holds the extreme (or the first NaN): a min over matching positions.
    space = tuple(shapes[0])
    axis = normalize_axes(attrs["axis"], len(space))[0]
    peak_axes = tuple(None if d == axis else d for d in range(len(space)))

    def body(sb: Any, args: Sequence[Any]) -> Any:
        x, peak = args
        hit = sb.eq(x, peak)
        if dtypes.is_floating(x.dtype):
            hit = sb.logical_or(hit, sb.isnan(x))
        position = sb.cast(sb.axis_index(axis), attrs["output_type"])
        return sb.select(hit, position, sb.literal(space[axis], attrs["output_type"]))
    return LoopNest(space, (tuple(range(len(space))), peak_axes), (axis,), "min", body)


def _arg_reference(values: Sequence[np.ndarray], attrs: Mapping[str, Any]) -> np.ndarray:
    x = np.asarray(values[0])
    axis = normalize_axes(attrs["axis"], x.ndim)[0]
    pick = np.argmax if attrs["kind"] == "argmax" else np.argmin
    return np.asarray(pick(x, axis=axis)).astype(attrs["output_type"])


def _arg_dtype(types: Sequence[np.dtype], attrs: Mapping[str, Any]) -> np.dtype:
    if types[0] == dtypes.bool_:
        raise RuleError("needs a numeric operand, got bool", "dtype")
    return attrs["output_type"]


ArgReduce = OpDef("ArgReduce", "reduce", _arg_shape, _arg_dtype, reference=_arg_reference,
                  grad_rule=lambda op, g: [None, None], loop_nest=_arg_nest)


def _arg(kind: str, x: Any, axis: int | None, output_type: Any, name: str | None) -> Tensor:
    x = convert_to_tensor(x)
    axis = 0 if axis is None else int(axis)
    if not -len(x.shape) <= axis < max(len(x.shape), 1):
        raise ShapeError(located(f"{kind}: axis {axis} is out of range for {x.name!r} of shape "
                                  f"{format_shape(x.shape)}"))
    index_type = dtypes.as_dtype(output_type)
    if index_type not in (dtypes.int32, dtypes.int64):
        raise DTypeError(located(f"{kind}: output_type must be int32 or int64, got {index_type.name}"))
    extreme = (reduce_max if kind == "argmax" else reduce_min)(x, axis, keepdims=True)
    with x.graph.as_default():
        return ArgReduce(x, stop_gradient(extreme), axis=axis, kind=kind,
                         output_type=dtypes.as_dtype(output_type), name=name)


def argmax(x: Any, axis: int | None = None, name: str | None = None, dimension: int | None = None,
           output_type: Any = "int64") -> Tensor:
    """The position of the largest element along ``axis`` (0 when None, as TF1); the first one on
    ties, the first NaN if there is one (as numpy).

    >>> import compiler as cc
    >>> cc.argmax(cc.constant([[1.0, 5.0], [7.0, 2.0]]), axis=1).shape
    (2,)
    """
    return _arg("argmax", x, renamed_argument("argmax", "axis", axis, "dimension", dimension), output_type, name)


def argmin(x: Any, axis: int | None = None, name: str | None = None, dimension: int | None = None,
           output_type: Any = "int64") -> Tensor:
    """The position of the smallest element along ``axis`` (see ``argmax``)."""
    return _arg("argmin", x, renamed_argument("argmin", "axis", axis, "dimension", dimension), output_type, name)


# -- cumsum ------------------------------------------------------------------------------------

def _running_sum_nest(shapes: Sequence[tuple], out: tuple, attrs: Mapping[str, Any]) -> LoopNest:
    shape = tuple(shapes[0])
    axis = normalize_axis(attrs["axis"], len(shape))
    return LoopNest(shape, (tuple(range(len(shape))),), (axis,), "sum", lambda sb, args: args[0], scan=True)


def _running_sum_reference(values: Sequence[np.ndarray], attrs: Mapping[str, Any]) -> np.ndarray:
    x = np.asarray(values[0])
    return np.cumsum(x, axis=normalize_axis(attrs["axis"], x.ndim), dtype=x.dtype)


def _running_sum_grad(op: Operation, g: Tensor) -> list[Tensor]:
    return [cumsum(g, op.attrs["axis"], reverse=True)]


def _running_sum_shape(shapes: Sequence[tuple], attrs: Mapping[str, Any]) -> tuple:
    normalize_axis(attrs["axis"], len(shapes[0]))  # checks the axis
    return tuple(shapes[0])


RunningSum = OpDef("Cumsum", "reduce", _running_sum_shape, numeric_dtype, reference=_running_sum_reference,
                   grad_rule=_running_sum_grad, loop_nest=_running_sum_nest)


def cumsum(x: Any, axis: int = 0, exclusive: bool = False, reverse: bool = False,
           name: str | None = None) -> Tensor:
    """Running sums along ``axis`` (TF1 semantics): ``exclusive`` leaves each element out of its
    own sum, ``reverse`` sums from the end. One pass along the axis per row.

    >>> import compiler as cc
    >>> cc.cumsum(cc.constant([1.0, 2.0, 3.0])).shape
    (3,)
    """
    x = convert_to_tensor(x)
    rank = len(x.shape)
    if rank == 0:
        raise ShapeError(located(f"cumsum needs at least one dimension, got the scalar {x.name!r}"))
    try:
        axis = normalize_axis(axis, rank)
    except RuleError as exc:
        raise ShapeError(located(f"cumsum of {x.name!r} {format_shape(x.shape)}: {exc}")) from None
    if reverse:
        x = reversed_along(x, [axis])
    if exclusive:  # shift by one along the axis: [0, x0, x1, …, x(n-2)]
        padded = Pad(x, paddings=tuple((1, 0) if d == axis else (0, 0) for d in range(rank)), constant_values=0)
        x = StridedSlice(padded, spec=tuple((None, -1, 1) if d == axis else (None, None, 1) for d in range(rank)))
    result = RunningSum(x, axis=axis, name=name)
    return reversed_along(result, [axis]) if reverse else result


def count_nonzero(input_tensor: Any, axis: int | Sequence[int] | None = None, keepdims: bool | None = None,
                  dtype: Any = "int64", name: str | None = None, reduction_indices: int | Sequence[int] | None = None,
                  keep_dims: bool | None = None) -> Tensor:
    """How many entries along ``axis`` are not zero (not False for bools), as ``dtype`` (TF1's
    ``count_nonzero``, int64 by default).

    >>> import compiler as cc
    >>> from runtime import Session
    >>> with Session() as sess:
    ...     sess.run(cc.count_nonzero(cc.constant([[0.0, 1.5], [2.0, -1.0]]), axis=1)).tolist()
    [1, 2]
    """
    axis, keepdims = _tf1_reduce_arguments("count_nonzero", axis, keepdims, reduction_indices, keep_dims)
    with composite_scope(name or "count_nonzero", [input_tensor]):
        x = convert_to_tensor(input_tensor)
        nonzero = _ew.logical_not(_ew.equal(x, False if x.dtype == dtypes.bool_ else 0))
        return reduce_sum(_ew.cast(nonzero, dtype), axis=axis, keepdims=keepdims)


def norm(tensor: Any, ord: Any = "euclidean", axis: int | Sequence[int] | None = None,  # noqa: A002
         keepdims: bool | None = None, name: str | None = None, keep_dims: bool | None = None) -> Tensor:
    """The norm of ``tensor`` over ``axis`` (all of it when None) as TF1's ``norm``: ``ord``
    "euclidean" (also "fro", and 2 for a vector: the square root of the sum of squares), 1 (the sum
    of absolute values) or ``np.inf`` (the largest absolute value), entrywise. Matrix norms other
    than the Frobenius norm (ord=2 of a matrix is its largest singular value) are not available.

    >>> import compiler as cc
    >>> from runtime import Session
    >>> with Session() as sess:
    ...     float(sess.run(cc.norm(cc.constant([3.0, -4.0]))))
    5.0
    """
    axis, keepdims = _tf1_reduce_arguments("norm", axis, keepdims, None, keep_dims)
    pair = isinstance(axis, (list, tuple)) and len(axis) == 2
    if isinstance(ord, bool) or not (ord in ("euclidean", "fro") or (ord in (1, 2, np.inf) and not pair)):
        raise ValueError(located(f"norm: ord {ord!r} is not available" + (
            " for a matrix (axis of two); use 'euclidean' or 'fro' (the Frobenius norm)" if pair
            else "; use 'euclidean' (2), 1 or np.inf")))
    with composite_scope(name or "norm", [tensor]):
        x = convert_to_tensor(tensor)
        if ord == 1:
            return reduce_sum(_ew.abs(x), axis=axis, keepdims=keepdims)
        if ord == np.inf:
            return reduce_max(_ew.abs(x), axis=axis, keepdims=keepdims)
        return _ew.sqrt(reduce_sum(_ew.square(x), axis=axis, keepdims=keepdims))


TopKV2 = collections.namedtuple("TopKV2", ["values", "indices"])


def top_k(input: Any, k: int = 1, sorted: bool = True, name: str | None = None) -> TopKV2:  # noqa: A002
    """The ``k`` largest entries along the last axis and their positions (TF1's ``nn.top_k``):
    ``TopKV2(values, indices)``, largest first; of equal entries the one at the lower position comes
    first, as TF1; NaN ranks above every number. A composition: each entry's rank counts the entries above it (the last axis
    squared in work, for rows of up to a few thousand); the gradient reaches the picked entries.

    >>> import compiler as cc
    >>> from runtime import Session
    >>> values, indices = cc.nn.top_k(cc.constant([[1.0, 5.0, 3.0, 5.0]]), k=3)
    >>> with Session() as sess:
    ...     sess.run(values).tolist(), sess.run(indices).tolist()
    ([[5.0, 5.0, 3.0]], [[1, 3, 2]])
    """
    with composite_scope(name or "TopKV2", [input]):
        x = convert_to_tensor(input)
        depth = x.shape[-1] if x.shape else None
        if depth is None or not (dtypes.is_floating(x.dtype) or dtypes.is_integer(x.dtype)):
            raise ShapeError(located(f"top_k: the input must be numbers with a last axis of known size, got "
                                     f"{x.dtype.name} {format_shape(x.shape)} {x.name!r}"))
        if isinstance(k, bool) or not isinstance(k, (int, np.integer)) or not 0 <= k <= depth:
            raise ValueError(located(f"top_k: k must be an int in [0, {depth}] for {format_shape(x.shape)}, got {k!r}"))
        positions = _ew.cast(np.arange(depth), dtypes.int64)
        others, own = expand_dims(x, -2), expand_dims(x, -1)            # [..., 1, n] and [..., n, 1]
        before = _ew.less(positions, expand_dims(positions, -1))       # [n, n]: [i, j] is j < i
        # j above i: larger, or equal and earlier; NaN counts as above every number (else the
        # ranks would collide and pick several entries at once)
        larger, same = _ew.greater(others, own), _ew.equal(others, own)
        if dtypes.is_floating(x.dtype):
            others_nan, own_nan = _ew.is_nan(others), _ew.is_nan(own)
            larger = _ew.logical_or(larger, _ew.logical_and(others_nan, _ew.logical_not(own_nan)))
            same = _ew.logical_or(same, _ew.logical_and(others_nan, own_nan))
        above = _ew.logical_or(larger, _ew.logical_and(same, before))
        rank = reduce_sum(_ew.cast(above, dtypes.int64), axis=-1)       # [..., n]: 0 for the largest
        picked = _ew.equal(expand_dims(rank, -2), expand_dims(positions[:k], -1))   # [..., k, n]
        values = reduce_sum(_ew.where(picked, expand_dims(x, -2), 0), axis=-1)
        indices = reduce_sum(_ew.where(picked, positions, 0), axis=-1)
        return TopKV2(values, _ew.cast(indices, dtypes.int32))

"""Elementwise ops: one scalar expression per output element, inputs broadcast numpy-style.

Each declaration keeps its rules together: the dtype rule, the gradient (written with other ops),
the scalar lowering (``sb`` is a ``ScalarBuilder``) and the numpy reference.
"""
from __future__ import annotations

import math
from typing import Any, Callable, Mapping, Sequence

import numpy as np

from .. import dtypes
from ..errors import DTypeError, ShapeError
from ..graph import Operation, Tensor, located
from ..shapes import RuleError, broadcast_shapes, format_shape
from .base import OpDef, composite_scope, convert_to_tensor, literal_as
from .broadcast import unbroadcast
from .rules import dtype_from_attrs, floating_dtype, no_gradient, numeric_dtype, same_dtype


def _broadcast_rule(shapes: Sequence[tuple], attrs: Mapping[str, Any]) -> tuple:
    return broadcast_shapes(*shapes)


def _bool_dtype(types: Sequence[np.dtype], attrs: Mapping[str, Any]) -> np.dtype:
    same_dtype(types, attrs)
    return dtypes.bool_


def _bool_operands(types: Sequence[np.dtype], attrs: Mapping[str, Any]) -> np.dtype:
    if any(t != dtypes.bool_ for t in types):
        raise RuleError("needs bool operands, got " + ", ".join(t.name for t in types), "dtype")
    return dtypes.bool_


def elementwise(name: str, lower: Callable[..., Any], reference: Callable[..., np.ndarray],
                grad: Callable[[Operation, Tensor], Sequence[Tensor | None]],
                dtype_rule: Callable[..., np.dtype] = same_dtype) -> OpDef:
    """Declare an elementwise op whose attrs do not matter to its lowering or reference."""
    return OpDef(name, "elementwise", _broadcast_rule, dtype_rule,
                 reference=lambda values, attrs: reference(*values),
                 grad_rule=grad, lower_scalar=lambda sb, args, attrs: lower(sb, *args))


def _pow_lower(sb: Any, x: Any, y: Any) -> Any:
    # C99/IEEE pow with its special cases, from mathlib (y*log|x| in extra precision).
    return sb.pow(x, y)


def _pow_grad(op: Operation, g: Tensor) -> list[Tensor]:
    x, y = op.inputs
    z = op.outputs[0]
    gx = g * y * (x ** (y - 1.0))
    positive = greater(x, 0.0)
    safe_log = where(positive, log(where(positive, x, 1.0)), 0.0)
    gy = g * z * safe_log
    return [unbroadcast(gx, x), unbroadcast(gy, y)]


def _max_min_grad(pick_first: Callable[[Tensor, Tensor], Tensor]) -> Callable:
    def grad_rule(op: Operation, g: Tensor) -> list[Tensor]:
        x, y = op.inputs
        mask = pick_first(x, y)
        return [unbroadcast(where(mask, g, 0.0), x), unbroadcast(where(mask, 0.0, g), y)]
    return grad_rule


Add = elementwise("Add", lambda sb, x, y: sb.add(x, y), np.add,
                  lambda op, g: [unbroadcast(g, op.inputs[0]), unbroadcast(g, op.inputs[1])],
                  numeric_dtype)
Sub = elementwise("Sub", lambda sb, x, y: sb.sub(x, y), np.subtract,
                  lambda op, g: [unbroadcast(g, op.inputs[0]), unbroadcast(negative(g), op.inputs[1])],
                  numeric_dtype)
Mul = elementwise("Mul", lambda sb, x, y: sb.mul(x, y), np.multiply,
                  lambda op, g: [unbroadcast(g * op.inputs[1], op.inputs[0]),
                                 unbroadcast(g * op.inputs[0], op.inputs[1])],
                  numeric_dtype)
Div = elementwise("Div", lambda sb, x, y: sb.div(x, y), np.divide,
                  lambda op, g: [unbroadcast(g / op.inputs[1], op.inputs[0]),
                                 unbroadcast(negative(g) * op.inputs[0] / square(op.inputs[1]),
                                              op.inputs[1])],
                  floating_dtype)
def _pow_reference(x: np.ndarray, y: np.ndarray) -> np.ndarray:
    # numpy computes x ** 0.5 (a scalar exponent) as sqrt(x), which differs from C's pow at -inf
    # and -0.0; an array of exponents takes its elementwise C pow, as the compiled targets do.
    x, y = np.broadcast_arrays(np.asarray(x), np.asarray(y))
    return np.power(x, y.copy())


Pow = elementwise("Pow", _pow_lower, _pow_reference, _pow_grad, floating_dtype)
Maximum = elementwise("Maximum", lambda sb, x, y: sb.maximum(x, y), np.maximum,
                      _max_min_grad(lambda x, y: greater_equal(x, y)), numeric_dtype)
Minimum = elementwise("Minimum", lambda sb, x, y: sb.minimum(x, y), np.minimum,
                      _max_min_grad(lambda x, y: less_equal(x, y)), numeric_dtype)

Neg = elementwise("Neg", lambda sb, x: sb.neg(x), np.negative,
                  lambda op, g: [negative(g)], numeric_dtype)
Exp = elementwise("Exp", lambda sb, x: sb.exp(x), np.exp,
                  lambda op, g: [g * op.outputs[0]], floating_dtype)
Log = elementwise("Log", lambda sb, x: sb.log(x), np.log,
                  lambda op, g: [g / op.inputs[0]], floating_dtype)
Sqrt = elementwise("Sqrt", lambda sb, x: sb.sqrt(x), np.sqrt,
                   lambda op, g: [g * 0.5 / op.outputs[0]], floating_dtype)
Rsqrt = elementwise("Rsqrt", lambda sb, x: sb.div(1.0, sb.sqrt(x)), lambda x: 1.0 / np.sqrt(x),
                    lambda op, g: [g * -0.5 * op.outputs[0] * square(op.outputs[0])], floating_dtype)
Square = elementwise("Square", lambda sb, x: sb.mul(x, x), np.square,
                     lambda op, g: [g * 2.0 * op.inputs[0]], numeric_dtype)
Abs = elementwise("Abs", lambda sb, x: sb.abs(x), np.abs,
                  lambda op, g: [g * sign(op.inputs[0])], numeric_dtype)
# x / (1 + |x|), with TF1's gradient g / (1 + |x|)**2: the composite's own derivative,
# 1/d - x sign(x)/d**2, cancels for large |x| (2% off at 1e6 in float32) and is NaN at infinity.
Softsign = elementwise("Softsign", lambda sb, x: sb.div(x, sb.add(sb.abs(x), 1)),
                       lambda x: np.asarray(x) / (np.abs(x) + 1),
                       lambda op, g: [g / square(abs(op.inputs[0]) + 1.0)], floating_dtype)


def _zeros_like_input(op: Operation) -> Tensor:
    """Zeros of the shape and dtype of ``op``'s input (TF1's gradient of sign): ``x < x`` is false
    everywhere, NaN included. (``array.zeros_like`` would make the ops modules import each other.)"""
    x = op.inputs[0]
    return cast(less(x, x), x.dtype)


Sign = elementwise("Sign",
                   lambda sb, x: sb.select(sb.gt(x, 0), 1, sb.select(sb.lt(x, 0), -1, sb.add(x, 0))),  # -0 + 0 = +0
                   np.sign, lambda op, g: [_zeros_like_input(op)], numeric_dtype)
Tanh = elementwise("Tanh", lambda sb, x: sb.tanh(x), np.tanh,
                   lambda op, g: [g * (1.0 - square(op.outputs[0]))], floating_dtype)
Sigmoid = elementwise("Sigmoid", lambda sb, x: sb.sigmoid(x), lambda x: 1.0 / (1.0 + np.exp(-x)),
                      lambda op, g: [g * op.outputs[0] * (1.0 - op.outputs[0])], floating_dtype)
Relu = elementwise("Relu", lambda sb, x: sb.maximum(x, 0), lambda x: np.maximum(x, 0).astype(x.dtype),
                   # The mask reads relu's output (y > 0 iff x > 0), so x's only consumer is relu
                   # and bias-add + relu fuse into one kernel.
                   lambda op, g: [where(greater(op.outputs[0], 0), g, 0)], numeric_dtype)

Equal = elementwise("Equal", lambda sb, x, y: sb.eq(x, y), np.equal, no_gradient, _bool_dtype)
NotEqual = elementwise("NotEqual", lambda sb, x, y: sb.ne(x, y), np.not_equal, no_gradient, _bool_dtype)
Less = elementwise("Less", lambda sb, x, y: sb.lt(x, y), np.less, no_gradient, _bool_dtype)
LessEqual = elementwise("LessEqual", lambda sb, x, y: sb.le(x, y), np.less_equal, no_gradient, _bool_dtype)
Greater = elementwise("Greater", lambda sb, x, y: sb.gt(x, y), np.greater, no_gradient, _bool_dtype)
GreaterEqual = elementwise("GreaterEqual", lambda sb, x, y: sb.ge(x, y), np.greater_equal, no_gradient,
                           _bool_dtype)
LogicalAnd = elementwise("LogicalAnd", lambda sb, x, y: sb.logical_and(x, y), np.logical_and,
                         no_gradient, _bool_operands)
LogicalOr = elementwise("LogicalOr", lambda sb, x, y: sb.logical_or(x, y), np.logical_or,
                        no_gradient, _bool_operands)
LogicalNot = elementwise("LogicalNot", lambda sb, x: sb.logical_not(x), np.logical_not,
                         no_gradient, _bool_operands)
IsNan = elementwise("IsNan", lambda sb, x: sb.isnan(x), np.isnan, no_gradient,
                    lambda types, attrs: (floating_dtype(types, attrs), dtypes.bool_)[1])


def _where_dtype(types: Sequence[np.dtype], attrs: Mapping[str, Any]) -> np.dtype:
    if types[0] != dtypes.bool_:
        raise RuleError(f"the condition must be bool, got {types[0].name}", "dtype")
    return same_dtype(types[1:], attrs)


def _where_grad(op: Operation, g: Tensor) -> list[Tensor | None]:
    condition, x, y = op.inputs
    return [None, unbroadcast(where(condition, g, 0), x), unbroadcast(where(condition, 0, g), y)]


Where = elementwise("Where", lambda sb, c, x, y: sb.select(c, x, y),
                    lambda c, x, y: np.where(c, x, y), _where_grad, _where_dtype)


def _cast_grad(op: Operation, g: Tensor) -> list[Tensor | None]:
    source = op.inputs[0].dtype
    if dtypes.is_floating(source) and dtypes.is_floating(op.attrs["dtype"]):
        return [cast(g, source)]
    return [None]


def _cast_reference(values: Sequence[np.ndarray], attrs: Mapping[str, Any]) -> np.ndarray:
    x, target = np.asarray(values[0]), np.dtype(attrs["dtype"])
    if x.dtype.kind != "f" or target.kind not in "iu":
        return x.astype(target)
    # As the compiled targets (LLVM's saturating fptosi.sat): NaN gives 0, values beyond the
    # integer range its nearest end; numpy's own cast leaves those undefined.
    info, wide = np.iinfo(target), np.nan_to_num(x.astype(np.float64), nan=0.0, posinf=np.inf, neginf=-np.inf)
    above, below = wide >= float(info.max) + 1.0, wide < float(info.min)
    result = np.array(np.trunc(np.where(above | below, 0.0, wide)), dtype=target)   # an array, 0-d too
    result[above], result[below] = info.max, info.min
    return result


Cast = OpDef("Cast", "elementwise", _broadcast_rule, dtype_from_attrs,
             reference=_cast_reference,
             grad_rule=_cast_grad,
             lower_scalar=lambda sb, args, attrs: sb.cast(args[0], attrs["dtype"]))


# -- public functions ------------------------------------------------------------------------

def add(x: Any, y: Any, name: str | None = None) -> Tensor:
    """``x + y`` with broadcasting. ``add(placeholder("float32", (2,)), 1.0)``"""
    return Add(x, y, name=name)


def add_n(inputs: Sequence[Any], name: str | None = None) -> Tensor:
    """The elementwise sum of a list of tensors of one shape and dtype (no broadcasting, as TF1's
    ``add_n``); a composition of ``add``.

    >>> import compiler as cc
    >>> cc.add_n([cc.constant([1.0, 2.0]), cc.constant([3.0, 4.0]), cc.constant([5.0, 6.0])]).shape
    (2,)
    """
    if isinstance(inputs, Tensor) or not isinstance(inputs, (list, tuple)) or not inputs:
        raise ValueError(located(f"add_n: inputs must be a non-empty list of tensors, got {inputs!r}"))
    with composite_scope(name or "AddN", list(inputs)):
        tensors = [convert_to_tensor(t) for t in inputs]
        first = tensors[0]
        for other in tensors[1:]:
            if other.dtype != first.dtype:
                raise DTypeError(located(f"add_n: inputs are {first.dtype.name} ({first.name!r}) and "
                                         f"{other.dtype.name} ({other.name!r}); they must share one dtype"))
            if len(other.shape) != len(first.shape) or any(
                    a is not None and b is not None and a != b for a, b in zip(first.shape, other.shape)):
                raise ShapeError(located(f"add_n: inputs {first.name!r} {format_shape(first.shape)} and "
                                         f"{other.name!r} {format_shape(other.shape)} differ in shape (add_n does "
                                         f"not broadcast)"))
        total = tensors[0]   # one input is returned as it is, as in TF1
        for other in tensors[1:]:
            total = add(total, other)
        return total


def subtract(x: Any, y: Any, name: str | None = None) -> Tensor:
    return Sub(x, y, name=name)


def multiply(x: Any, y: Any, name: str | None = None) -> Tensor:
    return Mul(x, y, name=name)


def divide(x: Any, y: Any, name: str | None = None) -> Tensor:
    """``x / y`` (TF1's ``divide``, also ``x / y``): integers are divided as float64, as TF1's
    ``truediv`` divides them.

    >>> import compiler as cc
    >>> (cc.constant([7, -7]) / 2).dtype.name
    'float64'
    """
    kinds = [v.dtype for v in (x, y) if isinstance(v, Tensor)]
    if kinds and all(dtypes.is_integer(d) for d in kinds):
        x, y = (cast(v, dtypes.float64) if isinstance(v, Tensor) else v for v in (x, y))
    return Div(x, y, name=name)


def pow(x: Any, y: Any, name: str | None = None) -> Tensor:  # noqa: A001 (TF's name)
    """``x ** y`` (C99's ``pow`` for floats). An integer tensor to a Python int power (``k ** 2``)
    is computed as products (squaring and multiplying), wrapping on overflow as numpy's; a
    negative power of an integer is an error, as in TF1. Integers to an integer tensor power
    (``2 ** k``) square and multiply once per bit of the exponent; a negative power there gives
    the truncated 1 / x**n (TF1 stops the step with an error).

    >>> import compiler as cc
    >>> (cc.constant([2, 3]) ** 3).dtype.name
    'int32'
    """
    if (isinstance(x, Tensor) and dtypes.is_integer(x.dtype) and isinstance(y, (int, np.integer))
            and not isinstance(y, (bool, np.bool_))):
        if y < 0:
            raise ValueError(located(f"pow: integers to negative integer powers are not allowed (as TF1): "
                                     f"{x.name!r} ** {int(y)}"))
        with composite_scope(name or "Pow", [x]):
            result, base, exponent = None, x, int(y)
            while exponent:
                if exponent & 1:
                    result = base if result is None else multiply(result, base)
                exponent >>= 1
                if exponent:
                    base = multiply(base, base)
            return add(multiply(x, 0), 1) if result is None else result
    integer = [dtypes.is_integer(v.dtype) for v in (x, y) if isinstance(v, Tensor)]
    if integer and all(integer):
        return _integer_power(x, y, name)
    return Pow(x, y, name=name)


def _integer_power(x: Any, y: Any, name: str | None) -> Tensor:
    """An integer tensor power of integers: squaring and multiplying once per bit of the exponent
    (unrolled; wrapping on overflow as numpy's). A negative power gives what 1 / x**n truncates
    to (0, or +-1 for x = +-1) where TF1 stops the step with an error."""
    with composite_scope(name or "Pow", [x, y]):
        anchor = x if isinstance(x, Tensor) else y
        x, y = (v if isinstance(v, Tensor) else literal_as(v, anchor.dtype, "pow") for v in (x, y))
        if x.dtype != y.dtype:
            raise DTypeError(located(f"pow: {x.name!r} is {x.dtype.name} but {y.name!r} is {y.dtype.name} (use cc.cast)"))
        zero, one, two = (literal_as(v, x.dtype, "pow") for v in (0, 1, 2))
        negative_power = less(y, zero)
        exponent = where(negative_power, negative(y), y)
        result, base = add(multiply(x, zero), add(multiply(y, zero), one)), x   # ones of the broadcast shape
        for _ in range(np.iinfo(x.dtype).bits - 1):
            result = where(equal(floormod(exponent, two), one), multiply(result, base), result)
            base, exponent = multiply(base, base), floordiv(exponent, two)
        return where(logical_and(negative_power, not_equal(abs(x), one)), multiply(result, zero), result)


def maximum(x: Any, y: Any, name: str | None = None) -> Tensor:
    """Elementwise max; NaN if either is NaN (like numpy). Ties send the gradient to ``x``."""
    return Maximum(x, y, name=name)


def minimum(x: Any, y: Any, name: str | None = None) -> Tensor:
    return Minimum(x, y, name=name)


def negative(x: Any, name: str | None = None) -> Tensor:
    return Neg(x, name=name)


def exp(x: Any, name: str | None = None) -> Tensor:
    """``e**x``. ``exp(constant([0.0]))`` evaluates to ``[1.0]``."""
    return Exp(x, name=name)


def log(x: Any, name: str | None = None) -> Tensor:
    return Log(x, name=name)


def sqrt(x: Any, name: str | None = None) -> Tensor:
    return Sqrt(x, name=name)


def rsqrt(x: Any, name: str | None = None) -> Tensor:
    return Rsqrt(x, name=name)


def square(x: Any, name: str | None = None) -> Tensor:
    return Square(x, name=name)


def abs(x: Any, name: str | None = None) -> Tensor:  # noqa: A001 (TF's name)
    return Abs(x, name=name)


def sign(x: Any, name: str | None = None) -> Tensor:
    return Sign(x, name=name)


def tanh(x: Any, name: str | None = None) -> Tensor:
    return Tanh(x, name=name)


def sigmoid(x: Any, name: str | None = None) -> Tensor:
    return Sigmoid(x, name=name)


def relu(x: Any, name: str | None = None) -> Tensor:
    """``max(x, 0)``; the gradient at 0 is 0, as in TF."""
    return Relu(x, name=name)


def equal(x: Any, y: Any, name: str | None = None) -> Tensor:
    return Equal(x, y, name=name)


def not_equal(x: Any, y: Any, name: str | None = None) -> Tensor:
    return NotEqual(x, y, name=name)


def less(x: Any, y: Any, name: str | None = None) -> Tensor:
    return Less(x, y, name=name)


def less_equal(x: Any, y: Any, name: str | None = None) -> Tensor:
    return LessEqual(x, y, name=name)


def greater(x: Any, y: Any, name: str | None = None) -> Tensor:
    return Greater(x, y, name=name)


def greater_equal(x: Any, y: Any, name: str | None = None) -> Tensor:
    return GreaterEqual(x, y, name=name)


def logical_and(x: Any, y: Any, name: str | None = None) -> Tensor:
    return LogicalAnd(x, y, name=name)


def logical_or(x: Any, y: Any, name: str | None = None) -> Tensor:
    return LogicalOr(x, y, name=name)


def logical_not(x: Any, name: str | None = None) -> Tensor:
    return LogicalNot(x, name=name)


def is_nan(x: Any, name: str | None = None) -> Tensor:
    return IsNan(x, name=name)


def where(condition: Any, x: Any, y: Any, name: str | None = None) -> Tensor:
    """``x`` where ``condition`` else ``y``, all three broadcast together (``cc.where``, TF1's, also
    selects rows by a vector condition: ``array.where_rows``)."""
    # Python values take the dtype of the other branch, not the condition's; two of them, the
    # dtype a constant of both would have (where(c, 1, 2.5) is float32).
    if not isinstance(x, Tensor) and not isinstance(y, Tensor):
        both = np.result_type(np.asarray(x), np.asarray(y))
        x = convert_to_tensor(x, dtypes.float32 if both.kind == "f" and not isinstance(x, np.ndarray) else None)
    if not isinstance(x, Tensor):
        x = literal_as(x, y.dtype, "Where")
    if not isinstance(y, Tensor):
        y = literal_as(y, x.dtype, "Where")
    return Where(condition, x, y, name=name)


def cast(x: Any, dtype: Any, name: str | None = None) -> Tensor:
    """Convert to ``dtype``. Float to int truncates toward zero and saturates: NaN gives 0, a
    value beyond the integer range (inf included) its nearest end (as XLA; TF leaves it undefined)."""
    target = dtypes.as_dtype(dtype)
    if isinstance(x, Tensor) and x.dtype == target:
        return x
    return Cast(x, dtype=target, name=name)


# -- trigonometric and special functions ----------------------------------------------------

_TWO_OVER_SQRT_PI = 1.1283791670955126  # d/dx erf(x) = 2/sqrt(pi) * exp(-x**2)


def _erf_reference(x: np.ndarray) -> np.ndarray:
    # numpy has no erf: math.erf (C99 erf, within 1 ulp) per element, rounded to x's dtype.
    x = np.asarray(x)
    return np.vectorize(math.erf, otypes=[np.float64])(x).astype(x.dtype).reshape(x.shape)


Sin = elementwise("Sin", lambda sb, x: sb.sin(x), np.sin,
                  lambda op, g: [g * cos(op.inputs[0])], floating_dtype)
Cos = elementwise("Cos", lambda sb, x: sb.cos(x), np.cos,
                  lambda op, g: [negative(g * sin(op.inputs[0]))], floating_dtype)
Log1p = elementwise("Log1p", lambda sb, x: sb.log1p(x), np.log1p,
                    lambda op, g: [g / (op.inputs[0] + 1.0)], floating_dtype)
# d/dx expm1(x) = exp(x), computed as such: expm1(x) + 1 would round away exp(x) for x < -17
# (float32) or -37 (float64), and lose its low digits well before.
Expm1 = elementwise("Expm1", lambda sb, x: sb.expm1(x), np.expm1,
                    lambda op, g: [g * exp(op.inputs[0])], floating_dtype)
# Piecewise constant: no gradient (TF returns None as well).
Floor = elementwise("Floor", lambda sb, x: sb.floor(x), np.floor, no_gradient, floating_dtype)
Erf = elementwise("Erf", lambda sb, x: sb.erf(x), _erf_reference,
                  lambda op, g: [g * _TWO_OVER_SQRT_PI * exp(negative(square(op.inputs[0])))],
                  floating_dtype)

Atan = elementwise("Atan", lambda sb, x: sb.atan(x), np.arctan,
                   lambda op, g: [g / (square(op.inputs[0]) + 1.0)], floating_dtype)


def _negative_or_negative_zero(sb: Any, v: Any) -> Any:
    """v < 0, or v is -0 (whose reciprocal is -inf): the sign C's atan2 reads."""
    return sb.logical_or(sb.lt(v, 0.0), sb.logical_and(sb.eq(v, 0.0), sb.lt(sb.div(1.0, v), 0.0)))


def _atan2_lower(sb: Any, y: Any, x: Any) -> Any:
    # C99/numpy atan2(y, x) from atan of min(|x|, |y|) / max(|x|, |y|) in [0, 1], then pi/2 - t
    # where |y| > |x|, pi - t where x < 0 (or -0), negated where y < 0 (or -0). float32 is
    # computed in double and rounded once; float64 is within about 2 ulp (the final steps round).
    dtype = y.dtype
    if dtype == dtypes.float32:
        y, x = sb.cast(y, dtypes.float64), sb.cast(x, dtypes.float64)
    ay, ax = sb.abs(y), sb.abs(x)
    steep = sb.gt(ay, ax)
    small, large = sb.select(steep, ax, ay), sb.select(steep, ay, ax)
    ratio = sb.select(sb.eq(large, 0.0), 0.0,                        # atan2(+-0, +-0)
                      sb.select(sb.eq(small, math.inf), 1.0, sb.div(small, large)))   # both infinite
    angle = sb.atan(ratio)
    angle = sb.select(steep, sb.sub(math.pi / 2, angle), angle)
    angle = sb.select(_negative_or_negative_zero(sb, x), sb.sub(math.pi, angle), angle)
    angle = sb.select(_negative_or_negative_zero(sb, y), sb.neg(angle), angle)
    angle = sb.select(sb.logical_or(sb.isnan(x), sb.isnan(y)), sb.add(x, y), angle)
    return sb.cast(angle, dtype)


def _atan2_grad(op: Operation, g: Tensor) -> list[Tensor]:
    y, x = op.inputs
    scale = g / (square(x) + square(y))
    return [unbroadcast(scale * x, y), unbroadcast(negative(scale * y), x)]


Atan2 = elementwise("Atan2", _atan2_lower, np.arctan2, _atan2_grad, floating_dtype)

def _clip_shape(shapes: Sequence[tuple], attrs: Mapping[str, Any]) -> tuple:
    """The bounds broadcast to ``t``'s shape; they may not make the result larger (TF1)."""
    out = broadcast_shapes(*shapes)
    t = tuple(shapes[0])
    if len(out) != len(t) or any(d is not None and o is not None and o != d for o, d in zip(out, t)):
        raise RuleError("clip_value_min and clip_value_max must broadcast to the shape of t "
                        f"{format_shape(t)}, not enlarge it to {format_shape(out)}")
    return out


def _clip_grad(op: Operation, g: Tensor) -> list[Tensor]:
    # Exact for the forward max(min(t, hi), lo) with ties sent as minimum/maximum send them:
    # t gets g where lo <= t <= hi, hi where t > hi (and hi >= lo), lo everywhere else.
    t, lo, hi = op.inputs
    below_hi = less_equal(t, hi)
    inside = logical_and(greater_equal(t, lo), below_hi)
    to_hi = logical_and(logical_not(below_hi), greater_equal(hi, lo))
    to_lo = logical_not(logical_or(inside, to_hi))
    return [unbroadcast(where(inside, g, 0), t), unbroadcast(where(to_lo, g, 0), lo),
            unbroadcast(where(to_hi, g, 0), hi)]


ClipByValue = OpDef("ClipByValue", "elementwise", _clip_shape, numeric_dtype,
                    reference=lambda values, attrs: np.maximum(np.minimum(values[0], values[2]),
                                                               values[1]),
                    grad_rule=_clip_grad,
                    lower_scalar=lambda sb, args, attrs: sb.maximum(sb.minimum(args[0], args[2]),
                                                                    args[1]))


def sin(x: Any, name: str | None = None) -> Tensor:
    """Sine (radians), accurate to 1 ulp for every finite x; see ``codegen.mathlib``."""
    return Sin(x, name=name)


def cos(x: Any, name: str | None = None) -> Tensor:
    """Cosine (radians), accurate to 1 ulp for every finite x; see ``codegen.mathlib``."""
    return Cos(x, name=name)


def log1p(x: Any, name: str | None = None) -> Tensor:
    """``log(1 + x)``, accurate for small ``x``."""
    return Log1p(x, name=name)


def expm1(x: Any, name: str | None = None) -> Tensor:
    """``exp(x) - 1``, accurate for small ``x``."""
    return Expm1(x, name=name)


def floor(x: Any, name: str | None = None) -> Tensor:
    """The largest integer not greater than ``x`` (a float). It has no gradient (None)."""
    return Floor(x, name=name)


def erf(x: Any, name: str | None = None) -> Tensor:
    """The error function ``2/sqrt(pi) * integral_0^x exp(-t**2) dt``."""
    return Erf(x, name=name)


def clip_by_value(t: Any, clip_value_min: Any, clip_value_max: Any, name: str | None = None) -> Tensor:
    """``t`` clipped to ``[clip_value_min, clip_value_max]`` (TF1: ``max(min(t, max), min)``).

    The bounds are scalars or tensors that broadcast to ``t``'s shape. The gradient reaches ``t``
    where ``min <= t <= max`` and the bounds where they are the result.
    """
    return ClipByValue(t, clip_value_min, clip_value_max, name=name)


# -- derived elementwise ops: compositions of the ops above, with no rules of their own --------------

def squared_difference(x: Any, y: Any, name: str | None = None) -> Tensor:
    """``(x - y) ** 2``, broadcasting (TF1's ``squared_difference``).

    >>> import compiler as cc
    >>> cc.squared_difference(cc.constant([1.0, 4.0]), 2.0).shape
    (2,)
    """
    with composite_scope(name or "SquaredDifference", [x, y]):
        return square(subtract(x, y))


def reciprocal(x: Any, name: str | None = None) -> Tensor:
    """``1 / x`` for a float ``x`` (TF1's ``reciprocal``)."""
    with composite_scope(name or "Reciprocal", [x]):
        x = _float_operand("reciprocal", x)
        return divide(literal_as(1, x.dtype, "reciprocal"), x)


def tan(x: Any, name: str | None = None) -> Tensor:
    """Tangent (radians): ``sin(x) / cos(x)``."""
    with composite_scope(name or "Tan", [x]):
        return divide(sin(x), cos(x))


def _division_operands(function: str, x: Any, y: Any) -> tuple[Tensor, Tensor]:
    """``x`` and ``y`` as tensors of one dtype (a Python number takes the other's), checked for
    what ``floordiv`` and ``floormod`` compute: floats, or int32 (exactly, through float64)."""
    if not isinstance(x, Tensor) and not isinstance(y, Tensor):
        x = convert_to_tensor(x)
    if not isinstance(x, Tensor):
        x = literal_as(x, y.dtype, function)
    if not isinstance(y, Tensor):
        y = literal_as(y, x.dtype, function)
    if x.dtype != y.dtype:
        raise DTypeError(located(f"{function}: {x.name!r} is {x.dtype.name} and {y.name!r} is {y.dtype.name}; "
                                 f"cast one so that they match"))
    if not dtypes.is_floating(x.dtype) and x.dtype not in (dtypes.int32, dtypes.int64):
        raise DTypeError(located(f"{function} takes float, int32 or int64 tensors, got {x.dtype.name} {x.name!r}"))
    return x, y


def _int64_floordiv_lower(sb: Any, x: Any, y: Any) -> Any:
    # The truncating quotient, one less where a remainder is left and the signs differ. A divisor
    # of 0 gives 0 and of -1 the negation (wrapping -2**63): both would trap in the division.
    unsafe = sb.logical_or(sb.eq(y, 0), sb.eq(y, -1))
    divisor = sb.select(unsafe, sb.literal(1, y.dtype), y)
    quotient = sb.index_div(x, divisor)
    remainder = sb.index_rem(x, divisor)
    below = sb.logical_and(sb.ne(remainder, 0), sb.ne(sb.lt(remainder, 0), sb.lt(divisor, 0)))
    floored = sb.select(below, sb.sub(quotient, 1), quotient)
    return sb.select(sb.eq(y, 0), sb.literal(0, x.dtype), sb.select(sb.eq(y, -1), sb.neg(x), floored))


def _int64_floordiv_reference(x: np.ndarray, y: np.ndarray) -> np.ndarray:
    x, y = np.broadcast_arrays(np.asarray(x, np.int64), np.asarray(y, np.int64))
    with np.errstate(divide="ignore", over="ignore"):
        floored = np.floor_divide(x, np.where((y == 0) | (y == -1), 1, y))
    return np.where(y == 0, 0, np.where(y == -1, -x, floored)).astype(np.int64)   # -x wraps, as numpy's //


# int64 // int64 exactly (the int32 quotient goes through float64, exact there; int64's may not be).
Int64FloorDiv = elementwise("Int64FloorDiv", _int64_floordiv_lower, _int64_floordiv_reference, no_gradient)


def floordiv(x: Any, y: Any, name: str | None = None) -> Tensor:
    """``floor(x / y)`` (TF1's ``floordiv``; also ``x // y``): for floats the quotient rounded,
    then floored, as TF1 (Python's ``//`` can differ by one where ``x / y`` rounds up to an
    integer: ``1.0 // 0.1`` is 9.0 there, 10.0 here).

    Floats, int32 or int64: the quotient of two int32 is computed in float64, where it is exact;
    int64's by integer division. An integer division by zero does not raise: it gives 0, as
    numpy's does (and ``-2**63 // -1`` wraps to ``-2**63``, as numpy's).

    >>> import compiler as cc
    >>> (cc.constant([7, -7]) // 2).dtype.name
    'int32'
    """
    with composite_scope(name or "FloorDiv", [x, y]):
        x, y = _division_operands("floordiv", x, y)
        if dtypes.is_floating(x.dtype):
            return floor(divide(x, y))
        if x.dtype == dtypes.int64:
            return Int64FloorDiv(x, y)
        quotient = cast(floor(divide(cast(x, dtypes.float64), cast(y, dtypes.float64))), x.dtype)
        # -2**31 // -1 is 2**31, which the cast saturates: wrap it as numpy (and -x) do
        return where(equal(y, 0), 0, where(equal(y, -1), negative(x), quotient))


def _floormod_reference(x: np.ndarray, y: np.ndarray) -> np.ndarray:
    with np.errstate(divide="ignore", invalid="ignore"):
        return np.mod(x, y)   # C's fmod, then y added where the signs differ: exact


def _floormod_grad(op: Operation, g: Tensor) -> list[Tensor]:
    x, y = op.inputs   # TF1's: x - floor(x / y) * y with the floor held constant
    return [unbroadcast(g, x), unbroadcast(negative(g) * floor(divide(x, y)), y)]


FloorMod = elementwise("FloorMod", lambda sb, x, y: sb.floormod(x, y), _floormod_reference, _floormod_grad,
                       floating_dtype)


def floormod(x: Any, y: Any, name: str | None = None) -> Tensor:
    """The remainder of ``x / y`` with the sign of ``y``, as Python's ``%`` (TF1's ``floormod``
    and ``mod``; also ``x % y``). Floats: numpy's ``%``, from an exact remainder (mathlib's
    ``remainder``: exact for every float32, and for float64 while ``|x / y| < 2**400``, NaN
    beyond), then ``y`` added where the signs differ; ``x % inf`` is ``x`` where ``x`` has
    the sign of ``inf``, else ``inf``; ``x % 0`` is NaN. int32 (through float64) and int64 (from
    ``floordiv``): exact; ``x % 0`` is 0, as numpy's.

    >>> import compiler as cc
    >>> (cc.constant([7.0, -7.0]) % 3.0).shape
    (2,)
    """
    x, y = _division_operands("floormod", x, y)
    if dtypes.is_floating(x.dtype):
        return FloorMod(x, y, name=name)
    if x.dtype == dtypes.int64:
        with composite_scope(name or "FloorMod", [x, y]):
            return where(equal(y, 0), 0, subtract(x, multiply(Int64FloorDiv(x, y), y)))
    with composite_scope(name or "FloorMod", [x, y]):
        wide_x, wide_y = cast(x, dtypes.float64), cast(y, dtypes.float64)
        remainder = cast(subtract(wide_x, multiply(floor(divide(wide_x, wide_y)), wide_y)), x.dtype)
        return where(equal(y, 0), 0, remainder)


def ceil(x: Any, name: str | None = None) -> Tensor:
    """The smallest integer not below ``x`` (TF1's ``ceil``): ``-floor(-x)``; its gradient is 0."""
    with composite_scope(name or "Ceil", [x]):
        return negative(floor(negative(x)))


def truediv(x: Any, y: Any, name: str | None = None) -> Tensor:
    """``x / y`` as TF1's ``truediv``: integers are divided as float64 (TF1's result type for
    int32 and int64), floats as they are.

    >>> import compiler as cc
    >>> cc.truediv(cc.constant([7, -7]), 2).dtype.name
    'float64'
    """
    with composite_scope(name or "truediv", [x, y]):
        return divide(x, y)


def div(x: Any, y: Any, name: str | None = None) -> Tensor:
    """TF1's ``div`` (Python 2's ``/``): ``floordiv`` for integers, ``divide`` for floats."""
    kinds = [v.dtype for v in (x, y) if isinstance(v, Tensor)]
    if kinds and all(dtypes.is_integer(d) for d in kinds):
        return floordiv(x, y, name=name)
    return divide(x, y, name=name)


def to_float(x: Any, name: str | None = None) -> Tensor:
    """TF1's ``to_float``: ``cast(x, float32)``."""
    return cast(x, dtypes.float32, name=name or "ToFloat")


def to_double(x: Any, name: str | None = None) -> Tensor:
    """TF1's ``to_double``: ``cast(x, float64)``."""
    return cast(x, dtypes.float64, name=name or "ToDouble")


def to_int32(x: Any, name: str | None = None) -> Tensor:
    """TF1's ``to_int32``: ``cast(x, int32)``."""
    return cast(x, dtypes.int32, name=name or "ToInt32")


def to_int64(x: Any, name: str | None = None) -> Tensor:
    """TF1's ``to_int64``: ``cast(x, int64)``."""
    return cast(x, dtypes.int64, name=name or "ToInt64")


def logical_xor(x: Any, y: Any, name: str | None = None) -> Tensor:
    """Elementwise exclusive or of two bool tensors (TF1's ``logical_xor``; also ``x ^ y``)."""
    with composite_scope(name or "LogicalXor", [x, y]):
        return logical_and(logical_or(x, y), logical_not(logical_and(x, y)))


def _float_operand(function: str, x: Any) -> Tensor:
    x = convert_to_tensor(x)
    if not dtypes.is_floating(x.dtype):
        raise DTypeError(located(f"{function} takes float32 or float64 tensors, got {x.dtype.name} {x.name!r}"))
    return x


def is_finite(x: Any, name: str | None = None) -> Tensor:
    """True where ``x`` is neither NaN nor infinite (TF1's ``is_finite``)."""
    with composite_scope(name or "IsFinite", [x]):
        x = _float_operand("is_finite", x)
        return less(abs(x), literal_as(math.inf, x.dtype, "is_finite"))   # false for NaN


def is_inf(x: Any, name: str | None = None) -> Tensor:
    """True where ``x`` is +inf or -inf (TF1's ``is_inf``)."""
    with composite_scope(name or "IsInf", [x]):
        x = _float_operand("is_inf", x)
        return equal(abs(x), literal_as(math.inf, x.dtype, "is_inf"))


def round(x: Any, name: str | None = None) -> Tensor:  # noqa: A001 (TF's name)
    """``x`` rounded to the nearest integer, halves to the even one (TF1's ``round``, numpy's
    ``rint``); integers are returned as they are. Built on ``floor``: its gradient is None.

    >>> import compiler as cc
    >>> from runtime import Session
    >>> with Session() as sess:
    ...     sess.run(cc.round(cc.constant([0.5, 1.5, 2.5, -0.5, -1.7]))).tolist()
    [0.0, 2.0, 2.0, -0.0, -2.0]
    """
    with composite_scope(name or "Round", [x]):
        x = convert_to_tensor(x)
        if dtypes.is_integer(x.dtype):
            return x
        x = _float_operand("round", x)
        below = floor(x)
        fraction = subtract(x, below)   # exact: both are floats of x's binade or below
        odd = not_equal(floormod(below, literal_as(2, x.dtype, "round")), 0)
        up = logical_or(greater(fraction, 0.5), logical_and(equal(fraction, 0.5), odd))
        rounded = where(up, add(below, 1), below)
        # -0.4 rounds to -0.0, as rint: the sign of a zero result is x's
        return where(logical_and(equal(rounded, 0), less(x, 0)), literal_as(-0.0, x.dtype, "round"), rounded)


def _half_exp(a: Tensor) -> Tensor:
    """``exp(a) / 2`` for large ``a``, as ``(exp(a / 2) / 2) * exp(a / 2)``: finite wherever the
    result is (``exp(a)`` alone overflows first), within about 2 ulp."""
    root = exp(multiply(a, 0.5))
    return multiply(multiply(root, 0.5), root)


def _hyperbolic(function: str, x: Any, near: Callable[[Tensor], Tensor], odd: bool) -> Tensor:
    x = _float_operand(function, x)
    a = abs(x)
    large = greater(a, 20.0)   # past it exp(-a) is below an ulp of exp(a)
    far = _half_exp(where(large, a, 0.0))
    if odd:
        far = where(less(x, 0), negative(far), far)
    return where(large, far, near(where(large, 0.0, x)))   # each branch only on the values it takes


def sinh(x: Any, name: str | None = None) -> Tensor:
    """Hyperbolic sine, ``(expm1(x) - expm1(-x)) / 2`` (accurate near 0), ``±exp(|x|) / 2`` for
    large ``|x|`` (finite up to the largest result that fits)."""
    with composite_scope(name or "Sinh", [x]):
        return _hyperbolic("sinh", x, lambda v: multiply(subtract(expm1(v), expm1(negative(v))), 0.5), odd=True)


def _cosh_near(v: Tensor) -> Tensor:
    """``(exp(v) + exp(-v)) / 2``; below 0.5 in magnitude ``1 + 2 sinh(v/2)**2``, whose derivative
    ``2 sinh(v/2) cosh(v/2)`` does not cancel near 0 as ``(exp(v) - exp(-v)) / 2`` does."""
    small = less(abs(v), 0.5)
    inner = where(small, v, 0.0)   # each branch only on the values it takes
    outer = where(small, 0.0, v)
    return where(small, add(multiply(square(sinh(multiply(inner, 0.5))), 2.0), 1.0),
                 multiply(add(exp(outer), exp(negative(outer))), 0.5))


def cosh(x: Any, name: str | None = None) -> Tensor:
    """Hyperbolic cosine, ``(exp(x) + exp(-x)) / 2`` (``1 + 2 sinh(x/2)**2`` near 0, so that its
    gradient ``sinh`` is accurate there), ``exp(|x|) / 2`` for large ``|x|``."""
    with composite_scope(name or "Cosh", [x]):
        return _hyperbolic("cosh", x, _cosh_near, odd=False)


def _huge(x: Tensor) -> float:
    """Beyond this, ``x * x`` is not needed next to ``x`` (nor would it fit)."""
    return 2.0 ** 26 if x.dtype == dtypes.float32 else 2.0 ** 500


def asinh(x: Any, name: str | None = None) -> Tensor:
    """Inverse hyperbolic sine: ``log1p(a + a*a / (1 + sqrt(1 + a*a)))`` for ``a = |x|`` (accurate
    near 0), ``log(a) + log(2)`` for huge ``a``, with ``x``'s sign."""
    with composite_scope(name or "Asinh", [x]):
        x = _float_operand("asinh", x)
        a = abs(x)
        huge = greater(a, _huge(x))
        moderate = where(huge, 1.0, a)   # each branch only on the values it takes (finite gradients)
        near = log1p(add(moderate, divide(square(moderate), add(sqrt(add(square(moderate), 1.0)), 1.0))))
        far = add(log(where(huge, a, 1.0)), math.log(2.0))
        magnitude = where(huge, far, near)
        return where(equal(x, 0), x, where(less(x, 0), negative(magnitude), magnitude))   # -0.0 stays -0.0


def acosh(x: Any, name: str | None = None) -> Tensor:
    """Inverse hyperbolic cosine (NaN below 1): ``log1p(t + sqrt(t) * sqrt(t + 2))`` for
    ``t = x - 1`` (accurate near 1), ``log(x) + log(2)`` for huge ``x``."""
    with composite_scope(name or "Acosh", [x]):
        x = _float_operand("acosh", x)
        huge = greater(x, _huge(x))
        t = subtract(where(huge, 2.0, x), 1.0)
        # sqrt(t) * sqrt(t + 2), not sqrt(t * (t + 2)): at t = 0 the derivative is inf (TF1's), not 0 * inf
        near = log1p(add(t, multiply(sqrt(t), sqrt(add(t, 2.0)))))
        far = add(log(where(huge, x, 1.0)), math.log(2.0))
        return where(less(x, 1.0), literal_as(math.nan, x.dtype, "acosh"), where(huge, far, near))


def atanh(x: Any, name: str | None = None) -> Tensor:
    """Inverse hyperbolic tangent, ``(log1p(a) - log1p(-a)) / 2`` for ``a = |x|`` with ``x``'s
    sign: ±inf at ±1 (its gradient too, TF1's ``1 / (1 - x**2)``), NaN beyond."""
    with composite_scope(name or "Atanh", [x]):
        x = _float_operand("atanh", x)
        a = abs(x)
        magnitude = multiply(subtract(log1p(a), log1p(negative(a))), 0.5)
        return where(equal(x, 0), x, where(less(x, 0), negative(magnitude), magnitude))


def truncatediv(x: Any, y: Any, name: str | None = None) -> Tensor:
    """``x / y`` rounded toward zero (TF1's ``truncatediv``; C's integer division). Floats,
    int32 or int64, as ``floordiv``; an integer division by zero gives 0."""
    with composite_scope(name or "TruncateDiv", [x, y]):
        x, y = _division_operands("truncatediv", x, y)
        if dtypes.is_floating(x.dtype):
            quotient = divide(x, y)
            return where(less(quotient, 0), ceil(quotient), floor(quotient))
        floored = floordiv(x, y)
        inexact = not_equal(floormod(x, y), 0)
        return where(logical_and(inexact, not_equal(less(x, 0), less(y, 0))), add(floored, 1), floored)


def truncatemod(x: Any, y: Any, name: str | None = None) -> Tensor:
    """The remainder of ``truncatediv``, with ``x``'s sign (TF1's ``truncatemod``; C's ``fmod``).
    Floats: ``floormod`` of the magnitudes given ``x``'s sign (exact within ``floormod``'s range:
    every float32, float64 while ``|x / y| < 2**400``); integers: ``floormod``'s, less ``y`` where
    the signs differ."""
    with composite_scope(name or "TruncateMod", [x, y]):
        x, y = _division_operands("truncatemod", x, y)
        if dtypes.is_floating(x.dtype):
            magnitude = floormod(abs(x), abs(y))
            # a zero takes x's sign too, as C's: x * 0 is -0.0 for a negative x
            return where(equal(magnitude, 0), multiply(x, 0.0), where(less(x, 0), negative(magnitude), magnitude))
        remainder = floormod(x, y)
        differ = logical_and(not_equal(remainder, 0), not_equal(less(x, 0), less(y, 0)))
        return where(differ, subtract(remainder, y), remainder)


def div_no_nan(x: Any, y: Any, name: str | None = None) -> Tensor:
    """``x / y``, and 0 where ``y`` is 0 (TF's ``div_no_nan``): the mean of no values is 0. Its
    gradient is finite there too.

    >>> import compiler as cc
    >>> from runtime import Session
    >>> with Session() as sess:
    ...     sess.run(cc.div_no_nan(cc.constant([1.0, 2.0]), cc.constant([4.0, 0.0]))).tolist()
    [0.25, 0.0]
    """
    with composite_scope(name or "div_no_nan", [x, y]):
        if not isinstance(x, Tensor) and isinstance(y, Tensor):
            x = literal_as(x, y.dtype, "div_no_nan")
        x = convert_to_tensor(x)
        if not isinstance(y, Tensor):
            y = literal_as(y, x.dtype, "div_no_nan")
        _float_operand("div_no_nan", x)
        empty = equal(y, 0)
        safe = where(empty, literal_as(1, y.dtype, "div_no_nan"), y)
        return where(empty, literal_as(0, x.dtype, "div_no_nan"), divide(x, safe))


def _zero_guarded(function: str, x: Any, y: Any) -> tuple[Tensor, Tensor, Tensor]:
    """(x, y with 1 where x is 0, whether x is 0) for TF's ``xlogy`` and ``xdivy``: the guard keeps
    the unused branch finite, so the gradients are finite where x is 0."""
    if not isinstance(x, Tensor) and isinstance(y, Tensor):
        x = literal_as(x, y.dtype, function)
    x = _float_operand(function, x)
    if not isinstance(y, Tensor):
        y = literal_as(y, x.dtype, function)
    y = _float_operand(function, y)
    zero_x = equal(x, 0)
    return x, where(zero_x, literal_as(1, y.dtype, function), y), zero_x


def xlogy(x: Any, y: Any, name: str | None = None) -> Tensor:
    """``x * log(y)``, and 0 where ``x`` is 0 whatever ``y`` is (TF's ``math.xlogy``): the
    entropy term ``p log p`` of a zero probability is 0.

    >>> import compiler as cc
    >>> from runtime import Session
    >>> with Session() as sess:
    ...     sess.run(cc.math.xlogy(cc.constant([0.0, 2.0]), cc.constant([0.0, 1.0]))).tolist()
    [0.0, 0.0]
    """
    with composite_scope(name or "Xlogy", [x, y]):
        x, safe_y, zero_x = _zero_guarded("xlogy", x, y)
        return where(zero_x, literal_as(0, x.dtype, "xlogy"), multiply(x, log(safe_y)))


def xdivy(x: Any, y: Any, name: str | None = None) -> Tensor:
    """``x / y``, and 0 where ``x`` is 0 whatever ``y`` is (TF's ``math.xdivy``)."""
    with composite_scope(name or "Xdivy", [x, y]):
        x, safe_y, zero_x = _zero_guarded("xdivy", x, y)
        return where(zero_x, literal_as(0, x.dtype, "xdivy"), divide(x, safe_y))


def reciprocal_no_nan(x: Any, name: str | None = None) -> Tensor:
    """``1 / x``, and 0 where ``x`` is 0 (TF's ``math.reciprocal_no_nan``)."""
    with composite_scope(name or "reciprocal_no_nan", [x]):
        x = _float_operand("reciprocal_no_nan", x)
        return div_no_nan(literal_as(1, x.dtype, "reciprocal_no_nan"), x)


def realdiv(x: Any, y: Any, name: str | None = None) -> Tensor:
    """``x / y`` for float tensors (TF1's ``realdiv``)."""
    with composite_scope(name or "RealDiv", [x, y]):
        if not isinstance(x, Tensor) and isinstance(y, Tensor):
            x = literal_as(x, y.dtype, "realdiv")
        x = _float_operand("realdiv", x)
        return divide(x, y)


def scalar_mul(scalar: Any, x: Any, name: str | None = None) -> Tensor:
    """``scalar * x`` for a scalar (TF1's ``scalar_mul``); anything else is an error."""
    if len(getattr(scalar, "shape", np.shape(scalar))) != 0:
        raise ShapeError(located(f"scalar_mul: the scalar must have rank 0, got shape "
                                 f"{format_shape(tuple(getattr(scalar, 'shape', np.shape(scalar))))}"))
    with composite_scope(name or "scalar_mul", [scalar, x]):
        x = convert_to_tensor(x)
        if not isinstance(scalar, Tensor):
            scalar = literal_as(scalar, x.dtype, "scalar_mul")
        return multiply(scalar, x)



def atan(x: Any, name: str | None = None) -> Tensor:
    """Arctangent, in (-pi/2, pi/2): float32 correctly rounded, float64 within 1 ulp; see
    ``codegen.mathlib``."""
    return Atan(x, name=name)


def atan2(y: Any, x: Any, name: str | None = None) -> Tensor:
    """The angle of the point ``(x, y)``, in [-pi, pi], as C's and numpy's ``atan2`` (signed zeros
    and infinities included): TF1's ``atan2(y, x)``.

    >>> import numpy as np, compiler as cc
    >>> from runtime import Session
    >>> y, x = cc.constant([1.0, -1.0], "float64"), cc.constant([-1.0, 0.0], "float64")
    >>> with Session() as sess:
    ...     np.round(sess.run(cc.atan2(y, x)), 6).tolist()
    [2.356194, -1.570796]
    """
    return Atan2(y, x, name=name)


def _side(x: Tensor) -> Tensor:
    """sqrt(1 - x**2), formed as sqrt((1 - x)(1 + x)): 1 - x is exact near 1."""
    one = literal_as(1, x.dtype, "asin")
    return sqrt(multiply(subtract(one, x), add(one, x)))


def asin(x: Any, name: str | None = None) -> Tensor:
    """Arcsine, in [-pi/2, pi/2]; NaN outside [-1, 1] (TF1's ``asin``): ``atan2(x, sqrt(1 - x**2))``."""
    with composite_scope(name or "Asin", [x]):
        x = _float_operand("asin", x)
        return atan2(x, _side(x))


def acos(x: Any, name: str | None = None) -> Tensor:
    """Arccosine, in [0, pi]; NaN outside [-1, 1] (TF1's ``acos``): ``atan2(sqrt(1 - x**2), x)``."""
    with composite_scope(name or "Acos", [x]):
        x = _float_operand("acos", x)
        return atan2(_side(x), x)

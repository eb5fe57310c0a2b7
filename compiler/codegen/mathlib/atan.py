"""atan: reduced to |u| <= tan(pi/8), then u + u**3 * P(u**2).

For a = |x|: t = 1/a when a > 1 (atan(a) = pi/2 - atan(t)), else t = a; for t > tan(pi/8),
u = (t - 1)/(t + 1) (atan(t) = pi/4 + atan(u)), else u = t. So atan(a) = offset + sign * atan(u)
with offset 0, pi/4 or pi/2 (to double length) and the sign copied from x at the end.

float64: t and u are carried to double length (1/a with its FMA residual, the quotient with
``divide_double_length``), and the offset is added with an exact two-sum, so only the last
addition rounds (plus P's and the reduction's ~2**-60 relative errors).
float32: the same steps in double without the low parts (relative error ~2**-51), rounded once.

Tables: Chebyshev fits (mpmath.chebyfit) of (atan(s) - s)/s**3 in z = s**2 on [0, tan(pi/8)**2],
rounded to double; weighted errors 2**-64.3 (13 terms, float64) and 2**-40.4 (8 terms, float32).
"""

from __future__ import annotations

from decimal import Decimal, localcontext

from llvmlite import ir

from .core import FLOAT32, PI, Ops, divide_double_length, two_sum, wide_ops

_ATAN_P_F64 = (
    -0.3333333333333333,
    0.19999999999999993,
    -0.14285714285711518,
    0.11111111110754729,
    -0.0909090906700999,
    0.07692306736000173,
    -0.06666642020055166,
    0.058819252531928636,
    -0.05258041554297779,
    0.04719395030027433,
    -0.04104436265755082,
    0.030635704112969498,
    -0.01391822929102443,
)
_ATAN_P_F32 = (
    -0.33333333333266196,
    0.19999999949854794,
    -0.142857081103604,
    0.11110819716745676,
    -0.09084101895346429,
    0.07604800046078292,
    -0.06027307460946675,
    0.03295679541870136,
)
_TAN_PI_OVER_8 = 0.41421356237309503   # sqrt(2) - 1, rounded: which side it falls on does not matter

with localcontext() as _ctx:
    _ctx.prec = 60
    _PI_OVER_4_HI = float(PI / 4)
    _PI_OVER_4_LO = float(PI / 4 - Decimal(_PI_OVER_4_HI))
    _PI_OVER_2_HI = float(PI / 2)
    _PI_OVER_2_LO = float(PI / 2 - Decimal(_PI_OVER_2_HI))


def _atan_magnitude(ops: Ops, a: ir.Value, double_length: bool) -> ir.Value:
    """atan(a) for a = |x| (NaN flows through: every comparison with it is false)."""
    coefficients = _ATAN_P_F64 if double_length else _ATAN_P_F32
    zero, one = ops.f(0.0), ops.f(1.0)
    big = ops.cmp(">", a, one)
    reciprocal = ops.div(one, a)
    t_hi = ops.select(big, reciprocal, a)
    t_lo = zero
    if double_length:   # (1 - q*a)/a ~ q * fma(-q, a, 1); none for a = inf (q = 0, the residual NaN)
        residual = ops.mul(reciprocal, ops.fma(ops.neg(reciprocal), a, one))
        t_lo = ops.select(ops.b.and_(big, ops.cmp("<", a, ops.f(float("inf")))), residual, zero)
    mid = ops.cmp(">", t_hi, ops.f(_TAN_PI_OVER_8))
    if double_length:
        n_hi, n_err = two_sum(ops, t_hi, ops.f(-1.0))
        d_hi, d_err = two_sum(ops, t_hi, one)
        q, q_corr = divide_double_length(ops, n_hi, ops.add(n_err, t_lo), d_hi, ops.add(d_err, t_lo))
    else:
        q, q_corr = ops.div(ops.sub(t_hi, one), ops.add(t_hi, one)), zero
    u_hi, u_lo = ops.select(mid, q, t_hi), ops.select(mid, q_corr, t_lo)
    z = ops.mul(u_hi, u_hi)
    tail = ops.add(u_lo, ops.mul(ops.mul(u_hi, z), ops.polynomial(z, coefficients)))
    # atan(a) = offset + sign * (u_hi + tail)
    offset_hi = ops.select(big, ops.f(_PI_OVER_2_HI), ops.select(mid, ops.f(_PI_OVER_4_HI), zero))
    offset_lo = ops.select(big, ops.f(_PI_OVER_2_LO), ops.select(mid, ops.f(_PI_OVER_4_LO), zero))
    offset_hi = ops.select(ops.b.and_(big, mid), ops.f(_PI_OVER_4_HI), offset_hi)   # pi/2 - (pi/4 + atan u)
    offset_lo = ops.select(ops.b.and_(big, mid), ops.f(_PI_OVER_4_LO), offset_lo)
    u_hi, tail = ops.select(big, ops.neg(u_hi), u_hi), ops.select(big, ops.neg(tail), tail)
    total, error = two_sum(ops, offset_hi, u_hi)
    return ops.add(total, ops.add(error, ops.add(offset_lo, tail)))


def emit_atan(builder: ir.IRBuilder, x: ir.Value) -> ir.Value:
    """Emit atan(x) for a float or double x: odd, +-pi/2 at +-inf, NaN kept."""
    ops = Ops(builder, x)
    if ops.fmt is FLOAT32:
        wide = wide_ops(builder)
        a = wide.fabs(builder.fpext(x, wide.ty))
        return ops.copysign(builder.fptrunc(_atan_magnitude(wide, a, double_length=False), ops.ty), x)
    return ops.copysign(_atan_magnitude(ops, ops.fabs(x), double_length=True), x)

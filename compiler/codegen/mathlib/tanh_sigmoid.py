"""tanh (from exp(-2|x|)) and sigmoid (from exp(-|x|)), to double length: float64 in
double-double, float32 in float32 pairs (8 lanes per AVX2 vector rather than 4 in double).
The exponentials come from exp_log.py.
"""

from __future__ import annotations

from llvmlite import ir

from .core import FLOAT32, Ops, divide_double_length, fast_two_sum
from .exp_log import exp_f32_hi_lo, exp_from_parts, exp_hi_lo, exp_parts, expm1_from_parts

# |x| below which tanh uses -t/(2+t) (float64) or its odd polynomial (float32)
# rather than 1 - 2E/(1+E).
_TANH_SPLIT = 0.55

# tanh(a) = a + a**3 * P(a**2) for |a| <= 0.56, float32 coefficients: the error of
# a**3 * P relative to tanh(a) is below 2**-29.4 (minimax weighted by a**3/tanh(a),
# rounded to float32 one coefficient at a time, refitting the rest).
_F32_TANH_P = (
    -0.3333331346511841,
    0.13332436978816986,
    -0.053835757076740265,
    0.021000375971198082,
    -0.00616961345076561,
)
# Beyond |x| = 10 tanh rounds to 1 in float32 and E = exp(-2|x|) is still normal.
_F32_TANH_CLAMP = 10.0


def _reciprocal_f32(ops: Ops, d_hi: ir.Value, d_lo: ir.Value) -> tuple[ir.Value, ir.Value]:
    """1/(d_hi + d_lo) as q + correction, for 1 <= d_hi <= 2 and |d_lo| <= 2**-23: one division.
    q = 1/d_hi is correctly rounded, so 1 - q*d_hi is exact in one FMA."""
    q = ops.div(ops.f(1.0), d_hi)
    residual = ops.fma(ops.neg(q), d_hi, ops.f(1.0))
    return q, ops.mul(ops.fma(ops.neg(q), d_lo, residual), q)


def _one_over_one_plus_f32(ops: Ops, e_hi: ir.Value, e_lo: ir.Value) -> tuple[ir.Value, ir.Value]:
    """1/(1 + E) as q + correction, for E = e_hi + e_lo in [0, 1]."""
    d_hi, d_err = fast_two_sum(ops, ops.f(1.0), e_hi)
    return _reciprocal_f32(ops, d_hi, ops.add(d_err, e_lo))


def _tanh_f32(ops: Ops, x: ir.Value) -> ir.Value:
    """float32 tanh|x|, the sign copied from x.

    |x| < 0.55: a + a**3*P(a**2), whose correction is at most 9% of the result,
    so its rounding errors weigh little next to the final one.  Otherwise
    2R - 1 with R = 1/(1 + E) to double length (one division), E = exp(-2|x|)
    as a float32 pair: R >= 3/4, so 2q - 1 is exact and the result rounds
    once; E's error is damped by 2R**2*E <= 3/8.  Max error over all float32
    inputs: 0.74 ulp (near the split).
    """
    a = ops.fabs(x)
    a2 = ops.mul(a, a)
    near = ops.fma(ops.mul(a, a2), ops.polynomial(a2, _F32_TANH_P), a)
    # Clamped, E >= exp(-20) and 2**n is normal.
    e_hi, e_lo = exp_f32_hi_lo(ops, ops.mul(ops.f(-2.0), ops.clamp_keep_nan(a, 0.0, _F32_TANH_CLAMP)),
                               exact_reduction=False, normal_scale=True)
    q, q_corr = _one_over_one_plus_f32(ops, e_hi, e_lo)
    far = ops.fma(ops.f(2.0), q_corr, ops.fma(ops.f(2.0), q, ops.f(-1.0)))
    return ops.copysign(ops.select(ops.cmp("<", a, ops.f(_TANH_SPLIT)), near, far), x)


def _sigmoid_f32(ops: Ops, x: ir.Value) -> ir.Value:
    """float32 sigmoid: R = 1/(1 + E) to double length (one division), E = exp(-|x|) as a
    float32 pair; x >= 0: R, otherwise E*R, each rounded once."""
    # Beyond |x| = 120 the result is 0 or 1; NaN flows through.
    e_hi, e_lo = exp_f32_hi_lo(ops, ops.clamp_keep_nan(ops.neg(ops.fabs(x)), ops.fmt.exp_clamp_lo, 0.0))
    q, q_corr = _one_over_one_plus_f32(ops, e_hi, e_lo)
    positive = ops.add(q, q_corr)
    negative = ops.fma(e_hi, q, ops.fma(e_hi, q_corr, ops.mul(e_lo, q)))
    return ops.select(ops.cmp(">=", x, ops.f(0.0)), positive, negative)


def emit_tanh(builder: ir.IRBuilder, x: ir.Value) -> ir.Value:
    """Emit tanh(x) for a float or double x (float: see _tanh_f32).

    With E = exp(-2|x|) and t = E - 1 (both double length, one reduction):
    |x| < 0.55: -t / (2 + t)        (no cancellation near 0)
    otherwise:  1 - 2E / (1 + E)    (well conditioned near 1)
    One double-length division serves both; the sign is copied from x.
    """
    ops = Ops(builder, x)
    if ops.fmt is FLOAT32:
        return _tanh_f32(ops, x)
    fmt = ops.fmt
    y = ops.fabs(x)
    parts = exp_parts(ops, ops.clamp(ops.mul(ops.f(-2.0), y), fmt.expm1_clamp_lo, 0.0))
    t_hi, t_lo = expm1_from_parts(ops, parts)
    e_hi, e_lo = exp_from_parts(ops, parts)
    near_zero = ops.cmp("<", y, ops.f(_TANH_SPLIT))

    two_plus_t, two_plus_t_err = fast_two_sum(ops, ops.f(2.0), t_hi)  # -1 < t <= 0
    one_plus_e, one_plus_e_err = fast_two_sum(ops, ops.f(1.0), e_hi)  # 0 <= E <= 1
    n_hi = ops.select(near_zero, ops.neg(t_hi), ops.add(e_hi, e_hi))
    n_lo = ops.select(near_zero, ops.neg(t_lo), ops.add(e_lo, e_lo))
    d_hi = ops.select(near_zero, two_plus_t, one_plus_e)
    d_lo = ops.select(near_zero, ops.add(two_plus_t_err, t_lo), ops.add(one_plus_e_err, e_lo))
    q, q_corr = divide_double_length(ops, n_hi, n_lo, d_hi, d_lo)

    one_minus_q, one_minus_q_err = fast_two_sum(ops, ops.f(1.0), ops.neg(q))  # q <= 1/2
    magnitude = ops.select(near_zero, ops.add(q, q_corr),
                           ops.add(one_minus_q, ops.sub(one_minus_q_err, q_corr)))
    return ops.select(ops.is_nan(x), x, ops.copysign(magnitude, x))


def emit_sigmoid(builder: ir.IRBuilder, x: ir.Value) -> ir.Value:
    """Emit 1/(1 + exp(-x)) for a float or double x, accurate for both signs.

    From E = exp(-|x|) (never overflows): x >= 0: 1/(1 + E); x < 0: E/(1 + E),
    as one double-length division (float32: see _sigmoid_f32).
    """
    ops = Ops(builder, x)
    if ops.fmt is FLOAT32:
        return _sigmoid_f32(ops, x)
    e_hi, e_lo = exp_hi_lo(ops, ops.neg(ops.fabs(x)))
    d_hi, d_err = fast_two_sum(ops, ops.f(1.0), e_hi)  # 0 <= E <= 1
    positive = ops.cmp(">=", x, ops.f(0.0))
    n_hi = ops.select(positive, ops.f(1.0), e_hi)
    n_lo = ops.select(positive, ops.f(0.0), e_lo)
    q, q_corr = divide_double_length(ops, n_hi, n_lo, d_hi, ops.add(d_err, e_lo))
    return ops.add(q, q_corr)

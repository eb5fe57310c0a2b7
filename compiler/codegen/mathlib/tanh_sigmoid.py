"""tanh (from exp(-2|x|)) and sigmoid (from exp(-|x|)): float64 to double length, float32 in
plain double and rounded once.  The exponentials come from exp_log.py.
"""

from __future__ import annotations

from llvmlite import ir

from .core import FLOAT32, Ops, divide_double_length, fast_two_sum, wide_ops
from .exp_log import exp_from_parts, exp_hi_lo, exp_parts, expm1_from_parts, wide_exp, wide_expm1

# |x| below which tanh uses -t/(2+t) rather than 1 - 2E/(1+E).
_TANH_SPLIT = 0.55


def _tanh_f32(ops: Ops, x: ir.Value) -> ir.Value:
    """tanh|x| = -t/(2 + t) with t = expm1(-2|x|) in double; the sign copied from x.

    t has relative error ~2**-31 and the quotient amplifies it at most 1.2-fold,
    for every |x|.  Beyond |x| = 10, where tanh rounds to 1, -2|x| is clamped.
    """
    w = wide_ops(ops.b)
    z = ops.clamp_keep_nan(ops.mul(ops.f(-2.0), ops.fabs(x)), ops.fmt.expm1_clamp_lo, 0.0)
    t = wide_expm1(w, ops.b.fpext(z, w.ty))
    magnitude = w.div(t, w.sub(w.f(-2.0), t))
    return ops.copysign(ops.b.fptrunc(magnitude, ops.ty), x)


def _sigmoid_f32(ops: Ops, x: ir.Value) -> ir.Value:
    """E = exp(-|x|) in double; 1/(1 + E) for x >= 0, E/(1 + E) otherwise."""
    w = wide_ops(ops.b)
    # Beyond |x| = 120 the result is 0 or 1 and E is still a normal double.
    minus_abs = ops.clamp_keep_nan(ops.neg(ops.fabs(x)), ops.fmt.exp_clamp_lo, 0.0)
    e = wide_exp(w, ops.b.fpext(minus_abs, w.ty))
    numerator = w.select(ops.cmp(">=", x, ops.f(0.0)), w.f(1.0), e)
    return ops.b.fptrunc(w.div(numerator, w.add(w.f(1.0), e)), ops.ty)


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
    as one double-length division (float: the same in plain double).
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

"""exp, expm1, log and log1p, and the pieces of them that tanh, sigmoid, pow and erf build on.

float64: one Cody-Waite reduction (``exp_parts``) feeds exp and expm1 to double length;
``log_core`` is the atanh-series logarithm.  float32: exp, log and log1p in float32 with
FMA-based compensation, expm1 in plain double (``wide_exp``, ``wide_expm1``).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Sequence

from llvmlite import ir

from .core import (
    F32_SHIFTER,
    F64_SHIFTER,
    FLOAT32,
    FLOAT64,
    Ops,
    fast_two_sum,
    power_of_two,
    split_exponent,
    two_sum,
    wide_ops,
)

# ---------------------------------------------------------------------------
# float64 (and the double-length pieces other functions share)
# ---------------------------------------------------------------------------

@dataclass(frozen=True)
class ExpParts:
    """exp(x) = 2**(n1 + n2) * (1 + p + p_lo), from one argument reduction."""

    n1: ir.Value
    n2: ir.Value
    p: ir.Value
    p_lo: ir.Value


def exp_parts(ops: Ops, x: ir.Value, x_lo: ir.Value | None = None) -> ExpParts:
    """Reduce a finite, clamped x (+ x_lo) and evaluate expm1 of the reduced argument.

    Cody-Waite: x = n*ln2 + r with n = rint(x/ln2), |r| <= ~ln2/2, where
    r = r_hi - n*ln2_lo and r_lo is the rounding error of that subtraction.
    expm1(r + r_lo) ~= p + p_lo, with p_lo collecting the rounding error of
    p = r + h and the first-order effect of r_lo.
    """
    fmt = ops.fmt
    n_float = ops.rint(ops.mul(x, ops.f(fmt.log2e)))
    # n*ln2_hi is exact (ln2_hi has trailing zero bits), so is x - n*ln2_hi.
    r_hi = ops.sub(x, ops.mul(n_float, ops.f(fmt.ln2_hi)))
    t = ops.mul(n_float, ops.f(fmt.ln2_lo))
    r = ops.sub(r_hi, t)
    r_lo = ops.sub(ops.sub(r_hi, r), t)
    if x_lo is not None:  # a double-length argument x + x_lo, |x_lo| << 1
        r_lo = ops.add(r_lo, x_lo)
    h = _expm1_reduced_tail(ops, r)
    p, p_err = fast_two_sum(ops, r, h)  # |h| < |r|
    p_lo = ops.add(p_err, ops.add(r_lo, ops.mul(r_lo, p)))
    n = ops.b.fptosi(n_float, ops.ity)
    n1, n2 = split_exponent(ops, n)
    return ExpParts(n1, n2, p, p_lo)


def _expm1_reduced_tail(ops: Ops, r: ir.Value) -> ir.Value:
    """expm1(r) - r for |r| <= ~ln2/2: Taylor series r**2*(1/2! + r/3! + ...)."""
    q = ops.polynomial(r, ops.fmt.expm1_coefficients)
    return ops.mul(ops.mul(r, r), q)


def exp_from_parts(ops: Ops, parts: ExpParts) -> tuple[ir.Value, ir.Value]:
    """exp as hi + lo: 2**n * (1 + p + p_lo) with 1 + p carried to double length.

    hi is the rounded result; the two-step scaling makes subnormal results
    round only once more and overflow happen only when it should.
    """
    s, s_err = fast_two_sum(ops, ops.f(1.0), parts.p)  # |p| < 1
    hi, lo = fast_two_sum(ops, s, ops.add(s_err, parts.p_lo))
    pow_n1 = power_of_two(ops, parts.n1)
    pow_n2 = power_of_two(ops, parts.n2)
    return (ops.mul(ops.mul(hi, pow_n1), pow_n2),
            ops.mul(ops.mul(lo, pow_n1), pow_n2))


def expm1_from_parts(ops: Ops, parts: ExpParts) -> tuple[ir.Value, ir.Value]:
    """expm1 as hi + lo: 2**n * (1 + p + p_lo) - 1 without cancellation.

    Written as 2**n1 * (T + 2**n2*p + 2**n2*p_lo) with T = 2**n2 - 2**-n1:
    every power of two is normal and every scaling exact.  T and
    T + 2**n2*p are formed with TwoSum, so only the final addition rounds.
    """
    pow_n2 = power_of_two(ops, parts.n2)
    big, big_err = two_sum(ops, pow_n2, ops.neg(power_of_two(ops, ops.b.neg(parts.n1))))
    s, s_err = two_sum(ops, big, ops.mul(pow_n2, parts.p))
    low = ops.add(ops.add(s_err, big_err), ops.mul(pow_n2, parts.p_lo))
    hi, lo = fast_two_sum(ops, s, low)
    pow_n1 = power_of_two(ops, parts.n1)
    return ops.mul(hi, pow_n1), ops.mul(lo, pow_n1)


def log_core(ops: Ops, x: ir.Value, correction: ir.Value | None,
             handle_subnormal: bool) -> ir.Value:
    """log(x) (+ correction) for finite positive x, ignoring special values.

    x = 2**e * m with m in [sqrt(1/2), sqrt(2)); with f = m - 1 (exact) and
    s = f/(2+f), log(m) = log((1+s)/(1-s)) = 2s + s*R(s**2) where R is the
    atanh series.  Rearranged as f - hfsq + s*(hfsq + R), hfsq = f**2/2, so
    the dominant term f carries no rounding error.
    """
    fmt = ops.fmt
    b = ops.b
    exponent_adjust: ir.Value = ops.i(0)
    if handle_subnormal:
        is_subnormal = ops.cmp("<", x, ops.f(fmt.min_normal))
        scaled = ops.mul(x, ops.f(2.0 ** fmt.subnormal_scale_log2))
        x = ops.select(is_subnormal, scaled, x)
        exponent_adjust = b.select(is_subnormal, ops.i(-fmt.subnormal_scale_log2), ops.i(0))

    bits = b.bitcast(x, ops.ity)
    biased_exponent = b.and_(b.lshr(bits, ops.i(fmt.mantissa_bits)), ops.i(fmt.exponent_mask))
    e = b.add(b.sub(biased_exponent, ops.i(fmt.exponent_bias)), exponent_adjust)
    mantissa_bits = b.or_(b.and_(bits, ops.i(fmt.mantissa_mask)),
                          ops.i(fmt.exponent_bias << fmt.mantissa_bits))
    m = b.bitcast(mantissa_bits, ops.ty)  # in [1, 2)
    too_big = ops.cmp(">", m, ops.f(fmt.sqrt2))
    m = ops.select(too_big, ops.mul(m, ops.f(0.5)), m)
    e = b.add(e, b.zext(too_big, ops.ity))

    f = ops.sub(m, ops.f(1.0))
    s = ops.div(f, ops.add(ops.f(2.0), f))
    z = ops.mul(s, s)
    series = ops.mul(z, ops.polynomial(z, fmt.log_coefficients))
    hfsq = ops.mul(ops.f(0.5), ops.mul(f, f))
    e_float = b.sitofp(e, ops.ty)

    low = ops.mul(e_float, ops.f(fmt.ln2_lo))
    if correction is not None:
        low = ops.add(low, correction)
    # e*ln2_hi - ((hfsq - (s*(hfsq + R) + low)) - f)
    inner = ops.sub(hfsq, ops.add(ops.mul(s, ops.add(hfsq, series)), low))
    return ops.sub(ops.mul(e_float, ops.f(fmt.ln2_hi)), ops.sub(inner, f))


def exp_hi_lo(ops: Ops, x: ir.Value) -> tuple[ir.Value, ir.Value]:
    """exp(x) as hi + lo; NaN passes through in hi."""
    clamped = ops.clamp(x, ops.fmt.exp_clamp_lo, ops.fmt.exp_clamp_hi)
    hi, lo = exp_from_parts(ops, exp_parts(ops, clamped))
    return ops.select(ops.is_nan(x), x, hi), lo


# ---------------------------------------------------------------------------
# float32
# ---------------------------------------------------------------------------
#
# Two routes, both with one final rounding that dominates the error:
#
# * exp, log, log1p in float32 (16 lanes per AVX-512 vector, 8 per AVX2): a
#   short polynomial, and the last addition 1 + p (exp) or k*ln2 + p (log)
#   split with an exact two-sum so that only the final sum rounds.  Max error
#   (all 2**32 inputs): exp 0.82, log 0.87, log1p 0.94 ulp.  tanh and sigmoid
#   build on exp as a float32 pair (exp_f32_hi_lo) with one division carried
#   to double length (tanh_sigmoid.py): tanh 0.74, sigmoid 0.83 ulp.  In
#   double they were 0.50 ulp but 10-17% slower on AVX2, whose double vectors
#   hold 4 lanes and divide at a quarter of the float rate.
# * expm1 in double: a float32 argument is exact in double and a plain double
#   evaluation with relative error ~2**-31 rounds (fptrunc: round to nearest,
#   gradual underflow, overflow to inf) to within 0.51 ulp (all 2**32 inputs:
#   0.505 ulp).
#
# Coefficients: minimax fits (Lawson's iteratively reweighted least squares,
# with mpmath references) for the weighted error given with each table; float32
# tables were rounded one coefficient at a time, refitting the rest.

# expm1(r) = r + r**2 * Q(r) for |r| <= ln2/2 * (1 + 2**-13); relative error
# of expm1 below 2**-31.9.
_WIDE_EXPM1_Q = (
    0.5000000044164058,
    0.1666666637046439,
    0.04166636091226933,
    0.008333389368668249,
    0.0013940627429772576,
    0.00019845878136171263,
)
# exp(r) = 1 + r + r**2 * Q(r) for |r| <= ln2/2 * (1 + 2**-13), float32
# coefficients; error relative to exp(r) below 2**-28.2.
_F32_EXP_Q = (
    0.4999999403953552,
    0.1666652113199234,
    0.04166825860738754,
    0.008368666283786297,
    0.0013821235625073314,
)
# log1p(r) = r + r**2 * P(r) for |r| <= 1/3, float32 coefficients; error
# relative to log1p(r) below 2**-27.6.
_F32_LOG1P_P = (
    -0.5,
    0.3333321511745453,
    -0.2499980330467224,
    0.20010437071323395,
    -0.16680288314819336,
    0.14005501568317413,
    -0.12186548113822937,
    0.13985855877399445,
    -0.12883105874061584,
)
# Bits of float32 0.6666667: m = x / 2**k lands in [2/3, 4/3).
_F32_TWO_THIRDS_BITS = 0x3F2AAAAB
_LN2 = 0.6931471805599453


def _estrin_pairs(ops: Ops, r: ir.Value, r2: ir.Value, coefficients: Sequence[float],
                  ) -> ir.Value:
    """sum c[k] r**k for 5 or 6 coefficients, given r2 = r*r (Estrin)."""
    c = coefficients
    a01 = ops.fma(ops.f(c[1]), r, ops.f(c[0]))
    a23 = ops.fma(ops.f(c[3]), r, ops.f(c[2]))
    a45 = ops.fma(ops.f(c[5]), r, ops.f(c[4])) if len(c) == 6 else ops.f(c[4])
    return ops.fma(ops.fma(a45, r2, a23), r2, a01)


@dataclass(frozen=True)
class Float32ExpParts:
    """exp(x) = 2**n * (hi + tail) for float32, with r = x - n*ln2 and its rounding error."""

    hi: ir.Value
    tail: ir.Value
    n: ir.Value
    n_float: ir.Value
    r_hi: ir.Value
    r: ir.Value


def _exp_f32_parts(ops: Ops, x: ir.Value) -> Float32ExpParts:
    """The reduction and polynomial of the float32 exp, for a clamped x.

    n = rint(x/ln2) (from the bits of a shifted sum), r_hi = x - n*ln2_hi is
    exact (ln2_hi has 12 trailing zero bits) and r = r_hi - n*ln2_lo rounds
    once.  exp(r) = (1 + r) + r**2*Q(r) with 1 + r split exactly into hi + lo
    (|r| < 1), so hi + tail, tail = lo + r**2*Q(r), has only tail's rounding.
    """
    b = ops.b
    fmt = ops.fmt
    shifted = ops.fma(x, ops.f(fmt.log2e), ops.f(F32_SHIFTER))
    n_float = ops.sub(shifted, ops.f(F32_SHIFTER))
    r_hi = ops.fma(n_float, ops.f(-fmt.ln2_hi), x)
    r = ops.fma(n_float, ops.f(-fmt.ln2_lo), r_hi)
    r2 = ops.mul(r, r)
    q = _estrin_pairs(ops, r, r2, _F32_EXP_Q)
    hi = ops.add(ops.f(1.0), r)
    lo = ops.add(ops.sub(ops.f(1.0), hi), r)
    n = b.sub(b.bitcast(shifted, ops.ity), b.bitcast(ops.f(F32_SHIFTER), ops.ity))
    return Float32ExpParts(hi, ops.fma(r2, q, lo), n, n_float, r_hi, r)


def _scale_by_parts(ops: Ops, parts: Float32ExpParts, *values: ir.Value) -> list[ir.Value]:
    """Each value * 2**n as two normal scalings: a subnormal result rounds once, overflow when it should."""
    n1, n2 = split_exponent(ops, parts.n)
    pow_n1, pow_n2 = power_of_two(ops, n1), power_of_two(ops, n2)
    return [ops.mul(ops.mul(value, pow_n1), pow_n2) for value in values]


def _exp_f32(ops: Ops, x: ir.Value) -> ir.Value:
    """exp in float32: 2**n * (hi + tail), see _exp_f32_parts."""
    # Past the clamp the result is 0 or inf; NaN flows through the arithmetic.
    x = ops.clamp_keep_nan(x, ops.fmt.exp_clamp_lo, ops.fmt.exp_clamp_hi)
    parts = _exp_f32_parts(ops, x)
    return _scale_by_parts(ops, parts, ops.add(parts.hi, parts.tail))[0]


def exp_f32_hi_lo(ops: Ops, x: ir.Value, *, exact_reduction: bool = True,
                  normal_scale: bool = False) -> tuple[ir.Value, ir.Value]:
    """exp(x) as hi + lo in float32 for x in [exp_clamp_lo, 0] (or NaN).

    hi + tail is split exactly, and with ``exact_reduction`` r's own rounding
    error r_lo (r_hi - r is exact: r is within n*ln2_lo of r_hi) enters as
    exp(r + r_lo) ~ exp(r)*(1 + r_lo): hi + lo has relative error ~2**-27
    (2**-25.5 without), against 2**-24 for hi alone.  Where the result is
    subnormal, hi rounds once and lo underflows.  ``normal_scale`` promises
    x >= -87 (2**n normal: one scaling rather than two).
    """
    parts = _exp_f32_parts(ops, x)
    e_hi, e_lo = fast_two_sum(ops, parts.hi, parts.tail)  # |tail| < 0.07 < |hi|
    if exact_reduction:
        r_lo = ops.fma(parts.n_float, ops.f(-ops.fmt.ln2_lo), ops.sub(parts.r_hi, parts.r))
        e_lo = ops.fma(e_hi, r_lo, e_lo)
    if normal_scale:
        scale = power_of_two(ops, parts.n)
        return ops.mul(e_hi, scale), ops.mul(e_lo, scale)
    hi, lo = _scale_by_parts(ops, parts, e_hi, e_lo)
    return hi, lo


def _log_f32_core(ops: Ops, x: ir.Value, correction: ir.Value | None,
                  handle_subnormal: bool) -> ir.Value:
    """log(x) (+ correction) in float32 for finite positive x, ignoring special values.

    x = 2**k * m with m in [2/3, 4/3) straight from the bits, r = m - 1
    (exact), log(x) = k*ln2 + r + r**2*P(r).  k*ln2_hi + r is formed as an
    exact two-sum s + err (|k*ln2_hi| >= |r| unless k = 0), so the result
    rounds essentially once: s + (err + k*ln2_lo + r**2*P).
    """
    b = ops.b
    fmt = ops.fmt
    k_adjust: ir.Value | None = None
    if handle_subnormal:
        is_subnormal = ops.cmp("<", x, ops.f(fmt.min_normal))
        x = ops.select(is_subnormal, ops.mul(x, ops.f(2.0 ** fmt.subnormal_scale_log2)), x)
        k_adjust = b.select(is_subnormal, ops.i(-fmt.subnormal_scale_log2), ops.i(0))
    bits = b.bitcast(x, ops.ity)
    offset = b.sub(bits, ops.i(_F32_TWO_THIRDS_BITS))
    k = b.ashr(offset, ops.i(fmt.mantissa_bits))
    m = b.bitcast(b.sub(bits, b.and_(offset, ops.i(-1 << fmt.mantissa_bits))), ops.ty)
    if k_adjust is not None:
        k = b.add(k, k_adjust)
    k_float = b.sitofp(k, ops.ty)
    r = ops.sub(m, ops.f(1.0))

    # r**2*P(r) = -r**2/2 + r**3*P1(r): the rounding errors of P1 are damped by r**3.
    c = _F32_LOG1P_P
    r2 = ops.mul(r, r)
    r4 = ops.mul(r2, r2)
    a12 = ops.fma(ops.f(c[2]), r, ops.f(c[1]))
    a34 = ops.fma(ops.f(c[4]), r, ops.f(c[3]))
    a56 = ops.fma(ops.f(c[6]), r, ops.f(c[5]))
    a78 = ops.fma(ops.f(c[8]), r, ops.f(c[7]))
    p1 = ops.fma(ops.fma(a78, r2, a56), r4, ops.fma(a34, r2, a12))

    ln2_hi = ops.f(fmt.ln2_hi)  # k*ln2_hi is exact
    s = ops.fma(k_float, ln2_hi, r)
    err = ops.add(ops.fma(k_float, ln2_hi, ops.neg(s)), r)
    low = ops.fma(k_float, ops.f(fmt.ln2_lo), err)
    if correction is not None:
        low = ops.add(low, correction)
    low = ops.fma(r2, ops.f(c[0]), low)
    return ops.add(s, ops.fma(ops.mul(r2, r), p1, low))


def _log_special_f32(ops: Ops, x: ir.Value, result: ir.Value) -> ir.Value:
    """+inf and NaN give x, +-0 gives -inf, x < 0 gives NaN."""
    result = ops.select(ops.b.fcmp_unordered(">=", x, ops.f(float("inf"))), x, result)
    at_or_below_zero = ops.select(ops.cmp("==", x, ops.f(0.0)),
                                  ops.f(float("-inf")), ops.f(float("nan")))
    return ops.select(ops.cmp("<=", x, ops.f(0.0)), at_or_below_zero, result)


def _log_f32(ops: Ops, x: ir.Value) -> ir.Value:
    return _log_special_f32(ops, x, _log_f32_core(ops, x, None, handle_subnormal=True))


def _log1p_f32(ops: Ops, x: ir.Value) -> ir.Value:
    u = ops.add(ops.f(1.0), x)
    # log(1 + x) = log(u) + ((1 + x) - u)/u, and u - 1 is exact.
    correction = ops.div(ops.sub(x, ops.sub(u, ops.f(1.0))), u)
    # u is 0, or at least 2**-24: never subnormal.
    result = _log_special_f32(ops, u, _log_f32_core(ops, u, correction, handle_subnormal=False))
    return ops.select(ops.cmp("<", ops.fabs(x), ops.f(ops.fmt.tiny)), x, result)


def _wide_exp_parts(w: Ops, x: ir.Value) -> tuple[ir.Value, ir.Value]:
    """(2**n, expm1(r)) with exp(x) = 2**n * (1 + expm1(r)), for double |x| <= 700.

    n = rint(x/ln2) and r = x - n*ln2 with one FMA each: ln2's rounding error
    times |n| < 2**10 is ~2**-45 absolute, far below float32's needs.  NaN
    propagates into expm1(r).
    """
    b = w.b
    shifted = w.fma(x, w.f(FLOAT64.log2e), w.f(F64_SHIFTER))
    n_float = w.sub(shifted, w.f(F64_SHIFTER))
    r = w.fma(n_float, w.f(-_LN2), x)
    # r + r**2*Q(r), with the exact r added last.
    r2 = w.mul(r, r)
    c = _WIDE_EXPM1_Q
    a01 = w.fma(w.f(c[1]), r, w.f(c[0]))
    a23 = w.fma(w.f(c[3]), r, w.f(c[2]))
    a45 = w.fma(w.f(c[5]), r, w.f(c[4]))
    p = w.fma(w.mul(r2, r2), w.fma(a45, r2, a23), w.fma(r2, a01, r))
    # n + 1023, in [1, 2046], from the low bits of shifted into the exponent field.
    bits = b.add(b.bitcast(shifted, w.ity), w.i(FLOAT64.exponent_bias))
    return b.bitcast(b.shl(bits, w.i(FLOAT64.mantissa_bits)), w.ty), p


def wide_exp(w: Ops, x: ir.Value) -> ir.Value:
    scale, p = _wide_exp_parts(w, x)
    return w.fma(scale, p, scale)


def wide_expm1(w: Ops, x: ir.Value) -> ir.Value:
    """expm1(x) = 2**n * p + (2**n - 1) with one rounding; no cancellation
    matters since |x| >= ln2/2 whenever n != 0.  (Zero comes out as +0.)"""
    scale, p = _wide_exp_parts(w, x)
    return w.fma(scale, p, w.sub(scale, w.f(1.0)))


def _expm1_f32(ops: Ops, x: ir.Value) -> ir.Value:
    # Past the clamp the result is -1 or inf; NaN flows through.
    w = wide_ops(ops.b)
    wide_x = ops.b.fpext(ops.clamp_keep_nan(x, ops.fmt.expm1_clamp_lo, ops.fmt.exp_clamp_hi), w.ty)
    # expm1 has the sign of x: this only restores expm1(-0) = -0.
    return ops.copysign(ops.b.fptrunc(wide_expm1(w, wide_x), ops.ty), x)


# ---------------------------------------------------------------------------
# The emitters
# ---------------------------------------------------------------------------

def emit_exp(builder: ir.IRBuilder, x: ir.Value) -> ir.Value:
    """Emit exp(x) for a float or double x."""
    ops = Ops(builder, x)
    if ops.fmt is FLOAT32:
        return _exp_f32(ops, x)
    return exp_hi_lo(ops, x)[0]


def emit_expm1(builder: ir.IRBuilder, x: ir.Value) -> ir.Value:
    """Emit exp(x) - 1, accurate near 0, for a float or double x."""
    ops = Ops(builder, x)
    if ops.fmt is FLOAT32:
        return _expm1_f32(ops, x)
    fmt = ops.fmt
    clamped = ops.clamp(x, fmt.expm1_clamp_lo, fmt.exp_clamp_hi)
    result = expm1_from_parts(ops, exp_parts(ops, clamped))[0]
    # Tiny x (and signed zeros) round to x; NaN passes through.
    keep_x = ops.b.or_(ops.cmp("<", ops.fabs(x), ops.f(fmt.tiny)), ops.is_nan(x))
    return ops.select(keep_x, x, result)


def emit_log(builder: ir.IRBuilder, x: ir.Value) -> ir.Value:
    """Emit the natural logarithm of a float or double x."""
    ops = Ops(builder, x)
    if ops.fmt is FLOAT32:
        return _log_f32(ops, x)
    result = log_core(ops, x, None, handle_subnormal=True)
    inf = ops.f(float("inf"))
    result = ops.select(ops.cmp("==", x, inf), inf, result)
    result = ops.select(ops.cmp("==", x, ops.f(0.0)), ops.f(float("-inf")), result)
    result = ops.select(ops.cmp("<", x, ops.f(0.0)), ops.f(float("nan")), result)
    return ops.select(ops.is_nan(x), x, result)


def emit_log1p(builder: ir.IRBuilder, x: ir.Value) -> ir.Value:
    """Emit log(1 + x), accurate near 0, for a float or double x."""
    ops = Ops(builder, x)
    if ops.fmt is FLOAT32:
        return _log1p_f32(ops, x)
    u = ops.add(ops.f(1.0), x)
    # u = (1 + x)(1 + d) after rounding; log(1 + x) = log(u) + c with
    # c = ((1 + x) - u)/u = (x - (u - 1))/u, and u - 1 is exact.
    correction = ops.div(ops.sub(x, ops.sub(u, ops.f(1.0))), u)
    # u is 0 (handled below) or at least half an epsilon: never subnormal.
    result = log_core(ops, u, correction, handle_subnormal=False)
    inf = ops.f(float("inf"))
    result = ops.select(ops.cmp("==", x, inf), inf, result)
    result = ops.select(ops.cmp("==", x, ops.f(-1.0)), ops.f(float("-inf")), result)
    result = ops.select(ops.cmp("<", x, ops.f(-1.0)), ops.f(float("nan")), result)
    keep_x = ops.b.or_(ops.cmp("<", ops.fabs(x), ops.f(ops.fmt.tiny)), ops.is_nan(x))
    return ops.select(keep_x, x, result)

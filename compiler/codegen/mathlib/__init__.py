"""Transcendental functions emitted as LLVM IR, as branch-free inline code.

Every emitter takes an ``ir.IRBuilder`` and a scalar float32 or float64
value and returns a value of the same type.  The generated code uses only
arithmetic, bitcasts, integer ops, ``fcmp``/``select``, ``fpext``/``fptrunc``
and the intrinsics ``llvm.fabs``, ``llvm.copysign``, ``llvm.rint`` and
``llvm.fma``: no calls into libm, no branches, and no fast-math flags.  That
keeps it vectorisable by LLVM's loop vectoriser on the CPU and lowerable by the
NVPTX backend, which has no libm.  (One exception: sin and cos of |x| >= 2**40
need a long reduction, which they make out of line, behind one call that keeps
the loop vectorisable; see there.)  ``llvm.fma`` is one correctly rounded
operation on both targets (FMA hardware on x86-64-v3+ and sm_80), and plain
``fmul``/``fadd`` are never contracted, so CPU and GPU results are identical.

float64 functions are evaluated in float64 with double-length (two-double)
corrections.  float32 functions take the cheapest route that stays below
1 ulp: exp, log and log1p in float32 with FMA-based error compensation;
expm1, tanh, sigmoid, sin, cos, erf (and pow) in plain double, rounded once
to float32.  Special values follow IEEE / numpy semantics.  sin and cos
reduce by Cody-Waite for |x| < 2**40 and by Payne-Hanek beyond, see there.
"""

from __future__ import annotations

import struct
from dataclasses import dataclass
from decimal import Decimal, localcontext
from fractions import Fraction
from math import factorial
from typing import Sequence

from llvmlite import ir
from llvmlite.ir.values import FunctionAttributes

__all__ = [
    "emit_exp",
    "emit_expm1",
    "emit_log",
    "emit_log1p",
    "emit_tanh",
    "emit_sigmoid",
    "emit_pow",
    "emit_sin",
    "emit_cos",
    "emit_erf",
]


# ---------------------------------------------------------------------------
# Constants per floating-point format
# ---------------------------------------------------------------------------

def _round_to_float32(value: float) -> float:
    return struct.unpack("<f", struct.pack("<f", value))[0]


def _split_ln2(bits_to_clear: int, single: bool) -> tuple[float, float]:
    """Return (hi, lo) with hi + lo ~= ln 2 and hi having trailing zero bits.

    The zero bits make ``k * hi`` exact for the exponents k that occur, which
    is what makes the Cody-Waite reduction accurate.
    """
    float_code, int_code = ("<f", "<I") if single else ("<d", "<Q")
    with localcontext() as ctx:
        ctx.prec = 60
        ln2 = Decimal(2).ln()
        (bits,) = struct.unpack(int_code, struct.pack(float_code, float(ln2)))
        bits &= ~((1 << bits_to_clear) - 1)
        (hi,) = struct.unpack(float_code, struct.pack(int_code, bits))
        lo = float(ln2 - Decimal(hi))
    return hi, (_round_to_float32(lo) if single else lo)


def _taylor_expm1_coefficients(degree: int) -> tuple[float, ...]:
    """Coefficients 1/k! for k = 2..degree (the r**2 .. r**degree terms)."""
    return tuple(float(Fraction(1, factorial(k))) for k in range(2, degree + 1))


def _atanh_series_coefficients(terms: int) -> tuple[float, ...]:
    """Coefficients 2/(2k+1), k = 1..terms, of (log((1+s)/(1-s)) - 2s)/s in z = s**2."""
    return tuple(float(Fraction(2, 2 * k + 1)) for k in range(1, terms + 1))


@dataclass(frozen=True)
class _Format:
    """Bit layout and algorithm constants for one IEEE binary format."""

    int_bits: int
    mantissa_bits: int
    exponent_bias: int
    ln2_hi: float
    ln2_lo: float
    log2e: float
    sqrt2: float
    min_normal: float
    subnormal_scale_log2: int
    # exp / expm1 clamp x into [lo, hi]: wide enough that the result has
    # already overflowed / underflowed (or rounded to -1 for expm1), narrow
    # enough that both halves of 2**n stay normal numbers.
    exp_clamp_lo: float
    exp_clamp_hi: float
    expm1_clamp_lo: float
    # Below this magnitude expm1(x) and log1p(x) round to x.
    tiny: float
    # 2**ceil(p/2) + 1: splits a p-bit significand into two halves.
    veltkamp_factor: float
    expm1_coefficients: tuple[float, ...] = ()
    log_coefficients: tuple[float, ...] = ()

    @property
    def exponent_mask(self) -> int:
        return (1 << (self.int_bits - 1 - self.mantissa_bits)) - 1

    @property
    def mantissa_mask(self) -> int:
        return (1 << self.mantissa_bits) - 1


# Taylor truncation, |r| <= ln2/2: r**13/14! relative to r ~ 1e-17.  Atanh
# series, z <= (3-2*sqrt2)**2 ~ 0.0294: first dropped term z**11/23 ~ 6e-19.
# (The float32 algorithms have their own constants, further down.)
_FLOAT64 = _Format(
    int_bits=64,
    mantissa_bits=52,
    exponent_bias=1023,
    ln2_hi=_split_ln2(20, single=False)[0],
    ln2_lo=_split_ln2(20, single=False)[1],
    log2e=1.4426950408889634,
    sqrt2=1.4142135623730951,
    min_normal=2.0 ** -1022,
    subnormal_scale_log2=54,
    exp_clamp_lo=-800.0,
    exp_clamp_hi=800.0,
    expm1_clamp_lo=-40.0,
    tiny=2.0 ** -54,
    veltkamp_factor=2.0 ** 27 + 1,
    expm1_coefficients=_taylor_expm1_coefficients(13),
    log_coefficients=_atanh_series_coefficients(10),
)

_FLOAT32 = _Format(
    int_bits=32,
    mantissa_bits=23,
    exponent_bias=127,
    ln2_hi=_split_ln2(12, single=True)[0],
    ln2_lo=_split_ln2(12, single=True)[1],
    log2e=_round_to_float32(1.4426950408889634),
    sqrt2=_round_to_float32(1.4142135623730951),
    min_normal=2.0 ** -126,
    subnormal_scale_log2=24,
    exp_clamp_lo=-120.0,
    exp_clamp_hi=120.0,
    expm1_clamp_lo=-20.0,
    tiny=2.0 ** -25,
    veltkamp_factor=2.0 ** 12 + 1,
)


# |x| below which tanh uses -t/(2+t) rather than 1 - 2E/(1+E).
_TANH_SPLIT = 0.55


# ---------------------------------------------------------------------------
# Small IR helper bound to one builder and one float type
# ---------------------------------------------------------------------------

class _Ops:
    """Thin wrapper over IRBuilder for scalar float/int arithmetic of one format."""

    def __init__(self, builder: ir.IRBuilder, x: ir.Value) -> None:
        ty = x.type
        if isinstance(ty, ir.DoubleType):
            self.fmt = _FLOAT64
        elif isinstance(ty, ir.FloatType):
            self.fmt = _FLOAT32
        else:
            raise TypeError(f"mathlib supports float and double, got {ty}")
        self.b = builder
        self.ty: ir.Type = ty
        self.ity = ir.IntType(self.fmt.int_bits)
        # Code shape, not accuracy (both choices are exact / equally accurate).
        # Short loop bodies run fastest with the fewest operations: products
        # split with FMA and Estrin polynomials.  In float64 pow's body (~250
        # vector instructions, one long dependency chain) Dekker's products
        # and Horner polynomials measured ~25% faster on Zen 5.
        self.fma_products = True
        self.estrin_polynomials = True

    # constants
    def f(self, value: float) -> ir.Constant:
        return ir.Constant(self.ty, value)

    def i(self, value: int) -> ir.Constant:
        return ir.Constant(self.ity, value)

    # float arithmetic (no fast-math flags)
    def add(self, a: ir.Value, b: ir.Value) -> ir.Value:
        return self.b.fadd(a, b)

    def sub(self, a: ir.Value, b: ir.Value) -> ir.Value:
        return self.b.fsub(a, b)

    def mul(self, a: ir.Value, b: ir.Value) -> ir.Value:
        return self.b.fmul(a, b)

    def div(self, a: ir.Value, b: ir.Value) -> ir.Value:
        return self.b.fdiv(a, b)

    def neg(self, a: ir.Value) -> ir.Value:
        return self.b.fneg(a)

    def select(self, cond: ir.Value, a: ir.Value, b: ir.Value) -> ir.Value:
        return self.b.select(cond, a, b)

    def cmp(self, op: str, a: ir.Value, b: ir.Value) -> ir.Value:
        """Ordered comparison: false whenever an operand is NaN."""
        return self.b.fcmp_ordered(op, a, b)

    def is_nan(self, a: ir.Value) -> ir.Value:
        return self.b.fcmp_unordered("uno", a, a)

    def clamp(self, x: ir.Value, lo: float, hi: float) -> ir.Value:
        """Clamp into [lo, hi]; NaN maps to hi (so later integer casts stay defined)."""
        below_hi = self.select(self.cmp("<", x, self.f(hi)), x, self.f(hi))
        return self.select(self.cmp(">", below_hi, self.f(lo)), below_hi, self.f(lo))

    # intrinsics
    def _intrinsic(self, name: str, arity: int) -> ir.Function:
        module = self.b.module
        fnty = ir.FunctionType(self.ty, [self.ty] * arity)
        fn = module.declare_intrinsic(name, [self.ty], fnty)
        if fn.function_type != fnty:
            raise TypeError(f"{fn.name} already declared with type {fn.function_type}")
        return fn

    def fabs(self, a: ir.Value) -> ir.Value:
        return self.b.call(self._intrinsic("llvm.fabs", 1), [a])

    def copysign(self, magnitude: ir.Value, sign: ir.Value) -> ir.Value:
        return self.b.call(self._intrinsic("llvm.copysign", 2), [magnitude, sign])

    def rint(self, a: ir.Value) -> ir.Value:
        return self.b.call(self._intrinsic("llvm.rint", 1), [a])

    def fma(self, a: ir.Value, b: ir.Value, c: ir.Value) -> ir.Value:
        """a*b + c with one rounding, on every target."""
        return self.b.call(self._intrinsic("llvm.fma", 3), [a, b, c])

    def clamp_keep_nan(self, x: ir.Value, lo: float, hi: float) -> ir.Value:
        """Clamp into [lo, hi]; NaN stays NaN (one min and one max on x86)."""
        x = self.select(self.cmp(">", x, self.f(hi)), self.f(hi), x)
        return self.select(self.cmp("<", x, self.f(lo)), self.f(lo), x)

    # polynomials, with FMAs
    def horner(self, z: ir.Value, coefficients: Sequence[float]) -> ir.Value:
        """c[0] + z*(c[1] + z*(c[2] + ...))."""
        acc: ir.Value = self.f(coefficients[-1])
        for c in reversed(coefficients[:-1]):
            acc = self.fma(acc, z, self.f(c))
        return acc

    def estrin(self, z: ir.Value, coefficients: Sequence[float]) -> ir.Value:
        """sum c[k] z**k by Estrin's scheme: a few more operations than Horner
        but a dependency chain of depth ~log2(degree), which is what bounds
        the throughput of these long loop bodies."""
        terms: list[ir.Value] = []
        for k in range(0, len(coefficients), 2):
            if k + 1 < len(coefficients):
                terms.append(self.fma(self.f(coefficients[k + 1]), z, self.f(coefficients[k])))
            else:
                terms.append(self.f(coefficients[k]))
        power = z
        while len(terms) > 1:
            power = self.mul(power, power)
            paired = [self.fma(terms[k + 1], power, terms[k]) for k in range(0, len(terms) - 1, 2)]
            terms = paired + ([terms[-1]] if len(terms) % 2 else [])
        return terms[0]

    def polynomial(self, z: ir.Value, coefficients: Sequence[float]) -> ir.Value:
        """c[0] + z*estrin(c[1:]) (the rounding error of the higher terms is
        damped by z: as accurate as Horner for |z| < 1), or plain Horner."""
        if not self.estrin_polynomials:
            return self.horner(z, coefficients)
        return self.fma(self.estrin(z, coefficients[1:]), z, self.f(coefficients[0]))


# ---------------------------------------------------------------------------
# Building blocks
# ---------------------------------------------------------------------------

def _power_of_two(ops: _Ops, k: ir.Value) -> ir.Value:
    """2**k for an integer k inside the normal exponent range, from its bits."""
    biased = ops.b.add(k, ops.i(ops.fmt.exponent_bias))
    bits = ops.b.shl(biased, ops.i(ops.fmt.mantissa_bits))
    return ops.b.bitcast(bits, ops.ty)


def _split_exponent(ops: _Ops, n: ir.Value) -> tuple[ir.Value, ir.Value]:
    """Split n into n1 + n2 with n1 = floor(n/2), so each 2**ni stays normal."""
    n1 = ops.b.ashr(n, ops.i(1))
    n2 = ops.b.sub(n, n1)
    return n1, n2


def _fast_two_sum(ops: _Ops, a: ir.Value, b: ir.Value) -> tuple[ir.Value, ir.Value]:
    """s = fl(a + b) and its exact error, given |a| >= |b| (Dekker)."""
    s = ops.add(a, b)
    return s, ops.add(ops.sub(a, s), b)


def _two_sum(ops: _Ops, a: ir.Value, b: ir.Value) -> tuple[ir.Value, ir.Value]:
    """s = fl(a + b) and its exact error, for any magnitudes (Knuth's TwoSum)."""
    s = ops.add(a, b)
    b_part = ops.sub(s, a)
    a_part = ops.sub(s, b_part)
    return s, ops.add(ops.sub(a, a_part), ops.sub(b, b_part))


def _split_halves(ops: _Ops, a: ir.Value) -> tuple[ir.Value, ir.Value]:
    """Veltkamp split of a into hi + lo, each with half the significand bits."""
    c = ops.mul(a, ops.f(ops.fmt.veltkamp_factor))
    hi = ops.sub(c, ops.sub(c, a))
    return hi, ops.sub(a, hi)


def _two_product(ops: _Ops, a: ir.Value, b: ir.Value) -> tuple[ir.Value, ir.Value]:
    """p = fl(a * b) and its exact error a*b - p: one FMA, or Dekker's product."""
    p = ops.mul(a, b)
    if ops.fma_products:
        return p, ops.fma(a, b, ops.neg(p))
    a_hi, a_lo = _split_halves(ops, a)
    b_hi, b_lo = _split_halves(ops, b)
    err = ops.sub(ops.mul(a_hi, b_hi), p)
    err = ops.add(err, ops.mul(a_hi, b_lo))
    err = ops.add(err, ops.mul(a_lo, b_hi))
    return p, ops.add(err, ops.mul(a_lo, b_lo))


def _divide_double_length(ops: _Ops, n_hi: ir.Value, n_lo: ir.Value,
                          d_hi: ir.Value, d_lo: ir.Value) -> tuple[ir.Value, ir.Value]:
    """(n_hi + n_lo) / (d_hi + d_lo) as q + correction (to be summed by the caller).

    q = n_hi/d_hi, and the correction is the exactly computed residual
    n - q*d divided by d_hi; for moderate values this is nearly correctly
    rounded.
    """
    q = ops.div(n_hi, d_hi)
    p, p_err = _two_product(ops, q, d_hi)
    # n_hi - p is exact: p is within a rounding of n_hi.
    residual = ops.sub(ops.sub(n_hi, p), p_err)
    residual = ops.sub(ops.add(residual, n_lo), ops.mul(q, d_lo))
    return q, ops.div(residual, d_hi)


@dataclass(frozen=True)
class _ExpParts:
    """exp(x) = 2**(n1 + n2) * (1 + p + p_lo), from one argument reduction."""

    n1: ir.Value
    n2: ir.Value
    p: ir.Value
    p_lo: ir.Value


def _exp_parts(ops: _Ops, x: ir.Value, x_lo: ir.Value | None = None) -> _ExpParts:
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
    p, p_err = _fast_two_sum(ops, r, h)  # |h| < |r|
    p_lo = ops.add(p_err, ops.add(r_lo, ops.mul(r_lo, p)))
    n = ops.b.fptosi(n_float, ops.ity)
    n1, n2 = _split_exponent(ops, n)
    return _ExpParts(n1, n2, p, p_lo)


def _expm1_reduced_tail(ops: _Ops, r: ir.Value) -> ir.Value:
    """expm1(r) - r for |r| <= ~ln2/2: Taylor series r**2*(1/2! + r/3! + ...)."""
    q = ops.polynomial(r, ops.fmt.expm1_coefficients)
    return ops.mul(ops.mul(r, r), q)


def _exp_from_parts(ops: _Ops, parts: _ExpParts) -> tuple[ir.Value, ir.Value]:
    """exp as hi + lo: 2**n * (1 + p + p_lo) with 1 + p carried to double length.

    hi is the rounded result; the two-step scaling makes subnormal results
    round only once more and overflow happen only when it should.
    """
    s, s_err = _fast_two_sum(ops, ops.f(1.0), parts.p)  # |p| < 1
    hi, lo = _fast_two_sum(ops, s, ops.add(s_err, parts.p_lo))
    pow_n1 = _power_of_two(ops, parts.n1)
    pow_n2 = _power_of_two(ops, parts.n2)
    return (ops.mul(ops.mul(hi, pow_n1), pow_n2),
            ops.mul(ops.mul(lo, pow_n1), pow_n2))


def _expm1_from_parts(ops: _Ops, parts: _ExpParts) -> tuple[ir.Value, ir.Value]:
    """expm1 as hi + lo: 2**n * (1 + p + p_lo) - 1 without cancellation.

    Written as 2**n1 * (T + 2**n2*p + 2**n2*p_lo) with T = 2**n2 - 2**-n1:
    every power of two is normal and every scaling exact.  T and
    T + 2**n2*p are formed with TwoSum, so only the final addition rounds.
    """
    pow_n2 = _power_of_two(ops, parts.n2)
    big, big_err = _two_sum(ops, pow_n2, ops.neg(_power_of_two(ops, ops.b.neg(parts.n1))))
    s, s_err = _two_sum(ops, big, ops.mul(pow_n2, parts.p))
    low = ops.add(ops.add(s_err, big_err), ops.mul(pow_n2, parts.p_lo))
    hi, lo = _fast_two_sum(ops, s, low)
    pow_n1 = _power_of_two(ops, parts.n1)
    return ops.mul(hi, pow_n1), ops.mul(lo, pow_n1)


def _log_core(ops: _Ops, x: ir.Value, correction: ir.Value | None,
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


def _exp(ops: _Ops, x: ir.Value) -> tuple[ir.Value, ir.Value]:
    """exp(x) as hi + lo; NaN passes through in hi."""
    clamped = ops.clamp(x, ops.fmt.exp_clamp_lo, ops.fmt.exp_clamp_hi)
    hi, lo = _exp_from_parts(ops, _exp_parts(ops, clamped))
    return ops.select(ops.is_nan(x), x, hi), lo


# ---------------------------------------------------------------------------
# float32
# ---------------------------------------------------------------------------
#
# Two routes, both with one final rounding that dominates the error:
#
# * exp, log, log1p in float32 (16 lanes per AVX-512 vector): a short
#   polynomial, and the last addition 1 + p (exp) or k*ln2 + p (log) split with
#   an exact two-sum so that only the final sum rounds.  Max error (all 2**32
#   inputs): exp 0.82, log 0.87, log1p 0.94 ulp.
# * expm1, tanh, sigmoid in double: a float32 argument is exact in double and
#   a plain double evaluation with relative error ~2**-31 rounds (fptrunc:
#   round to nearest, gradual underflow, overflow to inf) to within 0.51 ulp
#   (all 2**32 inputs: expm1 0.505, tanh 0.504, sigmoid 0.501 ulp).
#   No double-length arithmetic and no case split is needed, which more than
#   pays for the halved vector width.
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
# Adding then subtracting 1.5 * 2**p-1 rounds a value of magnitude below
# 2**(p-2) to an integer (ties to even) and leaves that integer, in two's
# complement, in the low bits of the sum.
_F32_SHIFTER = 1.5 * 2.0 ** 23
_F64_SHIFTER = 1.5 * 2.0 ** 52
# Bits of float32 0.6666667: m = x / 2**k lands in [2/3, 4/3).
_F32_TWO_THIRDS_BITS = 0x3F2AAAAB
_LN2 = 0.6931471805599453


def _estrin_pairs(ops: _Ops, r: ir.Value, r2: ir.Value, coefficients: Sequence[float],
                  ) -> ir.Value:
    """sum c[k] r**k for 5 or 6 coefficients, given r2 = r*r (Estrin)."""
    c = coefficients
    a01 = ops.fma(ops.f(c[1]), r, ops.f(c[0]))
    a23 = ops.fma(ops.f(c[3]), r, ops.f(c[2]))
    a45 = ops.fma(ops.f(c[5]), r, ops.f(c[4])) if len(c) == 6 else ops.f(c[4])
    return ops.fma(ops.fma(a45, r2, a23), r2, a01)


def _exp_f32(ops: _Ops, x: ir.Value) -> ir.Value:
    """exp in float32: n = rint(x/ln2), r = x - n*ln2, 2**n * exp(r).

    r_hi = x - n*ln2_hi is exact (ln2_hi has 12 trailing zero bits), r is
    rounded once.  exp(r) = (1 + r) + r**2*Q(r) with 1 + r split exactly into
    hi + lo (|r| < 1), so only the last addition rounds.  2**n is applied as
    2**n1 * 2**n2, both normal: subnormal results round once, and overflow
    happens exactly when it should.
    """
    b = ops.b
    fmt = ops.fmt
    # Past the clamp the result is 0 or inf; NaN flows through the arithmetic.
    x = ops.clamp_keep_nan(x, fmt.exp_clamp_lo, fmt.exp_clamp_hi)
    shifted = ops.fma(x, ops.f(fmt.log2e), ops.f(_F32_SHIFTER))
    n_float = ops.sub(shifted, ops.f(_F32_SHIFTER))
    r = ops.fma(n_float, ops.f(-fmt.ln2_lo), ops.fma(n_float, ops.f(-fmt.ln2_hi), x))
    r2 = ops.mul(r, r)
    q = _estrin_pairs(ops, r, r2, _F32_EXP_Q)
    hi = ops.add(ops.f(1.0), r)
    lo = ops.add(ops.sub(ops.f(1.0), hi), r)
    e = ops.add(hi, ops.fma(r2, q, lo))
    n = b.sub(b.bitcast(shifted, ops.ity), b.bitcast(ops.f(_F32_SHIFTER), ops.ity))
    n1, n2 = _split_exponent(ops, n)
    return ops.mul(ops.mul(e, _power_of_two(ops, n1)), _power_of_two(ops, n2))


def _log_f32_core(ops: _Ops, x: ir.Value, correction: ir.Value | None,
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


def _log_special_f32(ops: _Ops, x: ir.Value, result: ir.Value) -> ir.Value:
    """+inf and NaN give x, +-0 gives -inf, x < 0 gives NaN."""
    result = ops.select(ops.b.fcmp_unordered(">=", x, ops.f(float("inf"))), x, result)
    at_or_below_zero = ops.select(ops.cmp("==", x, ops.f(0.0)),
                                  ops.f(float("-inf")), ops.f(float("nan")))
    return ops.select(ops.cmp("<=", x, ops.f(0.0)), at_or_below_zero, result)


def _log_f32(ops: _Ops, x: ir.Value) -> ir.Value:
    return _log_special_f32(ops, x, _log_f32_core(ops, x, None, handle_subnormal=True))


def _log1p_f32(ops: _Ops, x: ir.Value) -> ir.Value:
    u = ops.add(ops.f(1.0), x)
    # log(1 + x) = log(u) + ((1 + x) - u)/u, and u - 1 is exact.
    correction = ops.div(ops.sub(x, ops.sub(u, ops.f(1.0))), u)
    # u is 0, or at least 2**-24: never subnormal.
    result = _log_special_f32(ops, u, _log_f32_core(ops, u, correction, handle_subnormal=False))
    return ops.select(ops.cmp("<", ops.fabs(x), ops.f(ops.fmt.tiny)), x, result)


def _wide(builder: ir.IRBuilder) -> _Ops:
    return _Ops(builder, ir.Constant(ir.DoubleType(), 0.0))


def _wide_exp_parts(w: _Ops, x: ir.Value) -> tuple[ir.Value, ir.Value]:
    """(2**n, expm1(r)) with exp(x) = 2**n * (1 + expm1(r)), for double |x| <= 700.

    n = rint(x/ln2) and r = x - n*ln2 with one FMA each: ln2's rounding error
    times |n| < 2**10 is ~2**-45 absolute, far below float32's needs.  NaN
    propagates into expm1(r).
    """
    b = w.b
    shifted = w.fma(x, w.f(_FLOAT64.log2e), w.f(_F64_SHIFTER))
    n_float = w.sub(shifted, w.f(_F64_SHIFTER))
    r = w.fma(n_float, w.f(-_LN2), x)
    # r + r**2*Q(r), with the exact r added last.
    r2 = w.mul(r, r)
    c = _WIDE_EXPM1_Q
    a01 = w.fma(w.f(c[1]), r, w.f(c[0]))
    a23 = w.fma(w.f(c[3]), r, w.f(c[2]))
    a45 = w.fma(w.f(c[5]), r, w.f(c[4]))
    p = w.fma(w.mul(r2, r2), w.fma(a45, r2, a23), w.fma(r2, a01, r))
    # n + 1023, in [1, 2046], from the low bits of shifted into the exponent field.
    bits = b.add(b.bitcast(shifted, w.ity), w.i(_FLOAT64.exponent_bias))
    return b.bitcast(b.shl(bits, w.i(_FLOAT64.mantissa_bits)), w.ty), p


def _wide_exp(w: _Ops, x: ir.Value) -> ir.Value:
    scale, p = _wide_exp_parts(w, x)
    return w.fma(scale, p, scale)


def _wide_expm1(w: _Ops, x: ir.Value) -> ir.Value:
    """expm1(x) = 2**n * p + (2**n - 1) with one rounding; no cancellation
    matters since |x| >= ln2/2 whenever n != 0.  (Zero comes out as +0.)"""
    scale, p = _wide_exp_parts(w, x)
    return w.fma(scale, p, w.sub(scale, w.f(1.0)))


def _expm1_f32(ops: _Ops, x: ir.Value) -> ir.Value:
    # Past the clamp the result is -1 or inf; NaN flows through.
    w = _wide(ops.b)
    wide_x = ops.b.fpext(ops.clamp_keep_nan(x, ops.fmt.expm1_clamp_lo, ops.fmt.exp_clamp_hi), w.ty)
    # expm1 has the sign of x: this only restores expm1(-0) = -0.
    return ops.copysign(ops.b.fptrunc(_wide_expm1(w, wide_x), ops.ty), x)


def _tanh_f32(ops: _Ops, x: ir.Value) -> ir.Value:
    """tanh|x| = -t/(2 + t) with t = expm1(-2|x|) in double; the sign copied from x.

    t has relative error ~2**-31 and the quotient amplifies it at most 1.2-fold,
    for every |x|.  Beyond |x| = 10, where tanh rounds to 1, -2|x| is clamped.
    """
    w = _wide(ops.b)
    z = ops.clamp_keep_nan(ops.mul(ops.f(-2.0), ops.fabs(x)), ops.fmt.expm1_clamp_lo, 0.0)
    t = _wide_expm1(w, ops.b.fpext(z, w.ty))
    magnitude = w.div(t, w.sub(w.f(-2.0), t))
    return ops.copysign(ops.b.fptrunc(magnitude, ops.ty), x)


def _sigmoid_f32(ops: _Ops, x: ir.Value) -> ir.Value:
    """E = exp(-|x|) in double; 1/(1 + E) for x >= 0, E/(1 + E) otherwise."""
    w = _wide(ops.b)
    # Beyond |x| = 120 the result is 0 or 1 and E is still a normal double.
    minus_abs = ops.clamp_keep_nan(ops.neg(ops.fabs(x)), ops.fmt.exp_clamp_lo, 0.0)
    e = _wide_exp(w, ops.b.fpext(minus_abs, w.ty))
    numerator = w.select(ops.cmp(">=", x, ops.f(0.0)), w.f(1.0), e)
    return ops.b.fptrunc(w.div(numerator, w.add(w.f(1.0), e)), ops.ty)


# ---------------------------------------------------------------------------
# Public API
# ---------------------------------------------------------------------------

def emit_exp(builder: ir.IRBuilder, x: ir.Value) -> ir.Value:
    """Emit exp(x) for a float or double x."""
    ops = _Ops(builder, x)
    if ops.fmt is _FLOAT32:
        return _exp_f32(ops, x)
    return _exp(ops, x)[0]


def emit_expm1(builder: ir.IRBuilder, x: ir.Value) -> ir.Value:
    """Emit exp(x) - 1, accurate near 0, for a float or double x."""
    ops = _Ops(builder, x)
    if ops.fmt is _FLOAT32:
        return _expm1_f32(ops, x)
    fmt = ops.fmt
    clamped = ops.clamp(x, fmt.expm1_clamp_lo, fmt.exp_clamp_hi)
    result = _expm1_from_parts(ops, _exp_parts(ops, clamped))[0]
    # Tiny x (and signed zeros) round to x; NaN passes through.
    keep_x = ops.b.or_(ops.cmp("<", ops.fabs(x), ops.f(fmt.tiny)), ops.is_nan(x))
    return ops.select(keep_x, x, result)


def emit_log(builder: ir.IRBuilder, x: ir.Value) -> ir.Value:
    """Emit the natural logarithm of a float or double x."""
    ops = _Ops(builder, x)
    if ops.fmt is _FLOAT32:
        return _log_f32(ops, x)
    result = _log_core(ops, x, None, handle_subnormal=True)
    inf = ops.f(float("inf"))
    result = ops.select(ops.cmp("==", x, inf), inf, result)
    result = ops.select(ops.cmp("==", x, ops.f(0.0)), ops.f(float("-inf")), result)
    result = ops.select(ops.cmp("<", x, ops.f(0.0)), ops.f(float("nan")), result)
    return ops.select(ops.is_nan(x), x, result)


def emit_log1p(builder: ir.IRBuilder, x: ir.Value) -> ir.Value:
    """Emit log(1 + x), accurate near 0, for a float or double x."""
    ops = _Ops(builder, x)
    if ops.fmt is _FLOAT32:
        return _log1p_f32(ops, x)
    u = ops.add(ops.f(1.0), x)
    # u = (1 + x)(1 + d) after rounding; log(1 + x) = log(u) + c with
    # c = ((1 + x) - u)/u = (x - (u - 1))/u, and u - 1 is exact.
    correction = ops.div(ops.sub(x, ops.sub(u, ops.f(1.0))), u)
    # u is 0 (handled below) or at least half an epsilon: never subnormal.
    result = _log_core(ops, u, correction, handle_subnormal=False)
    inf = ops.f(float("inf"))
    result = ops.select(ops.cmp("==", x, inf), inf, result)
    result = ops.select(ops.cmp("==", x, ops.f(-1.0)), ops.f(float("-inf")), result)
    result = ops.select(ops.cmp("<", x, ops.f(-1.0)), ops.f(float("nan")), result)
    keep_x = ops.b.or_(ops.cmp("<", ops.fabs(x), ops.f(ops.fmt.tiny)), ops.is_nan(x))
    return ops.select(keep_x, x, result)


def emit_tanh(builder: ir.IRBuilder, x: ir.Value) -> ir.Value:
    """Emit tanh(x) for a float or double x (float: see _tanh_f32).

    With E = exp(-2|x|) and t = E - 1 (both double length, one reduction):
    |x| < 0.55: -t / (2 + t)        (no cancellation near 0)
    otherwise:  1 - 2E / (1 + E)    (well conditioned near 1)
    One double-length division serves both; the sign is copied from x.
    """
    ops = _Ops(builder, x)
    if ops.fmt is _FLOAT32:
        return _tanh_f32(ops, x)
    fmt = ops.fmt
    y = ops.fabs(x)
    parts = _exp_parts(ops, ops.clamp(ops.mul(ops.f(-2.0), y), fmt.expm1_clamp_lo, 0.0))
    t_hi, t_lo = _expm1_from_parts(ops, parts)
    e_hi, e_lo = _exp_from_parts(ops, parts)
    near_zero = ops.cmp("<", y, ops.f(_TANH_SPLIT))

    two_plus_t, two_plus_t_err = _fast_two_sum(ops, ops.f(2.0), t_hi)  # -1 < t <= 0
    one_plus_e, one_plus_e_err = _fast_two_sum(ops, ops.f(1.0), e_hi)  # 0 <= E <= 1
    n_hi = ops.select(near_zero, ops.neg(t_hi), ops.add(e_hi, e_hi))
    n_lo = ops.select(near_zero, ops.neg(t_lo), ops.add(e_lo, e_lo))
    d_hi = ops.select(near_zero, two_plus_t, one_plus_e)
    d_lo = ops.select(near_zero, ops.add(two_plus_t_err, t_lo), ops.add(one_plus_e_err, e_lo))
    q, q_corr = _divide_double_length(ops, n_hi, n_lo, d_hi, d_lo)

    one_minus_q, one_minus_q_err = _fast_two_sum(ops, ops.f(1.0), ops.neg(q))  # q <= 1/2
    magnitude = ops.select(near_zero, ops.add(q, q_corr),
                           ops.add(one_minus_q, ops.sub(one_minus_q_err, q_corr)))
    return ops.select(ops.is_nan(x), x, ops.copysign(magnitude, x))


def emit_sigmoid(builder: ir.IRBuilder, x: ir.Value) -> ir.Value:
    """Emit 1/(1 + exp(-x)) for a float or double x, accurate for both signs.

    From E = exp(-|x|) (never overflows): x >= 0: 1/(1 + E); x < 0: E/(1 + E),
    as one double-length division (float: the same in plain double).
    """
    ops = _Ops(builder, x)
    if ops.fmt is _FLOAT32:
        return _sigmoid_f32(ops, x)
    e_hi, e_lo = _exp(ops, ops.neg(ops.fabs(x)))
    d_hi, d_err = _fast_two_sum(ops, ops.f(1.0), e_hi)  # 0 <= E <= 1
    positive = ops.cmp(">=", x, ops.f(0.0))
    n_hi = ops.select(positive, ops.f(1.0), e_hi)
    n_lo = ops.select(positive, ops.f(0.0), e_lo)
    q, q_corr = _divide_double_length(ops, n_hi, n_lo, d_hi, ops.add(d_err, e_lo))
    return ops.add(q, q_corr)


# ---------------------------------------------------------------------------
# pow
# ---------------------------------------------------------------------------

def _log_double_double(value: Decimal) -> tuple[float, float]:
    hi = float(value)
    return hi, float(value - Decimal(hi))


def _pow_log_centres() -> tuple[tuple[float, float, float], ...]:
    """(centre c, log(c) hi, log(c) lo) for c = 2**(-1/3), 1, 2**(1/3), rounded to doubles."""
    centres = []
    with localcontext() as ctx:
        ctx.prec = 60
        for c in (float(2.0 ** (-1.0 / 3.0)), 1.0, float(2.0 ** (1.0 / 3.0))):
            centres.append((c, *_log_double_double(Decimal(c).ln())))
    return tuple(centres)


# m in [sqrt(1/2), sqrt(2)] is split at 2**(-1/6) and 2**(1/6), and each piece
# is reduced by its geometric centre, so |s| = |m - c|/(m + c) <= 0.0578 and
# z = s**2 <= 0.00334.  log(m/c) = 2s + (2/3)s**3 + s**5*Q(z) with
# Q(z) = sum_{k=2..8} 2/(2k+1) z**(k-2): the first dropped term, z**9/19
# relative to 2s, is ~2**-78.
_POW_CENTRES = _pow_log_centres()
_POW_SPLITS = (2.0 ** (-1.0 / 6.0), 2.0 ** (1.0 / 6.0))
_POW_TWO_THIRDS = _log_double_double(Decimal(2) / Decimal(3))
_POW_Q_COEFFICIENTS = tuple(float(Fraction(2, 2 * k + 1)) for k in range(2, 9))
# |y| beyond this with x != +-1 over/underflows anyway (|log|x|| >= 2**-54 for
# doubles); clamping keeps the Dekker splits of y finite.
_POW_Y_CLAMP = 2.0 ** 64


def _log_dd(ops: _Ops, x: ir.Value) -> tuple[ir.Value, ir.Value]:
    """log(x) as hi + lo with relative error ~2**-69, for finite positive double x.

    x = 2**e * m, m in [sqrt(1/2), sqrt(2)], m = c * (1+s)/(1-s) for one of
    three centres c, so log(x) = e*ln2 + log(c) + 2*atanh(s).  m - c is exact
    (Sterbenz), m + c and the quotient s are carried to double length, 2s and
    (2/3)s**3 are formed in double-length arithmetic; only s**5*Q(z), at most
    2**-18.8 of the result, is evaluated in plain double.
    """
    fmt = ops.fmt
    b = ops.b
    is_subnormal = ops.cmp("<", x, ops.f(fmt.min_normal))
    x = ops.select(is_subnormal, ops.mul(x, ops.f(2.0 ** fmt.subnormal_scale_log2)), x)
    exponent_adjust = b.select(is_subnormal, ops.i(-fmt.subnormal_scale_log2), ops.i(0))
    bits = b.bitcast(x, ops.ity)
    biased_exponent = b.and_(b.lshr(bits, ops.i(fmt.mantissa_bits)), ops.i(fmt.exponent_mask))
    e = b.add(b.sub(biased_exponent, ops.i(fmt.exponent_bias)), exponent_adjust)
    m = b.bitcast(b.or_(b.and_(bits, ops.i(fmt.mantissa_mask)),
                        ops.i(fmt.exponent_bias << fmt.mantissa_bits)), ops.ty)  # [1, 2)
    too_big = ops.cmp(">", m, ops.f(fmt.sqrt2))
    m = ops.select(too_big, ops.mul(m, ops.f(0.5)), m)
    e_float = b.sitofp(b.add(e, b.zext(too_big, ops.ity)), ops.ty)

    below = ops.cmp("<", m, ops.f(_POW_SPLITS[0]))
    above = ops.cmp(">", m, ops.f(_POW_SPLITS[1]))
    (c_lo_m, lc_lo_hi, lc_lo_lo), (c_one, _, _), (c_hi_m, lc_hi_hi, lc_hi_lo) = _POW_CENTRES

    def pick(low: float, mid: float, high: float) -> ir.Value:
        return ops.select(below, ops.f(low), ops.select(above, ops.f(high), ops.f(mid)))

    c = pick(c_lo_m, c_one, c_hi_m)
    log_c_hi = pick(lc_lo_hi, 0.0, lc_hi_hi)
    log_c_lo = pick(lc_lo_lo, 0.0, lc_hi_lo)

    u = ops.sub(m, c)  # exact
    v_hi, v_lo = _two_sum(ops, m, c)
    q, q_corr = _divide_double_length(ops, u, ops.f(0.0), v_hi, v_lo)
    s_hi, s_lo = _fast_two_sum(ops, q, q_corr)

    # (2/3)s**3 to double length.
    z_hi, z_lo = _two_product(ops, s_hi, s_hi)
    cube_hi, cube_lo = _two_product(ops, z_hi, s_hi)
    cube_lo = ops.add(cube_lo, ops.add(ops.mul(z_lo, s_hi),
                                       ops.mul(ops.f(3.0), ops.mul(z_hi, s_lo))))
    tt_hi, tt_lo = _POW_TWO_THIRDS
    t_hi, t_lo = _two_product(ops, cube_hi, ops.f(tt_hi))
    t_lo = ops.add(t_lo, ops.add(ops.mul(cube_hi, ops.f(tt_lo)), ops.mul(cube_lo, ops.f(tt_hi))))

    tail = ops.mul(ops.mul(cube_hi, z_hi), ops.horner(z_hi, _POW_Q_COEFFICIENTS))

    two_s_hi = ops.add(s_hi, s_hi)
    a1, a1_err = _fast_two_sum(ops, two_s_hi, t_hi)  # |t| < |2s|/500
    a2, a2_err = _two_sum(ops, log_c_hi, a1)
    a3, a3_err = _two_sum(ops, ops.mul(e_float, ops.f(fmt.ln2_hi)), a2)  # product exact
    low = ops.add(ops.mul(e_float, ops.f(fmt.ln2_lo)), log_c_lo)
    low = ops.add(low, ops.add(ops.add(ops.add(s_lo, s_lo), t_lo), tail))
    low = ops.add(low, ops.add(a1_err, ops.add(a2_err, a3_err)))
    return _fast_two_sum(ops, a3, low)


def _signbit(ops: _Ops, x: ir.Value) -> ir.Value:
    return ops.b.icmp_signed("<", ops.b.bitcast(x, ops.ity), ops.i(0))


def _pow_double(ops: _Ops, x: ir.Value, y: ir.Value, precise: bool) -> ir.Value:
    """x**y for doubles, with every C99 / numpy special case.

    precise: log|x| and y*log|x| to double-double length (for float64
    results); otherwise in plain double, which is ample for float32 results.
    """
    b = ops.b
    inf = ops.f(float("inf"))
    ax = ops.fabs(x)
    ay = ops.fabs(y)

    # Integer and odd-integer exponents; every |y| >= 2**53 is an even
    # integer, and so is +-inf here (0.5*y is then itself an integer).
    y_integer = ops.cmp("==", ops.rint(y), y)
    half_y = ops.mul(y, ops.f(0.5))
    y_odd = b.and_(y_integer, ops.cmp("!=", ops.rint(half_y), half_y))

    # General case: finite nonzero x, |y| clamped (see _POW_Y_CLAMP).
    regular = b.and_(ops.cmp(">", ax, ops.f(0.0)), ops.cmp("<", ax, inf))
    ax_safe = ops.select(regular, ax, ops.f(1.0))
    y_safe = ops.clamp(y, -_POW_Y_CLAMP, _POW_Y_CLAMP)
    if precise:
        log_hi, log_lo = _log_dd(ops, ax_safe)
        p_hi, p_err = _two_product(ops, y_safe, log_hi)
        p_lo = ops.add(p_err, ops.mul(y_safe, log_lo))
        clamped = ops.clamp(p_hi, ops.fmt.exp_clamp_lo, ops.fmt.exp_clamp_hi)
        # Past the clamp the result is 0 or inf whatever p_lo (which can then be large).
        p_lo = ops.select(ops.cmp("==", clamped, p_hi), p_lo, ops.f(0.0))
        magnitude = _exp_from_parts(ops, _exp_parts(ops, clamped, p_lo))[0]
    else:
        # Inputs widened from float32 are never subnormal doubles.  The product
        # is good to ~2**-44 relative; plain double exp (~2**-31) suffices.
        p_hi = ops.mul(y_safe, _log_core(ops, ax_safe, None, handle_subnormal=False))
        # Beyond +-200 the float32 result is 0 or inf.
        magnitude = _wide_exp(ops, ops.clamp(p_hi, -200.0, 200.0))

    # x = +-0, x = +-inf or y = +-inf: the result is 0 or inf, inf exactly
    # when y and log|x| have the same sign (|x| = 1 is overridden below).
    extreme = b.or_(b.or_(ops.cmp("==", ax, ops.f(0.0)), ops.cmp("==", ax, inf)),
                    ops.cmp("==", ay, inf))
    grows = b.icmp_unsigned("==", ops.cmp(">", y, ops.f(0.0)), ops.cmp(">", ax, ops.f(1.0)))
    magnitude = ops.select(extreme, ops.select(grows, inf, ops.f(0.0)), magnitude)

    result = ops.select(b.and_(_signbit(ops, x), y_odd), ops.neg(magnitude), magnitude)
    # Finite negative x with finite non-integer y.
    bad = b.and_(b.and_(ops.cmp("<", x, ops.f(0.0)), ops.cmp(">", x, ops.neg(inf))),
                 b.xor(y_integer, ir.Constant(ir.IntType(1), 1)))
    result = ops.select(bad, ops.f(float("nan")), result)
    result = ops.select(b.or_(ops.is_nan(x), ops.is_nan(y)), ops.add(x, y), result)
    one = b.or_(b.or_(ops.cmp("==", y, ops.f(0.0)), ops.cmp("==", x, ops.f(1.0))),
                b.and_(ops.cmp("==", ax, ops.f(1.0)), ops.cmp("==", ay, inf)))
    return ops.select(one, ops.f(1.0), result)


def emit_pow(builder: ir.IRBuilder, x: ir.Value, y: ir.Value) -> ir.Value:
    """Emit x**y (numpy.power / C99 pow semantics) for float or double x and y.

    float64: log|x| and y*log|x| in double-double, then exp of the
    double-length product.  float32: evaluated in plain double (exactly
    representable inputs; y*log|x| good to ~2**-44, exp to ~2**-31 relative)
    before the single rounding to float.
    """
    ops = _Ops(builder, x)
    if x.type != y.type:
        raise TypeError(f"emit_pow needs operands of one type, got {x.type} and {y.type}")
    if ops.fmt is _FLOAT64:
        ops.fma_products = ops.estrin_polynomials = False  # see _Ops.__init__
        return _pow_double(ops, x, y, precise=True)
    double = ir.DoubleType()
    wide = _Ops(builder, ir.Constant(double, 0.0))
    result = _pow_double(wide, builder.fpext(x, double), builder.fpext(y, double), precise=False)
    return builder.fptrunc(result, ops.ty)


# ---------------------------------------------------------------------------
# sin and cos
# ---------------------------------------------------------------------------
#
# x = n*(pi/2) + r with |r| <= ~pi/4, then sin x = +-sin r or +-cos r by the
# quadrant n mod 4: both kernels are evaluated and one picked by select.  Two
# reductions share the kernels:
#
# |x| < 2**40, inline and branch-free (Cody-Waite): n = rint(x*2/pi) read from
# the low bits of a shifter sum (exact while |x*2/pi| < 2**51; its low two
# bits are the quadrant) and r = x - n*(P1 + P2 + P3), a three-double pi/2
# (~160 bits).  x - n*P1 is exact (n*P1 is formed exactly by the FMA and the
# difference fits in a double), so for float64 r is carried to double length
# and stays accurate even for x within 2**-58 of a multiple of pi/2; the error
# n*2**-160 stays negligible against that while |x| < 2**40.
#
# |x| >= 2**40 up to the largest finite value, out of line (Payne-Hanek, see
# _reduce_large): x*2/pi mod 4 from the bits of 2/pi that matter at x's
# exponent, in 64-bit integer arithmetic, then r to double length.
#
# Accuracy: <= 1 ulp for every finite x (float32 and float64).  +-inf and NaN
# give NaN, sin(-0) = -0.
#
# Kernels: sin r = r + r**3 * S(r**2), cos r = 1 - r**2/2 + r**4 * C(r**2) on
# |r| <= 1 (a little past pi/4, for the slack in n), Chebyshev fits
# (mpmath.chebyfit, coefficients rounded to double); weighted error of the
# float64 tables below 2**-53.9, of the float32 ones (evaluated in double)
# below 2**-38.9.
#
# Dispatch, with no branch in the caller: the inline code computes the fast
# result for every x, then makes one call, select_large(fast, x, is_large) with
# is_large = |x| >= 2**40 (false for NaN), which returns fast unless is_large.
# A branch or a conditional call in an elementwise loop would stop LLVM's loop
# vectoriser; an unconditional call does not, given vector variants (the
# "vector-function-abi-variant" attribute).  They test the flags of all lanes
# at once (one vptest on x86) and only when one is set go lane by lane to the
# large-argument function.  On x86 they save every register they use
# ("no_caller_saved_registers"), so the loop keeps its constants in registers
# across the call: the dispatch costs a call, a test and a return per vector,
# 1-3% of the loop on Zen 4.  On NVPTX (no loop vectoriser) select_large is
# inlined: a branch around the call of the large-argument function.

# pi to 50 digits.
_PI = Decimal("3.14159265358979323846264338327950288419716939937510")


def _three_part(value: Decimal) -> tuple[float, float, float]:
    """value ~= p1 + p2 + p3, each the double nearest to what is left."""
    with localcontext() as ctx:
        ctx.prec = 60
        p1 = float(value)
        p2 = float(value - Decimal(p1))
        p3 = float(value - Decimal(p1) - Decimal(p2))
    return p1, p2, p3


with localcontext() as _ctx:
    _ctx.prec = 60
    _PIO2_1, _PIO2_2, _PIO2_3 = _three_part(_PI / 2)
    _TWO_OVER_PI = float(2 / _PI)
    _TWO_OVER_SQRT_PI_HI = float(2 / _PI.sqrt())
    _TWO_OVER_SQRT_PI_LO = float(2 / _PI.sqrt() - Decimal(_TWO_OVER_SQRT_PI_HI))

# S(z): sin r = r + r**3 * S(r**2), |r| <= 1.
_SIN_F64 = (
    -0.16666666666666666,
    0.0083333333333333,
    -0.00019841269841216566,
    2.755731919201122e-06,
    -2.5052099244914114e-08,
    1.6057701922579786e-10,
    -7.549371704181243e-13,
)
# C(z): cos r = 1 - r**2/2 + r**4 * C(r**2), |r| <= 1.
_COS_F64 = (
    0.041666666666666664,
    -0.001388888888888887,
    2.4801587301557676e-05,
    -2.7557319206204856e-07,
    2.087675190511727e-09,
    -1.1469999475427464e-11,
    4.7251147064766145e-14,
)
_SIN_F32 = (
    -0.16666666666635674,
    0.008333333317834781,
    -0.0001984125743621154,
    2.7553841957286337e-06,
    -2.4653723629072674e-08,
)
_COS_F32 = (
    0.041666666666644495,
    -0.0013888888877802133,
    2.4801578428292702e-05,
    -2.75548322927341e-07,
    2.0591921496065185e-09,
)
# |r| past this only happens once n is no longer exact (|x| >~ 2**51).
_TRIG_R_CLAMP = 1.0
# From this magnitude on, sin and cos take the large-argument path.
_TRIG_LARGE = 2.0 ** 40


def _quadrant_reduce(w: _Ops, x: ir.Value) -> tuple[ir.Value, ir.Value]:
    """(n, bits): n = rint(x*2/pi) as a double, and the shifter sum whose low
    two bits are n mod 4 (x is a double)."""
    shifted = w.fma(x, w.f(_TWO_OVER_PI), w.f(_F64_SHIFTER))
    return w.sub(shifted, w.f(_F64_SHIFTER)), w.b.bitcast(shifted, w.ity)


def _select_quadrant(w: _Ops, quadrant: ir.Value, sin_r: ir.Value, cos_r: ir.Value) -> ir.Value:
    """sin(n*pi/2 + r) from sin r and cos r, for n mod 4 in the low bits of quadrant:
    odd n picks cos r, and bit 1 of n flips the sign."""
    b = w.b
    odd = b.icmp_unsigned("!=", b.and_(quadrant, w.i(1)), w.i(0))
    value = w.select(odd, cos_r, sin_r)
    sign = b.shl(b.and_(quadrant, w.i(2)), w.i(w.fmt.int_bits - 2))
    return b.bitcast(b.xor(b.bitcast(value, w.ity), sign), w.ty)


def _sin_cos_kernels_f64(ops: _Ops, r: ir.Value, r_lo: ir.Value, quadrant: ir.Value,
                         cosine: bool) -> ir.Value:
    """sin or cos of n*pi/2 + (r + r_lo), n mod 4 in the low bits of quadrant."""
    z, z_lo = _two_product(ops, r, r)
    # sin(r + r_lo) = r + (r**3 * S + r_lo*(1 - z/2)); the tail is < r/6.
    lo_term = ops.fma(r_lo, ops.mul(ops.f(-0.5), z), r_lo)
    sin_r = ops.add(r, ops.fma(ops.mul(r, z), ops.polynomial(z, _SIN_F64), lo_term))
    # cos(r + r_lo) = w + ((1 - w) - z/2 + z**2 * C - z_lo/2 - r*r_lo), w = 1 - z/2:
    # 1 - w and its difference with z/2 are exact (Sterbenz), so only the last
    # addition rounds.
    half_z = ops.mul(ops.f(0.5), z)
    w = ops.sub(ops.f(1.0), half_z)
    w_err = ops.sub(ops.sub(ops.f(1.0), w), half_z)
    lo_c = ops.sub(w_err, ops.fma(ops.f(0.5), z_lo, ops.mul(r, r_lo)))
    cos_r = ops.add(w, ops.fma(ops.mul(z, z), ops.polynomial(z, _COS_F64), lo_c))
    if cosine:
        quadrant = ops.b.add(quadrant, ops.i(1))
    return _select_quadrant(ops, quadrant, sin_r, cos_r)


def _sin_cos_f64(ops: _Ops, x: ir.Value, cosine: bool) -> ir.Value:
    n, quadrant = _quadrant_reduce(ops, x)
    # r = x - n*pi/2 to double length.
    r1 = ops.fma(n, ops.f(-_PIO2_1), x)  # exact
    p2, p2_err = _two_product(ops, n, ops.f(_PIO2_2))
    s, s_err = _two_sum(ops, r1, ops.neg(p2))
    low = ops.sub(ops.sub(s_err, p2_err), ops.mul(n, ops.f(_PIO2_3)))
    r_raw, r_lo = _two_sum(ops, s, low)
    r = ops.clamp_keep_nan(r_raw, -_TRIG_R_CLAMP, _TRIG_R_CLAMP)
    r_lo = ops.select(ops.cmp("==", r, r_raw), r_lo, ops.f(0.0))
    return _sin_cos_kernels_f64(ops, r, r_lo, quadrant, cosine)


def _sin_cos_kernels_f32(w: _Ops, r: ir.Value, quadrant: ir.Value, cosine: bool) -> ir.Value:
    """The float32 kernels, in double: sin or cos of n*pi/2 + r, n mod 4 in quadrant."""
    z = w.mul(r, r)
    sin_r = w.fma(w.mul(r, z), w.polynomial(z, _SIN_F32), r)
    cos_r = w.fma(w.mul(z, z), w.polynomial(z, _COS_F32), w.fma(w.f(-0.5), z, w.f(1.0)))
    if cosine:
        quadrant = w.b.add(quadrant, w.i(1))
    return _select_quadrant(w, quadrant, sin_r, cos_r)


def _sin_cos_f32_wide(w: _Ops, x: ir.Value, cosine: bool) -> ir.Value:
    """For a float32 x widened to double (exact): r to ~2**-53 relative (|r| >= ~2**-31
    for float32 inputs), kernels to 2**-38.9; the double result is rounded to float32
    once, by the caller."""
    n, quadrant = _quadrant_reduce(w, x)
    r = w.fma(n, w.f(-_PIO2_1), x)
    r = w.fma(n, w.f(-_PIO2_2), r)
    r = w.fma(n, w.f(-_PIO2_3), r)
    r = w.clamp_keep_nan(r, -_TRIG_R_CLAMP, _TRIG_R_CLAMP)
    return _sin_cos_kernels_f32(w, r, quadrant, cosine)


# ---------------------------------------------------------------------------
# sin and cos of large arguments: Payne-Hanek
# ---------------------------------------------------------------------------
#
# A double |x| = m * 2**e, m a 53-bit integer.  With 2/pi = sum b_k * 2**-k,
# the bits b_k with k <= e - 2 only add multiples of 4 (whole turns) to
# x*2/pi, so x*2/pi = m * W * 2**-190 (mod 4) for the 192-bit window
# W = b_(e-1) .. b_(e+190), up to the bits left out, worth < 2**53 * 2**-190
# = 2**-137.  Of R = m*W mod 2**192 the top two bits count quarter turns and
# the other 190 are the fraction f of one; rounding to the nearest quarter
# turn makes f signed, |f| <= 1/2, and r = f * pi/2.  The double closest to a
# multiple of pi/2, 6381956970095103 * 2**797, is 2**-60.9 from it (|f| =
# 2**-61.5), so f keeps at least 190 - 62 = 128 significant bits: plenty for
# r to double length (2**-106).  float32 arguments take the same route in
# double.

def _pi_scaled(bits: int) -> int:
    """floor(pi * 2**bits), by Machin's formula pi = 16 atan(1/5) - 4 atan(1/239) in
    integer arithmetic with 32 guard bits (the truncated terms add up to far less)."""
    guard = 32
    one = 1 << (bits + guard)

    def atan_of_inverse(n: int) -> int:
        """atan(1/n) * one by its alternating series, each term truncated (error < 1)."""
        power = one // n
        total = power
        k = 1
        while power:
            power //= n * n
            total += (-1) ** k * (power // (2 * k + 1))
            k += 1
        return total

    return (16 * atan_of_inverse(5) - 4 * atan_of_inverse(239)) >> guard


def _two_over_pi_words(count: int) -> tuple[int, ...]:
    """The bits of 2/pi in count 64-bit words, after one word of zeros (2/pi < 1):
    word i holds b_(64i - 63) .. b_(64i), most significant first."""
    bits = 64 * (count - 1)
    guard = 64
    # floor(2/pi * 2**bits): pi's last-place error moves the quotient by < 2**-guard.
    scaled = (1 << (2 * bits + guard + 1)) // _pi_scaled(bits + guard)
    return tuple((scaled >> (64 * (count - 1 - i))) & (2 ** 64 - 1) for i in range(count))


# The window of a double with biased exponent E starts at bit e - 1 of 2/pi
# (e = E - 1075), which is bit E - 1013 of the table counted from its leading
# zero word.  Four words from word (E - 1013) // 64 on hold it; 20 words reach
# E = 2047 (inf, whose result is replaced by NaN).
_TWO_OVER_PI_WORDS = _two_over_pi_words(20)
_LARGE_WINDOW_OFFSET = _FLOAT64.exponent_bias + _FLOAT64.mantissa_bits - 64 + 2


def _two_over_pi_table(module: ir.Module) -> ir.GlobalVariable:
    """The module's constant table of _TWO_OVER_PI_WORDS (as signed i64)."""
    name = "mathlib.two_over_pi"
    if name in module.globals:
        return module.globals[name]
    ty = ir.ArrayType(ir.IntType(64), len(_TWO_OVER_PI_WORDS))
    table = ir.GlobalVariable(module, ty, name=name)
    table.linkage = "internal"
    table.global_constant = True
    table.initializer = ir.Constant(ty, [word - (word >> 63 << 64) for word in _TWO_OVER_PI_WORDS])
    return table


def _reduce_large(w: _Ops, ax: ir.Value) -> tuple[ir.Value, ir.Value, ir.Value]:
    """(quadrant, r, r_lo) with ax = (4k + quadrant)*pi/2 + r + r_lo, |r| <= pi/4, for a
    double ax = |x| >= 2**40 (see above; inf gives a meaningless result)."""
    b = w.b
    fmt = _FLOAT64
    i128 = ir.IntType(128)
    bits = b.bitcast(ax, w.ity)
    m = b.or_(b.and_(bits, w.i(fmt.mantissa_mask)), w.i(1 << fmt.mantissa_bits))
    start = b.sub(b.lshr(bits, w.i(fmt.mantissa_bits)), w.i(_LARGE_WINDOW_OFFSET))
    first_word, shift = b.lshr(start, w.i(6)), b.and_(start, w.i(63))
    table = _two_over_pi_table(b.module)
    zero = ir.Constant(ir.IntType(32), 0)
    words = [b.load(b.gep(table, [zero, b.add(first_word, w.i(k))], inbounds=True,
                          source_etype=table.value_type), typ=w.ity) for k in range(4)]

    def funnel(high: ir.Value, low: ir.Value, count: ir.Value) -> ir.Value:
        """The 64 bits starting count (< 64) bits into high:low; low is shifted in
        two steps so that no shift reaches 64 (poison in LLVM)."""
        return b.or_(b.shl(high, count), b.lshr(b.lshr(low, w.i(1)), b.sub(w.i(63), count)))

    def wide_product(a: ir.Value, c: ir.Value) -> tuple[ir.Value, ir.Value]:
        """a*c as (high, low) 64-bit words."""
        product = b.mul(b.zext(a, i128), b.zext(c, i128))
        return b.trunc(b.lshr(product, ir.Constant(i128, 64)), w.ity), b.trunc(product, w.ity)

    w2, w1, w0 = (funnel(words[k], words[k + 1], shift) for k in range(3))
    # R = m*W mod 2**192 in the words r2:r1:r0.
    h0, r0 = wide_product(m, w0)
    h1, l1 = wide_product(m, w1)
    r1 = b.add(l1, h0)
    carry = b.zext(b.icmp_unsigned("<", r1, h0), w.ity)
    r2 = b.add(b.add(b.mul(m, w2), h1), carry)
    # The nearest quarter turn: the top two bits of R + 2**189 ...
    quadrant = b.lshr(b.add(r2, w.i(1 << 61)), w.i(62))
    # ... and f * 2**192 = R << 2, read as a signed 192-bit number (f in [-1/2, 1/2)).
    s2 = b.or_(b.shl(r2, w.i(2)), b.lshr(r1, w.i(62)))
    s1 = b.or_(b.shl(r1, w.i(2)), b.lshr(r0, w.i(62)))
    s0 = b.shl(r0, w.i(2))
    # |f| * 2**192 (the ones' complement of a negative f is 2**-192 short: negligible).
    sign = b.ashr(s2, w.i(63))
    a2, a1, a0 = (b.xor(s, sign) for s in (s2, s1, s0))
    # Normalise: a2 >= 4 (|f| >= 2**-61.5), so lz <= 61; the bound only keeps the shifts defined.
    lz = b.ctlz(a2, ir.Constant(ir.IntType(1), 0))
    lz = b.select(b.icmp_unsigned("<", lz, w.i(63)), lz, w.i(63))
    top, following = funnel(a2, a1, lz), funnel(a1, a0, lz)
    # |f| = (top + following * 2**-64) * 2**(-64 - lz): the upper 53 bits of top are exact
    # in a double, the rest (< 2**11) and following go into the low part.
    f_hi = b.uitofp(b.and_(top, w.i(-1 << 11)), w.ty)
    top_rest = b.uitofp(b.and_(top, w.i(0x7FF)), w.ty)
    f_lo = w.fma(b.uitofp(following, w.ty), w.f(2.0 ** -64), top_rest)
    scale = b.bitcast(b.shl(b.sub(w.i(fmt.exponent_bias - 64), lz), w.i(fmt.mantissa_bits)), w.ty)
    f_hi, f_lo = w.mul(f_hi, scale), w.mul(f_lo, scale)
    # r = |f| * pi/2 to double length, then f's sign.
    p = w.mul(f_hi, w.f(_PIO2_1))
    tail = w.fma(f_hi, w.f(_PIO2_2), w.fma(f_lo, w.f(_PIO2_1), w.fma(f_hi, w.f(_PIO2_1), w.neg(p))))
    r, r_lo = _fast_two_sum(w, p, tail)
    negative = b.icmp_signed("<", s2, w.i(0))
    return quadrant, w.select(negative, w.neg(r), r), w.select(negative, w.neg(r_lo), r_lo)


def _sin_cos_large(w: _Ops, x: ir.Value, cosine: bool, single: bool) -> ir.Value:
    """sin or cos of a double x with |x| >= 2**40 (a float32 argument when single: then
    with the float32 kernels, to be rounded by the caller); +-inf and NaN give NaN."""
    b = w.b
    quadrant, r, r_lo = _reduce_large(w, w.fabs(x))
    if single:
        value = _sin_cos_kernels_f32(w, r, quadrant, cosine)
    else:
        value = _sin_cos_kernels_f64(w, r, r_lo, quadrant, cosine)
    if not cosine:  # sin is odd, cos even: both were computed for |x|
        value = w.select(_signbit(w, x), w.neg(value), value)
    not_finite = b.fcmp_unordered("==", w.fabs(x), w.f(float("inf")))
    return w.select(not_finite, w.sub(x, x), value)


# ---------------------------------------------------------------------------
# sin and cos: the out-of-line functions (see "Dispatch" above _PI)
# ---------------------------------------------------------------------------
#
# They take and return doubles for both formats (a float32 result is rounded by
# the caller), so that every vector variant the vectoriser picks on an AVX host
# returns at least 256 bits: float32 loops run 4 lanes with AVX2, where a
# float32 vector would have 128.  LLVM puts a vzeroupper before returning a
# value narrower than 256 bits from a function that touched the upper halves of
# the vector registers (as saving them does), which would wipe the caller's
# registers that "no_caller_saved_registers" promises to keep.  So 128-bit
# variants (two doubles; SSE-only hosts) and the scalar functions keep the
# ordinary calling convention.

_VECTOR_LANES = (2, 4, 8, 16)
# Vector variants returning at least this many bits preserve the caller's registers.
_PRESERVING_BITS = 256


class _Attributes(FunctionAttributes):
    """llvmlite's function attributes, also taking LLVM string attributes
    ('"name"' or '"name"="value"'), which llvmlite does not list."""

    def add(self, name: str) -> None:
        if name.startswith('"'):
            set.add(self, name)
        else:
            super().add(name)


def _internal_function(module: ir.Module, name: str, fnty: ir.FunctionType,
                       attributes: Sequence[str]) -> ir.Function:
    function = ir.Function(module, fnty, name=name)
    function.linkage = "internal"
    function.attributes = _Attributes(attributes)
    return function


def _is_nvptx(module: ir.Module) -> bool:
    return module.triple.startswith("nvptx")


def _keep_until_vectorised(module: ir.Module, function: ir.Function) -> None:
    """List function in llvm.compiler.used: a vector variant has no caller until the loop
    vectoriser makes one, and would be deleted as dead code before it runs."""
    ptr = ir.PointerType()
    used = module.globals.get("llvm.compiler.used")
    if used is None:
        used = ir.GlobalVariable(module, ir.ArrayType(ptr, 0), name="llvm.compiler.used")
        used.linkage = "appending"
        used.section = "llvm.metadata"
        members: list[ir.Constant] = []
    else:
        members = list(used.initializer.constant)
    members.append(function)
    used.value_type = ir.ArrayType(ptr, len(members))
    used.initializer = ir.Constant(used.value_type, members)


def _large_argument_function(module: ir.Module, cosine: bool, single: bool) -> ir.Function:
    """double mathlib.<sin|cos>.<f32|f64>.large(double x): the Payne-Hanek path, for
    |x| >= 2**40 (for f32, x is a widened float32 and the result is to be rounded)."""
    name = f"mathlib.{'cos' if cosine else 'sin'}.{'f32' if single else 'f64'}.large"
    if name in module.globals:
        return module.globals[name]
    double = ir.DoubleType()
    function = _internal_function(module, name, ir.FunctionType(double, [double]),
                                  ("noinline", "cold"))
    builder = ir.IRBuilder(function.append_basic_block("entry"))
    (x,) = function.args
    builder.ret(_sin_cos_large(_Ops(builder, x), x, cosine, single))
    return function


def _emit_select_large(function: ir.Function, slow: ir.Function, slow_args: list[ir.Value]) -> None:
    """Body of function(fast, x, is_large), scalar or vector: fast when is_large is 0 in
    every lane (one test of all lanes), else slow(*slow_args)."""
    fast, _, is_large = function.args
    lanes = is_large.type.count if isinstance(is_large.type, ir.VectorType) else 1
    builder = ir.IRBuilder(function.append_basic_block("entry"))
    large_block = function.append_basic_block("large")
    fast_block = function.append_basic_block("fast")
    as_integer = builder.bitcast(is_large, ir.IntType(32 * lanes))
    any_large = builder.icmp_unsigned("!=", as_integer, ir.Constant(as_integer.type, 0))
    builder.cbranch(any_large, large_block, fast_block).set_weights([1, 1 << 20])
    builder.position_at_end(fast_block)
    builder.ret(fast)
    builder.position_at_end(large_block)
    builder.ret(builder.call(slow, slow_args))


def _select_large_type(lanes: int) -> ir.FunctionType:
    """(fast, x, is_large) -> result: doubles and an i32 flag (0 or -1), or vectors of
    lanes of them.  The flag is narrower than x, so that it fits the vptest."""
    double, i32 = ir.DoubleType(), ir.IntType(32)
    if lanes == 1:
        return ir.FunctionType(double, [double, double, i32])
    vector = ir.VectorType(double, lanes)
    return ir.FunctionType(vector, [vector, vector, ir.VectorType(i32, lanes)])


def _emit_lane_by_lane(function: ir.Function, large: ir.Function, lanes: int) -> None:
    """Body of function(fast, x, flags) on vectors: fast, with large(x) in each lane whose
    flag is set, in a loop over the lanes."""
    fast, x, flags = function.args
    i32 = ir.IntType(32)
    entry = function.append_basic_block("entry")
    lane_block = function.append_basic_block("lane")
    large_block = function.append_basic_block("large")
    next_block = function.append_basic_block("next")
    done_block = function.append_basic_block("done")
    builder = ir.IRBuilder(entry)
    builder.branch(lane_block)

    builder.position_at_end(lane_block)
    index = builder.phi(i32)
    result = builder.phi(fast.type)
    flag = builder.extract_element(flags, index)
    builder.cbranch(builder.icmp_unsigned("!=", flag, ir.Constant(i32, 0)), large_block, next_block)

    builder.position_at_end(large_block)
    value = builder.call(large, [builder.extract_element(x, index)])
    updated = builder.insert_element(result, value, index)
    builder.branch(next_block)

    builder.position_at_end(next_block)
    merged = builder.phi(fast.type)
    merged.add_incoming(result, lane_block)
    merged.add_incoming(updated, large_block)
    following = builder.add(index, ir.Constant(i32, 1))
    builder.cbranch(builder.icmp_unsigned("<", following, ir.Constant(i32, lanes)),
                    lane_block, done_block)
    index.add_incoming(ir.Constant(i32, 0), entry)
    index.add_incoming(following, next_block)
    result.add_incoming(fast, entry)
    result.add_incoming(merged, next_block)

    builder.position_at_end(done_block)
    builder.ret(merged)


def _vector_select_large(module: ir.Module, large: ir.Function, scalar_name: str,
                         lanes: int) -> ir.Function:
    """The vector variant of select_large for lanes lanes, and the cold function it
    calls when some flag is set.  (That one calls large, which has no vector variant,
    so the SLP vectoriser cannot turn its calls back into a call of this variant.)"""
    fnty = _select_large_type(lanes)
    attributes: tuple[str, ...] = ("noinline",)
    if 64 * lanes >= _PRESERVING_BITS:
        attributes += ('"no_caller_saved_registers"',)
    by_lane = _internal_function(module, f"{scalar_name}.v{lanes}.lanes", fnty,
                                 attributes + ("cold", "minsize", "optsize"))
    _emit_lane_by_lane(by_lane, large, lanes)
    variant = _internal_function(module, f"{scalar_name}.v{lanes}", fnty, attributes)
    _emit_select_large(variant, by_lane, list(variant.args))
    _keep_until_vectorised(module, variant)
    return variant


def _select_large_function(module: ir.Module, cosine: bool, single: bool) -> ir.Function:
    """double mathlib.<sin|cos>.<f32|f64>.select_large(double fast, double x, i32 is_large):
    fast, or the large-argument result for x if is_large is nonzero.  Out of line with
    vector variants on the CPU, inlined on NVPTX."""
    large = _large_argument_function(module, cosine, single)
    name = large.name.removesuffix(".large") + ".select_large"
    if name in module.globals:
        return module.globals[name]
    nvptx = _is_nvptx(module)
    function = _internal_function(module, name, _select_large_type(1),
                                  ("alwaysinline",) if nvptx else ("noinline",))
    _emit_select_large(function, large, [function.args[1]])
    if not nvptx:
        mappings = ",".join(
            f"_ZGV_LLVM_N{lanes}vvv_{name}({_vector_select_large(module, large, name, lanes).name})"
            for lanes in _VECTOR_LANES)
        function.attributes.add(f'"vector-function-abi-variant"="{mappings}"')
    return function


def _sin_cos(builder: ir.IRBuilder, x: ir.Value, cosine: bool) -> ir.Value:
    ops = _Ops(builder, x)
    w = _wide(builder)
    if ops.fmt is _FLOAT32:
        wide_x = builder.fpext(x, w.ty)
        fast = _sin_cos_f32_wide(w, wide_x, cosine)
    else:
        wide_x = x
        fast = _sin_cos_f64(ops, x, cosine)
    is_large = ops.cmp(">=", ops.fabs(x), ops.f(_TRIG_LARGE))  # false for NaN
    select_large = _select_large_function(builder.module, cosine, ops.fmt is _FLOAT32)
    result = builder.call(select_large, [fast, wide_x, builder.sext(is_large, ir.IntType(32))])
    if ops.fmt is _FLOAT32:
        result = builder.fptrunc(result, ops.ty)
    if not cosine:
        # Keeps sin(-0) = -0 (the reduction turns -0 into +0).
        result = ops.select(ops.cmp("==", x, ops.f(0.0)), x, result)
    return result


def emit_sin(builder: ir.IRBuilder, x: ir.Value) -> ir.Value:
    """Emit sin(x) for a float or double x (see the notes above _PI)."""
    return _sin_cos(builder, x, cosine=False)


def emit_cos(builder: ir.IRBuilder, x: ir.Value) -> ir.Value:
    """Emit cos(x) for a float or double x (see the notes above _PI)."""
    return _sin_cos(builder, x, cosine=True)


# ---------------------------------------------------------------------------
# erf
# ---------------------------------------------------------------------------
#
# erf is odd: computed for |x| and the sign copied back (NaN kept).
# |x| < 1:  erf = |x| * (2/sqrt(pi) + z*Q(z)), z = x**2, with 2/sqrt(pi) to
#           double length in float64 (one FMA), so only the last step rounds.
# |x| >= 1: erf = 1 - exp(-x**2) * G(x), G = erfc * exp(x**2) (erfcx) as a
#           polynomial in y = (x - k)/(x + k), which maps the interval to
#           about [-0.4, 0.4] and tames G's 1/x tail.  |x| is clamped to 6
#           (float32: 4), where erf has rounded to 1.  In float64 x**2 and
#           exp(-x**2) are double length, and 1 - E*G is formed with an exact
#           product and two-sum.
# float32 is evaluated in double (exact arguments, ~2**-32 relative) and
# rounded once.
#
# Tables: Chebyshev fits (mpmath.chebyfit), rounded to double.  Weighted
# errors: Q 2**-54.5 (float64) / 2**-36.4 (float32); G 2**-54.4 on [1, 6]
# with k = 2.5 (float64) / 2**-31.9 on [1, 4] with k = 2 (float32).

_ERF_SPLIT = 1.0
_ERF_SMALL_F64 = (
    -0.37612638903183754,
    0.11283791670955111,
    -0.026866170645123838,
    0.005223977625303518,
    -0.0008548327010033328,
    0.00012055332214716276,
    -1.4925622504489842e-05,
    1.6461446656928561e-06,
    -1.6355118610877705e-07,
    1.4692484859133263e-08,
    -1.1500357159785296e-09,
    6.174097221305255e-11,
)
_ERF_SMALL_F32 = (
    -0.3761263890283394,
    0.11283791626146691,
    -0.02686616120045799,
    0.005223901522381322,
    -0.0008545300982032149,
    0.00011989474929662575,
    -1.4119450134908322e-05,
    1.1131013908553317e-06,
)
_ERFCX_K_F64 = 2.5
_ERF_CLAMP_F64 = 6.0
_ERFCX_F64 = (
    0.2108063640611436,
    -0.3717367339489734,
    0.2517131932174494,
    -0.1250330523788247,
    0.039922539075574935,
    -0.003993701166223159,
    -0.002642365963784453,
    0.0008759154630794508,
    0.00022838036598153182,
    -0.00012887741536369735,
    -3.4182063549802165e-05,
    1.8617072081910595e-05,
    7.5513017799442535e-06,
    -2.3140931150942177e-06,
    -1.79706306540687e-06,
    1.2966926825389417e-07,
    3.3657006736237105e-07,
)
_ERFCX_K_F32 = 2.0
_ERF_CLAMP_F32 = 4.0
_ERFCX_F32 = (
    0.25539567631050575,
    -0.42718584831165,
    0.24165819411285702,
    -0.07897847314706918,
    0.0037329080273491746,
    0.006993954025083926,
    -0.0008476555786712168,
    -0.0009395269021825955,
    4.9876741933444445e-05,
)


def _erf_f64(ops: _Ops, x: ir.Value) -> ir.Value:
    ax = ops.fabs(x)
    z = ops.mul(ax, ax)
    small = ops.fma(ax, ops.f(_TWO_OVER_SQRT_PI_HI),
                    ops.mul(ax, ops.fma(z, ops.polynomial(z, _ERF_SMALL_F64),
                                        ops.f(_TWO_OVER_SQRT_PI_LO))))

    t = ops.clamp(ax, _ERF_SPLIT, _ERF_CLAMP_F64)  # NaN -> the clamp; selected away below
    k = ops.f(_ERFCX_K_F64)
    g = ops.polynomial(ops.div(ops.sub(t, k), ops.add(t, k)), _ERFCX_F64)
    tt, tt_lo = _two_product(ops, t, t)
    e_hi, e_lo = _exp_from_parts(ops, _exp_parts(ops, ops.neg(tt), ops.neg(tt_lo)))
    p, p_lo = _two_product(ops, e_hi, g)
    s, s_err = _fast_two_sum(ops, ops.f(1.0), ops.neg(p))  # p = erfc <= 0.16
    large = ops.add(s, ops.sub(s_err, ops.fma(e_lo, g, p_lo)))

    magnitude = ops.select(ops.cmp("<", ax, ops.f(_ERF_SPLIT)), small, large)
    return ops.copysign(magnitude, x)


def _erf_f32(ops: _Ops, x: ir.Value) -> ir.Value:
    w = _wide(ops.b)
    ax = ops.b.fpext(ops.fabs(x), w.ty)
    z = w.mul(ax, ax)
    small = w.mul(ax, w.fma(z, w.polynomial(z, _ERF_SMALL_F32), w.f(_TWO_OVER_SQRT_PI_HI)))

    t = w.clamp(ax, _ERF_SPLIT, _ERF_CLAMP_F32)
    k = w.f(_ERFCX_K_F32)
    g = w.polynomial(w.div(w.sub(t, k), w.add(t, k)), _ERFCX_F32)
    e = _wide_exp(w, w.neg(w.mul(t, t)))  # t*t is exact
    large = w.fma(w.neg(e), g, w.f(1.0))

    magnitude = w.select(w.cmp("<", ax, w.f(_ERF_SPLIT)), small, large)
    return ops.copysign(ops.b.fptrunc(magnitude, ops.ty), x)


def emit_erf(builder: ir.IRBuilder, x: ir.Value) -> ir.Value:
    """Emit the error function of a float or double x (see the notes above _ERF_SPLIT)."""
    ops = _Ops(builder, x)
    result = _erf_f32(ops, x) if ops.fmt is _FLOAT32 else _erf_f64(ops, x)
    return ops.select(ops.is_nan(x), x, result)

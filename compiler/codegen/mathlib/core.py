"""What every function of the library shares: the constants of each floating-point format,
``Ops`` (an IRBuilder bound to one float type, with the intrinsics and polynomial schemes), and
the exact building blocks of double-length arithmetic (two-sum, two-product, division); and
``StringAttributes``, LLVM function attributes as strings (the vector variants' and the GPU
kernels' attributes, which llvmlite does not list).
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
class Format:
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
# (The float32 algorithms have their own constants, next to them.)
FLOAT64 = Format(
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

FLOAT32 = Format(
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


# ---------------------------------------------------------------------------
# Small IR helper bound to one builder and one float type
# ---------------------------------------------------------------------------

class Ops:
    """Thin wrapper over IRBuilder for scalar float/int arithmetic of one format."""

    def __init__(self, builder: ir.IRBuilder, x: ir.Value) -> None:
        ty = x.type
        if isinstance(ty, ir.DoubleType):
            self.fmt = FLOAT64
        elif isinstance(ty, ir.FloatType):
            self.fmt = FLOAT32
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
# Building blocks: powers of two, double-length arithmetic, shared constants
# ---------------------------------------------------------------------------

def power_of_two(ops: Ops, k: ir.Value) -> ir.Value:
    """2**k for an integer k inside the normal exponent range, from its bits."""
    biased = ops.b.add(k, ops.i(ops.fmt.exponent_bias))
    bits = ops.b.shl(biased, ops.i(ops.fmt.mantissa_bits))
    return ops.b.bitcast(bits, ops.ty)


def split_exponent(ops: Ops, n: ir.Value) -> tuple[ir.Value, ir.Value]:
    """Split n into n1 + n2 with n1 = floor(n/2), so each 2**ni stays normal."""
    n1 = ops.b.ashr(n, ops.i(1))
    n2 = ops.b.sub(n, n1)
    return n1, n2


def fast_two_sum(ops: Ops, a: ir.Value, b: ir.Value) -> tuple[ir.Value, ir.Value]:
    """s = fl(a + b) and its exact error, given |a| >= |b| (Dekker)."""
    s = ops.add(a, b)
    return s, ops.add(ops.sub(a, s), b)


def two_sum(ops: Ops, a: ir.Value, b: ir.Value) -> tuple[ir.Value, ir.Value]:
    """s = fl(a + b) and its exact error, for any magnitudes (Knuth's TwoSum)."""
    s = ops.add(a, b)
    b_part = ops.sub(s, a)
    a_part = ops.sub(s, b_part)
    return s, ops.add(ops.sub(a, a_part), ops.sub(b, b_part))


def _split_halves(ops: Ops, a: ir.Value) -> tuple[ir.Value, ir.Value]:
    """Veltkamp split of a into hi + lo, each with half the significand bits."""
    c = ops.mul(a, ops.f(ops.fmt.veltkamp_factor))
    hi = ops.sub(c, ops.sub(c, a))
    return hi, ops.sub(a, hi)


def two_product(ops: Ops, a: ir.Value, b: ir.Value) -> tuple[ir.Value, ir.Value]:
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


def divide_double_length(ops: Ops, n_hi: ir.Value, n_lo: ir.Value,
                         d_hi: ir.Value, d_lo: ir.Value) -> tuple[ir.Value, ir.Value]:
    """(n_hi + n_lo) / (d_hi + d_lo) as q + correction (to be summed by the caller).

    q = n_hi/d_hi, and the correction is the exactly computed residual
    n - q*d divided by d_hi; for moderate values this is nearly correctly
    rounded.
    """
    q = ops.div(n_hi, d_hi)
    p, p_err = two_product(ops, q, d_hi)
    # n_hi - p is exact: p is within a rounding of n_hi.
    residual = ops.sub(ops.sub(n_hi, p), p_err)
    residual = ops.sub(ops.add(residual, n_lo), ops.mul(q, d_lo))
    return q, ops.div(residual, d_hi)


def signbit(ops: Ops, x: ir.Value) -> ir.Value:
    return ops.b.icmp_signed("<", ops.b.bitcast(x, ops.ity), ops.i(0))


def wide_ops(builder: ir.IRBuilder) -> Ops:
    """Ops for double, the format most float32 functions are evaluated in."""
    return Ops(builder, ir.Constant(ir.DoubleType(), 0.0))


class StringAttributes(FunctionAttributes):
    """llvmlite's function attributes, also taking LLVM string attributes
    ('"name"' or '"name"="value"'), which llvmlite does not list."""

    def add(self, name: str) -> None:
        if name.startswith('"'):
            set.add(self, name)
        else:
            super().add(name)


# Adding then subtracting 1.5 * 2**p-1 rounds a value of magnitude below
# 2**(p-2) to an integer (ties to even) and leaves that integer, in two's
# complement, in the low bits of the sum.
F32_SHIFTER = 1.5 * 2.0 ** 23
F64_SHIFTER = 1.5 * 2.0 ** 52


# pi to 50 digits.
PI = Decimal("3.14159265358979323846264338327950288419716939937510")

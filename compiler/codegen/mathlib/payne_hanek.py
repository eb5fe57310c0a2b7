"""sin and cos of |x| >= 2**40: the Payne-Hanek reduction, in 64-bit integer arithmetic on the
bits of 2/pi that matter at x's exponent (a table computed here, at import, from pi by Machin's
formula), then the kernels of trig.py.
"""

from __future__ import annotations

from llvmlite import ir

from .core import FLOAT64, Ops, fast_two_sum, signbit
from .trig import PIO2_1, PIO2_2, sin_cos_kernels_f32, sin_cos_kernels_f64

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
TWO_OVER_PI_WORDS = _two_over_pi_words(20)
_LARGE_WINDOW_OFFSET = FLOAT64.exponent_bias + FLOAT64.mantissa_bits - 64 + 2


def _two_over_pi_table(module: ir.Module) -> ir.GlobalVariable:
    """The module's constant table of TWO_OVER_PI_WORDS (as signed i64)."""
    name = "mathlib.two_over_pi"
    if name in module.globals:
        return module.globals[name]
    ty = ir.ArrayType(ir.IntType(64), len(TWO_OVER_PI_WORDS))
    table = ir.GlobalVariable(module, ty, name=name)
    table.linkage = "internal"
    table.global_constant = True
    table.initializer = ir.Constant(ty, [word - (word >> 63 << 64) for word in TWO_OVER_PI_WORDS])
    return table


def _reduce_large(w: Ops, ax: ir.Value) -> tuple[ir.Value, ir.Value, ir.Value]:
    """(quadrant, r, r_lo) with ax = (4k + quadrant)*pi/2 + r + r_lo, |r| <= pi/4, for a
    double ax = |x| >= 2**40 (see above; inf gives a meaningless result)."""
    b = w.b
    fmt = FLOAT64
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
    p = w.mul(f_hi, w.f(PIO2_1))
    tail = w.fma(f_hi, w.f(PIO2_2), w.fma(f_lo, w.f(PIO2_1), w.fma(f_hi, w.f(PIO2_1), w.neg(p))))
    r, r_lo = fast_two_sum(w, p, tail)
    negative = b.icmp_signed("<", s2, w.i(0))
    return quadrant, w.select(negative, w.neg(r), r), w.select(negative, w.neg(r_lo), r_lo)


def sin_cos_large(w: Ops, x: ir.Value, cosine: bool, single: bool) -> ir.Value:
    """sin or cos of a double x with |x| >= 2**40 (a float32 argument when single: then
    with the float32 kernels, to be rounded by the caller); +-inf and NaN give NaN."""
    b = w.b
    quadrant, r, r_lo = _reduce_large(w, w.fabs(x))
    if single:
        value = sin_cos_kernels_f32(w, r, quadrant, cosine)
    else:
        value = sin_cos_kernels_f64(w, r, r_lo, quadrant, cosine)
    if not cosine:  # sin is odd, cos even: both were computed for |x|
        value = w.select(signbit(w, x), w.neg(value), value)
    not_finite = b.fcmp_unordered("==", w.fabs(x), w.f(float("inf")))
    return w.select(not_finite, w.sub(x, x), value)

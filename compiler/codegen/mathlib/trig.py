"""sin and cos: the notes on both reductions, the kernels, and the inline Cody-Waite reduction
for |x| < 2**40.  The reduction of larger arguments is in payne_hanek.py; the emitters, and the
call that picks between the two, in trig_dispatch.py.
"""

from __future__ import annotations

from decimal import Decimal, localcontext

from llvmlite import ir

from .core import F64_SHIFTER, PI, Ops, two_product, two_sum

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
# payne_hanek.py): x*2/pi mod 4 from the bits of 2/pi that matter at x's
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
# The choice between the two, made without a branch in the caller: see
# trig_dispatch.py.


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
    PIO2_1, PIO2_2, PIO2_3 = _three_part(PI / 2)
    _TWO_OVER_PI = float(2 / PI)

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
TRIG_LARGE = 2.0 ** 40


def _quadrant_reduce(w: Ops, x: ir.Value) -> tuple[ir.Value, ir.Value]:
    """(n, bits): n = rint(x*2/pi) as a double, and the shifter sum whose low
    two bits are n mod 4 (x is a double)."""
    shifted = w.fma(x, w.f(_TWO_OVER_PI), w.f(F64_SHIFTER))
    return w.sub(shifted, w.f(F64_SHIFTER)), w.b.bitcast(shifted, w.ity)


def _select_quadrant(w: Ops, quadrant: ir.Value, sin_r: ir.Value, cos_r: ir.Value) -> ir.Value:
    """sin(n*pi/2 + r) from sin r and cos r, for n mod 4 in the low bits of quadrant:
    odd n picks cos r, and bit 1 of n flips the sign."""
    b = w.b
    odd = b.icmp_unsigned("!=", b.and_(quadrant, w.i(1)), w.i(0))
    value = w.select(odd, cos_r, sin_r)
    sign = b.shl(b.and_(quadrant, w.i(2)), w.i(w.fmt.int_bits - 2))
    return b.bitcast(b.xor(b.bitcast(value, w.ity), sign), w.ty)


def sin_cos_kernels_f64(ops: Ops, r: ir.Value, r_lo: ir.Value, quadrant: ir.Value,
                         cosine: bool) -> ir.Value:
    """sin or cos of n*pi/2 + (r + r_lo), n mod 4 in the low bits of quadrant."""
    z, z_lo = two_product(ops, r, r)
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


def sin_cos_f64(ops: Ops, x: ir.Value, cosine: bool) -> ir.Value:
    n, quadrant = _quadrant_reduce(ops, x)
    # r = x - n*pi/2 to double length.
    r1 = ops.fma(n, ops.f(-PIO2_1), x)  # exact
    p2, p2_err = two_product(ops, n, ops.f(PIO2_2))
    s, s_err = two_sum(ops, r1, ops.neg(p2))
    low = ops.sub(ops.sub(s_err, p2_err), ops.mul(n, ops.f(PIO2_3)))
    r_raw, r_lo = two_sum(ops, s, low)
    r = ops.clamp_keep_nan(r_raw, -_TRIG_R_CLAMP, _TRIG_R_CLAMP)
    r_lo = ops.select(ops.cmp("==", r, r_raw), r_lo, ops.f(0.0))
    return sin_cos_kernels_f64(ops, r, r_lo, quadrant, cosine)


def sin_cos_kernels_f32(w: Ops, r: ir.Value, quadrant: ir.Value, cosine: bool) -> ir.Value:
    """The float32 kernels, in double: sin or cos of n*pi/2 + r, n mod 4 in quadrant."""
    z = w.mul(r, r)
    sin_r = w.fma(w.mul(r, z), w.polynomial(z, _SIN_F32), r)
    cos_r = w.fma(w.mul(z, z), w.polynomial(z, _COS_F32), w.fma(w.f(-0.5), z, w.f(1.0)))
    if cosine:
        quadrant = w.b.add(quadrant, w.i(1))
    return _select_quadrant(w, quadrant, sin_r, cos_r)


def sin_cos_f32_wide(w: Ops, x: ir.Value, cosine: bool) -> ir.Value:
    """For a float32 x widened to double (exact): r to ~2**-53 relative (|r| >= ~2**-31
    for float32 inputs), kernels to 2**-38.9; the double result is rounded to float32
    once, by the caller."""
    n, quadrant = _quadrant_reduce(w, x)
    r = w.fma(n, w.f(-PIO2_1), x)
    r = w.fma(n, w.f(-PIO2_2), r)
    r = w.fma(n, w.f(-PIO2_3), r)
    r = w.clamp_keep_nan(r, -_TRIG_R_CLAMP, _TRIG_R_CLAMP)
    return sin_cos_kernels_f32(w, r, quadrant, cosine)

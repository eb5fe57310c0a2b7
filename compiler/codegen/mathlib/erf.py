"""erf: a polynomial in x**2 below 1, 1 - exp(-x**2) * erfcx(x) from 1 on."""

from __future__ import annotations

from decimal import Decimal, localcontext

from llvmlite import ir

from .core import FLOAT32, PI, Ops, fast_two_sum, two_product, wide_ops
from .exp_log import exp_from_parts, exp_parts, wide_exp

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

with localcontext() as _ctx:
    _ctx.prec = 60
    _TWO_OVER_SQRT_PI_HI = float(2 / PI.sqrt())
    _TWO_OVER_SQRT_PI_LO = float(2 / PI.sqrt() - Decimal(_TWO_OVER_SQRT_PI_HI))

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


def _erf_f64(ops: Ops, x: ir.Value) -> ir.Value:
    ax = ops.fabs(x)
    z = ops.mul(ax, ax)
    small = ops.fma(ax, ops.f(_TWO_OVER_SQRT_PI_HI),
                    ops.mul(ax, ops.fma(z, ops.polynomial(z, _ERF_SMALL_F64),
                                        ops.f(_TWO_OVER_SQRT_PI_LO))))

    t = ops.clamp(ax, _ERF_SPLIT, _ERF_CLAMP_F64)  # NaN -> the clamp; selected away below
    k = ops.f(_ERFCX_K_F64)
    g = ops.polynomial(ops.div(ops.sub(t, k), ops.add(t, k)), _ERFCX_F64)
    tt, tt_lo = two_product(ops, t, t)
    e_hi, e_lo = exp_from_parts(ops, exp_parts(ops, ops.neg(tt), ops.neg(tt_lo)))
    p, p_lo = two_product(ops, e_hi, g)
    s, s_err = fast_two_sum(ops, ops.f(1.0), ops.neg(p))  # p = erfc <= 0.16
    large = ops.add(s, ops.sub(s_err, ops.fma(e_lo, g, p_lo)))

    magnitude = ops.select(ops.cmp("<", ax, ops.f(_ERF_SPLIT)), small, large)
    return ops.copysign(magnitude, x)


def _erf_f32(ops: Ops, x: ir.Value) -> ir.Value:
    w = wide_ops(ops.b)
    ax = ops.b.fpext(ops.fabs(x), w.ty)
    z = w.mul(ax, ax)
    small = w.mul(ax, w.fma(z, w.polynomial(z, _ERF_SMALL_F32), w.f(_TWO_OVER_SQRT_PI_HI)))

    t = w.clamp(ax, _ERF_SPLIT, _ERF_CLAMP_F32)
    k = w.f(_ERFCX_K_F32)
    g = w.polynomial(w.div(w.sub(t, k), w.add(t, k)), _ERFCX_F32)
    e = wide_exp(w, w.neg(w.mul(t, t)))  # t*t is exact
    large = w.fma(w.neg(e), g, w.f(1.0))

    magnitude = w.select(w.cmp("<", ax, w.f(_ERF_SPLIT)), small, large)
    return ops.copysign(ops.b.fptrunc(magnitude, ops.ty), x)


def emit_erf(builder: ir.IRBuilder, x: ir.Value) -> ir.Value:
    """Emit the error function of a float or double x (see the notes at the top of this module)."""
    ops = Ops(builder, x)
    result = _erf_f32(ops, x) if ops.fmt is FLOAT32 else _erf_f64(ops, x)
    return ops.select(ops.is_nan(x), x, result)

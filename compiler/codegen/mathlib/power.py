"""pow (numpy.power / C99 semantics): float64 through a double-double log|x| and an exp of the
double-length product y*log|x|; float32 in plain double, rounded once.
"""

from __future__ import annotations

from decimal import Decimal, localcontext
from fractions import Fraction

from llvmlite import ir

from .core import (
    FLOAT64,
    Ops,
    divide_double_length,
    fast_two_sum,
    signbit,
    two_product,
    two_sum,
)
from .exp_log import exp_from_parts, exp_parts, log_core, wide_exp


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


def _log_dd(ops: Ops, x: ir.Value) -> tuple[ir.Value, ir.Value]:
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
    v_hi, v_lo = two_sum(ops, m, c)
    q, q_corr = divide_double_length(ops, u, ops.f(0.0), v_hi, v_lo)
    s_hi, s_lo = fast_two_sum(ops, q, q_corr)

    # (2/3)s**3 to double length.
    z_hi, z_lo = two_product(ops, s_hi, s_hi)
    cube_hi, cube_lo = two_product(ops, z_hi, s_hi)
    cube_lo = ops.add(cube_lo, ops.add(ops.mul(z_lo, s_hi),
                                       ops.mul(ops.f(3.0), ops.mul(z_hi, s_lo))))
    tt_hi, tt_lo = _POW_TWO_THIRDS
    t_hi, t_lo = two_product(ops, cube_hi, ops.f(tt_hi))
    t_lo = ops.add(t_lo, ops.add(ops.mul(cube_hi, ops.f(tt_lo)), ops.mul(cube_lo, ops.f(tt_hi))))

    tail = ops.mul(ops.mul(cube_hi, z_hi), ops.horner(z_hi, _POW_Q_COEFFICIENTS))

    two_s_hi = ops.add(s_hi, s_hi)
    a1, a1_err = fast_two_sum(ops, two_s_hi, t_hi)  # |t| < |2s|/500
    a2, a2_err = two_sum(ops, log_c_hi, a1)
    a3, a3_err = two_sum(ops, ops.mul(e_float, ops.f(fmt.ln2_hi)), a2)  # product exact
    low = ops.add(ops.mul(e_float, ops.f(fmt.ln2_lo)), log_c_lo)
    low = ops.add(low, ops.add(ops.add(ops.add(s_lo, s_lo), t_lo), tail))
    low = ops.add(low, ops.add(a1_err, ops.add(a2_err, a3_err)))
    return fast_two_sum(ops, a3, low)


def _pow_double(ops: Ops, x: ir.Value, y: ir.Value, precise: bool) -> ir.Value:
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
        p_hi, p_err = two_product(ops, y_safe, log_hi)
        p_lo = ops.add(p_err, ops.mul(y_safe, log_lo))
        clamped = ops.clamp(p_hi, ops.fmt.exp_clamp_lo, ops.fmt.exp_clamp_hi)
        # Past the clamp the result is 0 or inf whatever p_lo (which can then be large).
        p_lo = ops.select(ops.cmp("==", clamped, p_hi), p_lo, ops.f(0.0))
        magnitude = exp_from_parts(ops, exp_parts(ops, clamped, p_lo))[0]
    else:
        # Inputs widened from float32 are never subnormal doubles.  The product
        # is good to ~2**-44 relative; plain double exp (~2**-31) suffices.
        p_hi = ops.mul(y_safe, log_core(ops, ax_safe, None, handle_subnormal=False))
        # Beyond +-200 the float32 result is 0 or inf.
        magnitude = wide_exp(ops, ops.clamp(p_hi, -200.0, 200.0))

    # x = +-0, x = +-inf or y = +-inf: the result is 0 or inf, inf exactly
    # when y and log|x| have the same sign (|x| = 1 is overridden below).
    extreme = b.or_(b.or_(ops.cmp("==", ax, ops.f(0.0)), ops.cmp("==", ax, inf)),
                    ops.cmp("==", ay, inf))
    grows = b.icmp_unsigned("==", ops.cmp(">", y, ops.f(0.0)), ops.cmp(">", ax, ops.f(1.0)))
    magnitude = ops.select(extreme, ops.select(grows, inf, ops.f(0.0)), magnitude)

    result = ops.select(b.and_(signbit(ops, x), y_odd), ops.neg(magnitude), magnitude)
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
    ops = Ops(builder, x)
    if x.type != y.type:
        raise TypeError(f"emit_pow needs operands of one type, got {x.type} and {y.type}")
    if ops.fmt is FLOAT64:
        ops.fma_products = ops.estrin_polynomials = False  # see Ops.__init__
        return _pow_double(ops, x, y, precise=True)
    double = ir.DoubleType()
    wide = Ops(builder, ir.Constant(double, 0.0))
    result = _pow_double(wide, builder.fpext(x, double), builder.fpext(y, double), precise=False)
    return builder.fptrunc(result, ops.ty)

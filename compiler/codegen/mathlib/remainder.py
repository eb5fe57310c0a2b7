"""floormod: the remainder of x / y with the sign of y (Python's and numpy's ``%``, TF1's
``floormod``), from an exact truncated remainder (C's ``fmod``).

The truncated remainder is reduced in double, step by step: with r = |x| and a = |y| scaled by a
power of two 2**e (so that r / (a * 2**e) < 2**53), q = trunc(r / (a * 2**e)) is an integer held
exactly, and r - q * a * 2**e is computed by one FMA.  That difference is a multiple of the last
bit of a * 2**e and smaller than twice it, so it is exact; a q one too large or too small is
mended by adding or subtracting a * 2**e once.  Each step takes up to 51 bits off the exponent
gap between r and a.  float32 arguments (exact in double, 277 bits of gap at most) take six
steps and are exact for every input; float64 ones take eight: exact while |x / y| < 2**400
(1e120), NaN beyond (the full range would take 42 steps).  A subnormal float64 y is scaled by
2**54 first, with x, so that its exponent field is a true one.  The sign is then set as
numpy does, in the argument's own format: a remainder whose sign differs from y's gets y added
(one rounding), and a zero remainder takes y's sign.  y = 0, an infinite x or a NaN give NaN;
x % inf is x when their signs agree, else inf.
"""

from __future__ import annotations

from llvmlite import ir

from .core import FLOAT32, FLOAT64, Ops, power_of_two, wide_ops

# Exponent-gap steps, each worth 51 bits: float32's largest gap is 127 + 149 = 276 bits.
_STEPS = {FLOAT32: 6, FLOAT64: 8}
# A subnormal float64 divisor (and x) is scaled by this power of two, and the remainder back.
_SUBNORMAL_SCALE = 2.0 ** 54
# A step aims at quotients below 2**52: the divisor is scaled by 2**(gap - this).
_STEP_BITS = 51


def _exponent_field(w: Ops, value: ir.Value) -> ir.Value:
    """The biased exponent of a non-negative double, as an integer (0 for subnormals and 0)."""
    bits = w.b.bitcast(value, w.ity)
    return w.b.and_(w.b.lshr(bits, w.i(FLOAT64.mantissa_bits)), w.i(FLOAT64.exponent_mask))


def _trunc(w: Ops, value: ir.Value) -> ir.Value:
    return w.b.call(w._intrinsic("llvm.trunc", 1), [value])


def _reduce(w: Ops, r: ir.Value, a: ir.Value) -> ir.Value:
    """One step: r reduced modulo a * 2**e, into [0, a * 2**e); r itself where it is already
    below that (an infinite a included)."""
    b = w.b
    gap = b.sub(b.sub(_exponent_field(w, r), _exponent_field(w, a)), w.i(_STEP_BITS))
    e = b.select(b.icmp_signed(">", gap, w.i(0)), gap, w.i(0))
    half = b.ashr(e, w.i(1))     # two factors, each a normal power of two
    divisor = w.mul(w.mul(a, power_of_two(w, half)), power_of_two(w, b.sub(e, half)))
    q = _trunc(w, w.div(r, divisor))
    remainder = w.fma(w.neg(q), divisor, r)
    remainder = w.select(w.cmp("<", remainder, w.f(0.0)), w.add(remainder, divisor), remainder)
    remainder = w.select(w.cmp(">=", remainder, divisor), w.sub(remainder, divisor), remainder)
    return w.select(w.cmp("<", r, divisor), r, remainder)


def emit_floormod(builder: ir.IRBuilder, x: ir.Value, y: ir.Value) -> ir.Value:
    """Emit x mod y with the sign of y for float or double x and y (see the module's docstring)."""
    ops = Ops(builder, x)
    w = wide_ops(builder)
    wide_x = x if ops.fmt is FLOAT64 else builder.fpext(x, w.ty)
    wide_y = y if ops.fmt is FLOAT64 else builder.fpext(y, w.ty)
    r, a = w.fabs(wide_x), w.fabs(wide_y)
    subnormal = w.cmp("<", a, w.f(FLOAT64.min_normal))
    if ops.fmt is FLOAT64:
        r = w.select(subnormal, w.mul(r, w.f(_SUBNORMAL_SCALE)), r)
        a = w.select(subnormal, w.mul(a, w.f(_SUBNORMAL_SCALE)), a)
    for _ in range(_STEPS[ops.fmt]):
        r = _reduce(w, r, a)
    # Not reduced (a float64 quotient beyond 2**400, or x scaled to inf): NaN.
    r = w.select(w.cmp("<", r, a), r, w.f(float("nan")))
    if ops.fmt is FLOAT64:
        r = w.select(subnormal, w.mul(r, w.f(1.0 / _SUBNORMAL_SCALE)), r)
    # The truncated remainder (exact, so exactly representable in the argument's format).
    truncated = ops.copysign(r if ops.fmt is FLOAT64 else builder.fptrunc(r, ops.ty), x)
    zero = ops.cmp("==", truncated, ops.f(0.0))
    signs_differ = builder.xor(ops.cmp("<", truncated, ops.f(0.0)), ops.cmp("<", y, ops.f(0.0)))
    result = ops.select(signs_differ, ops.add(truncated, y), truncated)
    result = ops.select(zero, ops.copysign(ops.f(0.0), y), result)
    # An infinite or NaN x, a zero or NaN y: NaN (x % inf is handled by the steps: r stays x).
    undefined = builder.or_(ops.cmp("==", y, ops.f(0.0)),
                            builder.or_(ops.is_nan(y), builder.not_(ops.cmp("<", ops.fabs(x), ops.f(float("inf"))))))
    return ops.select(undefined, ops.f(float("nan")), result)

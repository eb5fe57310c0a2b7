"""Transcendental functions emitted as LLVM IR, as branch-free inline code.

Every emitter takes an ``ir.IRBuilder`` and a scalar float32 or float64
value and returns a value of the same type.  The generated code uses only
arithmetic, bitcasts, integer ops, ``fcmp``/``select``, ``fpext``/``fptrunc``
and the intrinsics ``llvm.fabs``, ``llvm.copysign``, ``llvm.rint`` and
``llvm.fma``: no calls into libm, no branches, and no fast-math flags.  That
keeps it vectorisable by LLVM's loop vectoriser on the CPU and lowerable by the
NVPTX backend, which has no libm.  (One exception: sin and cos of |x| >= 2**40
need a long reduction, which they make out of line, behind one call that keeps
the loop vectorisable; see trig_dispatch.py.)  ``llvm.fma`` is one correctly
rounded operation on both targets (FMA hardware on x86-64-v3+ and sm_80), and
plain ``fmul``/``fadd`` are never contracted, so CPU and GPU results are
identical.

That is why the library is our own: libm calls can be neither inlined into a
fused kernel nor vectorised by LLVM, the GPU has no libm, and libdevice would
give results that differ from the CPU's.

float64 functions are evaluated in float64 with double-length (two-double)
corrections.  float32 functions take the cheapest route that stays below
1 ulp: exp, log, log1p, tanh and sigmoid in float32 with FMA-based error
compensation (tanh and sigmoid carry exp as a float32 pair); expm1, sin, cos,
erf, atan (and pow) in plain double, rounded once to float32.  Special values
follow IEEE / numpy semantics.  sin and cos reduce by Cody-Waite for
|x| < 2**40 and by Payne-Hanek beyond.

Modules, each depending only on those listed before it:

- ``core``: the constants of each format, ``Ops`` (an IRBuilder bound to one
  float type: intrinsics, Horner and Estrin polynomials) and double-length
  arithmetic (two-sum, two-product, division).
- ``exp_log``: exp, expm1, log, log1p, and the reductions and wide (double)
  evaluations the functions below build on.
- ``tanh_sigmoid``: tanh and sigmoid.
- ``power``: pow.
- ``remainder``: floormod (an exact remainder, reduced by FMA steps).
- ``erf``: erf.
- ``atan``: atan (atan2, asin and acos are built on it in ``ops/elementwise.py``).
- ``trig``: notes on sin and cos, their kernels and the Cody-Waite reduction.
- ``payne_hanek``: the large-argument reduction and its table of 2/pi.
- ``trig_dispatch``: emit_sin and emit_cos, and the out-of-line functions,
  vector variants and calling convention that keep their loops vectorisable.
"""

from __future__ import annotations

from .atan import emit_atan
from .erf import emit_erf
from .exp_log import emit_exp, emit_expm1, emit_log, emit_log1p
from .power import emit_pow
from .remainder import emit_floormod
from .tanh_sigmoid import emit_sigmoid, emit_tanh
from .trig_dispatch import emit_cos, emit_sin

__all__ = [
    "emit_exp",
    "emit_expm1",
    "emit_log",
    "emit_log1p",
    "emit_tanh",
    "emit_sigmoid",
    "emit_pow",
    "emit_floormod",
    "emit_sin",
    "emit_cos",
    "emit_erf",
    "emit_atan",
]

"""Accuracy, special-value, vectorisation and NVPTX tests for compiler.codegen.mathlib."""

from __future__ import annotations

import contextlib
import ctypes
import functools
import math
import pathlib
import re
import shutil
import subprocess
from decimal import ROUND_HALF_EVEN, Decimal, localcontext
from fractions import Fraction
from typing import Callable, Iterator, Sequence

import llvmlite.binding as llvm
import numpy as np
import pytest
from llvmlite import ir

from compiler.codegen import mathlib
from compiler.codegen.mathlib.payne_hanek import TWO_OVER_PI_WORDS

llvm.initialize_all_targets()
llvm.initialize_all_asmprinters()

Emitter = Callable[..., ir.Value]

# The functions of one operand; pow, the one of two, has tests of its own.
EMITTERS: dict[str, Emitter] = {
    "exp": mathlib.emit_exp,
    "expm1": mathlib.emit_expm1,
    "log": mathlib.emit_log,
    "log1p": mathlib.emit_log1p,
    "tanh": mathlib.emit_tanh,
    "sigmoid": mathlib.emit_sigmoid,
    "sin": mathlib.emit_sin,
    "cos": mathlib.emit_cos,
    "erf": mathlib.emit_erf,
    "atan": mathlib.emit_atan,
}
ALL_EMITTERS: dict[str, Emitter] = {**EMITTERS, "pow": mathlib.emit_pow}
ARITY: dict[str, int] = {**dict.fromkeys(EMITTERS, 1), "pow": 2}

IR_TYPES = {np.float32: ir.FloatType(), np.float64: ir.DoubleType()}
DTYPES = [np.float32, np.float64]
# Allowed max error in ulp of the correctly rounded result.
ULP_LIMIT = {np.float32: 2.0, np.float64: 4.0}


def _sigmoid_ld(x: np.ndarray) -> np.ndarray:
    # exp(-|x|) form: never overflows.
    e = np.exp(-np.abs(x))
    return np.where(x >= 0, 1 / (1 + e), e / (1 + e))


_PI_LD = np.longdouble("3.14159265358979323846264338327950288")


def _erf_series(x: np.ndarray) -> np.ndarray:
    """erf in x's own (wide) dtype: 2/sqrt(pi) * exp(-x**2) * sum 2**n x**(2n+1) / (2n+1)!!.

    Every term is positive (no cancellation), so the relative error is a few
    dozen roundings of the working format: ~2**-57 in long double, ample for a
    float64 reference (it is checked against math.erf below).  |x| >= 6.5 gives
    +-1, NaN stays NaN.
    """
    ax = np.abs(x)
    a = np.minimum(ax, x.dtype.type(6.5))
    z = a * a
    term, total = a.copy(), a.copy()
    for n in range(1, 220):
        term = term * (2 * z) / (2 * n + 1)
        total = total + term
    scale = 2 / np.sqrt(_PI_LD.astype(x.dtype))
    value = np.where(ax >= 6.5, x.dtype.type(1), total * np.exp(-z) * scale)
    return np.copysign(value, x)


# Long-double (x87 80-bit) references: more accurate than the float64 result.
REFERENCES: dict[str, Callable[[np.ndarray], np.ndarray]] = {
    "exp": np.exp,
    "expm1": np.expm1,
    "log": np.log,
    "log1p": np.log1p,
    "tanh": np.tanh,
    "sigmoid": _sigmoid_ld,
    "sin": np.sin,
    "cos": np.cos,
    "erf": _erf_series,
    "atan": np.arctan,
}


def _reference(name: str, x: np.ndarray) -> np.ndarray:
    """numpy reference: float64 inputs in long double, float32 inputs in float64."""
    wide = np.longdouble if x.dtype == np.float64 else np.float64
    with np.errstate(all="ignore"):
        return REFERENCES[name](x.astype(wide))


# ---------------------------------------------------------------------------
# CPU JIT harness
# ---------------------------------------------------------------------------

_TARGET_MACHINE: llvm.TargetMachine | None = None


def _host_target_machine() -> llvm.TargetMachine:
    global _TARGET_MACHINE
    if _TARGET_MACHINE is None:
        llvm.initialize_native_target()
        llvm.initialize_native_asmprinter()
        target = llvm.Target.from_default_triple()
        _TARGET_MACHINE = target.create_target_machine(
            cpu=llvm.get_host_cpu_name(),
            features=llvm.get_host_cpu_features().flatten(),
            opt=3,
            jit=True,
        )
    return _TARGET_MACHINE


def _build_loop_module(name: str, dtype: type) -> ir.Module:
    """void f(T* in_1, .., T* in_k, T* out, i64 n): out[i] = name(in_1[i], .., in_k[i])."""
    ty = IR_TYPES[dtype]
    i64 = ir.IntType(64)
    module = ir.Module(name=f"{name}_{dtype.__name__}")
    fnty = ir.FunctionType(ir.VoidType(), [ty.as_pointer()] * (ARITY[name] + 1) + [i64])
    fn = ir.Function(module, fnty, name="f")
    *sources, dst, n = fn.args
    for arg in (*sources, dst):
        arg.add_attribute("noalias")
    entry = fn.append_basic_block("entry")
    loop = fn.append_basic_block("loop")
    done = fn.append_basic_block("done")
    builder = ir.IRBuilder(entry)
    builder.cbranch(builder.icmp_signed(">", n, ir.Constant(i64, 0)), loop, done)
    builder.position_at_end(loop)
    i = builder.phi(i64)
    i.add_incoming(ir.Constant(i64, 0), entry)
    operands = [builder.load(builder.gep(src, [i])) for src in sources]
    builder.store(ALL_EMITTERS[name](builder, *operands), builder.gep(dst, [i]))
    i_next = builder.add(i, ir.Constant(i64, 1))
    i.add_incoming(i_next, loop)
    builder.cbranch(builder.icmp_signed("<", i_next, n), loop, done)
    builder.position_at_end(done)
    builder.ret_void()
    return module


def _optimise(module: ir.Module, tm: llvm.TargetMachine) -> llvm.ModuleRef:
    """module parsed, verified and optimised at -O3 for tm's target."""
    module.triple = tm.triple
    module.data_layout = str(tm.target_data)
    mod = llvm.parse_assembly(str(module))
    mod.verify()
    pto = llvm.create_pipeline_tuning_options(speed_level=3)
    pb = llvm.create_pass_builder(tm, pto)
    pb.getModulePassManager().run(mod, pb)
    return mod


class _Compiled:
    """A JIT-compiled elementwise loop for one function and dtype, of any number of operands."""

    def __init__(self, name: str, dtype: type) -> None:
        tm = _host_target_machine()
        self.dtype = dtype
        self.llvm_module = _optimise(_build_loop_module(name, dtype), tm)
        self.engine = llvm.create_mcjit_compiler(self.llvm_module, tm)
        self.engine.finalize_object()
        pointers = [ctypes.c_void_p] * (ARITY[name] + 1)
        self.cfunc = ctypes.CFUNCTYPE(None, *pointers, ctypes.c_int64)(
            self.engine.get_function_address("f"))

    def __call__(self, *operands: np.ndarray) -> np.ndarray:
        """The function of the operands, broadcast against one another."""
        arrays = np.broadcast_arrays(*(np.asarray(a, dtype=self.dtype) for a in operands))
        arrays = [np.ascontiguousarray(a) for a in arrays]
        out = np.empty_like(arrays[0])
        self.cfunc(*(a.ctypes.data for a in arrays), out.ctypes.data, out.size)
        return out


_CACHE: dict[tuple[str, type], _Compiled] = {}


def compiled(name: str, dtype: type) -> _Compiled:
    key = (name, dtype)
    if key not in _CACHE:
        _CACHE[key] = _Compiled(name, dtype)
    return _CACHE[key]


# ---------------------------------------------------------------------------
# Inputs
# ---------------------------------------------------------------------------

def _log_uniform(rng: np.random.Generator, lo_exp: float, hi_exp: float, size: int,
                 dtype: type, signed: bool) -> np.ndarray:
    mag = np.exp2(rng.uniform(lo_exp, hi_exp, size))
    if signed:
        mag *= rng.choice([-1.0, 1.0], size)
    return mag.astype(dtype)


def _inputs(name: str, dtype: type) -> np.ndarray:
    """Dense sweep over the interesting range plus random points."""
    rng = np.random.default_rng(1234)
    f64 = dtype == np.float64
    tiny_exp = -1074 if f64 else -149
    big_exp = 1023 if f64 else 127
    parts: list[np.ndarray] = []
    if name == "exp":
        lo, hi = (-750.0, 710.0) if f64 else (-104.0, 89.0)
        parts += [np.linspace(lo, hi, 100_000), np.linspace(-1, 1, 20_001),
                  _log_uniform(rng, tiny_exp, 3, 20_000, np.float64, True)]
    elif name == "expm1":
        lo, hi = (-45.0, 710.0) if f64 else (-20.0, 89.0)
        parts += [np.linspace(lo, hi, 60_000), np.linspace(-2, 2, 40_001),
                  _log_uniform(rng, tiny_exp, 3, 20_000, np.float64, True)]
    elif name == "log":
        parts += [_log_uniform(rng, tiny_exp, big_exp, 60_000, np.float64, False),
                  np.linspace(0.5, 2.0, 40_001), rng.uniform(0, 100, 20_000)]
    elif name == "log1p":
        parts += [_log_uniform(rng, tiny_exp, big_exp, 40_000, np.float64, False),
                  -_log_uniform(rng, -60 if f64 else -30, 0, 30_000, np.float64, False),
                  np.linspace(-0.999, 3.0, 40_001)]
    elif name == "tanh":
        lim = 25.0 if f64 else 12.0
        parts += [np.linspace(-lim, lim, 60_000), np.linspace(-1, 1, 40_001),
                  _log_uniform(rng, tiny_exp, 5, 20_000, np.float64, True)]
    elif name == "sigmoid":
        lo, hi = (-750.0, 40.0) if f64 else (-104.0, 20.0)
        parts += [np.linspace(lo, hi, 60_000), np.linspace(-5, 5, 40_001),
                  _log_uniform(rng, tiny_exp, 9, 20_000, np.float64, True)]
    elif name in ("sin", "cos"):
        parts += [np.linspace(-10, 10, 40_001), np.linspace(-1e5, 1e5, 40_000),
                  _log_uniform(rng, tiny_exp, 40, 40_000, np.float64, True),
                  _log_uniform(rng, 40, big_exp + 0.99, 10_000, np.float64, True),
                  _near_multiples_of_half_pi(rng, dtype)]
    elif name == "erf":
        parts += [np.linspace(-7, 7, 60_001), np.linspace(0.99, 1.01, 2_001),
                  np.linspace(-6.5, -5.5, 2_001), np.linspace(3.5, 4.5, 2_001),
                  _log_uniform(rng, tiny_exp, 3, 30_000, np.float64, True)]
    elif name == "atan":
        parts += [np.linspace(-4, 4, 60_001), np.linspace(0.40, 0.43, 4_001), np.linspace(0.99, 1.01, 4_001),
                  np.linspace(2.3, 2.5, 4_001), _log_uniform(rng, tiny_exp, big_exp + 0.99, 40_000, np.float64, True)]
    x = np.concatenate(parts).astype(dtype)
    return x[np.isfinite(x)]


def _near_multiples_of_half_pi(rng: np.random.Generator, dtype: type) -> np.ndarray:
    """The values of dtype nearest to k*pi/2 and their neighbours: the hardest
    arguments for the range reduction (r = x - k*pi/2 is tiny)."""
    k = np.concatenate([np.arange(1, 5_001), rng.integers(1, 2 ** 20, 5_000),
                        rng.integers(1, 2 ** 38, 5_000)]).astype(np.longdouble)
    nearest = (k * (_PI_LD / 2)).astype(dtype)
    up = np.nextafter(nearest, dtype(np.inf))
    down = np.nextafter(nearest, dtype(-np.inf))
    x = np.concatenate([nearest, up, down, np.nextafter(up, dtype(np.inf)),
                        np.nextafter(down, dtype(-np.inf))])
    return np.concatenate([x, -x]).astype(np.float64)


def ulp_errors(name: str, dtype: type, x: np.ndarray, got: np.ndarray) -> np.ndarray:
    """|got - ref| in units of the spacing of the reference rounded to dtype."""
    ref = _reference(name, x)
    with np.errstate(all="ignore"):
        ref_rounded = ref.astype(dtype)
        spacing = np.abs(np.spacing(ref_rounded)).astype(ref.dtype)
        err = np.abs(got.astype(ref.dtype) - ref) / spacing
    # Results that round to the same infinity (or are both NaN) are exact.
    same = (got == ref_rounded) | (np.isnan(got) & np.isnan(ref_rounded))
    return np.where(same, 0.0, err)


def max_ulp_error(name: str, dtype: type) -> float:
    x = _inputs(name, dtype)
    errs = ulp_errors(name, dtype, x, compiled(name, dtype)(x))
    return float(np.max(errs))


# ---------------------------------------------------------------------------
# Accuracy
# ---------------------------------------------------------------------------

@pytest.mark.parametrize("dtype", DTYPES, ids=["f32", "f64"])
@pytest.mark.parametrize("name", list(EMITTERS))
def test_accuracy(name: str, dtype: type) -> None:
    x = _inputs(name, dtype)
    got = compiled(name, dtype)(x)
    errs = ulp_errors(name, dtype, x, got)
    worst = int(np.argmax(errs))
    assert errs[worst] <= ULP_LIMIT[dtype], (
        f"{name}[{dtype.__name__}]({x[worst]!r}) = {got[worst]!r}, "
        f"error {errs[worst]:.3f} ulp")


# ---------------------------------------------------------------------------
# Special values
# ---------------------------------------------------------------------------

INF = float("inf")
NAN = float("nan")


def _special_cases(name: str, dtype: type) -> list[tuple[float, float]]:
    f64 = dtype == np.float64
    finfo = np.finfo(dtype)
    max_v, tiny_sub = float(finfo.max), float(finfo.smallest_subnormal)
    min_normal = float(finfo.smallest_normal)
    cases = {
        "exp": [(INF, INF), (-INF, 0.0), (NAN, NAN), (0.0, 1.0), (-0.0, 1.0),
                (1000.0, INF), (-1000.0, 0.0), (max_v, INF), (-max_v, 0.0),
                (710.0 if f64 else 89.0, INF), (-746.0 if f64 else -104.0, 0.0)],
        "expm1": [(INF, INF), (-INF, -1.0), (NAN, NAN), (0.0, 0.0), (-0.0, -0.0),
                  (1000.0, INF), (-1000.0, -1.0), (max_v, INF), (-max_v, -1.0),
                  (tiny_sub, tiny_sub), (-tiny_sub, -tiny_sub)],
        "log": [(0.0, -INF), (-0.0, -INF), (-1.0, NAN), (-INF, NAN), (INF, INF),
                (NAN, NAN), (1.0, 0.0), (-tiny_sub, NAN)],
        "log1p": [(-1.0, -INF), (-2.0, NAN), (-INF, NAN), (INF, INF), (NAN, NAN),
                  (0.0, 0.0), (-0.0, -0.0), (tiny_sub, tiny_sub), (-tiny_sub, -tiny_sub)],
        "tanh": [(INF, 1.0), (-INF, -1.0), (NAN, NAN), (0.0, 0.0), (-0.0, -0.0),
                 (max_v, 1.0), (-max_v, -1.0), (tiny_sub, tiny_sub), (-tiny_sub, -tiny_sub)],
        "sigmoid": [(INF, 1.0), (-INF, 0.0), (NAN, NAN), (0.0, 0.5), (-0.0, 0.5),
                    (max_v, 1.0), (-max_v, 0.0), (-1000.0, 0.0)],
        "sin": [(0.0, 0.0), (-0.0, -0.0), (INF, NAN), (-INF, NAN), (NAN, NAN),
                (tiny_sub, tiny_sub), (-tiny_sub, -tiny_sub), (min_normal, min_normal)],
        "cos": [(0.0, 1.0), (-0.0, 1.0), (INF, NAN), (-INF, NAN), (NAN, NAN),
                (tiny_sub, 1.0), (-tiny_sub, 1.0)],
        "erf": [(0.0, 0.0), (-0.0, -0.0), (INF, 1.0), (-INF, -1.0), (NAN, NAN),
                (max_v, 1.0), (-max_v, -1.0), (6.0 if f64 else 4.0, 1.0), (-6.0 if f64 else -4.0, -1.0),
                (tiny_sub, tiny_sub), (-tiny_sub, -tiny_sub)],
        "atan": [(0.0, 0.0), (-0.0, -0.0), (INF, float(np.arctan(dtype(INF)))), (-INF, float(np.arctan(dtype(-INF)))),
                 (NAN, NAN), (max_v, float(np.arctan(dtype(max_v)))), (1.0, float(np.arctan(dtype(1.0)))),
                 (tiny_sub, tiny_sub), (-tiny_sub, -tiny_sub), (min_normal, min_normal)],
    }
    return cases[name]


def _assert_same(name: str, operands: Sequence[np.ndarray], got: np.ndarray,
                 expected: np.ndarray) -> None:
    """Bitwise agreement up to NaN payloads: signed zeros and infinities must match."""
    for arguments, gi, ei in zip(zip(*operands), got, expected):
        call = f"{name}({', '.join(map(repr, arguments))})"
        if np.isnan(ei):
            assert np.isnan(gi), f"{call} = {gi!r}, expected nan"
        else:
            assert gi == ei and np.signbit(gi) == np.signbit(ei), (
                f"{call} = {gi!r}, expected {ei!r}")


@pytest.mark.parametrize("dtype", DTYPES, ids=["f32", "f64"])
@pytest.mark.parametrize("name", list(EMITTERS))
def test_special_values(name: str, dtype: type) -> None:
    cases = _special_cases(name, dtype)
    x = np.array([c[0] for c in cases], dtype=dtype)
    expected = np.array([c[1] for c in cases], dtype=dtype)
    _assert_same(name, [x], compiled(name, dtype)(x), expected)


@pytest.mark.parametrize("dtype", DTYPES, ids=["f32", "f64"])
def test_subnormal_exp_and_log(dtype: type) -> None:
    """exp producing subnormals and log of subnormals stay within the ulp bound."""
    finfo = np.finfo(dtype)
    lo = np.log(float(finfo.smallest_subnormal))
    hi = np.log(float(finfo.smallest_normal))
    x = np.linspace(lo, hi, 5001).astype(dtype)
    assert np.max(ulp_errors("exp", dtype, x, compiled("exp", dtype)(x))) <= 1.0
    sub = (np.arange(1, 5001) * float(finfo.smallest_subnormal) * 997).astype(dtype)
    sub = sub[sub < finfo.smallest_normal]
    assert np.max(ulp_errors("log", dtype, sub, compiled("log", dtype)(sub))) <= ULP_LIMIT[dtype]


# ---------------------------------------------------------------------------
# Vectorisation on the CPU
# ---------------------------------------------------------------------------

def _vectorised_loop_calls(name: str, dtype: type) -> list[str]:
    """The functions the optimised loop of name calls, once it is checked to contain vector
    arithmetic."""
    elem = "float" if dtype == np.float32 else "double"
    ir_text = str(compiled(name, dtype).llvm_module.get_function("f"))
    widths = [int(w) for w in re.findall(rf"<(\d+) x {elem}>", ir_text)]
    assert widths and max(widths) >= (4 if dtype == np.float32 else 2), (
        f"{name}[{dtype.__name__}] loop was not vectorised")
    return re.findall(r"call [^@]*@\"?([\w.]+)", ir_text)


@pytest.mark.parametrize("dtype", DTYPES, ids=["f32", "f64"])
@pytest.mark.parametrize("name", list(EMITTERS))
def test_loop_vectorises(name: str, dtype: type) -> None:
    """After -O3 for the host, the elementwise loop contains vector arithmetic."""
    calls = _vectorised_loop_calls(name, dtype)
    assert all(c.startswith(("llvm.", "mathlib.")) for c in calls), calls
    if name in ("sin", "cos"):
        # The large-argument dispatch is called through one of its vector variants.
        variant = re.compile(rf"mathlib\.{name}\.f(32|64)\.select_large\.v\d+")
        assert any(variant.fullmatch(c) for c in calls), calls
    module = compiled(name, dtype).llvm_module
    outside = [f.name for f in module.functions
               if f.is_declaration and not f.name.startswith("llvm.")]
    assert not outside, outside


def _assert_no_fast_math(line: str) -> None:
    for flag in (" fast ", " nnan ", " ninf ", " nsz ", " arcp ", " afn ", " reassoc ", " contract "):
        assert flag not in line, line


def _called_functions(function: ir.Function) -> list[ir.Function]:
    return [instruction.callee for block in function.blocks for instruction in block.instructions
            if isinstance(instruction, ir.CallInstr)]


@pytest.mark.parametrize("dtype", DTYPES, ids=["f32", "f64"])
@pytest.mark.parametrize("name", list(EMITTERS))
def test_no_calls_in_emitted_ir(name: str, dtype: type) -> None:
    """The loop body stays one block, calling only intrinsics (and, for sin and cos, the
    out-of-line large-argument dispatch); nothing in the module calls outside it (no libm);
    no fast-math flags are used."""
    module = _build_loop_module(name, dtype)
    loop = module.get_global("f")
    assert len(loop.blocks) == 3, f"{name} must not add basic blocks"
    intrinsic = re.compile(r"llvm\.(fabs|copysign|rint|fma)\.")
    suffix = "f32" if dtype == np.float32 else "f64"
    for callee in _called_functions(loop):
        dispatch = name in ("sin", "cos") and callee.name == f"mathlib.{name}.{suffix}.select_large"
        assert intrinsic.match(callee.name) or dispatch, callee.name
    for function in module.functions:
        for callee in _called_functions(function):
            assert not callee.is_declaration or re.match(r"llvm\.(fabs|copysign|rint|fma|ctlz)\.",
                                                         callee.name), (function.name, callee.name)
    for line in str(module).splitlines():
        _assert_no_fast_math(line)


@pytest.mark.parametrize("dtype", DTYPES, ids=["f32", "f64"])
@pytest.mark.parametrize("name", list(EMITTERS))
def test_vector_and_scalar_paths_agree(name: str, dtype: type) -> None:
    """Shifting the array by one element moves values between the vectorised
    body and the scalar remainder: the results must not change by a bit (no
    contraction or lane-dependent code, so the GPU can match the CPU too)."""
    x = _inputs(name, dtype)[:40_003]
    whole = compiled(name, dtype)(x)
    shifted = compiled(name, dtype)(x[1:])
    np.testing.assert_array_equal(whole[1:].view(_UINT[dtype]), shifted.view(_UINT[dtype]))


_UINT = {np.float32: np.uint32, np.float64: np.uint64}


@pytest.mark.parametrize("name", list(EMITTERS))
def test_float32_all_binades(name: str) -> None:
    """A sample of every float32 bit pattern, every binade and sign, subnormals,
    infinities and NaNs included: finite inputs within the ulp bound, the others
    exactly as numpy."""
    bits = np.arange(0, 1 << 32, 65_537, dtype=np.uint64).astype(np.uint32)
    specials = np.array([0x00000000, 0x80000000, 0x00000001, 0x80000001, 0x007FFFFF,
                         0x00800000, 0x7F7FFFFF, 0xFF7FFFFF, 0x7F800000, 0xFF800000,
                         0x7FC00000, 0xFFC00000, 0x7F800001, 0x3F800000, 0xBF800000],
                        dtype=np.uint32)
    x = np.concatenate([bits, specials]).view(np.float32)
    got = compiled(name, np.float32)(x)
    finite = np.isfinite(x)
    errs = ulp_errors(name, np.float32, x[finite], got[finite])
    worst = int(np.argmax(errs))
    assert errs[worst] <= ULP_LIMIT[np.float32], (
        f"{name}({x[finite][worst]!r}) = {got[finite][worst]!r}, error {errs[worst]:.3f} ulp")
    with np.errstate(all="ignore"):
        ref = _reference(name, x[~finite]).astype(np.float32)
    odd = got[~finite]
    assert np.all((odd == ref) | (np.isnan(odd) & np.isnan(ref))), (x[~finite], odd, ref)


@pytest.mark.parametrize("dtype", DTYPES, ids=["f32", "f64"])
def test_trig_identities(dtype: type) -> None:
    """sin is odd and cos even, exactly."""
    x = _inputs("sin", dtype)
    np.testing.assert_array_equal(compiled("sin", dtype)(-x), -compiled("sin", dtype)(x))
    np.testing.assert_array_equal(compiled("cos", dtype)(-x), compiled("cos", dtype)(x))


# ---------------------------------------------------------------------------
# sin and cos of large arguments, against an exact reference
# ---------------------------------------------------------------------------

# mathlib documents <= 1 ulp for sin and cos of every finite x.
TRIG_ULP_BOUND = 1.0
# Working digits of the reference: the largest double has 309 digits before the point, and
# x mod pi/2 is wanted to ~90 digits after it.
_REF_DIGITS = 400


@functools.lru_cache(maxsize=None)
def _decimal_pi(digits: int) -> Decimal:
    """pi to digits significant digits by the Gauss-Legendre iteration (independent of the
    integer Machin formula in mathlib)."""
    with localcontext() as ctx:
        ctx.prec = digits + 10
        a, b, t, p = Decimal(1), 1 / Decimal(2).sqrt(), Decimal(1) / 4, Decimal(1)
        for _ in range(digits.bit_length() + 2):  # the correct digits double each time
            a_next = (a + b) / 2
            a, b, t, p = a_next, (a * b).sqrt(), t - p * (a - a_next) ** 2, 2 * p
        pi = (a + b) ** 2 / (4 * t)
        ctx.prec = digits
        return +pi


def _exact_trig(name: str, x: float) -> Decimal:
    """sin x or cos x to ~45 significant digits: x = k*pi/2 + r in 400-digit arithmetic,
    then the Taylor series of sin r and cos r (|r| <= pi/4)."""
    with localcontext() as ctx:
        ctx.prec = _REF_DIGITS
        half_pi = _decimal_pi(_REF_DIGITS) / 2
        exact_x = Decimal(x)  # exact conversion
        k = int((exact_x / half_pi).to_integral_value(ROUND_HALF_EVEN))
        r = exact_x - k * half_pi
        ctx.prec = 50
        r = +r
        r2 = r * r
        sin_r = term = r
        n = 1
        while term and abs(term) > abs(sin_r) * Decimal("1e-48"):
            term = -term * r2 / ((2 * n) * (2 * n + 1))
            sin_r += term
            n += 1
        cos_r = term = Decimal(1)
        n = 1
        while abs(term) > Decimal("1e-48"):
            term = -term * r2 / ((2 * n - 1) * (2 * n))
            cos_r += term
            n += 1
        quadrant = (k + (name == "cos")) % 4
        return (sin_r, cos_r, -sin_r, -cos_r)[quadrant]


def exact_ulp_errors(name: str, dtype: type, x: np.ndarray, got: np.ndarray) -> np.ndarray:
    """|got - sin or cos x| in units of the spacing of dtype at the exact value."""
    errors = np.empty(x.size)
    for i, (xi, gi) in enumerate(zip(x.tolist(), got.tolist())):
        exact = _exact_trig(name, xi)
        if not math.isfinite(gi):
            errors[i] = math.inf
            continue
        unit = Decimal(float(np.spacing(dtype(abs(float(exact))))))
        with localcontext() as ctx:
            ctx.prec = 50
            errors[i] = float(abs(Decimal(gi) - exact) / unit)
    return errors


def _two_over_pi_scaled(bits: int) -> int:
    """floor(2/pi * 2**bits) from the Decimal pi."""
    digits = bits * 30103 // 100_000 + 30
    with localcontext() as ctx:
        ctx.prec = digits
        return int(2 / _decimal_pi(digits) * Decimal(2) ** bits)


@functools.lru_cache(maxsize=None)
def _closest_to_quarter_turns(dtype: type, per_binade: int) -> np.ndarray:
    """For each binade from 2**40 to the largest, the values x = m * 2**s (m the integer
    significand) nearest to a multiple of pi/2: the m that make m*beta nearest to an
    integer, beta = 2**s * 2/pi mod 1, found among the denominators of the continued
    fraction of beta (convergents and intermediate fractions) and their small multiples.
    Includes the double nearest to a multiple of pi/2, 6381956970095103 * 2**797."""
    finfo = np.finfo(dtype)
    digits = finfo.nmant + 1
    low, high = 1 << (digits - 1), 1 << digits
    scale_bits = 1400  # far more than 2**s * 2/pi needs for s <= 971 and m < 2**53
    scaled = _two_over_pi_scaled(scale_bits)
    modulus = 1 << scale_bits
    values = []
    for exponent in range(40, finfo.maxexp):
        s = exponent - (digits - 1)
        beta = (scaled << s if s >= 0 else scaled >> -s) % modulus

        def distance(m: int) -> int:
            v = m * beta % modulus
            return min(v, modulus - v)

        candidates = set()
        numerator, denominator = beta, modulus
        q_before, q = 0, 1
        while numerator and q < high:
            a = denominator // numerator
            numerator, denominator = denominator % numerator, numerator
            for j in range(1, min(a, 8) + 1):  # intermediate fractions, then the convergent
                q_j = q_before + j * q
                first = -(-low // q_j)
                candidates.update(c * q_j for c in range(first, first + 3) if c * q_j < high)
            q_before, q = q, q_before + a * q
        values += [math.ldexp(m, s) for m in sorted(candidates, key=distance)[:per_binade]]
    return np.array(values).astype(dtype)


def _large_trig_cases(dtype: type) -> dict[str, np.ndarray]:
    """Positive arguments by kind (each test also takes their negatives)."""
    rng = np.random.default_rng(2024)
    finfo = np.finfo(dtype)
    largest = float(finfo.max)
    f64 = dtype == np.float64
    cases = {
        "powers of two": np.exp2(np.arange(40, finfo.maxexp)),
        "random exponents": np.exp2(rng.uniform(40, finfo.maxexp, 3_000)),
        "near multiples of pi/2": _closest_to_quarter_turns(dtype, 2 if f64 else 4),
        "largest finite": np.array([largest, np.nextafter(largest, 0.0), largest / 3,
                                    largest / np.pi]),
        "around 2**40": np.array([2.0 ** 40, float(np.nextafter(dtype(2.0 ** 40), dtype(0))),
                                  float(np.nextafter(dtype(2.0 ** 40), dtype(np.inf))),
                                  2.0 ** 40 * 1.5, 2.0 ** 39 * 1.75]),
        "subnormals (fast path)": np.array([float(finfo.smallest_subnormal) * k
                                            for k in (1, 2, 3, 1000, 2 ** 20)]),
    }
    return {kind: np.asarray(values, dtype=np.float64).astype(dtype)
            for kind, values in cases.items()}


LARGE_TRIG_KINDS = list(_large_trig_cases(np.float32))


def test_closest_double_to_a_multiple_of_half_pi_is_searched() -> None:
    """The continued-fraction search finds the known hardest double (Kahan, McDonald)."""
    assert 6381956970095103 * 2.0 ** 797 in _closest_to_quarter_turns(np.float64, 2).tolist()


@pytest.mark.parametrize("kind", LARGE_TRIG_KINDS)
@pytest.mark.parametrize("dtype", DTYPES, ids=["f32", "f64"])
@pytest.mark.parametrize("name", ["sin", "cos"])
def test_trig_large_arguments(name: str, dtype: type, kind: str) -> None:
    positive = _large_trig_cases(dtype)[kind]
    x = np.concatenate([positive, -positive])
    got = compiled(name, dtype)(x)
    errs = exact_ulp_errors(name, dtype, x, got)
    worst = int(np.argmax(errs))
    assert errs[worst] <= TRIG_ULP_BOUND, (
        f"{name}[{dtype.__name__}]({x[worst]!r}) = {got[worst]!r}, error {errs[worst]:.3f} ulp")


@pytest.mark.parametrize("dtype", DTYPES, ids=["f32", "f64"])
@pytest.mark.parametrize("name", ["sin", "cos"])
def test_trig_large_arguments_among_small(name: str, dtype: type) -> None:
    """Vectors whose lanes mix both paths: every lane gets the result it gets on its own,
    the vectorised body and the scalar remainder agree bit for bit, and all are within
    the bound."""
    rng = np.random.default_rng(31)
    n = 4_001
    large = np.exp2(rng.uniform(40, np.finfo(dtype).maxexp, n)) * rng.choice([-1.0, 1.0], n)
    x = np.where(rng.random(n) < 0.2, large, rng.uniform(-100, 100, n)).astype(dtype)
    x[::97] = np.inf
    x[::89] = np.nan
    run = compiled(name, dtype)
    got = run(x)
    uint = _UINT[dtype]
    np.testing.assert_array_equal(got[1:].view(uint), run(x[1:]).view(uint))
    big = np.abs(x) >= 2.0 ** 40
    np.testing.assert_array_equal(got[big].view(uint), run(x[big]).view(uint))
    np.testing.assert_array_equal(got[~big].view(uint), run(x[~big]).view(uint))
    finite = np.isfinite(x)
    assert np.all(np.isnan(got[~finite]))
    assert np.max(exact_ulp_errors(name, dtype, x[finite], got[finite])) <= TRIG_ULP_BOUND


def test_two_over_pi_table() -> None:
    """mathlib's bits of 2/pi (integer Machin formula) against the Decimal Gauss-Legendre pi."""
    words = TWO_OVER_PI_WORDS
    bits = 64 * (len(words) - 1)
    table = 0
    for word in words:
        table = table << 64 | word
    assert table == _two_over_pi_scaled(bits)


def test_erf_reference_agrees_with_math_erf() -> None:
    """The long double series used as erf's reference is within 1 ulp of C99 erf (itself
    within 1 ulp), on a subsample: so ULP_LIMIT is measured against a sound reference."""
    x = _inputs("erf", np.float64)[::37]
    ours = _erf_series(x.astype(np.longdouble)).astype(np.float64)
    libm = np.array([math.erf(v) for v in x])
    spacing = np.spacing(np.abs(libm))
    assert np.max(np.abs(ours - libm) / np.where(spacing > 0, spacing, 1)) <= 1.0
    # Odd, saturating at 1, and as accurate as advertised against C99 erf too.
    np.testing.assert_array_equal(compiled("erf", np.float64)(-x), -compiled("erf", np.float64)(x))
    got = compiled("erf", np.float64)(x)
    assert np.max(np.abs(got - libm) / np.where(spacing > 0, spacing, 1)) <= ULP_LIMIT[np.float64] + 1


# ---------------------------------------------------------------------------
# NVPTX
# ---------------------------------------------------------------------------

def _build_nvptx_module(names: Sequence[str]) -> ir.Module:
    """One kernel per function and dtype, k_<name>_<dtype>(in_1, .., in_k, out):
    out[i] = name(in_1[i], .., in_k[i]) with i = global thread id."""
    module = ir.Module(name="mathlib_nvptx")
    module.triple = "nvptx64-nvidia-cuda"
    i32 = ir.IntType(32)
    sreg = {
        reg: ir.Function(module, ir.FunctionType(i32, []), name=f"llvm.nvvm.read.ptx.sreg.{reg}.x")
        for reg in ("tid", "ctaid", "ntid")
    }
    for name in names:
        for dtype, ty in IR_TYPES.items():
            fnty = ir.FunctionType(ir.VoidType(), [ty.as_pointer()] * (ARITY[name] + 1))
            fn = ir.Function(module, fnty, name=f"k_{name}_{dtype.__name__}")
            fn.calling_convention = "ptx_kernel"
            builder = ir.IRBuilder(fn.append_basic_block("entry"))
            tid, ctaid, ntid = (builder.call(sreg[r], []) for r in ("tid", "ctaid", "ntid"))
            index = builder.zext(builder.add(builder.mul(ctaid, ntid), tid), ir.IntType(64))
            *sources, dst = fn.args
            operands = [builder.load(builder.gep(src, [index])) for src in sources]
            builder.store(ALL_EMITTERS[name](builder, *operands), builder.gep(dst, [index]))
            builder.ret_void()
    return module


def _nvptx_assembly(names: Sequence[str]) -> str:
    target = llvm.Target.from_triple("nvptx64-nvidia-cuda")
    tm = target.create_target_machine(cpu="sm_80", opt=3)
    module = _build_nvptx_module(names)
    assert "ptx_kernel" in str(module)
    return tm.emit_assembly(_optimise(module, tm))


def _assemble_with_ptxas(ptx: str, path: pathlib.Path) -> None:
    """ptxas accepts the PTX (skipped where it is not installed)."""
    if shutil.which("ptxas") is None:
        pytest.skip("ptxas not on PATH: PTX generated but not assembled")
    path.write_text(ptx)
    result = subprocess.run(["ptxas", "-arch=sm_80", str(path), "-o", "/dev/null"],
                            capture_output=True, text=True)
    assert result.returncode == 0, result.stderr


def test_nvptx_kernels_assemble(tmp_path: pathlib.Path) -> None:
    ptx = _nvptx_assembly(list(EMITTERS))
    assert ptx.count(".entry") == len(EMITTERS) * len(IR_TYPES)
    # No libm: the only calls are those of the sin and cos kernels to their large-argument
    # functions, which are defined in the same PTX.
    assert ".extern" not in ptx
    defined = set(re.findall(r"^\.func\s+(?:\([^)]*\)\s*)?([\w$]+)\(", ptx, re.MULTILINE))
    for kernel in re.split(r"^\.(?:visible \.)?entry\s+", ptx, flags=re.MULTILINE)[1:]:
        name = kernel.split("(", 1)[0].strip()
        called = set(re.findall(r"call(?:\.uni)?\s+(?:\([^)]*\),\s*)?([\w$]+)", kernel))
        if name.startswith(("k_sin_", "k_cos_")):
            assert len(called) == 1 and called <= defined, (name, called)
        else:
            assert not called, (name, called)
    _assemble_with_ptxas(ptx, tmp_path / "mathlib.ptx")


def _load_cuda() -> ctypes.CDLL | None:
    try:
        cuda = ctypes.CDLL("libcuda.so.1")
    except OSError:
        return None
    count = ctypes.c_int(0)
    if cuda.cuInit(0) != 0 or cuda.cuDeviceGetCount(ctypes.byref(count)) != 0 or not count.value:
        return None
    return cuda


@contextlib.contextmanager
def _gpu_kernels(ptx: str) -> Iterator[Callable[[str, list[np.ndarray]], np.ndarray]]:
    """Load ``ptx`` on the GPU (skipping when there is none); yields ``run(kernel, inputs)``, which
    launches one thread per element on the inputs and returns the single output."""
    cuda = _load_cuda()
    if cuda is None:
        pytest.skip("no CUDA driver / GPU: kernels not executed")

    def check(status: int) -> None:
        assert status == 0, f"CUDA driver error {status}"

    device, context, module = ctypes.c_int(), ctypes.c_void_p(), ctypes.c_void_p()
    check(cuda.cuDeviceGet(ctypes.byref(device), 0))
    check(cuda.cuDevicePrimaryCtxRetain(ctypes.byref(context), device))
    check(cuda.cuCtxSetCurrent(context))
    check(cuda.cuModuleLoadData(ctypes.byref(module), ptx.encode() + b"\0"))
    block = 256

    def run(name: str, inputs: list[np.ndarray]) -> np.ndarray:
        count = inputs[0].size
        size = -(-count // block) * block
        host = [np.zeros(size, dtype=inputs[0].dtype) for _ in range(len(inputs) + 1)]
        for array, value in zip(host, inputs):
            array[:count] = value
        kernel = ctypes.c_void_p()
        check(cuda.cuModuleGetFunction(ctypes.byref(kernel), module, name.encode()))
        pointers = [ctypes.c_uint64() for _ in host]
        for pointer, array in zip(pointers, host):
            check(cuda.cuMemAlloc_v2(ctypes.byref(pointer), ctypes.c_size_t(array.nbytes)))
        try:
            for pointer, array in zip(pointers[:-1], host[:-1]):
                check(cuda.cuMemcpyHtoD_v2(pointer, array.ctypes.data_as(ctypes.c_void_p),
                                           ctypes.c_size_t(array.nbytes)))
            args = (ctypes.c_void_p * len(pointers))(*(ctypes.cast(ctypes.byref(p), ctypes.c_void_p)
                                                       for p in pointers))
            check(cuda.cuLaunchKernel(kernel, size // block, 1, 1, block, 1, 1, 0, None, args, None))
            check(cuda.cuCtxSynchronize())
            check(cuda.cuMemcpyDtoH_v2(host[-1].ctypes.data_as(ctypes.c_void_p), pointers[-1],
                                       ctypes.c_size_t(host[-1].nbytes)))
        finally:
            for pointer in pointers:
                cuda.cuMemFree_v2(pointer)
        return host[-1][:count]

    try:
        yield run
    finally:
        cuda.cuModuleUnload(module)
        cuda.cuDevicePrimaryCtxRelease(device)


def test_nvptx_accuracy_on_gpu() -> None:
    """Run every kernel on a GPU (when one is present) and check its accuracy."""
    failures = []
    with _gpu_kernels(_nvptx_assembly(list(EMITTERS))) as run:
        for name in EMITTERS:
            for dtype in DTYPES:
                x = _inputs(name, dtype)
                special = np.array([c[0] for c in _special_cases(name, dtype)], dtype=dtype)
                x = np.concatenate([x, special])
                got = run(f"k_{name}_{dtype.__name__}", [x])
                cpu = compiled(name, dtype)(x)
                same = (got == cpu) | (np.isnan(got) & np.isnan(cpu))
                worst = float(np.max(ulp_errors(name, dtype, x, got)))
                if worst > ULP_LIMIT[dtype] or not same.all():
                    failures.append(f"{name}[{dtype.__name__}]: {worst:.3f} ulp, "
                                    f"{int((~same).sum())} results differ from the CPU")
    assert not failures, failures


# ---------------------------------------------------------------------------
# pow: two operands
# ---------------------------------------------------------------------------

# Allowed max error in ulp of the correctly rounded result.
POW_ULP_LIMIT = {np.float32: 1.0, np.float64: 2.0}


def pow_ulp_errors(dtype: type, x: np.ndarray, y: np.ndarray, got: np.ndarray) -> np.ndarray:
    """Like ulp_errors, against numpy.power evaluated one format wider.

    (float64 numpy.power itself may not be correctly rounded: on AVX-512
    hosts it goes through SVML.  The long double one is x87 powl.)
    """
    wide = np.longdouble if dtype == np.float64 else np.float64
    with np.errstate(all="ignore"):
        ref = np.power(x.astype(wide), y.astype(wide))
        ref_rounded = ref.astype(dtype)
        spacing = np.abs(np.spacing(ref_rounded)).astype(wide)
        err = np.abs(got.astype(wide) - ref) / spacing
    same = (got == ref_rounded) | (np.isnan(got) & np.isnan(ref_rounded))
    return np.where(same, 0.0, err)


def _pow_inputs(dtype: type) -> tuple[np.ndarray, np.ndarray]:
    """(x, y) pairs: random magnitudes with |y*log|x|| up to just past overflow,
    |x| within a few ulps of 1 with huge |y|, negative x with integer y, and a
    dense grid over small x and y (negative x with fractional y gives NaN)."""
    rng = np.random.default_rng(4321)
    f64 = dtype == np.float64
    finfo = np.finfo(dtype)
    lo_exp, hi_exp = (-1074, 1023) if f64 else (-149, 127)
    limit = 1.02 * np.log(float(finfo.max))
    xs: list[np.ndarray] = []
    ys: list[np.ndarray] = []

    def add(x: np.ndarray, y: np.ndarray) -> None:
        xs.append(np.asarray(x, dtype=np.float64))
        ys.append(np.asarray(y, dtype=np.float64))

    n = 60_000
    x = np.exp2(rng.uniform(lo_exp, hi_exp, n)) * rng.choice([-1.0, 1.0], n)
    log_x = np.log(np.abs(x.astype(dtype)).astype(np.float64))
    y = rng.uniform(-1.0, 1.0, n) * limit / np.maximum(np.abs(log_x), 1e-300)
    negative = x < 0
    y[negative] = np.rint(y[negative])  # negative x: integer y (some even, some odd)
    add(x, y)
    x = np.exp2(rng.uniform(-12, 12, n))
    add(x, rng.uniform(-1.0, 1.0, n) * limit / np.abs(np.log(x)))
    eps = float(finfo.eps)
    x = 1.0 + rng.integers(-64, 65, n) * eps / 2
    x = x[x.astype(dtype) != 1.0]
    add(x, rng.uniform(-1.0, 1.0, x.size) * limit / np.abs(np.log(x.astype(dtype).astype(np.longdouble))))
    x = -np.exp2(rng.uniform(-10, 10, n))
    add(x, rng.integers(-100, 101, n))
    gx, gy = np.meshgrid(np.linspace(-10.0, 10.0, 201), np.linspace(-40.0, 40.0, 161))
    add(gx.ravel(), gy.ravel())
    x, y = np.concatenate(xs).astype(dtype), np.concatenate(ys).astype(dtype)
    keep = np.isfinite(x) & np.isfinite(y)
    return x[keep], y[keep]


@pytest.mark.parametrize("dtype", DTYPES, ids=["f32", "f64"])
def test_pow_accuracy(dtype: type) -> None:
    x, y = _pow_inputs(dtype)
    got = compiled("pow", dtype)(x, y)
    errs = pow_ulp_errors(dtype, x, y, got)
    worst = int(np.argmax(errs))
    assert errs[worst] <= POW_ULP_LIMIT[dtype], (
        f"pow[{dtype.__name__}]({x[worst]!r}, {y[worst]!r}) = {got[worst]!r}, "
        f"error {errs[worst]:.3f} ulp")


@pytest.mark.parametrize("dtype", DTYPES, ids=["f32", "f64"])
def test_pow_subnormal_results(dtype: type) -> None:
    """Results in the subnormal range and just around overflow."""
    rng = np.random.default_rng(99)
    finfo = np.finfo(dtype)
    x = np.exp2(rng.uniform(-30, 30, 20_000)).astype(dtype)
    x = x[x != 1]
    log_x = np.log(x.astype(np.float64))
    t_sub = rng.uniform(np.log(float(finfo.smallest_subnormal)) - 0.5,
                        np.log(float(finfo.smallest_normal)), x.size)
    t_big = np.log(float(finfo.max)) * rng.uniform(0.999, 1.001, x.size)
    for target in (t_sub, t_big):
        y = (target / log_x).astype(dtype)
        got = compiled("pow", dtype)(x, y)
        assert np.max(pow_ulp_errors(dtype, x, y, got)) <= POW_ULP_LIMIT[dtype]
    # subnormal x
    x = (rng.integers(1, 1 << 20, 20_000) * float(finfo.smallest_subnormal)).astype(dtype)
    y = rng.uniform(-1.2, 1.2, x.size).astype(dtype)
    assert np.max(pow_ulp_errors(dtype, x, y, compiled("pow", dtype)(x, y))) <= POW_ULP_LIMIT[dtype]


@pytest.mark.parametrize("dtype", DTYPES, ids=["f32", "f64"])
def test_pow_integer_exponents_exact(dtype: type) -> None:
    """a**k for integers a, k comes out exact whenever the result is representable."""
    cases = []
    for a in range(-24, 25):
        for k in range(-60, 61):
            if a == 0 and k < 0:
                continue
            exact = Fraction(a) ** k
            if abs(exact) > float(np.finfo(dtype).max):
                continue
            value = dtype(float(exact))
            if Fraction(float(value)) == exact:
                cases.append((a, k, float(value)))
    x, y, expected = (np.array(column, dtype=dtype) for column in zip(*cases))
    got = compiled("pow", dtype)(x, y)
    wrong = np.flatnonzero(got != expected)
    assert wrong.size == 0, [(x[i], y[i], got[i]) for i in wrong[:5]]
    spot = compiled("pow", dtype)(np.array([3.0, -2.0, 2.0, 10.0, -10.0]),
                               np.array([2.0, 3.0, 10.0, 20.0, 7.0]))
    assert spot[:3].tolist() == [9.0, -8.0, 1024.0]
    assert abs(float(spot[3]) - 1e20) <= float(np.spacing(dtype(1e20)))
    assert abs(float(spot[4]) + 1e7) <= float(np.spacing(dtype(1e7)))


def _pow_spec_table(dtype: type) -> list[tuple[float, float, float]]:
    """(x, y, expected): every C99 / numpy special case of pow."""
    finfo = np.finfo(dtype)
    big_even = 2.0 ** 53 if dtype == np.float64 else 2.0 ** 24   # every |y| >= this is even
    big_odd = big_even - 1
    max_v, sub = float(finfo.max), float(finfo.smallest_subnormal)
    below_one, above_one = 1.0 - float(finfo.epsneg), 1.0 + float(finfo.eps)
    table = []
    # pow(x, +-0) = 1, for any x (NaN too)
    for x in (0.0, -0.0, 1.0, -1.0, 2.5, -2.5, INF, -INF, NAN, sub, -max_v):
        table += [(x, 0.0, 1.0), (x, -0.0, 1.0)]
    # pow(1, y) = 1, for any y (NaN too); pow(-1, +-inf) = 1
    for y in (0.5, -0.5, 3.0, INF, -INF, NAN, max_v, -max_v, big_odd):
        table.append((1.0, y, 1.0))
    table += [(-1.0, INF, 1.0), (-1.0, -INF, 1.0), (-1.0, 3.0, -1.0), (-1.0, -big_odd, -1.0),
              (-1.0, big_even, 1.0), (-1.0, 2.0, 1.0), (-1.0, max_v, 1.0)]
    # finite x < 0, finite non-integer y: NaN
    for x in (-0.5, -1.0, -2.0, -max_v, -sub):
        for y in (0.5, -0.5, 2.5, -1e-3, big_even / 2 - 0.5, -(big_even / 4 + 0.5)):
            table.append((x, y, NAN))
    # x = +-0
    for zero in (0.0, -0.0):
        for y in (-1.0, -3.0, -big_odd):                       # negative odd integer
            table.append((zero, y, np.copysign(INF, zero)))
        for y in (-2.0, -0.5, -big_even, -max_v, -INF, -sub):  # other negative
            table.append((zero, y, INF))
        for y in (1.0, 3.0, big_odd):                          # positive odd integer
            table.append((zero, y, zero))
        for y in (2.0, 0.5, big_even, big_even + 2, max_v, INF, sub):  # other positive
            table.append((zero, y, 0.0))
    # y = -inf, y = +inf
    for x in (0.5, -0.5, below_one, -below_one, sub, -sub):
        table += [(x, -INF, INF), (x, INF, 0.0)]
    for x in (2.0, -2.0, above_one, -above_one, max_v, -max_v):
        table += [(x, -INF, 0.0), (x, INF, INF)]
    # x = -inf
    for y in (-1.0, -3.0, -big_odd):
        table.append((-INF, y, -0.0))
    for y in (-2.0, -0.5, -big_even, -max_v, -sub):
        table.append((-INF, y, 0.0))
    for y in (1.0, 3.0, big_odd):
        table.append((-INF, y, -INF))
    for y in (2.0, 0.5, big_even, max_v, sub):
        table.append((-INF, y, INF))
    # x = +inf
    for y in (-1.0, -0.5, -max_v, -sub):
        table.append((INF, y, 0.0))
    for y in (1.0, 0.5, max_v, sub):
        table.append((INF, y, INF))
    # NaN otherwise propagates
    for x, y in ((NAN, 1.0), (NAN, -2.0), (NAN, INF), (2.0, NAN), (-2.0, NAN), (0.0, NAN),
                 (INF, NAN), (-1.0, NAN), (NAN, NAN)):
        table.append((x, y, NAN))
    # overflow / underflow, with the sign of negative x and odd y
    table += [(10.0, 400.0, INF), (-10.0, 401.0, -INF), (-10.0, 400.0, INF),
              (10.0, -400.0, 0.0), (-10.0, -401.0, -0.0), (0.5, 2000.0, 0.0), (-0.5, 2001.0, -0.0),
              (2.0, 1100.0, INF), (below_one, big_even * 2 ** 20, 0.0),
              (-above_one, big_odd, -float(np.power(np.longdouble(above_one), big_odd)))]
    return table


@pytest.mark.parametrize("dtype", DTYPES, ids=["f32", "f64"])
def test_pow_special_values(dtype: type) -> None:
    table = _pow_spec_table(dtype)
    x, y, expected = (np.array(column, dtype=dtype) for column in zip(*table))
    got = compiled("pow", dtype)(x, y)
    _assert_same("pow", [x, y], got, expected)
    with np.errstate(all="ignore"):
        _assert_same("pow", [x, y], got, np.power(x, y))  # the table agrees with numpy


@pytest.mark.parametrize("dtype", DTYPES, ids=["f32", "f64"])
def test_pow_special_grid_matches_numpy(dtype: type) -> None:
    """Every pair from a grid of special and ordinary operands.

    Exact agreement with numpy wherever an operand is 0, +-1, +-inf or NaN,
    or numpy's result is 0, inf or NaN; the ulp bound elsewhere.
    """
    finfo = np.finfo(dtype)
    big_even = 2.0 ** 53 if dtype == np.float64 else 2.0 ** 24
    values = [0.0, 1.0, 0.5, 2.0, 1.5, 3.0, INF, NAN, float(finfo.smallest_subnormal),
              float(finfo.smallest_normal), float(finfo.max), 1.0 - float(finfo.epsneg),
              1.0 + float(finfo.eps), 0.25, 1e-3]
    xs = values + [-v for v in values]
    ys = xs + [big_even - 1, big_even, big_even + 2, -(big_even - 1), -big_even, 2.0 ** 60,
               -(2.0 ** 60), 1075.0, -1075.0, 149.0, -149.0, 1024.0, 128.0, -127.0]
    gx, gy = np.meshgrid(np.array(xs, dtype=dtype), np.array(ys, dtype=dtype))
    x, y = gx.ravel(), gy.ravel()
    got = compiled("pow", dtype)(x, y)
    with np.errstate(all="ignore"):
        expected = np.power(x, y)
    special = ((x == 0) | (np.abs(x) == 1) | ~np.isfinite(x) | (y == 0) | ~np.isfinite(y)
               | (expected == 0) | ~np.isfinite(expected))
    _assert_same("pow", [x[special], y[special]], got[special], expected[special])
    errs = pow_ulp_errors(dtype, x[~special], y[~special], got[~special])
    assert np.max(errs) <= POW_ULP_LIMIT[dtype]


@pytest.mark.parametrize("dtype", DTYPES, ids=["f32", "f64"])
def test_pow_loop_vectorises(dtype: type) -> None:
    calls = _vectorised_loop_calls("pow", dtype)
    assert all(c.startswith("llvm.") for c in calls), calls


@pytest.mark.parametrize("dtype", DTYPES, ids=["f32", "f64"])
def test_pow_no_calls_or_fast_math(dtype: type) -> None:
    module = _build_loop_module("pow", dtype)
    assert len(module.get_global("f").blocks) == 3, "pow must not add basic blocks"
    text = str(module)
    branches = [line for line in text.splitlines() if line.lstrip().startswith("br ")]
    assert len(branches) == 2, branches  # the loop's own two
    for line in text.splitlines():
        if " call " in line:
            assert re.search(r"@\"?llvm\.(fabs|copysign|rint|fma)\.", line), line
        _assert_no_fast_math(line)
    with pytest.raises(TypeError):
        builder = ir.IRBuilder(ir.Function(ir.Module(), ir.FunctionType(ir.VoidType(), []), "g")
                               .append_basic_block())
        mathlib.emit_pow(builder, ir.Constant(ir.FloatType(), 1.0), ir.Constant(ir.DoubleType(), 1.0))


def test_pow_nvptx_kernels_assemble(tmp_path: pathlib.Path) -> None:
    ptx = _nvptx_assembly(["pow"])
    assert ptx.count(".entry") == len(IR_TYPES)
    assert "call" not in ptx.replace(".callprototype", "")
    _assemble_with_ptxas(ptx, tmp_path / "mathlib_pow.ptx")


def test_pow_nvptx_on_gpu() -> None:
    """Run the pow kernels on a GPU (when one is present): same results as the CPU."""
    failures = []
    with _gpu_kernels(_nvptx_assembly(["pow"])) as run:
        for dtype in DTYPES:
            x, y = _pow_inputs(dtype)
            table = _pow_spec_table(dtype)
            x = np.concatenate([x, np.array([c[0] for c in table], dtype=dtype)])
            y = np.concatenate([y, np.array([c[1] for c in table], dtype=dtype)])
            got = run(f"k_pow_{dtype.__name__}", [x, y])
            cpu = compiled("pow", dtype)(x, y)
            same = (got == cpu) | (np.isnan(got) & np.isnan(cpu))
            if not same.all():
                failures.append(f"pow[{dtype.__name__}]: {int((~same).sum())} results differ "
                                f"from the CPU, e.g. pow({x[~same][0]!r}, {y[~same][0]!r})")
    assert not failures, failures


if __name__ == "__main__":
    for fname in EMITTERS:
        for dt in DTYPES:
            print(f"{fname:8s} {dt.__name__:8s} max ulp {max_ulp_error(fname, dt):.3f}")
    for dt in DTYPES:
        px, py = _pow_inputs(dt)
        pow_err = float(np.max(pow_ulp_errors(dt, px, py, compiled("pow", dt)(px, py))))
        print(f"{'pow':8s} {dt.__name__:8s} max ulp {pow_err:.3f}")


# ---------------------------------------------------------------------------
# floormod (remainder.py)
# ---------------------------------------------------------------------------

@pytest.mark.parametrize("target", ["cpu", "cuda-emulated"])
@pytest.mark.parametrize("dtype", DTYPES, ids=["f32", "f64"])
def test_floormod_equals_numpy_bit_for_bit(dtype: type, target: str) -> None:
    """An exact remainder: numpy's % (fmod, then y added where the signs differ) on random bit
    patterns (NaN, inf, subnormals and huge quotients among them) and on everyday magnitudes;
    a float64 quotient beyond 2**400 gives NaN, as documented."""
    import compiler as cc
    from runtime import Session
    rng = np.random.default_rng(7)
    n = 1 << (16 if target == "cpu" else 11)
    bits = np.uint32 if dtype == np.float32 else np.uint64
    x = np.concatenate([rng.integers(0, np.iinfo(bits).max, n, dtype=bits, endpoint=True).view(dtype),
                        (rng.standard_normal(n) * 10.0 ** rng.integers(-5, 20, n)).astype(dtype),
                        np.array([2.0 ** 60 + 256, 1e10 + 0.5, -7.0, 7.0, 0.0, -0.0, 5.0, -5.0, 6.0], dtype)])
    y = np.concatenate([rng.integers(0, np.iinfo(bits).max, n, dtype=bits, endpoint=True).view(dtype),
                        (rng.standard_normal(n) * 10.0 ** rng.integers(-5, 5, n)).astype(dtype),
                        np.array([3.0, 3.3, 3.0, -3.0, -3.0, 3.0, np.inf, np.inf, -3.0], dtype)])
    graph = cc.Graph()
    with graph.as_default():
        xs, ys = (cc.placeholder(np.dtype(dtype).name, (None,), name=name) for name in ("x", "y"))
        remainder = cc.floormod(xs, ys)
    with Session(graph, target=target) as sess:
        got = sess.run(remainder, {xs: x, ys: y})
    with np.errstate(all="ignore"):
        expected = np.mod(x, y)
        beyond = ~(np.abs(x.astype(np.float64) / y.astype(np.float64)) < 2.0 ** 400)
    same = ((got == expected) & (np.signbit(got) == np.signbit(expected))) | (np.isnan(got) & np.isnan(expected))
    if dtype == np.float64:
        same |= np.isnan(got) & beyond
    wrong = np.nonzero(~same)[0]
    assert not len(wrong), [(x[i], y[i], got[i], expected[i]) for i in wrong[:5]]

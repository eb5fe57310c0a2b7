"""Accuracy, special-value, vectorisation and NVPTX tests for compiler.codegen.mathlib."""

from __future__ import annotations

import ctypes
import importlib.util
import pathlib
import re
import shutil
import subprocess
import sys
from typing import Callable

import llvmlite.binding as llvm
import numpy as np
import pytest
from llvmlite import ir

try:
    from compiler.codegen import mathlib
except Exception:  # package __init__ files not present (or not importable) yet
    _path = pathlib.Path(__file__).resolve().parents[3] / "compiler" / "codegen" / "mathlib.py"
    _spec = importlib.util.spec_from_file_location("graphgrad_mathlib", _path)
    assert _spec is not None and _spec.loader is not None
    mathlib = importlib.util.module_from_spec(_spec)
    sys.modules[_spec.name] = mathlib  # dataclasses look the module up by name
    _spec.loader.exec_module(mathlib)

llvm.initialize_all_targets()
llvm.initialize_all_asmprinters()

Emitter = Callable[[ir.IRBuilder, ir.Value], ir.Value]

EMITTERS: dict[str, Emitter] = {
    "exp": mathlib.emit_exp,
    "expm1": mathlib.emit_expm1,
    "log": mathlib.emit_log,
    "log1p": mathlib.emit_log1p,
    "tanh": mathlib.emit_tanh,
    "sigmoid": mathlib.emit_sigmoid,
}

IR_TYPES = {np.float32: ir.FloatType(), np.float64: ir.DoubleType()}
DTYPES = [np.float32, np.float64]
# Allowed max error in ulp of the correctly rounded result.
ULP_LIMIT = {np.float32: 2.0, np.float64: 4.0}


def _sigmoid_ld(x: np.ndarray) -> np.ndarray:
    # exp(-|x|) form: never overflows.
    e = np.exp(-np.abs(x))
    return np.where(x >= 0, 1 / (1 + e), e / (1 + e))


# Long-double (x87 80-bit) references: more accurate than the float64 result.
REFERENCES: dict[str, Callable[[np.ndarray], np.ndarray]] = {
    "exp": np.exp,
    "expm1": np.expm1,
    "log": np.log,
    "log1p": np.log1p,
    "tanh": np.tanh,
    "sigmoid": _sigmoid_ld,
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
    """void f(T* in, T* out, i64 n): out[i] = name(in[i])."""
    ty = IR_TYPES[dtype]
    i64 = ir.IntType(64)
    module = ir.Module(name=f"{name}_{dtype.__name__}")
    fnty = ir.FunctionType(ir.VoidType(), [ty.as_pointer(), ty.as_pointer(), i64])
    fn = ir.Function(module, fnty, name="f")
    src, dst, n = fn.args
    for arg in (src, dst):
        arg.add_attribute("noalias")
    entry = fn.append_basic_block("entry")
    loop = fn.append_basic_block("loop")
    done = fn.append_basic_block("done")
    builder = ir.IRBuilder(entry)
    builder.cbranch(builder.icmp_signed(">", n, ir.Constant(i64, 0)), loop, done)
    builder.position_at_end(loop)
    i = builder.phi(i64)
    i.add_incoming(ir.Constant(i64, 0), entry)
    value = builder.load(builder.gep(src, [i]))
    builder.store(EMITTERS[name](builder, value), builder.gep(dst, [i]))
    i_next = builder.add(i, ir.Constant(i64, 1))
    i.add_incoming(i_next, loop)
    builder.cbranch(builder.icmp_signed("<", i_next, n), loop, done)
    builder.position_at_end(done)
    builder.ret_void()
    return module


def _optimise(module: ir.Module, tm: llvm.TargetMachine) -> llvm.ModuleRef:
    module.triple = tm.triple
    module.data_layout = str(tm.target_data)
    mod = llvm.parse_assembly(str(module))
    mod.verify()
    pto = llvm.create_pipeline_tuning_options(speed_level=3)
    pb = llvm.create_pass_builder(tm, pto)
    pb.getModulePassManager().run(mod, pb)
    return mod


class _Compiled:
    """A JIT-compiled elementwise loop for one function and dtype."""

    def __init__(self, name: str, dtype: type) -> None:
        tm = _host_target_machine()
        self.dtype = dtype
        self.llvm_module = _optimise(_build_loop_module(name, dtype), tm)
        self.engine = llvm.create_mcjit_compiler(self.llvm_module, tm)
        self.engine.finalize_object()
        ptr_t = ctypes.c_void_p
        self.cfunc = ctypes.CFUNCTYPE(None, ptr_t, ptr_t, ctypes.c_int64)(
            self.engine.get_function_address("f"))

    def __call__(self, x: np.ndarray) -> np.ndarray:
        x = np.ascontiguousarray(x, dtype=self.dtype)
        out = np.empty_like(x)
        self.cfunc(x.ctypes.data, out.ctypes.data, x.size)
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
    x = np.concatenate(parts).astype(dtype)
    return x[np.isfinite(x)]


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
    }
    return cases[name]


@pytest.mark.parametrize("dtype", DTYPES, ids=["f32", "f64"])
@pytest.mark.parametrize("name", list(EMITTERS))
def test_special_values(name: str, dtype: type) -> None:
    cases = _special_cases(name, dtype)
    x = np.array([c[0] for c in cases], dtype=dtype)
    expected = np.array([c[1] for c in cases], dtype=dtype)
    got = compiled(name, dtype)(x)
    for xi, gi, ei in zip(x, got, expected):
        if np.isnan(ei):
            assert np.isnan(gi), f"{name}({xi!r}) = {gi!r}, expected nan"
        else:
            assert gi == ei and np.signbit(gi) == np.signbit(ei), (
                f"{name}({xi!r}) = {gi!r}, expected {ei!r}")


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

@pytest.mark.parametrize("dtype", DTYPES, ids=["f32", "f64"])
@pytest.mark.parametrize("name", list(EMITTERS))
def test_loop_vectorises(name: str, dtype: type) -> None:
    """After -O3 for the host, the elementwise loop contains vector arithmetic."""
    elem = "float" if dtype == np.float32 else "double"
    ir_text = str(compiled(name, dtype).llvm_module.get_function("f"))
    widths = [int(w) for w in re.findall(rf"<(\d+) x {elem}>", ir_text)]
    assert widths and max(widths) >= (4 if dtype == np.float32 else 2), (
        f"{name}[{dtype.__name__}] loop was not vectorised")
    calls = re.findall(r"call [^@]*@\"?([\w.]+)", ir_text)
    assert all(c.startswith("llvm.") for c in calls), calls


@pytest.mark.parametrize("name", list(EMITTERS))
def test_no_calls_in_emitted_ir(name: str) -> None:
    """Only intrinsics are called and no fast-math flags are used."""
    text = str(_build_loop_module(name, np.float64))
    for line in text.splitlines():
        if " call " in line:
            assert "@\"llvm." in line or "@llvm." in line, line
        for flag in (" fast ", " nnan ", " ninf "):
            assert flag not in line, line


# ---------------------------------------------------------------------------
# NVPTX
# ---------------------------------------------------------------------------

def _build_nvptx_module() -> ir.Module:
    """One kernel per function and dtype: out[i] = f(in[i]) with i = global thread id."""
    module = ir.Module(name="mathlib_nvptx")
    module.triple = "nvptx64-nvidia-cuda"
    i32 = ir.IntType(32)
    sreg = {
        reg: ir.Function(module, ir.FunctionType(i32, []), name=f"llvm.nvvm.read.ptx.sreg.{reg}.x")
        for reg in ("tid", "ctaid", "ntid")
    }
    for name, emitter in EMITTERS.items():
        for dtype, ty in IR_TYPES.items():
            fnty = ir.FunctionType(ir.VoidType(), [ty.as_pointer(), ty.as_pointer()])
            fn = ir.Function(module, fnty, name=f"k_{name}_{dtype.__name__}")
            fn.calling_convention = "ptx_kernel"
            builder = ir.IRBuilder(fn.append_basic_block("entry"))
            tid, ctaid, ntid = (builder.call(sreg[r], []) for r in ("tid", "ctaid", "ntid"))
            index = builder.zext(builder.add(builder.mul(ctaid, ntid), tid), ir.IntType(64))
            value = builder.load(builder.gep(fn.args[0], [index]))
            builder.store(emitter(builder, value), builder.gep(fn.args[1], [index]))
            builder.ret_void()
    return module


def _nvptx_assembly() -> str:
    target = llvm.Target.from_triple("nvptx64-nvidia-cuda")
    tm = target.create_target_machine(cpu="sm_80", opt=3)
    module = _build_nvptx_module()
    module.data_layout = str(tm.target_data)
    assert "ptx_kernel" in str(module)
    mod = llvm.parse_assembly(str(module))
    mod.verify()
    pto = llvm.create_pipeline_tuning_options(speed_level=3)
    pb = llvm.create_pass_builder(tm, pto)
    pb.getModulePassManager().run(mod, pb)
    return tm.emit_assembly(mod)


def test_nvptx_kernels_assemble(tmp_path: pathlib.Path) -> None:
    ptx = _nvptx_assembly()
    assert ptx.count(".entry") == len(EMITTERS) * len(IR_TYPES)
    assert "call" not in ptx.replace(".callprototype", "")  # fully inlined, no libm
    if shutil.which("ptxas") is None:
        pytest.skip("ptxas not on PATH: PTX generated but not assembled")
    path = tmp_path / "mathlib.ptx"
    path.write_text(ptx)
    result = subprocess.run(["ptxas", "-arch=sm_80", str(path), "-o", "/dev/null"],
                            capture_output=True, text=True)
    assert result.returncode == 0, result.stderr


def _load_cuda() -> ctypes.CDLL | None:
    try:
        cuda = ctypes.CDLL("libcuda.so.1")
    except OSError:
        return None
    count = ctypes.c_int(0)
    if cuda.cuInit(0) != 0 or cuda.cuDeviceGetCount(ctypes.byref(count)) != 0 or not count.value:
        return None
    return cuda


def test_nvptx_accuracy_on_gpu() -> None:
    """Run every kernel on a GPU (when one is present) and check its accuracy."""
    cuda = _load_cuda()
    if cuda is None:
        pytest.skip("no CUDA driver / GPU: kernels not executed")

    def check(status: int) -> None:
        assert status == 0, f"CUDA driver error {status}"

    device, context, module = ctypes.c_int(), ctypes.c_void_p(), ctypes.c_void_p()
    check(cuda.cuDeviceGet(ctypes.byref(device), 0))
    check(cuda.cuDevicePrimaryCtxRetain(ctypes.byref(context), device))
    check(cuda.cuCtxSetCurrent(context))
    check(cuda.cuModuleLoadData(ctypes.byref(module), _nvptx_assembly().encode() + b"\0"))
    block = 256
    failures = []
    try:
        for name in EMITTERS:
            for dtype in DTYPES:
                x = _inputs(name, dtype)
                special = np.array([c[0] for c in _special_cases(name, dtype)], dtype=dtype)
                x = np.concatenate([x, special])
                padded = np.zeros(-(-x.size // block) * block, dtype=dtype)
                padded[: x.size] = x
                out = np.empty_like(padded)
                kernel = ctypes.c_void_p()
                check(cuda.cuModuleGetFunction(ctypes.byref(kernel), module,
                                               f"k_{name}_{dtype.__name__}".encode()))
                d_in, d_out = ctypes.c_uint64(), ctypes.c_uint64()
                check(cuda.cuMemAlloc_v2(ctypes.byref(d_in), ctypes.c_size_t(padded.nbytes)))
                check(cuda.cuMemAlloc_v2(ctypes.byref(d_out), ctypes.c_size_t(padded.nbytes)))
                check(cuda.cuMemcpyHtoD_v2(d_in, padded.ctypes.data_as(ctypes.c_void_p),
                                           ctypes.c_size_t(padded.nbytes)))
                args = (ctypes.c_void_p * 2)(ctypes.cast(ctypes.byref(d_in), ctypes.c_void_p),
                                             ctypes.cast(ctypes.byref(d_out), ctypes.c_void_p))
                check(cuda.cuLaunchKernel(kernel, padded.size // block, 1, 1, block, 1, 1,
                                          0, None, args, None))
                check(cuda.cuCtxSynchronize())
                check(cuda.cuMemcpyDtoH_v2(out.ctypes.data_as(ctypes.c_void_p), d_out,
                                           ctypes.c_size_t(padded.nbytes)))
                check(cuda.cuMemFree_v2(d_in))
                check(cuda.cuMemFree_v2(d_out))
                got = out[: x.size]
                cpu = compiled(name, dtype)(x)
                same = (got == cpu) | (np.isnan(got) & np.isnan(cpu))
                worst = float(np.max(ulp_errors(name, dtype, x, got)))
                if worst > ULP_LIMIT[dtype] or not same.all():
                    failures.append(f"{name}[{dtype.__name__}]: {worst:.3f} ulp, "
                                    f"{int((~same).sum())} results differ from the CPU")
    finally:
        cuda.cuModuleUnload(module)
        cuda.cuDevicePrimaryCtxRelease(device)
    assert not failures, failures


if __name__ == "__main__":
    for fname in EMITTERS:
        for dt in DTYPES:
            print(f"{fname:8s} {dt.__name__:8s} max ulp {max_ulp_error(fname, dt):.3f}")

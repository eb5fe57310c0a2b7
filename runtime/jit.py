"""The CPU JIT engine: LLVM IR in, a callable native entry point out, through the compile cache.

On a cache hit the module is only parsed and its stored machine code is linked; on a miss it is
optimised (O3 for this CPU), compiled, and its machine code stored for the next process.
"""
from __future__ import annotations

import ctypes
import time
from typing import Any, Callable

import llvmlite.binding as llvm

from compiler.codegen.cpu import STEP_SYMBOL, new_host_target_machine, optimize, thread_count
from compiler.codegen.gemm import LIBRARY_SYMBOL, build_library

from . import cache

StepFunction = ctypes.CFUNCTYPE(None, ctypes.c_void_p)
_libraries: dict[str, Any] = {}   # dtype name -> the GEMM library's engine, kept for the process


def compile_module(module_text: str) -> tuple[Any, dict[str, float]]:
    """An MCJIT engine holding the machine code of ``module_text``; timings by phase."""
    timings: dict[str, float] = {}
    start = time.perf_counter()
    key = cache.key_for(module_text)
    cached = cache.load(key)
    if cached is not None:
        module = llvm.parse_assembly(module_text)
        timings["cache-hit"] = time.perf_counter() - start
    else:
        module = optimize(module_text)
        timings["llvm-opt"] = time.perf_counter() - start
    start = time.perf_counter()
    engine = llvm.create_mcjit_compiler(module, new_host_target_machine())

    def notify(_: Any, buffer: bytes) -> None:
        cache.store(key, buffer)

    def get_buffer(_: Any) -> bytes | None:
        return cached

    engine.set_object_cache(notify, get_buffer)
    engine.finalize_object()
    timings["machine-code"] = time.perf_counter() - start
    return engine, timings


def ensure_libraries(module_text: str) -> None:
    """Compile (or load from the cache) the GEMM routines the module calls, once per process, and
    make their symbols visible to compiled steps."""
    for dtype in ("float32", "float64"):
        name = LIBRARY_SYMBOL.format(dtype=dtype)
        if dtype in _libraries or name not in module_text:
            continue
        engine, _ = compile_module(str(build_library(dtype, max(thread_count(), 2))))
        llvm.add_symbol(name, engine.get_function_address(name))
        _libraries[dtype] = engine


class NativeStep:
    """Owns the machine code of one compiled step; ``__call__(table)`` runs it once."""

    def __init__(self, module_text: str) -> None:
        ensure_libraries(module_text)
        self._engine, self.timings = compile_module(module_text)
        address = self._engine.get_function_address(STEP_SYMBOL)
        if not address:
            raise RuntimeError("the compiled module has no step entry point")
        self._function: Callable[[int], None] = StepFunction(address)
        self.calls = 0

    def __call__(self, table: ctypes.Array) -> None:
        self.calls += 1
        self._function(ctypes.addressof(table))

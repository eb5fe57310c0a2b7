"""The CPU JIT engine: LLVM IR in, a callable native entry point out, through the compile cache.

On a cache hit the module is only parsed and its stored machine code is linked; on a miss it is
optimised (O3 for this CPU), compiled, and its machine code stored for the next process.
"""
from __future__ import annotations

import atexit
import ctypes
import os
import threading
import time
from typing import Any, Callable

import llvmlite.binding as llvm

from compiler.codegen.common import LLVM_LOCK
from compiler.codegen.cpu import STEP_SYMBOL, new_host_target_machine, optimize, thread_count
from compiler.codegen import threads
from compiler.codegen.gemm import LIBRARY_SYMBOLS, build_library

from . import cache

StepFunction = ctypes.CFUNCTYPE(None, ctypes.c_void_p)
_libraries: dict[str, Any] = {}   # dtype name -> the GEMM library's engine, kept for the process


def compile_module(module_text: str) -> tuple[Any, dict[str, float]]:
    """An MCJIT engine holding the machine code of ``module_text``; timings by phase."""
    with LLVM_LOCK:
        return _compile_module(module_text)


def _compile_module(module_text: str) -> tuple[Any, dict[str, float]]:
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


class _Pool:
    """The process's worker threads, each running ``graphgrad_pool_worker`` in native code (ctypes
    releases the GIL for the call). Stopped at exit; a forked child runs kernels serially."""

    def __init__(self) -> None:
        from compiler.codegen.cpu import host_target_machine
        self.engine, _ = compile_module(str(threads.build_pool_module(host_target_machine().triple)))
        for name in (threads.PARALLEL_SYMBOL,):
            llvm.add_symbol(name, self.engine.get_function_address(name))
        address = self.engine.get_function_address
        self._worker = ctypes.CFUNCTYPE(None, ctypes.c_int64)(address(threads.WORKER_SYMBOL))
        self._set_workers = ctypes.CFUNCTYPE(None, ctypes.c_int64)(address(threads.SET_WORKERS_SYMBOL))
        self._stop = ctypes.CFUNCTYPE(None)(address(threads.STOP_SYMBOL))
        self.threads: list[threading.Thread] = []
        count = max(thread_count(), 1) - 1
        self._set_workers(count)
        for index in range(count):
            thread = threading.Thread(target=self._worker, args=(index + 1,), daemon=True,
                                      name=f"graphgrad-worker-{index + 1}")
            thread.start()
            self.threads.append(thread)
        atexit.register(self.stop)
        if hasattr(os, "register_at_fork"):
            os.register_at_fork(after_in_child=lambda: self._set_workers(0))

    def stop(self) -> None:
        self._stop()
        for thread in self.threads:
            thread.join(timeout=1.0)
        self.threads = []


_pool: list[_Pool] = []


def ensure_pool() -> None:
    """Start the worker pool once per process (kernels and GEMMs split work across it)."""
    with LLVM_LOCK:
        if not _pool:
            _pool.append(_Pool())


def ensure_libraries(module_text: str) -> None:
    """Compile (or load from the cache) the GEMM routines the module calls, once per process, and
    make their symbols visible to compiled steps."""
    for dtype in ("float32", "float64"):
        names = [symbol.format(dtype=dtype) for symbol in LIBRARY_SYMBOLS]
        if dtype in _libraries or not any(name in module_text for name in names):
            continue
        with LLVM_LOCK:
            if dtype not in _libraries:
                engine, _ = compile_module(str(build_library(dtype, max(thread_count(), 2))))
                for name in names:
                    llvm.add_symbol(name, engine.get_function_address(name))
                _libraries[dtype] = engine


class NativeStep:
    """Owns the machine code of one compiled step; ``__call__(table)`` runs it once."""

    def __init__(self, module_text: str) -> None:
        ensure_pool()
        ensure_libraries(module_text)
        self._engine, self.timings = compile_module(module_text)
        with LLVM_LOCK:
            address = self._engine.get_function_address(STEP_SYMBOL)
        if not address:
            raise RuntimeError("the compiled module has no step entry point")
        self._function: Callable[[int], None] = StepFunction(address)
        self.calls = 0

    def global_address(self, name: str) -> int:
        return self._engine.get_global_value_address(name)

    def __call__(self, table: ctypes.Array) -> None:
        self.calls += 1
        self._function(ctypes.addressof(table))

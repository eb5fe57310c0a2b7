"""The CPU JIT engine: turns an optimised LLVM module into a callable native entry point."""
from __future__ import annotations

import ctypes
from typing import Any

import llvmlite.binding as llvm

from compiler.codegen.cpu import STEP_SYMBOL, new_host_target_machine

StepFunction = ctypes.CFUNCTYPE(None, ctypes.c_void_p)


class NativeStep:
    """Owns the machine code of one compiled step; ``__call__(table_address)`` runs it once."""

    def __init__(self, module: Any) -> None:
        self._engine = llvm.create_mcjit_compiler(module, new_host_target_machine())
        self._engine.finalize_object()
        address = self._engine.get_function_address(STEP_SYMBOL)
        if not address:
            raise RuntimeError("the compiled module has no step entry point")
        self._function = StepFunction(address)
        self.calls = 0

    def __call__(self, table: ctypes.Array) -> None:
        self.calls += 1
        self._function(ctypes.addressof(table))

"""How hard LLVM works on a piece of code: the IR pipeline, its vectorisers and unroller, and the
code generator's level.

LLVM's O3 costs milliseconds per kernel, most of it vectorising and unrolling loops. That pays
for a kernel that walks many points; on one that walks a few hundred the time saved per run is a
few microseconds, and code that is vectorised by hand (the GEMM library's micro-kernel and
packers) gains nothing from LLVM's IR passes at all. The JIT (``runtime.jit``) compiles each
kernel of at least ``HOT_WORK`` points on its own at ``HOT`` and the others with the step's entry
point at ``LIGHT``. The dumps (``llvm-opt``, ``asm``) show the whole step at ``FULL``.
"""
from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Tier:
    name: str
    passes: int | None    # LLVM's IR pipeline level (0-3), None: no IR passes at all
    vectorize: bool       # the loop and SLP vectorisers
    unroll: bool          # the loop unroller
    interleave: bool      # the loop vectoriser's interleaving (several vectors per iteration)
    codegen: int          # the code generator's level (0: fast instruction selection and registers)

    def describe(self) -> str:
        """The tier as text, for cache keys."""
        return (f"passes={self.passes} vectorize={int(self.vectorize)} unroll={int(self.unroll)} "
                f"interleave={int(self.interleave)} codegen={self.codegen}")


# Everything LLVM has: modules compiled whole (the worker pool) and the dumps.
FULL = Tier("full", 3, True, True, True, 3)
# A kernel of at least HOT_WORK points. Without the unroller: a third less compile time, and the
# same speed on the benchmarks' kernels (vectorised loops keep their interleaving).
HOT = Tier("hot", 3, True, False, True, 3)
# Smaller kernels and the step's entry point, which calls the kernels: a tenth of O3's compile
# time. Such a kernel runs several times slower than at O3, a few microseconds per run.
LIGHT = Tier("light", None, False, False, False, 0)
# The GEMM library: vectorised by hand, so LLVM's IR passes add nothing its code generator does
# not do (its GFLOP/s are the same), at a third of the compile time.
LIBRARY = Tier("library", None, False, False, False, 3)

HOT_WORK = 1 << 12

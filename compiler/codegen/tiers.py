"""How hard LLVM works on a piece of code: the IR pipeline, its vectorisers and unroller, and the
code generator's level.

LLVM's O3 costs milliseconds per kernel, most of it vectorising and unrolling loops. That pays
for a kernel that walks many points; on one that walks a few hundred the time saved per run is a
few microseconds, and code that is vectorised by hand (the GEMM library's micro-kernel and
packers) gains nothing from LLVM's IR passes at all. The JIT (``runtime.jit``) compiles each
kernel of at least ``HOT_WORK`` points on its own at ``HOT`` (``HOT_CHAINS`` for an elementwise
one of transcendental functions) and the others with the step's entry point at ``LIGHT``. The dumps (``llvm-opt``, ``asm``) show the whole step at ``FULL``.
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
    interleave_count: int = 0   # vectors per iteration when interleaving; 0: LLVM's cost model decides

    def describe(self) -> str:
        """The tier as text, for cache keys."""
        return (f"passes={self.passes} vectorize={int(self.vectorize)} unroll={int(self.unroll)} "
                f"interleave={int(self.interleave)} codegen={self.codegen}"
                + (f" interleave_count={self.interleave_count}" if self.interleave_count else ""))


# Everything LLVM has: modules compiled whole (the worker pool) and the dumps.
FULL = Tier("full", 3, True, True, True, 3)
# A kernel of at least HOT_WORK points. Without the unroller: a third less compile time, and the
# same speed on the benchmarks' kernels (vectorised loops keep their interleaving).
HOT = Tier("hot", 3, True, False, True, 3)
# A large elementwise kernel that evaluates a transcendental function (exp, tanh, erf, ...): one
# vector's evaluation is a long chain of dependent operations (a float32 tanh or sigmoid: an
# exponential and a division in double), which LLVM's cost model interleaves once at most, so the
# core waits on latency. Four vectors per iteration: tanh(1.5x + 0.3) * sigmoid(x) - exp(-x*x) on
# 16M floats 5% faster on 2 Zen 4 cores, sigmoid alone 20% on one (interleaving every kernel so
# made the CNN step 15% slower: reductions and loop nests keep the cost model's choice).
HOT_CHAINS = Tier("hot-chains", 3, True, False, True, 3, interleave_count=4)
# Smaller kernels and the step's entry point, which calls the kernels: a tenth of O3's compile
# time. Such a kernel runs several times slower than at O3, a few microseconds per run.
LIGHT = Tier("light", None, False, False, False, 0)
# The GEMM library: vectorised by hand, so LLVM's IR passes add nothing its code generator does
# not do (its GFLOP/s are the same), at a third of the compile time.
LIBRARY = Tier("library", None, False, False, False, 3)

HOT_WORK = 1 << 12

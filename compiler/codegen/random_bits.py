"""Philox-4x32-10 in LLVM IR: the counter-based generator behind the random ops.

Philox (Salmon, Moraes, Dror and Shaw, "Parallel random numbers: as easy as 1, 2, 3", SC 2011)
maps a 128-bit counter and a 64-bit key to 128 random bits with ten rounds of

    hi0, lo0 = mulhilo(0xD2511F53, c0)        hi1, lo1 = mulhilo(0xCD9E8D57, c2)
    c0, c1, c2, c3 = hi1 ^ c1 ^ k0, lo1, hi0 ^ c3 ^ k1, lo0

with the key bumped by the Weyl constants (0x9E3779B9, 0xBB67AE85) between rounds. It needs no
state and no branches, so every element of a kernel computes its own numbers, the same on the CPU
(where the 32x32->64-bit products vectorise) and on the GPU (one thread per element).

The primitive ``philox(run_count, block, key, lane)`` (all int64) returns word ``lane`` (0..3) of
the block with counter words ``(block low, block high, run_count low, run_count high)`` and key
words ``(key low, key high)``, zero-extended to int64. ``compiler.ops.random`` turns words into
floats with ordinary integer and float primitives; ``compiler.philox`` holds the numpy twin of
this function (and the constants both use).
"""
from __future__ import annotations

from llvmlite import ir

from ..philox import MULTIPLIERS, ROUNDS, WEYL

I32 = ir.IntType(32)
I64 = ir.IntType(64)


def _low_high(builder: ir.IRBuilder, value: ir.Value) -> tuple[ir.Value, ir.Value]:
    """The low and high 32-bit words of an i64."""
    return builder.trunc(value, I32), builder.trunc(builder.lshr(value, ir.Constant(I64, 32)), I32)


def _mulhilo(builder: ir.IRBuilder, multiplier: int, word: ir.Value) -> tuple[ir.Value, ir.Value]:
    """The high and low 32-bit halves of the 64-bit product ``multiplier * word``."""
    product = builder.mul(builder.zext(word, I64), ir.Constant(I64, multiplier), flags=("nuw",))
    low, high = _low_high(builder, product)
    return high, low


def emit_philox_words(builder: ir.IRBuilder, counter: tuple[ir.Value, ...],
                      key: tuple[ir.Value, ir.Value]) -> list[ir.Value]:
    """Philox-4x32-10 of four i32 counter words and two i32 key words: four i32 words."""
    c0, c1, c2, c3 = counter
    k0, k1 = key
    for round_number in range(ROUNDS):
        if round_number:
            k0 = builder.add(k0, ir.Constant(I32, WEYL[0]))
            k1 = builder.add(k1, ir.Constant(I32, WEYL[1]))
        hi0, lo0 = _mulhilo(builder, MULTIPLIERS[0], c0)
        hi1, lo1 = _mulhilo(builder, MULTIPLIERS[1], c2)
        c0, c1, c2, c3 = (builder.xor(builder.xor(hi1, c1), k0), lo1,
                          builder.xor(builder.xor(hi0, c3), k1), lo0)
    return [c0, c1, c2, c3]


def emit_philox(builder: ir.IRBuilder, run_count: ir.Value, block: ir.Value, key: ir.Value,
                lane: ir.Value) -> ir.Value:
    """Word ``lane`` of the Philox block ``(block, run_count)`` under ``key``, as an i64 in
    ``[0, 2**32)``. A constant ``lane`` picks the word directly; otherwise a select chain does."""
    block_low, block_high = _low_high(builder, block)
    run_low, run_high = _low_high(builder, run_count)
    words = emit_philox_words(builder, (block_low, block_high, run_low, run_high),
                              _low_high(builder, key))
    if isinstance(lane, ir.Constant):
        word = words[int(lane.constant) & 3]
    else:
        which = builder.and_(lane, ir.Constant(I64, 3))
        word = words[3]
        for position in (2, 1, 0):
            word = builder.select(builder.icmp_unsigned("==", which, ir.Constant(I64, position)),
                                  words[position], word)
    return builder.zext(word, I64)

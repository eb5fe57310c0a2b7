"""Philox-4x32-10 in numpy, and the constants it shares with its LLVM twin ``codegen/random_bits.py``.

Philox (Salmon, Moraes, Dror and Shaw, "Parallel random numbers: as easy as 1, 2, 3", SC 2011) maps
a 128-bit counter and a 64-bit key to 128 random bits with ten rounds of multiplications, xors and
key bumps. We write it ourselves because the generated kernels compute it inline, per element, on
every target; this numpy version is the reference the random ops' oracle uses
(``compiler.ops.random``). It depends on numpy only, so both ``ops`` and ``codegen`` may import it.
"""
from __future__ import annotations

from typing import Any, Sequence

import numpy as np

ROUNDS = 10
MULTIPLIERS = (0xD2511F53, 0xCD9E8D57)
WEYL = (0x9E3779B9, 0xBB67AE85)

_MASK32 = 0xFFFFFFFF


def philox4x32(counter: Sequence[Any], key: Sequence[Any]) -> tuple[np.ndarray, ...]:
    """Philox-4x32-10 of four counter words and two key words (arrays or ints, each < 2**32).

    Returns the four output words as uint64 arrays holding 32-bit values. Arithmetic is in uint64:
    a 32x32-bit product fits, and its high and low halves are a shift and a mask away.

    >>> [hex(int(w)) for w in philox4x32([0, 0, 0, 0], [0, 0])]
    ['0x6627e8d5', '0xe169c58d', '0xbc57ac4c', '0x9b00dbd8']
    """
    mask, shift = np.uint64(_MASK32), np.uint64(32)
    c0, c1, c2, c3 = (np.asarray(c, dtype=np.uint64) & mask for c in counter)
    k0, k1 = (np.asarray(k, dtype=np.uint64) & mask for k in key)
    m0, m1 = np.uint64(MULTIPLIERS[0]), np.uint64(MULTIPLIERS[1])
    w0, w1 = np.uint64(WEYL[0]), np.uint64(WEYL[1])
    for round_number in range(ROUNDS):
        if round_number:
            k0 = (k0 + w0) & mask
            k1 = (k1 + w1) & mask
        p0 = c0 * m0
        p1 = c2 * m1
        c0, c1, c2, c3 = ((p1 >> shift) ^ c1 ^ k0, p1 & mask, (p0 >> shift) ^ c3 ^ k1, p0 & mask)
    return c0, c1, c2, c3

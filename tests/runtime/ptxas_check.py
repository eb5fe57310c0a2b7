"""Assembling a step's PTX with ``ptxas -v`` in the GPU tests: what it reports per kernel."""
from __future__ import annotations

import re
import subprocess
from dataclasses import dataclass
from pathlib import Path

from ..conftest import PTXAS


@dataclass(frozen=True)
class Assembled:
    """Registers and spill stores (bytes) of each kernel, in the order ptxas compiled them."""

    registers: list[int]
    spill_stores: list[int]


def assemble(ptx: str, arch: str, directory: Path) -> Assembled:
    """``ptxas -arch=ARCH -v`` on ``ptx``; fails the test with ptxas's messages when it refuses."""
    assert PTXAS is not None
    source = directory / f"{arch}.ptx"
    source.write_text(ptx)
    result = subprocess.run([PTXAS, f"-arch={arch}", "-v", str(source), "-o", str(directory / f"{arch}.cubin")],
                            capture_output=True, text=True)
    assert result.returncode == 0, result.stderr
    return Assembled([int(n) for n in re.findall(r"Used (\d+) registers", result.stderr)],
                     [int(n) for n in re.findall(r"(\d+) bytes spill stores", result.stderr)])

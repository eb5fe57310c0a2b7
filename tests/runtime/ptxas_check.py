"""Assembling a step's PTX with ``ptxas -v`` in the GPU tests: what it reports per kernel."""
from __future__ import annotations

import os
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


# Every assembly of the test run, by test and arch: the summary at the end of the run reports them
# (tests/conftest.py, ``pytest_terminal_summary``).
ASSEMBLED: list[tuple[str, str, Assembled]] = []


def assemble(ptx: str, arch: str, directory: Path) -> Assembled:
    """``ptxas -arch=ARCH -v`` on ``ptx``; fails the test with ptxas's messages when it refuses."""
    assert PTXAS is not None
    source = directory / f"{arch}.ptx"
    source.write_text(ptx)
    result = subprocess.run([PTXAS, f"-arch={arch}", "-v", str(source), "-o", str(directory / f"{arch}.cubin")],
                            capture_output=True, text=True)
    assert result.returncode == 0, result.stderr
    assembled = Assembled([int(n) for n in re.findall(r"Used (\d+) registers", result.stderr)],
                          [int(n) for n in re.findall(r"(\d+) bytes spill stores", result.stderr)])
    test = os.environ.get("PYTEST_CURRENT_TEST", directory.name).split("::")[-1].rsplit(" ", 1)[0]
    ASSEMBLED.append((test, arch, assembled))
    return assembled


def report() -> list[str]:
    """The run's ptxas figures: per arch, the kernels assembled, their registers and spill stores,
    and the kernels with the most registers."""
    lines = []
    for arch in sorted({arch for _, arch, _ in ASSEMBLED}):
        runs = [(test, assembled) for test, each, assembled in ASSEMBLED if each == arch]
        kernels = sum(len(assembled.registers) for _, assembled in runs)
        spills = sum(sum(assembled.spill_stores) for _, assembled in runs)
        most = sorted(((max(assembled.registers, default=0), test) for test, assembled in runs), reverse=True)[:3]
        spilling = [f"{test}: {sum(assembled.spill_stores)} B" for test, assembled in runs if any(assembled.spill_stores)]
        lines.append(f"{arch}: {kernels} kernels in {len(runs)} assemblies, {spills} bytes of spill stores"
                     + (" (" + ", ".join(spilling) + ")" if spilling else "") + "; most registers: "
                     + ", ".join(f"{registers} ({test})" for registers, test in most))
    return lines

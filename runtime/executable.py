"""A compiled step bound to buffers: feeds in, one native call, fetches out."""
from __future__ import annotations

import ctypes
import time
from typing import Any, Sequence

import numpy as np

from compiler.graph import Operation, Tensor
from compiler.kernel_ir import FetchSpec, contiguous_strides
from compiler.pipeline import CompiledStep, render_report

from .jit import NativeStep


def read_fetch(arrays: Sequence[np.ndarray], spec: FetchSpec) -> np.ndarray:
    """A copy of one fetched tensor, read from its buffer with the spec's strides."""
    whole = arrays[spec.buffer]
    if spec.offset == 0 and whole.shape == spec.shape and spec.strides == contiguous_strides(spec.shape):
        return whole.copy()
    source = whole.reshape(-1)
    view = np.lib.stride_tricks.as_strided(source[spec.offset:], spec.shape,
                                           [s * source.itemsize for s in spec.strides])
    return np.array(view, copy=True)


def host_array(program: Any, buffer: Any, variable_arrays: dict[Tensor, np.ndarray]) -> np.ndarray:
    """The host memory of a buffer: the session's array for a variable, the value of a constant,
    else a new array."""
    if buffer.role == "variable":
        tensor = next(t for t, b in program.variables.items() if b == buffer.index)
        return variable_arrays[tensor]
    if buffer.role == "constant":
        return np.array(program.constants[buffer.index], order="C")
    return np.empty(buffer.shape, dtype=buffer.dtype)


def check_output(target: Any, spec: FetchSpec) -> None:
    if not isinstance(target, np.ndarray) or target.shape != spec.shape or not target.flags.writeable:
        raise ValueError(f"out= needs a writeable array of shape {spec.shape}, got "
                         f"{getattr(target, 'shape', type(target).__name__)}")


class Executable:
    """One compiled step. ``run`` makes exactly one call into native code.

    ``dump(stage)`` returns a stage's text: graph, optimized, kernels, llvm, llvm-opt, asm, ptx.
    """

    def __init__(self, step: CompiledStep, fetches: Sequence[Tensor | Operation],
                 variable_arrays: dict[Tensor, np.ndarray]) -> None:
        self.step = step
        self.fetches = list(fetches)
        program = step.program
        self._native = NativeStep(step.texts["llvm"])
        self._profiled: NativeStep | None = None
        step.timings.update(self._native.timings)
        self._arrays: list[np.ndarray] = []
        self._arenas = [np.empty(size + 64, dtype=np.uint8) for size in program.arenas]
        for buffer in program.buffers:
            if buffer.index in program.placement:
                arena_index, offset = program.placement[buffer.index]
                arena = self._arenas[arena_index]
                start = (-arena.ctypes.data) % 64 + offset  # 64-byte aligned
                array = arena[start:start + buffer.nbytes].view(buffer.dtype).reshape(buffer.shape)
            elif buffer.role == "temp":
                array = np.empty(0, dtype=buffer.dtype)  # merged into another buffer: never used
            else:
                array = host_array(program, buffer, variable_arrays)
            self._arrays.append(array)
        self._table = (ctypes.c_void_p * max(len(self._arrays), 1))()
        self._own_addresses = [array.ctypes.data for array in self._arrays]
        for index, address in enumerate(self._own_addresses):
            self._table[index] = address
        # The last user array bound to each buffer and its address: a loop that feeds (or writes
        # into) the same arrays skips numpy's slow address lookup. Holds one reference per buffer.
        self._bound: dict[int, tuple[np.ndarray, int]] = {}
        self._feed_slots = [(tensor, index) for tensor, index in program.feeds.items()]

    @property
    def native_calls(self) -> int:
        """How many times native code was entered (one per ``run``)."""
        return self._native.calls

    @property
    def program(self) -> Any:
        return self.step.program

    def profile(self, feeds: dict[Tensor, np.ndarray], runs: int = 10) -> list[dict[str, Any]]:
        """Time each kernel: runs the step ``runs`` times with cycle counters between kernels.

        Returns one dict per kernel (name, kind, space, seconds: the median, covers: the ops it
        computes). The step's effects happen ``runs`` times, as with ``run``; variables change.
        """
        from compiler.codegen.cpu import PROFILE_SYMBOL, build_module
        if self._profiled is None:
            self._profiled = NativeStep(str(build_module(self.step.program, profile=True)))
        kernels = self.step.program.kernels
        counters = (ctypes.c_uint64 * (len(kernels) + 1)).from_address(
            self._profiled.global_address(PROFILE_SYMBOL))
        samples = []
        for _ in range(max(1, runs)):
            native = self._native
            self._native = self._profiled
            try:
                wall = time.perf_counter()
                self.run(feeds)
                wall = time.perf_counter() - wall
            finally:
                self._native = native
            cycles = [counters[i + 1] - counters[i] for i in range(len(kernels))]
            samples.append((cycles, wall))
        # Cycle counter ticks per second, from the longest run: cycles inside vs wall time around.
        cycles_total, wall = max(samples, key=lambda s: s[1])
        rate = max(sum(cycles_total), 1) / wall
        result = []
        for index, kernel in enumerate(kernels):
            seconds = float(np.median([s[0][index] for s in samples])) / rate
            result.append({"name": kernel.name, "kind": kernel.kind, "space": kernel.space,
                           "seconds": seconds, "covers": kernel.covers})
        return result

    def run(self, feeds: dict[Tensor, np.ndarray],
            outputs: Sequence[np.ndarray | None] | None = None) -> list[np.ndarray | None]:
        """One step. With ``outputs`` (one array or None per fetch), results are written into
        those arrays — straight from the kernels when the result has its own buffer — and returned."""
        arrays = self._arrays
        current = list(arrays)
        program = self.step.program
        direct: list[int] = []
        if outputs is not None:
            for spec, target in zip(program.fetches, outputs):
                if spec is None or target is None:
                    continue
                check_output(target, spec)
                buffer = program.buffers[spec.buffer]
                if (buffer.role == "output" and spec.offset == 0 and spec.shape == buffer.shape
                        and target.dtype == buffer.dtype and target.flags.c_contiguous
                        and spec.buffer not in direct):
                    current[spec.buffer] = target
                    self._table[spec.buffer] = self._address(spec.buffer, target)
                    direct.append(spec.buffer)
        for tensor, index in self._feed_slots:
            value = feeds[tensor]
            if value.flags.c_contiguous and value.dtype == arrays[index].dtype:
                current[index] = value           # read in place: no copy
                self._table[index] = self._address(index, value)
            else:
                np.copyto(arrays[index], value)
                self._table[index] = self._own_addresses[index]
        try:
            self._native(self._table)
        finally:
            for index in direct:
                self._table[index] = self._own_addresses[index]
        if outputs is None:
            return [None if spec is None else read_fetch(current, spec) for spec in program.fetches]
        results: list[np.ndarray | None] = []
        for spec, target in zip(program.fetches, outputs):
            if spec is None:
                results.append(None)
            elif target is None:
                results.append(read_fetch(current, spec))
            else:
                if spec.buffer not in direct or current[spec.buffer] is not target:
                    np.copyto(target, read_fetch(current, spec))
                results.append(target)
        return results

    def _address(self, index: int, array: np.ndarray) -> int:
        bound = self._bound.get(index)
        if bound is not None and bound[0] is array:
            return bound[1]
        address = array.ctypes.data
        self._bound[index] = (array, address)
        return address

    def dump(self, stage: str) -> str:
        """The text of one compiler stage for this step (see ``compiler.pipeline.STAGES``)."""
        return self.step.dump(stage)

    def report(self) -> str:
        """A readable summary: timings, the buffer plan, and the kernels with the lines they cover."""
        return render_report(self.step)

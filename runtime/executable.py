"""A compiled step bound to buffers: feeds in, one native call, fetches out."""
from __future__ import annotations

import ctypes
import threading
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


class ReadWriteLock:
    """Many readers or one writer, writers first: a writer waiting keeps new readers out, so a
    stream of inference calls cannot starve a training step."""

    def __init__(self) -> None:
        self._condition = threading.Condition(threading.Lock())
        self._readers = 0
        self._writing = False
        self._writers_waiting = 0

    def acquire(self, exclusive: bool) -> None:
        with self._condition:
            if exclusive:
                self._writers_waiting += 1
                while self._writing or self._readers:
                    self._condition.wait()
                self._writers_waiting -= 1
                self._writing = True
            else:
                while self._writing or self._writers_waiting:
                    self._condition.wait()
                self._readers += 1

    def release(self, exclusive: bool) -> None:
        with self._condition:
            if exclusive:
                self._writing = False
            else:
                self._readers -= 1
            if not self._readers:
                self._condition.notify_all()


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


class CallBuffers:
    """The memory one ``run`` writes besides variables: feed and output buffers, the arena of
    temporaries and the table of buffer addresses the native step reads. Each concurrent ``run``
    of an executable takes a set of its own; variables and constants are shared by all."""

    def __init__(self, program: Any, shared: dict[int, np.ndarray]) -> None:
        self.arenas = [np.empty(size + 64, dtype=np.uint8) for size in program.arenas]
        self.arrays: list[np.ndarray] = []
        for buffer in program.buffers:
            if buffer.index in shared:
                array = shared[buffer.index]
            elif buffer.index in program.placement:
                arena_index, offset = program.placement[buffer.index]
                arena = self.arenas[arena_index]
                start = (-arena.ctypes.data) % 64 + offset  # 64-byte aligned
                array = arena[start:start + buffer.nbytes].view(buffer.dtype).reshape(buffer.shape)
            elif buffer.role == "temp":
                array = np.empty(0, dtype=buffer.dtype)  # merged into another buffer: never used
            else:
                array = np.empty(buffer.shape, dtype=buffer.dtype)
            self.arrays.append(array)
        self.table = (ctypes.c_void_p * max(len(self.arrays), 1))()
        self.own_addresses = [array.ctypes.data for array in self.arrays]
        for index, address in enumerate(self.own_addresses):
            self.table[index] = address
        # The last user array bound to each buffer and its address: a loop that feeds (or writes
        # into) the same arrays skips numpy's slow address lookup. Holds one reference per buffer.
        self.bound: dict[int, tuple[np.ndarray, int]] = {}

    def address(self, index: int, array: np.ndarray) -> int:
        bound = self.bound.get(index)
        if bound is not None and bound[0] is array:
            return bound[1]
        address = array.ctypes.data
        self.bound[index] = (array, address)
        return address


class Executable:
    """One compiled step. ``run`` makes exactly one call into native code.

    ``run`` may be called from several threads at once: each call has its own feed, output and
    temporary buffers (``CallBuffers``), and ``variable_lock`` orders the calls that touch
    variables — one that assigns variables runs alone, ones that only read them run together.

    ``dump(stage)`` returns a stage's text: graph, optimized, kernels, llvm, llvm-opt, asm, ptx.
    """

    def __init__(self, step: CompiledStep, fetches: Sequence[Tensor | Operation],
                 variable_arrays: dict[Tensor, np.ndarray], variable_lock: "ReadWriteLock | None" = None) -> None:
        self.step = step
        self.fetches = list(fetches)
        program = step.program
        self._native = NativeStep(step.texts["llvm"])
        self._profiled: NativeStep | None = None
        self._profile_lock = threading.Lock()
        step.timings.update(self._native.timings)
        self._shared = {buffer.index: host_array(program, buffer, variable_arrays)
                        for buffer in program.buffers if buffer.role in ("variable", "constant")}
        self._idle = [CallBuffers(program, self._shared)]  # taken by a run, given back after it
        self._feed_slots = [(tensor, index) for tensor, index in program.feeds.items()]
        variable_buffers = set(program.variables.values())
        self._lock = variable_lock if variable_buffers else None
        self._exclusive = any(kernel.out.buffer in variable_buffers for kernel in program.kernels)

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
        with self._profile_lock:  # the counters are the profiled module's own: one profile at a time
            return self._profile(feeds, runs)

    def _profile(self, feeds: dict[Tensor, np.ndarray], runs: int) -> list[dict[str, Any]]:
        from compiler.codegen.cpu import PROFILE_SYMBOL, build_module
        if self._profiled is None:
            self._profiled = NativeStep(str(build_module(self.step.program, profile=True)))
        kernels = self.step.program.kernels
        counters = (ctypes.c_uint64 * (len(kernels) + 1)).from_address(
            self._profiled.global_address(PROFILE_SYMBOL))
        samples = []
        for _ in range(max(1, runs)):
            wall = time.perf_counter()
            self.run(feeds, native=self._profiled)
            wall = time.perf_counter() - wall
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

    def run(self, feeds: dict[Tensor, np.ndarray], outputs: Sequence[np.ndarray | None] | None = None,
            native: NativeStep | None = None) -> list[np.ndarray | None]:
        """One step. With ``outputs`` (one array or None per fetch), results are written into
        those arrays — straight from the kernels when the result has its own buffer — and returned.
        ``native`` runs another build of the same step (the profiling one)."""
        try:
            buffers = self._idle.pop()   # list.pop and append are atomic: no lock needed here
        except IndexError:
            buffers = CallBuffers(self.step.program, self._shared)
        lock = self._lock
        if lock is not None:
            lock.acquire(self._exclusive)
        try:
            return self._run(native or self._native, buffers, feeds, outputs)
        finally:
            if lock is not None:
                lock.release(self._exclusive)
            self._idle.append(buffers)

    def _run(self, native: NativeStep, buffers: CallBuffers, feeds: dict[Tensor, np.ndarray],
             outputs: Sequence[np.ndarray | None] | None) -> list[np.ndarray | None]:
        arrays, table = buffers.arrays, buffers.table
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
                    table[spec.buffer] = buffers.address(spec.buffer, target)
                    direct.append(spec.buffer)
        for tensor, index in self._feed_slots:
            value = feeds[tensor]
            if value.flags.c_contiguous and value.dtype == arrays[index].dtype:
                current[index] = value           # read in place: no copy
                table[index] = buffers.address(index, value)
            else:
                np.copyto(arrays[index], value)
                table[index] = buffers.own_addresses[index]
        try:
            native(table)
        finally:
            for index in direct:
                table[index] = buffers.own_addresses[index]
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

    def dump(self, stage: str) -> str:
        """The text of one compiler stage for this step (see ``compiler.pipeline.STAGES``)."""
        return self.step.dump(stage)

    def report(self) -> str:
        """A readable summary: timings, the buffer plan, and the kernels with the lines they cover."""
        return render_report(self.step)

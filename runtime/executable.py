"""A compiled step bound to buffers: feeds in, one native call, fetches out."""
from __future__ import annotations

import ctypes
import functools
import json
import os
import threading
import time
import weakref
from dataclasses import dataclass, field
from typing import Any, Sequence

import numpy as np

from compiler.codegen.common import STACK_GROWTH_FAILED
from compiler.codegen.sanitizer import MEMORY_KINDS, REPORT_FIELDS, describe
from compiler.errors import FeedError, OutOfBoundsError, RaceError
from compiler.graph import Operation, Tensor
from compiler.kernel_ir import Branch, FetchSpec, Loop, contiguous_strides, format_bytes, largest_buffers
from compiler.ops.numerics import failure_error
from compiler.pipeline import CompiledStep, render_html_report, render_report

from .feeds import check_is_mapping, convert_feed
from .jit import NativeStep
from .link import chained_kernels, kernel_work


def read_fetch(arrays: Sequence[np.ndarray], spec: FetchSpec) -> np.ndarray:
    """A copy of one fetched tensor, read from its buffer with the spec's strides."""
    whole = arrays[spec.buffer]
    if spec.offset == 0 and whole.shape == spec.shape and spec.strides == contiguous_strides(spec.shape):
        return whole.copy()
    source = whole.reshape(-1)
    view = np.lib.stride_tricks.as_strided(source[spec.offset:], spec.shape,
                                           [s * source.itemsize for s in spec.strides])
    return np.array(view, copy=True)


def checked_feeds(program: Any, feeds: dict[Tensor, Any]) -> dict[Tensor, np.ndarray]:
    """``feeds`` converted to a compiled step's dtypes and checked against the shapes it was
    compiled for (its native code reads each fed array by address). None feeds nothing, as in
    ``Session.run``."""
    feeds = {} if feeds is None else feeds
    check_is_mapping(feeds)
    named = {key: value for key, value in feeds.items() if isinstance(key, str)}
    checked = {}
    for tensor, index in program.feeds.items():
        if tensor in feeds:
            given = feeds[tensor]
        elif tensor.name in named or tensor.op.name in named:   # "x:0" or "x", as Session.run takes
            given = named[tensor.name] if tensor.name in named else named[tensor.op.name]
        else:
            raise FeedError(f"this step needs a value for {tensor.name!r}")
        value = convert_feed(tensor, given)
        compiled = tuple(program.buffers[index].shape)
        if value.shape != compiled:
            raise FeedError(f"{tensor.name!r} was compiled for shape {compiled}, got {value.shape}; "
                            "sess.run compiles a step for each new shape (or sess.compile one for it)")
        checked[tensor] = value
    return checked


class ReadWriteLock:
    """Many readers or one writer, writers first, yet fair: a writer waiting keeps new readers
    out, so a stream of inference calls cannot starve a training step; and a writer that ends
    lets the readers already waiting in before the next writer, so a training loop on one thread
    cannot starve a checkpoint's reads on another."""

    def __init__(self) -> None:
        self._mutex = threading.Lock()
        self._condition = threading.Condition(self._mutex)
        self._readers = 0
        self._writing = False
        self._writers_waiting = 0
        self._readers_waiting = 0
        self._admitted = 0         # readers let in ahead of the waiting writers
        self._waiting = 0          # threads in wait(): only then does a release wake anyone

    def acquire(self, exclusive: bool) -> None:
        with self._mutex:
            if exclusive:
                if self._writing or self._readers or self._admitted:
                    self._writers_waiting += 1
                    self._waiting += 1
                    try:
                        while self._writing or self._readers or self._admitted:
                            self._condition.wait()
                    except BaseException:   # KeyboardInterrupt in wait(), which holds the mutex again
                        self._waiting -= 1
                        self._writers_waiting -= 1
                        self._condition.notify_all()   # the readers this writer kept out
                        raise
                    self._waiting -= 1
                    self._writers_waiting -= 1
                self._writing = True
            else:
                if self._writing or (self._writers_waiting and not self._admitted):
                    self._readers_waiting += 1
                    self._waiting += 1
                    try:
                        while self._writing or (self._writers_waiting and not self._admitted):
                            self._condition.wait()
                    except BaseException:
                        self._waiting -= 1
                        self._readers_waiting -= 1
                        if self._admitted > self._readers_waiting:   # it was let in: give its place back
                            self._admitted -= 1
                        self._condition.notify_all()
                        raise
                    self._waiting -= 1
                    self._readers_waiting -= 1
                if self._admitted:
                    self._admitted -= 1
                self._readers += 1

    def release(self, exclusive: bool) -> None:
        with self._mutex:
            if exclusive:
                self._writing = False
                self._admitted = self._readers_waiting
            else:
                self._readers -= 1
            if not self._readers and self._waiting:
                self._condition.notify_all()


def host_array(program: Any, buffer: Any, variable_arrays: dict[Tensor, np.ndarray],
               variable_of: dict[int, Tensor]) -> np.ndarray:
    """The host memory of a buffer: the session's array for a variable (``variable_of``: the
    variable of each variable buffer), the value of a constant, else a new array."""
    if buffer.role == "variable":
        return variable_arrays[variable_of[buffer.index]]
    if buffer.role == "constant":
        return np.array(program.constants[buffer.index], order="C")
    return np.empty(buffer.shape, dtype=buffer.dtype)


def check_output(target: Any, shape: tuple[int, ...], dtype: np.dtype) -> None:
    """``target`` can take a fetched value of ``shape`` and ``dtype``: checked before the step
    runs, so that a refused ``out=`` changes no variable."""
    if not isinstance(target, np.ndarray) or target.shape != shape:
        raise ValueError(f"out= needs a writeable array of shape {shape}, got "
                         f"{getattr(target, 'shape', type(target).__name__)}")
    if not target.flags.writeable:
        raise ValueError(f"out= needs a writeable array of shape {shape}, got a read-only one")
    if not np.can_cast(dtype, target.dtype, casting="same_kind"):
        raise ValueError(f"out= needs an array that can take {dtype.name} values, got {target.dtype.name}")


_LIBC = ctypes.CDLL(None)   # free() for the memory generated code grew with realloc
_LIBC.free.argtypes = [ctypes.c_void_p]
_LIBC.free.restype = None


def out_of_host_memory(program: Any, shared: dict[int, np.ndarray]) -> str:
    """Why one run's buffers could not be allocated: how much it asked for and its largest buffers,
    each with the op and the user's line that made it."""
    own = [b.index for b in program.buffers if b.index not in shared and b.role != "temp"]
    placed = list(program.placement)
    total = sum(program.arenas) + sum(program.buffers[i].nbytes for i in own)
    return (f"out of host memory: one run of the compiled step needs {format_bytes(total)} besides its "
            f"variables ({format_bytes(sum(program.arenas))} of temporaries, which share memory by "
            f"liveness, and {format_bytes(total - sum(program.arenas))} of feeds, outputs and loop "
            f"state), and this process could not allocate it. The largest buffers: "
            f"{largest_buffers(program, placed + own)}. Feed smaller batches, fetch fewer tensors or "
            f"build a smaller model")


class CallBuffers:
    """The memory one ``run`` writes besides variables: feed and output buffers, the arena of
    temporaries and the table of buffer addresses the native step reads. Each concurrent ``run``
    of an executable takes a set of its own; variables and constants are shared by all."""

    def __init__(self, program: Any, shared: dict[int, np.ndarray]) -> None:
        try:
            self._allocate(program, shared)
        except MemoryError:
            raise MemoryError(out_of_host_memory(program, shared)) from None
        # The table's last slot: the step's status word, 0 or the number of the kernel whose
        # numerics check failed or that raced (the step stopped there), then a race's report.
        self.status = np.zeros(1 + len(REPORT_FIELDS), dtype=np.int64)
        self.table = (ctypes.c_void_p * (len(self.arrays) + 1))()
        # A stack's memory is the step's own (malloc'ed by its first Reserve, grown by realloc): its
        # slot starts empty and is freed with these buffers.
        self.stacks = [buffer.index for buffer in program.buffers if buffer.role == "stack"]
        self.own_addresses = [array.ctypes.data for array in self.arrays]
        for index in self.stacks:
            self.own_addresses[index] = 0
        for index, address in enumerate(self.own_addresses):
            self.table[index] = address
        self.table[len(self.arrays)] = self.status.ctypes.data
        # The last user array bound to each buffer (weakly: a feed the user let go of is freed)
        # and its address: a loop that feeds (or writes into) the same arrays skips numpy's slow
        # address lookup.
        self.bound: dict[int, tuple[weakref.ref[np.ndarray], int]] = {}

    def _allocate(self, program: Any, shared: dict[int, np.ndarray]) -> None:
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
            elif buffer.role in ("region", "stack"):
                array = np.zeros(buffer.shape, dtype=buffer.dtype)  # a stack's row count starts at 0
            else:
                array = np.empty(buffer.shape, dtype=buffer.dtype)
            self.arrays.append(array)

    def __del__(self) -> None:
        for index in getattr(self, "stacks", ()):
            if self.table[index]:
                _LIBC.free(ctypes.c_void_p(self.table[index]))
                self.table[index] = 0

    def address(self, index: int, array: np.ndarray) -> int:
        bound = self.bound.get(index)
        if bound is not None and bound[0]() is array:
            return bound[1]
        address = array.ctypes.data
        self.bound[index] = (weakref.ref(array), address)
        return address


CALIBRATION_PAUSE = 0.005   # seconds between the first two profiled runs


@dataclass
class ProfileSamples:
    """What ``Executable.profile`` measured: per run, the cycle counter before the first kernel and
    after each one, and the wall clock (``time.perf_counter``) before and after the call."""

    stamps: list[list[int]]
    walls: list[tuple[float, float]]
    # Per run, per part of each split kernel in order: (start counter, end counter, thread id).
    parts: list[list[tuple[int, int, int]]] = field(default_factory=list)

    @functools.cached_property
    def rate(self) -> float:
        """Counter ticks per second. No run's native time can exceed its wall time, which bounds
        the rate from below; with two runs or more, the window from the first run's first stamp to
        the last run's last one, against the wall clock around it, measures it."""
        bound = max(((run[-1] - run[0]) / (after - before) for run, (before, after)
                     in zip(self.stamps, self.walls) if after > before), default=0.0)
        ticks = self.stamps[-1][-1] - self.stamps[0][0]
        seconds = self.walls[-1][1] - self.walls[0][0]
        window = ticks / seconds if len(self.stamps) > 1 and ticks > 0 and seconds > 0 else 0.0
        return max(bound, window) or 1.0


def write_trace(path: str | os.PathLike[str], kernels: Sequence[Any], parts: Sequence[tuple[int, bool]],
                samples: ProfileSamples) -> None:
    """Write the Chrome trace-event JSON of a profile (see ``Executable.profile``)."""
    process, thread = os.getpid(), threading.get_native_id()
    events: list[dict[str, Any]] = [
        {"name": "process_name", "ph": "M", "pid": process, "tid": thread, "args": {"name": "graphgrad step"}},
        {"name": "thread_name", "ph": "M", "pid": process, "tid": thread, "args": {"name": "calling thread"}}]
    origin = samples.walls[0][0]
    workers: set[int] = set()
    to_us = 1e6 / samples.rate
    previous_end = 0.0
    for run, (stamps, (before, after)) in enumerate(zip(samples.stamps, samples.walls)):
        start = max(round((before - origin) * 1e6, 3), previous_end)
        ends = [round(start + max(stamp - stamps[0], 0) * to_us, 3) for stamp in stamps]
        ends = [max(ends[:i + 1]) for i in range(len(ends))]   # a counter read on another core
        previous_end = ends[-1]
        events.append({"name": "step", "cat": "step", "ph": "X", "ts": start, "dur": round(ends[-1] - start, 3),
                       "pid": process, "tid": thread,
                       "args": {"run": run, "kernels": len(kernels),
                                "wall_us": round((after - before) * 1e6, 3)}})
        slots = iter(samples.parts[run] if samples.parts else ())
        for index, kernel in enumerate(kernels):
            if parts[index][0] > 1:  # split across the pool: one slice per part, on its thread's track
                for part in range(parts[index][0]):
                    began, ended, worker = next(slots)
                    if not worker:
                        continue
                    workers.add(worker)
                    events.append({"name": f"{kernel.name} part {part}", "cat": "part", "ph": "X",
                                   "ts": round(start + (began - stamps[0]) * to_us, 3),
                                   "dur": round(max(ended - began, 0) * to_us, 3), "pid": process, "tid": worker,
                                   "args": {"run": run, "kernel": kernel.name, "part": part}})
            lines = list(dict.fromkeys(where for _, _, where in kernel.covers))
            events.append({
                "name": kernel.name, "cat": "kernel", "ph": "X", "ts": ends[index],
                "dur": round(ends[index + 1] - ends[index], 3), "pid": process, "tid": thread,
                "args": {"run": run, "kind": kernel.kind, "space": "x".join(map(str, kernel.space)) or "scalar",
                         "parts": parts[index][0], "gemm": parts[index][1], "lines": lines,
                         "ops": [{"type": op_type, "name": name, "line": where}
                                 for op_type, name, where in kernel.covers]}})
    names = {thread.native_id: thread.name for thread in threading.enumerate()}
    for worker in sorted(workers - {thread}):
        events.append({"name": "thread_name", "ph": "M", "pid": process, "tid": worker,
                       "args": {"name": names.get(worker, f"thread {worker}")}})
    with open(path, "w", encoding="utf-8") as handle:
        json.dump({"traceEvents": events, "displayTimeUnit": "ns"}, handle)


def _kernels_in_regions(steps: Sequence[Any]) -> set[int]:
    """The kernels that run inside a branch or a loop of the schedule ``steps``."""
    found: set[int] = set()

    def walk(region: Sequence[Any], inside: bool) -> None:
        for step in region:
            if isinstance(step, int):
                if inside:
                    found.add(step)
            elif isinstance(step, Branch):
                walk(step.taken, True)
                walk(step.otherwise, True)
            elif isinstance(step, Loop):
                walk(step.condition, True)
                walk(step.body, True)
    walk(steps, False)
    return found


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
        self._native = NativeStep(step.texts["llvm"], kernel_work(program), chained_kernels(program))
        self._profiled: NativeStep | None = None
        self._profiled_parts: list[tuple[int, bool]] = []   # per kernel: (parts, runs as a GEMM)
        self.last_profile: list[dict[str, Any]] | None = None
        self.closed = False   # set by Session.close
        self._profile_lock = threading.Lock()
        step.timings.update(self._native.timings)
        variable_of = {index: tensor for tensor, index in program.variables.items()}
        self._shared = {buffer.index: host_array(program, buffer, variable_arrays, variable_of)
                        for buffer in program.buffers if buffer.role in ("variable", "constant")}
        self._idle = [CallBuffers(program, self._shared)]  # taken by a run, given back after it
        self._feed_slots = [(tensor, index) for tensor, index in program.feeds.items()]
        # Per fetch: whether it is its whole buffer, in order (then a run returns a copy of the array).
        self._whole_fetches = [
            spec is not None and spec.offset == 0 and spec.shape == program.buffers[spec.buffer].shape
            and spec.strides == contiguous_strides(spec.shape) for spec in program.fetches]
        # has a status word to read
        self._checked = step.checked_kernels is not None or any(kernel.check for kernel in program.kernels)
        variable_buffers = set(program.variables.values())
        self._lock = variable_lock if variable_buffers else None
        self._exclusive = any(kernel.out.buffer in variable_buffers for kernel in program.kernels)
        # Variables a branch or loop assigns in place while the step runs (the others are assigned
        # at its end, after every check): a checked step keeps their values to put back if a check
        # stops it, so that a failed step has assigned nothing.
        inside = _kernels_in_regions(program.steps())
        self._assigned_in_regions = sorted({program.kernels[k].out.buffer for k in inside} & variable_buffers
                                           ) if self._checked else []

    @property
    def pieces(self) -> dict[str, int]:
        """How the step's machine code was had: how many pieces (kernels compiled on their own,
        and the entry point with the small kernels) were compiled, loaded from the on-disk
        compile cache, or reused from this process (``runtime.jit``)."""
        return dict(self._native.pieces)

    @property
    def native_calls(self) -> int:
        """How many times native code was entered (one per ``run``)."""
        return self._native.calls

    @property
    def program(self) -> Any:
        return self.step.program

    def profile(self, feeds: dict[Tensor, np.ndarray], runs: int = 10,
                trace: str | os.PathLike[str] | None = None) -> list[dict[str, Any]]:
        """Time each kernel: runs the step ``runs`` times with cycle counters between kernels.

        Returns one dict per kernel (name, kind, space, seconds: the median, covers: the ops it
        computes, parts: how many parts the worker pool splits it into, 1 when it runs whole). A
        kernel in a loop counts all its iterations (0 in a branch not taken); in the trace, such a
        step's kernels are laid end to end with those times. The
        step's effects happen ``runs`` times, as with ``run``; variables change. The result is also
        kept as ``last_profile`` (the HTML report shows it).

        With ``trace``, also writes a Chrome trace-event file there (open it in Perfetto's UI or
        chrome://tracing): per run, one ``step`` slice (the cycle-counter time of the native call,
        placed where the run started; its args hold the wall time around it, Python included) and
        inside it one slice per kernel, named by the kernel, with its ops and user lines as args.
        A kernel split across the worker pool also has one slice per part on the track of the
        thread that ran it (the calling thread's or a worker's), with ``parts`` in the kernel's
        args; a GEMM splits its rows across the pool inside its one call (``gemm`` is true) and
        shows as one slice, unless it is a batch of small products split by batch items (``parts``).

        >>> import json, os, tempfile
        >>> import compiler as cc
        >>> from runtime import Session
        >>> x = cc.placeholder("float32", shape=(None, 3), name="x")
        >>> y = cc.reduce_sum(cc.exp(x))
        >>> feeds = {x: np.ones((2, 3), "float32")}
        >>> path = os.path.join(tempfile.mkdtemp(), "step.json")
        >>> with Session() as sess:
        ...     times = sess.compile(y, feeds).profile(feeds, runs=3, trace=path)
        >>> [entry["name"] for entry in times] == [e["name"] for e in json.load(open(path))["traceEvents"]
        ...                                        if e.get("cat") == "kernel"][:len(times)]
        True
        """
        with self._profile_lock:  # the counters are the profiled module's own: one profile at a time
            if self.step.target != "cpu":
                raise ValueError(f"profile times a step's kernels on target='cpu'; on {self.step.target!r} the "
                                 "kernels run emulated thread by thread, so their times say nothing of a GPU's "
                                 "(profile on a GPU with NVIDIA's ncu or nsys)")
            samples = self._profile_samples(self.checked_feeds(feeds), runs)
            result = self._kernel_times(samples)
            if trace is not None:
                write_trace(trace, self.step.program.kernels, self._profiled_parts, samples)
            self.last_profile = result
            return result

    def _profile_samples(self, feeds: dict[Tensor, np.ndarray], runs: int) -> "ProfileSamples":
        from compiler.codegen.cpu import PROFILE_PARTS_SYMBOL, PROFILE_SYMBOL, build_module, plan_kernel, thread_count
        kernels = self.step.program.kernels
        if self._profiled is None:
            threads = thread_count()
            self._profiled_parts = [(plan.parts, plan.gemm) for plan in
                                    (plan_kernel(kernel, threads) for kernel in kernels)]
            self._profiled = NativeStep(str(build_module(self.step.program, profile=True)),
                                        kernel_work(self.step.program), chained_kernels(self.step.program))
        counters = (ctypes.c_uint64 * (len(kernels) + 1)).from_address(
            self._profiled.global_address(PROFILE_SYMBOL))
        part_count = sum(parts for parts, _ in self._profiled_parts if parts > 1)
        part_slots = (ctypes.c_uint64 * (3 * max(part_count, 1))).from_address(
            self._profiled.global_address(PROFILE_PARTS_SYMBOL))
        stamps: list[list[int]] = []
        walls: list[tuple[float, float]] = []
        parts: list[list[tuple[int, int, int]]] = []
        for run in range(max(1, runs)):
            if run == 1:
                # A pause between the first two runs makes the window that calibrates the
                # counter against the wall clock long beside the Python time around the calls.
                time.sleep(CALIBRATION_PAUSE)
            before = time.perf_counter()
            self.run_checked(feeds, native=self._profiled)
            walls.append((before, time.perf_counter()))
            counted = list(counters)
            if self.step.program.schedule is not None:
                # Per-kernel cycle sums (a kernel in a loop runs many times) laid end to end.
                counted = [counted[0]] + list(counted[0] + np.cumsum(counted[1:], dtype=np.int64))
                counted = [int(c) for c in counted]
            stamps.append(counted)
            slots = list(part_slots)
            parts.append([(slots[3 * i], slots[3 * i + 1], slots[3 * i + 2]) for i in range(part_count)])
        return ProfileSamples(stamps, walls, parts)

    def _kernel_times(self, samples: "ProfileSamples") -> list[dict[str, Any]]:
        result = []
        for index, kernel in enumerate(self.step.program.kernels):
            cycles = float(np.median([run[index + 1] - run[index] for run in samples.stamps]))
            result.append({"name": kernel.name, "kind": kernel.kind, "space": kernel.space,
                           "seconds": cycles / samples.rate, "covers": kernel.covers,
                           "parts": self._profiled_parts[index][0]})
        return result

    def run(self, feeds: dict[Tensor, np.ndarray], outputs: Sequence[np.ndarray | None] | None = None
            ) -> list[np.ndarray | None]:
        """One step of this compiled step: each fed array must have the shape it was compiled for
        (a FeedError otherwise, as the native code reads it by address). With ``outputs`` (one
        array or None per fetch), results are written into those arrays — straight from the
        kernels when the result has its own buffer — and returned."""
        if outputs is not None and len(outputs) != len(self.step.program.fetches):
            raise ValueError(f"outputs has {len(outputs)} entries for {len(self.step.program.fetches)} fetches; give "
                             f"one array (or None) per fetch")
        return self.run_checked(self.checked_feeds(feeds), outputs)

    def checked_feeds(self, feeds: dict[Tensor, Any]) -> dict[Tensor, np.ndarray]:
        """``feeds`` converted to the compiled step's dtypes and checked against its shapes."""
        return checked_feeds(self.step.program, feeds)

    def release_buffers(self) -> None:
        """Let go of the memory idle runs keep (temporaries, feed and output buffers); the next
        run allocates it again. A run in flight keeps its own."""
        self._idle.clear()

    def run_checked(self, feeds: dict[Tensor, np.ndarray], outputs: Sequence[np.ndarray | None] | None = None,
                    native: NativeStep | None = None) -> list[np.ndarray | None]:
        """``run`` for feeds already checked (Session.run checks them once per feed structure):
        ``native`` runs another build of the same step (the profiling one)."""
        if self.closed:   # it would run on variables the session has let go of
            raise RuntimeError("this step's Session is closed")
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
            # Every target is checked before any is put in the table: the buffers are reused by
            # the next run, which must not find a refused call's arrays there.
            for spec, target in zip(program.fetches, outputs):
                if spec is not None and target is not None:
                    check_output(target, spec.shape, program.buffers[spec.buffer].dtype)
            for spec, target in zip(program.fetches, outputs):
                if spec is None or target is None:
                    continue
                buffer = program.buffers[spec.buffer]
                # Written straight from the kernels, unless it overlaps a feed they read in place
                # (out= the fed array: a transpose would read what it has already written).
                if (buffer.role == "output" and spec.offset == 0 and spec.shape == buffer.shape
                        and target.dtype == buffer.dtype and target.flags.c_contiguous
                        and spec.buffer not in direct
                        and not any(np.may_share_memory(target, value) for value in feeds.values())):
                    current[spec.buffer] = target
                    table[spec.buffer] = buffers.address(spec.buffer, target)
                    direct.append(spec.buffer)
        kept = [(current[index], current[index].copy()) for index in self._assigned_in_regions]
        try:
            for tensor, index in self._feed_slots:
                value = feeds[tensor]
                if value.flags.c_contiguous and value.dtype == arrays[index].dtype:
                    current[index] = value           # read in place: no copy
                    table[index] = buffers.address(index, value)
                else:
                    np.copyto(arrays[index], value)
                    table[index] = buffers.own_addresses[index]
            native(table)
        finally:
            for index in direct:
                table[index] = buffers.own_addresses[index]
        if buffers.status[0] == STACK_GROWTH_FAILED:
            buffers.status[0] = 0
            raise MemoryError("out of memory growing a loop's stack of per-iteration values")
        if self._checked and buffers.status[0]:
            for array, value in kept:   # what a branch or loop assigned before the check stopped it
                np.copyto(array, value)
            position = int(buffers.status[0]) - 1
            failed = program.kernels[position]
            report = dict(zip(REPORT_FIELDS, (int(word) for word in buffers.status[1:])))
            buffers.status[:] = 0
            if report["kind"]:
                message = describe(failed, self.step.checked_kernels[position], report)
                raise (OutOfBoundsError if report["kind"] in MEMORY_KINDS else RaceError)(message)
            raise failure_error(failed.check)(f"{failed.check} (kernel {failed.name}); the step stopped before "
                                              "assigning any variable")
        if outputs is None:
            return [current[spec.buffer].copy() if whole else None if spec is None else read_fetch(current, spec)
                    for spec, whole in zip(program.fetches, self._whole_fetches)]
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

    def report(self, html: str | os.PathLike[str] | None = None) -> str:
        """A readable summary: timings, the buffer plan, and the kernels with the lines they cover.

        With ``html``, writes the report as one self-contained HTML page there instead (open it
        in any browser; it fetches nothing) and returns the path: the graph as a picture, the
        buffer plan over time, compile time per stage, per-kernel times from the last
        ``profile``, and each kernel with its ops, source lines, LLVM IR, assembly and PTX.

        >>> import os, tempfile
        >>> import compiler as cc
        >>> from runtime import Session
        >>> x = cc.placeholder("float32", shape=(None, 3), name="x")
        >>> feeds = {x: np.ones((2, 3), "float32")}
        >>> with Session() as sess:
        ...     exe = sess.compile(cc.exp(x), feeds)
        >>> print(exe.report().splitlines()[0])
        compiled step: 1 kernel, one native call per run
        >>> path = exe.report(html=os.path.join(tempfile.mkdtemp(), "step.html"))
        >>> open(path, encoding="utf-8").read().startswith("<!DOCTYPE html>")
        True
        """
        if html is None:
            return render_report(self.step)
        with open(html, "w", encoding="utf-8") as handle:
            handle.write(render_html_report(self.step, self.last_profile))
        return os.fspath(html)

"""Memory passes on the kernel program: update variables in place, and share temporaries.

``alias_assignments``: when an assignment only copies a temporary into its variable (``m = m_new``
where ``m_new`` is also read elsewhere), the kernel that computes the temporary writes straight
into the variable instead, and the copy disappears. Safe when that kernel reads the variable only
at the element it writes, and nothing after it reads the variable's old value.

``hoist_assignments``: each assignment runs right after the last kernel that needs the variable's
old value (not at the end of the step), so what it consumes can be freed early.

Neither moves a change of a variable before the last checked kernel (an assertion, a numerics
check): a failing check must find every variable untouched.

``reuse_inputs_in_place``: an elementwise kernel writes its output over an input temporary that
dies with it (one buffer instead of two).

``plan_buffers``: temporaries whose lifetimes (first write to last read, in kernel order) do not
overlap share memory: each dtype gets an arena and each temporary an offset in it (first fit).
Two buffers used by the same kernel never overlap, so kernels may still assume no aliasing.
"""
from __future__ import annotations

import dataclasses

from typing import Sequence

import numpy as np

from ..kernel_ir import Access, Branch, Kernel, Load, Loop, Program, Step, contiguous_strides, schedule_kernels

ALIGNMENT = 64


def _is_copy(kernel: Kernel) -> bool:
    return (isinstance(kernel.body, Load) and len(kernel.operands) == 1 and not kernel.reduce_axes
            and kernel.scatter is None
            and kernel.operands[0].strides == kernel.out.strides and kernel.operands[0].offset == 0
            and kernel.out.offset == 0 and kernel.out.strides == contiguous_strides(kernel.space))


def _rename(access: Access, old: int, new: int) -> Access:
    return dataclasses.replace(access, buffer=new) if access.buffer == old else access


def _uses(kernels: Sequence[Kernel]) -> tuple[dict[int, set[int]], dict[int, set[int]]]:
    """(buffer -> positions of the kernels that read it, buffer -> those that write it)."""
    readers: dict[int, set[int]] = {}
    writers: dict[int, set[int]] = {}
    for position, kernel in enumerate(kernels):
        writers.setdefault(kernel.out.buffer, set()).add(position)
        for access in kernel.operands:
            readers.setdefault(access.buffer, set()).add(position)
    return readers, writers


def _rename_in(kernels: list[Kernel], positions: set[int], old: int, new: int) -> None:
    for i in positions:
        kernel = kernels[i]
        kernels[i] = dataclasses.replace(kernel, out=_rename(kernel.out, old, new),
                                         operands=tuple(_rename(a, old, new) for a in kernel.operands))


def _last_check(kernels: Sequence[Kernel]) -> int:
    """The position of the last kernel whose output is checked (-1 when none is): a variable may
    change only after it, so that a failing check finds every variable untouched."""
    return max((i for i, kernel in enumerate(kernels) if kernel.check), default=-1)


def alias_assignments(program: Program) -> Program:
    kernels = list(program.kernels)
    first = program.first_assignment
    last_check = _last_check(kernels)
    # Who reads and writes each buffer, kept up to date: a scan of every kernel per assignment made
    # a deep model's compile quadratic (a 100-layer step with Adam: 8 s in this pass alone).
    readers, writers = _uses(kernels)
    removed: set[int] = set()
    for position in range(len(kernels) - 1, first - 1, -1):
        copy = kernels[position]
        if not _is_copy(copy):
            continue
        temp, variable = copy.operands[0].buffer, copy.out.buffer
        if program.buffers[temp].role != "temp" or program.buffers[temp].shape != program.buffers[variable].shape:
            continue
        producers = [i for i in writers.get(temp, ()) if i < first and i not in removed]
        if len(producers) != 1:
            continue
        producer_index = producers[0]
        if producer_index <= last_check:
            continue  # writing the variable there would change it before a check that may fail
        producer = kernels[producer_index]
        if producer.reduce_axes or producer.scatter is not None or producer.out.strides != contiguous_strides(
                producer.space):
            continue
        if any(a.buffer == variable and (a.strides != producer.out.strides or a.offset) for a in producer.operands):
            continue  # it reads the variable somewhere other than where it writes
        if any(i > producer_index and i != position and i not in removed
               for i in readers.get(variable, set()) | writers.get(variable, set())):
            continue  # the old value is still needed (or the variable is written again)
        _rename_in(kernels, readers.get(temp, set()) | writers.get(temp, set()), temp, variable)
        for uses in (readers, writers):
            uses.setdefault(variable, set()).update(uses.pop(temp, set()))
        program.fetches = [None if f is None else dataclasses.replace(f, buffer=variable) if f.buffer == temp else f
                           for f in program.fetches]
        removed.add(position)
    program.kernels = [kernel for i, kernel in enumerate(kernels) if i not in removed]
    return program


def hoist_assignments(program: Program) -> Program:
    """Run each assignment as early as it may: after the kernels that compute its inputs and after
    every other kernel that reads the variable's old value. Its temporaries (a weight's gradient)
    then die early instead of living to the end of the step."""
    kernels = list(program.kernels)
    assignments = kernels[program.first_assignment:]
    # Each kernel's place as a sort key: the others keep (i,); an assignment goes right after the
    # last kernel it must follow, (that kernel's key..., -n) for the n-th one placed, so that one
    # placed later after the same kernel comes first. The last writer and reader of each buffer
    # are kept by key, so placing every assignment is one pass (a scan per assignment made a step
    # with thousands of variables take tens of seconds).
    keyed: list[tuple[tuple, Kernel]] = [((i,), kernel) for i, kernel in enumerate(kernels[:program.first_assignment])]
    last_write: dict[int, tuple] = {}
    last_read: dict[int, tuple] = {}

    def note(key: tuple, kernel: Kernel) -> None:
        last_write[kernel.out.buffer] = max(last_write.get(kernel.out.buffer, key), key)
        for access in kernel.operands:
            last_read[access.buffer] = max(last_read.get(access.buffer, key), key)
    for key, kernel in keyed:
        note(key, kernel)
    last_check = _last_check(kernels[:program.first_assignment])
    for number, assignment in enumerate(assignments, start=1):
        target = assignment.out.buffer
        inputs = {a.buffer for a in assignment.operands} - {target}
        after = [last_write[b] for b in inputs if b in last_write] + ([(last_check,)] if last_check >= 0 else [])
        after += [k for k in (last_read.get(target), last_write.get(target)) if k is not None]
        key = (*max(after), -number) if after else (-1, -number)
        keyed.append((key, assignment))
        note(key, assignment)
    program.kernels = [kernel for _, kernel in sorted(keyed, key=lambda item: item[0])]
    program.first_assignment = len(program.kernels)  # no separate phase any more
    return program


def reuse_inputs_in_place(program: Program) -> Program:
    """An elementwise kernel whose input temporary dies with it writes its output over that input
    (same element, same dtype and size): the two become one buffer. E.g. the matmul result that
    bias-add + relu read, or an incoming gradient masked by relu."""
    kernels = list(program.kernels)
    readers, writers = _uses(kernels)
    fetched = {f.buffer for f in program.fetches if f is not None}
    for position in range(len(kernels)):
        kernel = kernels[position]   # as renamed by the reuses before it
        out = kernel.out
        if kernel.reduce_axes or kernel.scatter is not None or out.offset or out.strides != contiguous_strides(
                kernel.space):
            continue
        target = program.buffers[out.buffer]
        if target.role != "temp":
            continue
        for access in kernel.operands:
            source = program.buffers[access.buffer]
            if (source.role != "temp" or source.index in fetched or source.dtype != target.dtype
                    or source.nbytes != target.nbytes or access.strides != out.strides or access.offset):
                continue
            if any(a.buffer == source.index and (a.strides != out.strides or a.offset) for a in kernel.operands):
                continue
            if max(readers.get(source.index, set()) | writers.get(source.index, set())) > position:
                continue  # still needed after this kernel
            old, new = out.buffer, source.index
            for uses in (readers, writers):
                held = uses.setdefault(old, set())
                moved = {i for i in held if i >= position}
                _rename_in(kernels, moved, old, new)
                held -= moved
                uses.setdefault(new, set()).update(moved)
            program.fetches = [None if f is None else dataclasses.replace(f, buffer=new) if f.buffer == old else f
                               for f in program.fetches]
            # An earlier reuse may move a fetch into the buffer it keeps: that one is fetched now.
            fetched = {f.buffer for f in program.fetches if f is not None}
            break
    program.kernels = kernels
    return program


def plan_buffers(program: Program) -> Program:
    """Give each temporary an arena and offset so that temporaries not alive together share bytes."""
    temps = [b for b in program.buffers if b.role == "temp"]
    first_use: dict[int, int] = {}
    last_use: dict[int, int] = {}
    for position, kernel in enumerate(program.kernels):
        for access in (kernel.out, *kernel.operands):
            first_use.setdefault(access.buffer, position)
            last_use[access.buffer] = position
    # A loop runs its kernels many times: what they use stays alive for the whole loop.
    for first, last in _loop_spans(program.schedule or ()):
        for position in range(first, last + 1):
            kernel = program.kernels[position]
            for access in (kernel.out, *kernel.operands):
                first_use[access.buffer] = min(first_use[access.buffer], first)
                last_use[access.buffer] = max(last_use[access.buffer], last)
    end = len(program.kernels)
    for fetch in program.fetches:
        if fetch is not None:
            last_use[fetch.buffer] = end  # read after the step
    arenas: dict[str, _Arena] = {}
    sizes: dict[str, int] = {}
    placement: dict[int, tuple[str, int]] = {}
    for buffer in sorted(temps, key=lambda b: (-b.nbytes, b.index)):
        if buffer.index not in first_use:
            continue
        start, stop = first_use[buffer.index], last_use[buffer.index]
        size = (buffer.nbytes + ALIGNMENT - 1) // ALIGNMENT * ALIGNMENT
        arena = arenas.setdefault(buffer.dtype.name, _Arena())
        offset = arena.first_fit(start, stop, size)
        arena.add(start, stop, offset, size)
        sizes[buffer.dtype.name] = max(sizes.get(buffer.dtype.name, 0), offset + size)
        placement[buffer.index] = (buffer.dtype.name, offset)
    names = sorted(sizes)
    program.arenas = [sizes[name] for name in names]
    program.placement = {b: (names.index(name), offset) for b, (name, offset) in placement.items()}
    return program


class _Arena:
    """The buffers placed in one dtype's arena: their lifetimes (first and last kernel) and byte
    ranges, in numpy arrays, so that finding where a new one fits is a few array operations per
    buffer rather than a Python loop over every buffer placed (a step of 10 000 temporaries)."""

    def __init__(self) -> None:
        self._data = np.zeros((4, 64), np.int64)    # rows: start, stop, offset, size
        self._count = 0

    def add(self, start: int, stop: int, offset: int, size: int) -> None:
        if self._count == self._data.shape[1]:
            self._data = np.concatenate([self._data, np.zeros_like(self._data)], axis=1)
        self._data[:, self._count] = (start, stop, offset, size)
        self._count += 1

    def first_fit(self, start: int, stop: int, size: int) -> int:
        """The lowest offset where ``size`` bytes fit between the byte ranges of the buffers alive
        at the same time, taken in order of offset: before the first one whose range begins past
        it, else after them all."""
        begins, ends, offsets, sizes = self._data[:, :self._count]
        alive = ~((ends < start) | (stop < begins))
        lows, highs = offsets[alive], offsets[alive] + sizes[alive]
        if not lows.size:
            return 0
        order = np.lexsort((highs, lows))
        lows, highs = lows[order], highs[order]
        reached = np.maximum.accumulate(highs)          # the end of everything up to each range
        before = np.concatenate([[0], reached[:-1]])    # the candidate offset before each range
        fits = np.nonzero(before + size <= lows)[0]
        return int(before[fits[0]]) if fits.size else int(reached[-1])


def _loop_spans(steps: Sequence[Step]) -> list[tuple[int, int]]:
    """(first, last) kernel position of each outermost loop of a schedule."""
    spans = []
    for step in steps:
        if isinstance(step, Loop):
            positions = schedule_kernels([step])
            spans.append((min(positions), max(positions)))
        elif isinstance(step, Branch):
            spans += _loop_spans(step.taken) + _loop_spans(step.otherwise)
    return spans

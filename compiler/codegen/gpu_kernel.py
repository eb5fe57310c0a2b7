"""Scheduled GPU kernels in a small structured form, lowered twice: to NVPTX, and to host code that
runs the very same kernel block by block, thread by thread (``target="cuda-emulated"``).

A scheduled kernel is what every thread of a block executes: a sequence of statements

    Phase(emit)        straight-line (or looping) code of one thread, emitted by ``emit(state)``
    Barrier()          every thread of the block waits here (``__syncthreads``)
    WarpShuffleDown    each thread reads a register of the thread ``delta`` lanes up in its warp
    Repeat(trips, ...) a loop around statements whose trip count is the same for every thread of
                       a block (it may hold barriers)
    AsyncCopy(emit)    a phase whose global-to-shared copies (``ThreadState.copy_to_shared``) may
                       still be in flight when it ends, as one group per thread
    AsyncWait(pending) each thread waits until at most ``pending`` of its copy groups are in flight

with per-block shared arrays (``SharedArray``) and per-thread values that live across barriers
(``Register``). The NVPTX lowering is the obvious one: the thread and block indices are the special
registers, shared arrays live in shared memory, a barrier is ``barrier0``, a shuffle is
``shfl.sync.down``; on sm_80 and later an asynchronous copy is ``cp.async`` (zero-filling what lies
outside its source), its group committed at the end of the phase (``cp.async.commit_group``) and
awaited with ``cp.async.wait_group``, while older GPUs copy in place and do not wait. The host
lowering is the work-item loop of CPU OpenCL runtimes: a block is one call; each phase becomes a
loop over the block's threads, so a barrier is simply the end of a phase; a register becomes an
array with one slot per thread, so a shuffle is a loop that copies each thread's partner's slot;
shared arrays are the block's stack memory; an asynchronous copy is a plain one, done when its
phase is, so a wait has nothing left to do. Both run the same ``emit`` functions, so what CI tests
on the CPU is the schedule that runs on the GPU, index arithmetic included.
Threads of one phase run one after the other on the host, so a data race between barriers gives
the right answer here; with ``racecheck`` every load and store of a phase is checked against what
the block's other threads did to the same shared bytes since the last barrier (and the launch's
other threads to the same bytes of the kernel's output), and with
``memcheck`` against the bounds of its buffer or shared array (``sanitizer``): what
``compute-sanitizer`` finds on a GPU, found on the CPU.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Callable, Sequence, Union

import numpy as np
from llvmlite import ir

from . import sanitizer
from .common import I32, I64, PTR, declare_function, emit_loop, memory_type
from .mathlib.core import StringAttributes


@dataclass(frozen=True)
class Launch:
    """A one-dimensional launch: ``grid`` blocks of ``block`` threads."""

    block: int
    grid: int


@dataclass(frozen=True)
class SharedArray:
    """An array in the block's shared memory."""

    name: str
    element: ir.Type
    count: int


@dataclass(frozen=True)
class Register:
    """A per-thread value that lives across barriers."""

    name: str
    element: ir.Type


@dataclass
class ThreadState:
    """Where a phase emits its code: the builder, this thread's and block's index (i64), the
    kernel's buffer arguments, and the block's shared arrays and this thread's registers."""

    b: ir.IRBuilder
    thread: ir.Value
    block: ir.Value
    arguments: Sequence[ir.Value]
    repeat: list[ir.Value]                   # the trip index of each enclosing Repeat, outermost first
    shared_arrays: dict[str, ir.Value]       # name -> pointer to element 0
    registers: dict[str, ir.Value]           # name -> pointer to this thread's slot
    asynchronous: bool = False               # copies become ``cp.async`` (inside an AsyncCopy, sm_80+)

    def shared(self, name: str) -> ir.Value:
        return self.shared_arrays[name]

    def register(self, name: str) -> ir.Value:
        return self.registers[name]

    def copy_to_shared(self, destination: ir.Value, source: ir.Value, index: ir.Value, inside: ir.Value,
                       dtype: np.dtype) -> None:
        """Shared element ``destination`` becomes element ``index`` of the global buffer ``source``
        when ``inside`` holds, else 0 (the source is not read then). Inside an ``AsyncCopy`` on
        sm_80 and later it lands only after an ``AsyncWait`` (and a barrier, for other threads)."""
        b = self.b
        element = memory_type(dtype)
        if not self.asynchronous:
            b.store(ir.Constant(element, 0), destination)
            with b.if_then(inside):
                b.store(b.load(b.gep(source, [index], inbounds=True, source_etype=element), typ=element),
                        destination)
            return
        size = np.dtype(dtype).itemsize
        # Outside, no byte is read (the source size is 0: all zero-filled) but the address stays in the buffer.
        address = b.gep(source, [b.select(inside, index, ir.Constant(index.type, 0))], inbounds=True, source_etype=element)
        copy = declare_function(b.module, f"llvm.nvvm.cp.async.ca.shared.global.{size}.s", ir.VoidType(),
                                [_SHARED_POINTER, _GLOBAL_POINTER, I32])
        b.call(copy, [b.addrspacecast(destination, _SHARED_POINTER), b.addrspacecast(address, _GLOBAL_POINTER),
                      b.select(inside, ir.Constant(I32, size), ir.Constant(I32, 0))])


@dataclass(frozen=True)
class Phase:
    emit: Callable[[ThreadState], None]


@dataclass(frozen=True)
class Barrier:
    pass


@dataclass(frozen=True)
class WarpShuffleDown:
    """Register ``target`` of every thread becomes register ``source`` of the thread ``delta(state)``
    lanes further in its warp, or its own ``source`` when that lane is past the warp's end (CUDA's
    ``__shfl_down_sync`` over the whole warp). Every thread of the block must reach it."""

    source: str
    target: str
    delta: Callable[["ThreadState"], ir.Value]


@dataclass(frozen=True)
class Repeat:
    """``trips(builder, block)`` (i64, the same for every thread of the block) times ``body``."""

    trips: Callable[[ir.IRBuilder, ir.Value], ir.Value]
    body: tuple["Statement", ...]


@dataclass(frozen=True)
class AsyncCopy:
    """A phase that copies from global to shared memory with ``ThreadState.copy_to_shared``: on
    sm_80 and later the copies run in the background (``cp.async``) and this thread's copies of
    the phase form one group; an ``AsyncWait`` and then a ``Barrier`` make them visible to the
    block. Elsewhere (older GPUs, the host) they are plain copies, done when the phase ends."""

    emit: Callable[[ThreadState], None]


@dataclass(frozen=True)
class AsyncWait:
    """Each thread waits until at most ``pending`` of its ``AsyncCopy`` groups are still in flight
    (the newest ones): ``pending=1`` lets the copy just issued run on while the one before it is used."""

    pending: int


Statement = Union[Phase, Barrier, WarpShuffleDown, Repeat, AsyncCopy, AsyncWait]

WARP = 32
_SHARED_POINTER = ir.PointerType(addrspace=3)
_GLOBAL_POINTER = ir.PointerType(addrspace=1)


def warp_width(block: int) -> int:
    """The lanes of a warp that a block of ``block`` threads fills (a block smaller than a warp
    is one partial warp)."""
    return min(block, WARP)


@dataclass(frozen=True)
class ScheduledKernel:
    """One kernel as the GPU runs it: the function ``name(buffers...)`` and its launch."""

    name: str
    buffer_count: int
    launch: Launch
    statements: tuple[Statement, ...]
    shared: tuple[SharedArray, ...] = ()
    registers: tuple[Register, ...] = ()
    description: str = ""
    notes: dict[str, str] = field(default_factory=dict)


# -- NVPTX -----------------------------------------------------------------------------------------

_THREADS_WITHOUT_A_REGISTER_LIMIT = 65536 // 256   # 256 threads of 255 registers fit a block


def emit_ptx_kernel(module: ir.Module, scheduled: ScheduledKernel, async_copies: bool = False) -> ir.Function:
    """The kernel as a ``.entry`` with the special registers, shared memory and ``barrier0``;
    with ``async_copies`` (sm_80 and later) an ``AsyncCopy`` issues ``cp.async``."""
    function = ir.Function(module, ir.FunctionType(ir.VoidType(), [PTR] * scheduled.buffer_count),
                           name=scheduled.name)
    function.calling_convention = "ptx_kernel"
    # A block has 65536 registers (sm_80, sm_90) and a thread at most 255: past 256 threads, tell
    # ptxas the block size (".maxntid"), so that it keeps each thread's registers within the
    # block's share, spilling rather than making a kernel that cannot launch. (Not below: there
    # it changes nothing that has to change, and its register heuristics differ.)
    if scheduled.launch.block > _THREADS_WITHOUT_A_REGISTER_LIMIT:
        function.attributes = StringAttributes([f'"nvvm.maxntid"="{scheduled.launch.block}"'])
    for argument in function.args:
        argument.add_attribute("noalias")
        # Every buffer the runtime hands a kernel starts on a 256-byte (cuMemAlloc) or 64-byte
        # (a place in an arena) boundary: what lets LLVM merge neighbouring accesses into vectors.
        argument.attributes.align = 16
    b = ir.IRBuilder(function.append_basic_block("entry"))

    def special(name: str) -> ir.Value:
        register = declare_function(module, f"llvm.nvvm.read.ptx.sreg.{name}", I32, [])
        return b.zext(b.call(register, []), I64)

    shared = {}
    for array in scheduled.shared:
        array_type = ir.ArrayType(array.element, array.count)
        variable = ir.GlobalVariable(module, array_type, name=f"{scheduled.name}.{array.name}", addrspace=3)
        variable.linkage = "internal"
        variable.initializer = ir.Constant(array_type, ir.Undefined)
        variable.align = 16
        shared[array.name] = b.addrspacecast(variable, PTR)
    registers = {register.name: b.alloca(register.element, name=register.name) for register in scheduled.registers}
    register_types = {register.name: register.element for register in scheduled.registers}
    state = ThreadState(b, special("tid.x"), special("ctaid.x"), function.args, [], shared, registers)
    barrier = declare_function(module, "llvm.nvvm.barrier0", ir.VoidType(), [])

    def lower(statements: Sequence[Statement]) -> None:
        for statement in statements:
            if isinstance(statement, Phase):
                statement.emit(state)
            elif isinstance(statement, Barrier):
                state.b.call(barrier, [])
            elif isinstance(statement, AsyncCopy):
                state.asynchronous = async_copies
                statement.emit(state)
                state.asynchronous = False
                if async_copies:
                    state.b.call(declare_function(module, "llvm.nvvm.cp.async.commit.group", ir.VoidType(), []), [])
            elif isinstance(statement, AsyncWait):
                if async_copies:
                    wait = declare_function(module, "llvm.nvvm.cp.async.wait.group", ir.VoidType(), [I32])
                    state.b.call(wait, [ir.Constant(I32, statement.pending)])
            elif isinstance(statement, WarpShuffleDown):
                element = register_types[statement.source]
                value = state.b.load(state.register(statement.source), typ=element)
                shuffled = _shuffle_down(state.b, value, state.b.trunc(statement.delta(state), I32),
                                         warp_width(scheduled.launch.block))
                state.b.store(shuffled, state.register(statement.target))
            else:
                def trip(b: ir.IRBuilder, index: ir.Value, body: tuple[Statement, ...] = statement.body) -> None:
                    state.repeat.append(index)
                    lower(body)
                    state.repeat.pop()
                emit_loop(state.b, statement.trips(state.b, state.block), trip, name="repeat")

    lower(scheduled.statements)
    b.ret_void()
    return function


def _shuffle_down(b: ir.IRBuilder, value: ir.Value, delta: ir.Value, width: int) -> ir.Value:
    """``shfl.sync.down`` of a float, double or integer over the first ``width`` lanes; 64-bit
    values go as two 32-bit halves."""
    module = b.module
    mask = ir.Constant(I32, (1 << width) - 1 if width < 32 else 0xFFFFFFFF)
    segment = ir.Constant(I32, ((32 - width) << 8) | 0x1F)  # the clamp operand: lanes per segment
    if value.type == ir.FloatType():
        shuffle = declare_function(module, "llvm.nvvm.shfl.sync.down.f32", value.type, [I32, value.type, I32, I32])
        return b.call(shuffle, [mask, value, delta, segment])
    shuffle = declare_function(module, "llvm.nvvm.shfl.sync.down.i32", I32, [I32, I32, I32, I32])
    if value.type == I32:
        return b.call(shuffle, [mask, value, delta, segment])
    bits = value if value.type == I64 else b.bitcast(value, I64)
    low = b.call(shuffle, [mask, b.trunc(bits, I32), delta, segment])
    high = b.call(shuffle, [mask, b.trunc(b.lshr(bits, ir.Constant(I64, 32)), I32), delta, segment])
    joined = b.or_(b.zext(low, I64), b.shl(b.zext(high, I64), ir.Constant(I64, 32)))
    return joined if value.type == I64 else b.bitcast(joined, value.type)


# -- host emulation --------------------------------------------------------------------------------

def emit_emulated_kernel(module: ir.Module, scheduled: ScheduledKernel, racecheck: bool = False,
                         memcheck: bool = False, buffer_bytes: Sequence[int | None] = ()) -> ir.Function:
    """``name(buffers...)`` for the host: runs every block of the launch, each phase of a block
    as a loop over its threads. With ``racecheck`` or ``memcheck`` it is ``name(buffers...,
    report)`` and checks every access of its phases (``sanitizer``; ``buffer_bytes``: each buffer's
    size, None where it is not known), writing the first error found to the int64 words at ``report``."""
    checked = racecheck or memcheck
    extra = [PTR] if checked else []
    # racecheck over the launch: a shadow of the output, made by the kernel, passed to each block
    output_bytes = buffer_bytes[0] if racecheck and buffer_bytes and buffer_bytes[0] else None
    watched = [PTR] if output_bytes is not None else []
    block_function = ir.Function(module, ir.FunctionType(ir.VoidType(),
                                                         [PTR] * scheduled.buffer_count + extra + watched + [I64]),
                                 name=f"{scheduled.name}.block")
    block_function.linkage = "internal"
    *arguments, block_index = block_function.args
    launch_shadow = arguments.pop() if watched else None
    report = arguments.pop() if checked else None
    b = ir.IRBuilder(block_function.append_basic_block("entry"))
    threads = scheduled.launch.block
    shared = {}
    for array in scheduled.shared:
        shared[array.name] = b.alloca(array.element, size=array.count, name=array.name)
        shared[array.name].align = 16   # as on the GPU: a phase may read it 16 bytes at a time
    register_arrays = {register.name: (b.alloca(register.element, size=threads, name=register.name), register.element)
                       for register in scheduled.registers}
    repeat: list[ir.Value] = []
    checker = None
    if checked:
        arrays = [(shared[array.name], array.count * sanitizer.byte_size(array.element)) for array in scheduled.shared]
        sizes = list(buffer_bytes) + [None] * (len(arguments) - len(buffer_bytes))
        checker = sanitizer.start_block(b, racecheck, memcheck, arrays, list(zip(arguments, sizes)), report,
                                        block_index, launch_shadow, threads)

    def lower(statements: Sequence[Statement]) -> None:
        for statement in statements:
            if isinstance(statement, (Phase, AsyncCopy)):   # a copy is done in place: nothing to wait for
                def one_thread(b: ir.IRBuilder, thread: ir.Value, phase: Phase | AsyncCopy = statement) -> None:
                    registers = {name: b.gep(array, [thread], inbounds=True, source_etype=element)
                                 for name, (array, element) in register_arrays.items()}
                    if checker is None:
                        phase.emit(ThreadState(b, thread, block_index, arguments, repeat, shared, registers))
                        return
                    checker.set(b, sanitizer.THREAD, b.trunc(b.add(thread, ir.Constant(I64, 1)), I32))
                    checking = sanitizer.CheckingBuilder(b.block, checker)
                    phase.emit(ThreadState(checking, thread, block_index, arguments, repeat, shared, registers))
                    b.position_at_end(checking.block)
                if checker is not None and isinstance(statement, AsyncCopy):
                    checker.set(b, sanitizer.IN_ASYNC, 1)
                emit_loop(b, threads, one_thread, name="thread")
                if checker is not None and isinstance(statement, AsyncCopy):
                    checker.set(b, sanitizer.IN_ASYNC, 0)
                    checker.commit(b)
            elif checker is not None and isinstance(statement, Barrier):
                checker.barrier(b)
            elif checker is not None and isinstance(statement, AsyncWait):
                checker.wait(b, statement.pending)
            elif isinstance(statement, WarpShuffleDown):
                assert statement.source != statement.target, "a shuffle reads and writes different registers"
                source, element = register_arrays[statement.source]
                target, _ = register_arrays[statement.target]
                width = warp_width(threads)

                def one_lane(b: ir.IRBuilder, thread: ir.Value, shuffle: WarpShuffleDown = statement) -> None:
                    registers = {name: b.gep(array, [thread], inbounds=True, source_etype=kind)
                                 for name, (array, kind) in register_arrays.items()}
                    delta = shuffle.delta(ThreadState(b, thread, block_index, arguments, repeat, shared, registers))
                    inside = b.icmp_unsigned("<", b.add(b.urem(thread, ir.Constant(I64, width)), delta),
                                             ir.Constant(I64, width))
                    partner = b.select(inside, b.add(thread, delta), thread)
                    value = b.load(b.gep(source, [partner], inbounds=True, source_etype=element), typ=element)
                    b.store(value, b.gep(target, [thread], inbounds=True, source_etype=element))
                emit_loop(b, threads, one_lane, name="lane")
            elif isinstance(statement, Repeat):
                def trip(b: ir.IRBuilder, index: ir.Value, body: tuple[Statement, ...] = statement.body) -> None:
                    repeat.append(index)
                    lower(body)
                    repeat.pop()
                emit_loop(b, statement.trips(b, block_index), trip, name="repeat")
            # a Barrier is the end of a phase: every thread has run it before the next one starts;
            # an AsyncWait has nothing to wait for

    lower(scheduled.statements)
    if checker is not None:
        sanitizer.finish_block(b, checker)
    b.ret_void()

    function = ir.Function(module, ir.FunctionType(ir.VoidType(), [PTR] * (scheduled.buffer_count + len(extra))),
                           name=scheduled.name)
    function.linkage = "internal"
    b = ir.IRBuilder(function.append_basic_block("entry"))
    shadow = sanitizer.new_shadow(b, output_bytes, 8) if output_bytes is not None else None
    emit_loop(b, scheduled.launch.grid,
              lambda b, block: b.call(block_function, list(function.args) + ([shadow] if shadow is not None else []) + [block]),
              name="block")
    if shadow is not None:
        sanitizer.free_shadow(b, shadow)
    b.ret_void()
    return function

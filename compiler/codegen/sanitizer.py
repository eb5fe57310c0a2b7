"""Race and memory checks of emulated GPU kernels: ``compute-sanitizer``'s racecheck and memcheck,
on the CPU (``Session(target="cuda-emulated", racecheck=True, memcheck=True)``).

The host emulation (``gpu_kernel.emit_emulated_kernel``) runs the threads of a phase one after the
other, so a kernel that reads shared memory another thread writes without a barrier between them
gets the right answer on the CPU and a wrong one, now and then, on a GPU; and a read past the end
of a buffer whose value a ``select`` then drops is harmless in a CPU arena but may fault on a GPU.
With checks on, every load and store a phase makes goes through a check first (``CheckingBuilder``).
Where its address comes from is known when the kernel is built: a shared array, a per-thread
register, a buffer argument of the kernel, or (rarely) a pointer computed at run time.

racecheck, on shared arrays (and on run-time pointers that fall in one), compares each access with
what the block's threads did to the same bytes since the last barrier:

- a read of a byte that another thread wrote since the last barrier (read after write);
- a write of a byte that another thread wrote, or read, since the last barrier;
- a read of a byte that an asynchronous copy (``AsyncCopy``) wrote while the copy may still be in
  flight: its thread has not waited for it (``AsyncWait``), or, for another thread, no barrier
  has come after that wait;
- a read of a byte that no thread of the block wrote (uninitialised shared memory).

An interval between two barriers is an *epoch*; each byte of shared memory has a shadow of five
32-bit words: the epoch and thread (+1) of its last write and that write's copy group (+1, 0 for a
plain store), and the epoch and thread (+1, or ``MANY``) of its reads.

racecheck also watches the kernel's output buffer across the whole launch, where no barrier
orders threads of different blocks: a store to a byte of it that another thread of the
launch stored to, or a load of one, is a race (two tiles or two grid-stride trips that overlap, a
kernel reading what another block writes). Atomic adds (scatter) are not loads or stores here.
Each word's shadow is the (block, thread + 1) of its last store.

memcheck checks that every access to a buffer argument or a shared array lies inside it; an access
outside is reported and does not happen (a read gives what a scratch slot holds), so a wild
index cannot take the Python process down.

The first error found is written to the step's report words (``REPORT_FIELDS``) and the step stops
after that kernel; the runtime turns it into ``RaceError`` or ``KernelMemoryError``.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Sequence

from llvmlite import ir

from .common import I32, I64, PTR, declare_function, emit_loop

I1 = ir.IntType(1)
SHADOW_WORDS = 5                       # per byte: write epoch, writer, write group, read epoch, reader
MANY = 0xFFFFFFFF                      # reader: more than one thread
# The block's own words: the epoch, the running thread (+1), whether an asynchronous copy runs,
# copy groups committed, groups waited for, groups waited for before the last barrier.
EPOCH, THREAD, IN_ASYNC, COMMITTED, WAITED, VISIBLE = range(6)
STATE_WORDS = 6
# The report (int64 words after the step's status word): what the runtime reads back. ``place``
# is the shared array's index for races and shared-memory accesses, the kernel's buffer argument's
# for buffers.
REPORT_FIELDS = ("kind", "place", "byte", "thread", "other", "block", "epoch")
RACE_KINDS = {1: "read after write", 2: "write after write", 3: "write after read",
              4: "read of an asynchronous copy still in flight", 5: "read of uninitialised shared memory",
              8: "write after write", 9: "read after write"}
GLOBAL_KINDS = (8, 9)                  # in the output buffer, between threads of one launch
MEMORY_KINDS = {6: "out-of-bounds read", 7: "out-of-bounds write"}
SHARED_BIT = 1 << 40                   # ``place`` of an out-of-bounds shared-memory access: index | SHARED_BIT
SCRATCH_BYTES = 64                     # where an out-of-bounds access goes instead (the widest vector: 64 bytes)
CHECK_BYTES_SYMBOL = "graphgrad_race_check_bytes"
CHECK_WORDS_SYMBOL = "graphgrad_race_check_output"
BOUNDS_SYMBOL = "graphgrad_bounds_check"


def byte_size(type_: ir.Type) -> int:
    """Bytes a load or store of ``type_`` touches."""
    if isinstance(type_, (ir.VectorType, ir.ArrayType)):
        return type_.count * byte_size(type_.element)
    if isinstance(type_, ir.IntType):
        return (type_.width + 7) // 8
    if isinstance(type_, ir.DoubleType):
        return 8
    if isinstance(type_, ir.FloatType):
        return 4
    if isinstance(type_, ir.HalfType):
        return 2
    if isinstance(type_, ir.PointerType):
        return 8
    raise TypeError(f"no size for {type_}")


def _root(pointer: ir.Value) -> ir.Value:
    """The value ``pointer`` is an offset or a cast of (through GEPs and casts)."""
    while True:
        if isinstance(pointer, ir.GEPInstr):
            pointer = pointer.pointer
        elif isinstance(pointer, ir.CastInstr) and pointer.opname in ("bitcast", "addrspacecast"):
            pointer = pointer.operands[0]
        else:
            return pointer


@dataclass
class BlockChecker:
    """The checks of one emulated block function. ``shared``: each shared array's alloca and bytes;
    ``buffers``: each buffer argument and its bytes (None: not known, a stack that grows)."""

    racecheck: bool
    memcheck: bool
    state: ir.Value                          # i32[STATE_WORDS]
    shadow: ir.Value | None                  # i32[SHADOW_WORDS * shared bytes], zeroed (racecheck)
    scratch: ir.Value                        # SCRATCH_BYTES where an out-of-bounds access goes
    report: ir.Value                         # i64[len(REPORT_FIELDS)]
    block: ir.Value                          # the block's index (i64)
    shared: list[tuple[ir.Value, int]]
    buffers: list[tuple[ir.Value, int | None]]
    find_shared: ir.Function | None = None   # run-time pointers: which shared array, if any
    output_shadow: ir.Value | None = None    # int64 per byte of buffer 0 over the launch (racecheck)
    threads: int = 1                         # the launch's threads per block
    _shadow_offsets: list[int] = field(default_factory=list)

    def word(self, b: ir.IRBuilder, index: int) -> ir.Value:
        return b.gep(self.state, [ir.Constant(I64, index)], inbounds=True, source_etype=I32)

    def set(self, b: ir.IRBuilder, index: int, value: ir.Value | int) -> None:
        ir.IRBuilder.store(b, ir.Constant(I32, value) if isinstance(value, int) else value, self.word(b, index))

    def get(self, b: ir.IRBuilder, index: int) -> ir.Value:
        return ir.IRBuilder.load(b, self.word(b, index), typ=I32)

    def barrier(self, b: ir.IRBuilder) -> None:
        """A barrier ends the epoch; the copies waited for so far become visible to every thread."""
        self.set(b, EPOCH, b.add(self.get(b, EPOCH), ir.Constant(I32, 1)))
        self.set(b, VISIBLE, self.get(b, WAITED))

    def commit(self, b: ir.IRBuilder) -> None:
        self.set(b, COMMITTED, b.add(self.get(b, COMMITTED), ir.Constant(I32, 1)))

    def wait(self, b: ir.IRBuilder, pending: int) -> None:
        """At most ``pending`` of the newest groups may still be in flight: the others have landed."""
        landed = b.sub(self.get(b, COMMITTED), ir.Constant(I32, pending))
        waited = self.get(b, WAITED)
        self.set(b, WAITED, b.select(b.icmp_signed(">", landed, waited), landed, waited))

    def access(self, b: ir.IRBuilder, address: ir.Value, type_: ir.Type, is_write: bool) -> ir.Value:
        """Check one access; returns the address to use (the scratch slot for an out-of-bounds one)."""
        size = byte_size(type_)
        root = _root(address)
        write = ir.Constant(I1, int(is_write))
        for index, (array, array_bytes) in enumerate(self.shared):
            if root is array:
                offset = b.sub(b.ptrtoint(address, I64), b.ptrtoint(array, I64))
                if self.racecheck:
                    self._race(b, index, offset, size, write)
                if self.memcheck:
                    return self._bounded(b, address, offset, size, array_bytes, index | SHARED_BIT, write)
                return address
        for index, (argument, buffer_bytes) in enumerate(self.buffers):
            if root is argument:
                if index == 0 and self.output_shadow is not None and buffer_bytes is not None:
                    offset = b.sub(b.ptrtoint(address, I64), b.ptrtoint(argument, I64))
                    b.call(_emit_check_output(b.module), [self.state, self.output_shadow, self.report, self.block,
                                                          ir.Constant(I64, self.threads), offset,
                                                          ir.Constant(I64, size), ir.Constant(I64, buffer_bytes),
                                                          write])
                if self.memcheck and buffer_bytes is not None:
                    offset = b.sub(b.ptrtoint(address, I64), b.ptrtoint(argument, I64))
                    return self._bounded(b, address, offset, size, buffer_bytes, index, write)
                return address
        if isinstance(root, ir.AllocaInstr):      # a register or another per-thread slot
            return address
        if self.racecheck and self.shared:        # computed at run time: it may point into shared memory
            b.call(self.find_shared, [self.state, self.shadow, self.report, self.block, address,
                                      ir.Constant(I64, size), write, *[array for array, _ in self.shared]])
        return address

    def _race(self, b: ir.IRBuilder, index: int, offset: ir.Value, size: int, write: ir.Value) -> None:
        array_bytes = self.shared[index][1]
        part = b.gep(self.shadow, [ir.Constant(I64, self._shadow_offsets[index] * SHADOW_WORDS)],
                     inbounds=True, source_etype=I32)
        # Only the bytes inside the array (memcheck reports the rest).
        inside = b.icmp_unsigned("<", offset, ir.Constant(I64, array_bytes))
        last = b.sub(ir.Constant(I64, array_bytes), offset)
        count = b.select(inside, b.select(b.icmp_unsigned("<", ir.Constant(I64, size), last),
                                          ir.Constant(I64, size), last), ir.Constant(I64, 0))
        b.call(_emit_check_bytes(b.module), [self.state, part, self.report, self.block, ir.Constant(I64, index),
                                             offset, count, write])

    def _bounded(self, b: ir.IRBuilder, address: ir.Value, offset: ir.Value, size: int, extent: int,
                 place: int, write: ir.Value) -> ir.Value:
        inside = b.call(_emit_bounds_check(b.module), [self.state, self.report, self.block, ir.Constant(I64, place),
                                                       offset, ir.Constant(I64, size), ir.Constant(I64, extent), write])
        scratch = self.scratch if self.scratch.type == address.type else b.bitcast(self.scratch, address.type)
        return b.select(inside, address, scratch)


class CheckingBuilder(ir.IRBuilder):
    """An IRBuilder whose loads and stores are checked first (a phase's code is emitted with it)."""

    def __init__(self, block: ir.Block, checker: BlockChecker) -> None:
        super().__init__(block)
        self.checker = checker

    def load(self, ptr: ir.Value, name: str = "", align: int | None = None, typ: ir.Type | None = None) -> ir.Value:
        type_ = typ if typ is not None else ptr.type.pointee
        return super().load(self.checker.access(self, ptr, type_, False), name, align, type_)

    def store(self, value: ir.Value, ptr: ir.Value, align: int | None = None) -> ir.Value:
        return super().store(value, self.checker.access(self, ptr, value.type, True), align)


def start_block(b: ir.IRBuilder, racecheck: bool, memcheck: bool, shared: Sequence[tuple[ir.Value, int]],
                buffers: Sequence[tuple[ir.Value, int | None]], report: ir.Value, block: ir.Value,
                output_shadow: ir.Value | None = None, threads: int = 1) -> BlockChecker:
    """At the start of an emulated block: its checker over the ``shared`` arrays (alloca, bytes)
    and the ``buffers`` (argument, bytes or None), with the launch's ``output_shadow`` (``new_shadow``)
    when the output is watched; ``finish_block`` at its end frees the shared arrays' shadow."""
    module = b.module
    state = b.alloca(I32, size=STATE_WORDS, name="check.state")
    for index in range(STATE_WORDS):
        b.store(ir.Constant(I32, 1 if index == EPOCH else 0),
                b.gep(state, [ir.Constant(I64, index)], inbounds=True, source_etype=I32))
    scratch = b.alloca(ir.IntType(8), size=SCRATCH_BYTES, name="check.scratch")
    scratch.align = 64
    shadow = None
    offsets, total = [], 0
    for _, size in shared:
        offsets.append(total)
        total += size
    if racecheck:
        shadow = new_shadow(b, total, 4 * SHADOW_WORDS)
    checker = BlockChecker(racecheck, memcheck, state, shadow, scratch, report, block, list(shared), list(buffers),
                           output_shadow=output_shadow, threads=threads, _shadow_offsets=offsets)
    if racecheck and shared:
        checker.find_shared = _emit_find_shared(module, [size for _, size in shared], offsets)
    return checker


def finish_block(b: ir.IRBuilder, checker: BlockChecker) -> None:
    if checker.shadow is not None:
        free_shadow(b, checker.shadow)


def new_shadow(b: ir.IRBuilder, bytes_watched: int, shadow_bytes: int) -> ir.Value:
    """A zeroed shadow of ``shadow_bytes`` per watched byte (``calloc``; ``free_shadow`` it): the
    shared arrays' (five int32 per byte) or, for a launch, the output's (one int64 per byte)."""
    calloc = declare_function(b.module, "calloc", PTR, [I64, I64])
    return b.call(calloc, [ir.Constant(I64, max(bytes_watched, 1)), ir.Constant(I64, shadow_bytes)])


def free_shadow(b: ir.IRBuilder, shadow: ir.Value) -> None:
    b.call(declare_function(b.module, "free", ir.VoidType(), [PTR]), [shadow])


def _unique_name(module: ir.Module, stem: str) -> str:
    name, number = stem, 0
    while name in module.globals:
        number += 1
        name = f"{stem}.{number}"
    return name


def _emit_find_shared(module: ir.Module, sizes: Sequence[int], offsets: Sequence[int]) -> ir.Function:
    """``find(state, shadow, report, block, address, size, is_write, arrays...)``: race-check the
    bytes of an access whose address was computed at run time, in whichever shared array holds it."""
    function = ir.Function(module, ir.FunctionType(ir.VoidType(), [PTR, PTR, PTR, I64, PTR, I64, I1] + [PTR] * len(sizes)),
                           name=_unique_name(module, "graphgrad_race_find_shared"))
    function.linkage = "internal"
    function.attributes.add("noinline")   # one call per access keeps checked kernels quick to compile
    state, shadow, report, block, address, size, is_write, *arrays = function.args
    b = ir.IRBuilder(function.append_basic_block("entry"))
    at = b.ptrtoint(address, I64)
    for index, (array, array_size) in enumerate(zip(arrays, sizes)):
        offset = b.sub(at, b.ptrtoint(array, I64))
        with b.if_then(b.icmp_unsigned("<", offset, ir.Constant(I64, array_size))):
            part = b.gep(shadow, [ir.Constant(I64, offsets[index] * SHADOW_WORDS)], inbounds=True, source_etype=I32)
            last = b.sub(ir.Constant(I64, array_size), offset)
            count = b.select(b.icmp_unsigned("<", size, last), size, last)
            b.call(_emit_check_bytes(module), [state, part, report, block, ir.Constant(I64, index), offset, count,
                                               is_write])
    b.ret_void()
    return function


def _report(b: ir.IRBuilder, report: ir.Value, values: dict[str, ir.Value]) -> None:
    """Write ``values`` (every report field) unless an earlier error is already there."""
    with b.if_then(b.icmp_unsigned("==", b.load(report, typ=I64), ir.Constant(I64, 0))):
        for position, name in enumerate(REPORT_FIELDS):
            b.store(values[name], b.gep(report, [ir.Constant(I64, position)], inbounds=True, source_etype=I64))


def _emit_bounds_check(module: ir.Module) -> ir.Function:
    """``i1 inside(state, report, block, place, offset, size, extent, is_write)``: whether bytes
    ``offset .. offset + size`` lie in ``0 .. extent``; an error report when they do not."""
    existing = module.globals.get(BOUNDS_SYMBOL)
    if existing is not None:
        return existing
    function = ir.Function(module, ir.FunctionType(I1, [PTR, PTR, I64, I64, I64, I64, I64, I1]), name=BOUNDS_SYMBOL)
    function.linkage = "internal"
    function.attributes.add("noinline")
    state, report, block, place, offset, size, extent, is_write = function.args
    b = ir.IRBuilder(function.append_basic_block("entry"))
    inside = b.and_(b.icmp_signed(">=", offset, ir.Constant(I64, 0)),
                    b.icmp_signed("<=", b.add(offset, size), extent))
    with b.if_then(b.not_(inside)):
        thread = b.load(b.gep(state, [ir.Constant(I64, THREAD)], inbounds=True, source_etype=I32), typ=I32)
        _report(b, report, {"kind": b.select(is_write, ir.Constant(I64, 7), ir.Constant(I64, 6)), "place": place,
                            "byte": offset, "thread": b.sub(b.zext(thread, I64), ir.Constant(I64, 1)),
                            "other": size, "block": block, "epoch": extent})
    b.ret(inside)
    return function


def _emit_check_output(module: ir.Module) -> ir.Function:
    """``check(state, shadow, report, block, threads, offset, size, extent, is_write)``: the bytes
    ``offset .. offset + size`` of the output (those inside ``0 .. extent``) against the thread of
    the launch that last stored to each. A shadow word is ``epoch << 32 | block * threads + thread
    + 1`` (0: no store yet); a store by another thread is a race unless it was in this block before
    a barrier this thread has passed. A store makes this thread the last one."""
    existing = module.globals.get(CHECK_WORDS_SYMBOL)
    if existing is not None:
        return existing
    function = ir.Function(module, ir.FunctionType(ir.VoidType(), [PTR, PTR, PTR, I64, I64, I64, I64, I64, I1]),
                           name=CHECK_WORDS_SYMBOL)
    function.linkage = "internal"
    function.attributes.add("noinline")
    state, shadow, report, block, threads, offset, size, extent, is_write = function.args
    b = ir.IRBuilder(function.append_basic_block("entry"))

    def state_word(index: int) -> ir.Value:
        return b.zext(b.load(b.gep(state, [ir.Constant(I64, index)], inbounds=True, source_etype=I32), typ=I32), I64)
    thread, epoch = state_word(THREAD), state_word(EPOCH)        # thread is already +1
    identity = b.add(b.mul(block, threads), thread)                # never 0
    me = b.or_(b.shl(epoch, ir.Constant(I64, 32)), identity)
    first = b.select(b.icmp_signed("<", offset, ir.Constant(I64, 0)), ir.Constant(I64, 0), offset)
    end = b.add(offset, size)
    end = b.select(b.icmp_signed(">", end, extent), extent, end)
    count = b.sub(end, first)
    count = b.select(b.icmp_signed("<", count, ir.Constant(I64, 0)), ir.Constant(I64, 0), count)
    low = ir.Constant(I64, 0xFFFFFFFF)

    def one_byte(b: ir.IRBuilder, index: ir.Value) -> None:
        byte = b.add(first, index)
        slot = b.gep(shadow, [byte], inbounds=True, source_etype=I64)
        writer = b.load(slot, typ=I64)
        writer_identity = b.and_(writer, low)
        linear = b.sub(writer_identity, ir.Constant(I64, 1))
        writer_block = b.udiv(linear, threads)
        ordered = b.and_(b.icmp_unsigned("==", writer_block, block),
                         b.icmp_unsigned("<", b.lshr(writer, ir.Constant(I64, 32)), epoch))
        other = b.and_(b.icmp_unsigned("!=", writer_identity, ir.Constant(I64, 0)),
                       b.icmp_unsigned("!=", writer_identity, identity))
        with b.if_then(b.and_(other, b.not_(ordered))):
            _report(b, report, {"kind": b.select(is_write, ir.Constant(I64, 8), ir.Constant(I64, 9)),
                                "place": ir.Constant(I64, 0), "byte": byte,
                                "thread": b.sub(thread, ir.Constant(I64, 1)),
                                "other": b.urem(linear, threads), "block": block, "epoch": writer_block})
        with b.if_then(is_write):
            b.store(me, slot)

    emit_loop(b, count, one_byte, name="byte")
    b.ret_void()
    return function


def _emit_check_bytes(module: ir.Module) -> ir.Function:
    """``check_bytes(state, shadow, report, block, array, offset, count, is_write)``: the race rules
    of the module's docstring, byte by byte; the first race found goes into the report."""
    existing = module.globals.get(CHECK_BYTES_SYMBOL)
    if existing is not None:
        return existing
    function = ir.Function(module, ir.FunctionType(ir.VoidType(), [PTR, PTR, PTR, I64, I64, I64, I64, I1]),
                           name=CHECK_BYTES_SYMBOL)
    function.linkage = "internal"
    function.attributes.add("noinline")
    state, shadow, report, block, array, offset, count, is_write = function.args
    b = ir.IRBuilder(function.append_basic_block("entry"))

    def word(pointer: ir.Value, index: ir.Value | int) -> ir.Value:
        index = ir.Constant(I64, index) if isinstance(index, int) else index
        return b.gep(pointer, [index], inbounds=True, source_etype=I32)

    def state_word(index: int) -> ir.Value:
        return b.load(word(state, index), typ=I32)

    epoch, thread, in_async = state_word(EPOCH), state_word(THREAD), state_word(IN_ASYNC)
    committed, waited, visible = state_word(COMMITTED), state_word(WAITED), state_word(VISIBLE)
    zero32 = ir.Constant(I32, 0)

    def one_byte(b: ir.IRBuilder, index: ir.Value) -> None:
        byte = b.add(offset, index)
        entry = b.mul(byte, ir.Constant(I64, SHADOW_WORDS))
        fields = [word(shadow, b.add(entry, ir.Constant(I64, field))) for field in range(SHADOW_WORDS)]
        write_epoch, writer, group, read_epoch, reader = (b.load(field, typ=I32) for field in fields)
        written_now = b.icmp_unsigned("==", write_epoch, epoch)
        read_now = b.icmp_unsigned("==", read_epoch, epoch)
        by_other = b.icmp_unsigned("!=", writer, thread)
        # write: another thread wrote (2) or read (3) this byte in this epoch
        write_after_write = b.and_(written_now, by_other)
        write_after_read = b.and_(read_now, b.icmp_unsigned("!=", reader, thread))
        write_kind = b.select(write_after_write, ir.Constant(I64, 2),
                              b.select(write_after_read, ir.Constant(I64, 3), ir.Constant(I64, 0)))
        write_other = b.select(write_after_write, writer, reader)
        # read: never written (5), another thread wrote it in this epoch (1), or its asynchronous
        # copy may not have landed, or be visible to this thread yet (4)
        landed = b.select(by_other, visible, waited)
        in_flight = b.and_(b.icmp_unsigned("!=", group, zero32),
                           b.icmp_unsigned(">=", b.sub(group, ir.Constant(I32, 1)), landed))
        read_kind = b.select(b.icmp_unsigned("==", write_epoch, zero32), ir.Constant(I64, 5),
                             b.select(b.and_(written_now, by_other), ir.Constant(I64, 1),
                                      b.select(in_flight, ir.Constant(I64, 4), ir.Constant(I64, 0))))
        kind = b.select(is_write, write_kind, read_kind)
        other = b.select(is_write, write_other, writer)
        with b.if_then(b.icmp_unsigned("!=", kind, ir.Constant(I64, 0))):
            _report(b, report, {"kind": kind, "place": array, "byte": byte,
                                "thread": b.sub(b.zext(thread, I64), ir.Constant(I64, 1)),
                                # the other thread (+1 in the shadow), -1 for several readers
                                "other": b.select(b.icmp_unsigned("==", other, ir.Constant(I32, MANY)),
                                                  ir.Constant(I64, -1), b.sub(b.zext(other, I64), ir.Constant(I64, 1))),
                                "block": block, "epoch": b.zext(epoch, I64)})
        with b.if_else(is_write) as (then, otherwise):
            with then:
                b.store(epoch, fields[0])
                b.store(thread, fields[1])
                b.store(b.select(b.icmp_unsigned("!=", in_async, zero32), b.add(committed, ir.Constant(I32, 1)),
                                 zero32), fields[2])
            with otherwise:
                b.store(epoch, fields[3])
                first_reader = b.icmp_unsigned("!=", read_epoch, epoch)
                same_reader = b.icmp_unsigned("==", reader, thread)
                b.store(b.select(b.or_(first_reader, same_reader), thread, ir.Constant(I32, MANY)), fields[4])

    emit_loop(b, count, one_byte, name="byte")
    b.ret_void()
    return function


def describe(kernel: object, scheduled: tuple[str, tuple[tuple[str, int], ...], tuple[str, ...]],
             report: dict[str, int]) -> str:
    """The message of an error ``report`` found in ``kernel`` (a ``kernel_ir.Kernel``), whose
    scheduled form is ``scheduled``: its name, its shared arrays (name, bytes per element) and
    its buffer arguments (names)."""
    name, arrays, buffers = scheduled
    ops = ", ".join(f"{op_type} '{op_name}' ({line})" for op_type, op_name, line in getattr(kernel, "covers", ())) \
        or "no ops"
    kind = report["kind"]
    where = f"GPU kernel {name} (kernel {getattr(kernel, 'name', '?')}: {ops}), in block {report['block']}"
    if kind in MEMORY_KINDS:
        place = report["place"]
        target = (f"shared array '{arrays[place & ~SHARED_BIT][0]}'" if place & SHARED_BIT
                  else f"buffer {buffers[place]}")
        verb = "writes" if kind == 7 else "reads"
        return (f"{MEMORY_KINDS[kind]} of {target} in {where}: thread {report['thread']} {verb} {report['other']} "
                f"bytes at byte {report['byte']}, outside its {report['epoch']} bytes; the access was dropped and "
                "the run stopped after this kernel")
    if kind in GLOBAL_KINDS:
        verb = "writes" if kind == 8 else "reads"
        return (f"{RACE_KINDS[kind]} in the output buffer {buffers[0]} of {where}: thread {report['thread']} {verb} "
                f"byte {report['byte']}, which thread {report['other']} of block {report['epoch']} "
                "wrote in the same launch, with nothing ordering the two; the run stopped after this kernel")
    array, element_bytes = arrays[report["place"]]
    other = "several other threads" if report["other"] < 0 else f"thread {report['other']}"
    if kind == 1:
        what = f"thread {report['thread']} reads what {other} wrote"
    elif kind == 2:
        what = f"thread {report['thread']} writes what {other} wrote"
    elif kind == 3:
        what = f"thread {report['thread']} writes what {other} read"
    elif kind == 4:
        what = (f"thread {report['thread']} reads what an asynchronous copy by thread {report['other']} "
                "may still be writing (no wait for its group, or no barrier after that wait)")
    else:
        what = f"thread {report['thread']} reads what no thread of the block wrote"
    between = "" if kind >= 4 else " with no barrier between"
    return (f"{RACE_KINDS[kind]} in shared array '{array}' of {where}: {what}{between}, at byte {report['byte']} "
            f"(element {report['byte'] // element_bytes}), barrier interval {report['epoch'] - 1}; the run stopped "
            "after this kernel")

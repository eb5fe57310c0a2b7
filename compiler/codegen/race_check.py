"""Shared-memory race checking for emulated GPU kernels (``Session(target="cuda-emulated", racecheck=True)``).

The host emulation (``gpu_kernel.emit_emulated_kernel``) runs the threads of a phase one after the
other, so a kernel that reads shared memory another thread writes without a barrier between them
gets the right answer on the CPU and a wrong one, now and then, on a GPU. With race checking,
every load and store a phase makes goes through a check first: the accesses that fall in one of
the block's shared arrays are compared with what the block's threads did to the same bytes since
the last barrier, the way ``compute-sanitizer --tool racecheck`` does on a GPU:

- a read of a byte that another thread wrote since the last barrier (read after write);
- a write of a byte that another thread wrote, or read, since the last barrier;
- a read of a byte that an asynchronous copy (``AsyncCopy``) wrote while the copy may still be in
  flight: its thread has not waited for it (``AsyncWait``), or, for another thread, no barrier
  has come after that wait;
- a read of a byte that no thread of the block wrote (uninitialised shared memory).

An interval between two barriers is an *epoch*; each byte of shared memory has a shadow of five
32-bit words: the epoch and thread (+1) of its last write and that write's copy group (+1, 0 for a
plain store), and the epoch and thread (+1, or ``MANY``) of its reads. The first race found is
written to the step's report words (``REPORT_FIELDS``) and the step stops after that kernel; the
runtime turns it into ``RaceError``.
"""
from __future__ import annotations

from dataclasses import dataclass
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
# The report (int64 words after the step's status word): what the runtime reads back.
REPORT_FIELDS = ("kind", "array", "byte", "thread", "other", "block", "epoch")
KINDS = {1: "read after write", 2: "write after write", 3: "write after read",
         4: "read of an asynchronous copy still in flight", 5: "read of uninitialised shared memory"}
CHECK_BYTES_SYMBOL = "graphgrad_race_check_bytes"


def byte_size(type_: ir.Type) -> int:
    """Bytes a load or store of ``type_`` touches."""
    if isinstance(type_, ir.VectorType):
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
    if isinstance(type_, ir.ArrayType):
        return type_.count * byte_size(type_.element)
    raise TypeError(f"no size for {type_}")


@dataclass
class BlockChecker:
    """The race checker of one emulated block function: its state, shadow and report pointers and
    the per-kernel check function that finds which shared array an address is in."""

    state: ir.Value          # i32[STATE_WORDS]
    shadow: ir.Value         # i32[SHADOW_WORDS * shared bytes], zeroed
    bases: ir.Value          # ptr[arrays]: each shared array's first byte
    report: ir.Value         # i64[len(REPORT_FIELDS)]
    block: ir.Value          # the block's index (i64)
    check: ir.Function       # check(state, shadow, bases, report, block, address, size, is_write)

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

    def emit_access(self, b: ir.IRBuilder, address: ir.Value, type_: ir.Type, is_write: bool) -> None:
        b.call(self.check, [self.state, self.shadow, self.bases, self.report, self.block, address,
                            ir.Constant(I64, byte_size(type_)), ir.Constant(I1, int(is_write))])


class CheckingBuilder(ir.IRBuilder):
    """An IRBuilder whose loads and stores are checked first (a phase's code is emitted with it)."""

    def __init__(self, block: ir.Block, checker: BlockChecker) -> None:
        super().__init__(block)
        self.checker = checker

    def load(self, ptr: ir.Value, name: str = "", align: int | None = None, typ: ir.Type | None = None) -> ir.Value:
        self.checker.emit_access(self, ptr, typ if typ is not None else ptr.type.pointee, False)
        return super().load(ptr, name, align, typ)

    def store(self, value: ir.Value, ptr: ir.Value, align: int | None = None) -> ir.Value:
        self.checker.emit_access(self, ptr, value.type, True)
        return super().store(value, ptr, align)


def start_block(b: ir.IRBuilder, name: str, arrays: Sequence[tuple[ir.Value, int]], report: ir.Value,
                block: ir.Value) -> tuple[BlockChecker, ir.Value]:
    """At the start of an emulated block: the checker over ``arrays`` (pointer, bytes) and the
    shadow to free at its end (``finish_block``)."""
    module = b.module
    state = b.alloca(I32, size=STATE_WORDS, name="race.state")
    for index in range(STATE_WORDS):
        b.store(ir.Constant(I32, 1 if index == EPOCH else 0),
                b.gep(state, [ir.Constant(I64, index)], inbounds=True, source_etype=I32))
    calloc = declare_function(module, "calloc", PTR, [I64, I64])
    total = sum(size for _, size in arrays)
    shadow = b.call(calloc, [ir.Constant(I64, max(total, 1)), ir.Constant(I64, 4 * SHADOW_WORDS)])
    bases = b.alloca(PTR, size=max(len(arrays), 1), name="race.bases")
    for index, (pointer, _) in enumerate(arrays):
        b.store(pointer, b.gep(bases, [ir.Constant(I64, index)], inbounds=True, source_etype=PTR))
    check = _emit_kernel_check(module, f"{name}.racecheck", [size for _, size in arrays])
    return BlockChecker(state, shadow, bases, report, block, check), shadow


def finish_block(b: ir.IRBuilder, shadow: ir.Value) -> None:
    b.call(declare_function(b.module, "free", ir.VoidType(), [PTR]), [shadow])


def _emit_kernel_check(module: ir.Module, name: str, sizes: Sequence[int]) -> ir.Function:
    """``check(state, shadow, bases, report, block, address, size, is_write)``: the bytes of the
    access that fall in shared array ``i`` are checked against that array's part of the shadow."""
    function = ir.Function(module, ir.FunctionType(ir.VoidType(), [PTR, PTR, PTR, PTR, I64, PTR, I64, I1]),
                           name=name)
    function.linkage = "internal"
    function.attributes.add("noinline")   # one call per access keeps the checked kernels quick to compile
    state, shadow, bases, report, block, address, size, is_write = function.args
    b = ir.IRBuilder(function.append_basic_block("entry"))
    check_bytes = _emit_check_bytes(module)
    at = b.ptrtoint(address, I64)
    shadow_offset = 0
    for index, array_size in enumerate(sizes):
        base = b.load(b.gep(bases, [ir.Constant(I64, index)], inbounds=True, source_etype=PTR), typ=PTR)
        offset = b.sub(at, b.ptrtoint(base, I64))
        with b.if_then(b.icmp_unsigned("<", offset, ir.Constant(I64, array_size))):
            part = b.gep(shadow, [ir.Constant(I64, shadow_offset * SHADOW_WORDS)], inbounds=True, source_etype=I32)
            last = b.sub(ir.Constant(I64, array_size), offset)
            count = b.select(b.icmp_unsigned("<", size, last), size, last)
            b.call(check_bytes, [state, part, report, block, ir.Constant(I64, index), offset, count, is_write])
        shadow_offset += array_size
    b.ret_void()
    return function


def _emit_check_bytes(module: ir.Module) -> ir.Function:
    """``check_bytes(state, shadow, report, block, array, offset, count, is_write)``: the rules of
    the module's docstring, byte by byte; the first race found goes into the report."""
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
        with b.if_then(b.and_(b.icmp_unsigned("!=", kind, ir.Constant(I64, 0)),
                              b.icmp_unsigned("==", b.load(report, typ=I64), ir.Constant(I64, 0)))):
            values = {"kind": kind, "array": array, "byte": byte,
                      "thread": b.sub(b.zext(thread, I64), ir.Constant(I64, 1)),
                      # the other thread (+1 in the shadow), -1 for several readers
                      "other": b.select(b.icmp_unsigned("==", other, ir.Constant(I32, MANY)), ir.Constant(I64, -1),
                                        b.sub(b.zext(other, I64), ir.Constant(I64, 1))),
                      "block": block, "epoch": b.zext(epoch, I64)}
            for position, field in enumerate(REPORT_FIELDS):
                b.store(values[field], b.gep(report, [ir.Constant(I64, position)], inbounds=True, source_etype=I64))
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


def describe_race(kernel: object, scheduled: tuple[str, tuple[tuple[str, int], ...]], report: dict[str, int]) -> str:
    """The message of a race ``report`` found in ``kernel`` (a ``kernel_ir.Kernel``), whose
    scheduled form is named ``scheduled[0]`` with shared arrays ``scheduled[1]`` (name, bytes per
    element)."""
    name, arrays = scheduled
    array, element_bytes = arrays[report["array"]]
    other = "several other threads" if report["other"] < 0 else f"thread {report['other']}"
    kind = report["kind"]
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
    ops = ", ".join(f"{op_type} '{op_name}' ({line})" for op_type, op_name, line in getattr(kernel, "covers", ())) \
        or "no ops"
    return (f"{KINDS[kind]} in shared array '{array}' of GPU kernel {name} (kernel {getattr(kernel, 'name', '?')}: "
            f"{ops}): in block {report['block']}, {what}{between}, at byte {report['byte']} (element "
            f"{report['byte'] // element_bytes}), barrier interval {report['epoch'] - 1}; the run stopped after this kernel")

"""Race and memory checks of emulated GPU kernels (``codegen.sanitizer``): small hand-written
schedules, each right or with one classic mistake, run on the CPU with the checks; the report must
name the kind of error, the threads and the element, an out-of-bounds access must not happen, and
the right schedules must report nothing.
"""
from __future__ import annotations

import ctypes
from typing import Sequence

import llvmlite.binding as llvm
import numpy as np
import pytest
from llvmlite import ir

from compiler.codegen.common import I64, PTR
from compiler.codegen.cpu import host_target_machine
from compiler.codegen.gpu_kernel import (AsyncCopy, AsyncWait, Barrier, Launch, Phase, Repeat, ScheduledKernel,
                                         SharedArray, ThreadState, emit_emulated_kernel)
from compiler.codegen.sanitizer import REPORT_FIELDS, SHARED_BIT, describe

F32 = ir.FloatType()
THREADS = 4


GUARD = 4   # floats after each buffer's end that the kernel is not told about
OUTPUT, INPUT = 0, 1   # the kernel's buffer arguments, output first (as kernel_body.kernel_buffers orders them)


def _run(statements: Sequence[object], threads: int = THREADS, blocks: int = 1,
         shared_count: int = THREADS) -> tuple[np.ndarray, dict[str, int]]:
    """Run a kernel ``k(output, input, report)`` of ``blocks`` blocks of ``threads`` threads with one
    float shared array ``s``, racecheck and memcheck on; returns the output (with ``GUARD`` floats
    past the end the kernel should never touch) and the report."""
    scheduled = ScheduledKernel("k", 2, Launch(block=threads, grid=blocks), tuple(statements),
                                shared=(SharedArray("s", F32, shared_count),))
    host = host_target_machine()
    module = ir.Module(name="race_test")
    module.triple = host.triple
    module.data_layout = str(host.target_data)
    size = 4 * threads * blocks
    kernel = emit_emulated_kernel(module, scheduled, racecheck=True, memcheck=True, buffer_bytes=(size, size))
    entry = ir.Function(module, ir.FunctionType(ir.VoidType(), [PTR, PTR, PTR]), name="entry")
    b = ir.IRBuilder(entry.append_basic_block())
    b.call(kernel, list(entry.args))
    b.ret_void()
    # the engine owns the machine it is given: a fresh one, not the shared host machine
    engine = llvm.create_mcjit_compiler(llvm.parse_assembly(str(module)),
                                        llvm.Target.from_triple(host.triple).create_target_machine())
    engine.finalize_object()
    inputs = np.arange(1, threads * blocks + 1 + GUARD, dtype=np.float32)
    output = np.zeros(threads * blocks + GUARD, np.float32)
    report = np.zeros(len(REPORT_FIELDS), np.int64)
    function = ctypes.CFUNCTYPE(None, ctypes.c_void_p, ctypes.c_void_p, ctypes.c_void_p)(
        engine.get_function_address("entry"))
    function(output.ctypes.data, inputs.ctypes.data, report.ctypes.data)
    assert not output[threads * blocks:].any(), "a write past the end happened"
    return output[:threads * blocks], dict(zip(REPORT_FIELDS, (int(word) for word in report)))


def _element(state: ThreadState, name: str, index: ir.Value) -> ir.Value:
    return state.b.gep(state.shared(name), [index], inbounds=True, source_etype=F32)


def _global(state: ThreadState, argument: int, index: ir.Value) -> ir.Value:
    return state.b.gep(state.arguments[argument], [index], inbounds=True, source_etype=F32)


def _global_index(state: ThreadState) -> ir.Value:
    return state.b.add(state.b.mul(state.block, ir.Constant(I64, THREADS)), state.thread)


def _neighbour(state: ThreadState) -> ir.Value:
    return state.b.urem(state.b.add(state.thread, ir.Constant(I64, 1)), ir.Constant(I64, THREADS))


def store_own(state: ThreadState) -> None:
    """s[t] = input[block * T + t]"""
    value = state.b.load(_global(state, INPUT, _global_index(state)), typ=F32)
    state.b.store(value, _element(state, "s", state.thread))


def load_neighbour(state: ThreadState) -> None:
    """output[block * T + t] = s[(t + 1) % T]"""
    value = state.b.load(_element(state, "s", _neighbour(state)), typ=F32)
    state.b.store(value, _global(state, OUTPUT, _global_index(state)))


def copy_own(state: ThreadState) -> None:
    """s[t] = input[block * T + t], as an asynchronous copy"""
    state.copy_to_shared(_element(state, "s", state.thread), state.arguments[INPUT], _global_index(state),
                         ir.Constant(ir.IntType(1), 1), np.dtype(np.float32))


def store_thread_number_to_first(state: ThreadState) -> None:
    state.b.store(state.b.uitofp(state.thread, F32), _element(state, "s", ir.Constant(I64, 0)))


def _rotated(blocks: int = 1) -> np.ndarray:
    values = np.arange(1, THREADS * blocks + 1, dtype=np.float32).reshape(blocks, THREADS)
    return np.roll(values, -1, axis=1).reshape(-1)


def test_a_barrier_between_write_and_read_is_no_race() -> None:
    output, report = _run([Phase(store_own), Barrier(), Phase(load_neighbour)], blocks=2)
    assert report["kind"] == 0
    np.testing.assert_array_equal(output, _rotated(2))


def test_read_after_write_without_a_barrier() -> None:
    output, report = _run([Phase(store_own), Phase(load_neighbour)], blocks=2)
    # The emulation runs every thread's write first, so its answer is right; a GPU's need not be.
    np.testing.assert_array_equal(output, _rotated(2))
    assert report == dict(kind=1, place=0, byte=4, thread=0, other=1, block=0, epoch=1)


def test_write_after_read_without_a_barrier() -> None:
    # Threads read their neighbour's element, then overwrite their own: thread 0 may overwrite
    # s[0] before thread 3 has read it.
    _, report = _run([Phase(store_own), Barrier(), Phase(load_neighbour), Phase(store_own)])
    assert (report["kind"], report["thread"], report["other"], report["byte"]) == (3, 0, 3, 0)


def test_write_after_write() -> None:
    _, report = _run([Phase(store_thread_number_to_first), Barrier(), Phase(load_neighbour)])
    assert (report["kind"], report["thread"], report["other"], report["byte"]) == (2, 1, 0, 0)


def test_a_loop_without_a_closing_barrier_races_with_its_next_trip() -> None:
    # The classic of double buffering: the next trip overwrites what a slower thread still reads.
    body = (Phase(store_own), Barrier(), Phase(load_neighbour))
    _, report = _run([Repeat(lambda b, block: ir.Constant(I64, 2), body)])
    assert (report["kind"], report["thread"], report["other"], report["epoch"]) == (3, 0, 3, 2)
    output, report = _run([Repeat(lambda b, block: ir.Constant(I64, 2), body + (Barrier(),))])
    assert report["kind"] == 0
    np.testing.assert_array_equal(output, _rotated())


def test_reading_memory_no_thread_wrote() -> None:
    _, report = _run([Phase(load_neighbour)])
    assert (report["kind"], report["thread"], report["byte"]) == (5, 0, 4)


@pytest.mark.parametrize("statements, kind", [
    ((AsyncCopy(copy_own), AsyncWait(0), Barrier(), Phase(load_neighbour)), 0),
    ((AsyncCopy(copy_own), Barrier(), Phase(load_neighbour)), 4),             # never waited for
    ((AsyncCopy(copy_own), Barrier(), AsyncWait(0), Phase(load_neighbour)), 4),  # waited, no barrier after
    ((AsyncCopy(copy_own), AsyncWait(1), Barrier(), Phase(load_neighbour)), 4),  # the group may be in flight
    ((AsyncCopy(copy_own), AsyncCopy(copy_own), AsyncWait(1), Barrier(), Phase(load_neighbour)), 4),
], ids=["waited-then-barrier", "no-wait", "barrier-before-wait", "pending-1", "newest-in-flight"])
def test_asynchronous_copies_are_read_only_after_a_wait_and_a_barrier(statements: tuple, kind: int) -> None:
    output, report = _run(statements)
    assert report["kind"] == kind
    np.testing.assert_array_equal(output, _rotated())


def test_the_message_names_the_kernel_its_ops_the_array_and_the_threads() -> None:
    class Kernel:
        name = "k7"
        covers = (("MatMul", "dense/MatMul", "model.py:12"),)
    message = describe(Kernel(), ("k7_tiles", (("a_tile", 4), ("b_tile", 4)), ("b0 (out, 64 bytes)",)),
                       dict(kind=1, place=1, byte=12, thread=3, other=5, block=2, epoch=4))
    assert message.startswith("read after write in shared array 'b_tile' of GPU kernel k7_tiles")
    for part in ("MatMul 'dense/MatMul' (model.py:12)", "block 2", "thread 3 reads what thread 5 wrote",
                 "no barrier between", "element 3"):
        assert part in message
    message = describe(Kernel(), ("k7_tiles", (), ("b0 (out, 64 bytes)",)),
                       dict(kind=8, place=0, byte=8, thread=3, other=5, block=2, epoch=1))
    assert message.startswith("write after write in the output buffer b0 (out, 64 bytes) of GPU kernel k7_tiles")
    assert "thread 3 writes byte 8, which thread 5 of block 1 wrote in the same launch" in message
    message = describe(Kernel(), ("k7_tiles", (), ("b0 (out, 64 bytes)", "b3 (x, 16 bytes)")),
                       dict(kind=6, place=1, byte=16, thread=3, other=4, block=0, epoch=16))
    assert message.startswith("out-of-bounds read of buffer b3 (x, 16 bytes) in GPU kernel k7_tiles")
    assert "thread 3 reads 4 bytes at byte 16, outside its 16 bytes" in message


def load_next_global(state: ThreadState) -> None:
    """output[i] = input[i + 1]: the last thread reads past the end"""
    index = state.b.add(_global_index(state), ir.Constant(I64, 1))
    state.b.store(state.b.load(_global(state, INPUT, index), typ=F32), _global(state, OUTPUT, _global_index(state)))


def store_past_the_end(state: ThreadState) -> None:
    """output[i + 1] = input[i]: the last thread writes past the end"""
    value = state.b.load(_global(state, INPUT, _global_index(state)), typ=F32)
    state.b.store(value, _global(state, OUTPUT, state.b.add(_global_index(state), ir.Constant(I64, 1))))


def store_next_shared(state: ThreadState) -> None:
    """s[t + 1] = input[t]: the last thread writes past the shared array"""
    value = state.b.load(_global(state, INPUT, _global_index(state)), typ=F32)
    state.b.store(value, _element(state, "s", state.b.add(state.thread, ir.Constant(I64, 1))))


def test_a_read_past_a_buffer_is_reported_and_reads_nothing_there() -> None:
    output, report = _run([Phase(load_next_global)])
    assert (report["kind"], report["place"], report["byte"], report["thread"], report["other"]) == (6, INPUT, 16, 3, 4)
    np.testing.assert_array_equal(output[:3], [2, 3, 4])


def test_a_write_past_a_buffer_is_reported_and_dropped() -> None:
    output, report = _run([Phase(store_past_the_end)])   # _run checks that the guard stayed 0
    assert (report["kind"], report["place"], report["byte"], report["thread"]) == (7, OUTPUT, 16, 3)
    np.testing.assert_array_equal(output[1:], [1, 2, 3])


def test_a_write_past_a_shared_array_is_reported() -> None:
    _, report = _run([Phase(store_next_shared)])
    assert (report["kind"], report["place"], report["byte"], report["thread"]) == (7, SHARED_BIT, 16, 3)


def store_thread_to_first_output(state: ThreadState) -> None:
    """output[0] = t (every thread of every block)"""
    state.b.store(state.b.uitofp(state.thread, F32), _global(state, OUTPUT, ir.Constant(I64, 0)))


def store_own_output(state: ThreadState) -> None:
    """output[i] = input[i]"""
    value = state.b.load(_global(state, INPUT, _global_index(state)), typ=F32)
    state.b.store(value, _global(state, OUTPUT, _global_index(state)))


def copy_neighbour_output(state: ThreadState) -> None:
    """input[i] = output[block * T + (t + 1) % T]: reads what a neighbour of the block stored"""
    neighbour = state.b.add(state.b.mul(state.block, ir.Constant(I64, THREADS)), _neighbour(state))
    value = state.b.load(_global(state, OUTPUT, neighbour), typ=F32)
    state.b.store(value, _global(state, INPUT, _global_index(state)))


def store_next_block_output(state: ThreadState) -> None:
    """output[(i + T) % size] = input[i] with two blocks: block 0 writes block 1's outputs and back"""
    index = state.b.urem(state.b.add(_global_index(state), ir.Constant(I64, THREADS)), ir.Constant(I64, 2 * THREADS))
    state.b.store(state.b.load(_global(state, INPUT, _global_index(state)), typ=F32), _global(state, OUTPUT, index))


def test_two_threads_storing_one_output_element_race() -> None:
    _, report = _run([Phase(store_thread_to_first_output)])
    assert (report["kind"], report["place"], report["byte"], report["thread"], report["other"]) == (8, OUTPUT, 0, 1, 0)


def test_reading_an_output_another_thread_stored_needs_a_barrier_of_the_same_block() -> None:
    _, report = _run([Phase(store_own_output), Phase(copy_neighbour_output)])
    assert (report["kind"], report["thread"], report["other"], report["byte"]) == (9, 0, 1, 4)
    output, report = _run([Phase(store_own_output), Barrier(), Phase(copy_neighbour_output)], blocks=2)
    assert report["kind"] == 0   # the barrier orders global memory within a block
    np.testing.assert_array_equal(output, np.arange(1, 2 * THREADS + 1, dtype=np.float32))


def test_blocks_are_never_ordered() -> None:
    # Block 1 overwrites what block 0 stored, and a barrier does not order blocks.
    _, report = _run([Phase(store_own_output), Barrier(), Phase(store_next_block_output)], blocks=2)
    assert (report["kind"], report["block"], report["epoch"], report["byte"]) == (8, 1, 0, 16)

"""CPU code generation: a Program becomes one LLVM module with one entry point, ``graphgrad_step``.

Each kernel is a function of its buffers' pointers; the entry point takes the array of every
buffer's address and calls the kernels in order, so a whole training step is one native call.
Loops: size-1 axes are dropped, mergeable axes collapsed, and the axis with the most unit-stride
accesses goes innermost (so LLVM's loop vectoriser can use it). A reduction whose innermost loop is
reduced keeps its partial result in a register; otherwise it accumulates into the output buffer.
The loops are this module's; what each point of them computes is emitted by ``kernel_body``, which
the GPU shares.
"""
from __future__ import annotations

import functools
import math
import os
from dataclasses import dataclass
from typing import Sequence

import llvmlite.binding as llvm
from llvmlite import ir

from .. import dtypes
from ..kernel_ir import Access, Kernel, Program
from .common import (LLVM_LOCK, PTR, LoopAxis, declare_function, element_pointer, emit_carried_loop, emit_loop,
                     emit_reserve, emit_schedule,
                     identity_of, linear_index, load_element, loop_axes, store_element)
from .gemm import (LIBRARY_SYMBOL, WINDOW_FIELDS, WINDOW_LIBRARY_SYMBOL, gemm_shape, library_signature,
                   window_library_signature, window_product_pays)
from .kernel_body import BodyRules, KernelBody, ReducedLoop, kernel_buffers
from .threads import PARALLEL_SYMBOL, POOL_THREADS_SYMBOL, count_running_step
from .tiers import FULL, Tier

STEP_SYMBOL = "graphgrad_step"
# Kernels with at least this many loop iterations are split across the worker pool.
PARALLEL_MIN_WORK = 1 << 17
# Matmuls with at least this many multiply-adds use the blocked GEMM (gemm.py); smaller ones,
# and integer ones, are plain loop nests.
GEMM_MIN_WORK = 4096
# The CPU initialises a reduction's output and walks its reduced axes in any order (the body adds
# into the output), reassociates register sums so they vectorise (a block of 4096 float32 adds is
# spread over the vector lanes and unrolled copies, some 64-512 adds each), and runs scatters on
# one thread.
CPU_RULES = BodyRules(output_holds_partial=True, reassociate=True, atomic_scatter=False, sum_block=4096)
# A reduction over at most this many points per output (a 3x3 convolution of one channel, a 2x2
# pooling window) runs them all inside each point, written out one after another, its sum in a
# register: no pass that sets the output to the identity and no reading it back, and the loop
# around the point (often the channels) vectorises.
SMALL_REDUCTION = 16
# A sum into at most this many outputs over many points whose loops start with a reduced one (a
# bias gradient: a sum over the batch) splits that outer reduced loop across the pool: each part
# sums into its own copy of the output, and the copies are added in part order afterwards.
PARTIAL_MAX_OUTPUTS = 4096


def thread_count() -> int:
    """Threads a large kernel is split across: GRAPHGRAD_THREADS, else the usable cores."""
    configured = os.environ.get("GRAPHGRAD_THREADS", "").strip()
    if configured:
        if not (configured.isascii() and configured.isdigit()) or int(configured) < 1:   # not "²"
            raise ValueError(f"GRAPHGRAD_THREADS must be a whole number of threads, at least 1; got {configured!r}")
        return int(configured)
    return max(1, len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count() or 1)


@functools.lru_cache(maxsize=None)
def host_target_machine(codegen: int = 3) -> llvm.TargetMachine:
    """The shared target machine for optimising, printing and compiling to object code at this
    code generator level (never handed to a JIT engine)."""
    return new_host_target_machine(codegen)


def new_host_target_machine(codegen: int = 3) -> llvm.TargetMachine:
    """A fresh target machine for the host CPU (a JIT engine takes ownership of the one it gets)."""
    llvm.initialize_native_target()
    llvm.initialize_native_asmprinter()
    target = llvm.Target.from_default_triple()
    return target.create_target_machine(cpu=llvm.get_host_cpu_name(),
                                        features=llvm.get_host_cpu_features().flatten(),
                                        opt=codegen, codemodel="jitdefault", jit=True)


def _loop_order(axes: Sequence[LoopAxis]) -> list[int]:
    """The axes outermost first: innermost the one along which the most data is contiguous. Each
    access counts with the elements it walks, so a row of the input, contiguous along the reduced
    axis, outweighs a value broadcast along it that is contiguous across the rows (a softmax's
    x - max(x)): weighted the same, the rows went innermost and x was gathered a column at a time."""
    if not axes:
        return []
    def walked(strides: Sequence[int]) -> int:
        return math.prod(axis.size for axis, stride in zip(axes, strides) if stride)

    footprints = [walked([axis.operand_strides[j] for axis in axes]) for j in range(len(axes[0].operand_strides))]
    out_footprint = walked([axis.out_stride for axis in axes])

    def contiguous(k: int) -> int:
        axis = axes[k]
        return (sum(size for size, stride in zip(footprints, axis.operand_strides) if abs(stride) == 1)
                + (out_footprint if axis.out_stride == 1 else 0))
    innermost = max(range(len(axes)), key=lambda k: (contiguous(k), k))
    return [k for k in range(len(axes)) if k != innermost] + [innermost]


@dataclass(frozen=True)
class KernelPlan:
    """How one kernel runs on the CPU: its loops (outermost first) and whether its outermost loop
    is split across the worker pool."""

    axes: tuple[LoopAxis, ...]
    order: tuple[int, ...]
    outer: int            # trip count of the outermost loop (1 when there is none)
    parts: int            # > 1: the outermost loop is split into this many parts
    gemm: bool
    unrolled: tuple[int, ...] = ()   # reduced axes the point runs whole, unrolled (a small reduction)
    partial: int = 0      # > 0: the parts split a reduced outer loop, each into its own output of this many elements


def plan_kernel(kernel: Kernel, threads: int) -> KernelPlan:
    if _uses_gemm(kernel):
        return _gemm_plan(kernel, threads)
    axes = tuple(loop_axes(kernel)) if 0 not in kernel.space else ()
    unrolled: tuple[int, ...] = ()
    points = 1
    for axis in axes:
        points *= axis.size if axis.reduced else 1
    kept = [axis for axis in axes if not axis.reduced]
    if (kernel.reduce_axes and not kernel.scan and not kernel.accumulate and kernel.scatter is None and kept
            and points <= SMALL_REDUCTION):
        # The output's own loops (in their usual order), each point unrolling the reduced ones.
        outside = [k for k, axis in enumerate(axes) if not axis.reduced]
        unrolled = tuple(k for k, axis in enumerate(axes) if axis.reduced)
        order = tuple(outside[k] for k in _loop_order(kept))
    else:
        order = tuple(_loop_order(axes))
    outer = axes[order[0]].size if order else 1
    work = 1
    for axis in axes:
        work *= axis.size
    outputs = math.prod(axis.size for axis in kept)
    # Where the usual plan cannot split at all (its outer loop is reduced), the parts split the
    # reduced loops, which go outside. Where it splits a short outer loop unevenly (a filter
    # gradient of one channel: its 3 filter rows on 2 threads), the parts split its outermost long
    # reduced loop instead (the batch), moved outside the usual order: the loops inside keep their
    # order, so the sums stay in registers and each part reads its slice of the input once per
    # filter tap while it is still in cache (the usual order streams the whole input once per tap).
    poorly_split = bool(order) and axes[order[0]].reduced
    unevenly_split = bool(order) and not poorly_split and outer < 4 * threads and outer % threads != 0
    if (not unrolled and kept and (poorly_split or unevenly_split) and kernel.combiner == "sum" and not kernel.scan
            and not kernel.accumulate and kernel.scatter is None and threads > 1 and work >= PARALLEL_MIN_WORK
            and outputs <= PARTIAL_MAX_OUTPUTS and kernel.out.offset == 0
            and Access(kernel.out.buffer, tuple(s for a, s in enumerate(kernel.out.strides)
                                                if a not in kernel.reduce_axes)).is_contiguous(kernel.out_space)):
        if poorly_split:
            reduced = [k for k, axis in enumerate(axes) if axis.reduced]
            outside = [k for k, axis in enumerate(axes) if not axis.reduced]
            partial_order = tuple(reduced + [outside[k] for k in _loop_order(kept)])
        else:   # the innermost loop stays innermost: it is the one that vectorises
            first = next((k for k in order[:-1] if axes[k].reduced and axes[k].size >= 2 * threads), None)
            partial_order = () if first is None else (first,) + tuple(k for k in order if k != first)
        if partial_order and axes[partial_order[0]].size >= 2 * threads:
            partial_outer = axes[partial_order[0]].size
            return KernelPlan(axes, partial_order, partial_outer, min(4 * threads, partial_outer), False, (),
                              outputs)
    # Split only kernels big enough to pay for waking the pool, and never along a reduced axis
    # (parts must write disjoint outputs).
    splittable = (bool(order) and not axes[order[0]].reduced and work >= PARALLEL_MIN_WORK and outer > 1
                  and kernel.scatter is None)  # points of a scatter may add into one element
    # More parts than threads, so a thread that is descheduled holds up only a small share.
    return KernelPlan(axes, order, outer, min(4 * threads, outer) if splittable and threads > 1 else 1, False,
                      unrolled)


def emit_kernel(module: ir.Module, kernel: Kernel, plan: KernelPlan) -> tuple[ir.Function, ir.Function | None]:
    """``kernel(buffers..., start, stop)`` runs the outermost loop over [start, stop); reductions
    also get ``kernel_init(buffers...)``, which sets the output to the combiner's identity."""
    buffers = kernel_buffers(kernel)
    i64 = ir.IntType(64)
    function = ir.Function(module, ir.FunctionType(ir.VoidType(), [PTR] * len(buffers) + [i64, i64]),
                           name=kernel.name)
    function.linkage = "internal"
    for argument in function.args[:len(buffers)]:
        argument.add_attribute("noalias")
    start, stop = function.args[len(buffers):]
    builder = ir.IRBuilder(function.append_basic_block("entry"))
    body = KernelBody(kernel, function.args[:len(buffers)], plan.axes, CPU_RULES)
    init_function = None
    if kernel.reduce_axes and not plan.gemm and not kernel.accumulate and not kernel.scan and not plan.unrolled:
        init_function = _emit_init(module, kernel, len(buffers))

    if plan.gemm:
        _emit_gemm_call(builder, kernel, body.out_pointer, body.operand_pointers, start, stop, plan.parts > 1)
    elif 0 not in kernel.space:
        _emit_loops(builder, body, plan, start, stop)
    builder.ret_void()
    return function, init_function


def _emit_loops(builder: ir.IRBuilder, body: KernelBody, plan: KernelPlan, start: ir.Value, stop: ir.Value) -> None:
    """The loops of ``plan.order`` around the body, the outermost over [start, stop). A reduction
    whose innermost loop is reduced runs that loop inside the body, its sum in a register."""
    order = plan.order
    in_body = bool(body.kernel.reduce_axes) and bool(order) and plan.axes[order[-1]].reduced
    walked = order[:-1] if in_body else order

    def trip_count(b: ir.IRBuilder, depth: int) -> ir.Value | int:
        return b.sub(stop, start) if depth == 0 else plan.axes[order[depth]].size

    def walk(b: ir.IRBuilder, depth: int) -> None:
        if depth == len(walked) and plan.unrolled:
            body.emit_unrolled_point(b, [(k, plan.axes[k].size) for k in plan.unrolled])
            return
        if depth == len(walked):
            loops = [ReducedLoop(order[depth], trip_count(b, depth), start if depth == 0 else None)] if in_body else []
            body.emit_point(b, loops)
            return
        k = order[depth]
        count = trip_count(b, depth)

        def trip(b: ir.IRBuilder, index: ir.Value) -> None:
            body.values[k] = b.add(start, index) if depth == 0 else index
            walk(b, depth + 1)
        emit_loop(b, count, trip, name=f"i{k}")

    walk(builder, 0)


def _emit_init(module: ir.Module, kernel: Kernel, buffer_count: int) -> ir.Function:
    function = ir.Function(module, ir.FunctionType(ir.VoidType(), [PTR] * buffer_count),
                           name=f"{kernel.name}_init")
    function.linkage = "internal"
    builder = ir.IRBuilder(function.append_basic_block("entry"))
    out_size = 1
    for n in kernel.out_space:
        out_size *= n

    def fill(b: ir.IRBuilder, index: ir.Value) -> None:
        store_element(b, identity_of(kernel.combiner, kernel.out_dtype), function.args[0], kernel.out_dtype, index)
    emit_loop(builder, out_size, fill, name="init")
    builder.ret_void()
    return function


def _begin_part(module: ir.Module, name: str, plan: KernelPlan, buffer_count: int
                ) -> tuple[ir.Function, ir.IRBuilder, ir.Value, ir.Value, ir.Value, list[ir.Value]]:
    """A pool task ``name(ptr buffers, i64 part)`` begun: (function, builder, part, start, stop,
    pointers), with part's range [start, stop) of the outermost loop (equal chunks of
    ``plan.outer``) and the buffer pointers from the task's table."""
    i64 = ir.IntType(64)
    function = ir.Function(module, ir.FunctionType(ir.VoidType(), [PTR, i64]), name=name)
    function.linkage = "internal"
    table, part = function.args
    b = ir.IRBuilder(function.append_basic_block("entry"))
    chunk = -(-plan.outer // plan.parts)
    start = b.mul(part, ir.Constant(i64, chunk))
    stop = b.add(start, ir.Constant(i64, chunk))
    stop = b.select(b.icmp_signed("<", stop, ir.Constant(i64, plan.outer)), stop, ir.Constant(i64, plan.outer))
    pointers = [b.load(b.gep(table, [ir.Constant(i64, i)], source_etype=PTR), typ=PTR) for i in range(buffer_count)]
    return function, b, part, start, stop, pointers


def _emit_part(module: ir.Module, kernel: Kernel, main: ir.Function, plan: KernelPlan,
               buffer_count: int, part_slots: ir.GlobalVariable | None = None, first_slot: int = 0
               ) -> ir.Function:
    """``kernel_part(ptr buffers, i64 part)``: one of ``plan.parts`` slices of the outermost loop,
    for the worker pool. With ``part_slots`` (profiling), the part also records its start and end
    cycle counter and the thread that ran it in slot ``first_slot + part`` (three i64 each)."""
    function, b, part, start, stop, pointers = _begin_part(module, f"{kernel.name}_part", plan, buffer_count)
    _call_part(b, main, pointers + [start, stop], part, part_slots, first_slot)
    b.ret_void()
    return function


def _call_part(b: ir.IRBuilder, main: ir.Function, arguments: list[ir.Value], part: ir.Value,
               part_slots: ir.GlobalVariable | None, first_slot: int) -> None:
    """Call ``main`` for one part; with ``part_slots`` (profiling), record its start and end cycle
    counter and the thread that ran it in slot ``first_slot + part``."""
    if part_slots is None:
        b.call(main, arguments)
        return
    i64 = ir.IntType(64)
    read_counter = declare_function(b.module, "llvm.readcyclecounter", i64, [])
    began = b.call(read_counter, [])
    b.call(main, arguments)
    ended = b.call(read_counter, [])
    slot = b.mul(b.add(part, ir.Constant(i64, first_slot)), ir.Constant(i64, 3))
    for offset, value in enumerate((began, ended, _thread_id(b))):
        b.store(value, b.gep(part_slots, [ir.Constant(i64, 0), b.add(slot, ir.Constant(i64, offset))]))


def _emit_partial_run(b: ir.IRBuilder, kernel: Kernel, plan: KernelPlan, main: ir.Function, init: ir.Function,
                      pointers: list[ir.Value], context: ir.Value, parallel: ir.Function,
                      part_slots: ir.GlobalVariable | None = None, first_slot: int = 0) -> None:
    """Run a ``plan.partial`` kernel: ``plan.parts`` copies of its (contiguous) output, each set to
    the identity and summed into by one part of the outer reduced loop, then added in part order
    into the output."""
    module = b.module
    i64 = ir.IntType(64)
    dtype = kernel.out_dtype
    stride = -(-plan.partial * dtype.itemsize // 64) * 64           # each copy on its own cache lines
    malloc = declare_function(module, "malloc", PTR, [i64])
    copies = b.call(malloc, [ir.Constant(i64, stride * plan.parts)])
    failed = b.icmp_unsigned("==", b.ptrtoint(copies, i64), ir.Constant(i64, 0))
    with b.if_else(failed) as (then, otherwise):
        with then:   # out of memory for the copies: the whole reduction on this thread, as planned otherwise
            b.call(init, pointers)
            b.call(main, pointers + [ir.Constant(i64, 0), ir.Constant(i64, plan.outer)])
        with otherwise:
            for part in range(plan.parts):
                b.call(init, [b.gep(copies, [ir.Constant(i64, part * stride)], source_etype=ir.IntType(8))]
                       + pointers[1:])
            for index, pointer in enumerate([copies] + pointers[1:]):
                b.store(pointer, b.gep(context, [ir.Constant(i64, index)], source_etype=PTR))
            task = _emit_partial_part(module, kernel, main, plan, len(pointers), stride, part_slots, first_slot)
            b.call(parallel, [task, context, ir.Constant(i64, plan.parts)])

            def add(b: ir.IRBuilder, index: ir.Value) -> None:
                total = load_element(b, copies, dtype, index)
                for part in range(1, plan.parts):
                    copy = b.gep(copies, [ir.Constant(i64, part * stride)], source_etype=ir.IntType(8))
                    value = load_element(b, copy, dtype, index)
                    total = b.fadd(total, value) if dtypes.is_floating(dtype) else b.add(total, value)
                store_element(b, total, pointers[0], dtype, index)
            emit_loop(b, plan.partial, add, name="copies")
            b.call(declare_function(module, "free", ir.VoidType(), [PTR]), [copies])


def _emit_partial_part(module: ir.Module, kernel: Kernel, main: ir.Function, plan: KernelPlan, buffer_count: int,
                       stride: int, part_slots: ir.GlobalVariable | None = None, first_slot: int = 0) -> ir.Function:
    """``kernel_copy(ptr buffers, i64 part)``: one part of the outer reduced loop, summed into copy
    ``part`` of the output (buffer 0 of the table points at the first copy)."""
    i64 = ir.IntType(64)
    function, b, part, start, stop, pointers = _begin_part(module, f"{kernel.name}_copy", plan, buffer_count)
    pointers[0] = b.gep(pointers[0], [b.mul(part, ir.Constant(i64, stride))], source_etype=ir.IntType(8))
    _call_part(b, main, pointers + [start, stop], part, part_slots, first_slot)
    b.ret_void()
    return function


PROFILE_PARTS_SYMBOL = "graphgrad_profile_parts"
_GETTID = {"x86_64": 186, "aarch64": 178}   # Linux system call numbers


def _thread_id(b: ir.IRBuilder) -> ir.Value:
    """The operating system's id of the running thread (Linux ``gettid``), 0 elsewhere."""
    i64 = ir.IntType(64)
    machine = host_target_machine()
    number = _GETTID.get(machine.triple.split("-")[0]) if "linux" in machine.triple else None
    if number is None:
        return ir.Constant(i64, 0)
    syscall = b.module.globals.get("syscall") or ir.Function(b.module, ir.FunctionType(i64, [i64], var_arg=True),
                                                              name="syscall")
    return b.call(syscall, [ir.Constant(i64, number)])



MATRIX_VECTOR_MAX = 2   # products with at most this many rows or columns run as loop nests
SMALL_PRODUCT_MAX_WORK = 1 << 15   # see _uses_gemm: batches of at least SMALL_PRODUCTS_MIN products
SMALL_PRODUCTS_MIN = 8             # of up to 32^3 multiply-adds each may run as loop nests
# A batch of products of at most this many multiply-adds each is split across the pool by batch
# items, each product on one thread; larger products each split their rows across the pool.
BATCH_SPLIT_MAX_WORK = 1 << 21


def _gemm_plan(kernel: Kernel, threads: int) -> KernelPlan:
    """A GEMM kernel's plan: ``outer`` is its outermost batch axis (1 without one). Small products
    in a batch (attention's heads, 1000 products of 32 x 32 matrices) are split by batch items:
    each threaded GEMM left one thread idle, or woke the pool for a product one thread does in a
    microsecond (on two Zen 4 cores, 1000 products of 32^3: 1.28 -> 0.66-0.71 ms, 256 of 64^3:
    1.8 -> 0.87-0.92 ms; torch 0.47 and 0.79)."""
    layout = kernel.matmul
    if kernel.window is not None or layout is None:
        return KernelPlan((), (), 1, 1, True)
    folded = gemm_rows(kernel)
    batch, rows = folded.batch, folded.count
    if not batch:
        return KernelPlan((), (), 1, 1, True)
    space = kernel.space
    outer = space[batch[0]]
    product = rows * space[layout.n] * space[layout.k]
    split = (threads > 1 and outer >= 2 * threads and product <= BATCH_SPLIT_MAX_WORK
             and kernel.out.strides[batch[0]] != 0   # parts write disjoint outputs
             and product * math.prod(space[a] for a in batch) >= PARALLEL_MIN_WORK)
    return KernelPlan((), (), outer, min(4 * threads, outer) if split else 1, True)


@dataclass(frozen=True)
class GemmRows:
    """How a GEMM kernel runs its products: a loop over ``batch`` axes of products of ``count``
    rows, the rows ``left_stride`` apart in the left matrix and ``out_stride`` in the output."""

    batch: tuple[int, ...]
    count: int
    left_stride: int
    out_stride: int


def gemm_rows(kernel: Kernel) -> GemmRows:
    """The innermost batch axes along which the right matrix stays put while the left one's rows
    and the output's run on fold into the rows, so ``x @ W`` over a batch of sequences is one
    product of all their rows, not one per sequence (an FFN layer's 32 x (64x128 @ 128x512) on
    one Zen 4 core: 2.82 -> 2.47 ms), and a batch of single rows (256 x (1x512 @ 512x512)) one
    GEMM, not 256 matrix-vector products (4.0 -> 1.24 ms)."""
    layout = kernel.matmul
    assert layout is not None
    space, out = kernel.space, kernel.out.strides
    left, right = (access.strides for access in kernel.operands)
    batch, rows = list(layout.batch), space[layout.m]
    left_stride, out_stride = left[layout.m], out[layout.m]
    while batch:
        axis = batch[-1]
        if space[axis] != 1:
            if right[axis] != 0:
                break
            if rows == 1:   # one row so far: its stride is free, the batch axis's takes its place
                left_stride, out_stride = left[axis], out[axis]
            elif left[axis] != rows * left_stride or out[axis] != rows * out_stride:
                break
            rows *= space[axis]
        batch.pop()
    return GemmRows(tuple(batch), rows, left_stride, out_stride)


def _uses_gemm(kernel: Kernel) -> bool:
    if not dtypes.is_floating(kernel.out_dtype) or 0 in kernel.space:
        return False
    if kernel.window is not None:
        window, space = kernel.window, kernel.space
        return (window_product_pays(math.prod(space[a] for a in window.row_axes), space[window.column_axis],
                                    math.prod(space[a] for a in window.depth_axes), kernel.out_dtype,
                                    None if window.pixel_rows else window.taps[2])
                and _window_strides(kernel) is not None)
    if kernel.matmul is None:
        return False
    layout = kernel.matmul
    folded = gemm_rows(kernel)
    rows, columns = folded.count, kernel.space[layout.n]
    product = rows * columns * kernel.space[layout.k]
    if (product <= SMALL_PRODUCT_MAX_WORK and math.prod(kernel.space[a] for a in folded.batch) >= SMALL_PRODUCTS_MIN
            and columns % gemm_shape(kernel.out_dtype).vector == 0):
        # Many small products whose rows fill whole vectors: the loop nest's vectorised rows beat
        # a GEMM call's packing and edge tiles per product (2000 products of 16^3: 1.96 -> 0.18
        # ms, 500 of 8x64 @ 64x64: 0.92 -> 0.48 ms on one Zen 4 core); ragged rows (24, 10) do not.
        return False
    if min(rows, columns) <= MATRIX_VECTOR_MAX:
        # A matrix times a vector (or two): every element of the matrix is used once or twice, so
        # packing it into panels costs more than the product; the loop nest streams it instead
        # (4096 x 4096 by a vector: 12.5 -> 2.7 ms on one Zen 4 core; numpy 2.5).
        return False
    work = rows * columns * kernel.space[layout.k]
    return work >= GEMM_MIN_WORK and kernel.out.strides[layout.n] in (1, 0)


def _flat_stride(strides: Sequence[int], extents: Sequence[int]) -> int | None:
    """The stride of the flattened index over axes with these strides and extents (row-major), or
    None when they do not flatten into one stride."""
    unit = None
    span = 1
    for stride, extent in reversed(list(zip(strides, extents))):
        if extent == 1:
            continue
        if unit is None:
            unit, span = stride, extent
        elif stride != unit * span:
            return None
        else:
            span *= extent
    return 1 if unit is None else unit


def _window_strides(kernel: Kernel) -> tuple[int, int, int] | None:
    """(B's depth stride, B's column stride, the output's row stride) of a window product whose
    operands flatten into matrices with a contiguous output row, else None."""
    window = kernel.window
    assert window is not None
    space, b_strides, out_strides = kernel.space, kernel.operands[1].strides, kernel.out.strides
    extents = [space[a] for a in window.depth_axes]
    depth_stride = _flat_stride([b_strides[a] for a in window.depth_axes], extents)
    row_stride = _flat_stride([out_strides[a] for a in window.row_axes], [space[a] for a in window.row_axes])
    if depth_stride is None or row_stride is None or out_strides[window.column_axis] not in (0, 1):
        return None
    return depth_stride, b_strides[window.column_axis], row_stride


def _emit_window_gemm_call(builder: ir.IRBuilder, kernel: Kernel, out_pointer: ir.Value,
                           operand_pointers: Sequence[ir.Value]) -> None:
    """A convolution as one threaded GEMM whose left matrix the library reads from the image."""
    window = kernel.window
    assert window is not None
    strides = _window_strides(kernel)
    assert strides is not None
    depth_stride, column_stride, row_stride = strides
    dtype = kernel.out_dtype
    i64 = ir.IntType(64)
    values = dict(pixel_rows=int(window.pixel_rows), height=window.image_shape[1], width=window.image_shape[2],
                  pixels0=window.pixels[0], pixels1=window.pixels[1], pixels2=window.pixels[2],
                  taps0=window.taps[0], taps1=window.taps[1], taps2=window.taps[2],
                  stride_n=window.image_strides[0], stride_h=window.image_strides[1],
                  stride_w=window.image_strides[2], stride_c=window.image_strides[3],
                  pixel_step_h=window.pixel_step[0], pixel_step_w=window.pixel_step[1],
                  tap_step_h=window.tap_step[0], tap_step_w=window.tap_step[1],
                  shift_h=window.shift[0], shift_w=window.shift[1])
    geometry = builder.alloca(i64, size=len(WINDOW_FIELDS))
    for index, field in enumerate(WINDOW_FIELDS):
        builder.store(ir.Constant(i64, values[field]), builder.gep(geometry, [ir.Constant(i64, index)],
                                                                   source_etype=i64))
    space = kernel.space
    rows = math.prod(space[a] for a in window.row_axes)
    depth = math.prod(space[a] for a in window.depth_axes)
    image_access, b_access = kernel.operands
    gemm = declare_function(builder.module, WINDOW_LIBRARY_SYMBOL.format(dtype=dtype.name), ir.VoidType(),
                            window_library_signature().args)
    builder.call(gemm, [
        ir.Constant(i64, thread_count()), geometry,
        ir.Constant(i64, rows), ir.Constant(i64, space[window.column_axis]), ir.Constant(i64, depth),
        element_pointer(builder, operand_pointers[0], dtype, ir.Constant(i64, image_access.offset)),
        element_pointer(builder, operand_pointers[1], dtype, ir.Constant(i64, b_access.offset)),
        ir.Constant(i64, depth_stride), ir.Constant(i64, column_stride),
        element_pointer(builder, out_pointer, dtype, ir.Constant(i64, kernel.out.offset)),
        ir.Constant(i64, row_stride), ir.Constant(ir.DoubleType(), kernel.scale),
        ir.Constant(i64, int(kernel.accumulate))])


def _gemm_threads(b: ir.IRBuilder) -> ir.Value:
    """The threads a GEMM may split across: ``graphgrad_pool_threads()``, 1 while other steps run
    (a product split for two threads but run serially packs its A block twice). A GEMM's split
    never changes its sums (each element's depth is walked in one order), so neither does this;
    a window product's depth split does, so it is always split alike (serially while others run)."""
    threads = declare_function(b.module, POOL_THREADS_SYMBOL, ir.IntType(64), [])
    return b.call(threads, [])


def _emit_gemm_call(builder: ir.IRBuilder, kernel: Kernel, out_pointer: ir.Value,
                    operand_pointers: Sequence[ir.Value], start: ir.Value, stop: ir.Value, split: bool) -> None:
    """A matmul kernel as (a loop over batch indices of) one blocked GEMM: the outermost batch
    loop runs over [start, stop); ``split``: the pool runs parts of that loop, so each GEMM keeps
    to the thread it is on, else each is threaded."""
    if kernel.window is not None:
        _emit_window_gemm_call(builder, kernel, out_pointer, operand_pointers)
        return
    layout = kernel.matmul
    assert layout is not None
    a_access, b_access = kernel.operands
    dtype = kernel.out_dtype
    i64 = ir.IntType(64)
    folded = gemm_rows(kernel)
    batch, rows = folded.batch, folded.count
    batch_indices: list[ir.Value] = [ir.Constant(i64, 0)] * len(batch)

    def call_gemm(b: ir.IRBuilder) -> None:
        def pointer(base: ir.Value, strides: Sequence[int], offset: int) -> ir.Value:
            index = linear_index(b, batch_indices, [strides[a] for a in batch], offset)
            return element_pointer(b, base, dtype, index)
        space = kernel.space
        gemm = declare_function(b.module, LIBRARY_SYMBOL.format(dtype=dtype.name), ir.VoidType(),
                                library_signature().args)
        b.call(gemm, [
            ir.Constant(i64, 1) if split else _gemm_threads(b),
            ir.Constant(i64, rows), ir.Constant(i64, space[layout.n]), ir.Constant(i64, space[layout.k]),
            pointer(operand_pointers[0], a_access.strides, a_access.offset),
            ir.Constant(i64, folded.left_stride), ir.Constant(i64, a_access.strides[layout.k]),
            pointer(operand_pointers[1], b_access.strides, b_access.offset),
            ir.Constant(i64, b_access.strides[layout.k]), ir.Constant(i64, b_access.strides[layout.n]),
            pointer(out_pointer, kernel.out.strides, kernel.out.offset),
            ir.Constant(i64, folded.out_stride),
            ir.Constant(ir.DoubleType(), kernel.scale), ir.Constant(i64, int(kernel.accumulate))])

    def walk_batch(b: ir.IRBuilder, depth: int) -> None:
        if depth == len(batch):
            call_gemm(b)
            return

        def trip(b: ir.IRBuilder, index: ir.Value) -> None:
            batch_indices[depth] = b.add(start, index) if depth == 0 else index
            walk_batch(b, depth + 1)
        emit_loop(b, b.sub(stop, start) if depth == 0 else kernel.space[batch[depth]], trip,
                  name=f"batch{depth}")

    walk_batch(builder, 0)


PROFILE_SYMBOL = "graphgrad_profile"


def build_module(program: Program, profile: bool = False) -> ir.Module:
    """The LLVM module of one step: kernels plus the ``graphgrad_step(ptr buffers)`` entry point.

    With ``profile``, the step also records the CPU's cycle counter before the first kernel and
    after each one into the global array ``graphgrad_profile``, and each part of a split kernel
    its own start, end and thread into ``graphgrad_profile_parts`` (see ``Executable.profile``).
    """
    machine = host_target_machine()
    module = ir.Module(name="graphgrad_step")
    module.triple = machine.triple
    module.data_layout = str(machine.target_data)
    threads = thread_count()
    plans = [plan_kernel(kernel, threads) for kernel in program.kernels]
    functions = [emit_kernel(module, kernel, plan) for kernel, plan in zip(program.kernels, plans)]
    step = ir.Function(module, ir.FunctionType(ir.VoidType(), [PTR]), name=STEP_SYMBOL)
    builder = ir.IRBuilder(step.append_basic_block("entry"))
    table = step.args[0]
    loaded: dict[int, ir.Value] = {}
    i64 = ir.IntType(64)

    stacks = {buffer.index for buffer in program.buffers if buffer.role == "stack"}

    def buffer_pointer(index: int) -> ir.Value:
        if index in stacks:   # a stack may move when it grows: load its address where it is used
            slot = builder.gep(table, [ir.Constant(i64, index)], inbounds=True, source_etype=PTR)
            return builder.load(slot, typ=PTR)
        if index not in loaded:
            slot = builder.gep(table, [ir.Constant(i64, index)], inbounds=True, source_etype=PTR)
            loaded[index] = builder.load(slot, typ=PTR)
        return loaded[index]

    part_slots = None
    first_slots = [0] * len(plans)
    if profile:
        counts = [plan.parts if plan.parts > 1 else 0 for plan in plans]
        first_slots = [sum(counts[:k]) for k in range(len(counts))]
        slots_type = ir.ArrayType(ir.IntType(64), 3 * max(sum(counts), 1))
        part_slots = ir.GlobalVariable(module, slots_type, name=PROFILE_PARTS_SYMBOL)
        part_slots.initializer = ir.Constant(slots_type, None)
    widest = max([len(kernel_buffers(k)) for k, p in zip(program.kernels, plans) if p.parts > 1] or [0])
    context = builder.alloca(PTR, size=widest) if widest else None
    parallel = declare_function(module, PARALLEL_SYMBOL, ir.VoidType(), [PTR, PTR, i64]) if widest else None

    def run(kernel: Kernel, plan: KernelPlan, main: ir.Function, init: ir.Function | None, position: int) -> None:
        pointers = [buffer_pointer(i) for i in kernel_buffers(kernel)]
        if plan.partial:
            assert context is not None and parallel is not None and init is not None
            _emit_partial_run(builder, kernel, plan, main, init, pointers, context, parallel, part_slots,
                              first_slots[position])
            return
        if init is not None:
            builder.call(init, pointers)
        if plan.parts > 1:
            assert context is not None and parallel is not None
            for i, pointer in enumerate(pointers):
                builder.store(pointer, builder.gep(context, [ir.Constant(i64, i)], source_etype=PTR))
            part = _emit_part(module, kernel, main, plan, len(pointers), part_slots, first_slots[position])
            builder.call(parallel, [part, context, ir.Constant(i64, plan.parts)])
        else:
            builder.call(main, pointers + [ir.Constant(i64, 0), ir.Constant(i64, plan.outer)])

    stamps = None
    if profile:
        counter_type = ir.ArrayType(ir.IntType(64), len(program.kernels) + 1)
        stamps = ir.GlobalVariable(module, counter_type, name=PROFILE_SYMBOL)
        stamps.initializer = ir.Constant(counter_type, None)
        read_counter = declare_function(module, "llvm.readcyclecounter", ir.IntType(64), [])

    # With branches and loops a kernel may run many times or not at all: its slot then sums the
    # cycles since the stamp before each of its runs (the runtime turns the sums back into stamps).
    summing = stamps is not None and program.schedule is not None
    last_stamp = builder.alloca(ir.IntType(64)) if summing else None

    def stamp(position: int) -> None:
        if stamps is None:
            return
        slot = builder.gep(stamps, [ir.Constant(ir.IntType(32), 0), ir.Constant(ir.IntType(32), position)])
        now = builder.call(read_counter, [])
        if not summing:
            builder.store(now, slot)
            return
        assert last_stamp is not None
        if position == 0:
            builder.store(now, slot)
            for later in range(1, len(program.kernels) + 1):
                builder.store(ir.Constant(ir.IntType(64), 0), builder.gep(
                    stamps, [ir.Constant(ir.IntType(32), 0), ir.Constant(ir.IntType(32), later)]))
        else:
            elapsed = builder.sub(now, builder.load(last_stamp, typ=ir.IntType(64)))
            builder.store(builder.add(builder.load(slot, typ=ir.IntType(64)), elapsed), slot)
        builder.store(now, last_stamp)

    if program.schedule is not None:
        for index in range(len(program.buffers) + 1):  # loaded where they dominate every branch and loop
            if index not in stacks:
                buffer_pointer(index)
    stamp(0)

    def run_kernel(position: int) -> None:
        kernel = program.kernels[position]
        main, init = functions[position]
        run(kernel, plans[position], main, init, position)
        stamp(position + 1)
        if kernel.check:
            emit_check_call(builder, kernel, position, buffer_pointer(kernel.out.buffer), buffer_pointer(len(program.buffers)))
    emit_schedule(builder, program.steps(), run_kernel, buffer_pointer,
                  lambda step: emit_reserve(builder, step, table, buffer_pointer, buffer_pointer(len(program.buffers))))
    builder.ret_void()
    count_running_step(step)
    return module


def emit_check_call(builder: ir.IRBuilder, kernel: Kernel, position: int, out_pointer: ir.Value,
                    status_pointer: ir.Value) -> None:
    """After ``kernel`` (the ``position``-th of the step) ran: if its output holds NaN or Inf,
    write ``position + 1`` to the step's status word and return from the step at once."""
    check = emit_numerics_check(builder.module, kernel)
    failed = builder.append_basic_block(f"{kernel.name}.failed")
    passed = builder.append_basic_block(f"{kernel.name}.passed")
    builder.cbranch(builder.call(check, [out_pointer]), failed, passed)
    builder.position_at_end(failed)
    builder.store(ir.Constant(ir.IntType(64), position + 1), status_pointer)
    builder.ret_void()
    builder.position_at_end(passed)


def emit_numerics_check(module: ir.Module, kernel: Kernel) -> ir.Function:
    """``i1 check(ptr out)``: whether any element ``kernel`` wrote is NaN or Inf."""
    dtype = kernel.out_dtype
    function = ir.Function(module, ir.FunctionType(ir.IntType(1), [PTR]), name=f"{kernel.name}_check")
    function.linkage = "internal"
    builder = ir.IRBuilder(function.append_basic_block("entry"))
    written = [a for a in range(len(kernel.space)) if a not in kernel.reduce_axes or kernel.scan]
    indices: list[ir.Value] = []

    def level(b: ir.IRBuilder, depth: int, bad: ir.Value) -> ir.Value:
        if depth == len(written):
            offset = ir.Constant(ir.IntType(64), kernel.out.offset)
            for axis, index in zip(written, indices):
                offset = b.add(offset, b.mul(index, ir.Constant(ir.IntType(64), kernel.out.strides[axis])))
            value = load_element(b, function.args[0], dtype, offset)
            difference = b.fsub(value, value)  # NaN exactly when value is NaN or +-Inf
            return b.or_(bad, b.fcmp_unordered("uno", difference, difference))

        def trip(b: ir.IRBuilder, index: ir.Value, carried: list[ir.Value]) -> list[ir.Value]:
            indices.append(index)
            result = level(b, depth + 1, carried[0])
            indices.pop()
            return [result]
        return emit_carried_loop(b, kernel.space[written[depth]], trip, [bad], name=f"check{depth}")[0]

    builder.ret(level(builder, 0, ir.Constant(ir.IntType(1), 0)))
    return function


def optimize(module_text: str, tier: Tier = FULL) -> llvm.ModuleRef:
    """Parse, verify and optimise an LLVM module for the host CPU with ``tier``'s IR passes (O3
    unless told otherwise; see ``tiers``)."""
    with LLVM_LOCK:
        parsed = llvm.parse_assembly(module_text)
        parsed.verify()
        if tier.passes is None:
            return parsed
        tuning = llvm.create_pipeline_tuning_options(speed_level=tier.passes)
        tuning.loop_vectorization = tier.vectorize
        tuning.slp_vectorization = tier.vectorize
        tuning.loop_unrolling = tier.unroll
        tuning.loop_interleaving = tier.interleave
        builder = llvm.create_pass_builder(host_target_machine(), tuning)
        # LLVM takes a fixed interleave count only as a process-wide option: set for this run
        # of the passes alone (LLVM_LOCK is held), then back to the cost model's choice.
        forced = tier.interleave and tier.interleave_count > 0
        if forced:
            llvm.set_option("", f"-force-vector-interleave={tier.interleave_count}")
        try:
            builder.getModulePassManager().run(parsed, builder)
        finally:
            if forced:
                llvm.set_option("", "-force-vector-interleave=0")
        return parsed


def emit_assembly(module: llvm.ModuleRef) -> str:
    with LLVM_LOCK:
        return host_target_machine().emit_assembly(module)

"""NVPTX code generation: the GPU schedule of each kernel and its lowering to PTX.

The CPU lowers a kernel's outer index space to loops; here a schedule step maps each kernel onto
blocks and threads (``schedule_kernel``), as a ``gpu_kernel.ScheduledKernel``:
- by default one thread per output element, in a grid-stride loop, the thread running the
  element's reduced axes itself with a register accumulator;
- a reduction over many elements per output (``GpuLimits.reduce_min_extent``): a block per
  output element, strided folds in registers, then a tree in shared memory with barriers.
The same scheduled kernels are lowered to PTX here and to host code by ``gpu_kernel`` for
``target="cuda-emulated"``. What a thread computes at a point is emitted by ``kernel_body``, as on
the CPU; scalar lowering (and the polynomial transcendentals) comes from ``common``.
"""
from __future__ import annotations

import functools
from dataclasses import dataclass
from typing import Sequence

import llvmlite.binding as llvm
from llvmlite import ir

from ..kernel_ir import Kernel, Program
from .common import (LLVM_LOCK, I64, LoopAxis, combine, emit_carried_loop, emit_loop, identity_of, load_element,
                     loop_axes, register_type, store_element)
from .gpu_kernel import (Barrier, Launch, Phase, Repeat, ScheduledKernel, SharedArray, ThreadState,
                         emit_ptx_kernel)
from .kernel_body import BodyRules, KernelBody, ReducedLoop, kernel_buffers

TRIPLE = "nvptx64-nvidia-cuda"
DEFAULT_ARCH = "sm_80"
BLOCK_SIZE = 256
# A thread runs every reduced axis of its output element itself, in order and in a register, and
# reads the output only to add to it; threads may scatter into the same element, so adds are atomic.
GPU_RULES = BodyRules(output_holds_partial=False, reassociate=False, atomic_scatter=True)


@functools.lru_cache(maxsize=4)
def target_machine(arch: str = DEFAULT_ARCH) -> llvm.TargetMachine:
    llvm.initialize_all_targets()
    llvm.initialize_all_asmprinters()
    return llvm.Target.from_triple(TRIPLE).create_target_machine(cpu=arch, opt=3)


@dataclass(frozen=True)
class GpuLimits:
    """The knobs of the GPU schedule. The defaults are for a real GPU; tests use small ones so that
    partial blocks, grid-stride loops and multi-block reductions are exercised on little data."""

    block: int = BLOCK_SIZE          # threads per block of a one-thread-per-element kernel
    max_grid: int = 65535            # blocks at most; a grid-stride loop covers the rest
    reduce_block: int = 256          # threads per block of a block reduction (a power of two)
    reduce_min_extent: int = 1024    # reduced elements per output from which a block reduces one output


DEFAULT_LIMITS = GpuLimits()


def _decompose(b: ir.IRBuilder, index: ir.Value, axes: Sequence[LoopAxis], chosen: Sequence[int],
               values: list[ir.Value]) -> None:
    """Split a flat index over the ``chosen`` loop axes (the last one fastest) into ``values``."""
    remaining = index
    for k in reversed(chosen):
        size = ir.Constant(I64, axes[k].size)
        values[k] = b.urem(remaining, size)
        remaining = b.udiv(remaining, size)


def _strided_trips(b: ir.IRBuilder, first: ir.Value, count: ir.Value | int, stride: ir.Value | int) -> ir.Value:
    """How many of first, first + stride, ... are below count."""
    count = ir.Constant(I64, count) if isinstance(count, int) else count
    stride = ir.Constant(I64, stride) if isinstance(stride, int) else stride
    ahead = b.sub(count, first)
    trips = b.sdiv(b.add(ahead, b.sub(stride, ir.Constant(I64, 1))), stride)
    return b.select(b.icmp_signed(">", ahead, ir.Constant(I64, 0)), trips, ir.Constant(I64, 0))


def _product(sizes: Sequence[int]) -> int:
    total = 1
    for n in sizes:
        total *= n
    return total


def _per_element(kernel: Kernel, limits: GpuLimits) -> ScheduledKernel:
    """One thread per output element, in a grid-stride loop; the thread runs the element's reduced
    axes itself (in order, in a register)."""
    axes = loop_axes(kernel)  # a size-0 reduced axis is a loop of no trips: the result is the identity
    outputs = _product(kernel.out_space)
    output_axes = [k for k, axis in enumerate(axes) if not axis.reduced]
    block = limits.block
    grid = max(1, min(-(-outputs // block), limits.max_grid))

    def emit(state: ThreadState) -> None:
        b = state.b
        body = KernelBody(kernel, state.arguments, axes, GPU_RULES)
        first = b.add(b.mul(state.block, ir.Constant(I64, block)), state.thread)

        def element(b: ir.IRBuilder, trip: ir.Value) -> None:
            _decompose(b, b.add(first, b.mul(trip, ir.Constant(I64, block * grid))), axes, output_axes, body.values)
            body.emit_point(b, [ReducedLoop(k, axis.size) for k, axis in enumerate(axes) if axis.reduced])
        emit_loop(b, _strided_trips(b, first, outputs, block * grid), element, name="element")

    return ScheduledKernel(kernel.name, len(kernel_buffers(kernel)), Launch(block, grid), (Phase(emit),),
                           description=f"one thread per output element ({outputs}), grid-stride")


def _uses_block_reduction(kernel: Kernel, limits: GpuLimits) -> bool:
    reduced = _product(kernel.space[a] for a in kernel.reduce_axes)
    return (bool(kernel.reduce_axes) and not kernel.scan and kernel.scatter is None and kernel.matmul is None
            and reduced >= limits.reduce_min_extent)


def _block_reduction(kernel: Kernel, limits: GpuLimits) -> ScheduledKernel:
    """A block per output element (a grid-stride loop over them): each thread folds a strided
    share of the reduced elements in a register, then a tree in shared memory combines the
    block's partial results, and thread 0 stores the element."""
    axes = loop_axes(kernel)
    dtype = kernel.out_dtype
    element = register_type(dtype)
    outputs = _product(kernel.out_space)
    output_axes = [k for k, axis in enumerate(axes) if not axis.reduced]
    reduced_axes = [k for k, axis in enumerate(axes) if axis.reduced]
    reduced = _product(axes[k].size for k in reduced_axes)
    block = limits.reduce_block
    grid = max(1, min(outputs, limits.max_grid))
    levels = block.bit_length() - 1
    assert block == 1 << levels, "reduce_block must be a power of two"

    def point(state: ThreadState) -> tuple[ir.IRBuilder, KernelBody]:
        body = KernelBody(kernel, state.arguments, axes, GPU_RULES)
        output = state.b.add(state.block, state.b.mul(state.repeat[0], ir.Constant(I64, grid)))
        _decompose(state.b, output, axes, output_axes, body.values)
        return state.b, body

    def fold(state: ThreadState) -> None:
        b, body = point(state)

        def trip(b: ir.IRBuilder, index: ir.Value, carried: list[ir.Value]) -> list[ir.Value]:
            _decompose(b, b.add(state.thread, b.mul(index, ir.Constant(I64, block))), axes, reduced_axes, body.values)
            lowering = body.lowering(b)
            return [combine(lowering, kernel.combiner, dtype, carried[0], body.term(b, lowering))]
        total = emit_carried_loop(b, _strided_trips(b, state.thread, reduced, block), trip,
                                  [identity_of(kernel.combiner, dtype)], name="fold")[0]
        b.store(total, b.gep(state.shared("partials"), [state.thread], source_etype=element))

    def tree_step(state: ThreadState) -> None:
        b, body = point(state)
        half = b.lshr(ir.Constant(I64, block // 2), state.repeat[1])
        with b.if_then(b.icmp_unsigned("<", state.thread, half)):
            mine = b.gep(state.shared("partials"), [state.thread], source_etype=element)
            other = b.gep(state.shared("partials"), [b.add(state.thread, half)], source_etype=element)
            lowering = body.lowering(b)
            b.store(combine(lowering, kernel.combiner, dtype, b.load(mine, typ=element), b.load(other, typ=element)),
                    mine)

    def store(state: ThreadState) -> None:
        b, body = point(state)
        with b.if_then(b.icmp_unsigned("==", state.thread, ir.Constant(I64, 0))):
            for k in reduced_axes:
                body.values[k] = ir.Constant(I64, 0)
            lowering = body.lowering(b)
            total = b.load(state.shared("partials"), typ=element)
            index = lowering.out_index()
            if kernel.accumulate:
                total = combine(lowering, kernel.combiner, dtype, load_element(b, body.out_pointer, dtype, index), total)
            store_element(b, total, body.out_pointer, dtype, index)

    per_block = Repeat(lambda b, block_index: _strided_trips(b, block_index, outputs, grid), (
        Phase(fold), Barrier(),
        Repeat(lambda b, block_index: ir.Constant(I64, levels), (Phase(tree_step), Barrier())),
        Phase(store), Barrier()))
    return ScheduledKernel(kernel.name, len(kernel_buffers(kernel)), Launch(block, grid), (per_block,),
                           shared=(SharedArray("partials", element, block),),
                           description=f"a block per output element ({outputs}) reducing {reduced} "
                                       f"elements: strided register folds, then a shared-memory tree")


def schedule_kernel(kernel: Kernel, limits: GpuLimits = DEFAULT_LIMITS) -> ScheduledKernel:
    """How ``kernel`` runs on the GPU: its launch and what each thread of a block does."""
    if _uses_block_reduction(kernel, limits):
        return _block_reduction(kernel, limits)
    return _per_element(kernel, limits)


def schedule_program(program: Program, limits: GpuLimits = DEFAULT_LIMITS) -> list[ScheduledKernel]:
    return [schedule_kernel(kernel, limits) for kernel in program.kernels]


def format_schedule(scheduled: Sequence[ScheduledKernel]) -> str:
    """The GPU schedule as text, one line per kernel (shown after the kernels in ``dump("kernels")``)."""
    lines = ["gpu schedule:"]
    for kernel in scheduled:
        shared = sum(array.count * _BYTES[str(array.element)] for array in kernel.shared)
        lines.append(f"  {kernel.name}: grid {kernel.launch.grid} x block {kernel.launch.block}, "
                     f"shared {shared} B: {kernel.description}")
    return "\n".join(lines) + "\n"


_BYTES = {"float": 4, "double": 8, "i32": 4, "i64": 8, "i1": 1, "i8": 1}


def build_module(program: Program, limits: GpuLimits = DEFAULT_LIMITS, arch: str = DEFAULT_ARCH) -> ir.Module:
    module = ir.Module(name="graphgrad_kernels")
    module.triple = TRIPLE
    module.data_layout = str(target_machine(arch).target_data)
    for scheduled in schedule_program(program, limits):
        emit_ptx_kernel(module, scheduled)
    return module


def emit_ptx(program: Program, arch: str = DEFAULT_ARCH, limits: GpuLimits = DEFAULT_LIMITS) -> str:
    """PTX text with one ``.entry`` per kernel, launched as ``schedule_program`` says."""
    with LLVM_LOCK:
        parsed = llvm.parse_assembly(str(build_module(program, limits, arch)))
        parsed.verify()
        machine = target_machine(arch)
        tuning = llvm.create_pipeline_tuning_options(speed_level=3)
        builder = llvm.create_pass_builder(machine, tuning)
        builder.getModulePassManager().run(parsed, builder)
        return machine.emit_assembly(parsed)

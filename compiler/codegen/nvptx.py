"""NVPTX code generation: the GPU schedule of each kernel and its lowering to PTX.

The CPU lowers a kernel's outer index space to loops; here a schedule step maps each kernel onto
blocks and threads (``schedule_kernel``), as a ``gpu_kernel.ScheduledKernel``:
- by default one thread per output element, in a grid-stride loop, the thread running the
  element's reduced axes itself with a register accumulator; an elementwise kernel whose output
  rows come in whole 16-byte groups takes a group per thread, so that its loads and stores of
  aligned rows become vector accesses (``ld.global.v4.f32``);
- a reduction over many elements per output (``GpuLimits.reduce_min_extent``): a block per
  output element, strided folds in registers, then warp shuffles and one barrier;
- a matmul (and the fused ``var -= c * (a @ b)`` update): a shared-memory tiled,
  register-blocked GEMM, the scale and the update applied when a tile is stored; the next depth
  step's tiles are copied into a second shared buffer while the current one is multiplied
  (``cp.async`` on sm_80 and later, plain copies before);
- a convolution that reads as a product (``Kernel.window``: conv2d, its filter gradient, its input
  gradient at stride 1): the same GEMM over an implicit im2col, its A tiles read straight from
  the image through the window, zero in the padding;
- a product with too few output tiles to fill the GPU and a long depth (a filter gradient: taps x
  features summed over every pixel) is split along the depth before scheduling (split-K,
  ``split_products``): a block per (tile, depth slice) stores its partial product into a
  workspace, and a second kernel sums the slices in order into the output (deterministic);
- a scan along a long axis (``GpuLimits.scan_min_extent``): a block per row, scanning chunks of
  the row in shared memory and carrying the running total between them.
The same scheduled kernels are lowered to PTX here and to host code by ``gpu_kernel`` for
``target="cuda-emulated"``. What a thread computes at a point is emitted by ``kernel_body``, as on
the CPU; scalar lowering (and the polynomial transcendentals) comes from ``common``.
"""
from __future__ import annotations

import functools
import math
import os
import re
import shutil
import subprocess
import tempfile
from dataclasses import dataclass, fields, replace
from typing import Any, Sequence

import llvmlite
import llvmlite.binding as llvm
from llvmlite import ir

from .. import dtypes
from ..kernel_ir import (Access, Branch, Buffer, Kernel, Load, Loop, Prim, Program, Step, WindowMatmul,
                         contiguous_strides)
from .common import (LLVM_LOCK, I32, I64, LoopAxis, combine, emit_carried_loop, emit_loop, emit_sum_in_blocks,
                     identity_of, load_element, loop_axes, register_type, store_element, sums_in_blocks)
from .gpu_kernel import (AsyncCopy, AsyncWait, Barrier, Launch, Phase, Register, Repeat, ScheduledKernel, SharedArray,
                         Statement, ThreadState, WarpShuffleDown, emit_ptx_kernel, warp_width)
from .kernel_body import BodyRules, KernelBody, ReducedLoop, kernel_buffers

TRIPLE = "nvptx64-nvidia-cuda"
DEFAULT_ARCH = "sm_80"
BLOCK_SIZE = 256
# A thread runs every reduced axis of its output element itself, in order and in a register, and
# reads the output only to add to it; threads may scatter into the same element, so adds are atomic.
# A thread's float32 sum is not spread over lanes, so its blocks are short: one float64 add per 64
# elements costs little even where float64 runs at 1/64 of float32's rate.
GPU_RULES = BodyRules(output_holds_partial=False, reassociate=False, atomic_scatter=True, sum_block=64)


# The warp-synchronous instructions of the schedules (shfl.sync in block reductions) need PTX ISA
# 6.0; LLVM's default for sm_50 to sm_62 is older, and it stops the process at the first one.
MIN_PTX_ISA = 60


@functools.lru_cache(maxsize=8)
def target_machine(arch: str = DEFAULT_ARCH, ptx_isa: int | None = None) -> llvm.TargetMachine:
    """``ptx_isa`` (78 for PTX ISA 7.8) must be at least the oldest ``arch`` accepts and
    ``MIN_PTX_ISA``: LLVM stops the process otherwise. None: the oldest that is both."""
    if ptx_isa is None:
        ptx_isa = max(oldest_ptx_isa(arch), MIN_PTX_ISA)
    return _llvm_target_machine(arch, f"+ptx{ptx_isa}")


def _llvm_target_machine(arch: str, features: str) -> llvm.TargetMachine:
    llvm.initialize_all_targets()
    llvm.initialize_all_asmprinters()
    return llvm.Target.from_triple(TRIPLE).create_target_machine(cpu=arch, features=features, opt=3)


@functools.lru_cache(maxsize=None)
def oldest_ptx_isa(arch: str) -> int:
    """The oldest PTX ISA version that can target ``arch`` (LLVM's default for it; 32, for PTX ISA
    3.2, for a processor LLVM does not know and ignores)."""
    with LLVM_LOCK:
        text = _llvm_target_machine(arch, "").emit_assembly(llvm.parse_assembly(f'target triple = "{TRIPLE}"'))
    major, minor = re.search(r"^\.version (\d+)\.(\d)", text, re.M).groups()  # type: ignore[union-attr]
    return int(major) * 10 + int(minor)


# LLVM's PTX ISA for a processor it does not know, and for sm_20 to sm_3x, which no current
# driver runs.
_UNKNOWN_ARCH_ISA = 32


def check_arch(arch: object) -> str:
    """``arch`` when it names a GPU architecture (``sm_XY``) LLVM's NVPTX backend writes PTX for,
    else a ValueError: LLVM would ignore an unknown one and stop the whole process at the first
    instruction it then lacks."""
    if not isinstance(arch, str) or not re.fullmatch(r"sm_[0-9]{2,3}[a-z]?", arch):
        raise ValueError(f"unknown GPU architecture {arch!r}; give one like 'sm_80' or 'sm_90'")
    if oldest_ptx_isa(arch) <= _UNKNOWN_ARCH_ISA:
        raise ValueError(f"GPU architecture {arch!r} is not one this LLVM (llvmlite {llvmlite.__version__}) writes "
                         "PTX for; known ones include sm_75, sm_80, sm_86, sm_89, sm_90 and sm_100")
    return arch


_VECTOR_BYTES = 16   # the widest load of shared memory, and what a shared row is aligned to
MAX_BLOCK_THREADS = 1024
MAX_STATIC_SHARED_BYTES = 48 * 1024


@dataclass(frozen=True)
class GpuLimits:
    """The knobs of the GPU schedule. The defaults are for a real GPU; tests use small ones so that
    partial blocks, grid-stride loops and multi-block reductions are exercised on little data."""

    block: int = BLOCK_SIZE          # threads per block of a one-thread-per-element kernel
    max_grid: int = 65535            # blocks at most; a grid-stride loop covers the rest
    reduce_block: int = 256          # threads per block of a block reduction (a power of two)
    reduce_min_extent: int = 1024    # reduced elements per output from which a block reduces one output
    scan_block: int = 256            # threads per block of a block scan (a power of two)
    scan_min_extent: int = 1024      # scanned elements per row from which a block scans one row
    tile_m: int = 64                 # a matmul block computes a tile_m x tile_n tile of the product,
    tile_n: int = 64                 # stepping through the depth tile_k at a time through shared memory;
    tile_k: int = 16                 # each thread computes thread_m x thread_n of it in registers
    thread_m: int = 4
    thread_n: int = 4
    vector_bytes: int = 16           # an elementwise thread takes this many bytes of consecutive outputs
    # A tiled product with fewer output tiles than this (two per SM of a large GPU) is split along
    # its depth (split-K) into slices of at least split_min_steps depth steps each.
    split_min_blocks: int = 264
    split_min_steps: int = 4


    def __post_init__(self) -> None:
        def fail(why: str) -> None:
            raise ValueError(f"GpuLimits: {why}")
        for field in fields(self):
            value = getattr(self, field.name)
            if not isinstance(value, int) or isinstance(value, bool) or value < 1:
                fail(f"{field.name} must be a whole number, at least 1; got {value!r}")
        for name in ("block", "reduce_block", "scan_block"):
            if getattr(self, name) > MAX_BLOCK_THREADS:
                fail(f"{name}={getattr(self, name)} is more threads than a block can have ({MAX_BLOCK_THREADS})")
        for name in ("reduce_block", "scan_block", "vector_bytes"):
            value = getattr(self, name)
            if value & (value - 1):
                fail(f"{name}={value} must be a power of two")
        if self.vector_bytes > _VECTOR_BYTES:
            fail(f"vector_bytes={self.vector_bytes} is wider than the widest load ({_VECTOR_BYTES} bytes)")
        if self.max_grid >= 1 << 31:
            fail(f"max_grid={self.max_grid} is more blocks than a launch can have ({(1 << 31) - 1})")
        # Each thread of a matmul block computes thread_m x thread_n of the block's tile.
        for tile, per_thread, what in (("tile_m", "thread_m", "rows"), ("tile_n", "thread_n", "columns")):
            if getattr(self, tile) % getattr(self, per_thread):
                fail(f"{tile}={getattr(self, tile)} is not a multiple of {per_thread}={getattr(self, per_thread)} "
                     f"(each thread computes {per_thread} {what} of a tile)")
        threads = (self.tile_m // self.thread_m) * (self.tile_n // self.thread_n)
        if threads > MAX_BLOCK_THREADS:
            fail(f"a {self.tile_m}x{self.tile_n} tile at {self.thread_m}x{self.thread_n} per thread takes {threads} "
                 f"threads, more than a block can have ({MAX_BLOCK_THREADS})")
        # A float64 product stages two buffers of each operand's tile_k-deep tile, each row padded
        # by 16 bytes; statically declared shared memory stops at 48 KiB (ptxas refuses more).
        staged = 8 * 2 * self.tile_k * (self.tile_m + self.tile_n + 2 * (_VECTOR_BYTES // 8))
        if staged > MAX_STATIC_SHARED_BYTES:
            fail(f"{self.tile_m}x{self.tile_n} tiles {self.tile_k} deep stage {staged} bytes of float64 in shared "
                 f"memory, more than a kernel may declare ({MAX_STATIC_SHARED_BYTES})")


DEFAULT_LIMITS = GpuLimits()
# A tiled product computes element indices in 32 bits when every index it forms is below this.
NARROW_INDEX_LIMIT = 2 ** 30


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


def _vector_width(kernel: Kernel, axes: Sequence[LoopAxis], limits: GpuLimits) -> int:
    """How many consecutive output elements each thread of an elementwise kernel takes (1 for
    other kernels): ``vector_bytes`` worth when the innermost axis runs along the output with
    stride 1 in whole groups that start on such a boundary. Loads and stores of a group then
    become single vector accesses (``ld.global.v4.f32``) where the operands' strides and offsets
    let LLVM prove the alignment; the rest stay scalar."""
    if kernel.reduce_axes or kernel.scatter is not None or not axes or kernel.out_dtype == dtypes.bool_:
        return 1
    width = limits.vector_bytes // kernel.out_dtype.itemsize
    inner = axes[-1]
    if width <= 1 or inner.reduced or inner.out_stride != 1 or inner.size % width or kernel.out.offset % width:
        return 1
    return width if all(axis.out_stride % width == 0 for axis in axes[:-1]) else 1


def _per_element(kernel: Kernel, limits: GpuLimits) -> ScheduledKernel:
    """One thread per output element (or per group of ``_vector_width`` consecutive ones), in a
    grid-stride loop; the thread runs the element's reduced axes itself (in order, in a register)."""
    axes = loop_axes(kernel)  # a size-0 reduced axis is a loop of no trips: the result is the identity
    outputs = _product(kernel.out_space)
    output_axes = [k for k, axis in enumerate(axes) if not axis.reduced]
    width = _vector_width(kernel, axes, limits)
    # A thread's group is an index over the output axes with the innermost counted in groups.
    group_axes = [*axes[:-1], replace(axes[-1], size=axes[-1].size // width)] if axes else []
    groups = outputs // width
    block = limits.block
    grid = max(1, min(-(-groups // block), limits.max_grid))

    def emit(state: ThreadState) -> None:
        b = state.b
        body = KernelBody(kernel, state.arguments, axes, GPU_RULES)
        first = b.add(b.mul(state.block, ir.Constant(I64, block)), state.thread)

        def element(b: ir.IRBuilder, trip: ir.Value) -> None:
            _decompose(b, b.add(first, b.mul(trip, ir.Constant(I64, block * grid))), group_axes, output_axes,
                       body.values)
            if width == 1:
                body.emit_point(b, [ReducedLoop(k, axis.size) for k, axis in enumerate(axes) if axis.reduced])
                return
            start = b.mul(body.values[-1], ir.Constant(I64, width))
            for lane in range(width):
                body.values[-1] = b.add(start, ir.Constant(I64, lane))
                body.emit_point(b, [])
        emit_loop(b, _strided_trips(b, first, groups, block * grid), element, name="element")

    what = (f"one thread per {width} consecutive output elements ({outputs}, {limits.vector_bytes}-byte accesses)"
            if width > 1 else f"one thread per output element ({outputs})")
    return ScheduledKernel(kernel.name, len(kernel_buffers(kernel)), Launch(block, grid), (Phase(emit),),
                           description=f"{what}, grid-stride")


def _uses_block_reduction(kernel: Kernel, limits: GpuLimits) -> bool:
    reduced = _product(kernel.space[a] for a in kernel.reduce_axes)
    return (bool(kernel.reduce_axes) and not kernel.scan and kernel.scatter is None and kernel.matmul is None
            and kernel.out_dtype != dtypes.bool_ and reduced >= limits.reduce_min_extent)  # shuffles move 32-bit words


def _block_reduction(kernel: Kernel, limits: GpuLimits) -> ScheduledKernel:
    """A block per output element (a grid-stride loop over them): each thread folds a strided
    share of the reduced elements in a register; each warp combines its threads' values with
    shuffles, its first lane leaves the warp's value in shared memory, and after one barrier
    the first warp combines those the same way and thread 0 stores the element."""
    axes = loop_axes(kernel)
    dtype = kernel.out_dtype
    element = register_type(dtype)
    outputs = _product(kernel.out_space)
    output_axes = [k for k, axis in enumerate(axes) if not axis.reduced]
    reduced_axes = [k for k, axis in enumerate(axes) if axis.reduced]
    reduced = _product(axes[k].size for k in reduced_axes)
    block = limits.reduce_block
    grid = max(1, min(outputs, limits.max_grid))
    width = warp_width(block)
    warps = block // width
    assert block & (block - 1) == 0 and warps <= width, "reduce_block must be a power of two, at most 32 warps"
    identity = identity_of(kernel.combiner, dtype)

    def point(state: ThreadState) -> tuple[ir.IRBuilder, KernelBody]:
        body = KernelBody(kernel, state.arguments, axes, GPU_RULES)
        output = state.b.add(state.block, state.b.mul(state.repeat[0], ir.Constant(I64, grid)))
        _decompose(state.b, output, axes, output_axes, body.values)
        return state.b, body

    def fold(state: ThreadState) -> None:
        b, body = point(state)

        def add_term(b: ir.IRBuilder, index: ir.Value, partial: ir.Value) -> ir.Value:
            _decompose(b, b.add(state.thread, b.mul(index, ir.Constant(I64, block))), axes, reduced_axes, body.values)
            lowering = body.lowering(b)
            return combine(lowering, kernel.combiner, dtype, partial, body.term(b, lowering))
        trips = _strided_trips(b, state.thread, reduced, block)
        if sums_in_blocks(kernel.combiner, dtype, -(-reduced // block), GPU_RULES.sum_block):
            total = emit_sum_in_blocks(b, trips, GPU_RULES.sum_block, add_term, identity, name="fold")
        else:
            total = emit_carried_loop(b, trips, lambda b, index, carried: [add_term(b, index, carried[0])],
                                      [identity], name="fold")[0]
        b.store(total, state.register("partial"))

    def add_partner(state: ThreadState) -> None:
        b, body = point(state)
        mine, other = (b.load(state.register(name), typ=element) for name in ("partial", "other"))
        b.store(combine(body.lowering(b), kernel.combiner, dtype, mine, other), state.register("partial"))

    def across_warp(depth: int) -> tuple[Statement, ...]:
        """Lane 0 of each warp ends with the combination of its warp's ``partial`` values."""
        halve = Repeat(lambda b, block_index: ir.Constant(I64, width.bit_length() - 1), (
            WarpShuffleDown("partial", "other",
                            lambda state: state.b.lshr(ir.Constant(I64, width // 2), state.repeat[depth])),
            Phase(add_partner)))
        return (halve,)

    def leave_warp_value(state: ThreadState) -> None:
        b = state.b
        lane = b.urem(state.thread, ir.Constant(I64, width))
        with b.if_then(b.icmp_unsigned("==", lane, ir.Constant(I64, 0))):
            warp = b.udiv(state.thread, ir.Constant(I64, width))
            b.store(b.load(state.register("partial"), typ=element),
                    b.gep(state.shared("warps"), [warp], source_etype=element))

    def take_warp_values(state: ThreadState) -> None:
        b = state.b
        inside = b.icmp_unsigned("<", state.thread, ir.Constant(I64, warps))
        slot = b.gep(state.shared("warps"), [b.select(inside, state.thread, ir.Constant(I64, 0))],
                     source_etype=element)
        b.store(b.select(inside, b.load(slot, typ=element), identity), state.register("partial"))

    def store(state: ThreadState) -> None:
        b, body = point(state)
        with b.if_then(b.icmp_unsigned("==", state.thread, ir.Constant(I64, 0))):
            for k in reduced_axes:
                body.values[k] = ir.Constant(I64, 0)
            lowering = body.lowering(b)
            total = b.load(state.register("partial"), typ=element)
            index = lowering.out_index()
            if kernel.accumulate:
                total = combine(lowering, kernel.combiner, dtype, load_element(b, body.out_pointer, dtype, index), total)
            store_element(b, total, body.out_pointer, dtype, index)

    per_block = Repeat(lambda b, block_index: _strided_trips(b, block_index, outputs, grid), (
        Phase(fold), *across_warp(1), Phase(leave_warp_value), Barrier(),
        Phase(take_warp_values), *across_warp(1), Phase(store), Barrier()))
    return ScheduledKernel(kernel.name, len(kernel_buffers(kernel)), Launch(block, grid), (per_block,),
                           shared=(SharedArray("warps", element, warps),),
                           registers=(Register("partial", element), Register("other", element)),
                           description=f"a block per output element ({outputs}) reducing {reduced} "
                                       f"elements: strided register folds, warp shuffles, one barrier")


def _is_plain_product(kernel: Kernel) -> bool:
    """A matmul kernel whose body is exactly operand 0 times operand 1 (what tiles can stage)."""
    body = kernel.body
    return (kernel.matmul is not None and dtypes.is_floating(kernel.out_dtype) and len(kernel.operands) == 2
            and isinstance(body, Prim) and body.op == "mul"
            and [getattr(a, "operand", None) for a in body.args] == [0, 1]
            and all(isinstance(a, Load) for a in body.args))


def _is_window_product(kernel: Kernel) -> bool:
    """A convolution kernel that reads as a product over an implicit im2col (``Kernel.window``),
    with no empty extent (whose flat indices could not be split)."""
    return (kernel.window is not None and dtypes.is_floating(kernel.out_dtype) and len(kernel.operands) == 2
            and kernel.scatter is None and not kernel.scan and 0 not in kernel.space)


@dataclass(frozen=True)
class SplitKPartial(Kernel):
    """The first kernel of a product split along its depth (split-K), made for the GPU only by
    ``split_products``: the product's kernel with its output replaced by a float workspace
    ``[slices, *out_space]`` (``out`` walks slice 0), no scale and no accumulation. The tiled
    schedule gives each (output tile, depth slice) a block that multiplies ``slice_steps`` depth
    steps of ``tile_k`` from ``slice * slice_steps`` on (the last slice stops at the depth) and
    stores its partial product into that slice of the workspace."""

    slices: int = 1
    slice_steps: int = 0

    def notes(self) -> tuple[str, ...]:
        workspace_slice = _product(self.out_space)
        return (f"split along the depth (split-K): {self.slices} slices of {self.slice_steps} steps of the "
                f"tile's depth (the last one shorter where the depth ends); slice s sums its part of the depth into "
                f"b{self.out.buffer} at offset s * {workspace_slice} (the strides above walk slice 0), and "
                f"{self.name.removesuffix('_partials')}_sum adds the slices in order",)


@dataclass(frozen=True)
class SplitKSum(Kernel):
    """The second kernel of a split product: an ordinary reduction over the workspace's slice
    axis (axis 0) into the product's output, with its scale and accumulation; the GPU runs it a
    thread per output element, adding the slices in order (deterministic, no atomics)."""


def split_k_plan(kernel: Kernel, limits: GpuLimits = DEFAULT_LIMITS) -> tuple[int, int] | None:
    """(slices, depth steps per slice) when the tiled product ``kernel`` has fewer output tiles
    than ``limits.split_min_blocks`` and depth for two slices of ``split_min_steps`` steps or
    more; None when it runs as one kernel. The slices fill about ``split_min_blocks`` blocks."""
    if isinstance(kernel, SplitKPartial) or not (_is_window_product(kernel) or _is_plain_product(kernel)):
        return None
    product = _product_of(kernel)
    if sorted(kernel.reduce_axes) != sorted(product.depth):
        return None
    space = kernel.space
    rows, columns, depth = (_product(space[a] for a in axes) for axes in (product.rows, product.columns, product.depth))
    tiles = _product(space[a] for a in product.batch) * -(-rows // limits.tile_m) * -(-columns // limits.tile_n)
    steps = -(-depth // limits.tile_k)
    if tiles == 0 or tiles >= limits.split_min_blocks:
        return None
    slices = min(-(-limits.split_min_blocks // tiles), steps // max(limits.split_min_steps, 1))
    if slices < 2:
        return None
    slice_steps = -(-steps // slices)
    return -(-steps // slice_steps), slice_steps   # no slice left empty


def _remap_steps(steps: Sequence[Step], positions: Sequence[tuple[int, ...]]) -> tuple[Step, ...]:
    """A schedule with each kernel position replaced by its new positions."""
    moved: list[Step] = []
    for step in steps:
        if isinstance(step, int):
            moved.extend(positions[step])
        elif isinstance(step, Branch):
            moved.append(replace(step, taken=_remap_steps(step.taken, positions),
                                 otherwise=_remap_steps(step.otherwise, positions)))
        elif isinstance(step, Loop):
            moved.append(replace(step, condition=_remap_steps(step.condition, positions),
                                 body=_remap_steps(step.body, positions)))
        else:
            moved.append(step)
    return tuple(moved)


def split_products(program: Program, limits: GpuLimits = DEFAULT_LIMITS) -> Program:
    """The program for the GPU with every tiled product that ``split_k_plan`` splits replaced by a
    ``SplitKPartial`` kernel into a new temporary workspace and a ``SplitKSum`` kernel into its
    output, next to each other. The workspaces (live only between their two kernels) share one
    new arena. ``program`` itself is left as it is (the CPU runs it); without a split it is returned."""
    kernels: list[Kernel] = []
    buffers = list(program.buffers)
    placement = dict(program.placement)
    positions: list[tuple[int, ...]] = []
    arena = len(program.arenas)
    workspace_bytes = 0
    first_assignment = program.first_assignment
    for position, kernel in enumerate(program.kernels):
        plan = split_k_plan(kernel, limits)
        if plan is None:
            positions.append((len(kernels),))
            kernels.append(kernel)
            continue
        slices, slice_steps = plan
        out_space = kernel.out_space
        output_axes = [a for a in range(len(kernel.space)) if a not in kernel.reduce_axes]
        element_strides = contiguous_strides(out_space)
        workspace = Buffer(len(buffers), (slices, *out_space), kernel.out_dtype, "temp",
                           f"split-K partials of {kernel.name}")
        buffers.append(workspace)
        placement[workspace.index] = (arena, 0)
        workspace_bytes = max(workspace_bytes, workspace.nbytes)
        strides = [0] * len(kernel.space)
        for axis, stride in zip(output_axes, element_strides):
            strides[axis] = stride
        partial = SplitKPartial(**{f.name: getattr(kernel, f.name) for f in fields(Kernel)},
                                slices=slices, slice_steps=slice_steps)
        partial = replace(partial, name=f"{kernel.name}_partials", out=Access(workspace.index, tuple(strides)),
                          accumulate=False, scale=1.0, check=None)
        total = SplitKSum(
            name=f"{kernel.name}_sum", space=(slices, *out_space),
            operands=(Access(workspace.index, (_product(out_space), *element_strides)),),
            body=Load(0, kernel.out_dtype), out_dtype=kernel.out_dtype,
            out=Access(kernel.out.buffer, (0, *(kernel.out.strides[a] for a in output_axes)), kernel.out.offset),
            reduce_axes=(0,), combiner="sum", covers=kernel.covers, accumulate=kernel.accumulate,
            scale=kernel.scale, check=kernel.check)
        positions.append((len(kernels), len(kernels) + 1))
        kernels += [partial, total]
        if position < program.first_assignment:
            first_assignment += 1
    if not workspace_bytes:
        return program
    schedule = None if program.schedule is None else _remap_steps(program.schedule, positions)
    return replace(program, buffers=buffers, kernels=kernels, placement=placement,
                   arenas=[*program.arenas, workspace_bytes], first_assignment=first_assignment, schedule=schedule)


@dataclass(frozen=True)
class _Product:
    """How a kernel reads as ``out[batch, row, column] = sum over depth of A[row, depth] * B[depth,
    column]``: the space axes flattened (row-major, in order) into its rows, columns and depth, its
    batch axes, and for a convolution the window through which A reads the image (operand 0);
    otherwise A is operand 0 walked by its strides. B is operand 1 walked by its strides."""

    rows: tuple[int, ...]
    columns: tuple[int, ...]
    depth: tuple[int, ...]
    batch: tuple[int, ...]
    window: WindowMatmul | None = None


def _product_of(kernel: Kernel) -> _Product:
    if kernel.window is not None:
        window = kernel.window
        return _Product(window.row_axes, (window.column_axis,), window.depth_axes, (), window)
    layout = kernel.matmul
    assert layout is not None
    return _Product((layout.m,), (layout.n,), (layout.k,), tuple(layout.batch))


def _constant(value: int) -> ir.Constant:
    return ir.Constant(I64, value)


def _digits(b: ir.IRBuilder, flat: ir.Value, extents: Sequence[int]) -> list[ir.Value]:
    """A flat row-major index over ``extents`` split into one index per extent, of the flat
    index's type (the outermost not reduced modulo its extent: an index past the end gives digits
    that are never read)."""
    digits: list[ir.Value] = [ir.Constant(flat.type, 0)] * len(extents)
    kept = [position for position, extent in enumerate(extents) if extent != 1]
    remaining = flat
    for position in reversed(kept):
        if position == kept[0]:
            digits[position] = remaining
        else:
            digits[position] = b.urem(remaining, ir.Constant(flat.type, extents[position]))
            remaining = b.udiv(remaining, ir.Constant(flat.type, extents[position]))
    return digits


def _strided_index(b: ir.IRBuilder, access: Access, space: Sequence[int],
                   groups: Sequence[tuple[Sequence[int], ir.Value]]) -> ir.Value:
    """The element of ``access`` at flat indices (of one integer type), each over a group of space axes."""
    index_type = groups[0][1].type
    total: ir.Value = ir.Constant(index_type, access.offset)
    for axes, flat in groups:
        for axis, digit in zip(axes, _digits(b, flat, [space[a] for a in axes])):
            if access.strides[axis] and space[axis] != 1:
                total = b.add(total, b.mul(digit, ir.Constant(index_type, access.strides[axis])))
    return total


def _window_source(b: ir.IRBuilder, window: WindowMatmul, offset: int, row: ir.Value,
                   depth: ir.Value) -> tuple[ir.Value, ir.Value]:
    """(image element, whether it lies inside the image) that A[row, depth] of a window product
    reads, in the type of ``row`` and ``depth``."""
    def number(value: int) -> ir.Constant:
        return ir.Constant(row.type, value)
    pixel, tap = (row, depth) if window.pixel_rows else (depth, row)
    n, i, j = _digits(b, pixel, window.pixels)
    u, v, c = _digits(b, tap, window.taps)
    h = b.add(b.add(b.mul(i, number(window.pixel_step[0])), b.mul(u, number(window.tap_step[0]))),
              number(window.shift[0]))
    w = b.add(b.add(b.mul(j, number(window.pixel_step[1])), b.mul(v, number(window.tap_step[1]))),
              number(window.shift[1]))
    # A position before the image is negative: as unsigned it is past the end too.
    inside = b.and_(b.icmp_unsigned("<", h, number(window.image_shape[1])),
                    b.icmp_unsigned("<", w, number(window.image_shape[2])))
    index = number(offset)
    for digit, stride in zip((n, h, w, c), window.image_strides):
        if stride:
            index = b.add(index, b.mul(digit, number(stride)))
    return index, inside


def _element_count(access: Access, space: Sequence[int]) -> int:
    """One past the furthest element ``access`` reaches over ``space``."""
    return access.offset + sum(abs(stride) * (size - 1) for stride, size in zip(access.strides, space) if size) + 1


def _unit_strides(kernel: Kernel, product: _Product, operand: int) -> tuple[int, int]:
    """The distance in memory between neighbours along the tile (A's rows, B's columns) and along
    the depth, for the operand's innermost digits that are not of extent 1."""
    def innermost(strides: Sequence[int], extents: Sequence[int]) -> int:
        return next((stride for stride, extent in zip(reversed(strides), reversed(extents)) if extent != 1), 0)
    space, access = kernel.space, kernel.operands[operand]
    if operand == 0 and product.window is not None:
        window = product.window
        image_strides = window.image_strides
        pixel = innermost((image_strides[0], window.pixel_step[0] * image_strides[1],
                           window.pixel_step[1] * image_strides[2]), window.pixels)
        tap = innermost((window.tap_step[0] * image_strides[1], window.tap_step[1] * image_strides[2],
                         image_strides[3]), window.taps)
        return (pixel, tap) if window.pixel_rows else (tap, pixel)
    along = product.columns if operand else product.rows
    return (innermost([access.strides[a] for a in along], [space[a] for a in along]),
            innermost([access.strides[a] for a in product.depth], [space[a] for a in product.depth]))


@dataclass(frozen=True)
class _Staging:
    """One operand's tile in shared memory: ``extent`` along A's rows or B's columns by ``depth``,
    stored depth-major, each depth row ``pitch`` long, in two buffers of ``depth * pitch``.
    Consecutive threads copy neighbours in memory: along the depth when the operand is contiguous
    there, and each row then gets ``padding`` elements (16 bytes: rows stay aligned for vector
    loads) so that those threads' stores spread over the banks."""

    name: str
    operand: int
    extent: int
    depth: int
    depth_fastest: bool
    padding: int

    @property
    def pitch(self) -> int:
        return self.extent + (self.padding if self.depth_fastest else 0)

    def slot(self, b: ir.IRBuilder, buffer: ir.Value, deep: ir.Value, along: ir.Value) -> ir.Value:
        """The element at depth ``deep``, ``along`` the tile, of buffer 0 or 1."""
        def number(value: int) -> ir.Constant:
            return ir.Constant(deep.type, value)
        return b.add(b.mul(buffer, number(self.depth * self.pitch)), b.add(b.mul(deep, number(self.pitch)), along))


def _tiled_product(kernel: Kernel, limits: GpuLimits) -> ScheduledKernel:
    """A shared-memory tiled, register-blocked GEMM (a matmul, the fused ``var -= c * (a @ b)``
    update, or a convolution over an implicit im2col): each block owns a tile_m x tile_n tile of
    the product (a grid-stride loop over tiles and batch entries) and walks the depth tile_k at a
    time through two shared buffers: while its threads multiply the A and B tiles of one depth
    step from one buffer into their thread_m x thread_n registers (reading their rows and
    columns of the tiles up to 16 bytes at a time), the next step's tiles are
    copied into the other (``cp.async`` on sm_80 and later, zero-filled outside the matrix). The
    scale (and, for a fused update, the old output) is applied once when the tile is stored.

    A convolution's A tile is read straight from the image: the address of A[row, depth] comes
    from the output pixel and the filter tap through the window (``kernel_ir.WindowMatmul``), zero
    in the padding; the filter gradient reads taps as rows and pixels as depth."""
    product = _product_of(kernel)
    dtype = kernel.out_dtype
    element = register_type(dtype)
    space = kernel.space
    rows, columns, depth = (_product(space[a] for a in axes) for axes in (product.rows, product.columns, product.depth))
    batch_sizes = [space[a] for a in product.batch]
    tile_m, tile_n, tile_k = limits.tile_m, limits.tile_n, limits.tile_k
    thread_rows, thread_columns = tile_m // limits.thread_m, tile_n // limits.thread_n
    threads = thread_rows * thread_columns
    tiles_m, tiles_n = -(-rows // tile_m), -(-columns // tile_n)
    tiles = _product(batch_sizes) * tiles_m * tiles_n
    steps = -(-depth // tile_k)
    # Split-K: block work item t is tile t % tiles of depth slice t // tiles, stored unscaled into
    # that slice of the workspace (the output of this kernel); a ``SplitKSum`` kernel adds them up.
    split = isinstance(kernel, SplitKPartial)
    slices, slice_steps = (kernel.slices, kernel.slice_steps) if split else (1, steps)
    slice_stride = _product(kernel.out_space)
    grid = max(1, min(tiles * slices, limits.max_grid))
    accumulators = [Register(f"acc{i}_{j}", element) for i in range(limits.thread_m) for j in range(limits.thread_n)]
    zero = ir.Constant(element, 0.0)
    # Element indices (and the rows, columns and depths that lead to them, a tile past the end
    # included) in 32 bits where every buffer is small enough: half the registers of 64.
    reach = [_element_count(access, space) for access in (kernel.out, *kernel.operands)]
    reach[0] += (slices - 1) * slice_stride
    if product.window is not None:
        window = product.window
        reach[1] = kernel.operands[0].offset + 1 + sum((size - 1) * abs(stride) for size, stride in zip(
            window.image_shape, window.image_strides))
    depth_reach = max(depth, slices * slice_steps * tile_k)
    narrow = max(reach + [rows + 2 * tile_m, columns + 2 * tile_n, depth_reach + 2 * tile_k]) < NARROW_INDEX_LIMIT
    index_type = I32 if narrow else I64

    def number(value: int) -> ir.Constant:
        return ir.Constant(index_type, value)

    def narrowed(b: ir.IRBuilder, value: ir.Value) -> ir.Value:
        return b.trunc(value, I32) if narrow else value

    def staging(name: str, operand: int, extent: int) -> _Staging:
        along_unit, depth_unit = _unit_strides(kernel, product, operand)
        return _Staging(name, operand, extent, tile_k, abs(depth_unit) == 1 and abs(along_unit) != 1,
                        _VECTOR_BYTES // dtype.itemsize)

    a_tile, b_tile = staging("a", 0, tile_m), staging("b", 1, tile_n)

    def pointers(state: ThreadState) -> dict[int, ir.Value]:
        return dict(zip(kernel_buffers(kernel), state.arguments))

    def tile_origin(state: ThreadState) -> tuple[ir.IRBuilder, ir.Value, ir.Value, list[ir.Value], ir.Value]:
        """The first row and column of this block's tile, the batch indices and the depth slice."""
        b = state.b
        remaining = b.add(state.block, b.mul(state.repeat[0], _constant(grid)))
        tile_column = b.urem(remaining, _constant(tiles_n))
        remaining = b.udiv(remaining, _constant(tiles_n))
        tile_row = b.urem(remaining, _constant(tiles_m))
        remaining = b.udiv(remaining, _constant(tiles_m))
        batch = []
        for size in reversed(batch_sizes):
            batch.insert(0, b.urem(remaining, _constant(size)))
            remaining = b.udiv(remaining, _constant(size))
        return (b, narrowed(b, b.mul(tile_row, _constant(tile_m))), narrowed(b, b.mul(tile_column, _constant(tile_n))),
                [narrowed(b, index) for index in batch], narrowed(b, remaining))

    def batch_groups(batch: list[ir.Value]) -> list[tuple[tuple[int, ...], ir.Value]]:
        return [((axis,), value) for axis, value in zip(product.batch, batch)]

    def source(b: ir.IRBuilder, operand: int, position: ir.Value, k: ir.Value,
               batch: list[ir.Value]) -> tuple[ir.Value, ir.Value]:
        """(element, whether it is inside the operand) of A[position, k] or B[k, position]."""
        inside = b.and_(b.icmp_unsigned("<", position, number(columns if operand else rows)),
                        b.icmp_unsigned("<", k, number(depth)))
        access = kernel.operands[operand]
        if operand == 0 and product.window is not None:
            index, in_image = _window_source(b, product.window, access.offset, position, k)
            return index, b.and_(inside, in_image)
        along = product.columns if operand else product.rows
        groups = [(along, position), (product.depth, k)] + batch_groups(batch)
        return _strided_index(b, access, space, groups), inside

    def clear(state: ThreadState) -> None:
        for register in accumulators:
            state.b.store(zero, state.register(register.name))

    def stage(state: ThreadState, tile: _Staging, step: ir.Value, buffer: ir.Value) -> None:
        """This thread's share of the copy of the depth ``step``'s tile into ``buffer``."""
        b, row0, column0, batch, depth_slice = tile_origin(state)
        first = column0 if tile.operand else row0
        depth0 = b.mul(b.add(b.mul(depth_slice, number(slice_steps)), narrowed(b, step)), number(tile_k))
        thread, buffer = narrowed(b, state.thread), narrowed(b, buffer)
        base = pointers(state)[kernel.operands[tile.operand].buffer]
        count = tile_k * tile.extent

        def element_of(b: ir.IRBuilder, trip: ir.Value) -> None:
            flat = b.add(thread, b.mul(narrowed(b, trip), number(threads)))
            if tile.depth_fastest:
                deep, along = b.urem(flat, number(tile_k)), b.udiv(flat, number(tile_k))
            else:
                along, deep = b.urem(flat, number(tile.extent)), b.udiv(flat, number(tile.extent))
            index, inside = source(b, tile.operand, b.add(first, along), b.add(depth0, deep), batch)
            slot = b.gep(state.shared(tile.name), [tile.slot(b, buffer, deep, along)], source_etype=element)
            if count % threads:   # the last trip's threads past the tile copy nothing
                with b.if_then(b.icmp_unsigned("<", flat, number(count))):
                    state.copy_to_shared(slot, base, index, inside, dtype)
            else:
                state.copy_to_shared(slot, base, index, inside, dtype)
        emit_loop(b, -(-count // threads), element_of, name=f"stage_{tile.name}")

    def stage_first(state: ThreadState) -> None:
        for tile in (a_tile, b_tile):
            stage(state, tile, _constant(0), _constant(0))

    def stage_next(state: ThreadState) -> None:
        b = state.b
        following = b.add(state.repeat[1], _constant(1))
        with b.if_then(b.icmp_unsigned("<", following, _constant(slice_steps))):
            for tile in (a_tile, b_tile):
                stage(state, tile, following, b.and_(following, _constant(1)))

    def multiply(state: ThreadState) -> None:
        b = state.b
        thread_row = b.udiv(state.thread, _constant(thread_columns))
        thread_column = b.urem(state.thread, _constant(thread_columns))
        buffer = b.and_(state.repeat[1], _constant(1))

        def values(b: ir.IRBuilder, tile: _Staging, kk: ir.Value, first: ir.Value, count: int) -> list[ir.Value]:
            """``count`` neighbours from ``first`` at depth ``kk``, read a vector at a time: ``first``
            is a multiple of ``count`` and the rows start on 16-byte boundaries."""
            start = tile.slot(b, buffer, kk, first)
            lanes = math.gcd(count, tile.pitch, _VECTOR_BYTES // dtype.itemsize)
            result = []
            for chunk in range(0, count, lanes):
                pointer = b.gep(state.shared(tile.name), [b.add(start, _constant(chunk))], source_etype=element)
                vector = b.load(pointer, typ=ir.VectorType(element, lanes), align=lanes * dtype.itemsize)
                result += [b.extract_element(vector, ir.Constant(I32, lane)) for lane in range(lanes)]
            return result

        def step(b: ir.IRBuilder, kk: ir.Value) -> None:
            a_values = values(b, a_tile, kk, b.mul(thread_row, _constant(limits.thread_m)), limits.thread_m)
            b_values = values(b, b_tile, kk, b.mul(thread_column, _constant(limits.thread_n)), limits.thread_n)
            for i, a_value in enumerate(a_values):
                for j, b_value in enumerate(b_values):
                    slot = state.register(f"acc{i}_{j}")
                    b.store(b.fadd(b.load(slot, typ=element), b.fmul(a_value, b_value)), slot)
        emit_loop(b, tile_k, step, name="kk")

    def store(state: ThreadState) -> None:
        b, row0, column0, batch, depth_slice = tile_origin(state)
        thread = narrowed(b, state.thread)
        thread_row = b.udiv(thread, number(thread_columns))
        thread_column = b.urem(thread, number(thread_columns))
        out = pointers(state)[kernel.out.buffer]
        for i in range(limits.thread_m):
            for j in range(limits.thread_n):
                row = b.add(row0, b.add(b.mul(thread_row, number(limits.thread_m)), number(i)))
                column = b.add(column0, b.add(b.mul(thread_column, number(limits.thread_n)), number(j)))
                inside = b.and_(b.icmp_unsigned("<", row, number(rows)),
                                b.icmp_unsigned("<", column, number(columns)))
                with b.if_then(inside):
                    value = b.load(state.register(f"acc{i}_{j}"), typ=element)
                    if kernel.scale != 1.0:
                        value = b.fmul(value, ir.Constant(element, kernel.scale))
                    index = _strided_index(b, kernel.out, space, [(product.rows, row), (product.columns, column)]
                                           + batch_groups(batch))
                    if split:
                        index = b.add(index, b.mul(depth_slice, number(slice_stride)))
                    if kernel.accumulate:
                        value = b.fadd(load_element(b, out, dtype, index), value)
                    store_element(b, value, out, dtype, index)

    # Step s: the copy of step s + 1 is issued, step s's copy (the one before) awaited, and after
    # the block has multiplied step s a barrier frees its buffer for the copy of step s + 2.
    depth_steps: tuple[Statement, ...] = (
        AsyncCopy(stage_first),
        Repeat(lambda b, block_index: _constant(slice_steps), (
            AsyncCopy(stage_next), AsyncWait(1), Barrier(), Phase(multiply), Barrier()))) if steps else ()
    per_tile = Repeat(lambda b, block_index: _strided_trips(b, block_index, tiles * slices, grid),
                      (Phase(clear), *depth_steps, Phase(store)))
    if product.window is not None:
        window = product.window
        what = "output pixels x taps" if window.pixel_rows else "taps x output pixels"
        kind = f"implicit GEMM {rows}x{columns}x{depth} ({what}, A read through the window of in0, 0 in the padding)"
    else:
        kind = f"tiled GEMM {rows}x{columns}x{depth} (x{_product(batch_sizes)})"
    if split:
        kind = (f"split-K partials, {slices} slices of {slice_steps * tile_k} deep into b{kernel.out.buffer} "
                f"({tiles} tiles x {slices} slices), of the {kind}")
    return ScheduledKernel(kernel.name, len(kernel_buffers(kernel)), Launch(threads, grid), (per_tile,),
                           shared=tuple(SharedArray(tile.name, element, 2 * tile_k * tile.pitch)
                                        for tile in (a_tile, b_tile)),
                           registers=tuple(accumulators),
                           description=f"{kind}: {tile_m}x{tile_n} tiles, depth {tile_k} at a time through two "
                                       f"shared buffers (cp.async on sm_80+), "
                                       f"{limits.thread_m}x{limits.thread_n} per thread in registers")


def _uses_block_scan(kernel: Kernel, limits: GpuLimits) -> bool:
    scanned = [axis for axis in loop_axes(kernel) if axis.reduced]
    return kernel.scan and len(scanned) == 1 and scanned[0].size >= limits.scan_min_extent


def _block_scan(kernel: Kernel, limits: GpuLimits) -> ScheduledKernel:
    """A block per row (a grid-stride loop over rows) walks the row in chunks of one element per
    thread: each chunk is scanned in shared memory (Hillis-Steele: log2(block) rounds of adding
    the value ``2**round`` places back), added to the running total of the chunks before it, and
    stored; the chunk's total then joins the running total."""
    axes = loop_axes(kernel)
    dtype = kernel.out_dtype
    element = register_type(dtype)
    row_axes = [k for k, axis in enumerate(axes) if not axis.reduced]
    (scan_axis,) = [k for k, axis in enumerate(axes) if axis.reduced]
    length = axes[scan_axis].size
    rows = _product(axes[k].size for k in row_axes)
    block = limits.scan_block
    grid = max(1, min(rows, limits.max_grid))
    levels = block.bit_length() - 1
    assert block == 1 << levels, "scan_block must be a power of two"
    identity = identity_of(kernel.combiner, dtype)

    def at(state: ThreadState, position: ir.Value) -> tuple[ir.IRBuilder, KernelBody]:
        """The kernel body at this block's row and ``position`` along the scanned axis."""
        body = KernelBody(kernel, state.arguments, axes, GPU_RULES)
        row = state.b.add(state.block, state.b.mul(state.repeat[0], ir.Constant(I64, grid)))
        _decompose(state.b, row, axes, row_axes, body.values)
        body.values[scan_axis] = position
        return state.b, body

    def position_of(state: ThreadState) -> ir.Value:
        return state.b.add(state.b.mul(state.repeat[1], ir.Constant(I64, block)), state.thread)

    def slot(state: ThreadState, index: ir.Value) -> ir.Value:
        return state.b.gep(state.shared("chunk"), [index], source_etype=element)

    def start_row(state: ThreadState) -> None:
        state.b.store(identity, state.register("carry"))

    def load_chunk(state: ThreadState) -> None:
        position = position_of(state)
        b, body = at(state, position)
        inside = b.icmp_unsigned("<", position, ir.Constant(I64, length))
        b.store(identity, slot(state, state.thread))
        with b.if_then(inside):
            b.store(body.term(b, body.lowering(b)), slot(state, state.thread))

    def add_back(state: ThreadState) -> None:
        b, body = at(state, position_of(state))
        distance = b.shl(ir.Constant(I64, 1), state.repeat[2])
        mine = b.load(slot(state, state.thread), typ=element)
        has_partner = b.icmp_unsigned(">=", state.thread, distance)
        partner = b.load(slot(state, b.select(has_partner, b.sub(state.thread, distance), state.thread)), typ=element)
        total = combine(body.lowering(b), kernel.combiner, dtype, partner, mine)
        b.store(b.select(has_partner, total, mine), state.register("sum"))

    def write_back(state: ThreadState) -> None:
        state.b.store(state.b.load(state.register("sum"), typ=element), slot(state, state.thread))

    def store_chunk(state: ThreadState) -> None:
        position = position_of(state)
        b, body = at(state, position)
        lowering = body.lowering(b)
        carry = b.load(state.register("carry"), typ=element)
        with b.if_then(b.icmp_unsigned("<", position, ir.Constant(I64, length))):
            value = combine(lowering, kernel.combiner, dtype, carry, b.load(slot(state, state.thread), typ=element))
            store_element(b, value, body.out_pointer, dtype, lowering.out_index())
        last = b.load(slot(state, ir.Constant(I64, block - 1)), typ=element)
        b.store(combine(lowering, kernel.combiner, dtype, carry, last), state.register("carry"))

    chunks = Repeat(lambda b, block_index: ir.Constant(I64, -(-length // block)), (
        Phase(load_chunk), Barrier(),
        Repeat(lambda b, block_index: ir.Constant(I64, levels), (Phase(add_back), Barrier(), Phase(write_back),
                                                                 Barrier())),
        Phase(store_chunk), Barrier()))
    per_row = Repeat(lambda b, block_index: _strided_trips(b, block_index, rows, grid), (Phase(start_row), chunks))
    return ScheduledKernel(kernel.name, len(kernel_buffers(kernel)), Launch(block, grid), (per_row,),
                           shared=(SharedArray("chunk", element, block),),
                           registers=(Register("carry", element), Register("sum", element)),
                           description=f"a block per row ({rows}) scanning {length} elements in chunks of "
                                       f"{block}: a shared-memory scan per chunk plus the running total")


def schedule_kernel(kernel: Kernel, limits: GpuLimits = DEFAULT_LIMITS) -> ScheduledKernel:
    """How ``kernel`` runs on the GPU: its launch and what each thread of a block does."""
    if _is_window_product(kernel) or _is_plain_product(kernel):
        return _tiled_product(kernel, limits)
    if isinstance(kernel, SplitKSum):
        scheduled = _per_element(kernel, limits)
        added = ", added to the output" if kernel.accumulate else ""
        return replace(scheduled, description=f"split-K sum of {kernel.space[0]} partials in order (scale "
                                              f"{kernel.scale!r}{added}): {scheduled.description}")
    if _uses_block_scan(kernel, limits):
        return _block_scan(kernel, limits)
    if _uses_block_reduction(kernel, limits):
        return _block_reduction(kernel, limits)
    return _per_element(kernel, limits)


def schedule_program(program: Program, limits: GpuLimits = DEFAULT_LIMITS) -> list[ScheduledKernel]:
    return [schedule_kernel(kernel, limits) for kernel in program.kernels]


@dataclass(frozen=True)
class KernelResources:
    """What ``ptxas -v`` reports for one kernel."""

    registers: int
    spill_bytes: int     # spill stores plus spill loads


def kernel_resources(ptx: str, arch: str = DEFAULT_ARCH) -> dict[str, KernelResources] | None:
    """Registers and spills of every kernel in ``ptx``, from ``ptxas -v`` (None without ptxas)."""
    ptxas = shutil.which("ptxas")
    if ptxas is None:
        return None
    with tempfile.TemporaryDirectory(prefix="graphgrad-ptxas-") as directory:
        source = os.path.join(directory, "step.ptx")
        with open(source, "w", encoding="utf-8") as handle:
            handle.write(ptx)
        result = subprocess.run([ptxas, f"-arch={arch}", "-v", source, "-o", os.path.join(directory, "step.cubin")],
                                capture_output=True, text=True)
    if result.returncode != 0:
        return None
    resources: dict[str, KernelResources] = {}
    current, spills = None, 0
    for line in result.stderr.splitlines():
        entry = re.search(r"Compiling entry function '([^']+)'", line)
        if entry:
            current, spills = entry.group(1), 0
        spill = re.search(r"(\d+) bytes spill stores, (\d+) bytes spill loads", line)
        if spill:
            spills = int(spill.group(1)) + int(spill.group(2))
        used = re.search(r"Used (\d+) registers", line)
        if used and current is not None:
            resources[current] = KernelResources(int(used.group(1)), spills)
    return resources


def format_schedule(scheduled: Sequence[ScheduledKernel],
                    resources: dict[str, KernelResources] | None = None) -> str:
    """The GPU schedule as text, one line per kernel (shown after the kernels in ``dump("kernels")``),
    with registers per thread and spills when ``resources`` (from ``kernel_resources``) are given."""
    lines = ["gpu schedule:" + ("" if resources is not None else " (ptxas not found: no register counts)")]
    for kernel in scheduled:
        shared = sum(array.count * _BYTES[str(array.element)] for array in kernel.shared)
        used = (resources or {}).get(kernel.name)
        registers = f", {used.registers} registers, {used.spill_bytes} B spilled" if used else ""
        lines.append(f"  {kernel.name}: grid {kernel.launch.grid} x block {kernel.launch.block}, "
                     f"shared {shared} B{registers}: {kernel.description}")
    return "\n".join(lines) + "\n"


_BYTES = {"float": 4, "double": 8, "i32": 4, "i64": 8, "i1": 1, "i8": 1}


def has_async_copy(arch: str) -> bool:
    """Whether ``arch`` (``sm_XY``) has ``cp.async`` (sm_80 and later); LLVM aborts the process on
    the intrinsic for an older one."""
    match = re.fullmatch(r"sm_([0-9]+)[a-z]?", arch)
    return match is not None and int(match.group(1)) >= 80


def build_module(program: Program, limits: GpuLimits = DEFAULT_LIMITS, arch: str = DEFAULT_ARCH) -> ir.Module:
    module = ir.Module(name="graphgrad_kernels")
    module.triple = TRIPLE
    module.data_layout = str(target_machine(arch).target_data)
    for scheduled in schedule_program(program, limits):
        emit_ptx_kernel(module, scheduled, async_copies=has_async_copy(arch))
    return module


def _optimized_module(program: Program, arch: str, limits: GpuLimits, ptx_isa: int | None) -> llvm.ModuleRef:
    """The kernels' NVPTX module after LLVM's O3 (call with ``LLVM_LOCK`` held)."""
    parsed = llvm.parse_assembly(str(build_module(program, limits, arch)))
    parsed.verify()
    machine = target_machine(arch, ptx_isa)
    tuning = llvm.create_pipeline_tuning_options(speed_level=3)
    builder = llvm.create_pass_builder(machine, tuning)
    builder.getModulePassManager().run(parsed, builder)
    return parsed


def emit_ptx(program: Program, arch: str = DEFAULT_ARCH, limits: GpuLimits = DEFAULT_LIMITS,
             ptx_isa: int | None = None) -> str:
    """PTX text with one ``.entry`` per kernel, launched as ``schedule_program`` says; its
    ``.version`` is ``ptx_isa`` (see ``target_machine``)."""
    with LLVM_LOCK:
        return target_machine(arch, ptx_isa).emit_assembly(_optimized_module(program, arch, limits, ptx_isa))


def optimized_ir(program: Program, arch: str = DEFAULT_ARCH, limits: GpuLimits = DEFAULT_LIMITS) -> str:
    """The kernels' NVPTX LLVM IR after O3: what ``emit_ptx`` turns into PTX."""
    with LLVM_LOCK:
        return str(_optimized_module(program, arch, limits, None))

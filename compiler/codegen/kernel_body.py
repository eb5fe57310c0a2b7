"""What a kernel computes at one point of its output space, emitted the same way for both targets.

A target walks the output index space its own way: the CPU with loops (``cpu.py``), the GPU with
one thread per output element (``nvptx.py``). It writes the loop-axis indices of the point it is at
into ``KernelBody.values`` and calls ``emit_point``, which emits the rest: the body's loads and
arithmetic, the scale, the reduced loops the point runs itself (the accumulator in a register),
a scan's prefixes, and the store (or scatter-add) into the output.

What differs between targets beyond the walk is in ``BodyRules``.
"""
from __future__ import annotations

import itertools
from dataclasses import dataclass
from typing import Sequence

from llvmlite import ir

from .. import dtypes
from ..kernel_ir import Kernel
from .common import (I64, ExprLowering, LoopAxis, combine, element_pointer, emit_carried_loop, emit_sum_in_blocks,
                     identity_of, load_element, store_element, sums_in_blocks)


def kernel_buffers(kernel: Kernel) -> list[int]:
    """The distinct buffers a kernel touches, output first: its function's pointer parameters."""
    order = [kernel.out.buffer]
    for access in kernel.operands:
        if access.buffer not in order:
            order.append(access.buffer)
    return order


@dataclass(frozen=True)
class BodyRules:
    """The choices a target makes for every kernel body."""

    # The output already holds a partial result of the reduction (its identity, or the value a
    # fused update adds to), so a point adds its result to it. The CPU walks some reduced axes
    # outside the point and relies on this; without it only ``accumulate`` kernels read the output.
    output_holds_partial: bool
    # A register sum may be reassociated (lets LLVM vectorise it); never for a scan.
    reassociate: bool
    # Scatter adds are atomic (GPU threads may add into the same element at once).
    atomic_scatter: bool
    # A float32 register sum over more trips than this adds blocks of this many in float32 and
    # the blocks in float64 (``common.emit_sum_in_blocks``).
    sum_block: int


@dataclass(frozen=True)
class ReducedLoop:
    """A reduced loop axis that the point runs itself, carrying the accumulator in a register."""

    axis: int                        # position in the loop axes
    count: ir.Value | int            # number of trips
    first: ir.Value | None = None    # index of the first trip (None: 0)


class KernelBody:
    """The body of ``kernel`` over the loop ``axes``, reading and writing the kernel function's
    pointer parameters ``buffer_arguments`` (in ``kernel_buffers`` order)."""

    def __init__(self, kernel: Kernel, buffer_arguments: Sequence[ir.Value], axes: Sequence[LoopAxis],
                 rules: BodyRules) -> None:
        pointer_of = dict(zip(kernel_buffers(kernel), buffer_arguments))
        self.kernel = kernel
        self.axes = axes
        self.rules = rules
        self.out_pointer = pointer_of[kernel.out.buffer]
        self.operand_pointers = [pointer_of[access.buffer] for access in kernel.operands]
        # The index along each loop axis at the current point, set by the target's walk.
        self.values: list[ir.Value] = [ir.Constant(I64, 0)] * len(axes)

    def lowering(self, b: ir.IRBuilder) -> ExprLowering:
        """Expression lowering at the current point."""
        return ExprLowering(b, self.kernel, self.operand_pointers, self.axes, list(self.values))

    def emit_point(self, b: ir.IRBuilder, reduced_loops: Sequence[ReducedLoop] = ()) -> None:
        """The output element(s) of the current point: the reduction over ``reduced_loops`` (none
        for an elementwise kernel) combined and stored as the kernel and the rules say."""
        kernel = self.kernel
        dtype = kernel.out_dtype
        if not kernel.reduce_axes:
            lowering = self.lowering(b)
            self._write(b, lowering, self.term(b, lowering))
            return
        if self.rules.output_holds_partial and not reduced_loops:
            # The reduced axes are walked outside the point: add its term to what the output holds
            # (a scan: to the previous prefix).
            lowering = self.lowering(b)
            value = self.term(b, lowering)
            index = lowering.out_index()
            if kernel.scan:
                held = self._previous_prefix(b, index)
            else:
                held = load_element(b, self.out_pointer, dtype, index)
            store_element(b, combine(lowering, kernel.combiner, dtype, held, value), self.out_pointer, dtype, index)
            return
        total = self._fold(b, reduced_loops, identity_of(kernel.combiner, dtype))
        for loop in reduced_loops:  # their indices end with the loops; the output does not walk them
            self.values[loop.axis] = ir.Constant(I64, 0)
        if kernel.scan:
            return  # every prefix is stored inside the loop
        lowering = self.lowering(b)
        index = lowering.out_index()
        if self.rules.output_holds_partial or kernel.accumulate:
            total = combine(lowering, kernel.combiner, dtype, load_element(b, self.out_pointer, dtype, index), total)
        store_element(b, total, self.out_pointer, dtype, index)

    def emit_unrolled_point(self, b: ir.IRBuilder, reduced: Sequence[tuple[int, int]]) -> None:
        """The output element of the current point: the whole reduction over the ``reduced`` axes
        (position, size; a few points in all), written out point by point in their order, stored
        without reading the output (which needs no initialisation)."""
        kernel = self.kernel
        dtype = kernel.out_dtype
        total = identity_of(kernel.combiner, dtype)
        for indices in itertools.product(*(range(size) for _, size in reduced)):
            for (axis, _), index in zip(reduced, indices):
                self.values[axis] = ir.Constant(I64, index)
            lowering = self.lowering(b)
            total = combine(lowering, kernel.combiner, dtype, total, self.term(b, lowering),
                            reassociate=self.rules.reassociate)
        for axis, _ in reduced:  # the output does not walk them
            self.values[axis] = ir.Constant(I64, 0)
        store_element(b, total, self.out_pointer, dtype, self.lowering(b).out_index())

    def term(self, b: ir.IRBuilder, lowering: ExprLowering) -> ir.Value:
        """The body at the current point, times the kernel's scale."""
        value = lowering.lower(self.kernel.body)
        if self.kernel.scale != 1.0:
            value = b.fmul(value, ir.Constant(value.type, self.kernel.scale))
        return value

    def _fold(self, b: ir.IRBuilder, loops: Sequence[ReducedLoop], total: ir.Value) -> ir.Value:
        """``total`` combined with the term at every trip of ``loops`` (nested, first outermost);
        a scan stores each prefix as it goes."""
        kernel = self.kernel
        if not loops:
            lowering = self.lowering(b)
            total = combine(lowering, kernel.combiner, kernel.out_dtype, total, self.term(b, lowering),
                            reassociate=self.rules.reassociate and not kernel.scan)
            if kernel.scan:
                store_element(b, total, self.out_pointer, kernel.out_dtype, lowering.out_index())
            return total
        loop = loops[0]
        if (len(loops) == 1 and not kernel.scan
                and sums_in_blocks(kernel.combiner, kernel.out_dtype, self.axes[loop.axis].size, self.rules.sum_block)):
            def add_term(b: ir.IRBuilder, index: ir.Value, partial: ir.Value) -> ir.Value:
                self.values[loop.axis] = index if loop.first is None else b.add(loop.first, index)
                lowering = self.lowering(b)
                return combine(lowering, "sum", kernel.out_dtype, partial, self.term(b, lowering),
                               reassociate=self.rules.reassociate)
            return emit_sum_in_blocks(b, loop.count, self.rules.sum_block, add_term, total, name=f"r{loop.axis}")

        def trip(b: ir.IRBuilder, index: ir.Value, carried: list[ir.Value]) -> list[ir.Value]:
            self.values[loop.axis] = index if loop.first is None else b.add(loop.first, index)
            return [self._fold(b, loops[1:], carried[0])]
        return emit_carried_loop(b, loop.count, trip, [total], name=f"r{loop.axis}")[0]

    def _previous_prefix(self, b: ir.IRBuilder, index: ir.Value) -> ir.Value:
        """A scan's value one step back along its axis from output element ``index`` (the
        combiner's identity at the first step)."""
        kernel = self.kernel
        identity = identity_of(kernel.combiner, kernel.out_dtype)
        scanned = [k for k, axis in enumerate(self.axes) if axis.reduced]
        if not scanned:  # a scan over an axis of size 1
            return identity
        k = scanned[0]
        first = b.icmp_signed("==", self.values[k], ir.Constant(I64, 0))
        back = b.select(first, ir.Constant(I64, 0), ir.Constant(I64, self.axes[k].out_stride))
        previous = load_element(b, self.out_pointer, kernel.out_dtype, b.sub(index, back))
        return b.select(first, identity, previous)

    def _write(self, b: ir.IRBuilder, lowering: ExprLowering, value: ir.Value) -> None:
        """Store an elementwise kernel's value, or add a scatter kernel's into its element."""
        kernel = self.kernel
        dtype = kernel.out_dtype
        index = lowering.out_index()
        if kernel.scatter is None or not kernel.accumulate:   # a store, at a computed element or not
            store_element(b, value, self.out_pointer, dtype, index)
        elif self.rules.atomic_scatter:
            operation = "fadd" if dtypes.is_floating(dtype) else "add"
            b.atomic_rmw(operation, element_pointer(b, self.out_pointer, dtype, index), value, "monotonic")
        else:
            value = combine(lowering, "sum", dtype, load_element(b, self.out_pointer, dtype, index), value)
            store_element(b, value, self.out_pointer, dtype, index)

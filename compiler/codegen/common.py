"""What both targets share: LLVM types, the lowering of scalar expressions, loop spaces, loops.

``ExprLowering`` turns a kernel body into LLVM instructions at one point of the loop space, each
primitive by its entry in ``_PRIMITIVE_LOWERINGS``; transcendentals come from ``mathlib``
(branch-free polynomial IR, the same on CPU and GPU). ``kernel_body`` builds a kernel's whole
per-point computation on it. No fast-math flag that changes NaN or Inf semantics is ever set,
except that a reduction's sum of products may become fused multiply-adds (``contract``): a
product is then not rounded on its own, so one that would overflow alone may not, and
``x*x - x*x`` may be the rounding error of ``x*x`` rather than 0.
"""
from __future__ import annotations

import math
import threading
from dataclasses import dataclass
from typing import Any, Callable, Sequence

import numpy as np
from llvmlite import ir

from .. import dtypes
from ..kernel_ir import AxisIndex, Branch, Gather, Kernel, Literal, Load, Loop, Prim, Reserve, ScalarExpr
from . import mathlib, random_bits

I1 = ir.IntType(1)
I8 = ir.IntType(8)
I32 = ir.IntType(32)
I64 = ir.IntType(64)
PTR = ir.PointerType()

# LLVM's process-wide state (its global context, target machines, MCJIT's symbol table) is not
# safe to use from two threads at once: every call into llvmlite.binding holds this lock.
LLVM_LOCK = threading.RLock()

_REGISTER_TYPES = {dtypes.float32: ir.FloatType(), dtypes.float64: ir.DoubleType(),
                   dtypes.int32: I32, dtypes.int64: I64, dtypes.bool_: I1}


def register_type(dtype: np.dtype) -> ir.Type:
    return _REGISTER_TYPES[dtype]


def memory_type(dtype: np.dtype) -> ir.Type:
    return I8 if dtype == dtypes.bool_ else _REGISTER_TYPES[dtype]


def constant(dtype: np.dtype, value: object) -> ir.Constant:
    if dtype == dtypes.bool_:
        return ir.Constant(I1, int(bool(value)))
    if dtypes.is_floating(dtype):
        return ir.Constant(register_type(dtype), float(value))  # type: ignore[arg-type]
    return ir.Constant(register_type(dtype), int(value))  # type: ignore[call-overload]


def identity_of(combiner: str, dtype: np.dtype) -> ir.Constant:
    if combiner == "sum":
        return constant(dtype, 0)
    if combiner == "prod":
        return constant(dtype, 1)
    if dtypes.is_floating(dtype):
        return constant(dtype, -math.inf if combiner == "max" else math.inf)
    if dtype == dtypes.bool_:
        return constant(dtype, 0 if combiner == "max" else 1)
    return constant(dtype, np.iinfo(dtype).min if combiner == "max" else np.iinfo(dtype).max)


# -- loop spaces -----------------------------------------------------------------------------

@dataclass(frozen=True)
class LoopAxis:
    """One loop of a kernel after simplification: its trip count, whether it is reduced, and the
    stride of the output and of each operand along it (in elements)."""

    size: int
    reduced: bool
    out_stride: int
    operand_strides: tuple[int, ...]
    source_axes: tuple[int, ...]     # the kernel-space axes it stands for


def loop_axes(kernel: Kernel, collapse: bool = True) -> list[LoopAxis]:
    """The kernel's axes with size-1 axes dropped and, when ``collapse``, adjacent axes merged
    where every access walks them as one (fewer, longer loops vectorise better)."""
    axes = [LoopAxis(n, a in kernel.reduce_axes, kernel.out.strides[a],
                     tuple(acc.strides[a] for acc in kernel.operands), (a,))
            for a, n in enumerate(kernel.space) if n != 1]
    if not collapse or kernel.scatter is not None or _uses_axis_index(kernel.body):
        return axes
    merged: list[LoopAxis] = []
    for axis in axes:
        if merged:
            outer = merged[-1]
            if outer.reduced == axis.reduced and outer.out_stride == axis.out_stride * axis.size and all(
                    so == si * axis.size for so, si in zip(outer.operand_strides, axis.operand_strides)):
                merged[-1] = LoopAxis(outer.size * axis.size, axis.reduced, axis.out_stride,
                                      axis.operand_strides, outer.source_axes + axis.source_axes)
                continue
        merged.append(axis)
    return merged


def _uses_axis_index(expr: ScalarExpr) -> bool:
    seen: set[int] = set()
    stack = [expr]
    while stack:
        node = stack.pop()
        if id(node) in seen:
            continue
        seen.add(id(node))
        if isinstance(node, (AxisIndex, Gather)):
            return True
        if isinstance(node, Prim):
            stack.extend(node.args)
    return False


# -- loops -----------------------------------------------------------------------------------

def emit_loop(builder: ir.IRBuilder, count: ir.Value | int, body: Callable[[ir.IRBuilder, ir.Value], None],
              name: str = "i") -> None:
    """``for i in range(count): body(builder, i)``."""
    def body_carrying_nothing(b: ir.IRBuilder, index: ir.Value, carried: list[ir.Value]) -> list[ir.Value]:
        body(b, index)
        return []
    emit_carried_loop(builder, count, body_carrying_nothing, (), name)


def sums_in_blocks(combiner: str, dtype: np.dtype, trips: int, block: int) -> bool:
    """Whether a register fold of ``trips`` adds is summed in blocks of ``block`` (see
    ``emit_sum_in_blocks``): float32 sums longer than one block."""
    return combiner == "sum" and dtype == dtypes.float32 and trips > block > 0


def emit_sum_in_blocks(builder: ir.IRBuilder, count: ir.Value | int, block: int,
                       add_term: Callable[[ir.IRBuilder, ir.Value, ir.Value], ir.Value],
                       total: ir.Value, name: str = "r") -> ir.Value:
    """``total`` plus a float32 sum over ``count`` trips, where ``add_term(b, index, partial)``
    returns ``partial`` plus trip ``index``'s term: each ``block`` trips are summed in float32 from
    zero, and the blocks' sums are added in float64, rounded to float32 once at the end.

    A running float32 sum's rounding error grows with its length (10^7 adds of 0.1 are 0.15% off,
    as every add rounds the same way); summed in blocks it grows with the block instead, for the
    cost of one float64 add per block. The block's own loop stays a plain register fold, which
    the CPU vectorises."""
    count = ir.Constant(I64, count) if isinstance(count, int) else count
    wide = ir.DoubleType()
    zero = ir.Constant(total.type, 0.0)
    blocks = builder.udiv(builder.add(count, ir.Constant(I64, block - 1)), ir.Constant(I64, block))

    def one_block(b: ir.IRBuilder, index: ir.Value, carried: list[ir.Value]) -> list[ir.Value]:
        first = b.mul(index, ir.Constant(I64, block))
        left = b.sub(count, first)
        trips = b.select(b.icmp_signed("<", left, ir.Constant(I64, block)), left, ir.Constant(I64, block))

        def trip(b: ir.IRBuilder, offset: ir.Value, partial: list[ir.Value]) -> list[ir.Value]:
            return [add_term(b, b.add(first, offset), partial[0])]
        partial = emit_carried_loop(b, trips, trip, [zero], name=f"{name}.block")[0]
        return [b.fadd(carried[0], b.fpext(partial, wide))]
    summed = emit_carried_loop(builder, blocks, one_block, [builder.fpext(total, wide)], name=f"{name}.blocks")[0]
    return builder.fptrunc(summed, total.type)


def emit_carried_loop(builder: ir.IRBuilder, count: ir.Value | int,
                      body: Callable[[ir.IRBuilder, ir.Value, list[ir.Value]], list[ir.Value]],
                      carried: Sequence[ir.Value], name: str = "i") -> list[ir.Value]:
    """``for i in range(count)`` with loop-carried values: ``body(builder, i, values)`` returns the
    values for the next trip; returns the values after the last one."""
    count = ir.Constant(I64, count) if isinstance(count, int) else count
    preheader = builder.block
    header = builder.append_basic_block(f"{name}.header")
    body_block = builder.append_basic_block(f"{name}.body")
    exit_block = builder.append_basic_block(f"{name}.exit")
    builder.branch(header)
    builder.position_at_end(header)
    index = builder.phi(I64, name=name)
    index.add_incoming(ir.Constant(I64, 0), preheader)
    phis = []
    for value in carried:
        phi = builder.phi(value.type)
        phi.add_incoming(value, preheader)
        phis.append(phi)
    builder.cbranch(builder.icmp_signed("<", index, count), body_block, exit_block)
    builder.position_at_end(body_block)
    updated = body(builder, index, list(phis))
    latch = builder.block
    following = builder.add(index, ir.Constant(I64, 1), flags=("nsw", "nuw"))
    index.add_incoming(following, latch)
    for phi, value in zip(phis, updated):
        phi.add_incoming(value, latch)
    builder.branch(header)
    builder.position_at_end(exit_block)
    return list(phis)


def element_pointer(builder: ir.IRBuilder, base: ir.Value, dtype: np.dtype, index: ir.Value) -> ir.Value:
    return builder.gep(base, [index], inbounds=True, source_etype=memory_type(dtype))


def load_element(builder: ir.IRBuilder, base: ir.Value, dtype: np.dtype, index: ir.Value) -> ir.Value:
    value = builder.load(element_pointer(builder, base, dtype, index), typ=memory_type(dtype))
    if dtype == dtypes.bool_:
        return builder.icmp_unsigned("!=", value, ir.Constant(I8, 0))
    return value


def store_element(builder: ir.IRBuilder, value: ir.Value, base: ir.Value, dtype: np.dtype,
                  index: ir.Value) -> None:
    if dtype == dtypes.bool_:
        value = builder.zext(value, I8)
    builder.store(value, element_pointer(builder, base, dtype, index))


def linear_index(builder: ir.IRBuilder, indices: Sequence[ir.Value], strides: Sequence[int],
                 offset: int = 0) -> ir.Value:
    """``offset + sum(indices[a] * strides[a])`` over the axes with a non-zero stride."""
    total: ir.Value = ir.Constant(I64, offset)
    for index, stride in zip(indices, strides):
        if stride == 0:
            continue
        term = index if stride == 1 else builder.mul(index, ir.Constant(I64, stride), flags=("nsw",))
        total = term if (isinstance(total, ir.Constant) and total.constant == 0) else builder.add(
            total, term, flags=("nsw",))
    return total


def declare_function(module: ir.Module, name: str, result: ir.Type, params: Sequence[ir.Type]) -> ir.Function:
    """Declare ``name`` once per module (for intrinsics llvmlite does not know)."""
    existing = module.globals.get(name)
    if existing is not None:
        return existing
    return ir.Function(module, ir.FunctionType(result, list(params)), name=name)


# -- scalar expressions ----------------------------------------------------------------------

class ExprLowering:
    """Lowers one kernel body at one point of the loop space: ``values[k]`` is the index along
    loop axis ``axes[k]``. Loads use the operands' strides along those loop axes."""

    def __init__(self, builder: ir.IRBuilder, kernel: Kernel, operand_pointers: Sequence[ir.Value],
                 axes: Sequence[LoopAxis], values: Sequence[ir.Value]) -> None:
        self.builder = builder
        self.kernel = kernel
        self.pointers = operand_pointers
        self.axes = axes
        self.axis_values = values
        self.values: dict[int, ir.Value] = {}

    def kernel_axis_value(self, axis: int) -> ir.Value:
        for loop_axis, value in zip(self.axes, self.axis_values):
            if loop_axis.source_axes == (axis,):
                return value
        return ir.Constant(I64, 0)  # a dropped size-1 axis

    def lower(self, expr: ScalarExpr) -> ir.Value:
        cached = self.values.get(id(expr))
        if cached is not None:
            return cached
        b = self.builder
        if isinstance(expr, Literal):
            value: ir.Value = constant(expr.dtype, expr.value)
        elif isinstance(expr, AxisIndex):
            value = self.kernel_axis_value(expr.axis)
        elif isinstance(expr, Load):
            strides = [axis.operand_strides[expr.operand] for axis in self.axes]
            index = linear_index(b, self.axis_values, strides, self.kernel.operands[expr.operand].offset)
            value = load_element(b, self.pointers[expr.operand], expr.dtype, index)
        elif isinstance(expr, Gather):
            index = self.lower(expr.index)
            offset = self.kernel.operands[expr.operand].offset
            if offset:
                index = b.add(index, ir.Constant(I64, offset), flags=("nsw",))
            value = load_element(b, self.pointers[expr.operand], expr.dtype, index)
        else:
            assert isinstance(expr, Prim)
            args = [self.lower(a) for a in expr.args]
            value = self._prim(expr, args)
        self.values[id(expr)] = value
        return value

    def out_index(self) -> ir.Value:
        if self.kernel.scatter is not None:
            index = self.lower(self.kernel.scatter)
            if self.kernel.out.offset:
                index = self.builder.add(index, ir.Constant(I64, self.kernel.out.offset), flags=("nsw",))
            return index
        return linear_index(self.builder, self.axis_values, [a.out_stride for a in self.axes],
                            self.kernel.out.offset)

    def _prim(self, expr: Prim, args: list[ir.Value]) -> ir.Value:
        lower = _PRIMITIVE_LOWERINGS.get(expr.op)
        if lower is None:
            raise NotImplementedError(f"primitive {expr.op}")
        return lower(self, expr, args)

    def max_min(self, op: str, dtype: np.dtype, x: ir.Value, y: ir.Value) -> ir.Value:
        b = self.builder
        if dtypes.is_floating(dtype):
            # NaN-propagating, like numpy.maximum/minimum: pick x if it wins or is NaN.
            wins = b.fcmp_ordered(">" if op == "maximum" else "<", x, y)
            return b.select(b.or_(wins, b.fcmp_unordered("uno", x, x)), x, y)
        symbol = ">" if op == "maximum" else "<"
        compare = b.icmp_unsigned if dtype == dtypes.bool_ else b.icmp_signed
        return b.select(compare(symbol, x, y), x, y)

    def cast(self, value: ir.Value, source: np.dtype, target: np.dtype) -> ir.Value:
        b = self.builder
        to_type = register_type(target)
        if source == target:
            return value
        if target == dtypes.bool_:
            if dtypes.is_floating(source):
                return b.fcmp_unordered("!=", value, ir.Constant(value.type, 0.0))
            return b.icmp_unsigned("!=", value, ir.Constant(value.type, 0))
        if source == dtypes.bool_:
            return b.uitofp(value, to_type) if dtypes.is_floating(target) else b.zext(value, to_type)
        if dtypes.is_floating(source) and dtypes.is_floating(target):
            return b.fpext(value, to_type) if target.itemsize > source.itemsize else b.fptrunc(value, to_type)
        if dtypes.is_floating(source):
            # Saturating conversion: defined for out-of-range values and NaN (no poison).
            suffix = f"i{to_type.width}.{'f32' if source == dtypes.float32 else 'f64'}"
            function = declare_function(b.module, f"llvm.fptosi.sat.{suffix}", to_type, [value.type])
            return b.call(function, [value])
        if dtypes.is_floating(target):
            return b.sitofp(value, to_type)
        if target.itemsize > source.itemsize:
            return b.sext(value, to_type)
        return b.trunc(value, to_type)


# -- primitives: name -> lowering(lowering, expression, lowered arguments) ----------------------

_PrimitiveLowering = Callable[[ExprLowering, Prim, list[ir.Value]], ir.Value]
_COMPARISON_SYMBOLS = {"lt": "<", "le": "<=", "gt": ">", "ge": ">=", "eq": "==", "ne": "!="}


def _argument_dtype(expr: Prim) -> np.dtype:
    return expr.args[0].dtype if expr.args else expr.dtype


def _arithmetic(op: str) -> _PrimitiveLowering:
    def lower(lowering: ExprLowering, expr: Prim, args: list[ir.Value]) -> ir.Value:
        b = lowering.builder
        if dtypes.is_floating(_argument_dtype(expr)):
            return {"add": b.fadd, "sub": b.fsub, "mul": b.fmul, "div": b.fdiv}[op](args[0], args[1])
        if op == "div":
            raise NotImplementedError("integer division is not an op")
        return {"add": b.add, "sub": b.sub, "mul": b.mul}[op](args[0], args[1])
    return lower


def _max_min(lowering: ExprLowering, expr: Prim, args: list[ir.Value]) -> ir.Value:
    return lowering.max_min(expr.op, _argument_dtype(expr), args[0], args[1])


def _negate(lowering: ExprLowering, expr: Prim, args: list[ir.Value]) -> ir.Value:
    b = lowering.builder
    if dtypes.is_floating(_argument_dtype(expr)):
        return b.fneg(args[0])
    return b.sub(ir.Constant(args[0].type, 0), args[0])


def _polynomial(lowering: ExprLowering, expr: Prim, args: list[ir.Value]) -> ir.Value:
    """A transcendental from ``mathlib`` (``emit_exp``, ``emit_pow``, …)."""
    return getattr(mathlib, f"emit_{expr.op}")(lowering.builder, *args)


def _intrinsic(lowering: ExprLowering, expr: Prim, args: list[ir.Value]) -> ir.Value:
    """LLVM's own ``llvm.sqrt`` / ``llvm.floor``."""
    b = lowering.builder
    return b.call(b.module.declare_intrinsic(f"llvm.{expr.op}", [args[0].type]), [args[0]])


def _absolute(lowering: ExprLowering, expr: Prim, args: list[ir.Value]) -> ir.Value:
    b = lowering.builder
    if dtypes.is_floating(_argument_dtype(expr)):
        return b.call(b.module.declare_intrinsic("llvm.fabs", [args[0].type]), [args[0]])
    negative = b.icmp_signed("<", args[0], ir.Constant(args[0].type, 0))
    return b.select(negative, b.sub(ir.Constant(args[0].type, 0), args[0]), args[0])


def _compare(lowering: ExprLowering, expr: Prim, args: list[ir.Value]) -> ir.Value:
    b = lowering.builder
    symbol = _COMPARISON_SYMBOLS[expr.op]
    arg_dtype = _argument_dtype(expr)
    if dtypes.is_floating(arg_dtype):
        # Ordered comparisons are false with NaN; != is unordered (true with NaN), as numpy.
        return (b.fcmp_unordered if expr.op == "ne" else b.fcmp_ordered)(symbol, args[0], args[1])
    if arg_dtype == dtypes.bool_:
        return b.icmp_unsigned(symbol, args[0], args[1])
    return b.icmp_signed(symbol, args[0], args[1])


_PRIMITIVE_LOWERINGS: dict[str, _PrimitiveLowering] = {
    **{op: _arithmetic(op) for op in ("add", "sub", "mul", "div")},
    "maximum": _max_min, "minimum": _max_min,
    "neg": _negate,
    **{op: _polynomial for op in ("exp", "expm1", "log", "log1p", "tanh", "sigmoid", "sin", "cos", "erf", "atan",
                                   "pow", "floormod")},
    "sqrt": _intrinsic, "floor": _intrinsic,
    "abs": _absolute,
    **{op: _compare for op in _COMPARISON_SYMBOLS},
    "isnan": lambda lowering, expr, args: lowering.builder.fcmp_unordered("uno", args[0], args[0]),
    "select": lambda lowering, expr, args: lowering.builder.select(args[0], args[1], args[2]),
    "logical_and": lambda lowering, expr, args: lowering.builder.and_(args[0], args[1]),
    "logical_or": lambda lowering, expr, args: lowering.builder.or_(args[0], args[1]),
    "logical_not": lambda lowering, expr, args: lowering.builder.xor(args[0], ir.Constant(I1, 1)),
    "cast": lambda lowering, expr, args: lowering.cast(args[0], _argument_dtype(expr), expr.dtype),
    "index_div": lambda lowering, expr, args: lowering.builder.sdiv(args[0], args[1]),
    "index_rem": lambda lowering, expr, args: lowering.builder.srem(args[0], args[1]),
    "philox": lambda lowering, expr, args: random_bits.emit_philox(lowering.builder, *args),
}


def combine(lowering: ExprLowering, combiner: str, dtype: np.dtype, accumulated: ir.Value,
            value: ir.Value, reassociate: bool = False) -> ir.Value:
    """One step of a reduction. ``reassociate`` lets LLVM vectorise a sum held in a register."""
    b = lowering.builder
    flags = ("reassoc",) if reassociate else ()
    if combiner == "sum":
        if dtypes.is_floating(dtype):
            if isinstance(value, ir.Instruction) and value.opname == "fmul":
                # A sum of products: a fused multiply-add where the CPU has one (one rounding, and
                # half the instructions of a convolution's unrolled taps; GPUs fuse them anyway).
                value.flags.append("contract")
                flags = flags + ("contract",)
            return b.fadd(accumulated, value, flags=flags)
        return b.add(accumulated, value)
    if combiner == "prod":
        if dtypes.is_floating(dtype):
            return b.fmul(accumulated, value, flags=flags)
        return b.mul(accumulated, value)
    if reassociate and dtypes.is_floating(dtype):
        # llvm.maximum/minimum propagate NaN as numpy does and, unlike a compare and select, are a
        # reduction LLVM vectorises (any order gives the same result: -0 counts below +0).
        name = f"llvm.{'maximum' if combiner == 'max' else 'minimum'}.{'f32' if dtype == dtypes.float32 else 'f64'}"
        function = declare_function(b.module, name, accumulated.type, [accumulated.type] * 2)
        return b.call(function, [accumulated, value])
    # max/min keep a NaN that is already accumulated (the value is the second argument).
    return lowering.max_min("maximum" if combiner == "max" else "minimum", dtype, accumulated, value)


# -- branches and loops ---------------------------------------------------------------------------

STACK_GROWTH_FAILED = -1   # the step's status word when a stack could not grow (out of memory)


def emit_reserve(builder: ir.IRBuilder, step: Reserve, table: ir.Value, buffer_pointer: Callable[[int], ir.Value],
                 status_pointer: ir.Value) -> None:
    """Grow a run-time stack (``kernel_ir.Reserve``) with ``realloc`` when row ``counter`` does not
    fit: to twice its rows (at least 16 and one more than the counter). Its new address goes into
    the buffer table, where every later kernel call loads it from. If memory runs out, the step
    stops with ``STACK_GROWTH_FAILED`` in its status word."""
    held_pointer, counter_pointer = buffer_pointer(step.capacity), buffer_pointer(step.counter)
    held = builder.load(held_pointer, typ=I64)
    needed = builder.add(builder.load(counter_pointer, typ=I64), ir.Constant(I64, 1))
    grow = builder.append_basic_block("stack.grow")
    failed = builder.append_basic_block("stack.failed")
    grown = builder.append_basic_block("stack.grown")
    done = builder.append_basic_block("stack.done")
    builder.cbranch(builder.icmp_signed(">", needed, held), grow, done)
    builder.position_at_end(grow)
    doubled = builder.mul(held, ir.Constant(I64, 2))
    rows = builder.select(builder.icmp_signed(">", doubled, needed), doubled, needed)
    rows = builder.select(builder.icmp_signed(">", rows, ir.Constant(I64, 16)), rows, ir.Constant(I64, 16))
    slot = builder.gep(table, [ir.Constant(I64, step.stack)], inbounds=True, source_etype=PTR)
    realloc = declare_function(builder.module, "realloc", PTR, [PTR, I64])
    moved = builder.call(realloc, [builder.load(slot, typ=PTR), builder.mul(rows, ir.Constant(I64, step.row_bytes))])
    builder.cbranch(builder.icmp_unsigned("==", moved, ir.Constant(PTR, None)), failed, grown)
    builder.position_at_end(failed)
    builder.store(ir.Constant(I64, STACK_GROWTH_FAILED), status_pointer)
    builder.ret_void()
    builder.position_at_end(grown)
    builder.store(moved, slot)
    builder.store(rows, held_pointer)
    builder.branch(done)
    builder.position_at_end(done)


def emit_schedule(builder: ir.IRBuilder, steps: Sequence[Any], run_kernel: Callable[[int], None],
                  buffer_pointer: Callable[[int], ir.Value],
                  reserve: Callable[[Reserve], None] | None = None) -> None:
    """The step's schedule as control flow: ``run_kernel(position)`` for each kernel, a
    conditional branch for each ``Branch`` and a loop for each ``Loop`` (their predicates read from
    bool scalar buffers), ``reserve(step)`` for each ``Reserve``. Buffer pointers must be loaded
    where they dominate every use (the entry block), except those of stacks (loaded at each use)."""
    for step in steps:
        if isinstance(step, Branch):
            taken = builder.append_basic_block("branch.taken")
            otherwise = builder.append_basic_block("branch.otherwise")
            after = builder.append_basic_block("branch.end")
            holds = load_element(builder, buffer_pointer(step.predicate), dtypes.bool_, ir.Constant(I64, 0))
            builder.cbranch(holds, taken, otherwise)
            for block, inner in ((taken, step.taken), (otherwise, step.otherwise)):
                builder.position_at_end(block)
                emit_schedule(builder, inner, run_kernel, buffer_pointer, reserve)
                builder.branch(after)
            builder.position_at_end(after)
        elif isinstance(step, Loop):
            header = builder.append_basic_block("loop.condition")
            body = builder.append_basic_block("loop.body")
            after = builder.append_basic_block("loop.end")
            builder.branch(header)
            builder.position_at_end(header)
            emit_schedule(builder, step.condition, run_kernel, buffer_pointer, reserve)
            holds = load_element(builder, buffer_pointer(step.predicate), dtypes.bool_, ir.Constant(I64, 0))
            builder.cbranch(holds, body, after)
            builder.position_at_end(body)
            emit_schedule(builder, step.body, run_kernel, buffer_pointer, reserve)
            builder.branch(header)
            builder.position_at_end(after)
        elif isinstance(step, Reserve):
            assert reserve is not None, "this target does not grow stacks"
            reserve(step)
        else:
            run_kernel(step)

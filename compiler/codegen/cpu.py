"""CPU code generation: a Program becomes one LLVM module with one entry point, ``graphgrad_step``.

Each kernel is a function of its buffers' pointers; the entry point takes the array of every
buffer's address and calls the kernels in order, so a whole training step is one native call.
Loops: size-1 axes are dropped, mergeable axes collapsed, and the axis with the most unit-stride
accesses goes innermost (so LLVM's loop vectoriser can use it). A reduction whose innermost loop is
reduced keeps its partial result in a register; otherwise it accumulates into the output buffer.
"""
from __future__ import annotations

import functools
import os
from typing import Sequence

import llvmlite.binding as llvm
from llvmlite import ir

from .. import dtypes
from ..kernel_ir import Kernel, Program
from .common import (PTR, ExprLowering, LoopAxis, combine, declare_function, element_pointer, emit_loop,
                     identity_of,
                     linear_index, load_element, loop_axes, store_element)
from .gemm import LIBRARY_SYMBOL, library_signature

STEP_SYMBOL = "graphgrad_step"
# Matmuls with at least this many multiply-adds use the blocked GEMM (gemm.py); smaller ones,
# and integer ones, are plain loop nests.
GEMM_MIN_WORK = 4096


def thread_count() -> int:
    """Threads a large kernel is split across: GRAPHGRAD_THREADS, else the usable cores."""
    configured = os.environ.get("GRAPHGRAD_THREADS")
    if configured:
        return max(1, int(configured))
    return max(1, len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count() or 1)


@functools.lru_cache(maxsize=1)
def host_target_machine() -> llvm.TargetMachine:
    """The shared target machine for optimising and printing (never handed to a JIT engine)."""
    return new_host_target_machine()


def new_host_target_machine() -> llvm.TargetMachine:
    """A fresh target machine for the host CPU (a JIT engine takes ownership of the one it gets)."""
    llvm.initialize_native_target()
    llvm.initialize_native_asmprinter()
    target = llvm.Target.from_default_triple()
    return target.create_target_machine(cpu=llvm.get_host_cpu_name(),
                                        features=llvm.get_host_cpu_features().flatten(),
                                        opt=3, codemodel="jitdefault", jit=True)


def kernel_buffers(kernel: Kernel) -> list[int]:
    """The distinct buffers a kernel touches, output first: its function's parameters."""
    order = [kernel.out.buffer]
    for access in kernel.operands:
        if access.buffer not in order:
            order.append(access.buffer)
    return order


def _loop_order(axes: Sequence[LoopAxis]) -> list[int]:
    if not axes:
        return []
    def unit_strides(k: int) -> int:
        axis = axes[k]
        return sum(1 for s in axis.operand_strides if abs(s) == 1) + (axis.out_stride == 1)
    innermost = max(range(len(axes)), key=lambda k: (unit_strides(k), k))
    return [k for k in range(len(axes)) if k != innermost] + [innermost]


def emit_kernel(module: ir.Module, kernel: Kernel) -> ir.Function:
    buffers = kernel_buffers(kernel)
    function = ir.Function(module, ir.FunctionType(ir.VoidType(), [PTR] * len(buffers)), name=kernel.name)
    function.linkage = "internal"
    for argument in function.args:
        argument.add_attribute("noalias")
    builder = ir.IRBuilder(function.append_basic_block("entry"))
    pointer_of = dict(zip(buffers, function.args))
    out_pointer = pointer_of[kernel.out.buffer]
    operand_pointers = [pointer_of[a.buffer] for a in kernel.operands]
    dtype = kernel.out_dtype
    reducing = bool(kernel.reduce_axes)

    if reducing and not _uses_gemm(kernel):  # start every output element at the identity
        out_size = 1
        for n in kernel.out_space:
            out_size *= n
        def init(b: ir.IRBuilder, index: ir.Value, carried: list) -> list:
            store_element(b, identity_of(kernel.combiner, dtype), out_pointer, dtype, index)
            return []
        emit_loop(builder, out_size, init, name="init")

    if _uses_gemm(kernel):
        _emit_gemm_call(builder, kernel, out_pointer, operand_pointers)
    elif 0 not in kernel.space:
        axes = loop_axes(kernel)
        order = _loop_order(axes)
        values: list[ir.Value] = [ir.Constant(ir.IntType(64), 0)] * len(axes)

        def point(b: ir.IRBuilder) -> None:
            lowering = ExprLowering(b, kernel, operand_pointers, axes, values)
            value = lowering.lower(kernel.body)
            index = lowering.out_index()
            if reducing:
                value = combine(lowering, kernel.combiner, dtype,
                                load_element(b, out_pointer, dtype, index), value)
            store_element(b, value, out_pointer, dtype, index)

        def level(b: ir.IRBuilder, depth: int) -> None:
            if depth == len(order):
                point(b)
                return
            k = order[depth]
            if reducing and depth == len(order) - 1 and axes[k].reduced:
                def accumulate(b2: ir.IRBuilder, index: ir.Value, carried: list) -> list:
                    values[k] = index
                    lowering = ExprLowering(b2, kernel, operand_pointers, axes, values)
                    return [combine(lowering, kernel.combiner, dtype, carried[0],
                                    lowering.lower(kernel.body), reassociate=True)]
                (total,) = emit_loop(b, axes[k].size, accumulate, [identity_of(kernel.combiner, dtype)],
                                     name=f"r{k}")
                values[k] = ir.Constant(ir.IntType(64), 0)
                lowering = ExprLowering(b, kernel, operand_pointers, axes, values)
                index = lowering.out_index()
                merged = combine(lowering, kernel.combiner, dtype,
                                 load_element(b, out_pointer, dtype, index), total)
                store_element(b, merged, out_pointer, dtype, index)
                return

            def body(b2: ir.IRBuilder, index: ir.Value, carried: list) -> list:
                values[k] = index
                level(b2, depth + 1)
                return []
            emit_loop(b, axes[k].size, body, name=f"i{k}")

        level(builder, 0)
    builder.ret_void()
    return function


def _uses_gemm(kernel: Kernel) -> bool:
    if kernel.matmul is None or not dtypes.is_floating(kernel.out_dtype) or 0 in kernel.space:
        return False
    layout = kernel.matmul
    work = kernel.space[layout.m] * kernel.space[layout.n] * kernel.space[layout.k]
    return work >= GEMM_MIN_WORK and kernel.out.strides[layout.n] in (1, 0)


def _emit_gemm_call(builder: ir.IRBuilder, kernel: Kernel, out_pointer: ir.Value,
                    operand_pointers: Sequence[ir.Value]) -> None:
    """A matmul kernel as (a loop over batch indices of) one blocked, threaded GEMM."""
    layout = kernel.matmul
    assert layout is not None
    a_access, b_access = kernel.operands
    dtype = kernel.out_dtype
    i64 = ir.IntType(64)
    values: list[ir.Value] = []

    def at_batch(b: ir.IRBuilder) -> None:
        def pointer(base: ir.Value, strides: Sequence[int], offset: int) -> ir.Value:
            index = linear_index(b, values, [strides[a] for a in layout.batch], offset)
            return element_pointer(b, base, dtype, index)
        space = kernel.space
        gemm = declare_function(b.module, LIBRARY_SYMBOL.format(dtype=dtype.name), ir.VoidType(),
                                library_signature().args)
        b.call(gemm, [
            ir.Constant(i64, thread_count()), ir.Constant(i64, space[layout.m]), ir.Constant(i64, space[layout.n]), ir.Constant(i64, space[layout.k]),
            pointer(operand_pointers[0], a_access.strides, a_access.offset),
            ir.Constant(i64, a_access.strides[layout.m]), ir.Constant(i64, a_access.strides[layout.k]),
            pointer(operand_pointers[1], b_access.strides, b_access.offset),
            ir.Constant(i64, b_access.strides[layout.k]), ir.Constant(i64, b_access.strides[layout.n]),
            pointer(out_pointer, kernel.out.strides, kernel.out.offset),
            ir.Constant(i64, kernel.out.strides[layout.m])])

    def level(b: ir.IRBuilder, depth: int) -> None:
        if depth == len(layout.batch):
            at_batch(b)
            return
        def body(b2: ir.IRBuilder, index: ir.Value, carried: list) -> list:
            values[depth] = index
            level(b2, depth + 1)
            return []
        emit_loop(b, kernel.space[layout.batch[depth]], body, name=f"batch{depth}")

    values.extend([ir.Constant(i64, 0)] * len(layout.batch))
    level(builder, 0)


def build_module(program: Program) -> ir.Module:
    """The LLVM module of one step: kernels plus the ``graphgrad_step(ptr buffers)`` entry point."""
    machine = host_target_machine()
    module = ir.Module(name="graphgrad_step")
    module.triple = machine.triple
    module.data_layout = str(machine.target_data)
    functions = [emit_kernel(module, kernel) for kernel in program.kernels]
    step = ir.Function(module, ir.FunctionType(ir.VoidType(), [PTR]), name=STEP_SYMBOL)
    builder = ir.IRBuilder(step.append_basic_block("entry"))
    table = step.args[0]
    loaded: dict[int, ir.Value] = {}

    def buffer_pointer(index: int) -> ir.Value:
        if index not in loaded:
            slot = builder.gep(table, [ir.Constant(ir.IntType(64), index)], inbounds=True, source_etype=PTR)
            loaded[index] = builder.load(slot, typ=PTR)
        return loaded[index]

    for kernel, function in zip(program.kernels, functions):
        builder.call(function, [buffer_pointer(i) for i in kernel_buffers(kernel)])
    builder.ret_void()
    return module


def optimize(module_text: str) -> llvm.ModuleRef:
    """Parse, verify and optimise (O3, for the host CPU) an LLVM module."""
    machine = host_target_machine()
    parsed = llvm.parse_assembly(module_text)
    parsed.verify()
    tuning = llvm.create_pipeline_tuning_options(speed_level=3)
    tuning.loop_vectorization = True
    tuning.slp_vectorization = True
    builder = llvm.create_pass_builder(machine, tuning)
    builder.getModulePassManager().run(parsed, builder)
    return parsed


def emit_assembly(module: llvm.ModuleRef) -> str:
    return host_target_machine().emit_assembly(module)

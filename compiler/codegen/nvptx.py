"""NVPTX code generation: the same kernel IR, one ``.entry`` per kernel, one thread per output element.

The CPU lowers a kernel's outer index space to loops; here the output index space is the grid:
thread ``ctaid.x * ntid.x + tid.x`` computes one output element, looping over the reduced axes (if
any) with a register accumulator. Scalar lowering (and the polynomial transcendentals) is shared
with the CPU in ``common``.
"""
from __future__ import annotations

import functools

import llvmlite.binding as llvm
from llvmlite import ir

from .. import dtypes
from ..kernel_ir import Kernel, Program
from .common import (LLVM_LOCK, I32, I64, PTR, ExprLowering, combine, declare_function, element_pointer, emit_loop,
                     identity_of, load_element, loop_axes, store_element)
from .cpu import kernel_buffers

TRIPLE = "nvptx64-nvidia-cuda"
DEFAULT_ARCH = "sm_80"
BLOCK_SIZE = 256


@functools.lru_cache(maxsize=4)
def target_machine(arch: str = DEFAULT_ARCH) -> llvm.TargetMachine:
    llvm.initialize_all_targets()
    llvm.initialize_all_asmprinters()
    return llvm.Target.from_triple(TRIPLE).create_target_machine(cpu=arch, opt=3)


def _thread_index(builder: ir.IRBuilder) -> ir.Value:
    def special(name: str) -> ir.Value:
        function = declare_function(builder.module, f"llvm.nvvm.read.ptx.sreg.{name}", I32, [])
        return builder.zext(builder.call(function, []), I64)
    return builder.add(builder.mul(special("ctaid.x"), special("ntid.x")), special("tid.x"))


def emit_kernel(module: ir.Module, kernel: Kernel) -> ir.Function:
    buffers = kernel_buffers(kernel)
    function = ir.Function(module, ir.FunctionType(ir.VoidType(), [PTR] * len(buffers)), name=kernel.name)
    function.calling_convention = "ptx_kernel"
    for argument in function.args:
        argument.add_attribute("noalias")
    pointer_of = dict(zip(buffers, function.args))
    out_pointer = pointer_of[kernel.out.buffer]
    operand_pointers = [pointer_of[a.buffer] for a in kernel.operands]
    builder = ir.IRBuilder(function.append_basic_block("entry"))
    axes = loop_axes(kernel)  # a size-0 reduced axis is a loop of no trips: the result is the identity
    outer = [k for k, a in enumerate(axes) if not a.reduced]
    inner = [k for k, a in enumerate(axes) if a.reduced]
    out_count = 1
    for n in kernel.out_space:
        out_count *= n

    thread = _thread_index(builder)
    work = builder.append_basic_block("work")
    done = builder.append_basic_block("done")
    builder.cbranch(builder.icmp_unsigned("<", thread, ir.Constant(I64, out_count)), work, done)
    builder.position_at_end(work)

    values: list[ir.Value] = [ir.Constant(I64, 0)] * len(axes)
    remaining = thread
    for k in reversed(outer):  # split the flat thread index into the output axes' indices
        size = ir.Constant(I64, axes[k].size)
        values[k] = builder.urem(remaining, size)
        remaining = builder.udiv(remaining, size)

    dtype = kernel.out_dtype
    if not kernel.reduce_axes:
        lowering = ExprLowering(builder, kernel, operand_pointers, axes, values)
        result = lowering.lower(kernel.body)
    else:
        def nest(b: ir.IRBuilder, depth: int, total: ir.Value) -> ir.Value:
            if depth == len(inner):
                low = ExprLowering(b, kernel, operand_pointers, axes, values)
                value = low.lower(kernel.body)
                if kernel.scale != 1.0:
                    value = b.fmul(value, ir.Constant(value.type, kernel.scale))
                total = combine(low, kernel.combiner, dtype, total, value)
                if kernel.scan:  # every prefix is an output element
                    store_element(b, total, out_pointer, dtype, low.out_index())
                return total
            k = inner[depth]
            def body(b2: ir.IRBuilder, index: ir.Value, carried: list) -> list:
                values[k] = index
                return [nest(b2, depth + 1, carried[0])]
            return emit_loop(b, axes[k].size, body, [total], name=f"r{k}")[0]
        result = nest(builder, 0, identity_of(kernel.combiner, dtype))
        if kernel.scan:
            builder.branch(done)
            builder.position_at_end(done)
            builder.ret_void()
            return function
        for k in inner:
            values[k] = ir.Constant(I64, 0)
        lowering = ExprLowering(builder, kernel, operand_pointers, axes, values)
        if kernel.accumulate:  # added to what the output holds (a fused variable update)
            result = combine(lowering, kernel.combiner, dtype,
                             load_element(builder, out_pointer, dtype, lowering.out_index()), result)
    if kernel.scatter is not None:  # other threads may add into the same element
        operation = "fadd" if dtypes.is_floating(dtype) else "add"
        builder.atomic_rmw(operation, element_pointer(builder, out_pointer, dtype, lowering.out_index()),
                           result, "monotonic")
    else:
        store_element(builder, result, out_pointer, dtype, lowering.out_index())
    builder.branch(done)
    builder.position_at_end(done)
    builder.ret_void()
    return function


def build_module(program: Program) -> ir.Module:
    module = ir.Module(name="graphgrad_kernels")
    module.triple = TRIPLE
    module.data_layout = str(target_machine().target_data)
    for kernel in program.kernels:
        emit_kernel(module, kernel)
    return module


def emit_ptx(program: Program, arch: str = DEFAULT_ARCH) -> str:
    """PTX text with one ``.entry`` per kernel (launch: ceil(outputs / 256) blocks of 256 threads)."""
    with LLVM_LOCK:
        parsed = llvm.parse_assembly(str(build_module(program)))
        parsed.verify()
        machine = target_machine(arch)
        tuning = llvm.create_pipeline_tuning_options(speed_level=3)
        builder = llvm.create_pass_builder(machine, tuning)
        builder.getModulePassManager().run(parsed, builder)
        return machine.emit_assembly(parsed)

"""The host module of ``target="cuda-emulated"``: the step's GPU-scheduled kernels, lowered to host
code by ``gpu_kernel.emit_emulated_kernel``, called in order by the usual ``graphgrad_step(table)``
entry point, so the runtime runs it like a CPU step (one native call per step).
"""
from __future__ import annotations

from llvmlite import ir

from ..kernel_ir import Program
from .common import I64, PTR
from .cpu import STEP_SYMBOL, emit_check_call, host_target_machine
from .gpu_kernel import emit_emulated_kernel
from .kernel_body import kernel_buffers
from .nvptx import DEFAULT_LIMITS, GpuLimits, schedule_program


def build_module(program: Program, limits: GpuLimits = DEFAULT_LIMITS) -> ir.Module:
    machine = host_target_machine()
    module = ir.Module(name="graphgrad_cuda_emulated")
    module.triple = machine.triple
    module.data_layout = str(machine.target_data)
    step = ir.Function(module, ir.FunctionType(ir.VoidType(), [PTR]), name=STEP_SYMBOL)
    b = ir.IRBuilder(step.append_basic_block("entry"))
    table = step.args[0]
    pointers: dict[int, ir.Value] = {}

    def buffer_pointer(index: int) -> ir.Value:
        if index not in pointers:
            slot = b.gep(table, [ir.Constant(I64, index)], inbounds=True, source_etype=PTR)
            pointers[index] = b.load(slot, typ=PTR)
        return pointers[index]

    for position, (kernel, scheduled) in enumerate(zip(program.kernels, schedule_program(program, limits))):
        function = emit_emulated_kernel(module, scheduled)
        b.call(function, [buffer_pointer(index) for index in kernel_buffers(kernel)])
        if kernel.check:
            emit_check_call(b, kernel, position, buffer_pointer(kernel.out.buffer),
                            buffer_pointer(len(program.buffers)))
    b.ret_void()
    return module

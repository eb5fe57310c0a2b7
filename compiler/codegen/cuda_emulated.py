"""The host module of ``target="cuda-emulated"``: the step's GPU-scheduled kernels, lowered to host
code by ``gpu_kernel.emit_emulated_kernel``, called in the step's order (its branches and loops included) by the usual ``graphgrad_step(table)``
entry point, so the runtime runs it like a CPU step (one native call per step).
"""
from __future__ import annotations

from typing import Sequence

from llvmlite import ir

from ..kernel_ir import Program
from .common import I64, PTR, emit_reserve, emit_schedule
from .cpu import STEP_SYMBOL, emit_check_call, host_target_machine
from .gpu_kernel import ScheduledKernel, emit_emulated_kernel
from .kernel_body import kernel_buffers
from .nvptx import DEFAULT_LIMITS, GpuLimits, schedule_program


def build_module(program: Program, limits: GpuLimits = DEFAULT_LIMITS, racecheck: bool = False,
                 memcheck: bool = False, scheduled: Sequence[ScheduledKernel] | None = None) -> ir.Module:
    """With ``racecheck`` or ``memcheck`` each kernel checks its accesses (``sanitizer``) and writes
    the first error to the words after the step's status word; the step then stops after that
    kernel with its number in the status word, as a failed numerics check does. ``scheduled``:
    ``schedule_program(program, limits)`` when the caller already has it."""
    machine = host_target_machine()
    module = ir.Module(name="graphgrad_cuda_emulated")
    module.triple = machine.triple
    module.data_layout = str(machine.target_data)
    step = ir.Function(module, ir.FunctionType(ir.VoidType(), [PTR]), name=STEP_SYMBOL)
    b = ir.IRBuilder(step.append_basic_block("entry"))
    table = step.args[0]
    pointers: dict[int, ir.Value] = {}

    stacks = {buffer.index for buffer in program.buffers if buffer.role == "stack"}

    def buffer_pointer(index: int) -> ir.Value:
        if index in stacks:   # a stack may move when it grows: load its address where it is used
            return b.load(b.gep(table, [ir.Constant(I64, index)], inbounds=True, source_etype=PTR), typ=PTR)
        if index not in pointers:
            slot = b.gep(table, [ir.Constant(I64, index)], inbounds=True, source_etype=PTR)
            pointers[index] = b.load(slot, typ=PTR)
        return pointers[index]

    if program.schedule is not None:
        for index in range(len(program.buffers) + 1):  # loaded where they dominate every branch and loop
            if index not in stacks:
                buffer_pointer(index)
    checked = racecheck or memcheck
    if scheduled is None:
        scheduled = schedule_program(program, limits)
    functions = [emit_emulated_kernel(module, one, racecheck, memcheck, buffer_bytes(program, kernel))
                 for one, kernel in zip(scheduled, program.kernels)]

    def run_kernel(position: int) -> None:
        kernel = program.kernels[position]
        status = buffer_pointer(len(program.buffers))
        report = [b.gep(status, [ir.Constant(I64, 1)], inbounds=True, source_etype=I64)] if checked else []
        b.call(functions[position], [buffer_pointer(index) for index in kernel_buffers(kernel)] + report)
        if checked:
            raced = b.icmp_unsigned("!=", b.load(report[0], typ=I64), ir.Constant(I64, 0))
            with b.if_then(raced):
                b.store(ir.Constant(I64, position + 1), status)
                b.ret_void()
        if kernel.check:
            emit_check_call(b, kernel, position, buffer_pointer(kernel.out.buffer),
                            buffer_pointer(len(program.buffers)))
    emit_schedule(b, program.steps(), run_kernel, buffer_pointer,
                  lambda step: emit_reserve(b, step, table, buffer_pointer, buffer_pointer(len(program.buffers))))
    b.ret_void()
    return module


def buffer_bytes(program: Program, kernel: object) -> list[int | None]:
    """The size of each buffer argument of ``kernel``'s function, None for a stack (it grows)."""
    sizes: list[int | None] = []
    for index in kernel_buffers(kernel):  # type: ignore[arg-type]
        buffer = program.buffers[index]
        sizes.append(None if buffer.role == "stack" else buffer.nbytes)
    return sizes


def describe_buffers(program: Program, kernel: object) -> tuple[str, ...]:
    """How an error message names each buffer argument of ``kernel``'s function."""
    names = []
    for index in kernel_buffers(kernel):  # type: ignore[arg-type]
        buffer = program.buffers[index]
        names.append(f"b{index} ({buffer.label or buffer.role}, {buffer.nbytes} bytes)")
    return tuple(names)

"""NVPTX code generation: the same kernel IR, one ``.entry`` per kernel, one thread per output element.

The CPU lowers a kernel's outer index space to loops; here the output index space is the grid:
thread ``ctaid.x * ntid.x + tid.x`` computes one output element, looping over the reduced axes (if
any) with a register accumulator. What the thread computes there is emitted by ``kernel_body``, as
on the CPU; scalar lowering (and the polynomial transcendentals) comes from ``common``.
"""
from __future__ import annotations

import functools

import llvmlite.binding as llvm
from llvmlite import ir

from ..kernel_ir import Kernel, Program
from .common import LLVM_LOCK, I32, I64, PTR, declare_function, loop_axes
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
    builder = ir.IRBuilder(function.append_basic_block("entry"))
    axes = loop_axes(kernel)  # a size-0 reduced axis is a loop of no trips: the result is the identity
    body = KernelBody(kernel, function.args, axes, GPU_RULES)
    out_count = 1
    for n in kernel.out_space:
        out_count *= n

    thread = _thread_index(builder)
    work = builder.append_basic_block("work")
    done = builder.append_basic_block("done")
    builder.cbranch(builder.icmp_unsigned("<", thread, ir.Constant(I64, out_count)), work, done)
    builder.position_at_end(work)
    remaining = thread  # split into the output axes' indices, the last one fastest
    for k in reversed([k for k, axis in enumerate(axes) if not axis.reduced]):
        size = ir.Constant(I64, axes[k].size)
        body.values[k] = builder.urem(remaining, size)
        remaining = builder.udiv(remaining, size)
    body.emit_point(builder, [ReducedLoop(k, axis.size) for k, axis in enumerate(axes) if axis.reduced])
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

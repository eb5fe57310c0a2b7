"""The worker pool that splits large kernels across cores, as LLVM IR (one module per process).

``graphgrad_parallel(fn, arg, parts)`` runs ``fn(arg, part)`` for every part in ``[0, parts)`` on
the calling thread and the pool's workers, and returns when all are done. Workers are started by
the runtime (``graphgrad_pool_worker(id)`` on threads it owns) and wait for work by spinning
briefly, then sleeping on a futex (Linux) or yielding (elsewhere).

Protocol: the caller publishes the task (``fn``, ``arg``, ``parts``, ``next = 0``,
``active = workers``) and bumps ``generation``; every participant claims parts with an atomic
fetch-add on ``next`` until none is left; each worker then decrements ``active``. The caller
returns only when ``active`` is 0, so no worker can still be looking at a task when the next one
is published.
"""
from __future__ import annotations

from typing import Callable

from llvmlite import ir

from .common import I64, PTR, declare_function, emit_loop

I32 = ir.IntType(32)
PARALLEL_SYMBOL = "graphgrad_parallel"
WORKER_SYMBOL = "graphgrad_pool_worker"
STOP_SYMBOL = "graphgrad_pool_stop"
SET_WORKERS_SYMBOL = "graphgrad_pool_set_workers"
SPINS = 20000                     # checks before sleeping (a few tens of microseconds)
_FUTEX = {"x86_64": 202, "aarch64": 98}
_FUTEX_WAIT_PRIVATE, _FUTEX_WAKE_PRIVATE = 128, 129
TASK_TYPE = ir.FunctionType(ir.VoidType(), [PTR, I64])


def _global(module: ir.Module, name: str, type_: ir.Type, value: object) -> ir.GlobalVariable:
    variable = ir.GlobalVariable(module, type_, name=name)
    variable.linkage = "internal"
    variable.initializer = ir.Constant(type_, value)
    variable.align = 64  # its own cache line
    return variable


def build_pool_module(triple: str) -> ir.Module:
    module = ir.Module(name="graphgrad_pool")
    arch = triple.split("-")[0]
    futex = _FUTEX.get(arch) if "linux" in triple else None
    generation = _global(module, "pool_generation", I32, 0)
    active = _global(module, "pool_active", I32, 0)
    next_part = _global(module, "pool_next", I64, 0)
    parts_slot = _global(module, "pool_parts", I64, 0)
    function_slot = _global(module, "pool_function", PTR, None)
    argument_slot = _global(module, "pool_argument", PTR, None)
    workers = _global(module, "pool_workers", I64, 0)
    quit_flag = _global(module, "pool_quit", I32, 0)
    syscall = declare_function(module, "syscall", I64, [I64]) if futex else None
    if syscall is not None:
        syscall.function_type.var_arg = True
    sched_yield = declare_function(module, "sched_yield", I32, [])
    pause = declare_function(module, "llvm.x86.sse2.pause", ir.VoidType(), []) if arch == "x86_64" else None

    def relax(b: ir.IRBuilder) -> None:
        if pause is not None:
            b.call(pause, [])

    def sleep_while_equal(b: ir.IRBuilder, address: ir.Value, value: ir.Value) -> None:
        if syscall is not None:
            b.call(syscall, [ir.Constant(I64, futex), address, ir.Constant(I32, _FUTEX_WAIT_PRIVATE), value,
                             ir.Constant(PTR, None)])
        else:
            b.call(sched_yield, [])

    def wake_all(b: ir.IRBuilder, address: ir.Value) -> None:
        if syscall is not None:
            b.call(syscall, [ir.Constant(I64, futex), address, ir.Constant(I32, _FUTEX_WAKE_PRIVATE),
                             ir.Constant(I32, 2 ** 31 - 1)])

    def wait_until(b: ir.IRBuilder, address: ir.Value, done: Callable[[ir.IRBuilder, ir.Value], ir.Value],
                   name: str) -> ir.Value:
        """Spin, then sleep, until ``done(value)``; returns the value seen."""
        header = b.append_basic_block(f"{name}.check")
        slow = b.append_basic_block(f"{name}.slow")
        finished = b.append_basic_block(f"{name}.done")
        entry = b.block
        b.branch(header)
        b.position_at_end(header)
        spins = b.phi(I64)
        spins.add_incoming(ir.Constant(I64, 0), entry)
        value = b.load_atomic(address, "acquire", 4)
        b.cbranch(done(b, value), finished, slow)
        b.position_at_end(slow)
        more = b.add(spins, ir.Constant(I64, 1))
        relax(b)
        with b.if_then(b.icmp_unsigned(">=", spins, ir.Constant(I64, SPINS))):
            sleep_while_equal(b, address, value)
        spins.add_incoming(b.select(b.icmp_unsigned(">=", spins, ir.Constant(I64, SPINS)),
                                    ir.Constant(I64, 0), more), b.block)
        b.branch(header)
        b.position_at_end(finished)
        return value

    # run_parts(): claim and run parts until none is left.
    run_parts = ir.Function(module, ir.FunctionType(ir.VoidType(), []), name="pool_run_parts")
    run_parts.linkage = "internal"
    b = ir.IRBuilder(run_parts.append_basic_block("entry"))
    task = b.load(function_slot, typ=PTR)
    argument = b.load(argument_slot, typ=PTR)
    parts = b.load(parts_slot, typ=I64)
    header = b.append_basic_block("claim")
    body = b.append_basic_block("run")
    done = b.append_basic_block("done")
    b.branch(header)
    b.position_at_end(header)
    claimed = b.atomic_rmw("add", next_part, ir.Constant(I64, 1), "acq_rel")
    b.cbranch(b.icmp_unsigned("<", claimed, parts), body, done)
    b.position_at_end(body)
    _call_task(b, task, argument, claimed)
    b.branch(header)
    b.position_at_end(done)
    b.ret_void()

    # graphgrad_pool_worker(id): serve tasks until told to quit.
    worker = ir.Function(module, ir.FunctionType(ir.VoidType(), [I64]), name=WORKER_SYMBOL)
    b = ir.IRBuilder(worker.append_basic_block("entry"))
    entry = b.block
    loop = b.append_basic_block("wait")
    b.branch(loop)
    b.position_at_end(loop)
    seen = b.phi(I32)
    seen.add_incoming(ir.Constant(I32, 0), entry)
    current = wait_until(b, generation, lambda b2, v: b2.icmp_unsigned("!=", v, seen), "generation")
    leave = b.append_basic_block("leave")
    serve = b.append_basic_block("serve")
    b.cbranch(b.icmp_unsigned("!=", b.load_atomic(quit_flag, "acquire", 4), ir.Constant(I32, 0)), leave, serve)
    b.position_at_end(serve)
    b.call(run_parts, [])
    left = b.atomic_rmw("sub", active, ir.Constant(I32, 1), "acq_rel")
    with b.if_then(b.icmp_unsigned("==", left, ir.Constant(I32, 1))):
        wake_all(b, active)
    seen.add_incoming(current, b.block)
    b.branch(loop)
    b.position_at_end(leave)
    b.ret_void()

    # graphgrad_parallel(fn, arg, parts)
    parallel = ir.Function(module, ir.FunctionType(ir.VoidType(), [PTR, PTR, I64]), name=PARALLEL_SYMBOL)
    fn, arg, count = parallel.args
    b = ir.IRBuilder(parallel.append_basic_block("entry"))
    helpers = b.load(workers, typ=I64)
    serial = b.append_basic_block("serial")
    shared = b.append_basic_block("shared")
    b.cbranch(b.or_(b.icmp_unsigned("<=", count, ir.Constant(I64, 1)),
                    b.icmp_unsigned("==", helpers, ir.Constant(I64, 0))), serial, shared)
    b.position_at_end(serial)
    emit_loop(b, count, lambda b2, part, _: (_call_task(b2, fn, arg, part), [])[1], name="part")
    b.ret_void()
    b.position_at_end(shared)
    b.store(fn, function_slot)
    b.store(arg, argument_slot)
    b.store(count, parts_slot)
    b.store_atomic(ir.Constant(I64, 0), next_part, "release", 8)
    b.store_atomic(b.trunc(helpers, I32), active, "release", 4)
    b.atomic_rmw("add", generation, ir.Constant(I32, 1), "acq_rel")
    wake_all(b, generation)
    b.call(run_parts, [])
    wait_until(b, active, lambda b2, v: b2.icmp_unsigned("==", v, ir.Constant(I32, 0)), "active")
    b.ret_void()

    # graphgrad_pool_set_workers(n): how many workers the runtime has started (0: run serially).
    setter = ir.Function(module, ir.FunctionType(ir.VoidType(), [I64]), name=SET_WORKERS_SYMBOL)
    b = ir.IRBuilder(setter.append_basic_block("entry"))
    b.store(setter.args[0], workers)
    b.store_atomic(ir.Constant(I32, 0), quit_flag, "release", 4)
    b.ret_void()

    # graphgrad_pool_stop(): wake every worker and make it return.
    stop = ir.Function(module, ir.FunctionType(ir.VoidType(), []), name=STOP_SYMBOL)
    b = ir.IRBuilder(stop.append_basic_block("entry"))
    b.store(ir.Constant(I64, 0), workers)
    b.store_atomic(ir.Constant(I32, 1), quit_flag, "release", 4)
    b.atomic_rmw("add", generation, ir.Constant(I32, 1), "acq_rel")
    wake_all(b, generation)
    b.ret_void()
    return module


def _call_task(b: ir.IRBuilder, task: ir.Value, argument: ir.Value, part: ir.Value) -> None:
    # llvmlite needs a typed function pointer to know the callee's signature.
    b.call(b.inttoptr(b.ptrtoint(task, I64), TASK_TYPE.as_pointer()), [argument, part])

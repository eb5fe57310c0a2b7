"""The worker pool that splits large kernels across cores, as LLVM IR (one module per process).

``graphgrad_parallel(fn, arg, parts)`` runs ``fn(arg, part)`` for every part in ``[0, parts)`` on
the calling thread and the pool's workers, and returns when all are done. Workers are started by
the runtime (``graphgrad_pool_worker(id)`` on threads it owns) and wait for work by spinning
briefly, then sleeping on a futex (Linux) or yielding (elsewhere).

Protocol: one 64-bit *ticket* holds the task's generation (16 bits), its number of parts (16) and
the next unclaimed part (32). A participant claims a part by compare-and-swap on the ticket, so a
claim can only succeed for the task it looked at. The caller publishes ``fn``/``arg`` and
``remaining = parts`` before the ticket, bumps the wake-up word, runs parts itself, and returns
when ``remaining`` is 0. A worker that wakes late finds nothing to claim and goes back to sleep:
the caller never waits for a worker that holds no part (which matters when cores are busy).

OpenMP: a process that already holds an OpenMP runtime (torch's libgomp, say) can hand its
``GOMP_parallel`` to ``graphgrad_pool_use_openmp``; a task then runs on that runtime's team, whose
threads claim parts from the same ticket, instead of on the pool's own workers, so two pools never
compete for the cores (see ``runtime.jit``). ``GOMP_parallel`` returns when every thread of the
team has returned, and a thread returns only when no part is left to claim, so every part is done.

Concurrent callers: the pool runs one task at a time. A caller takes it by compare-and-swap on
``pool_busy``; a caller that finds it taken (another Python thread's step, or a part of a task
that itself asks for the pool) runs its parts serially on its own thread instead of waiting, so
nothing can deadlock and every caller computes the same parts in the same way.

Concurrent steps: every compiled step calls ``graphgrad_step_enter()`` first and
``graphgrad_step_leave()`` before it returns. While more than one step is running (steps of
several Python threads, or of several Sessions), each runs its parts serially on its own thread:
the steps already keep the cores busy between them, and a step that handed parts to the workers
would wait for a worker descheduled in favour of another step's thread.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Callable

from llvmlite import ir

from .common import I64, PTR, declare_function, emit_loop

I32 = ir.IntType(32)
PARALLEL_SYMBOL = "graphgrad_parallel"
WORKER_SYMBOL = "graphgrad_pool_worker"
STOP_SYMBOL = "graphgrad_pool_stop"
SET_WORKERS_SYMBOL = "graphgrad_pool_set_workers"
STEP_ENTER_SYMBOL = "graphgrad_step_enter"
STEP_LEAVE_SYMBOL = "graphgrad_step_leave"
POOL_THREADS_SYMBOL = "graphgrad_pool_threads"
USE_OPENMP_SYMBOL = "graphgrad_pool_use_openmp"
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


MAX_PARTS = 0xFFFF


@dataclass(frozen=True)
class _Pool:
    """The pool's shared words (module globals, each on its own cache line) and the system calls
    its functions wait and wake with."""

    wakeup: ir.GlobalVariable         # bumped for every task (futex word)
    ticket: ir.GlobalVariable         # generation | parts | next part
    remaining: ir.GlobalVariable      # parts not yet finished (futex word)
    function_slot: ir.GlobalVariable
    argument_slot: ir.GlobalVariable
    generation: ir.GlobalVariable     # the caller's own count
    workers: ir.GlobalVariable
    quit_flag: ir.GlobalVariable
    busy: ir.GlobalVariable           # 1 while a caller owns the pool
    steps: ir.GlobalVariable          # compiled steps running now, in any thread
    openmp: ir.GlobalVariable         # GOMP_parallel of the process's OpenMP runtime, or null
    futex: int | None                 # the futex system call's number (Linux), else None
    syscall: ir.Function | None
    sched_yield: ir.Function
    pause: ir.Function | None

    @classmethod
    def declare(cls, module: ir.Module, triple: str) -> "_Pool":
        arch = triple.split("-")[0]
        futex = _FUTEX.get(arch) if "linux" in triple else None
        wakeup = _global(module, "pool_wakeup", I32, 0)
        ticket = _global(module, "pool_ticket", I64, 0)
        remaining = _global(module, "pool_remaining", I32, 0)
        function_slot = _global(module, "pool_function", PTR, None)
        argument_slot = _global(module, "pool_argument", PTR, None)
        generation = _global(module, "pool_generation", I64, 0)
        workers = _global(module, "pool_workers", I64, 0)
        quit_flag = _global(module, "pool_quit", I32, 0)
        busy = _global(module, "pool_busy", I32, 0)
        steps = _global(module, "pool_steps", I64, 0)
        openmp = _global(module, "pool_openmp", PTR, None)
        syscall = None
        if futex:
            syscall = ir.Function(module, ir.FunctionType(I64, [I64], var_arg=True), name="syscall")
        sched_yield = declare_function(module, "sched_yield", I32, [])
        pause = declare_function(module, "llvm.x86.sse2.pause", ir.VoidType(), []) if arch == "x86_64" else None
        return cls(wakeup, ticket, remaining, function_slot, argument_slot, generation, workers, quit_flag, busy,
                   steps, openmp, futex, syscall, sched_yield, pause)

    def others_running(self, b: ir.IRBuilder) -> ir.Value:
        """Whether another compiled step runs beside the caller's own (see "Concurrent steps")."""
        return b.icmp_unsigned(">", b.load_atomic(self.steps, "monotonic", 8), ir.Constant(I64, 1))

    def relax(self, b: ir.IRBuilder) -> None:
        if self.pause is not None:
            b.call(self.pause, [])

    def sleep_while_equal(self, b: ir.IRBuilder, address: ir.Value, value: ir.Value) -> None:
        if self.syscall is not None:
            b.call(self.syscall, [ir.Constant(I64, self.futex), address, ir.Constant(I32, _FUTEX_WAIT_PRIVATE),
                                  value, ir.Constant(PTR, None)])
        else:
            b.call(self.sched_yield, [])

    def wake_all(self, b: ir.IRBuilder, address: ir.Value) -> None:
        if self.syscall is not None:
            b.call(self.syscall, [ir.Constant(I64, self.futex), address, ir.Constant(I32, _FUTEX_WAKE_PRIVATE),
                                  ir.Constant(I32, 2 ** 31 - 1)])

    def wait_until(self, b: ir.IRBuilder, address: ir.Value, done: Callable[[ir.IRBuilder, ir.Value], ir.Value],
                   name: str) -> ir.Value:
        """Spin, then sleep, until ``done(value)`` holds for the 32-bit word; returns the value."""
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
        self.relax(b)
        exhausted = b.icmp_unsigned(">=", spins, ir.Constant(I64, SPINS))
        with b.if_then(exhausted):
            self.sleep_while_equal(b, address, value)
        spins.add_incoming(b.select(exhausted, ir.Constant(I64, 0), b.add(spins, ir.Constant(I64, 1))), b.block)
        b.branch(header)
        b.position_at_end(finished)
        return value


def build_pool_module(triple: str) -> ir.Module:
    module = ir.Module(name="graphgrad_pool")
    pool = _Pool.declare(module, triple)
    claim = _emit_claim_and_run(module, pool)
    _emit_worker(module, pool, claim)
    _emit_parallel(module, pool, claim)
    _emit_set_workers(module, pool)
    _emit_use_openmp(module, pool)
    _emit_stop(module, pool)
    _emit_step_counting(module, pool)
    _emit_pool_threads(module, pool)
    return module


def _emit_claim_and_run(module: ir.Module, pool: _Pool) -> ir.Function:
    """``pool_claim_and_run()``: run parts of the current task while any is left to claim."""
    claim = ir.Function(module, ir.FunctionType(ir.VoidType(), []), name="pool_claim_and_run")
    claim.linkage = "internal"
    b = ir.IRBuilder(claim.append_basic_block("entry"))
    retry = b.append_basic_block("retry")
    attempt = b.append_basic_block("attempt")
    run = b.append_basic_block("run")
    done = b.append_basic_block("done")
    b.branch(retry)
    b.position_at_end(retry)
    current = b.load_atomic(pool.ticket, "acquire", 8)
    part = b.and_(current, ir.Constant(I64, 0xFFFFFFFF))
    parts = b.and_(b.lshr(current, ir.Constant(I64, 32)), ir.Constant(I64, MAX_PARTS))
    b.cbranch(b.icmp_unsigned("<", part, parts), attempt, done)
    b.position_at_end(attempt)
    exchange = b.cmpxchg(pool.ticket, current, b.add(current, ir.Constant(I64, 1)), "acq_rel", "acquire")
    b.cbranch(b.extract_value(exchange, 1), run, retry)
    b.position_at_end(run)
    _call_task(b, b.load(pool.function_slot, typ=PTR), b.load(pool.argument_slot, typ=PTR), part)
    left = b.atomic_rmw("sub", pool.remaining, ir.Constant(I32, 1), "acq_rel")
    with b.if_then(b.icmp_unsigned("==", left, ir.Constant(I32, 1))):
        pool.wake_all(b, pool.remaining)
    b.branch(retry)
    b.position_at_end(done)
    b.ret_void()
    return claim


def _emit_worker(module: ir.Module, pool: _Pool, claim: ir.Function) -> None:
    """``graphgrad_pool_worker(id)``: serve tasks until told to quit."""
    worker = ir.Function(module, ir.FunctionType(ir.VoidType(), [I64]), name=WORKER_SYMBOL)
    b = ir.IRBuilder(worker.append_basic_block("entry"))
    entry = b.block
    loop = b.append_basic_block("wait")
    b.branch(loop)
    b.position_at_end(loop)
    seen = b.phi(I32)
    seen.add_incoming(ir.Constant(I32, 0), entry)
    current_wakeup = pool.wait_until(b, pool.wakeup, lambda b, value: b.icmp_unsigned("!=", value, seen), "wakeup")
    leave = b.append_basic_block("leave")
    serve = b.append_basic_block("serve")
    b.cbranch(b.icmp_unsigned("!=", b.load_atomic(pool.quit_flag, "acquire", 4), ir.Constant(I32, 0)), leave, serve)
    b.position_at_end(serve)
    b.call(claim, [])
    seen.add_incoming(current_wakeup, b.block)
    b.branch(loop)
    b.position_at_end(leave)
    b.ret_void()


def _emit_parallel(module: ir.Module, pool: _Pool, claim: ir.Function) -> None:
    """``graphgrad_parallel(fn, arg, parts)``: with the pool when this caller can take it (a
    try-lock on ``busy``), else every part serially on the calling thread."""
    parallel = ir.Function(module, ir.FunctionType(ir.VoidType(), [PTR, PTR, I64]), name=PARALLEL_SYMBOL)
    fn, arg, count = parallel.args
    b = ir.IRBuilder(parallel.append_basic_block("entry"))
    helpers = b.load(pool.workers, typ=I64)
    serial = b.append_basic_block("serial")
    shared = b.append_basic_block("shared")
    take = b.append_basic_block("take")
    b.cbranch(b.or_(b.or_(b.icmp_unsigned("<=", count, ir.Constant(I64, 1)), pool.others_running(b)),
                    b.or_(b.icmp_unsigned("==", helpers, ir.Constant(I64, 0)),
                          b.icmp_unsigned(">", count, ir.Constant(I64, MAX_PARTS)))), serial, take)
    b.position_at_end(take)
    taken = b.cmpxchg(pool.busy, ir.Constant(I32, 0), ir.Constant(I32, 1), "acquire", "monotonic")
    b.cbranch(b.extract_value(taken, 1), shared, serial)
    b.position_at_end(serial)

    def run_part(b: ir.IRBuilder, part: ir.Value) -> None:
        _call_task(b, fn, arg, part)
    emit_loop(b, count, run_part, name="part")
    b.ret_void()
    b.position_at_end(shared)
    b.store(fn, pool.function_slot)
    b.store(arg, pool.argument_slot)
    b.store_atomic(b.trunc(count, I32), pool.remaining, "release", 4)
    next_generation = b.add(b.load(pool.generation, typ=I64), ir.Constant(I64, 1))
    b.store(next_generation, pool.generation)
    new_ticket = b.or_(b.shl(b.and_(next_generation, ir.Constant(I64, 0xFFFF)), ir.Constant(I64, 48)),
                       b.shl(count, ir.Constant(I64, 32)))
    b.store_atomic(new_ticket, pool.ticket, "release", 8)
    openmp = b.load(pool.openmp, typ=PTR)
    with b.if_else(b.icmp_unsigned("!=", b.ptrtoint(openmp, I64), ir.Constant(I64, 0))) as (on_openmp, on_pool):
        with on_openmp:
            # GOMP_parallel(fn, data, threads, flags): the team (this thread too) claims the parts.
            body = _emit_openmp_body(module, claim)
            gomp_type = ir.FunctionType(ir.VoidType(), [body.type, PTR, I32, I32])
            b.call(b.inttoptr(b.ptrtoint(openmp, I64), gomp_type.as_pointer()),
                   [body, ir.Constant(PTR, None), b.trunc(b.add(helpers, ir.Constant(I64, 1)), I32),
                    ir.Constant(I32, 0)])
        with on_pool:
            b.atomic_rmw("add", pool.wakeup, ir.Constant(I32, 1), "acq_rel")
            pool.wake_all(b, pool.wakeup)
            b.call(claim, [])
            pool.wait_until(b, pool.remaining, lambda b, value: b.icmp_unsigned("==", value, ir.Constant(I32, 0)),
                            "remaining")
    b.store_atomic(ir.Constant(I32, 0), pool.busy, "release", 4)
    b.ret_void()


def _emit_openmp_body(module: ir.Module, claim: ir.Function) -> ir.Function:
    """``pool_openmp_body(data)``: what each thread of an OpenMP team runs: claim parts until none is left."""
    body = ir.Function(module, ir.FunctionType(ir.VoidType(), [PTR]), name="pool_openmp_body")
    body.linkage = "internal"
    b = ir.IRBuilder(body.append_basic_block("entry"))
    b.call(claim, [])
    b.ret_void()
    return body


def _emit_use_openmp(module: ir.Module, pool: _Pool) -> None:
    """``graphgrad_pool_use_openmp(gomp_parallel)``: run tasks on that OpenMP runtime's threads (null:
    on the pool's own workers again)."""
    setter = ir.Function(module, ir.FunctionType(ir.VoidType(), [PTR]), name=USE_OPENMP_SYMBOL)
    b = ir.IRBuilder(setter.append_basic_block("entry"))
    b.store(setter.args[0], pool.openmp)
    b.ret_void()


def _emit_set_workers(module: ir.Module, pool: _Pool) -> None:
    """``graphgrad_pool_set_workers(n)``: how many workers the runtime has started (0: run serially)."""
    setter = ir.Function(module, ir.FunctionType(ir.VoidType(), [I64]), name=SET_WORKERS_SYMBOL)
    b = ir.IRBuilder(setter.append_basic_block("entry"))
    b.store(setter.args[0], pool.workers)
    b.store_atomic(ir.Constant(I32, 0), pool.quit_flag, "release", 4)
    b.ret_void()


def _emit_stop(module: ir.Module, pool: _Pool) -> None:
    """``graphgrad_pool_stop()``: wake every worker and make it return."""
    stop = ir.Function(module, ir.FunctionType(ir.VoidType(), []), name=STOP_SYMBOL)
    b = ir.IRBuilder(stop.append_basic_block("entry"))
    b.store(ir.Constant(I64, 0), pool.workers)
    b.store_atomic(ir.Constant(I32, 1), pool.quit_flag, "release", 4)
    b.atomic_rmw("add", pool.wakeup, ir.Constant(I32, 1), "acq_rel")
    pool.wake_all(b, pool.wakeup)
    b.ret_void()


def _emit_step_counting(module: ir.Module, pool: _Pool) -> None:
    """``graphgrad_step_enter()`` and ``graphgrad_step_leave()``: count the compiled steps running."""
    for name, operation in ((STEP_ENTER_SYMBOL, "add"), (STEP_LEAVE_SYMBOL, "sub")):
        function = ir.Function(module, ir.FunctionType(ir.VoidType(), []), name=name)
        b = ir.IRBuilder(function.append_basic_block("entry"))
        b.atomic_rmw(operation, pool.steps, ir.Constant(I64, 1), "monotonic")
        b.ret_void()


def _emit_pool_threads(module: ir.Module, pool: _Pool) -> None:
    """``graphgrad_pool_threads()``: how many threads a task started now would run on: the workers
    and the caller, or 1 while another step is running (its parts run serially then)."""
    function = ir.Function(module, ir.FunctionType(I64, []), name=POOL_THREADS_SYMBOL)
    b = ir.IRBuilder(function.append_basic_block("entry"))
    everyone = b.add(b.load(pool.workers, typ=I64), ir.Constant(I64, 1))
    b.ret(b.select(pool.others_running(b), ir.Constant(I64, 1), everyone))


def count_running_step(step: ir.Function) -> None:
    """Make a compiled step's entry point count itself among the running steps: enter first, leave
    before each of its returns (a failed numerics check returns early)."""
    module = step.module
    enter = declare_function(module, STEP_ENTER_SYMBOL, ir.VoidType(), [])
    leave = declare_function(module, STEP_LEAVE_SYMBOL, ir.VoidType(), [])
    b = ir.IRBuilder()
    b.position_at_start(step.entry_basic_block)
    b.call(enter, [])
    for block in step.blocks:
        if isinstance(block.terminator, ir.Ret):
            b.position_before(block.terminator)
            b.call(leave, [])


def _call_task(b: ir.IRBuilder, task: ir.Value, argument: ir.Value, part: ir.Value) -> None:
    # llvmlite needs a typed function pointer to know the callee's signature.
    b.call(b.inttoptr(b.ptrtoint(task, I64), TASK_TYPE.as_pointer()), [argument, part])

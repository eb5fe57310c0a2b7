"""``passes.memory`` on compiled steps: assignments write their variables in place and run early,
an elementwise kernel writes over an input that dies with it, and temporaries share memory by
liveness. Each pass is also switched off to show what it changes."""
from __future__ import annotations

from typing import Callable

import numpy as np
import pytest

import compiler as cc
import optim
from compiler.kernel_ir import Kernel, Program
from compiler.passes import memory
from compiler.pipeline import compile_step

from .steps import Step, kernels_covering, mlp_training_step


def _without(monkeypatch: pytest.MonkeyPatch, pass_name: str) -> None:
    """Compile the following steps with the memory pass ``pass_name`` left out."""
    monkeypatch.setattr(memory, pass_name, lambda program: program)


def _writes_variable(program: Program, kernel: Kernel) -> bool:
    return program.buffers[kernel.out.buffer].role == "variable"


def _momentum_like_update() -> Step:
    """``m = 0.9 m + g; w -= 0.1 m``: the new ``m`` is stored and read again by ``w``'s update."""
    grad = cc.placeholder("float32", (4, 3), name="g")
    m = cc.Variable(np.zeros((4, 3), "float32"), name="m")
    w = cc.Variable(np.ones((4, 3), "float32"), name="w")
    m_new = 0.9 * m + grad
    return [cc.group(cc.assign(m, m_new), cc.assign_sub(w, 0.1 * m_new))], {grad: (4, 3)}


def test_the_kernel_computing_a_new_value_writes_its_variable(graph, monkeypatch) -> None:
    fetches, feed_shapes = _momentum_like_update()
    program = compile_step(fetches, feed_shapes).program
    assert kernels_covering(program, "Assign") == []
    (producer,) = kernels_covering(program, "Add")
    assert _writes_variable(program, producer)
    _without(monkeypatch, "alias_assignments")
    unaliased = compile_step(fetches, feed_shapes).program
    (copy,) = kernels_covering(unaliased, "Assign")
    assert [c[0] for c in copy.covers] == ["Assign"] and len(unaliased.kernels) == len(program.kernels) + 1


def test_mlp_adam_step_updates_slots_in_place() -> None:
    exe = mlp_training_step(optim.AdamOptimizer(1e-3))
    program = exe.program
    copies = [k for k in program.kernels if [c[0] for c in k.covers] == ["Assign"]]
    assert copies == []  # m and v are written by the kernels that compute them
    # one (128, 1) kernel: NaN for labels out of range (target cuda); three to check them; the loss
    # itself is not computed (the gradient starts from ones of its known shape)
    assert len(program.kernels) == 47, exe.report()


def _update_between_a_read_and_unrelated_work() -> Step:
    v = cc.Variable(np.ones(3, "float32"), name="v")
    x = cc.placeholder("float32", (3,), name="x")
    y = cc.placeholder("float32", (5,), name="y")
    read = cc.reduce_sum(v * 2.0)                     # needs v's value from the start of the step
    update = cc.assign_add(v, x)
    unrelated = cc.reduce_sum(cc.exp(y))
    return [read, update.op, unrelated], {x: (3,), y: (5,)}


def _positions(program: Program) -> dict[str, int]:
    """The position of the kernel that covers each op type (the ops here each have one)."""
    return {covered[0]: i for i, k in enumerate(program.kernels) for covered in k.covers}


def test_an_assignment_runs_right_after_the_last_read_of_the_old_value(graph, monkeypatch) -> None:
    fetches, feed_shapes = _update_between_a_read_and_unrelated_work()
    program = compile_step(fetches, feed_shapes).program
    at = _positions(program)
    assert at["Mul"] < at["AssignAdd"] < at["Exp"]
    assert program.first_assignment == len(program.kernels)     # no separate phase is left
    _without(monkeypatch, "hoist_assignments")
    last = compile_step(fetches, feed_shapes).program
    assert _positions(last)["AssignAdd"] == len(last.kernels) - 1 == last.first_assignment


def _matmul_bias_relu_read_twice() -> Step:
    x = cc.placeholder("float32", (8, 5), name="x")
    w = cc.placeholder("float32", (5, 3), name="w")
    b = cc.placeholder("float32", (3,), name="b")
    h = cc.nn.relu(x @ w + b)                          # read by two reductions: stored
    return [cc.reduce_sum(h, axis=0), cc.reduce_max(h, axis=1)], {x: (8, 5), w: (5, 3), b: (3,)}


def test_an_elementwise_kernel_writes_over_an_input_that_dies_with_it(graph, monkeypatch) -> None:
    fetches, feed_shapes = _matmul_bias_relu_read_twice()
    program = compile_step(fetches, feed_shapes).program
    (matmul,), (relu,) = kernels_covering(program, "MatMul"), kernels_covering(program, "Relu")
    assert relu.out.buffer == matmul.out.buffer in {a.buffer for a in relu.operands}
    _without(monkeypatch, "reuse_inputs_in_place")
    program = compile_step(fetches, feed_shapes).program
    (matmul,), (relu,) = kernels_covering(program, "MatMul"), kernels_covering(program, "Relu")
    assert relu.out.buffer != matmul.out.buffer


def _chain_of_reductions() -> Step:
    x = cc.placeholder("float32", (64, 64), name="x")
    rows = cc.reduce_sum(cc.exp(x), axis=1)
    columns = cc.reduce_sum(x * 2.0, axis=0)
    peaks = cc.reduce_max(rows[:, None] * columns, axis=1)
    return [cc.reduce_sum(cc.tanh(peaks))], {x: (64, 64)}


def _mlp_inference() -> Step:
    x = cc.placeholder("float32", (16, 32), name="x")
    h = x
    for width in (64, 32, 64, 8):
        h = cc.nn.relu(h @ cc.constant(np.full((h.shape[1], width), 0.01, "float32")))
        h = h * cc.reduce_mean(h)                      # read twice: each layer is stored
    return [h], {x: (16, 32)}


STEPS: dict[str, Callable[[], Step]] = {
    "chain-of-reductions": _chain_of_reductions,
    "mlp-inference": _mlp_inference,
    "momentum-update": _momentum_like_update,
    "matmul-bias-relu": _matmul_bias_relu_read_twice,
}


def _lifetimes(program: Program) -> dict[int, tuple[int, int]]:
    """Each buffer's first and last kernel; fetched buffers live to the end of the step."""
    first: dict[int, int] = {}
    last: dict[int, int] = {}
    for position, kernel in enumerate(program.kernels):
        for access in (kernel.out, *kernel.operands):
            first.setdefault(access.buffer, position)
            last[access.buffer] = position
    for fetch in program.fetches:
        if fetch is not None:
            last[fetch.buffer] = len(program.kernels)
    return {b: (first[b], last[b]) for b in first}


@pytest.mark.parametrize("name", STEPS)
def test_temporaries_alive_together_never_share_bytes(graph, name: str) -> None:
    fetches, feed_shapes = STEPS[name]()
    program = compile_step(fetches, feed_shapes).program
    lifetimes = _lifetimes(program)
    placed = sorted(program.placement.items())
    assert {b.index for b in program.buffers if b.role == "temp" and b.index in lifetimes} == {b for b, _ in placed}
    for i, (a, (arena_a, offset_a)) in enumerate(placed):
        for b, (arena_b, offset_b) in placed[i + 1:]:
            (start_a, stop_a), (start_b, stop_b) = lifetimes[a], lifetimes[b]
            if arena_a != arena_b or stop_a < start_b or stop_b < start_a:
                continue
            end_a, end_b = offset_a + program.buffers[a].nbytes, offset_b + program.buffers[b].nbytes
            assert end_a <= offset_b or end_b <= offset_a, (a, b)
    for arena, size in enumerate(program.arenas):
        assert all(offset + program.buffers[b].nbytes <= size for b, (at, offset) in placed if at == arena)


def test_a_temporary_takes_the_bytes_of_one_that_died(graph) -> None:
    fetches, feed_shapes = _chain_of_reductions()
    program = compile_step(fetches, feed_shapes).program
    (rows,) = kernels_covering(program, "Exp")
    (peaks,) = kernels_covering(program, "ReduceMax")
    assert _lifetimes(program)[rows.out.buffer][1] < program.kernels.index(peaks)
    assert program.placement[peaks.out.buffer] == program.placement[rows.out.buffer]
    temporaries = sum(b.nbytes for b in program.buffers if b.index in program.placement)
    assert sum(program.arenas) < temporaries


def test_the_arenas_first_fit_equals_the_plain_scan_over_every_placed_buffer() -> None:
    """The placement scanned every buffer placed for each new one (quadratic: 29 s for 10 000
    temporaries); the vectorized first fit must place every buffer where that scan did."""
    import random

    from compiler.passes.memory import _Arena
    rng = random.Random(1)
    for _ in range(200):
        arena, placed = _Arena(), []
        for _ in range(rng.randint(1, 120)):
            start = rng.randint(0, 50)
            stop = start + rng.randint(0, 30)
            size = rng.choice([64, 128, 192, 640, 4096])
            offset = 0
            for low, high in sorted((o, o + s) for (b, e, o, s) in placed if not (e < start or stop < b)):
                if offset + size <= low:
                    break
                offset = max(offset, high)
            assert arena.first_fit(start, stop, size) == offset
            arena.add(start, stop, offset, size)
            placed.append((start, stop, offset, size))

"""The host-side walk of a step's schedule that ``target="cuda"`` uses for branches and loops
(``runtime.cuda.run_schedule``), checked against the compiled CPU step without a GPU: the kernels
it launches, with predicates read from a CPU run of the same program."""
from __future__ import annotations

import numpy as np

import compiler as cc
from compiler.kernel_ir import Branch, Loop
from runtime import Session
from runtime.cuda import run_schedule


def test_branches_launch_one_side_and_loops_repeat_until_the_predicate_fails() -> None:
    schedule = (0, Branch(7, (1, 2), (3,)), Loop((4,), 8, (5, 6)), 9)
    predicates = {7: [False, True], 8: [True, True, False, True, False]}
    launched: list[int] = []

    def holds(buffer: int) -> bool:
        return predicates[buffer].pop(0)
    run_schedule(schedule, launched.append, holds)
    assert launched == [0, 3, 4, 5, 6, 4, 5, 6, 4, 9]
    run_schedule(schedule, launched.append, holds)
    assert launched[10:] == [0, 1, 2, 4, 5, 6, 4, 9]


def test_the_walk_follows_a_compiled_step_of_nested_control_flow() -> None:
    graph = cc.Graph()
    with graph.as_default():
        x = cc.placeholder("float32", shape=(3,), name="x")
        _, y = cc.while_loop(lambda i, v: i < 4, lambda i, v: (i + 1, cc.cond(
            cc.reduce_sum(v) > 10.0, lambda: v * 0.5, lambda: v * 3.0)), (0, x))
    with Session(graph) as sess:
        program = sess.compile(y, {x: np.ones(3, "float32")}).step.program
    # Predicates come from the reference: the loop runs 4 times; the branch takes 3x while the sum
    # is at most 10 (3 -> 9 -> 27, then halves: 13.5, 6.75 ... ): sums 3, 9, 27, 13.5.
    sums = iter([3.0, 9.0, 27.0, 13.5])
    loop = next(step for step in program.steps() if isinstance(step, Loop))
    branch = next(step for step in loop.body if isinstance(step, Branch))
    trips = iter([True] * 4 + [False])
    launched: list[int] = []

    def holds(buffer: int) -> bool:
        return next(trips) if buffer == loop.predicate else next(sums) > 10.0
    run_schedule(program.steps(), launched.append, holds)
    taken = [p for p in launched if p in branch.taken]
    otherwise = [p for p in launched if p in branch.otherwise]
    assert len(taken) == 2 * len(branch.taken) and len(otherwise) == 2 * len(branch.otherwise)
    assert launched.count(loop.condition[-1]) == 5

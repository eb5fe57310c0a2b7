"""``passes.control.control_reads``: which reads of a variable see an assignment made earlier in
the same step (the analysis both the compiler and the reference evaluator use)."""
from __future__ import annotations

import numpy as np

import compiler as cc
from compiler.passes.control import control_reads
from compiler.passes.specialize import needed_operations


def _reads(*roots: cc.Tensor | cc.Operation) -> dict:
    operations = needed_operations([r.op if isinstance(r, cc.Tensor) else r for r in roots])
    return control_reads(operations)


def test_a_read_after_an_assignment_sees_it_and_other_reads_do_not(graph) -> None:
    v = cc.Variable(np.zeros(2), name="v")
    before = v * 1.0
    assigned = cc.assign(v, [1.0, 2.0])
    with cc.control_dependencies([assigned]):
        after = v * 1.0
    reads = _reads(before, after)
    assert reads[after.op] == {0: assigned.op}
    assert before.op not in reads


def test_an_update_after_an_assignment_adds_to_its_value(graph) -> None:
    v = cc.Variable(np.zeros(2), name="v")
    first = cc.assign(v, [1.0, 2.0])
    with cc.control_dependencies([first]):
        second = cc.assign_add(v, [1.0, 1.0])
    assert _reads(second) == {second.op: {0: first.op}}


def test_assignments_are_seen_through_groups_and_through_the_inputs_of_a_dependency(graph) -> None:
    a = cc.Variable(np.zeros(()), name="a")
    b = cc.Variable(np.zeros(()), name="b")
    assign_a, assign_b = cc.assign(a, 1.0), cc.assign(b, 2.0)
    with cc.control_dependencies([cc.group(assign_a, assign_b)]):
        total = a + b
    derived = total * 3.0                        # depends on the assignments through its data
    with cc.control_dependencies([derived]):
        later = a * 1.0
    reads = _reads(total, later)
    assert reads[total.op] == {0: assign_a.op, 1: assign_b.op}
    assert reads[later.op] == {0: assign_a.op}


def test_of_two_visible_assignments_the_later_built_one_wins(graph) -> None:
    v = cc.Variable(np.zeros(()), name="v")
    first = cc.assign(v, 1.0)
    with cc.control_dependencies([first]):
        second = cc.assign(v, 2.0)
    with cc.control_dependencies([first, second]):
        read = v * 1.0
    assert _reads(read)[read.op] == {0: second.op}

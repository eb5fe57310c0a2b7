"""``passes.specialize``: the graph pruned to what the fetches need, with the shape rules run again
on the fed shapes, and chained assignments turned into one assignment of the combined value."""
from __future__ import annotations

import re

import numpy as np
import pytest

import compiler as cc
from compiler.passes.specialize import needed_operations

from .steps import node_types, specialized_nodes

HERE = re.escape(__file__.rsplit("/", 1)[-1])


def test_only_what_the_fetches_need_is_kept_in_creation_order(graph) -> None:
    x = cc.placeholder("float32", (3,), name="x")
    v = cc.Variable(np.zeros(3, "float32"), name="v")
    update = cc.assign_add(v, x)
    unused = cc.tanh(x)
    with cc.control_dependencies([update]):
        read = cc.exp(x)
    needed = needed_operations([read.op])
    assert [op.type for op in needed] == ["Placeholder", "Variable", "AssignAdd", "Exp"]
    assert needed == sorted(needed, key=lambda op: op.id) and unused.op not in needed


def test_a_random_op_brings_the_update_of_its_graphs_run_counter(graph) -> None:
    noise = cc.random_uniform((3,), seed=1)
    types = [op.type for op in needed_operations([noise.op])]
    assert "RandomUniform" in types and "AssignAdd" in types


def test_unknown_dims_take_the_fed_shapes(graph) -> None:
    x = cc.placeholder("float32", (None, 3), name="x")
    w = cc.placeholder("float32", (3, None), name="w")
    y = cc.reduce_sum(x @ w, axis=0)
    nodes, (fetched,) = specialized_nodes([y], {x: (5, 3), w: (3, 7)})
    assert [n.shape for n in nodes] == [(5, 3), (3, 7), (5, 7), (7,)]
    assert fetched.shape == (7,) and fetched.origin is y.op


def test_a_shape_error_found_with_the_fed_shapes_names_the_op_line_and_feeds(graph) -> None:
    x = cc.placeholder("float32", (None, 4), name="x")
    y = cc.placeholder("float32", (None, 4), name="y")
    joined = cc.concat([x, y], axis=1)
    with pytest.raises(cc.ShapeError) as info:
        specialized_nodes([joined], {x: (2, 4), y: (3, 4)})
    message = str(info.value)
    assert message.startswith("ConcatV2 'ConcatV2': cannot concatenate (2, 4) and (3, 4) along axis 1 "
                              "with the fed shapes")
    assert re.search(rf"fed shapes: 'x' \(2, 4\) at \S*{HERE}:\d+, 'y' \(3, 4\) at \S*{HERE}:\d+$", message), message


def test_an_update_after_an_assignment_becomes_one_assignment_of_the_combined_value(graph) -> None:
    v = cc.Variable(np.ones(3), name="v")
    first = cc.assign(v, v * 2.0)
    with cc.control_dependencies([first]):
        second = cc.assign_sub(v, [1.0, 1.0, 1.0])
    nodes, (fetched,) = specialized_nodes([second])
    assert fetched.opdef.name == "Assign" and fetched.origin is second.op
    variable, combined = fetched.inputs
    assert combined.opdef.name == "Sub" and combined.inputs[0].origin is first.op
    assert nodes.index(combined) < nodes.index(fetched)         # placed before its consumer
    assert node_types(nodes).count("AssignSub") == 0

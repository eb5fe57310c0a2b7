"""``passes.simplify``, one rewrite at a time on the specialised nodes, and through the "optimized"
dump of a compiled step: shapes and small constants are folded, identity-like ops vanish, identical
computations merge and what no fetch needs is dropped."""
from __future__ import annotations

import re
from typing import Callable

import numpy as np
import pytest

import compiler as cc
from compiler.passes import simplify
from runtime import Session

from .steps import node_types, specialized_nodes


def test_a_value_that_depends_only_on_shapes_becomes_a_constant(graph) -> None:
    x = cc.placeholder("float32", (None, 3), name="x")
    count = cc.element_count(x, axis=0, dtype="int32")
    nodes, (fetched,) = specialized_nodes([count], {x: (5, 3)})
    assert "ElementCount" in node_types(nodes)
    folded = simplify.fold_shapes(nodes)
    assert "ElementCount" not in node_types(folded)
    assert fetched.resolve().opdef.name == "Const" and fetched.resolve().value == 5


NOOPS: dict[str, Callable[[cc.Tensor], cc.Tensor]] = {
    "identity": cc.identity,
    "stop_gradient": cc.stop_gradient,
    "cast-to-its-own-dtype": lambda x: cc.cast(x, "float32"),
    "reshape-to-its-own-shape": lambda x: cc.reshape(x, (2, 3)),
    "broadcast_to-its-own-shape": lambda x: cc.broadcast_to(x, (2, 3)),
}
NOT_NOOPS: dict[str, Callable[[cc.Tensor], cc.Tensor]] = {
    "cast-to-another-dtype": lambda x: cc.cast(x, "float64"),
    "reshape-to-another-shape": lambda x: cc.reshape(x, (3, 2)),
    "broadcast_to-another-shape": lambda x: cc.broadcast_to(x, (4, 2, 3)),
}


@pytest.mark.parametrize("name", NOOPS)
def test_identity_like_ops_vanish(graph, name: str) -> None:
    x = cc.placeholder("float32", (2, 3), name="x")
    nodes, (fetched,) = specialized_nodes([NOOPS[name](x)], {x: (2, 3)})
    assert node_types(simplify.elide_noops(nodes)) == ["Placeholder"]
    assert fetched.resolve().tensor is x


@pytest.mark.parametrize("name", NOT_NOOPS)
def test_ops_that_change_shape_or_dtype_stay(graph, name: str) -> None:
    x = cc.placeholder("float32", (2, 3), name="x")
    nodes, (fetched,) = specialized_nodes([NOT_NOOPS[name](x)], {x: (2, 3)})
    assert len(simplify.elide_noops(nodes)) == 2 and fetched.resolve() is fetched


def test_small_constant_expressions_are_computed_once_at_compile_time(graph) -> None:
    x = cc.placeholder("float64", (3,), name="x")
    folded = cc.exp(cc.constant(np.arange(3.0))) * 2.0
    nodes, (fetched, kept) = specialized_nodes([folded, x * 2.0], {x: (3,)})
    simplify.fold_constants(nodes)
    assert fetched.resolve().opdef.name == "Const"
    np.testing.assert_array_equal(fetched.resolve().value, np.exp(np.arange(3.0)) * 2.0)
    assert kept.resolve() is kept                      # an input is fed: nothing to fold


def test_constants_over_the_fold_limit_stay_computed(graph) -> None:
    large = cc.constant(np.ones(simplify.FOLD_LIMIT + 1)) * 2.0
    small = cc.constant(np.ones(simplify.FOLD_LIMIT)) * 2.0
    nodes, (large_node, small_node) = specialized_nodes([large, small])
    simplify.fold_constants(nodes)
    assert large_node.resolve().opdef.name == "Mul"
    assert small_node.resolve().opdef.name == "Const"


def test_identical_computations_merge_and_different_attributes_do_not(graph) -> None:
    x = cc.placeholder("float32", (2, 3), name="x")
    fetches = [cc.exp(x), cc.exp(x), cc.reduce_sum(x, axis=0), cc.reduce_sum(x, axis=1), cc.reduce_sum(x, axis=1)]
    nodes, fetched = specialized_nodes(fetches, {x: (2, 3)})
    merged = simplify.eliminate_common_subexpressions(nodes)
    assert node_types(merged).count("Exp") == 1 and node_types(merged).count("ReduceSum") == 2
    first_exp, second_exp, axis0, axis1, axis1_again = (n.resolve() for n in fetched)
    assert first_exp is second_exp and axis1 is axis1_again and axis0 is not axis1


def test_assignments_never_merge(graph) -> None:
    v = cc.Variable(np.zeros(3, "float32"), name="v")
    updates = cc.group(cc.assign_add(v, [1.0, 1.0, 1.0]), cc.assign_add(v, [1.0, 1.0, 1.0]))
    nodes, _ = specialized_nodes([updates])
    merged = simplify.eliminate_common_subexpressions(nodes)
    assert node_types(merged).count("Assign") + node_types(merged).count("AssignAdd") == 2


def test_what_no_root_needs_is_dropped(graph) -> None:
    x = cc.placeholder("float32", (3,), name="x")
    y = x * (cc.constant(2.0) * cc.constant(3.0))
    nodes, (fetched,) = specialized_nodes([y], {x: (3,)})
    folded = simplify.fold_constants(nodes)
    assert node_types(folded).count("Const") == 3       # 2.0 and 3.0 are left without a reader
    live = simplify.eliminate_dead_code(folded, [fetched.resolve()])
    assert node_types(live) == ["Placeholder", "Const", "Mul"]
    assert [n.value for n in live if n.opdef.name == "Const"] == [6.0]


def test_control_inputs_of_a_root_are_kept(graph) -> None:
    v = cc.Variable(np.zeros(3, "float32"), name="v")
    update = cc.assign_add(v, [1.0, 1.0, 1.0])
    with cc.control_dependencies([update]):
        after = cc.identity(v)
    nodes, (fetched,) = specialized_nodes([after])
    assert "AssignAdd" in node_types(simplify.eliminate_dead_code(nodes, [fetched]))


def test_constant_folding_visible_in_optimized(graph) -> None:
    x = cc.placeholder("float32", shape=(None, 3), name="x")
    y = x * (cc.constant(2.0) * cc.constant(3.0))
    feed = {x: np.ones((4, 3), "float32")}
    with Session(graph) as sess:
        exe = sess.compile(y, feed)
        got = sess.run(y, feed)
    before, after = exe.dump("graph"), exe.dump("optimized")
    const_mul = re.compile(r"Mul\(%\d+, %\d+\) : float32\[scalar\]")
    assert const_mul.search(before)
    assert not const_mul.search(after)
    assert after.count("Mul(") == 1
    assert "value=6.0" in after
    np.testing.assert_array_equal(got, np.full((4, 3), 6.0, "float32"))


def test_cse_visible_in_optimized(graph) -> None:
    x = cc.placeholder("float32", shape=(None, 3), name="x")
    y = cc.exp(x) + cc.exp(x)
    feed = {x: np.zeros((2, 3), "float32")}
    with Session(graph) as sess:
        exe = sess.compile(y, feed)
        got = sess.run(y, feed)
    assert exe.dump("graph").count("Exp(") == 2
    after = exe.dump("optimized")
    assert after.count("Exp(") == 1
    assert re.search(r"Add\((%\d+), \1\)", after), after
    np.testing.assert_array_equal(got, np.full((2, 3), 2.0, "float32"))


def test_adding_zero_is_not_folded_away(graph) -> None:
    # x + 0.0 turns -0.0 into +0.0: it is not an identity under IEEE rules.
    x = cc.placeholder("float32", shape=(2,), name="x")
    y = x + 0.0
    feed = {x: np.array([-0.0, 1.0], "float32")}
    with Session(graph) as sess:
        got = sess.run(y, feed)
    assert not np.signbit(got[0])

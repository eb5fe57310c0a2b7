"""Scopes of a graph: ``init_scope`` lifts nodes out of the caller's scopes."""
from __future__ import annotations

import compiler as cc


def test_init_scope_builds_at_the_root_without_control_dependencies(graph) -> None:
    gate = cc.no_op(name="gate")
    with cc.name_scope("outer"), cc.control_dependencies([gate]):
        with graph.gradient_override_map({"Const": "Identity"}):
            with graph.init_scope() as entered:
                lifted = cc.constant(1.0, name="lifted")
            scoped = cc.constant(2.0, name="scoped")
    assert entered is graph
    assert lifted.op.name == "lifted"
    assert lifted.op.control_inputs == () and lifted.op.gradient_override is None
    # The enclosing scopes are back once the block ends.
    assert scoped.op.name == "outer/scoped"
    assert scoped.op.control_inputs == (gate,) and scoped.op.gradient_override == "Identity"


def test_init_scope_makes_its_graph_the_default() -> None:
    other = cc.Graph()
    with cc.Graph().as_default():
        with other.init_scope():
            made = cc.constant(0.0)
    assert made.graph is other

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


# -- name= of functions composed of several ops ---------------------------------------------------

def _ops_built_by(graph, build) -> list:
    before = set(graph.get_operations())
    build()
    return [op for op in graph.get_operations() if op not in before]


def test_softmax_builds_its_ops_under_its_name(graph) -> None:
    x = cc.placeholder("float32", shape=(None, 4), name="x")
    built = _ops_built_by(graph, lambda: cc.nn.softmax(x, name="probs"))
    assert built and all(op.name.startswith("probs/") for op in built), [op.name for op in built]


def test_composite_functions_name_a_scope(graph) -> None:
    logits = cc.placeholder("float32", shape=(None, 3), name="logits")
    labels = cc.placeholder("int32", shape=(None,), name="labels")
    calls = {
        "lse/": lambda: cc.reduce_logsumexp(logits, axis=1, name="lse"),
        "xent/": lambda: cc.nn.sparse_softmax_cross_entropy_with_logits(labels=labels, logits=logits,
                                                                          name="xent"),
        "stats/": lambda: cc.nn.moments(logits, axes=[0], name="stats"),
        # without a name, TF1's default name
        "logistic_loss/": lambda: cc.nn.sigmoid_cross_entropy_with_logits(labels=logits, logits=logits),
    }
    for scope, build in calls.items():
        built = _ops_built_by(graph, build)
        assert built and all(op.name.startswith(scope) for op in built), [op.name for op in built]


def test_a_composite_function_builds_in_its_inputs_graph() -> None:
    other = cc.Graph()
    with other.as_default():
        logits = cc.placeholder("float32", shape=(2, 3), name="logits")
    with cc.Graph().as_default():
        loss = cc.nn.softmax_cross_entropy_with_logits(labels=[[0.0, 1.0, 0.0]] * 2, logits=logits,
                                                       name="loss")
    assert loss.graph is other and loss.op.name.startswith("loss/")

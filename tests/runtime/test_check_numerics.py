"""Numerics checks compiled into the step: ``cc.check_numerics``, ``cc.add_check_numerics_ops`` and
``Session(check_numerics=True)`` stop a run at the first NaN or Inf with a ``NumericsError`` naming
the op and the user's line (and, in the backward pass, the forward op), leaving every variable as
it was before the run; on every target that runs compiled steps and on the reference."""
from __future__ import annotations

import re

import numpy as np
import pytest

import compiler as cc
import optim
from runtime import Session

TARGETS = ["cpu", "reference", "cuda-emulated"]
HERE = re.escape(__file__.rsplit("/", 1)[-1])


def _line_of(text: str) -> str:
    """A pattern for ``file:line`` of the first line of this file holding ``text``."""
    with open(__file__, encoding="utf-8") as source:
        number = next(i for i, line in enumerate(source, 1) if text in line)
    return f"[^ ]*{HERE}:{number}"


def _model():
    graph = cc.Graph()
    with graph.as_default():
        x = cc.placeholder("float64", (None, 3), name="x")
        w = cc.Variable(np.full((3, 2), 0.5), name="w")
        hidden = cc.sqrt(x @ w)                      # forward: sqrt of a value that may be 0
        loss = cc.reduce_sum(cc.log(hidden + 1.0))   # forward: log of a value that may be < 0
        train = optim.GradientDescentOptimizer(0.1).minimize(loss)
    return graph, x, w, loss, train


@pytest.mark.parametrize("target", TARGETS)
def test_a_nan_in_the_forward_pass_names_the_op_and_leaves_variables(target: str) -> None:
    graph, x, w, loss, train = _model()
    with Session(graph, target=target, check_numerics=True) as sess:
        sess.run(train, {x: np.ones((2, 3))})
        before = sess.run(w)
        with pytest.raises(cc.NumericsError, match=r"Sqrt 'Sqrt' \(at " + _line_of("hidden = cc.sqrt")):
            sess.run(train, {x: -np.ones((2, 3))})
        np.testing.assert_array_equal(sess.run(w), before)
        sess.run(train, {x: np.ones((2, 3))})      # the session goes on
        assert np.isfinite(sess.run(loss, {x: np.ones((2, 3))}))


@pytest.mark.parametrize("target", TARGETS)
def test_an_inf_in_the_backward_pass_names_the_forward_op(target: str) -> None:
    graph, x, w, loss, train = _model()
    with Session(graph, target=target, check_numerics=True) as sess:
        before = sess.run(w)
        # x @ w == 0: sqrt is finite (0) but its gradient 1 / (2 sqrt(0)) is not.
        with pytest.raises(cc.NumericsError) as raised:
            sess.run(train, {x: np.zeros((2, 3))})
        message = str(raised.value)
        assert re.search(r"in the output of \w+ 'gradients/[^']+' \(at " + _line_of("train = optim"), message), message
        assert re.search(r"part of the gradient of Sqrt 'Sqrt' \(at " + _line_of("hidden = cc.sqrt"), message), message
        np.testing.assert_array_equal(sess.run(w), before)


@pytest.mark.parametrize("target", TARGETS)
def test_a_gradient_fused_into_the_update_is_named_not_the_update(target: str) -> None:
    """The Inf is made by the gradient of sqrt at 0, a division the compiled step fuses into the
    optimizer's update kernel, whose output is what it checks: the op named is still the division."""
    graph = cc.Graph()
    with graph.as_default():
        w = cc.Variable(np.array([0.0, 1.0], "float32"), name="w")
        loss = cc.reduce_sum(cc.sqrt(w))
        update = optim.GradientDescentOptimizer(0.1).minimize(loss)
    with Session(graph, target=target, check_numerics=True) as sess:
        for _ in range(2):   # the same report again on the second run
            with pytest.raises(cc.NumericsError) as raised:
                sess.run(update)
            message = str(raised.value)
            assert re.search(r"in the output of Div 'gradients/[^']+' \(at " + _line_of("update = optim.Gradient"),
                             message), message
            assert "part of the gradient of Sqrt 'Sqrt'" in message, message
        np.testing.assert_array_equal(sess.run(w), [0.0, 1.0])


@pytest.mark.parametrize("target", TARGETS)
def test_explicit_checks_say_their_message(target: str) -> None:
    graph = cc.Graph()
    with graph.as_default():
        x = cc.placeholder("float32", (4,), name="x")
        ratio = cc.check_numerics(1.0 / x, "ratio of x")
        total = cc.reduce_sum(ratio)
    with Session(graph, target=target) as sess:
        assert sess.run(total, {x: np.ones(4, "float32")}) == 4.0
        with pytest.raises(cc.NumericsError, match=r"ratio of x: NaN or Inf in the output of \w+ '[^']+' \(at "
                                                    + _line_of("ratio = cc.check_numerics")
                                                    + r"\), checked by CheckNumerics"):
            sess.run(total, {x: np.array([1, 0, 1, 1], "float32")})


@pytest.mark.parametrize("target", TARGETS)
def test_add_check_numerics_ops_checks_every_float_value(target: str) -> None:
    graph = cc.Graph()
    with graph.as_default():
        x = cc.placeholder("float64", (3,), name="x")
        y = cc.exp(x) * 2.0
        z = cc.reduce_sum(cc.log(y))
        checks = cc.add_check_numerics_ops()
    with Session(graph, target=target) as sess:
        assert np.isfinite(sess.run([z, checks], {x: np.zeros(3)})[0])
        with pytest.raises(cc.NumericsError, match=r"Exp 'Exp'"):
            sess.run([z, checks], {x: np.array([0.0, 1000.0, 0.0])})
        assert np.isinf(sess.run(z, {x: np.array([0.0, 1000.0, 0.0])}))   # unchecked without the op


@pytest.mark.parametrize("target", TARGETS)
def test_add_check_numerics_ops_checks_what_is_outside_branches_and_loops(target: str) -> None:
    """It refused a graph with a cond or a loop (it tried to check the values inside them from
    outside); it checks the values around them, and the session's checks reach inside."""
    graph = cc.Graph()
    with graph.as_default():
        x = cc.placeholder("float64", (), name="x")
        doubled = cc.while_loop(lambda t: t < 100.0, lambda t: t * 2.0, [x], maximum_iterations=20)
        branch = cc.cond(x > 0.0, lambda: cc.exp(x), lambda: x)
        logged = cc.log(doubled + branch)
        checks = cc.add_check_numerics_ops()
    with Session(graph, target=target) as sess:
        assert np.isfinite(sess.run([logged, checks], {x: 1.0})[0])
        with pytest.raises(cc.NumericsError, match=r"Log 'Log'"):
            sess.run([logged, checks], {x: -1e3})
    with Session(graph, target=target, check_numerics=True) as checked:
        with pytest.raises(cc.NumericsError):
            checked.run(logged, {x: 800.0})   # exp(800) inside the branch


def test_checks_show_in_the_kernels_dump_and_not_without_them() -> None:
    graph, x, w, loss, train = _model()
    feeds = {x: np.ones((2, 3))}
    with Session(graph, check_numerics=True) as checked, Session(graph) as plain:
        assert "then checked: its output must hold no NaN or Inf" in checked.compile(train, feeds).dump("kernels")
        assert "then checked" not in plain.compile(train, feeds).dump("kernels")


def test_check_numerics_needs_a_float() -> None:
    with cc.Graph().as_default():
        with pytest.raises(cc.DTypeError, match=r"check_numerics: .*int32.*" + HERE):
            cc.check_numerics(cc.constant(np.arange(3, dtype="int32")), "ints")


@pytest.mark.parametrize("target", TARGETS)
def test_a_classifier_with_a_nan_names_its_op_not_logsumexps_inf_constant(target: str) -> None:
    """A softmax cross-entropy builds an inf constant (logsumexp's test for an infinite max): with
    finite values it passes the check on every target, and a NaN from the user's op is blamed on
    that op, not on the constant."""
    graph = cc.Graph()
    with graph.as_default():
        x = cc.placeholder("float32", (2, 3), name="x")
        labels = cc.constant(np.array([0, 2], "int32"))
        loss = cc.reduce_mean(cc.nn.sparse_softmax_cross_entropy_with_logits(labels=labels, logits=cc.sqrt(x)))
    with Session(graph, target=target, check_numerics=True) as sess:
        assert np.isfinite(sess.run(loss, {x: np.ones((2, 3), "float32")}))
        with pytest.raises(cc.NumericsError, match=r"Sqrt 'Sqrt' \(at " + _line_of("logits=cc.sqrt(x)")):
            sess.run(loss, {x: -np.ones((2, 3), "float32")})


@pytest.mark.parametrize("target", ["cpu", "cuda-emulated", "reference"])
@pytest.mark.parametrize("construct", ["cond", "while_loop"])
def test_a_step_stopped_by_a_check_keeps_no_assignment_a_branch_or_loop_made(construct: str, target: str) -> None:
    """Branches and loops assign variables in place as they run; a NaN found later used to leave
    those assignments behind while the error said nothing had been assigned."""
    graph = cc.Graph()
    with graph.as_default():
        x = cc.placeholder("float32", (), name="x")
        v = cc.Variable(np.float32(0.0), name="v")
        if construct == "cond":
            def taken():
                with cc.control_dependencies([v.assign_add(5.0)]):
                    return x + 1.0
            fetch = cc.log(cc.cond(x > 0.0, taken, lambda: x) - 100.0)    # NaN after the branch ran
            value = 1.0
        else:
            def body(i, a):
                with cc.control_dependencies([v.assign_add(1.0)]):
                    b = cc.log(a)                                         # NaN in the third trip
                return i + 1, b - 1.0
            fetch = cc.while_loop(lambda i, a: i < 4, body, (0, x))
            value = 3.0
    with Session(graph, target=target, check_numerics=True) as sess:
        with pytest.raises(cc.NumericsError, match="Log"):
            sess.run(fetch, {x: np.float32(value)})
        assert sess.run(v) == 0.0

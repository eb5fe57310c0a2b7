"""Run-time assertions: ``cc.Assert`` and the ``assert_*`` family, on every target."""
from __future__ import annotations

import sys
from dataclasses import dataclass
from typing import Callable

import numpy as np
import pytest

import compiler as cc
import optim
from runtime import Session

TARGETS = ["cpu", "reference", "cuda-emulated"]
HERE = __file__


@dataclass(frozen=True)
class Case:
    id: str
    build: Callable[[cc.Tensor, cc.Tensor], cc.Operation]
    holds: tuple[list[float], list[float]]
    fails: tuple[list[float], list[float]]


# One row per assertion: x and y are float32 vectors fed with the pairs below (y broadcast as (1,)
# where a row gives one value).
CASES = [
    Case("equal", cc.assert_equal, ([1, 2], [1, 2]), ([1, 2], [1, 3])),
    Case("none_equal", cc.assert_none_equal, ([1, 2], [2, 1]), ([1, 2], [0, 2])),
    Case("less", cc.assert_less, ([1, 2], [2, 3]), ([1, 2], [2, 2])),
    Case("less_equal", cc.assert_less_equal, ([1, 2], [1, 2]), ([1, 2], [1, 1.5])),
    Case("greater", cc.assert_greater, ([2, 3], [1, 2]), ([2, 3], [2, 2])),
    Case("greater_equal", cc.assert_greater_equal, ([2, 3], [2, 3]), ([2, 3], [2, 3.5])),
    Case("broadcast", cc.assert_less, ([1, 2], [5]), ([1, 7], [5])),
    Case("near", lambda x, y: cc.assert_near(x, y, rtol=0.0, atol=0.01), ([1, 2], [1.005, 2]), ([1, 2], [1, 2.02])),
    Case("positive", lambda x, y: cc.assert_positive(x - y), ([1, 2], [0, 0]), ([1, 2], [0, 2])),
    Case("negative", lambda x, y: cc.assert_negative(x - y), ([1, 2], [3, 3]), ([1, 2], [0, 3])),
    Case("non_negative", lambda x, y: cc.assert_non_negative(x - y), ([1, 2], [1, 2]), ([1, 2], [1, 2.5])),
    Case("non_positive", lambda x, y: cc.assert_non_positive(x - y), ([1, 2], [1, 2]), ([1, 2.5], [1, 2])),
    Case("Assert", lambda x, y: cc.Assert(cc.reduce_all(cc.equal(x, y)), ["x and y differ:", x, y]),
         ([1, 2], [1, 2]), ([1, 2], [2, 1])),
]


def _feed(x: cc.Tensor, y: cc.Tensor, pair: tuple[list[float], list[float]]) -> dict:
    return {x: np.array(pair[0], "float32"), y: np.array(pair[1], "float32")}


@pytest.mark.parametrize("target", TARGETS)
@pytest.mark.parametrize("case", CASES, ids=lambda c: c.id)
def test_an_assertion_stops_the_step_before_any_assignment(graph, case: Case, target: str) -> None:
    x = cc.placeholder("float32", (None,), name="x")
    y = cc.placeholder("float32", (None,), name="y")
    v = cc.Variable(np.zeros(2, "float32"), name="v")
    check = case.build(x, y)
    assert isinstance(check, cc.Operation)
    with cc.control_dependencies([check]):
        update = cc.assign_add(v, x)
    with Session(target=target) as sess:
        np.testing.assert_array_equal(sess.run(update, _feed(x, y, case.holds)), case.holds[0])
        with pytest.raises(cc.InvalidArgumentError, match="assertion failed") as error:
            sess.run(update, _feed(x, y, case.fails))
        assert f"{HERE}:" in str(error.value)
        np.testing.assert_array_equal(sess.run(v), case.holds[0])   # the failed step assigned nothing
        assert sess.run(check, {x: np.zeros(0, "float32"), y: np.zeros(0, "float32")}) is None  # no elements


@pytest.mark.parametrize("optimizer", ["sgd", "adam"])
def test_assignments_that_need_no_checked_value_still_wait_for_the_checks(graph, optimizer: str) -> None:
    # The compiler moves each assignment as early as its inputs allow and lets kernels write
    # variables in place; with an assertion in the step, none may move before the assertion.
    x = cc.placeholder("float32", (None,), name="x")
    counter = cc.Variable(0.0, name="counter")
    w = cc.Variable(np.ones(3, "float32"), name="w")
    loss = cc.reduce_sum(cc.square(w * 2.0))
    chosen = optim.GradientDescentOptimizer(0.1) if optimizer == "sgd" else optim.AdamOptimizer(0.1)
    train = cc.group(chosen.minimize(loss), cc.assign_add(counter, 1.0))
    total = cc.reduce_sum(cc.exp(x))   # the checked value comes late in the step
    check = cc.Assert(total < 100.0, ["x is too large"])
    with Session() as sess:
        before = sess.run(cc.global_variables())
        with pytest.raises(cc.InvalidArgumentError, match="x is too large"):
            sess.run([train, check], {x: np.full(4, 10.0, "float32")})
        for old, new in zip(before, sess.run(cc.global_variables())):
            np.testing.assert_array_equal(new, old)
        sess.run([train, check], {x: np.zeros(4, "float32")})
        assert sess.run(counter) == 1.0


@pytest.mark.parametrize("target", TARGETS)
def test_the_message_names_the_data_the_assertion_and_the_users_line(graph, target: str) -> None:
    x = cc.placeholder("float32", (3,), name="x")
    line = sys._getframe().f_lineno + 1
    check = cc.assert_less(x, 1.0, message="x is a probability")
    with Session(target=target) as sess:
        with pytest.raises(cc.InvalidArgumentError) as error:
            sess.run(check, {x: np.array([0.5, 2.0, 0.1], "float32")})
    text = str(error.value)
    assert text.startswith("assertion failed: x is a probability Condition x < y did not hold element-wise:")
    assert "x = x:0" in text and "'assert_less'" in text
    assert f"{HERE}:{line}" in text


@pytest.mark.parametrize("target", TARGETS)
def test_assertions_inside_a_loop_and_a_branch_check_every_iteration(graph, target: str) -> None:
    x = cc.placeholder("float32", (), name="x")

    def body(i: cc.Tensor, acc: cc.Tensor) -> tuple:
        with cc.control_dependencies([cc.assert_less(acc, 100.0, message="the product grew too big")]):
            return i + 1, acc * x

    _, product = cc.while_loop(lambda i, acc: i < 5, body, [0, cc.constant(1.0)])

    def positive() -> cc.Tensor:
        with cc.control_dependencies([cc.Assert(x > 0.0, ["x must be positive"])]):
            return cc.identity(x)

    chosen = cc.cond(x > -5.0, positive, lambda: -x)
    (slope,) = cc.gradients(product + chosen, [x])
    for check_numerics in (False, True):
        with Session(target=target, check_numerics=check_numerics) as sess:
            np.testing.assert_allclose(sess.run([product, chosen, slope], {x: 2.0}), [32.0, 2.0, 81.0])
            assert sess.run(chosen, {x: -10.0}) == 10.0        # the branch with the assertion did not run
            with pytest.raises(cc.InvalidArgumentError, match="the product grew too big"):
                sess.run(product, {x: 4.0})                      # 256 at the fifth iteration
            with pytest.raises(cc.InvalidArgumentError, match="x must be positive"):
                sess.run(chosen, {x: -1.0})


def test_assertions_on_constants_are_decided_when_built(graph) -> None:
    check = cc.assert_equal(cc.constant([1, 2]), cc.constant([1, 2]))
    assert check.type == "Group" and not check.inputs            # a no-op
    with pytest.raises(cc.InvalidArgumentError, match=r"assert_less: Condition x < y") as error:
        line = sys._getframe().f_lineno + 1
        cc.assert_less(cc.constant([1, 2]), [2, 2])
    assert f"{HERE}:{line}" in str(error.value)
    assert cc.assert_rank(cc.constant(np.zeros((2, 3))), 2).type == "Group"
    with pytest.raises(ValueError, match="must have rank 1, but has shape"):
        cc.assert_rank(cc.constant(np.zeros((2, 3))), 1)


def test_bad_conditions_and_operands_fail_when_built(graph) -> None:
    x = cc.placeholder("float32", (3,), name="x")
    with pytest.raises(cc.DTypeError, match="Assert: the condition .* must be bool"):
        cc.Assert(x, ["no"])
    with pytest.raises(cc.ShapeError, match="must be a scalar, got shape .*use cc.reduce_all"):
        cc.Assert(x > 0.0, ["no"])
    with pytest.raises(cc.ShapeError, match="assert_equal: .* cannot be compared"):
        cc.assert_equal(x, cc.placeholder("float32", (4,)))
    with pytest.raises(TypeError, match="assert_near: .* it compares float tensors"):
        cc.assert_near(cc.constant([1, 2]), cc.constant([1, 2]))


def test_debugging_namespace_matches_the_top_level() -> None:
    for name in cc.debugging.__all__:
        assert getattr(cc, name) is getattr(cc.debugging, name), name


@pytest.mark.parametrize("target", TARGETS)
def test_print_writes_its_data_after_each_run_within_first_n(graph, target: str, capsys) -> None:
    x = cc.placeholder("float32", (None,), name="x")
    v = cc.Variable(np.zeros(3, "float32"), name="v")
    y = cc.Print(x * 2.0, [cc.reduce_sum(x), x, v], "sum, x and v: ", first_n=2, summarize=2)
    z = cc.Print(y + 1.0, [y], "y: ")
    with Session(target=target) as sess:
        for i in range(3):
            np.testing.assert_array_equal(sess.run(z, {x: np.arange(4, dtype="float32") + i}),
                                          2 * (np.arange(4) + i) + 1.0)
        sess.run(x * 3.0, {x: np.ones(2, "float32")})   # no Print computed: nothing written
    assert capsys.readouterr().err.splitlines() == [
        "sum, x and v: [6.0][0.0 1.0...][0.0 0.0...]", "y: [0.0 2.0 4.0...]",
        "sum, x and v: [10.0][1.0 2.0...][0.0 0.0...]", "y: [2.0 4.0 6.0...]",
        "y: [4.0 6.0 8.0...]"]


def test_print_is_refused_inside_a_loop_body(graph) -> None:
    with pytest.raises(ValueError, match=r"Print: not available inside a cond branch or a loop body.*test_debugging"):
        cc.while_loop(lambda i: i < 3, lambda i: cc.Print(i + 1, [i]), [0])


def test_print_with_a_negative_summarize_writes_every_entry(graph, capsys) -> None:
    x = cc.placeholder("float32", (5,), name="x")
    y = cc.Print(x, [x], "all: ", summarize=-1)
    with Session() as sess:
        sess.run(y, {x: np.arange(5, dtype="float32")})
    assert capsys.readouterr().err == "all: [0.0 1.0 2.0 3.0 4.0]\n"


def test_tf_print_writes_texts_and_values_when_its_op_runs(capsys) -> None:
    x = cc.placeholder("float32", (None, 3), name="x")
    loss = cc.reduce_mean(cc.square(x))
    printed = cc.print("loss:", loss, "x:", x, output_stream=sys.stdout, summarize=2)
    to_stderr = cc.print("step", cc.constant(7), sep="=", end=";\n")
    with cc.control_dependencies([printed]):
        value = cc.identity(loss)
    assert isinstance(printed, cc.Operation)
    with Session() as sess:
        sess.run(value, {x: np.arange(6.0, dtype="float32").reshape(2, 3)})
        sess.run(to_stderr)
    captured = capsys.readouterr()
    assert captured.out == "loss: 9.166667 x: [0.0 1.0...]\n"
    assert captured.err == "step=7;\n"
    with pytest.raises(ValueError, match="output_stream must be sys.stderr or sys.stdout"):
        cc.print("x", output_stream="log.txt")

"""Rewrites of the step never change a value the numpy reference computes: cases where a
simplification looked safe and was not (reads around an assigning branch, signed zeros, checks
on values known at compile time)."""
from __future__ import annotations

from typing import Callable

import numpy as np
import pytest

import compiler as cc
from runtime import Session


def _assigning_cond(v: cc.Variable, p: cc.Tensor) -> cc.Tensor:
    def taken() -> cc.Tensor:
        with cc.control_dependencies([cc.assign(v, [10.0, 20.0])]):
            return cc.constant(1.0, "float64")
    return cc.cond(p, taken, lambda: cc.constant(0.0, "float64"))


def _reads_before_and_after_a_cond() -> tuple[list, dict]:
    v = cc.Variable(np.array([1.0, 2.0]), name="v")
    p = cc.placeholder("bool", (), name="p")
    before = v * 2.0
    branch = _assigning_cond(v, p)
    after = v * 2.0            # looks like `before`; merged, it read the value from before the cond
    return [before, branch, after], {p: True}


def _identity_before_a_cond() -> tuple[list, dict]:
    v = cc.Variable(np.array([1.0, 2.0]), name="v")
    p = cc.placeholder("bool", (), name="p")
    snapshot = cc.identity(v)  # elided, it read the variable after the cond assigned it
    return [snapshot, _assigning_cond(v, p)], {p: True}


def _pads_of_signed_zeros() -> tuple[list, dict]:
    x = cc.placeholder("float64", (2,), name="x")
    plus = cc.pad(x, [[1, 0]], constant_values=0.0)
    minus = cc.pad(x, [[1, 0]], constant_values=-0.0)   # merged with `plus`, 1 / it gave +inf
    return [plus, 1.0 / minus], {x: np.array([1.0, 2.0])}


def _sign_of_negative_zero() -> tuple[list, dict]:
    x = cc.placeholder("float64", (3,), name="x")
    return [1.0 / cc.sign(x), cc.sign(x)], {x: np.array([-0.0, 0.0, np.nan])}


CASES: dict[str, Callable[[], tuple[list, dict]]] = {
    "reads-before-and-after-an-assigning-cond": _reads_before_and_after_a_cond,
    "identity-before-an-assigning-cond": _identity_before_a_cond,
    "pads-of-signed-zeros": _pads_of_signed_zeros,
    "sign-of-negative-zero": _sign_of_negative_zero,
}


@pytest.mark.parametrize("target", ["cpu", "cuda-emulated"])
@pytest.mark.parametrize("name", sorted(CASES))
def test_the_compiled_step_gives_the_references_values(name: str, target: str) -> None:
    graph = cc.Graph()
    with graph.as_default():
        fetches, feeds = CASES[name]()
    with Session(graph, target="reference") as reference:
        expected = reference.run(fetches, feeds)
    with Session(graph, target=target) as sess:
        got = sess.run(fetches, feeds)
    for value, want in zip(got, expected):
        np.testing.assert_array_equal(value, want)
        np.testing.assert_array_equal(np.signbit(value), np.signbit(want))


@pytest.mark.parametrize("check", ["op", "session"])
def test_a_nan_made_from_constants_is_still_caught(check: str) -> None:
    """Constant folding used to compute these at compile time, where no check saw them."""
    graph = cc.Graph()
    with graph.as_default():
        if check == "op":
            fetch = cc.check_numerics(cc.log(cc.constant(-1.0)), "boom")
        else:
            fetch = cc.log(cc.constant(np.array([-1.0, 1.0])))
    with Session(graph, check_numerics=check == "session") as sess:
        with pytest.raises(cc.NumericsError, match="Log"):
            sess.run(fetch)


def _unordered_assign_reading_its_variable() -> tuple[list, dict]:
    v = cc.Variable(np.array([1.0, 2.0]), name="v")
    first = cc.assign_add(v, [100.0, 100.0])
    last = cc.assign(v, v * 10.0)   # unordered and built last: it wins, with v as the step began
    return [first.op, last.op], {}


def test_an_unordered_later_assignment_reads_its_variable_as_the_step_began() -> None:
    """The later assignment's value read the variable after the earlier assignment had written it
    (1010, 1020 where the reference gives 10, 20), unless the variable was also fetched."""
    graph = cc.Graph()
    with graph.as_default():
        fetches, _ = _unordered_assign_reading_its_variable()
        (v,) = cc.global_variables()
    for target in ("reference", "cpu", "cuda-emulated"):
        with Session(graph, target=target) as sess:
            sess.run(fetches)
            np.testing.assert_array_equal(sess.run(v), [10.0, 20.0])

"""Optimizer updates against numpy closed forms of TF1's equations, on both session targets."""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Callable

import numpy as np
import pytest

import compiler as cc
import optim
from runtime import Session

from .least_squares import least_squares_grads, least_squares_graph, least_squares_problem

TARGETS = {"reference": 1e-12, "cpu": 1e-10}  # target -> rtol
STEPS = 3

X, Y, W0, B0 = least_squares_problem(1234)


def numpy_grads(w: np.ndarray, b: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    return least_squares_grads(X, Y, w, b)


# -- numpy closed forms: step(var, grad, slots, t) -> (new var, new slots); t counts from 1 ----------

def gd_step(lr: float) -> Callable[..., Any]:
    def step(var: np.ndarray, g: np.ndarray, slots: dict, t: int) -> tuple[np.ndarray, dict]:
        return var - lr * g, {}
    return step


def momentum_step(lr: float, mu: float, nesterov: bool) -> Callable[..., Any]:
    def step(var: np.ndarray, g: np.ndarray, slots: dict, t: int) -> tuple[np.ndarray, dict]:
        accum = mu * slots.get("momentum", np.zeros_like(var)) + g
        update = lr * g + lr * mu * accum if nesterov else lr * accum
        return var - update, {"momentum": accum}
    return step


def adam_step(lr: float, b1: float, b2: float, eps: float) -> Callable[..., Any]:
    def step(var: np.ndarray, g: np.ndarray, slots: dict, t: int) -> tuple[np.ndarray, dict]:
        m = b1 * slots.get("m", np.zeros_like(var)) + (1 - b1) * g
        v = b2 * slots.get("v", np.zeros_like(var)) + (1 - b2) * g * g
        lr_t = lr * np.sqrt(1 - b2 ** t) / (1 - b1 ** t)
        return var - lr_t * m / (np.sqrt(v) + eps), {"m": m, "v": v}
    return step


@dataclass
class Case:
    make: Callable[[], optim.Optimizer]
    step: Callable[..., Any]
    slots: tuple[str, ...]


CASES = {
    "gd": Case(lambda: optim.GradientDescentOptimizer(0.05), gd_step(0.05), ()),
    "momentum": Case(lambda: optim.MomentumOptimizer(0.05, 0.9), momentum_step(0.05, 0.9, False),
                     ("momentum",)),
    "nesterov": Case(lambda: optim.MomentumOptimizer(0.05, 0.9, use_nesterov=True),
                     momentum_step(0.05, 0.9, True), ("momentum",)),
    "adam": Case(lambda: optim.AdamOptimizer(0.1, beta1=0.8, beta2=0.99, epsilon=1e-3),
                 adam_step(0.1, 0.8, 0.99, 1e-3), ("m", "v")),
}


@pytest.mark.parametrize("target", TARGETS)
@pytest.mark.parametrize("case_name", CASES)
def test_minimize_matches_numpy(case_name: str, target: str) -> None:
    case = CASES[case_name]
    rtol = TARGETS[target]
    graph = cc.Graph()
    with graph.as_default():
        x = cc.placeholder("float64", shape=(None, 3), name="x")
        y = cc.placeholder("float64", shape=(None, 2), name="y")
        w = cc.Variable(W0, name="W")
        b = cc.Variable(B0, name="b")
        loss = cc.reduce_sum(cc.square(x @ w + b - y))
        global_step = optim.get_or_create_global_step()
        opt = case.make()
        train = opt.minimize(loss, global_step=global_step)
    assert opt.get_slot_names() == sorted(case.slots)
    fetch = {"W": w, "b": b, "step": global_step,
             "slots": {name: [opt.get_slot(w, name), opt.get_slot(b, name)] for name in case.slots}}

    expected = {"W": (W0.copy(), {}), "b": (B0.copy(), {})}
    feeds = {x: X, y: Y}
    with Session(graph, target=target) as sess:
        assert sess.run(global_step) == 0
        for t in range(1, STEPS + 1):
            assert sess.run(train, feed_dict=feeds) is None
            g_w, g_b = numpy_grads(expected["W"][0], expected["b"][0])
            expected["W"] = case.step(*expected["W"][:1], g_w, expected["W"][1], t)
            expected["b"] = case.step(*expected["b"][:1], g_b, expected["b"][1], t)
            got = sess.run(fetch)
            assert got["step"] == t and got["step"].dtype == np.int64
            for key in ("W", "b"):
                np.testing.assert_allclose(got[key], expected[key][0], rtol=rtol, atol=rtol * 1e-2,
                                           err_msg=f"{key} after step {t}")
            for name, (slot_w, slot_b) in got["slots"].items():
                np.testing.assert_allclose(slot_w, expected["W"][1][name], rtol=rtol, atol=rtol * 1e-2,
                                           err_msg=f"slot {name} of W after step {t}")
                np.testing.assert_allclose(slot_b, expected["b"][1][name], rtol=rtol, atol=rtol * 1e-2,
                                           err_msg=f"slot {name} of b after step {t}")
        if case_name == "adam":
            beta1_power, beta2_power = opt._get_beta_accumulators(graph)
            powers = sess.run([beta1_power, beta2_power])
            np.testing.assert_allclose(powers, [0.8 ** (STEPS + 1), 0.99 ** (STEPS + 1)], rtol=rtol)


@pytest.mark.parametrize("target", TARGETS)
@pytest.mark.parametrize("case_name", ["gd", "adam"])
def test_learning_rate_placeholder(case_name: str, target: str) -> None:
    """A learning rate fed each step (float32 placeholder, float64 variable: cast to the var's dtype)."""
    rates = [0.1, 0.02, 0.3]
    graph = cc.Graph()
    with graph.as_default():
        lr = cc.placeholder("float32", shape=(), name="lr")
        w, b, loss = least_squares_graph(X, Y, W0, B0)
        opt = (optim.GradientDescentOptimizer(lr) if case_name == "gd"
               else optim.AdamOptimizer(lr, beta1=0.8, beta2=0.99, epsilon=1e-3))
        train = opt.minimize(loss)
    w_np, b_np, slots_w, slots_b = W0.copy(), B0.copy(), {}, {}
    with Session(graph, target=target) as sess:
        for t, rate in enumerate(rates, start=1):
            sess.run(train, feed_dict={lr: np.float32(rate)})
            rate64 = float(np.float32(rate))
            step = gd_step(rate64) if case_name == "gd" else adam_step(rate64, 0.8, 0.99, 1e-3)
            g_w, g_b = numpy_grads(w_np, b_np)
            w_np, slots_w = step(w_np, g_w, slots_w, t)
            b_np, slots_b = step(b_np, g_b, slots_b, t)
            got_w, got_b = sess.run([w, b])
            np.testing.assert_allclose(got_w, w_np, rtol=TARGETS[target], atol=1e-13)
            np.testing.assert_allclose(got_b, b_np, rtol=TARGETS[target], atol=1e-13)


@pytest.mark.parametrize("target", TARGETS)
def test_var_list_restricts_updates(target: str) -> None:
    graph = cc.Graph()
    with graph.as_default():
        w, b, loss = least_squares_graph(X, Y, W0, B0)
        opt = optim.MomentumOptimizer(0.05, 0.9)
        train = opt.minimize(loss, var_list=[w])
    assert opt.get_slot(w, "momentum") is not None and opt.get_slot(b, "momentum") is None
    with Session(graph, target=target) as sess:
        for _ in range(2):
            sess.run(train)
        got_w, got_b = sess.run([w, b])
    np.testing.assert_array_equal(got_b, B0)
    assert not np.allclose(got_w, W0)


@pytest.mark.parametrize("target", TARGETS)
def test_grad_loss_scales_the_gradient(target: str) -> None:
    graph = cc.Graph()
    with graph.as_default():
        w = cc.Variable(np.array([1.0, -2.0]), name="w")
        loss = cc.reduce_sum(w * w)
        train = optim.GradientDescentOptimizer(0.1).minimize(loss, grad_loss=cc.constant(3.0, "float64"))
    with Session(graph, target=target) as sess:
        sess.run(train)
        np.testing.assert_allclose(sess.run(w), np.array([1.0, -2.0]) * (1 - 0.1 * 3 * 2), rtol=1e-12)


@pytest.mark.parametrize("target", TARGETS)
def test_apply_gradients_with_processed_gradients(target: str) -> None:
    """compute_gradients -> transform -> apply_gradients, the TF1 clipping pattern."""
    graph = cc.Graph()
    with graph.as_default():
        w = cc.Variable(np.array([1.0, -2.0]), name="w")
        opt = optim.GradientDescentOptimizer(0.1)
        grads_and_vars = opt.compute_gradients(cc.reduce_sum(w * w))
        train = opt.apply_gradients([(cc.minimum(cc.maximum(g, -1.0), 1.0), v)
                                     for g, v in grads_and_vars])
    with Session(graph, target=target) as sess:
        sess.run(train)
        np.testing.assert_allclose(sess.run(w), [0.9, -1.9], rtol=1e-12)

"""Adagrad, Adadelta, RMSProp, AdamW and FTRL against numpy closed forms of TF1's equations."""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Callable

import numpy as np
import pytest

import compiler as cc
import optim
from runtime import Session

from .least_squares import least_squares_grads, least_squares_graph, least_squares_problem

TARGETS = {"reference": 1e-12, "cpu": 1e-10}  # target -> rtol (float64)
STEPS = 3

X, Y, W0, B0 = least_squares_problem(4321)


def numpy_grads(w: np.ndarray, b: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    return least_squares_grads(X, Y, w, b)


# -- numpy closed forms: step(var, grad, slots, t) -> new var, updating ``slots`` in place -------
# ``slots`` starts as the TF1 initial values given by each case's ``init``; t counts from 1.

def adagrad_step(lr: float) -> Callable[..., np.ndarray]:
    def step(var: np.ndarray, g: np.ndarray, slots: dict, t: int) -> np.ndarray:
        slots["accumulator"] = slots["accumulator"] + g * g
        return var - lr * g / np.sqrt(slots["accumulator"])
    return step


def adadelta_step(lr: float, rho: float, eps: float) -> Callable[..., np.ndarray]:
    def step(var: np.ndarray, g: np.ndarray, slots: dict, t: int) -> np.ndarray:
        slots["accum"] = rho * slots["accum"] + (1 - rho) * g * g
        update = np.sqrt(slots["accum_update"] + eps) / np.sqrt(slots["accum"] + eps) * g
        slots["accum_update"] = rho * slots["accum_update"] + (1 - rho) * update * update
        return var - lr * update
    return step


def rmsprop_step(lr: float, decay: float, momentum: float, eps: float,
                 centered: bool) -> Callable[..., np.ndarray]:
    def step(var: np.ndarray, g: np.ndarray, slots: dict, t: int) -> np.ndarray:
        slots["rms"] = decay * slots["rms"] + (1 - decay) * g * g
        denom = slots["rms"] + eps
        if centered:
            slots["mg"] = decay * slots["mg"] + (1 - decay) * g
            denom = slots["rms"] - slots["mg"] ** 2 + eps
        slots["momentum"] = momentum * slots["momentum"] + lr * g / np.sqrt(denom)
        return var - slots["momentum"]
    return step


def adamw_step(weight_decay: float, lr: float, b1: float, b2: float,
               eps: float) -> Callable[..., np.ndarray]:
    def step(var: np.ndarray, g: np.ndarray, slots: dict, t: int) -> np.ndarray:
        slots["m"] = b1 * slots["m"] + (1 - b1) * g
        slots["v"] = b2 * slots["v"] + (1 - b2) * g * g
        lr_t = lr * np.sqrt(1 - b2 ** t) / (1 - b1 ** t)
        return var - weight_decay * var - lr_t * slots["m"] / (np.sqrt(slots["v"]) + eps)
    return step


def ftrl_step(lr: float, lr_power: float = -0.5, l1: float = 0.0, l2: float = 0.0,
              shrinkage: float = 0.0) -> Callable[..., np.ndarray]:
    def step(var: np.ndarray, g: np.ndarray, slots: dict, t: int) -> np.ndarray:
        accum, linear = slots["accum"], slots["linear"]
        g_shrink = g + 2 * shrinkage * var
        accum_new = accum + g * g
        linear = linear + g_shrink - (accum_new ** -lr_power - accum ** -lr_power) / lr * var
        quadratic = 1.0 / (accum_new ** lr_power * lr) + 2 * l2
        slots["accum"], slots["linear"] = accum_new, linear
        return np.where(np.abs(linear) > l1, (np.sign(linear) * l1 - linear) / quadratic, 0.0)
    return step


def proximal_step(lr: float, l1: float = 0.0, l2: float = 0.0, adagrad: bool = False) -> Callable[..., np.ndarray]:
    """TF1's ApplyProximalGradientDescent and ApplyProximalAdagrad, with their two branches on l1."""
    def step(var: np.ndarray, g: np.ndarray, slots: dict, t: int) -> np.ndarray:
        rate = lr
        if adagrad:
            slots["accumulator"] = slots["accumulator"] + g * g
            rate = lr / np.sqrt(slots["accumulator"])
        moved = var - rate * g
        if l1 > 0:
            return np.sign(moved) * np.maximum(np.abs(moved) - rate * l1, 0.0) / (1 + rate * l2)
        return moved / (1 + rate * l2)
    return step


def zeros(*names: str) -> Callable[[np.ndarray], dict]:
    return lambda var: {name: np.zeros_like(var) for name in names}


def f64(value: float) -> cc.Tensor:
    """A float64 hyperparameter given as a Tensor."""
    return cc.constant(np.float64(value))


@dataclass
class Case:
    make: Callable[[], optim.Optimizer]      # called inside the test's graph
    step: Callable[..., np.ndarray]
    init: Callable[[np.ndarray], dict]       # TF1's initial slot values for a variable
    slot_vars: dict[str, str]                # slot name -> the slot variable's name for "W"
    kind: type = optim.Optimizer             # the class (or a base) the optimizer is


CASES = {
    "adagrad": Case(lambda: optim.AdagradOptimizer(0.1), adagrad_step(0.1),
                    lambda v: {"accumulator": np.full_like(v, 0.1)}, {"accumulator": "W/Adagrad"},
                    optim.AdagradOptimizer),
    "adagrad-init-callable-lr": Case(
        lambda: optim.AdagradOptimizer(lambda: 0.25, initial_accumulator_value=2.0),
        adagrad_step(0.25), lambda v: {"accumulator": np.full_like(v, 2.0)},
        {"accumulator": "W/Adagrad"}, optim.AdagradOptimizer),
    "adadelta-defaults": Case(lambda: optim.AdadeltaOptimizer(), adadelta_step(0.001, 0.95, 1e-8),
                              zeros("accum", "accum_update"),
                              {"accum": "W/Adadelta", "accum_update": "W/Adadelta_1"},
                              optim.AdadeltaOptimizer),
    "adadelta": Case(lambda: optim.AdadeltaOptimizer(1.0, rho=0.8, epsilon=1e-3),
                     adadelta_step(1.0, 0.8, 1e-3), zeros("accum", "accum_update"),
                     {"accum": "W/Adadelta", "accum_update": "W/Adadelta_1"}, optim.AdadeltaOptimizer),
    "rmsprop-defaults": Case(lambda: optim.RMSPropOptimizer(0.01),
                             rmsprop_step(0.01, 0.9, 0.0, 1e-10, False),
                             lambda v: {"rms": np.ones_like(v), "momentum": np.zeros_like(v)},
                             {"rms": "W/RMSProp", "momentum": "W/RMSProp_1"}, optim.RMSPropOptimizer),
    "rmsprop-momentum-tensor-hypers": Case(
        lambda: optim.RMSPropOptimizer(f64(0.02), decay=f64(0.8), momentum=lambda: 0.9,
                                       epsilon=f64(1e-4)),
        rmsprop_step(0.02, 0.8, 0.9, 1e-4, False),
        lambda v: {"rms": np.ones_like(v), "momentum": np.zeros_like(v)},
        {"rms": "W/RMSProp", "momentum": "W/RMSProp_1"}, optim.RMSPropOptimizer),
    "rmsprop-centered": Case(lambda: optim.RMSPropOptimizer(0.01, decay=0.7, momentum=0.5,
                                                            epsilon=1e-3, centered=True),
                             rmsprop_step(0.01, 0.7, 0.5, 1e-3, True),
                             lambda v: {"rms": np.ones_like(v), "mg": np.zeros_like(v),
                                        "momentum": np.zeros_like(v)},
                             {"rms": "W/RMSProp", "mg": "W/RMSProp_1", "momentum": "W/RMSProp_2"},
                             optim.RMSPropOptimizer),
    "adamw": Case(lambda: optim.AdamWOptimizer(0.05, 0.1, beta1=0.8, beta2=0.99, epsilon=1e-3),
                  adamw_step(0.05, 0.1, 0.8, 0.99, 1e-3), zeros("m", "v"),
                  {"m": "W/AdamW", "v": "W/AdamW_1"}, optim.AdamOptimizer),
    "adamw-defaults-callable-decay": Case(lambda: optim.AdamWOptimizer(lambda: 1e-2),
                                          adamw_step(1e-2, 0.001, 0.9, 0.999, 1e-8), zeros("m", "v"),
                                          {"m": "W/AdamW", "v": "W/AdamW_1"}, optim.AdamWOptimizer),
    "ftrl-defaults": Case(lambda: optim.FtrlOptimizer(0.1), ftrl_step(0.1),
                          lambda v: {"accum": np.full_like(v, 0.1), "linear": np.zeros_like(v)},
                          {"accum": "W/Ftrl", "linear": "W/Ftrl_1"}, optim.FtrlOptimizer),
    "ftrl-l1-l2": Case(lambda: optim.FtrlOptimizer(0.5, l1_regularization_strength=4.0,
                                                   l2_regularization_strength=0.3),
                       ftrl_step(0.5, l1=4.0, l2=0.3),
                       lambda v: {"accum": np.full_like(v, 0.1), "linear": np.zeros_like(v)},
                       {"accum": "W/Ftrl", "linear": "W/Ftrl_1"}, optim.FtrlOptimizer),
    "ftrl-shrinkage": Case(lambda: optim.FtrlOptimizer(0.3, l1_regularization_strength=1.5,
                                                       l2_shrinkage_regularization_strength=0.4),
                           ftrl_step(0.3, l1=1.5, shrinkage=0.4),
                           lambda v: {"accum": np.full_like(v, 0.1), "linear": np.zeros_like(v)},
                           {"accum": "W/Ftrl", "linear": "W/Ftrl_1"}, optim.FtrlOptimizer),
    "ftrl-power-names": Case(lambda: optim.FtrlOptimizer(0.2, learning_rate_power=-0.75,
                                                         initial_accumulator_value=0.5,
                                                         l2_regularization_strength=0.05,
                                                         accum_name="acc", linear_name="lin"),
                             ftrl_step(0.2, lr_power=-0.75, l2=0.05),
                             lambda v: {"accum": np.full_like(v, 0.5), "linear": np.zeros_like(v)},
                             {"accum": "W/acc", "linear": "W/lin"}, optim.FtrlOptimizer),
    "proximal-gd": Case(lambda: optim.ProximalGradientDescentOptimizer(0.05, l1_regularization_strength=2.0,
                                                                       l2_regularization_strength=0.5),
                        proximal_step(0.05, l1=2.0, l2=0.5), lambda v: {}, {}, optim.ProximalGradientDescentOptimizer),
    "proximal-gd-l2-tensors": Case(lambda: optim.ProximalGradientDescentOptimizer(f64(0.05),
                                                                                  l2_regularization_strength=f64(0.5)),
                                   proximal_step(0.05, l2=0.5), lambda v: {}, {}),
    "proximal-adagrad": Case(lambda: optim.ProximalAdagradOptimizer(0.3, l1_regularization_strength=0.5,
                                                                    l2_regularization_strength=0.2),
                             proximal_step(0.3, l1=0.5, l2=0.2, adagrad=True),
                             lambda v: {"accumulator": np.full_like(v, 0.1)}, {"accumulator": "W/ProximalAdagrad"},
                             optim.ProximalAdagradOptimizer),
    "proximal-adagrad-callable": Case(lambda: optim.ProximalAdagradOptimizer(lambda: 0.3, 0.5),
                                      proximal_step(0.3, adagrad=True),
                                      lambda v: {"accumulator": np.full_like(v, 0.5)},
                                      {"accumulator": "W/ProximalAdagrad"}),
    "ftrl-power-zero-tensor-hypers": Case(
        lambda: optim.FtrlOptimizer(f64(0.1), learning_rate_power=f64(0.0),
                                    initial_accumulator_value=0.0, l1_regularization_strength=f64(0.2),
                                    l2_shrinkage_regularization_strength=f64(0.1)),
        ftrl_step(0.1, lr_power=0.0, l1=0.2, shrinkage=0.1),
        lambda v: {"accum": np.zeros_like(v), "linear": np.zeros_like(v)},
        {"accum": "W/Ftrl", "linear": "W/Ftrl_1"}, optim.FtrlOptimizer),
}


def build(case: Case, dtype: str) -> tuple[Any, ...]:
    graph = cc.Graph()
    with graph.as_default():
        x = cc.placeholder(dtype, shape=(None, 3), name="x")
        y = cc.placeholder(dtype, shape=(None, 2), name="y")
        w = cc.Variable(W0.astype(dtype), name="W")
        b = cc.Variable(B0.astype(dtype), name="b")
        loss = cc.reduce_sum(cc.square(x @ w + b - y))
        global_step = optim.get_or_create_global_step()
        opt = case.make()
        train = opt.minimize(loss, global_step=global_step)
    return graph, x, y, w, b, loss, global_step, opt, train


def run_numpy(case: Case, steps: int, w0: np.ndarray = W0, b0: np.ndarray = B0) -> list[dict]:
    """After each step: {"W": value, "b": value, "slots": {name: (slot of W, slot of b)}}."""
    w, b = w0.astype(np.float64), b0.astype(np.float64)
    slots_w, slots_b = case.init(w), case.init(b)
    history = []
    for t in range(1, steps + 1):
        g_w, g_b = numpy_grads(w, b)
        w, b = case.step(w, g_w, slots_w, t), case.step(b, g_b, slots_b, t)
        history.append({"W": w, "b": b, "slots": {n: (slots_w[n], slots_b[n]) for n in slots_w}})
    return history


@pytest.mark.parametrize("target", TARGETS)
@pytest.mark.parametrize("case_name", CASES)
def test_minimize_matches_numpy(case_name: str, target: str) -> None:
    case = CASES[case_name]
    rtol = TARGETS[target]
    graph, x, y, w, b, loss, global_step, opt, train = build(case, "float64")
    assert isinstance(opt, case.kind)
    assert opt.get_slot_names() == sorted(case.slot_vars)
    for name, var_name in case.slot_vars.items():
        slot = opt.get_slot(w, name)
        assert slot.op.name == var_name and not slot.trainable
        assert slot.shape == w.shape and slot.dtype == w.dtype
        np.testing.assert_array_equal(slot.initial_value, case.init(W0)[name])
        assert opt.get_slot(b, name).shape == b.shape
    fetch = {"W": w, "b": b, "step": global_step,
             "slots": {name: (opt.get_slot(w, name), opt.get_slot(b, name)) for name in case.slot_vars}}
    expected = run_numpy(case, STEPS)
    with Session(graph, target=target) as sess:
        for t in range(1, STEPS + 1):
            assert sess.run(train, feed_dict={x: X, y: Y}) is None
            got, want = sess.run(fetch), expected[t - 1]
            assert got["step"] == t
            for key in ("W", "b"):
                np.testing.assert_allclose(got[key], want[key], rtol=rtol, atol=1e-13,
                                           err_msg=f"{key} after step {t}")
            for name, pair in got["slots"].items():
                for label, value, value_want in zip("Wb", pair, want["slots"][name]):
                    np.testing.assert_allclose(value, value_want, rtol=rtol, atol=1e-13,
                                               err_msg=f"slot {name} of {label} after step {t}")


@pytest.mark.parametrize("case_name", ["ftrl-l1-l2", "ftrl-shrinkage", "ftrl-power-zero-tensor-hypers"])
def test_ftrl_l1_rows_reach_zero(case_name: str) -> None:
    """The l1 rows above exercise both sides of |linear| > l1 (a check on the test data)."""
    values = np.concatenate([np.concatenate([s["W"].ravel(), s["b"]])
                             for s in run_numpy(CASES[case_name], STEPS)])
    assert (values == 0).any() and (values != 0).any()
    # No |linear| sits so close to l1 that rounding could flip a coordinate between the targets.
    l1 = {"ftrl-l1-l2": 4.0, "ftrl-shrinkage": 1.5, "ftrl-power-zero-tensor-hypers": 0.2}[case_name]
    for state in run_numpy(CASES[case_name], STEPS):
        for linear in state["slots"]["linear"]:
            assert np.min(np.abs(np.abs(linear) - l1)) > 1e-6


@pytest.mark.parametrize("case_name", CASES)
def test_float32_smoke(case_name: str) -> None:
    """float32 variables and slots: cpu == reference, and both near the float64 closed form."""
    case = CASES[case_name]
    graph, x, y, w, b, loss, global_step, opt, train = build(case, "float32")
    fetch = [w, b] + [opt.get_slot(v, name) for name in case.slot_vars for v in (w, b)]
    results = {}
    for target in TARGETS:
        with Session(graph, target=target) as sess:
            for _ in range(STEPS):
                sess.run(train, feed_dict={x: X.astype("float32"), y: Y.astype("float32")})
            results[target] = sess.run(fetch)
    for got_cpu, got_ref in zip(results["cpu"], results["reference"]):
        assert got_cpu.dtype == np.float32 and np.isfinite(got_cpu).all()
        np.testing.assert_allclose(got_cpu, got_ref, rtol=1e-5, atol=1e-6)
    want = run_numpy(case, STEPS, W0.astype("float32"), B0.astype("float32"))[-1]
    np.testing.assert_allclose(results["cpu"][0], want["W"], rtol=1e-3, atol=1e-4)
    np.testing.assert_allclose(results["cpu"][1], want["b"], rtol=1e-3, atol=1e-4)


@pytest.mark.parametrize("target", TARGETS)
@pytest.mark.parametrize("how", ["minimize", "apply_gradients"])
def test_adamw_decay_var_list(how: str, target: str) -> None:
    """Only the variables in decay_var_list are decayed; the others take the plain Adam step."""
    graph = cc.Graph()
    with graph.as_default():
        w, b, loss = least_squares_graph(X, Y, W0, B0)
        opt = optim.AdamWOptimizer(0.05, 0.1, beta1=0.8, beta2=0.99, epsilon=1e-3)
        if how == "minimize":
            train = opt.minimize(loss, decay_var_list=[w])
        else:
            train = opt.apply_gradients(opt.compute_gradients(loss), decay_var_list=[w])
        # A later call without decay_var_list decays every variable again.
        decay_all = opt.minimize(loss)
    decayed, plain = adamw_step(0.05, 0.1, 0.8, 0.99, 1e-3), adamw_step(0.0, 0.1, 0.8, 0.99, 1e-3)
    w_np, b_np, slots_w, slots_b = W0.copy(), B0.copy(), zeros("m", "v")(W0), zeros("m", "v")(B0)
    with Session(graph, target=target) as sess:
        for t in range(1, STEPS + 1):
            sess.run(train)
            g_w, g_b = numpy_grads(w_np, b_np)
            w_np, b_np = decayed(w_np, g_w, slots_w, t), plain(b_np, g_b, slots_b, t)
            got_w, got_b = sess.run([w, b])
            np.testing.assert_allclose(got_w, w_np, rtol=TARGETS[target], atol=1e-13)
            np.testing.assert_allclose(got_b, b_np, rtol=TARGETS[target], atol=1e-13)
        sess.run(decay_all)
        t = STEPS + 1
        g_w, g_b = numpy_grads(w_np, b_np)
        w_np, b_np = decayed(w_np, g_w, slots_w, t), decayed(b_np, g_b, slots_b, t)
        np.testing.assert_allclose(sess.run([w, b])[1], b_np, rtol=TARGETS[target], atol=1e-13)


def test_adamw_is_an_adam_optimizer_with_beta_powers() -> None:
    graph = cc.Graph()
    with graph.as_default():
        w = cc.Variable(np.ones(2), name="w")
        opt = optim.AdamWOptimizer(1e-2, beta1=0.5, beta2=0.75)
        train = opt.minimize(cc.reduce_sum(w * w))
    assert isinstance(opt, optim.AdamOptimizer) and opt.get_name() == "AdamW"
    beta1_power, beta2_power = opt._get_beta_accumulators(graph)
    with Session(graph, target="reference") as sess:
        sess.run(train)
        sess.run(train)
        np.testing.assert_allclose(sess.run([beta1_power, beta2_power]), [0.125, 0.75 ** 3])


@pytest.mark.parametrize("make, error, match", [
    (lambda: optim.AdagradOptimizer(0.1, initial_accumulator_value=0.0), ValueError, "AdagradOptimizer"),
    (lambda: optim.AdagradOptimizer(0.1, initial_accumulator_value=-1.0), ValueError, "positive"),
    (lambda: optim.AdagradOptimizer(0.1, initial_accumulator_value=lambda: 0.1), TypeError, "number"),
    (lambda: optim.FtrlOptimizer(0.1, initial_accumulator_value=-0.1), ValueError, "FtrlOptimizer"),
    (lambda: optim.FtrlOptimizer(0.1, learning_rate_power=0.5), ValueError, "learning_rate_power"),
    (lambda: optim.FtrlOptimizer(0.1, l1_regularization_strength=-1.0), ValueError, "l1_"),
    (lambda: optim.FtrlOptimizer(0.1, l2_regularization_strength=-1.0), ValueError, "l2_regularization"),
    (lambda: optim.FtrlOptimizer(0.1, l2_shrinkage_regularization_strength=-1.0), ValueError,
     "l2_shrinkage"),
    (lambda: optim.AdamWOptimizer(0.1, beta1=cc.constant(0.9)), TypeError, "beta1"),
    (lambda: optim.ProximalGradientDescentOptimizer(0.1, l1_regularization_strength=-1.0), ValueError,
     "ProximalGradientDescentOptimizer: l1_regularization_strength must be zero or positive"),
    (lambda: optim.ProximalAdagradOptimizer(0.1, l2_regularization_strength=-0.5), ValueError,
     "ProximalAdagradOptimizer: l2_regularization_strength must be zero or positive"),
    (lambda: optim.ProximalAdagradOptimizer(0.1, initial_accumulator_value=0.0), ValueError, "must be positive"),
])
def test_bad_hyperparameters(make: Callable[[], Any], error: type, match: str) -> None:
    with cc.Graph().as_default():
        with pytest.raises(error, match=match):
            make()


@pytest.mark.parametrize("target", TARGETS)
def test_rmsprop_learning_rate_placeholder(target: str) -> None:
    """A float32 learning rate fed each step drives a float64 variable (cast to its dtype)."""
    rates = [0.1, 0.02, 0.3]
    graph = cc.Graph()
    with graph.as_default():
        lr = cc.placeholder("float32", shape=(), name="lr")
        w, b, loss = least_squares_graph(X, Y, W0, B0)
        train = optim.RMSPropOptimizer(lr, momentum=0.5).minimize(loss)
    w_np, b_np = W0.copy(), B0.copy()
    init = {"rms": np.ones_like, "momentum": np.zeros_like}
    slots_w = {k: f(W0) for k, f in init.items()}
    slots_b = {k: f(B0) for k, f in init.items()}
    with Session(graph, target=target) as sess:
        for t, rate in enumerate(rates, start=1):
            sess.run(train, feed_dict={lr: np.float32(rate)})
            step = rmsprop_step(float(np.float32(rate)), 0.9, 0.5, 1e-10, False)
            g_w, g_b = numpy_grads(w_np, b_np)
            w_np, b_np = step(w_np, g_w, slots_w, t), step(b_np, g_b, slots_b, t)
            got_w, got_b = sess.run([w, b])
            np.testing.assert_allclose(got_w, w_np, rtol=TARGETS[target], atol=1e-13)
            np.testing.assert_allclose(got_b, b_np, rtol=TARGETS[target], atol=1e-13)


def _ftrl_from_a_zero_accumulator(w: cc.Variable) -> cc.Operation:
    # w's second element gets no gradient: its accumulator stays 0, and so does the denominator.
    return optim.FtrlOptimizer(0.5, initial_accumulator_value=0.0).minimize(cc.reduce_sum(w * [1.0, 0.0]))


def _clipping_a_zero_gradient(w: cc.Variable) -> cc.Operation:
    opt = optim.GradientDescentOptimizer(0.1)
    grads, variables = zip(*opt.compute_gradients(cc.reduce_sum(w * 0.0)))
    clipped, _ = optim.clip_by_global_norm(grads, 1.0)
    return opt.apply_gradients(zip(clipped, variables))


FINITE_UPDATES = {
    "ftrl-zero-accumulator": (_ftrl_from_a_zero_accumulator, [0.5, 0.0]),
    "clip-by-global-norm-of-zeros": (_clipping_a_zero_gradient, [1.0, 2.0]),
}


@pytest.mark.parametrize("target", ["reference", "cpu"])
@pytest.mark.parametrize("name", sorted(FINITE_UPDATES))
def test_updates_with_finite_results_pass_a_numerics_check(name: str, target: str) -> None:
    """No NaN or Inf in any intermediate of these updates (not only in their finite results), so
    ``check_numerics`` agrees on every target: the reference checks each op, cpu each kernel."""
    build, expected = FINITE_UPDATES[name]
    graph = cc.Graph()
    with graph.as_default():
        w = cc.Variable(np.array([1.0, 2.0]), name="w")
        train = build(w)
    with Session(graph, target=target, check_numerics=True) as sess:
        sess.run(train)
        np.testing.assert_allclose(sess.run(w), expected, rtol=1e-12)


SPARSE_ROWS = {
    # name: (optimizer, steps compared: AdamW's Adam part moves every row once its moments are not 0)
    "momentum": (lambda: optim.MomentumOptimizer(0.1, 0.9), 2),
    "nesterov": (lambda: optim.MomentumOptimizer(0.1, 0.9, use_nesterov=True), 2),
    "rmsprop-centered-momentum": (lambda: optim.RMSPropOptimizer(0.1, momentum=0.5, centered=True), 2),
    "adadelta": (lambda: optim.AdadeltaOptimizer(1.0), 2),
    "ftrl": (lambda: optim.FtrlOptimizer(0.5, l1_regularization_strength=0.01), 2),
    "proximal-gd": (lambda: optim.ProximalGradientDescentOptimizer(0.1, l1_regularization_strength=0.5), 2),
    "proximal-adagrad": (lambda: optim.ProximalAdagradOptimizer(0.1, l1_regularization_strength=0.5,
                                                                l2_regularization_strength=0.1), 2),
    "adamw": (lambda: optim.AdamWOptimizer(0.01, learning_rate=0.1), 1),
}
LOOKUPS = [[0, 1, 1], [2]]   # the rows each step looks up (row 1 twice: its gradients add)


@pytest.mark.parametrize("target", ["reference", "cpu"])
@pytest.mark.parametrize("name", sorted(SPARSE_ROWS))
def test_a_gather_only_gradient_updates_only_the_looked_up_rows(name: str, target: str) -> None:
    """As TF1's sparse kernels: the rows an embedding lookup hit get the update, the others and
    their slots keep their values. The oracle: the same rows as separate variables, of which only
    those looked up have a gradient (the others are skipped whole)."""
    make, steps = SPARSE_ROWS[name]
    table = np.arange(8.0).reshape(4, 2) - 3.0
    weights = [np.array([[1.0, -2.0], [0.5, 3.0], [-1.5, 0.25]]), np.array([[2.0, -1.0]])]
    graph = cc.Graph()
    with graph.as_default():
        embedding = cc.Variable(table, name="embedding")
        ids = cc.placeholder("int32", (None,), name="ids")
        weight = cc.placeholder("float64", (None, 2), name="weight")
        opt = make()
        train = opt.minimize(cc.reduce_sum(cc.gather(embedding, ids) * weight))
    oracle = cc.Graph()
    with oracle.as_default():
        rows = [cc.Variable(row, name=f"row{k}") for k, row in enumerate(table)]
        oracle_opt = make()
        trains = [oracle_opt.minimize(cc.add_n([cc.reduce_sum(rows[r] * w) for r, w in zip(lookup, step_weights)]),
                                      var_list=rows)
                  for lookup, step_weights in zip(LOOKUPS, weights)]
    with Session(graph, target=target) as sess, Session(oracle, target="reference") as oracle_sess:
        for step in range(steps):
            sess.run(train, {ids: LOOKUPS[step], weight: weights[step]})
            oracle_sess.run(trains[step])
        np.testing.assert_allclose(sess.run(embedding), np.stack(oracle_sess.run(rows)), rtol=1e-12, atol=1e-12)
        for slot in opt.get_slot_names():
            table_slot = opt.get_slot(embedding, slot)
            # A row never looked up has no slot in the oracle: it keeps its initial value.
            expected = [table_slot.initial_value[k] if oracle_opt.get_slot(row, slot) is None
                        else oracle_sess.run(oracle_opt.get_slot(row, slot)) for k, row in enumerate(rows)]
            np.testing.assert_allclose(sess.run(table_slot), np.stack(expected), rtol=1e-12, atol=1e-12)


@pytest.mark.parametrize("clip", ["global-norm", "mean"])
def test_a_gather_only_gradient_scaled_by_a_scalar_stays_row_sparse(clip: str) -> None:
    """clip_by_global_norm (a scalar factor) keeps TF1's IndexedSlices sparse: rows not looked up
    in the second step keep their values under Momentum."""
    graph = cc.Graph()
    with graph.as_default():
        table = cc.Variable(np.arange(12.0).reshape(6, 2), name="table")
        ids = cc.placeholder("int32", (None,), name="ids")
        opt = optim.MomentumOptimizer(0.1, 0.9)
        pairs = opt.compute_gradients(cc.reduce_sum(cc.square(cc.gather(table, ids))))
        if clip == "global-norm":
            clipped, _ = optim.clip_by_global_norm([g for g, _ in pairs], 1e6)   # far above the norm
        else:
            clipped = [g / 2.0 for g, _ in pairs]
        train = opt.apply_gradients(list(zip(clipped, [v for _, v in pairs])))
    with Session(graph) as sess:
        sess.run(train, {ids: [0, 1]})
        after_first = sess.run(table)
        sess.run(train, {ids: [2, 3]})
        np.testing.assert_array_equal(sess.run(table)[[0, 1, 4, 5]], after_first[[0, 1, 4, 5]])


@pytest.mark.parametrize("scaled", ["multiplied", "divided"])
def test_a_table_scaled_before_its_lookup_gets_a_dense_update_as_tf1(scaled: str) -> None:
    """gather(w * 2.0, ids): TF1's Mul (and Div) gradient turns the slices dense, so Momentum keeps
    moving a row looked up only in the first step (the velocity it gathered)."""
    graph = cc.Graph()
    with graph.as_default():
        table = cc.Variable(np.ones((3, 2)), name="table")
        ids = cc.placeholder("int32", (1,), name="ids")
        looked_up = table * 2.0 if scaled == "multiplied" else table / 0.5
        train = optim.MomentumOptimizer(0.1, 0.9).minimize(cc.reduce_sum(cc.gather(looked_up, ids)))
    with Session(graph) as sess:
        sess.run(train, {ids: [0]})
        sess.run(train, {ids: [1]})
        rows = sess.run(table)
    # row 0: 1 - 0.1*2 = 0.8, then velocity 0.9*2 gives 0.8 - 0.18 = 0.62; row 2, never looked up, stays
    np.testing.assert_allclose(rows, [[0.62, 0.62], [0.8, 0.8], [1.0, 1.0]], rtol=1e-12)


@pytest.mark.parametrize("lookup", ["cast-table", "mod-shards", "div-shards"])
@pytest.mark.parametrize("make", [lambda: optim.FtrlOptimizer(0.1), lambda: optim.MomentumOptimizer(0.1, 0.9)],
                         ids=["ftrl", "momentum"])
def test_lookups_of_a_cast_or_sharded_table_update_only_the_rows_looked_up(lookup: str, make) -> None:
    """TF1 keeps these gradients sparse (Cast casts the slices; a sharded lookup gathers from each
    shard): looking up id 0 and then id 3 moves exactly those two rows, each as a single-row
    table would move, and leaves every other row as it was (Ftrl used to set them to 0)."""
    def build(shards: int, strategy: str = "mod"):
        graph = cc.Graph()
        with graph.as_default():
            ids = cc.placeholder("int32", (None,), name="ids")
            if lookup == "cast-table":
                tables = [cc.Variable(np.ones((5, 2), "float32"), name="table")]
                rows = cc.nn.embedding_lookup(cc.cast(tables[0], "float64"), ids)
            else:
                sizes = [5] if shards == 1 else [3, 2]
                tables = [cc.Variable(np.ones((n, 2)), name=f"shard{k}") for k, n in enumerate(sizes)]
                rows = cc.nn.embedding_lookup(tables, ids, partition_strategy=strategy)
            train = make().minimize(cc.reduce_sum(rows))
        return graph, ids, tables, train

    strategy = "div" if lookup == "div-shards" else "mod"
    graph, ids, tables, train = build(1 if lookup == "cast-table" else 2, strategy)
    with Session(graph) as sess:
        sess.run(train, {ids: [0]})
        sess.run(train, {ids: [3]})
        shards = [sess.run(t) for t in tables]
    if lookup == "mod-shards":      # ids 0 1 2 3 4 are rows 0 0 1 1 2 of shards 0 1 0 1 0
        table = np.stack([shards[k % 2][k // 2] for k in range(5)])
    else:
        table = np.concatenate(shards)
    # The oracle: one table of the five rows, looked up by each id alone.
    single, single_ids, (single_table,), single_train = build(1)
    with Session(single) as sess:
        sess.run(single_train, {single_ids: [0]})
        moved = sess.run(single_table)[0]
    np.testing.assert_allclose(table[[0, 3]], np.stack([moved, moved]), rtol=1e-6)
    np.testing.assert_array_equal(table[[1, 2, 4]], np.ones((3, 2)))


def test_a_gradient_with_a_dense_part_updates_every_row() -> None:
    """A table also used densely (an L2 penalty) has a dense gradient, as in TF1: every row moves."""
    graph = cc.Graph()
    with graph.as_default():
        embedding = cc.Variable(np.ones((3, 2)), name="embedding")
        loss = cc.reduce_sum(cc.gather(embedding, [0])) + 0.5 * cc.reduce_sum(cc.square(embedding))
        train = optim.MomentumOptimizer(0.1, 0.9).minimize(loss)
    with Session(graph, target="reference") as sess:
        sess.run(train)
        np.testing.assert_allclose(sess.run(embedding), [[0.8, 0.8], [0.9, 0.9], [0.9, 0.9]])

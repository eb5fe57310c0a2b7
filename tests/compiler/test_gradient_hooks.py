"""Gradient hooks (``cc.register_gradient_hook``): a tensor's summed gradient passed through user
functions, on the ``cpu`` and ``reference`` targets."""
from __future__ import annotations

import sys
from typing import Any, Callable

import numpy as np
import pytest

import compiler as cc
import optim
from runtime import Session

TARGETS = ["cpu", "reference"]
X = np.array([0.5, -1.25, 2.0, 0.1])


def _this_line() -> int:
    """The line of the caller that is running now."""
    return sys._getframe(1).f_lineno


def _run(graph: cc.Graph, fetches: Any, target: str, feed_dict: dict | None = None) -> Any:
    with Session(graph, target=target) as sess:
        return sess.run(fetches, feed_dict=feed_dict or {})


# -- what a hook does to the gradient ------------------------------------------------------------

@pytest.mark.parametrize("target", TARGETS)
def test_clipping_an_intermediate_gradient(graph: cc.Graph, target: str) -> None:
    x = cc.placeholder("float64", shape=(4,), name="x")
    h = x * 3.0
    cc.register_gradient_hook(h, lambda grad: cc.clip_by_value(grad, -1.0, 1.0))
    (dx,) = cc.gradients(cc.reduce_sum(h * h), [x])
    np.testing.assert_allclose(_run(graph, dx, target, {x: X}), 3.0 * np.clip(2.0 * 3.0 * X, -1.0, 1.0))


@pytest.mark.parametrize("target", TARGETS)
def test_hooks_run_in_registration_order(graph: cc.Graph, target: str) -> None:
    x = cc.placeholder("float64", shape=(4,), name="x")
    h = cc.sin(x)
    cc.register_gradient_hook(h, lambda grad: grad + 1.0)
    cc.register_gradient_hook(h, lambda grad: grad * 2.0)
    (dx,) = cc.gradients(cc.reduce_sum(h), [x])
    np.testing.assert_allclose(_run(graph, dx, target, {x: X}), (1.0 + 1.0) * 2.0 * np.cos(X))


@pytest.mark.parametrize("target", TARGETS)
def test_remove_takes_one_hook_off_and_may_be_repeated(graph: cc.Graph, target: str) -> None:
    x = cc.placeholder("float64", shape=(4,), name="x")
    h = x * x
    doubling = cc.register_gradient_hook(h, lambda grad: grad * 2.0)
    cc.register_gradient_hook(h, lambda grad: grad * 5.0)
    (before,) = cc.gradients(cc.reduce_sum(h), [x])
    doubling.remove()
    doubling.remove()
    (after,) = cc.gradients(cc.reduce_sum(h), [x])
    got_before, got_after = _run(graph, [before, after], target, {x: X})
    np.testing.assert_allclose(got_before, 10.0 * 2.0 * X)   # a built gradient keeps its hooks
    np.testing.assert_allclose(got_after, 5.0 * 2.0 * X)


@pytest.mark.parametrize("target", TARGETS)
def test_a_hook_returning_none_keeps_the_gradient(graph: cc.Graph, target: str) -> None:
    x = cc.placeholder("float64", shape=(4,), name="x")
    h = cc.exp(x)
    seen: list[cc.Tensor] = []
    cc.register_gradient_hook(h, seen.append)
    (dx,) = cc.gradients(cc.reduce_sum(h * 2.0), [x])
    assert len(seen) == 1 and seen[0].shape == h.shape
    np.testing.assert_allclose(_run(graph, dx, target, {x: X}), 2.0 * np.exp(X))


@pytest.mark.parametrize("unconnected", ["none", "zero"])
def test_a_tensor_with_no_gradient_does_not_call_its_hook(graph: cc.Graph, unconnected: str) -> None:
    x = cc.placeholder("float64", shape=(4,), name="x")
    unused = cc.placeholder("float64", shape=(4,), name="unused")
    called: list[cc.Tensor] = []
    cc.register_gradient_hook(unused, called.append)
    cc.gradients(cc.reduce_sum(x * x), [x, unused], unconnected_gradients=unconnected)
    assert called == []


@pytest.mark.parametrize("target", TARGETS)
def test_a_hook_on_a_custom_gradient_output_feeds_grad_fn(graph: cc.Graph, target: str) -> None:
    @cc.custom_gradient
    def cube(x: cc.Tensor) -> Any:
        return x * x * x, lambda dy: dy * 3.0 * x * x

    x = cc.placeholder("float64", shape=(4,), name="x")
    y = cube(x)
    cc.register_gradient_hook(y, lambda grad: grad * 0.5)
    (dx,) = cc.gradients(cc.reduce_sum(y), [x])
    np.testing.assert_allclose(_run(graph, dx, target, {x: X}), 0.5 * 3.0 * X * X)


@pytest.mark.parametrize("target", TARGETS)
def test_second_order_gradients_go_through_hooks(graph: cc.Graph, target: str) -> None:
    scale = 3.0
    x = cc.placeholder("float64", shape=(4,), name="x")
    h = x * x
    cc.register_gradient_hook(h, lambda grad: grad * scale)
    (dx,) = cc.gradients(cc.reduce_sum(cc.sin(h)), [x])          # scale * cos(x^2) * 2x
    # The second pass reaches h again (through cos(h)), so the hook scales that gradient too.
    (ddx,) = cc.gradients(cc.reduce_sum(dx), [x])
    got_dx, got_ddx = _run(graph, [dx, ddx], target, {x: X})
    np.testing.assert_allclose(got_dx, scale * np.cos(X * X) * 2.0 * X, rtol=1e-12)
    expected = 2.0 * scale * np.cos(X * X) - 4.0 * scale * scale * X * X * np.sin(X * X)
    np.testing.assert_allclose(got_ddx, expected, rtol=1e-12, atol=1e-12)


# -- hooks in training -------------------------------------------------------------------------

RNG = np.random.default_rng(7)
INPUTS = RNG.standard_normal((6, 3))
TARGET_VALUES = RNG.standard_normal((6, 2))
INITIAL = {"W1": RNG.standard_normal((3, 4)) * 0.5, "b1": RNG.standard_normal(4) * 0.1,
           "W2": RNG.standard_normal((4, 2)) * 0.5, "b2": RNG.standard_normal(2) * 0.1}
LEARNING_RATE = 0.1


def _mlp_gradients(params: dict[str, np.ndarray], layer1_scale: float, scaled: tuple[str, ...]
                   ) -> dict[str, np.ndarray]:
    """The gradients of the mean squared error of the two-layer tanh MLP, by hand, with the ones
    named in ``scaled`` multiplied by ``layer1_scale``."""
    a1 = np.tanh(INPUTS @ params["W1"] + params["b1"])
    out = a1 @ params["W2"] + params["b2"]
    d_out = 2.0 * (out - TARGET_VALUES) / out.size
    dz1 = (d_out @ params["W2"].T) * (1.0 - a1 * a1)
    grads = {"W1": INPUTS.T @ dz1, "b1": dz1.sum(axis=0), "W2": a1.T @ d_out, "b2": d_out.sum(axis=0)}
    return {name: grad * (layer1_scale if name in scaled else 1.0) for name, grad in grads.items()}


def _mlp(graph: cc.Graph) -> tuple[dict[str, cc.Variable], cc.Tensor, cc.Tensor]:
    """The MLP's variables, its first layer's pre-activation and its loss."""
    variables = {name: cc.Variable(value, name=name, dtype="float64") for name, value in INITIAL.items()}
    z1 = cc.matmul(cc.constant(INPUTS), variables["W1"]) + variables["b1"]
    out = cc.matmul(cc.tanh(z1), variables["W2"]) + variables["b2"]
    loss = cc.reduce_mean(cc.square(out - cc.constant(TARGET_VALUES)))
    return variables, z1, loss


# (where the hook goes, the variables whose gradients it scales)
SCALING_CASES = {"on the variable W1": ("W1", ("W1",)),
                 "on the first layer's output": ("z1", ("W1", "b1"))}


@pytest.mark.parametrize("target", TARGETS)
@pytest.mark.parametrize("case", SCALING_CASES)
def test_scaling_one_layers_gradient_in_training(graph: cc.Graph, target: str, case: str) -> None:
    hooked, scaled = SCALING_CASES[case]
    variables, z1, loss = _mlp(graph)
    cc.register_gradient_hook(z1 if hooked == "z1" else variables[hooked], lambda grad: grad * 0.25)
    train = optim.GradientDescentOptimizer(LEARNING_RATE).minimize(loss)
    params = {name: value.copy() for name, value in INITIAL.items()}
    for _ in range(3):
        grads = _mlp_gradients(params, 0.25, scaled)
        params = {name: params[name] - LEARNING_RATE * grads[name] for name in params}
    with Session(graph, target=target) as sess:
        for _ in range(3):
            sess.run(train)
        got = sess.run(variables)
    for name, value in params.items():
        np.testing.assert_allclose(got[name], value, rtol=1e-10, atol=1e-12, err_msg=name)


def _record_returning_none(norm: cc.Variable) -> Callable[[cc.Tensor], Any]:
    def record(grad: cc.Tensor) -> None:
        norm.assign(cc.sqrt(cc.reduce_sum(grad * grad)))
    return record


def _record_with_control_dependency(norm: cc.Variable) -> Callable[[cc.Tensor], Any]:
    def record(grad: cc.Tensor) -> cc.Tensor:
        with cc.control_dependencies([norm.assign(cc.sqrt(cc.reduce_sum(grad * grad)))]):
            return cc.identity(grad)
    return record


@pytest.mark.parametrize("target", TARGETS)
@pytest.mark.parametrize("make_hook", [_record_returning_none, _record_with_control_dependency],
                         ids=["returning None", "with a control dependency"])
def test_recording_a_gradient_norm_inside_the_step(graph: cc.Graph, target: str,
                                                   make_hook: Callable[[cc.Variable], Any]) -> None:
    variables, _, loss = _mlp(graph)
    norm = cc.Variable(0.0, name="W2_grad_norm", trainable=False, dtype="float64")
    cc.register_gradient_hook(variables["W2"], make_hook(norm))
    train = optim.GradientDescentOptimizer(LEARNING_RATE).minimize(loss)
    grads = _mlp_gradients(INITIAL, 1.0, ())
    with Session(graph, target=target) as sess:
        sess.run(train)
        got_norm, got_w2 = sess.run([norm, variables["W2"]])
    np.testing.assert_allclose(got_norm, np.linalg.norm(grads["W2"]), rtol=1e-12)
    np.testing.assert_allclose(got_w2, INITIAL["W2"] - LEARNING_RATE * grads["W2"], rtol=1e-12)


# -- errors ------------------------------------------------------------------------------------

def returns_a_sum(grad: cc.Tensor) -> cc.Tensor:
    return cc.reduce_sum(grad)


def returns_float32(grad: cc.Tensor) -> cc.Tensor:
    return cc.cast(grad, "float32")


def returns_a_number(grad: cc.Tensor) -> float:
    return 0.0


def returns_text(grad: cc.Tensor) -> str:
    return "no gradient here"


def returns_an_object(grad: cc.Tensor) -> object:
    return object()


def returns_another_graphs_tensor(grad: cc.Tensor) -> cc.Tensor:
    with cc.Graph().as_default():
        return cc.constant(np.zeros(4))


# (hook, error type, words the message must hold besides the hook, the tensor and the line)
RESULT_ERRORS = [
    (returns_a_sum, cc.ShapeError, "has shape ()"),
    (returns_float32, cc.DTypeError, "is float32"),
    (returns_a_number, cc.ShapeError, "has shape ()"),
    (returns_text, TypeError, "neither a Tensor nor convertible"),
    (returns_an_object, TypeError, "neither a Tensor nor convertible"),
    (returns_another_graphs_tensor, cc.GraphMismatchError, "another graph"),
]


@pytest.mark.parametrize("hook, error, words", RESULT_ERRORS, ids=[row[0].__name__ for row in RESULT_ERRORS])
def test_a_wrong_hook_result_names_the_hook_the_tensor_and_its_line(graph: cc.Graph, hook: Callable,
                                                                     error: type, words: str) -> None:
    x = cc.placeholder("float64", shape=(4,), name="x")
    h = cc.exp(x, name="hooked")
    _, line = cc.register_gradient_hook(h, hook), _this_line()
    with pytest.raises(error) as caught:
        cc.gradients(cc.reduce_sum(h), [x])
    message = str(caught.value)
    assert hook.__name__ in message and "'hooked:0'" in message and words in message, message
    assert f"test_gradient_hooks.py:{line})" in message, message


# (what to hook, the hook, error type, words the message must hold)
REGISTRATION_ERRORS = {
    "not a tensor": (lambda: np.zeros(4), returns_a_sum, TypeError, "is not a Tensor"),
    "not callable": (lambda: cc.placeholder("float64", shape=(4,)), "clip", TypeError, "must be callable"),
    "an integer tensor": (lambda: cc.placeholder("int32", shape=(4,), name="labels"), returns_a_sum,
                          cc.DTypeError, "'labels:0' is int32 and has no gradient"),
}


@pytest.mark.parametrize("case", REGISTRATION_ERRORS)
def test_registering_a_hook_checks_its_arguments(graph: cc.Graph, case: str) -> None:
    make_tensor, hook, error, words = REGISTRATION_ERRORS[case]
    tensor = make_tensor()
    with pytest.raises(error) as caught:
        line = _this_line(); cc.register_gradient_hook(tensor, hook)  # noqa: E702
    message = str(caught.value)
    assert words in message and f"test_gradient_hooks.py:{line})" in message, message


@pytest.mark.parametrize("target", ["cpu", "reference"])
def test_a_hook_registered_inside_a_branch_or_loop_body_applies(target: str) -> None:
    graph = cc.Graph()
    with graph.as_default():
        x = cc.placeholder("float64", (3,), name="x")
        w = cc.placeholder("float64", (), name="w")

        def scaled(t: cc.Tensor) -> cc.Tensor:
            cc.register_gradient_hook(t, lambda g: g * 100.0)
            return t
        y = cc.cond(w > 0.5, lambda: scaled(x * w), lambda: x)
        _, h = cc.while_loop(lambda i, h: i < 2, lambda i, h: (i + 1, scaled(h * w)), (0, x))
        (through_cond,) = cc.gradients(cc.reduce_sum(y), [x])
        (through_loop,) = cc.gradients(cc.reduce_sum(h), [x])
    with Session(graph, target=target) as sess:
        from_cond, from_loop = sess.run([through_cond, through_loop], {x: np.ones(3), w: 0.7})
    np.testing.assert_allclose(from_cond, np.full(3, 70.0))
    np.testing.assert_allclose(from_loop, np.full(3, 100.0 * 0.7 * 100.0 * 0.7))


def test_a_hook_on_a_tensor_of_an_already_traced_function_is_refused() -> None:
    with cc.Graph().as_default():
        x = cc.placeholder("float64", (3,), name="x")
        inside = []
        cc.cond(cc.reduce_sum(x) > 0.0, lambda: inside.append(x * 2.0) or inside[0], lambda: x)
        with pytest.raises(ValueError, match="register the hook inside that function"):
            cc.register_gradient_hook(inside[0], lambda g: g)


@pytest.mark.parametrize("construct", ["cond", "while_loop"])
def test_removing_a_hook_registered_inside_a_branch_or_loop_body_takes_it_off_its_copies(construct: str) -> None:
    """Tracing copies the branch's tensors, and their hooks with them: remove() took the hook
    off the traced tensor only, so later gradients still halved."""
    graph = cc.Graph()
    with graph.as_default():
        x = cc.placeholder("float64", (3,), name="x")
        handles = []

        def squared_then_exp():
            h = x * x
            handles.append(cc.register_gradient_hook(h, lambda g: g * 0.5))
            return cc.exp(h)
        if construct == "cond":
            out = cc.cond(cc.reduce_sum(x) > 0, squared_then_exp, lambda: x)
        else:
            _, out = cc.while_loop(lambda i, v: i < 1, lambda i, v: (i + 1, squared_then_exp()), (0, x),
                                   maximum_iterations=1)
        handles[0].remove()
        (grad,) = cc.gradients(cc.reduce_sum(out), [x])
    values = np.array([0.1, 0.2, 0.3])
    for target in ("cpu", "reference"):
        with Session(graph, target=target) as sess:
            np.testing.assert_allclose(sess.run(grad, {x: values}), np.exp(values ** 2) * 2 * values, rtol=1e-12)

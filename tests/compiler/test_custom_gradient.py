"""Custom gradients (``cc.custom_gradient``, ``cc.RegisterGradient`` + ``gradient_override_map``)
and second derivatives (``cc.hessians``, ``cc.hessian_vector_product``)."""
from __future__ import annotations

import itertools
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

import compiler as cc
import optim
from runtime import Session

ROOT = Path(__file__).resolve().parents[2]
X = np.array([0.5, -1.25, 2.0])
_names = itertools.count()


def _run(graph, fetches, feed_dict=None, target="cpu"):
    with Session(graph, target=target) as sess:
        return sess.run(fetches, feed_dict=feed_dict or {})


def _run_both(graph, fetches, feed_dict=None, rtol=1e-12, atol=1e-12):
    """Run on cpu and on the reference; check they agree; return the cpu values."""
    cpu = _run(graph, fetches, feed_dict, "cpu")
    ref = _run(graph, fetches, feed_dict, "reference")
    for c, r in zip(cpu, ref):
        np.testing.assert_allclose(c, r, rtol=rtol, atol=atol)
    return cpu


def _unique(base: str) -> str:
    """A gradient name not registered yet (the registry is process-wide)."""
    return f"{base}_{next(_names)}_{os.getpid()}"


# -- custom_gradient ---------------------------------------------------------------------------

@cc.custom_gradient
def log1pexp(x):
    e = cc.exp(x)

    def grad_fn(dy):
        return dy * cc.sigmoid(x)        # finite where e overflows

    return cc.log1p(e), grad_fn


@cc.custom_gradient
def scaled_square(x):
    """x^2, with a gradient that is deliberately 3x (not 2x): shows which rule was used."""
    def grad_fn(dy):
        return dy * 3.0 * x

    return x * x, grad_fn


def test_custom_gradient_replaces_the_body_gradient(graph) -> None:
    x = cc.placeholder("float64", shape=(3,), name="x")
    y = log1pexp(x)
    assert isinstance(y, cc.Tensor) and y.shape == (3,) and y.dtype == np.float64
    (custom,) = cc.gradients(cc.reduce_sum(y), [x])
    (through_body,) = cc.gradients(cc.reduce_sum(cc.log1p(cc.exp(x))), [x])
    values = np.array([0.0, 2.0, 1000.0])
    got_y, got_custom, got_body = _run_both(graph, [y, custom, through_body], {x: values})
    np.testing.assert_allclose(got_y[:2], np.log1p(np.exp(values[:2])))
    np.testing.assert_allclose(got_custom, 1 / (1 + np.exp(-values)))
    assert np.isnan(got_body[2])                  # inf / inf through the body: the reason for it


def test_custom_rule_is_used_not_the_true_derivative(graph) -> None:
    x = cc.placeholder("float64", shape=(3,), name="x")
    (g,) = cc.gradients(cc.reduce_sum(scaled_square(x) * 2.0), [x])
    (got,) = _run_both(graph, [g], {x: X})
    np.testing.assert_allclose(got, 2.0 * 3.0 * X)


def test_boundary_is_an_identity_and_body_gets_no_gradient(graph) -> None:
    x = cc.placeholder("float64", shape=(3,), name="x")
    inner = []

    @cc.custom_gradient
    def f(v):
        h = v * v
        inner.append(h)
        return cc.exp(h), lambda dy: dy * 0.5

    y = f(x)
    assert y.op.type == "Identity"
    g_h, g_x = cc.gradients(cc.reduce_sum(y), [inner[0], x])
    assert g_h is None                            # the custom rule goes around the body
    (got,) = _run_both(graph, [g_x], {x: X})
    np.testing.assert_allclose(got, 0.5)


@pytest.mark.parametrize("target", ["cpu", "reference"])
def test_minimize_uses_the_custom_gradient(graph, target) -> None:
    w = cc.Variable(np.array([1.0, -2.0, 3.0]), name="w")
    loss = cc.reduce_sum(scaled_square(w))
    train = optim.GradientDescentOptimizer(0.1).minimize(loss)
    with Session(graph, target=target) as sess:
        sess.run(train)
        got = sess.run(w)
    np.testing.assert_allclose(got, w.initial_value - 0.1 * 3.0 * w.initial_value, rtol=1e-12)


@pytest.mark.parametrize("target", ["cpu", "reference"])
def test_captured_variables_get_variable_grads(graph, target) -> None:
    w = cc.Variable(np.array([2.0, -1.0]), name="w")
    seen = {}

    @cc.custom_gradient
    def scale(v):
        def grad_fn(dy, variables=None):
            seen["variables"] = variables
            # true gradients would be dy * w and sum(dy * v); use 10x the second to tell them apart
            return dy * w, [10.0 * cc.reduce_sum(dy * v, axis=0)]

        return v * w, grad_fn

    x = cc.placeholder("float64", shape=(3, 2), name="x")
    loss = cc.reduce_sum(scale(x))
    g_x, g_w = cc.gradients(loss, [x, w])
    train = optim.GradientDescentOptimizer(0.01).minimize(loss, var_list=[w])
    assert seen["variables"] == [w] and seen["variables"][0] is w
    xv = np.arange(6.0).reshape(3, 2)
    with Session(graph, target=target) as sess:
        got_x, got_w = sess.run([g_x, g_w], {x: xv})
        sess.run(train, {x: xv})
        new_w = sess.run(w)
    np.testing.assert_allclose(got_x, np.broadcast_to(w.initial_value, (3, 2)))
    np.testing.assert_allclose(got_w, 10.0 * xv.sum(axis=0))
    np.testing.assert_allclose(new_w, w.initial_value - 0.01 * 10.0 * xv.sum(axis=0), rtol=1e-12)


def test_variables_need_a_variables_keyword(graph) -> None:
    w = cc.Variable(np.ones(3), name="w")

    @cc.custom_gradient
    def f(v):
        return v * w, lambda dy: dy

    x = cc.placeholder("float64", shape=(3,), name="x")
    with pytest.raises(TypeError, match="variables"):
        f(x)


def test_a_variable_passed_as_argument_is_an_input(graph) -> None:
    w = cc.Variable(np.array([1.0, 2.0]), name="w")

    @cc.custom_gradient
    def f(v):
        return cc.square(v), lambda dy: dy * 4.0      # no `variables`: w is an argument

    (g,) = cc.gradients(cc.reduce_sum(f(w)), [w])
    (got,) = _run_both(graph, [g])
    np.testing.assert_allclose(got, [4.0, 4.0])


def test_multiple_outputs_and_none_gradients(graph) -> None:
    calls = []

    @cc.custom_gradient
    def prod_and_sum(a, b):
        def grad_fn(d_prod, d_sum):
            calls.append((d_prod, d_sum))
            return [d_prod * b + d_sum, None]           # no gradient for b

        return (a * b, a + b), grad_fn

    a = cc.placeholder("float64", shape=(3,), name="a")
    b = cc.placeholder("float64", shape=(3,), name="b")
    p, s = prod_and_sum(a, b)
    assert isinstance(p, cc.Tensor) and isinstance(s, cc.Tensor)
    g_a, g_b = cc.gradients(cc.reduce_sum(p * 2.0) + cc.reduce_sum(s * 5.0), [a, b])
    assert g_b is None
    assert len(calls) == 1                            # one call with both output gradients
    (only_sum,) = cc.gradients(cc.reduce_sum(s), [a])  # d_prod is zeros: p does not reach ys
    assert len(calls) == 2
    bv = np.array([1.0, -2.0, 0.5])
    got = _run_both(graph, [g_a, only_sum, calls[1][0]], {a: X, b: bv})
    np.testing.assert_allclose(got[0], 2.0 * bv + 5.0)
    np.testing.assert_allclose(got[1], 1.0)
    np.testing.assert_array_equal(got[2], 0.0)
    # a list comes back as a list
    @cc.custom_gradient
    def as_list(v):
        return [v * 1.0, v * 2.0], lambda d1, d2: d1 + d2

    out = as_list(a)
    assert isinstance(out, list) and len(out) == 2


def test_gradient_with_respect_to_an_output(graph) -> None:
    x = cc.placeholder("float64", shape=(3,), name="x")
    y = scaled_square(x)
    g_y, g_x = cc.gradients(cc.reduce_sum(y * 7.0), [y, x])
    got = _run_both(graph, [g_y, g_x], {x: X})
    np.testing.assert_allclose(got[0], 7.0)
    np.testing.assert_allclose(got[1], 7.0 * 3.0 * X)


def test_second_order_through_a_custom_gradient(graph) -> None:
    x = cc.placeholder("float64", shape=(3,), name="x")
    (d1,) = cc.gradients(cc.reduce_sum(scaled_square(x)), [x])    # 3x
    (d2,) = cc.gradients(d1, [x])                                   # 3
    (s1,) = cc.gradients(cc.reduce_sum(log1pexp(x)), [x])           # sigmoid
    (s2,) = cc.gradients(s1, [x])                                   # sigmoid'
    (h,) = cc.hessians(cc.reduce_sum(scaled_square(x)), [x])
    got = _run_both(graph, [d2, s2, h], {x: X})
    sig = 1 / (1 + np.exp(-X))
    np.testing.assert_allclose(got[0], 3.0)
    np.testing.assert_allclose(got[1], sig * (1 - sig))
    np.testing.assert_allclose(got[2], 3.0 * np.eye(3))


def test_custom_gradient_of_a_custom_gradient(graph) -> None:
    @cc.custom_gradient
    def cube(x):
        @cc.custom_gradient
        def grad_of_cube(v, dy):
            # d/dv (3 v^2 dy) = 6 v dy; report 100x to show the inner rule is the one used
            return dy * 3.0 * v * v, lambda g: [g * 600.0 * v * dy, g * 3.0 * v * v]

        return x * x * x, lambda dy: grad_of_cube(x, dy)

    x = cc.placeholder("float64", shape=(3,), name="x")
    (d1,) = cc.gradients(cc.reduce_sum(cube(x)), [x])
    (d2,) = cc.gradients(d1, [x])
    got = _run_both(graph, [d1, d2], {x: X})
    np.testing.assert_allclose(got[0], 3 * X ** 2)
    np.testing.assert_allclose(got[1], 600.0 * X)


def test_python_numbers_and_keyword_arguments(graph) -> None:
    @cc.custom_gradient
    def power(v, *, exponent):
        return v ** float(exponent), lambda dy: dy * float(exponent) * v ** float(exponent - 1)

    x = cc.placeholder("float64", shape=(3,), name="x")
    (g,) = cc.gradients(cc.reduce_sum(power(x, exponent=3)), [x])
    (got,) = _run_both(graph, [g], {x: X})
    np.testing.assert_allclose(got, 3 * X ** 2)
    with pytest.raises(TypeError, match="positionally"):
        power(x, exponent=x)


def test_custom_gradient_errors(graph) -> None:
    x = cc.placeholder("float64", shape=(3,), name="x")

    @cc.custom_gradient
    def no_grad_fn(v):
        return v * 2.0

    with pytest.raises(TypeError, match="no_grad_fn.*grad_fn"):
        no_grad_fn(x)

    @cc.custom_gradient
    def too_many(v):
        return v * 2.0, lambda dy: [dy, dy]

    with pytest.raises(ValueError, match="too_many.*2 gradients for 1 inputs"):
        cc.gradients(cc.reduce_sum(too_many(x)), [x])

    @cc.custom_gradient
    def wrong_shape(v):
        return v * 2.0, lambda dy: cc.reduce_sum(dy)

    with pytest.raises(cc.ShapeError, match=r"wrong_shape.*\(3,\).*test_custom_gradient.py:\d+"):
        cc.gradients(cc.reduce_sum(wrong_shape(x)), [x])

    @cc.custom_gradient
    def wrong_dtype(v):
        return v * 2.0, lambda dy: cc.cast(dy, "float32")

    with pytest.raises(cc.DTypeError, match="wrong_dtype"):
        cc.gradients(cc.reduce_sum(wrong_dtype(x)), [x])

    with pytest.raises(TypeError):
        cc.custom_gradient(42)


def test_custom_gradient_respects_stop_gradients(graph) -> None:
    x = cc.placeholder("float64", shape=(3,), name="x")
    a = x * 1.0
    y = scaled_square(a)
    assert cc.gradients(cc.reduce_sum(y), [x], stop_gradients=[a]) == [None]
    (ok,) = cc.gradients(cc.reduce_sum(y), [x])
    (got,) = _run_both(graph, [ok], {x: X})
    np.testing.assert_allclose(got, 3.0 * X)


def test_custom_gradient_without_a_data_path(graph) -> None:
    # The output does not depend on x at all, yet the custom rule sends x a gradient.
    @cc.custom_gradient
    def constant_with_gradient(v):
        return cc.constant(np.ones(3)), lambda dy: dy * 2.0

    x = cc.placeholder("float64", shape=(3,), name="x")
    (g,) = cc.gradients(cc.reduce_sum(constant_with_gradient(x)), [x])
    (got,) = _run_both(graph, [g], {x: X})
    np.testing.assert_allclose(got, 2.0)


# -- RegisterGradient and gradient_override_map -----------------------------------------------

PASS_THROUGH = _unique("PassThrough")


@cc.RegisterGradient(PASS_THROUGH)
def _pass_through(op, grad):
    return [grad]


def test_override_relu_with_a_registered_gradient(graph) -> None:
    x = cc.placeholder("float64", shape=(3,), name="x")
    with graph.gradient_override_map({"Relu": PASS_THROUGH}):
        y = cc.nn.relu(x)
        z = cc.exp(x)                             # not a Relu: untouched
    plain = cc.nn.relu(x)                         # after the block: the op's own rule
    assert y.op.type == "Relu" and y.op.gradient_override == PASS_THROUGH
    assert z.op.gradient_override is None and plain.op.gradient_override is None
    (g,) = cc.gradients(cc.reduce_sum(y), [x])
    (g_plain,) = cc.gradients(cc.reduce_sum(plain), [x])
    (g_z,) = cc.gradients(cc.reduce_sum(z), [x])
    got = _run_both(graph, [g, g_plain, g_z], {x: X})
    np.testing.assert_allclose(got[0], [1.0, 1.0, 1.0])
    np.testing.assert_allclose(got[1], [1.0, 0.0, 1.0])
    np.testing.assert_allclose(got[2], np.exp(X))


def test_override_with_an_op_type_name_straight_through_sign(graph) -> None:
    x = cc.placeholder("float64", shape=(3,), name="x")
    with graph.gradient_override_map({"Sign": "Identity"}):
        s = cc.sign(x)
    (g,) = cc.gradients(cc.reduce_sum(s * 3.0), [x])
    (got,) = _run_both(graph, [g], {x: X})
    np.testing.assert_allclose(got, 3.0)
    (plain,) = cc.gradients(cc.reduce_sum(cc.sign(x)), [x])   # outside the map: TF1's zeros
    np.testing.assert_allclose(_run_both(graph, [plain], {x: X})[0], 0.0)


def test_nested_override_maps(graph) -> None:
    double = _unique("Double")

    @cc.RegisterGradient(double)
    def _double(op, grad):
        return grad * 2.0                         # a bare tensor for a one-input op

    x = cc.placeholder("float64", shape=(3,), name="x")
    with graph.gradient_override_map({"Relu": PASS_THROUGH}):
        with graph.gradient_override_map({"Exp": double}):
            inner_relu, inner_exp = cc.nn.relu(x), cc.exp(x)
        outer_exp = cc.exp(x)
    assert inner_relu.op.gradient_override == PASS_THROUGH
    assert inner_exp.op.gradient_override == double
    assert outer_exp.op.gradient_override is None
    (g,) = cc.gradients(cc.reduce_sum(inner_exp), [x])
    (got,) = _run_both(graph, [g], {x: X})
    np.testing.assert_allclose(got, 2.0)


def test_override_second_order(graph) -> None:
    square_grad = _unique("SquareTimesFour")

    @cc.RegisterGradient(square_grad)
    def _square_grad(op, grad):
        (v,) = op.inputs
        return [grad * 4.0 * v]                   # 2x the true rule

    x = cc.placeholder("float64", shape=(3,), name="x")
    with graph.gradient_override_map({"Square": square_grad}):
        y = cc.square(x)
    (d1,) = cc.gradients(cc.reduce_sum(y), [x])
    (d2,) = cc.gradients(d1, [x])
    got = _run_both(graph, [d1, d2], {x: X})
    np.testing.assert_allclose(got[0], 4.0 * X)
    np.testing.assert_allclose(got[1], 4.0)


@pytest.mark.parametrize("target", ["cpu", "reference"])
def test_minimize_uses_the_override(graph, target) -> None:
    w = cc.Variable(np.array([-1.0, 2.0]), name="w")
    with graph.gradient_override_map({"Relu": PASS_THROUGH}):
        loss = cc.reduce_sum(cc.nn.relu(w) * 3.0)
    train = optim.GradientDescentOptimizer(0.5).minimize(loss)
    with Session(graph, target=target) as sess:
        sess.run(train)
        got = sess.run(w)
    np.testing.assert_allclose(got, w.initial_value - 0.5 * 3.0)


def test_registering_a_name_twice_raises() -> None:
    name = _unique("Twice")
    cc.RegisterGradient(name)(lambda op, grad: [grad])
    with pytest.raises(cc.GradientRegistryError, match=name):
        cc.RegisterGradient(name)(lambda op, grad: [grad])
    with pytest.raises(cc.GradientRegistryError, match="'Relu'"):
        cc.RegisterGradient("Relu")(lambda op, grad: [grad])
    with pytest.raises(LookupError):              # a LookupError, as TF1's KeyError
        cc.RegisterGradient(name)(lambda op, grad: [grad])
    with pytest.raises(TypeError):
        cc.RegisterGradient("")
    with pytest.raises(TypeError):
        cc.RegisterGradient(_unique("NotCallable"))(3)


def test_unknown_override_name_raises_when_gradients_are_taken(graph) -> None:
    x = cc.placeholder("float64", shape=(3,), name="x")
    with graph.gradient_override_map({"Tanh": "NoSuchGradientAnywhere"}):
        y = cc.tanh(x, name="my_tanh")            # building is fine: looked up lazily
    line = sys._getframe().f_lineno - 1
    with pytest.raises(cc.GradientRegistryError) as info:
        cc.gradients(cc.reduce_sum(y), [x])
    message = str(info.value)
    assert "NoSuchGradientAnywhere" in message and "Tanh 'my_tanh'" in message
    assert f"test_custom_gradient.py:{line}" in message


def test_override_map_arguments_and_results_are_checked(graph) -> None:
    with pytest.raises(TypeError):
        with graph.gradient_override_map({"Relu": 3}):
            pass
    with pytest.raises(TypeError):
        with graph.gradient_override_map([("Relu", PASS_THROUGH)]):
            pass
    two = _unique("TwoGrads")
    cc.RegisterGradient(two)(lambda op, grad: [grad, grad])
    wrong_shape = _unique("WrongShape")
    cc.RegisterGradient(wrong_shape)(lambda op, grad: [cc.reduce_sum(grad)])
    x = cc.placeholder("float64", shape=(3,), name="x")
    with graph.gradient_override_map({"Exp": two, "Tanh": wrong_shape}):
        e, t = cc.exp(x), cc.tanh(x)
    with pytest.raises(ValueError, match="2 gradients for 1 inputs"):
        cc.gradients(cc.reduce_sum(e), [x])
    with pytest.raises(cc.ShapeError, match=wrong_shape):
        cc.gradients(cc.reduce_sum(t), [x])


# -- hessians and hessian_vector_product --------------------------------------------------------

def _numeric_jacobian(graph, grad, x, feed, eps=1e-6):
    """Central differences of the gradient ``grad`` w.r.t. the placeholder ``x``."""
    base = feed[x]
    columns = []
    for index in np.ndindex(base.shape):
        plus, minus = base.copy(), base.copy()
        plus[index] += eps
        minus[index] -= eps
        (gp,) = _run(graph, [grad], {**feed, x: plus}, "reference")
        (gm,) = _run(graph, [grad], {**feed, x: minus}, "reference")
        columns.append((gp - gm) / (2 * eps))
    # column j is d grad / d x[j]; the Hessian is symmetric, laid out as x.shape + x.shape
    return np.stack(columns, axis=-1).reshape(base.shape + base.shape)


def _check_hessian(graph, loss, x, feed, expected=None):
    (grad,) = cc.gradients(loss, [x])
    (h,) = cc.hessians(loss, [x])
    assert h.shape == x.shape + x.shape and h.dtype == np.float64
    (got,) = _run_both(graph, [h], feed, rtol=1e-10, atol=1e-12)
    numeric = _numeric_jacobian(graph, grad, x, feed)
    np.testing.assert_allclose(got, numeric, rtol=1e-5, atol=1e-7)
    if expected is not None:
        np.testing.assert_allclose(got, expected, rtol=1e-10, atol=1e-12)
    return got


def test_hessian_of_a_quadratic_form(graph) -> None:
    rng = np.random.default_rng(1)
    a = rng.normal(size=(4, 4))
    x = cc.placeholder("float64", shape=(4,), name="x")
    ax = cc.reshape(cc.constant(a) @ cc.reshape(x, (4, 1)), (4,))
    loss = cc.reduce_sum(x * ax)                  # x^T A x
    _check_hessian(graph, loss, x, {x: rng.normal(size=4)}, expected=a + a.T)


def test_hessian_of_sum_tanh_w_x(graph) -> None:
    rng = np.random.default_rng(2)
    wv, xv = rng.normal(size=(3, 4)), rng.normal(size=(4,))
    x = cc.placeholder("float64", shape=(4,), name="x")
    w = cc.placeholder("float64", shape=(3, 4), name="w")
    loss = cc.reduce_sum(cc.tanh(w @ cc.reshape(x, (4, 1))))
    t = np.tanh(wv @ xv)
    expected = np.einsum("k,ki,kj->ij", -2 * t * (1 - t * t), wv, wv)
    _check_hessian(graph, loss, x, {x: xv, w: wv}, expected=expected)
    # and with respect to the matrix: shape (3, 4, 3, 4)
    _check_hessian(graph, loss, w, {x: xv, w: wv})


def test_hessian_of_a_log_softmax_loss(graph) -> None:
    rng = np.random.default_rng(3)
    xv, wv = rng.normal(size=(5, 3)), rng.normal(size=(3, 2))
    targets = np.eye(2)[[0, 1, 1, 0, 1]]
    x = cc.constant(xv)
    w = cc.placeholder("float64", shape=(3, 2), name="w")
    loss = -cc.reduce_mean(cc.reduce_sum(cc.constant(targets) * cc.nn.log_softmax(x @ w), axis=1))
    h = _check_hessian(graph, loss, w, {w: wv})
    flat = h.reshape(6, 6)
    np.testing.assert_allclose(flat, flat.T, atol=1e-12)
    assert np.all(np.linalg.eigvalsh(flat) > -1e-12)   # convex in w


def test_hessians_of_several_xs_and_edge_cases(graph) -> None:
    x = cc.placeholder("float64", shape=(2,), name="x")
    s = cc.placeholder("float64", shape=(), name="s")
    unused = cc.placeholder("float64", shape=(2,), name="unused")
    linear = cc.placeholder("float64", shape=(2,), name="linear")
    loss = cc.reduce_sum(x ** 3) * s + s * s + cc.reduce_sum(linear * 2.0)
    h_x, h_s, h_unused, h_linear = cc.hessians(loss, [x, s, unused, linear])
    assert h_unused is None
    assert h_s.shape == () and h_linear.shape == (2, 2, )
    (zero,) = cc.hessians(loss, [unused], unconnected_gradients="zero")
    xv, sv = np.array([1.5, -2.0]), np.array(0.5)
    got = _run_both(graph, [h_x, h_s, h_linear, zero], {x: xv, s: sv, linear: xv})
    np.testing.assert_allclose(got[0], np.diag(6 * xv * sv))
    np.testing.assert_allclose(got[1], 2.0)
    np.testing.assert_array_equal(got[2], np.zeros((2, 2)))
    np.testing.assert_array_equal(got[3], np.zeros((2, 2)))
    with pytest.raises(cc.ShapeError, match="fully known"):
        cc.hessians(loss, [cc.placeholder("float64", shape=(None,), name="batch")])
    with pytest.raises(ValueError):
        cc.hessians(loss, [x], unconnected_gradients="zeros")


def test_hessian_vector_product_equals_h_times_v(graph) -> None:
    rng = np.random.default_rng(4)
    wv, xv = rng.normal(size=(3, 4)), rng.normal(size=(4,))
    x = cc.placeholder("float64", shape=(4,), name="x")
    w = cc.constant(wv)
    v = cc.placeholder("float64", shape=(4,), name="v")
    loss = cc.reduce_sum(cc.tanh(w @ cc.reshape(x, (4, 1))) ** 2) + cc.reduce_sum(cc.exp(x))
    (h,) = cc.hessians(loss, [x])
    (hv,) = cc.hessian_vector_product(loss, [x], [v])
    (hv_np,) = cc.hessian_vector_product(loss, x, rng.normal(size=4))   # numpy v, bare x
    vv = rng.normal(size=4)
    got_h, got_hv = _run_both(graph, [h, hv], {x: xv, v: vv}, rtol=1e-10)
    np.testing.assert_allclose(got_hv, got_h @ vv, rtol=1e-10, atol=1e-12)
    assert hv_np.shape == (4,)
    with pytest.raises(cc.ShapeError):
        cc.hessian_vector_product(loss, [x], [np.ones(3)])
    with pytest.raises(ValueError):
        cc.hessian_vector_product(loss, [x], [])


def test_hessian_vector_product_includes_mixed_terms(graph) -> None:
    rng = np.random.default_rng(5)
    x = cc.placeholder("float64", shape=(3,), name="x")
    w = cc.placeholder("float64", shape=(2, 3), name="w")
    vx = cc.placeholder("float64", shape=(3,), name="vx")
    vw = cc.placeholder("float64", shape=(2, 3), name="vw")
    loss = cc.reduce_sum(cc.sigmoid(w @ cc.reshape(x, (3, 1))))
    gx, gw = cc.gradients(loss, [x, w])
    hv_x, hv_w = cc.hessian_vector_product(loss, [x, w], [vx, vw])
    feed = {x: rng.normal(size=3), w: rng.normal(size=(2, 3)),
            vx: rng.normal(size=3), vw: rng.normal(size=(2, 3))}
    got_x, got_w = _run_both(graph, [hv_x, hv_w], feed, rtol=1e-10)
    eps = 1e-6
    plus = {**feed, x: feed[x] + eps * feed[vx], w: feed[w] + eps * feed[vw]}
    minus = {**feed, x: feed[x] - eps * feed[vx], w: feed[w] - eps * feed[vw]}
    gp, gm = _run(graph, [gx, gw], plus, "reference"), _run(graph, [gx, gw], minus, "reference")
    np.testing.assert_allclose(got_x, (gp[0] - gm[0]) / (2 * eps), rtol=1e-5, atol=1e-8)
    np.testing.assert_allclose(got_w, (gp[1] - gm[1]) / (2 * eps), rtol=1e-5, atol=1e-8)
    unused = cc.placeholder("float64", shape=(3,), name="unused")
    assert cc.hessian_vector_product(loss, [unused], [np.ones(3)]) == [None]
    (zero,) = cc.hessian_vector_product(loss, [unused], [np.ones(3)], unconnected_gradients="zero")
    assert zero.shape == (3,)


def test_hessians_graph_is_made_of_ordinary_ops(graph) -> None:
    x = cc.placeholder("float64", shape=(3,), name="x")
    loss = cc.reduce_sum(cc.tanh(x) * x)
    before = set(graph.get_operations())
    (h,) = cc.hessians(loss, [x])
    new = [op for op in graph.get_operations() if op not in before]
    assert new and all(op.name.startswith("hessians/") for op in new)
    assert {op.opdef.kind for op in new} <= {"elementwise", "reduce", "layout", "shape", "source"}
    assert h.op.name.startswith("hessians/")


# -- the example --------------------------------------------------------------------------------

def test_example_script_runs() -> None:
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(ROOT), env.get("PYTHONPATH", "")]))
    env.pop("GRAPHGRAD_DUMP", None)
    completed = subprocess.run([sys.executable, str(ROOT / "examples" / "custom_gradient.py")],
                               cwd=ROOT, env=env, capture_output=True, text=True, timeout=120)
    assert completed.returncode == 0, completed.stderr
    lines = completed.stdout.strip().splitlines()
    assert lines[-1] == "custom gradients used: OK", completed.stdout


X3 = np.array([0.1, 0.5, -0.3])


@pytest.mark.parametrize("target", ["cpu", "reference"])
@pytest.mark.parametrize("construct", ["while_loop", "scan", "cond"])
def test_a_custom_gradient_called_in_a_loop_body_or_branch_reads_that_call_s_values(target: str,
                                                                                  construct: str) -> None:
    # grad_fn's closure holds the traced tensors of the body; its ops read their copies instead
    # (it failed with a KeyError of the traced parameter).
    graph = cc.Graph()
    with graph.as_default():
        x = cc.placeholder("float64", (3,), name="x")

        @cc.custom_gradient
        def square(v):
            def grad(dy):
                return dy * 2.0 * v
            return v * v, grad
        if construct == "while_loop":
            _, y = cc.while_loop(lambda i, h: i < 2, lambda i, h: (i + 1, square(h)), (0, x))
            expected = 4.0 * X3 ** 3                                  # y = x**4
        elif construct == "scan":
            y = cc.scan(lambda acc, e: square(acc + e), cc.stack([x, x]), initializer=cc.zeros_like(x))[-1]
            expected = 2.0 * (X3 ** 2 + X3) * (2.0 * X3 + 1.0)        # y = (x**2 + x)**2
        else:
            y = cc.cond(cc.reduce_sum(x) < 100.0, lambda: square(x * 3.0), lambda: x)
            expected = 18.0 * X3                                       # y = 9 x**2
        (slope,) = cc.gradients(cc.reduce_sum(y), [x])
    with Session(graph, target=target) as sess:
        np.testing.assert_allclose(sess.run(slope, {x: X3}), expected, rtol=1e-12)

"""What the op table cannot show for the elementwise math and nn ops: gradients exactly at kinks
and at zero (TF's conventions), stability at extreme inputs, special values through a compiled
step, losses' reductions and collections, and build-time errors."""
from __future__ import annotations

import re

import math

import numpy as np
import pytest

import compiler as cc
import optim
from runtime import Session


def _run(fetches, feeds=None, target: str = "cpu"):
    with Session(target=target) as sess:
        return sess.run(fetches, feeds or {})


def _value_and_grads(build, x_value, order: int = 1):
    """f(x), df/dx (and d2f/dx2 when order=2) of sum(build(x)), elementwise, on the cpu."""
    graph = cc.Graph()
    with graph.as_default():
        x = cc.placeholder(x_value.dtype, x_value.shape)
        y = build(x)
        (g,) = cc.gradients(cc.reduce_sum(y), [x])
        fetches = [y, g]
        if order == 2:
            (h,) = cc.gradients(cc.reduce_sum(g), [x])
            fetches.append(h)
    with Session(graph) as sess:
        return sess.run(fetches, {x: x_value})


# -- gradients at kinks and at zero -----------------------------------------------------------

@pytest.mark.parametrize("dtype", ["float32", "float64"])
def test_softplus_at_zero_first_and_second_order(dtype):
    y, g, h = _value_and_grads(cc.nn.softplus, np.zeros(3, dtype), order=2)
    np.testing.assert_allclose(y, math.log(2.0), rtol=1e-6)
    np.testing.assert_array_equal(g, 0.5)
    np.testing.assert_allclose(h, 0.25, rtol=1e-6)


def test_sigmoid_cross_entropy_gradients_at_zero_logits():
    graph = cc.Graph()
    with graph.as_default():
        z = cc.placeholder("float64", (4,))
        x = cc.placeholder("float64", (4,))
        loss = cc.reduce_sum(cc.nn.sigmoid_cross_entropy_with_logits(labels=z, logits=x))
        gz, gx = cc.gradients(loss, [z, x])
    labels = np.array([0.0, 0.25, 0.5, 1.0])
    with Session(graph) as sess:
        value, grad_z, grad_x = sess.run([loss, gz, gx], {z: labels, x: np.zeros(4)})
    np.testing.assert_allclose(value, 4 * math.log(2.0))
    np.testing.assert_array_equal(grad_x, 0.5 - labels)   # sigmoid(0) - z
    np.testing.assert_array_equal(grad_z, 0.0)            # -x, as in TF


def test_elu_and_leaky_relu_at_zero_follow_tf():
    _, g = _value_and_grads(cc.nn.elu, np.zeros(2))
    np.testing.assert_array_equal(g, 1.0)                 # TF: grad * (y + 1) for y <= 0
    _, g = _value_and_grads(lambda x: cc.nn.leaky_relu(x, alpha=0.1), np.zeros(2))
    np.testing.assert_array_equal(g, 0.1)                 # TF: x > 0 ? grad : alpha * grad


def test_clip_by_value_gradient_at_the_bounds_passes_through():
    x = np.array([-2.0, -1.0, 0.0, 1.0, 2.0])
    y, g = _value_and_grads(lambda t: cc.clip_by_value(t, -1.0, 1.0), x)
    np.testing.assert_array_equal(y, [-1.0, -1.0, 0.0, 1.0, 1.0])
    np.testing.assert_array_equal(g, [0.0, 1.0, 1.0, 1.0, 0.0])   # min <= t <= max


def test_clip_by_value_bounds_get_the_rest_of_the_gradient():
    graph = cc.Graph()
    with graph.as_default():
        t = cc.placeholder("float64", (2, 3))
        lo = cc.placeholder("float64", (3,))
        hi = cc.placeholder("float64", ())
        grads = cc.gradients(cc.reduce_sum(cc.clip_by_value(t, lo, hi)), [t, lo, hi])
    feeds = {t: np.array([[-3.0, 0.0, 3.0], [0.5, -0.5, 9.0]]), lo: np.array([-1.0, -1.0, -1.0]),
             hi: np.array(1.0)}
    with Session(graph) as sess:
        gt, glo, ghi = sess.run(grads, feeds)
    np.testing.assert_array_equal(gt, [[0, 1, 0], [1, 1, 0]])
    np.testing.assert_array_equal(glo, [1, 0, 0])
    assert ghi == 2.0
    # The three always add up to the incoming gradient.
    assert gt.sum() + glo.sum() + ghi == t.shape[0] * t.shape[1]


def test_floor_has_no_gradient():
    graph = cc.Graph()
    with graph.as_default():
        x = cc.placeholder("float32", (3,))
        assert cc.gradients(cc.reduce_sum(cc.floor(x)), [x]) == [None]
        (zero,) = cc.gradients(cc.reduce_sum(cc.floor(x)), [x], unconnected_gradients="zero")
    with Session(graph) as sess:
        np.testing.assert_array_equal(sess.run(zero, {x: np.ones(3, "float32")}), 0.0)


# -- stability and special values -------------------------------------------------------------

@pytest.mark.parametrize("dtype", ["float32", "float64"])
def test_activations_are_stable_at_extremes(dtype):
    x = np.array([-1e30, -1000.0, -50.0, 0.0, 50.0, 1000.0, 1e30], dtype)
    graph = cc.Graph()
    with graph.as_default():
        p = cc.placeholder(dtype, x.shape)
        outs = {"softplus": cc.nn.softplus(p), "elu": cc.nn.elu(p), "gelu": cc.nn.gelu(p),
                "gelu_approx": cc.nn.gelu(p, approximate=True),
                "sce": cc.nn.sigmoid_cross_entropy_with_logits(labels=cc.ones_like(p), logits=p)}
        grads = {k: cc.gradients(cc.reduce_sum(v), [p])[0] for k, v in outs.items()}
    with Session(graph) as sess:
        values, derivs = sess.run([outs, grads], {p: x})
    for name, value in {**values, **{f"d{k}": v for k, v in derivs.items()}}.items():
        assert np.all(np.isfinite(value)), (name, value)
    big = x > 0
    np.testing.assert_array_equal(values["softplus"][big], x[big])
    assert values["softplus"][0] == 0.0 and values["elu"][0] == -1.0
    np.testing.assert_array_equal(values["gelu"][:3], 0.0)    # x * Phi(x) underflows, no NaN
    np.testing.assert_array_equal(values["gelu"][4:], x[4:])
    with np.errstate(over="ignore"):
        expected = np.log1p(np.exp(-x[big].astype(np.float64)))   # labels 1: softplus(-x)
    np.testing.assert_allclose(values["sce"][big], expected, rtol=1e-6)
    np.testing.assert_array_equal(values["sce"][:2], -x[:2])


@pytest.mark.parametrize("dtype", ["float32", "float64"])
def test_trig_and_erf_special_values(dtype):
    x = np.array([0.0, -0.0, np.inf, -np.inf, np.nan, 1e4, -3e4, 7.5], dtype)
    graph = cc.Graph()
    with graph.as_default():
        p = cc.placeholder(dtype, x.shape)
        fetches = [cc.sin(p), cc.cos(p), cc.erf(p)]
    with Session(graph) as sess:
        s, c, e = sess.run(fetches, {p: x})
    assert s[0] == 0 and not np.signbit(s[0]) and s[1] == 0 and np.signbit(s[1])
    assert np.all(np.isnan(s[2:5])) and np.all(np.isnan(c[2:5]))
    np.testing.assert_array_equal(c[:2], 1.0)
    with np.errstate(invalid="ignore"):
        np.testing.assert_allclose(s[5:], np.sin(x[5:].astype(np.float64)), rtol=1e-6, atol=1e-7)
        np.testing.assert_allclose(c[5:], np.cos(x[5:].astype(np.float64)), rtol=1e-6, atol=1e-7)
    np.testing.assert_array_equal(e[[0, 1, 2, 3, 5, 6, 7]], [0.0, -0.0, 1.0, -1.0, 1.0, -1.0, 1.0])
    assert np.signbit(e[1]) and np.isnan(e[4])


def test_gelu_matches_its_definition():
    x = np.linspace(-6, 6, 97)
    exact = np.array([0.5 * v * (1 + math.erf(v / math.sqrt(2))) for v in x])
    approx = 0.5 * x * (1 + np.tanh(math.sqrt(2 / math.pi) * (x + 0.044715 * x ** 3)))
    graph = cc.Graph()
    with graph.as_default():
        p = cc.placeholder("float64", x.shape)
        fetches = [cc.nn.gelu(p), cc.nn.gelu(p, approximate=True)]
    with Session(graph) as sess:
        got_exact, got_approx = sess.run(fetches, {p: x})
    np.testing.assert_allclose(got_exact, exact, rtol=1e-14, atol=1e-15)
    np.testing.assert_allclose(got_approx, approx, rtol=1e-14, atol=1e-15)


def test_sigmoid_cross_entropy_matches_the_naive_formula():
    rng = np.random.default_rng(0)
    z, x = rng.uniform(0, 1, (4, 5)), rng.normal(size=(4, 5)) * 3
    naive = -z * np.log(1 / (1 + np.exp(-x))) - (1 - z) * np.log(1 - 1 / (1 + np.exp(-x)))
    got = _run(cc.nn.sigmoid_cross_entropy_with_logits(labels=z, logits=cc.constant(x)))
    np.testing.assert_allclose(got, naive, rtol=1e-12)


# -- losses -----------------------------------------------------------------------------------

def _mse_graph(reduction, weights):
    graph = cc.Graph()
    with graph.as_default():
        y = cc.placeholder("float64", (None, 3))
        p = cc.placeholder("float64", (None, 3))
        loss = cc.losses.mean_squared_error(y, p, weights=weights, reduction=reduction)
    return graph, y, p, loss


@pytest.mark.parametrize("reduction", [None, "none", "weighted_sum", "weighted_mean",
                                       "weighted_sum_over_batch_size", "weighted_sum_by_nonzero_weights"])
@pytest.mark.parametrize("weights", [1.0, 2.5, np.array([[0.0], [1.0], [3.0], [0.0]]), np.array([[0.0, 2.0, 1.0]])])
def test_mean_squared_error_reductions(reduction, weights):
    rng = np.random.default_rng(1)
    yv, pv = rng.normal(size=(4, 3)), rng.normal(size=(4, 3))
    kwargs = {} if reduction is None else {"reduction": reduction}
    graph = cc.Graph()
    with graph.as_default():
        y = cc.placeholder("float64", (4, 3))
        p = cc.placeholder("float64", (4, 3))
        loss = cc.losses.mean_squared_error(y, p, weights=weights, **kwargs)
        assert cc.losses.get_losses() == [loss]
    with Session(graph) as sess, Session(graph, target="reference") as ref:
        got, oracle = sess.run(loss, {y: yv, p: pv}), ref.run(loss, {y: yv, p: pv})
    w = np.broadcast_to(weights, (4, 3))
    weighted = (pv - yv) ** 2 * w
    expected = {None: weighted.sum() / np.count_nonzero(w), "none": weighted, "weighted_sum": weighted.sum(),
                "weighted_mean": weighted.sum() / w.sum(), "weighted_sum_over_batch_size": weighted.mean(),
                "weighted_sum_by_nonzero_weights": weighted.sum() / np.count_nonzero(w)}[reduction]
    np.testing.assert_allclose(got, expected, rtol=1e-12)
    np.testing.assert_allclose(got, oracle, rtol=1e-12)


def test_mean_squared_error_default_is_the_mean_and_empty_is_zero():
    graph, y, p, loss = _mse_graph(cc.losses.Reduction.SUM_BY_NONZERO_WEIGHTS, 1.0)
    rng = np.random.default_rng(2)
    yv, pv = rng.normal(size=(5, 3)), rng.normal(size=(5, 3))
    with Session(graph) as sess:
        np.testing.assert_allclose(sess.run(loss, {y: yv, p: pv}), np.mean((yv - pv) ** 2), rtol=1e-13)
        assert sess.run(loss, {y: np.zeros((0, 3)), p: np.zeros((0, 3))}) == 0.0
    graph, y, p, loss = _mse_graph(cc.losses.Reduction.SUM_BY_NONZERO_WEIGHTS, 0.0)
    with Session(graph) as sess:
        assert sess.run(loss, {y: yv, p: pv}) == 0.0   # all weights zero: 0, not NaN


def test_mean_squared_error_checks_and_casts():
    graph = cc.Graph()
    with graph.as_default():
        with pytest.raises(cc.ShapeError, match="same shape"):
            cc.losses.mean_squared_error(cc.placeholder("float32", (3, 2)), cc.placeholder("float32", (2, 3)))
        with pytest.raises(cc.ShapeError, match=r"weights \(3, 4\) must be a scalar or have the values' rank"):
            cc.losses.mean_squared_error(cc.placeholder("float32", (3, 1)), cc.placeholder("float32", (3, 1)),
                                         weights=np.ones((3, 4)))
        with pytest.raises(ValueError, match="reduction"):
            cc.losses.mean_squared_error(cc.placeholder("float32", (3,)), cc.placeholder("float32", (3,)),
                                         reduction="mean")
        loss = cc.losses.mean_squared_error(np.array([1, 2, 3]), cc.constant(np.array([1, 2, 5], "int32")),
                                            loss_collection=None)
        assert loss.dtype == np.float32 and cc.losses.get_losses() == []
    with Session(graph) as sess:
        np.testing.assert_allclose(sess.run(loss), 4.0 / 3.0, rtol=1e-6)


# -- build-time errors --------------------------------------------------------------------------

def test_build_time_errors_name_the_op(graph):
    i = cc.placeholder("int32", (3,))
    f = cc.placeholder("float32", (3,))
    for op in (cc.sin, cc.cos, cc.erf, cc.log1p, cc.expm1, cc.floor):
        with pytest.raises(cc.DTypeError):
            op(i)
    for op in (cc.nn.softplus, cc.nn.elu, cc.nn.gelu):
        with pytest.raises(cc.DTypeError, match="test_nn_ops.py"):
            op(i)
    with pytest.raises(cc.ShapeError, match="ClipByValue.*enlarge"):
        cc.clip_by_value(f, cc.placeholder("float32", (2, 3)), 1.0)
    with pytest.raises(cc.ShapeError, match="same shape"):
        cc.nn.sigmoid_cross_entropy_with_logits(labels=cc.placeholder("float32", (3, 1)), logits=f)
    assert cc.nn.leaky_relu(i).dtype == np.float32          # TF casts integer features
    assert cc.clip_by_value(i, 0, 2).dtype == np.int32      # and clips integers as they are


def test_clip_by_value_integers():
    x = np.array([-5, 0, 3, 9], "int32")
    got = _run(cc.clip_by_value(cc.constant(x), 0, 4))
    np.testing.assert_array_equal(got, [0, 0, 3, 4])
    assert got.dtype == np.int32


@pytest.mark.parametrize("pool", [dict(ksize=2, strides=2), dict(ksize=(2, 3), strides=(3, 3), padding="SAME"),
                                  dict(ksize=3, strides=3, padding="SAME")], ids=["2x2", "gaps-same", "3x3-same"])
@pytest.mark.parametrize("target", ["cpu", "reference", "cuda-emulated"])
def test_max_pool_gradient_without_overlap_matches_the_argmax_form_on_ties_and_nan(pool, target) -> None:
    # Windows that do not overlap take their gradient from the pooled max (MaxPoolGradFromPeak);
    # it must choose the very tap MaxPoolArgmax does: the first max, row-major, or the first NaN.
    from compiler.ops.conv import MaxPoolArgmax, MaxPoolGrad
    rng = np.random.default_rng(3)
    x_value = rng.integers(0, 2, size=(2, 7, 8, 3)).astype("float32")  # half the taps tie
    x_value[0, 1, 1, 0] = x_value[1, 4, 5, 2] = np.nan
    x_value[1, :2, :3, 1] = -np.inf
    graph = cc.Graph()
    with graph.as_default():
        x = cc.placeholder("float32", x_value.shape)
        pooled = cc.nn.max_pool(x, padding=pool.get("padding", "VALID"), ksize=pool["ksize"], strides=pool["strides"])
        up = cc.placeholder("float32", pooled.shape)
        (by_peak,) = cc.gradients(cc.reduce_sum(pooled * up), [x])
        attrs = dict(ksize=cc.nn.max_pool(x, **pool).op.attrs["ksize"], strides=pooled.op.attrs["strides"],
                     padding=pooled.op.attrs["padding"])
        by_argmax = MaxPoolGrad(up, MaxPoolArgmax(x, pooled, **attrs), x, **attrs)
    assert by_peak.op.type == "MaxPoolGradFromPeak"
    feeds = {x: x_value, up: rng.normal(size=pooled.shape).astype("float32")}
    with Session(graph, target=target) as sess:
        got, want = sess.run([by_peak, by_argmax], feeds)
    np.testing.assert_array_equal(got, want)
    assert np.count_nonzero(got) == np.count_nonzero(feeds[up])  # each window's gradient went to one tap


@pytest.mark.parametrize("optimizer", ["sgd", "adam"])
@pytest.mark.parametrize("target", ["reference", "cpu", "cuda-emulated"])
def test_a_label_out_of_range_stops_the_step_before_any_assignment(target: str, optimizer: str) -> None:
    """As TF1 on a CPU: a label outside [0, classes) is an InvalidArgumentError naming the labels,
    the logits and the user's line; a training step assigns nothing (Adam's slots, which the
    kernels computing them write in place, included); labels in range run on."""
    graph = cc.Graph()
    with graph.as_default():
        logits = cc.placeholder("float64", (None, 3), name="logits")
        labels = cc.placeholder("int32", (None,), name="labels")
        weights = cc.Variable(np.eye(3), name="weights")
        loss = cc.reduce_sum(cc.nn.sparse_softmax_cross_entropy_with_logits(labels=labels, logits=logits @ weights))
        chosen = optim.GradientDescentOptimizer(0.5) if optimizer == "sgd" else optim.AdamOptimizer(0.5)
        train = chosen.minimize(loss)
        state = cc.global_variables()
    values = np.array([[1.0, 2.0, 0.5], [0.0, 0.0, 0.0], [3.0, 1.0, 2.0]])
    with Session(graph, target=target) as sess:
        before = sess.run(state)
        for bad in ([0, 3, 1], [0, 1, -1]):
            with pytest.raises(cc.InvalidArgumentError,
                               match=r"labels 'labels:0' hold a value outside \[0, 3\), the classes of logits "
                                     rf"'MatMul:0' \(\?, 3\) .*at {re.escape(__file__)}:\d+"):
                sess.run(train, {logits: values, labels: np.array(bad, "int32")})
            for old, new in zip(before, sess.run(state)):
                np.testing.assert_array_equal(new, old)
        got = sess.run(loss, {logits: values, labels: np.array([0, 2, 1], "int32")})
    shifted = values - values.max(axis=1, keepdims=True)
    expected = np.log(np.exp(shifted).sum(axis=1)) - shifted[np.arange(3), [0, 2, 1]]
    np.testing.assert_allclose(got, expected.sum(), rtol=1e-12)


def test_the_labels_check_is_one_a_target_without_checks_may_skip() -> None:
    """target='cuda' runs no checks yet and refuses a step with a user's assertion; the labels
    check of the sparse cross-entropy it skips (the example's loss is NaN there instead)."""
    from compiler.ops.numerics import required_checks
    from compiler.pipeline import compile_step
    graph = cc.Graph()
    with graph.as_default():
        logits = cc.placeholder("float32", (None, 3), name="logits")
        labels = cc.placeholder("int32", (None,), name="labels")
        loss = cc.reduce_mean(cc.nn.sparse_softmax_cross_entropy_with_logits(labels=labels, logits=logits))
        users = cc.Assert(loss < 10.0, ["the loss is too large"])
    shapes = {logits: (4, 3), labels: (4,)}
    kernels = compile_step([loss], shapes, cpu_code=False, dump=False).program.kernels
    assert [k for k in kernels if k.check] and required_checks(kernels, graph) == []
    kernels = compile_step([loss, users], shapes, cpu_code=False, dump=False).program.kernels
    assert [k.check for k in required_checks(kernels, graph)] == [k.check for k in kernels if "too large" in (k.check or "")]
    assert len(required_checks(kernels, graph)) == 1


@pytest.mark.parametrize("build, error, pattern", [
    (lambda: cc.nn.softmax(cc.constant(np.ones((2, 3), "int32"))), cc.DTypeError, "softmax: needs float32 or float64"),
    (lambda: cc.nn.sparse_softmax_cross_entropy_with_logits(labels=cc.constant(np.zeros(3, "int32")),
                                                            logits=cc.constant(np.ones((2, 3), "float32"))),
     cc.ShapeError, r"labels .* \(3,\) must have the shape of logits .* \(2, 3\) without its class axis"),
    # One-hot labels of another shape would broadcast into a wrong loss.
    (lambda: cc.nn.softmax_cross_entropy_with_logits_v2(labels=cc.placeholder("float32", (None, 1)),
                                                        logits=cc.placeholder("float32", (None, 10))),
     cc.ShapeError, r"logits \(\?, 10\) and labels \(\?, 1\) must have the same shape"),
    (lambda: cc.nn.softmax_cross_entropy_with_logits(labels=cc.placeholder("float32", (None,)),
                                                     logits=cc.placeholder("float32", (None, 10))),
     cc.ShapeError, r"logits \(\?, 10\) and labels \(\?,\) must have the same shape"),
])
def test_softmax_argument_errors_say_what_is_wrong(build, error, pattern: str) -> None:
    with pytest.raises(error, match=pattern):
        build()


TARGETS = ["cpu", "reference", "cuda-emulated"]


@pytest.mark.parametrize("target", TARGETS)
def test_softmax_and_cross_entropy_are_exact_for_large_logits(target: str) -> None:
    # Subtracting logsumexp = log(sum) + max would round log(sum) away next to a max of 1e7.
    logits = np.array([[1e7, 1e7], [-1e7, -1e7], [3e4, 3e4 + 1]], "float32")
    graph = cc.Graph()
    with graph.as_default():
        x = cc.constant(logits)
        labels = cc.constant(np.array([0, 1, 1], "int32"))
        fetches = [cc.nn.softmax(x), cc.nn.log_softmax(x),
                   cc.nn.sparse_softmax_cross_entropy_with_logits(labels=labels, logits=x)]
    with Session(graph, target=target) as sess:
        probabilities, log_probabilities, loss = sess.run(fetches)
    shifted = logits.astype("float64") - logits.max(axis=1, keepdims=True)
    expected = shifted - np.log(np.exp(shifted).sum(axis=1, keepdims=True))
    np.testing.assert_allclose(log_probabilities, expected, rtol=1e-6)
    np.testing.assert_allclose(probabilities, np.exp(expected), rtol=1e-6)
    np.testing.assert_allclose(loss, -expected[[0, 1, 2], [0, 1, 1]], rtol=1e-6)


@pytest.mark.parametrize("target", TARGETS)
def test_sparse_cross_entropy_with_a_masked_class_stays_finite(target: str) -> None:
    logits = np.array([[2.0, -np.inf, 0.5], [-np.inf, 1.0, 3.0]], "float32")
    graph = cc.Graph()
    with graph.as_default():
        x = cc.placeholder("float32", (2, 3))
        loss = cc.nn.sparse_softmax_cross_entropy_with_logits(labels=cc.constant([0, 2]), logits=x)
        (gradient,) = cc.gradients(cc.reduce_sum(loss), [x])
    with Session(graph, target=target) as sess:
        value, slope = sess.run([loss, gradient], {x: logits})
    finite = np.where(np.isinf(logits), -1e30, logits).astype("float64")
    log_probabilities = finite - finite.max(1, keepdims=True)
    log_probabilities -= np.log(np.exp(log_probabilities).sum(1, keepdims=True))
    np.testing.assert_allclose(value, -log_probabilities[[0, 1], [0, 2]], rtol=1e-6)
    np.testing.assert_allclose(slope, np.exp(log_probabilities) - np.eye(3)[[0, 2]], atol=1e-6)


def test_in_top_k_is_false_for_a_target_out_of_range_and_takes_a_tensor_k() -> None:
    predictions = cc.constant(np.array([[-1, -2, -3, -4], [0, 0, 0, 0], [-5, -1, -2, -3]], "float32"))
    out_of_range = cc.nn.in_top_k(predictions, cc.constant([4, -1, 7]), 1)
    with_tensor_k = cc.nn.in_top_k(predictions, cc.constant([1, 3, 2]), cc.constant(2))
    got, got_k = _run([out_of_range, with_tensor_k])
    np.testing.assert_array_equal(got, [False, False, False])
    np.testing.assert_array_equal(got_k, [True, True, True])


def test_conv2d_refuses_a_filter_without_height_or_width() -> None:
    with pytest.raises(cc.ShapeError, match="height and width must be at least 1"):
        cc.nn.conv2d(cc.constant(np.ones((1, 4, 4, 1), "float32")), cc.constant(np.ones((0, 2, 1, 1), "float32")))


@pytest.mark.parametrize("dtype, x", [("float32", -20.0), ("float32", -10.0), ("float64", -40.0)])
def test_expm1_and_elu_gradients_are_exp_where_it_is_tiny(dtype: str, x: float) -> None:
    # expm1(x) + 1 rounds exp(x) away: 0 at -20 in float32.
    for build in (cc.expm1, cc.nn.elu):
        _, gradient = _value_and_grads(build, np.array([x], dtype))
        np.testing.assert_allclose(gradient, np.exp([x]), rtol=2e-6 if dtype == "float32" else 1e-14)


def test_elu_passes_the_gradient_through_a_nan() -> None:
    value, gradient = _value_and_grads(cc.nn.elu, np.array([np.nan, 1.0, -1.0], "float32"))
    assert np.isnan(value[0]) and gradient[0] == 1.0       # as TF1's EluGrad (and torch)
    np.testing.assert_allclose(gradient[1:], [1.0, np.exp(-1.0)], rtol=1e-6)


def test_losses_sparse_cross_entropy_takes_a_column_of_labels_as_tf1() -> None:
    logits = np.random.default_rng(4).normal(size=(4, 3)).astype("float32")
    labels = np.array([[0], [2], [1], [2]], "int32")
    column = cc.losses.sparse_softmax_cross_entropy(cc.constant(labels), cc.constant(logits),
                                                    weights=cc.constant(np.full((4, 1), 2.0, "float32")))
    flat = cc.losses.sparse_softmax_cross_entropy(cc.constant(labels[:, 0]), cc.constant(logits), weights=2.0)
    got_column, got_flat = _run([column, flat])
    np.testing.assert_allclose(got_column, got_flat, rtol=1e-6)


def test_more_activations_equal_their_formulas() -> None:
    x = np.array([-30.0, -3.0, -0.5, 0.0, 0.5, 5.9, 6.5, 40.0])
    alpha, scale = 1.6732632423543772, 1.0507009873554805
    sigmoid = 1.0 / (1.0 + np.exp(-x))
    got = _run([f(cc.constant(x)) for f in (cc.nn.relu6, cc.nn.selu, cc.nn.swish, cc.nn.silu, cc.nn.softsign,
                                            cc.nn.log_sigmoid)])
    expected = [np.clip(x, 0.0, 6.0), scale * np.where(x > 0, x, alpha * np.expm1(x)), x * sigmoid, x * sigmoid,
                x / (1.0 + np.abs(x)), -np.logaddexp(0.0, -x)]
    for value, want in zip(got, expected):
        np.testing.assert_allclose(value, want, rtol=1e-14, atol=1e-300)


def test_cross_entropy_variants_equal_their_formulas() -> None:
    rng = np.random.default_rng(5)
    logits, labels = rng.normal(size=(3, 4)) * 4.0, rng.random((3, 4))
    z = (labels > 0.5).astype("float64")
    distribution = labels / labels.sum(1, keepdims=True)
    logits_t = cc.placeholder("float64", (3, 4))
    labels_t = cc.placeholder("float64", (3, 4))
    v2 = cc.nn.softmax_cross_entropy_with_logits_v2(labels=labels_t, logits=logits_t)
    (to_labels,) = cc.gradients(cc.reduce_sum(v2), [labels_t])
    weighted = cc.nn.weighted_cross_entropy_with_logits(labels=z, logits=logits_t, pos_weight=3.0)
    with Session(logits_t.graph) as sess:
        got_v2, got_to_labels, got_weighted = sess.run([v2, to_labels, weighted],
                                                       {logits_t: logits, labels_t: distribution})
    log_softmax = logits - np.log(np.exp(logits).sum(1, keepdims=True))
    np.testing.assert_allclose(got_v2, -(distribution * log_softmax).sum(1), rtol=1e-12)
    np.testing.assert_allclose(got_to_labels, -log_softmax, rtol=1e-12)     # v2: the labels get a gradient
    sig = 1.0 / (1.0 + np.exp(-logits))
    np.testing.assert_allclose(got_weighted, -3.0 * z * np.log(sig) - (1 - z) * np.log(1 - sig), rtol=1e-12)


def test_embedding_lookup_partitions_and_max_norm_as_tf1() -> None:
    rng = np.random.default_rng(6)
    table, ids = rng.normal(size=(7, 3)), np.array([[0, 6, 3], [5, 1, 2]])
    by_mod = [table[k::3] for k in range(3)]            # id i: row i // 3 of shard i % 3
    by_div = [table[0:3], table[3:5], table[5:7]]       # the first 7 % 3 shards one row longer
    with Session(cc.Graph()) as sess, sess.graph.as_default():
        got = sess.run([cc.nn.embedding_lookup([cc.constant(t) for t in by_mod], ids),
                        cc.nn.embedding_lookup([cc.constant(t) for t in by_div], ids, partition_strategy="div"),
                        cc.nn.embedding_lookup(cc.constant(table), ids, max_norm=0.5)])
    np.testing.assert_array_equal(got[0], table[ids])
    np.testing.assert_array_equal(got[1], table[ids])
    norms = np.linalg.norm(table[ids], axis=-1, keepdims=True)
    np.testing.assert_allclose(got[2], table[ids] * np.where(norms > 0.5, 0.5 / norms, 1.0), rtol=1e-14)
    with cc.Graph().as_default(), pytest.raises(cc.ShapeError, match="not a partition of 7 ids over 3 shards"):
        cc.nn.embedding_lookup([cc.constant(table[:2]), cc.constant(table[2:4]), cc.constant(table[4:])], ids)


def _transposed_conv_reference(value: np.ndarray, filters: np.ndarray, out_shape: tuple, stride: int,
                               pad_top: int, pad_left: int) -> np.ndarray:
    """Each input pixel scatters filter x value into the output window it came from."""
    batch, height, width, _ = value.shape
    kh, kw, out_channels, _ = filters.shape
    full = np.zeros((batch, out_shape[1] + kh + stride * height, out_shape[2] + kw + stride * width, out_channels))
    for i in range(height):
        for j in range(width):
            full[:, i * stride:i * stride + kh, j * stride:j * stride + kw, :] += np.einsum(
                "nc,hwoc->nhwo", value[:, i, j, :], filters)
    return full[:, pad_top:pad_top + out_shape[1], pad_left:pad_left + out_shape[2], :]


@pytest.mark.parametrize("padding, out_size, pads", [("SAME", 8, (0, 0)), ("SAME", 7, (1, 1)), ("VALID", 9, (0, 0))])
def test_conv2d_transpose_scatters_as_the_gradient_of_conv2d(padding: str, out_size: int, pads: tuple) -> None:
    rng = np.random.default_rng(7)
    value, filters = rng.normal(size=(2, 4, 4, 3)), rng.normal(size=(3, 3, 2, 3))
    shape = (2, out_size, out_size, 2)
    got = _run(cc.nn.conv2d_transpose(cc.constant(value), cc.constant(filters), list(shape), strides=2,
                                      padding=padding))
    np.testing.assert_allclose(got, _transposed_conv_reference(value, filters, shape, 2, *pads), rtol=1e-12)


def test_conv1d_and_conv2d_transpose_check_their_shapes() -> None:
    value = cc.constant(np.ones((1, 4, 4, 3)))
    with pytest.raises(cc.ShapeError, match="does not fit value"):
        cc.nn.conv2d_transpose(value, cc.constant(np.ones((3, 3, 2, 3))), [1, 12, 8, 2], strides=2)
    with pytest.raises(cc.ShapeError, match="output_shape has 5 channels"):
        cc.nn.conv2d_transpose(value, cc.constant(np.ones((3, 3, 2, 3))), [1, 8, 8, 5], strides=2)
    with pytest.raises(TypeError, match="a shape given as a tensor must be known when the graph is built"):
        cc.nn.conv2d_transpose(value, cc.constant(np.ones((3, 3, 2, 3))), cc.placeholder("int32", (4,)), strides=2)
    with pytest.raises(TypeError, match="output_shape must be 4 Python ints"):
        cc.nn.conv2d_transpose(value, cc.constant(np.ones((3, 3, 2, 3))), [1, 8, 8], strides=2)
    with pytest.raises(cc.ShapeError, match=r"conv1d: the input must be \[batch, width, channels\]"):
        cc.nn.conv1d(value, cc.constant(np.ones((3, 3, 2))))


def test_conv2d_transpose_takes_the_batch_of_its_output_shape() -> None:
    """With a value of unknown batch, output_shape's batch was dropped: the result took the fed
    batch, and a fed batch of 1 broadcast to the named one read rows past the value's end."""
    value = cc.placeholder("float32", (None, 4, 4, 3), name="value")
    result = cc.nn.conv2d_transpose(value, cc.constant(np.ones((3, 3, 5, 3), "float32")), [4, 8, 8, 5], strides=2)
    assert result.shape == (4, 8, 8, 5)
    # TF1's idioms for the fed batch: shape(value)[0] in a list, or the list stacked into a tensor
    for output_shape in ([cc.shape(value)[0], 8, 8, 5], cc.stack([cc.shape(value)[0], 8, 8, 5])):
        fed = cc.nn.conv2d_transpose(value, cc.constant(np.ones((3, 3, 5, 3), "float32")), output_shape, strides=2)
        assert fed.shape == (None, 8, 8, 5)
        with Session() as sess:
            assert sess.run(fed, {value: np.ones((2, 4, 4, 3), "float32")}).shape == (2, 8, 8, 5)
    with pytest.raises(TypeError, match=r"output_shape may read only value's batch"):
        cc.nn.conv2d_transpose(value, cc.constant(np.ones((3, 3, 5, 3), "float32")),
                               [cc.shape(value)[0], cc.shape(value)[0], 8, 5], strides=2)
    with Session() as sess:
        assert sess.run(result, {value: np.ones((4, 4, 4, 3), "float32")}).shape == (4, 8, 8, 5)
        for batch in (2, 1):
            with pytest.raises(cc.ShapeError, match=f"the gradient \\({batch}, 4, 4, 3\\) does not fit a "
                                                    r"convolution of \(4, 8, 8, 5\): its batch is"):
                sess.run(result, {value: np.ones((batch, 4, 4, 3), "float32")})


def test_in_top_k_is_false_for_a_row_with_any_non_finite_prediction() -> None:
    predictions = cc.constant(np.array([[.9, np.nan, .1], [.9, np.inf, .1], [.9, -np.inf, .1], [.9, .5, .1]], "float32"))
    got = _run([cc.nn.in_top_k(predictions, cc.constant([0, 0, 0, 0]), k) for k in (1, 2)])
    for value in got:
        np.testing.assert_array_equal(value, [False, False, False, True])   # TF1's kernel


@pytest.mark.parametrize("function", ["softmax_cross_entropy_with_logits", "softmax_cross_entropy_with_logits_v2",
                                      "sparse_softmax_cross_entropy_with_logits", "sigmoid_cross_entropy_with_logits"])
def test_cross_entropies_take_labels_and_logits_by_name_only(function: str) -> None:
    """As TF1 (its ``_sentinel``): called in the older (logits, labels) order, they used to
    compute a wrong loss without any error."""
    with cc.Graph().as_default():
        logits = cc.constant([[2.0, 0.5, -1.0]])
        labels = cc.constant([0]) if function.startswith("sparse") else cc.constant([[1.0, 0.0, 0.0]])
        with pytest.raises(ValueError, match="give labels and logits by name") as raised:
            getattr(cc.nn, function)(logits, labels)
        getattr(cc.nn, function)(labels=labels, logits=logits)
    assert f"(at {__file__}:" in str(raised.value)


def test_hinge_and_cosine_losses_follow_tf1s_formulas() -> None:
    rng = np.random.default_rng(3)
    labels01, logits = (rng.random((5, 3)) > 0.5).astype(np.float64), rng.normal(size=(5, 3))
    a, b = rng.normal(size=(5, 4)), rng.normal(size=(5, 4))
    a, b = a / np.linalg.norm(a, axis=1, keepdims=True), b / np.linalg.norm(b, axis=1, keepdims=True)
    weights = np.array([1.0, 0.0, 2.0, 1.0, 0.5])
    with Session(cc.Graph()) as sess, sess.graph.as_default():
        hinge = cc.losses.hinge_loss(labels01, cc.constant(logits))
        cosine = cc.losses.cosine_distance(cc.constant(a), cc.constant(b), axis=1,
                                           weights=weights.reshape(5, 1), reduction=cc.losses.Reduction.MEAN)
        cc.losses.add_loss(cc.constant(2.5, "float64"))
        total = cc.losses.get_total_loss()
        got = sess.run([hinge, cosine, total])
    expected_hinge = np.maximum(0.0, 1.0 - (2.0 * labels01 - 1.0) * logits).mean()
    distances = 1.0 - (a * b).sum(axis=1)
    expected_cosine = (distances * weights).sum() / weights.sum()
    np.testing.assert_allclose(got[:2], [expected_hinge, expected_cosine], rtol=1e-12)
    np.testing.assert_allclose(got[2], expected_hinge + expected_cosine + 2.5, rtol=1e-12)


def test_sparse_softmax_loss_takes_a_column_of_weights_given_as_an_array() -> None:
    logits = np.array([[1.0, 2.0, 0.0], [0.0, 1.0, 3.0], [2.0, 0.0, 1.0], [1.0, 1.0, 1.0]], "float32")
    labels = np.array([[0], [2], [1], [1]], "int32")
    weights = np.array([[1.0], [0.0], [2.0], [1.0]], "float32")
    with Session(cc.Graph()) as sess, sess.graph.as_default():
        from_array = cc.losses.sparse_softmax_cross_entropy(labels, logits, weights=weights)
        from_tensor = cc.losses.sparse_softmax_cross_entropy(labels, logits, weights=cc.constant(weights))
        got = sess.run([from_array, from_tensor])
    np.testing.assert_allclose(got[0], got[1], rtol=1e-7)


def test_relu6_and_softsign_gradients_at_their_edges_are_tf1s() -> None:
    """relu6'(6) is 0 (TF1's Relu6Grad: 0 < x < 6); softsign' is g / (1 + |x|)**2, which the
    composite's own derivative missed by 2% at 1e6 in float32 and made NaN at infinity."""
    graph = cc.Graph()
    with graph.as_default():
        x = cc.placeholder("float32", (None,), name="x")
        (relu6_grad,) = cc.gradients(cc.reduce_sum(cc.nn.relu6(x)), [x])
        (softsign_grad,) = cc.gradients(cc.reduce_sum(cc.nn.softsign(x)), [x])
    for target in ("cpu", "reference"):
        with Session(graph, target=target) as sess:
            np.testing.assert_array_equal(sess.run(relu6_grad, {x: np.array([0.0, 3.0, 6.0, 7.0], "float32")}),
                                          [0.0, 1.0, 0.0, 0.0])
            edges = np.array([1e4, 1e6, -1e6, np.inf], "float32")
            np.testing.assert_allclose(sess.run(softsign_grad, {x: edges}),
                                       (1.0 / np.square(1.0 + np.abs(edges.astype(np.float64)))).astype("float32"),
                                       rtol=1e-6)


def _numpy_sampled_logits(w, b, labels, x, sampled, true_expected, sampled_expected, remove_hits):
    true_logits = np.einsum("bd,btd->bt", x, w[labels]) + b[labels] - np.log(true_expected)
    sampled_logits = x @ w[sampled].T + b[sampled] - np.log(sampled_expected)
    if remove_hits:   # each hit once, finite (a label repeated in its row made -inf, then NaN)
        hits = (labels[:, :, None] == sampled[None, None, :]).any(axis=1)
        sampled_logits = sampled_logits + hits * np.finfo(x.dtype).min
    targets = np.concatenate([np.full(true_logits.shape, 1.0 / labels.shape[1]), np.zeros(sampled_logits.shape)], 1)
    return np.concatenate([true_logits, sampled_logits], 1), targets


@pytest.mark.parametrize("remove_hits", [False, True], ids=["keep-hits", "remove-hits"])
def test_nce_and_sampled_softmax_losses_follow_tf1s_formulas(remove_hits: bool) -> None:
    rng = np.random.default_rng(11)
    w, b, x = rng.normal(size=(7, 3)), rng.normal(size=7), rng.normal(size=(4, 3))
    labels = np.array([[1, 2], [0, 6], [3, 3], [5, 1]])              # row 2 repeats its label
    sampled = np.array([2, 4, 3])                                      # 2 and 3 hit rows 0 and 2
    true_expected, sampled_expected = rng.uniform(0.1, 1.0, (4, 2)), rng.uniform(0.1, 1.0, 3)
    values = (cc.constant(sampled), cc.constant(true_expected), cc.constant(sampled_expected))
    nce = cc.nn.nce_loss(cc.constant(w), cc.constant(b), labels, cc.constant(x), 3, 7, num_true=2,
                         sampled_values=values, remove_accidental_hits=remove_hits)
    softmax = cc.nn.sampled_softmax_loss(cc.constant(w), cc.constant(b), labels, cc.constant(x), 3, 7, num_true=2,
                                         sampled_values=values, remove_accidental_hits=remove_hits)
    logits, targets = _numpy_sampled_logits(w, b, labels, x, sampled, true_expected, sampled_expected, remove_hits)
    expected_nce = (np.maximum(logits, 0) - logits * targets + np.log1p(np.exp(-np.abs(logits)))).sum(axis=1)
    shifted = logits - logits.max(axis=1, keepdims=True)
    expected_softmax = -(targets * (shifted - np.log(np.exp(shifted).sum(axis=1, keepdims=True)))).sum(axis=1)
    got_nce, got_softmax = _run([nce, softmax])
    np.testing.assert_allclose(got_nce, expected_nce, rtol=1e-10)
    np.testing.assert_allclose(got_softmax, expected_softmax, rtol=1e-10)


def test_the_log_uniform_sampler_draws_zipf_classes_with_their_expected_counts() -> None:
    graph = cc.Graph()
    with graph.as_default():
        cc.set_random_seed(3)
        sampled, true_expected, sampled_expected = cc.nn.log_uniform_candidate_sampler(
            cc.constant(np.array([[0], [9]])), 1, 20000, True, 10)
    with Session(graph) as sess:
        drawn, expected_true, expected_sampled = sess.run([sampled, true_expected, sampled_expected])
    probability = np.log((np.arange(10) + 2.0) / (np.arange(10) + 1.0)) / np.log(11.0)
    np.testing.assert_allclose(np.bincount(drawn, minlength=10) / 20000, probability, atol=0.01)
    np.testing.assert_allclose(expected_true[:, 0], 20000 * probability[[0, 9]], rtol=1e-5)
    np.testing.assert_allclose(expected_sampled, 20000 * probability[drawn], rtol=1e-5)


def test_elu_and_selu_at_zero_follow_tf1_s_kernels() -> None:
    """TF1 picks the exponential only for x < 0: the gradient at 0 is 1 (selu: scale), and
    -0.0 stays -0.0."""
    x = cc.placeholder("float32", shape=(3,), name="x")
    outputs = [cc.nn.elu(x), cc.nn.selu(x)]
    grads = [cc.gradients(cc.reduce_sum(y), [x])[0] for y in outputs]
    with Session() as sess:
        elu, selu, elu_grad, selu_grad = sess.run(outputs + grads, {x: np.array([0.0, -0.0, -1.0], np.float32)})
    np.testing.assert_allclose(elu_grad, [1.0, 1.0, np.exp(-1.0)], rtol=1e-6)
    np.testing.assert_allclose(selu_grad[:2], [1.0507009873554805] * 2, rtol=1e-6)
    assert np.signbit(elu[1]) and np.signbit(selu[1])


def test_softmax_is_as_accurate_as_tf1_s_kernel() -> None:
    """exp(x - max) / sum: a uniform row is exactly 1/n, and wide logits lose only what rounding
    x - max costs (exp(log_softmax(x)) lost twice that)."""
    x = cc.placeholder("float32", shape=(None, None), name="x")
    y = cc.nn.softmax(x)
    logits = (np.random.default_rng(0).standard_normal((64, 100)) * 30).astype(np.float32)
    with Session() as sess:
        for n in (3, 10, 1000):
            assert np.all(sess.run(y, {x: np.zeros((2, n), np.float32)}) == np.float32(1.0 / n))
        got = sess.run(y, {x: logits})
    # The reference starts from the rounded x - max, as every float32 kernel must.
    shifted = (logits - logits.max(axis=1, keepdims=True)).astype(np.float64)
    reference = np.exp(shifted) / np.exp(shifted).sum(axis=1, keepdims=True)
    seen = reference > 1e-30
    ulps = np.abs(got[seen] - reference[seen]) / np.spacing(reference[seen].astype(np.float32))
    assert ulps.max() <= 4.0, ulps.max()
    np.testing.assert_allclose(got.sum(axis=1), 1.0, rtol=1e-6)


@pytest.mark.parametrize("target", ["cpu", "reference"])
def test_embedding_lookup_max_norm_has_tf1_s_gradient_at_a_zero_row_and_at_the_bound(target: str) -> None:
    """TF1 clips each row with clip_by_norm: a zero row's gradient is finite (sqrt is taken only
    where the sum is positive) and a row whose norm equals max_norm passes its gradient through
    the norm (max, not a strict comparison)."""
    table = cc.Variable(np.array([[0.0, 0.0], [3.0, 4.0]]), name="table")
    rows = cc.nn.embedding_lookup(table, cc.constant(np.array([0, 1])), max_norm=5.0)
    (grad,) = cc.gradients(cc.reduce_sum(rows * cc.constant(np.array([1.0, 2.0]))), [table])
    with Session(target=target) as sess:
        sess.run(cc.global_variables_initializer())
        got = sess.run(grad)
    # d/dr of 5 r/|r| . (1, 2) at r = (3, 4): (5/|r|) (w - r (r.w)/|r|**2) = (-0.32, 0.24)
    np.testing.assert_allclose(got, [[1.0, 2.0], [-0.32, 0.24]], atol=1e-12)


@pytest.mark.parametrize("rows, targets", [(1, 3), (3, 1), (3, 4)])
def test_in_top_k_refuses_predictions_and_targets_of_different_batch_sizes(rows: int, targets: int) -> None:
    """A size-1 side was broadcast: (1, 4) predictions against 3 targets gave 3 answers."""
    predictions = cc.constant(np.zeros((rows, 4), np.float32))
    with pytest.raises(cc.ShapeError, match=r"in_top_k: predictions \(\d, 4\) and targets \(\d,\) have different "
                                            r"batch sizes .*test_nn_ops.py"):
        cc.nn.in_top_k(predictions, cc.constant(np.zeros(targets, np.int32)), 1)


def test_norm_refusing_ord_2_for_a_matrix_suggests_what_it_takes() -> None:
    with pytest.raises(ValueError, match=r"norm: ord 2 is not available for a matrix \(axis of two\); use "
                                         r"'euclidean' or 'fro'"):
        cc.norm(cc.constant(np.ones((2, 2))), ord=2, axis=[0, 1])


def test_top_k_returns_tf1_s_named_pair() -> None:
    with cc.Graph().as_default():
        result = cc.nn.top_k(cc.constant([[1.0, 5.0, 3.0]]), k=2)
        assert type(result).__name__ == "TopKV2"
        values, indices = result
        assert result.values is values and result.indices is indices
        with Session() as sess:
            assert sess.run(result.indices).tolist() == [[1, 2]]


@pytest.mark.parametrize("target", ["cpu", "reference"])
def test_loss_weights_follow_tf1_s_rank_rule_also_for_fed_sizes(target: str) -> None:
    labels, predictions = cc.placeholder("float32", (None, 1)), cc.placeholder("float32", (None, 1))
    with pytest.raises(cc.ShapeError, match=r"weights \(\?,\) must be a scalar or have the values' rank"):
        cc.losses.mean_squared_error(labels, predictions, weights=cc.placeholder("float32", (None,)))
    column = cc.placeholder("float32", (None, None))
    loss = cc.losses.mean_squared_error(labels, predictions, weights=column, reduction=cc.losses.Reduction.SUM)
    feeds = {labels: np.zeros((4, 1), "float32"), predictions: np.ones((4, 1), "float32")}
    with Session(target=target) as sess:
        assert sess.run(loss, {**feeds, column: np.full((4, 1), 2.0, "float32")}) == 8.0
        with pytest.raises(cc.ShapeError):   # a [4, 4] weight would spread the losses over a new axis
            sess.run(loss, {**feeds, column: np.ones((4, 4), "float32")})
    with pytest.raises(ValueError, match=r"invalid reduction 'mean'.*test_nn_ops.py"):
        cc.losses.mean_squared_error(labels, predictions, reduction="mean")
    with pytest.raises(ValueError, match=r"weights must not be None"):
        cc.losses.compute_weighted_loss(labels, weights=None)


def test_bias_add_takes_tf1_s_data_format_and_moments_tf1_s_argument_order() -> None:
    x = np.arange(24.0).reshape(1, 2, 3, 4)
    with Session(cc.Graph()) as sess, sess.graph.as_default():
        channels_first = sess.run(cc.nn.bias_add(x, np.array([10.0, 20.0]), "NCHW"))
        channels_last = sess.run(cc.nn.bias_add(x, np.arange(4.0), data_format="NHWC"))
        mean, variance = sess.run(cc.nn.moments(cc.constant(x), [0, 2], None, "moments", True))
        with pytest.raises(ValueError, match="bias_add: data_format must be None, 'NHWC' or 'NCHW'"):
            cc.nn.bias_add(x, np.arange(4.0), "HWC")
        with pytest.raises(cc.ShapeError, match=r"must be 1-D with the size of the channels \(dimension 1\)"):
            cc.nn.bias_add(x, np.arange(4.0), "NCHW")
    np.testing.assert_array_equal(channels_first, x + np.array([10.0, 20.0])[None, :, None, None])
    np.testing.assert_array_equal(channels_last, x + np.arange(4.0))
    np.testing.assert_allclose(mean, x.mean(axis=(0, 2), keepdims=True))
    np.testing.assert_allclose(variance, x.var(axis=(0, 2), keepdims=True))

"""``cc.gradients``: TF1 semantics, gradients of gradients, and a backward graph of ordinary ops."""
from __future__ import annotations

import numpy as np
import pytest

import compiler as cc
from compiler.ops.base import REGISTRY
from runtime import Session

X = np.array([0.5, -1.25, 2.0])


def _run(graph, fetches, feed_dict, target="cpu"):
    with Session(graph, target=target) as sess:
        return sess.run(fetches, feed_dict=feed_dict)


def _run_both(graph, fetches, feed_dict):
    """Run on cpu and on the reference; check they agree; return the cpu values."""
    cpu = _run(graph, fetches, feed_dict, "cpu")
    ref = _run(graph, fetches, feed_dict, "reference")
    for c, r in zip(cpu, ref):
        np.testing.assert_allclose(c, r, rtol=1e-12, atol=1e-12)
    return cpu


def test_returns_one_entry_per_x(graph) -> None:
    x = cc.placeholder("float64", shape=(3,), name="x")
    y = cc.reduce_sum(x * x)
    grads = cc.gradients(y, x)  # a single x, not in a list
    assert isinstance(grads, list) and len(grads) == 1
    grads = cc.gradients(y, [x, x])
    assert len(grads) == 2 and all(isinstance(g, cc.Tensor) for g in grads)
    assert grads[0].shape == x.shape and grads[0].dtype == x.dtype
    (got,) = _run_both(graph, [grads[0]], {x: X})
    np.testing.assert_allclose(got, 2 * X)


def test_several_ys_are_summed(graph) -> None:
    x = cc.placeholder("float64", shape=(3,), name="x")
    y1 = cc.reduce_sum(x * x)          # d/dx = 2x
    y2 = cc.reduce_sum(cc.exp(x))      # d/dx = exp(x)
    y3 = x * 3.0                       # non-scalar y: summed, d/dx = 3
    (both,) = cc.gradients([y1, y2, y3], [x])
    (only1,) = cc.gradients(y1, [x])
    got_both, got_1 = _run_both(graph, [both, only1], {x: X})
    np.testing.assert_allclose(got_both, 2 * X + np.exp(X) + 3.0)
    np.testing.assert_allclose(got_1, 2 * X)


def test_grad_ys_weight_each_y(graph) -> None:
    x = cc.placeholder("float64", shape=(3,), name="x")
    y1 = x * x
    y2 = cc.reduce_sum(x)
    w1 = np.array([1.0, 10.0, 100.0])
    (g,) = cc.gradients([y1, y2], [x], grad_ys=[cc.constant(w1), 0.5])
    (g_np,) = cc.gradients(y1, [x], grad_ys=w1)  # a numpy array is converted
    (g_none,) = cc.gradients([y1, y2], [x], grad_ys=[None, cc.constant(2.0, "float64")])
    got, got_np, got_none = _run_both(graph, [g, g_np, g_none], {x: X})
    np.testing.assert_allclose(got, w1 * 2 * X + 0.5)
    np.testing.assert_allclose(got_np, w1 * 2 * X)
    np.testing.assert_allclose(got_none, 2 * X + 2.0)  # None means ones


def test_grad_ys_can_be_a_placeholder(graph) -> None:
    x = cc.placeholder("float64", shape=(None,), name="x")
    gy = cc.placeholder("float64", shape=(None,), name="gy")
    (g,) = cc.gradients(cc.exp(x), [x], grad_ys=gy)
    weights = np.array([2.0, -1.0, 0.0])
    (got,) = _run_both(graph, [g], {x: X, gy: weights})
    np.testing.assert_allclose(got, weights * np.exp(X))


@pytest.mark.parametrize("grad_ys, error", [
    (lambda: cc.constant(np.ones(4)), cc.ShapeError),            # wrong shape
    (lambda: cc.constant(np.ones(3, "float32")), cc.DTypeError),  # wrong dtype
    (lambda: [None, None], ValueError),                           # one per y
])
def test_bad_grad_ys(graph, grad_ys, error) -> None:
    x = cc.placeholder("float64", shape=(3,), name="x")
    with pytest.raises(error):
        cc.gradients(x * x, [x], grad_ys=grad_ys())


def test_stop_gradients_treats_tensors_as_constants(graph) -> None:
    x = cc.placeholder("float64", shape=(3,), name="x")
    a = x * 2.0
    y = cc.reduce_sum(a * x)           # = 2 x^2: full gradient 4x
    (full,) = cc.gradients(y, [x])
    (stopped,) = cc.gradients(y, [x], stop_gradients=[a])    # a is a constant: gradient a = 2x
    (single,) = cc.gradients(y, [x], stop_gradients=a)       # not a list: same
    (with_op,) = cc.gradients(cc.reduce_sum(cc.stop_gradient(a) * x), [x])
    got = _run_both(graph, [full, stopped, single, with_op], {x: X})
    np.testing.assert_allclose(got[0], 4 * X)
    np.testing.assert_allclose(got[1], 2 * X)
    np.testing.assert_allclose(got[2], 2 * X)
    np.testing.assert_allclose(got[3], 2 * X)


def test_stopped_tensors_that_are_also_xs_get_their_partial_derivatives(graph) -> None:
    """TF1's example: a + b with b = 2a, both stopped, gives [1, 1], not the total [3, 1]."""
    x = cc.placeholder("float64", shape=(3,), name="x")
    a = x * 1.0
    b = 2.0 * a
    partial_a, partial_b = cc.gradients(cc.reduce_sum(a + b), [a, b], stop_gradients=[a, b])
    total_a, total_b = cc.gradients(cc.reduce_sum(a + b), [a, b])
    h = x * 3.0
    at_h, at_x = cc.gradients(cc.reduce_sum(h * h), [h, x], stop_gradients=[h])
    assert at_x is None
    got = _run_both(graph, [partial_a, partial_b, total_a, total_b, at_h], {x: X})
    np.testing.assert_allclose(got[0], np.ones(3))
    np.testing.assert_allclose(got[1], np.ones(3))
    np.testing.assert_allclose(got[2], 3 * np.ones(3))
    np.testing.assert_allclose(got[3], np.ones(3))
    np.testing.assert_allclose(got[4], 6 * X)


def test_stop_gradients_on_every_path_gives_none(graph) -> None:
    x = cc.placeholder("float64", shape=(3,), name="x")
    a = cc.exp(x)
    y = cc.reduce_sum(a * a)
    assert cc.gradients(y, [x], stop_gradients=[a]) == [None]
    (gx,) = cc.gradients(cc.reduce_sum(cc.stop_gradient(x)), [x])
    assert gx is None


def test_integer_tensors_get_none(graph) -> None:
    x = cc.placeholder("float64", shape=(3,), name="x")
    i = cc.placeholder("int32", shape=(3,), name="i")
    y = cc.reduce_sum(cc.cast(i, "float64") * x)
    g_i, g_x = cc.gradients(y, [i, x])
    assert g_i is None
    assert g_x is not None
    # An integer y contributes nothing, even when it depends on x.
    count = cc.reduce_sum(cc.cast(x > 0.0, "int32"))
    assert cc.gradients(count, [x]) == [None]
    # "zero" does not invent gradients for the integer input's dtype either way: it is zeros.
    (g_i_zero,) = cc.gradients(y, [i], unconnected_gradients="zero")
    assert g_i_zero is None or g_i_zero.dtype == np.int32
    (got,) = _run_both(graph, [g_x], {x: X, i: np.array([1, 2, 3], "int32")})
    np.testing.assert_allclose(got, [1.0, 2.0, 3.0])


def test_unconnected_x(graph) -> None:
    x = cc.placeholder("float64", shape=(3,), name="x")
    z = cc.placeholder("float64", shape=(None, 2), name="z")
    w = cc.Variable(np.ones((2, 2)), name="w")
    y = cc.reduce_sum(x * x)
    assert cc.gradients(y, [z, w]) == [None, None]
    g_x, g_z, g_w = cc.gradients(y, [x, z, w], unconnected_gradients="zero")
    assert g_z.shape == (None, 2) and g_z.dtype == np.float64
    assert g_w.shape == (2, 2)
    got = _run_both(graph, [g_x, g_z, g_w], {x: X, z: np.ones((4, 2))})
    np.testing.assert_allclose(got[0], 2 * X)
    np.testing.assert_array_equal(got[1], np.zeros((4, 2)))
    np.testing.assert_array_equal(got[2], np.zeros((2, 2)))
    with pytest.raises(ValueError):
        cc.gradients(y, [x], unconnected_gradients="zeros")
    assert cc.gradients(y, [z], unconnected_gradients=cc.UnconnectedGradients.NONE) == [None]
    (g_enum,) = cc.gradients(y, [w], unconnected_gradients=cc.UnconnectedGradients.ZERO)
    np.testing.assert_array_equal(_run_both(graph, [g_enum], {})[0], np.zeros((2, 2)))


def test_a_tensor_from_inside_a_loop_body_is_refused_as_an_x(graph) -> None:
    x = cc.placeholder("float64", (3,), name="x")
    inside = []

    def body(i: cc.Tensor, h: cc.Tensor) -> tuple:
        inside.append(cc.sin(h) * x)
        return i + 1, inside[-1]
    _, h = cc.while_loop(lambda i, h: i < 3, body, (0, x), maximum_iterations=3)
    for unconnected in ("none", "zero"):
        with pytest.raises(ValueError, match=r"gradients: '.*' was computed inside a cond branch or a loop body \(the "
                                             rf"function defined at .*test_autodiff.py:\d+\).*test_autodiff.py"):
            cc.gradients(cc.reduce_sum(h), [inside[0]], unconnected_gradients=unconnected)


def test_hessians_take_tf1_s_arguments(graph) -> None:
    x = cc.placeholder("float64", (2,), name="x")
    y = cc.reduce_sum(x * x * x)
    (plain,) = cc.hessians(y, [x])
    (tf1,) = cc.hessians(y, [x], "hessians", False, False, cc.AggregationMethod.EXPERIMENTAL_TREE)
    values = _run_both(graph, [plain, tf1], {x: np.array([1.0, 2.0])})
    np.testing.assert_array_equal(values[0], np.diag([6.0, 12.0]))
    np.testing.assert_array_equal(values[1], values[0])


def test_x_downstream_of_y_is_unconnected(graph) -> None:
    x = cc.placeholder("float64", shape=(3,), name="x")
    y = cc.reduce_sum(x)
    later = y * 2.0
    assert cc.gradients(y, [later]) == [None]


def test_gradient_with_respect_to_an_intermediate_tensor(graph) -> None:
    x = cc.placeholder("float64", shape=(3,), name="x")
    h = x * x
    y = cc.reduce_sum(cc.exp(h) * 3.0)
    g_h, g_x = cc.gradients(y, [h, x])
    (g_y,) = cc.gradients(y, [y])
    got = _run_both(graph, [g_h, g_x, g_y], {x: X})
    np.testing.assert_allclose(got[0], 3.0 * np.exp(X * X))
    np.testing.assert_allclose(got[1], 3.0 * np.exp(X * X) * 2 * X)
    np.testing.assert_allclose(got[2], 1.0)


def test_fan_out_contributions_are_summed(graph) -> None:
    x = cc.placeholder("float64", shape=(3,), name="x")
    y = cc.reduce_sum(cc.exp(x) + x * x + x)
    (g,) = cc.gradients(y, [x])
    (got,) = _run_both(graph, [g], {x: X})
    np.testing.assert_allclose(got, np.exp(X) + 2 * X + 1)


def test_broadcasting_is_undone(graph) -> None:
    x = cc.placeholder("float64", shape=(None, 3), name="x")
    b = cc.Variable(np.array([1.0, 2.0, 3.0]), name="b")
    s = cc.Variable(np.array(2.0), name="s")
    y = cc.reduce_sum((x + b) * s)
    g_x, g_b, g_s = cc.gradients(y, [x, b, s])
    assert g_b.shape == (3,) and g_s.shape == () and g_x.shape == (None, 3)
    xv = np.arange(12.0).reshape(4, 3)
    got = _run_both(graph, [g_x, g_b, g_s], {x: xv})
    np.testing.assert_allclose(got[0], np.full((4, 3), 2.0))
    np.testing.assert_allclose(got[1], [8.0, 8.0, 8.0])
    np.testing.assert_allclose(got[2], (xv + [1.0, 2.0, 3.0]).sum())


def test_gradients_of_gradients(graph) -> None:
    x = cc.placeholder("float64", shape=(3,), name="x")
    y = x ** 3
    (d1,) = cc.gradients(y, [x])
    (d2,) = cc.gradients(d1, [x])
    (d3,) = cc.gradients(d2, [x])
    (d4,) = cc.gradients(d3, [x], unconnected_gradients="zero")
    values = np.array([1.0, 2.0, -3.0])
    got = _run(graph, [d1, d2, d3, d4], {x: values}, "cpu")
    np.testing.assert_allclose(got[0], 3 * values ** 2)
    np.testing.assert_allclose(got[1], 6 * values)
    np.testing.assert_allclose(got[2], [6.0, 6.0, 6.0])
    np.testing.assert_allclose(got[3], [0.0, 0.0, 0.0])


def test_second_derivative_of_transcendentals(graph) -> None:
    x = cc.placeholder("float64", shape=(3,), name="x")
    (d1,) = cc.gradients(cc.reduce_sum(cc.tanh(x) + cc.exp(2.0 * x) + cc.sigmoid(x)), [x])
    (d2,) = cc.gradients(d1, [x])
    t, s = np.tanh(X), 1 / (1 + np.exp(-X))
    (got,) = _run(graph, [d2], {x: X}, "cpu")
    np.testing.assert_allclose(got, -2 * t * (1 - t * t) + 4 * np.exp(2 * X) + s * (1 - s) * (1 - 2 * s),
                               rtol=1e-9)


def test_hessian_vector_product_of_matmul(graph) -> None:
    # f(w) = 0.5 * |A w|^2: gradient A^T A w, Hessian-vector product A^T A v.
    a = np.array([[1.0, 2.0], [3.0, -1.0], [0.5, 0.5]])
    w = cc.Variable(np.array([[0.3], [-0.7]]), name="w")
    v = cc.placeholder("float64", shape=(2, 1), name="v")
    f = 0.5 * cc.reduce_sum(cc.square(cc.constant(a) @ w))
    (g,) = cc.gradients(f, [w])
    (hv,) = cc.gradients(g, [w], grad_ys=v)
    vv = np.array([[1.0], [2.0]])
    got_g, got_hv = _run_both(graph, [g, hv], {v: vv})
    np.testing.assert_allclose(got_g, a.T @ a @ w.initial_value)
    np.testing.assert_allclose(got_hv, a.T @ a @ vv)


def test_matches_finite_differences(graph) -> None:
    rng = np.random.default_rng(0)
    x = cc.placeholder("float64", shape=(4, 3), name="x")
    w = cc.Variable(rng.normal(size=(3, 2)), name="w")
    b = cc.Variable(rng.normal(size=(2,)), name="b")
    labels = cc.placeholder("int32", shape=(4,), name="labels")
    logits = cc.tanh(x @ w + b)
    loss = cc.reduce_mean(cc.nn.sparse_softmax_cross_entropy_with_logits(labels=labels, logits=logits))
    g_w, g_b = cc.gradients(loss, [w, b])
    xv = rng.normal(size=(4, 3))
    lv = np.array([0, 1, 1, 0], "int32")
    got_w, got_b = _run_both(graph, [g_w, g_b], {x: xv, labels: lv})

    def numpy_loss(wv, bv):
        z = np.tanh(xv @ wv + bv)
        z = z - z.max(axis=1, keepdims=True)
        logp = z - np.log(np.exp(z).sum(axis=1, keepdims=True))
        return -logp[np.arange(4), lv].mean()

    eps = 1e-6
    for value, got in ((w.initial_value, got_w), (b.initial_value, got_b)):
        numeric = np.zeros_like(value)
        for index in np.ndindex(value.shape):
            plus, minus = value.copy(), value.copy()
            plus[index] += eps
            minus[index] -= eps
            if value is w.initial_value:
                numeric[index] = (numpy_loss(plus, b.initial_value) - numpy_loss(minus, b.initial_value)) / (2 * eps)
            else:
                numeric[index] = (numpy_loss(w.initial_value, plus) - numpy_loss(w.initial_value, minus)) / (2 * eps)
        np.testing.assert_allclose(got, numeric, rtol=1e-5, atol=1e-8)


def test_backward_graph_is_made_of_ordinary_ops(graph) -> None:
    x = cc.placeholder("float64", shape=(None, 3), name="x")
    w = cc.Variable(np.ones((3, 2)), name="w")
    y = cc.reduce_mean(cc.nn.softmax(cc.tanh(x @ w)) ** 2)
    before = set(graph.get_operations())
    (g,) = cc.gradients(y, [w])
    g_norm = cc.reduce_sum(g * g)
    user_ops = {g_norm.op, g_norm.op.inputs[0].op}
    (gg,) = cc.gradients(g_norm, [w])
    new_ops = [op for op in graph.get_operations() if op not in before and op not in user_ops]
    assert new_ops
    for op in new_ops:
        assert op.name.startswith("gradients"), op.name
        assert REGISTRY.get(op.type) is op.opdef, op.type
        assert op.opdef.kind in ("elementwise", "reduce", "layout", "shape", "source"), op
        assert "grad" not in op.type.lower()
    forward_types = {op.type for op in before}
    assert {"MatMul", "Tanh"} <= forward_types
    got = _run_both(graph, [g, gg], {x: np.arange(6.0).reshape(2, 3) / 6})
    assert got[0].shape == (3, 2) and np.all(np.isfinite(got[0])) and np.all(np.isfinite(got[1]))


def test_gradients_scope_name(graph) -> None:
    x = cc.placeholder("float64", shape=(3,), name="x")
    (g,) = cc.gradients(cc.reduce_sum(cc.exp(x)), [x], name="mygrads")
    assert g.op.name.startswith("mygrads/")
    with cc.name_scope("outer"):
        (g2,) = cc.gradients(cc.reduce_sum(cc.exp(x)), [x])
    assert g2.op.name.startswith("outer/gradients/")


def test_graph_mismatch_in_gradients(graph) -> None:
    x = cc.placeholder("float64", shape=(3,), name="x")
    with cc.Graph().as_default():
        other = cc.placeholder("float64", shape=(3,), name="other")
    with pytest.raises(cc.GraphMismatchError):
        cc.gradients(cc.reduce_sum(x), [other])
    with pytest.raises(TypeError):
        cc.gradients(cc.reduce_sum(x), [np.ones(3)])


# -- aggregation methods ---------------------------------------------------------------------------

ADD_N = cc.AggregationMethod.ADD_N
TREE = cc.AggregationMethod.EXPERIMENTAL_TREE
ACCUMULATE_N = cc.AggregationMethod.EXPERIMENTAL_ACCUMULATE_N


def _fan_out(x: cc.Tensor, count: int) -> cc.Tensor:
    """A loss through which ``count`` contributions reach the gradient of ``x``."""
    functions = [cc.exp, cc.sin, cc.cos, cc.tanh, cc.sigmoid, cc.square, cc.log1p]
    return sum(cc.reduce_sum(f(x) * float(k + 1)) for k, f in enumerate(functions[:count]))


def _sum_tree(total: cc.Tensor, leaves: list[cc.Tensor]) -> object:
    """The adds that make ``total`` from ``leaves``, as nested pairs of leaf positions."""
    if any(total is leaf for leaf in leaves):
        return next(i for i, leaf in enumerate(leaves) if total is leaf)
    assert total.op.type == "Add", total.op.describe()
    return tuple(_sum_tree(t, leaves) for t in total.op.inputs)


# (method, the shape of the sum of five contributions, numbered in the order they are produced)
AGGREGATION_SHAPES = [
    (None, ((((0, 1), 2), 3), 4)),
    (ADD_N, ((((0, 1), 2), 3), 4)),
    (cc.AggregationMethod.DEFAULT, ((((0, 1), 2), 3), 4)),
    (TREE, (((0, 1), (2, 3)), 4)),
    (ACCUMULATE_N, ((((0, 1), 2), 3), 4)),
]


@pytest.mark.parametrize("method, shape", AGGREGATION_SHAPES)
def test_aggregation_method_decides_how_contributions_are_summed(graph, method, shape) -> None:
    x = cc.placeholder("float64", shape=(3,), name="x")
    loss = _fan_out(x, 5)
    (dx,) = cc.gradients(loss, [x], aggregation_method=method)
    adds = []
    stack = [dx]
    while stack:
        t = stack.pop()
        if t.op.type == "Add" and t.op.name.startswith("gradients/"):
            adds.append(t.op)
            stack.extend(t.op.inputs)
    contributions = sorted({t for op in adds for t in op.inputs if t.op not in adds},
                           key=lambda t: t.op.id)   # in the order they were produced
    assert len(contributions) == 5
    assert _sum_tree(dx, contributions) == shape
    running = [op.attrs.get("running_sum", False) for op in adds]
    if method == ACCUMULATE_N:
        # Each add is built as soon as its contribution is, before the next contribution.
        assert all(running)
        for add_op in adds:
            produced = max(t.op.id for t in add_op.inputs)
            later = [t.op.id for t in contributions if t.op.id > produced]
            assert all(add_op.id < other for other in later)
    else:
        # One sum, built once every contribution is known.
        assert not any(running)
        assert min(op.id for op in adds) > max(t.op.id for t in contributions)
    # Every method gives the same gradient, to rounding, on both targets.
    (expected,) = cc.gradients(loss, [x], name="reference_sum")
    got, want = _run_both(graph, [dx, expected], {x: X})
    np.testing.assert_allclose(got, want, rtol=1e-14)


def _peak_temporary_bytes(method: int) -> list[int]:
    """The arenas of a step whose hidden layer's gradient has five matmul contributions."""
    rng = np.random.default_rng(0)
    graph = cc.Graph()
    with graph.as_default():
        x = cc.placeholder("float64", (64, 32), name="x")
        w0 = cc.Variable(rng.standard_normal((32, 32)), name="w0")
        hidden = cc.tanh(x @ w0)
        heads = [cc.Variable(rng.standard_normal((32, 32)), name=f"w{k}") for k in range(1, 6)]
        loss = sum(cc.reduce_sum((hidden @ w) * x) for w in heads)
        (grad,) = cc.gradients(loss, [w0], aggregation_method=method)
    with Session(graph) as sess:
        exe = sess.compile([grad], feed_dict={x: rng.standard_normal((64, 32))})
    assert "buffer plan" in exe.dump("kernels")
    return exe.program.arenas


def test_accumulate_n_keeps_fewer_contributions_alive_in_the_buffer_plan() -> None:
    add_n, tree, accumulate_n = (_peak_temporary_bytes(m) for m in (ADD_N, TREE, ACCUMULATE_N))
    assert tree == add_n                      # the same kernels; only the order of the adds differs
    assert sum(accumulate_n) < sum(add_n)      # each contribution dies once it is added


@pytest.mark.parametrize("arguments, pattern", [
    ({"aggregation_method": 3}, r"aggregation_method must be one of .*ADD_N.* got 3"),
    ({"aggregation_method": "ADD_N"}, r"aggregation_method must be one of .* got 'ADD_N'"),
    ({"gate_gradients": 2}, r"gate_gradients must be True or False, got 2"),
    ({"colocate_gradients_with_ops": "yes"}, r"colocate_gradients_with_ops must be True or False"),
    ({"unconnected_gradients": "zeros"}, r"unconnected_gradients must be 'none' or 'zero'"),
])
def test_bad_gradients_arguments_name_the_argument_and_the_users_line(graph, arguments, pattern) -> None:
    x = cc.placeholder("float64", shape=(3,), name="x")
    with pytest.raises(ValueError, match=pattern) as info:
        cc.gradients(cc.reduce_sum(x * x), [x], **arguments)
    assert f"{__file__.rsplit('/', 1)[-1]}:" in str(info.value)


@pytest.mark.parametrize("gate", [False, True])
@pytest.mark.parametrize("colocate", [False, True])
def test_gate_and_colocate_leave_the_gradients_unchanged(graph, gate, colocate) -> None:
    x = cc.placeholder("float64", shape=(3,), name="x")
    loss = _fan_out(x, 3) * cc.reduce_sum(x)
    (dx,) = cc.gradients(loss, [x], gate_gradients=gate, colocate_gradients_with_ops=colocate)
    (plain,) = cc.gradients(loss, [x], name="plain")
    got, want = _run_both(graph, [dx, plain], {x: X})
    np.testing.assert_array_equal(got, want)


def test_gradients_do_not_copy_the_graphs_operations_for_each_op(monkeypatch) -> None:
    """gradients() took len(graph.get_operations()), a copy of every op, for each op it
    differentiated: quadratic in the graph (15 s for a chain of 8 000 ops)."""
    graph = cc.Graph()
    copies = []
    original = cc.Graph.get_operations

    def counting(self):
        copies.append(1)
        return original(self)
    with graph.as_default():
        x = cc.placeholder("float32", (4,))
        y = x
        for _ in range(200):
            y = cc.sin(y) * 1.0001
        monkeypatch.setattr(cc.Graph, "get_operations", counting)
        cc.gradients(cc.reduce_sum(y), [x])
    assert len(copies) <= 2


def test_sign_has_a_zero_gradient_as_in_tf1() -> None:
    """TF1's Sign gradient is zeros (not None): a loss reached only through sign trains nothing,
    without "no gradients" errors."""
    w = cc.Variable(np.array([1.0, -2.0, 0.0]), name="w")
    (grad,) = cc.gradients(cc.reduce_sum(cc.sign(w) * 3.0), [w])
    assert grad is not None
    with Session() as sess:
        sess.run(cc.global_variables_initializer())
        assert sess.run(grad).tolist() == [0.0, 0.0, 0.0]


def test_zero_gradients_of_an_unconnected_placeholder_need_no_feed_as_tf1() -> None:
    # TF1's zeros_like of a shape known now reads nothing of the tensor: z need not be fed.
    x = cc.placeholder("float64", (3,), name="x")
    z = cc.placeholder("float64", (2,), name="z")
    slopes = cc.gradients(cc.reduce_sum(x * x), [x, z], unconnected_gradients="zero")
    with Session() as sess:
        got_x, got_z = sess.run(slopes, {x: np.ones(3)})
    np.testing.assert_array_equal(got_x, [2.0, 2.0, 2.0])
    np.testing.assert_array_equal(got_z, [0.0, 0.0])

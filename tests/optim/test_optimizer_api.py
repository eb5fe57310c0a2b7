"""The optimizer API around the updates: slots, global step, gradients, errors."""
from __future__ import annotations

import numpy as np
import pytest

import compiler as cc
import optim
from runtime import Session


def _names(variables: list) -> list[str]:
    return [v.op.name for v in variables]


@pytest.mark.parametrize("make, slot_vars", [
    (lambda: optim.GradientDescentOptimizer(0.1), {}),
    (lambda: optim.MomentumOptimizer(0.1, 0.9), {"momentum": "W/Momentum"}),
    (lambda: optim.AdamOptimizer(), {"m": "W/Adam", "v": "W/Adam_1"}),
    (lambda: optim.AdamOptimizer(name="MyAdam"), {"m": "W/MyAdam", "v": "W/MyAdam_1"}),
])
def test_slots_are_named_like_tf1(make, slot_vars) -> None:
    graph = cc.Graph()
    with graph.as_default():
        w = cc.Variable(np.ones((3, 2)), name="W")
        other = cc.Variable(np.ones(2), name="unused")
        opt = make()
        with cc.name_scope("training"):  # slots ignore the name scope minimize is called in
            train = opt.minimize(cc.reduce_sum(w * w), var_list=[w])
    assert isinstance(train, cc.Operation)
    assert train.name == "training/" + opt.get_name()
    assert opt.get_slot_names() == sorted(slot_vars)
    for slot_name, var_name in slot_vars.items():
        slot = opt.get_slot(w, slot_name)
        assert slot.op.name == var_name
        assert not slot.trainable and slot.shape == w.shape and slot.dtype == w.dtype
        np.testing.assert_array_equal(slot.initial_value, np.zeros((3, 2)))
        assert opt.get_slot(other, slot_name) is None
    assert opt.get_slot(w, "no such slot") is None
    trainable = graph.get_collection(cc.GraphKeys.TRAINABLE_VARIABLES)
    assert _names(trainable) == ["W", "unused"]
    global_vars = _names(graph.get_collection(cc.GraphKeys.GLOBAL_VARIABLES))
    assert set(slot_vars.values()) <= set(global_vars)
    if isinstance(opt, optim.AdamOptimizer):
        assert {"beta1_power", "beta2_power"} <= set(global_vars)
        assert set(_names(opt.variables())) == set(slot_vars.values()) | {"beta1_power", "beta2_power"}


def test_adam_beta_powers_take_the_first_variables_dtype() -> None:
    graph = cc.Graph()
    with graph.as_default():
        a = cc.Variable(np.ones(2, np.float32), name="a")
        b = cc.Variable(np.ones(2, np.float64), name="b")
        loss = cc.reduce_sum(a * a) + cc.cast(cc.reduce_sum(b * b), "float32")
        opt = optim.AdamOptimizer(0.1, beta1=0.5, beta2=0.75)
        train = opt.minimize(loss)
    beta1_power, beta2_power = opt._get_beta_accumulators(graph)
    assert beta1_power.dtype == np.float32 and beta1_power.initial_value == np.float32(0.5)
    assert not beta1_power.trainable and beta2_power.initial_value == np.float32(0.75)
    with Session(graph, target="reference") as sess:
        sess.run(train)
        sess.run(train)
        a_value, b_value, p1 = sess.run([a, b, beta1_power])
    assert a_value.dtype == np.float32 and b_value.dtype == np.float64
    np.testing.assert_allclose(p1, 0.125)
    value, m, v = 1.0, 0.0, 0.0
    for t in (1, 2):
        g = 2 * value
        m, v = 0.5 * m + 0.5 * g, 0.75 * v + 0.25 * g * g
        value -= 0.1 * np.sqrt(1 - 0.75 ** t) / (1 - 0.5 ** t) * m / (np.sqrt(v) + 1e-8)
    np.testing.assert_allclose(a_value, value, rtol=1e-6)
    np.testing.assert_allclose(b_value, value, rtol=1e-12)


def test_global_step() -> None:
    graph = cc.Graph()
    assert optim.get_global_step(graph) is None
    with cc.name_scope("ignored"):
        step = optim.get_or_create_global_step(graph)
    assert step.graph is graph and step.op.name == "global_step"
    assert step.dtype == np.int64 and step.shape == () and not step.trainable
    assert optim.get_or_create_global_step(graph) is step
    assert optim.get_global_step(graph) is step
    assert graph.get_collection(cc.GraphKeys.GLOBAL_STEP) == [step]
    assert step in graph.get_collection(cc.GraphKeys.GLOBAL_VARIABLES)
    assert step not in graph.get_collection(cc.GraphKeys.TRAINABLE_VARIABLES)
    with graph.as_default():
        assert optim.get_global_step() is step


@pytest.mark.parametrize("target", ["reference", "cpu"])
def test_global_step_counts_runs(target: str) -> None:
    graph = cc.Graph()
    with graph.as_default():
        w = cc.Variable(np.ones(2), name="w")
        step = optim.get_or_create_global_step()
        train = optim.GradientDescentOptimizer(0.1).minimize(cc.reduce_sum(w * w), global_step=step)
    with Session(graph, target=target) as sess:
        assert [int(sess.run([train, step])[1]) for _ in range(4)] == [0, 1, 2, 3]  # start-of-step reads
        assert int(sess.run(step)) == 4


def test_compute_gradients() -> None:
    graph = cc.Graph()
    with graph.as_default():
        w = cc.Variable(np.ones((3, 2)), name="W")
        unused = cc.Variable(np.ones(4), name="unused")
        counter = cc.Variable(np.array(0, np.int64), name="counter")  # integer: no gradient, as in TF1
        frozen = cc.Variable(np.ones(2), name="frozen", trainable=False)
        loss = cc.reduce_sum(cc.square(w)) + cc.reduce_sum(frozen)
        opt = optim.GradientDescentOptimizer(0.1)
        pairs = opt.compute_gradients(loss)
        explicit = opt.compute_gradients(loss, var_list=[frozen, counter, unused])
        alone = opt.compute_gradients(loss, var_list=w)                      # TF1 flattens var_list
        by_name = opt.compute_gradients(loss, var_list={"b": unused, "a": [w]})
    assert [v for _, v in pairs] == [w, unused, counter]
    assert isinstance(pairs[0][0], cc.Tensor) and pairs[0][0].shape == (3, 2)
    assert pairs[1][0] is None and pairs[2][0] is None
    assert [v for _, v in explicit] == [frozen, counter, unused]
    assert explicit[0][0] is not None and explicit[1][0] is None and explicit[2][0] is None
    assert [v for _, v in alone] == [w] and [v for _, v in by_name] == [w, unused]


@pytest.mark.parametrize("target", ["reference", "cpu"])
def test_no_gradient_error(target: str) -> None:
    graph = cc.Graph()
    with graph.as_default():
        w = cc.Variable(np.ones(2), name="w")
        x = cc.placeholder("float64", shape=(2,), name="x")
        loss = cc.reduce_sum(x * x)
        opt = optim.AdamOptimizer()
        with pytest.raises(cc.NoGradientError, match="No gradients provided for any variable"):
            opt.minimize(loss)
        with pytest.raises(cc.NoGradientError, match=r"No gradients provided for any variable.*'w:0'"):
            opt.apply_gradients([(None, w)])
        # the failed calls left no optimizer state behind
        assert opt.get_slot_names() == [] and opt.variables() == []
    with Session(graph, target=target) as sess:
        assert sess.run(loss, feed_dict={x: np.array([1.0, 2.0])}) == 5.0


def test_argument_errors() -> None:
    graph = cc.Graph()
    with graph.as_default():
        w = cc.Variable(np.ones(2), name="w")
        w32 = cc.Variable(np.ones(2, np.float32), name="w32")
        opt = optim.GradientDescentOptimizer(0.1)
        (g, _), = opt.compute_gradients(cc.reduce_sum(w * w), var_list=[w])
        with pytest.raises(ValueError, match="more than once"):
            opt.apply_gradients([(g, w), (g, w)])
        with pytest.raises(cc.DTypeError, match="float64"):
            opt.apply_gradients([(g, w32)])
        with pytest.raises(TypeError, match="not a Variable"):
            opt.apply_gradients([(g, g)])
        with pytest.raises(ValueError, match="no variables"):
            opt.apply_gradients([])
        with pytest.raises(TypeError, match="integer Variable"):
            opt.apply_gradients([(g, w)], global_step=w)
        with pytest.raises(cc.DTypeError, match="int32"):
            opt.minimize(cc.constant(1))
        with pytest.raises(TypeError, match="beta1"):
            optim.AdamOptimizer(beta1=cc.constant(0.9))
    with pytest.raises(ValueError, match="name"):
        optim.Optimizer(name="")


BAD_INPUTS = {
    # name: (what the user does with w, a float64 Variable of shape (3,), and its loss; error; pattern)
    "learning rate None": (lambda w, loss: optim.GradientDescentOptimizer(None).minimize(loss),
                           ValueError, "GradientDescent: learning_rate must be a number or a scalar Tensor, got None"),
    "epsilon None": (lambda w, loss: optim.AdamOptimizer(epsilon=None).minimize(loss),
                     ValueError, "Adam: epsilon must be a number"),
    "learning rate string": (lambda w, loss: optim.GradientDescentOptimizer("0.1").minimize(loss),
                             TypeError, "learning_rate must be a number or a scalar Tensor, got '0.1'"),
    "learning rate list": (lambda w, loss: optim.MomentumOptimizer([0.1, 1.0, 10.0], 0.9).minimize(loss),
                           ValueError, "Momentum: learning_rate must be a number"),
    "momentum vector tensor": (lambda w, loss: optim.MomentumOptimizer(0.1, cc.constant([0.9, 0.9, 0.9]))
                               .minimize(loss), ValueError, "momentum must be a scalar, got the tensor"),
    "learning rate from another graph": (
        lambda w, loss: optim.GradientDescentOptimizer(_tensor_in_another_graph()).minimize(loss),
        cc.GraphMismatchError, "learning_rate 'elsewhere:0' belongs to another graph"),
    "gradient of another shape": (
        lambda w, loss: optim.AdamOptimizer().apply_gradients([(cc.constant(np.ones(1)), w)]),
        cc.ShapeError, r"the gradient 'Const:0' of shape \(1,\) does not match variable 'w:0' of shape \(3,\)"),
    "variables of two graphs": (
        lambda w, loss: optim.AdamOptimizer().apply_gradients([(cc.constant(np.ones(3)), w),
                                                               _pair_in_another_graph()]),
        cc.GraphMismatchError, "variables 'w:0' and 'v:0' belong to different graphs"),
    "one accumulator for two training ops": (
        lambda w, loss: [accumulator.minimize(loss) for accumulator in
                         [optim.GradientAccumulator(optim.GradientDescentOptimizer(0.1), 2)] * 2],
        ValueError, "one GradientAccumulator counts the runs of one training op"),
    "Ftrl negative l1": (lambda w, loss: optim.FtrlOptimizer(0.1, l1_regularization_strength=-1.0),
                         ValueError, "l1_regularization_strength must be zero or positive"),
    "Adagrad zero accumulator": (lambda w, loss: optim.AdagradOptimizer(0.1, initial_accumulator_value=0.0),
                                 ValueError, "initial_accumulator_value must be positive"),
    "piecewise boundary beyond int32": (
        lambda w, loss: optim.piecewise_constant(cc.constant(np.int32(200)), [100, 3_000_000_000], [1.0, 0.5, 0.1]),
        ValueError, "boundaries\\[1\\] = 3000000000 does not fit x's dtype int32"),
}


def _tensor_in_another_graph() -> cc.Tensor:
    with cc.Graph().as_default():
        return cc.constant(0.1, name="elsewhere")


def _pair_in_another_graph() -> tuple:
    with cc.Graph().as_default():
        return cc.constant(np.ones(2)), cc.Variable(np.ones(2), name="v")


@pytest.mark.parametrize("name", sorted(BAD_INPUTS))
def test_bad_optimizer_input_is_refused_at_the_users_line(name: str) -> None:
    """What TF1 refuses (a None or non-scalar hyperparameter, a gradient of another shape, mixed
    graphs) is refused when the update is built, naming the argument and the user's line, instead
    of training with NaN, broadcasting, or failing on an internal node."""
    build, error, pattern = BAD_INPUTS[name]
    with cc.Graph().as_default():
        w = cc.Variable(np.ones(3), name="w")
        with pytest.raises(error, match=pattern) as raised:
            build(w, cc.reduce_sum(w * w))
    assert f"(at {__file__}:" in str(raised.value)


def test_a_variable_named_global_step_is_the_global_step_as_in_tf1() -> None:
    """The classic ``Variable(0, name="global_step", trainable=False)``, in no collection of its own."""
    with cc.Graph().as_default():
        step = cc.Variable(np.int64(0), name="global_step", trainable=False)
        assert optim.get_global_step() is step and optim.get_or_create_global_step() is step


def test_minimize_in_a_graph_that_is_not_the_default() -> None:
    graph = cc.Graph()
    with graph.as_default():
        w = cc.Variable(np.ones(2), name="w")
        loss = cc.reduce_sum(w * w)
        step = optim.get_or_create_global_step()
    default_ops = len(cc.get_default_graph().get_operations())
    opt = optim.AdamOptimizer(0.1)
    train = opt.minimize(loss, global_step=step)  # built outside `graph.as_default()`
    assert train.graph is graph and opt.get_slot(w, "m").graph is graph
    assert len(cc.get_default_graph().get_operations()) == default_ops
    with Session(graph, target="reference") as sess:
        sess.run(train)
        np.testing.assert_allclose(sess.run(w), [0.9, 0.9], rtol=1e-6)


def test_callable_learning_rate() -> None:
    graph = cc.Graph()
    with graph.as_default():
        w = cc.Variable(np.ones(2), name="w")
        train = optim.MomentumOptimizer(lambda: 0.25, lambda: 0.5).minimize(cc.reduce_sum(w * w))
    with Session(graph, target="reference") as sess:
        sess.run(train)
        np.testing.assert_allclose(sess.run(w), [0.5, 0.5])


# -- gate_gradients and aggregation_method ---------------------------------------------------------

GATES = [optim.Optimizer.GATE_NONE, optim.Optimizer.GATE_OP, optim.Optimizer.GATE_GRAPH]


def _coupled_model() -> tuple:
    """Values for ``loss = sum((tanh(x @ w1) @ w2) * s)``: every variable's gradient reads the
    others, so an update applied before another variable's gradient is computed would change it."""
    rng = np.random.default_rng(3)
    return (rng.standard_normal((8, 4)), rng.standard_normal((4, 5)) * 0.5, rng.standard_normal((5, 3)) * 0.5,
            rng.standard_normal(3))


def _numpy_steps(optimizer: str, steps: int) -> list[np.ndarray]:
    x, w1, w2, s = _coupled_model()
    variables = [w1, w2, s]
    accumulators = [np.zeros_like(v) for v in variables]
    for _ in range(steps):
        h = np.tanh(x @ w1)
        z = h @ w2
        dz = np.broadcast_to(s, z.shape)
        grads = [x.T @ ((dz @ w2.T) * (1 - h * h)), h.T @ dz, z.sum(axis=0)]   # all from the old values
        for k, grad in enumerate(grads):
            if optimizer == "momentum":
                accumulators[k] = 0.9 * accumulators[k] + grad
                grad = accumulators[k]
            variables[k] = variables[k] - 0.1 * grad
        w1, w2, s = variables
    return variables


@pytest.mark.parametrize("target", ["cpu", "reference"])
@pytest.mark.parametrize("optimizer", ["sgd", "momentum"])
@pytest.mark.parametrize("gate", GATES)
def test_every_gate_computes_every_gradient_from_the_values_before_the_update(gate, optimizer, target) -> None:
    x_value, w1_value, w2_value, s_value = _coupled_model()
    graph = cc.Graph()
    with graph.as_default():
        x = cc.constant(x_value, name="x")
        w1, w2, s = (cc.Variable(v, name=n) for v, n in ((w1_value, "w1"), (w2_value, "w2"), (s_value, "s")))
        loss = cc.reduce_sum((cc.tanh(x @ w1) @ w2) * s)
        opt = optim.GradientDescentOptimizer(0.1) if optimizer == "sgd" else optim.MomentumOptimizer(0.1, 0.9)
        train = opt.minimize(loss, gate_gradients=gate)
    with Session(graph, target=target) as sess:
        for _ in range(3):
            sess.run(train)
        got = sess.run([w1, w2, s])
        if target == "cpu":
            program = sess.compile([train]).program
    for value, expected in zip(got, _numpy_steps(optimizer, 3)):
        np.testing.assert_allclose(value, expected, rtol=1e-12, atol=1e-12)
    if target == "cpu":
        # The schedule moves updates early (s's, under SGD, runs before w1's gradient is computed),
        # but never before a kernel that reads the old value of the variable it writes.
        writes = {}
        for variable in (w1, w2, s):
            buffer = program.variables[variable.op.outputs[0]]
            (write,) = [i for i, k in enumerate(program.kernels) if k.out.buffer == buffer]
            reads = [i for i, k in enumerate(program.kernels) if any(a.buffer == buffer for a in k.operands)]
            assert all(i <= write for i in reads)
            writes[variable] = write
        if optimizer == "sgd":
            assert writes[s] < min(writes[w1], writes[w2])   # before their gradients are computed


@pytest.mark.parametrize("method", [None, cc.AggregationMethod.ADD_N, cc.AggregationMethod.EXPERIMENTAL_TREE,
                                    cc.AggregationMethod.EXPERIMENTAL_ACCUMULATE_N])
def test_minimize_with_each_aggregation_method(method) -> None:
    graph = cc.Graph()
    with graph.as_default():
        w = cc.Variable(np.array([0.5, -1.0, 2.0]), name="w")
        loss = cc.reduce_sum(cc.exp(w)) + cc.reduce_sum(cc.sin(w)) + cc.reduce_sum(w * w)
        opt = optim.GradientDescentOptimizer(0.1)
        (grad, _), = opt.compute_gradients(loss, aggregation_method=method, colocate_gradients_with_ops=True)
        train = opt.minimize(loss, aggregation_method=method, colocate_gradients_with_ops=True)
    start = np.array([0.5, -1.0, 2.0])
    expected = np.exp(start) + np.cos(start) + 2 * start
    for target in ("cpu", "reference"):
        with Session(graph, target=target) as sess:
            np.testing.assert_allclose(sess.run(grad), expected, rtol=1e-14)
            sess.run(train)
            np.testing.assert_allclose(sess.run(w), start - 0.1 * expected, rtol=1e-14)


@pytest.mark.parametrize("arguments, pattern", [
    ({"gate_gradients": 3}, r"gate_gradients must be Optimizer.GATE_NONE \(0\), GATE_OP \(1\) or GATE_GRAPH "
                            r"\(2\), got 3"),
    ({"gate_gradients": "GATE_OP"}, r"gate_gradients must be .* got 'GATE_OP'"),
    ({"aggregation_method": 7}, r"aggregation_method must be one of AggregationMethod.ADD_N \(0\).* got 7"),
])
@pytest.mark.parametrize("entry", ["minimize", "compute_gradients"])
def test_bad_gate_or_aggregation_method_names_the_argument_and_the_users_line(entry, arguments, pattern) -> None:
    with cc.Graph().as_default():
        w = cc.Variable(np.ones(2), name="w")
        opt = optim.GradientDescentOptimizer(0.1)
        with pytest.raises(ValueError, match=pattern) as info:
            getattr(opt, entry)(cc.reduce_sum(w * w), **arguments)
    assert f"{__file__.rsplit('/', 1)[-1]}:" in str(info.value)


def test_gate_constants_are_tf1s() -> None:
    assert (optim.Optimizer.GATE_NONE, optim.Optimizer.GATE_OP, optim.Optimizer.GATE_GRAPH) == (0, 1, 2)
    assert (cc.AggregationMethod.ADD_N, cc.AggregationMethod.DEFAULT, cc.AggregationMethod.EXPERIMENTAL_TREE,
            cc.AggregationMethod.EXPERIMENTAL_ACCUMULATE_N) == (0, 0, 1, 2)


@pytest.mark.parametrize("value, message", [(np.float32(0.0), "does not have an integer type"),
                                            (np.zeros(2, np.int64), "is not a scalar")])
def test_a_global_step_variable_of_another_kind_is_an_error_not_a_second_step(value, message) -> None:
    """As TF1's assert_global_step: a hand-made "global_step" that is not an integer scalar is
    refused with the user's line (it used to be passed over for a new "global_step_1")."""
    graph = cc.Graph()
    with graph.as_default():
        cc.Variable(value, name="global_step", trainable=False)
        with pytest.raises(TypeError, match=message) as caught:
            optim.get_or_create_global_step()
    assert "test_optimizer_api.py" in str(caught.value)

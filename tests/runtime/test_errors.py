"""Bad input raises a documented exception with a clear message, and the session keeps working.

Also: user-chosen names never reach IR text, and NaN/Inf follow IEEE (the same as numpy).
"""
from __future__ import annotations

import inspect
import re

import numpy as np
import pytest

import compiler as cc
import optim
from compiler.errors import (DTypeError, FeedError, GraphgradError, GraphMismatchError, NoGradientError,
                             ShapeError)
from runtime import Session


def _line() -> int:
    return inspect.currentframe().f_back.f_lineno  # type: ignore[union-attr]


class Healthy:
    """A session with a valid computation; ``check()`` proves the session still works."""

    def __init__(self, graph, target: str = "cpu") -> None:
        self.graph = graph
        self.x = cc.placeholder("float32", shape=(None, 3), name="ok_x")
        self.v = cc.Variable(np.ones(3, "float32"), name="ok_v")
        self.step = self.v.assign_add(np.ones(3, "float32"))
        self.y = cc.reduce_sum(self.x * self.v, axis=1)
        self.sess = Session(graph, target=target)
        self.runs = 0
        self.check()

    def check(self) -> None:
        xv = np.arange(6, dtype="float32").reshape(2, 3)
        y, _ = self.sess.run([self.y, self.step], {self.x: xv})
        np.testing.assert_allclose(y, xv.sum(axis=1) * (1 + self.runs))
        self.runs += 1


@pytest.fixture(params=["cpu", "reference"])
def healthy(graph, request):
    h = Healthy(graph, request.param)
    yield h
    h.sess.close()


def test_exception_hierarchy() -> None:
    for error, base in ((ShapeError, ValueError), (DTypeError, TypeError), (FeedError, ValueError),
                        (GraphMismatchError, ValueError), (NoGradientError, ValueError)):
        assert issubclass(error, GraphgradError) and issubclass(error, base)
    assert cc.ShapeError is ShapeError and cc.NoGradientError is NoGradientError


# -- build-time shape and dtype errors --------------------------------------------------------------

def test_shape_mismatch_names_op_shapes_and_user_line(healthy) -> None:
    a = cc.placeholder("float32", shape=(2, 3), name="a")
    b = cc.placeholder("float32", shape=(4, 3), name="b")
    line = _line() + 2
    with pytest.raises(ShapeError) as info:
        a + b
    message = str(info.value)
    assert "Add" in message
    assert "(2, 3)" in message and "(4, 3)" in message
    assert f"{__file__}:{line}" in message
    assert "'a:0'" in message and "'b:0'" in message
    healthy.check()


BUILD_ERRORS = [
    # (label, build(a) with a: float32 (2, 3) named "a", error, op type, words in the message)
    ("reduce_sum axis=5", lambda a: cc.reduce_sum(a, axis=5), ShapeError, "ReduceSum", ["axis 5", "rank 2"]),
    ("reduce_max axis=-3", lambda a: cc.reduce_max(a, axis=-3), ShapeError, "ReduceMax", ["-3", "rank 2"]),
    ("reduce_sum repeated axis", lambda a: cc.reduce_sum(a, axis=(1, 1)), ShapeError, "ReduceSum", ["repeated"]),
    ("transpose axis out of range", lambda a: cc.transpose(a, perm=(0, 2)), ShapeError, "Transpose", ["2"]),
    ("transpose repeated axis", lambda a: cc.transpose(a, perm=(0, 0)), ShapeError, "Transpose", ["(0, 0)"]),
    ("transpose wrong length", lambda a: cc.transpose(a, perm=(1, 0, 2)), ShapeError, "Transpose", []),
    ("reshape 6 elements to (5,)", lambda a: cc.reshape(a, (5,)), ShapeError, "Reshape", ["6", "(5,)"]),
    ("reshape 12 elements to (5,)", lambda a: cc.reshape(cc.placeholder("float32", shape=(3, 4), name="t"), (5,)),
     ShapeError, "Reshape", ["12", "(5,)", "(3, 4)"]),
    ("reshape two -1", lambda a: cc.reshape(a, (-1, -1)), ShapeError, "Reshape", []),
    ("matmul inner dims", lambda a: cc.matmul(a, cc.placeholder("float32", shape=(4, 5), name="m")),
     ShapeError, "MatMul", ["(2, 3)", "(4, 5)"]),
    ("matmul transpose_b inner dims", lambda a: cc.matmul(a, a, transpose_b=False), ShapeError, "MatMul",
     ["(2, 3)"]),
    ("matmul rank 1", lambda a: cc.matmul(a, cc.placeholder("float32", shape=(3,), name="r1")), ShapeError,
     "MatMul", []),
    ("float32 + float64", lambda a: a + cc.placeholder("float64", shape=(2, 3), name="d"), DTypeError, "Add",
     ["float32", "float64"]),
    ("float64 * float32", lambda a: cc.placeholder("float64", shape=(3,), name="d") * a, DTypeError, "Mul",
     ["float32", "float64"]),
    ("exp of int", lambda a: cc.exp(cc.placeholder("int32", shape=(2,), name="i")), DTypeError, "Exp",
     ["int32"]),
    ("int tensor * python float", lambda a: cc.placeholder("int32", shape=(2,), name="i") * 0.5, DTypeError,
     "Mul", ["int32"]),
    ("maximum float32/int32", lambda a: cc.maximum(a, cc.placeholder("int32", shape=(3,), name="i")),
     DTypeError, "Maximum", ["float32", "int32"]),
]


@pytest.mark.parametrize("label, build, error, op_type, words", BUILD_ERRORS, ids=[e[0] for e in BUILD_ERRORS])
def test_build_errors(healthy, label, build, error, op_type, words) -> None:
    a = cc.placeholder("float32", shape=(2, 3), name="a")
    before = len(healthy.graph.get_operations())
    with pytest.raises(error) as info:
        build(a)
    message = str(info.value)
    assert re.search(rf"\b{op_type}\b", message), message
    for word in words:
        assert word in message, (word, message)
    # The user's line is the lambda in BUILD_ERRORS, the innermost frame outside graphgrad.
    found = re.search(re.escape(__file__) + r":(\d+)", message)
    assert found, message
    lambda_lines = {line for _, _, line in build.__code__.co_lines() if line is not None}
    assert int(found.group(1)) in lambda_lines, (found.group(1), lambda_lines)
    # A failed build adds no node of the failing type.
    added = [op.type for op in healthy.graph.get_operations()[before:]]
    assert op_type not in added, added
    healthy.check()


def test_dtype_mismatch_names_both_dtypes(graph) -> None:
    a = cc.placeholder("float32", shape=(3,), name="a")
    b = cc.placeholder("float64", shape=(3,), name="b")
    line = _line() + 2
    with pytest.raises(DTypeError) as info:
        cc.add(a, b)
    message = str(info.value)
    assert "float32" in message and "float64" in message
    assert "Add" in message and f"{__file__}:{line}" in message
    with pytest.raises(TypeError):  # DTypeError is a TypeError
        b - a


@pytest.mark.parametrize("target", ["cpu", "reference"])
def test_shape_errors_found_with_the_fed_shapes_name_the_op_and_line(graph, target) -> None:
    healthy = Healthy(graph, target)
    # (None, 3) * (None,) is fine until the fed sizes say otherwise.
    p = cc.placeholder("float32", shape=(None, 3), name="p")
    q = cc.placeholder("float32", shape=(None,), name="q")
    r = p * q; line = _line()  # noqa: E702
    assert r.shape == (None, 3)
    with pytest.raises(ShapeError) as info:
        healthy.sess.run(r, {p: np.ones((2, 3), "float32"), q: np.ones(4, "float32")})
    message = str(info.value)
    assert "Mul" in message and "(2, 3)" in message and "(4,)" in message
    assert f"{__file__}:{line}" in message
    # Compatible feeds work.
    got = healthy.sess.run(r, {p: np.ones((2, 3), "float32"), q: np.full(3, 2.0, "float32")})
    np.testing.assert_array_equal(got, np.full((2, 3), 2.0))
    healthy.check()


@pytest.mark.parametrize("target", ["cpu", "reference"])
def test_batch_mismatch_names_the_fed_placeholders(graph, target) -> None:
    healthy = Healthy(graph, target)
    x = cc.placeholder("float32", shape=(None, 3), name="batch_x"); x_line = _line()  # noqa: E702
    y = cc.placeholder("float32", shape=(None,), name="batch_y"); y_line = _line()  # noqa: E702
    other = cc.placeholder("float32", shape=(None,), name="other")
    w = cc.Variable(np.ones((3, 1), "float32"), name="w")
    pair = x[:, 0] + y; pair_line = _line()  # noqa: E702
    prediction = cc.reshape(x @ w, (-1,))
    loss = cc.reduce_mean(cc.square(prediction - y)) + cc.reduce_sum(other); loss_line = _line()  # noqa: E702
    train = optim.GradientDescentOptimizer(0.01).minimize(loss)
    xv, ov = np.arange(15, dtype="float32").reshape(5, 3), np.ones(2, "float32")
    for fetch, op_type, line in ((pair, "Add", pair_line), (loss, "Sub", loss_line),
                                 ([train, loss], "Sub", loss_line)):
        with pytest.raises(ShapeError) as info:
            healthy.sess.run(fetch, {x: xv, y: np.ones(4, "float32"), other: ov})
        message = str(info.value)
        assert re.search(rf"\b{op_type}\b", message) and f"{__file__}:{line}" in message, message
        assert f"'batch_x' (5, 3) at {__file__}:{x_line}" in message, message
        assert f"'batch_y' (4,) at {__file__}:{y_line}" in message, message
        assert "'other'" not in message, message
    # The same fetches run once the batches agree.
    yv = np.arange(5, dtype="float32")
    np.testing.assert_array_equal(healthy.sess.run(pair, {x: xv, y: yv}), xv[:, 0] + yv)
    expected = np.mean((xv.sum(axis=1) - yv) ** 2) + 2.0
    np.testing.assert_allclose(healthy.sess.run(loss, {x: xv, y: yv, other: ov}), expected, rtol=1e-6)
    healthy.sess.run(train, {x: xv, y: yv, other: ov})
    healthy.check()


# -- feeds --------------------------------------------------------------------------------------------

def test_missing_feed_names_the_placeholder(healthy) -> None:
    z = cc.placeholder("float32", shape=(None, 4), name="my_input"); line = _line()  # noqa: E702
    out = cc.reduce_sum(z) + cc.reduce_sum(healthy.x)
    with pytest.raises(FeedError) as info:
        healthy.sess.run(out, {healthy.x: np.ones((2, 3), "float32")})
    message = str(info.value)
    assert "my_input" in message
    assert "(?, 4)" in message and "float32" in message
    assert f"{__file__}:{line}" in message
    with pytest.raises(FeedError, match="my_input"):
        healthy.sess.run(cc.exp(z))
    healthy.check()


@pytest.mark.parametrize("value, words", [
    (np.ones((2, 3, 1), "float32"), ["(2, 3, 1)"]),      # wrong rank
    (np.ones((3,), "float32"), ["(3,)"]),                # wrong rank
    (np.ones((2, 4), "float32"), ["(2, 4)"]),            # wrong size of a known dim
    (np.ones((2, 2), "float32"), ["(2, 2)"]),
    (np.float32(1.0), ["()"]),                           # scalar for a matrix
    (np.ones((1, 2), "float32"), ["(1, 2)"]),
])
def test_wrong_feed_shape(healthy, value, words) -> None:
    with pytest.raises(FeedError) as info:
        healthy.sess.run(healthy.y, {healthy.x: value})
    message = str(info.value)
    assert "ok_x" in message and "(?, 3)" in message
    for word in words:
        assert word in message
    healthy.check()


NOT_NUMBERS = [
    # (label, value fed to a float32 (None, 3) placeholder, words in the message)
    ("ragged rows", [[1.0, 2.0, 3.0], [4.0, 5.0]], ["ragged", "value[1] has length 2", "value[0] has length 3"]),
    ("ragged depth", [[1.0, 2.0, 3.0], [4.0, 5.0, [6.0]]], ["ragged", "value[1][2] has length 1"]),
    ("ragged arrays", [np.ones(3), np.ones(2)], ["ragged", "value[1] has length 2"]),
    ("None", None, ["None"]),
    ("None inside", [[1.0, None, 3.0]], ["holds None"]),
    ("strings", [["1", "2", "3"]], ["strings"]),
    ("a string", "1.0", ["strings"]),
    ("string array", np.array([["a", "b", "c"]]), ["strings"]),
    ("an object inside", [[1.0, object(), 3.0]], ["'object'"]),
    ("a dict", {"a": 1}, ["'dict'"]),
    ("object array", np.ones((1, 3), dtype=object), ["dtype object"]),
    ("huge int", [[2 ** 70, 1, 2]], ["71 bits"]),
]


@pytest.mark.parametrize("label, value, words", NOT_NUMBERS, ids=[n[0] for n in NOT_NUMBERS])
def test_feeds_that_are_not_arrays_of_numbers(healthy, label, value, words) -> None:
    z = cc.placeholder("float32", shape=(None, 3), name="not_numbers"); line = _line()  # noqa: E702
    with pytest.raises(FeedError) as info:
        healthy.sess.run(cc.identity(z), {z: value})
    message = str(info.value)
    assert "'not_numbers'" in message and f"{__file__}:{line}" in message, message
    for word in words:
        assert word in message, (word, message)
    healthy.check()


@pytest.mark.parametrize("placeholder_dtype, value", [
    ("float32", np.full((2, 3), 1e300, "float64")),       # beyond float32's range (0.1 rounds, as TF1)
    ("float32", np.array([1, 2 ** 24 + 1], "int64")),     # nor 2**24 + 1
    ("int32", np.array([1.5, 2.0])),
    ("int32", np.array([1, 2 ** 40], "int64")),          # does not fit
    ("int32", np.array([1.0, 2.0], "float32")),          # float data for ints: no silent casts
    ("float64", np.array([1 + 2j, 3j])),
    ("bool", np.array([0, 1], "int32")),
    ("int32", [1, 2 ** 40]),                             # a Python list is not wrapped to fit either
])
def test_lossy_feed_dtype(healthy, placeholder_dtype, value) -> None:
    p = cc.placeholder(placeholder_dtype, shape=(None,) * np.ndim(value), name="lossy")
    out = cc.identity(p)
    with pytest.raises(FeedError) as info:
        healthy.sess.run(out, {p: value})
    message = str(info.value)
    assert "lossy" in message and placeholder_dtype in message
    assert np.asarray(value).dtype.name in message
    healthy.check()


@pytest.mark.parametrize("placeholder_dtype, value, expected", [
    ("int32", np.array([0, 3, 2 ** 31 - 1, -2 ** 31], "int64"), np.array([0, 3, 2 ** 31 - 1, -2 ** 31], "int32")),
    ("int32", np.array([], "int64"), np.array([], "int32")),
    ("float64", np.array([0.1, 1e30], "float32"), np.array([0.1, 1e30], "float32").astype("float64")),
    ("float64", np.array([1, 2], "int32"), np.array([1.0, 2.0])),
    ("float32", np.array([1, 2], "int16"), np.array([1.0, 2.0], "float32")),
    ("float32", np.array([0.5, 16.0, -0.0, np.inf], "float64"), np.array([0.5, 16.0, -0.0, np.inf], "float32")),
    ("float32", np.array([3, 2 ** 24], "int64"), np.array([3.0, 2.0 ** 24], "float32")),
    ("int64", np.array([1, 2], "int32"), np.array([1, 2], "int64")),
    ("int32", [3, -2 ** 31], np.array([3, -2 ** 31], "int32")),
    ("int32", [], np.array([], "int32")),
])
def test_lossless_feeds_are_accepted(healthy, placeholder_dtype, value, expected) -> None:
    p = cc.placeholder(placeholder_dtype, shape=(None,), name="fine")
    out = p * 1
    got = healthy.sess.run(out, {p: value})
    assert got.dtype == np.dtype(placeholder_dtype)
    np.testing.assert_array_equal(got, expected)
    healthy.check()


def test_int64_labels_train(graph) -> None:
    x = cc.placeholder("float32", shape=(None, 2), name="x")
    labels = cc.placeholder("int32", shape=(None,), name="labels")
    w = cc.Variable(np.zeros((2, 3), "float32"), name="w")
    loss = cc.reduce_mean(cc.nn.sparse_softmax_cross_entropy_with_logits(labels=labels, logits=x @ w))
    train = optim.GradientDescentOptimizer(0.1).minimize(loss)
    with Session(graph) as sess:
        _, value = sess.run([train, loss], {x: np.ones((4, 2), "float32"), labels: np.array([0, 1, 2, 1])})
    np.testing.assert_allclose(value, np.log(3.0), rtol=1e-6)


def test_feeding_a_variable(healthy) -> None:
    with pytest.raises(FeedError, match="a variable: use Variable.load"):
        healthy.sess.run(healthy.y, {healthy.x: np.ones((2, 3), "float32"), healthy.v: np.ones(3, "float32")})
    healthy.check()


# -- graphs ---------------------------------------------------------------------------------------------

def test_fetching_from_another_graph(healthy) -> None:
    other = cc.Graph()
    with other.as_default():
        foreign = cc.placeholder("float32", shape=(2,), name="foreign")
        foreign_out = cc.exp(foreign, name="foreign_exp")
    with pytest.raises(GraphMismatchError, match="foreign_exp"):
        healthy.sess.run(foreign_out, {foreign: np.ones(2, "float32")})
    with pytest.raises(GraphMismatchError):
        healthy.sess.run([healthy.y, {"f": foreign_out}], {healthy.x: np.ones((1, 3), "float32")})
    with pytest.raises(GraphMismatchError, match="foreign"):
        healthy.sess.run(healthy.y, {healthy.x: np.ones((1, 3), "float32"), foreign: np.ones(2, "float32")})
    if healthy.sess.target == "cpu":
        with pytest.raises(GraphMismatchError):
            healthy.sess.compile(foreign_out, {foreign: np.ones(2, "float32")})
    healthy.check()


def test_combining_tensors_of_two_graphs(healthy) -> None:
    other = cc.Graph()
    with other.as_default():
        foreign = cc.placeholder("float32", shape=(3,), name="foreign")
    for build in (lambda: healthy.v + foreign, lambda: cc.maximum(foreign, healthy.v),
                  lambda: cc.matmul(cc.reshape(foreign, (1, 3)), cc.reshape(healthy.v, (3, 1))),
                  lambda: cc.group(healthy.step, foreign), lambda: cc.where(foreign > healthy.v, foreign, foreign)):
        with pytest.raises(GraphMismatchError) as info:
            build()
        assert "foreign" in str(info.value) or "ok_v" in str(info.value) or "graph" in str(info.value)
    with pytest.raises(GraphMismatchError):
        cc.gradients(cc.reduce_sum(healthy.v), [foreign])
    healthy.check()


# -- gradients --------------------------------------------------------------------------------------------

def test_minimize_without_a_path_to_any_variable(healthy) -> None:
    z = cc.placeholder("float32", shape=(None,), name="z")
    loss = cc.reduce_sum(z * z)
    line = _line() + 2
    with pytest.raises(NoGradientError) as info:
        optim.GradientDescentOptimizer(0.1).minimize(loss)
    message = str(info.value)
    assert "No gradients provided for any variable" in message
    assert "ok_v" in message
    assert f"{__file__}:{line}" in message
    # Only integer paths to the variable: still no gradient.
    int_loss = cc.cast(cc.reduce_sum(cc.cast(healthy.v, "int32")), "float32")
    with pytest.raises(NoGradientError):
        optim.GradientDescentOptimizer(0.1).minimize(int_loss)
    with pytest.raises(NoGradientError):
        optim.GradientDescentOptimizer(0.1).minimize(cc.reduce_sum(cc.stop_gradient(healthy.v)))
    healthy.check()


# -- hostile names ----------------------------------------------------------------------------------------

HOSTILE = [
    'x" = call void @evil()\n',
    'EVIL_q"uote',
    "EVIL_single'quote",
    "EVIL_back\\slash",
    "EVIL_new\nline",
    "EVIL_percent%0",
    "EVIL_at@main",
    "EVIL_brace}",
    "EVIL_{brace",
    '"; define void @evil() { ret void }\n',
    "EVIL_\x00nul\ttab\r",
    "EVIL_ünïcödé€",
    "EVIL_#;!metadata !0",
    "graphgrad_step",
]


def test_hostile_names_compile_run_and_stay_out_of_ir(graph) -> None:
    x = cc.placeholder("float32", shape=(None, 2), name=HOSTILE[0])
    v = cc.Variable(np.array([0.5, -0.5], "float32"), name=HOSTILE[1])
    out = x
    for index, name in enumerate(HOSTILE[2:]):
        with cc.name_scope(name if index % 3 == 0 else "plain"):
            if index % 2:
                out = cc.tanh(out * v, name=name)
            else:
                out = cc.add(out, v, name=name)
    total = cc.reduce_sum(out, axis=1, name="EVIL_reduce%}")
    assert {op.name for op in graph.get_operations()} >= {HOSTILE[0], HOSTILE[1]}

    xv = np.array([[1.0, 2.0], [-1.0, 0.25], [0.0, 3.0]], "float32")
    expected = xv.astype("float64")
    for index in range(len(HOSTILE) - 2):
        expected = np.tanh(expected * [0.5, -0.5]) if index % 2 else expected + [0.5, -0.5]
    expected = expected.sum(axis=1)
    (grad,) = cc.gradients(total, [v])
    with Session(graph) as sess:
        got, g = sess.run([total, grad], {x: xv})
        exe = sess.compile([total, grad], {x: xv})
    np.testing.assert_allclose(got, expected, rtol=1e-5)
    with Session(graph, target="reference") as ref:
        np.testing.assert_allclose(g, ref.run(grad, {x: xv}), rtol=1e-5)
    for stage in ("llvm", "llvm-opt", "asm", "ptx"):
        text = exe.dump(stage)
        assert "EVIL" not in text and "evil" not in text, stage
    assert "EVIL" in exe.dump("graph") and "EVIL" in exe.dump("kernels")
    assert "EVIL" in exe.report()
    # Feeding by a hostile name works too.
    np.testing.assert_allclose(sess_run_by_name(graph, total, HOSTILE[0] + ":0", xv), expected, rtol=1e-5)


def sess_run_by_name(graph, fetch, name, value):
    with Session(graph) as sess:
        return sess.run(fetch, {name: value})


# -- NaN and Inf -------------------------------------------------------------------------------------------

NAN, INF = np.nan, np.inf

IEEE_UNARY = [
    ("exp", cc.exp, [INF, -INF, NAN, 0.0, -0.0, 1000.0, -1000.0]),
    ("log", cc.log, [0.0, -0.0, -1.0, INF, -INF, NAN, 1.0]),
    ("sqrt", cc.sqrt, [-1.0, -0.0, 0.0, INF, -INF, NAN, 4.0]),
    ("rsqrt", cc.rsqrt, [0.0, INF, -1.0, NAN, 4.0]),
    ("tanh", cc.tanh, [INF, -INF, NAN, 0.0, -0.0, 50.0, -50.0]),
    ("sigmoid", cc.sigmoid, [INF, -INF, NAN, 0.0, 1000.0]),
    ("relu", cc.nn.relu, [INF, -INF, NAN, -0.0, -1.0]),
    ("abs", cc.abs, [INF, -INF, NAN, -0.0]),
    ("neg", cc.negative, [INF, -INF, NAN, 0.0]),
    ("square", cc.square, [INF, -INF, NAN, 1e30]),
    ("sign", cc.sign, [INF, -INF, NAN, 0.0, -3.0]),
]


def _compare_targets(graph, fetches, feeds):
    with np.errstate(all="ignore"):
        with Session(graph, target="cpu") as sess:
            cpu = sess.run(fetches, feeds)
        with Session(graph, target="reference") as ref:
            expected = ref.run(fetches, feeds)
    return cpu, expected


@pytest.mark.parametrize("dtype", ["float32", "float64"])
@pytest.mark.parametrize("name, fn, values", IEEE_UNARY, ids=[u[0] for u in IEEE_UNARY])
def test_ieee_unary(graph, dtype, name, fn, values) -> None:
    x = cc.placeholder(dtype, shape=(None,), name="x")
    xv = np.array(values, dtype)
    cpu, ref = _compare_targets(graph, fn(x), {x: xv})
    np.testing.assert_array_equal(cpu, ref)
    assert cpu.dtype == ref.dtype == np.dtype(dtype)
    # numpy is the authority on specials.
    with np.errstate(all="ignore"):
        np.testing.assert_array_equal(np.isnan(cpu), np.isnan(ref))
        np.testing.assert_array_equal(np.signbit(cpu[np.isinf(cpu)]), np.signbit(ref[np.isinf(ref)]))


@pytest.mark.parametrize("dtype", ["float32", "float64"])
def test_ieee_specific_values(graph, dtype) -> None:
    x = cc.placeholder(dtype, shape=(None,), name="x")
    y = cc.placeholder(dtype, shape=(None,), name="y")
    fetches = {
        "exp": cc.exp(x * 1000.0), "log": cc.log(x), "sqrt": cc.sqrt(x),
        "max": cc.maximum(x, y), "min": cc.minimum(x, y), "mul": x * y, "div": x / y,
    }
    xv = np.array([INF, -INF, 0.0, -1.0, NAN, 1.0, 0.0], dtype)
    yv = np.array([0.0, 1.0, INF, NAN, 2.0, NAN, 0.0], dtype)
    cpu, ref = _compare_targets(graph, fetches, {x: xv, y: yv})
    for key in fetches:
        np.testing.assert_array_equal(cpu[key], ref[key], err_msg=key)
    assert cpu["exp"][0] == INF and cpu["exp"][1] == 0.0
    assert cpu["log"][2] == -INF and np.isnan(cpu["log"][3])
    assert np.isnan(cpu["sqrt"][3]) and np.isnan(cpu["sqrt"][1])
    assert np.isnan(cpu["max"][3]) and np.isnan(cpu["max"][4]) and np.isnan(cpu["max"][5])
    assert np.isnan(cpu["min"][3]) and np.isnan(cpu["min"][4]) and np.isnan(cpu["min"][5])
    assert np.isnan(cpu["mul"][0]) and np.isnan(cpu["mul"][2])          # inf*0, 0*inf
    assert cpu["div"][0] == INF and np.isnan(cpu["div"][6])              # inf/0, 0/0


@pytest.mark.parametrize("dtype", ["float32", "float64"])
def test_ieee_reductions_and_softmax(graph, dtype) -> None:
    m = cc.placeholder(dtype, shape=(None, 4), name="m")
    huge = np.finfo(dtype).max / 4
    mv = np.array([
        [1.0, NAN, 2.0, 3.0],      # NaN row
        [huge, 0.0, 1.0, 2.0],     # a huge logit
        [1000.0, 0.0, 0.0, 0.0],
        [INF, 0.0, 1.0, 2.0],
        [-INF, -INF, -INF, -INF],
        [-INF, 0.0, 0.0, 0.0],
        [NAN, NAN, NAN, NAN],
        [0.0, 0.0, 0.0, 0.0],
    ], dtype)
    fetches = {
        "max": cc.reduce_max(m, axis=1), "sum": cc.reduce_sum(m, axis=1),
        "softmax": cc.nn.softmax(m),
    }
    cpu, ref = _compare_targets(graph, fetches, {m: mv})
    exact = [0, 1, 2, 3, 4, 6, 7]
    for key in fetches:
        np.testing.assert_array_equal(cpu[key][exact], ref[key][exact], err_msg=key)
    np.testing.assert_allclose(cpu["softmax"][5], ref["softmax"][5], rtol=1e-6)
    assert np.isnan(cpu["max"][0]) and np.isnan(cpu["sum"][0])
    assert cpu["max"][1] == huge and cpu["max"][4] == -INF
    np.testing.assert_array_equal(cpu["softmax"][1], [1.0, 0.0, 0.0, 0.0])
    np.testing.assert_array_equal(cpu["softmax"][2], [1.0, 0.0, 0.0, 0.0])
    np.testing.assert_array_equal(cpu["softmax"][7], [0.25] * 4)
    assert np.all(np.isnan(cpu["softmax"][0]))
    assert cpu["softmax"][5][0] == 0.0
    assert np.all(np.isnan(cpu["softmax"][4])) and np.all(np.isnan(cpu["softmax"][6]))
    assert np.isnan(cpu["softmax"][3][0])  # inf - inf


@pytest.mark.parametrize("dtype", ["float32", "float64"])
def test_log_softmax_and_logsumexp_with_huge_logits(graph, dtype) -> None:
    m = cc.placeholder(dtype, shape=(None, 3), name="m")
    mv = np.array([[1e4, 0.0, -1e4], [-1e4, -1e4, -1e4], [INF, 0.0, 1.0]], dtype)
    fetches = [cc.nn.log_softmax(m), cc.reduce_logsumexp(m, axis=1)]
    cpu, ref = _compare_targets(graph, fetches, {m: mv})
    np.testing.assert_allclose(cpu[0][:2], ref[0][:2], rtol=1e-6)
    np.testing.assert_allclose(cpu[1][:2], ref[1][:2], rtol=1e-6)
    np.testing.assert_array_equal(cpu[0][0], [0.0, -1e4, -2e4])
    assert cpu[1][2] == INF
    np.testing.assert_array_equal(np.isnan(cpu[0][2]), np.isnan(ref[0][2]))


POW_SPECIALS = [
    (1.0, NAN),       # pow(1, y) is 1 for any y, even NaN (IEEE 754, C99, numpy)
    (-1.0, INF),      # pow(-1, ±inf) is 1
    (-1.0, -INF),
    (-INF, 0.5),      # pow(-inf, y>0 not an odd integer) is +inf
    (-INF, -0.5),     # pow(-inf, y<0 not an odd integer) is +0
    (-0.0, -1.0),     # pow(-0, negative odd integer) is -inf
]


@pytest.mark.parametrize("dtype", ["float32", "float64"])
def test_ieee_pow_specials(graph, dtype) -> None:
    x = cc.placeholder(dtype, shape=(None,), name="x")
    y = cc.placeholder(dtype, shape=(None,), name="y")
    xv = np.array([p[0] for p in POW_SPECIALS], dtype)
    yv = np.array([p[1] for p in POW_SPECIALS], dtype)
    cpu, ref = _compare_targets(graph, x ** y, {x: xv, y: yv})
    with np.errstate(all="ignore"):
        np.testing.assert_array_equal(ref, np.power(xv, yv))
    np.testing.assert_array_equal(cpu, ref)


@pytest.mark.parametrize("dtype", ["float32", "float64"])
def test_ieee_pow_common_specials(graph, dtype) -> None:
    x = cc.placeholder(dtype, shape=(None,), name="x")
    y = cc.placeholder(dtype, shape=(None,), name="y")
    pairs = [(NAN, 0.0), (0.0, -1.0), (-8.0, 1 / 3), (0.0, 0.0), (INF, -1.0), (2.0, INF),
             (0.5, INF), (-INF, 3.0), (NAN, 1.0), (-2.0, 0.5), (1.0, 1e10)]
    xv = np.array([p[0] for p in pairs], dtype)
    yv = np.array([p[1] for p in pairs], dtype)
    cpu, ref = _compare_targets(graph, x ** y, {x: xv, y: yv})
    np.testing.assert_array_equal(cpu, ref)


@pytest.mark.parametrize("dtype", ["float32", "float64"])
def test_pow_is_accurate_for_integer_exponents(graph, dtype) -> None:
    x = cc.placeholder(dtype, shape=(None,), name="x")
    y = cc.placeholder(dtype, shape=(None,), name="y")
    xv = np.array([3.0, -2.0, 10.0, 7.0, 1.5, 0.1], dtype)
    yv = np.array([2.0, 3.0, 20.0, 5.0, 2.0, 3.0], dtype)
    with Session(graph) as sess:
        got = sess.run([x ** y, x ** 2], {x: xv, y: yv})
    expected = np.power(xv, yv)
    ulps = np.abs(got[0] - expected) / np.spacing(np.abs(expected))
    assert ulps.max() <= 2, ulps
    np.testing.assert_array_equal(got[1], xv * xv)
    np.testing.assert_array_equal(got[0][:2], [9.0, -8.0])


def test_python_lists_feed_float32_placeholders(graph) -> None:
    x = cc.placeholder("float32", shape=(None, 2), name="x")
    with Session(graph) as sess:
        got = sess.run(x * 2.0, {x: [[1.0, 2.5], [0.1, 3.0]]})
    np.testing.assert_array_equal(got, np.array([[1.0, 2.5], [0.1, 3.0]], "float32") * 2)
    assert got.dtype == np.float32


def _read_only(size: int) -> np.ndarray:
    array = np.zeros(size, "float32")
    array.setflags(write=False)
    return array


def _unwritable_dump(monkeypatch) -> None:
    monkeypatch.setenv("GRAPHGRAD_DUMP", "/proc/graphgrad_dump")
    x = cc.placeholder("float32", (2,), name="dumped")
    Session().run(x * 2.0, {x: np.ones(2, "float32")})


USER_MISTAKES = {
    # name: (what the user does, given monkeypatch; error; pattern)
    "control dependency on a number": (lambda mp: cc.control_dependencies([3]), TypeError,
                                       "control_dependencies takes operations and tensors, got 3"),
    "feed_dict given as a list": (lambda mp: Session().run(cc.constant(1.0) * 2.0, [1.0, 2.0]), FeedError,
                                  "feed_dict must be a dict"),
    "text that is not Unicode": (lambda mp: cc.summary.text("notes", "bad \ud800"), ValueError,
                                 "summary.text 'notes': the text is not valid Unicode"),
    "a literal too large for float32": (lambda mp: cc.Variable(np.zeros(2, "float32"), name="v").load(
        [1e39, 0.0], Session()), DTypeError, "cannot load float64 data into the float32 variable 'v'"),
    "an unusable GRAPHGRAD_DUMP": (_unwritable_dump, OSError, "GRAPHGRAD_DUMP='/proc/graphgrad_dump'"),
    "a cond branch returning an operation": (
        lambda mp: cc.cond(cc.constant(True), lambda: cc.constant(1.0), lambda: cc.no_op()), TypeError,
        "returned the operation .* not a tensor; build the operation inside the function"),
    "a shape of 2**64 elements": (lambda mp: cc.broadcast_to(cc.constant(1.0), (2**32, 2**32)), ShapeError,
                                  r"BroadcastTo: its result \(4294967296, 4294967296\) would have 18446744073709551616"),
    "a read-only out= array": (lambda mp: Session().run(cc.constant([1.0, 2.0]) * 2.0, out=_read_only(2)),
                               ValueError, r"out= needs a writeable array of shape \(2,\), got a read-only one"),
    "a scan whose accumulator grows": (
        lambda mp: cc.scan(lambda acc, row: cc.concat([acc, row], 0), cc.constant(np.ones((5, 3))),
                           initializer=cc.constant(np.zeros(3))),
        ShapeError, r"body \(defined at .*test_errors.py:\d+, scan's fn\) changes the shape of loop variable 0"),
    "None among the ys of gradients": (
        lambda mp: cc.gradients([cc.reduce_sum(cc.Variable(np.ones(2))), None], cc.global_variables()),
        TypeError, r"gradients: ys\[1\] is None"),
}


@pytest.mark.parametrize("name", sorted(USER_MISTAKES))
def test_user_mistakes_are_named_in_the_error(graph, name: str, monkeypatch) -> None:
    make, error, pattern = USER_MISTAKES[name]
    with pytest.raises(error, match=pattern):
        make(monkeypatch)


def test_control_dependencies_none_clears_the_dependencies_around_it(graph) -> None:
    """TF1's ``control_dependencies(None)``: ops built inside depend on nothing from outside."""
    v = cc.Variable(np.zeros(2), name="v")
    bump = cc.assign_add(v, [1.0, 1.0])
    with cc.control_dependencies([bump]):
        with cc.control_dependencies(None):
            free = v * 2.0
        ordered = v * 3.0
    assert free.op.control_inputs == () and ordered.op.control_inputs == (bump.op,)


def test_a_script_in_a_directory_named_importlib_keeps_its_line(tmp_path) -> None:
    """Only the import machinery's own frames are skipped when looking for the user's line."""
    import subprocess
    import sys
    script = tmp_path / "my_importlib_experiments" / "train.py"
    script.parent.mkdir()
    script.write_text("import compiler as cc\nx = cc.constant([1.0, 2.0]) + cc.constant([1.0, 2.0, 3.0])\n")
    root = __file__.rsplit("/tests/", 1)[0]
    done = subprocess.run([sys.executable, str(script)], capture_output=True, text=True, cwd=root,
                          env={**__import__("os").environ, "PYTHONPATH": root})
    assert f"(at {script}:2)" in done.stderr, done.stderr[-2000:]


@pytest.mark.parametrize("target", ["cpu", "reference", "cuda-emulated"])
def test_a_step_too_big_for_memory_names_its_largest_buffer_and_the_user_line(target: str) -> None:
    # 2^23 x 2^22 float32 is 128 TiB: beyond any process's address space, so the allocation fails
    # even where the kernel would promise memory it does not have.
    graph = cc.Graph()
    with graph.as_default():
        rows = cc.placeholder("float32", (None, 1), name="rows")
        columns = cc.placeholder("float32", (1, None), name="columns")
        healthy = Healthy(graph, target)
        outer = cc.exp(rows * columns, name="outer"); line = _line()  # noqa: E702
        total = cc.reduce_sum(outer, axis=1) + cc.reduce_sum(cc.transpose(outer), axis=0)[:1]
    feeds = {rows: np.ones((1 << 23, 1), "float32"), columns: np.ones((1, 1 << 22), "float32")}
    with pytest.raises(MemoryError) as error:
        healthy.sess.run(total, feeds)
    message = str(error.value)
    assert f"test_errors.py:{line}" in message
    if target != "reference":   # there numpy's own message names the product before the exp
        assert "out of host memory" in message and "128.0 TiB for Exp 'outer' float32[8388608, 4194304]" in message
    healthy.check()
    healthy.sess.close()


def test_session_api_mistakes_get_clear_errors() -> None:
    graph = cc.Graph()
    with graph.as_default():
        x = cc.placeholder("float32", (None,), name="x")
        y = x * 2.0
        v = cc.Variable(np.float32(0.0), name="v")
        init = cc.global_variables_initializer()
        inside = []
        branch = cc.cond(cc.reduce_sum(x) > 0.0, lambda: inside.append(x * 3.0) or inside[0], lambda: x)
    value = np.ones(3, "float32")
    with Session(graph) as sess:
        with pytest.raises(FeedError, match="feed_dict must be a dict .* got a ndarray"):
            sess.run(y, value)                       # the dict forgotten
        with pytest.raises(ValueError, match="hold an initializer"):
            sess.compile([init, v])
        with pytest.raises(FeedError, match="computed inside a cond branch or a loop body"):
            sess.run(branch, {x: value, inside[0]: np.full(3, 100.0, "float32")})
        exe = sess.compile([y, y + 1.0], {x: value})
        with pytest.raises(ValueError, match="outputs has 1 entries for 2 fetches"):
            exe.run({x: value}, [None])
        np.testing.assert_array_equal(exe.run({"x:0": value})[1], value * 2.0 + 1.0)   # names, as Session.run
    with pytest.raises(TypeError, match=r"give the target by name: Session\(target='cpu'\)"):
        Session("cpu")


@pytest.mark.parametrize("value, dtype, message", [
    ([1.5, -2.7], "int32", "cannot be int32 without changing it"),
    (3.9, "bool", "cannot be bool"),
    (np.array([2 ** 40]), "int32", "outside int32's range"),
])
def test_a_variable_s_initial_value_is_not_changed_silently(value, dtype: str, message: str) -> None:
    with cc.Graph().as_default(), pytest.raises(DTypeError, match=message):
        cc.Variable(value, dtype=dtype)
    with cc.Graph().as_default():   # a numpy array converts as astype, as TF1's
        assert cc.Variable(np.array([1.5, -2.7]), dtype="int32").initial_value.tolist() == [1, -2]


def test_fetches_in_a_defaultdict_come_back_in_one() -> None:
    import collections
    graph = cc.Graph()
    with graph.as_default():
        x = cc.constant(2.0)
    with Session(graph) as sess:
        result = sess.run(collections.defaultdict(list, doubled=x * 2.0))
    assert isinstance(result, collections.defaultdict) and result["doubled"] == 4.0 and result["missing"] == []


@pytest.mark.parametrize("make, error, message", [
    (lambda: cc.pad(cc.constant(np.ones((2, 2, 2))), [[0, 1, 1], [0, 0, 0]]), ShapeError, r"shape \[rank, 2\]"),
    (lambda: cc.pad(cc.constant(np.ones((2, 2))), [1, 1, 0, 0]), ShapeError, r"shape \[rank, 2\]"),
    (lambda: cc.argmax(cc.constant([1.0, 2.0]), output_type="bool"), DTypeError, "int32 or int64"),
    (lambda: cc.unsorted_segment_sum(cc.constant([1.0]), cc.constant([0]), 2.7), ValueError, "an int >= 0"),
], ids=["pad-rows-of-three", "pad-flat", "argmax-output-type", "segments-float"])
def test_malformed_arguments_are_refused(make, error: type, message: str) -> None:
    with cc.Graph().as_default(), pytest.raises(error, match=message):
        make()


def test_a_wide_integer_feed_that_a_float64_cannot_hold_is_refused() -> None:
    x = cc.placeholder("float64", (2,), name="x")
    with Session(x.graph) as sess:
        with pytest.raises(FeedError, match="without losing"):
            sess.run(x * 1.0, {x: np.array([2 ** 53 + 1, 5], "int64")})
        np.testing.assert_array_equal(sess.run(x * 1.0, {x: np.array([3, 5], "int64")}), [3.0, 5.0])

"""The static graph: default graphs, names, tensors, operators, variables, shapes and locations."""
from __future__ import annotations

import inspect
import operator

import numpy as np
import pytest

import compiler as cc
from runtime import Session


def _line() -> int:
    """The caller's current line number."""
    return inspect.currentframe().f_back.f_lineno  # type: ignore[union-attr]


# -- default graph -------------------------------------------------------------------------------

def test_as_default_nests_and_restores() -> None:
    outer, inner = cc.Graph(), cc.Graph()
    with outer.as_default() as entered:
        assert entered is outer
        assert cc.get_default_graph() is outer
        a = cc.constant(1.0)
        with inner.as_default():
            assert cc.get_default_graph() is inner
            b = cc.constant(2.0)
        assert cc.get_default_graph() is outer
    assert a.graph is outer and b.graph is inner
    assert cc.get_default_graph() is not outer and cc.get_default_graph() is not inner
    assert [op.name for op in outer.get_operations()] == ["Const"]
    assert [op.name for op in inner.get_operations()] == ["Const"]


def test_reset_default_graph_gives_a_new_empty_graph() -> None:
    before = cc.get_default_graph()
    cc.reset_default_graph()
    after = cc.get_default_graph()
    assert after is not before
    assert after.get_operations() == []
    with cc.Graph().as_default():
        with pytest.raises(RuntimeError):
            cc.reset_default_graph()


def test_nodes_go_to_the_graph_of_their_inputs(graph) -> None:
    other = cc.Graph()
    with other.as_default():
        x = cc.placeholder("float32", shape=(2,), name="x")
    y = cc.exp(x)  # built while `graph` is the default
    assert y.graph is other
    assert all(op.graph is other for op in other.get_operations())
    assert graph.get_operations() == []


# -- names -----------------------------------------------------------------------------------------

def test_name_scopes_prefix_names(graph) -> None:
    with cc.name_scope("a") as scope_a:
        assert scope_a == "a/"
        with cc.name_scope("b") as scope_ab:
            assert scope_ab == "a/b/"
            x = cc.placeholder("float32", shape=(2,), name="x")
            s = x + x
            s2 = cc.add(x, x)
            named = cc.exp(x, name="e")
        y = cc.exp(x)
    z = cc.negative(x)
    assert x.op.name == "a/b/x" and x.name == "a/b/x:0"
    assert s.op.name == "a/b/Add" and s2.op.name == "a/b/Add_1"
    assert named.op.name == "a/b/e"
    assert y.op.name == "a/Exp"
    assert z.op.name == "Neg"
    assert graph.get_operation_by_name("a/b/Add") is s.op
    assert graph.get_tensor_by_name("a/b/Add:0") is s


def test_unique_names(graph) -> None:
    names = [cc.placeholder("float32", shape=(), name="x").op.name for _ in range(3)]
    assert names == ["x", "x_1", "x_2"]
    # A user-chosen name that collides with a generated one still gets a fresh name.
    explicit = cc.constant(1.0, name="x_3")
    again = cc.constant(1.0, name="x")
    assert explicit.op.name == "x_3"
    assert again.op.name not in {"x", "x_1", "x_2", "x_3"}
    all_names = [op.name for op in graph.get_operations()]
    assert len(all_names) == len(set(all_names))


def test_same_name_in_different_scopes_is_not_renamed(graph) -> None:
    with cc.name_scope("s1"):
        a = cc.constant(1.0, name="c")
    with cc.name_scope("s2"):
        b = cc.constant(1.0, name="c")
    with cc.name_scope("s1"):                       # TF1: a scope's name is made unique, as an op's
        c = cc.constant(1.0, name="c")
    with cc.name_scope("s1/"):                      # ... unless it ends in "/": that scope itself
        d = cc.constant(1.0, name="c")
    assert (a.op.name, b.op.name, c.op.name, d.op.name) == ("s1/c", "s2/c", "s1_1/c", "s1/c_1")


def test_name_scopes_follow_tf1_for_none_the_empty_name_defaults_and_name_equals_scope(graph) -> None:
    """name_scope(None) raised a TypeError from inside the graph, "" gave names with a leading
    slash, "a/" a double slash, and ``tf.identity(h, name=scope)`` named the node "layer/layer"."""
    with cc.name_scope("outer"):
        with cc.name_scope(None) as top:
            at_top = cc.constant(1.0, name="t")
        with cc.name_scope("") as empty:
            also_top = cc.constant(1.0, name="t")
        with cc.name_scope(None, "Default", []) as defaulted:
            by_default = cc.constant(1.0, name="d")
        with cc.name_scope("layer") as scope:
            hidden = cc.constant(1.0) * 2.0
            result = cc.identity(hidden, name=scope)
    assert (top, empty, defaulted, scope) == ("", "", "outer/Default/", "outer/layer/")
    assert (at_top.op.name, also_top.op.name, by_default.op.name) == ("t", "t_1", "outer/Default/d")
    assert result.op.name == "outer/layer" and hidden.op.name == "outer/layer/Mul"
    with pytest.raises(TypeError, match=r"name_scope: the name must be a string or None, got 3"):
        with cc.name_scope(3):
            pass


def test_names_with_a_colon_are_refused_and_a_trailing_slash_names_exactly(graph) -> None:
    """``name="a:0"`` made the tensor "a:0:0", which ``run("a:0")`` could not find."""
    x = cc.placeholder("float32", (2,), name="x")
    with pytest.raises(ValueError, match=r"'a:0' is not a valid name: ':' separates"):
        cc.identity(x, name="a:0")
    with cc.name_scope("deep"):
        exact = cc.identity(x, name="y/")
    assert exact.op.name == "y" and exact.name == "y:0"
    with pytest.raises(ValueError, match=r"cannot name a node 'y/': 'y' is taken"):
        cc.identity(x, name="y/")


# -- tensors -------------------------------------------------------------------------------------

def test_tensor_attributes(graph) -> None:
    x = cc.placeholder("float32", shape=(None, 3), name="x")
    y = cc.exp(x, name="y")
    assert x.shape == (None, 3) and isinstance(x.shape, tuple)
    assert x.dtype == np.dtype("float32") and isinstance(x.dtype, np.dtype)
    assert y.name == "y:0"
    assert isinstance(y.op, cc.Operation)
    assert y.op.type == "Exp" and y.op.name == "y"
    assert y.op.inputs == (x,)
    assert y.op.outputs == (y,)
    assert y.graph is graph and y.op.graph is graph
    assert y.ndim == 2
    assert "y:0" in repr(y)


def test_tensor_has_no_truth_value(graph) -> None:
    x = cc.placeholder("float32", shape=(2,))
    with pytest.raises(TypeError):
        bool(x < 1.0)


def test_tensors_are_hashable_by_identity(graph) -> None:
    x = cc.placeholder("float32", shape=(2,))
    y = cc.placeholder("float32", shape=(2,))
    table = {x: 1, y: 2}
    assert table[x] == 1 and table[y] == 2


OPERATORS = [
    # (label, build from a tensor t, numpy of an array a, op type)
    ("t + 2", lambda t: t + 2.0, lambda a: a + 2.0, "Add"),
    ("2 + t", lambda t: 2.0 + t, lambda a: 2.0 + a, "Add"),
    ("t - 2", lambda t: t - 2.0, lambda a: a - 2.0, "Sub"),
    ("2 - t", lambda t: 2.0 - t, lambda a: 2.0 - a, "Sub"),
    ("t * 3", lambda t: t * 3.0, lambda a: a * 3.0, "Mul"),
    ("3 * t", lambda t: 3.0 * t, lambda a: 3.0 * a, "Mul"),
    ("t / 4", lambda t: t / 4.0, lambda a: a / 4.0, "Div"),
    ("4 / t", lambda t: 4.0 / t, lambda a: 4.0 / a, "Div"),
    ("t ** 2", lambda t: t ** 2, lambda a: a ** 2, "Pow"),
    ("2 ** t", lambda t: 2.0 ** t, lambda a: 2.0 ** a, "Pow"),
    ("-t", lambda t: -t, lambda a: -a, "Neg"),
    ("t < 2", lambda t: t < 2.0, lambda a: a < 2.0, "Less"),
    ("t <= 2", lambda t: t <= 2.0, lambda a: a <= 2.0, "LessEqual"),
    ("t > 2", lambda t: t > 2.0, lambda a: a > 2.0, "Greater"),
    ("t >= 2", lambda t: t >= 2.0, lambda a: a >= 2.0, "GreaterEqual"),
    ("2 < t", lambda t: 2.0 < t, lambda a: 2.0 < a, "Greater"),
    ("2 >= t", lambda t: 2.0 >= t, lambda a: 2.0 >= a, "LessEqual"),
    ("t + t", lambda t: t + t, lambda a: a + a, "Add"),
    ("t * t - t", lambda t: t * t - t, lambda a: a * a - a, "Sub"),
]


@pytest.mark.parametrize("dtype", ["float32", "float64"])
@pytest.mark.parametrize("label, build, expect, op_type", OPERATORS, ids=[o[0] for o in OPERATORS])
def test_operators(graph, label, build, expect, op_type, dtype) -> None:
    t = cc.placeholder(dtype, shape=(None, 3), name="t")
    out = build(t)
    assert isinstance(out, cc.Tensor)
    assert out.op.type == op_type
    assert out.shape == (None, 3)
    value = np.array([[0.5, 1.0, 2.0], [3.0, 2.0, 1.5]], dtype)
    expected = expect(value)
    # Weak typing: a Python number takes the tensor's dtype.
    assert out.dtype == expected.dtype
    for target in ("reference", "cpu"):
        with Session(graph, target=target) as sess:
            got = sess.run(out, feed_dict={t: value})
        assert got.dtype == expected.dtype
        np.testing.assert_allclose(got, expected, rtol=1e-6)


def test_matmul_operator(graph) -> None:
    a = cc.placeholder("float64", shape=(None, 3), name="a")
    w = np.arange(6.0).reshape(3, 2)
    out = a @ cc.constant(w)
    assert out.op.type == "MatMul" and out.shape == (None, 2) and out.dtype == np.float64
    rev = cc.constant(w.T) @ cc.transpose(a)
    assert rev.shape == (2, None)
    value = np.arange(12.0).reshape(4, 3)
    with Session(graph) as sess:
        got, got_rev = sess.run([out, rev], feed_dict={a: value})
    np.testing.assert_allclose(got, value @ w)
    np.testing.assert_allclose(got_rev, w.T @ value.T)


def test_numpy_array_on_the_left_defers_to_the_tensor(graph) -> None:
    t = cc.placeholder("float32", shape=(3,), name="t")
    out = np.ones(3, "float32") + t
    assert isinstance(out, cc.Tensor) and out.op.type == "Add"
    with Session(graph) as sess:
        np.testing.assert_array_equal(sess.run(out, {t: np.arange(3, dtype="float32")}), [1, 2, 3])


@pytest.mark.parametrize("dtype", ["float32", "float64", "int32", "int64"])
def test_python_scalars_take_the_tensor_dtype(graph, dtype) -> None:
    t = cc.placeholder(dtype, shape=(2,))
    for out in (t + 1, 1 + t, t * 2, 2 * t, t - 1, 1 - t):
        assert out.dtype == np.dtype(dtype)
        assert all(i.dtype == np.dtype(dtype) for i in out.op.inputs)
    if dtype.startswith("float"):
        for out in (t * 2.5, 2.5 * t, t / 3.0, 3.0 / t, t ** 0.5):
            assert out.dtype == np.dtype(dtype)


def test_float64_tensor_with_python_float_stays_float64(graph) -> None:
    t = cc.placeholder("float64", shape=(1,), name="t")
    out = t * 0.1 + 1e-300
    assert out.dtype == np.float64
    with Session(graph) as sess:
        got = sess.run(out, {t: np.array([3.0])})
    assert got.dtype == np.float64
    # In float32 0.1 would be 0.10000000149..., and 1e-300 would flush to 0.
    assert got[0] == 3.0 * 0.1 + 1e-300


def test_float_scalar_with_int_tensor_is_a_dtype_error(graph) -> None:
    t = cc.placeholder("int32", shape=(2,))
    with pytest.raises(cc.DTypeError, match="int32"):
        t * 1.5


def test_python_constants_default_like_tf1(graph) -> None:
    assert cc.constant(1.0).dtype == np.float32
    assert cc.constant(1).dtype == np.int32
    assert cc.constant(True).dtype == np.bool_
    assert cc.constant(np.float64(1.0)).dtype == np.float64
    assert cc.constant(np.zeros(2, "int64")).dtype == np.int64
    assert cc.constant([1.0, 2.0], dtype="float64").dtype == np.float64


# -- variables -----------------------------------------------------------------------------------

def test_variable_collections(graph) -> None:
    w = cc.Variable(np.zeros((2, 2), "float32"), name="w")
    step = cc.Variable(0, name="step", trainable=False)
    b = cc.Variable(np.zeros(2), name="b")
    assert isinstance(w, cc.Tensor) and w.op.type == "Variable"
    assert w.trainable and not step.trainable
    assert cc.global_variables() == [w, step, b]
    assert cc.trainable_variables() == [w, b]
    assert graph.get_collection(cc.GraphKeys.GLOBAL_VARIABLES) == [w, step, b]
    assert graph.get_collection(cc.GraphKeys.TRAINABLE_VARIABLES) == [w, b]
    assert step.dtype == np.int64 or step.dtype == np.int32
    assert b.dtype == np.float64  # a numpy array keeps its dtype
    assert cc.Variable(0.5).dtype == np.float32  # a Python float makes a float32 variable
    other = cc.Graph()
    assert cc.global_variables(other) == []
    with other.as_default():
        v = cc.Variable(1.0)
    assert cc.global_variables(other) == [v]
    assert v not in cc.global_variables()


def test_variable_custom_collections(graph) -> None:
    v = cc.Variable(np.zeros(2, "float32"), name="v", collections=["mine"])
    assert graph.get_collection("mine") == [v]
    assert v in graph.get_collection(cc.GraphKeys.TRAINABLE_VARIABLES)
    assert v not in graph.get_collection(cc.GraphKeys.GLOBAL_VARIABLES)


def test_variable_initial_value_is_a_copy(graph) -> None:
    init = np.ones(3, "float32")
    v = cc.Variable(init, name="v")
    init[:] = 5.0
    np.testing.assert_array_equal(v.initial_value, np.ones(3))
    assert v.shape == (3,)


def test_a_variable_of_a_tensor_takes_its_value_when_made_as_tf1s_idiom(graph) -> None:
    """tf.Variable(tf.truncated_normal(...)) and friends, the commonest TF1 idiom, were refused."""
    cc.set_random_seed(3)
    w = cc.Variable(cc.truncated_normal([400, 10], stddev=0.1), name="w")
    b = cc.Variable(cc.zeros([10]), name="b")
    doubled = cc.Variable(w * 2.0, name="doubled")
    shared = cc.get_variable("shared", initializer=cc.fill([2, 3], 0.5))
    assert (w.dtype, w.shape, b.shape, shared.shape) == (np.float32, (400, 10), (10,), (2, 3))
    assert np.abs(w.initial_value).max() <= 0.2 and 0.08 < w.initial_value.std() < 0.095   # truncated at 2 sigma
    np.testing.assert_array_equal(doubled.initial_value, 2.0 * w.initial_value)
    x = cc.placeholder("float32", (3,), name="x")
    with pytest.raises(TypeError, match=r"Variable 'v': its initial value 'Mul_1:0' is computed when the variable "
                                        r"is made, and it depends on Placeholder 'x'"):
        cc.Variable(x * 2.0, name="v")
    with Session(graph) as sess:
        sess.run(cc.global_variables_initializer())
        np.testing.assert_array_equal(sess.run(w), w.initial_value)
        np.testing.assert_array_equal(sess.run(shared), np.full((2, 3), 0.5, "float32"))


# -- shapes --------------------------------------------------------------------------------------

BROADCASTS = [
    ((None, 3), (3,), (None, 3)),
    ((None, 3), (1, 3), (None, 3)),
    ((None, 1, 3), (4, 1), (None, 4, 3)),
    ((None,), (5,), (5,)),
    ((None,), (1,), (None,)),
    ((None, None), (None, 1), (None, None)),
    ((2, 1), (1, 5), (2, 5)),
    ((), (None, 2), (None, 2)),
    ((7, 1, 1), (2, 3), (7, 2, 3)),
]


@pytest.mark.parametrize("a_shape, b_shape, out_shape", BROADCASTS)
def test_broadcast_shape_inference(graph, a_shape, b_shape, out_shape) -> None:
    a = cc.placeholder("float32", shape=a_shape)
    b = cc.placeholder("float32", shape=b_shape)
    assert (a + b).shape == out_shape
    assert (b * a).shape == out_shape
    assert cc.maximum(a, b).shape == out_shape
    assert (a < b).shape == out_shape and (a < b).dtype == np.bool_


@pytest.mark.parametrize("a_shape, b_shape", [((2, 3), (4, 3)), ((None, 3), (2,)), ((3,), (2, 2))])
def test_incompatible_broadcast_is_a_shape_error(graph, a_shape, b_shape) -> None:
    a = cc.placeholder("float32", shape=a_shape)
    b = cc.placeholder("float32", shape=b_shape)
    with pytest.raises(cc.ShapeError):
        a + b


def test_none_dims_flow_through_ops(graph) -> None:
    x = cc.placeholder("float32", shape=(None, 4), name="x")
    assert cc.reduce_sum(x, axis=1).shape == (None,)
    assert cc.reduce_sum(x, axis=0).shape == (4,)
    assert cc.reduce_sum(x, axis=1, keepdims=True).shape == (None, 1)
    assert cc.reduce_sum(x).shape == ()
    assert cc.transpose(x).shape == (4, None)
    assert (x @ cc.constant(np.ones((4, 2), "float32"))).shape == (None, 2)
    assert cc.exp(x).shape == (None, 4)


def test_placeholder_shapes_are_checked_and_none_is_a_scalar(graph) -> None:
    assert cc.placeholder("float32", shape=None).shape == ()    # TF1's shapeless placeholder, as a scalar
    with pytest.raises(cc.ShapeError):
        cc.placeholder("float32", shape=(-2, 3))
    with pytest.raises(TypeError):
        cc.placeholder("complex64", shape=(2,))


# -- locations -----------------------------------------------------------------------------------

def test_node_records_the_user_location(graph) -> None:
    x = cc.placeholder("float32", shape=(None, 3), name="x"); x_line = _line()  # noqa: E702
    y = x * 2.0 + 1.0; y_line = _line()  # noqa: E702
    z = cc.reduce_sum(cc.exp(y)); z_line = _line()  # noqa: E702
    assert isinstance(x.op.location, cc.SourceLocation)
    for tensor, line in ((x, x_line), (y, y_line), (z, z_line)):
        assert tensor.op.location.filename == __file__
        assert tensor.op.location.lineno == line
        assert str(tensor.op.location) == f"{__file__}:{line}"
    # The Mul and the constants built for the Python scalars point at the same line.
    for op in graph.get_operations():
        if op.location.lineno == y_line:
            assert op.location.filename == __file__
    assert {op.type for op in graph.get_operations() if op.location.lineno == y_line} >= {"Mul", "Add", "Const"}
    assert __file__ in repr(z.op)


def _helper_builds_a_node(x):
    return cc.exp(x)


def test_location_is_the_innermost_user_frame(graph) -> None:
    x = cc.placeholder("float32", shape=(2,))
    y = _helper_builds_a_node(x)
    helper_line = inspect.getsourcelines(_helper_builds_a_node)[1] + 1
    assert y.op.location.lineno == helper_line
    assert y.op.location.filename == __file__


def test_gradient_nodes_point_at_the_gradients_call(graph) -> None:
    x = cc.placeholder("float64", shape=(3,))
    loss = cc.reduce_sum(cc.exp(x) * x)
    (dx,) = cc.gradients(loss, [x]); line = _line()  # noqa: E702
    new_ops = [op for op in graph.get_operations() if op.name.startswith("gradients/")]
    assert new_ops
    assert all(op.location.filename == __file__ and op.location.lineno == line for op in new_ops)


def test_binary_operator_builds_one_op(graph) -> None:
    a = cc.placeholder("float32", shape=(2,))
    b = cc.placeholder("float32", shape=(2,))
    before = len(graph.get_operations())
    _ = a + b
    assert len(graph.get_operations()) == before + 1
    for sym, fn in (("+", operator.add), ("-", operator.sub), ("*", operator.mul)):
        assert fn(a, b).op.inputs == (a, b), sym


def test_python_scalars_join_the_graph_of_the_tensor_operand() -> None:
    g = cc.Graph()
    with g.as_default():
        x = cc.placeholder("float64", shape=(3,), name="x")
        v = cc.Variable(np.ones(3), name="v")
    # Built outside `with g.as_default()`, as with `Session(g)` code that builds more nodes later.
    y = x * 2.0 + 1.0
    z = x ** 3
    inc = v.assign_add(1.0)
    (dz,) = cc.gradients(cc.reduce_sum(z), [x])
    assert y.graph is g and z.graph is g and inc.graph is g and dz.graph is g
    assert all(op.graph is g for op in g.get_operations())
    with Session(g) as sess:
        got = sess.run([y, dz], {x: np.array([1.0, 2.0, 3.0])})
    np.testing.assert_allclose(got[0], [3.0, 5.0, 7.0])
    np.testing.assert_allclose(got[1], [3.0, 12.0, 27.0])


@pytest.mark.parametrize("initial, dtype", [(1.0, "float32"), ([1.0, 2.0], "float32"), (np.float64(1.0), "float64"),
                                            (np.array(1.0), "float64"), (np.float32(1.0), "float32"), (3, "int32"),
                                            ([1, 2], "int32"), (2**40, "int64"), (np.int64(3), "int64")])
def test_a_variable_takes_python_numbers_as_tf1_and_numpy_values_with_their_dtype(initial, dtype) -> None:
    """As TF1 and cc.constant: Python floats make float32, Python ints int32 (int64 past its range)."""
    with cc.Graph().as_default():
        variable = cc.Variable(initial)
    assert variable.dtype == np.dtype(dtype)


# (cc.concat(x, 0) of one tensor is x, as TF1's: test_tf1_argument_names.py)
ITERATIONS = {
    "list": lambda x: list(x),
    "stack": lambda x: cc.stack(x),
    "tuple": lambda x: cc.tuple(x),
}


@pytest.mark.parametrize("shape", [(None, 3), (2, 3)], ids=["unknown-rows", "two-rows"])
@pytest.mark.parametrize("how", sorted(ITERATIONS))
def test_iterating_a_tensor_is_a_type_error_not_endless_slices(how: str, shape: tuple) -> None:
    """As in TF1's graph mode. Python used to iterate through __getitem__: 0, 1, 2, ... forever
    along an unknown dimension (a new slice op each step), or to a misleading index error."""
    with cc.Graph().as_default():
        x = cc.placeholder("float32", shape, name="x")
        with pytest.raises(TypeError, match="symbolic Tensor is not iterable: 'x:0'") as raised:
            ITERATIONS[how](x)
        with pytest.raises(TypeError, match="not iterable"):
            with cc.control_dependencies(x):
                pass
    assert f"(at {__file__}:" in str(raised.value)


def test_tf1_shape_idioms() -> None:
    with cc.Graph().as_default():
        x = cc.placeholder("float32", (None, 3), name="x")
        assert x.get_shape()[1].value == 3 and x.get_shape()[0] is None
        assert x.get_shape()[1] == 3 and cc.dimension_value(x.get_shape()[1]) == 3
        assert x.shape == [None, 3] and x.shape[1:] == [3] and not x.shape != [None, 3]
        assert {x.shape: 1}[(None, 3)] == 1
        assert x.shape.merge_with((5, None)) == (5, 3) and x.shape.dims == [None, 3]
        assert x.shape.is_compatible_with([2, 3]) and not x.shape.is_compatible_with([2, 4])
        with pytest.raises(ValueError, match=r"shapes \(\?, 3\) and \(2, 4\) are not compatible"):
            x.shape.merge_with([2, 4])
        assert x.shape.concatenate([7]) == (None, 3, 7) and x.shape.with_rank(2) is x.shape


def test_a_finalized_graph_refuses_new_ops_and_still_runs() -> None:
    graph = cc.Graph()
    with graph.as_default():
        w = cc.Variable(np.ones(2), name="w")
        step = w.assign_add([1.0, 1.0])
    graph.finalize()
    assert graph.finalized
    with graph.as_default(), pytest.raises(RuntimeError, match="the graph is finalized and cannot be modified"):
        w * 2.0
    with Session(graph) as sess:
        np.testing.assert_array_equal(sess.run(step), [2.0, 2.0])


def test_tf1_graph_helpers_device_collections_consumers_and_attrs() -> None:
    with cc.Graph().as_default() as graph:
        with cc.device("/gpu:0"), graph.device("/cpu:0"):   # accepted; the Session's target decides
            x = cc.placeholder("float32", (2,), name="x")
            y = x * 2.0
        assert x.device == "" and y.op.device == ""
        assert x.consumers() == [y.op] and y.op.values() == (y,)
        assert cc.is_tensor(y) and not cc.is_tensor(np.zeros(2))
        ref = cc.get_collection_ref("mine")
        ref.append(y)
        assert cc.get_collection("mine") == [y]
        graph.clear_collection("mine")
        assert cc.get_collection("mine") == []
        assert cc.reduce_sum(x, axis=0).op.get_attr("axis") == 0
        with pytest.raises(ValueError, match="has no attribute 'nope'"):
            y.op.get_attr("nope")


def test_variable_takes_tf1_s_arguments_and_has_an_initializer() -> None:
    with cc.Graph().as_default() as graph:
        frozen = cc.Variable(0.0, False)                       # TF1's order: trainable second
        deferred = cc.Variable(lambda: np.ones(2), name="deferred")
        assert not frozen.trainable and cc.trainable_variables(graph) == [deferred]
        with pytest.raises(ValueError, match="collections must be a list of collection names, got the string"):
            cc.Variable(1.0, collections=cc.GraphKeys.LOCAL_VARIABLES)
        with pytest.raises(TypeError, match="name must be a string, got 5"):
            cc.Variable(1.0, name=5)
        grow = deferred.assign_add([1.0, 1.0], read_value=False)
        assert isinstance(grow, cc.Operation)
        with Session(graph) as sess:
            sess.run(grow)
            np.testing.assert_array_equal(sess.run(deferred.value()), [2.0, 2.0])
            sess.run(deferred.initializer)
            np.testing.assert_array_equal(sess.run(deferred), [1.0, 1.0])
        assert deferred.initializer.name == "deferred/Assign" and deferred.initializer is deferred.initializer


def test_group_flattens_nested_structures_and_refuses_other_values() -> None:
    with cc.Graph().as_default() as graph:
        a, b = cc.Variable(np.zeros(2), name="a"), cc.Variable(np.zeros(2), name="b")
        step = cc.group(a.assign_add([1.0, 1.0]), [b.assign_add([1.0, 1.0]), {"again": b.assign_add([1.0, 1.0])}])
        for bad in (5, None, "a"):
            with pytest.raises(TypeError, match="group: takes tensors and operations"):
                cc.group([step, bad])
        with Session(graph) as sess:
            sess.run(step)
            assert sess.run([a, b])[0].tolist() == [1.0, 1.0] and sess.run(b).tolist() == [2.0, 2.0]


def test_constant_with_a_shape_lays_values_out_as_tf1() -> None:
    with cc.Graph().as_default():
        assert cc.constant([1, 2, 3], shape=[3, 3]).op.attrs["value"].tolist() == [[1, 2, 3], [3, 3, 3], [3, 3, 3]]
        assert cc.constant([1, 2, 3, 4, 5, 6], shape=[2, 3]).op.attrs["value"].tolist() == [[1, 2, 3], [4, 5, 6]]
        assert cc.constant(7.0, shape=[2]).op.attrs["value"].tolist() == [7.0, 7.0]
        for bad in (5, [2, None], [2.5]):
            with pytest.raises(cc.ShapeError, match="shape must be a list of sizes"):
                cc.constant(1.0, shape=bad)
        with pytest.raises(cc.ShapeError, match=r"3 values do not fit shape \(2,\)"):
            cc.constant([1, 2, 3], shape=[2])


def test_positional_calls_of_the_older_orders_are_refused_not_misread() -> None:
    with cc.Graph().as_default() as graph:
        with pytest.raises(TypeError, match="trainable must be True or False, got 'w'.*pass name= by keyword"):
            cc.Variable(0.0, "w")
        v = cc.Variable(np.zeros(2), name="v")
        for call in (lambda: v.assign([1.0, 1.0], "named"), lambda: cc.assign(v, [1.0, 1.0], "named"),
                     lambda: cc.assign_add(v, [1.0, 1.0], "named")):
            with pytest.raises(TypeError, match="expected True, False or None before name=, got 'named'"):
                call()
        with pytest.raises(TypeError, match="moments: shift is True"):
            cc.nn.moments(cc.zeros((2, 3)), [0], True)
        with pytest.raises(TypeError, match="hessians: expected True or False after name, got 'zero'"):
            cc.hessians(cc.reduce_sum(v * v), [v], "h", "zero")
        graph.finalize()
        assert v.initializer.type == "InitVariables"   # made in a finalized graph too, as TF1 has it


@pytest.mark.parametrize("uses", ["Print", "get_variable", "layers", "clip_by_norm"])
def test_a_graph_no_longer_referenced_is_freed(uses: str) -> None:
    # Tables keyed by a graph's ops or by the graph itself held values that refer back to it.
    import gc
    import weakref
    refs = []
    for _ in range(3):
        graph = cc.Graph()
        with graph.as_default():
            table = cc.Variable(np.zeros((20, 5), "float32"), name="table")
            if uses == "Print":
                cc.Print(cc.reduce_sum(table), [table], "table: ")
            elif uses == "get_variable":
                cc.get_variable("v", [3])
            elif uses == "layers":
                cc.layers.dense(cc.ones([2, 3]), 4)
            else:
                cc.clip_by_norm(table, 1.0)
        refs.append(weakref.ref(graph))
        del graph, table
    gc.collect()
    assert [r() for r in refs] == [None, None, None]

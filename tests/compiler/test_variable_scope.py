"""``variable_scope``, ``get_variable`` and the initializers, against TF1's rules."""
from __future__ import annotations

import numpy as np
import pytest

import compiler as cc
from runtime import Session


def test_names_nesting_and_default_names() -> None:
    with cc.Graph().as_default():
        with cc.variable_scope("model"):
            with cc.variable_scope("layer"):
                w = cc.get_variable("w", [2, 3])
                product = w * 2.0
            with cc.variable_scope(None, default_name="dense"):
                first = cc.get_variable("kernel", [1])
            with cc.variable_scope(None, default_name="dense"):
                second = cc.get_variable("kernel", [1])
        assert w.op.name == "model/layer/w" and product.op.name == "model/layer/Mul"
        assert (first.op.name, second.op.name) == ("model/dense/kernel", "model/dense_1/kernel")
        with cc.name_scope("outer"), cc.variable_scope("block"):
            inside = cc.get_variable("v", [1])
            op = inside + 1.0
        assert inside.op.name == "block/v" and op.op.name == "outer/block/Add"   # variables by variable scope


def test_reuse_rules_as_tf1() -> None:
    with cc.Graph().as_default():
        with cc.variable_scope("s"):
            w = cc.get_variable("w", [2])
        with pytest.raises(ValueError, match="Variable s/w already exists, disallowed"):
            with cc.variable_scope("s"):
                cc.get_variable("w", [2])
        with cc.variable_scope("s", reuse=True):
            assert cc.get_variable("w") is w
            with cc.variable_scope("inner"):                         # reuse holds inside
                with pytest.raises(ValueError, match="Variable s/inner/x does not exist"):
                    cc.get_variable("x", [1])
        with cc.variable_scope("s", reuse=cc.AUTO_REUSE):
            assert cc.get_variable("w", [2]) is w
            made = cc.get_variable("new", [3])
            assert cc.get_variable("new") is made
        with pytest.raises(ValueError, match=r"shape \(3,\) differs from the existing \(2,\)"):
            with cc.variable_scope("s", reuse=True):
                cc.get_variable("w", [3])
        with cc.variable_scope("t") as scope:
            v = cc.get_variable("v", [1])
            scope.reuse_variables()
            assert cc.get_variable("v") is v
        with cc.variable_scope(scope, reuse=True):                  # entered again by its object
            assert cc.get_variable("v") is v


def test_initial_values_initializers_dtypes_and_collections() -> None:
    with cc.Graph().as_default() as graph:
        with cc.variable_scope("s", initializer=cc.constant_initializer(0.5)):
            half = cc.get_variable("half", [2, 2])
            counts = cc.get_variable("counts", [3], dtype="int32")     # the scope's float initializer is not used
        given = cc.get_variable("given", initializer=np.arange(4.0))
        number = cc.get_variable("number", [2], initializer=3)
        frozen = cc.get_variable("frozen", [1], trainable=False)
        regularized = cc.get_variable("regularized", initializer=np.array([3.0, 4.0], "float32"),
                                      regularizer=lambda v: 0.5 * cc.reduce_sum(v * v))
        assert half.dtype == np.float32 and counts.dtype == np.int32 and given.dtype == np.float64
        np.testing.assert_array_equal(half.initial_value, np.full((2, 2), 0.5, "float32"))
        np.testing.assert_array_equal(counts.initial_value, [0, 0, 0])
        np.testing.assert_array_equal(number.initial_value, [3, 3])
        assert frozen in graph.get_collection(cc.GraphKeys.GLOBAL_VARIABLES)
        assert frozen not in cc.trainable_variables()
        total = cc.losses.get_regularization_loss()
        with Session(graph) as sess:
            assert sess.run(total) == 12.5
        with pytest.raises(ValueError, match="the shape is needed"):
            cc.get_variable("shapeless")
        assert cc.get_variable("from_tensor", [1], initializer=cc.constant([1.0])).initial_value.tolist() == [1.0]


def test_glorot_and_variance_scaling_have_their_spread() -> None:
    with cc.Graph().as_default():
        cc.set_random_seed(3)
        glorot = cc.glorot_uniform_initializer()((400, 600))
        he = cc.initializers.he_normal()((3, 3, 64, 128))
        truncated = cc.truncated_normal_initializer(stddev=0.1)((50000,))
        uniform = cc.random_uniform_initializer(-2.0, 1.0)((50000,))
    limit = np.sqrt(6.0 / (400 + 600))
    assert glorot.dtype == np.float32 and np.abs(glorot).max() <= limit
    np.testing.assert_allclose(glorot.std(), limit / np.sqrt(3.0), rtol=0.02)
    np.testing.assert_allclose(he.std(), np.sqrt(2.0 / (3 * 3 * 64)), rtol=0.03)   # fan_in of a conv kernel
    assert np.abs(truncated).max() <= 0.2 and -2.0 <= uniform.min() and uniform.max() < 1.0


def test_initializers_repeat_with_their_seeds() -> None:
    values = []
    for _ in range(2):
        with cc.Graph().as_default():
            cc.set_random_seed(7)
            values.append([cc.get_variable("w", [3, 3]).initial_value,
                           cc.random_normal_initializer(seed=5)((4,)), cc.random_normal_initializer(seed=5)((4,))])
    np.testing.assert_array_equal(values[0][0], values[1][0])     # one graph seed, one model
    np.testing.assert_array_equal(values[0][1], values[0][2])     # one op seed, one draw


def test_unseeded_initializer_calls_with_no_op_between_them_differ() -> None:
    """An LSTM's four gate blocks drawn one after another used to be four copies of one block (an
    unseeded initializer's seed is the graph's op count, and a call adds no op); a seeded call
    still repeats, as in TF1."""
    with cc.Graph().as_default():
        cc.set_random_seed(42)
        gates = [cc.orthogonal_initializer()((4, 4)) for _ in range(4)]
        uniform = [cc.glorot_uniform_initializer()((3, 3)) for _ in range(2)]
        seeded = [cc.glorot_uniform_initializer(seed=3)((3, 3)) for _ in range(2)]
    assert not any(np.array_equal(gates[a], gates[b]) for a in range(4) for b in range(a))
    assert not np.array_equal(*uniform)
    np.testing.assert_array_equal(*seeded)


def test_orthogonal_and_constant_initializers() -> None:
    q = cc.orthogonal_initializer(seed=1)((6, 4))
    np.testing.assert_allclose(q.T @ q, np.eye(4), atol=1e-6)
    wide = cc.orthogonal_initializer(gain=2.0, seed=1)((3, 5))
    np.testing.assert_allclose(wide @ wide.T, 4.0 * np.eye(3), atol=1e-5)
    np.testing.assert_array_equal(cc.constant_initializer([1, 2, 3, 4])((2, 2)), [[1, 2], [3, 4]])
    # TF1's rules: float32 by default, a shorter list's last value repeated, a longer one refused.
    assert cc.constant_initializer(3)((2,)).dtype == np.float32
    np.testing.assert_array_equal(cc.constant_initializer([1, 2, 3])((2, 2)), [[1, 2], [3, 3]])
    with pytest.raises(ValueError, match="5 values for a variable of shape"):
        cc.constant_initializer([1, 2, 3, 4, 5])((2, 2))
    with pytest.raises(ValueError, match="mode must be"):
        cc.variance_scaling_initializer(mode="fan_sum")


def test_a_model_function_called_twice_under_auto_reuse_shares_its_layers() -> None:
    # TF1's idiom: the sub-scope counts start again each time "model" opens, so the layers of the
    # second call are named (and so shared) as the first's.
    with cc.Graph().as_default():
        def model(x):
            with cc.variable_scope("model", reuse=cc.AUTO_REUSE):
                return cc.layers.dense(cc.layers.dense(x, 4), 2)
        x = cc.placeholder("float32", (None, 3))
        first, second = model(x), model(x * 1.0)
        assert [v.op.name for v in cc.trainable_variables()] == [
            "model/dense/kernel", "model/dense/bias", "model/dense_1/kernel", "model/dense_1/bias"]
        with Session() as sess:
            value = np.ones((2, 3), "float32")
            np.testing.assert_array_equal(*sess.run([first, second], {x: value}))
    with cc.Graph().as_default():
        x = cc.placeholder("float32", (None, 3))
        unnamed = cc.layers.dense(x, 5)
        shared = cc.layers.dense(x * 2.0, 5, reuse=True)      # TF1: the base name itself, reused
        assert [v.op.name for v in cc.trainable_variables()] == ["dense/kernel", "dense/bias"]
        assert unnamed.shape == shared.shape == (None, 5)
        with cc.variable_scope("explicit"):
            cc.get_variable("kernel", [1])
        with cc.variable_scope(None, default_name="explicit"):
            assert cc.get_variable("kernel", [1]).op.name == "explicit_1/kernel"


def test_variables_and_their_regularizers_belong_to_the_graph_as_a_whole() -> None:
    with cc.Graph().as_default() as graph:
        counter = cc.Variable(0.0, name="counter")
        with cc.control_dependencies([counter.assign_add(1.0)]), cc.name_scope("tower_0"):
            with cc.variable_scope("model"):
                w = cc.get_variable("w", initializer=np.array([1.0, 1.0], "float32"),
                                    regularizer=lambda v: 0.5 * cc.reduce_sum(v * v))
        in_branch = cc.cond(cc.constant(True), lambda: cc.layers.dense(
            cc.ones((1, 2)), 1, kernel_initializer=cc.ones_initializer(),
            kernel_regularizer=lambda k: cc.reduce_sum(k), name="fc"), lambda: cc.zeros((1, 1)))
        assert w.op.control_inputs == () and w.op.name == "model/w"
        assert [t.name for t in cc.losses.get_regularization_losses("model")] == ["model/w/Regularizer/Mul_1:0"]
        with Session(graph) as sess:
            sess.run(w)
            assert sess.run(counter) == 0.0                          # reading w ran no assignment
            assert sess.run(cc.losses.get_regularization_loss()) == 3.0   # 1 + 2, the branch's too
            assert sess.run(in_branch).tolist() == [[2.0]]


def test_tf1_argument_forms_are_taken() -> None:
    with cc.Graph().as_default():
        assert cc.get_variable("z", [2], initializer=cc.zeros_initializer).initial_value.tolist() == [0, 0]
        x = cc.placeholder("float32", (None, 6, 6, 3))
        assert cc.layers.conv2d(x, np.int64(4), np.int64(3)).shape == (None, 4, 4, 4)
        assert cc.layers.dense(cc.layers.flatten(x, data_format="channels_last"), np.int64(2)).shape == (None, 2)
        with pytest.raises(ValueError, match="filters must be a positive int"):
            cc.layers.conv2d(x, 2.5, 3)
        with pytest.raises(ValueError, match="renorm=True is not supported"):
            cc.layers.batch_normalization(x, renorm=True)


def test_get_variable_takes_one_int_as_a_shape_and_names_a_shape_it_cannot_take() -> None:
    """``get_variable("v", 3)`` raised "'int' object is not iterable"; ``[None, 3]`` a bare int() error."""
    with cc.Graph().as_default():
        assert cc.get_variable("v", 3, initializer=cc.zeros_initializer()).shape == (3,)
        with pytest.raises(ValueError, match=r"get_variable: the shape of a new variable must be fully defined, "
                                             r"but w is given \[None, 3\] \(at " + __file__):
            cc.get_variable("w", [None, 3])
        with pytest.raises(TypeError, match=r"the shape of u must be non-negative Python ints, got \[2.5\]"):
            cc.get_variable("u", [2.5])


def test_a_scope_name_with_slashes_opens_its_levels_at_once_as_tf1() -> None:
    """variable_scope("rnn/lstm_cell") was refused."""
    with cc.Graph().as_default():
        with cc.variable_scope("outer"):
            with cc.variable_scope("rnn/lstm_cell") as scope:
                kernel = cc.get_variable("kernel", [2])
                total = kernel * 2.0
        with cc.variable_scope("outer/rnn/lstm_cell", reuse=True):
            again = cc.get_variable("kernel", [2])
    assert scope.name == "outer/rnn/lstm_cell" and kernel.op.name == "outer/rnn/lstm_cell/kernel"
    assert again is kernel and total.op.name == "outer/rnn/lstm_cell/Mul"


def test_scopes_entered_again_name_their_ops_as_tf1() -> None:
    # The multi-tower idiom re-enters the top scope: no "//" and no leading "/" in names.
    with cc.Graph().as_default():
        with cc.name_scope("tower_0"):
            with cc.variable_scope(cc.get_variable_scope(), reuse=cc.AUTO_REUSE):
                w = cc.get_variable("w", [3])
                loss = cc.reduce_sum(w * 2.0, name="loss")
                with cc.name_scope("inner") as inner:
                    pass
        with cc.variable_scope(cc.get_variable_scope()):
            with cc.name_scope("tower_1"):
                other = cc.identity(w, name="loss")
            top = cc.constant(1.0, name="c")
        # A scope opened again: its ops in a name scope made unique, its variables where they were.
        with cc.variable_scope("foo"):
            first = cc.constant(1.0, name="c")
        with cc.variable_scope("foo", reuse=True):
            second = cc.constant(1.0, name="c")
        with cc.variable_scope("foo") as scope:
            pass
        with cc.variable_scope(scope):
            third, v = cc.constant(1.0, name="c"), cc.get_variable("v", [1])
    assert (loss.name, inner, w.name, other.name, top.name) == ("tower_0/loss:0", "tower_0/inner/", "w:0",
                                                                 "tower_1/loss:0", "c:0")
    assert (first.name, second.name, third.name, v.name) == ("foo/c:0", "foo_1/c:0", "foo_3/c:0", "foo/v:0")


def test_constraints_project_after_each_update_and_custom_getters_wrap_as_tf1() -> None:
    import optim
    calls: list[str] = []

    def logged(label: str, scale: float = 1.0):
        def getter(getter, name, *args, **kwargs):
            calls.append(f"{label}:{name}")
            return getter(name, *args, **kwargs) * scale
        return getter

    with cc.Graph().as_default() as graph:
        clipped = cc.get_variable("clipped", [2], initializer=cc.constant_initializer(5.0),
                                  constraint=lambda t: cc.clip_by_value(t, 0.0, 1.0))
        with cc.variable_scope("outer", custom_getter=logged("outer"), constraint=lambda t: cc.maximum(t, 0.5)):
            with cc.variable_scope("inner", custom_getter=logged("inner", 2.0)) as inner:
                doubled = cc.get_variable("v", [2], initializer=cc.ones_initializer())
            floored = cc.get_variable("f", [2], initializer=cc.zeros_initializer(), custom_getter=logged("call"))
        kernel_holder = cc.layers.dense(cc.ones([1, 3]), 2, kernel_constraint=lambda k: k * 0.0, name="dense")
        plain = cc.Variable(np.ones(2, "float32"), name="plain", constraint=lambda t: t / cc.norm(t))
        loss = cc.reduce_sum(clipped) * -1.0 + cc.reduce_sum(doubled) + cc.reduce_sum(floored) \
            + cc.reduce_sum(kernel_holder) + cc.reduce_sum(plain)
        train = optim.GradientDescentOptimizer(0.1).minimize(loss)
        with pytest.raises(ValueError, match="reuse=True cannot be used without a name_or_scope"):
            with cc.variable_scope(None, default_name="d", reuse=True):
                pass
        with cc.variable_scope("resource", use_resource=True, caching_device="/cpu:0", partitioner=None):
            pass
    # The inner scope's getter runs first and reaches the variable through the outer one's.
    assert calls == ["inner:outer/inner/v", "outer:outer/inner/v", "call:outer/f"]
    assert inner.original_name_scope == "outer/inner/" and doubled.op.type == "Mul"
    with Session(graph) as sess:
        sess.run(train)
        values = sess.run({"clipped": clipped, "floored": graph.get_tensor_by_name("outer/f:0"),
                           "kernel": graph.get_tensor_by_name("dense/kernel:0"), "plain": plain})
    np.testing.assert_array_equal(values["clipped"], [1.0, 1.0])
    np.testing.assert_allclose(values["floored"], [0.5, 0.5])          # the scope's constraint: max(-0.1, 0.5)
    np.testing.assert_array_equal(values["kernel"], np.zeros((3, 2)))
    np.testing.assert_allclose(values["plain"], np.full(2, np.sqrt(0.5)), rtol=1e-6)


def test_get_local_variable_is_reset_by_the_local_initializer_and_not_trained() -> None:
    with cc.Graph().as_default() as graph:
        with cc.variable_scope("eval"):
            count = cc.get_local_variable("count", [], initializer=cc.zeros_initializer())
        bump = cc.assign_add(count, 1.0)
    assert count.op.name == "eval/count" and not count.trainable
    assert count in graph.get_collection(cc.GraphKeys.LOCAL_VARIABLES)
    assert count not in graph.get_collection(cc.GraphKeys.GLOBAL_VARIABLES)
    with Session(graph) as sess:
        sess.run(bump)
        sess.run(bump)
        assert sess.run(count) == 2.0
        with graph.as_default():
            sess.run(cc.local_variables_initializer())
        assert sess.run(count) == 0.0


def test_identity_and_unit_scaling_initializers_and_global_step_helpers_as_tf1() -> None:
    import optim
    np.testing.assert_array_equal(cc.identity_initializer(2.0)([2, 3]), [[2.0, 0.0, 0.0], [0.0, 2.0, 0.0]])
    with pytest.raises(ValueError, match="2-D shape"):
        cc.identity_initializer()([2, 2, 2])
    with cc.Graph().as_default():
        draws = cc.uniform_unit_scaling_initializer(factor=1.5, seed=3)([300, 40])
    limit = 1.5 * np.sqrt(3.0 / 300)
    assert draws.dtype == np.float32 and -limit <= draws.min() and draws.max() < limit
    assert draws.max() > 0.95 * limit and draws.min() < -0.95 * limit
    with cc.Graph().as_default() as graph:
        step = optim.create_global_step()
        with pytest.raises(ValueError, match="has a global step already"):
            optim.create_global_step()
        optim.assert_global_step(step)
        with pytest.raises(TypeError, match="integer scalar Variable"):
            optim.assert_global_step(cc.Variable(0.0))
        bump = cc.assign_add(step, 1)
    with Session(graph) as sess:
        sess.run(bump)
        assert optim.global_step(sess, step) == 1

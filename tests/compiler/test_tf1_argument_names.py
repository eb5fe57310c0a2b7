"""TF1's older argument names (``keep_dims``, ``reduction_indices``, ``dim``, ``dimension``,
``squeeze_dims``) are accepted beside the current ones and give the same graph values; giving both
names is an error at the user's line, as in TF1."""
from __future__ import annotations

import numpy as np
import pytest

import compiler as cc
from runtime import Session

# name: (the call with today's names, the same call with TF1's older names)
SAME_CALLS = {
    "reduce_sum": (lambda x: cc.reduce_sum(x, axis=1, keepdims=True),
                   lambda x: cc.reduce_sum(x, reduction_indices=1, keep_dims=True)),
    "reduce_mean": (lambda x: cc.reduce_mean(x, axis=[0, 2]), lambda x: cc.reduce_mean(x, reduction_indices=[0, 2])),
    "reduce_max": (lambda x: cc.reduce_max(x, axis=0, keepdims=True), lambda x: cc.reduce_max(x, 0, keep_dims=True)),
    "reduce_min": (lambda x: cc.reduce_min(x, axis=-1), lambda x: cc.reduce_min(x, reduction_indices=-1)),
    "reduce_prod": (lambda x: cc.reduce_prod(x, axis=2), lambda x: cc.reduce_prod(x, reduction_indices=2)),
    "reduce_logsumexp": (lambda x: cc.reduce_logsumexp(x, axis=1, keepdims=True),
                         lambda x: cc.reduce_logsumexp(x, reduction_indices=[1], keep_dims=True)),
    "argmax": (lambda x: cc.argmax(x, axis=1), lambda x: cc.argmax(x, dimension=1)),
    "argmin": (lambda x: cc.argmin(x, axis=2), lambda x: cc.argmin(x, dimension=2)),
    "softmax": (lambda x: cc.nn.softmax(x, axis=1), lambda x: cc.nn.softmax(x, dim=1)),
    "log_softmax": (lambda x: cc.nn.log_softmax(x, axis=0), lambda x: cc.nn.log_softmax(x, dim=0)),
    "softmax_cross_entropy": (
        lambda x: cc.nn.softmax_cross_entropy_with_logits(labels=cc.nn.softmax(x, axis=1), logits=x * 2.0, axis=1),
        lambda x: cc.nn.softmax_cross_entropy_with_logits(labels=cc.nn.softmax(x, dim=1), logits=x * 2.0, dim=1)),
    "l2_normalize": (lambda x: cc.nn.l2_normalize(x, axis=2), lambda x: cc.nn.l2_normalize(x, dim=2)),
    "moments": (lambda x: cc.nn.moments(x, axes=[0, 1], keepdims=True),
                lambda x: cc.nn.moments(x, [0, 1], shift=None, keep_dims=True)),
    "expand_dims": (lambda x: cc.expand_dims(x, axis=1), lambda x: cc.expand_dims(x, dim=1)),
    "squeeze": (lambda x: cc.squeeze(x[:, :1], axis=[1]), lambda x: cc.squeeze(x[:, :1], squeeze_dims=[1])),
}


@pytest.mark.parametrize("name", sorted(SAME_CALLS))
def test_tf1_names_give_the_same_values(name: str) -> None:
    current, older = SAME_CALLS[name]
    x = cc.placeholder("float64", (3, 4, 5))
    feeds = {x: np.random.default_rng(7).normal(size=(3, 4, 5))}
    with Session() as sess:
        got, expected = sess.run([older(x), current(x)], feeds)
    np.testing.assert_array_equal(np.asarray(got), np.asarray(expected))


@pytest.mark.parametrize("call, pattern", [
    (lambda x: cc.reduce_sum(x, axis=0, reduction_indices=0), "reduce_sum: give axis or its older name "
                                                               "reduction_indices, not both"),
    (lambda x: cc.reduce_mean(x, keepdims=False, keep_dims=True), "reduce_mean: give keepdims or its older name keep_dims"),
    (lambda x: cc.nn.softmax(x, axis=0, dim=1), "softmax: give axis or its older name dim"),
    (lambda x: cc.argmax(x, 0, dimension=1), "argmax: give axis or its older name dimension"),
    (lambda x: cc.expand_dims(x), "expand_dims: axis is required"),
    (lambda x: cc.gather(x, [0], batch_dims=1), r"batch_gather: params \(2, 3\) and indices \(1,\) must share 1 leading"),
    (lambda x: cc.where(x > 0.0), r"where\(condition\) with one argument gives the coordinates"),
    (lambda x: cc.split(x, [1, 2], 1, num=3), "split: num=3 but 2 parts are asked for"),
    (lambda x: cc.matmul(x, x, transpose_b=True, adjoint_b=True), "matmul: give transpose_b or adjoint_b, not both"),
    (lambda x: cc.nn.conv2d(cc.reshape(x, (1, 2, 3, 1)), np.ones((1, 1, 1, 1), "float32"),
                            filters=np.ones((1, 1, 1, 1), "float32")), "conv2d: give filters or its older name filter"),
])
def test_both_names_at_once_is_an_error_at_the_users_line(call, pattern: str) -> None:
    x = cc.placeholder("float32", (2, 3))
    with pytest.raises(ValueError, match=pattern) as raised:
        call(x)
    assert f"(at {__file__}:" in str(raised.value)


_FILTERS = np.random.default_rng(4).normal(size=(2, 2, 3, 2))

# TF1's positional orders and older function names
POSITIONAL_AND_OLDER_NAMES = {
    "unstack-num-axis": (lambda x: cc.stack(cc.unstack(x, 3, 2), axis=0),
                         lambda x: cc.transpose(x, [2, 0, 1])),
    "unstack-num": (lambda x: cc.unstack(x, 2)[1], lambda x: x[1]),
    "to_float-to_double": (lambda x: cc.to_double(cc.to_float(x)), lambda x: cc.cast(cc.cast(x, "float32"), "float64")),
    "div-of-floats": (lambda x: cc.div(x, 2.0), lambda x: x / 2.0),
    "div-of-ints": (lambda x: cc.to_double(cc.div(cc.to_int32(x * 10.0), 3)),
                    lambda x: cc.cast(cc.floordiv(cc.cast(x * 10.0, "int32"), 3), "float64")),
    "truediv-of-ints": (lambda x: cc.truediv(cc.to_int64(x * 10.0), cc.to_int64(x * 0.0 + 4.0)),
                        lambda x: cc.cast(cc.cast(x * 10.0, "int64"), "float64") / 4.0),
    # TF1's positional orders: gather(params, indices, validate_indices, name), pad(..., mode, name),
    # argmax(input, axis, name), conv2d(..., padding, use_cudnn_on_gpu, data_format, dilations, name),
    # conv1d(..., padding, use_cudnn_on_gpu, data_format); None for a data format, input= for a pool
    "gather-positional-name": (lambda x: cc.gather(x, [1, 0], None, "rows"), lambda x: cc.stack([x[1], x[0]])),
    "gather-axis-none": (lambda x: cc.gather(x, [1], axis=None), lambda x: x[1:]),
    "pad-positional-name": (lambda x: cc.pad(x, [[0, 0], [1, 0], [0, 0]], "CONSTANT", "padded"),
                            lambda x: cc.concat([cc.zeros((2, 1, 3), "float64"), x], axis=1)),
    "argmax-positional-name": (lambda x: cc.argmax(x, 1, "best"), lambda x: cc.argmax(x, axis=1)),
    "conv2d-positional": (lambda x: cc.nn.conv2d(cc.reshape(x, (1, 2, 4, 3)), _FILTERS, [1, 1, 1, 1], "VALID", True,
                                                 None, None, "conv"),
                          lambda x: cc.nn.conv2d(cc.reshape(x, (1, 2, 4, 3)), _FILTERS, strides=1, padding="VALID")),
    "conv2d-filters": (lambda x: cc.nn.conv2d(cc.reshape(x, (1, 2, 4, 3)), filters=_FILTERS, padding="SAME",
                                              use_cudnn_on_gpu=False, dilations=None),
                       lambda x: cc.nn.conv2d(cc.reshape(x, (1, 2, 4, 3)), _FILTERS, padding="SAME")),
    "max_pool-input": (lambda x: cc.nn.max_pool(input=cc.reshape(x, (1, 2, 4, 3)), ksize=2, strides=1,
                                                padding="VALID", data_format=None),
                       lambda x: cc.nn.max_pool(cc.reshape(x, (1, 2, 4, 3)), 2, 1, "VALID")),
    "avg_pool-data_format-none": (lambda x: cc.nn.avg_pool(cc.reshape(x, (1, 2, 4, 3)), 2, 2, "SAME", None),
                                  lambda x: cc.nn.avg_pool(cc.reshape(x, (1, 2, 4, 3)), 2, 2, "SAME")),
    "matmul-adjoint": (lambda x: cc.matmul(x, x, adjoint_b=True), lambda x: cc.matmul(x, x, transpose_b=True)),
    "transpose-conjugate": (lambda x: cc.transpose(x, [2, 0, 1], conjugate=True), lambda x: cc.transpose(x, [2, 0, 1])),
    "concat-one-tensor": (lambda x: cc.concat(x, 1), lambda x: x),
    "newaxis": (lambda x: x[:, cc.newaxis], lambda x: cc.expand_dims(x, 1)),
    "split-num": (lambda x: cc.split(x, [1, 3], 1, num=2)[1], lambda x: x[:, 1:]),
    "conv1d-positional": (lambda x: cc.nn.conv1d(x, _FILTERS[0], 1, "SAME", True, None),
                          lambda x: cc.nn.conv1d(x, _FILTERS[0], stride=1, padding="SAME")),
}


@pytest.mark.parametrize("name", sorted(POSITIONAL_AND_OLDER_NAMES))
def test_tf1_positional_orders_and_older_function_names(name: str) -> None:
    """unstack(x, 4) split along axis 4 (TF1: num=4, axis 0); TF1's to_float, div, truediv."""
    tf1, expected = POSITIONAL_AND_OLDER_NAMES[name]
    graph = cc.Graph()
    with graph.as_default():
        x = cc.constant(np.random.default_rng(3).normal(size=(2, 4, 3)))
        got, want = tf1(x), expected(x)
    with Session(graph) as sess:
        got, want = sess.run([got, want])
    assert got.dtype == want.dtype
    np.testing.assert_array_equal(got, want)


def test_tf1_conveniences_eval_run_get_shape_bool_and_placeholder_with_default() -> None:
    graph = cc.Graph()
    with graph.as_default():
        training = cc.placeholder_with_default(False, shape=(), name="training")
        flag = cc.placeholder(cc.bool, (), name="flag")
        v = cc.Variable(np.array([1.0, 2.0]), name="v")
        doubled = cc.where(training, v * 2.0, v)
        init = cc.initialize_all_variables()
        assert cc.all_variables() == [v]
        with pytest.raises(ValueError, match="no default session is registered"):
            doubled.eval()
        with pytest.raises(cc.ShapeError, match=r"the shape \[3\] does not fit the default's \(\)"):
            cc.placeholder_with_default(0.5, shape=[3])
        assert cc.placeholder("float32").shape == ()     # TF1's shapeless placeholder: a scalar here
    assert flag.dtype == np.bool_ and doubled.get_shape().as_list() == [2]
    with graph.as_default():
        images = cc.placeholder("float32", (None, 3, 4), name="images")
    assert images.shape[1:].as_list() == [3, 4] and images.get_shape()[1:].num_elements() == 12
    assert images.shape.rank == 3 and images.shape[0] is None
    with Session(graph) as sess:
        assert cc.get_default_session() is sess
        init.run()
        assert doubled.eval().tolist() == [1.0, 2.0]
        assert doubled.eval({training: True}).tolist() == [2.0, 4.0]
    assert cc.get_default_session() is None
    with Session(graph) as other, Session(graph).as_default() as inner:
        assert cc.get_default_session() is inner
        assert v.eval(session=other).tolist() == [1.0, 2.0]
        with other.as_default():                 # a session re-entered inside another's block
            assert cc.get_default_session() is other
        assert cc.get_default_session() is inner
    with pytest.raises(cc.FeedError, match=r"shape \(2,\) does not match"), Session(graph) as sess:
        sess.run(doubled, {training: np.array([True, False])})


def test_dropout_takes_tf1s_positional_noise_shape() -> None:
    """TF1.15: dropout(x, keep_prob, noise_shape, seed, name, rate); the third was rate here."""
    graph = cc.Graph()
    with graph.as_default():
        x = cc.ones((4, 6))
        dropped = cc.nn.dropout(x, 0.5, [4, 1], 7)
    with Session(graph) as sess:
        values = sess.run(dropped)
    assert all(len(set(row)) == 1 for row in values.tolist())   # one decision per row


def test_initialized_value_starts_another_variable_from_this_ones_initial_value() -> None:
    graph = cc.Graph()
    with graph.as_default():
        w = cc.Variable(np.array([1.0, 2.0]), name="w")
        doubled = cc.Variable(w.initialized_value() * 2.0, name="doubled")
        bump = w.assign_add([10.0, 10.0])
    with Session(graph) as sess:
        sess.run(bump)
        np.testing.assert_array_equal(sess.run(doubled), [2.0, 4.0])
        np.testing.assert_array_equal(sess.run(w.initialized_value()), [11.0, 12.0])


@pytest.mark.parametrize("target", ["cpu", "reference", "cuda-emulated"])
def test_placeholder_with_default_of_shape_none_is_fed_at_any_size(target: str) -> None:
    # TF1's placeholder_with_default(default_batch, shape=[None, 3]) takes other batch sizes fed;
    # here the default's shape was the tensor's, and another size was a FeedError.
    rng = np.random.default_rng(5)
    default, fed = rng.normal(size=(2, 3)), rng.normal(size=(5, 3))
    graph = cc.Graph()
    with graph.as_default():
        batch = cc.placeholder_with_default(default, shape=[None, 3])
        w = cc.Variable(rng.normal(size=(3, 1)), name="w")
        loss = cc.reduce_sum(cc.square(batch @ w))
        (grad,) = cc.gradients(loss, [w])
    assert batch.shape.as_list() == [None, 3]
    with Session(graph, target=target) as sess:
        w_value = sess.run(w)
        for values, feeds in ((default, {}), (fed, {batch: fed})):
            got_loss, got_grad = sess.run([loss, grad], feeds)
            np.testing.assert_allclose(got_loss, np.sum((values @ w_value) ** 2), rtol=1e-12)
            np.testing.assert_allclose(got_grad, 2 * values.T @ (values @ w_value), rtol=1e-12)
        with pytest.raises(cc.FeedError):
            sess.run(loss, {batch: rng.normal(size=(5, 4))})


def test_a_tf1_script_ports_with_one_import_line() -> None:
    # import compiler as tf: tf.train is optim, tf.Session runtime's, tf.random and a shapeless
    # placeholder (a scalar here) as TF1 scripts use them.
    import compiler as tf
    import optim
    from runtime import InteractiveSession, Session
    assert tf.train is optim and tf.Session is Session and tf.InteractiveSession is InteractiveSession
    with tf.Graph().as_default() as graph:
        keep_prob = tf.placeholder(tf.float32, name="keep_prob")
        x = tf.placeholder(tf.float32, [None, 3])
        w = tf.Variable(tf.random.normal([3, 2], seed=1))
        loss = tf.reduce_mean(tf.square(tf.nn.dropout(tf.matmul(x, w), keep_prob=keep_prob)))
        train = tf.train.GradientDescentOptimizer(0.1).minimize(loss)
        draws = tf.random.categorical(tf.constant([[0.0, 1.0]]), 4, seed=2)
        with pytest.raises(tf.ShapeError, match="made without a shape, which is a scalar here"):
            tf.matmul(keep_prob, w)
    assert keep_prob.shape == () and draws.dtype == np.int64
    with tf.Session(graph=graph) as sess:
        sess.run(train, {x: np.ones((4, 3)), keep_prob: 1.0})
        with pytest.raises(tf.FeedError, match="made without a shape"):
            sess.run(loss, {x: np.ones((4, 3)), keep_prob: [1.0, 1.0]})
    with pytest.raises(AttributeError, match="no attribute 'estimator'"):
        tf.estimator

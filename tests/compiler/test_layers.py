"""``cc.layers`` (TF1's ``tf.layers``): each layer equals the ops it is made of, its variables are
named and shared as TF1's, and a model of them trains."""
from __future__ import annotations

import numpy as np
import pytest

import compiler as cc
import optim
from runtime import Session

TARGETS = ["cpu", "reference"]


@pytest.mark.parametrize("target", TARGETS)
def test_dense_and_conv2d_equal_their_ops_with_their_variables(target: str) -> None:
    rng = np.random.default_rng(0)
    graph = cc.Graph()
    with graph.as_default():
        x = cc.placeholder("float64", (None, 3, 4))
        image = cc.placeholder("float64", (None, 5, 5, 2))
        hidden = cc.layers.dense(x, 6, activation=cc.tanh, bias_initializer=cc.constant_initializer(0.1))
        conv = cc.layers.conv2d(image, 4, (3, 2), strides=2, padding="same", name="conv")
        kernel, bias = cc.trainable_variables()[:2]
        conv_kernel, conv_bias = cc.trainable_variables()[2:]
        expected_hidden = cc.tanh(x @ kernel + bias)
        expected_conv = cc.nn.conv2d(image, conv_kernel, strides=2, padding="SAME") + conv_bias
    assert [v.op.name for v in cc.trainable_variables(graph)] == ["dense/kernel", "dense/bias", "conv/kernel",
                                                                 "conv/bias"]
    assert kernel.shape == (4, 6) and conv_kernel.shape == (3, 2, 2, 4)
    feed = {x: rng.normal(size=(2, 3, 4)), image: rng.normal(size=(2, 5, 5, 2))}
    with Session(graph, target=target) as sess:
        got = sess.run([hidden, conv, expected_hidden, expected_conv], feed)
    np.testing.assert_allclose(got[0], got[2], rtol=1e-12)
    np.testing.assert_allclose(got[1], got[3], rtol=1e-12)
    assert got[1].shape == (2, 3, 3, 4)


def test_a_layer_shares_its_variables_when_reused() -> None:
    with cc.Graph().as_default():
        x = cc.placeholder("float32", (None, 3))
        first = cc.layers.dense(x, 2, name="shared")
        second = cc.layers.dense(x * 2.0, 2, name="shared", reuse=True)
        other = cc.layers.dense(x, 2)
        assert [v.op.name for v in cc.trainable_variables()] == ["shared/kernel", "shared/bias", "dense/kernel",
                                                                 "dense/bias"]
        with pytest.raises(ValueError, match="already exists"):
            cc.layers.dense(x, 2, name="shared")
        assert first.shape == second.shape == other.shape == (None, 2)


@pytest.mark.parametrize("target", TARGETS)
def test_pooling_flatten_and_dropout(target: str) -> None:
    rng = np.random.default_rng(1)
    graph = cc.Graph()
    with graph.as_default():
        image = cc.placeholder("float32", (None, 4, 6, 2))
        training = cc.placeholder("bool", ())
        pooled = cc.layers.max_pooling2d(image, 2, 2)
        averaged = cc.layers.average_pooling2d(image, (2, 3), (2, 3), padding="same")
        flat = cc.layers.flatten(pooled)
        kept = cc.layers.dropout(flat, rate=0.5, training=training, seed=1)
        not_training = cc.layers.dropout(flat, rate=0.5)
    value = rng.normal(size=(3, 4, 6, 2)).astype("float32")
    with Session(graph, target=target) as sess:
        got_pooled, got_averaged, got_flat, dropped, passed, untouched = sess.run(
            [pooled, averaged, flat, kept, cc.layers.dropout(flat, 0.5, training=False), not_training],
            {image: value, training: True})
        same = sess.run(kept, {image: value, training: False})
    windows = value.reshape(3, 2, 2, 3, 2, 2)
    np.testing.assert_array_equal(got_pooled, windows.max(axis=(2, 4)))
    np.testing.assert_allclose(got_averaged, value.reshape(3, 2, 2, 2, 3, 2).mean(axis=(2, 4)), rtol=1e-5, atol=1e-6)
    np.testing.assert_array_equal(got_flat, got_pooled.reshape(3, -1))
    assert set(np.unique(np.round(dropped / np.where(got_flat == 0, 1, got_flat), 4))) <= {0.0, 2.0}
    np.testing.assert_array_equal(passed, got_flat)
    np.testing.assert_array_equal(untouched, got_flat)
    np.testing.assert_array_equal(same, got_flat)


@pytest.mark.parametrize("target", TARGETS)
@pytest.mark.parametrize("tensor_flag", [False, True], ids=["python-bool", "tensor"])
def test_batch_normalization_trains_on_batch_statistics_and_updates_the_moving_ones(target: str,
                                                                                    tensor_flag: bool) -> None:
    rng = np.random.default_rng(2)
    value = rng.normal(3.0, 2.0, size=(8, 3, 3, 4))
    graph = cc.Graph()
    with graph.as_default():
        x = cc.placeholder("float64", (None, 3, 3, 4))
        flag = cc.placeholder("bool", ()) if tensor_flag else True
        y = cc.layers.batch_normalization(x, momentum=0.9, epsilon=1e-3, training=flag, name="bn")
        inference = cc.layers.batch_normalization(x, momentum=0.9, epsilon=1e-3, training=False, name="bn",
                                                  reuse=True)
        updates = graph.get_collection(cc.GraphKeys.UPDATE_OPS)
        moving_mean, moving_variance = [v for v in cc.global_variables() if "moving" in v.op.name]
    feed = {x: value, **({flag: True} if tensor_flag else {})}
    mean, variance = value.mean(axis=(0, 1, 2)), value.var(axis=(0, 1, 2))
    # A 4-D input takes TF1's fused path, whose moving variance averages the unbiased variance
    # (as torch's running_var); the batch itself is normalized with the biased one.
    unbiased = value.var(axis=(0, 1, 2), ddof=1)
    with Session(graph, target=target) as sess:
        got, _ = sess.run([y, updates], feed)
        np.testing.assert_allclose(got, (value - mean) / np.sqrt(variance + 1e-3), rtol=1e-10, atol=1e-12)
        np.testing.assert_allclose(sess.run(moving_mean), 0.1 * mean, rtol=1e-12)
        np.testing.assert_allclose(sess.run(moving_variance), 0.9 + 0.1 * unbiased, rtol=1e-12)
        np.testing.assert_allclose(sess.run(inference, {x: value}),
                                   (value - 0.1 * mean) / np.sqrt(0.9 + 0.1 * unbiased + 1e-3), rtol=1e-10)
        if tensor_flag:   # not training: the moving statistics, and the updates change nothing
            before = sess.run([moving_mean, moving_variance])
            got, _ = sess.run([y, updates], {x: value, flag: False})
            np.testing.assert_allclose(got, sess.run(inference, {x: value}), rtol=1e-12)
            np.testing.assert_allclose(sess.run([moving_mean, moving_variance]), before, rtol=1e-15)


def test_a_model_of_layers_trains() -> None:
    rng = np.random.default_rng(3)
    images = rng.normal(size=(64, 6, 6, 1)).astype("float32")
    labels = (images.mean(axis=(1, 2, 3)) > 0).astype("int32")
    graph = cc.Graph()
    with graph.as_default():
        cc.set_random_seed(1)
        x = cc.placeholder("float32", (None, 6, 6, 1))
        y = cc.placeholder("int32", (None,))
        training = cc.placeholder("bool", ())
        hidden = cc.layers.conv2d(x, 8, 3, padding="same", activation=cc.nn.relu)
        hidden = cc.layers.batch_normalization(hidden, momentum=0.5, training=training)
        hidden = cc.layers.dropout(cc.layers.flatten(cc.layers.max_pooling2d(hidden, 2, 2)), 0.2, training=training)
        logits = cc.layers.dense(hidden, 2)
        loss = cc.losses.sparse_softmax_cross_entropy(y, logits)
        with cc.control_dependencies(graph.get_collection(cc.GraphKeys.UPDATE_OPS)):
            train = optim.AdamOptimizer(0.01).minimize(loss)
    with Session(graph) as sess:
        first = sess.run(loss, {x: images, y: labels, training: False})
        for _ in range(60):
            sess.run(train, {x: images, y: labels, training: True})
        assert sess.run(loss, {x: images, y: labels, training: False}) < 0.5 * first


@pytest.mark.parametrize("training", [False, 0, np.False_])
def test_batch_normalization_not_training_uses_the_moving_statistics(training) -> None:
    with cc.Graph().as_default() as graph:
        x = cc.constant(np.array([[1.0], [3.0]], "float32"))
        y = cc.layers.batch_normalization(x, training=training)
        assert graph.get_collection(cc.GraphKeys.UPDATE_OPS) == []
        with Session(graph) as sess:
            np.testing.assert_allclose(sess.run(y), [[1.0 / np.sqrt(1.001)], [3.0 / np.sqrt(1.001)]], rtol=1e-6)


def test_batch_normalization_updates_change_nothing_when_not_training_even_on_an_empty_batch() -> None:
    with cc.Graph().as_default() as graph:
        x = cc.placeholder("float32", (None, 2))
        training = cc.placeholder("bool", ())
        cc.layers.batch_normalization(x, training=training)
        updates = graph.get_collection(cc.GraphKeys.UPDATE_OPS)
        moving = [v for v in cc.global_variables() if "moving" in v.op.name]
        with Session(graph) as sess:
            sess.run(updates, {x: np.zeros((0, 2), "float32"), training: False})
            np.testing.assert_array_equal(sess.run(moving), [[0.0, 0.0], [1.0, 1.0]])


def test_a_layer_made_in_true_fn_can_be_reused_in_false_fn() -> None:
    with cc.Graph().as_default():
        x = cc.placeholder("float32", (None, 3))
        flag = cc.placeholder("bool", ())
        y = cc.cond(flag, lambda: cc.layers.dense(x, 2, name="fc"),
                    lambda: cc.layers.dense(x * 2.0, 2, name="fc", reuse=True))
        assert [v.op.name for v in cc.trainable_variables()] == ["fc/kernel", "fc/bias"]
        with Session() as sess:
            value = np.ones((1, 3), "float32")
            np.testing.assert_allclose(sess.run(y, {x: value, flag: False}), 2.0 * sess.run(y, {x: value, flag: True})
                                       - sess.run(cc.trainable_variables()[1]), rtol=1e-6)


@pytest.mark.parametrize("fused, shape, ddof", [(None, (2, 2, 2, 1), 1), (True, (2, 1, 2, 2), 1),
                                                (False, (2, 2, 2, 1), 0), (None, (8, 1), 0)],
                         ids=["4-d", "4-d-channels-first", "4-d-not-fused", "2-d"])
def test_the_moving_variance_averages_what_tf1s_layer_averages(fused, shape, ddof) -> None:
    """TF1's fused kernel (its default for 4-D inputs) averages the variance divided by n - 1,
    its other path the one divided by n (torch's BatchNorm2d: n - 1)."""
    value = np.arange(8.0).reshape(shape)
    graph = cc.Graph()
    with graph.as_default():
        axis = 1 if shape == (2, 1, 2, 2) else -1
        cc.layers.batch_normalization(cc.constant(value), axis=axis, momentum=0.0, training=True, fused=fused)
        (update,) = graph.get_collection(cc.GraphKeys.UPDATE_OPS)
        (moving_variance,) = [v for v in cc.global_variables() if "moving_variance" in v.op.name]
    with Session(graph) as sess:
        sess.run(update)
        np.testing.assert_allclose(sess.run(moving_variance), [np.var(np.arange(8.0), ddof=ddof)], rtol=1e-12)


def test_keras_names_of_activations_and_initializers_are_what_tf1_15s_layers_take() -> None:
    """TF1.15's tf.layers (Keras underneath) take activation="relu" and kernel_initializer="zeros":
    here they failed with Python's own errors ("'str' object is not callable")."""
    graph = cc.Graph()
    with graph.as_default():
        x = cc.constant(np.array([[1.0, -2.0]], "float32"))
        named = cc.layers.dense(x, 2, activation="relu", kernel_initializer="ones", bias_initializer="zeros")
        functions = cc.layers.dense(x, 2, activation=cc.nn.relu, kernel_initializer=cc.ones_initializer())
        linear = cc.layers.dense(x, 1, activation="linear", kernel_initializer="ones")
        filtered = cc.layers.conv2d(cc.ones((1, 3, 3, 1)), 2, 3, activation="tanh", kernel_initializer="ones")
        normalized = cc.layers.batch_normalization(cc.ones((2, 3)), axis=[1], gamma_initializer="ones")
        initialize = cc.global_variables_initializer()
    with Session(graph) as sess:
        sess.run(initialize)
        a, b, c, d, _ = sess.run([named, functions, linear, filtered, normalized])
    np.testing.assert_array_equal(a, b)
    np.testing.assert_array_equal(c, [[-1.0]])
    np.testing.assert_allclose(d, np.tanh(np.full((1, 1, 1, 2), 9.0)), rtol=1e-6)


@pytest.mark.parametrize("name, low, high, spread", [
    ("random_normal", -1.0, 1.0, 0.05), ("truncated_normal", -0.1, 0.1, 0.05 * 0.8796),
    ("random_uniform", -0.05, 0.05, 0.1 / np.sqrt(12))])
def test_keras_names_of_random_initializers_have_keras_spreads(name, low, high, spread) -> None:
    # Keras's RandomNormal / TruncatedNormal / RandomUniform default to a spread of 0.05, not the
    # 1.0 and [0, 1) of tf.random_normal_initializer and the others (weights 20x too large).
    graph = cc.Graph()
    with graph.as_default():
        kernel = cc.layers.dense(cc.ones((1, 200)), 200, kernel_initializer=name, name="layer")
        weights = graph.get_tensor_by_name("layer/kernel:0")
        initialize = cc.global_variables_initializer()
    with Session(graph) as sess:
        sess.run(initialize)
        values = sess.run(weights)
    assert kernel.shape == (1, 200)
    assert low <= values.min() and values.max() <= high
    assert abs(values.mean()) < 0.01 and abs(values.std() - spread) < 0.05 * spread


@pytest.mark.parametrize("build, error, message", [
    (lambda x: cc.layers.dropout(x, training="False"), TypeError,
     r"dropout: training must be a Python bool or a bool scalar tensor, got 'False'"),
    (lambda x: cc.layers.batch_normalization(x, training="no"), TypeError,
     r"batch_normalization: training must be a Python bool"),
    (lambda x: cc.layers.dropout(x, training=cc.constant(1.0)), TypeError,
     r"dropout: training must be a bool scalar tensor, got float32"),
    (lambda x: cc.layers.dense(x, 2, activation="relu7"), ValueError, r"dense: unknown activation 'relu7'"),
    (lambda x: cc.layers.dense(x, 2, activation=3), TypeError, r"dense: activation must be a function"),
    (lambda x: cc.layers.dense(x, 2, kernel_initializer="zero"), ValueError,
     r"dense: unknown kernel_initializer 'zero'"),
    (lambda x: cc.layers.dense(x, 2, kernel_regularizer="l2"), TypeError,
     r"dense: kernel_regularizer must be a function of the weights"),
    (lambda x: cc.layers.batch_normalization(x, momentum="x"), TypeError,
     r"batch_normalization: momentum must be a number, got 'x'"),
    (lambda x: cc.layers.batch_normalization(x, axis=[0, 1]), TypeError,
     r"batch_normalization: axis must be an int \(the channels\), got \[0, 1\]"),
])
def test_layer_arguments_of_the_wrong_kind_are_named_with_the_users_line(build, error, message) -> None:
    """A string "False" as training was true: dropout dropped and batch norm took batch statistics."""
    with cc.Graph().as_default(), pytest.raises(error, match=message) as raised:
        build(cc.placeholder("float32", (4, 3)))
    assert f"(at {__file__}:" in str(raised.value)


def test_batch_normalization_makes_its_variables_in_tf1_s_order() -> None:
    with cc.Graph().as_default() as graph:
        cc.layers.batch_normalization(cc.placeholder("float32", (None, 3)))
    assert [v.op.name for v in cc.global_variables(graph)] == [
        "batch_normalization/gamma", "batch_normalization/beta", "batch_normalization/moving_mean",
        "batch_normalization/moving_variance"]


def test_initializers_have_tf1_s_short_names_and_constant_verifies_shapes() -> None:
    assert cc.initializers.glorot_uniform is cc.glorot_uniform_initializer
    np.testing.assert_array_equal(cc.initializers.zeros()((2,)), [0.0, 0.0])
    np.testing.assert_array_equal(cc.initializers.constant([1, 2], verify_shape=True)((2,)), [1.0, 2.0])
    np.testing.assert_array_equal(cc.initializers.constant([1, 2])((3,)), [1.0, 2.0, 2.0])
    with pytest.raises(ValueError, match=r"verify_shape: the value's shape \(3,\) is not the variable's \(2,\)"):
        cc.initializers.constant([1, 2, 3], verify_shape=True)((2,))


@pytest.mark.parametrize("padding, strides, expected", [("same", 2, (None, 14, 14, 8)), ("valid", 2, (None, 15, 15, 8)),
                                                        ("valid", 1, (None, 9, 9, 8)), ("same", 3, (None, 21, 21, 8))])
def test_conv2d_transpose_layer_grows_as_tf1_and_equals_the_nn_op(padding: str, strides: int, expected: tuple) -> None:
    with cc.Graph().as_default() as graph:
        x = cc.placeholder("float64", (None, 7, 7, 4), name="x")
        y = cc.layers.conv2d_transpose(x, 8, 3, strides=strides, padding=padding, activation=cc.nn.relu,
                                       bias_initializer=cc.initializers.constant(0.25))
        kernel, bias = cc.trainable_variables(graph)
        direct = cc.nn.relu(cc.nn.conv2d_transpose(x, kernel, [cc.shape(x)[0], *expected[1:]], strides=strides,
                                                   padding=padding.upper()) + bias)
        (slope,) = cc.gradients(cc.reduce_sum(y), [kernel])
    assert y.shape == expected and kernel.shape == (3, 3, 8, 4) and kernel.op.name == "conv2d_transpose/kernel"
    values = np.random.default_rng(0).normal(size=(2, 7, 7, 4))
    with Session(graph) as sess:
        got, want, got_slope = sess.run([y, direct, slope], {x: values})
    np.testing.assert_allclose(got, want, rtol=1e-12)
    assert got.shape == (2,) + expected[1:] and np.isfinite(got_slope).all() and np.abs(got_slope).sum() > 0


def test_tf1_regularizer_and_initializer_spellings_from_contrib_and_keras() -> None:
    # kernel_regularizer=tf.contrib.layers.l2_regularizer(...) is TF1's usual form: scale * l2_loss(w).
    with cc.Graph().as_default() as graph:
        x = cc.placeholder("float64", (None, 3))
        cc.layers.dense(x, 4, kernel_regularizer=cc.contrib.layers.l2_regularizer(0.1),
                        kernel_initializer=cc.contrib.layers.xavier_initializer(seed=1), name="a")
        cc.layers.dense(x, 2, kernel_regularizer=cc.keras.regularizers.l1_l2(0.01, 0.2),
                        kernel_initializer=cc.contrib.layers.variance_scaling_initializer(seed=2), name="b")
        penalties = cc.get_collection(cc.GraphKeys.REGULARIZATION_LOSSES)
        kernels = [graph.get_tensor_by_name("a/kernel:0"), graph.get_tensor_by_name("b/kernel:0")]
        with pytest.raises(ValueError, match="scale must be a number >= 0"):
            cc.contrib.layers.l2_regularizer(-1.0)
    assert len(penalties) == 2
    with Session(graph) as sess:
        (first, second), (a, b) = sess.run(penalties), sess.run(kernels)
    np.testing.assert_allclose(first, 0.1 * np.sum(a ** 2) / 2)
    np.testing.assert_allclose(second, 0.01 * np.abs(b).sum() + 0.2 * np.sum(b ** 2))
    assert np.abs(a).max() <= np.sqrt(6.0 / (3 + 4))     # Glorot uniform's limit


def test_layer_objects_make_their_variables_once_and_share_them_wherever_called() -> None:
    # TF1's tf.layers.Dense(units)(x): the first call chooses the scope; later calls, from any
    # scope, use the same variables.
    graph = cc.Graph()
    with graph.as_default():
        x = cc.placeholder("float32", (None, 8, 8, 1), name="x")
        training = cc.placeholder_with_default(False, (), name="training")
        conv = cc.layers.Conv2D(4, 3, padding="same", activation=cc.nn.relu)
        norm, head = cc.layers.BatchNormalization(), cc.layers.Dense(3, name="head")
        pool, flat, drop = cc.layers.MaxPooling2D(2, 2), cc.layers.Flatten(), cc.layers.Dropout(0.5)

        def model(images: cc.Tensor) -> cc.Tensor:
            return head(drop(flat(pool(norm(conv(images), training=training))), training=training))
        with cc.variable_scope("tower"):
            first = model(x)
        second = model(x)
        names = [v.op.name for v in cc.trainable_variables()]
    assert names == ["tower/conv2d/kernel", "tower/conv2d/bias", "tower/batch_normalization/gamma",
                     "tower/batch_normalization/beta", "tower/head/kernel", "tower/head/bias"]
    assert head.kernel.op.name == "tower/head/kernel" and len(norm.variables) == 4 and pool.variables == []
    with Session(graph) as sess:
        a, b = sess.run([first, second], {x: np.ones((2, 8, 8, 1), "float32")})
    np.testing.assert_array_equal(a, b)

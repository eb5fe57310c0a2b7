"""``optim.ExponentialMovingAverage`` against TF1's formulas in numpy, its ordering after the
training step, and its evaluation idiom: a Saver of ``variables_to_restore()`` loads the averages
into the variables."""
from __future__ import annotations

import os

import numpy as np
import pytest

import compiler as cc
import optim
from runtime import Session


@pytest.mark.parametrize("target", ["cpu", "reference"])
@pytest.mark.parametrize("with_num_updates", [False, True], ids=["decay", "num_updates"])
def test_averages_follow_tf1s_formula_after_each_training_step(target: str, with_num_updates: bool) -> None:
    graph = cc.Graph()
    with graph.as_default():
        w = cc.Variable(np.array([1.0, -2.0]), name="w")
        b = cc.Variable(np.float64(0.5), name="b")
        step = optim.get_or_create_global_step()
        loss = cc.reduce_sum(cc.square(w - 3.0)) + b * b
        train = optim.GradientDescentOptimizer(0.1).minimize(loss, global_step=step)
        ema = optim.ExponentialMovingAverage(0.9, num_updates=step if with_num_updates else None)
        with cc.control_dependencies([train]):
            train_and_average = ema.apply([w, b])
    assert ema.average(w).op.name == "w/ExponentialMovingAverage" and not ema.average(w).trainable
    assert ema.average(w) in cc.global_variables(graph) and ema.average(w) not in cc.trainable_variables(graph)
    weights, bias = np.array([1.0, -2.0]), 0.5
    shadows = [weights.copy(), bias]
    with Session(graph, target=target) as sess:
        for count in range(1, 6):
            sess.run(train_and_average)
            weights, bias = weights - 0.1 * 2 * (weights - 3.0), bias - 0.1 * 2 * bias
            decay = min(0.9, (1 + count) / (10 + count)) if with_num_updates else 0.9
            shadows = [s - (s - v) * (1 - decay) for s, v in zip(shadows, (weights, bias))]
            got = sess.run([ema.average(w), ema.average(b)])
            np.testing.assert_allclose(got[0], shadows[0], rtol=1e-12)
            np.testing.assert_allclose(got[1], shadows[1], rtol=1e-12)


def test_a_saver_of_variables_to_restore_loads_the_averages_into_the_variables(tmp_path) -> None:
    def build() -> tuple[cc.Graph, cc.Variable, cc.Operation, optim.ExponentialMovingAverage]:
        graph = cc.Graph()
        with graph.as_default():
            w = cc.Variable(np.array([0.0, 4.0]), name="w")
            ema = optim.ExponentialMovingAverage(0.5)
            with cc.control_dependencies([w.assign_add([1.0, -1.0])]):
                step = ema.apply([w])
        return graph, w, step, ema
    graph, w, step, ema = build()
    with graph.as_default():
        saver = optim.Saver()
    with Session(graph) as sess:
        for _ in range(3):
            sess.run(step)
        average = sess.run(ema.average(w))
        path = saver.save(sess, os.path.join(tmp_path, "model"))
    graph = cc.Graph()                          # TF1's evaluation graph: the model, no apply
    with graph.as_default():
        w = cc.Variable(np.array([0.0, 4.0]), name="w")
        to_restore = optim.ExponentialMovingAverage(0.5).variables_to_restore()
        restorer = optim.Saver(to_restore)
    assert to_restore == {"w/ExponentialMovingAverage": w}
    with Session(graph) as sess:
        restorer.restore(sess, path)
        np.testing.assert_array_equal(sess.run(w), average)


def _applied_twice(ema: optim.ExponentialMovingAverage, w: cc.Variable) -> None:
    ema.apply([w])
    ema.apply([w])


@pytest.mark.parametrize("make, error, message", [
    (lambda w: optim.ExponentialMovingAverage(1.5), ValueError, r"decay must be a number in \[0, 1\]"),
    (lambda w: optim.ExponentialMovingAverage(0.9).apply([cc.cast(w, "int32")]), TypeError,
     "is not a float variable or tensor"),
    (lambda w: optim.ExponentialMovingAverage(0.9).apply([cc.placeholder("float32", (None, 2))]), ValueError,
     "needs a known shape"),
    (lambda w: _applied_twice(optim.ExponentialMovingAverage(0.9), w), ValueError, "'w' is already computed"),
])
def test_moving_average_argument_errors(make, error, message) -> None:
    with cc.Graph().as_default(), pytest.raises(error, match=message) as raised:
        make(cc.Variable(np.zeros(2), name="w"))
    assert f"(at {__file__}:" in str(raised.value)


def test_decay_may_be_any_real_number_numpy_scalars_included() -> None:
    for decay in (np.float32(0.99), np.float64(0.5), 1, np.int64(0)):
        optim.ExponentialMovingAverage(decay)
    with pytest.raises(ValueError, match="decay must be a number"):
        optim.ExponentialMovingAverage(np.bool_(True))


@pytest.mark.parametrize("zero_debias", [False, True])
def test_averages_of_tensors_start_at_zero_and_are_debiased_as_tf1(zero_debias: bool) -> None:
    # TF1's batch-norm idiom: ema.apply([batch_mean, batch_variance]).
    x = cc.placeholder("float64", (8, 3), name="x")
    mean, variance = cc.nn.moments(x, [0])
    ema = optim.ExponentialMovingAverage(0.7, zero_debias=zero_debias)
    update = ema.apply([mean, variance])
    rng = np.random.default_rng(0)
    batches = [rng.normal(size=(8, 3)) for _ in range(4)]
    with Session() as sess:
        sess.run(cc.global_variables_initializer())
        for batch in batches:
            sess.run(update, {x: batch})
        got_mean, got_variance = sess.run([ema.average(mean), ema.average(variance)])
    for got, statistic in ((got_mean, lambda b: b.mean(0)), (got_variance, lambda b: b.var(0))):
        shadow = np.zeros(3)
        for batch in batches:
            shadow -= (shadow - statistic(batch)) * 0.3
        np.testing.assert_allclose(got, shadow / (1.0 - 0.7 ** 4) if zero_debias else shadow, rtol=1e-12)
    assert mean not in cc.get_collection(optim.moving_averages.MOVING_AVERAGE_VARIABLES)
    assert ema.average_name(mean) == f"{mean.op.name}/ExponentialMovingAverage"

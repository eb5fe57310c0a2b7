"""conv2d's filter gradient as one GEMM per filter tap (the path larger convolutions take) equals
the loop-nest gradient, the reference and finite differences."""
from __future__ import annotations

import numpy as np
import pytest

import compiler as cc
from compiler.ops import conv
from runtime import Session

CASES = [  # x shape, filter shape, conv2d arguments
    ((2, 7, 6, 3), (3, 2, 3, 4), dict(padding="SAME")),
    ((2, 7, 6, 3), (3, 3, 3, 2), dict(padding="VALID", strides=2)),
    ((1, 9, 8, 2), (2, 3, 2, 3), dict(padding="SAME", dilations=(2, 1))),
    ((2, 8, 7, 1), (2, 2, 1, 3), dict(strides=(3, 2))),
]


def _filter_gradient(x_shape, w_shape, kwargs, threshold, monkeypatch, target="cpu"):
    monkeypatch.setattr(conv, "TAP_GEMM_MIN_WORK", threshold)
    rng = np.random.default_rng(0)
    graph = cc.Graph()
    with graph.as_default():
        x = cc.placeholder("float64", x_shape)
        w = cc.placeholder("float64", w_shape)
        loss = cc.reduce_sum(cc.sin(cc.nn.conv2d(x, w, **kwargs)))
        (gw,) = cc.gradients(loss, [w])
    feeds = {x: rng.normal(size=x_shape), w: rng.normal(size=w_shape)}
    kinds = {op.type for op in graph.get_operations()}
    with Session(graph, target=target) as sess:
        return sess.run(gw, feeds), kinds, (sess, loss, feeds, w)


@pytest.mark.parametrize("x_shape, w_shape, kwargs", CASES)
def test_tap_gemms_equal_the_loop_nest_and_the_reference(x_shape, w_shape, kwargs, monkeypatch) -> None:
    taps, kinds, _ = _filter_gradient(x_shape, w_shape, kwargs, 0, monkeypatch)
    assert "MatMul" in kinds and "Conv2DBackpropFilter" not in kinds
    nest, kinds, _ = _filter_gradient(x_shape, w_shape, kwargs, 1 << 60, monkeypatch)
    assert "Conv2DBackpropFilter" in kinds
    reference, _, _ = _filter_gradient(x_shape, w_shape, kwargs, 1 << 60, monkeypatch, target="reference")
    np.testing.assert_allclose(taps, nest, rtol=1e-12, atol=1e-12)
    np.testing.assert_allclose(taps, reference, rtol=1e-12, atol=1e-12)


def test_tap_gemms_match_finite_differences(monkeypatch) -> None:
    x_shape, w_shape, kwargs = CASES[1]
    analytic, _, (sess, loss, feeds, w) = _filter_gradient(x_shape, w_shape, kwargs, 0, monkeypatch)
    numeric = np.zeros(w_shape)
    base = feeds[w]
    with Session(sess.graph) as check:
        for index in np.ndindex(*w_shape):
            values = []
            for step in (1e-6, -1e-6):
                moved = base.copy()
                moved[index] += step
                values.append(check.run(loss, {**feeds, w: moved}))
            numeric[index] = (values[0] - values[1]) / 2e-6
    np.testing.assert_allclose(analytic, numeric, rtol=1e-6, atol=1e-7)


@pytest.mark.parametrize("x_shape, w_shape, kwargs", CASES[:2])
def test_second_derivatives_through_the_tap_gemms(x_shape, w_shape, kwargs, monkeypatch) -> None:
    results = []
    for threshold in (0, 1 << 60):
        monkeypatch.setattr(conv, "TAP_GEMM_MIN_WORK", threshold)
        rng = np.random.default_rng(1)
        graph = cc.Graph()
        with graph.as_default():
            x = cc.placeholder("float64", x_shape)
            w = cc.placeholder("float64", w_shape)
            (gw,) = cc.gradients(cc.reduce_sum(cc.sin(cc.nn.conv2d(x, w, **kwargs))), [w])
            direction = cc.constant(rng.normal(size=w_shape))
            second = cc.gradients(cc.reduce_sum(gw * direction), [x, w])
        with Session(graph) as sess:
            results.append(sess.run(second, {x: rng.normal(size=x_shape), w: rng.normal(size=w_shape)}))
    for taps, nest in zip(*results):
        np.testing.assert_allclose(taps, nest, rtol=1e-11, atol=1e-11)

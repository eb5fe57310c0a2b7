"""Every row of the op table: cpu == numpy reference (float32 and float64), finite-difference
gradients in float64 on the cpu target, second-order gradients where marked, and PTX that
``ptxas -arch=sm_80`` accepts."""
from __future__ import annotations

import subprocess

import numpy as np
import pytest

import compiler as cc
from runtime import Session

from ..conftest import PTXAS
from .op_table import ROWS, Row

TOLERANCE = {"float32": dict(rtol=2e-5, atol=2e-6), "float64": dict(rtol=1e-11, atol=1e-12),
             "int32": dict(rtol=0, atol=0), "int64": dict(rtol=0, atol=0)}


def _build(row: Row, dtype: str):
    graph = cc.Graph()
    with graph.as_default():
        placeholders = [cc.placeholder(spec.dtype or dtype, spec.shape, name=f"in{i}")
                        for i, spec in enumerate(row.inputs)]
        output = row.build(*placeholders)
    return graph, placeholders, output


def _feeds(row: Row, placeholders, dtype: str, seed: int = 0) -> dict:
    rng = np.random.default_rng(seed)
    return {p: spec.values(rng, dtype) for p, spec in zip(placeholders, row.inputs)}


@pytest.mark.parametrize("dtype", ["float32", "float64"])
@pytest.mark.parametrize("row", ROWS, ids=lambda r: r.id)
def test_cpu_matches_reference(row: Row, dtype: str) -> None:
    graph, placeholders, output = _build(row, dtype)
    feeds = _feeds(row, placeholders, dtype)
    with Session(graph, target="reference") as ref, Session(graph) as sess:
        expected = ref.run(output, feeds)
        actual = sess.run(output, feeds)
        again = sess.run(output, feeds)
    assert actual.shape == expected.shape and actual.dtype == expected.dtype
    np.testing.assert_allclose(actual, expected, equal_nan=True, **TOLERANCE[output.dtype.name])
    np.testing.assert_array_equal(actual, again)


def _loss_and_weights(output, rng):
    weights = rng.normal(size=output.shape if None not in output.shape else ()).astype(output.dtype)
    return cc.reduce_sum(output * cc.constant(weights)), weights


def _numeric_gradient(sess, loss, feeds, target, eps=1e-6) -> np.ndarray:
    base = feeds[target]
    grad = np.zeros_like(base)
    for index in np.ndindex(base.shape):
        values = []
        for step in (eps, -eps):
            shifted = base.copy()
            shifted[index] += step
            values.append(sess.run(loss, {**feeds, target: shifted}))
        grad[index] = (values[0] - values[1]) / (2 * eps)
    return grad


GRAD_ROWS = [r for r in ROWS if r.grad and all(0 not in s.shape for s in r.inputs)]


@pytest.mark.parametrize("row", GRAD_ROWS, ids=lambda r: r.id)
def test_gradient_matches_finite_differences(row: Row) -> None:
    graph, placeholders, output = _build(row, "float64")
    rng = np.random.default_rng(1)
    with graph.as_default():
        loss, _ = _loss_and_weights(output, rng)
        grads = cc.gradients(loss, [placeholders[i] for i in row.grad])
    feeds = _feeds(row, placeholders, "float64", seed=2)
    with Session(graph) as sess:
        analytic = sess.run(grads, feeds)
        for index, value in zip(row.grad, analytic):
            assert value is not None, f"no gradient for input {index}"
            numeric = _numeric_gradient(sess, loss, feeds, placeholders[index])
            np.testing.assert_allclose(value, numeric, rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize("row", [r for r in ROWS if r.second_order], ids=lambda r: r.id)
def test_second_order_gradient(row: Row) -> None:
    graph, placeholders, output = _build(row, "float64")
    rng = np.random.default_rng(3)
    with graph.as_default():
        loss, _ = _loss_and_weights(output, rng)
        first = cc.gradients(loss, [placeholders[i] for i in row.grad])
        direction = [cc.constant(rng.normal(size=g.shape)) for g in first]
        projected = sum((cc.reduce_sum(g * d) for g, d in zip(first, direction)), cc.constant(0.0, "float64"))
        second = cc.gradients(projected, [placeholders[i] for i in row.grad])
    feeds = _feeds(row, placeholders, "float64", seed=4)
    with Session(graph) as sess:
        analytic = sess.run(second, feeds)
        for index, value in zip(row.grad, analytic):
            numeric = _numeric_gradient(sess, projected, feeds, placeholders[index])
            np.testing.assert_allclose(value, numeric, rtol=1e-5, atol=1e-6)


@pytest.mark.skipif(PTXAS is None, reason="ptxas (CUDA toolkit) is not on PATH")
@pytest.mark.parametrize("row", ROWS, ids=lambda r: r.id)
def test_ptx_assembles(row: Row, tmp_path) -> None:
    graph, placeholders, output = _build(row, "float32")
    with graph.as_default():
        fetches = [output]
        if row.grad:
            loss, _ = _loss_and_weights(output, np.random.default_rng(0))
            fetches += [g for g in cc.gradients(loss, [placeholders[i] for i in row.grad]) if g is not None]
    feeds = _feeds(row, placeholders, "float32")
    with Session(graph) as sess:
        ptx = sess.compile(fetches, feeds).dump("ptx")
    assert ".entry" in ptx
    path = tmp_path / "step.ptx"
    path.write_text(ptx)
    result = subprocess.run([PTXAS, "-arch=sm_80", str(path), "-o", str(tmp_path / "step.cubin")],
                            capture_output=True, text=True)
    assert result.returncode == 0, result.stderr

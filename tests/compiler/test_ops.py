"""Every row of the op table: cpu == numpy reference (float32 and float64), finite-difference
gradients in float64 on the cpu target, second-order gradients where marked, and PTX that
``ptxas -arch=sm_80`` accepts; and every registered op type has a row."""
from __future__ import annotations

import subprocess

import numpy as np
import pytest

import compiler as cc
from compiler.ops.base import REGISTRY
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
        expected = [ref.run(output, feeds) for _ in range(2)]
        actual = [sess.run(output, feeds) for _ in range(2)]
    for got, want in zip(actual, expected):
        assert got.shape == want.shape and got.dtype == want.dtype
        np.testing.assert_allclose(got, want, equal_nan=True, **TOLERANCE[output.dtype.name])
    if row.repeatable:
        np.testing.assert_array_equal(actual[0], actual[1])


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


def _with_gradients(row: Row, rng: np.random.Generator) -> tuple[cc.Graph, list[cc.Tensor], cc.Tensor, list]:
    """The row's float64 graph, a weighted sum of its output as the loss, and the loss's gradients
    for the inputs ``row.grad`` names."""
    graph, placeholders, output = _build(row, "float64")
    with graph.as_default():
        loss, _ = _loss_and_weights(output, rng)
        grads = cc.gradients(loss, [placeholders[i] for i in row.grad])
    return graph, placeholders, loss, grads


def _with_second_order_gradients(row: Row, rng: np.random.Generator
                                 ) -> tuple[cc.Graph, list[cc.Tensor], cc.Tensor, list]:
    """As ``_with_gradients``, then the gradients of the first gradients projected on a random
    direction: a Hessian-vector product."""
    graph, placeholders, _, first = _with_gradients(row, rng)
    with graph.as_default():
        direction = [cc.constant(rng.normal(size=g.shape)) for g in first]
        projected = sum((cc.reduce_sum(g * d) for g, d in zip(first, direction)), cc.constant(0.0, "float64"))
        second = cc.gradients(projected, [placeholders[i] for i in row.grad])
    return graph, placeholders, projected, second


GRAD_ROWS = [r for r in ROWS if r.grad and all(0 not in s.shape for s in r.inputs)]
SECOND_ORDER_ROWS = [r for r in ROWS if r.second_order]


@pytest.mark.parametrize("row", GRAD_ROWS, ids=lambda r: r.id)
def test_gradient_matches_finite_differences(row: Row) -> None:
    graph, placeholders, loss, grads = _with_gradients(row, np.random.default_rng(1))
    feeds = _feeds(row, placeholders, "float64", seed=2)
    with Session(graph) as sess:
        analytic = sess.run(grads, feeds)
        for index, value in zip(row.grad, analytic):
            assert value is not None, f"no gradient for input {index}"
            numeric = _numeric_gradient(sess, loss, feeds, placeholders[index])
            np.testing.assert_allclose(value, numeric, rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize("row", SECOND_ORDER_ROWS, ids=lambda r: r.id)
def test_second_order_gradient(row: Row) -> None:
    graph, placeholders, projected, second = _with_second_order_gradients(row, np.random.default_rng(3))
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
        exe = sess.compile(fetches, feeds)
        ptx = exe.dump("ptx")
    assert ".entry" in ptx or not exe.program.kernels   # (identity's step copies no element: no kernel)
    path = tmp_path / "step.ptx"
    path.write_text(ptx)
    result = subprocess.run([PTXAS, "-arch=sm_80", str(path), "-o", str(tmp_path / "step.cubin")],
                            capture_output=True, text=True)
    assert result.returncode == 0, result.stderr


# Registered op types that no row checks, each with the reason; the tests named check them.
ASSIGNMENT_TESTS = "tests/compiler/test_control_dependencies.py and tests/optim"
NO_ROW = {
    "Variable": "state kept across runs, not a function of the feeds (tests/runtime/test_session.py)",
    "Assign": f"changes a variable and computes nothing new ({ASSIGNMENT_TESTS})",
    "AssignAdd": f"changes a variable; its addition is Add's ({ASSIGNMENT_TESTS})",
    "AssignSub": f"changes a variable; its subtraction is Sub's ({ASSIGNMENT_TESTS})",
    "Group": "orders work and has no value to compare (tests/compiler/test_control_dependencies.py)",
    "InitVariables": "a host-side action, never compiled (tests/runtime/test_session.py)",
    "ReshapeTo": "made only for a size not known when the graph is built; the rows' inputs have known shapes "
                 "(tests/compiler/test_derived_ops.py, with its gradient)",
}


def _op_types_checked_by(row: Row) -> set[str]:
    """The op types in the graphs this module compiles for the row: its output, and the first and
    second gradients where it checks them."""
    if row in SECOND_ORDER_ROWS:
        graph = _with_second_order_gradients(row, np.random.default_rng(0))[0]
    elif row in GRAD_ROWS:
        graph = _with_gradients(row, np.random.default_rng(0))[0]
    else:
        graph = _build(row, "float64")[0]
    return {op.type for op in graph.get_operations()}


def test_every_op_type_has_a_row() -> None:
    checked = set().union(*(_op_types_checked_by(row) for row in ROWS))
    missing = sorted(set(REGISTRY) - checked - set(NO_ROW))
    assert not missing, (f"op types that no row of tests/compiler/op_table.py builds: {', '.join(missing)} "
                         "(add a row, or say in NO_ROW why there cannot be one)")
    stale = sorted(set(NO_ROW) - set(REGISTRY))
    assert not stale, f"NO_ROW names op types that are not registered: {', '.join(stale)}"


@pytest.mark.parametrize("target", ["reference", "cpu", "cuda-emulated"])
@pytest.mark.parametrize("source, dtype", [("float32", "int32"), ("float64", "int64"), ("float64", "int32")])
def test_float_to_int_cast_saturates_and_maps_nan_to_zero(source: str, dtype: str, target: str) -> None:
    """Every target agrees where C leaves the conversion undefined: NaN -> 0, beyond the range ->
    its nearest end, else truncation toward zero."""
    info = np.iinfo(dtype)
    values = np.array([np.nan, np.inf, -np.inf, 3e19, -3e19, 2.7, -2.7, 0.0, -0.0, 1e9], source)
    x = cc.placeholder(source, values.shape)
    with Session(target=target) as sess:
        got = sess.run(cc.cast(x, dtype), {x: values})
    want = [0, info.max, info.min, info.max, info.min, 2, -2, 0, 0, 1_000_000_000]
    np.testing.assert_array_equal(got, np.array(want, dtype))


@pytest.mark.parametrize("target", ["reference", "cpu", "cuda-emulated"])
def test_pow_follows_c_at_signed_zeros_and_infinities(target: str) -> None:
    """pow(x, 0.5) is C's pow, not sqrt: pow(-inf, 0.5) = inf and pow(-0.0, 0.5) = +0.0 on every
    target (numpy's scalar-exponent shortcut gives sqrt's NaN and -0.0)."""
    values = np.array([-np.inf, -0.0, 0.0, np.inf, 4.0, -8.0])
    x = cc.placeholder("float64", values.shape)
    with Session(target=target) as sess:
        got = sess.run(cc.pow(x, 0.5), {x: values})
    np.testing.assert_array_equal(got, [np.inf, 0.0, 0.0, np.inf, 2.0, np.nan])
    assert not np.signbit(got[1])

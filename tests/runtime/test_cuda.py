"""The PTX path run for real: every op-table row and a training step on the GPU equal the numpy
reference. Skipped on machines without an NVIDIA GPU (CI has none)."""
from __future__ import annotations

import numpy as np
import pytest

import compiler as cc
import optim
from runtime import Session
from runtime.cuda import gpu_available

from ..compiler.op_table import ROWS, Row
from ..compiler.test_ops import TOLERANCE, _build, _feeds, _loss_and_weights
from .training_check import check_training_steps_match_reference

pytestmark = pytest.mark.skipif(not gpu_available(), reason="no NVIDIA GPU (libcuda) on this machine")


@pytest.mark.parametrize("dtype", ["float32", "float64"])
@pytest.mark.parametrize("row", ROWS, ids=lambda r: r.id)
def test_cuda_matches_reference(row: Row, dtype: str) -> None:
    graph, placeholders, output = _build(row, dtype)
    with graph.as_default():
        fetches = [output]
        if row.grad and dtype == "float64":
            loss, _ = _loss_and_weights(output, np.random.default_rng(0))
            fetches += [g for g in cc.gradients(loss, [placeholders[i] for i in row.grad]) if g is not None]
    feeds = _feeds(row, placeholders, dtype)
    with Session(graph, target="reference") as ref, Session(graph, target="cuda") as gpu:
        expected = ref.run(fetches, feeds)
        actual = gpu.run(fetches, feeds)
    for want, got in zip(expected, actual):
        assert got.shape == want.shape and got.dtype == want.dtype
        np.testing.assert_allclose(got, want, equal_nan=True, **TOLERANCE[want.dtype.name])


@pytest.mark.parametrize("make_optimizer", [lambda: optim.AdamOptimizer(0.01),
                                            lambda: optim.GradientDescentOptimizer(0.1)],
                         ids=["adam", "sgd-fused-matmul-update"])
def test_cuda_training_steps_match_reference(make_optimizer) -> None:
    check_training_steps_match_reference(make_optimizer, target="cuda")

"""float32 sums over long axes keep float32's accuracy: a register fold adds blocks in float32 and
the blocks' sums in float64 (``common.emit_sum_in_blocks``), on the CPU and in the GPU schedule."""
from __future__ import annotations

import numpy as np
import pytest

import compiler as cc
from compiler.codegen.nvptx import GpuLimits
from runtime import Session

# A block reduction of 8 threads: each thread folds a long strided share (about n / 8 elements).
NARROW_BLOCKS = GpuLimits(reduce_block=8, reduce_min_extent=4)


def _sums(shape: tuple[int, ...], axis: int | None, values: np.ndarray, target: str,
          limits: GpuLimits | None = None) -> list[np.ndarray]:
    graph = cc.Graph()
    with graph.as_default():
        x = cc.placeholder("float32", shape)
        fetches = [cc.reduce_sum(x, axis=axis), cc.reduce_mean(x, axis=axis),
                   cc.reduce_logsumexp(x, axis=axis)]
    options = {"gpu_limits": limits} if limits is not None else {}
    with Session(graph, target=target, **options) as sess:
        return sess.run(fetches, {x: values})


def _expected(values: np.ndarray, axis: int | None) -> list[np.ndarray]:
    wide = values.astype(np.float64)
    peak = wide.max(axis=axis, keepdims=True)
    logsumexp = np.log(np.exp(wide - peak).sum(axis=axis)) + np.squeeze(peak, axis=axis)
    return [wide.sum(axis=axis), wide.mean(axis=axis), logsumexp]


TARGETS = [("cpu", None, "1"), ("cpu", None, "2"), ("cuda-emulated", None, "2"),
           ("cuda-emulated", NARROW_BLOCKS, "2")]


@pytest.mark.parametrize("target, limits, threads", TARGETS,
                         ids=["cpu-1-thread", "cpu-2-threads", "cuda-emulated", "cuda-emulated-narrow-blocks"])
@pytest.mark.parametrize("shape, axis", [((1_000_000,), None), ((3, 400_000), 1), ((500, 2000), None)])
def test_a_long_float32_sum_of_equal_values_stays_accurate(shape, axis, target, limits, threads,
                                                          monkeypatch) -> None:
    # Equal values are the worst case of a running sum: every add rounds the same way (10^6
    # running adds of 0.1 in float32 are 1.5e-4 off).
    monkeypatch.setenv("GRAPHGRAD_THREADS", threads)
    values = np.full(shape, 0.1, np.float32)
    for got, expected in zip(_sums(shape, axis, values, target, limits), _expected(values, axis)):
        np.testing.assert_allclose(got, expected, rtol=2e-6)


@pytest.mark.parametrize("target, limits, threads", TARGETS,
                         ids=["cpu-1-thread", "cpu-2-threads", "cuda-emulated", "cuda-emulated-narrow-blocks"])
@pytest.mark.parametrize("length", [1025, 4097, 8191, 65 * 8 + 3, (1 << 14) + 5])
def test_every_element_is_summed_once_across_block_edges(length: int, target, limits, threads,
                                                         monkeypatch) -> None:
    # Lengths just past whole blocks (4096 on the CPU, 64 per GPU thread): an element dropped or
    # added twice at a block's edge moves the sum by about 1e-3 of it, far more than the tolerance.
    monkeypatch.setenv("GRAPHGRAD_THREADS", threads)
    values = np.random.default_rng(length).uniform(0.5, 1.5, size=(2, length)).astype(np.float32)
    for got, expected in zip(_sums(values.shape, 1, values, target, limits), _expected(values, 1)):
        np.testing.assert_allclose(got, expected, rtol=1e-5)

"""The blocked GEMM path for matmul kernels: shapes around the tile and block edges, transposes,
batches, float32/float64, one or two threads — always equal to numpy."""
from __future__ import annotations

import numpy as np
import pytest

import compiler as cc
from compiler.codegen import cpu
from compiler.codegen.gemm import DEPTH_SPLIT_MIN_BLOCKS, SHARED_MIN_BLOCKS, gemm_shape
from runtime import Session

_TILE = gemm_shape(np.dtype("float32"))
SHAPES = [  # (batch, m, n, k)
    (None, 16, 16, 16), (None, _TILE.mr, _TILE.nr, 64), (None, _TILE.mr + 1, _TILE.nr + 1, 65),
    (None, _TILE.mc + 5, 70, _TILE.kc + 3), (None, 1, 300, 40), (None, 300, 1, 40), (None, 40, 40, 1),
    (None, 129, 67, 2 * _TILE.kc + 1), (3, 17, 33, 20), (2, 64, 8, 64),
    # narrower than the tile: computed transposed (C^T = B^T A^T), also split across threads
    (None, 1000, 10, 300), (None, 200, 7, 2 * _TILE.kc + 5), (None, 9, 5, 700),
    # an MLP's last layer (10 classes), just over the work that is split across threads
    (None, 128, 10, 512),
    # depth just over a block: split into equal blocks
    (None, 50, 64, _TILE.kc * 3 + 16),
    # tall enough for two threads to share one packed B block (partial panels and A blocks), its
    # rows in several parts per thread
    (None, 2 * SHARED_MIN_BLOCKS * _TILE.mc + 17, 300, 2 * _TILE.kc + 9),
    (None, 2 * SHARED_MIN_BLOCKS * _TILE.mc + 3, 33, 200),
    # split by columns, each part packing all of A
    (None, 2 * _TILE.mc + 17, 300, 2 * _TILE.kc + 9),
    # few rows, whole panels of columns: B read in place (not packed) over three depth blocks
    (None, _TILE.in_place_rows - 5, 2 * _TILE.nr, 2 * _TILE.kc + 7), (None, 3, _TILE.nr, 40),
    # a matrix times one or two vectors, large: a loop nest streams the matrix (no packing)
    (None, 2, 700, 300), (None, 600, 1, 500), (None, 1, 1000, 257),
]


@pytest.mark.parametrize("threads", ["1", "2"])
@pytest.mark.parametrize("dtype", ["float32", "float64"])
@pytest.mark.parametrize("transpose_a,transpose_b", [(False, False), (True, False), (False, True), (True, True)])
@pytest.mark.parametrize("batch,m,n,k", SHAPES)
def test_matmul_uses_gemm_and_matches_numpy(batch, m, n, k, transpose_a, transpose_b, dtype, threads,
                                            monkeypatch) -> None:
    monkeypatch.setenv("GRAPHGRAD_THREADS", threads)
    rng = np.random.default_rng(m * 1000 + n * 10 + k)
    a_shape = (k, m) if transpose_a else (m, k)
    b_shape = (n, k) if transpose_b else (k, n)
    if batch:
        a_shape = (batch,) + a_shape
    a_value = rng.normal(size=a_shape).astype(dtype)
    b_value = rng.normal(size=b_shape).astype(dtype)
    graph = cc.Graph()
    with graph.as_default():
        a = cc.placeholder(dtype, a_shape)
        b = cc.placeholder(dtype, b_shape)
        c = cc.matmul(a, b, transpose_a=transpose_a, transpose_b=transpose_b)
    with Session(graph) as sess:
        exe = sess.compile(c, {a: a_value, b: b_value})
        got = sess.run(c, {a: a_value, b: b_value})
    assert (exe.program.kernels[0].kind == "matmul") and cpu._uses_gemm(exe.program.kernels[0]) == (
        m * n * k >= cpu.GEMM_MIN_WORK and min(m, n) > cpu.MATRIX_VECTOR_MAX)
    want = np.matmul(np.swapaxes(a_value, -1, -2) if transpose_a else a_value,
                     np.swapaxes(b_value, -1, -2) if transpose_b else b_value)
    tolerance = dict(rtol=2e-4, atol=2e-4) if dtype == "float32" else dict(rtol=1e-11, atol=1e-11)
    np.testing.assert_allclose(got, want, **tolerance)


def test_gemm_with_empty_depth_gives_zeros() -> None:
    graph = cc.Graph()
    with graph.as_default():
        a = cc.placeholder("float32", (300, 0))
        b = cc.placeholder("float32", (0, 200))
        c = a @ b
    with Session(graph) as sess:
        got = sess.run(c, {a: np.zeros((300, 0), "float32"), b: np.zeros((0, 200), "float32")})
    np.testing.assert_array_equal(got, np.zeros((300, 200), "float32"))


@pytest.mark.parametrize("rows", ["shared", "few"])
@pytest.mark.parametrize("threads", ["1", "2"])
def test_fused_update_through_the_shared_panel_path(threads, rows, monkeypatch) -> None:
    # var -= 0.5 * (a @ b) with a GEMM big enough to be split across threads (accumulating into C),
    # or with few rows (B read in place).
    monkeypatch.setenv("GRAPHGRAD_THREADS", threads)
    rng = np.random.default_rng(5)
    m, n, k = ((2 * SHARED_MIN_BLOCKS * _TILE.mc + 7, 2 * _TILE.nr + 5, _TILE.kc + 40) if rows == "shared"
               else (_TILE.in_place_rows, 4 * gemm_shape(np.dtype("float64")).nr, _TILE.kc + 40))
    a_value, b_value = rng.normal(size=(m, k)), rng.normal(size=(k, n))
    start = rng.normal(size=(m, n))
    graph = cc.Graph()
    with graph.as_default():
        a = cc.placeholder("float64", (m, k))
        b = cc.placeholder("float64", (k, n))
        var = cc.Variable(start)
        update = cc.assign_sub(var, 0.5 * (a @ b))
    with Session(graph) as sess:
        exe = sess.compile(update.op, {a: a_value, b: b_value})
        assert any(kernel.accumulate for kernel in exe.program.kernels)
        sess.run(update.op, {a: a_value, b: b_value})
        got = sess.run(var)
    np.testing.assert_allclose(got, start - 0.5 * (a_value @ b_value), rtol=1e-11, atol=1e-11)


@pytest.mark.parametrize("threads", [1, 2, 3])
@pytest.mark.parametrize("dtype", ["float32", "float64"])
# Channels from the register tile's rows: fewer go to the loop nest (``window_product_pays``).
@pytest.mark.parametrize("x_shape, w_shape, padding", [((24, 16, 16, _TILE.mr + 2), (3, 3, _TILE.mr + 2, 16), "SAME"),
                                                       ((30, 17, 15, _TILE.mr + 7), (3, 2, _TILE.mr + 7, 20), "VALID")],
                         ids=["tile-rows-plus-2", "tile-rows-plus-7"])
def test_filter_gradients_split_along_the_depth_equal_the_reference(x_shape, w_shape, padding, dtype, threads,
                                                                    monkeypatch) -> None:
    # A filter gradient is a short, deep window product (taps x features, summed over every pixel):
    # on several threads each sums its own range of pixels, and the sums are added at the end.
    monkeypatch.setattr(cpu, "thread_count", lambda: threads)
    pixels = x_shape[0] * (x_shape[1] - (w_shape[0] - 1 if padding == "VALID" else 0)) * \
        (x_shape[2] - (w_shape[1] - 1 if padding == "VALID" else 0))
    assert pixels >= 3 * DEPTH_SPLIT_MIN_BLOCKS * _TILE.kc
    rng = np.random.default_rng(1)
    start = rng.normal(size=w_shape)
    graph = cc.Graph()
    with graph.as_default():
        x = cc.placeholder(dtype, x_shape)
        w = cc.Variable(start.astype(dtype))
        y = cc.nn.conv2d(x, w, padding=padding)
        up = cc.placeholder(dtype, y.shape)
        (dw,) = cc.gradients(cc.reduce_sum(y * up), [w])
    feeds = {x: rng.normal(size=x_shape).astype(dtype), up: rng.normal(size=tuple(y.shape)).astype(dtype)}
    with Session(graph) as sess, Session(graph, target="reference") as reference:
        assert "graphgrad_gemm_window_" in sess.compile(dw, feeds).dump("llvm")
        got, want = sess.run(dw, feeds), reference.run(dw, feeds)
    scale = np.abs(want).max()
    np.testing.assert_allclose(got / scale, want / scale, rtol=0, atol=2e-5 if dtype == "float32" else 1e-13)

"""conv2d and its two gradients run as window products (a GEMM whose left matrix the CPU library
packs straight from the image, ``kernel_ir.WindowMatmul``) equal the loop nests, the reference and
finite differences, for every packing path: whole channel vectors, runs shorter than a vector,
single taps, gathers, taps as rows in two runs, partial panels, depth blocks that split a tap,
strides, dilations and both paddings, on any thread count."""
from __future__ import annotations

import numpy as np
import pytest
from llvmlite import binding as llvm

import compiler as cc
from compiler.codegen import cpu
from compiler.codegen.gemm import gemm_shape
from runtime import Session

CASES = [  # x shape, filter shape, conv2d arguments: each big enough for the window product
    ((3, 9, 8, 32), (3, 3, 32, 24), dict(padding="SAME")),                  # whole channel vectors
    ((2, 7, 9, 20), (3, 2, 20, 16), dict(padding="VALID")),                 # vectors, then single taps
    ((2, 11, 10, 3), (5, 5, 3, 17), dict(padding="SAME")),                  # gathers (3 channels)
    ((2, 12, 11, 13), (3, 3, 13, 18), dict(padding="SAME", strides=2)),     # strided (input grad: nest)
    ((1, 13, 12, 16), (3, 2, 16, 20), dict(padding="SAME", dilations=(2, 3))),
    ((5, 6, 7, 40), (2, 3, 40, 33), dict(padding="VALID", strides=(1, 2))),
    ((2, 12, 11, 3), (11, 9, 3, 8), dict(padding="SAME")),                   # depth blocks split a tap
]
IDS = ["channels32", "channels20", "channels3", "stride2", "dilated", "wide", "channels3-deep"]


def conv_and_gradients(x_shape, w_shape, kwargs, dtype):
    """A graph computing (conv2d, input gradient, filter gradient) of sum(conv2d * up): (graph,
    fetches, feeds)."""
    rng = np.random.default_rng(0)
    graph = cc.Graph()
    with graph.as_default():
        x = cc.placeholder(dtype, x_shape)
        w = cc.placeholder(dtype, w_shape)
        y = cc.nn.conv2d(x, w, **kwargs)
        up = cc.placeholder(dtype, y.shape)
        fetches = [y, *cc.gradients(cc.reduce_sum(y * up), [x, w])]
    feeds = {x: rng.normal(size=x_shape).astype(dtype), w: rng.normal(size=w_shape).astype(dtype),
             up: rng.normal(size=tuple(y.shape)).astype(dtype)}
    return graph, fetches, feeds


def _step(x_shape, w_shape, kwargs, dtype, window, target="cpu", monkeypatch=None):
    """(conv2d, input gradient, filter gradient) of sum(conv2d * up), and the step's LLVM IR."""
    if monkeypatch is not None and not window:
        monkeypatch.setattr(cpu, "window_product_pays", lambda *args: False)
    graph, fetches, feeds = conv_and_gradients(x_shape, w_shape, kwargs, dtype)
    with Session(graph, target=target) as sess:
        values = sess.run(fetches, feeds)
        llvm = sess.compile(fetches, feeds).dump("llvm") if target == "cpu" else ""
    if monkeypatch is not None:
        monkeypatch.undo()
    return values, llvm


@pytest.mark.parametrize("dtype", ["float32", "float64"])
@pytest.mark.parametrize("x_shape, w_shape, kwargs", CASES, ids=IDS)
def test_window_products_equal_the_loop_nests_and_the_reference(x_shape, w_shape, kwargs, dtype,
                                                                monkeypatch) -> None:
    window, llvm = _step(x_shape, w_shape, kwargs, dtype, window=True)
    assert "graphgrad_gemm_window_" in llvm
    nest, llvm = _step(x_shape, w_shape, kwargs, dtype, window=False, monkeypatch=monkeypatch)
    assert "graphgrad_gemm_window_" not in llvm
    reference, _ = _step(x_shape, w_shape, kwargs, dtype, window=True, target="reference")
    tolerance = 2e-4 if dtype == "float32" else 1e-11
    for name, a, b, c in zip(("conv2d", "input gradient", "filter gradient"), window, nest, reference):
        scale = max(np.abs(c).max(), 1.0)
        np.testing.assert_allclose(a / scale, c / scale, rtol=0, atol=tolerance, err_msg=name)
        np.testing.assert_allclose(b / scale, c / scale, rtol=0, atol=tolerance, err_msg=name)


@pytest.mark.parametrize("threads", [1, 2, 3])
def test_window_products_equal_the_reference_on_any_thread_count(threads, monkeypatch) -> None:
    monkeypatch.setattr(cpu, "thread_count", lambda: threads)
    x_shape, w_shape, kwargs = CASES[0]
    window, llvm = _step(x_shape, w_shape, kwargs, "float64", window=True)
    assert "graphgrad_gemm_window_" in llvm
    reference, _ = _step(x_shape, w_shape, kwargs, "float64", window=True, target="reference")
    for a, c in zip(window, reference):
        np.testing.assert_allclose(a, c, rtol=1e-11, atol=1e-11)


def test_small_products_keep_the_loop_nest() -> None:
    # A first layer's 3x3x1 taps are too little depth for the register tile: the nest runs it.
    graph = cc.Graph()
    with graph.as_default():
        x = cc.placeholder("float32", (2, 8, 8, 1))
        y = cc.nn.conv2d(x, cc.constant(np.ones((3, 3, 1, 32), "float32")), padding="SAME")
    with Session(graph) as sess:
        llvm = sess.compile(y, {x: np.ones((2, 8, 8, 1), "float32")}).dump("llvm")
    assert "graphgrad_gemm_window_" not in llvm


def test_loop_nest_taps_are_fused_multiply_adds() -> None:
    # The nest's sum over the taps is marked for contraction: on a CPU with FMA each tap is one
    # fused multiply-add (it was a multiply and an add), and the result equals the reference.
    graph = cc.Graph()
    filters = np.random.default_rng(3).normal(size=(3, 3, 1, 32)).astype("float32")
    with graph.as_default():
        x = cc.placeholder("float32", (2, 8, 8, 1))
        y = cc.nn.conv2d(x, cc.constant(filters), padding="SAME")
    image = np.random.default_rng(4).normal(size=(2, 8, 8, 1)).astype("float32")
    with Session(graph) as sess, Session(graph, target="reference") as reference:
        exe = sess.compile(y, {x: image})
        np.testing.assert_allclose(sess.run(y, {x: image}), reference.run(y, {x: image}), rtol=1e-5, atol=1e-5)
    text = exe.dump("llvm")
    assert "fmul contract float" in text and "fadd reassoc contract float" in text
    if llvm.get_host_cpu_features().flatten().find("+fma") >= 0:
        assert "vfmadd" in exe.dump("asm")


@pytest.mark.parametrize("more_channels", [0, 1])
def test_filter_gradients_of_few_channels_keep_the_loop_nest(more_channels) -> None:
    # A filter gradient whose image has fewer channels than the register tile has rows would pack
    # its panels element by element: the nest runs it (and from a tile's rows of channels, the library).
    channels = gemm_shape(np.dtype("float32")).mr - 1 + more_channels
    graph = cc.Graph()
    with graph.as_default():
        x = cc.placeholder("float32", (8, 16, 16, channels))
        w = cc.placeholder("float32", (3, 3, channels, 32))
        (dw,) = cc.gradients(cc.reduce_sum(cc.nn.conv2d(x, w, padding="SAME")), [w])
    feeds = {x: np.ones((8, 16, 16, channels), "float32"), w: np.ones((3, 3, channels, 32), "float32")}
    with Session(graph) as sess:
        kernels = [kernel for kernel in sess.compile(dw, feeds).program.kernels
                   if kernel.window is not None and not kernel.window.pixel_rows]
    assert len(kernels) == 1 and cpu._uses_gemm(kernels[0]) == bool(more_channels)


def test_window_products_match_finite_differences() -> None:
    x_shape, w_shape = (1, 6, 5, 12), (3, 3, 12, 16)
    rng = np.random.default_rng(2)
    graph = cc.Graph()
    with graph.as_default():
        x = cc.placeholder("float64", x_shape)
        w = cc.placeholder("float64", w_shape)
        loss = cc.reduce_sum(cc.sin(cc.nn.conv2d(x, w, padding="SAME")))
        gradients = cc.gradients(loss, [x, w])
    feeds = {x: rng.normal(size=x_shape), w: rng.normal(size=w_shape)}
    with Session(graph) as sess:
        assert "graphgrad_gemm_window_" in sess.compile(gradients, feeds).dump("llvm")
        analytic = sess.run(gradients, feeds)
        for tensor, gradient in zip((x, w), analytic):
            base = feeds[tensor]
            for index in [tuple(rng.integers(0, n) for n in base.shape) for _ in range(12)]:
                values = []
                for step in (1e-6, -1e-6):
                    moved = base.copy()
                    moved[index] += step
                    values.append(sess.run(loss, {**feeds, tensor: moved}))
                numeric = (values[0] - values[1]) / 2e-6
                np.testing.assert_allclose(gradient[index], numeric, rtol=1e-6, atol=1e-7)


def test_second_derivatives_through_window_products() -> None:
    x_shape, w_shape = (2, 7, 6, 16), (3, 3, 16, 16)
    rng = np.random.default_rng(1)
    results = []
    for target in ("cpu", "reference"):
        graph = cc.Graph()
        with graph.as_default():
            x = cc.placeholder("float64", x_shape)
            w = cc.placeholder("float64", w_shape)
            (gw,) = cc.gradients(cc.reduce_sum(cc.sin(cc.nn.conv2d(x, w, padding="SAME"))), [w])
            direction = cc.constant(np.random.default_rng(3).normal(size=w_shape))
            second = cc.gradients(cc.reduce_sum(gw * direction), [x, w])
        with Session(graph, target=target) as sess:
            results.append(sess.run(second, {x: rng.normal(size=x_shape), w: rng.normal(size=w_shape)}))
        rng = np.random.default_rng(1)
    for compiled, reference in zip(*results):
        np.testing.assert_allclose(compiled, reference, rtol=1e-10, atol=1e-10)


def test_the_kernel_dump_shows_the_product() -> None:
    x = cc.placeholder("float32", (4, 9, 9, 16))
    w = cc.placeholder("float32", (3, 3, 16, 32))
    y = cc.nn.conv2d(x, w, padding="SAME")
    with Session() as sess:
        text = sess.compile(y, {x: np.zeros((4, 9, 9, 16), "float32"),
                                w: np.zeros((3, 3, 16, 32), "float32")}).dump("kernels")
    assert ("as a product over in0 (image 4x9x9x16): rows = pixels (n, i, j) 4x9x9, "
            "depth = taps (u, v, c) 3x3x16, columns = axis 3; h = i*1 + u*1 + -1, w = j*1 + v*1 + -1") in text


@pytest.mark.parametrize("target", ["cpu", "reference"])
def test_the_second_derivative_of_max_pool_on_an_empty_batch(target: str) -> None:
    with cc.Graph().as_default():
        x = cc.placeholder("float64", (None, 6, 4, 1), name="x")
        (first,) = cc.gradients(cc.reduce_sum(cc.sin(cc.nn.max_pool(x, 2, 2))), [x])
        (second,) = cc.gradients(cc.reduce_sum(first), [x])
        with Session(target=target) as sess:
            assert sess.run(second, {x: np.zeros((0, 6, 4, 1))}).shape == (0, 6, 4, 1)


def test_a_few_channel_filter_gradient_forced_through_the_library_equals_the_reference(monkeypatch) -> None:
    # The library's gathers for taps as rows of fewer channels than the tile's rows, which the
    # routing now leaves to the loop nest, still compute the same.
    x_shape, w_shape, kwargs = CASES[2]   # 3 channels
    reference, _ = _step(x_shape, w_shape, kwargs, "float64", window=True, target="reference")
    monkeypatch.setattr(cpu, "window_product_pays", lambda *args: True)
    forced, llvm = _step(x_shape, w_shape, kwargs, "float64", window=True)
    assert "graphgrad_gemm_window_" in llvm
    for name, a, c in zip(("conv2d", "input gradient", "filter gradient"), forced, reference):
        np.testing.assert_allclose(a, c, rtol=1e-11, atol=1e-11, err_msg=name)

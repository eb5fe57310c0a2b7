"""The PTX path run for real: every op-table row and a training step on the GPU equal the numpy
reference, variables stay on the device, and steps replay as CUDA graphs. Skipped on machines
without an NVIDIA GPU (CI has none); ``test_cuda_runtime.py`` tests the runtime's bookkeeping
against a fake driver."""
from __future__ import annotations

import numpy as np
import pytest

import compiler as cc
import optim
from runtime import Session
from runtime.cuda import CudaError, gpu_available

from ..compiler.op_table import ROWS, Row
from ..compiler.test_ops import TOLERANCE, _build, _feeds, _loss_and_weights
from .training_check import check_training_steps_match_reference

pytestmark = pytest.mark.skipif(not gpu_available(),
                                reason="no NVIDIA GPU here (target='cuda' needs a GPU, its driver and cuda-bindings)")


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
    refusal = _refusal_on_cuda(graph, fetches, feeds)
    if refusal is not None:   # what target="cuda" does not do yet, said at the first run
        with Session(graph, target="cuda") as gpu, pytest.raises(refusal[0], match=refusal[1]):
            gpu.run(fetches, feeds)
        return
    with Session(graph, target="reference") as ref, Session(graph, target="cuda") as gpu:
        expected = ref.run(fetches, feeds)
        actual = gpu.run(fetches, feeds)
    for want, got in zip(expected, actual):
        assert got.shape == want.shape and got.dtype == want.dtype
        np.testing.assert_allclose(got, want, equal_nan=True, **TOLERANCE[want.dtype.name])


def _refusal_on_cuda(graph: cc.Graph, fetches: list, feeds: dict) -> tuple[type, str] | None:
    """The error target="cuda" documents for this step (check_numerics ops; a loop whose stacks
    grow at run time), from the same step compiled for cuda-emulated; None when it runs."""
    with Session(graph, target="cuda-emulated") as emulated:
        program = emulated.compile(fetches, feeds).program
    if any(kernel.check for kernel in program.kernels):
        return cc.CompileError, "check_numerics ops are not checked on target='cuda' yet"
    if any(buffer.role == "stack" for buffer in program.buffers):
        return CudaError, "without maximum_iterations"
    return None


@pytest.mark.parametrize("make_optimizer", [lambda: optim.AdamOptimizer(0.01),
                                            lambda: optim.GradientDescentOptimizer(0.1)],
                         ids=["adam", "sgd-fused-matmul-update"])
def test_cuda_training_steps_match_reference(make_optimizer) -> None:
    check_training_steps_match_reference(make_optimizer, target="cuda")


# -- device-resident variables and CUDA graphs, on the GPU ------------------------------------------------

def _regression(graph: cc.Graph):
    rng = np.random.default_rng(1)
    with graph.as_default():
        x = cc.placeholder("float32", (None, 8), name="x")
        w = cc.Variable(rng.normal(size=(8, 3)).astype("float32"), name="w")
        loss = cc.reduce_mean(cc.square(x @ w - 1.0))
        train = optim.AdamOptimizer(0.05).minimize(loss)
    return x, w, loss, train, {x: rng.normal(size=(16, 8)).astype("float32")}


def test_cuda_variables_stay_on_the_device_until_fetched(graph) -> None:
    x, w, loss, train, feeds = _regression(graph)
    with Session(graph, target="reference") as ref, Session(graph, target="cuda") as gpu:
        for _ in range(5):
            ref.run(train, feeds)
            gpu.run(train, feeds)
        host = gpu._variables[w]
        np.testing.assert_array_equal(host, w.initial_value)      # not copied back by the runs
        assert gpu._device_variables.host_is_stale(w)
        np.testing.assert_allclose(gpu.run(w), ref.run(w), rtol=1e-5, atol=1e-6)
        np.testing.assert_allclose(host, ref.run(w), rtol=1e-5, atol=1e-6)   # the fetch refreshed it


def test_cuda_steps_replay_a_graph_from_the_second_run(graph) -> None:
    x, w, loss, train, feeds = _regression(graph)
    with Session(graph, target="reference") as ref, Session(graph, target="cuda") as gpu:
        for _ in range(4):
            want = ref.run([loss, train], feeds)[0]
            got = gpu.run([loss, train], feeds)[0]
            np.testing.assert_allclose(got, want, rtol=1e-5)
        exe = gpu.compile([loss, train], feeds)
        assert exe.captured and exe.capture_error is None and exe.graph_launches == 3
        np.testing.assert_allclose(gpu.run(loss, feeds), ref.run(loss, feeds), rtol=1e-5)   # another step


def test_cuda_load_variable_initializer_and_restore_reach_the_device(graph, tmp_path) -> None:
    x, w, loss, train, feeds = _regression(graph)
    with graph.as_default():
        saver = optim.Saver({"w": w})
        init = cc.global_variables_initializer()
    with Session(graph, target="reference") as ref, Session(graph, target="cuda") as gpu:
        for sess in (ref, gpu):
            sess.run(train, feeds)
            path = saver.save(sess, str(tmp_path / sess.target))
            sess.load_variable(w, np.full((8, 3), 0.5, "float32"))
            sess.run(train, feeds)
            saver.restore(sess, path)
            sess.run(train, feeds)
        np.testing.assert_allclose(gpu.run(w), ref.run(w), rtol=1e-5, atol=1e-6)
        for sess in (ref, gpu):
            sess.run(init)
            sess.run(train, feeds)
        np.testing.assert_allclose(gpu.run(w), ref.run(w), rtol=1e-5, atol=1e-6)


def test_cuda_a_branch_runs_without_a_graph(graph) -> None:
    with graph.as_default():
        x = cc.placeholder("float32", (4,), name="x")
        y = cc.cond(cc.reduce_sum(x) > 0.0, lambda: cc.exp(x), lambda: cc.sin(x))
    with Session(graph, target="cuda") as gpu:
        for sign in (1.0, -1.0, 1.0):
            value = np.full(4, sign, "float32")
            np.testing.assert_allclose(gpu.run(y, {x: value}), np.exp(value) if sign > 0 else np.sin(value),
                                       rtol=1e-6)
        assert not gpu.compile(y, {x: value}).captured

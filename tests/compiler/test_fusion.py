"""Fusion must not silently regress: the number of kernels of reference steps is pinned, and the
fused kernels cover what they should."""
from __future__ import annotations

import numpy as np
import pytest

import compiler as cc
import optim
from runtime import Session


def _mlp_step(optimizer: optim.Optimizer):
    rng = np.random.default_rng(0)
    graph = cc.Graph()
    with graph.as_default():
        x = cc.placeholder("float32", (None, 784), name="x")
        y = cc.placeholder("int32", (None,), name="y")
        h = x
        sizes = [784, 512, 512, 10]
        for i in range(3):
            w = cc.Variable(rng.normal(size=(sizes[i], sizes[i + 1])).astype("float32") * 0.05, name=f"w{i}")
            b = cc.Variable(np.zeros(sizes[i + 1], "float32"), name=f"b{i}")
            h = h @ w + b
            if i < 2:
                h = cc.nn.relu(h)
        loss = cc.reduce_mean(cc.nn.sparse_softmax_cross_entropy_with_logits(labels=y, logits=h))
        train = optimizer.minimize(loss)
    feeds = {x: np.zeros((128, 784), "float32"), y: np.zeros(128, "int32")}
    with Session(graph) as sess:
        return sess.compile(train, feeds)


def test_mlp_sgd_step_kernel_count_is_pinned() -> None:
    exe = _mlp_step(optim.GradientDescentOptimizer(0.01))
    kinds = [k.kind for k in exe.program.kernels]
    assert kinds.count("matmul") == 8  # 3 forward; 3 weight grads and 2 hidden-input grads (x needs none)
    assert len(kinds) == 33, exe.report()
    # var -= lr * (a @ b): the weight-gradient matmuls add straight into the weights
    updates = [k for k in exe.program.kernels if k.kind == "matmul" and k.accumulate]
    assert len(updates) == 3 and all(k.scale == pytest.approx(-0.01, rel=1e-6) for k in updates)
    assert {exe.program.buffers[k.out.buffer].role for k in updates} == {"variable"}
    # bias-add and relu share one kernel in each hidden layer
    fused = [k for k in exe.program.kernels if {"Add", "Relu"} <= {c[0] for c in k.covers}]
    assert len(fused) == 2


def test_mlp_adam_step_updates_slots_in_place() -> None:
    exe = _mlp_step(optim.AdamOptimizer(1e-3))
    program = exe.program
    copies = [k for k in program.kernels if [c[0] for c in k.covers] == ["Assign"]]
    assert copies == []  # m and v are written by the kernels that compute them
    assert len(program.kernels) == 51, exe.report()


UPDATE_CASES = {
    # name: (variable shape, build the update from (var, a, b) placeholders)
    "small-sgd": ((4, 3), lambda v, a, b: cc.assign_sub(v, 0.1 * cc.matmul(a, b, transpose_a=True))),
    "large-sgd": ((70, 90), lambda v, a, b: cc.assign_sub(v, cc.matmul(a, b, transpose_a=True) * 0.05)),
    "plain-add": ((70, 90), lambda v, a, b: cc.assign_add(v, cc.matmul(a, b, transpose_a=True))),
    "reads-itself": ((70, 70), lambda v, a, b: cc.assign_sub(v, 0.01 * cc.matmul(v, v))),
    "product-also-fetched": ((70, 90), lambda v, a, b: cc.group(
        cc.assign_sub(v, 0.1 * cc.matmul(a, b, transpose_a=True)), cc.matmul(a, b, transpose_a=True))),
}


@pytest.mark.parametrize("dtype", ["float32", "float64"])
@pytest.mark.parametrize("name", sorted(UPDATE_CASES))
def test_matmul_updates_equal_the_reference(name: str, dtype: str) -> None:
    shape, build = UPDATE_CASES[name]
    rng = np.random.default_rng(5)
    graph = cc.Graph()
    with graph.as_default():
        v = cc.Variable(rng.normal(size=shape).astype(dtype), name="v")
        a = cc.placeholder(dtype, (33, shape[0]), name="a")
        b = cc.placeholder(dtype, (33, shape[1]), name="b")
        update = build(v, a, b)
    feeds = {a: rng.normal(size=(33, shape[0])).astype(dtype), b: rng.normal(size=(33, shape[1])).astype(dtype)}
    results = {}
    for target in ("reference", "cpu"):
        with Session(graph, target=target) as sess:
            for _ in range(3):
                sess.run(update, feeds)
            results[target] = sess.run(v)
    tolerance = dict(rtol=1e-4, atol=1e-4) if dtype == "float32" else dict(rtol=1e-11, atol=1e-11)
    np.testing.assert_allclose(results["cpu"], results["reference"], **tolerance)

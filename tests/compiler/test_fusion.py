"""Fusion must not silently regress: the number of kernels of reference steps is pinned, and the
fused kernels cover what they should."""
from __future__ import annotations

import numpy as np

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
    assert len(kinds) == 36, exe.report()
    # bias-add and relu share one kernel in each hidden layer
    fused = [k for k in exe.program.kernels if {"Add", "Relu"} <= {c[0] for c in k.covers}]
    assert len(fused) == 2


def test_mlp_adam_step_updates_slots_in_place() -> None:
    exe = _mlp_step(optim.AdamOptimizer(1e-3))
    program = exe.program
    copies = [k for k in program.kernels if [c[0] for c in k.covers] == ["Assign"]]
    assert copies == []  # m and v are written by the kernels that compute them
    assert len(program.kernels) == 51, exe.report()

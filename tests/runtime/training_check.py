"""One small training step checked against the reference target, for the GPU targets' tests."""
from __future__ import annotations

from typing import Any, Callable

import numpy as np

import compiler as cc
from runtime import Session

def check_training_steps_match_reference(make_optimizer: Callable[[], Any], **session_options: Any) -> None:
    """Three steps of a two-layer float64 classifier on ``Session(**session_options)`` give the
    reference target's losses and variables."""
    rng = np.random.default_rng(0)
    graph = cc.Graph()
    with graph.as_default():
        x = cc.placeholder("float64", (None, 16), name="x")
        y = cc.placeholder("int32", (None,), name="y")
        w1 = cc.Variable(rng.normal(size=(16, 32)) * 0.3, name="w1")
        w2 = cc.Variable(rng.normal(size=(32, 4)) * 0.3, name="w2")
        logits = cc.nn.relu(x @ w1) @ w2
        loss = cc.reduce_mean(cc.nn.sparse_softmax_cross_entropy_with_logits(labels=y, logits=logits))
        train = make_optimizer().minimize(loss)
    feeds = {x: rng.normal(size=(50, 16)), y: rng.integers(0, 4, 50).astype("int32")}
    with Session(graph, target="reference") as ref, Session(graph, **session_options) as other:
        for _ in range(3):
            want = ref.run([loss, train], feeds)[0]
            got = other.run([loss, train], feeds)[0]
            np.testing.assert_allclose(got, want, rtol=1e-11)
        np.testing.assert_allclose(other.run(w1), ref.run(w1), rtol=1e-10, atol=1e-12)

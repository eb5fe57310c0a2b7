"""The graphs and compiled steps the pass tests look at, taken from the compiler's own stages."""
from __future__ import annotations

from typing import Sequence

import numpy as np

import compiler as cc
import optim
from compiler.graph import Operation, Tensor
from compiler.kernel_ir import Kernel, Program
from compiler.passes.specialize import Node, needed_operations, ordered_nodes, specialize
from runtime import Session
from runtime.executable import Executable

Fetch = Tensor | Operation
FeedShapes = dict[Tensor, tuple[int, ...]]
Step = tuple[list[Fetch], FeedShapes]              # what to fetch, and the shape of each feed


def specialized_nodes(fetches: Sequence[Fetch], feed_shapes: FeedShapes | None = None
                      ) -> tuple[list[Node], list[Node | None]]:
    """The nodes that ``compile_step`` hands to the rewrite passes, and the nodes of the fetched
    tensors (None for operations)."""
    roots = [f.op if isinstance(f, Tensor) else f for f in fetches]
    nodes_by_op = specialize(needed_operations(roots), feed_shapes or {})
    fetched = [nodes_by_op[f.op] if isinstance(f, Tensor) else None for f in fetches]
    return ordered_nodes(nodes_by_op), fetched


def node_types(nodes: Sequence[Node]) -> list[str]:
    return [node.opdef.name for node in nodes]


def kernels_covering(program: Program, op_type: str) -> list[Kernel]:
    """The kernels that compute an op of ``op_type`` (fused or alone)."""
    return [k for k in program.kernels if op_type in {covered[0] for covered in k.covers}]


def mlp_training_step(optimizer: optim.Optimizer) -> Executable:
    """One training step of a 784-512-512-10 ReLU network on a batch of 128, compiled."""
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

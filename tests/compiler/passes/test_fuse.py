"""``passes.fuse``: which nodes share a kernel and which get a buffer. Fusion must not silently
regress: the number of kernels of reference steps is pinned, and the fused kernels cover what they
should."""
from __future__ import annotations

import numpy as np
import pytest

import compiler as cc
import optim
from compiler.passes import fuse
from compiler.pipeline import compile_step
from runtime import Session

from .steps import kernels_covering, mlp_training_step


def test_an_elementwise_chain_with_one_consumer_is_one_kernel_reading_through_strides(graph) -> None:
    x = cc.placeholder("float32", (6, 4), name="x")
    y = cc.transpose(cc.tanh(x)) * 2.0
    program = compile_step([y], {x: (6, 4)}).program
    assert len(program.kernels) == 1
    (kernel,) = program.kernels
    assert {covered[0] for covered in kernel.covers} == {"Tanh", "Transpose", "Mul"}
    assert kernel.space == (4, 6) and [a.strides for a in kernel.operands] == [(1, 4)]  # transposed read


def test_an_elementwise_value_with_two_consumers_gets_its_own_buffer(graph) -> None:
    x = cc.placeholder("float32", (6, 4), name="x")
    e = cc.exp(x)
    fetches = [cc.reduce_sum(e, axis=0), cc.reduce_max(e, axis=1)]
    program = compile_step(fetches, {x: (6, 4)}).program
    (exp_kernel,) = kernels_covering(program, "Exp")
    assert [covered[0] for covered in exp_kernel.covers] == ["Exp"]
    assert program.buffers[exp_kernel.out.buffer].role == "temp"
    readers = [k for k in program.kernels if exp_kernel.out.buffer in {a.buffer for a in k.operands}]
    assert {covered[0] for k in readers for covered in k.covers} == {"ReduceSum", "ReduceMax"}


@pytest.mark.parametrize("target", ["cpu", "cuda-emulated"])
@pytest.mark.parametrize("check_numerics", [False, True])
def test_a_concat_of_its_own_is_one_copy_kernel_per_input_writing_its_slice(target: str, check_numerics: bool) -> None:
    """Each input (an empty one skipped) is copied into its columns of the output, with what
    produces it fused into the copy; a NaN in any part is caught when every value is checked."""
    graph = cc.Graph()
    with graph.as_default():
        x = cc.placeholder("float32", (5, 4), name="x")
        y = cc.placeholder("float32", (5, 3), name="y")
        empty = cc.placeholder("float32", (5, 0), name="empty")
        joined = cc.concat([cc.exp(x), empty, y, x[:, :2]], axis=1)
        fetches = [joined, cc.reduce_sum(joined, axis=0)]
    feeds = {x: np.arange(20, dtype="float32").reshape(5, 4) / 10, y: -np.ones((5, 3), "float32"),
             empty: np.zeros((5, 0), "float32")}
    with Session(graph, target=target, check_numerics=check_numerics) as sess:
        exe = sess.compile(fetches, feeds)
        values = sess.run(fetches, feeds)
        copies = kernels_covering(exe.program, "ConcatV2")
        assert [k.space for k in copies] == [(5, 4), (5, 3), (5, 2)], exe.dump("kernels")
        assert [k.out.offset for k in copies] == [0, 4, 7] and {k.out.strides for k in copies} == {(9, 1)}
        if check_numerics:
            with pytest.raises(cc.NumericsError, match="ConcatV2"):
                sess.run(fetches, {**feeds, y: np.full((5, 3), np.nan, "float32")})
    want = np.concatenate([np.exp(feeds[x]), feeds[y], feeds[x][:, :2]], axis=1)
    np.testing.assert_allclose(values[0], want, rtol=1e-6)
    np.testing.assert_allclose(values[1], want.sum(axis=0), rtol=1e-5)


# An op computed on its own as strided copies and fills: (op, input shape, the op applied to exp(x),
# numpy's, and per kernel (space, out offset, out strides, operands)). Pad: the middle, then each
# border slab; tile: one kernel over (multiple, position) pairs.
COPY_LAYOUTS = [
    ("Pad", (3, 4), lambda e: cc.pad(e, [[1, 2], [0, 3]], constant_values=-5.0),
     lambda e: np.pad(e, [[1, 2], [0, 3]], constant_values=-5.0),
     [((3, 4), 7, (7, 1), 1), ((1, 7), 0, (7, 1), 0), ((2, 7), 28, (7, 1), 0), ((6, 3), 4, (7, 1), 0)]),
    ("Tile", (3, 1, 4), lambda e: cc.tile(e, [2, 5, 1]), lambda e: np.tile(e, [2, 5, 1]),
     [((2, 3, 5, 1, 1, 4), 0, (60, 20, 4, 4, 4, 1), 1)]),
]


@pytest.mark.parametrize("target", ["cpu", "cuda-emulated"])
@pytest.mark.parametrize("op, shape, build, reference, layout", COPY_LAYOUTS, ids=[row[0] for row in COPY_LAYOUTS])
def test_a_pad_or_tile_of_its_own_is_strided_copies_and_fills(op, shape, build, reference, layout,
                                                              target: str) -> None:
    graph = cc.Graph()
    with graph.as_default():
        x = cc.placeholder("float32", shape, name="x")
        result = build(cc.exp(x))
        fetches = [result, cc.reduce_sum(result, axis=0)]
    feeds = {x: np.arange(np.prod(shape), dtype="float32").reshape(shape) / 10}
    with Session(graph, target=target) as sess:
        exe = sess.compile(fetches, feeds)
        values = sess.run(fetches, feeds)
    kernels = kernels_covering(exe.program, op)
    assert [(k.space, k.out.offset, k.out.strides, len(k.operands)) for k in kernels] == layout, exe.dump("kernels")
    want = reference(np.exp(feeds[x]))
    np.testing.assert_allclose(values[0], want, rtol=1e-6)
    np.testing.assert_allclose(values[1], want.sum(axis=0), rtol=1e-5)


def test_reshape_is_a_view_of_its_input(graph) -> None:
    x = cc.placeholder("float32", (6, 4), name="x")
    s = cc.sin(x)
    fetches = [cc.reduce_sum(cc.reshape(s, (24,))), s]
    program = compile_step(fetches, {x: (6, 4)}).program
    assert kernels_covering(program, "Reshape") == []
    (sin_kernel,) = kernels_covering(program, "Sin")
    (sum_kernel,) = kernels_covering(program, "ReduceSum")
    assert [(a.buffer, a.strides) for a in sum_kernel.operands] == [(sin_kernel.out.buffer, (1,))]


def test_mlp_sgd_step_kernel_count_is_pinned() -> None:
    exe = mlp_training_step(optim.GradientDescentOptimizer(0.01))
    kinds = [k.kind for k in exe.program.kernels]
    assert kinds.count("matmul") == 8  # 3 forward; 3 weight grads and 2 hidden-input grads (x needs none)
    # one (128, 1) kernel: NaN for labels out of range (target cuda); three to check them (in range,
    # all of them, the assertion). The loss itself is not computed: the gradient starts from ones
    # of its (known) shape, which read nothing of it.
    assert len(kinds) == 29, exe.report()
    # var -= lr * (a @ b): the weight-gradient matmuls add straight into the weights
    updates = [k for k in exe.program.kernels if k.kind == "matmul" and k.accumulate]
    assert len(updates) == 3 and all(k.scale == pytest.approx(-0.01, rel=1e-6) for k in updates)
    assert {exe.program.buffers[k.out.buffer].role for k in updates} == {"variable"}
    # bias-add and relu share one kernel in each hidden layer
    fused = [k for k in exe.program.kernels if {"Add", "Relu"} <= {c[0] for c in k.covers}]
    assert len(fused) == 2


UPDATE_CASES = {
    # name: (variable shape, build the update from (var, a, b) placeholders)
    "small-sgd": ((4, 3), lambda v, a, b: cc.assign_sub(v, 0.1 * cc.matmul(a, b, transpose_a=True))),
    "large-sgd": ((70, 90), lambda v, a, b: cc.assign_sub(v, cc.matmul(a, b, transpose_a=True) * 0.05)),
    "plain-add": ((70, 90), lambda v, a, b: cc.assign_add(v, cc.matmul(a, b, transpose_a=True))),
    "reads-itself": ((70, 70), lambda v, a, b: cc.assign_sub(v, 0.01 * cc.matmul(v, v))),
    "assign": ((70, 90), lambda v, a, b: cc.assign(v, cc.matmul(a, b, transpose_a=True)).op),
    "assign-scaled": ((4, 3), lambda v, a, b: cc.assign(v, 0.5 * cc.matmul(a, b, transpose_a=True)).op),
    "assign-reads-itself": ((70, 70), lambda v, a, b: cc.assign(v, cc.matmul(v, v) * 0.01).op),
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
    if name.startswith("assign") and "itself" not in name:  # the product is written into the variable
        with Session(graph) as sess:
            (kernel,) = sess.compile(update, feeds).program.kernels
        assert kernel.matmul is not None and not kernel.accumulate


@pytest.mark.parametrize("length", [200, 3000])
def test_a_chain_of_thousands_of_elementwise_ops_compiles_in_bounded_kernels(length: int) -> None:
    # One fused expression of thousands of ops overflowed the compiler's recursive walks.
    graph = cc.Graph()
    with graph.as_default():
        x = cc.placeholder("float64", (3,), name="x")
        y = x
        for _ in range(length):
            y = y * 1.0001 + 0.001
        total = cc.add_n([x * float(k) for k in range(300)])
        (slope,) = cc.gradients(cc.reduce_sum(y) + cc.reduce_sum(total), [x])
    value = np.array([0.5, -1.0, 2.0])
    expected = value.copy()
    for _ in range(length):
        expected = expected * 1.0001 + 0.001
    with Session(graph) as sess:
        got, got_total, got_slope = sess.run([y, total, slope], {x: value})
        program = sess.compile([y, total, slope], {x: value}).program
    np.testing.assert_allclose(got, expected, rtol=1e-12)
    np.testing.assert_allclose(got_total, value * sum(range(300)), rtol=1e-12)
    np.testing.assert_allclose(got_slope, 1.0001 ** length + sum(range(300)), rtol=1e-9)
    assert len(program.kernels) >= 2 * length // fuse.MAX_FUSED_DEPTH    # the chain cut into pieces

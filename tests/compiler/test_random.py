"""Random ops (Philox-4x32-10 in the generated code): known-answer vectors, reproducibility across
sessions and processes, seeds, the per-graph run counter, cpu == reference, distributions, dropout
and its gradient, PTX, checkpoints, and errors."""
from __future__ import annotations

import ctypes
import math
import os
import subprocess
import sys
import textwrap

import llvmlite.binding as llvm
import numpy as np
import pytest
from llvmlite import ir

import compiler as cc
import optim
from compiler.codegen import random_bits
from compiler.codegen.cpu import new_host_target_machine
from compiler.ops.random_seed import DEFAULT_GRAPH_SEED, get_random_counter, get_seed, philox_key
from compiler.philox import philox4x32
from optim.saver import Saver
from runtime import Session

from ..conftest import PTXAS

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
THIS_FILE = os.path.basename(__file__)

# Random123's published known answers for Philox-4x32-10: counter words, key words, output words.
KNOWN_ANSWERS = [
    ((0, 0, 0, 0), (0, 0), (0x6627E8D5, 0xE169C58D, 0xBC57AC4C, 0x9B00DBD8)),
    ((0xFFFFFFFF,) * 4, (0xFFFFFFFF,) * 2, (0x408F276D, 0x41C83B0E, 0xA20BC7C6, 0x6D5451FD)),
    ((0x243F6A88, 0x85A308D3, 0x13198A2E, 0x03707344), (0xA4093822, 0x299F31D0),
     (0xD16CFE09, 0x94FDCCEB, 0x5001E420, 0x24126EA1)),
]


def _run_times(sess: Session, fetch, times: int, feeds=None) -> list:
    return [sess.run(fetch, feeds) for _ in range(times)]


# -- the generator itself ---------------------------------------------------------------------------

@pytest.mark.parametrize("counter, key, expected", KNOWN_ANSWERS)
def test_numpy_philox_known_answers(counter, key, expected) -> None:
    assert tuple(int(w) for w in philox4x32(counter, key)) == expected


def _jit_philox(constant_lane: bool):
    """``void f(i64 run, i64 block, i64 key, i64 lane, i64* out)`` writing the four words."""
    i64 = ir.IntType(64)
    module = ir.Module(name="philox_kat")
    module.triple = new_host_target_machine().triple
    function = ir.Function(module, ir.FunctionType(ir.VoidType(), [i64] * 4 + [ir.PointerType()]),
                           name="philox_kat")
    run, block, key, lane, out = function.args
    builder = ir.IRBuilder(function.append_basic_block("entry"))
    for position in range(4):
        which = ir.Constant(i64, position) if constant_lane else builder.add(lane, ir.Constant(i64, position))
        word = random_bits.emit_philox(builder, run, block, key, which)
        builder.store(word, builder.gep(out, [ir.Constant(i64, position)], source_etype=i64))
    builder.ret_void()
    parsed = llvm.parse_assembly(str(module))
    parsed.verify()
    engine = llvm.create_mcjit_compiler(parsed, new_host_target_machine())
    engine.finalize_object()
    prototype = ctypes.CFUNCTYPE(None, *[ctypes.c_uint64] * 4, ctypes.c_void_p)
    return engine, prototype(engine.get_function_address("philox_kat"))


@pytest.mark.parametrize("constant_lane", [True, False])
def test_llvm_philox_known_answers(constant_lane: bool) -> None:
    engine, function = _jit_philox(constant_lane)
    for counter, key, expected in KNOWN_ANSWERS:
        out = np.zeros(4, np.uint64)
        function(counter[2] | counter[3] << 32, counter[0] | counter[1] << 32, key[0] | key[1] << 32,
                 0, out.ctypes.data)
        assert tuple(int(w) for w in out) == expected
    del engine


# -- reproducibility and seeds ------------------------------------------------------------------

def _seeded_graph(graph_seed=None, op_seed=None, dtype="float32"):
    g = cc.Graph()
    with g.as_default():
        if graph_seed is not None:
            cc.set_random_seed(graph_seed)
        u = cc.random_uniform((4, 5), dtype=dtype, seed=op_seed)
        n = cc.random_normal((7,), dtype=dtype, seed=op_seed)
    return g, [u, n]


def test_same_seeds_same_numbers_across_sessions_and_graphs() -> None:
    g1, f1 = _seeded_graph(5, 9)
    g2, f2 = _seeded_graph(5, 9)
    with Session(g1) as a, Session(g2) as b:
        first = _run_times(a, f1, 3)
        second = _run_times(b, f2, 3)
    for x, y in zip(first, second):
        for p, q in zip(x, y):
            np.testing.assert_array_equal(p, q)


def test_same_numbers_in_a_new_process() -> None:
    script = textwrap.dedent("""
        import numpy as np, compiler as cc
        from runtime import Session
        cc.set_random_seed(5)
        u = cc.random_uniform((4, 5), seed=9)
        n = cc.random_normal((7,), dtype="float64", seed=9)
        t = cc.truncated_normal((6,), seed=9)
        with Session() as sess:
            for _ in range(2):
                for value in sess.run([u, n, t]):
                    print(value.tobytes().hex())
    """)
    result = subprocess.run([sys.executable, "-c", script], cwd=REPO, capture_output=True, text=True,
                            env={**os.environ, "PYTHONPATH": REPO}, timeout=300)
    assert result.returncode == 0, result.stderr
    g = cc.Graph()
    with g.as_default():
        cc.set_random_seed(5)
        fetches = [cc.random_uniform((4, 5), seed=9), cc.random_normal((7,), dtype="float64", seed=9),
                   cc.truncated_normal((6,), seed=9)]
    with Session(g) as sess:
        here = [v.tobytes().hex() for _ in range(2) for v in sess.run(fetches)]
    assert result.stdout.split() == here


@pytest.mark.parametrize("other", [dict(graph_seed=5, op_seed=10), dict(graph_seed=6, op_seed=9),
                                   dict(graph_seed=None, op_seed=9), dict(graph_seed=5, op_seed=None)])
def test_different_seeds_give_different_numbers(other) -> None:
    g1, f1 = _seeded_graph(5, 9)
    g2, f2 = _seeded_graph(**other)
    with Session(g1) as a, Session(g2) as b:
        u1, u2 = a.run(f1[0]), b.run(f2[0])
    assert not np.array_equal(u1, u2)
    assert np.mean(u1 == u2) < 0.1


def test_tf1_seed_rules(graph) -> None:
    assert graph.seed is None
    assert get_seed(3) == (DEFAULT_GRAPH_SEED, 3)
    cc.set_random_seed(11)
    assert graph.seed == 11
    first = cc.random_uniform((2,))
    second = cc.random_uniform((2,))
    assert first.op.attrs["seed"] == second.op.attrs["seed"] == 11
    assert first.op.attrs["seed2"] != second.op.attrs["seed2"]       # per-op creation index
    explicit = cc.random_uniform((2,), seed=4)
    assert (explicit.op.attrs["seed"], explicit.op.attrs["seed2"]) == (11, 4)
    assert explicit.op.attrs["key"] == philox_key(11, 4)
    cc.set_random_seed(None)
    assert graph.seed is None


def test_unseeded_ops_are_deterministic_and_distinct() -> None:
    def build():
        g = cc.Graph()
        with g.as_default():
            return g, [cc.random_uniform((50,)), cc.random_uniform((50,))]
    g1, (a1, b1) = build()
    g2, (a2, b2) = build()
    with Session(g1) as s1, Session(g2) as s2:
        x1, y1 = s1.run([a1, b1])
        x2, y2 = s2.run([a2, b2])
    np.testing.assert_array_equal(x1, x2)
    np.testing.assert_array_equal(y1, y2)
    assert not np.array_equal(x1, y1)


def test_consecutive_runs_differ_and_the_counter_counts_steps(graph) -> None:
    u = cc.random_uniform((100,), seed=1)
    n = cc.random_normal((100,), seed=2)
    plain = cc.Variable(np.float32(1.0), name="plain") * 2.0
    counter = get_random_counter(graph)
    assert counter is not None and counter.dtype == np.int64 and counter.shape == ()
    assert counter.op.name == "random_counter" and not counter.trainable
    assert counter in cc.global_variables() and counter not in cc.trainable_variables()
    assert get_random_counter(graph) is counter                       # one per graph
    with Session(graph) as sess:
        first = sess.run(u)
        second = sess.run(u)
        assert not np.array_equal(first, second)
        assert int(sess.run(counter)) == 2
        sess.run([u, n])                                              # two random ops, one step
        assert int(sess.run(counter)) == 3
        sess.run(plain)                                               # no random op: no step counted
        assert int(sess.run(counter)) == 3


def test_step_k_depends_only_on_the_count(graph) -> None:
    u = cc.random_uniform((3, 4), seed=3)
    counter = get_random_counter(graph)
    with Session(graph) as straight:
        runs = _run_times(straight, u, 4)
    with Session(graph) as jump:
        jump.load_variable(counter, 3)
        np.testing.assert_array_equal(jump.run(u), runs[3])
    with Session(graph, target="reference") as ref:
        np.testing.assert_array_equal(_run_times(ref, u, 4)[3], runs[3])


def test_one_step_uses_one_count_for_every_random_op(graph) -> None:
    a = cc.random_uniform((10,), seed=7)
    b = cc.random_uniform((10,), seed=7)     # same seeds: the same stream, also within a step
    c = cc.random_uniform((10,), seed=8)
    with Session(graph) as sess:
        x, y, z = sess.run([a, b, c])
        np.testing.assert_array_equal(x, y)
        assert not np.array_equal(x, z)
        np.testing.assert_array_equal(sess.run(c), _value_at_count(graph, c, 1))


def _value_at_count(graph, tensor, count: int) -> np.ndarray:
    with Session(graph, target="reference") as ref:
        ref.load_variable(get_random_counter(graph), count)
        return ref.run(tensor)


def test_counter_is_built_outside_scopes_and_control_dependencies(graph) -> None:
    gate = cc.no_op(name="gate")
    with cc.name_scope("layer"), cc.control_dependencies([gate]):
        u = cc.random_uniform((2,), name="noise")
    counter = get_random_counter(graph)
    assert counter.op.name == "random_counter" and counter.op.control_inputs == ()
    assert u.op.name.startswith("layer/noise/")


# -- cpu == reference ---------------------------------------------------------------------------

@pytest.mark.parametrize("dtype", ["float32", "float64"])
def test_uniform_cpu_matches_reference_exactly(dtype: str) -> None:
    g = cc.Graph()
    with g.as_default():
        cc.set_random_seed(123)
        plain = cc.random_uniform((3, 1, 17), dtype=dtype)
        shifted = cc.random_uniform((33,), minval=-3.0, maxval=5.5, dtype=dtype)
        lo = cc.placeholder(dtype, ())
        ranged = cc.random_uniform((5, 2), minval=lo, maxval=lo + 2.0, dtype=dtype)
    feeds = {lo: np.asarray(-1.0, dtype)}
    with Session(g) as sess, Session(g, target="reference") as ref:
        for _ in range(3):
            actual = sess.run([plain, shifted, ranged], feeds)
            expected = ref.run([plain, shifted, ranged], feeds)
            for a, e in zip(actual, expected):
                assert a.dtype == np.dtype(dtype)
                np.testing.assert_array_equal(a, e)
    assert ((actual[1] >= -3.0) & (actual[1] < 5.5)).all()
    assert ((actual[2] >= -1.0) & (actual[2] < 1.0)).all()


@pytest.mark.parametrize("shape", [(0, 3), (1,), (), (1, 1, 5)])
def test_random_ops_and_dropout_with_size_0_and_size_1_shapes(shape: tuple[int, ...]) -> None:
    g = cc.Graph()
    with g.as_default():
        cc.set_random_seed(7)
        x = cc.placeholder("float64", shape)
        outputs = [cc.random_uniform(shape, dtype="float64"), cc.random_normal(shape, dtype="float64"),
                   cc.truncated_normal(shape, dtype="float64"), cc.nn.dropout(x, rate=0.5, seed=3)]
    feeds = {x: np.ones(shape)}
    with Session(g) as sess, Session(g, target="reference") as ref:
        actual, expected = sess.run(outputs, feeds), ref.run(outputs, feeds)
    for a, e in zip(actual, expected):
        assert a.shape == shape
        np.testing.assert_allclose(a, e, rtol=1e-6)


@pytest.mark.parametrize("dtype, rtol", [("float32", 2e-5), ("float64", 1e-6)])
def test_normal_cpu_matches_reference(dtype: str, rtol: float) -> None:
    # log, sqrt, sin and cos come from codegen.mathlib in compiled code and from numpy in the
    # reference: equal to a few ulp; atol covers values that are (nearly) zero.
    g = cc.Graph()
    with g.as_default():
        cc.set_random_seed(7)
        normal = cc.random_normal((4000,), mean=0.5, stddev=3.0, dtype=dtype)
        truncated = cc.truncated_normal((40, 100), dtype=dtype)
    with Session(g) as sess, Session(g, target="reference") as ref:
        for _ in range(2):
            actual = sess.run([normal, truncated])
            expected = ref.run([normal, truncated])
            for a, e in zip(actual, expected):
                np.testing.assert_allclose(a, e, rtol=rtol, atol=rtol * 1e-2)


def test_fused_random_ops_match_reference(graph) -> None:
    # Random ops folded into reductions, broadcasts and transposes index by their own output.
    u = cc.random_uniform((6, 7), seed=1, dtype="float64")
    total = cc.reduce_sum(u, axis=0)
    n = cc.random_normal((5, 1), seed=2, dtype="float64")
    spread = cc.transpose(n + np.zeros((5, 3)))
    x = cc.placeholder("float64", (None, 3))
    mixed = x * cc.random_uniform((1, 3), seed=3, dtype="float64")
    feeds = {x: np.ones((4, 3))}
    with Session(graph) as sess, Session(graph, target="reference") as ref:
        for _ in range(2):
            for a, e in zip(sess.run([total, spread, mixed], feeds), ref.run([total, spread, mixed], feeds)):
                np.testing.assert_allclose(a, e, rtol=1e-12, atol=1e-12)


def test_random_ops_have_no_gradient(graph) -> None:
    w = cc.Variable(np.ones(4, "float32"))
    u = cc.random_uniform((4,), seed=1)
    gw, gu = cc.gradients(cc.reduce_sum(u * w), [w, u])
    assert get_random_counter(graph) is not None
    assert cc.gradients(cc.reduce_sum(u), [get_random_counter(graph)]) == [None]
    with Session(graph) as sess:
        value_u, value_gw = sess.run([u, gw])
    np.testing.assert_array_equal(value_gw, value_u)


# -- distributions ----------------------------------------------------------------------------

N_DRAWS = 100_000


def _assert_moments(values: np.ndarray, mean: float, var: float, fourth: float) -> None:
    """Sample mean and variance within 5 sigma of their expected values."""
    values = values.astype(np.float64).ravel()
    n = values.size
    assert abs(values.mean() - mean) < 5 * math.sqrt(var / n), values.mean()
    assert abs(values.var() - var) < 5 * math.sqrt((fourth - var ** 2) / n), values.var()


@pytest.mark.parametrize("dtype", ["float32", "float64"])
def test_uniform_statistics(dtype: str) -> None:
    g = cc.Graph()
    with g.as_default():
        u = cc.random_uniform((N_DRAWS,), minval=2.0, maxval=4.0, dtype=dtype, seed=1)
    with Session(g) as sess:
        for values in _run_times(sess, u, 2):
            assert ((values >= 2.0) & (values < 4.0)).all()
            _assert_moments(values, 3.0, 4.0 / 12.0, 16.0 / 80.0)
            counts = np.histogram(values, bins=10, range=(2.0, 4.0))[0]
            assert np.all(np.abs(counts - N_DRAWS / 10) < 5 * math.sqrt(N_DRAWS * 0.1 * 0.9))


@pytest.mark.parametrize("dtype", ["float32", "float64"])
def test_normal_statistics(dtype: str) -> None:
    g = cc.Graph()
    with g.as_default():
        z = cc.random_normal((N_DRAWS,), mean=-1.0, stddev=2.0, dtype=dtype, seed=2)
    with Session(g) as sess:
        values = sess.run(z)
    assert np.isfinite(values).all()
    _assert_moments(values, -1.0, 4.0, 3 * 16.0)
    standard = (values.astype(np.float64) + 1.0) / 2.0
    inside = np.mean(np.abs(standard) < 1.0)
    assert abs(inside - 0.6826894921) < 5 * math.sqrt(0.68 * 0.32 / N_DRAWS)


@pytest.mark.parametrize("dtype", ["float32", "float64"])
def test_truncated_normal_statistics(dtype: str) -> None:
    g = cc.Graph()
    with g.as_default():
        t = cc.truncated_normal((N_DRAWS,), mean=1.0, stddev=0.5, dtype=dtype, seed=3)
    with Session(g) as sess:
        values = sess.run(t)
    assert (np.abs(values.astype(np.float64) - 1.0) <= 2 * 0.5 * (1 + 1e-6)).all()
    # The standard normal truncated to [-2, 2]: variance 1 - 4 phi(2) / (Phi(2) - Phi(-2)).
    phi2 = math.exp(-2.0) / math.sqrt(2 * math.pi)
    mass = math.erf(2 / math.sqrt(2))
    var = 1 - 4 * phi2 / mass
    fourth = 3 - (2 * 2 ** 3 + 3 * 2 * 2) * phi2 / mass    # E[z^4] of the truncated normal
    standard = (values.astype(np.float64) - 1.0) / 0.5
    _assert_moments(standard, 0.0, var, fourth)


# -- dropout ----------------------------------------------------------------------------------

@pytest.mark.parametrize("dtype", ["float32", "float64"])
def test_dropout_masks_scales_and_gradient(dtype: str) -> None:
    g = cc.Graph()
    with g.as_default():
        x = cc.placeholder(dtype, (None, 50))
        w = cc.Variable(np.linspace(0.5, 1.5, 50).astype(dtype), name="w")
        y = cc.nn.dropout(x * w, rate=0.3, seed=4)
        weights = np.random.default_rng(0).normal(size=(200, 50)).astype(dtype)
        loss = cc.reduce_sum(y * weights)
        gx, gw = cc.gradients(loss, [x, w])
    rng = np.random.default_rng(1)
    xb = rng.uniform(0.5, 1.5, (200, 50)).astype(dtype)
    keep = np.asarray(1.0 - 0.3, dtype)
    w0 = np.linspace(0.5, 1.5, 50).astype(dtype)
    with Session(g) as sess, Session(g, target="reference") as ref:
        masks = []
        for _ in range(2):
            out, grad_x, grad_w = sess.run([y, gx, gw], {x: xb})
            mask = out != 0
            masks.append(mask)
            zeros = 1.0 - mask.mean()
            assert abs(zeros - 0.3) < 5 * math.sqrt(0.3 * 0.7 / mask.size)
            np.testing.assert_array_equal(out[mask], ((xb * w0) / keep)[mask])
            # The gradient uses the very mask of the forward value: mask / keep_prob (times the
            # loss weights and the other factor of x * w).
            expected_gx = np.where(mask, weights / keep, 0).astype(dtype) * w0
            np.testing.assert_allclose(grad_x, expected_gx, rtol=1e-6)
            # A sum of 200 terms that nearly cancel: its error scales with the terms, not the sum.
            terms = np.where(mask, weights.astype(np.float64) / float(keep), 0) * xb
            np.testing.assert_allclose(grad_w, terms.sum(0), rtol=1e-5, atol=1e-6 * np.abs(terms).sum(0).max())
            expected = ref.run([y, gx, gw], {x: xb})
            np.testing.assert_array_equal(out, expected[0])
            np.testing.assert_allclose(grad_x, expected[1], rtol=1e-6)
        assert not np.array_equal(masks[0], masks[1])


def test_dropout_noise_shape_broadcasts(graph) -> None:
    x = cc.placeholder("float32", (None, 6, 4))
    rows = cc.nn.dropout(x, keep_prob=0.5, noise_shape=[None, 1, 1], seed=1)
    columns = cc.nn.dropout(x, keep_prob=0.5, noise_shape=[4], seed=2)
    fixed = cc.nn.dropout(x, keep_prob=0.5, noise_shape=[300, 6, 1], seed=3)
    xb = np.ones((300, 6, 4), "float32")
    with Session(graph) as sess, Session(graph, target="reference") as ref:
        r, c, f = sess.run([rows, columns, fixed], {x: xb})
        for a, e in zip((r, c, f), ref.run([rows, columns, fixed], {x: xb})):
            np.testing.assert_array_equal(a, e)
    assert set(np.unique(r)) <= {0.0, 2.0}
    assert (r == r[:, :1, :1]).all() and 0.4 < (r[:, 0, 0] == 0).mean() < 0.6
    assert (c == c[:1, :1, :]).all()
    assert (f == f[:, :, :1]).all() and not (f == f[:, :1, :1]).all()


def test_dropout_with_a_fed_keep_prob(graph) -> None:
    x = cc.placeholder("float32", (8, 16))
    keep = cc.placeholder("float32", ())
    y = cc.nn.dropout(x, keep_prob=keep, seed=5)
    z = cc.nn.dropout(x, rate=1.0 - keep, seed=5)
    xb = np.random.default_rng(0).uniform(1, 2, (8, 16)).astype("float32")
    with Session(graph) as sess:
        np.testing.assert_array_equal(sess.run(y, {x: xb, keep: np.float32(1.0)}), xb)
        half, same = sess.run([y, z], {x: xb, keep: np.float32(0.5)})
    assert set(np.unique(half[half != 0] / xb[half != 0])) == {np.float32(2.0)}
    np.testing.assert_array_equal(half, same)


def test_dropout_that_drops_nothing_is_the_identity(graph) -> None:
    x = cc.placeholder("float32", (3,))
    assert cc.nn.dropout(x, rate=0.0) is x
    assert cc.nn.dropout(x, keep_prob=1) is x


def test_training_with_dropout_is_the_same_on_cpu_and_reference() -> None:
    g = cc.Graph()
    with g.as_default():
        cc.set_random_seed(0)
        x = cc.placeholder("float64", (None, 5))
        w = cc.Variable(np.ones((5, 1)), name="w")
        hidden = cc.nn.dropout(x, keep_prob=0.8) @ w
        loss = cc.reduce_mean(cc.square(hidden - 1.0))
        train = optim.GradientDescentOptimizer(0.1).minimize(loss)
    xb = np.random.default_rng(3).normal(size=(16, 5))
    trajectories = []
    for target in ("cpu", "reference"):
        with Session(g, target=target) as sess:
            losses = [sess.run([train, loss], {x: xb})[1] for _ in range(5)]
            trajectories.append((np.array(losses), sess.run(w), int(sess.run(get_random_counter(g)))))
    np.testing.assert_allclose(trajectories[0][0], trajectories[1][0], rtol=1e-12)
    np.testing.assert_allclose(trajectories[0][1], trajectories[1][1], rtol=1e-12)
    assert trajectories[0][2] == trajectories[1][2] == 5


# -- PTX, checkpoints, other targets -----------------------------------------------------------

@pytest.mark.skipif(PTXAS is None, reason="ptxas (CUDA toolkit) is not on PATH")
def test_ptx_assembles(graph, tmp_path) -> None:
    x = cc.placeholder("float32", (None, 8))
    w = cc.Variable(np.ones(8, "float32"))
    y = cc.nn.dropout(x * w, rate=0.25, noise_shape=[None, 1])
    (gw,) = cc.gradients(cc.reduce_sum(y), [w])
    fetches = [y, gw, cc.random_uniform((3,), dtype="float64"), cc.random_normal((5,)),
               cc.truncated_normal((2, 3), dtype="float64"), cc.truncated_normal((4,))]
    with Session(graph) as sess:
        ptx = sess.compile(fetches, {x: np.ones((4, 8), "float32")}).dump("ptx")
    path = tmp_path / "random.ptx"
    path.write_text(ptx)
    result = subprocess.run([PTXAS, "-arch=sm_80", str(path), "-o", str(tmp_path / "random.cubin")],
                            capture_output=True, text=True)
    assert result.returncode == 0, result.stderr


def test_cuda_matches_cpu(graph) -> None:
    from runtime.cuda import gpu_available
    if not gpu_available():
        pytest.skip("no NVIDIA GPU and driver")
    u = cc.random_uniform((1000,), seed=1)
    n = cc.random_normal((1000,), dtype="float64", seed=2)
    with Session(graph) as cpu, Session(graph, target="cuda") as gpu:
        for _ in range(2):
            (a, b), (c, d) = cpu.run([u, n]), gpu.run([u, n])
            np.testing.assert_array_equal(a, c)
            np.testing.assert_allclose(b, d, rtol=1e-12, atol=1e-14)


def test_saver_round_trip_restores_the_counter(graph, tmp_path) -> None:
    u = cc.random_uniform((10,), seed=1)
    v = cc.Variable(np.zeros(10, "float32"), name="v")
    step = v.assign(u)
    saver = Saver()
    assert "random_counter" in saver._var_list
    with Session(graph) as sess:
        _run_times(sess, step, 3)
        path = saver.save(sess, str(tmp_path / "model"))
        uninterrupted = _run_times(sess, u, 2)
    with Session(graph) as restored:
        saver.restore(restored, path)
        assert int(restored.run(get_random_counter(graph))) == 3
        resumed = _run_times(restored, u, 2)
    for a, b in zip(uninterrupted, resumed):
        np.testing.assert_array_equal(a, b)


def test_variables_initializer_resets_the_counter(graph) -> None:
    u = cc.random_uniform((4,), seed=1)
    init = cc.global_variables_initializer()
    with Session(graph) as sess:
        first = sess.run(u)
        sess.run(u)
        sess.run(init)
        np.testing.assert_array_equal(sess.run(u), first)


# -- errors -----------------------------------------------------------------------------------

def _raises_here(error, match, build):
    with pytest.raises(error, match=match) as info:
        build()
    assert THIS_FILE in str(info.value), str(info.value)
    return info


@pytest.mark.parametrize("rate", [1.0, -0.1, 1.5, float("nan")])
def test_dropout_rate_out_of_range(graph, rate) -> None:
    x = cc.placeholder("float32", (3,))
    _raises_here(ValueError, r"dropout: rate must be in \[0, 1\)", lambda: cc.nn.dropout(x, rate=rate))


@pytest.mark.parametrize("keep_prob", [0.0, 1.01, -1])
def test_dropout_keep_prob_out_of_range(graph, keep_prob) -> None:
    x = cc.placeholder("float32", (3,))
    _raises_here(ValueError, r"dropout: keep_prob must be in \(0, 1\]",
                 lambda: cc.nn.dropout(x, keep_prob=keep_prob))


def test_dropout_argument_errors(graph) -> None:
    x = cc.placeholder("float32", (None, 4))
    _raises_here(ValueError, "exactly one of keep_prob and rate", lambda: cc.nn.dropout(x))
    _raises_here(ValueError, "exactly one of keep_prob and rate",
                 lambda: cc.nn.dropout(x, keep_prob=0.5, rate=0.5))
    _raises_here(cc.DTypeError, "dropout: x must be float32 or float64, got int32",
                 lambda: cc.nn.dropout(cc.placeholder("int32", (4,)), rate=0.5))
    _raises_here(cc.ShapeError, "does not broadcast", lambda: cc.nn.dropout(x, rate=0.5, noise_shape=[1, 3]))
    _raises_here(cc.ShapeError, "more dims", lambda: cc.nn.dropout(x, rate=0.5, noise_shape=[1, 1, 4]))
    _raises_here(cc.DTypeError, "rate is float64 but x is float32",
                 lambda: cc.nn.dropout(x, rate=cc.placeholder("float64", ())))
    _raises_here(cc.ShapeError, "keep_prob must be a scalar",
                 lambda: cc.nn.dropout(x, keep_prob=cc.placeholder("float32", (4,))))
    _raises_here(TypeError, "rate must be a number", lambda: cc.nn.dropout(x, rate="half"))
    _raises_here(TypeError, "seed must be an int", lambda: cc.nn.dropout(x, rate=0.5, seed=1.5))


@pytest.mark.parametrize("function, op_type, dtype", [
    (function, op_type, dtype)
    for function, op_type in [(cc.random_uniform, "RandomUniform"), (cc.random_normal, "RandomStandardNormal"),
                              (cc.truncated_normal, "TruncatedNormal")]
    for dtype in ["int32", "bool", "float16", "nonsense"]
    if not (function is cc.random_uniform and dtype == "int32")])   # integers: uniform makes them
def test_random_ops_reject_non_float_dtypes(graph, function, op_type, dtype) -> None:
    _raises_here(cc.DTypeError, f"{op_type}: dtype must be float32 or float64",
                 lambda: function((3,), dtype=dtype))


def test_random_op_argument_errors(graph) -> None:
    _raises_here(cc.ShapeError, "RandomUniform: shape", lambda: cc.random_uniform((3, -1)))
    _raises_here(cc.ShapeError, "RandomStandardNormal: shape", lambda: cc.random_normal((None, 2)))
    _raises_here(TypeError, "RandomUniform: a shape given as a tensor must be known when the graph is built",
                 lambda: cc.random_uniform(cc.placeholder("int32", (2,))))
    _raises_here(TypeError, "TruncatedNormal: seed must be an int",
                 lambda: cc.truncated_normal((2,), seed="1"))
    _raises_here(TypeError, "set_random_seed: seed must be an int", lambda: cc.set_random_seed(2.5))
    assert get_random_counter(graph) is None      # nothing was built by the failed calls


@pytest.mark.parametrize("construct", ["while_loop", "scan-with-gradient"])
def test_random_ops_in_a_loop_give_every_target_the_same_numbers_step_after_step(construct: str) -> None:
    """The reference target dropped the step's own count increment when a loop that draws in its
    body assigned the counter too: from the second step its numbers (the tests' oracle) repeated
    the first step's where the compiled targets drew new ones."""
    graph = cc.Graph()
    with graph.as_default():
        cc.set_random_seed(1)
        x = cc.placeholder("float32", (3, 4), name="x")
        if construct == "while_loop":
            _, looped = cc.while_loop(lambda i, a: i < 3, lambda i, a: (i + 1, a + cc.random_uniform((4,))),
                                      [cc.constant(0), cc.zeros((4,))])
            fetches = [looped]
        else:
            looped = cc.scan(lambda a, row: a * row + cc.random_normal((4,)), x, initializer=cc.ones((4,)))
            fetches = [looped, cc.gradients(cc.reduce_sum(looped), [x])[0]]
        fetches.append(cc.random_uniform((4,)))       # a random op after the loop
        counter = get_random_counter(graph)
    feeds = {x: np.linspace(0.5, 1.5, 12, dtype=np.float32).reshape(3, 4)}
    steps = {}
    for target in ("cpu", "reference"):
        with Session(graph, target=target) as sess:
            steps[target] = [sess.run(fetches, feeds) + [sess.run(counter)] for _ in range(3)]
    for cpu_step, reference_step in zip(steps["cpu"], steps["reference"]):
        for got, expected in zip(cpu_step, reference_step):
            np.testing.assert_allclose(got, expected, rtol=1e-5)
    assert not np.array_equal(steps["reference"][0][-2], steps["reference"][1][-2])


def test_uniform_numbers_stay_below_maxval_where_the_affine_map_rounds_up() -> None:
    """u * (2 - 1) + 1 with u = 1 - 2**-24 rounds to 2.0 in float32; this seed draws that u."""
    graph = cc.Graph()
    with graph.as_default():
        u = cc.random_uniform((256,), minval=1.0, maxval=2.0, seed=83190)
    for target in ("cpu", "reference"):
        with Session(graph, target=target) as sess:
            values = sess.run(u)
        assert values.max() == np.nextafter(np.float32(2.0), np.float32(0.0)) and values.min() >= 1.0


def test_means_scales_and_bounds_may_be_arrays_that_broadcast() -> None:
    graph = cc.Graph()
    with graph.as_default():
        normal = cc.random_normal((20000, 3), mean=np.array([1.0, 2.0, 3.0]), stddev=[0.1, 0.1, 0.1], seed=1)
        uniform = cc.random_uniform((4,), minval=[0.0, 1.0, 2.0, 3.0], maxval=5.0, seed=2)
        with pytest.raises(cc.ShapeError, match=r"broadcast to the shape \(10, 3\).*test_random.py"):
            cc.random_normal((10, 3), mean=np.array([1.0, 2.0]))
    with Session(graph) as sess:
        drawn, bounded = sess.run([normal, uniform])
    np.testing.assert_allclose(drawn.mean(axis=0), [1.0, 2.0, 3.0], atol=0.01)
    assert (bounded >= [0.0, 1.0, 2.0, 3.0]).all() and (bounded < 5.0).all()


def test_integer_uniform_numbers_cover_their_range_evenly_on_every_target() -> None:
    graph = cc.Graph()
    with graph.as_default():
        digits = cc.random_uniform((100000,), maxval=10, dtype="int32", seed=1)
        wide = cc.random_uniform((1000,), minval=-3, maxval=2**40, dtype="int64", seed=2)
        limit = cc.placeholder("int32", (), name="limit")
        bounded = cc.random_uniform((1000,), maxval=limit, dtype="int32", seed=3)
        with pytest.raises(ValueError, match="needs maxval"):
            cc.random_uniform((2,), dtype="int32")
        with pytest.raises(cc.DTypeError, match="need integer bounds"):
            cc.random_uniform((2,), maxval=2.5, dtype="int32")
    results = {}
    for target in ("cpu", "reference", "cuda-emulated"):
        with Session(graph, target=target) as sess:
            results[target] = sess.run([digits, wide, bounded], {limit: 7})
    for target in ("reference", "cuda-emulated"):
        for got, expected in zip(results[target], results["cpu"]):
            np.testing.assert_array_equal(got, expected)
    counts = np.bincount(results["cpu"][0], minlength=10)
    assert results["cpu"][0].dtype == np.int32 and counts.size == 10 and counts.min() > 9500
    assert results["cpu"][1].min() >= -3 and results["cpu"][1].max() < 2**40 and results["cpu"][1].max() > 2**39
    assert set(np.unique(results["cpu"][2])) == set(range(7))


def test_integer_uniform_numbers_stay_in_range_at_the_ends_of_their_dtype() -> None:
    """The bounds went through float64 and the result through a saturating cast: int64 bounds
    past 2**53 gave numbers below minval, and int32 bounds that do not fit gave INT_MAX."""
    graph = cc.Graph()
    with graph.as_default():
        near_2_60 = cc.random_uniform((1000,), minval=2**60 + 1, maxval=2**60 + 3, dtype="int64", seed=1)
        int32_ends = cc.random_uniform((1000,), minval=-2**31, maxval=2**31 - 1, dtype="int32", seed=2)
        low = cc.placeholder("int64", (), name="low")
        fed = cc.random_uniform((1000,), minval=low, maxval=low + 3, dtype="int64", seed=3)
        for bad, error, message in [((2**33, 2**33 + 5, "int32"), cc.DTypeError, "8589934592 does not fit in int32"),
                                    ((0, 2**70, "int64"), cc.DTypeError, "does not fit in int64"),
                                    ((-2**62, 2**62, "int64"), ValueError, "its width must fit in int64")]:
            _raises_here(error, message, lambda: cc.random_uniform((2,), bad[0], bad[1], dtype=bad[2]))
    for target in ("cpu", "reference", "cuda-emulated"):
        with Session(graph, target=target) as sess:
            first, ends, shifted = sess.run([near_2_60, int32_ends, fed], {low: 2**60 + 1})
        assert set(first.tolist()) == {2**60 + 1, 2**60 + 2}, target
        assert ends.dtype == np.int32 and ends.min() < -2**30 and ends.max() > 2**30, target
        assert set((shifted - 2**60).tolist()) == {1, 2, 3}, target


def test_random_ops_take_sizes_read_from_shapes_as_tf1() -> None:
    """tf.random_normal(tf.shape(mu)) (a VAE's noise) and [tf.shape(x)[0], 3] were refused."""
    graph = cc.Graph()
    with graph.as_default():
        cc.set_random_seed(2)
        mu = cc.placeholder("float32", (None, 4), name="mu")
        drawn = [cc.random_normal(cc.shape(mu)), cc.random_uniform([cc.shape(mu)[0], 3], -1.0, 1.0),
                 cc.truncated_normal([cc.shape(mu)[0], 2], stddev=0.5),
                 cc.random_uniform([cc.shape(mu)[0]], 0, 5, dtype="int32")]
        assert [t.shape for t in drawn] == [(None, 4), (None, 3), (None, 2), (None,)]
    results = {}
    for target in ("cpu", "reference", "cuda-emulated"):
        with Session(graph, target=target) as sess:
            results[target] = sess.run(drawn, {mu: np.zeros((600, 4), "float32")})
            assert [a.shape for a in sess.run(drawn, {mu: np.zeros((0, 4), "float32")})] == [(0, 4), (0, 3), (0, 2), (0,)]
    normal, uniform, truncated, integers = results["cpu"]
    assert abs(normal.std() - 1.0) < 0.05 and -1.0 <= uniform.min() and uniform.max() < 1.0
    assert np.abs(truncated).max() <= 1.0 and set(integers.tolist()) == {0, 1, 2, 3, 4}
    for target in ("reference", "cuda-emulated"):
        for got, expected in zip(results[target], results["cpu"]):
            np.testing.assert_allclose(got, expected, rtol=1e-5, atol=1e-6)


def test_multinomial_draws_classes_with_softmax_probabilities_on_every_target() -> None:
    probabilities = np.array([[0.1, 0.2, 0.7], [0.5, 0.5, 0.0]])
    graph = cc.Graph()
    with graph.as_default():
        with np.errstate(divide="ignore"):
            logits = cc.constant(np.log(probabilities))      # a class of logit -inf is never drawn
        samples = cc.multinomial(logits, 50000, seed=3)
        with pytest.raises(cc.ShapeError, match="logits must be float"):
            cc.multinomial(cc.constant([1.0, 2.0]), 3)
    draws = {}
    for target in ("cpu", "reference", "cuda-emulated"):
        with Session(graph, target=target) as sess:
            draws[target] = [sess.run(samples), sess.run(samples)]
    for target in ("reference", "cuda-emulated"):
        for got, expected in zip(draws[target], draws["cpu"]):
            np.testing.assert_array_equal(got, expected)
    first, second = draws["cpu"]
    assert first.dtype == np.int64 and first.shape == (2, 50000) and (first != second).any()
    frequencies = np.stack([np.bincount(row, minlength=3) / row.size for row in first])
    np.testing.assert_allclose(frequencies, probabilities, atol=0.01)
    assert frequencies[1, 2] == 0.0


@pytest.mark.parametrize("target", ["cpu", "reference"])
def test_random_uniform_with_maxval_below_minval_spreads_over_the_range_as_tf1(target: str) -> None:
    # TF1 computes u * (maxval - minval) + minval whatever the order: the numbers lie in (maxval, minval].
    graph = cc.Graph()
    with graph.as_default():
        falling = cc.random_uniform([4000], minval=1.0, maxval=0.0, seed=1)
        above_default = cc.random_uniform([4000], minval=2.0, seed=2)          # maxval 1: in (1, 2]
        mixed = cc.random_uniform([4000, 2], minval=[0.0, 3.0], maxval=[1.0, 2.0], seed=3)
    with Session(graph, target=target) as sess:
        values = sess.run({"falling": falling, "above": above_default, "mixed": mixed})
    for got, low, high in ((values["falling"], 0.0, 1.0), (values["above"], 1.0, 2.0),
                           (values["mixed"][:, 0], 0.0, 1.0), (values["mixed"][:, 1], 2.0, 3.0)):
        assert low <= got.min() and got.max() <= high and got.max() - got.min() > 0.99 * (high - low)
    assert (values["falling"] > 0.0).all() and (values["mixed"][:, 1] > 2.0).all()   # maxval excluded
    assert (values["mixed"][:, 0] < 1.0).all()


def test_tf1_defaults_of_multinomial_and_the_uniform_initializer() -> None:
    # TF1: multinomial's output_dtype=None is int64; random_uniform_initializer's maxval=None is 1
    # for floats, and integer variables draw integers below a maxval they must be given.
    assert cc.multinomial(cc.constant([[0.0, 1.0]]), 3, output_dtype=None).dtype == np.int64
    floats = cc.random_uniform_initializer(-1.0, seed=1)([1000])
    assert floats.dtype == np.float32 and -1.0 <= floats.min() and floats.max() < 1.0 and floats.max() > 0.9
    integers = cc.random_uniform_initializer(2, 5, seed=1)([1000], dtype=cc.int32)
    assert integers.dtype == np.int32 and set(np.unique(integers)) == {2, 3, 4}
    with pytest.raises(ValueError, match="needs maxval"):
        cc.random_uniform_initializer(seed=1)([3], dtype=cc.int64)


@pytest.mark.parametrize("target", ["cpu", "reference"])
def test_random_crop_and_shuffle_draw_every_window_and_order_anew(target: str) -> None:
    image = np.arange(8 * 7 * 3, dtype=np.float32).reshape(8, 7, 3)
    graph = cc.Graph()
    with graph.as_default():
        x = cc.placeholder("float32", (8, 7, 3), name="x")
        window = cc.random_crop(x, [5, 4, 3], seed=3)
        (slope,) = cc.gradients(cc.reduce_sum(window), [x])
        order = cc.random.shuffle(cc.constant(np.arange(10)), seed=2)
    places, orders = set(), set()
    with Session(graph, target=target) as sess:
        for _ in range(60):
            got, got_slope, got_order = sess.run([window, slope, order], {x: image})
            top, left = np.argwhere(image[..., 0] == got[0, 0, 0])[0]
            np.testing.assert_array_equal(got, image[top:top + 5, left:left + 4])
            expected_slope = np.zeros_like(image)
            expected_slope[top:top + 5, left:left + 4] = 1.0
            np.testing.assert_array_equal(got_slope, expected_slope)
            assert sorted(got_order.tolist()) == list(range(10))
            places.add((top, left))
            orders.add(tuple(got_order.tolist()))
    assert len(places) == 16 and len(orders) > 50      # all 4 x 4 places; 60 orders of 10! nearly all differ
    with pytest.raises(cc.ShapeError, match="random_crop: size"):
        cc.random_crop(cc.constant(image), [9, 4, 3])


def test_multinomial_draws_for_a_batch_fed_at_any_size() -> None:
    # A policy network's observations: placeholder([None, 4]) -> logits (?, 3) -> multinomial.
    obs = cc.placeholder("float32", (None, 4), name="obs")
    logits = obs[:, :3] * 0.0 + cc.constant([[0.0, 1.0, -np.inf]])
    draws = cc.random.categorical(logits, 4000, seed=5)
    with Session() as sess:
        small, large = sess.run(draws, {obs: np.ones((2, 4))}), sess.run(draws, {obs: np.ones((5, 4))})
    assert small.shape == (2, 4000) and large.shape == (5, 4000) and large.dtype == np.int64
    assert not (large == 2).any() and abs(np.mean(large == 1) - 1.0 / (1.0 + np.exp(-1.0))) < 0.02

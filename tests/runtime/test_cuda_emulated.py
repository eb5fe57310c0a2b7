"""``target="cuda-emulated"``: the kernels scheduled for the GPU, run block by block on the CPU.

Every op-table row (forward in float32 and float64, gradients in float64) equals the numpy
reference with launch limits small enough that one-thread-per-element kernels run partial blocks
and grid-stride loops (elementwise ones take 16 bytes of outputs per thread where rows allow),
reductions of a few elements already get a block each (strided folds, warp
shuffles, shared memory and a barrier), scans run in chunks with a carried total, and matmuls and
convolutions run as double-buffered tiled GEMMs with partial tiles (``test_cuda_conv`` has more
convolution geometries); the same PTX assembles for sm_80 and sm_90. The op table runs with race
and memory checks (``racecheck=True, memcheck=True``): no kernel of it reads or writes shared
memory another thread of its block touches without a barrier between, or any memory outside its
buffers and shared arrays.
"""
from __future__ import annotations

import re
import subprocess
import sys
import textwrap
from pathlib import Path

import numpy as np
import pytest

import compiler as cc
import optim
from compiler.codegen.nvptx import GpuLimits
from runtime import Session

from ..compiler.op_table import ROWS, Row
from ..compiler.test_ops import TOLERANCE, _build, _feeds, _loss_and_weights
from ..conftest import PTXAS
from .ptxas_check import assemble
from .training_check import check_training_steps_match_reference

# 32-thread blocks, at most 3 of them; a block reduction from 4 reduced elements on, 8 threads wide;
# matmuls in 8x8 tiles, 4 deep, 2x2 per thread (16 threads); a block scan of 4 threads from 4 on.
SMALL = GpuLimits(block=32, max_grid=3, reduce_block=8, reduce_min_extent=4, tile_m=8, tile_n=8, tile_k=4,
                  thread_m=2, thread_n=2, scan_block=4, scan_min_extent=4)


def _fetches(row: Row, dtype: str, with_gradients: bool):
    graph, placeholders, output = _build(row, dtype)
    with graph.as_default():
        fetches = [output]
        if row.grad and with_gradients:
            loss, _ = _loss_and_weights(output, np.random.default_rng(0))
            fetches += [g for g in cc.gradients(loss, [placeholders[i] for i in row.grad]) if g is not None]
    return graph, fetches, _feeds(row, placeholders, dtype)


@pytest.mark.parametrize("dtype", ["float32", "float64"])
@pytest.mark.parametrize("row", ROWS, ids=lambda r: r.id)
def test_emulated_gpu_schedule_matches_reference(row: Row, dtype: str) -> None:
    graph, fetches, feeds = _fetches(row, dtype, with_gradients=dtype == "float64")
    with Session(graph, target="reference") as ref, Session(graph, target="cuda-emulated", gpu_limits=SMALL, racecheck=True,
                                                             memcheck=True) as gpu:
        expected = ref.run(fetches, feeds)
        actual = gpu.run(fetches, feeds)
    for want, got in zip(expected, actual):
        assert got.shape == want.shape and got.dtype == want.dtype
        tolerance = dict(TOLERANCE[want.dtype.name])
        if want.dtype == np.float32 and want.size and np.isfinite(want).any():
            # Block reductions and scans add in another order than numpy: near a cancellation the
            # difference is a few ulp of the largest partial sum, not of the (small) result.
            scale = float(np.max(np.abs(want[np.isfinite(want)])))
            tolerance["atol"] = max(tolerance.get("atol", 0.0), 8 * np.finfo(np.float32).eps * scale)
        np.testing.assert_allclose(got, want, equal_nan=True, **tolerance)


@pytest.mark.skipif(PTXAS is None, reason="ptxas (CUDA toolkit) is not on PATH")
@pytest.mark.parametrize("row", ROWS, ids=lambda r: r.id)
def test_scheduled_ptx_assembles_for_sm_80_and_sm_90(row: Row, tmp_path) -> None:
    graph, fetches, feeds = _fetches(row, "float64", with_gradients=True)
    for arch in ("sm_80", "sm_90"):
        with Session(graph, target="cuda-emulated", arch=arch, gpu_limits=SMALL) as gpu:
            ptx = gpu.compile(fetches, feeds).dump("ptx")
        assert f".target {arch}" in ptx
        assembled = assemble(ptx, arch, tmp_path)
        print(f"{row.id} {arch}: {len(assembled.registers)} kernels, registers {max(assembled.registers, default=0)} "
              f"at most, spill stores {sum(assembled.spill_stores)} bytes")
        assert sum(assembled.spill_stores) == 0


@pytest.mark.parametrize("limits", [SMALL, GpuLimits()], ids=["small-launches", "default-launches"])
@pytest.mark.parametrize("make_optimizer", [lambda: optim.AdamOptimizer(0.01),
                                            lambda: optim.GradientDescentOptimizer(0.1)], ids=["adam", "sgd"])
def test_emulated_training_steps_match_reference(make_optimizer, limits: GpuLimits) -> None:
    check_training_steps_match_reference(make_optimizer, target="cuda-emulated", gpu_limits=limits)


def test_kernels_dump_shows_the_gpu_schedule() -> None:
    graph = cc.Graph()
    with graph.as_default():
        x = cc.placeholder("float32", (6, 5000), name="x")
        row_sums = cc.reduce_sum(x, axis=1)
        doubled = x * 2.0
    feeds = {x: np.ones((6, 5000), "float32")}
    with Session(graph, target="cuda-emulated") as gpu:
        kernels = gpu.compile([row_sums, doubled], feeds).dump("kernels")
        sums, twice = gpu.run([row_sums, doubled], feeds)
    assert "gpu schedule:" in kernels
    registers = r", \d+ registers, 0 B spilled" if PTXAS else ""   # from ptxas -v, when it is there
    assert re.search(r"grid 6 x block 256, shared 32 B" + registers + r": a block per output element \(6\) "
                     r"reducing 5000 elements: strided register folds, warp shuffles, one barrier", kernels)
    assert re.search(r"grid 30 x block 256, shared 0 B" + registers + r": one thread per 4 consecutive output "
                     r"elements \(30000, 16-byte accesses\)", kernels)
    np.testing.assert_array_equal(sums, np.full(6, 5000.0, "float32"))
    np.testing.assert_array_equal(twice, np.full((6, 5000), 2.0, "float32"))


VECTOR_CASES = [  # dtype, shape of x, elements per thread of (tanh(x) * 2 + bias) and of transpose(x) * 3
    ("float32", (64, 5000), 4, 4),
    ("float64", (64, 5000), 2, 2),
    ("float32", (7, 131), 1, 1),     # 131 is not a whole number of vectors: one element per thread
    ("float32", (16, 6), 1, 4),      # rows of 6, but the transposed output has rows of 16
]


@pytest.mark.parametrize("dtype, shape, width, transposed_width", VECTOR_CASES,
                         ids=["float32", "float64", "odd-rows", "narrow-rows"])
def test_elementwise_kernels_take_16_bytes_per_thread_where_aligned(dtype: str, shape: tuple, width: int,
                                                                    transposed_width: int) -> None:
    graph = cc.Graph()
    with graph.as_default():
        x = cc.placeholder(dtype, shape)
        bias = cc.placeholder(dtype, shape[-1:])
        fetches = [cc.tanh(x) * 2.0 + bias, cc.transpose(x) * 3.0]
    rng = np.random.default_rng(0)
    feeds = {x: rng.normal(size=shape).astype(dtype), bias: rng.normal(size=shape[-1:]).astype(dtype)}
    with Session(graph, target="cuda-emulated", gpu_limits=SMALL) as gpu:
        executable = gpu.compile(fetches, feeds)
        kernels, ptx = executable.dump("kernels"), executable.dump("ptx")
        biased, transposed = gpu.run(fetches, feeds)
    np.testing.assert_allclose(biased, np.tanh(feeds[x]) * 2.0 + feeds[bias], **TOLERANCE[dtype])
    np.testing.assert_array_equal(transposed, feeds[x].T * 3.0)
    schedule = kernels[kernels.index("gpu schedule:"):]
    per_thread = re.findall(r"one thread per (?:(\d+) consecutive )?output element", schedule)
    assert sorted(int(n or 1) for n in per_thread) == sorted([width, transposed_width]), schedule
    lanes = 16 // np.dtype(dtype).itemsize
    vector = rf"\.global(?:\.nc)?\.v{lanes}\.[bf]{8 * np.dtype(dtype).itemsize}"
    # The bias row and the output rows start on 16-byte boundaries: their accesses are vectors.
    assert bool(re.search("ld" + vector, ptx)) == (width == lanes), ptx
    assert bool(re.search("st" + vector, ptx)) == (lanes in (width, transposed_width)), ptx


@pytest.mark.parametrize("arch", ["sm_8", "volta", "", "sm_80; rm", "sm_81", "sm_999", "sm_10"])
def test_unknown_architecture_is_refused(arch: str) -> None:
    """Well-formed names LLVM does not know (sm_81) included: LLVM would ignore them and stop the
    process at the first instruction the generic processor lacks (cp.async in a GEMM)."""
    with pytest.raises(ValueError, match="architecture"):
        Session(cc.Graph(), target="cuda-emulated", arch=arch)


@pytest.mark.parametrize("arch", ["sm_52", "sm_61"])
def test_older_architectures_get_ptx_that_has_warp_shuffles(arch: str) -> None:
    """LLVM's own PTX ISA for sm_5x and sm_6x predates shfl.sync: the first block reduction's PTX
    used to stop the whole process (in a child process here, so that a regression is a failure)."""
    script = textwrap.dedent(f"""
        import numpy as np, compiler as cc
        from runtime import Session
        x = cc.placeholder("float32", shape=(2048,))
        y = cc.reduce_sum(x)
        with Session(target="cuda-emulated", arch="{arch}") as sess:
            ptx = sess.compile(y, {{x: np.ones(2048, "float32")}}).dump("ptx")
            assert sess.run(y, {{x: np.ones(2048, "float32")}}) == 2048.0
        print(ptx)
    """)
    run = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=300,
                         cwd=Path(__file__).resolve().parents[2])
    assert run.returncode == 0, run.stderr[-2000:]
    assert f".target {arch}" in run.stdout and "shfl.sync.down" in run.stdout
    assert re.search(r"^\.version 6\.0$", run.stdout, re.M), run.stdout[:300]


@pytest.mark.parametrize("limits, message", [
    (dict(tile_m=12, thread_m=5), "tile_m=12 is not a multiple of thread_m=5"),
    (dict(tile_n=10, thread_n=4), "tile_n=10 is not a multiple of thread_n=4"),
    (dict(tile_m=128, tile_n=128, thread_m=2, thread_n=2), "4096 threads, more than a block can have"),
    (dict(block=2048), "block=2048 is more threads than a block can have"),
    (dict(reduce_block=96), "reduce_block=96 must be a power of two"),
    (dict(vector_bytes=12), "vector_bytes=12 must be a power of two"),
    (dict(vector_bytes=32), "wider than the widest load"),
    (dict(max_grid=0), "max_grid must be a whole number, at least 1; got 0"),
    (dict(tile_k=2.5), "tile_k must be a whole number"),
    (dict(tile_k=32), "64x64 tiles 32 deep stage 67584 bytes of float64 in shared memory"),
])
def test_gpu_limits_no_schedule_can_follow_are_refused(limits: dict, message: str) -> None:
    with pytest.raises(ValueError, match=re.escape(message)):
        GpuLimits(**limits)


def test_tiles_that_threads_divide_evenly_give_the_product() -> None:
    """An 8x8 tile, 8x8 per thread: one thread per block computes the whole tile."""
    rng = np.random.default_rng(0)
    with cc.Graph().as_default():
        a, b = cc.placeholder("float32", (37, 41)), cc.placeholder("float32", (41, 29))
    feeds = {a: rng.standard_normal((37, 41)).astype("float32"), b: rng.standard_normal((41, 29)).astype("float32")}
    limits = GpuLimits(tile_m=8, tile_n=8, thread_m=8, thread_n=8)
    with Session(a.graph, target="cuda-emulated", gpu_limits=limits) as sess:
        np.testing.assert_allclose(sess.run(a @ b, feeds), feeds[a] @ feeds[b], rtol=1e-5, atol=1e-5)


@pytest.mark.skipif(PTXAS is None, reason="ptxas (CUDA toolkit) is not on PATH")
@pytest.mark.parametrize("dtype", ["float32", "float64"])
def test_default_schedules_assemble_without_spills(dtype: str, tmp_path) -> None:
    """The real-GPU launch sizes: a 64x64 tiled GEMM with 4x4 registers per thread (its tiles
    copied with cp.async, read from shared memory 16 bytes at a time), a 256-thread block
    reduction and a grid-stride elementwise kernel, for sm_80 and sm_90."""
    graph = cc.Graph()
    with graph.as_default():
        a = cc.placeholder(dtype, (512, 784))
        b = cc.placeholder(dtype, (784, 512))
        x = cc.placeholder(dtype, (64, 5000))
        fetches = [a @ b, cc.reduce_sum(x, axis=1), cc.tanh(x) * 2.0]
    feeds = {a: np.zeros((512, 784), dtype), b: np.zeros((784, 512), dtype), x: np.zeros((64, 5000), dtype)}
    for arch in ("sm_80", "sm_90"):
        with Session(graph, target="cuda-emulated", arch=arch) as gpu:
            executable = gpu.compile(fetches, feeds)
        kernels, ptx = executable.dump("kernels"), executable.dump("ptx")
        assert "tiled GEMM 512x512x784" in kernels and "a block per output element (64)" in kernels
        bits = 8 * np.dtype(dtype).itemsize
        assert "cp.async.ca.shared.global" in ptx and re.search(rf"ld\.shared\.v{128 // bits}\.[bf]{bits}", ptx)
        assembled = assemble(ptx, arch, tmp_path)
        print(f"{dtype} {arch}: registers per kernel {assembled.registers}")
        # The 512x512 product is 64 tiles, too few for a large GPU: split-K adds the kernel summing its slices.
        assert "split-K partials, 5 slices" in kernels and "split-K sum of 5 partials" in kernels
        assert assembled.spill_stores == [0] * 4


@pytest.mark.skipif(PTXAS is None, reason="ptxas (CUDA toolkit) is not on PATH")
def test_a_kernel_of_1024_thread_blocks_fits_a_blocks_registers(tmp_path) -> None:
    """A block has 65536 registers: without .maxntid, ptxas gave a 1024-thread elementwise
    kernel 80 per thread and a 1024-thread tiled GEMM 70, kernels no GPU could launch. Held to
    64, the elementwise chain spills a few bytes (the ptxas summary names this test): the price
    of these limits, which are not the defaults."""
    graph = cc.Graph()
    with graph.as_default():
        a, b = cc.placeholder("float32", (300, 300)), cc.placeholder("float32", (300, 300))
        x = cc.placeholder("float32", (4, 5000))
        fetches = [a @ b, cc.erf(x) * cc.tanh(x) + cc.sigmoid(x) * cc.log1p(cc.abs(x)) + cc.exp(x) * cc.sin(x)]
    feeds = {a: np.zeros((300, 300), "float32"), b: np.zeros((300, 300), "float32"), x: np.zeros((4, 5000), "float32")}
    for limits in (GpuLimits(block=1024), GpuLimits(tile_m=128, tile_n=128, tile_k=8, thread_m=4, thread_n=4)):
        with Session(graph, target="cuda-emulated", arch="sm_80", gpu_limits=limits) as gpu:
            executable = gpu.compile(fetches, feeds)
        ptx, kernels = executable.dump("ptx"), executable.dump("kernels")
        launches = re.findall(r"(\S+): grid \d+ x block (\d+), shared \d+ B, (\d+) registers", kernels)
        assert launches and any(int(block) == 1024 for _, block, _ in launches)
        for name, block, registers in launches:
            assert int(block) * int(registers) <= 65536, (name, block, registers)
            if int(block) > 256:   # 256 threads of at most 255 registers fit without it
                assert re.search(rf"\.entry {re.escape(name)}\b[^{{]*\.maxntid {block}\b", ptx), name
        assemble(ptx, "sm_80", tmp_path)

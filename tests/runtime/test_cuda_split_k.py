"""Split-K on the GPU schedule: a tiled product with too few output tiles for the device (fewer
than ``GpuLimits.split_min_blocks``) and a long depth runs as two kernels, one computing a partial
product per (output tile, depth slice) into a workspace and one summing the slices in order into
the output with the product's scale and accumulation.

Through ``target="cuda-emulated"`` with small tiles and thresholds, each product (plain, transposed,
batched, the fused ``assign_sub(var, lr * a @ b)``, a convolution's filter gradient) splits into
the expected number of slices (2 and more, a depth that the slices do not divide, partial tiles)
and equals numpy in float32 and float64; a product below the threshold keeps one kernel. The
split kernels of the real-GPU launch sizes assemble for sm_80 and sm_90 without spills.
"""
from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Callable

import numpy as np
import pytest

import compiler as cc
from compiler.codegen.nvptx import GpuLimits, SplitKPartial, SplitKSum
from runtime import Session

from ..compiler.test_conv import conv_and_gradients
from ..conftest import PTXAS
from .ptxas_check import assemble

# 8x8 tiles, 4 deep, 2x2 per thread: a product of fewer than 8 tiles splits into slices of at
# least 2 depth steps; at most 5 blocks, so the (tile, slice) pairs take a grid-stride loop.
SMALL = GpuLimits(block=32, max_grid=5, tile_m=8, tile_n=8, tile_k=4, thread_m=2, thread_n=2,
                  split_min_blocks=8, split_min_steps=2)
WIDE = GpuLimits(block=32, max_grid=5, tile_m=8, tile_n=8, tile_k=4, thread_m=2, thread_n=2,
                 split_min_blocks=16, split_min_steps=2)
# Graph builder for a dtype: (graph, what to run, what to fetch after it, feeds, expected fetch values).
Built = tuple[cc.Graph, list, list, dict, list]


def _matmul(a_shape: tuple[int, ...], b_shape: tuple[int, ...], **transposes: bool) -> Callable[[str], Built]:
    def build(dtype: str) -> Built:
        rng = np.random.default_rng(1)
        graph = cc.Graph()
        with graph.as_default():
            a, b = cc.placeholder(dtype, a_shape), cc.placeholder(dtype, b_shape)
            product = cc.matmul(a, b, **transposes)
        feeds = {a: rng.normal(size=a_shape).astype(dtype), b: rng.normal(size=b_shape).astype(dtype)}
        left, right = feeds[a], feeds[b]
        if transposes.get("transpose_a"):
            left = np.swapaxes(left, -1, -2)
        if transposes.get("transpose_b"):
            right = np.swapaxes(right, -1, -2)
        return graph, [product], [], feeds, [left @ right]
    return build


def _fused_update(dtype: str) -> Built:
    rng = np.random.default_rng(2)
    start = rng.normal(size=(13, 6)).astype(dtype)
    graph = cc.Graph()
    with graph.as_default():
        a, b = cc.placeholder(dtype, (13, 50)), cc.placeholder(dtype, (50, 6))
        variable = cc.Variable(start, name="w")
        update = cc.assign_sub(variable, 0.25 * (a @ b))
    feeds = {a: rng.normal(size=(13, 50)).astype(dtype), b: rng.normal(size=(50, 6)).astype(dtype)}
    return graph, [update.op], [variable], feeds, [start - 0.25 * (feeds[a] @ feeds[b])]


def _filter_gradient(dtype: str) -> Built:
    graph, fetches, feeds = conv_and_gradients((2, 9, 8, 3), (3, 3, 3, 4), dict(padding="SAME"), dtype)
    with Session(graph, target="reference") as reference:
        expected = reference.run(fetches, feeds)
    return graph, fetches, [], feeds, expected


@dataclass(frozen=True)
class Case:
    name: str
    build: Callable[[str], Built]
    limits: GpuLimits
    slices: list[int]       # of each split product, in kernel order (empty: none split)


CASES = [
    # 2x2 tiles, 10 depth steps: 2 slices of 5 steps (20 deep) over a depth of 37.
    Case("two-slices", _matmul((10, 37), (37, 11)), SMALL, [2]),
    # One tile, 18 steps: 8 slices asked for, 3 steps each, so 6 slices over a depth of 70.
    Case("six-slices", _matmul((5, 70), (70, 6)), SMALL, [6]),
    # 1x2 tiles, 12 steps: 4 slices of 3 steps.
    Case("transposed", _matmul((45, 5), (12, 45), transpose_a=True, transpose_b=True), SMALL, [4]),
    # 3 batch entries x 2 row tiles: 2 slices over a depth of 30.
    Case("batched", _matmul((3, 9, 30), (3, 30, 5)), SMALL, [2]),
    # 2x1 tiles, 13 steps: 4 slices of 4 steps, the last one short.
    Case("fused-update", _fused_update, SMALL, [4]),
    # The filter gradient: 27 taps x 4 features over 144 pixels; conv2d and the input gradient
    # have 18 tiles of pixels and stay whole.
    Case("filter-gradient", _filter_gradient, WIDE, [4]),
    # Too short to split (one tile, 3 depth steps) and enough tiles (25): one kernel each.
    Case("too-shallow", _matmul((6, 9), (9, 6)), SMALL, []),
    Case("enough-tiles", _matmul((40, 64), (64, 40)), SMALL, []),
]


@pytest.mark.parametrize("dtype", ["float32", "float64"])
@pytest.mark.parametrize("case", CASES, ids=[case.name for case in CASES])
def test_split_products_match_numpy(case: Case, dtype: str) -> None:
    graph, runs, after, feeds, expected = case.build(dtype)
    with Session(graph, target="cuda-emulated", gpu_limits=case.limits) as gpu:
        actual = gpu.run(runs, feeds)
        if after:
            actual = gpu.run(after)
        executable = gpu.compile(runs, feeds)
        kernels, program = executable.dump("kernels"), executable.step.program
    tolerance = 1e-5 if dtype == "float32" else 1e-12
    for got, want in zip(actual, expected):
        scale = max(float(np.abs(want).max()), 1.0)
        np.testing.assert_allclose(got / scale, want / scale, rtol=0, atol=tolerance)
    schedule = kernels[kernels.index("gpu schedule:"):]
    assert [int(n) for n in re.findall(r"split-K partials, (\d+) slices", schedule)] == case.slices, schedule
    assert [int(n) for n in re.findall(r"split-K sum of (\d+) partials", schedule)] == case.slices, schedule
    partials = [kernel for kernel in program.kernels if isinstance(kernel, SplitKPartial)]
    assert len(partials) == len(case.slices)
    for partial in partials:
        # The sum runs right after its partials; the workspace has memory of its own (an arena).
        after_partial = program.kernels[program.kernels.index(partial) + 1]
        assert isinstance(after_partial, SplitKSum) and after_partial.operands[0].buffer == partial.out.buffer
        workspace = program.buffers[partial.out.buffer]
        assert workspace.role == "temp" and workspace.shape[0] == partial.slices
        arena, offset = program.placement[workspace.index]
        assert offset + workspace.nbytes <= program.arenas[arena]
        assert f"b{workspace.index}: {dtype}[{'x'.join(map(str, workspace.shape))}]" in kernels
        # The listing says the kernel is a slice of the depth, not the whole reduction it reads as.
        listing = kernels[kernels.index(f"kernel {partial.name} "):]
        listing = listing[:listing.index("\nkernel ", 1)]
        assert (f"split along the depth (split-K): {partial.slices} slices of {partial.slice_steps} steps" in listing
                and f"into b{workspace.index} at offset s * {workspace.nbytes // workspace.shape[0] // np.dtype(dtype).itemsize}"
                in listing and f"{after_partial.name} adds the slices in order" in listing), listing


def test_split_products_inside_a_branch_keep_their_order() -> None:
    rng = np.random.default_rng(3)
    graph = cc.Graph()
    with graph.as_default():
        a, b = cc.placeholder("float32", (10, 37)), cc.placeholder("float32", (37, 11))
        flag = cc.placeholder("bool", ())
        result = cc.cond(flag, lambda: cc.matmul(a, b) * 2.0, lambda: cc.matmul(a, b) - 1.0)
    feeds = {a: rng.normal(size=(10, 37)).astype("float32"), b: rng.normal(size=(37, 11)).astype("float32")}
    with Session(graph, target="cuda-emulated", gpu_limits=SMALL) as gpu:
        for taken in (True, False):
            got = gpu.run(result, {**feeds, flag: np.array(taken)})
            want = feeds[a] @ feeds[b] * 2.0 if taken else feeds[a] @ feeds[b] - 1.0
            np.testing.assert_allclose(got, want, rtol=0, atol=1e-4)
        kernels = gpu.compile(result, {**feeds, flag: np.array(True)}).dump("kernels")
    assert "split-K sum of 2 partials" in kernels


@pytest.mark.skipif(PTXAS is None, reason="ptxas (CUDA toolkit) is not on PATH")
@pytest.mark.parametrize("dtype", ["float32", "float64"])
def test_split_kernels_of_real_launch_sizes_assemble_without_spills(dtype: str, tmp_path) -> None:
    """64x64 tiles, at least 4 depth steps a slice, 264 blocks wanted: a 64x64 product 4096 deep
    (1 tile: 64 slices), the fused update of a 128x64 variable 2048 deep (2 tiles: 32 slices), a
    conv filter gradient (144 taps x 32 features over 6272 pixels, 3 tiles: 79 slices of 5 steps)
    and its conv2d (98 tiles of pixels over 144 taps: 2 slices)."""
    graph = cc.Graph()
    with graph.as_default():
        a, b = cc.placeholder(dtype, (64, 4096)), cc.placeholder(dtype, (4096, 64))
        c, d = cc.placeholder(dtype, (128, 2048)), cc.placeholder(dtype, (2048, 64))
        variable = cc.Variable(np.zeros((128, 64), dtype), name="w")
        x, up = cc.placeholder(dtype, (2, 56, 56, 16)), cc.placeholder(dtype, (2, 56, 56, 32))
        w = cc.placeholder(dtype, (3, 3, 16, 32))
        conv = cc.nn.conv2d(x, w, padding="SAME")
        (filter_gradient,) = cc.gradients(cc.reduce_sum(conv * up), [w])
        fetches = [a @ b, cc.assign_sub(variable, 0.5 * (c @ d)).op, filter_gradient]
    feeds = {tensor: np.zeros(tensor.shape, dtype) for tensor in (a, b, c, d, x, up, w)}
    for arch in ("sm_80", "sm_90"):
        with Session(graph, target="cuda-emulated", arch=arch) as gpu:
            executable = gpu.compile(fetches, feeds)
        kernels, ptx = executable.dump("kernels"), executable.dump("ptx")
        slices = [int(n) for n in re.findall(r"split-K partials, (\d+) slices", kernels)]
        assert sorted(slices) == [2, 32, 64, 79], kernels
        assembled = assemble(ptx, arch, tmp_path)
        print(f"{dtype} {arch}: registers per kernel {assembled.registers}")
        assert assembled.spill_stores == [0] * len(assembled.spill_stores)

"""Convolutions on the GPU schedule: conv2d and its gradients run as tiled GEMMs over an implicit
im2col (``Kernel.window``), their A tiles read straight from the image through the window, with the
next depth step's tiles copied while the current one is multiplied (``cp.async`` on sm_80+), and
element indices in 32 bits unless a buffer is too large for them.

Through ``target="cuda-emulated"`` each geometry equals the numpy reference with launch limits that
leave partial tiles in rows, columns and depth, grid-stride over tiles, and copy shares that do not
divide among the threads, with 32- and 64-bit indices; its ``dump("kernels")`` names the implicit
GEMMs. The PTX assembles for sm_80 and sm_90 (with ``cp.async``, no spills) and for sm_75 (plain
copies).
"""
from __future__ import annotations

import re

import numpy as np
import pytest

from compiler.codegen import nvptx
from compiler.codegen.nvptx import GpuLimits
from runtime import Session

from ..compiler.test_conv import conv_and_gradients
from ..conftest import PTXAS
from .ptxas_check import assemble

CASES = [  # x shape, filter shape, conv2d arguments
    ((2, 5, 6, 3), (3, 2, 3, 4), dict(padding="VALID")),
    ((2, 7, 6, 2), (3, 3, 2, 3), dict(padding="SAME", strides=2)),
    ((1, 9, 7, 2), (2, 3, 2, 5), dict(padding="SAME", dilations=(2, 3))),
    ((3, 6, 5, 1), (3, 3, 1, 9), dict(padding="SAME")),
    ((2, 8, 7, 4), (2, 2, 4, 1), dict(padding="VALID", strides=(3, 2))),
    ((1, 4, 4, 3), (5, 5, 3, 2), dict(padding="SAME")),
]
IDS = ["valid-partial-tiles", "same-stride2", "same-dilated", "one-channel", "one-feature-uneven-stride",
       "filter-wider-than-image"]

# 8x8 tiles, 4 deep, 2x2 per thread (16 threads), at most 3 blocks: most products take several tiles.
SMALL = GpuLimits(block=32, max_grid=3, reduce_block=8, reduce_min_extent=4, tile_m=8, tile_n=8, tile_k=4,
                  thread_m=2, thread_n=2, scan_block=4, scan_min_extent=4)
# 8x4 tiles, 3 deep, 8 threads: a B tile's 12 elements are one and a half trips of the block.
ODD_TILES = GpuLimits(block=32, max_grid=5, tile_m=8, tile_n=4, tile_k=3, thread_m=2, thread_n=2)


def _implicit_gemms(kernels: str) -> list[str]:
    """The arrangement of each implicit GEMM in the schedule part of ``dump("kernels")``."""
    schedule = kernels[kernels.index("gpu schedule:"):]
    return re.findall(r"implicit GEMM \d+x\d+x\d+ \((output pixels x taps|taps x output pixels)", schedule)


@pytest.mark.parametrize("dtype, limits, index_bits", [("float32", SMALL, 32), ("float64", ODD_TILES, 32),
                                                       ("float32", ODD_TILES, 64)],
                         ids=["small", "odd-tiles", "64-bit-indices"])
@pytest.mark.parametrize("x_shape, w_shape, kwargs", CASES, ids=IDS)
def test_implicit_gemm_convolutions_match_reference(x_shape, w_shape, kwargs, dtype: str, limits: GpuLimits,
                                                    index_bits: int, monkeypatch) -> None:
    if index_bits == 64:   # as for buffers of 2**30 elements or more
        monkeypatch.setattr(nvptx, "NARROW_INDEX_LIMIT", 0)
    graph, fetches, feeds = conv_and_gradients(x_shape, w_shape, kwargs, dtype)
    with Session(graph, target="reference") as ref, Session(graph, target="cuda-emulated", gpu_limits=limits) as gpu:
        expected = ref.run(fetches, feeds)
        actual = gpu.run(fetches, feeds)
        kernels = gpu.compile(fetches, feeds).dump("kernels")
    tolerance = 1e-5 if dtype == "float32" else 1e-12
    for name, got, want in zip(("conv2d", "input gradient", "filter gradient"), actual, expected):
        scale = max(float(np.abs(want).max()), 1.0)
        np.testing.assert_allclose(got / scale, want / scale, rtol=0, atol=tolerance, err_msg=name)
    # conv2d and (at stride 1) the input gradient take pixels as rows; the filter gradient takes taps.
    strided = kwargs.get("strides", 1) != 1
    expected_gemms = ["output pixels x taps"] * (1 if strided else 2) + ["taps x output pixels"]
    assert sorted(_implicit_gemms(kernels)) == sorted(expected_gemms), kernels


@pytest.mark.skipif(PTXAS is None, reason="ptxas (CUDA toolkit) is not on PATH")
@pytest.mark.parametrize("x_shape, w_shape, kwargs", CASES, ids=IDS)
def test_implicit_gemm_ptx_assembles_with_async_copies_on_sm_80_and_later(x_shape, w_shape, kwargs, tmp_path) -> None:
    graph, fetches, feeds = conv_and_gradients(x_shape, w_shape, kwargs, "float32")
    for arch in ("sm_80", "sm_90", "sm_75"):
        with Session(graph, target="cuda-emulated", arch=arch) as gpu:
            ptx = gpu.compile(fetches, feeds).dump("ptx")
        asynchronous = arch != "sm_75"
        assert ("cp.async.ca.shared.global" in ptx) == asynchronous
        assert ("cp.async.wait_group" in ptx) == asynchronous
        assembled = assemble(ptx, arch, tmp_path)
        print(f"{arch}: registers per kernel {assembled.registers}, spill stores {sum(assembled.spill_stores)} bytes")
        assert sum(assembled.spill_stores) == 0

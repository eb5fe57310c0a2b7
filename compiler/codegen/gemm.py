"""A generated, cache-blocked GEMM for the CPU: ``C[m, n] = sum_k A[m, k] * B[k, n]``.

The classic structure (as in the BLIS papers): B is packed into panels ``NR`` columns wide and A
into panels ``MR`` rows tall, so a micro-kernel keeps an ``MR x NR`` tile of C in vector
registers and streams both panels from cache with one broadcast and ``NR / VL`` vector loads per
multiply-add step. Blocking sizes keep a B panel in L1, the packed A block in L2 and the packed B
block in L3. Any strides work (transposes are just strides); C's rows are contiguous.

``emit_gemm(module, dtype)`` adds ``void gemm(M, N, K, K0, A, rsa, csa, B, rsb, csb, C, rsc, csc, Ap,
Bp, alpha, beta)`` over depth ``K0..K0+K`` (``Ap``/``Bp`` are packing workspaces of ``packing_sizes``
elements) and returns it.

The process-wide library (``build_library``) exports two routines run by the worker pool:
``graphgrad_gemm_<dtype>`` for strided matrices, and ``graphgrad_gemm_window_<dtype>`` for a
convolution read as a product (``kernel_ir.WindowMatmul``), whose left matrix is packed straight
from the image through the window (``pack_window``): an implicit im2col. Large products share each
packed B block between the threads and split their rows into a few parts per thread.
"""
from __future__ import annotations

import functools
from dataclasses import dataclass
from pathlib import Path
from typing import Callable, Sequence

import llvmlite.binding as llvm
import numpy as np
from llvmlite import ir

from .. import dtypes
from .common import I64, PTR, declare_function, emit_carried_loop, emit_loop, register_type
from .threads import PARALLEL_SYMBOL


@dataclass(frozen=True)
class GemmShape:
    vector: int      # lanes per vector register
    mr: int          # rows of the register tile
    nr: int          # columns of the register tile (a multiple of ``vector``)
    kc: int          # depth of a packed block
    mc: int          # rows of a packed A block
    nc: int          # columns of a packed B block
    in_place_b: int  # bytes of B up to which a product of few rows reads B where it is (no packing)
    in_place_rows: int  # rows of A up to which it does


def gemm_shape(dtype: np.dtype) -> GemmShape:
    """Tile sizes for this CPU: 512-bit vectors with AVX-512, 256-bit with AVX2, else 128-bit; the
    depth of a packed block from the size of the L2 cache."""
    features = llvm.get_host_cpu_features()
    width_bits = 512 if features.get("avx512f") else 256 if features.get("avx2") else 128
    vector = width_bits // (8 * dtype.itemsize)
    registers = 32 if width_bits == 512 else 16
    # MR x (NR/VL) accumulators + NR/VL B vectors + 1 broadcast must fit in the registers.
    mr = 12 if registers == 32 else 6
    # The packed A block (MC x KC) stays in L2 while B micro-panels stream through it; with 1 MiB
    # of L2 or more a block twice as deep fits, which halves the loads and stores of C per
    # multiply-add (and a split product's synchronisations): 3% faster on one Zen 4 core.
    l2 = l2_cache_bytes() or 0
    kc = 512 if l2 >= 1 << 20 else 256
    # A B of a few times L2 is read from L2 and L3 in place about as fast as packed, and the
    # packing is saved; a larger one comes from memory, where only packing's sequential reads
    # keep the prefetchers ahead (in place, each depth step of a panel is on a page of its own).
    in_place_b = 4 * max(l2, 512 * 1024)
    # Reading B in place pays on few rows: with 1 MiB of L2 up to 768 rows (Zen 4: 10-30% faster up
    # to 48 rows, 2-5% to 768); with less, packing wins from about 48 rows (Zen 3, 512 KiB: in place
    # was 20-27% slower from 128 rows, e.g. 128 x 784 x 512 and 512 x 512 x 512; 12% faster at 16).
    in_place_rows = 768 if l2 >= 1 << 20 else 32
    return GemmShape(vector=vector, mr=mr, nr=2 * vector, kc=kc, mc=mr * 8, nc=2048, in_place_b=in_place_b,
                     in_place_rows=in_place_rows)


@functools.lru_cache(maxsize=1)
def l2_cache_bytes() -> int | None:
    """The size of one core's L2 cache, from Linux's sysfs (None where it cannot be read)."""
    for index in sorted(Path("/sys/devices/system/cpu/cpu0/cache").glob("index*")):
        try:
            if (index / "level").read_text().strip() == "2" and \
                    (index / "type").read_text().strip() in ("Unified", "Data"):
                text = (index / "size").read_text().strip().upper()
                units = {"K": 1 << 10, "M": 1 << 20, "G": 1 << 30}
                return int(text[:-1]) * units[text[-1]] if text[-1] in units else int(text)
        except (OSError, ValueError):
            continue
    return None


def packing_sizes(shape: GemmShape) -> tuple[int, int]:
    """Elements of the A and B packing workspaces (A's includes an MR x NR edge tile)."""
    return shape.mc * shape.kc + shape.mr * shape.nr, shape.kc * shape.nc


def _const(value: int) -> ir.Constant:
    return ir.Constant(I64, value)


def _min(b: ir.IRBuilder, x: ir.Value, y: ir.Value) -> ir.Value:
    return b.select(b.icmp_signed("<", x, y), x, y)


def _maximum(b: ir.IRBuilder, x: ir.Value, y: ir.Value) -> ir.Value:
    return b.select(b.icmp_signed(">", x, y), x, y)


def _gep(b: ir.IRBuilder, base: ir.Value, element: ir.Type, index: ir.Value) -> ir.Value:
    return b.gep(base, [index], inbounds=True, source_etype=element)


def emit_gemm(module: ir.Module, dtype: np.dtype, left: "_LeftOperand | None" = None) -> ir.Function:
    """The serial product ``gemm<left>(M, N, K, K0, <A's parameters>, B, rsb, csb, C, rsc, csc, Ap, Bp,
    alpha, beta)`` over depth ``K0..K0+K`` of A and B (B given from depth 0)."""
    shape = gemm_shape(dtype)
    left = left or _strided_left(dtype, shape)
    name = f"gemm{left.suffix}_{dtype.name}"
    existing = module.globals.get(name)
    if existing is not None:
        return existing
    scalar = register_type(dtype)
    macro = _emit_macro(module, dtype, shape, left)
    pack_b = _emit_pack(module, dtype, "pack_b", shape.nr)

    params = [I64] * 4 + list(left.params) + [PTR, I64, I64, PTR, I64, I64, PTR, PTR, I64, I64]
    function = ir.Function(module, ir.FunctionType(ir.VoidType(), params), name=name)
    function.linkage = "internal"
    m, n, k, depth_offset = function.args[:4]
    left_params = function.args[4:4 + len(left.params)]
    bm, rsb, csb, c, rsc, csc, ap, bp, alpha_bits, beta = function.args[4 + len(left.params):]
    b = ir.IRBuilder(function.append_basic_block("entry"))
    # C = alpha * A @ B, or C += alpha * A @ B when beta is 1. alpha travels as a double's bits.
    alpha = b.bitcast(alpha_bits, ir.DoubleType())
    alpha = alpha if scalar == ir.DoubleType() else b.fptrunc(alpha, scalar)
    keep_c = b.icmp_signed("!=", beta, _const(0))

    # K == 0: C is all zeros (or unchanged when accumulating).
    zero_block = b.append_basic_block("zero")
    main_block = b.append_basic_block("main")
    done_block = b.append_basic_block("done")
    b.cbranch(b.icmp_signed("==", k, _const(0)), zero_block, main_block)
    b.position_at_end(zero_block)
    clear_block = b.append_basic_block("clear")
    b.cbranch(keep_c, done_block, clear_block)
    b.position_at_end(clear_block)

    def zero_row(b: ir.IRBuilder, i: ir.Value) -> None:
        def zero_col(b: ir.IRBuilder, j: ir.Value) -> None:
            b.store(ir.Constant(scalar, 0.0), _gep(b, c, scalar, b.add(b.mul(i, rsc), b.mul(j, csc))))
        emit_loop(b, n, zero_col, name="zj")
    emit_loop(b, m, zero_row, name="zi")
    b.branch(done_block)
    b.position_at_end(done_block)
    b.ret_void()

    b.position_at_end(main_block)

    # Few rows of A reuse each B panel too little to pay for packing it: read B where it is when
    # its rows are contiguous, whole panels wide (no panel reads past a row's end) and B is
    # small enough to be in cache (``GemmShape.in_place_b``), for up to ``in_place_rows`` rows
    # (from there two threads share packed B blocks).
    in_place = b.and_(b.and_(b.icmp_signed("<=", m, _const(shape.in_place_rows)),
                             b.icmp_signed("<=", b.mul(b.mul(k, n), _const(dtype.itemsize)),
                                           _const(shape.in_place_b))),
                      b.and_(b.icmp_signed("==", csb, _const(1)),
                             b.icmp_signed("==", b.urem(n, _const(shape.nr)), _const(0))))

    def pack_and_multiply(b: ir.IRBuilder, block: _Block) -> None:
        pc = b.add(block.pc, depth_offset)
        b_source = _gep(b, bm, scalar, b.add(b.mul(pc, rsb), b.mul(block.jc, csb)))
        with b.if_else(in_place) as (read_in_place, pack):
            with read_in_place:
                b.call(macro, [_const(0), m, block.jc, block.nc, pc, block.kc, *left_params, c, rsc, csc, ap,
                               b_source, block.accumulate, alpha, rsb, _const(1)])
            with pack:
                # B block (kc x nc): rows walk k (stride rsb), columns walk n (stride csb).
                b.call(pack_b, [b_source, csb, rsb, block.nc, block.kc, bp])
                b.call(macro, [_const(0), m, block.jc, block.nc, pc, block.kc, *left_params, c, rsc, csc, ap,
                               bp, block.accumulate, alpha, _const(shape.nr), block.kc])
    _emit_block_loops(b, shape, n, k, keep_c, pack_and_multiply)
    b.ret_void()
    return function


@dataclass(frozen=True)
class _Block:
    """One step of the blocked product: ``C[:, jc:jc+nc] (+)= A[:, pc:pc+kc] @ B[pc:pc+kc, jc:jc+nc]``."""

    jc: ir.Value
    nc: ir.Value
    pc: ir.Value
    kc: ir.Value
    accumulate: ir.Value   # i1: add to C (every depth block but the first, or all when C is kept)


def _emit_block_loops(b: ir.IRBuilder, shape: GemmShape, n: ir.Value, k: ir.Value, keep_c: ir.Value,
                      multiply: Callable[[ir.IRBuilder, _Block], None]) -> None:
    """The loops over column blocks (``NC`` wide) and, within each, depth blocks (equal, at most
    ``KC`` deep); ``multiply`` emits one block's product."""
    blocks_k = _blocks(b, k, shape.kc)
    depth_step = _depth_step(b, k, blocks_k)

    def over_jc(b: ir.IRBuilder, jc_index: ir.Value) -> None:
        jc = b.mul(jc_index, _const(shape.nc))
        nc = _min(b, _const(shape.nc), b.sub(n, jc))

        def over_pc(b: ir.IRBuilder, pc_index: ir.Value) -> None:
            pc = b.mul(pc_index, depth_step)
            kc = _min(b, depth_step, b.sub(k, pc))
            multiply(b, _Block(jc, nc, pc, kc, b.or_(b.icmp_signed("!=", pc_index, _const(0)), keep_c)))
        emit_loop(b, blocks_k, over_pc, name="pc")
    emit_loop(b, _blocks(b, n, shape.nc), over_jc, name="jc")


def _blocks(b: ir.IRBuilder, count: ir.Value, size: int) -> ir.Value:
    return b.udiv(b.add(count, _const(size - 1)), _const(size))


def _depth_step(b: ir.IRBuilder, k: ir.Value, blocks_k: ir.Value) -> ir.Value:
    """Equal depth blocks (784 = 4 x 196, not 3 x 256 + 16): a thin last block would spend its
    micro-kernel calls loading and storing C rather than multiplying."""
    return b.udiv(b.add(k, b.sub(blocks_k, _const(1))), _maximum(b, blocks_k, _const(1)))


@dataclass(frozen=True)
class _LeftOperand:
    """How a macro kernel reads A: the parameters that locate it, and ``pack(b, params, ic, mc, pc,
    kc, Ap)``, which packs rows ``ic..ic+mc`` at depth ``pc..pc+kc`` into MR-row panels at ``Ap``."""

    suffix: str
    params: tuple[ir.Type, ...]
    pack: Callable[[ir.IRBuilder, Sequence[ir.Value], ir.Value, ir.Value, ir.Value, ir.Value, ir.Value], None]
    rows_layout: bool = False   # panels hold rows one after another (else depth steps; see the micro kernel)


def _strided_left(dtype: np.dtype, shape: GemmShape) -> _LeftOperand:
    """A as a strided matrix: (A, row stride, depth stride)."""
    def pack(b: ir.IRBuilder, params: Sequence[ir.Value], ic: ir.Value, mc: ir.Value, pc: ir.Value, kc: ir.Value,
             ap: ir.Value) -> None:
        a, rsa, csa = params
        pack_a = _emit_pack(b.module, dtype, "pack_a", shape.mr)
        b.call(pack_a, [_gep(b, a, register_type(dtype), b.add(b.mul(ic, rsa), b.mul(pc, csa))), rsa, csa, mc, kc, ap])
    return _LeftOperand("", (PTR, I64, I64), pack)


def _window_left(dtype: np.dtype, shape: GemmShape, pixel_rows: bool) -> _LeftOperand:
    """A read from an image through a window (``kernel_ir.WindowMatmul``): (image, geometry). With
    pixels as rows the panels keep rows whole (see ``_emit_pack_window``), so the micro-kernel
    reads them in that layout."""
    def pack(b: ir.IRBuilder, params: Sequence[ir.Value], ic: ir.Value, mc: ir.Value, pc: ir.Value, kc: ir.Value,
             ap: ir.Value) -> None:
        pack_window = _emit_pack_window(b.module, dtype, shape.mr, pixel_rows)
        b.call(pack_window, [params[0], params[1], ic, mc, pc, kc, ap])
    return _LeftOperand("_window_pixels" if pixel_rows else "_window_taps", (PTR, PTR), pack, rows_layout=pixel_rows)


def _emit_macro(module: ir.Module, dtype: np.dtype, shape: GemmShape, left: _LeftOperand | None = None) -> ir.Function:
    """``macro(m_start, m_count, jc, nc, pc, kc, <A's parameters>, C, rsc, csc, Ap, Bp, accumulate, alpha,
    b_stride, panel_step)``: rows ``[m_start, m_start + m_count)`` of the C block at columns
    ``jc..jc+nc``, from depth ``pc..pc+kc`` of A and the B block ``Bp``: A blocks are packed into
    ``Ap`` and multiplied tile by tile. Column j of B's block starts at ``j * panel_step`` and its
    depth steps are ``b_stride`` apart: ``kc`` and NR when packed, 1 and B's row stride in place."""
    left = left or _strided_left(dtype, shape)
    name = f"macro{left.suffix}_{dtype.name}"
    existing = module.globals.get(name)
    if existing is not None:
        return existing
    scalar = register_type(dtype)
    micro = _emit_micro_kernel(module, dtype, shape, left.rows_layout)
    params = [I64] * 6 + list(left.params) + [PTR, I64, I64, PTR, PTR, ir.IntType(1), scalar, I64, I64]
    function = ir.Function(module, ir.FunctionType(ir.VoidType(), params), name=name)
    function.linkage = "internal"
    function.attributes.add("noinline")
    m_start, m_count, jc, nc, pc, kc = function.args[:6]
    left_params = function.args[6:6 + len(left.params)]
    c, rsc, csc, ap, bp, accumulate, alpha, b_stride, panel_step = function.args[6 + len(left.params):]
    b = ir.IRBuilder(function.append_basic_block("entry"))
    scratch = _gep(b, ap, scalar, _const(shape.mc * shape.kc))  # an MR x NR tile for edges
    m_end = b.add(m_start, m_count)
    # Rows split into equal blocks of whole tiles (396 = 84 x 4 + 60, not 96 x 4 + 12): a thin
    # last block would walk all of B for a few rows.
    blocks_m = _blocks(b, m_count, shape.mc)
    row_step = b.mul(_blocks(b, b.udiv(b.add(m_count, b.sub(blocks_m, _const(1))), _maximum(b, blocks_m, _const(1))),
                             shape.mr), _const(shape.mr))

    def over_ic(b: ir.IRBuilder, ic_index: ir.Value) -> None:
        ic = b.add(m_start, b.mul(ic_index, row_step))
        mc = _min(b, row_step, b.sub(m_end, ic))
        left.pack(b, left_params, ic, mc, pc, kc, ap)
        n_panels = b.udiv(b.add(nc, _const(shape.nr - 1)), _const(shape.nr))
        m_panels = b.udiv(b.add(mc, _const(shape.mr - 1)), _const(shape.mr))

        def over_jr(b: ir.IRBuilder, jr_index: ir.Value) -> None:
            jr = b.mul(jr_index, _const(shape.nr))
            nr = _min(b, _const(shape.nr), b.sub(nc, jr))
            b_panel = _gep(b, bp, scalar, b.mul(jr, panel_step))

            def over_ir(b: ir.IRBuilder, ir_index: ir.Value) -> None:
                row = b.mul(ir_index, _const(shape.mr))
                mr = _min(b, _const(shape.mr), b.sub(mc, row))
                a_panel = _gep(b, ap, scalar, b.mul(row, kc))
                c_tile = _gep(b, c, scalar, b.add(b.mul(b.add(ic, row), rsc), b.mul(b.add(jc, jr), csc)))
                b.call(micro, [kc, a_panel, b_panel, c_tile, rsc, csc, mr, nr, accumulate, scratch, alpha, b_stride])
            emit_loop(b, m_panels, over_ir, name="ir")
        emit_loop(b, n_panels, over_jr, name="jr")
    emit_loop(b, b.udiv(b.add(m_count, b.sub(row_step, _const(1))), _maximum(b, row_step, _const(1))), over_ic,
              name="ic")
    b.ret_void()
    return function


def _emit_pack(module: ir.Module, dtype: np.dtype, name: str, width: int) -> ir.Function:
    """Pack a ``rows x depth`` block (element ``[r, d]`` at ``src[r*rs + d*ds]``) into panels of
    ``width`` rows: ``dst[(r // width) * depth * width + d * width + r % width]``, zero-padded.

    Full panels take the loop order that reads the source contiguously (``ds == 1``: along depth,
    transposed in registers; ``rs == 1``: a vector per depth step); the last, partial panel is
    padded with zeros.
    """
    existing = module.globals.get(f"{name}_{dtype.name}")
    if existing is not None:
        return existing
    scalar = register_type(dtype)
    function = ir.Function(module, ir.FunctionType(ir.VoidType(), [PTR, I64, I64, I64, I64, PTR]),
                           name=f"{name}_{dtype.name}")
    function.linkage = "internal"
    function.attributes.add("noinline")
    src, rs, ds, rows, depth, dst = function.args
    for arg in (src, dst):
        arg.add_attribute("noalias")
    b = ir.IRBuilder(function.append_basic_block("entry"))
    full_panels = b.udiv(rows, _const(width))
    lanes = gemm_shape(dtype).vector
    vector_type = ir.VectorType(scalar, lanes)

    def copy(b: ir.IRBuilder, panel_src: ir.Value, panel_dst: ir.Value, r: ir.Value, d: ir.Value) -> None:
        value = b.load(_gep(b, panel_src, scalar, b.add(b.mul(r, rs), b.mul(d, ds))), typ=scalar)
        b.store(value, _gep(b, panel_dst, scalar, b.add(b.mul(d, _const(width)), r)))

    def over_full_panel(b: ir.IRBuilder, p: ir.Value) -> None:
        panel_src = _gep(b, src, scalar, b.mul(b.mul(p, _const(width)), rs))
        panel_dst = _gep(b, dst, scalar, b.mul(b.mul(p, depth), _const(width)))
        depth_major = b.append_basic_block("depth_major")
        row_major = b.append_basic_block("row_major")
        joined = b.append_basic_block("joined")
        b.cbranch(b.icmp_signed("==", ds, _const(1)), depth_major, row_major)
        b.position_at_end(depth_major)
        # Rows are contiguous along depth: transpose width x lanes blocks in registers, then copy
        # the last depth % lanes columns one by one.
        chunks = b.udiv(depth, _const(lanes))

        def over_chunk(b: ir.IRBuilder, chunk: ir.Value) -> None:
            first = b.mul(chunk, _const(lanes))
            rows_in = [b.load(_gep(b, panel_src, scalar, b.add(b.mul(_const(r), rs), first)), typ=vector_type,
                              align=dtype.itemsize) for r in range(width)]
            _store_transposed(b, rows_in, _gep(b, panel_dst, scalar, b.mul(first, _const(width))), width, lanes, dtype)
        emit_loop(b, chunks, over_chunk, name="chunk")
        done_depth = b.mul(chunks, _const(lanes))

        def tail_column(b: ir.IRBuilder, d: ir.Value) -> None:
            column = b.add(done_depth, d)
            for r in range(width):
                copy(b, panel_src, panel_dst, _const(r), column)
        emit_loop(b, b.sub(depth, done_depth), tail_column, name="tail_d")
        b.branch(joined)
        b.position_at_end(row_major)
        rows_contiguous = b.append_basic_block("rows_contiguous")
        strided = b.append_basic_block("strided")
        b.cbranch(b.icmp_signed("==", rs, _const(1)), rows_contiguous, strided)
        b.position_at_end(rows_contiguous)
        # A panel's rows are contiguous at every depth (a transposed A, a row-major B): one
        # ``width``-element vector copy per depth step.
        panel_vector = ir.VectorType(scalar, width)

        def copy_step(b: ir.IRBuilder, d: ir.Value) -> None:
            value = b.load(_gep(b, panel_src, scalar, b.mul(d, ds)), typ=panel_vector, align=dtype.itemsize)
            b.store(value, _gep(b, panel_dst, scalar, b.mul(d, _const(width))), align=dtype.itemsize)
        emit_loop(b, depth, copy_step, name="step")
        b.branch(joined)
        b.position_at_end(strided)

        def copy_column(b: ir.IRBuilder, d: ir.Value) -> None:
            def copy_element(b: ir.IRBuilder, r: ir.Value) -> None:
                copy(b, panel_src, panel_dst, r, d)
            emit_loop(b, _const(width), copy_element, name="inner")
        emit_loop(b, depth, copy_column, name="outer")
        b.branch(joined)
        b.position_at_end(joined)

    emit_loop(b, full_panels, over_full_panel, name="panel")

    # The partial last panel: rows beyond ``rows`` are zeros.
    base_row = b.mul(full_panels, _const(width))
    valid = b.sub(rows, base_row)
    tail = b.append_basic_block("tail")
    done = b.append_basic_block("done")
    b.cbranch(b.icmp_signed(">", valid, _const(0)), tail, done)
    b.position_at_end(tail)
    panel_src = _gep(b, src, scalar, b.mul(base_row, rs))
    panel_dst = _gep(b, dst, scalar, b.mul(b.mul(full_panels, depth), _const(width)))

    def over_depth(b: ir.IRBuilder, d: ir.Value) -> None:
        def over_lane(b: ir.IRBuilder, r: ir.Value) -> None:
            inside = b.icmp_signed("<", r, valid)
            safe_r = b.select(inside, r, _const(0))
            source = _gep(b, panel_src, scalar, b.add(b.mul(safe_r, rs), b.mul(d, ds)))
            value = b.select(inside, b.load(source, typ=scalar), ir.Constant(scalar, 0.0))
            b.store(value, _gep(b, panel_dst, scalar, b.add(b.mul(d, _const(width)), r)))
        emit_loop(b, _const(width), over_lane, name="lane")
    emit_loop(b, depth, over_depth, name="d")
    b.branch(done)
    b.position_at_end(done)
    b.ret_void()
    return function


# The geometry of a window product (``kernel_ir.WindowMatmul``), as the i64 array the library reads.
WINDOW_FIELDS = ("pixel_rows", "height", "width", "pixels0", "pixels1", "pixels2", "taps0", "taps1", "taps2",
                 "stride_n", "stride_h", "stride_w", "stride_c", "pixel_step_h", "pixel_step_w",
                 "tap_step_h", "tap_step_w", "shift_h", "shift_w")


@dataclass(frozen=True)
class _Counter:
    """An index over three nested extents (pixels ``(n, i, j)`` or taps ``(u, v, c)``) and what each
    digit adds to the image offset and to the row and column ``h``, ``w`` it reads."""

    extents: tuple[ir.Value, ir.Value, ir.Value]
    steps: tuple[tuple[ir.Value, ir.Value, ir.Value], ...]   # per digit: (offset, h, w) per unit
    base: tuple[ir.Value, ir.Value, ir.Value]

    def digits(self, b: ir.IRBuilder, index: ir.Value) -> list[ir.Value]:
        last = b.urem(index, self.extents[2])
        rest = b.udiv(index, self.extents[2])
        return [b.udiv(rest, self.extents[1]), b.urem(rest, self.extents[1]), last]

    def item(self, b: ir.IRBuilder, digits: Sequence[ir.Value]) -> list[ir.Value]:
        """(offset, h, w) of the element these digits name."""
        result = list(self.base)
        for digit, steps in zip(digits, self.steps):
            result = [b.add(total, b.mul(digit, step)) for total, step in zip(result, steps)]
        return result

    def advance(self, b: ir.IRBuilder, digits: Sequence[ir.Value], step: ir.Value) -> list[ir.Value]:
        """The digits ``step`` further on (the last digit must not pass its extent)."""
        last = b.add(digits[2], step)
        wrap_last = b.icmp_unsigned(">=", last, self.extents[2])
        middle = b.select(wrap_last, b.add(digits[1], _const(1)), digits[1])
        wrap_middle = b.and_(wrap_last, b.icmp_unsigned(">=", middle, self.extents[1]))
        return [b.select(wrap_middle, b.add(digits[0], _const(1)), digits[0]),
                b.select(wrap_middle, _const(0), middle),
                b.select(wrap_last, b.sub(last, self.extents[2]), last)]


def _window_counters(b: ir.IRBuilder, geometry: ir.Value, pixel_rows: bool) -> tuple[_Counter, _Counter, dict]:
    """(row counter, depth counter, the geometry's fields) of a window product whose rows are
    pixels (``pixel_rows``) or taps."""
    field = {name: b.load(_gep(b, geometry, I64, _const(i)), typ=I64) for i, name in enumerate(WINDOW_FIELDS)}
    zero = _const(0)
    stride_h, stride_w = field["stride_h"], field["stride_w"]
    pixel_h, pixel_w = field["pixel_step_h"], field["pixel_step_w"]
    tap_h, tap_w = field["tap_step_h"], field["tap_step_w"]
    shift_h, shift_w = field["shift_h"], field["shift_w"]
    pixels = _Counter((field["pixels0"], field["pixels1"], field["pixels2"]),
                      ((field["stride_n"], zero, zero), (b.mul(pixel_h, stride_h), pixel_h, zero),
                       (b.mul(pixel_w, stride_w), zero, pixel_w)),
                      (b.add(b.mul(shift_h, stride_h), b.mul(shift_w, stride_w)), shift_h, shift_w))
    taps = _Counter((field["taps0"], field["taps1"], field["taps2"]),
                    ((b.mul(tap_h, stride_h), tap_h, zero), (b.mul(tap_w, stride_w), zero, tap_w),
                     (field["stride_c"], zero, zero)),
                    (zero, zero, zero))
    return (pixels, taps, field) if pixel_rows else (taps, pixels, field)


def _emit_pack_window(module: ir.Module, dtype: np.dtype, width: int, pixel_rows: bool) -> ir.Function:
    """``pack_window(image, geometry, row_start, rows, depth_start, depth, dst)``: like ``pack_a``
    for the implicit matrix of a window product: element [r, d] is the image element that row item
    r and depth item d read together, 0 outside the image (or past the last row).

    With pixels as rows, each pixel's channels are contiguous in the image, so panels of ``width``
    rows keep rows whole (``dst[r * depth + d]``): a tap's run of channels is copied a vector at a
    time, after one bounds check per row (a run shorter than a vector, an RGB image's 3 channels:
    one masked load per row). With taps as rows (the filter gradient), panels keep depth steps
    (``dst[d * width + r]``): a panel's rows are the end of one tap's channels and the start of the
    next, two masked contiguous loads per pixel, checked once along a row of pixels. Elsewhere
    (channels not contiguous; with taps as rows, fewer channels than the tile's rows; with pixels
    as rows, a row's last depth steps, where a whole vector no longer fits) one masked gather reads
    a panel's rows at a depth step."""
    name = f"pack_window_{'pixels' if pixel_rows else 'taps'}_{dtype.name}"
    existing = module.globals.get(name)
    if existing is not None:
        return existing
    scalar = register_type(dtype)
    function = ir.Function(module, ir.FunctionType(ir.VoidType(), [PTR, PTR, I64, I64, I64, I64, PTR]), name=name)
    function.linkage = "internal"
    function.attributes.add("noinline")
    image, geometry, row_start, rows, depth_start, depth, dst = function.args
    for arg in (image, dst):
        arg.add_attribute("noalias")
    b = ir.IRBuilder(function.append_basic_block("entry"))
    row_counter, depth_counter, field = _window_counters(b, geometry, pixel_rows)
    height, image_width, channels = field["height"], field["width"], field["taps2"]
    contiguous_channels = b.icmp_signed("==", field["stride_c"], _const(1))
    outside = _const(-(1 << 40))   # an h no image has: marks rows past the last
    first_depth = depth_counter.digits(b, depth_start)
    i32 = ir.IntType(32)
    index_vector = ir.VectorType(I64, width)
    value_vector = ir.VectorType(scalar, width)
    mask_vector = ir.VectorType(ir.IntType(1), width)
    zeros = ir.Constant(value_vector, [0.0] * width)
    lanes = gemm_shape(dtype).vector
    lane_vector = ir.VectorType(scalar, lanes)
    gather = declare_function(module, f"llvm.masked.gather.v{width}{_vector_suffix(dtype)}.v{width}p0", value_vector,
                              [ir.VectorType(PTR, width), i32, mask_vector, value_vector])

    def splat(b: ir.IRBuilder, value: ir.Value) -> ir.Value:
        single = b.insert_element(ir.Constant(index_vector, ir.Undefined), value, ir.Constant(i32, 0))
        return b.shuffle_vector(single, ir.Constant(index_vector, ir.Undefined),
                                ir.Constant(ir.VectorType(i32, width), [0] * width))
    image_address = splat(b, b.ptrtoint(image, I64))
    item_bytes = splat(b, _const(dtype.itemsize))
    bounds = splat(b, height), splat(b, image_width)

    def inside_image(b: ir.IRBuilder, h: ir.Value, w: ir.Value) -> ir.Value:
        return b.and_(b.icmp_unsigned("<", h, height), b.icmp_unsigned("<", w, image_width))

    def over_panel(b: ir.IRBuilder, panel: ir.Value) -> None:
        first = b.mul(panel, _const(width))
        valid = b.sub(rows, first)
        digits = row_counter.digits(b, b.add(row_start, first))
        first_channel = digits[2]
        items = []
        for r in range(width):
            offset, h, w = row_counter.item(b, digits)
            items.append((offset, b.select(b.icmp_signed(">", valid, _const(r)), h, outside), w))
            if r + 1 < width:
                digits = row_counter.advance(b, digits, _const(1))
        vectors = [ir.Constant(index_vector, ir.Undefined)] * 3
        for r, item in enumerate(items):
            vectors = [b.insert_element(vector, value, ir.Constant(i32, r)) for vector, value in zip(vectors, item)]
        row_offsets, row_h, row_w = vectors
        panel_dst = _gep(b, dst, scalar, b.mul(first, depth))

        def store_element(b: ir.IRBuilder, value: ir.Value, r: int, d: ir.Value) -> None:
            b.store(value, _gep(b, panel_dst, scalar, b.add(b.mul(_const(r), depth), d)))

        def gathered(b: ir.IRBuilder, d: ir.Value, offset: ir.Value, h: ir.Value, w: ir.Value) -> None:
            inside = b.and_(b.icmp_unsigned("<", b.add(row_h, splat(b, h)), bounds[0]),
                            b.icmp_unsigned("<", b.add(row_w, splat(b, w)), bounds[1]))
            element = b.select(inside, b.add(row_offsets, splat(b, offset)), ir.Constant(index_vector, [0] * width))
            pointers = b.inttoptr(b.add(image_address, b.mul(element, item_bytes)), ir.VectorType(PTR, width))
            values = b.call(gather, [pointers, ir.Constant(i32, dtype.itemsize), inside, zeros])
            if pixel_rows:
                for r in range(width):
                    store_element(b, b.extract_element(values, ir.Constant(i32, r)), r, d)
            else:
                b.store(values, _gep(b, panel_dst, scalar, b.mul(d, _const(width))), align=dtype.itemsize)

        if pixel_rows:
            lane_mask = ir.VectorType(ir.IntType(1), lanes)
            lane_load = declare_function(module, f"llvm.masked.load.v{lanes}{_vector_suffix(dtype)}.p0", lane_vector,
                                         [PTR, i32, lane_mask, lane_vector])
            lane_numbers = ir.Constant(ir.VectorType(I64, lanes), list(range(lanes)))
            lane_zeros = ir.Constant(lane_vector, [0.0] * lanes)

            def copy_run(b: ir.IRBuilder, d: ir.Value, digits: list[ir.Value], offset: ir.Value, h: ir.Value,
                         w: ir.Value) -> ir.Value:
                # The whole vectors of this tap's run of channels (within the block's depth): per
                # row, one bounds check, then a vector at a time copied into the row (the checks
                # per vector took about a fifth of an input gradient's time on a Zen 3).
                run = b.udiv(_min(b, b.sub(channels, digits[2]), b.sub(depth, d)), _const(lanes))
                for r, (row_offset, item_h, item_w) in enumerate(items):
                    inside = inside_image(b, b.add(item_h, h), b.add(item_w, w))
                    target = _gep(b, panel_dst, scalar, b.add(b.mul(_const(r), depth), d))
                    with b.if_else(inside) as (copied, zeroed):
                        with copied:
                            source = _gep(b, image, scalar, b.add(row_offset, offset))

                            def copy(b: ir.IRBuilder, vector: ir.Value, source=source, target=target) -> None:
                                at = b.mul(vector, _const(lanes))
                                loaded = b.load(_gep(b, source, scalar, at), typ=lane_vector, align=dtype.itemsize)
                                b.store(loaded, _gep(b, target, scalar, at), align=dtype.itemsize)
                            emit_loop(b, run, copy, name=f"copy{r}")
                        with zeroed:
                            def zero(b: ir.IRBuilder, vector: ir.Value, target=target) -> None:
                                b.store(lane_zeros, _gep(b, target, scalar, b.mul(vector, _const(lanes))),
                                        align=dtype.itemsize)
                            emit_loop(b, run, zero, name=f"zero{r}")
                return b.mul(run, _const(lanes))

            def copy_short_run(b: ir.IRBuilder, d: ir.Value, digits: list[ir.Value], offset: ir.Value, h: ir.Value,
                               w: ir.Value) -> ir.Value:
                # Fewer channels left in this tap than a vector (an RGB image's 3): one masked load
                # per row, stored as a whole vector; its lanes past the run land on the row's next
                # depth steps (``fast_here``: a vector's room is left in the row), which the walk
                # writes afterwards.
                count = b.sub(channels, digits[2])
                count_vector = b.insert_element(ir.Constant(ir.VectorType(I64, lanes), ir.Undefined), count,
                                                ir.Constant(i32, 0))
                count_vector = b.shuffle_vector(count_vector, ir.Constant(ir.VectorType(I64, lanes), ir.Undefined),
                                                ir.Constant(ir.VectorType(i32, lanes), [0] * lanes))
                in_run = b.icmp_signed("<", lane_numbers, count_vector)
                for r, (row_offset, item_h, item_w) in enumerate(items):
                    inside = inside_image(b, b.add(item_h, h), b.add(item_w, w))
                    source = _gep(b, image, scalar, b.select(inside, b.add(row_offset, offset), _const(0)))
                    mask = b.and_(in_run, b.select(inside, ir.Constant(lane_mask, [1] * lanes),
                                                   ir.Constant(lane_mask, [0] * lanes)))
                    values = b.call(lane_load, [source, ir.Constant(i32, dtype.itemsize), mask, lane_zeros])
                    b.store(values, _gep(b, panel_dst, scalar, b.add(b.mul(_const(r), depth), d)),
                            align=dtype.itemsize)
                return count

            def fast_step(b: ir.IRBuilder, d: ir.Value, digits: list[ir.Value], offset: ir.Value, h: ir.Value,
                          w: ir.Value) -> ir.Value:
                long_run = b.icmp_unsigned("<=", b.add(digits[2], _const(lanes)), channels)
                with b.if_else(long_run) as (whole_vectors, short):
                    with whole_vectors:
                        long_step = copy_run(b, d, digits, offset, h, w)
                        long_block = b.block
                    with short:
                        short_step = copy_short_run(b, d, digits, offset, h, w)
                        short_block = b.block
                stepped = b.phi(I64)
                stepped.add_incoming(long_step, long_block)
                stepped.add_incoming(short_step, short_block)
                return stepped

            def fast_here(b: ir.IRBuilder, d: ir.Value, digits: list[ir.Value]) -> ir.Value:
                return b.and_(contiguous_channels, b.icmp_signed("<=", b.add(d, _const(lanes)), depth))
        else:
            # The panel's two runs of channels: rows [0, split) of the first tap, the rest of the next.
            # Loaded as vectors of a legal width (8 lanes for AVX2's 6 rows), masks built once.
            padded = 1 << (width - 1).bit_length()
            padded_mask = ir.VectorType(ir.IntType(1), padded)
            padded_values = ir.VectorType(scalar, padded)
            padded_load = declare_function(module, f"llvm.masked.load.v{padded}{_vector_suffix(dtype)}.p0",
                                           padded_values, [PTR, i32, padded_mask, padded_values])
            padded_index = ir.VectorType(I64, padded)

            def padded_splat(b: ir.IRBuilder, value: ir.Value) -> ir.Value:
                single = b.insert_element(ir.Constant(padded_index, ir.Undefined), value, ir.Constant(i32, 0))
                return b.shuffle_vector(single, ir.Constant(padded_index, ir.Undefined),
                                        ir.Constant(ir.VectorType(i32, padded), [0] * padded))
            split = _min(b, b.sub(channels, first_channel), _const(width))
            second = _min(b, split, _const(width - 1))
            lane = ir.Constant(padded_index, list(range(padded)))
            in_panel = b.icmp_signed("<", lane, padded_splat(b, _min(b, valid, _const(width))))
            runs = [(b.and_(in_panel, b.icmp_signed("<", lane, padded_splat(b, split))), items[0]),
                    (b.and_(in_panel, b.icmp_signed(">=", lane, padded_splat(b, split))),
                     (b.sub(b.extract_element(row_offsets, second), split), b.extract_element(row_h, second),
                      b.extract_element(row_w, second)))]
            panel_runs = b.and_(contiguous_channels, b.icmp_signed(">=", channels, _const(width)))
            all_lanes, no_lanes = ir.Constant(padded_mask, [1] * padded), ir.Constant(padded_mask, [0] * padded)
            pixel_offset_step, _, pixel_w = depth_counter.steps[2]
            forward = b.icmp_signed(">", pixel_w, _const(0))
            # Per run, the pixel (last digit) from which its w leaves the image on the right:
            # w = run_w + shift_w + j * pixel_w stays below the width for j < run_end.
            run_ends = []
            for _, (_, _, run_w) in runs:
                room = b.sub(b.sub(image_width, _const(1)), b.add(run_w, depth_counter.base[2]))
                run_ends.append(b.select(b.and_(forward, b.icmp_signed(">=", room, _const(0))),
                                         b.add(b.udiv(room, b.select(forward, pixel_w, _const(1))), _const(1)),
                                         _const(0)))
            first_rows = ir.Constant(ir.VectorType(i32, width), list(range(width)))

            def store_runs(b: ir.IRBuilder, masks: Sequence[ir.Value], offset: ir.Value, d: ir.Value) -> None:
                values = ir.Constant(padded_values, [0.0] * padded)
                for mask, (_, (run_offset, _, _)) in zip(masks, runs):
                    # Not inbounds: the second run's start is computed back from its first row,
                    # and may lie before the image where only masked-off lanes would read.
                    pointer = b.gep(image, [b.add(run_offset, offset)], source_etype=scalar)
                    values = b.call(padded_load, [pointer, ir.Constant(i32, dtype.itemsize), mask, values])
                if padded != width:
                    values = b.shuffle_vector(values, ir.Constant(padded_values, ir.Undefined), first_rows)
                b.store(values, _gep(b, panel_dst, scalar, b.mul(d, _const(width))), align=dtype.itemsize)

            def fast_step(b: ir.IRBuilder, d: ir.Value, digits: list[ir.Value], offset: ir.Value, h: ir.Value,
                          w: ir.Value) -> ir.Value:
                # Along a row of pixels each run's w moves by the pixel step: as long as both runs
                # stay inside the image (or a run's image row is outside, all zeros), no per-pixel
                # checks; elsewhere one pixel with its checks (the per-pixel checks and counter
                # steps took about a quarter of a filter gradient's time on a Zen 3).
                steps = _min(b, b.sub(depth_counter.extents[2], digits[2]), b.sub(depth, d))
                row_masks, pixel_masks = [], []
                for (mask, (_, run_h, run_w)), run_end in zip(runs, run_ends):
                    row_inside = b.icmp_unsigned("<", b.add(run_h, h), height)
                    w_inside = b.icmp_unsigned("<", b.add(run_w, w), image_width)
                    fitting = b.select(b.and_(w_inside, forward), b.sub(run_end, digits[2]), _const(0))
                    steps = b.select(row_inside, _min(b, steps, fitting), steps)
                    row_masks.append(b.and_(mask, b.select(row_inside, all_lanes, no_lanes)))
                    pixel_masks.append(b.and_(mask, b.select(b.and_(row_inside, w_inside), all_lanes, no_lanes)))
                single = b.icmp_signed("==", steps, _const(0))
                with b.if_else(single) as (one_pixel, along_row):
                    with one_pixel:
                        store_runs(b, pixel_masks, offset, d)
                    with along_row:
                        emit_loop(b, steps, lambda b, t: store_runs(b, row_masks, b.add(offset, b.mul(t, pixel_offset_step)),
                                                                    b.add(d, t)), name="along")
                return b.select(single, _const(1), steps)

            def fast_here(b: ir.IRBuilder, d: ir.Value, digits: list[ir.Value]) -> ir.Value:
                return panel_runs
        _walk_depth(b, depth, first_depth, depth_counter, fast_here, fast_step, gathered)

    emit_loop(b, b.udiv(b.add(rows, _const(width - 1)), _const(width)), over_panel, name="panel")
    b.ret_void()
    return function


def _walk_depth(b: ir.IRBuilder, depth: ir.Value, first_digits: list[ir.Value], counter: _Counter,
                fast_here: Callable[..., ir.Value], fast_step: Callable[..., ir.Value],
                slow_step: Callable[..., None]) -> None:
    """``for d in range(depth)``, with the depth item's digits and its (offset, h, w) carried along:
    where ``fast_here`` holds, ``fast_step`` packs as many depth steps as it returns (at least one,
    never past the last digit's extent), else ``slow_step`` one. Along the last digit (a row of
    pixels, a run of channels) the item moves by that step; it is recomputed from the digits only
    where that digit wraps."""
    entry = b.block
    first_item = counter.item(b, first_digits)
    header = b.append_basic_block("d.header")
    body = b.append_basic_block("d.body")
    fast = b.append_basic_block("d.fast")
    slow = b.append_basic_block("d.slow")
    latch = b.append_basic_block("d.latch")
    exit_block = b.append_basic_block("d.exit")
    b.branch(header)
    b.position_at_end(header)
    d = b.phi(I64)
    d.add_incoming(_const(0), entry)
    digits = [b.phi(I64) for _ in range(3)]
    item = [b.phi(I64) for _ in range(3)]
    for phi, value in zip(digits + item, first_digits + first_item):
        phi.add_incoming(value, entry)
    b.cbranch(b.icmp_signed("<", d, depth), body, exit_block)
    b.position_at_end(body)
    offset, h, w = item
    b.cbranch(fast_here(b, d, digits), fast, slow)
    steps = []
    for block, emit in ((fast, fast_step), (slow, slow_step)):
        b.position_at_end(block)
        if emit is fast_step:
            size = emit(b, d, digits, offset, h, w)
        else:
            emit(b, d, offset, h, w)
            size = _const(1)
        advanced = counter.advance(b, digits, size)
        moved = [b.add(value, b.mul(step, size)) for value, step in zip(item, counter.steps[2])]
        along = b.block
        wrapped = b.append_basic_block("d.wrapped")
        joined = b.append_basic_block("d.joined")
        b.cbranch(b.icmp_unsigned(">=", b.add(digits[2], size), counter.extents[2]), wrapped, joined)
        b.position_at_end(wrapped)
        recomputed = counter.item(b, advanced)
        b.branch(joined)
        b.position_at_end(joined)
        next_item = []
        for kept, fresh in zip(moved, recomputed):
            phi = b.phi(I64)
            phi.add_incoming(kept, along)
            phi.add_incoming(fresh, wrapped)
            next_item.append(phi)
        steps.append((b.block, size, advanced + next_item))
        b.branch(latch)
    b.position_at_end(latch)
    carried = [b.phi(I64) for _ in range(6)]
    step = b.phi(I64)
    for source, size, values in steps:
        for phi, value in zip(carried, values):
            phi.add_incoming(value, source)
        step.add_incoming(size, source)
    d.add_incoming(b.add(d, step), latch)
    for phi, value in zip(digits + item, carried):
        phi.add_incoming(value, latch)
    b.branch(header)
    b.position_at_end(exit_block)


def _store_transposed(b: ir.IRBuilder, rows_in: list[ir.Value], dst: ir.Value, width: int, lanes: int,
                      dtype: np.dtype) -> None:
    """Store ``width`` vectors of ``lanes`` (row r, depth d) transposed: ``dst[d * width + r]``.

    The rows go in square blocks of ``lanes`` (the last padded), each transposed by ``log2(lanes)``
    rounds of two-input shuffles that swap its off-diagonal sub-blocks; a shuffle of two vectors
    is one instruction, where one shuffle of the whole block would make instruction selection
    slow."""
    scalar = register_type(dtype)
    vector_type = ir.VectorType(scalar, lanes)
    i32 = ir.IntType(32)
    for first in range(0, width, lanes):
        block = rows_in[first:first + lanes]
        block = block + [ir.Constant(vector_type, ir.Undefined)] * (lanes - len(block))
        size = lanes // 2
        while size:
            swapped = list(block)
            for i in range(lanes):
                if i & size:
                    continue
                j = i | size
                low = [lane if not lane & size else lanes + (lane ^ size) for lane in range(lanes)]
                high = [lane ^ size if not lane & size else lanes + lane for lane in range(lanes)]
                swapped[i] = b.shuffle_vector(block[i], block[j], ir.Constant(ir.VectorType(i32, lanes), low))
                swapped[j] = b.shuffle_vector(block[i], block[j], ir.Constant(ir.VectorType(i32, lanes), high))
            block = swapped
            size //= 2
        count = min(lanes, width - first)   # rows of this block that exist
        for d, column in enumerate(block):
            if count < lanes:
                column = b.shuffle_vector(column, ir.Constant(vector_type, ir.Undefined),
                                          ir.Constant(ir.VectorType(i32, count), list(range(count))))
            b.store(column, _gep(b, dst, scalar, _const(d * width + first)), align=dtype.itemsize)


def _vector_suffix(dtype: np.dtype) -> str:
    return "f32" if dtype == dtypes.float32 else "f64"


def _emit_micro_kernel(module: ir.Module, dtype: np.dtype, shape: GemmShape, rows_layout: bool = False) -> ir.Function:
    """``C[0:mr, 0:nr] (+)= Ap_panel^T @ Bp_panel`` with an MR x NR register tile; partial tiles
    go through the ``tile`` scratch. The A panel holds element (r, k) at ``k * MR + r`` (depth
    steps), or at ``r * kc + k`` with ``rows_layout`` (rows one after another). Depth step k of
    the B panel starts at ``k * b_stride``: NR in a packed panel, a row of B read in place."""
    name = f"micro_rows_{dtype.name}" if rows_layout else f"micro_{dtype.name}"
    existing = module.globals.get(name)
    if existing is not None:
        return existing
    scalar = register_type(dtype)
    vector_type = ir.VectorType(scalar, shape.vector)
    lanes = shape.nr // shape.vector
    params = [I64, PTR, PTR, PTR, I64, I64, I64, I64, ir.IntType(1), PTR, scalar, I64]
    function = ir.Function(module, ir.FunctionType(ir.VoidType(), params), name=name)
    function.linkage = "internal"
    function.attributes.add("noinline")
    kc, a_panel, b_panel, c_tile, rsc, csc, mr, nr, accumulate, tile, alpha, b_stride = function.args
    for arg in (a_panel, b_panel, c_tile):
        arg.add_attribute("noalias")
    fma = declare_function(module, f"llvm.fma.v{shape.vector}{'f32' if dtype == dtypes.float32 else 'f64'}",
                           vector_type, [vector_type] * 3)
    b = ir.IRBuilder(function.append_basic_block("entry"))
    zero = ir.Constant(vector_type, [0.0] * shape.vector)
    initial = [zero] * (shape.mr * lanes)
    # Fetch the C tile (for writing) while the k loop runs: its rows are far apart and usually
    # no longer in cache, and waiting for them after the loop would stall every tile.
    i32 = ir.IntType(32)
    prefetch = declare_function(module, "llvm.prefetch.p0", ir.VoidType(), [PTR, i32, i32, i32])
    full_rows = _min(b, mr, _const(shape.mr))
    rows_contiguous = b.icmp_signed("==", csc, _const(1))
    prefetch_block = b.append_basic_block("prefetch")
    loop_block = b.append_basic_block("loop")
    b.cbranch(rows_contiguous, prefetch_block, loop_block)
    b.position_at_end(prefetch_block)
    for r in range(shape.mr):
        row = _gep(b, c_tile, scalar, b.mul(_min(b, _const(r), b.sub(full_rows, _const(1))), rsc))
        for line in range(0, shape.nr * dtype.itemsize, 64):
            b.call(prefetch, [_gep(b, row, ir.IntType(8), _const(line)) if line else row,
                              ir.Constant(i32, 1), ir.Constant(i32, 3), ir.Constant(i32, 1)])
    b.branch(loop_block)
    b.position_at_end(loop_block)

    def multiply_add(b: ir.IRBuilder, kk: ir.Value, acc: list[ir.Value]) -> list[ir.Value]:
        b_row = _gep(b, b_panel, scalar, b.mul(kk, b_stride))
        b_vectors = [b.load(_gep(b, b_row, scalar, _const(v * shape.vector)), typ=vector_type,
                            align=dtype.itemsize) for v in range(lanes)]
        a_row = _gep(b, a_panel, scalar, kk if rows_layout else b.mul(kk, _const(shape.mr)))
        out = []
        for r in range(shape.mr):
            a_value = b.load(_gep(b, a_row, scalar, b.mul(_const(r), kc) if rows_layout else _const(r)), typ=scalar)
            splat = b.insert_element(ir.Constant(vector_type, ir.Undefined), a_value, _const(0))
            splat = b.shuffle_vector(splat, ir.Constant(vector_type, ir.Undefined),
                                     ir.Constant(ir.VectorType(ir.IntType(32), shape.vector), [0] * shape.vector))
            for v in range(lanes):
                out.append(b.call(fma, [splat, b_vectors[v], acc[r * lanes + v]]))
        return out

    acc = emit_carried_loop(b, kc, multiply_add, initial, name="k")
    # Scale by alpha (1 for a plain product: an exact multiply).
    splat = b.insert_element(ir.Constant(vector_type, ir.Undefined), alpha, _const(0))
    splat = b.shuffle_vector(splat, ir.Constant(vector_type, ir.Undefined),
                             ir.Constant(ir.VectorType(ir.IntType(32), shape.vector), [0] * shape.vector))
    acc = [b.fmul(value, splat) for value in acc]

    full = b.and_(b.and_(b.icmp_signed("==", mr, _const(shape.mr)), b.icmp_signed("==", nr, _const(shape.nr))),
                  rows_contiguous)
    full_block = b.append_basic_block("full")
    edge_block = b.append_basic_block("edge")
    done = b.append_basic_block("done")
    b.cbranch(full, full_block, edge_block)

    b.position_at_end(full_block)
    add_block = b.append_basic_block("add")
    store_block = b.append_basic_block("store")
    b.cbranch(accumulate, add_block, store_block)
    for block, adding in ((add_block, True), (store_block, False)):
        b.position_at_end(block)  # C is only read when the product is added to it
        for r in range(shape.mr):
            row = _gep(b, c_tile, scalar, b.mul(_const(r), rsc))
            for v in range(lanes):
                pointer = _gep(b, row, scalar, _const(v * shape.vector))
                value = acc[r * lanes + v]
                if adding:
                    value = b.fadd(b.load(pointer, typ=vector_type, align=dtype.itemsize), value)
                b.store(value, pointer, align=dtype.itemsize)
        b.branch(done)

    b.position_at_end(edge_block)
    for r in range(shape.mr):
        for v in range(lanes):
            b.store(acc[r * lanes + v], _gep(b, tile, scalar, _const(r * shape.nr + v * shape.vector)),
                    align=dtype.itemsize)

    def edge_row(b: ir.IRBuilder, r: ir.Value) -> None:
        def edge_col(b: ir.IRBuilder, j: ir.Value) -> None:
            value = b.load(_gep(b, tile, scalar, b.add(b.mul(r, _const(shape.nr)), j)), typ=scalar)
            pointer = _gep(b, c_tile, scalar, b.add(b.mul(r, rsc), b.mul(j, csc)))
            old = b.load(pointer, typ=scalar)
            b.store(b.select(accumulate, b.fadd(old, value), value), pointer)
        emit_loop(b, nr, edge_col, name="ej")
    emit_loop(b, mr, edge_row, name="ei")
    b.branch(done)
    b.position_at_end(done)
    b.ret_void()
    return function


# -- the process-wide GEMM library ---------------------------------------------------------------

_GEMM_ARGS = 17  # M, N, K, K0, A, rsa, csa, B, rsb, csb, C, rsc, csc, Ap, Bp, alpha (double bits), beta
LIBRARY_SYMBOL = "graphgrad_gemm_{dtype}"
# Multiply-adds below which one GEMM is not split across threads (waking the pool would dominate).
# Parts are claimed by whichever thread is free, so a split never waits for a sleeping worker: on
# two Zen 3 cores, a run of n^3 products for n = 64 / 80 / 112 / 127 took 14.1 / 20.2 / 40.6 /
# 60.0 us on one thread and 12.3 / 16.3 / 27.5 / 37.9 split (the run itself about 10 us); the
# MLP's products with its 10 classes (128 x 10 x 512 and its gradients) 0.078 -> 0.046 ms in all.
MIN_PARALLEL_WORK = 1 << 17


def library_signature() -> ir.FunctionType:
    """``void graphgrad_gemm_<dtype>(threads, M, N, K, A, rsa, csa, B, rsb, csb, C, rsc, alpha,
    accumulate)``: C = alpha * A @ B, or C += alpha * A @ B when accumulate is 1."""
    return ir.FunctionType(ir.VoidType(), [I64, I64, I64, I64, PTR, I64, I64, PTR, I64, I64, PTR, I64,
                                           ir.DoubleType(), I64])


def _workspace_global(module: ir.Module, dtype: np.dtype, elements: int) -> ir.GlobalVariable:
    """The library's own packing workspaces, one block of ``elements`` (module data)."""
    array_type = ir.ArrayType(register_type(dtype), elements)
    return _module_global(module, f"gemm_{dtype.name}_workspaces", array_type, ir.Constant(array_type, None))


# Blocks of packing workspace kept for calls made while the module's own block is taken (GEMMs
# from several Python threads at once): allocated at first use and kept, since a fresh block of
# megabytes per call would be page-faulted in again each time.
KEPT_WORKSPACES = 8


def _take_workspaces(b: ir.IRBuilder, dtype: np.dtype, elements: int) -> tuple[ir.Value, ir.Value]:
    """Packing workspaces for one call, so GEMMs called from several threads at once never share
    one: the module's own block when no other call holds it (a compare-and-swap on its busy flag),
    else the first free one of ``KEPT_WORKSPACES`` blocks allocated on first use, else a heap block
    for this call only. Returns (base pointer, slot): slot 0 for the module's block, 1 + i for kept
    block i, -1 for a block to free."""
    module = b.module
    i32 = ir.IntType(32)
    static = _workspace_global(module, dtype, elements)
    busy = _module_global(module, f"gemm_{dtype.name}_workspaces_busy", i32, ir.Constant(i32, 0))
    kept_type = ir.ArrayType(PTR, KEPT_WORKSPACES)
    kept = _module_global(module, f"gemm_{dtype.name}_kept", kept_type, ir.Constant(kept_type, None))
    kept_busy_type = ir.ArrayType(i32, KEPT_WORKSPACES)
    kept_busy = _module_global(module, f"gemm_{dtype.name}_kept_busy", kept_busy_type,
                               ir.Constant(kept_busy_type, None))
    aligned_alloc = declare_function(module, "aligned_alloc", PTR, [I64, I64])
    sched_yield = declare_function(module, "sched_yield", i32, [])
    nbytes = _const(-(-elements * dtype.itemsize // 64) * 64)

    def try_take(b: ir.IRBuilder, flag: ir.Value) -> ir.Value:
        exchange = b.cmpxchg(flag, ir.Constant(i32, 0), ir.Constant(i32, 1), "acquire", "monotonic")
        return b.extract_value(exchange, 1)

    entry = b.block
    scan = b.append_basic_block("workspaces.scan")
    try_slot = b.append_basic_block("workspaces.try")
    got_slot = b.append_basic_block("workspaces.kept")
    next_slot = b.append_basic_block("workspaces.next")
    heap = b.append_basic_block("workspaces.heap")
    wait = b.append_basic_block("workspaces.wait")
    chosen = b.append_basic_block("workspaces.chosen")
    b.cbranch(try_take(b, busy), chosen, scan)

    b.position_at_end(scan)
    slot = b.phi(I64)
    slot.add_incoming(_const(0), entry)
    b.cbranch(b.icmp_signed("<", slot, _const(KEPT_WORKSPACES)), try_slot, heap)
    b.position_at_end(try_slot)
    flag = b.gep(kept_busy, [ir.Constant(i32, 0), slot], inbounds=True)
    b.cbranch(try_take(b, flag), got_slot, next_slot)
    b.position_at_end(next_slot)
    slot.add_incoming(b.add(slot, _const(1)), next_slot)
    b.branch(scan)

    b.position_at_end(got_slot)
    kept_number = b.add(slot, _const(1))
    pointer_slot = b.gep(kept, [ir.Constant(i32, 0), slot], inbounds=True)
    block = b.load(pointer_slot, typ=PTR)
    with b.if_then(b.icmp_unsigned("==", b.ptrtoint(block, I64), _const(0))):
        b.store(b.call(aligned_alloc, [_const(64), nbytes]), pointer_slot)
    kept_block = b.load(pointer_slot, typ=PTR)
    allocated = b.icmp_unsigned("!=", b.ptrtoint(kept_block, I64), _const(0))
    with b.if_then(b.not_(allocated)):  # out of memory: give the slot back
        b.store_atomic(ir.Constant(i32, 0), flag, "release", 4)
    kept_done = b.block
    b.cbranch(allocated, chosen, heap)

    b.position_at_end(heap)
    transient = b.call(aligned_alloc, [_const(64), nbytes])
    b.cbranch(b.icmp_unsigned("==", b.ptrtoint(transient, I64), _const(0)), wait, chosen)
    b.position_at_end(wait)  # out of memory: wait for the module's block instead
    b.call(sched_yield, [])
    b.cbranch(try_take(b, busy), chosen, wait)

    b.position_at_end(chosen)
    base, which = b.phi(PTR), b.phi(I64)
    for source, pointer, number in ((entry, static.bitcast(PTR), _const(0)), (wait, static.bitcast(PTR), _const(0)),
                                    (kept_done, kept_block, kept_number), (heap, transient, _const(-1))):
        base.add_incoming(pointer, source)
        which.add_incoming(number, source)
    return base, which


def _module_global(module: ir.Module, name: str, type_: ir.Type, value: ir.Constant) -> ir.GlobalVariable:
    """The module's internal global ``name`` (made once), on a cache line of its own."""
    existing = module.globals.get(name)
    if existing is not None:
        return existing
    variable = ir.GlobalVariable(module, type_, name=name)
    variable.linkage = "internal"
    variable.initializer = value
    variable.align = 64
    return variable


def _give_back_workspaces(b: ir.IRBuilder, dtype: np.dtype, base: ir.Value, slot: ir.Value) -> None:
    i32 = ir.IntType(32)
    free = declare_function(b.module, "free", ir.VoidType(), [PTR])
    with b.if_else(b.icmp_signed(">=", slot, _const(0))) as (kept_block, heap_block):
        with kept_block:
            busy = b.module.globals[f"gemm_{dtype.name}_workspaces_busy"]
            kept_busy = b.module.globals[f"gemm_{dtype.name}_kept_busy"]
            kept_flag = b.gep(kept_busy, [ir.Constant(i32, 0), b.sub(slot, _const(1))], inbounds=True)
            flag = b.select(b.icmp_signed("==", slot, _const(0)), busy, kept_flag)
            b.store_atomic(ir.Constant(i32, 0), flag, "release", 4)
        with heap_block:
            b.call(free, [base])


# A blocks (of MC rows) per thread from which a product shares its packed B blocks between threads.
SHARED_MIN_BLOCKS = 4
# Parts per thread of a product split by rows: a thread that is descheduled (another pool spinning
# on its core) holds up only a small share, since the others claim the parts it does not get to.
ROW_PARTS_PER_THREAD = 4


@dataclass(frozen=True)
class _Workspaces:
    """One call's packing memory: an A block per row part, then a B block per thread."""

    base: ir.Value
    slot: ir.Value         # i64: which block (``_take_workspaces``)
    dtype: np.dtype
    max_threads: int

    @classmethod
    def take(cls, b: ir.IRBuilder, dtype: np.dtype, max_threads: int) -> "_Workspaces":
        size_a, size_b = packing_sizes(gemm_shape(dtype))
        base, slot = _take_workspaces(b, dtype, max_threads * (ROW_PARTS_PER_THREAD * size_a + size_b))
        return cls(base, slot, dtype, max_threads)

    def a(self, b: ir.IRBuilder, part: ir.Value) -> ir.Value:
        size_a = packing_sizes(gemm_shape(self.dtype))[0]
        return _gep(b, self.base, register_type(self.dtype), b.mul(part, _const(size_a)))

    def b(self, b: ir.IRBuilder, thread: ir.Value) -> ir.Value:
        size_a, size_b = packing_sizes(gemm_shape(self.dtype))
        first = self.max_threads * ROW_PARTS_PER_THREAD * size_a
        return _gep(b, self.base, register_type(self.dtype), b.add(b.mul(thread, _const(size_b)), _const(first)))

    def give_back(self, b: ir.IRBuilder) -> None:
        _give_back_workspaces(b, self.dtype, self.base, self.slot)


def _row_parts(b: ir.IRBuilder, parts: ir.Value, m: ir.Value, shape: GemmShape) -> ir.Value:
    """How many parts a product of ``m`` rows is split into for ``parts`` threads: a few per
    thread, each at least one MR panel (1 when it runs on one thread)."""
    wanted = b.mul(parts, _const(ROW_PARTS_PER_THREAD))
    panels = _maximum(b, _blocks(b, m, shape.mr), _const(1))
    return b.select(b.icmp_signed("<=", parts, _const(1)), _const(1), _min(b, wanted, panels))


def _emit_task(module: ir.Module, dtype: np.dtype, gemm: ir.Function) -> ir.Function:
    """``void task(ptr slots, i64 part)``: run the GEMM whose ``_GEMM_ARGS`` arguments (as i64) are at
    ``slots[part * _GEMM_ARGS]`` — one part of a split GEMM, run by the worker pool."""
    function = ir.Function(module, ir.FunctionType(ir.VoidType(), [PTR, I64]), name=f"gemm_task_{dtype.name}")
    function.linkage = "internal"
    slots, part = function.args
    b = ir.IRBuilder(function.append_basic_block("entry"))
    base = b.mul(part, _const(_GEMM_ARGS))
    values = [b.load(_gep(b, slots, I64, b.add(base, _const(i))), typ=I64) for i in range(_GEMM_ARGS)]
    b.call(gemm, [v if param == I64 else b.inttoptr(v, PTR) for v, param in zip(values, gemm.function_type.args)])
    b.ret_void()
    return function


def emit_library_gemm(module: ir.Module, dtype: np.dtype, max_threads: int) -> ir.Function:
    """The exported GEMM, run by the worker pool (``graphgrad_parallel``, see threads.py) in
    ``threads`` parts. When every part gets at least one A block of rows, the parts first pack one
    shared B block together, then each multiplies its own rows (per K and N block: two pool calls).
    Otherwise N (or M, for tall matrices) is split into independent GEMMs with their own buffers."""
    gemm = emit_gemm(module, dtype)
    shape = gemm_shape(dtype)
    scalar = register_type(dtype)
    task = _emit_task(module, dtype, gemm)
    parallel = declare_function(module, PARALLEL_SYMBOL, ir.VoidType(), [PTR, PTR, I64])
    function = ir.Function(module, library_signature(), name=LIBRARY_SYMBOL.format(dtype=dtype.name))
    threads, m, n, k, a, rsa, csa, bm, rsb, csb, c, rsc, alpha, beta = function.args
    b = ir.IRBuilder(function.append_basic_block("entry"))
    slots = b.alloca(I64, size=_GEMM_ARGS * max_threads)
    # Part t of a split packs into A block t and B block t of this call's workspaces.
    workspaces = _Workspaces.take(b, dtype, max_threads)

    # A product narrower than the register tile (e.g. N = 10 classes) is computed transposed,
    # C^T = B^T A^T, so that its long side runs along the tile's wide NR columns.
    swap = b.and_(b.icmp_signed("<", n, _const(shape.nr)), b.icmp_signed(">", m, n))
    m, n = b.select(swap, n, m), b.select(swap, m, n)
    a, bm = b.select(swap, bm, a), b.select(swap, a, bm)
    rsa, csa, rsb, csb = (b.select(swap, csb, rsa), b.select(swap, rsb, csa),
                          b.select(swap, csa, rsb), b.select(swap, rsa, csb))
    rsc, csc = b.select(swap, _const(1), rsc), b.select(swap, rsc, _const(1))
    wanted = _min(b, b.select(b.icmp_signed("<", threads, _const(1)), _const(1), threads), _const(max_threads))
    small = b.icmp_signed("<", b.mul(b.mul(m, n), k), _const(MIN_PARALLEL_WORK))
    parts = b.select(small, _const(1), wanted)
    # Split columns unless the matrix is much taller than wide: each part then packs only its own
    # columns of B (the larger block), and only the smaller A blocks are packed by every part.
    by_rows = b.icmp_signed(">", m, b.mul(n, _const(4)))
    extent = b.select(by_rows, m, n)
    granule = b.select(by_rows, _const(shape.mr), _const(shape.nr))
    per_part = b.udiv(b.add(extent, b.sub(parts, _const(1))), parts)
    per_part = b.mul(b.udiv(b.add(per_part, b.sub(granule, _const(1))), granule), granule)

    def store_part_arguments(b: ir.IRBuilder, t: ir.Value) -> None:
        start = _min(b, b.mul(per_part, t), extent)
        count = b.sub(_min(b, b.add(start, per_part), extent), start)
        arguments = [b.select(by_rows, count, m), b.select(by_rows, n, count), k, _const(0),
                     _gep(b, a, scalar, b.select(by_rows, b.mul(start, rsa), _const(0))), rsa, csa,
                     _gep(b, bm, scalar, b.select(by_rows, _const(0), b.mul(start, csb))), rsb, csb,
                     _gep(b, c, scalar, b.mul(start, b.select(by_rows, rsc, csc))), rsc, csc,
                     workspaces.a(b, t), workspaces.b(b, t), b.bitcast(alpha, I64), beta]
        base = b.mul(t, _const(_GEMM_ARGS))
        for i, value in enumerate(arguments):
            b.store(value if value.type == I64 else b.ptrtoint(value, I64),
                    _gep(b, slots, I64, b.add(base, _const(i))))

    # Tall enough for every thread to own a few A blocks: the threads share one packed B block
    # (each packs a slice of it) and split the rows, so nothing is packed twice. Below that (up to
    # n = 512 or so) the second pool call and the finer parts cost more than packing A twice.
    shared = b.and_(b.icmp_signed(">", parts, _const(1)),
                    b.and_(b.icmp_signed(">=", m, b.mul(parts, _const(SHARED_MIN_BLOCKS * shape.mc))),
                           b.icmp_signed(">", k, _const(0))))
    shared_block = b.append_basic_block("shared_b")
    split_block = b.append_basic_block("split")
    finish = b.append_basic_block("finish")
    b.cbranch(shared, shared_block, split_block)

    b.position_at_end(shared_block)
    _emit_shared_product(b, dtype, shape, _strided_left(dtype, shape), (a, rsa, csa), bm, rsb, csb, c, rsc, csc, m, n,
                         k, alpha, beta, parts, workspaces)
    b.branch(finish)

    b.position_at_end(split_block)
    emit_loop(b, parts, store_part_arguments, name="part")
    b.call(parallel, [task, slots, parts])
    b.branch(finish)

    b.position_at_end(finish)
    workspaces.give_back(b)
    b.ret_void()
    return function


WINDOW_LIBRARY_SYMBOL = "graphgrad_gemm_window_{dtype}"


def window_product_pays(rows: int, columns: int, depth: int, dtype: np.dtype, tap_channels: int | None = None
                        ) -> bool:
    """Whether a window product beats the loop nest: it packs A to reuse it across columns and
    keeps a register tile busy, so a product of few columns (an input gradient of one channel),
    little depth (a first layer's 3x3x1 taps) or fewer rows than a tile loses to the plain loops.
    ``tap_channels``: the image's channels when A's rows are taps (a filter gradient). With fewer
    than a register tile's rows, packing gathers each panel element by element, and the loop nest
    wins: on a Zen 3 (AVX2, MR 6), batch 64 of 28x28 images, 32 filters, 1 to 4 channels: 73-78
    GFLOP/s in the loops against 26-36 through the library (8 channels, packed in runs: 92 against 79)."""
    shape = gemm_shape(dtype)
    if tap_channels is not None and tap_channels < shape.mr:
        return False
    return rows >= shape.mr and 2 * columns >= shape.nr and depth >= shape.nr


def window_library_signature() -> ir.FunctionType:
    """``void graphgrad_gemm_window_<dtype>(threads, geometry, M, N, K, image, B, rsb, csb, C, rsc,
    alpha, accumulate)``: a window product (``kernel_ir.WindowMatmul``; ``geometry`` holds the
    ``WINDOW_FIELDS``), C = alpha * A @ B, or C += alpha * A @ B when accumulate is 1."""
    return ir.FunctionType(ir.VoidType(), [I64, PTR, I64, I64, I64, PTR, PTR, I64, I64, PTR, I64,
                                           ir.DoubleType(), I64])


def emit_library_window_gemm(module: ir.Module, dtype: np.dtype, max_threads: int) -> ir.Function:
    """The exported window product. Tall products: the threads pack each B block together, then
    multiply the rows in a few parts per thread, each packing its own rows of A from the image.
    Short and deep ones (a filter gradient: taps x channels, summed over every pixel) are split
    along the depth instead (``_emit_depth_split``): no synchronisation per block."""
    shape = gemm_shape(dtype)
    lefts = [_window_left(dtype, shape, pixel_rows=rows) for rows in (True, False)]
    function = ir.Function(module, window_library_signature(), name=WINDOW_LIBRARY_SYMBOL.format(dtype=dtype.name))
    threads, geometry, m, n, k, image, bm, rsb, csb, c, rsc, alpha, beta = function.args
    b = ir.IRBuilder(function.append_basic_block("entry"))
    workspaces = _Workspaces.take(b, dtype, max_threads)
    wanted = _min(b, b.select(b.icmp_signed("<", threads, _const(1)), _const(1), threads), _const(max_threads))
    small = b.icmp_signed("<", b.mul(b.mul(m, n), k), _const(MIN_PARALLEL_WORK))
    parts = b.select(small, _const(1), wanted)
    pixel_rows = b.icmp_signed("!=", b.load(geometry, typ=I64), _const(0))   # WINDOW_FIELDS[0]

    def choose(functions: Sequence[ir.Function]) -> ir.Value:
        return b.select(pixel_rows, functions[0], functions[1])

    def shared(b: ir.IRBuilder) -> None:
        _emit_shared_product(b, dtype, shape, lefts[0], (image, geometry), bm, rsb, csb, c, rsc, _const(1), m, n,
                             k, alpha, beta, parts, workspaces,
                             macro_task=choose([_emit_shared_macro_task(module, dtype, shape, left) for left in lefts]))
    deep = b.and_(b.icmp_signed("<", m, b.mul(parts, _const(SHARED_MIN_BLOCKS * shape.mc))),
                  b.icmp_signed(">=", k, b.mul(parts, _const(DEPTH_SPLIT_MIN_BLOCKS * shape.kc))))
    _emit_depth_split(b, dtype, shape, b.and_(deep, b.icmp_signed(">", parts, _const(1))),
                      choose([_emit_depth_task(module, dtype, shape, left) for left in lefts]), (image, geometry),
                      bm, rsb, csb, c, rsc, m, n, k, alpha, beta, parts, workspaces, otherwise=shared)
    workspaces.give_back(b)
    b.ret_void()
    return function


# Depth blocks per thread from which a product too short to share B blocks is split along K.
DEPTH_SPLIT_MIN_BLOCKS = 4
_DEPTH_FIELDS = ("a", "rsa", "b", "rsb", "csb", "c", "rsc", "m", "n", "k", "parts", "alpha", "beta", "ap", "bp",
                 "partial")


def _emit_depth_split(b: ir.IRBuilder, dtype: np.dtype, shape: GemmShape, wanted: ir.Value, task: ir.Value,
                      left_params: Sequence[ir.Value], bm: ir.Value, rsb: ir.Value, csb: ir.Value, c: ir.Value,
                      rsc: ir.Value, m: ir.Value, n: ir.Value, k: ir.Value, alpha: ir.Value, beta: ir.Value,
                      parts: ir.Value, workspaces: _Workspaces,
                      otherwise: Callable[[ir.IRBuilder], None]) -> None:
    """Where ``wanted``: each of ``parts`` threads multiplies one range of the depth with its own
    packing blocks, the first into C, the others into their own zeroed M x N sums, which are then
    added to C (one pool call). ``otherwise`` (or when those sums cannot be allocated) emits the
    other way to run the product."""
    module = b.module
    scalar = register_type(dtype)
    aligned_alloc = declare_function(module, "aligned_alloc", PTR, [I64, I64])
    free = declare_function(module, "free", ir.VoidType(), [PTR])
    parallel = declare_function(module, PARALLEL_SYMBOL, ir.VoidType(), [PTR, PTR, I64])
    split_block = b.append_basic_block("depth_split")
    other_block = b.append_basic_block("depth_split.not")
    done = b.append_basic_block("depth_split.done")
    entry_block = b.block
    with b.if_then(wanted):
        size = b.mul(b.mul(b.mul(b.sub(parts, _const(1)), m), n), _const(dtype.itemsize))
        allocated = b.call(aligned_alloc, [_const(64), b.mul(_blocks(b, size, 64), _const(64))])
        allocated_block = b.block
    partial = b.phi(PTR)
    partial.add_incoming(allocated, allocated_block)
    partial.add_incoming(ir.Constant(PTR, None), entry_block)
    b.cbranch(b.icmp_unsigned("!=", b.ptrtoint(partial, I64), _const(0)), split_block, other_block)

    b.position_at_end(other_block)
    otherwise(b)
    b.branch(done)

    b.position_at_end(split_block)
    context = b.alloca(I64, size=len(_DEPTH_FIELDS))

    def put(field: str, value: ir.Value) -> None:
        value = value if value.type == I64 else b.ptrtoint(value, I64) if value.type == PTR else b.bitcast(value, I64)
        b.store(value, _gep(b, context, I64, _const(_DEPTH_FIELDS.index(field))))
    for field, value in zip(("a", "rsa"), left_params):
        put(field, value)
    for field, value in (("b", bm), ("rsb", rsb), ("csb", csb), ("c", c), ("rsc", rsc), ("m", m), ("n", n),
                         ("k", k), ("parts", parts), ("alpha", alpha), ("beta", beta),
                         ("ap", workspaces.a(b, _const(0))), ("bp", workspaces.b(b, _const(0))),
                         ("partial", partial)):
        put(field, value)
    b.call(parallel, [task, context, parts])

    def add_part(b: ir.IRBuilder, extra: ir.Value) -> None:
        source = _gep(b, partial, scalar, b.mul(b.mul(extra, m), n))

        def add_row(b: ir.IRBuilder, i: ir.Value) -> None:
            _emit_add_to(b, dtype, shape, _gep(b, c, scalar, b.mul(i, rsc)), _gep(b, source, scalar, b.mul(i, n)), n)
        emit_loop(b, m, add_row, name="sum_row")
    emit_loop(b, b.sub(parts, _const(1)), add_part, name="sum_part")
    b.call(free, [partial])
    b.branch(done)
    b.position_at_end(done)


def _emit_add_to(b: ir.IRBuilder, dtype: np.dtype, shape: GemmShape, target: ir.Value, source: ir.Value,
                 count: ir.Value) -> None:
    """``target[j] += source[j]`` for ``j < count``, a vector at a time (the library is built
    without IR passes, so nothing vectorises it later)."""
    scalar = register_type(dtype)
    vector_type = ir.VectorType(scalar, shape.vector)
    chunks = b.udiv(count, _const(shape.vector))

    def add_chunk(b: ir.IRBuilder, chunk: ir.Value) -> None:
        at = b.mul(chunk, _const(shape.vector))
        pointers = [_gep(b, base, scalar, at) for base in (target, source)]
        total = b.fadd(*(b.load(pointer, typ=vector_type, align=dtype.itemsize) for pointer in pointers))
        b.store(total, pointers[0], align=dtype.itemsize)
    emit_loop(b, chunks, add_chunk, name="add_chunk")

    def add_one(b: ir.IRBuilder, index: ir.Value) -> None:
        at = b.add(b.mul(chunks, _const(shape.vector)), index)
        pointers = [_gep(b, base, scalar, at) for base in (target, source)]
        b.store(b.fadd(*(b.load(pointer, typ=scalar) for pointer in pointers)), pointers[0])
    emit_loop(b, b.sub(count, b.mul(chunks, _const(shape.vector))), add_one, name="add_one")


def _emit_depth_task(module: ir.Module, dtype: np.dtype, shape: GemmShape, left: _LeftOperand) -> ir.Function:
    """``task(context, part)`` of ``_emit_depth_split``: the product over part's range of the depth,
    with part's own packing blocks, into C (part 0) or into part's zeroed sum."""
    name = f"gemm_depth{left.suffix}_{dtype.name}"
    if name in module.globals:
        return module.globals[name]
    scalar = register_type(dtype)
    gemm = emit_gemm(module, dtype, left)
    function = ir.Function(module, ir.FunctionType(ir.VoidType(), [PTR, I64]), name=name)
    function.linkage = "internal"
    context, part = function.args
    b = ir.IRBuilder(function.append_basic_block("entry"))

    def get(field: str, as_pointer: bool = False) -> ir.Value:
        value = b.load(_gep(b, context, I64, _const(_DEPTH_FIELDS.index(field))), typ=I64)
        return b.inttoptr(value, PTR) if as_pointer else value
    m, n, k, parts = get("m"), get("n"), get("k"), get("parts")
    per_part = b.udiv(b.add(k, b.sub(parts, _const(1))), parts)
    start = _min(b, b.mul(part, per_part), k)
    count = b.sub(_min(b, b.add(start, per_part), k), start)
    first = b.icmp_signed("==", part, _const(0))
    own_sum = _gep(b, get("partial", True), scalar, b.mul(b.mul(b.sub(part, _const(1)), m), n))
    c = b.select(first, get("c", True), own_sum)
    rsc = b.select(first, get("rsc"), n)
    beta = b.select(first, get("beta"), _const(0))
    size_a, size_b = packing_sizes(shape)
    ap = _gep(b, get("ap", True), scalar, b.mul(part, _const(size_a)))
    bp = _gep(b, get("bp", True), scalar, b.mul(part, _const(size_b)))
    left_params = [get(field, as_pointer=(kind == PTR)) for field, kind in zip(("a", "rsa"), left.params)]
    b.call(gemm, [m, n, count, start, *left_params, get("b", True), get("rsb"), get("csb"), c, rsc, _const(1),
                  ap, bp, get("alpha"), beta])
    b.ret_void()
    return function


# Every symbol the library exports (each formatted with the dtype's name).
LIBRARY_SYMBOLS = (LIBRARY_SYMBOL, WINDOW_LIBRARY_SYMBOL)

_SHARED_FIELDS = ("a", "rsa", "csa", "b", "rsb", "csb", "c", "rsc", "csc", "m", "jc", "nc", "pc", "kc", "bp",
                  "ap", "accumulate", "alpha", "row_parts")


def _emit_shared_product(b: ir.IRBuilder, dtype: np.dtype, shape: GemmShape, left: _LeftOperand,
                         left_params: Sequence[ir.Value], bm: ir.Value, rsb: ir.Value, csb: ir.Value, c: ir.Value,
                         rsc: ir.Value, csc: ir.Value, m: ir.Value, n: ir.Value, k: ir.Value, alpha: ir.Value,
                         beta: ir.Value, parts: ir.Value, workspaces: _Workspaces,
                         macro_task: ir.Value | None = None) -> None:
    """A product whose threads share each packed B block: per K and N block, the ``parts`` threads
    pack its slices together, then multiply the rows, each step in ``_row_parts`` parts claimed as
    they come (two pool calls). ``macro_task`` replaces the row task (for a choice made at run time)."""
    module = b.module
    parallel = declare_function(module, PARALLEL_SYMBOL, ir.VoidType(), [PTR, PTR, I64])
    pack_task = _emit_shared_pack_task(module, dtype, shape)
    macro_task = macro_task if macro_task is not None else _emit_shared_macro_task(module, dtype, shape, left)
    context = b.alloca(I64, size=len(_SHARED_FIELDS))
    row_parts = _row_parts(b, parts, m, shape)

    def put(b: ir.IRBuilder, field: str, value: ir.Value) -> None:
        value = value if value.type == I64 else (b.ptrtoint(value, I64) if value.type == PTR else b.zext(value, I64))
        b.store(value, _gep(b, context, I64, _const(_SHARED_FIELDS.index(field))))

    for field, value in zip(("a", "rsa", "csa"), left_params):
        put(b, field, value)
    for field, value in (("b", bm), ("rsb", rsb), ("csb", csb), ("c", c), ("rsc", rsc), ("csc", csc), ("m", m),
                         ("bp", workspaces.b(b, _const(0))), ("ap", workspaces.a(b, _const(0))),
                         ("alpha", b.bitcast(alpha, I64)), ("row_parts", row_parts)):
        put(b, field, value)

    def multiply_together(b: ir.IRBuilder, block: _Block) -> None:
        for field, value in (("jc", block.jc), ("nc", block.nc), ("pc", block.pc), ("kc", block.kc),
                             ("accumulate", block.accumulate)):
            put(b, field, value)
        b.call(parallel, [pack_task, context, row_parts])     # returns when every slice is packed
        b.call(parallel, [macro_task, context, row_parts])
    _emit_block_loops(b, shape, n, k, b.icmp_signed("!=", beta, _const(0)), multiply_together)


def _new_task(module: ir.Module, name: str) -> tuple[ir.Function, ir.IRBuilder, Callable[..., ir.Value]]:
    """A pool task ``void name(ptr context, i64 part)``, its builder, and a reader of its context."""
    function = ir.Function(module, ir.FunctionType(ir.VoidType(), [PTR, I64]), name=name)
    function.linkage = "internal"
    b = ir.IRBuilder(function.append_basic_block("entry"))
    context = function.args[0]

    def get(field: str, as_pointer: bool = False) -> ir.Value:
        value = b.load(_gep(b, context, I64, _const(_SHARED_FIELDS.index(field))), typ=I64)
        return b.inttoptr(value, PTR) if as_pointer else value
    return function, b, get


def _emit_shared_pack_task(module: ir.Module, dtype: np.dtype, shape: GemmShape) -> ir.Function:
    """``pack(context, part)``: part's slice of the panels of the shared B block (of ``row_parts``)."""
    name = f"gemm_shared_pack_{dtype.name}"
    if name in module.globals:
        return module.globals[name]
    scalar = register_type(dtype)
    pack_b = _emit_pack(module, dtype, "pack_b", shape.nr)
    function, b, get = _new_task(module, name)
    part = function.args[1]
    parts, nc, kc, bp = get("row_parts"), get("nc"), get("kc"), get("bp", True)
    work = b.append_basic_block("work")
    done = b.append_basic_block("done")
    panels = _blocks(b, nc, shape.nr)
    per_part = b.udiv(b.add(panels, b.sub(parts, _const(1))), parts)
    first = b.mul(part, per_part)
    b.cbranch(b.icmp_signed("<", first, panels), work, done)
    b.position_at_end(work)
    column = b.mul(first, _const(shape.nr))
    columns = _min(b, b.mul(per_part, _const(shape.nr)), b.sub(nc, column))
    rsb, csb = get("rsb"), get("csb")
    source = _gep(b, get("b", True), scalar, b.add(b.mul(get("pc"), rsb), b.mul(b.add(get("jc"), column), csb)))
    b.call(pack_b, [source, csb, rsb, columns, kc, _gep(b, bp, scalar, b.mul(column, kc))])
    b.branch(done)
    b.position_at_end(done)
    b.ret_void()
    return function


def _emit_shared_macro_task(module: ir.Module, dtype: np.dtype, shape: GemmShape, left: _LeftOperand) -> ir.Function:
    """``macro(context, part)``: part's rows of the product with the packed B block, packing its
    own A blocks (``left`` says how A is read)."""
    name = f"gemm_shared_macro{left.suffix}_{dtype.name}"
    if name in module.globals:
        return module.globals[name]
    scalar = register_type(dtype)
    macro = _emit_macro(module, dtype, shape, left)
    function, b, get = _new_task(module, name)
    part = function.args[1]
    work = b.append_basic_block("work")
    done = b.append_basic_block("done")
    m, parts = get("m"), get("row_parts")
    # Whole MR panels, as evenly as they go (784 rows in 8 parts: 8 or 9 panels each, where parts
    # of 9 panels would leave the last one 28 rows and one thread 10% more work).
    panels = _blocks(b, m, shape.mr)
    start = b.mul(b.udiv(b.mul(part, panels), parts), _const(shape.mr))
    stop = _min(b, b.mul(b.udiv(b.mul(b.add(part, _const(1)), panels), parts), _const(shape.mr)), m)
    b.cbranch(b.icmp_signed("<", start, stop), work, done)
    b.position_at_end(work)
    count = b.sub(stop, start)
    alpha = b.bitcast(get("alpha"), ir.DoubleType())
    alpha = alpha if scalar == ir.DoubleType() else b.fptrunc(alpha, scalar)
    ap = _gep(b, get("ap", True), scalar, b.mul(part, _const(packing_sizes(shape)[0])))
    accumulate = b.icmp_signed("!=", get("accumulate"), _const(0))
    left_params = [get(field, as_pointer=(kind == PTR)) for field, kind in zip(("a", "rsa", "csa"), left.params)]
    b.call(macro, [start, count, get("jc"), get("nc"), get("pc"), get("kc"), *left_params,
                   get("c", True), get("rsc"), get("csc"), ap, get("bp", True), accumulate, alpha,
                   _const(shape.nr), get("kc")])
    b.branch(done)
    b.position_at_end(done)
    b.ret_void()
    return function


def build_library(dtype_name: str, max_threads: int) -> ir.Module:
    """The module with ``graphgrad_gemm_<dtype>``, compiled once per process by the runtime (or
    loaded from the compile cache); compiled steps call it by name."""
    module = ir.Module(name=f"graphgrad_gemm_{dtype_name}")
    emit_library_gemm(module, np.dtype(dtype_name), max_threads)
    emit_library_window_gemm(module, np.dtype(dtype_name), max_threads)
    return module

"""emit_sin and emit_cos: the inline fast path, and one call that replaces its result by the
large-argument one where |x| >= 2**40, made so that the caller's loop still vectorises (the
functions it calls, their vector variants and their calling convention are made here).
"""

from __future__ import annotations

from typing import Sequence

from llvmlite import ir

from .core import FLOAT32, Ops, StringAttributes, wide_ops
from .payne_hanek import sin_cos_large
from .trig import TRIG_LARGE, sin_cos_f32_wide, sin_cos_f64

# Dispatch, with no branch in the caller: the inline code computes the fast
# result for every x, then makes one call, select_large(fast, x, is_large) with
# is_large = |x| >= 2**40 (false for NaN), which returns fast unless is_large.
# A branch or a conditional call in an elementwise loop would stop LLVM's loop
# vectoriser; an unconditional call does not, given vector variants (the
# "vector-function-abi-variant" attribute).  They test the flags of all lanes
# at once (one vptest on x86) and only when one is set go lane by lane to the
# large-argument function.  On x86 they save every register they use
# ("no_caller_saved_registers"), so the loop keeps its constants in registers
# across the call: the dispatch costs a call, a test and a return per vector,
# 1-3% of the loop on Zen 4.  On NVPTX (no loop vectoriser) select_large is
# inlined: a branch around the call of the large-argument function.
#
# The out-of-line functions take and return doubles for both formats (a float32
# result is rounded by the caller), so that every vector variant the vectoriser
# picks on an AVX host returns at least 256 bits: float32 loops run 4 lanes with
# AVX2, where a float32 vector would have 128.  LLVM puts a vzeroupper before
# returning a value narrower than 256 bits from a function that touched the
# upper halves of the vector registers (as saving them does), which would wipe
# the caller's registers that "no_caller_saved_registers" promises to keep.  So
# 128-bit variants (two doubles; SSE-only hosts) and the scalar functions keep
# the ordinary calling convention.

_VECTOR_LANES = (2, 4, 8, 16)
# Vector variants returning at least this many bits preserve the caller's registers.
_PRESERVING_BITS = 256


def _internal_function(module: ir.Module, name: str, fnty: ir.FunctionType,
                       attributes: Sequence[str]) -> ir.Function:
    function = ir.Function(module, fnty, name=name)
    function.linkage = "internal"
    function.attributes = StringAttributes(attributes)
    return function


def _is_nvptx(module: ir.Module) -> bool:
    return module.triple.startswith("nvptx")


def _keep_until_vectorised(module: ir.Module, function: ir.Function) -> None:
    """List function in llvm.compiler.used: a vector variant has no caller until the loop
    vectoriser makes one, and would be deleted as dead code before it runs."""
    ptr = ir.PointerType()
    used = module.globals.get("llvm.compiler.used")
    if used is None:
        used = ir.GlobalVariable(module, ir.ArrayType(ptr, 0), name="llvm.compiler.used")
        used.linkage = "appending"
        used.section = "llvm.metadata"
        members: list[ir.Constant] = []
    else:
        members = list(used.initializer.constant)
    members.append(function)
    used.value_type = ir.ArrayType(ptr, len(members))
    used.initializer = ir.Constant(used.value_type, members)


def _large_argument_function(module: ir.Module, cosine: bool, single: bool) -> ir.Function:
    """double mathlib.<sin|cos>.<f32|f64>.large(double x): the Payne-Hanek path, for
    |x| >= 2**40 (for f32, x is a widened float32 and the result is to be rounded)."""
    name = f"mathlib.{'cos' if cosine else 'sin'}.{'f32' if single else 'f64'}.large"
    if name in module.globals:
        return module.globals[name]
    double = ir.DoubleType()
    function = _internal_function(module, name, ir.FunctionType(double, [double]),
                                  ("noinline", "cold"))
    builder = ir.IRBuilder(function.append_basic_block("entry"))
    (x,) = function.args
    builder.ret(sin_cos_large(Ops(builder, x), x, cosine, single))
    return function


def _emit_select_large(function: ir.Function, slow: ir.Function, slow_args: list[ir.Value]) -> None:
    """Body of function(fast, x, is_large), scalar or vector: fast when is_large is 0 in
    every lane (one test of all lanes), else slow(*slow_args)."""
    fast, _, is_large = function.args
    lanes = is_large.type.count if isinstance(is_large.type, ir.VectorType) else 1
    builder = ir.IRBuilder(function.append_basic_block("entry"))
    large_block = function.append_basic_block("large")
    fast_block = function.append_basic_block("fast")
    as_integer = builder.bitcast(is_large, ir.IntType(32 * lanes))
    any_large = builder.icmp_unsigned("!=", as_integer, ir.Constant(as_integer.type, 0))
    builder.cbranch(any_large, large_block, fast_block).set_weights([1, 1 << 20])
    builder.position_at_end(fast_block)
    builder.ret(fast)
    builder.position_at_end(large_block)
    builder.ret(builder.call(slow, slow_args))


def _select_large_type(lanes: int) -> ir.FunctionType:
    """(fast, x, is_large) -> result: doubles and an i32 flag (0 or -1), or vectors of
    lanes of them.  The flag is narrower than x, so that it fits the vptest."""
    double, i32 = ir.DoubleType(), ir.IntType(32)
    if lanes == 1:
        return ir.FunctionType(double, [double, double, i32])
    vector = ir.VectorType(double, lanes)
    return ir.FunctionType(vector, [vector, vector, ir.VectorType(i32, lanes)])


def _emit_lane_by_lane(function: ir.Function, large: ir.Function, lanes: int) -> None:
    """Body of function(fast, x, flags) on vectors: fast, with large(x) in each lane whose
    flag is set, in a loop over the lanes."""
    fast, x, flags = function.args
    i32 = ir.IntType(32)
    entry = function.append_basic_block("entry")
    lane_block = function.append_basic_block("lane")
    large_block = function.append_basic_block("large")
    next_block = function.append_basic_block("next")
    done_block = function.append_basic_block("done")
    builder = ir.IRBuilder(entry)
    builder.branch(lane_block)

    builder.position_at_end(lane_block)
    index = builder.phi(i32)
    result = builder.phi(fast.type)
    flag = builder.extract_element(flags, index)
    builder.cbranch(builder.icmp_unsigned("!=", flag, ir.Constant(i32, 0)), large_block, next_block)

    builder.position_at_end(large_block)
    value = builder.call(large, [builder.extract_element(x, index)])
    updated = builder.insert_element(result, value, index)
    builder.branch(next_block)

    builder.position_at_end(next_block)
    merged = builder.phi(fast.type)
    merged.add_incoming(result, lane_block)
    merged.add_incoming(updated, large_block)
    following = builder.add(index, ir.Constant(i32, 1))
    builder.cbranch(builder.icmp_unsigned("<", following, ir.Constant(i32, lanes)),
                    lane_block, done_block)
    index.add_incoming(ir.Constant(i32, 0), entry)
    index.add_incoming(following, next_block)
    result.add_incoming(fast, entry)
    result.add_incoming(merged, next_block)

    builder.position_at_end(done_block)
    builder.ret(merged)


def _vector_select_large(module: ir.Module, large: ir.Function, scalar_name: str,
                         lanes: int) -> ir.Function:
    """The vector variant of select_large for lanes lanes, and the cold function it
    calls when some flag is set.  (That one calls large, which has no vector variant,
    so the SLP vectoriser cannot turn its calls back into a call of this variant.)"""
    fnty = _select_large_type(lanes)
    attributes: tuple[str, ...] = ("noinline",)
    if 64 * lanes >= _PRESERVING_BITS:
        attributes += ('"no_caller_saved_registers"',)
    by_lane = _internal_function(module, f"{scalar_name}.v{lanes}.lanes", fnty,
                                 attributes + ("cold", "minsize", "optsize"))
    _emit_lane_by_lane(by_lane, large, lanes)
    variant = _internal_function(module, f"{scalar_name}.v{lanes}", fnty, attributes)
    _emit_select_large(variant, by_lane, list(variant.args))
    _keep_until_vectorised(module, variant)
    return variant


def _select_large_function(module: ir.Module, cosine: bool, single: bool) -> ir.Function:
    """double mathlib.<sin|cos>.<f32|f64>.select_large(double fast, double x, i32 is_large):
    fast, or the large-argument result for x if is_large is nonzero.  Out of line with
    vector variants on the CPU, inlined on NVPTX."""
    large = _large_argument_function(module, cosine, single)
    name = large.name.removesuffix(".large") + ".select_large"
    if name in module.globals:
        return module.globals[name]
    nvptx = _is_nvptx(module)
    function = _internal_function(module, name, _select_large_type(1),
                                  ("alwaysinline",) if nvptx else ("noinline",))
    _emit_select_large(function, large, [function.args[1]])
    if not nvptx:
        mappings = ",".join(
            f"_ZGV_LLVM_N{lanes}vvv_{name}({_vector_select_large(module, large, name, lanes).name})"
            for lanes in _VECTOR_LANES)
        function.attributes.add(f'"vector-function-abi-variant"="{mappings}"')
    return function


def _sin_cos(builder: ir.IRBuilder, x: ir.Value, cosine: bool) -> ir.Value:
    ops = Ops(builder, x)
    w = wide_ops(builder)
    if ops.fmt is FLOAT32:
        wide_x = builder.fpext(x, w.ty)
        fast = sin_cos_f32_wide(w, wide_x, cosine)
    else:
        wide_x = x
        fast = sin_cos_f64(ops, x, cosine)
    is_large = ops.cmp(">=", ops.fabs(x), ops.f(TRIG_LARGE))  # false for NaN
    select_large = _select_large_function(builder.module, cosine, ops.fmt is FLOAT32)
    result = builder.call(select_large, [fast, wide_x, builder.sext(is_large, ir.IntType(32))])
    if ops.fmt is FLOAT32:
        result = builder.fptrunc(result, ops.ty)
    if not cosine:
        # Keeps sin(-0) = -0 (the reduction turns -0 into +0).
        result = ops.select(ops.cmp("==", x, ops.f(0.0)), x, result)
    return result


def emit_sin(builder: ir.IRBuilder, x: ir.Value) -> ir.Value:
    """Emit sin(x) for a float or double x (see trig.py and the notes above)."""
    return _sin_cos(builder, x, cosine=False)


def emit_cos(builder: ir.IRBuilder, x: ir.Value) -> ir.Value:
    """Emit cos(x) for a float or double x (see trig.py and the notes above)."""
    return _sin_cos(builder, x, cosine=True)

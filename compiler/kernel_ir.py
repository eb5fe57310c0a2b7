"""The kernel IR: what the fusion pass produces and both code generators (CPU, NVPTX) consume.

A *kernel* is one loop nest over an iteration ``space`` (a shape). Its body is a scalar expression
tree over ``Load``s of operands (each an ``Access``: a buffer walked with per-axis strides, 0 where the
operand is broadcast), ``AxisIndex`` leaves and ``Prim`` nodes. Without ``reduce_axes`` the kernel is
elementwise: ``out[i] = body(i)``. With them, ``out[kept(i)] = combine over reduced axes of body(i)``;
matmul is such a kernel (``space = (batch, m, n, k)``, body ``a * b``, summed over ``k``).

A ``Program`` is the kernels of one compiled step in order, plus the buffers they use.
"""
from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any, Callable, Sequence

import numpy as np

from . import dtypes

# -- scalar expressions -------------------------------------------------------------------------


class ScalarExpr:
    """A node of a kernel body. Compared by identity; the builder interns equal nodes."""

    dtype: np.dtype


@dataclass(frozen=True, eq=False)
class Load(ScalarExpr):
    operand: int
    dtype: np.dtype


@dataclass(frozen=True, eq=False)
class Literal(ScalarExpr):
    value: Any
    dtype: np.dtype


@dataclass(frozen=True, eq=False)
class AxisIndex(ScalarExpr):
    axis: int
    dtype: np.dtype = dtypes.int64


@dataclass(frozen=True, eq=False)
class Gather(ScalarExpr):
    """A load of ``operand`` at a computed element: ``buffer[offset + index]`` (``index`` int64).

    The op that builds it keeps ``index`` inside the buffer (e.g. gather clamps its indices)."""

    operand: int
    index: ScalarExpr
    dtype: np.dtype


@dataclass(frozen=True, eq=False)
class Prim(ScalarExpr):
    op: str
    args: tuple[ScalarExpr, ...]
    dtype: np.dtype


# Primitive name -> number of arguments. ScalarBuilder.prim gives the result's dtype: bool for
# comparisons, isnan and the logical ops, the second argument's for select, the one asked for by
# cast, the first argument's otherwise.
_ARITHMETIC = ("add", "sub", "mul", "div", "maximum", "minimum")
_UNARY_FLOAT = ("exp", "expm1", "log", "log1p", "tanh", "sigmoid", "sqrt", "floor", "sin", "cos", "erf", "atan")
_COMPARISON = ("lt", "le", "gt", "ge", "eq", "ne")
PRIMITIVES: dict[str, int] = {
    **{name: 2 for name in _ARITHMETIC},
    **{name: 1 for name in _UNARY_FLOAT},
    **{name: 2 for name in _COMPARISON},
    "neg": 1, "abs": 1, "isnan": 1, "select": 3, "cast": 1, "pow": 2, "floormod": 2,
    "logical_and": 2, "logical_or": 2, "logical_not": 1,
    # Integer index arithmetic (truncating, as C): used by ops that compute where to read.
    "index_div": 2, "index_rem": 2,
    "philox": 4,  # (run count, block, key, lane) -> one Philox-4x32-10 word (codegen/random_bits.py)
}


class ScalarBuilder:
    """Builds interned scalar expressions; ops' ``lower_scalar`` rules receive one of these.

    Python numbers are lifted to literals of the other operand's dtype. ``index(dim)`` is the loop
    index along the op's output dimension ``dim`` (an int64), for ops such as one_hot. One builder
    serves a whole kernel body; ``begin_op`` tells it which op is lowered next.
    """

    def __init__(self) -> None:
        self._interned: dict[tuple, ScalarExpr] = {}
        self._dim_axes: tuple[int | None, ...] = ()
        # The concrete shapes of the op being lowered (inputs, including shape-only ones; output).
        self.input_shapes: tuple[tuple[int, ...], ...] = ()
        self.output_shape: tuple[int, ...] = ()

    def begin_op(self, dim_axes: Sequence[int | None], input_shapes: Sequence[tuple[int, ...]],
                 output_shape: tuple[int, ...]) -> None:
        """Set the op whose ``lower_scalar`` runs next: the kernel axis each of its output dimensions
        walks (``None``: broadcast, index 0) and its concrete shapes."""
        self._dim_axes = tuple(dim_axes)
        self.input_shapes = tuple(input_shapes)
        self.output_shape = output_shape

    # -- leaves ---------------------------------------------------------------------------------
    def load(self, operand: int, dtype: np.dtype) -> ScalarExpr:
        return self._intern(("load", operand, dtype), lambda: Load(operand, dtype))

    def literal(self, value: Any, dtype: np.dtype) -> ScalarExpr:
        value = np.array(value).astype(dtype).item()
        key = ("lit", repr(value), dtype)
        return self._intern(key, lambda: Literal(value, dtype))

    def gather(self, operand: int, index: ScalarExpr, dtype: np.dtype) -> ScalarExpr:
        """Operand ``operand`` read at element ``index`` (an int64 expression)."""
        return self._intern(("gather", operand, id(index), dtype), lambda: Gather(operand, index, dtype))

    def axis_index(self, axis: int) -> ScalarExpr:
        return self._intern(("axis", axis), lambda: AxisIndex(axis))

    def index(self, dim: int) -> ScalarExpr:
        """Loop index along output dimension ``dim`` of the op being lowered."""
        axis = self._dim_axes[dim]
        return self.literal(0, dtypes.int64) if axis is None else self.axis_index(axis)

    # -- primitives -----------------------------------------------------------------------------
    def prim(self, op: str, *args: Any, dtype: np.dtype | None = None) -> ScalarExpr:
        if PRIMITIVES[op] != len(args):
            raise ValueError(f"primitive {op} takes {PRIMITIVES[op]} arguments")
        like = next((a for a in args if isinstance(a, ScalarExpr)), None)
        if op == "select":
            like = next((a for a in args[1:] if isinstance(a, ScalarExpr)), None)
        lifted = []
        for position, arg in enumerate(args):
            if isinstance(arg, ScalarExpr):
                lifted.append(arg)
            elif op == "select" and position == 0:
                lifted.append(self.literal(arg, dtypes.bool_))
            else:
                assert like is not None, f"{op} needs at least one expression argument"
                lifted.append(self.literal(arg, like.dtype))
        if dtype is None:
            if op in _COMPARISON or op in ("isnan", "logical_and", "logical_or", "logical_not"):
                dtype = dtypes.bool_
            elif op == "select":
                dtype = lifted[1].dtype
            else:
                dtype = lifted[0].dtype
        if op == "cast" and lifted[0].dtype == dtype:
            return lifted[0]
        key = (op, tuple(id(a) for a in lifted), dtype)
        return self._intern(key, lambda: Prim(op, tuple(lifted), dtype))

    def __getattr__(self, name: str) -> Callable[..., ScalarExpr]:
        if name in PRIMITIVES and name != "cast":
            return lambda *args: self.prim(name, *args)
        raise AttributeError(name)

    def cast(self, value: ScalarExpr, dtype: np.dtype) -> ScalarExpr:
        return self.prim("cast", value, dtype=dtype)

    def _intern(self, key: tuple, make: Callable[[], ScalarExpr]) -> ScalarExpr:
        node = self._interned.get(key)
        if node is None:
            node = make()
            self._interned[key] = node
        return node


@dataclass(frozen=True)
class IndexedInput:
    """An input an op reads at positions it computes (slice, pad, gather, conv2d…), handed to its
    ``lower_scalar`` / loop-nest body in place of a scalar. The input is materialised in a buffer;
    ``at(sb, indices)`` reads element ``indices`` (one int64 expression or int per dimension)."""

    operand: int
    shape: tuple[int, ...]
    strides: tuple[int, ...]
    dtype: np.dtype
    literal: Any = None        # a size-1 constant folded to a literal (no buffer)

    def at(self, sb: ScalarBuilder, indices: Sequence[Any]) -> ScalarExpr:
        if self.literal is not None:
            return sb.literal(self.literal, self.dtype)
        flat: ScalarExpr | None = None
        for index, stride, size in zip(indices, self.strides, self.shape):
            if size == 1 or stride == 0:
                continue
            if not isinstance(index, ScalarExpr):
                index = sb.literal(int(index), dtypes.int64)
            term = index if stride == 1 else sb.mul(index, stride)
            flat = term if flat is None else sb.add(flat, term)
        return sb.gather(self.operand, flat if flat is not None else sb.literal(0, dtypes.int64), self.dtype)


# -- kernels and programs ---------------------------------------------------------------------

# "region": a buffer of a branch or loop (its loop variables, the values of its body): memory of its
# own, never shared by liveness, since a loop reads and writes it many times. "stack": a loop's
# per-iteration values when its trip count has no bound: memory the step itself grows (``Reserve``).
ROLES = ("feed", "variable", "constant", "temp", "output", "region", "stack")


@dataclass(frozen=True)
class Buffer:
    """A contiguous array the step reads or writes. ``label`` is for dumps only, never for IR."""

    index: int
    shape: tuple[int, ...]
    dtype: np.dtype
    role: str            # one of ROLES
    label: str
    where: str = ""      # the user's file:line of the op whose value it holds, for messages

    @property
    def size(self) -> int:
        return math.prod(self.shape)

    @property
    def nbytes(self) -> int:
        return self.size * self.dtype.itemsize


@dataclass(frozen=True)
class Access:
    """A buffer walked with per-axis strides: element ``offset + sum(i[a] * strides[a])``. A kernel's
    operands and output walk its space; the fusion pass places each tensor it materialises the same
    way, with a stride per dimension of the tensor."""

    buffer: int
    strides: tuple[int, ...]
    offset: int = 0

    def is_contiguous(self, shape: Sequence[int]) -> bool:
        """Whether it walks ``shape`` in row-major order (size-1 dimensions aside)."""
        return all(s == c for s, c, n in zip(self.strides, contiguous_strides(shape), shape) if n != 1)


@dataclass(frozen=True)
class MatmulAxes:
    """Which space axes of a matmul kernel are the batch, row (m), column (n) and depth (k) axes."""

    batch: tuple[int, ...]
    m: int
    n: int
    k: int


@dataclass(frozen=True)
class WindowMatmul:
    """A convolution (or one of its gradients) read as one matrix product ``out[m, n] = sum over k of
    A[m, k] * B[k, n]`` whose left matrix A is read straight from an NHWC image (operand 0) through a
    sliding window: an implicit im2col, nothing copied. A target may run the kernel this way (the
    CPU calls its GEMM library) or as the loop nest its body describes; both compute the same.

    A *pixel* ``(n, i, j)`` and a *tap* ``(u, v, c)`` read image element ``[n, h, w, c]`` with
    ``h = i * pixel_step[0] + u * tap_step[0] + shift[0]`` (``w`` likewise), or 0 outside the image.
    With ``pixel_rows`` A's rows are pixels and its depth taps (conv2d, its input gradient);
    otherwise rows are taps and depth pixels (the filter gradient). The rows, depth and column of
    the product are the kernel's space axes ``row_axes``, ``depth_axes`` (three each, flattened in
    order) and ``column_axis``: B is operand 1 over (depth, column), the output over (rows, column)."""

    image_shape: tuple[int, int, int, int]      # (batch, height, width, channels)
    image_strides: tuple[int, int, int, int]
    pixels: tuple[int, int, int]                # extents of (n, i, j)
    taps: tuple[int, int, int]                  # extents of (u, v, c)
    pixel_step: tuple[int, int]
    tap_step: tuple[int, int]
    shift: tuple[int, int]
    pixel_rows: bool
    row_axes: tuple[int, int, int]
    depth_axes: tuple[int, int, int]
    column_axis: int


@dataclass(frozen=True)
class Kernel:
    name: str
    space: tuple[int, ...]
    operands: tuple[Access, ...]
    body: ScalarExpr
    out: Access
    out_dtype: np.dtype
    reduce_axes: tuple[int, ...] = ()
    combiner: str | None = None          # "sum" | "prod" | "max" | "min" when reduce_axes is not empty
    covers: tuple[tuple[str, str, str], ...] = ()   # (op type, op name, user file:line)
    matmul: "MatmulAxes | None" = None  # set for a matrix product: operand 0 @ operand 1
    # With ``accumulate``, the output keeps its value and the reduction is added to it, times
    # ``scale`` (a fused ``var -= lr * (a @ b)``); otherwise out = the reduction (scale must be 1).
    accumulate: bool = False
    scale: float = 1.0
    # A scatter-add: each point adds its body into output element ``scatter`` (an int64 expression,
    # kept in range by the op) instead of the element its strides give; ``out`` strides are 0. The
    # output is zeroed by an earlier kernel; the CPU runs it on one thread, the GPU adds atomically.
    # Without ``accumulate``, each point stores into its element (a loop's push into a stack row).
    scatter: "ScalarExpr | None" = None
    # A scan (one reduced axis): every prefix of the reduction is stored, so ``out`` walks the
    # reduced axis too (a running sum, e.g. cumsum); the reduced axis is visited in order.
    scan: bool = False
    # Checked for NaN and Inf right after it runs: what the error says when the output holds one.
    check: str | None = None
    # A convolution that may run as a matrix product over an implicit im2col (see WindowMatmul).
    window: "WindowMatmul | None" = None

    @property
    def kind(self) -> str:
        if self.matmul is not None:
            return "matmul"
        if self.scatter is not None:
            return "scatter"
        if self.scan:
            return "scan"
        return "reduce" if self.reduce_axes else "elementwise"

    @property
    def out_space(self) -> tuple[int, ...]:
        return tuple(n for a, n in enumerate(self.space) if a not in self.reduce_axes)

    def notes(self) -> tuple[str, ...]:
        """Lines the ``kernels`` listing adds about how this kernel runs (a target's kernels say more)."""
        return ()


@dataclass(frozen=True)
class Branch:
    """A region of the step's schedule that runs ``taken`` when the bool scalar in buffer
    ``predicate`` holds and ``otherwise`` when not (a ``cond``)."""

    predicate: int
    taken: tuple["Step", ...]
    otherwise: tuple["Step", ...]


@dataclass(frozen=True)
class Loop:
    """A region of the step's schedule that runs ``condition`` (which writes the bool scalar in
    buffer ``predicate``), then ``body`` and again, for as long as the predicate holds (a
    ``while_loop``)."""

    condition: tuple["Step", ...]
    predicate: int
    body: tuple["Step", ...]


@dataclass(frozen=True)
class Reserve:
    """A schedule step that makes the stack in buffer ``stack`` (a loop's per-iteration values when
    the loop has no ``maximum_iterations``: memory the step grows at run time, its address in the
    step's buffer table) hold at least row ``counter`` + 1 (``counter``: an int64 scalar buffer) of
    ``row_bytes`` bytes each; ``capacity`` (an int64 scalar buffer, kept between runs) counts the
    rows it holds."""

    stack: int
    capacity: int
    counter: int
    row_bytes: int


# One step of a schedule: a kernel (its position in ``Program.kernels``), a branch, a loop or a
# stack reservation.
Step = Any


def schedule_kernels(steps: Sequence[Step]) -> list[int]:
    """Every kernel position a schedule runs, in the order they appear."""
    found: list[int] = []
    for step in steps:
        if isinstance(step, Branch):
            found += schedule_kernels(step.taken) + schedule_kernels(step.otherwise)
        elif isinstance(step, Loop):
            found += schedule_kernels(step.condition) + schedule_kernels(step.body)
        elif not isinstance(step, Reserve):
            found.append(step)
    return found


def shift_schedule(steps: Sequence[Step], offset: int) -> tuple[Step, ...]:
    """The schedule with every kernel position moved by ``offset``."""
    moved: list[Step] = []
    for step in steps:
        if isinstance(step, Branch):
            moved.append(Branch(step.predicate, shift_schedule(step.taken, offset),
                                shift_schedule(step.otherwise, offset)))
        elif isinstance(step, Loop):
            moved.append(Loop(shift_schedule(step.condition, offset), step.predicate,
                              shift_schedule(step.body, offset)))
        elif isinstance(step, Reserve):
            moved.append(step)
        else:
            moved.append(step + offset)
    return tuple(moved)


@dataclass(frozen=True)
class FetchSpec(Access):
    """How to read one fetched tensor out of the buffers after a step: its buffer walked over
    ``shape``."""

    shape: tuple[int, ...] = field(kw_only=True)


@dataclass
class Program:
    """Everything one compiled step needs: buffers, kernels in order, feeds, fetches, state."""

    buffers: list[Buffer]
    kernels: list[Kernel]
    feeds: dict[Any, int]                 # placeholder Tensor -> buffer index
    variables: dict[Any, int]             # Variable Tensor -> buffer index
    constants: dict[int, np.ndarray]      # buffer index -> value
    fetches: list[FetchSpec | None]       # None for operations
    first_assignment: int = 0             # kernels from here on write variables (run last)
    placement: dict[int, tuple[int, int]] = field(default_factory=dict)  # temp -> (arena, byte offset)
    arenas: list[int] = field(default_factory=list)                      # arena sizes in bytes
    # With branches or loops: the order the kernels run in (``Step``s); None: each once, in order.
    schedule: tuple[Step, ...] | None = None

    def steps(self) -> tuple[Step, ...]:
        """The schedule, or every kernel once in order when there is no control flow."""
        return self.schedule if self.schedule is not None else tuple(range(len(self.kernels)))


def contiguous_strides(shape: Sequence[int]) -> tuple[int, ...]:
    strides, step = [], 1
    for n in reversed(shape):
        strides.append(step)
        step *= max(n, 1)
    return tuple(reversed(strides))


# -- text form ------------------------------------------------------------------------------


def format_expr(expr: ScalarExpr, scatter: ScalarExpr | None = None) -> list[str]:
    """The body as SSA-like lines, shared subexpressions printed once (with a scatter kernel's
    output position first)."""
    names: dict[int, str] = {}
    lines: list[str] = []

    def visit(node: ScalarExpr) -> str:
        if id(node) in names:
            return names[id(node)]
        if isinstance(node, Load):
            text = f"load in{node.operand}"
        elif isinstance(node, Gather):
            text = f"load in{node.operand}[{visit(node.index)}]"
        elif isinstance(node, Literal):
            return f"{node.value!r}:{node.dtype.name}"
        elif isinstance(node, AxisIndex):
            return f"i{node.axis}"
        else:
            assert isinstance(node, Prim)
            args = ", ".join(visit(a) for a in node.args)
            text = f"{node.op}({args})" if node.op != "cast" else f"cast({args})"
        name = f"%{len(names)}"
        names[id(node)] = name
        lines.append(f"{name}: {node.dtype.name} = {text}")
        return name

    where = visit(scatter) if scatter is not None else None
    result = visit(expr)
    lines.append(f"yield {result}" if where is None else f"add {result} into out[{where}]")
    return lines


def format_bytes(nbytes: int) -> str:
    """``nbytes`` for a message: ``512 B``, ``3.0 MiB``, ``149.0 GiB``, ``128.0 TiB``."""
    for unit, size in (("TiB", 1 << 40), ("GiB", 1 << 30), ("MiB", 1 << 20), ("KiB", 1 << 10)):
        if nbytes >= size:
            return f"{nbytes / size:.1f} {unit}"
    return f"{nbytes} B"


def largest_buffers(program: Program, indices: Sequence[int], count: int = 3) -> str:
    """The ``count`` largest of the buffers ``indices``, each with its size, the op that writes it
    and the user's line that built that op: what an out-of-memory message names."""
    buffers = sorted((program.buffers[i] for i in indices), key=lambda b: -b.nbytes)[:count]
    return "; ".join(f"{format_bytes(b.nbytes)} for {b.label} {b.dtype.name}{list(b.shape)}"
                     + (f" at {b.where}" if b.where else "") for b in buffers if b.nbytes)


def format_program(program: Program) -> str:
    out: list[str] = ["buffers:"]
    for buf in program.buffers:
        dims = "x".join(str(n) for n in buf.shape) or "scalar"
        out.append(f"  b{buf.index}: {buf.dtype.name}[{dims}] {buf.role:<8} {buf.nbytes:>10} B  {buf.label}")
    total = sum(b.nbytes for b in program.buffers if b.role in ("temp", "output"))
    out.append(f"  temporaries and outputs: {total} bytes")
    if program.arenas:
        out.append(f"buffer plan: temporaries share {sum(program.arenas)} bytes by liveness "
                   f"(instead of {sum(b.nbytes for b in program.buffers if b.role == 'temp')})")
        for buffer, (arena, offset) in sorted(program.placement.items()):
            out.append(f"  b{buffer} -> arena {arena} + {offset}")
    for kernel in program.kernels:
        space = "x".join(str(n) for n in kernel.space) or "scalar"
        red = f" reduce {kernel.combiner} over axes {list(kernel.reduce_axes)}" if kernel.reduce_axes else ""
        if kernel.scan:
            red = f" running {kernel.combiner} along axis {kernel.reduce_axes[0]}"
        if kernel.accumulate and kernel.scatter is None:
            red += f", added to the output times {kernel.scale!r}"
        out.append(f"\nkernel {kernel.name} ({kernel.kind}) space [{space}]{red} -> "
                   f"b{kernel.out.buffer} strides {list(kernel.out.strides)}")
        for op_type, op_name, where in kernel.covers:
            out.append(f"  covers {op_type} {op_name!r} ({where})")
        if kernel.check:
            out.append("  then checked: its output must hold no NaN or Inf")
        if kernel.window is not None:
            out.append("  " + format_window(kernel.window))
        out.extend("  " + note for note in kernel.notes())
        for i, acc in enumerate(kernel.operands):
            off = f" + {acc.offset}" if acc.offset else ""
            out.append(f"  in{i} = b{acc.buffer} strides {list(acc.strides)}{off}")
        out.extend("  " + line for line in format_expr(kernel.body, kernel.scatter))
    if program.schedule is not None:
        out.append("\nschedule (branches and loops):")
        out.extend(format_schedule(program.schedule, [k.name for k in program.kernels], "  "))
    return "\n".join(out) + "\n"


def format_window(window: WindowMatmul) -> str:
    """One line: how a convolution kernel reads as a matrix product over its image (in0)."""
    pixels = "pixels (n, i, j) " + "x".join(map(str, window.pixels))
    taps = "taps (u, v, c) " + "x".join(map(str, window.taps))
    rows, depth = (pixels, taps) if window.pixel_rows else (taps, pixels)
    return (f"as a product over in0 (image {'x'.join(map(str, window.image_shape))}): rows = {rows}, "
            f"depth = {depth}, columns = axis {window.column_axis}; h = i*{window.pixel_step[0]} + "
            f"u*{window.tap_step[0]} + {window.shift[0]}, w = j*{window.pixel_step[1]} + v*{window.tap_step[1]} + "
            f"{window.shift[1]}")


def format_schedule(steps: Sequence[Step], names: Sequence[str], indent: str) -> list[str]:
    """The schedule as indented lines: kernels by name, ``if b<n>:`` / ``else:``, ``while b<n>:``."""
    lines: list[str] = []
    for step in steps:
        if isinstance(step, Branch):
            lines.append(f"{indent}if b{step.predicate}:")
            lines.extend(format_schedule(step.taken, names, indent + "  ") or [indent + "  (nothing)"])
            lines.append(f"{indent}else:")
            lines.extend(format_schedule(step.otherwise, names, indent + "  ") or [indent + "  (nothing)"])
        elif isinstance(step, Loop):
            lines.append(f"{indent}loop:")
            lines.extend(format_schedule(step.condition, names, indent + "  "))
            lines.append(f"{indent}  while b{step.predicate}:")
            lines.extend(format_schedule(step.body, names, indent + "    "))
        elif isinstance(step, Reserve):
            lines.append(f"{indent}grow b{step.stack} to hold row b{step.counter} ({step.row_bytes} B a row; "
                         f"rows held in b{step.capacity})")
        else:
            lines.append(f"{indent}{names[step]}")
    return lines

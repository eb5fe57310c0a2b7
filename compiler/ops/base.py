"""The op declaration (``OpDef``) and ``apply``, which checks shapes and dtypes and adds the node.

An op is declared once, with every rule side by side:

- ``shape_rule(shapes, attrs)`` and ``dtype_rule(dtypes, attrs)``: run when the node is built (with
  ``None`` for unknown dims) and again at compile time with concrete shapes;
- ``grad_rule(op, grad)``: the gradients of the inputs, built from other ops (``None`` for none);
- ``reference(values, attrs)``: the numpy result, the test oracle;
- how it lowers, by ``kind``:
  ``elementwise``: ``lower_scalar(sb, args, attrs)`` returns one scalar expression; inputs are
  broadcast to the output by ``dim_map`` (numpy broadcasting unless the op says otherwise);
  ``reduce``: ``loop_nest(input_shapes, out_shape, attrs)`` returns a ``LoopNest``;
  ``layout``: a new view of a contiguous input (reshape);
  ``shape``: a value that depends only on input shapes, folded to a constant at compile time;
  ``source`` / ``state`` / ``group`` / ``host``: placeholders, constants and variables; assignments;
  grouping; host-side actions (variable initialisation);
  ``control``: branches and loops over traced regions (``control.py``).

``apply`` turns Python and numpy operands into constants, so the ``Const`` op is declared here too.
Rule pieces that many ops share are in ``rules.py``.
"""
from __future__ import annotations

import contextlib
import math
import threading
from dataclasses import dataclass
from typing import Any, Callable, Iterator, Mapping, Sequence

import numpy as np

from .. import dtypes
from ..errors import DTypeError, ShapeError
from ..graph import Operation, Tensor, get_default_graph, located, user_location
from ..shapes import RuleError, broadcast_dim_map, format_shape
from .rules import dtype_from_attrs, no_gradient, shape_from_attrs

KINDS = ("source", "elementwise", "reduce", "layout", "shape", "state", "group", "host", "control")
REGISTRY: dict[str, "OpDef"] = {}


@dataclass(frozen=True)
class LoopNest:
    """How a reduce-kind op becomes one loop nest over ``space``.

    ``input_axes[i][d]`` is the space axis that dimension ``d`` of input ``i`` walks (None: stride 0).
    The output walks the axes not in ``reduce_axes``, in order.
    """

    space: tuple[int, ...]
    input_axes: tuple[tuple[int | None, ...], ...]
    reduce_axes: tuple[int, ...]
    combiner: str
    body: Callable[[Any, Sequence[Any]], Any]
    # A scatter-add (``reduce_axes`` empty): ``body`` returns ``(out_index, value)`` per point, the
    # output element (flat, int64, in range) that ``value`` is added to.
    scatter: bool = False
    # A scan (one reduced axis): the output has the whole space's shape and holds every prefix.
    scan: bool = False


@dataclass(frozen=True)
class CopyPart:
    """One kernel of an op computed on its own as strided copies (``OpDef.copies``): over ``space``
    it writes the output element at ``out_offset + sum(index * out_strides)``, either input
    ``source`` read with its dimension ``d`` on space axis ``dim_axes[d]`` (what produces it fused
    in), or, with ``source`` None, the constant ``fill``."""

    space: tuple[int, ...]
    out_strides: tuple[int, ...]
    out_offset: int = 0
    source: int | None = None
    dim_axes: tuple[int, ...] = ()
    fill: Any = None


@dataclass(frozen=True)
class OpDef:
    name: str
    kind: str
    shape_rule: Callable[[Sequence[tuple], Mapping[str, Any]], tuple]
    dtype_rule: Callable[[Sequence[np.dtype], Mapping[str, Any]], np.dtype]
    reference: Callable[[Sequence[np.ndarray], Mapping[str, Any]], np.ndarray] | None
    grad_rule: Callable[[Operation, Tensor], Sequence[Tensor | None]] | None
    lower_scalar: Callable[[Any, Sequence[Any], Mapping[str, Any]], Any] | None = None
    dim_map: Callable[[Sequence[tuple], tuple, Mapping[str, Any]], Sequence[tuple]] | None = None
    loop_nest: Callable[[Sequence[tuple], tuple, Mapping[str, Any]], LoopNest] | None = None
    shape_only_inputs: tuple[int, ...] = ()
    # Inputs read at computed positions: lowering receives an ``IndexedInput`` for each of them.
    indexed_inputs: tuple[int, ...] = ()
    num_outputs: int = 1
    # A convolution's loop nest as a matrix product over an implicit im2col, when it is one:
    # ``window_matmul(input_shapes, attrs, image_strides) -> kernel_ir.WindowMatmul | None``.
    window_matmul: Callable[[Sequence[tuple], Mapping[str, Any], tuple[int, ...]], Any] | None = None
    # An elementwise op that, computed on its own (not fused into a consumer), is plain strided
    # copies of its inputs and fills of the output: ``copies(input_shapes, out_shape, attrs) ->
    # [CopyPart] | None`` (None: its one-kernel lowering serves). A concat's parts, say: one
    # select per element among every input, each read with a gather, is several times slower.
    copies: Callable[[Sequence[tuple], tuple, Mapping[str, Any]], Sequence[CopyPart] | None] | None = None

    def __post_init__(self) -> None:
        # The import-time check: every op has every rule its kind needs.
        problems = []
        if self.kind not in KINDS:
            problems.append(f"unknown kind {self.kind!r}")
        if self.kind == "elementwise" and self.lower_scalar is None:
            problems.append("an elementwise op needs lower_scalar")
        if self.kind == "reduce" and self.loop_nest is None:
            problems.append("a reduce op needs loop_nest")
        if self.kind in ("elementwise", "reduce", "layout", "shape") and self.reference is None:
            problems.append("a computing op needs a numpy reference")
        if self.grad_rule is None and self.kind in ("elementwise", "reduce", "layout"):
            problems.append("a computing op needs a grad_rule (return [None, …] if it has none)")
        if problems:
            raise TypeError(f"op {self.name}: " + "; ".join(problems))
        if self.name in REGISTRY:
            raise TypeError(f"op {self.name} declared twice")
        REGISTRY[self.name] = self

    def input_dim_maps(self, input_shapes: Sequence[tuple], out_shape: tuple,
                       attrs: Mapping[str, Any]) -> Sequence[tuple]:
        if self.dim_map is not None:
            return self.dim_map(input_shapes, out_shape, attrs)
        return [broadcast_dim_map(s, out_shape) for s in input_shapes]

    def __call__(self, *inputs: Any, name: str | None = None, **attrs: Any) -> Any:
        return apply(self, inputs, attrs, name)


def convert_to_tensor(value: Any, dtype: np.dtype | None = None, name: str | None = None) -> Tensor:
    """A Tensor as it is, or a constant made from a Python or numpy value."""
    if isinstance(value, Tensor):
        return value
    return constant(value, dtype=dtype, name=name or "Const")


def _convert_inputs(opdef: OpDef, inputs: Sequence[Any]) -> list[Tensor]:
    """Python numbers take the dtype (and the graph) of the op's tensor operands, like TF1 and JAX."""
    anchor = next((t for t in inputs if isinstance(t, Tensor)), None)
    if anchor is None:
        return _convert_values(opdef, inputs, None)
    with anchor.graph.as_default():
        return _convert_values(opdef, inputs, anchor.dtype)


def _convert_values(opdef: OpDef, inputs: Sequence[Any], hint: np.dtype | None) -> list[Tensor]:
    converted = []
    for value in inputs:
        if isinstance(value, Tensor):
            converted.append(value)
        elif hint is not None and not isinstance(value, np.ndarray):
            converted.append(literal_as(value, hint, opdef.name))
        else:
            converted.append(convert_to_tensor(value))
    return converted


def literal_as(value: Any, dtype: np.dtype, what: str) -> Tensor:
    """A Python number (or a numpy scalar or nested list) as a constant of a tensor operand's
    ``dtype``, or a DTypeError when that would change it (see ``fit_literal``)."""
    if not isinstance(value, bool) and isinstance(value, int) and dtype.kind == "f":
        try:
            value = float(value)   # past int64 numpy makes an object array of it
        except OverflowError:      # 10**400: no float holds it
            raise DTypeError(located(f"{what}: {_short(value)} does not fit in {_a(dtype)} tensor")) from None
    if np.asarray(value).dtype.kind not in "biuf":
        return convert_to_tensor(value)
    return convert_to_tensor(fit_literal(value, dtype, what), dtype)


def fit_literal(value: Any, dtype: np.dtype, what: str) -> np.ndarray:
    """``value`` as an array of ``dtype``, or a DTypeError naming ``what`` when that would change
    it: a float where an integer or bool goes, an int that does not fit (TF1 raises; a cast would
    wrap it)."""
    array = np.asarray(value)
    if array.dtype.kind == "f" and dtype.kind in "iub":
        raise DTypeError(located(f"{what}: cannot use the float {_short(value)} with {_a(dtype)} tensor"))
    fitted = dtypes.convert_losslessly(array, dtype, literal=True) if array.dtype.kind in "biuf" else None
    if fitted is None:
        raise DTypeError(located(f"{what}: {_short(value)} does not fit in {_a(dtype)} tensor"))
    return fitted


def _a(dtype: np.dtype) -> str:
    return ("an " if dtype.name[0] in "aeiou" else "a ") + dtype.name


# The attribute of a placeholder made without a shape: TF1's shapeless placeholder is nearly always
# a scalar (keep_prob, a learning rate, is_training), and shapes here are known when a graph is built.
UNSHAPED = "made_without_a_shape"


def unshaped_note(tensor: Tensor) -> str:
    """A note for errors about ``tensor`` when it is a placeholder made without a shape."""
    if tensor.op.type == "Placeholder" and tensor.op.attrs.get(UNSHAPED):
        return (f" ({tensor.op.name!r} is a placeholder made without a shape, which is a scalar here: give its "
                f"shape, e.g. placeholder(dtype, shape=(None, 3)))")
    return ""


def apply(opdef: OpDef, inputs: Sequence[Any], attrs: Mapping[str, Any], name: str | None,
          graph: Any = None) -> Any:
    """Check the rules and add the node; return its output tensor (or the Operation if none)."""
    location = user_location()
    tensors = _convert_inputs(opdef, inputs)
    graph = graph or (tensors[0].graph if tensors else get_default_graph())
    shapes = [t.shape for t in tensors]
    types = [t.dtype for t in tensors]
    label = f"{opdef.name}" + (f" {name!r}" if name else "")
    for t in tensors if not graph.tracing else ():   # (a gradient's trace maps such tensors itself)
        traced = t.op.traced_in
        if traced is not None:   # it exists only while its branch or body runs (many times, or not at all)
            raise ValueError(f"{label}: {t.name!r} was computed inside a cond branch or a loop body (the function "
                             f"defined at {traced.location}); use it inside that function, or return it from "
                             f"the function and use what the cond or loop gives back" + located("", location))
    operands = ", ".join(f"{t.name!r} {format_shape(t.shape)} {t.dtype.name}{unshaped_note(t)}" for t in tensors)
    try:
        out_dtype = opdef.dtype_rule(types, attrs)
        out_shape = tuple(opdef.shape_rule(shapes, attrs))
    except RuleError as exc:
        detail = f"{label}: {exc}" + (f"; operands: {operands}" if operands else "") + located("", location)
        raise (DTypeError if exc.kind == "dtype" else ShapeError)(detail) from None
    known = [size for size in out_shape if size is not None]
    if 0 not in known and math.prod(known) >= 1 << 62:   # no buffer of that many elements can exist
        raise ShapeError(f"{label}: its result {format_shape(out_shape)} would have {math.prod(known)} elements, "
                         f"more than any array can hold" + (f"; operands: {operands}" if operands else "")
                         + located("", location))
    specs = [(out_shape, out_dtype)] * opdef.num_outputs
    op = graph.add_operation(opdef, tensors, dict(attrs), specs, name, location)
    return op.outputs[0] if op.outputs else op


@contextlib.contextmanager
def composite_scope(name: str, values: Sequence[Any]) -> Iterator[str]:
    """The name scope of the ops that a function composed of several ops builds (TF1's
    ``name_scope(name, default_name, values)``): in the graph of the first tensor among ``values``
    (the default graph when there is none), which is also the default graph inside."""
    graph = next((v.graph for v in values if isinstance(v, Tensor)), None) or get_default_graph()
    outermost = not _composites.depth
    _composites.depth += 1
    try:
        with graph.as_default(), graph.nested_scope(name) as scope:
            yield scope
    except (ShapeError, DTypeError) as error:
        if not outermost or str(error).startswith((f"{name}: ", f"in {name}: ")):
            raise
        # The op that refused is one of those the function is made of (a Mul inside a cross-entropy):
        # say which function the user called.
        raise type(error)(f"in {name}: {error}").with_traceback(error.__traceback__) from None
    finally:
        _composites.depth -= 1


class _CompositeDepth(threading.local):
    depth = 0


_composites = _CompositeDepth()


def renamed_argument(function: str, name: str, value: Any, old_name: str, old_value: Any,
                     default: Any = None) -> Any:
    """The value of an argument that TF1 also takes under an older name (``keep_dims`` for
    ``keepdims``, ``dim`` for ``axis``...): the old name's value when given, else ``value``, else
    ``default``; both given is an error, as in TF1."""
    if old_value is None:
        return default if value is None else value
    if value is not None:
        raise ValueError(located(f"{function}: give {name} or its older name {old_name}, not both"))
    return old_value


# -- constants -----------------------------------------------------------------------------------

Const = OpDef("Const", "source", shape_from_attrs, dtype_from_attrs,
              reference=lambda values, attrs: attrs["value"], grad_rule=no_gradient)


def _short(value: Any) -> str:
    text = repr(value)
    return text if len(text) <= 60 else text[:57] + "..."


def number_array(value: Any, label: str) -> np.ndarray:
    """``value`` (numbers, nested lists of them, a numpy array) as a numpy array of bools, ints or
    floats, or an error naming ``label`` and the user's line: a ShapeError for ragged lists, a
    DTypeError for what is not numbers (None, strings, complex, objects)."""
    try:
        array = np.asarray(value)
    except ValueError as exc:   # ragged lists
        where = dtypes.where_ragged(value)
        if where is None:
            raise DTypeError(located(f"{label}: {exc}")) from None
        raise ShapeError(located(f"{label}: a ragged nested list: {where}; every row must have the same "
                                 "length")) from None
    if array.dtype.kind not in "biuf":
        why = dtypes.why_not_numbers(value, array) or f"it holds {array.dtype.name} data"   # complex
        advice = "; convert it first (e.g. .astype('float32'))" if why == "it is an array of dtype object" else ""
        raise DTypeError(located(f"{label}: {_short(value)} is not numbers of one kind "
                                 f"(bool, int or float): {why}{advice}"))
    return array


def constant(value: Any, dtype: Any = None, shape: Sequence[int] | None = None,
             name: str | None = None) -> Tensor:
    """A constant tensor. With ``shape``, as TF1's: the values laid out in that shape, the last one
    repeated where they are fewer (a scalar fills the whole shape).

    >>> constant([1.0, 2.0], dtype="float32").shape
    (2,)
    >>> constant([1, 2, 3, 4, 5, 6], shape=[2, 3]).shape, constant(0.0, shape=[2, 2]).shape
    ((2, 3), (2, 2))
    """
    label = f"constant {name!r}" if name else "constant"
    literal = not isinstance(value, (np.ndarray, np.generic))
    array = number_array(value, label)
    if dtype is None:
        # Python floats default to float32 and ints to int32 (int64 where they do not fit), as in TF1.
        if literal and array.dtype.kind in "iu":
            dtype = dtypes.int32 if dtypes.convert_losslessly(array, dtypes.int32, True) is not None \
                else dtypes.int64
        elif literal:
            dtype = {"f": dtypes.float32, "b": dtypes.bool_}[array.dtype.kind]
        else:
            dtype = array.dtype
    dtype = dtypes.as_dtype(dtype)
    if literal:
        # Python numbers are never changed silently: no float truncated to an int, no int wrapped.
        fitted = dtypes.convert_losslessly(array, dtype, literal=True)
        if fitted is None:
            raise DTypeError(located(f"{label}: {_short(value)} cannot be {dtype.name} without changing "
                                     f"its value; cast it with cc.cast or give numbers that fit"))
        array = fitted
    else:
        array = array.astype(dtype)   # a numpy array with a dtype asked for: converted, as TF1's astype
    if shape is not None:
        sizes = tuple(shape) if isinstance(shape, (list, tuple, np.ndarray)) else None
        if sizes is None or not all(isinstance(n, (int, np.integer)) and not isinstance(n, bool) and n >= 0
                                    for n in sizes):
            raise ShapeError(located(f"{label}: shape must be a list of sizes (ints >= 0), got {shape!r}"))
        count, flat = math.prod(sizes), array.reshape(-1)
        if flat.size > count or (flat.size == 0 and count):
            raise ShapeError(located(f"{label}: {flat.size} values do not fit shape {sizes} ({count} elements)"))
        if flat.size < count:
            flat = np.concatenate([flat, np.full(count - flat.size, flat[-1], flat.dtype)])
        array = flat.reshape(sizes)
    array = np.array(array, order="C")
    array.setflags(write=False)
    return apply(Const, (), {"value": array, "shape": array.shape, "dtype": dtype}, name or "Const")

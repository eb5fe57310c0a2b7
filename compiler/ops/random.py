"""Random ops: uniform, normal and truncated normal numbers computed inside the generated code.

The numbers come from Philox-4x32-10, a counter-based generator (``compiler/philox.py``, and
``codegen/random_bits.py`` in the generated code): a pure function of a 64-bit key, a 64-bit block
number and a 64-bit run count. So an element's value depends only on

- the **key**, made from the graph seed and the op seed (TensorFlow 1.x rules, see
  ``random_seed.get_seed``),
- the **run count**: how many steps of this graph have computed a random op before (the hidden
  ``random_counter`` variable of ``random_seed.py``; every random op of one step reads the same
  count, and ``counter_updates`` adds the step's increment),
- the element's **position** (its row-major index in the op's output).

Step ``k`` gives the same numbers in every process and on the targets "cpu", "reference" and
"cuda".

Words to floats (exact integer arithmetic, then a power-of-two scale):

- float32 uniform: ``(w0 >> 8) * 2**-24`` in ``[0, 1)``;
- float64 uniform: ``((w0 >> 5) * 2**26 + (w1 >> 6)) * 2**-53`` in ``[0, 1)``;
- normal: Box-Muller, ``sqrt(-2 log u1) * cos(2 pi u2)`` with ``u1`` in ``(0, 1]`` (the integer
  plus one) and ``u2`` in ``[0, 1)``;
- truncated normal: a branch-free kernel cannot loop until it succeeds, so each element draws a
  fixed 8 candidates (4 Box-Muller pairs, both the cosine and the sine value) and keeps the first
  with ``|z| <= 2``; if all 8 miss (probability ``0.0455**8``, about ``2e-11`` per element) it
  takes the last candidate clamped to ``[-2, 2]``. The numbers therefore differ from TensorFlow's
  but have the same distribution up to that clamp.

Uniform numbers are bit-identical on every target. Normal numbers go through ``log``, ``sqrt``,
``cos`` and ``sin``: the compiled code uses ``codegen.mathlib`` (within 1 ulp) and the numpy
reference uses numpy's, so the two agree to a few ulp rather than bit for bit (at most 5 ulp in float32 and 3 in float64
over 2e5 draws). For truncated normal that also means that a candidate within a few ulp of +-2 may
be kept on one target and replaced on the other (about one element in a million).

Elements use Philox blocks ``index * blocks_per_element + j`` (1 block per element for uniform
and normal, 2 (float32) or 4 (float64) for truncated normal); every word a value uses is computed
in the element's own kernel iteration, so fusion and the loop order do not change the numbers.
"""
from __future__ import annotations

import math
from typing import Any, Callable, Iterable, Mapping, Sequence

import numpy as np

from .. import dtypes
from ..errors import DTypeError, ShapeError
from ..graph import Operation, Tensor, get_default_graph, located
from ..philox import philox4x32
from ..shapes import RuleError, format_shape
from .base import OpDef, apply, convert_to_tensor
from .array import expand_dims
from .array import shape as shape_of
from .creation import dynamic_sizes, zeros_with_sizes
from .elementwise import cast, floor, log, maximum, minimum, where
from .random_seed import RANDOM_COUNTER_UPDATE_COLLECTION, check_seed, get_seed, philox_key, random_counter
from .rules import no_gradient

TRUNCATION = 2.0                        # truncated_normal keeps |z| <= 2 standard deviations
TRUNCATED_PAIRS = 4                     # Box-Muller pairs drawn per truncated element (8 candidates)

_MASK32 = 0xFFFFFFFF
_MASK64 = (1 << 64) - 1


# -- the shared algorithm: words -> floats ----------------------------------------------------
#
# Written once against a small interface so the kernel lowering and the numpy reference do the
# same operations in the same order (which makes uniform numbers bit-identical).

class _KernelOps:
    """Builds scalar expressions with a ``ScalarBuilder`` (the lowering)."""

    def __init__(self, sb: Any, counter: Any, dtype: np.dtype, key: int, blocks: int) -> None:
        self.sb, self.counter, self.dtype = sb, counter, dtype
        self.key = sb.literal(key - (1 << 64) if key >= 1 << 63 else key, dtypes.int64)
        shape = sb.output_shape
        index, stride = None, 1
        for dim in reversed(range(len(shape))):
            if shape[dim] != 1:
                term = sb.index(dim) if stride == 1 else sb.mul(sb.index(dim), stride)
                index = term if index is None else sb.add(index, term)
            stride *= max(shape[dim], 1)
        self.index = index if index is not None else sb.literal(0, dtypes.int64)
        self.blocks = blocks

    def word(self, block: int, lane: int) -> Any:
        sb = self.sb
        number = self.index if self.blocks == 1 else sb.mul(self.index, self.blocks)
        if block:
            number = sb.add(number, block)
        return sb.prim("philox", self.counter, number, self.key, sb.literal(lane, dtypes.int64))

    def idiv(self, a: Any, n: int) -> Any:
        return self.sb.index_div(a, n)

    def imul(self, a: Any, n: int) -> Any:
        return self.sb.mul(a, n)

    def iadd(self, a: Any, b: Any) -> Any:
        return self.sb.add(a, b)

    def to_float(self, a: Any) -> Any:
        return self.sb.cast(a, self.dtype)

    def fmul(self, a: Any, b: Any) -> Any:
        return self.sb.mul(a, b)

    def log(self, a: Any) -> Any:
        return self.sb.log(a)

    def sqrt(self, a: Any) -> Any:
        return self.sb.sqrt(a)

    def cos(self, a: Any) -> Any:
        return self.sb.cos(a)

    def sin(self, a: Any) -> Any:
        return self.sb.sin(a)

    def within(self, a: Any, bound: float) -> Any:
        return self.sb.le(self.sb.abs(a), bound)

    def clamp(self, a: Any, bound: float) -> Any:
        return self.sb.maximum(self.sb.minimum(a, bound), -bound)

    def select(self, condition: Any, a: Any, b: Any) -> Any:
        return self.sb.select(condition, a, b)


class _NumpyOps:
    """The same operations on numpy arrays (the reference)."""

    def __init__(self, count: int, size: int, dtype: np.dtype, key: int, blocks: int) -> None:
        self.dtype = dtype
        self.count = np.uint64(count & _MASK64)
        self.key = key
        self.index = np.arange(size, dtype=np.uint64)
        self.blocks = blocks
        self._words: dict[int, tuple[np.ndarray, ...]] = {}

    def word(self, block: int, lane: int) -> np.ndarray:
        if block not in self._words:
            number = self.index * np.uint64(self.blocks) + np.uint64(block)
            mask, shift = np.uint64(_MASK32), np.uint64(32)
            count = self.count
            self._words[block] = philox4x32(
                (number & mask, number >> shift, count & mask, count >> shift),
                (self.key & _MASK32, self.key >> 32))
        return self._words[block][lane]

    def idiv(self, a: np.ndarray, n: int) -> np.ndarray:
        return a // np.uint64(n)

    def imul(self, a: np.ndarray, n: int) -> np.ndarray:
        return a * np.uint64(n)

    def iadd(self, a: np.ndarray, b: Any) -> np.ndarray:
        return a + (np.uint64(b) if isinstance(b, int) else b)

    def to_float(self, a: np.ndarray) -> np.ndarray:
        return a.astype(self.dtype)

    def fmul(self, a: np.ndarray, b: Any) -> np.ndarray:
        return a * (self.dtype.type(b) if isinstance(b, float) else b)

    def log(self, a: np.ndarray) -> np.ndarray:
        return np.log(a)

    def sqrt(self, a: np.ndarray) -> np.ndarray:
        return np.sqrt(a)

    def cos(self, a: np.ndarray) -> np.ndarray:
        return np.cos(a)

    def sin(self, a: np.ndarray) -> np.ndarray:
        return np.sin(a)

    def within(self, a: np.ndarray, bound: float) -> np.ndarray:
        return np.abs(a) <= self.dtype.type(bound)

    def clamp(self, a: np.ndarray, bound: float) -> np.ndarray:
        return np.maximum(np.minimum(a, self.dtype.type(bound)), self.dtype.type(-bound))

    def select(self, condition: np.ndarray, a: np.ndarray, b: np.ndarray) -> np.ndarray:
        return np.where(condition, a, b)


def _unit(ops: Any, dtype: np.dtype, block: int, lane: int, open_at_zero: bool = False) -> Any:
    """A uniform number from the words of ``block`` starting at ``lane``: in ``[0, 1)``, or in
    ``(0, 1]`` when ``open_at_zero`` (the integer plus one, for a logarithm)."""
    if dtype == dtypes.float32:
        bits, scale = ops.idiv(ops.word(block, lane), 1 << 8), 2.0 ** -24
    else:
        high = ops.imul(ops.idiv(ops.word(block, lane), 1 << 5), 1 << 26)
        bits, scale = ops.iadd(high, ops.idiv(ops.word(block, lane + 1), 1 << 6)), 2.0 ** -53
    if open_at_zero:
        bits = ops.iadd(bits, 1)
    return ops.fmul(ops.to_float(bits), scale)


def _box_muller(ops: Any, dtype: np.dtype, pair: int, both: bool) -> list[Any]:
    """Normal numbers from Box-Muller pair ``pair``: the cosine one, and the sine one if ``both``."""
    if dtype == dtypes.float32:   # two words per pair, two pairs per block
        block, lanes = pair // 2, (2 * (pair % 2), 2 * (pair % 2) + 1)
    else:                         # four words per pair
        block, lanes = pair, (0, 2)
    u1 = _unit(ops, dtype, block, lanes[0], open_at_zero=True)
    u2 = _unit(ops, dtype, block, lanes[1])
    radius = ops.sqrt(ops.fmul(ops.log(u1), -2.0))
    angle = ops.fmul(u2, 2.0 * math.pi)
    values = [ops.fmul(radius, ops.cos(angle))]
    if both:
        values.append(ops.fmul(radius, ops.sin(angle)))
    return values


def _uniform(ops: Any, dtype: np.dtype) -> Any:
    return _unit(ops, dtype, 0, 0)


def _normal(ops: Any, dtype: np.dtype) -> Any:
    return _box_muller(ops, dtype, 0, both=False)[0]


def _truncated(ops: Any, dtype: np.dtype) -> Any:
    candidates = [z for pair in range(TRUNCATED_PAIRS) for z in _box_muller(ops, dtype, pair, both=True)]
    result = ops.clamp(candidates[-1], TRUNCATION)
    for candidate in reversed(candidates):
        result = ops.select(ops.within(candidate, TRUNCATION), candidate, result)
    return result


def _blocks(kind: str, dtype: np.dtype) -> int:
    if kind != "truncated":
        return 1
    return TRUNCATED_PAIRS // 2 if dtype == dtypes.float32 else TRUNCATED_PAIRS


_ALGORITHMS: dict[str, Callable[[Any, np.dtype], Any]] = {
    "uniform": _uniform, "normal": _normal, "truncated": _truncated}


# -- op declarations --------------------------------------------------------------------------

def _random_shape(shapes: Sequence[tuple], attrs: Mapping[str, Any]) -> tuple:
    """``attrs["shape"]``; its None entries take the matching (right-aligned) dims of the optional
    shape-only second input (dropout draws one number per element of ``x``)."""
    shape = tuple(attrs["shape"])
    if len(shapes) > 1:
        like = tuple(shapes[1])
        lead = len(like) - len(shape)
        shape = tuple(like[lead + i] if d is None else d for i, d in enumerate(shape))
    elif None in shape:
        raise RuleError(f"shape {format_shape(shape)} has unknown dims and no tensor to take them from")
    return shape


def _random_dtype(types: Sequence[np.dtype], attrs: Mapping[str, Any]) -> np.dtype:
    if types[0] != dtypes.int64:
        raise RuleError(f"the run counter must be int64, got {types[0].name}", "dtype")
    return attrs["dtype"]


def _random_dim_map(shapes: Sequence[tuple], out: tuple, attrs: Mapping[str, Any]) -> list[tuple]:
    return [()] + [(None,) * len(s) for s in shapes[1:]]


def _lower(kind: str) -> Callable[[Any, Sequence[Any], Mapping[str, Any]], Any]:
    def lower_scalar(sb: Any, args: Sequence[Any], attrs: Mapping[str, Any]) -> Any:
        dtype = attrs["dtype"]
        ops = _KernelOps(sb, args[0], dtype, attrs["key"], _blocks(kind, dtype))
        return _ALGORITHMS[kind](ops, dtype)
    return lower_scalar


def _reference(kind: str) -> Callable[[Sequence[np.ndarray], Mapping[str, Any]], np.ndarray]:
    def reference(values: Sequence[np.ndarray], attrs: Mapping[str, Any]) -> np.ndarray:
        dtype = attrs["dtype"]
        shape = _random_shape([np.shape(v) for v in values], attrs)
        count = int(np.asarray(values[0]).reshape(()))
        ops = _NumpyOps(count, math.prod(shape), dtype, attrs["key"], _blocks(kind, dtype))
        with np.errstate(all="ignore"):
            result = _ALGORITHMS[kind](ops, dtype)
        return np.asarray(result, dtype=dtype).reshape(shape)
    return reference


def _random_op(name: str, kind: str) -> OpDef:
    return OpDef(name, "elementwise", _random_shape, _random_dtype, reference=_reference(kind),
                 grad_rule=no_gradient, lower_scalar=_lower(kind), dim_map=_random_dim_map,
                 shape_only_inputs=(1,))


RandomUniform = _random_op("RandomUniform", "uniform")
RandomStandardNormal = _random_op("RandomStandardNormal", "normal")
TruncatedNormal = _random_op("TruncatedNormal", "truncated")
RANDOM_OP_TYPES = frozenset(op.name for op in (RandomUniform, RandomStandardNormal, TruncatedNormal))


def counter_updates(operations: Iterable[Operation]) -> list[Operation]:
    """The counter increments a step must also run when it computes any of ``operations``: one
    per graph that has a random op among them."""
    updates: list[Operation] = []
    for op in operations:
        if op.type in RANDOM_OP_TYPES or (op.opdef.kind == "control" and draws(op)):
            found = op.graph.get_collection(RANDOM_COUNTER_UPDATE_COLLECTION)
            if found and found[0].op not in updates:
                updates.append(found[0].op)
    return updates


def draws(construct: Operation) -> bool:
    """Whether a ``Cond`` or ``While`` has a random op in one of its regions (nested ones too)."""
    from .control import regions_of
    return any(op.type in RANDOM_OP_TYPES or (op.opdef.kind == "control" and draws(op))
               for region in regions_of(construct) for op in region.operations)


# -- building ---------------------------------------------------------------------------------

def _float_dtype(dtype: Any, op_type: str) -> np.dtype:
    try:
        result = dtypes.as_dtype(dtype)
    except TypeError:
        result = None
    if result is None or not dtypes.is_floating(result):
        shown = result.name if result is not None else repr(dtype)
        raise DTypeError(located(f"{op_type}: dtype must be float32 or float64, got {shown}"))
    return result


def static_shape(shape: Any, op_type: str, allow_unknown: bool = False) -> tuple:
    """``shape`` as a tuple of non-negative ints (and None where ``allow_unknown``), checked."""
    if isinstance(shape, Tensor):
        raise TypeError(located(f"{op_type}: shape must be a list of ints, not the tensor {shape.name!r}"))
    if isinstance(shape, (int, np.integer)) and not isinstance(shape, bool):
        shape = (shape,)
    try:
        items = list(shape)
    except TypeError:
        raise ShapeError(located(f"{op_type}: shape must be a list of ints, got {shape!r}")) from None
    result: list[int | None] = []
    for d in items:
        if d is None and allow_unknown:
            result.append(None)
        elif isinstance(d, (int, np.integer)) and not isinstance(d, (bool, np.bool_)) and d >= 0:
            result.append(int(d))
        else:
            raise ShapeError(located(f"{op_type}: shape {tuple(items)!r} must hold non-negative ints"))
    return tuple(result)


def _drawn_shape(shape: Any, op_type: str, dtype: np.dtype) -> tuple[tuple, Tensor | None]:
    """A random op's shape: Python ints, or as TF1 also sizes read from tensors (``shape(mu)``,
    ``[shape(x)[0], 10]``, see ``creation.dynamic_sizes``); then also a tensor of zeros of that
    shape whose sizes the draws take (``random_tensor``'s ``like``)."""
    if isinstance(shape, Tensor) or (isinstance(shape, (list, tuple)) and any(isinstance(d, Tensor) for d in shape)):
        sizes, dynamic = dynamic_sizes(op_type, shape)
        if dynamic:
            return sizes, zeros_with_sizes(sizes, dynamic, dtype)
        return sizes, None
    return static_shape(shape, op_type), None


def random_tensor(opdef: OpDef, shape: tuple, dtype: np.dtype, seed: int | None,
                  like: Tensor | None = None, name: str | None = None) -> Tensor:
    """Standard draws of ``opdef`` (one of the random ops), keyed by ``seed`` and the graph seed; None
    entries of ``shape`` take the matching dims of ``like``, in whose graph the op is built."""
    graph = like.graph if like is not None else get_default_graph()
    graph_seed, op_seed = get_seed(seed, graph)
    counter = random_counter(graph)
    inputs = [counter] if like is None else [counter, like]
    attrs = {"shape": shape, "dtype": dtype, "seed": graph_seed, "seed2": op_seed,
             "key": philox_key(graph_seed, op_seed)}
    return apply(opdef, inputs, attrs, name, graph=graph)


def _affine(standard: Tensor, scale: Any, shift: Any, identity: tuple[float, float]) -> Tensor:
    """``standard * scale + shift``; Python numbers are rounded to the dtype first (as constants),
    arrays of them broadcast against the shape (as TF1's do)."""
    dtype = standard.dtype
    for value in (scale, shift):
        if isinstance(value, Tensor):
            continue
        try:
            array = np.asarray(value, dtype)
            known = tuple(1 if d is None else d for d in standard.shape)   # a size known when compiled: 1 fits
            fits = np.broadcast_shapes(array.shape, known) == known
        except (TypeError, ValueError):
            fits = False
        if not fits:
            raise ShapeError(located(f"{standard.op.type}: the mean, scale and bounds must be numbers, tensors "
                                     f"or arrays of numbers that broadcast to the shape "
                                     f"{format_shape(standard.shape)}; got {value!r}"))
    with standard.graph.as_default():
        if not isinstance(scale, Tensor) and not isinstance(shift, Tensor) and np.ndim(scale) == 0 and \
                np.ndim(shift) == 0 and (float(scale), float(shift)) == identity:
            return standard
        scale = scale if isinstance(scale, Tensor) else convert_to_tensor(np.asarray(scale, dtype), dtype)
        shift = shift if isinstance(shift, Tensor) else convert_to_tensor(np.asarray(shift, dtype), dtype)
        return standard * scale + shift


def random_uniform(shape: Sequence[int], minval: Any = 0, maxval: Any = None, dtype: Any = "float32",
                   seed: int | None = None, name: str | None = None) -> Tensor:
    """Uniform numbers in ``[minval, maxval)``, new ones at every ``Session.run``.

    ``minval`` and ``maxval`` (1 when not given) are Python numbers or tensors of ``dtype``
    (float32 or float64); ``seed`` is the op seed (see ``set_random_seed``). The values are
    ``u * (maxval - minval) + minval`` with ``u`` in ``[0, 1)`` (24 random bits in float32, 53 in
    float64). For an integer ``dtype`` (int32, int64) ``maxval`` is required, as in TF1: the values
    are ``minval + floor(u * (maxval - minval))`` with a float64 ``u``, each integer of the range
    equally likely.

    >>> import compiler as cc
    >>> from runtime import Session
    >>> g = cc.Graph()
    >>> with g.as_default():
    ...     u = cc.random_uniform((2, 3), minval=-1.0, maxval=1.0, seed=1)
    >>> with Session(g) as sess:
    ...     first, second = sess.run(u), sess.run(u)
    >>> bool(((-1 <= first) & (first < 1)).all()), bool((first != second).any())
    (True, True)
    """
    seed = check_seed(seed, "RandomUniform")
    if dtype is not None and _is_integer_dtype(dtype):
        shape, like = _drawn_shape(shape, "RandomUniform", dtypes.float64)
        return _random_integers(shape, like, minval, maxval, dtypes.as_dtype(dtype), seed, name)
    dtype = _float_dtype(dtype, "RandomUniform")
    shape, like = _drawn_shape(shape, "RandomUniform", dtype)
    maxval = 1 if maxval is None else maxval
    graph = get_default_graph()
    with graph.nested_scope(name or "random_uniform"):
        standard = random_tensor(RandomUniform, shape, dtype, seed, like=like, name="RandomUniform")
        if isinstance(minval, Tensor) or isinstance(maxval, Tensor):
            with graph.as_default():
                return _affine(standard, maxval - minval, minval, (1.0, 0.0))
        scale = np.asarray(maxval, dtype) - np.asarray(minval, dtype)   # rounded to dtype, as TF
        values = _affine(standard, scale, minval, (1.0, 0.0))
        if values is standard:
            return values
        # u * scale + minval may round to maxval itself (u = 1 - 2**-24 into [1, 2)): keep the
        # range half-open, as the docstring says. A maxval below minval (TF1 allows it: the
        # numbers lie in (maxval, minval]) is kept from the other side.
        inside = convert_to_tensor(np.nextafter(np.asarray(maxval, dtype), np.asarray(minval, dtype)), dtype)
        rising = np.asarray(scale >= 0)
        with graph.as_default():
            if rising.all():
                return minimum(values, inside)
            if not rising.any():
                return maximum(values, inside)
            return where(convert_to_tensor(rising), minimum(values, inside), maximum(values, inside))


def _is_integer_dtype(dtype: Any) -> bool:
    try:
        return dtypes.is_integer(dtypes.as_dtype(dtype))
    except TypeError:
        return False


def _integer_bound(bound: Any, dtype: np.dtype) -> np.ndarray:
    """A Python or numpy integer bound of an integer ``random_uniform`` as an array of ``dtype``,
    or a DTypeError where it is not an integer or does not fit (TF1 refuses both)."""
    array = np.asarray(bound)   # Python ints past int64 make an object array
    whole = array.dtype.kind in "iu" or (array.dtype == object and all(
        isinstance(v, (int, np.integer)) and not isinstance(v, bool) for v in array.reshape(-1)))
    if not whole:
        raise DTypeError(located(f"RandomUniform: {dtype.name} numbers need integer bounds, got {bound!r}"))
    info = np.iinfo(dtype)
    if array.size and (min(array.reshape(-1).tolist()) < info.min or max(array.reshape(-1).tolist()) > info.max):
        raise DTypeError(located(f"RandomUniform: the bound {bound!r} does not fit in {dtype.name}"))
    return array.astype(dtype)


def _random_integers(shape: tuple[int | None, ...], like: Tensor | None, minval: Any, maxval: Any, dtype: np.dtype,
                     seed: int | None, name: str | None) -> Tensor:
    """``random_uniform`` of an integer dtype: ``minval + floor(u * (maxval - minval))``; the
    offset is drawn in float64 and added in the integer dtype, so any bounds of the dtype give
    integers in ``[minval, maxval)`` (an int64 range wider than 2**53 leaves some of them out; its
    width must fit in int64)."""
    if maxval is None:
        raise ValueError(located(f"RandomUniform: an {dtype.name} random_uniform needs maxval (as in TF1)"))
    graph = get_default_graph()
    with graph.nested_scope(name or "random_uniform"):
        bounds = []
        for bound in (minval, maxval):
            if isinstance(bound, Tensor):
                if bound.dtype != dtype:
                    raise DTypeError(located(f"RandomUniform: the bound {bound.name!r} is {bound.dtype.name}, the "
                                             f"numbers {dtype.name}"))
                bounds.append(bound)
            else:
                bounds.append(convert_to_tensor(_integer_bound(bound, dtype), dtype))
        low, high = bounds
        if not isinstance(minval, Tensor) and not isinstance(maxval, Tensor):
            lows, highs = np.broadcast_arrays(np.asarray(minval, object), np.asarray(maxval, object))
            if any(h <= l for l, h in zip(lows.reshape(-1).tolist(), highs.reshape(-1).tolist())):
                raise ValueError(located(f"RandomUniform: need minval < maxval, got {minval!r} and {maxval!r}"))
            if any(h - l >= 2 ** 63 for l, h in zip(lows.reshape(-1).tolist(), highs.reshape(-1).tolist())):
                raise ValueError(located(f"RandomUniform: the range [{minval!r}, {maxval!r}) holds 2**63 integers "
                                         f"or more; its width must fit in int64"))
        standard = random_tensor(RandomUniform, shape, dtypes.float64, seed, like=like, name="RandomUniform")
        with graph.as_default():
            wide_low = cast(low, dtypes.float64)
            # int32: in float64, where every difference and sum of two int32 is exact; int64: the
            # difference in int64 (2**60 + 3 - (2**60 + 1) is 0 in float64), rounded past 2**53.
            span = cast(high, dtypes.float64) - wide_low if dtype == dtypes.int32 else cast(high - low, dtypes.float64)
            offset = minimum(floor(standard * span), span - 1.0)   # u < 1, but u * span may round up to it
            if dtype == dtypes.int32:
                return cast(wide_low + offset, dtype)
            return minimum(low + cast(offset, dtype), high - 1)   # a rounded span may overshoot by a few


def random_normal(shape: Sequence[int], mean: Any = 0.0, stddev: Any = 1.0, dtype: Any = "float32",
                  seed: int | None = None, name: str | None = None) -> Tensor:
    """Normal numbers ``N(mean, stddev**2)`` (Box-Muller), new ones at every ``Session.run``.

    >>> import numpy as np, compiler as cc
    >>> from runtime import Session
    >>> g = cc.Graph()
    >>> with g.as_default():
    ...     cc.set_random_seed(0)
    ...     z = cc.random_normal((100000,), mean=1.0, stddev=2.0, dtype="float64")
    >>> with Session(g) as sess:
    ...     values = sess.run(z)
    >>> bool(abs(values.mean() - 1.0) < 0.05), bool(abs(values.std() - 2.0) < 0.05)
    (True, True)
    """
    return _scaled_normal(RandomStandardNormal, shape, mean, stddev, dtype, seed, name or "random_normal")


def truncated_normal(shape: Sequence[int], mean: Any = 0.0, stddev: Any = 1.0, dtype: Any = "float32",
                     seed: int | None = None, name: str | None = None) -> Tensor:
    """Normal numbers ``N(mean, stddev**2)`` restricted to ``mean +- 2 * stddev``.

    Values beyond two standard deviations are replaced by the next of a fixed 8 candidates per
    element (a branch-free resample; see the module docstring), so all values lie within range.

    >>> import numpy as np, compiler as cc
    >>> from runtime import Session
    >>> g = cc.Graph()
    >>> with g.as_default():
    ...     t = cc.truncated_normal((1000,), stddev=0.1, seed=3)
    >>> with Session(g) as sess:
    ...     bool((np.abs(sess.run(t)) <= 0.2).all())
    True
    """
    return _scaled_normal(TruncatedNormal, shape, mean, stddev, dtype, seed, name or "truncated_normal")


def multinomial(logits: Any, num_samples: int, seed: int | None = None, name: str | None = None,
                output_dtype: Any = None) -> Tensor:
    """``num_samples`` class indices per row of ``logits`` (``[batch, classes]``, unnormalized log
    probabilities), drawn independently, new ones at every ``Session.run`` (TF1's ``multinomial``,
    also ``random.categorical``): ``[batch, num_samples]`` of ``output_dtype`` (None: int64). Each draw is the
    argmax of the logits plus Gumbel noise ``-log(-log(u))``, which picks class ``k`` with
    probability ``softmax(logits)[k]``; a class of logit ``-inf`` is never drawn.

    >>> import compiler as cc
    >>> logits = cc.constant([[0.0, 1.0, 2.0]])
    >>> cc.multinomial(logits, num_samples=5, seed=1).shape
    (1, 5)
    """
    from .reduction import argmax
    with get_default_graph().nested_scope(name or "multinomial"):
        logits = convert_to_tensor(logits)
        if len(logits.shape) != 2 or logits.shape[1] is None or not dtypes.is_floating(logits.dtype):
            raise ShapeError(located(f"multinomial: logits must be float [batch, classes], the classes known when "
                                     f"the graph is built, got {logits.dtype.name} {format_shape(logits.shape)} "
                                     f"{logits.name!r}"))
        if isinstance(num_samples, Tensor) or not isinstance(num_samples, (int, np.integer)) or num_samples < 0:
            raise TypeError(located(f"multinomial: num_samples must be a Python int of at least 0, got "
                                    f"{num_samples!r}"))
        batch, classes = logits.shape
        if batch is None:   # a batch fed at any size (a policy network's observations)
            batch = shape_of(logits)[0]
        # float64 draws: u of 53 bits, so the noise's tail is not cut off as float32's would be
        u = random_uniform((batch, int(num_samples), classes), dtype=dtypes.float64, seed=seed)
        gumbel = -log(-log(u))
        scores = cast(expand_dims(logits, 1), dtypes.float64) + gumbel
        return argmax(scores, axis=2, output_type=dtypes.int64 if output_dtype is None else output_dtype)


def _scaled_normal(opdef: OpDef, shape: Sequence[int], mean: Any, stddev: Any, dtype: Any, seed: int | None,
                   scope: str) -> Tensor:
    """``mean + stddev * z`` for standard draws ``z`` of ``opdef``, arguments checked in its name."""
    dtype = _float_dtype(dtype, opdef.name)
    shape, like = _drawn_shape(shape, opdef.name, dtype)
    seed = check_seed(seed, opdef.name)
    with get_default_graph().nested_scope(scope):
        standard = random_tensor(opdef, shape, dtype, seed, like=like, name=opdef.name)
        return _affine(standard, stddev, mean, (1.0, 0.0))


def random_crop(value: Any, size: Any, seed: int | None = None, name: str | None = None) -> Tensor:
    """A window of shape ``size`` at a random place in ``value`` (every window equally likely), a new
    place at every ``Session.run`` (TF1's ``random_crop``: image augmentation). Sizes are known when
    the graph is built; the window is read with a ``gather`` per cropped axis, so the gradient
    reaches the window's elements.

    >>> import numpy as np, compiler as cc
    >>> cc.random_crop(cc.constant(np.zeros((8, 8, 3), "float32")), [5, 5, 3], seed=1).shape
    (5, 5, 3)
    """
    from .array import known_ints
    from .gather import gather
    from .elementwise import add, floormod
    with get_default_graph().nested_scope(name or "random_crop"):
        x = convert_to_tensor(value)
        sizes = [int(s) for s in known_ints(size, "random_crop", "size")]
        if len(sizes) != len(x.shape) or any(d is None for d in x.shape) \
                or any(not 0 <= s <= d for s, d in zip(sizes, x.shape)):
            raise ShapeError(located(f"random_crop: size {sizes} must have one entry per dimension of {x.name!r} "
                                     f"{format_shape(x.shape)} (known when the graph is built), each at most "
                                     f"that dimension"))
        room = [d - s + 1 for s, d in zip(sizes, x.shape)]
        if all(r == 1 for r in room):
            return x
        # one draw per dimension, as TF1 draws the offsets (uniform over each dimension's room)
        offsets = floormod(random_uniform([len(sizes)], 0, 2 ** 31 - 1, dtypes.int32, seed=seed),
                           convert_to_tensor(np.array(room, np.int32)))
        for axis, (window, places) in enumerate(zip(sizes, room)):
            if places > 1:
                x = gather(x, add(offsets[axis], convert_to_tensor(np.arange(window, dtype=np.int32))), axis=axis)
        return x


def random_shuffle(value: Any, seed: int | None = None, name: str | None = None) -> Tensor:
    """``value``'s rows (first dimension, of a size known when the graph is built) in a random order,
    a new one at every ``Session.run`` (TF1's ``random_shuffle``). The order ranks random keys with
    ``top_k``, whose work grows with the square of the rows: for batches and small tables, not
    for a dataset of a million rows (shuffle those in numpy before feeding).

    >>> import numpy as np, compiler as cc
    >>> cc.random_shuffle(cc.constant(np.arange(6.0).reshape(3, 2)), seed=1).shape
    (3, 2)
    """
    from .gather import gather
    from .reduction import top_k
    with get_default_graph().nested_scope(name or "random_shuffle"):
        x = convert_to_tensor(value)
        if not x.shape or x.shape[0] is None:
            raise ShapeError(located(f"random_shuffle: {x.name!r} {format_shape(x.shape)} needs a first dimension "
                                     f"of known size"))
        rows = x.shape[0]
        if rows <= 1:
            return x
        keys = random_uniform([rows], dtype=dtypes.float64, seed=seed)
        return gather(x, top_k(keys, k=rows).indices)

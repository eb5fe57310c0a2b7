"""Tensors made from sizes and numbers: ``zeros ones fill range eye linspace sequence_mask``.

All are compositions (TF1's names and arguments): a constant broadcast to a shape, which the
compiler folds into the kernels that read it, so a large ``zeros`` takes no memory of its own.
Sizes are Python ints, as every shape is fixed when a step is compiled.
"""
from __future__ import annotations

import builtins
import math
import numbers
from typing import Any, Sequence

import numpy as np

from .. import dtypes
from ..errors import ShapeError
from ..graph import Tensor, located
from .base import composite_scope, constant, convert_to_tensor
from .broadcast import broadcast_to
from .array import expand_dims, reshape, size_from_tensor, static_value, zeros_like
from .reduction import cumsum, reduce_sum
from .slicing import getitem
from .elementwise import add, cast, less, multiply, where
from .padding import pad


# A size known only when the step is compiled: (position in the shape, tensor t, axis) for shape(t)[axis].
DynamicSize = tuple[int, Tensor, int]


def dynamic_sizes(function: str, shape: Any) -> tuple[tuple[int | None, ...], list[DynamicSize]]:
    """A shape of Python ints and, as TF1 takes them, sizes read from tensors: ``shape(t)`` as a
    whole or entries ``shape(t)[i]`` (the fed batch: ``[cc.shape(x)[0], 128]``), or any integer
    scalar known now. Returns the sizes (None where one is known only when the step is compiled)
    and where those come from."""
    if isinstance(shape, Tensor) and static_value(shape) is not None:
        shape = [int(d) for d in np.reshape(static_value(shape), -1)]   # a constant shape: its numbers
    elif isinstance(shape, Tensor) and shape.op.type == "ConcatV2" and shape.op.attrs["axis"] == 0 and all(
            part.op.type == "ExpandDims" and part.op.inputs[0].shape == () for part in shape.op.inputs):
        shape = [part.op.inputs[0] for part in shape.op.inputs]   # stack([shape(x)[0], 8]): its entries
    if isinstance(shape, Tensor):
        op = shape.op
        while op.type in ("Cast", "Identity") and op.inputs:
            op = op.inputs[0].op
        if op.type != "Shape":
            raise TypeError(located(f"{function}: a shape given as a tensor must be known when the graph is built or "
                                    f"be shape(t) (or a list of ints and shape(t)[i]), got {shape.name!r}"))
        source = op.inputs[0]
        shape = list(source.shape)
        dynamic = [(position, source, position) for position, d in enumerate(shape) if d is None]
        return tuple(shape), dynamic
    entries = [shape] if isinstance(shape, (numbers.Integral, Tensor)) else list(shape)
    sizes: list[int | None] = []
    dynamic: list[DynamicSize] = []
    for position, entry in enumerate(entries):
        if isinstance(entry, Tensor):
            value, axis_of = size_from_tensor(entry, function)
            if value is not None:
                entry = int(value)
            else:
                if axis_of is None:
                    raise TypeError(located(f"{function}: the size {entry.name!r} must be shape(t)[i] for a tensor "
                                            f"t, or known when the graph is built"))
                sizes.append(None)
                dynamic.append((position, *axis_of))
                continue
        if not isinstance(entry, numbers.Integral) or isinstance(entry, bool) or entry < 0:
            raise ShapeError(located(f"{function}: the shape must be non-negative ints, got {shape!r}"))
        sizes.append(int(entry))
    return tuple(sizes), dynamic


def _sizes(function: str, shape: Any) -> tuple[int, ...]:
    sizes, dynamic = dynamic_sizes(function, shape)
    if dynamic:
        raise TypeError(located(f"{function}: the shape must be known when the graph is built"))
    return sizes  # type: ignore[return-value]


def zeros_with_sizes(sizes: Sequence[int | None], dynamic: Sequence[DynamicSize], dtype: np.dtype) -> Tensor:
    """Zeros of ``sizes``, each None the size of ``shape(t)[axis]`` from ``dynamic``: a sum of
    broadcast zero vectors, each read from a slice of one element across its tensor's other axes."""
    result = broadcast_to(constant(np.zeros((), dtype), dtype), [1 if s is None else s for s in sizes])
    for position, source, axis in dynamic:
        others = [a for a in builtins.range(len(source.shape)) if a != axis]
        piece = zeros_like(getitem(source, tuple(slice(None) if a == axis else slice(0, 1)
                                               for a in builtins.range(len(source.shape)))), dtype=dtype)
        piece = reduce_sum(piece, axis=others) if others else piece
        result = result + reshape(piece, [1] * position + [-1] + [1] * (len(sizes) - 1 - position))
    return result


def fill(dims: Sequence[int], value: Any, name: str | None = None) -> Tensor:
    """A tensor of shape ``dims`` whose every element is ``value`` (a Python number, or a scalar
    tensor, whose gradient is the sum of the result's).

    >>> import compiler as cc
    >>> cc.fill([2, 3], 1.5).shape
    (2, 3)
    """
    sizes, dynamic = dynamic_sizes("fill", dims)
    with composite_scope(name or "Fill", [value]):
        value = convert_to_tensor(value)
        if value.shape != ():
            raise ShapeError(located(f"fill: the value must be a scalar, got shape {value.shape}"))
        if dynamic:
            _require_numbers(value.dtype, "fill")
            return broadcast_to(value, [1 if s is None else s for s in sizes]) + \
                zeros_with_sizes(sizes, dynamic, value.dtype)
        return broadcast_to(value, sizes)


def _require_numbers(dtype: np.dtype, function: str) -> None:
    if dtype == dtypes.bool_:
        raise TypeError(located(f"{function}: a bool tensor of a size known only when the step is compiled is not "
                                f"available; make numbers and compare them"))


def zeros(shape: Sequence[int], dtype: Any = dtypes.float32, name: str | None = None) -> Tensor:
    """A tensor of zeros (TF1's ``zeros``); see also ``zeros_like``.

    >>> import compiler as cc
    >>> cc.zeros((2, 3), "int32").dtype.name
    'int32'
    """
    sizes, dynamic = dynamic_sizes("zeros", shape)
    with composite_scope(name or "Zeros", []):
        dtype = dtypes.as_dtype(dtype)
        if dynamic:
            _require_numbers(dtype, "zeros")
            return zeros_with_sizes(sizes, dynamic, dtype)
        return broadcast_to(constant(np.zeros((), dtype), dtype), sizes)


def ones(shape: Sequence[int], dtype: Any = dtypes.float32, name: str | None = None) -> Tensor:
    """A tensor of ones (TF1's ``ones``); see also ``ones_like``."""
    sizes, dynamic = dynamic_sizes("ones", shape)
    with composite_scope(name or "Ones", []):
        dtype = dtypes.as_dtype(dtype)
        if dynamic:
            _require_numbers(dtype, "ones")
            return 1 + zeros_with_sizes(sizes, dynamic, dtype)
        return broadcast_to(constant(np.ones((), dtype), dtype), sizes)


_MAX_RANGE = 1 << 28     # numbers in one range: a constant of 2 GiB at int64


def range(start: Any, limit: Any = None, delta: Any = 1, dtype: Any = None,  # noqa: A001 (TF's name)
          name: str | None = None) -> Tensor:
    """``start, start + delta, ...`` up to but not including ``limit`` (``range(n)``: 0 to n - 1),
    as TF1's ``range``: int32 when all three are ints, else float32, unless ``dtype`` says. TF1's
    ``range(shape(x)[0])`` works too: a limit computed from shapes, known when the step is compiled.

    >>> import compiler as cc
    >>> cc.range(2, 11, 3).shape
    (3,)
    >>> cc.range(cc.shape(cc.placeholder("float32", (None, 3)))[0]).shape
    (None,)
    """
    if limit is None:
        start, limit = 0, start
    if isinstance(limit, Tensor) and not isinstance(start, Tensor) and not isinstance(delta, Tensor):
        known, of_shape = size_from_tensor(limit, "range")
        if known is None and of_shape is None:
            raise TypeError(located(f"range: the limit {limit.name!r} must be known when the graph is built or be "
                                    "a size from shapes, shape(t)[i]"))
        if known is None:
            return _range_of_a_size(start, limit, delta, dtype, name)
        limit = int(known)
    bounds = (start, limit, delta)
    if any(isinstance(b, Tensor) for b in bounds):
        raise TypeError(located("range: start, limit and delta must be Python numbers, or the limit a size from "
                                "shapes (range(shape(x)[0])); sizes are fixed when a step is compiled"))
    if not all(isinstance(b, numbers.Real) and not isinstance(b, bool) for b in bounds):
        raise TypeError(located(f"range: start, limit and delta must be numbers, got {bounds!r}"))
    if delta == 0:
        raise ValueError(located("range: delta must not be 0"))
    integral = all(isinstance(b, numbers.Integral) for b in bounds)
    if integral:   # counted exactly, in Python's integers
        count = len(builtins.range(int(start), int(limit), int(delta)))
    else:
        count = max(0, int(np.ceil((limit - start) / delta)))
    if count > _MAX_RANGE:
        raise ValueError(located(f"range: {count} numbers is more than a constant may hold here ({_MAX_RANGE}); "
                                 f"compute the values in the step instead"))
    if integral:
        values = np.array(builtins.range(int(start), int(limit), int(delta)), dtype=object)
        values = values.astype(np.int64) if all(-2 ** 63 <= v < 2 ** 63 for v in (start, limit)) else values
    else:
        values = start + delta * np.arange(count, dtype=np.float64)
    if dtype is None:   # as TF1: int32 for ints (int64 where they do not fit), float32 for floats
        dtype = (dtypes.int32 if dtypes.convert_losslessly(np.asarray(values, np.int64), dtypes.int32, True)
                 is not None else dtypes.int64) if integral else dtypes.float32
    dtype = dtypes.as_dtype(dtype)
    # Python numbers are never changed silently (a float range as ints, ints that do not fit).
    return constant(values.tolist() if values.size else np.zeros(0, dtype), dtype, name=name or "Range")


def _range_of_a_size(start: Any, limit: Tensor, delta: Any, dtype: Any, name: str | None) -> Tensor:
    """``range(limit)`` for a limit known only when the step is compiled (``shape(x)[0]``): the
    running count of ``limit`` ones."""
    if start != 0 or delta != 1:
        raise TypeError(located("range: with a limit known only when the step is compiled, start must be 0 and "
                                f"delta 1 (range(shape(x)[0])), got start {start!r} and delta {delta!r}"))
    dtype = dtypes.as_dtype(dtype or limit.dtype)
    with composite_scope(name or "Range", [limit]):
        return cumsum(fill([limit], constant(1, dtype)), exclusive=True)


def eye(num_rows: int, num_columns: int | None = None, batch_shape: Sequence[int] | None = None,
        dtype: Any = dtypes.float32, name: str | None = None) -> Tensor:
    """The identity matrix (``num_rows`` x ``num_columns``, square by default), broadcast to
    ``batch_shape + [rows, columns]`` (TF1's ``eye``).

    >>> import compiler as cc
    >>> cc.eye(3, batch_shape=[2]).shape
    (2, 3, 3)
    """
    rows, = _sizes("eye", [num_rows])
    columns, = _sizes("eye", [rows if num_columns is None else num_columns])
    batch = _sizes("eye", () if batch_shape is None else batch_shape)
    with composite_scope(name or "Eye", []):
        identity = constant(np.eye(rows, columns), dtypes.as_dtype(dtype))
        return broadcast_to(identity, (*batch, rows, columns)) if batch else identity


def linspace(start: float, stop: float, num: int, name: str | None = None) -> Tensor:
    """``num`` evenly spaced float32 numbers from ``start`` to ``stop``, both included (TF1's
    ``linspace``)."""
    count, = _sizes("linspace", [num])
    if any(isinstance(b, Tensor) for b in (start, stop)):
        raise TypeError(located("linspace: start and stop must be Python numbers"))
    return constant(np.linspace(start, stop, count), dtypes.float32, name=name or "LinSpace")


def sequence_mask(lengths: Any, maxlen: int | None = None, dtype: Any = dtypes.bool_,
                  name: str | None = None) -> Tensor:
    """``mask[..., j] = j < lengths[...]``, of shape ``lengths.shape + [maxlen]`` (TF1's
    ``sequence_mask``). ``maxlen`` is required: TF1's default, the largest length, would make the
    shape depend on values.

    >>> import compiler as cc
    >>> cc.sequence_mask(cc.constant([1, 3]), maxlen=4).shape
    (2, 4)
    """
    if maxlen is None:
        raise ValueError(located("sequence_mask needs maxlen: the shape must be known when the step is compiled, "
                                 "and the largest length is only known when it runs"))
    if isinstance(maxlen, Tensor):
        raise TypeError(located("sequence_mask: maxlen must be a Python int (sizes are fixed when a step is "
                                "compiled)"))
    count, = _sizes("sequence_mask", [maxlen])
    with composite_scope(name or "SequenceMask", [lengths]):
        lengths = convert_to_tensor(lengths)
        if lengths.dtype.kind not in "iu":
            raise TypeError(located(f"sequence_mask: lengths must be integers, got {lengths.dtype.name} "
                                    f"{lengths.name!r}"))
        positions = constant(np.arange(count), lengths.dtype)
        mask = less(positions, expand_dims(lengths, -1))
        return mask if dtypes.as_dtype(dtype) == dtypes.bool_ else cast(mask, dtype)


def matrix_band_part(input: Any, num_lower: int, num_upper: int, name: str | None = None) -> Tensor:  # noqa: A002
    """The band of each innermost matrix of ``input``, zeros outside it (TF1's ``matrix_band_part``,
    also ``linalg.band_part``): entry ``[..., i, j]`` is kept where ``num_lower`` is negative or
    ``i - j <= num_lower``, and ``num_upper`` is negative or ``j - i <= num_upper``. ``(x, -1, 0)``
    is the lower triangle (a causal attention mask), ``(x, 0, 0)`` the diagonal.

    >>> import numpy as np, compiler as cc
    >>> cc.matrix_band_part(cc.constant(np.ones((3, 3))), -1, 0).shape
    (3, 3)
    """
    for what, bound in (("num_lower", num_lower), ("num_upper", num_upper)):
        if isinstance(bound, Tensor) or not isinstance(bound, (int, np.integer)) or isinstance(bound, bool):
            raise TypeError(located(f"matrix_band_part: {what} must be a Python int (the band is fixed when the "
                                    f"graph is built), got {bound!r}"))
    with composite_scope(name or "MatrixBandPart", [input]):
        input = convert_to_tensor(input)
        if len(input.shape) < 2 or input.shape[-2] is None or input.shape[-1] is None:
            raise ValueError(located(f"matrix_band_part: needs matrices of known size, got {input.name!r} of "
                                     f"shape {list(input.shape)}"))
        rows, columns = input.shape[-2], input.shape[-1]
        below = np.arange(rows)[:, None] - np.arange(columns)[None, :]    # i - j
        keep = ((num_lower < 0) | (below <= num_lower)) & ((num_upper < 0) | (-below <= num_upper))
        return where(constant(keep), input, zeros_like(input))


def _matrix_sizes(function: str, x: Tensor) -> tuple[int, int]:
    if len(x.shape) < 2 or x.shape[-2] is None or x.shape[-1] is None:
        raise ValueError(located(f"{function}: needs matrices of known size, got {x.name!r} of shape "
                                 f"{list(x.shape)}"))
    return x.shape[-2], x.shape[-1]


def matrix_diag_part(input: Any, name: str | None = None) -> Tensor:  # noqa: A002
    """The main diagonal of each innermost matrix, ``[..., min(M, N)]`` (TF1's
    ``matrix_diag_part``, also ``linalg.diag_part``).

    >>> import numpy as np, compiler as cc
    >>> from runtime import Session
    >>> with Session() as sess:
    ...     sess.run(cc.matrix_diag_part(cc.constant(np.arange(6.0).reshape(2, 3)))).tolist()
    [0.0, 4.0]
    """
    with composite_scope(name or "MatrixDiagPart", [input]):
        x = convert_to_tensor(input)
        rows, columns = _matrix_sizes("matrix_diag_part", x)
        on_diagonal = where(constant(np.eye(rows, columns, dtype=bool)), x, zeros_like(x))
        return getitem(reduce_sum(on_diagonal, axis=-1), (Ellipsis, builtins.slice(0, min(rows, columns))))


def trace(x: Any, name: str | None = None) -> Tensor:
    """The sum of each innermost matrix's main diagonal (TF1's ``trace``)."""
    with composite_scope(name or "Trace", [x]):
        return reduce_sum(matrix_diag_part(x), axis=-1)


def matrix_diag(diagonal: Any, name: str | None = None) -> Tensor:
    """Square matrices with ``diagonal``'s last axis on their diagonals, zeros elsewhere:
    ``[..., N]`` to ``[..., N, N]`` (TF1's ``matrix_diag``, also ``linalg.diag``; ``diag`` for a
    vector)."""
    with composite_scope(name or "MatrixDiag", [diagonal]):
        d = convert_to_tensor(diagonal)
        if not d.shape or d.shape[-1] is None:
            raise ValueError(located(f"matrix_diag: needs a diagonal of known length, got {d.name!r} of shape "
                                     f"{list(d.shape)}"))
        size = d.shape[-1]
        return where(constant(np.eye(size, dtype=bool)), expand_dims(d, -1), zeros_like(expand_dims(d, -1)))


def matrix_set_diag(input: Any, diagonal: Any, name: str | None = None) -> Tensor:  # noqa: A002
    """``input`` with the main diagonal of each innermost matrix replaced by ``diagonal``
    (``[..., min(M, N)]``; TF1's ``matrix_set_diag``, also ``linalg.set_diag``)."""
    with composite_scope(name or "MatrixSetDiag", [input, diagonal]):
        x = convert_to_tensor(input)
        d = diagonal if isinstance(diagonal, Tensor) else convert_to_tensor(np.asarray(diagonal), x.dtype)
        rows, columns = _matrix_sizes("matrix_set_diag", x)
        length = min(rows, columns)
        if not d.shape or d.shape[-1] != length:
            raise ValueError(located(f"matrix_set_diag: the diagonal {d.name!r} of shape {list(d.shape)} must end in "
                                     f"{length}, the diagonal's length of {list(x.shape)}"))
        if rows > length:   # one value per row: zeros for the rows past the diagonal (never read)
            d = pad(d, [[0, 0]] * (len(d.shape) - 1) + [[0, rows - length]])
        return where(constant(np.eye(rows, columns, dtype=bool)), expand_dims(d, -1), x)


def diag(diagonal: Any, name: str | None = None) -> Tensor:
    """A square matrix with the vector ``diagonal`` on its diagonal (TF1's ``diag``, for a vector)."""
    d = convert_to_tensor(diagonal)
    if len(d.shape) != 1:
        raise ValueError(located(f"diag: takes a vector, got {d.name!r} of shape {list(d.shape)} (matrix_diag "
                                 "makes a batch of them)"))
    return matrix_diag(d, name=name or "Diag")


def polyval(coeffs: Sequence[Any], x: Any, name: str | None = None) -> Tensor:
    """``coeffs[0] * x**(n-1) + ... + coeffs[n-1]`` by Horner's rule (TF's ``math.polyval``: one
    coefficient is returned as it is; none: zeros like ``x``).

    >>> import compiler as cc
    >>> from runtime import Session
    >>> with Session() as sess:
    ...     sess.run(cc.math.polyval([1.0, 0.0, -2.0], cc.constant([3.0]))).tolist()
    [7.0]
    """
    if not isinstance(coeffs, (list, tuple)):
        raise TypeError(located(f"polyval: coeffs must be a list of coefficients, got {type(coeffs).__name__}"))
    with composite_scope(name or "polyval", [x, *coeffs]):
        x = convert_to_tensor(x)
        if not coeffs:
            return zeros_like(x)
        result = convert_to_tensor(coeffs[0], x.dtype)
        for coefficient in coeffs[1:]:
            result = add(multiply(result, x), convert_to_tensor(coefficient, x.dtype))
        return result


def meshgrid(*args: Any, indexing: str = "xy", name: str | None = None) -> list[Tensor]:
    """Coordinate grids from 1-D tensors, as ``np.meshgrid`` (TF1's ``meshgrid``): with ``"xy"``
    the first two axes of the grids are swapped (``[len(y), len(x), ...]``), with ``"ij"`` they
    are in argument order.

    >>> import compiler as cc
    >>> [g.shape for g in cc.meshgrid(cc.constant([1, 2, 3]), cc.constant([4, 5]))]
    [(2, 3), (2, 3)]
    """
    if indexing not in ("xy", "ij"):
        raise ValueError(located(f"meshgrid: indexing must be 'xy' or 'ij', got {indexing!r}"))
    with composite_scope(name or "meshgrid", list(args)):
        vectors = [reshape(convert_to_tensor(v), [-1]) for v in args]
        rank = len(vectors)
        axes = list(builtins.range(rank))
        if indexing == "xy" and rank >= 2:
            axes[0], axes[1] = 1, 0
        placed = [reshape(v, [-1 if a == axes[i] else 1 for a in builtins.range(rank)])
                  for i, v in enumerate(vectors)]
        grids = []
        for i, v in enumerate(placed):
            grid = v
            for j, other in enumerate(placed):   # broadcast against every other axis, sizes known or fed
                if j != i:
                    grid = add(grid, zeros_like(other, dtype=v.dtype))
            grids.append(grid)
        return grids


def diag_part(input: Any, name: str | None = None) -> Tensor:  # noqa: A002
    """The diagonal of a tensor of shape ``[D1, ..., Dk, D1, ..., Dk]``: ``out[i1, ..., ik] =
    input[i1, ..., ik, i1, ..., ik]`` (TF1's ``diag_part``, the inverse of ``diag``; a batch of
    matrices is ``matrix_diag_part``'s)."""
    with composite_scope(name or "DiagPart", [input]):
        x = convert_to_tensor(input)
        half = len(x.shape) // 2
        sizes = x.shape[:half]
        if len(x.shape) % 2 or not x.shape or sizes != x.shape[half:] or None in x.shape:
            raise ValueError(located(f"diag_part: needs a tensor of shape [D1, ..., Dk, D1, ..., Dk] with known "
                                     f"sizes, got {x.name!r} of shape {list(x.shape)}"))
        count = math.prod(sizes)
        return reshape(matrix_diag_part(reshape(x, [count, count])), list(sizes))

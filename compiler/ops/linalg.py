"""Matrix multiplication: 2-D, or batched over any leading axes (which broadcast), with transpose flags.

It lowers to one loop nest over ``(batch, m, n, k)`` summing ``a * b`` over ``k``; transposes are
just other strides, so no copy is made.
"""
from __future__ import annotations

from typing import Any, Mapping, Sequence

import numpy as np

from ..graph import Operation, Tensor, located
from ..shapes import RuleError, broadcast_shapes, format_shape
from .array import reshape
from .base import LoopNest, OpDef
from .broadcast import unbroadcast
from .rules import numeric_dtype


def _matrix_dims(shape: tuple, transposed: bool) -> tuple[Any, Any]:
    rows, cols = shape[-2], shape[-1]
    return (cols, rows) if transposed else (rows, cols)


def _matmul_shape(shapes: Sequence[tuple], attrs: Mapping[str, Any]) -> tuple:
    a, b = shapes
    if len(a) < 2 or len(b) < 2:
        raise RuleError(f"matmul takes operands of rank 2 or more (matrices, or batches of them), "
                        f"got {format_shape(a)} and {format_shape(b)}")
    m, k_a = _matrix_dims(a, attrs["transpose_a"])
    k_b, n = _matrix_dims(b, attrs["transpose_b"])
    if k_a is not None and k_b is not None and k_a != k_b:
        raise RuleError(f"inner dimensions differ: {format_shape(a)} @ {format_shape(b)} "
                        f"(transpose_a={attrs['transpose_a']}, transpose_b={attrs['transpose_b']})")
    batch = broadcast_shapes(a[:-2], b[:-2])
    return tuple(batch) + (m, n)


def _matmul_nest(shapes: Sequence[tuple], out: tuple, attrs: Mapping[str, Any]) -> LoopNest:
    a, b = shapes
    batch_rank = len(out) - 2
    m_axis, n_axis, k_axis = batch_rank, batch_rank + 1, batch_rank + 2
    space = tuple(out) + (_matrix_dims(a, attrs["transpose_a"])[1],)

    def axes_of(shape: tuple, row_axis: int, col_axis: int, transposed: bool) -> tuple:
        lead = batch_rank - (len(shape) - 2)
        batch = tuple(None if shape[i] == 1 and out[lead + i] != 1 else lead + i
                      for i in range(len(shape) - 2))
        return batch + ((col_axis, row_axis) if transposed else (row_axis, col_axis))

    return LoopNest(space,
                    (axes_of(a, m_axis, k_axis, attrs["transpose_a"]),
                     axes_of(b, k_axis, n_axis, attrs["transpose_b"])),
                    (k_axis,), "sum", lambda sb, args: sb.mul(args[0], args[1]))


def _matmul_reference(values: Sequence[np.ndarray], attrs: Mapping[str, Any]) -> np.ndarray:
    a, b = (np.asarray(v) for v in values)
    if attrs["transpose_a"]:
        a = np.swapaxes(a, -1, -2)
    if attrs["transpose_b"]:
        b = np.swapaxes(b, -1, -2)
    return np.matmul(a, b)


def _matmul_grad(op: Operation, g: Tensor) -> list[Tensor]:
    a, b = op.inputs
    ta, tb = op.attrs["transpose_a"], op.attrs["transpose_b"]
    if not ta and not tb:
        grad_a, grad_b = matmul(g, b, transpose_b=True), matmul(a, g, transpose_a=True)
    elif not ta and tb:
        grad_a, grad_b = matmul(g, b), matmul(g, a, transpose_a=True)
    elif ta and not tb:
        grad_a, grad_b = matmul(b, g, transpose_b=True), matmul(a, g)
    else:
        grad_a = matmul(b, g, transpose_a=True, transpose_b=True)
        grad_b = matmul(g, a, transpose_a=True, transpose_b=True)
    if len(b.shape) == 2 and len(a.shape) > 2 and not ta and _known(a.shape[-1]) and _known(g.shape[-1]):
        # A matrix shared by a batch (``x @ W`` on sequences): its gradient is one product over
        # every row of the batch, not a batch of products summed afterwards.
        a_rows, g_rows = reshape(a, (-1, a.shape[-1])), reshape(g, (-1, g.shape[-1]))
        grad_b = matmul(g_rows, a_rows, transpose_a=True) if tb else matmul(a_rows, g_rows, transpose_a=True)
    return [unbroadcast(grad_a, a), unbroadcast(grad_b, b)]


def _known(size: int | None) -> bool:
    """Whether an axis's size is known and not 0 (so that ``-1`` can stand for the others)."""
    return size is not None and size > 0


MatMul = OpDef("MatMul", "reduce", _matmul_shape, numeric_dtype, reference=_matmul_reference,
               grad_rule=_matmul_grad, loop_nest=_matmul_nest)


def matmul(a: Any, b: Any, transpose_a: bool = False, transpose_b: bool = False, adjoint_a: bool = False,
           adjoint_b: bool = False, a_is_sparse: bool = False, b_is_sparse: bool = False,
           name: str | None = None) -> Tensor:
    """Matrix product of the last two axes; the leading (batch) axes broadcast, as in numpy's
    ``matmul`` and TF's ``BatchMatMulV2`` (e.g. attention's ``[batch, heads, queries, depth]``).

    >>> import numpy as np, compiler as cc
    >>> cc.matmul(cc.constant(np.ones((2, 3))), cc.constant(np.ones((3, 4)))).shape
    (2, 4)
    >>> cc.matmul(cc.constant(np.ones((5, 1, 2, 3))), cc.constant(np.ones((4, 3, 6)))).shape
    (5, 4, 2, 6)

    TF1's signature: ``adjoint_a``/``adjoint_b`` transpose (the dtypes are real); the sparsity
    hints are ignored.
    """
    for flag, adjoint, what in ((transpose_a, adjoint_a, "a"), (transpose_b, adjoint_b, "b")):
        if flag and adjoint:
            raise ValueError(located(f"matmul: give transpose_{what} or adjoint_{what}, not both (as TF1)"))
    return MatMul(a, b, transpose_a=bool(transpose_a or adjoint_a), transpose_b=bool(transpose_b or adjoint_b),
                  name=name)

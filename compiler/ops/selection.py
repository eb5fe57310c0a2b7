"""TF1's ``where(condition, x, y)`` (``cc.where``): the elementwise select of ``elementwise.where``,
except that a vector condition with higher-rank operands picks whole rows. A composition."""
from __future__ import annotations

from typing import Any

import numpy as np

from ..errors import ShapeError
from ..graph import Tensor, get_default_graph, located
from .array import identity, reshape, shape, size
from .base import convert_to_tensor
from .elementwise import equal, where
from .numerics import Assert


def where_rows(condition: Any, x: Any = None, y: Any = None, name: str | None = None) -> Tensor:
    """TF1's ``where(condition, x, y)``: ``x`` where ``condition`` else ``y``, broadcast together,
    except that a vector condition with a higher-rank ``x`` or ``y`` picks whole rows: its length
    must be their first size (checked when the graph is built, or in the step when a size is fed).

    >>> import compiler as cc
    >>> from runtime import Session
    >>> with Session() as sess:
    ...     sess.run(cc.where([True, False], [[1, 2], [3, 4]], [[5, 6], [7, 8]])).tolist()
    [[1, 2], [7, 8]]
    """
    if x is None and y is None:
        raise ValueError(located("where(condition) with one argument gives the coordinates of the true elements, "
                                 "whose count is known only when a step runs, and shapes here are fixed when it "
                                 "is compiled: use where(condition, x, y), or a mask (cast(condition, ...) * x)"))
    if x is None or y is None:
        raise ValueError(located("where: give both x and y (or neither, which is not supported)"))
    condition = convert_to_tensor(condition)
    rank = max(len(getattr(v, "shape", np.shape(v))) for v in (x, y))
    if len(condition.shape) != 1 or rank < 2:
        return where(condition, x, y, name=name)
    rows = next(convert_to_tensor(v) for v in (x, y) if len(getattr(v, "shape", np.shape(v))) == rank)
    count, expected = condition.shape[0], rows.shape[0]
    if count is not None and expected is not None:
        if count != expected:
            raise ShapeError(located(f"where: the condition has {count} entries for {expected} rows of "
                                     f"{rows.name!r}; a vector condition picks whole rows"))
    else:   # one of the sizes is fed: checked in the step (not broadcast from a size 1)
        check = Assert(equal(size(condition), shape(rows)[0]),
                       ["where: a vector condition needs one entry per row of", rows.name])
        with get_default_graph().control_dependencies([check]):
            condition = identity(condition)
    return where(reshape(condition, [-1] + [1] * (rank - 1)), x, y, name=name)

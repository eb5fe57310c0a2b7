"""Shape rules shared by ops: broadcasting (numpy's rules, with ``None`` for unknown) and axes."""
from __future__ import annotations

from typing import Sequence

import numpy as np


class RuleError(Exception):
    """Raised inside a shape or dtype rule; ``apply`` turns it into a ShapeError/DTypeError that
    names the op and the user's line."""

    def __init__(self, message: str, kind: str = "shape") -> None:
        super().__init__(message)
        self.kind = kind


def format_shape(shape: Sequence[int | None]) -> str:
    inner = ", ".join("?" if d is None else str(d) for d in shape)
    return f"({inner}{',' if len(shape) == 1 else ''})"


def broadcast_shapes(*shapes: Sequence[int | None]) -> tuple[int | None, ...]:
    """numpy broadcasting, with ``None`` (unknown until compile) broadcasting like any size."""
    rank = max((len(s) for s in shapes), default=0)
    result: list[int | None] = []
    for position in range(rank):
        dims = [s[len(s) - rank + position] for s in shapes if len(s) - rank + position >= 0]
        known = {d for d in dims if d is not None and d != 1}
        if len(known) > 1:
            raise RuleError("shapes " + ", ".join(format_shape(s) for s in shapes)
                            + " cannot be broadcast together")
        if known:
            result.append(known.pop())
        elif any(d is None for d in dims):
            result.append(None)
        else:
            result.append(1)
    return tuple(result)


def broadcast_dim_map(in_shape: Sequence[int | None], out_shape: Sequence[int | None]
                      ) -> tuple[int | None, ...]:
    """For each input dimension, the output dimension it walks (None where it is broadcast)."""
    lead = len(out_shape) - len(in_shape)
    return tuple(None if (d == 1 and out_shape[lead + i] != 1) else lead + i
                 for i, d in enumerate(in_shape))


def normalize_axis(axis: int, rank: int) -> int:
    """``axis`` (an int or a numpy integer, negative from the end) as a position in ``0..rank-1``."""
    if not isinstance(axis, (int, np.integer)) or isinstance(axis, (bool, np.bool_)):
        raise RuleError(f"axis must be an int, got {axis!r}")
    axis = int(axis)
    if not -rank <= axis < rank:
        raise RuleError(f"axis {axis} is out of range for a tensor of rank {rank}")
    return axis % rank


def normalize_axes(axis: int | Sequence[int] | None, rank: int) -> tuple[int, ...]:
    """``None`` means all axes; duplicates are an error."""
    if axis is None:
        return tuple(range(rank))
    if isinstance(axis, (int, np.integer)):
        items = [axis]
    elif isinstance(axis, (list, tuple, np.ndarray)):
        items = list(axis)
    else:
        raise RuleError(f"axis must be an int or a list of ints, got {axis!r}")
    result = tuple(sorted(normalize_axis(a, rank) for a in items))
    if len(set(result)) != len(result):
        raise RuleError(f"repeated axis in {axis!r}")
    return result

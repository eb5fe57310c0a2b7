"""Checking and converting what the user feeds: every needed placeholder, with the right shape,
in a dtype that converts without loss."""
from __future__ import annotations

from typing import Any, Mapping

import numpy as np

from compiler import dtypes
from compiler.errors import FeedError, GraphMismatchError
from compiler.graph import Graph, Tensor
from compiler.shapes import format_shape


def _describe(placeholder: Tensor) -> str:
    return (f"placeholder {placeholder.op.name!r} {format_shape(placeholder.shape)} "
            f"{placeholder.dtype.name} (defined at {placeholder.op.location})")


def convert_losslessly(value: Any, target: np.dtype) -> np.ndarray | None:
    """``value`` as an array of dtype ``target``, or None if that would lose information."""
    if not isinstance(value, (np.ndarray, np.generic)):
        # Python numbers and (nested) lists are literals: they take the placeholder's dtype when
        # their kind allows it (floats into float, ints into int or float, bools anywhere), as in TF1.
        literal = np.asarray(value)
        if literal.dtype.kind in "biu" or (literal.dtype.kind == "f" and target.kind == "f"):
            value = literal.astype(target)
    array = value if isinstance(value, np.ndarray) else np.asarray(value)
    if array.dtype != target:
        lossless = dtypes.can_convert_losslessly(array.dtype, target)
        if not lossless and array.dtype.kind in "iub" and target.kind in "iu":
            # Narrowing integers is fine when every value fits (e.g. int64 labels into int32).
            info = np.iinfo(target)
            lossless = array.size == 0 or (array.min() >= info.min and array.max() <= info.max)
        if not lossless:
            return None
        array = array.astype(target)
    return array


def convert_feed(placeholder: Tensor, value: Any) -> np.ndarray:
    """The fed value as an array of the placeholder's dtype, or a FeedError naming it."""
    array = convert_losslessly(value, placeholder.dtype)
    if array is None:
        given = np.asarray(value).dtype.name
        raise FeedError(f"cannot feed {given} data to {_describe(placeholder)} without losing information; "
                        f"convert it first (e.g. .astype({placeholder.dtype.name!r}))")
    if array.ndim != len(placeholder.shape) or any(
            d is not None and d != n for d, n in zip(placeholder.shape, array.shape)):
        raise FeedError(f"fed value of shape {array.shape} does not match {_describe(placeholder)}")
    return array


def check_feeds(graph: Graph, feed_dict: Mapping[Any, Any] | None, needed: list[Tensor]
                ) -> dict[Tensor, np.ndarray]:
    """Validate ``feed_dict`` against the placeholders the step needs."""
    feeds: dict[Tensor, np.ndarray] = {}
    for key, value in (feed_dict or {}).items():
        if isinstance(key, str):
            key = graph.get_tensor_by_name(key if ":" in key else key + ":0")
        if not isinstance(key, Tensor):
            raise FeedError(f"feed_dict keys must be placeholders, got {key!r}")
        if key.graph is not graph:
            raise GraphMismatchError(f"cannot feed {key.name!r}: it belongs to another graph than the session's")
        if key.op.type != "Placeholder":
            raise FeedError(f"can only feed placeholders; {key.name!r} is a {key.op.type} "
                            f"(defined at {key.op.location})")
        feeds[key] = convert_feed(key, value)
    for placeholder in needed:
        if placeholder not in feeds:
            raise FeedError(f"you must feed a value for {_describe(placeholder)}")
    return feeds

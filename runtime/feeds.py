"""Checking and converting what the user feeds: every needed placeholder, with the right shape,
in a dtype that converts without loss."""
from __future__ import annotations

from typing import Any, Mapping

import numpy as np

from compiler import dtypes
from compiler.errors import FeedError, GraphMismatchError
from compiler.graph import Graph, Tensor
from compiler.ops.base import unshaped_note
from compiler.shapes import format_shape

def _describe(tensor: Tensor) -> str:
    what = "placeholder" if tensor.op.type == "Placeholder" else f"{tensor.op.type} output"
    return (f"{what} {tensor.op.name!r} {format_shape(tensor.shape)} {tensor.dtype.name} "
            f"(defined at {tensor.op.location})")


def _is_literal(value: Any) -> bool:
    return not isinstance(value, (np.ndarray, np.generic))


def convert_losslessly(value: Any, target: np.dtype) -> np.ndarray | None:
    """``value`` as an array of dtype ``target``, or None if that would lose information."""
    return dtypes.convert_losslessly(np.asarray(value), target, _is_literal(value))


def convert_feed(placeholder: Tensor, value: Any) -> np.ndarray:
    """The fed value as an array of the placeholder's dtype, or a FeedError naming it."""
    if (type(value) is np.ndarray and value.dtype == placeholder.dtype and value.ndim == len(placeholder.shape)
            and all(d is None or d == n for d, n in zip(placeholder.shape, value.shape))):
        return value   # the common case, as the checks below would return it
    try:
        given = np.asarray(value)
    except (ValueError, TypeError) as exc:  # ragged nested lists, mostly
        where = dtypes.where_ragged(value)
        if where is None:
            raise FeedError(f"cannot feed this {type(value).__name__} to {_describe(placeholder)}: "
                            f"it does not convert to an array ({exc})") from None
        raise FeedError(f"cannot feed a ragged nested list to {_describe(placeholder)}: {where}; "
                        "every row must have the same length") from None
    not_numbers = dtypes.why_not_numbers(value, given)
    if not_numbers is not None:
        what = "None" if value is None else f"this {type(value).__name__}"
        why = "" if value is None else f": {not_numbers}"
        raise FeedError(f"cannot feed {what} to {_describe(placeholder)}{why}; "
                        f"feed numbers (e.g. an array of dtype {placeholder.dtype.name!r})")
    array = dtypes.convert_losslessly(given, placeholder.dtype, _is_literal(value))
    if array is None:
        raise FeedError(f"cannot feed {given.dtype.name} data to {_describe(placeholder)} without losing "
                        f"information; convert it first (e.g. .astype({placeholder.dtype.name!r}))")
    if array.ndim != len(placeholder.shape) or any(
            d is not None and d != n for d, n in zip(placeholder.shape, array.shape)):
        raise FeedError(f"fed value of shape {array.shape} does not match {_describe(placeholder)}"
                        f"{unshaped_note(placeholder)}")
    return array


def _unfeedable(tensor: Tensor) -> str | None:
    """Why ``tensor`` cannot be fed, or None: placeholders and, as in TF1, any computed value (the
    ops that compute it then do not run); not a variable (``Variable.load`` sets one), nor what an
    assignment, a branch or a loop returns."""
    op = tensor.op
    if op.type == "Variable":
        return "a variable: use Variable.load (or Session.load_variable) to set its value"
    region = getattr(op, "region", None) or getattr(op, "traced_in", None)
    if region is not None:
        return (f"computed inside a cond branch or a loop body (the function defined at {region.location}), which "
                f"may run many times or not at all: feed a value that the function reads from outside instead")
    if op.opdef.kind in ("state", "control", "group", "host"):
        return f"the result of {op.type} {op.name!r}: only placeholders and computed values are fed"
    return None


def check_is_mapping(feed_dict: Any) -> None:
    if feed_dict is not None and not isinstance(feed_dict, Mapping):
        raise FeedError(f"feed_dict must be a dict from placeholders (or their names) to values, got a "
                        f"{type(feed_dict).__name__}")


def fed_intermediates(graph: Graph, feed_dict: Mapping[Any, Any] | None) -> frozenset[Tensor]:
    """The tensors of ``feed_dict`` (names resolved) that are computed values, not placeholders."""
    check_is_mapping(feed_dict)
    fed = set()
    for key in feed_dict or ():
        if isinstance(key, str):
            key = graph.get_tensor_by_name(key if ":" in key else key + ":0")
        if isinstance(key, Tensor) and key.graph is graph and key.op.type != "Placeholder" and not _unfeedable(key):
            fed.add(key)
    return frozenset(fed)


def check_feeds(graph: Graph, feed_dict: Mapping[Any, Any] | None, needed: list[Tensor]
                ) -> dict[Tensor, np.ndarray]:
    """Validate ``feed_dict`` against the placeholders the step needs."""
    feeds: dict[Tensor, np.ndarray] = {}
    check_is_mapping(feed_dict)
    for key, value in (feed_dict or {}).items():
        if isinstance(key, str):
            key = graph.get_tensor_by_name(key if ":" in key else key + ":0")
        if not isinstance(key, Tensor):
            raise FeedError(f"feed_dict keys must be placeholders, got {key!r}")
        if key.graph is not graph:
            raise GraphMismatchError(f"cannot feed {key.name!r}: it belongs to another graph than the session's")
        refused = _unfeedable(key)
        if refused:
            raise FeedError(f"cannot feed {key.name!r}, {refused} (defined at {key.op.location})")
        feeds[key] = convert_feed(key, value)
    for placeholder in needed:
        if placeholder not in feeds:
            raise FeedError(f"you must feed a value for {_describe(placeholder)}")
    return feeds

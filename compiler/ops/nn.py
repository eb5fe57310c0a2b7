"""Neural-network functions (``cc.nn``): compositions of primitive ops, written to be stable.

None of these has rules of its own: their gradients come from the primitives they are built of.
"""
from __future__ import annotations

from typing import Any

from .. import dtypes
from ..errors import DTypeError, ShapeError
from ..graph import Tensor, user_location
from ..shapes import format_shape
from .array import one_hot, stop_gradient
from .base import convert_to_tensor
from .elementwise import relu, sigmoid, tanh  # noqa: F401  (re-exported as cc.nn.*)
from .reduction import reduce_logsumexp, reduce_sum


def log_softmax(logits: Any, axis: int = -1, name: str | None = None) -> Tensor:
    """``logits - logsumexp(logits)`` along ``axis``: stable for large or very negative logits."""
    logits = convert_to_tensor(logits)
    return logits - reduce_logsumexp(logits, axis=axis, keepdims=True)


def softmax(logits: Any, axis: int = -1, name: str | None = None) -> Tensor:
    """``exp(log_softmax(logits))``: each slice along ``axis`` sums to 1."""
    from .elementwise import exp
    return exp(log_softmax(logits, axis=axis))


def softmax_cross_entropy_with_logits(labels: Any = None, logits: Any = None, axis: int = -1,
                                      name: str | None = None) -> Tensor:
    """Per-example ``-sum(labels * log_softmax(logits))`` along ``axis``.

    As in TF1, the gradient flows only into ``logits`` (``labels`` are treated as constants).
    """
    logits = convert_to_tensor(logits)
    labels = convert_to_tensor(labels, logits.dtype)
    if labels.dtype != logits.dtype:
        raise DTypeError(f"softmax_cross_entropy_with_logits: labels are {labels.dtype.name} but "
                         f"logits are {logits.dtype.name} (at {user_location()})")
    return -reduce_sum(stop_gradient(labels) * log_softmax(logits, axis=axis), axis=axis)


def sparse_softmax_cross_entropy_with_logits(labels: Any = None, logits: Any = None,
                                             name: str | None = None) -> Tensor:
    """Per-example cross-entropy with integer class ``labels`` (int32/int64) of shape ``logits[:-1]``."""
    logits = convert_to_tensor(logits)
    labels = convert_to_tensor(labels)
    if not dtypes.is_integer(labels.dtype):
        raise DTypeError(f"sparse_softmax_cross_entropy_with_logits: labels must be int32 or int64, "
                         f"got {labels.dtype.name} (at {user_location()})")
    if len(labels.shape) != len(logits.shape) - 1:
        raise ShapeError(f"sparse_softmax_cross_entropy_with_logits: labels {format_shape(labels.shape)} "
                         f"must have rank one less than logits {format_shape(logits.shape)} "
                         f"(at {user_location()})")
    depth = logits.shape[-1]
    if depth is None:
        raise ShapeError(f"sparse_softmax_cross_entropy_with_logits: the class dimension of logits "
                         f"{format_shape(logits.shape)} must be known (at {user_location()})")
    targets = one_hot(labels, depth, dtype=logits.dtype)
    return -reduce_sum(targets * log_softmax(logits), axis=-1)

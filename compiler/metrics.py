"""Streaming metrics (TF1's ``tf.metrics``): each returns ``(value, update_op)``.

A metric keeps its running totals in local variables (``GraphKeys.LOCAL_VARIABLES`` and
``METRIC_VARIABLES``, zero at first, reset by ``cc.local_variables_initializer()``).
``update_op`` adds a batch to the totals and gives the metric over everything seen so far;
``value`` reads the metric without changing it. Both are compositions of ordinary ops, so the
update runs inside the compiled step with the rest of an evaluation step.

>>> import numpy as np, compiler as cc
>>> from runtime import Session
>>> labels, predictions = cc.placeholder("int64", (None,)), cc.placeholder("int64", (None,))
>>> accuracy, update = cc.metrics.accuracy(labels, predictions)
>>> with Session() as sess:
...     _ = sess.run(cc.local_variables_initializer())
...     _ = sess.run(update, {labels: [1, 2, 3], predictions: [1, 2, 0]})
...     _ = sess.run(update, {labels: [4], predictions: [4]})
...     print(sess.run(accuracy))
0.75
"""
from __future__ import annotations

from typing import Any, Sequence

import numpy as np

from . import dtypes
from .errors import ShapeError
from .graph import GraphKeys, Tensor, get_default_graph, located
from .ops.array import expand_dims, identity, ones_like, squeeze
from .ops.base import convert_to_tensor
from .losses import weights_like
from .ops.elementwise import (cast, div_no_nan, equal, logical_and, logical_not, sqrt, squared_difference,
                              subtract, abs as abs_)
from .ops.reduction import reduce_sum
from .ops.state import assign_add
from .ops.sources import Variable

__all__ = ["accuracy", "false_negatives", "false_positives", "mean", "mean_absolute_error", "mean_squared_error",
           "precision", "recall", "root_mean_squared_error", "true_negatives", "true_positives"]

METRIC_VARIABLES = "metric_variables"
_COLLECTIONS = (GraphKeys.LOCAL_VARIABLES, METRIC_VARIABLES)


def _total(name: str) -> Tensor:
    """A local float32 total, a variable of its own (as TF1's ``metric_variable``: never shared
    through a reusing variable scope; a metric built twice gets ``m/`` and ``m_1/``)."""
    return Variable(np.zeros((), np.float32), trainable=False, collections=list(_COLLECTIONS), name=name)


def _collect(value: Tensor, update: Tensor, metrics_collections: Sequence[str] | None,
             updates_collections: Sequence[str] | None) -> tuple[Tensor, Tensor]:
    for key in metrics_collections or ():
        value.graph.add_to_collection(key, value)
    for key in updates_collections or ():
        update.graph.add_to_collection(key, update)
    return value, update


def _weighted(function: str, values: Tensor, weights: Any) -> tuple[Tensor, Tensor]:
    """``values * weights`` and the sum of the weights (as many as the values when None), float32;
    ``weights`` a scalar or of the values' rank, each size 1 or the values' (as TF1's)."""
    values = cast(values, dtypes.float32)
    if weights is None:
        return values, reduce_sum(ones_like(values))
    weights = weights_like(function, cast(convert_to_tensor(weights), dtypes.float32), values)
    return values * weights, reduce_sum(weights * ones_like(values))


def mean(values: Any, weights: Any = None, metrics_collections: Sequence[str] | None = None,
         updates_collections: Sequence[str] | None = None, name: str | None = None) -> tuple[Tensor, Tensor]:
    """The (weighted) mean of every value seen, as TF1's ``tf.metrics.mean``: local variables
    ``total`` and ``count``; the mean of nothing is 0."""
    with get_default_graph().name_scope(name, default_name="mean"):
        weighted, count_of_batch = _weighted("mean", convert_to_tensor(values), weights)
        total, count = _total("total"), _total("count")
        update_total = assign_add(total, reduce_sum(weighted))
        update_count = assign_add(count, count_of_batch)
        value = div_no_nan(identity(total), identity(count), name="value")
        update = div_no_nan(update_total, update_count, name="update_op")
    return _collect(value, update, metrics_collections, updates_collections)


def _matching(function: str, labels: Any, predictions: Any, weights: Any = None) -> tuple[Tensor, Tensor, Any]:
    """``labels``, ``predictions`` and ``weights`` brought to one rank as TF1's metrics do: where the
    ranks of labels and predictions differ by one, a trailing axis of size 1 goes (a column of class
    ids against the argmax); weights of one rank more lose their trailing axis, of one less gain one."""
    labels, predictions = convert_to_tensor(labels), convert_to_tensor(predictions)
    if len(predictions.shape) == len(labels.shape) + 1 and predictions.shape[-1] == 1:
        predictions = squeeze(predictions, [-1])
    elif len(labels.shape) == len(predictions.shape) + 1 and labels.shape[-1] == 1:
        labels = squeeze(labels, [-1])
    if len(labels.shape) != len(predictions.shape) or any(
            a is not None and b is not None and a != b for a, b in zip(labels.shape, predictions.shape)):
        raise ShapeError(located(f"{function}: labels {labels.shape} and predictions {predictions.shape} must have "
                                 "the same shape"))
    if weights is not None:
        weights = convert_to_tensor(weights)
        rank, weights_rank = len(predictions.shape), len(weights.shape)
        if weights_rank and weights_rank == rank + 1 and weights.shape[-1] == 1:
            weights = squeeze(weights, [-1])
        elif weights_rank and weights_rank == rank - 1:
            weights = expand_dims(weights, -1)
    return labels, predictions, weights


def accuracy(labels: Any, predictions: Any, weights: Any = None, metrics_collections: Sequence[str] | None = None,
             updates_collections: Sequence[str] | None = None, name: str | None = None) -> tuple[Tensor, Tensor]:
    """How often ``predictions`` equals ``labels`` (weighted), over everything seen (TF1's)."""
    labels, predictions, weights = _matching("accuracy", labels, predictions, weights)
    if labels.dtype != predictions.dtype:
        predictions = cast(predictions, labels.dtype)
    return mean(equal(predictions, labels), weights, metrics_collections, updates_collections, name or "accuracy")


def mean_squared_error(labels: Any, predictions: Any, weights: Any = None,
                       metrics_collections: Sequence[str] | None = None,
                       updates_collections: Sequence[str] | None = None,
                       name: str | None = None) -> tuple[Tensor, Tensor]:
    """The mean of ``(predictions - labels) ** 2`` over everything seen (TF1's)."""
    labels, predictions, weights = _matching("mean_squared_error", labels, predictions, weights)
    return mean(squared_difference(cast(predictions, dtypes.float32), cast(labels, dtypes.float32)), weights,
                metrics_collections, updates_collections, name or "mean_squared_error")


def mean_absolute_error(labels: Any, predictions: Any, weights: Any = None,
                        metrics_collections: Sequence[str] | None = None,
                        updates_collections: Sequence[str] | None = None,
                        name: str | None = None) -> tuple[Tensor, Tensor]:
    """The mean of ``|predictions - labels|`` over everything seen (TF1's)."""
    labels, predictions, weights = _matching("mean_absolute_error", labels, predictions, weights)
    return mean(abs_(subtract(cast(predictions, dtypes.float32), cast(labels, dtypes.float32))), weights,
                metrics_collections, updates_collections, name or "mean_absolute_error")


def root_mean_squared_error(labels: Any, predictions: Any, weights: Any = None,
                            metrics_collections: Sequence[str] | None = None,
                            updates_collections: Sequence[str] | None = None,
                            name: str | None = None) -> tuple[Tensor, Tensor]:
    """The square root of ``mean_squared_error`` (TF1's)."""
    value, update = mean_squared_error(labels, predictions, weights, name=name or "root_mean_squared_error")
    return _collect(sqrt(value), sqrt(update), metrics_collections, updates_collections)


def _counted(function: str, labels: Any, predictions: Any, weights: Any, label_is: bool, prediction_is: bool,
             name: str | None, metrics_collections: Sequence[str] | None,
             updates_collections: Sequence[str] | None) -> tuple[Tensor, Tensor]:
    """The (weighted) count of the entries whose label and prediction (as bools) are the ones given."""
    labels, predictions, weights = _matching(function, labels, predictions, weights)
    truth, guess = (cast(v, dtypes.bool_) if v.dtype != dtypes.bool_ else v for v in (labels, predictions))
    hit = logical_and(truth if label_is else logical_not(truth), guess if prediction_is else logical_not(guess))
    with get_default_graph().name_scope(name, default_name=function):
        weighted, _ = _weighted(function, hit, weights)
        count = _total("count")
        value, update = identity(count), assign_add(count, reduce_sum(weighted))
    return _collect(value, update, metrics_collections, updates_collections)


def true_positives(labels: Any, predictions: Any, weights: Any = None,
                   metrics_collections: Sequence[str] | None = None,
                   updates_collections: Sequence[str] | None = None,
                   name: str | None = None) -> tuple[Tensor, Tensor]:
    """How many entries are true in both ``labels`` and ``predictions`` (TF1's)."""
    return _counted("true_positives", labels, predictions, weights, True, True, name, metrics_collections,
                    updates_collections)


def false_positives(labels: Any, predictions: Any, weights: Any = None,
                    metrics_collections: Sequence[str] | None = None,
                    updates_collections: Sequence[str] | None = None,
                    name: str | None = None) -> tuple[Tensor, Tensor]:
    """How many entries are false in ``labels`` and true in ``predictions`` (TF1's)."""
    return _counted("false_positives", labels, predictions, weights, False, True, name, metrics_collections,
                    updates_collections)


def false_negatives(labels: Any, predictions: Any, weights: Any = None,
                    metrics_collections: Sequence[str] | None = None,
                    updates_collections: Sequence[str] | None = None,
                    name: str | None = None) -> tuple[Tensor, Tensor]:
    """How many entries are true in ``labels`` and false in ``predictions`` (TF1's)."""
    return _counted("false_negatives", labels, predictions, weights, True, False, name, metrics_collections,
                    updates_collections)


def true_negatives(labels: Any, predictions: Any, weights: Any = None,
                   metrics_collections: Sequence[str] | None = None,
                   updates_collections: Sequence[str] | None = None,
                   name: str | None = None) -> tuple[Tensor, Tensor]:
    """How many entries are false in both ``labels`` and ``predictions`` (TF1's)."""
    return _counted("true_negatives", labels, predictions, weights, False, False, name, metrics_collections,
                    updates_collections)


def _ratio(function: str, labels: Any, predictions: Any, weights: Any, other_label: bool, other_prediction: bool,
           name: str | None, metrics_collections: Sequence[str] | None,
           updates_collections: Sequence[str] | None) -> tuple[Tensor, Tensor]:
    """``tp / (tp + other)``, with ``other`` the false positives (precision) or negatives (recall)."""
    labels, predictions, weights = _matching(function, labels, predictions, weights)
    with get_default_graph().name_scope(name, default_name=function):
        hits, hits_update = _counted("true_positives", labels, predictions, weights, True, True, None, None, None)
        misses, misses_update = _counted("false_positives" if other_prediction else "false_negatives", labels,
                                         predictions, weights, other_label, other_prediction, None, None, None)
        value = div_no_nan(hits, hits + misses, name="value")
        update = div_no_nan(hits_update, hits_update + misses_update, name="update_op")
    return _collect(value, update, metrics_collections, updates_collections)


def precision(labels: Any, predictions: Any, weights: Any = None, metrics_collections: Sequence[str] | None = None,
              updates_collections: Sequence[str] | None = None, name: str | None = None) -> tuple[Tensor, Tensor]:
    """``true_positives / (true_positives + false_positives)`` over everything seen, 0 before any
    positive prediction (TF1's)."""
    return _ratio("precision", labels, predictions, weights, False, True, name, metrics_collections,
                  updates_collections)


def recall(labels: Any, predictions: Any, weights: Any = None, metrics_collections: Sequence[str] | None = None,
           updates_collections: Sequence[str] | None = None, name: str | None = None) -> tuple[Tensor, Tensor]:
    """``true_positives / (true_positives + false_negatives)`` over everything seen, 0 before any
    positive label (TF1's)."""
    return _ratio("recall", labels, predictions, weights, True, False, name, metrics_collections,
                  updates_collections)


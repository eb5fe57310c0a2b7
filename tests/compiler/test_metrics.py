"""Streaming metrics (``cc.metrics``) against numpy over several batches, as TF1's."""
from __future__ import annotations

from typing import Any, Callable

import numpy as np
import pytest

import compiler as cc
from runtime import Session

RNG = np.random.default_rng(0)
BATCHES = [(RNG.integers(0, 2, 7), RNG.integers(0, 2, 7), RNG.uniform(0.0, 2.0, 7)) for _ in range(3)]


def _precision(y: np.ndarray, p: np.ndarray, w: np.ndarray) -> float:
    hits, guesses = (w * (y & p)).sum(), (w * p).sum()
    return hits / guesses if guesses else 0.0


def _recall(y: np.ndarray, p: np.ndarray, w: np.ndarray) -> float:
    hits, truths = (w * (y & p)).sum(), (w * y).sum()
    return hits / truths if truths else 0.0


# metric -> (numpy over everything seen: labels, predictions, weights -> value, the local variables' names)
METRICS: dict[str, tuple[Callable[..., Any], Callable[..., float], list[str]]] = {
    "accuracy": (cc.metrics.accuracy, lambda y, p, w: (w * (y == p)).sum() / w.sum(),
                 ["accuracy/total", "accuracy/count"]),
    "mean_squared_error": (cc.metrics.mean_squared_error, lambda y, p, w: (w * (y - p) ** 2).sum() / w.sum(),
                           ["mean_squared_error/total", "mean_squared_error/count"]),
    "mean_absolute_error": (cc.metrics.mean_absolute_error, lambda y, p, w: (w * abs(y - p)).sum() / w.sum(),
                            ["mean_absolute_error/total", "mean_absolute_error/count"]),
    "root_mean_squared_error": (cc.metrics.root_mean_squared_error,
                                lambda y, p, w: np.sqrt((w * (y - p) ** 2).sum() / w.sum()),
                                ["root_mean_squared_error/total", "root_mean_squared_error/count"]),
    "true_positives": (cc.metrics.true_positives, lambda y, p, w: (w * (y & p)).sum(), ["true_positives/count"]),
    "false_positives": (cc.metrics.false_positives, lambda y, p, w: (w * (~y & p)).sum(),
                        ["false_positives/count"]),
    "false_negatives": (cc.metrics.false_negatives, lambda y, p, w: (w * (y & ~p)).sum(),
                        ["false_negatives/count"]),
    "true_negatives": (cc.metrics.true_negatives, lambda y, p, w: (w * (~y & ~p)).sum(), ["true_negatives/count"]),
    "precision": (cc.metrics.precision, _precision, ["precision/true_positives/count",
                                                     "precision/false_positives/count"]),
    "recall": (cc.metrics.recall, _recall, ["recall/true_positives/count", "recall/false_negatives/count"]),
}


@pytest.mark.parametrize("target", ["cpu", "reference"])
@pytest.mark.parametrize("weighted", [False, True])
@pytest.mark.parametrize("name", METRICS)
def test_a_metric_accumulates_over_batches_as_numpy(name: str, weighted: bool, target: str) -> None:
    metric, formula, variables = METRICS[name]
    with cc.Graph().as_default() as graph:
        labels, predictions = cc.placeholder("int64", (None,)), cc.placeholder("int64", (None,))
        weights = cc.placeholder("float32", (None,)) if weighted else None
        value, update = metric(labels, predictions, weights=weights)
    assert [v.op.name for v in cc.local_variables(graph)] == variables
    assert not cc.trainable_variables(graph) and graph.get_collection("metric_variables") == cc.local_variables(graph)
    seen: list[np.ndarray] = [np.zeros(0, np.int64)] * 2 + [np.zeros(0)]
    with Session(graph, target=target) as sess:
        sess.run(cc.local_variables_initializer())
        assert sess.run(value) == 0.0   # nothing seen: 0, not NaN
        for y, p, w in BATCHES:
            feeds = {labels: y, predictions: p, **({weights: w.astype("float32")} if weighted else {})}
            seen = [np.concatenate([a, b]) for a, b in zip(seen, (y, p, w if weighted else np.ones(7)))]
            expected = formula(seen[0].astype(bool) if "positive" in name or "negative" in name
                               or name in ("precision", "recall") else seen[0],
                               seen[1].astype(bool) if "positive" in name or "negative" in name
                               or name in ("precision", "recall") else seen[1], seen[2])
            np.testing.assert_allclose(sess.run(update, feeds), expected, rtol=1e-5)
            np.testing.assert_allclose(sess.run(value), expected, rtol=1e-5)
        sess.run(cc.local_variables_initializer())
        assert sess.run(value) == 0.0


@pytest.mark.parametrize("target", ["cpu", "reference"])
@pytest.mark.parametrize("column", ["labels", "predictions", "weights"])
@pytest.mark.parametrize("name", METRICS)
def test_a_trailing_axis_of_size_1_is_squeezed_as_tf1_does(name: str, column: str, target: str) -> None:
    # TF1's metrics drop a trailing size-1 axis where the ranks differ by one (a column of class ids
    # against an argmax), and fit weights of one rank more or less; these failed with ShapeError.
    metric, formula, _ = METRICS[name]
    y, p, w = BATCHES[0]
    shapes = {key: (None, 1) if key == column else (None,) for key in ("labels", "predictions", "weights")}
    values = {key: value.reshape(-1, 1) if key == column else value
              for key, value in (("labels", y), ("predictions", p), ("weights", w.astype("float32")))}
    with cc.Graph().as_default() as graph:
        labels, predictions = cc.placeholder("int64", shapes["labels"]), cc.placeholder("int64", shapes["predictions"])
        weights = cc.placeholder("float32", shapes["weights"])
        _, update = metric(labels, predictions, weights=weights)
    as_bools = "positive" in name or "negative" in name or name in ("precision", "recall")
    expected = formula(y.astype(bool) if as_bools else y, p.astype(bool) if as_bools else p, w)
    with Session(graph, target=target) as sess:
        sess.run(cc.local_variables_initializer())
        got = sess.run(update, {labels: values["labels"], predictions: values["predictions"],
                                weights: values["weights"]})
    np.testing.assert_allclose(got, expected, rtol=1e-5)


def test_metric_collections_and_errors() -> None:
    with cc.Graph().as_default():
        value, update = cc.metrics.mean([1.0, 2.0], metrics_collections=["m"], updates_collections=["u"], name="avg")
        assert cc.get_collection("m") == [value] and cc.get_collection("u") == [update]
        assert [v.op.name for v in cc.local_variables()] == ["avg/total", "avg/count"]
        with pytest.raises(cc.ShapeError, match=r"accuracy: labels \(3,\) and predictions \(2,\) must have the same "
                                                r"shape .*test_metrics.py"):
            cc.metrics.accuracy([1, 2, 3], [1, 2])
        with pytest.raises(cc.ShapeError, match=r"precision: labels \(3, 2\) and predictions \(3,\) must"):
            cc.metrics.precision(np.ones((3, 2), bool), np.ones(3, bool))
        with pytest.raises(cc.ShapeError, match=r"mean: weights \(3,\) must be a scalar or have the values' rank"):
            cc.metrics.mean(np.zeros((3, 1)), weights=np.ones(3))


def test_metrics_never_share_their_totals_through_variable_scopes() -> None:
    with cc.Graph().as_default() as graph:
        x = cc.placeholder("float32", (None,))
        with cc.variable_scope("eval", reuse=cc.AUTO_REUSE):
            first, first_update = cc.metrics.mean(x, name="m")
            second, second_update = cc.metrics.mean(x * 9.0, name="m")
        with cc.variable_scope("model", reuse=True):   # an evaluation tower: built as anywhere else
            _, accuracy_update = cc.metrics.accuracy([1, 2], [1, 3])
    assert [v.op.name for v in cc.local_variables(graph)] == [
        "eval/m/total", "eval/m/count", "eval/m_1/total", "eval/m_1/count", "model/accuracy/total",
        "model/accuracy/count"]
    with Session(graph) as sess:
        sess.run(cc.local_variables_initializer())
        assert sess.run([first_update, second_update, accuracy_update], {x: [1.0, 1.0]}) == [1.0, 9.0, 0.5]

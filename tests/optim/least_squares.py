"""The small least-squares problem the optimizer tests train: loss = sum((X @ W + b - Y)**2)."""
from __future__ import annotations

import numpy as np

import compiler as cc


def least_squares_problem(seed: int) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """(X [5x3], Y [5x2], initial W [3x2], initial b [2]), float64, drawn from ``seed``."""
    rng = np.random.default_rng(seed)
    return (rng.normal(size=(5, 3)), rng.normal(size=(5, 2)), rng.normal(size=(3, 2)), rng.normal(size=(2,)))


def least_squares_grads(x: np.ndarray, y: np.ndarray, w: np.ndarray, b: np.ndarray
                        ) -> tuple[np.ndarray, np.ndarray]:
    """d/dW and d/db of sum((x @ w + b - y)**2)."""
    residual = x @ w + b - y
    return 2.0 * x.T @ residual, 2.0 * residual.sum(axis=0)


def least_squares_graph(x: np.ndarray, y: np.ndarray, w0: np.ndarray, b0: np.ndarray
                        ) -> tuple[cc.Variable, cc.Variable, cc.Tensor]:
    """Variables W and b and the loss sum((x @ W + b - y)**2), in the default graph."""
    w = cc.Variable(w0, name="W")
    b = cc.Variable(b0, name="b")
    return w, b, cc.reduce_sum(cc.square(cc.constant(x) @ w + b - cc.constant(y)))

"""Custom gradients: a numerically stable log(1 + e^x), and gradient clipping in the backward pass.

``@cc.custom_gradient`` lets a function return its own gradient rule next to its value;
``cc.gradients`` and ``Optimizer.minimize`` then use that rule instead of differentiating the body.

1. ``log1pexp(x) = log(1 + e^x)`` computed naively overflows for large ``x``; differentiating it
   gives ``inf / inf = nan``. Its custom gradient ``sigmoid(x)`` stays finite, so a logistic
   regression started far from the optimum trains instead of turning into NaNs.
2. ``clip_gradient(x, limit)`` is the identity going forward and clips the gradient flowing back,
   so one badly scaled term cannot blow up an update.

Run it with::

    python examples/custom_gradient.py
    python examples/custom_gradient.py --target reference

It prints the gradients with and without the custom rule, the training runs, and finally
``custom gradients used: OK`` when every value matches the custom rules.
"""
from __future__ import annotations

import argparse
import sys

import numpy as np

import compiler as cc
import optim
from runtime import Session


@cc.custom_gradient
def log1pexp(x: cc.Tensor) -> tuple[cc.Tensor, object]:
    """``log(1 + e^x)`` whose gradient is ``sigmoid(x)`` (finite even where ``e^x`` overflows)."""
    def grad_fn(dy: cc.Tensor) -> cc.Tensor:
        return dy * cc.sigmoid(x)
    return cc.log1p(cc.exp(x)), grad_fn


def clip_gradient(x: cc.Tensor, limit: float) -> cc.Tensor:
    """The identity, whose gradient is clipped to ``[-limit, limit]`` elementwise."""
    @cc.custom_gradient
    def clipped(v: cc.Tensor) -> tuple[cc.Tensor, object]:
        return cc.identity(v), lambda dy: cc.clip_by_value(dy, -limit, limit)
    return clipped(x)


def compare_gradients(target: str) -> bool:
    graph = cc.Graph()
    with graph.as_default():
        x = cc.placeholder("float64", shape=(3,), name="x")
        (custom,) = cc.gradients(cc.reduce_sum(log1pexp(x)), [x])
        (naive,) = cc.gradients(cc.reduce_sum(cc.log1p(cc.exp(x))), [x])
    values = np.array([0.0, 10.0, 1000.0])
    with Session(graph, target=target) as sess:
        got_custom, got_naive = sess.run([custom, naive], {x: values})
    print(f"x                          : {values}")
    print(f"d/dx log1pexp, custom rule : {np.round(got_custom, 6)}")
    print(f"d/dx log(1 + exp(x)), naive: {np.round(got_naive, 6)}")
    return bool(np.allclose(got_custom, 1 / (1 + np.exp(-values)))) and bool(np.isnan(got_naive[2]))


def train_logistic_regression(target: str, use_custom: bool, steps: int) -> float:
    """Logistic regression in float32, ``mean(log(1 + exp(-y * (X @ w))))``, from a huge ``w``."""
    rng = np.random.default_rng(0)
    features = rng.normal(size=(64, 2)).astype(np.float32)
    labels = np.where(features @ np.array([1.0, -2.0]) > 0, 1.0, -1.0).astype(np.float32)
    graph = cc.Graph()
    with graph.as_default():
        x = cc.constant(features)
        y = cc.constant(labels.reshape(64, 1))
        # Far off and pointing the wrong way: e^margin overflows float32 (above e^88) for most rows.
        w = cc.Variable(np.array([[-40.0], [80.0]], np.float32), name="w")
        margins = -y * (x @ w)
        losses = log1pexp(margins) if use_custom else cc.log1p(cc.exp(margins))
        loss = cc.reduce_mean(losses)
        train = optim.GradientDescentOptimizer(10.0).minimize(loss)
        accuracy = cc.reduce_mean(cc.cast(cc.greater(y * (x @ w), 0.0), "float32"))
    with Session(graph, target=target) as sess:
        for _ in range(steps):
            sess.run(train)
        final_w, final_accuracy = sess.run([w, accuracy])
    name = "custom gradient" if use_custom else "naive gradient "
    print(f"logistic regression, {name}: w = {np.round(final_w.ravel(), 3)}, "
          f"train accuracy {final_accuracy:.3f}")
    return float(final_accuracy) if np.all(np.isfinite(final_w)) else float("nan")


def clipped_step(target: str) -> bool:
    graph = cc.Graph()
    with graph.as_default():
        w = cc.Variable(np.array([3.0, -0.2, 50.0]), name="w")
        loss = cc.reduce_sum(cc.square(clip_gradient(w, limit=1.0)))    # raw gradient 2 w
        train = optim.GradientDescentOptimizer(0.1).minimize(loss)
    with Session(graph, target=target) as sess:
        sess.run(train)
        new_w = sess.run(w)
    expected = w.initial_value - 0.1 * np.clip(2 * w.initial_value, -1.0, 1.0)
    print(f"one step with clipped gradients: w {w.initial_value} -> {np.round(new_w, 6)} "
          f"(unclipped step would give {w.initial_value - 0.1 * 2 * w.initial_value})")
    return bool(np.allclose(new_w, expected))


def main() -> int:
    parser = argparse.ArgumentParser(description="Custom gradients with graphgrad.")
    parser.add_argument("--target", default="cpu", choices=["cpu", "reference"])
    parser.add_argument("--steps", type=int, default=100, help="gradient-descent steps")
    args = parser.parse_args()
    ok = compare_gradients(args.target)
    custom_accuracy = train_logistic_regression(args.target, use_custom=True, steps=args.steps)
    naive_accuracy = train_logistic_regression(args.target, use_custom=False, steps=args.steps)
    ok = ok and custom_accuracy > 0.9 and np.isnan(naive_accuracy)
    ok = clipped_step(args.target) and ok
    print(f"custom gradients used: {'OK' if ok else 'MISMATCH'}")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())

"""Fit a linear model ``y = X @ w + b`` to synthetic data with plain gradient descent.

The smallest complete graphgrad program: placeholders for the data, Variables for the parameters,
a mean-squared-error loss, and ``optim.GradientDescentOptimizer(...).minimize(loss)``, which adds the
symbolic gradients and the update ops. Each ``sess.run(train)`` is one compiled native call.

Run it with::

    python examples/linear_regression.py
    python examples/linear_regression.py --steps 500 --learning-rate 0.1 --seed 3

It prints the learned weights and bias next to the true ones, and the final loss.
"""
from __future__ import annotations

import argparse

import numpy as np

import compiler as cc
import optim
from runtime import Session


def parse_args() -> argparse.Namespace:
    parser = argparse.ArgumentParser(description="Linear regression with graphgrad.")
    parser.add_argument("--samples", type=int, default=256, help="number of synthetic examples")
    parser.add_argument("--features", type=int, default=3, help="number of input features")
    parser.add_argument("--steps", type=int, default=300, help="gradient-descent steps (full batch)")
    parser.add_argument("--learning-rate", type=float, default=0.1, help="gradient-descent step size")
    parser.add_argument("--noise", type=float, default=0.01, help="standard deviation of the label noise")
    parser.add_argument("--seed", type=int, default=0, help="seed for the data")
    return parser.parse_args()


def make_data(samples: int, features: int, noise: float, rng: np.random.Generator
              ) -> tuple[np.ndarray, np.ndarray, np.ndarray, float]:
    """Inputs ``X``, targets ``y = X @ w + b + noise``, and the true ``w`` and ``b``."""
    true_w = rng.uniform(-2.0, 2.0, size=features).astype(np.float32)
    true_b = float(rng.uniform(-1.0, 1.0))
    inputs = rng.standard_normal((samples, features)).astype(np.float32)
    targets = (inputs @ true_w + true_b + noise * rng.standard_normal(samples)).astype(np.float32)
    return inputs, targets, true_w, true_b


def main() -> None:
    args = parse_args()
    rng = np.random.default_rng(args.seed)
    inputs, targets, true_w, true_b = make_data(args.samples, args.features, args.noise, rng)

    x = cc.placeholder("float32", shape=(None, args.features), name="x")
    y = cc.placeholder("float32", shape=(None,), name="y")
    w = cc.Variable(np.zeros((args.features, 1), np.float32), name="w")
    b = cc.Variable(np.zeros((), np.float32), name="b")
    prediction = cc.reshape(x @ w, (-1,)) + b
    loss = cc.reduce_mean(cc.square(prediction - y))
    train = optim.GradientDescentOptimizer(args.learning_rate).minimize(loss)

    feed = {x: inputs, y: targets}
    with Session() as sess:
        for step in range(args.steps):
            _, loss_value = sess.run([train, loss], feed_dict=feed)
            if step % 50 == 0:
                print(f"step {step:4d}  loss {float(loss_value):.6f}")
        learned_w, learned_b, final_loss = sess.run([w, b, loss], feed_dict=feed)

    print(f"{'parameter':<10}{'true':>10}{'learned':>10}")
    for index in range(args.features):
        print(f"{f'w[{index}]':<10}{true_w[index]:>10.4f}{learned_w[index, 0]:>10.4f}")
    print(f"{'b':<10}{true_b:>10.4f}{float(learned_b):>10.4f}")
    print(f"final loss: {float(final_loss):.6f}")


if __name__ == "__main__":
    main()

"""``GradientDescentOptimizer``: ``var -= learning_rate * grad``."""
from __future__ import annotations

from typing import Any

import compiler as cc
from compiler.graph import Tensor

from .optimizer import HyperParameter, Optimizer, _call_if_callable


class GradientDescentOptimizer(Optimizer):
    """Plain gradient descent (TF1's ``GradientDescentOptimizer``): ``var -= learning_rate * grad``.

    ``learning_rate`` is a Python number, a Tensor (e.g. a placeholder fed each step), or a
    zero-argument callable returning either.

    >>> import numpy as np
    >>> import compiler as cc
    >>> import optim
    >>> from runtime import Session
    >>> w = cc.Variable(np.array([1.0, -2.0]), name="w")
    >>> train = optim.GradientDescentOptimizer(0.25).minimize(cc.reduce_sum(w * w))
    >>> with Session(target="reference") as sess:
    ...     _ = sess.run(train)
    ...     print(sess.run(w))          # w - 0.25 * 2w
    [ 0.5 -1. ]
    """

    def __init__(self, learning_rate: HyperParameter, use_locking: bool = False,
                 name: str = "GradientDescent") -> None:
        super().__init__(use_locking, name)
        self._learning_rate = learning_rate

    def _prepare(self) -> None:
        self._learning_rate_value = _call_if_callable(self._learning_rate)

    def _apply_dense(self, grad: Tensor, var: cc.Variable) -> Any:
        lr = self._hyper("learning_rate", self._learning_rate_value, var.dtype)
        return cc.assign_sub(var, lr * grad)

"""``MomentumOptimizer``: heavy-ball or Nesterov momentum, TF1's ``ApplyMomentum`` equations."""
from __future__ import annotations

from typing import Any

import compiler as cc
from compiler.graph import Tensor

from .optimizer import HyperParameter, Optimizer, _call_if_callable


class MomentumOptimizer(Optimizer):
    """Momentum (TF1's ``MomentumOptimizer``), with one slot "momentum" per variable::

        accum = momentum * accum + grad
        var  -= learning_rate * accum                                    # use_nesterov=False
        var  -= learning_rate * grad + learning_rate * momentum * accum  # use_nesterov=True

    >>> import numpy as np
    >>> import compiler as cc
    >>> import optim
    >>> from runtime import Session
    >>> w = cc.Variable(np.array([1.0]), name="w")
    >>> opt = optim.MomentumOptimizer(0.1, momentum=0.9)
    >>> train = opt.minimize(cc.reduce_sum(w * w))
    >>> with Session(target="reference") as sess:
    ...     _ = sess.run(train)
    ...     print(sess.run([w, opt.get_slot(w, "momentum")]))
    [array([0.8]), array([2.])]
    """

    _updates_only_gathered_rows = True   # as TF1's sparse kernel (see Optimizer)

    def __init__(self, learning_rate: HyperParameter, momentum: HyperParameter,
                 use_locking: bool = False, name: str = "Momentum", use_nesterov: bool = False) -> None:
        super().__init__(use_locking, name)
        self._learning_rate = learning_rate
        self._momentum = momentum
        self._use_nesterov = use_nesterov

    def _create_slots(self, var_list: list[cc.Variable]) -> None:
        for var in var_list:
            self._zeros_slot(var, "momentum", self._name)

    def _prepare(self) -> None:
        self._learning_rate_value = _call_if_callable(self._learning_rate)
        self._momentum_value = _call_if_callable(self._momentum)

    def _apply_dense(self, grad: Tensor, var: cc.Variable) -> Any:
        lr = self._hyper("learning_rate", self._learning_rate_value, var.dtype)
        momentum = self._hyper("momentum", self._momentum_value, var.dtype)
        accum = self.get_slot(var, "momentum")
        accum_t = momentum * accum + grad
        if self._use_nesterov:
            step = lr * grad + lr * momentum * accum_t
        else:
            step = lr * accum_t
        return (cc.assign_sub(var, self._looked_up(step, 0.0)), cc.assign(accum, self._looked_up(accum_t, accum)))

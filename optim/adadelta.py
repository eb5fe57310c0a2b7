"""``AdadeltaOptimizer``: Zeiler's Adadelta, TF1's ``ApplyAdadelta`` equations."""
from __future__ import annotations

from typing import Any

import compiler as cc
from compiler.graph import Tensor

from .optimizer import HyperParameter, Optimizer, _call_if_callable


class AdadeltaOptimizer(Optimizer):
    """Adadelta (TF1's ``AdadeltaOptimizer``), with slots "accum" (running mean of squared
    gradients) and "accum_update" (running mean of squared updates), both starting at zero::

        accum        = rho * accum + (1 - rho) * grad * grad
        update       = sqrt(accum_update + epsilon) / sqrt(accum + epsilon) * grad
        accum_update = rho * accum_update + (1 - rho) * update * update
        var         -= learning_rate * update

    As in TF1, the update is scaled by ``learning_rate`` (default 0.001; the paper's method is
    ``learning_rate=1.0``). Every hyperparameter may be a number, a Tensor or a callable.

    >>> import numpy as np
    >>> import compiler as cc
    >>> import optim
    >>> from runtime import Session
    >>> w = cc.Variable(np.array([1.0]), name="w")
    >>> opt = optim.AdadeltaOptimizer(1.0, rho=0.5, epsilon=1e-2)
    >>> train = opt.minimize(cc.reduce_sum(w * w))
    >>> with Session(target="reference") as sess:
    ...     _ = sess.run(train)       # accum = 2; update = sqrt(0.01) / sqrt(2.01) * 2
    ...     print(np.round(sess.run([w, opt.get_slot(w, "accum")]), 6))
    [[0.858931]
     [2.      ]]
    """

    _updates_only_gathered_rows = True   # as TF1's sparse kernel (see Optimizer)

    def __init__(self, learning_rate: HyperParameter = 0.001, rho: HyperParameter = 0.95,
                 epsilon: HyperParameter = 1e-8, use_locking: bool = False,
                 name: str = "Adadelta") -> None:
        super().__init__(use_locking, name)
        self._learning_rate = learning_rate
        self._rho = rho
        self._epsilon = epsilon

    def _create_slots(self, var_list: list[cc.Variable]) -> None:
        for var in var_list:
            self._zeros_slot(var, "accum", self._name)
            self._zeros_slot(var, "accum_update", self._name)

    def _prepare(self) -> None:
        self._learning_rate_value = _call_if_callable(self._learning_rate)
        self._rho_value = _call_if_callable(self._rho)
        self._epsilon_value = _call_if_callable(self._epsilon)

    def _apply_dense(self, grad: Tensor, var: cc.Variable) -> Any:
        dtype = var.dtype
        lr = self._hyper("learning_rate", self._learning_rate_value, dtype)
        rho = self._hyper("rho", self._rho_value, dtype)
        epsilon = self._hyper("epsilon", self._epsilon_value, dtype)
        accum = self.get_slot(var, "accum")
        accum_update = self.get_slot(var, "accum_update")
        accum_t = rho * accum + (1.0 - rho) * (grad * grad)
        update = cc.sqrt(accum_update + epsilon) * cc.rsqrt(accum_t + epsilon) * grad
        accum_update_t = rho * accum_update + (1.0 - rho) * (update * update)
        return (cc.assign_sub(var, self._looked_up(lr * update, 0.0)),
                cc.assign(accum, self._looked_up(accum_t, accum)),
                cc.assign(accum_update, self._looked_up(accum_update_t, accum_update)))

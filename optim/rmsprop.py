"""``RMSPropOptimizer``: Hinton's RMSProp with momentum, TF1's ``ApplyRMSProp`` and
``ApplyCenteredRMSProp`` equations."""
from __future__ import annotations

from typing import Any

import compiler as cc
from compiler.graph import Tensor

from .optimizer import HyperParameter, Optimizer, _call_if_callable


class RMSPropOptimizer(Optimizer):
    """RMSProp (TF1's ``RMSPropOptimizer``), with slots "rms" (starting at ONE, as in TF1),
    "momentum" (zeros) and, when ``centered``, "mg" (zeros)::

        rms      = decay * rms + (1 - decay) * grad * grad
        mg       = decay * mg + (1 - decay) * grad                  # centered only
        denom    = rms + epsilon                                    # centered=False
        denom    = rms - mg * mg + epsilon                          # centered=True
        momentum = momentum_coef * momentum + learning_rate * grad / sqrt(denom)
        var     -= momentum

    The "momentum" slot exists even with ``momentum=0.0``, as in TF1. Every hyperparameter may be
    a number, a Tensor or a callable.

    >>> import numpy as np
    >>> import compiler as cc
    >>> import optim
    >>> from runtime import Session
    >>> w = cc.Variable(np.array([1.0]), name="w")
    >>> opt = optim.RMSPropOptimizer(0.1, decay=0.5, epsilon=0.0)
    >>> train = opt.minimize(cc.reduce_sum(w * w))
    >>> with Session(target="reference") as sess:
    ...     _ = sess.run(train)       # rms = 0.5 * 1 + 0.5 * 4 = 2.5; step = 0.1 * 2 / sqrt(2.5)
    ...     print(np.round(sess.run([w, opt.get_slot(w, "rms")]), 6))
    [[0.873509]
     [2.5     ]]
    >>> opt.get_slot_names()
    ['momentum', 'rms']
    """

    _updates_only_gathered_rows = True   # as TF1's sparse kernel (see Optimizer)

    def __init__(self, learning_rate: HyperParameter, decay: HyperParameter = 0.9,
                 momentum: HyperParameter = 0.0, epsilon: HyperParameter = 1e-10,
                 use_locking: bool = False, centered: bool = False, name: str = "RMSProp") -> None:
        super().__init__(use_locking, name)
        self._learning_rate = learning_rate
        self._decay = decay
        self._momentum = momentum
        self._epsilon = epsilon
        self._centered = bool(centered)

    def _create_slots(self, var_list: list[cc.Variable]) -> None:
        for var in var_list:
            self._get_or_make_slot(var, 1.0, "rms", self._name)
            if self._centered:
                self._zeros_slot(var, "mg", self._name)
            self._zeros_slot(var, "momentum", self._name)

    def _prepare(self) -> None:
        self._learning_rate_value = _call_if_callable(self._learning_rate)
        self._decay_value = _call_if_callable(self._decay)
        self._momentum_value = _call_if_callable(self._momentum)
        self._epsilon_value = _call_if_callable(self._epsilon)

    def _apply_dense(self, grad: Tensor, var: cc.Variable) -> Any:
        dtype = var.dtype
        lr = self._hyper("learning_rate", self._learning_rate_value, dtype)
        decay = self._hyper("decay", self._decay_value, dtype)
        momentum = self._hyper("momentum", self._momentum_value, dtype)
        epsilon = self._hyper("epsilon", self._epsilon_value, dtype)
        rms = self.get_slot(var, "rms")
        mom = self.get_slot(var, "momentum")
        rms_t = decay * rms + (1.0 - decay) * (grad * grad)
        updates = [cc.assign(rms, self._looked_up(rms_t, rms))]
        if self._centered:
            mg = self.get_slot(var, "mg")
            mg_t = decay * mg + (1.0 - decay) * grad
            denom = rms_t - mg_t * mg_t + epsilon
            updates.append(cc.assign(mg, self._looked_up(mg_t, mg)))
        else:
            denom = rms_t + epsilon
        mom_t = momentum * mom + lr * grad * cc.rsqrt(denom)
        return [cc.assign_sub(var, self._looked_up(mom_t, 0.0)), cc.assign(mom, self._looked_up(mom_t, mom))] + updates

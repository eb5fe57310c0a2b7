"""``AdamOptimizer``: Kingma & Ba's Adam with TF1's bias correction folded into the step size."""
from __future__ import annotations

from typing import Any

import numpy as np

import compiler as cc
from compiler.graph import Graph, Operation, Tensor, located

from .optimizer import HyperParameter, Optimizer, _call_if_callable


class AdamOptimizer(Optimizer):
    """Adam (TF1's ``AdamOptimizer``), with slots "m" and "v" per variable and two non-slot
    variables ``beta1_power``/``beta2_power`` (beta**t, starting at beta) per graph::

        lr_t  = learning_rate * sqrt(1 - beta2_power) / (1 - beta1_power)
        m     = beta1 * m + (1 - beta1) * grad
        v     = beta2 * v + (1 - beta2) * grad * grad
        var  -= lr_t * m / (sqrt(v) + epsilon)
        beta1_power *= beta1;  beta2_power *= beta2      (after each step)

    ``epsilon`` is TF1's "epsilon hat": it is added to ``sqrt(v)`` after the bias correction was
    moved into ``lr_t``. ``learning_rate`` and ``epsilon`` may be Tensors; ``beta1`` and ``beta2``
    must be numbers, because they are also the initial values of the beta powers.

    >>> import numpy as np
    >>> import compiler as cc
    >>> import optim
    >>> from runtime import Session
    >>> w = cc.Variable(np.array([1.0, -1.0]), name="w")
    >>> opt = optim.AdamOptimizer(0.1)
    >>> train = opt.minimize(cc.reduce_sum(w * w))
    >>> with Session(target="reference") as sess:
    ...     _ = sess.run(train)
    ...     print(np.round(sess.run(w), 6))    # the first step moves each weight by ~lr
    [ 0.9 -0.9]
    """

    def __init__(self, learning_rate: HyperParameter = 0.001, beta1: float = 0.9, beta2: float = 0.999,
                 epsilon: HyperParameter = 1e-8, use_locking: bool = False, name: str = "Adam") -> None:
        super().__init__(use_locking, name)
        for label, beta in (("beta1", beta1), ("beta2", beta2)):
            if isinstance(beta, Tensor) or callable(beta):
                raise TypeError(located(f"AdamOptimizer: {label} must be a number (it is the initial value "
                                        f"of {label}_power), got {beta!r}"))
        self._learning_rate = learning_rate
        self._beta1 = float(beta1)
        self._beta2 = float(beta2)
        self._epsilon = epsilon

    def _get_beta_accumulators(self, graph: Graph | None = None) -> tuple[cc.Variable, cc.Variable]:
        """(beta1_power, beta2_power) of ``graph`` (default: the default graph)."""
        return (self._get_non_slot_variable("beta1_power", graph),
                self._get_non_slot_variable("beta2_power", graph))

    def _create_slots(self, var_list: list[cc.Variable]) -> None:
        # The beta powers sit beside the first variable by name, as in TF1, and take its dtype.
        first = min(var_list, key=lambda v: v.name)
        self._create_non_slot_variable(self._beta1, "beta1_power", colocate_with=first)
        self._create_non_slot_variable(self._beta2, "beta2_power", colocate_with=first)
        for var in var_list:
            self._zeros_slot(var, "m", self._name)
            self._zeros_slot(var, "v", self._name)

    def _prepare(self) -> None:
        self._learning_rate_value = _call_if_callable(self._learning_rate)
        self._epsilon_value = _call_if_callable(self._epsilon)

    def _apply_dense(self, grad: Tensor, var: cc.Variable) -> Any:
        step, m_t, v_t = self._adam_step(grad, var)
        return (cc.assign_sub(var, step), cc.assign(self.get_slot(var, "m"), m_t),
                cc.assign(self.get_slot(var, "v"), v_t))

    def _adam_step(self, grad: Tensor, var: cc.Variable) -> tuple[Tensor, Tensor, Tensor]:
        """(the amount to subtract from ``var``, the new m, the new v) from start-of-step values."""
        dtype = var.dtype
        beta1_power, beta2_power = (cc.cast(p, dtype) for p in self._get_beta_accumulators(var.graph))
        lr = self._hyper("learning_rate", self._learning_rate_value, dtype)
        beta1 = self._hyper("beta1", self._beta1, dtype)
        beta2 = self._hyper("beta2", self._beta2, dtype)
        epsilon = self._hyper("epsilon", self._epsilon_value, dtype)
        m = self.get_slot(var, "m")
        v = self.get_slot(var, "v")
        lr_t = lr * cc.sqrt(1.0 - beta2_power) / (1.0 - beta1_power)
        # Reads see start-of-step values, so the update uses the new moments as tensors.
        m_t = beta1 * m + (1.0 - beta1) * grad
        v_t = beta2 * v + (1.0 - beta2) * (grad * grad)
        return lr_t * m_t / (cc.sqrt(v_t) + epsilon), m_t, v_t

    def _finish(self, update_ops: list[Any], name: str) -> Operation:
        graph = next(u.graph for u in update_ops)
        beta1_power, beta2_power = self._get_beta_accumulators(graph)
        with graph.as_default(), graph.nested_scope(name):
            update_ops = list(update_ops) + [
                cc.assign(beta1_power, beta1_power * np.asarray(self._beta1, beta1_power.dtype)),
                cc.assign(beta2_power, beta2_power * np.asarray(self._beta2, beta2_power.dtype)),
            ]
        return super()._finish(update_ops, name)

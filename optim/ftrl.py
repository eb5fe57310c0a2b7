"""``FtrlOptimizer``: FTRL-Proximal (McMahan et al.), TF1's ``ApplyFtrl``/``ApplyFtrlV2``
equations."""
from __future__ import annotations

from numbers import Real
from typing import Any

import compiler as cc
from compiler.graph import Tensor, located

from .optimizer import HyperParameter, Optimizer, _call_if_callable


class FtrlOptimizer(Optimizer):
    """FTRL-Proximal (TF1's ``FtrlOptimizer``), with slots "accum" (starting at
    ``initial_accumulator_value``) and "linear" (zeros). With ``lr_power = learning_rate_power``,
    ``l1``, ``l2`` and ``l2_shrinkage`` the regularization strengths, one step is::

        grad_s    = grad + 2 * l2_shrinkage * var
        accum_new = accum + grad * grad
        linear   += grad_s - (accum_new**(-lr_power) - accum**(-lr_power)) / learning_rate * var
        quadratic = accum_new**(-lr_power) / learning_rate + 2 * l2
        var       = (sign(linear) * l1 - linear) / quadratic   if |linear| > l1   else 0
        accum     = accum_new

    ``accum`` grows with the plain gradient; the shrinkage only enters ``linear``, as in TF1.
    ``learning_rate_power`` must be <= 0 and the strengths and ``initial_accumulator_value`` >= 0
    (checked when they are numbers). The hyperparameters may also be Tensors or callables.

    >>> import numpy as np
    >>> import compiler as cc
    >>> import optim
    >>> from runtime import Session
    >>> w = cc.Variable(np.array([1.0, 0.01]), name="w")
    >>> opt = optim.FtrlOptimizer(0.5, initial_accumulator_value=1.0, l1_regularization_strength=0.05)
    >>> train = opt.minimize(cc.reduce_sum(w * w))
    >>> with Session(target="reference") as sess:
    ...     _ = sess.run(train)       # the small weight's |linear| is below l1: it becomes 0
    ...     print(np.round(sess.run(w), 6))
    [0.094392 0.      ]
    """

    _updates_only_gathered_rows = True   # as TF1's sparse kernel (see Optimizer)

    def __init__(self, learning_rate: HyperParameter, learning_rate_power: HyperParameter = -0.5,
                 initial_accumulator_value: float = 0.1,
                 l1_regularization_strength: HyperParameter = 0.0,
                 l2_regularization_strength: HyperParameter = 0.0, use_locking: bool = False,
                 name: str = "Ftrl", accum_name: str | None = None, linear_name: str | None = None,
                 l2_shrinkage_regularization_strength: HyperParameter = 0.0) -> None:
        super().__init__(use_locking, name)
        if isinstance(initial_accumulator_value, Tensor) or callable(initial_accumulator_value):
            raise TypeError(located("FtrlOptimizer: initial_accumulator_value must be a number, got "
                                    f"{initial_accumulator_value!r}"))
        if not initial_accumulator_value >= 0.0:
            raise ValueError(located("FtrlOptimizer: initial_accumulator_value must be zero or positive, "
                                     f"got {initial_accumulator_value!r}"))
        if _is_number(learning_rate_power) and not learning_rate_power <= 0.0:
            raise ValueError(located("FtrlOptimizer: learning_rate_power must be zero or negative, got "
                                     f"{learning_rate_power!r}"))
        for label, strength in (("l1_regularization_strength", l1_regularization_strength),
                                ("l2_regularization_strength", l2_regularization_strength),
                                ("l2_shrinkage_regularization_strength",
                                 l2_shrinkage_regularization_strength)):
            if _is_number(strength) and not strength >= 0.0:
                raise ValueError(located(f"FtrlOptimizer: {label} must be zero or positive, got {strength!r}"))
        self._learning_rate = learning_rate
        self._learning_rate_power = learning_rate_power
        self._initial_accumulator_value = float(initial_accumulator_value)
        self._l1_regularization_strength = l1_regularization_strength
        self._l2_regularization_strength = l2_regularization_strength
        self._l2_shrinkage_regularization_strength = l2_shrinkage_regularization_strength
        self._accum_name = accum_name
        self._linear_name = linear_name

    def _create_slots(self, var_list: list[cc.Variable]) -> None:
        for var in var_list:
            self._get_or_make_slot(var, self._initial_accumulator_value, "accum",
                                   self._accum_name or self._name)
            self._zeros_slot(var, "linear", self._linear_name or self._name)

    def _prepare(self) -> None:
        self._learning_rate_value = _call_if_callable(self._learning_rate)
        self._learning_rate_power_value = _call_if_callable(self._learning_rate_power)
        self._l1_value = _call_if_callable(self._l1_regularization_strength)
        self._l2_value = _call_if_callable(self._l2_regularization_strength)
        self._l2_shrinkage_value = _call_if_callable(self._l2_shrinkage_regularization_strength)

    def _apply_dense(self, grad: Tensor, var: cc.Variable) -> Any:
        dtype = var.dtype
        lr = self._hyper("learning_rate", self._learning_rate_value, dtype)
        l1 = self._hyper("l1_regularization_strength", self._l1_value, dtype)
        l2 = self._hyper("l2_regularization_strength", self._l2_value, dtype)
        accum = self.get_slot(var, "accum")
        linear = self.get_slot(var, "linear")
        accum_new = accum + grad * grad
        power = self._learning_rate_power_value
        if _is_number(power) and float(power) == -0.5:
            # The common case needs no pow: x**0.5 is sqrt(x).
            new_scale, old_scale = cc.sqrt(accum_new), cc.sqrt(accum)
        else:
            exponent = -self._hyper("learning_rate_power", power, dtype)
            new_scale, old_scale = cc.pow(accum_new, exponent), cc.pow(accum, exponent)
        grad_s = grad
        shrinkage = self._l2_shrinkage_value
        if not (_is_number(shrinkage) and float(shrinkage) == 0.0):
            grad_s = grad + 2.0 * self._hyper("l2_shrinkage_regularization_strength", shrinkage,
                                              dtype) * var
        linear_t = linear + grad_s - (new_scale - old_scale) / lr * var
        quadratic = new_scale / lr + 2.0 * l2
        # Where the branch is not taken, divide by 1: quadratic is 0 where the accumulator is (no
        # gradient yet, no l2), and 0 / 0 there would be a NaN that a numerics check reports.
        taken = cc.abs(linear_t) > l1
        var_t = cc.where(taken, (cc.sign(linear_t) * l1 - linear_t) / cc.where(taken, quadratic, 1.0), 0.0)
        return (cc.assign(var, self._looked_up(var_t, var)), cc.assign(accum, self._looked_up(accum_new, accum)),
                cc.assign(linear, self._looked_up(linear_t, linear)))


def _is_number(value: Any) -> bool:
    return isinstance(value, Real) and not isinstance(value, bool)

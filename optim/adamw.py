"""``AdamWOptimizer``: Adam with decoupled weight decay (Loshchilov & Hutter), as TF1 contrib's
``AdamWOptimizer``."""
from __future__ import annotations

import contextlib
from typing import Any, Iterable, Iterator, Sequence

import compiler as cc
from compiler.graph import Operation, Tensor

from .adam import AdamOptimizer
from .optimizer import HyperParameter, Optimizer, _call_if_callable


class AdamWOptimizer(AdamOptimizer):
    """Adam plus decoupled weight decay (TF1 contrib's ``AdamWOptimizer``). Both terms are computed
    from the start-of-step values, with Adam's slots "m", "v" and beta powers::

        var -= weight_decay * var + lr_t * m / (sqrt(v) + epsilon)

    where ``lr_t``, ``m`` and ``v`` are exactly ``AdamOptimizer``'s. The decay is not scaled by
    ``learning_rate`` (as in TF1 contrib: decay the ``weight_decay`` yourself if the learning rate
    follows a schedule). ``weight_decay`` may be a number, a Tensor or a callable.

    ``minimize`` and ``apply_gradients`` take ``decay_var_list``: the variables to decay (default:
    every variable that is updated); the others get the plain Adam step.

    >>> import numpy as np
    >>> import compiler as cc
    >>> import optim
    >>> from runtime import Session
    >>> w = cc.Variable(np.array([1.0, -1.0]), name="w")
    >>> opt = optim.AdamWOptimizer(weight_decay=0.01, learning_rate=0.1)
    >>> train = opt.minimize(cc.reduce_sum(w * w))
    >>> with Session(target="reference") as sess:
    ...     _ = sess.run(train)
    ...     print(np.round(sess.run(w), 6))    # Adam's first step (~lr) and 1% decay
    [ 0.89 -0.89]
    """

    _updates_only_gathered_rows = True   # as TF1's sparse kernel (see Optimizer)

    def __init__(self, weight_decay: HyperParameter, learning_rate: HyperParameter = 0.001,
                 beta1: float = 0.9, beta2: float = 0.999, epsilon: HyperParameter = 1e-8,
                 use_locking: bool = False, name: str = "AdamW") -> None:
        super().__init__(learning_rate, beta1, beta2, epsilon, use_locking, name)
        self._weight_decay = weight_decay
        self._decay_var_list: list[cc.Variable] | None = None  # None: decay every variable

    @contextlib.contextmanager
    def _decaying(self, decay_var_list: Iterable[cc.Variable] | None) -> Iterator[None]:
        saved = self._decay_var_list
        self._decay_var_list = None if decay_var_list is None else list(decay_var_list)
        try:
            yield
        finally:
            self._decay_var_list = saved

    def minimize(self, loss: Tensor, global_step: cc.Variable | None = None,
                 var_list: Sequence[cc.Variable] | None = None, gate_gradients: int = Optimizer.GATE_OP,
                 aggregation_method: int | None = None, colocate_gradients_with_ops: bool = False,
                 name: str | None = None, grad_loss: Any = None,
                 decay_var_list: Sequence[cc.Variable] | None = None) -> Operation:
        """``AdamOptimizer.minimize``, decaying only ``decay_var_list`` if given.

        >>> import numpy as np
        >>> import compiler as cc
        >>> import optim
        >>> w = cc.Variable(np.ones(2), name="w")
        >>> b = cc.Variable(np.ones(2), name="b")
        >>> opt = optim.AdamWOptimizer(1e-4, 1e-3)
        >>> train = opt.minimize(cc.reduce_sum(w * w + b), decay_var_list=[w])   # b: no decay
        """
        with self._decaying(decay_var_list):
            return super().minimize(loss, global_step=global_step, var_list=var_list,
                                    gate_gradients=gate_gradients, aggregation_method=aggregation_method,
                                    colocate_gradients_with_ops=colocate_gradients_with_ops, name=name,
                                    grad_loss=grad_loss)

    def apply_gradients(self, grads_and_vars: Iterable[tuple[Any, cc.Variable]],
                        global_step: cc.Variable | None = None, name: str | None = None,
                        decay_var_list: Sequence[cc.Variable] | None = None) -> Operation:
        """``AdamOptimizer.apply_gradients``, decaying only ``decay_var_list`` if given.

        >>> import numpy as np
        >>> import compiler as cc
        >>> import optim
        >>> w = cc.Variable(np.ones(2), name="w")
        >>> opt = optim.AdamWOptimizer(1e-4, 1e-3)
        >>> train = opt.apply_gradients(opt.compute_gradients(cc.reduce_sum(w * w)))
        """
        if decay_var_list is None:  # keeps the list minimize was given, if it was
            return super().apply_gradients(grads_and_vars, global_step=global_step, name=name)
        with self._decaying(decay_var_list):
            return super().apply_gradients(grads_and_vars, global_step=global_step, name=name)

    def _prepare(self) -> None:
        super()._prepare()
        self._weight_decay_value = _call_if_callable(self._weight_decay)

    def _apply_dense(self, grad: Tensor, var: cc.Variable) -> Any:
        dtype = var.dtype
        step, m_t, v_t = self._adam_step(grad, var)
        if self._decay_var_list is None or any(var is d for d in self._decay_var_list):
            weight_decay = self._hyper("weight_decay", self._weight_decay_value, dtype)
            step = step + self._looked_up(weight_decay * var, 0.0)   # TF1 decays looked-up rows only
        return (cc.assign_sub(var, step), cc.assign(self.get_slot(var, "m"), m_t),
                cc.assign(self.get_slot(var, "v"), v_t))

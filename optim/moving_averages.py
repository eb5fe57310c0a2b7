"""TF1's ``tf.train.ExponentialMovingAverage``: shadow copies of variables that follow them slowly,
the weights often evaluated in place of the trained ones.

>>> import numpy as np
>>> import compiler as cc
>>> import optim
>>> from runtime import Session
>>> graph = cc.Graph()
>>> with graph.as_default():
...     w = cc.Variable(np.float64(0.0), name="w")
...     ema = optim.ExponentialMovingAverage(decay=0.5)
...     with cc.control_dependencies([w.assign_add(1.0)]):     # the training step, then the average
...         step = ema.apply([w])
>>> with Session(graph) as sess:
...     for _ in range(2):
...         sess.run(step)
...     print(sess.run(w), sess.run(ema.average(w)), ema.average_name(w))
2.0 1.25 w/ExponentialMovingAverage
"""
from __future__ import annotations

from numbers import Real
from typing import Any, Sequence

import numpy as np

import compiler as cc
from compiler import dtypes
from compiler.graph import Operation, Tensor, located
from compiler.ops.random_seed import get_random_counter

MOVING_AVERAGE_VARIABLES = "moving_average_variables"   # TF1's GraphKeys: the variables averaged


class ExponentialMovingAverage:
    """``apply(var_list)`` makes, for each variable, a shadow variable ``<var>/<name>`` (its initial
    value the variable's, not trainable) and returns the op that moves every shadow toward its
    variable: ``shadow -= (1 - decay) * (shadow - variable)``. With ``num_updates`` (a scalar, e.g.
    the global step) the decay is ``min(decay, (1 + num_updates) / (10 + num_updates))``, as TF1's,
    so early averages follow quickly. ``average(var)`` is the shadow, ``average_name(var)`` its name,
    and ``variables_to_restore()`` maps those names to the variables so that an ``optim.Saver`` made
    with it restores the averages into the variables themselves (TF1's evaluation idiom).

    ``apply`` also takes float tensors of known shape (TF1's batch-norm idiom, ``apply([mean,
    variance])``): their shadows start at zeros, and with ``zero_debias`` they are corrected for
    that start as TF1's are: ``biased / (1 - decay**t)`` after ``t`` updates (the variables
    ``<shadow>/biased`` and ``<shadow>/local_step`` hold the biased average and ``t``)."""

    def __init__(self, decay: Any, num_updates: Any = None, zero_debias: bool = False,
                 name: str = "ExponentialMovingAverage") -> None:
        if not isinstance(decay, Tensor) and (isinstance(decay, (bool, np.bool_)) or not isinstance(decay, Real)
                                              or not 0.0 <= decay <= 1.0):
            raise ValueError(located(f"ExponentialMovingAverage: decay must be a number in [0, 1] or a scalar "
                                     f"tensor, got {decay!r}"))
        self._decay = decay
        self._num_updates = num_updates
        self._name = name
        self._zero_debias = bool(zero_debias)
        self._averages: dict[Tensor, cc.Variable] = {}
        self._debiased: dict[Tensor, tuple[cc.Variable, cc.Variable]] = {}   # tensor: (biased, local_step)

    @property
    def name(self) -> str:
        return self._name

    def apply(self, var_list: Sequence[Tensor] | None = None) -> Operation:
        """The op that updates the averages of ``var_list`` (variables or float tensors; default:
        the trainable variables), making their shadows on the first call."""
        variables = list(cc.trainable_variables() if var_list is None else var_list)
        for var in variables:
            if not isinstance(var, Tensor) or not dtypes.is_floating(var.dtype):
                raise TypeError(located(f"ExponentialMovingAverage.apply: {var!r} is not a float variable or tensor"))
            if not isinstance(var, cc.Variable) and None in var.shape:
                raise ValueError(located(f"ExponentialMovingAverage.apply: the shadow of {var.name!r} needs a known "
                                         f"shape, got {list(var.shape)}"))
        graph = variables[0].graph if variables else cc.get_default_graph()
        for var in variables:
            if var in self._averages:   # TF1: one average per variable and object
                raise ValueError(located(f"ExponentialMovingAverage.apply: the moving average of {var.op.name!r} "
                                         f"is already computed"))
            is_variable = isinstance(var, cc.Variable)
            start = var.initial_value if is_variable else np.zeros(var.shape, var.dtype)
            with graph.init_scope():
                shadow = cc.Variable(start, name=self.average_name(var), trainable=False,
                                     collections=[cc.GraphKeys.GLOBAL_VARIABLES])
            self._averages[var] = shadow
            if is_variable:
                graph.add_to_collection(MOVING_AVERAGE_VARIABLES, var)   # the averaged variables, as TF1's
            elif self._zero_debias:
                with graph.init_scope(), graph.absolute_name_scope(shadow.op.name):
                    self._debiased[var] = tuple(cc.Variable(np.zeros(shape, var.dtype), name=label, trainable=False,
                                                            collections=[cc.GraphKeys.GLOBAL_VARIABLES])
                                                for label, shape in (("biased", var.shape), ("local_step", ())))
        with graph.as_default(), graph.nested_scope(self._name):
            updates = []
            for var in variables:
                shadow = self._averages[var]
                decay = self._decay_for(var.dtype)
                if var not in self._debiased:
                    updates.append(cc.assign_sub(shadow, (shadow - var) * (1.0 - decay)))
                    continue
                biased, local_step = self._debiased[var]
                new_biased = cc.assign_sub(biased, (biased - var) * (1.0 - decay))
                steps = cc.assign_add(local_step, cc.constant(np.ones((), var.dtype)))
                updates.append(cc.assign(shadow, new_biased / (1.0 - cc.pow(decay, steps))))
            return cc.group(*updates, name="update")

    def _decay_for(self, dtype: np.dtype) -> Tensor:
        decay = cc.cast(self._decay, dtype) if isinstance(self._decay, Tensor) else cc.constant(
            np.asarray(self._decay, dtype))
        if self._num_updates is None:
            return decay
        updates = cc.cast(self._num_updates, dtype)
        return cc.minimum(decay, (1.0 + updates) / (10.0 + updates))

    def average(self, var: Tensor) -> cc.Variable | None:
        """The shadow variable of ``var`` (None if ``apply`` has not seen it)."""
        return self._averages.get(var)

    def average_name(self, var: Tensor) -> str:
        """The name of ``var``'s shadow: ``<var>/<this average's name>``."""
        return f"{var.op.name}/{self._name}"

    def variables_to_restore(self, moving_avg_variables: Sequence[cc.Variable] | None = None) -> dict[str, Any]:
        """``{name in a checkpoint: variable}`` for an ``optim.Saver``, as TF1's: each variable of
        ``moving_avg_variables`` (default: the trainable variables and those in the
        ``"moving_average_variables"`` collection) under its average's name, every other global
        variable under its own. Evaluation code calls it on a fresh object, without ``apply``."""
        graph = cc.get_default_graph()
        if moving_avg_variables is None:
            moving_avg_variables = cc.trainable_variables() + graph.get_collection(MOVING_AVERAGE_VARIABLES)
        averaged = list(dict.fromkeys(moving_avg_variables))
        names: dict[str, Any] = {self.average_name(var): var for var in averaged}
        counter = get_random_counter(graph)
        for var in cc.global_variables():
            if var not in averaged and var.op.name not in names and var is not counter:   # not TF1's
                names[var.op.name] = var
        return names

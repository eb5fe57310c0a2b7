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
    ``zero_debias`` (TF1's bias correction) is not available."""

    def __init__(self, decay: Any, num_updates: Any = None, zero_debias: bool = False,
                 name: str = "ExponentialMovingAverage") -> None:
        if zero_debias:
            raise ValueError(located("ExponentialMovingAverage: zero_debias=True is not available"))
        if not isinstance(decay, Tensor) and (isinstance(decay, (bool, np.bool_)) or not isinstance(decay, Real)
                                              or not 0.0 <= decay <= 1.0):
            raise ValueError(located(f"ExponentialMovingAverage: decay must be a number in [0, 1] or a scalar "
                                     f"tensor, got {decay!r}"))
        self._decay = decay
        self._num_updates = num_updates
        self._name = name
        self._averages: dict[cc.Variable, cc.Variable] = {}

    @property
    def name(self) -> str:
        return self._name

    def apply(self, var_list: Sequence[cc.Variable] | None = None) -> Operation:
        """The op that updates the averages of ``var_list`` (default: the trainable variables),
        making their shadows on the first call."""
        variables = list(cc.trainable_variables() if var_list is None else var_list)
        for var in variables:
            if not isinstance(var, cc.Variable) or not dtypes.is_floating(var.dtype):
                raise TypeError(located(f"ExponentialMovingAverage.apply: {var!r} is not a float variable"))
        graph = variables[0].graph if variables else cc.get_default_graph()
        for var in variables:
            if var in self._averages:   # TF1: one average per variable and object
                raise ValueError(located(f"ExponentialMovingAverage.apply: the moving average of {var.op.name!r} "
                                         f"is already computed"))
            with graph.init_scope():
                shadow = cc.Variable(var.initial_value, name=self.average_name(var), trainable=False,
                                     collections=[cc.GraphKeys.GLOBAL_VARIABLES])
            self._averages[var] = shadow
            graph.add_to_collection(MOVING_AVERAGE_VARIABLES, var)   # the averaged variables, as TF1's
        with graph.as_default(), graph.nested_scope(self._name):
            updates = []
            for var in variables:
                shadow = self._averages[var]
                decay = self._decay_for(var.dtype)
                updates.append(cc.assign_sub(shadow, (shadow - var) * (1.0 - decay)))
            return cc.group(*updates, name="update")

    def _decay_for(self, dtype: np.dtype) -> Tensor:
        decay = cc.cast(self._decay, dtype) if isinstance(self._decay, Tensor) else cc.constant(
            np.asarray(self._decay, dtype))
        if self._num_updates is None:
            return decay
        updates = cc.cast(self._num_updates, dtype)
        return cc.minimum(decay, (1.0 + updates) / (10.0 + updates))

    def average(self, var: cc.Variable) -> cc.Variable | None:
        """The shadow variable of ``var`` (None if ``apply`` has not seen it)."""
        return self._averages.get(var)

    def average_name(self, var: cc.Variable) -> str:
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

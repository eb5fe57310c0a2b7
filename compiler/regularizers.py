"""Weight regularizers: functions of a variable that return the loss to add (what
``get_variable(regularizer=)`` and the layers' ``kernel_regularizer=`` take), under TF1's names:
``l1_regularizer`` / ``l2_regularizer`` / ``l1_l2_regularizer`` (``tf.contrib.layers``'s: the
l2 term is ``scale * sum(w**2) / 2``) and ``l1`` / ``l2`` / ``l1_l2`` (``tf.keras.regularizers``':
``l * sum(w**2)``).

>>> import numpy as np, compiler as cc
>>> from runtime import Session
>>> w = cc.constant(np.array([1.0, -2.0]))
>>> with Session() as sess:
...     [float(v) for v in sess.run([cc.contrib.layers.l2_regularizer(0.5)(w), cc.keras.regularizers.l2(0.5)(w)])]
[1.25, 2.5]
"""
from __future__ import annotations

from numbers import Real
from typing import Callable

from .graph import Tensor, located
from .ops.elementwise import abs as abs_
from .ops.elementwise import square
from .ops.reduction import reduce_sum


def _scale(value: float, function: str, what: str) -> float:
    if isinstance(value, bool) or not isinstance(value, Real) or value < 0:
        raise ValueError(located(f"{function}: {what} must be a number >= 0, got {value!r}"))
    return float(value)


def _penalty(l1: float, l2: float, l2_halved: bool) -> Callable[[Tensor], Tensor | None]:
    def regularizer(weights: Tensor) -> Tensor | None:
        terms = []
        if l1:
            terms.append(reduce_sum(abs_(weights)) * l1)
        if l2:
            terms.append(reduce_sum(square(weights)) * (l2 / 2.0 if l2_halved else l2))
        if not terms:
            return None   # as TF1: a zero scale adds no loss
        return terms[0] if len(terms) == 1 else terms[0] + terms[1]
    return regularizer


def l1_regularizer(scale: float, scope: str | None = None) -> Callable[[Tensor], Tensor | None]:
    """``scale * sum(|w|)`` (TF1's ``contrib.layers.l1_regularizer``)."""
    return _penalty(_scale(scale, "l1_regularizer", "scale"), 0.0, True)


def l2_regularizer(scale: float, scope: str | None = None) -> Callable[[Tensor], Tensor | None]:
    """``scale * sum(w**2) / 2``, i.e. ``scale * nn.l2_loss(w)`` (TF1's ``contrib.layers.l2_regularizer``)."""
    return _penalty(0.0, _scale(scale, "l2_regularizer", "scale"), True)


def l1_l2_regularizer(scale_l1: float = 1.0, scale_l2: float = 1.0,
                      scope: str | None = None) -> Callable[[Tensor], Tensor | None]:
    """The sum of ``l1_regularizer(scale_l1)`` and ``l2_regularizer(scale_l2)``."""
    return _penalty(_scale(scale_l1, "l1_l2_regularizer", "scale_l1"),
                    _scale(scale_l2, "l1_l2_regularizer", "scale_l2"), True)


def l1(l: float = 0.01) -> Callable[[Tensor], Tensor | None]:  # noqa: E741 (Keras's name)
    """``l * sum(|w|)`` (``keras.regularizers.l1``)."""
    return _penalty(_scale(l, "keras.regularizers.l1", "l"), 0.0, False)


def l2(l: float = 0.01) -> Callable[[Tensor], Tensor | None]:  # noqa: E741
    """``l * sum(w**2)`` (``keras.regularizers.l2``: no halving)."""
    return _penalty(0.0, _scale(l, "keras.regularizers.l2", "l"), False)


def l1_l2(l1: float = 0.01, l2: float = 0.01) -> Callable[[Tensor], Tensor | None]:
    """``l1 * sum(|w|) + l2 * sum(w**2)`` (``keras.regularizers.l1_l2``)."""
    return _penalty(_scale(l1, "keras.regularizers.l1_l2", "l1"), _scale(l2, "keras.regularizers.l1_l2", "l2"),
                    False)

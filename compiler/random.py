"""``cc.random``: TF1.15's ``tf.random`` names for the random ops of ``compiler`` (the same
functions, no new rules).

>>> import compiler as cc
>>> cc.random.normal([2, 3], seed=1).shape
(2, 3)
"""
from typing import Any

from .graph import Tensor
from .ops.random import multinomial, truncated_normal  # noqa: F401
from .ops.random import random_crop as crop  # noqa: F401
from .ops.random import random_shuffle as shuffle  # noqa: F401
from .ops.random import random_normal as normal  # noqa: F401
from .ops.random import random_uniform as uniform  # noqa: F401
from .ops.random_seed import set_random_seed  # noqa: F401
from .ops.random_seed import set_random_seed as set_seed  # noqa: F401


def categorical(logits: Any, num_samples: int, dtype: Any = None, seed: int | None = None,
                name: str | None = None) -> Tensor:
    """``multinomial`` in TF1.15's ``random.categorical`` argument order (``dtype``: int64 when None)."""
    return multinomial(logits, num_samples, seed=seed, name=name, output_dtype=dtype)

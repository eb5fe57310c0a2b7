"""``cc.distributions``: TF1's ``tf.distributions`` Normal, Bernoulli, Categorical and Uniform
(sampling, log-probabilities, entropies, moments) and ``kl_divergence`` between two of one kind.
Every method builds ordinary ops, so samples are differentiable where TF1's are (a Normal's and a
Uniform's through their parameters: the reparameterization trick) and log-probabilities always.

>>> import numpy as np, compiler as cc
>>> from runtime import Session
>>> normal = cc.distributions.Normal(loc=0.0, scale=2.0)
>>> with Session() as sess:
...     round(float(sess.run(normal.log_prob(0.0))), 6), sess.run(normal.sample(5, seed=1)).shape
(-1.612086, (5,))
"""
from __future__ import annotations

import math
from typing import Any, Sequence

import numpy as np

from . import dtypes
from .errors import ShapeError
from .graph import Tensor, located
from .ops.array import one_hot, shape, transpose, zeros_like
from .ops.base import convert_to_tensor
from .ops.elementwise import cast, erf, exp, less, log, logical_and, sigmoid, square, where
from .ops.elementwise import greater_equal as at_least
from .ops.nn import log_softmax, softmax, softplus
from .ops.random import multinomial, random_normal, random_uniform
from .ops.reduction import reduce_sum


def _parameter(value: Any, like: Tensor | None = None) -> Tensor:
    """A tensor parameter; Python numbers take ``like``'s dtype (float32 alone), numpy values keep theirs."""
    if isinstance(value, Tensor):
        return value
    if isinstance(value, (np.ndarray, np.generic)) and like is None:
        return convert_to_tensor(value)
    return convert_to_tensor(np.asarray(value, dtype=like.dtype if like is not None else np.float32))


def _sample_shape(sample_shape: Any, batch: Tensor) -> list[Any]:
    """``sample_shape`` then the batch's shape, a size known only when the step runs read from it."""
    leading = [int(sample_shape)] if np.ndim(sample_shape) == 0 else [int(n) for n in sample_shape]
    return leading + [shape(batch)[i] if size is None else size for i, size in enumerate(batch.shape)]


class Distribution:
    """What the distributions share: ``prob`` from ``log_prob``, and their name."""

    def __init__(self, name: str) -> None:
        self.name = name

    def log_prob(self, value: Any, name: str | None = None) -> Tensor:
        raise NotImplementedError

    def prob(self, value: Any, name: str | None = None) -> Tensor:
        """``exp(log_prob(value))``."""
        return exp(self.log_prob(value))


class Normal(Distribution):
    """The normal distribution of mean ``loc`` and standard deviation ``scale`` (broadcast together)."""

    def __init__(self, loc: Any, scale: Any, validate_args: bool = False, allow_nan_stats: bool = True,
                 name: str = "Normal") -> None:
        super().__init__(name)
        self.loc = _parameter(loc, scale if isinstance(scale, Tensor) else None)
        self.scale = _parameter(scale, self.loc)
        self._zeros = zeros_like(self.loc) + zeros_like(self.scale)   # the batch's shape

    def sample(self, sample_shape: Any = (), seed: int | None = None, name: str | None = None) -> Tensor:
        """``loc + scale * z``, ``z`` standard normal draws of shape ``sample_shape + batch``."""
        draws = random_normal(_sample_shape(sample_shape, self._zeros), dtype=self.loc.dtype, seed=seed)
        return self.loc + self.scale * draws

    def log_prob(self, value: Any, name: str | None = None) -> Tensor:
        z = (_parameter(value, self.loc) - self.loc) / self.scale
        return -0.5 * square(z) - log(self.scale) - 0.5 * math.log(2.0 * math.pi)

    def cdf(self, value: Any, name: str | None = None) -> Tensor:
        z = (_parameter(value, self.loc) - self.loc) / (self.scale * math.sqrt(2.0))
        return 0.5 * (1.0 + erf(z))

    def entropy(self, name: str | None = None) -> Tensor:
        return 0.5 * math.log(2.0 * math.pi * math.e) + log(self.scale) + self._zeros

    def mean(self, name: str | None = None) -> Tensor:
        return self.loc + self._zeros

    def mode(self, name: str | None = None) -> Tensor:
        return self.mean()

    def stddev(self, name: str | None = None) -> Tensor:
        return self.scale + self._zeros

    def variance(self, name: str | None = None) -> Tensor:
        return square(self.stddev())


class Uniform(Distribution):
    """The uniform distribution on ``[low, high)``."""

    def __init__(self, low: Any = 0.0, high: Any = 1.0, validate_args: bool = False, allow_nan_stats: bool = True,
                 name: str = "Uniform") -> None:
        super().__init__(name)
        self.low = _parameter(low, high if isinstance(high, Tensor) else None)
        self.high = _parameter(high, self.low)
        self._zeros = zeros_like(self.low) + zeros_like(self.high)

    def sample(self, sample_shape: Any = (), seed: int | None = None, name: str | None = None) -> Tensor:
        draws = random_uniform(_sample_shape(sample_shape, self._zeros), dtype=self.low.dtype, seed=seed)
        return self.low + (self.high - self.low) * draws

    def log_prob(self, value: Any, name: str | None = None) -> Tensor:
        x = _parameter(value, self.low)
        inside = logical_and(at_least(x, self.low), less(x, self.high))
        return where(inside, -log(self.high - self.low), -np.inf)

    def entropy(self, name: str | None = None) -> Tensor:
        return log(self.high - self.low)

    def mean(self, name: str | None = None) -> Tensor:
        return (self.low + self.high) / 2.0


def _logits_and_probabilities(function: str, logits: Any, probs: Any, binary: bool) -> tuple[Tensor, Tensor]:
    if (logits is None) == (probs is None):
        raise ValueError(located(f"{function}: give logits or probs, not both and not neither"))
    if logits is not None:
        logits = _parameter(logits)
        return logits, sigmoid(logits) if binary else softmax(logits)
    probs = _parameter(probs)
    return (log(probs) - log(1.0 - probs) if binary else log(probs)), probs


class Bernoulli(Distribution):
    """Outcomes 1 with probability ``probs`` (or ``sigmoid(logits)``), else 0, as ``dtype``."""

    def __init__(self, logits: Any = None, probs: Any = None, dtype: Any = dtypes.int32, validate_args: bool = False,
                 allow_nan_stats: bool = True, name: str = "Bernoulli") -> None:
        super().__init__(name)
        self.logits, self.probs = _logits_and_probabilities("Bernoulli", logits, probs, binary=True)
        self.dtype = dtypes.as_dtype(dtype)

    def sample(self, sample_shape: Any = (), seed: int | None = None, name: str | None = None) -> Tensor:
        draws = random_uniform(_sample_shape(sample_shape, self.probs), dtype=self.probs.dtype, seed=seed)
        return cast(less(draws, self.probs), self.dtype)

    def log_prob(self, value: Any, name: str | None = None) -> Tensor:
        x = cast(convert_to_tensor(value), self.logits.dtype)
        # x log p + (1 - x) log(1 - p), with log p = -softplus(-l) and log(1 - p) = -softplus(l)
        return -(x * softplus(-self.logits) + (1.0 - x) * softplus(self.logits))

    def entropy(self, name: str | None = None) -> Tensor:
        return self.probs * softplus(-self.logits) + (1.0 - self.probs) * softplus(self.logits)

    def mean(self, name: str | None = None) -> Tensor:
        return self.probs


class Categorical(Distribution):
    """Classes ``0 .. n-1`` (the last axis of ``logits`` or ``probs``), drawn as ``dtype``."""

    def __init__(self, logits: Any = None, probs: Any = None, dtype: Any = dtypes.int32, validate_args: bool = False,
                 allow_nan_stats: bool = True, name: str = "Categorical") -> None:
        super().__init__(name)
        self.logits, self.probs = _logits_and_probabilities("Categorical", logits, probs, binary=False)
        if not self.logits.shape or self.logits.shape[-1] is None:
            raise ShapeError(located(f"Categorical: needs a last axis of known size (the classes), got "
                                     f"{self.logits.shape}"))
        self.dtype = dtypes.as_dtype(dtype)
        self.event_size = self.logits.shape[-1]

    def sample(self, sample_shape: Any = (), seed: int | None = None, name: str | None = None) -> Tensor:
        """Draws of shape ``sample_shape + batch`` (a batch of rank 0 or 1)."""
        count = int(np.prod(sample_shape)) if np.ndim(sample_shape) else int(sample_shape)
        rank = len(self.logits.shape)
        if rank > 2:
            raise ShapeError(located("Categorical.sample: batches of rank 0 or 1 are available"))
        logits = self.logits if rank == 2 else self.logits[None]
        draws = cast(transpose(multinomial(logits, count, seed=seed)), self.dtype)    # [count, batch]
        return draws if rank == 2 else draws[:, 0]

    def log_prob(self, value: Any, name: str | None = None) -> Tensor:
        chosen = one_hot(convert_to_tensor(value), self.event_size, dtype=self.logits.dtype)
        return reduce_sum(chosen * log_softmax(self.logits), -1)

    def entropy(self, name: str | None = None) -> Tensor:
        return -reduce_sum(self.probs * log_softmax(self.logits), -1)


def kl_divergence(distribution_a: Distribution, distribution_b: Distribution, allow_nan_stats: bool = True,
                  name: str | None = None) -> Tensor:
    """KL(a || b) for two Normals, two Categoricals or two Bernoullis (TF1's ``kl_divergence``)."""
    a, b = distribution_a, distribution_b
    if isinstance(a, Normal) and isinstance(b, Normal):
        ratio = square(a.scale / b.scale)
        return 0.5 * (ratio + square((a.loc - b.loc) / b.scale) - 1.0 - log(ratio))
    if isinstance(a, Categorical) and isinstance(b, Categorical):
        return reduce_sum(a.probs * (log_softmax(a.logits) - log_softmax(b.logits)), -1)
    if isinstance(a, Bernoulli) and isinstance(b, Bernoulli):
        return a.probs * (softplus(-b.logits) - softplus(-a.logits)) + \
            (1.0 - a.probs) * (softplus(b.logits) - softplus(a.logits))
    raise NotImplementedError(located(f"kl_divergence: no KL between {type(a).__name__} and {type(b).__name__}"))


__all__: Sequence[str] = ("Distribution", "Normal", "Uniform", "Bernoulli", "Categorical", "kl_divergence")

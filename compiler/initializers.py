"""Initializers: a variable's first value from its shape, as TF1's ``tf.*_initializer`` classes.

An initializer is called as ``init(shape, dtype=None, partition_info=None)`` and returns a numpy
array: a variable's initial value is concrete here (``cc.Variable`` holds it, and
``global_variables_initializer`` resets the variable to it). Random ones draw with numpy from a
seed made by TF1's rules (``cc.set_random_seed`` and the op seed ``seed``; without either, from
the number of ops built so far), so a script builds the same model every time it runs.

>>> import compiler as cc
>>> values = cc.glorot_uniform_initializer(seed=1)((784, 512))     # uniform within sqrt(6 / (784 + 512))
>>> bool(abs(values).max() <= (6 / (784 + 512)) ** 0.5), values.dtype.name
(True, 'float32')
"""
from __future__ import annotations

import math
import weakref
from typing import Any, Sequence

import numpy as np

from . import dtypes
from .graph import get_default_graph, located
from .ops.random_seed import check_seed, get_seed


def _shape(shape: Any, what: str) -> tuple[int, ...]:
    try:
        sizes = tuple(int(d) for d in (shape if isinstance(shape, (list, tuple)) else [shape]))
    except (TypeError, ValueError):
        raise TypeError(located(f"{what}: the shape must be Python ints, got {shape!r}")) from None
    if any(d < 0 for d in sizes):
        raise ValueError(located(f"{what}: the shape must be non-negative, got {shape!r}"))
    return sizes


def _float_dtype(dtype: Any, default: Any, what: str) -> np.dtype:
    dtype = dtypes.as_dtype(dtype if dtype is not None else default)
    if not dtypes.is_floating(dtype):
        raise TypeError(located(f"{what} makes floats, not {dtype.name}"))
    return dtype


class Initializer:
    """The base of the initializers: ``init(shape, dtype=None, partition_info=None)``."""

    dtype: Any = dtypes.float32

    def __call__(self, shape: Sequence[int], dtype: Any = None, partition_info: Any = None) -> np.ndarray:
        raise NotImplementedError

    def _generator(self, seed: int | None) -> np.random.Generator:
        graph = get_default_graph()
        graph_seed, op_seed = get_seed(seed, graph)
        words = [graph_seed & 0xFFFFFFFFFFFFFFFF, op_seed & 0xFFFFFFFFFFFFFFFF, 0x1217]
        if seed is None:
            # Unseeded, the op seed is the graph's op count; a call adds no op, so calls with no op
            # between them (an LSTM's four gate blocks) count themselves apart, as TF1's random ops do.
            last_count, repeats = _unseeded_calls.get(graph, (None, 0))
            repeats = repeats + 1 if last_count == op_seed else 0
            _unseeded_calls[graph] = (op_seed, repeats)
            if repeats:
                words.insert(2, repeats)
        return np.random.default_rng(words)


# Per graph: the op count at the last unseeded initializer call, and how many calls repeated it.
_unseeded_calls: weakref.WeakKeyDictionary[Any, tuple[int, int]] = weakref.WeakKeyDictionary()


class zeros_initializer(Initializer):  # noqa: N801 (TF1's names)
    """Zeros (any dtype)."""

    def __init__(self, dtype: Any = dtypes.float32) -> None:
        self.dtype = dtype

    def __call__(self, shape: Sequence[int], dtype: Any = None, partition_info: Any = None) -> np.ndarray:
        return np.zeros(_shape(shape, "zeros_initializer"), dtypes.as_dtype(dtype or self.dtype))


class ones_initializer(Initializer):  # noqa: N801
    """Ones (any dtype)."""

    def __init__(self, dtype: Any = dtypes.float32) -> None:
        self.dtype = dtype

    def __call__(self, shape: Sequence[int], dtype: Any = None, partition_info: Any = None) -> np.ndarray:
        return np.ones(_shape(shape, "ones_initializer"), dtypes.as_dtype(dtype or self.dtype))


class constant_initializer(Initializer):  # noqa: N801
    """``value`` everywhere (a number), or a list or array of values laid out in the variable's
    shape, the last one repeated where the list is shorter, as TF1's; float32 unless the variable
    or ``dtype`` says otherwise (TF1's default, whatever the value's own type)."""

    def __init__(self, value: Any = 0, dtype: Any = dtypes.float32, verify_shape: bool = False) -> None:
        self.value = np.asarray(value)
        self.dtype = dtype
        self.verify_shape = verify_shape

    def __call__(self, shape: Sequence[int], dtype: Any = None, partition_info: Any = None,
                 verify_shape: bool | None = None) -> np.ndarray:
        sizes = _shape(shape, "constant_initializer")
        dtype = dtypes.as_dtype(dtype or self.dtype or dtypes.float32)
        count = math.prod(sizes)
        if (self.verify_shape if verify_shape is None else verify_shape) and self.value.shape != sizes:
            raise ValueError(located(f"constant_initializer: verify_shape: the value's shape {self.value.shape} is "
                                     f"not the variable's {sizes}"))
        if self.value.size == 1:
            return np.full(sizes, self.value.reshape(()), dtype)
        if self.value.size > count or (self.value.size == 0 and count):
            raise ValueError(located(f"constant_initializer: {self.value.size} values for a variable of shape "
                                     f"{sizes} ({count} elements)"))
        flat = self.value.reshape(-1)
        if flat.size < count:
            flat = np.concatenate([flat, np.full(count - flat.size, flat[-1], flat.dtype)])
        return flat.reshape(sizes).astype(dtype)


class random_normal_initializer(Initializer):  # noqa: N801
    """Normal draws of ``mean`` and ``stddev``."""

    def __init__(self, mean: float = 0.0, stddev: float = 1.0, seed: int | None = None,
                 dtype: Any = dtypes.float32) -> None:
        self.mean, self.stddev, self.seed, self.dtype = mean, stddev, check_seed(seed, "initializer"), dtype

    def __call__(self, shape: Sequence[int], dtype: Any = None, partition_info: Any = None) -> np.ndarray:
        sizes = _shape(shape, "random_normal_initializer")
        draws = self._generator(self.seed).normal(self.mean, self.stddev, sizes)
        return draws.astype(_float_dtype(dtype, self.dtype, "random_normal_initializer"))


def _truncated(generator: np.random.Generator, sizes: tuple[int, ...]) -> np.ndarray:
    """Standard normal draws redrawn until within two standard deviations (TF1's truncation)."""
    draws = generator.standard_normal(sizes)
    outside = np.abs(draws) > 2.0
    while outside.any():
        draws[outside] = generator.standard_normal(int(outside.sum()))
        outside = np.abs(draws) > 2.0
    return draws


class truncated_normal_initializer(Initializer):  # noqa: N801
    """Normal draws of ``mean`` and ``stddev``, redrawn beyond two standard deviations."""

    def __init__(self, mean: float = 0.0, stddev: float = 1.0, seed: int | None = None,
                 dtype: Any = dtypes.float32) -> None:
        self.mean, self.stddev, self.seed, self.dtype = mean, stddev, check_seed(seed, "initializer"), dtype

    def __call__(self, shape: Sequence[int], dtype: Any = None, partition_info: Any = None) -> np.ndarray:
        sizes = _shape(shape, "truncated_normal_initializer")
        draws = self.mean + self.stddev * _truncated(self._generator(self.seed), sizes)
        return draws.astype(_float_dtype(dtype, self.dtype, "truncated_normal_initializer"))


class random_uniform_initializer(Initializer):  # noqa: N801
    """Uniform draws in ``[minval, maxval)`` (``maxval`` None: 1, for floats; integer dtypes, as
    TF1's, draw integers and need ``maxval``)."""

    def __init__(self, minval: float = 0.0, maxval: float | None = None, seed: int | None = None,
                 dtype: Any = dtypes.float32) -> None:
        self.minval, self.maxval, self.seed, self.dtype = minval, maxval, check_seed(seed, "initializer"), dtype

    def __call__(self, shape: Sequence[int], dtype: Any = None, partition_info: Any = None) -> np.ndarray:
        sizes = _shape(shape, "random_uniform_initializer")
        target = dtypes.as_dtype(dtype or self.dtype or dtypes.float32)
        if dtypes.is_integer(target):
            if self.maxval is None:
                raise ValueError(located(f"random_uniform_initializer: an {target.name} variable needs maxval "
                                         "(as TF1)"))
            if int(self.maxval) <= int(self.minval):
                raise ValueError(located(f"random_uniform_initializer: needs minval < maxval for integers, got "
                                         f"{self.minval} and {self.maxval}"))
            return self._generator(self.seed).integers(int(self.minval), int(self.maxval), sizes).astype(target)
        maxval = 1.0 if self.maxval is None else self.maxval
        draws = self._generator(self.seed).uniform(self.minval, maxval, sizes)
        return draws.astype(_float_dtype(dtype, self.dtype, "random_uniform_initializer"))


def _fans(sizes: tuple[int, ...]) -> tuple[float, float]:
    """(fan_in, fan_out) as TF1 counts them: a matrix's rows and columns; a convolution kernel's
    input and output channels times its window."""
    if len(sizes) < 1:
        return 1.0, 1.0
    if len(sizes) == 1:
        return float(sizes[0]), float(sizes[0])
    window = math.prod(sizes[:-2])
    return float(sizes[-2] * window), float(sizes[-1] * window)


class variance_scaling_initializer(Initializer):  # noqa: N801
    """Draws whose variance is ``scale / n``, ``n`` the fan-in, the fan-out or their mean (``mode``);
    ``distribution``: "truncated_normal" (TF1's "normal"), "untruncated_normal" or "uniform"."""

    def __init__(self, scale: float = 1.0, mode: str = "fan_in", distribution: str = "truncated_normal",
                 seed: int | None = None, dtype: Any = dtypes.float32) -> None:
        if scale <= 0.0:
            raise ValueError(located(f"variance_scaling_initializer: scale must be positive, got {scale!r}"))
        if mode not in ("fan_in", "fan_out", "fan_avg"):
            raise ValueError(located(f"variance_scaling_initializer: mode must be 'fan_in', 'fan_out' or 'fan_avg', "
                                     f"got {mode!r}"))
        distribution = "truncated_normal" if distribution == "normal" else distribution
        if distribution not in ("truncated_normal", "untruncated_normal", "uniform"):
            raise ValueError(located(f"variance_scaling_initializer: distribution must be 'truncated_normal', "
                                     f"'untruncated_normal' or 'uniform', got {distribution!r}"))
        self.scale, self.mode, self.distribution = scale, mode, distribution
        self.seed, self.dtype = check_seed(seed, "initializer"), dtype

    def __call__(self, shape: Sequence[int], dtype: Any = None, partition_info: Any = None) -> np.ndarray:
        sizes = _shape(shape, "variance_scaling_initializer")
        fan_in, fan_out = _fans(sizes)
        n = {"fan_in": fan_in, "fan_out": fan_out, "fan_avg": (fan_in + fan_out) / 2.0}[self.mode]
        variance = self.scale / max(1.0, n)
        generator = self._generator(self.seed)
        if self.distribution == "uniform":
            limit = math.sqrt(3.0 * variance)
            draws = generator.uniform(-limit, limit, sizes)
        elif self.distribution == "untruncated_normal":
            draws = math.sqrt(variance) * generator.standard_normal(sizes)
        else:   # a normal truncated at two deviations has 0.8796 of the untruncated one's spread
            draws = math.sqrt(variance) / 0.87962566103423978 * _truncated(generator, sizes)
        return draws.astype(_float_dtype(dtype, self.dtype, "variance_scaling_initializer"))


class glorot_uniform_initializer(variance_scaling_initializer):  # noqa: N801
    """Xavier/Glorot uniform: variance ``2 / (fan_in + fan_out)`` (get_variable's default)."""

    def __init__(self, seed: int | None = None, dtype: Any = dtypes.float32) -> None:
        super().__init__(1.0, "fan_avg", "uniform", seed, dtype)


class glorot_normal_initializer(variance_scaling_initializer):  # noqa: N801
    """Xavier/Glorot normal (truncated): variance ``2 / (fan_in + fan_out)``."""

    def __init__(self, seed: int | None = None, dtype: Any = dtypes.float32) -> None:
        super().__init__(1.0, "fan_avg", "truncated_normal", seed, dtype)


def he_normal(seed: int | None = None) -> variance_scaling_initializer:
    """He normal (truncated): variance ``2 / fan_in``, for ReLU layers."""
    return variance_scaling_initializer(2.0, "fan_in", "truncated_normal", seed)


def he_uniform(seed: int | None = None) -> variance_scaling_initializer:
    """He uniform: variance ``2 / fan_in``."""
    return variance_scaling_initializer(2.0, "fan_in", "uniform", seed)


def lecun_normal(seed: int | None = None) -> variance_scaling_initializer:
    """LeCun normal (truncated): variance ``1 / fan_in`` (for SELU networks)."""
    return variance_scaling_initializer(1.0, "fan_in", "truncated_normal", seed)


def lecun_uniform(seed: int | None = None) -> variance_scaling_initializer:
    """LeCun uniform: variance ``1 / fan_in``."""
    return variance_scaling_initializer(1.0, "fan_in", "uniform", seed)


class orthogonal_initializer(Initializer):  # noqa: N801
    """A (semi-)orthogonal matrix times ``gain``, of the shape flattened to (prod(shape[:-1]),
    shape[-1]) (TF1's rule), from the QR decomposition of normal draws."""

    def __init__(self, gain: float = 1.0, seed: int | None = None, dtype: Any = dtypes.float32) -> None:
        self.gain, self.seed, self.dtype = gain, check_seed(seed, "initializer"), dtype

    def __call__(self, shape: Sequence[int], dtype: Any = None, partition_info: Any = None) -> np.ndarray:
        sizes = _shape(shape, "orthogonal_initializer")
        if len(sizes) < 2:
            raise ValueError(located(f"orthogonal_initializer needs a shape of rank 2 or more, got {sizes}"))
        rows, columns = math.prod(sizes[:-1]), sizes[-1]
        draws = self._generator(self.seed).standard_normal((max(rows, columns), min(rows, columns)))
        q, r = np.linalg.qr(draws)
        q = q * np.sign(np.diag(r))          # a uniform draw over the orthogonal matrices
        matrix = q if rows >= columns else q.T
        return (self.gain * matrix).reshape(sizes).astype(_float_dtype(dtype, self.dtype, "orthogonal_initializer"))


class identity_initializer(Initializer):  # noqa: N801
    """``gain`` times the identity matrix, for a 2-D shape (TF1's ``identity_initializer``; a
    non-square shape gets ones on its main diagonal)."""

    def __init__(self, gain: float = 1.0, dtype: Any = dtypes.float32) -> None:
        self.gain, self.dtype = gain, dtype

    def __call__(self, shape: Sequence[int], dtype: Any = None, partition_info: Any = None) -> np.ndarray:
        sizes = _shape(shape, "identity_initializer")
        if len(sizes) != 2:
            raise ValueError(located(f"identity_initializer needs a 2-D shape, got {list(sizes)}"))
        return (self.gain * np.eye(*sizes)).astype(_float_dtype(dtype, self.dtype, "identity_initializer"))


class uniform_unit_scaling_initializer(Initializer):  # noqa: N801
    """Uniform draws in ``[-limit, limit)`` with ``limit = factor * sqrt(3 / fan_in)`` and ``fan_in``
    the product of all sizes but the last (TF1's ``uniform_unit_scaling_initializer``: the input's
    scale kept through a linear layer)."""

    def __init__(self, factor: float = 1.0, seed: int | None = None, dtype: Any = dtypes.float32) -> None:
        self.factor, self.seed, self.dtype = factor, check_seed(seed, "initializer"), dtype

    def __call__(self, shape: Sequence[int], dtype: Any = None, partition_info: Any = None) -> np.ndarray:
        sizes = _shape(shape, "uniform_unit_scaling_initializer")
        fan_in = max(math.prod(sizes[:-1]) if len(sizes) > 1 else (sizes[0] if sizes else 1), 1)
        limit = self.factor * math.sqrt(3.0 / fan_in)
        draws = self._generator(self.seed).uniform(-limit, limit, sizes)
        return draws.astype(_float_dtype(dtype, self.dtype, "uniform_unit_scaling_initializer"))


def xavier_initializer(uniform: bool = True, seed: int | None = None, dtype: Any = dtypes.float32) -> Initializer:
    """TF1's ``contrib.layers.xavier_initializer``: Glorot's, uniform or (truncated) normal."""
    return (glorot_uniform_initializer if uniform else glorot_normal_initializer)(seed=seed, dtype=dtype)


def contrib_variance_scaling_initializer(factor: float = 2.0, mode: str = "FAN_IN", uniform: bool = False,
                                         seed: int | None = None, dtype: Any = dtypes.float32) -> Initializer:
    """TF1's ``contrib.layers.variance_scaling_initializer`` (He's by default) as ``variance_scaling``."""
    return variance_scaling_initializer(scale=factor, mode=mode.lower(),
                                        distribution="uniform" if uniform else "truncated_normal", seed=seed,
                                        dtype=dtype)


# TF1's short names (``tf.initializers.zeros``, ...): the same classes.
zeros = zeros_initializer
ones = ones_initializer
constant = constant_initializer
random_normal = random_normal_initializer
random_uniform = random_uniform_initializer
truncated_normal = truncated_normal_initializer
variance_scaling = variance_scaling_initializer
glorot_uniform = glorot_uniform_initializer
glorot_normal = glorot_normal_initializer
orthogonal = orthogonal_initializer
identity = identity_initializer

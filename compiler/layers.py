"""``cc.layers``: TF1's ``tf.layers`` functions, each a variable scope with ``get_variable`` and
ops of ``cc`` and ``cc.nn`` (compositions, no rules of their own).

A layer called twice makes two sets of variables (``dense``, ``dense_1``...); give it a ``name``
and ``reuse=True`` (or open a reusing ``variable_scope``) to share them.

>>> import numpy as np, compiler as cc
>>> with cc.Graph().as_default():
...     x = cc.placeholder("float32", (None, 784))
...     hidden = cc.layers.dense(x, 128, activation=cc.nn.relu)
...     logits = cc.layers.dense(hidden, 10)
...     print(logits.shape, [v.op.name for v in cc.trainable_variables()])
(None, 10) ['dense/kernel', 'dense/bias', 'dense_1/kernel', 'dense_1/bias']
"""
from __future__ import annotations

import math
from typing import Any, Callable, Sequence

import numpy as np

from . import dtypes, nn
from .graph import GraphKeys, Tensor, get_default_graph, located
from . import initializers
from .initializers import ones_initializer, zeros_initializer
from .control_flow import cond
from .ops.array import element_count, reshape
from .ops.base import composite_scope, convert_to_tensor
from .ops.conv import avg_pool, conv2d as _conv2d, max_pool
from .ops.elementwise import maximum, where
from .ops.linalg import matmul
from .ops.state import assign_sub, group
from .variable_scope import get_variable, top_variable_scope, variable_scope
from .shapes import format_shape


def _is_int(value: Any) -> bool:
    return isinstance(value, (int, np.integer)) and not isinstance(value, (bool, np.bool_))


def _positive(value: Any, what: str, layer: str) -> int:
    if not _is_int(value) or value < 1:
        raise ValueError(located(f"{layer}: {what} must be a positive int, got {value!r}"))
    return int(value)


def _pair(value: Any, what: str, layer: str) -> tuple[int, int]:
    values = (value, value) if _is_int(value) else tuple(value) if isinstance(value, (list, tuple)) else ()
    if len(values) != 2 or not all(_is_int(v) and v >= 1 for v in values):
        raise ValueError(located(f"{layer}: {what} must be a positive int or a pair of them, got {value!r}"))
    return int(values[0]), int(values[1])


def _layer_scope(name: str | None, base: str, values: list[Tensor], reuse: Any) -> Any:
    """The layer's variable scope, as TF1's layers choose it: with ``reuse``, ``name`` (or the
    layer's base name) itself, so a second call shares the first's variables; otherwise ``name``,
    or the base name made unique (``dense``, ``dense_1``...)."""
    if reuse:
        return variable_scope(name or base, values=values, reuse=reuse)
    return variable_scope(name, default_name=base, values=values, reuse=reuse)


def _unsupported(layer: str, **given: Any) -> None:
    """TF1 arguments accepted for their default value only."""
    for argument, (value, default) in given.items():
        if value != default:
            raise ValueError(located(f"{layer}: {argument}={value!r} is not supported (only {default!r})"))


def _padding(padding: str, layer: str) -> str:
    if not isinstance(padding, str) or padding.lower() not in ("valid", "same"):
        raise ValueError(located(f"{layer}: padding must be 'valid' or 'same', got {padding!r}"))
    return padding.upper()


def _channels_last(data_format: str, layer: str) -> None:
    if data_format != "channels_last":
        raise ValueError(located(f"{layer}: only data_format='channels_last' (NHWC) is supported, got "
                                 f"{data_format!r}"))


def _float_inputs(inputs: Any, layer: str) -> Tensor:
    x = convert_to_tensor(inputs)
    if not dtypes.is_floating(x.dtype):
        raise TypeError(located(f"{layer}: the inputs must be float32 or float64, got {x.dtype.name} {x.name!r}"))
    return x


# Keras's names, which TF1.15's tf.layers accept for activations and initializers.
_ACTIVATIONS: dict[str, Callable[[Tensor], Tensor] | None] = {
    "linear": None, "relu": nn.relu, "tanh": nn.tanh, "sigmoid": nn.sigmoid, "softmax": nn.softmax, "elu": nn.elu,
    "selu": nn.selu, "softplus": nn.softplus, "softsign": nn.softsign, "swish": nn.swish, "gelu": nn.gelu}
_INITIALIZERS: dict[str, Callable[[], Any]] = {
    "zeros": initializers.zeros_initializer, "ones": initializers.ones_initializer,
    "glorot_uniform": initializers.glorot_uniform_initializer, "glorot_normal": initializers.glorot_normal_initializer,
    "he_normal": initializers.he_normal, "he_uniform": initializers.he_uniform,
    "lecun_normal": initializers.lecun_normal, "lecun_uniform": initializers.lecun_uniform,
    # Keras's own defaults for these names (stddev 0.05, +-0.05), not those of tf.*_initializer (1.0, [0, 1)).
    "random_normal": lambda: initializers.random_normal_initializer(stddev=0.05),
    "random_uniform": lambda: initializers.random_uniform_initializer(-0.05, 0.05),
    "truncated_normal": lambda: initializers.truncated_normal_initializer(stddev=0.05),
    "orthogonal": initializers.orthogonal_initializer}


def _activation(activation: Any, layer: str) -> Callable[[Tensor], Tensor] | None:
    """A function, None, or one of Keras's names ("relu", "tanh"...)."""
    if isinstance(activation, str):
        if activation not in _ACTIVATIONS:
            raise ValueError(located(f"{layer}: unknown activation {activation!r}; give a function (cc.nn.relu) or "
                                     f"one of {', '.join(sorted(_ACTIVATIONS))}"))
        return _ACTIVATIONS[activation]
    if activation is not None and not callable(activation):
        raise TypeError(located(f"{layer}: activation must be a function of a tensor, got {activation!r}"))
    return activation


def _initializer(initializer: Any, what: str, layer: str) -> Any:
    """An initializer, None (the layer's default), a value, or one of Keras's names ("zeros"...)."""
    if isinstance(initializer, str):
        if initializer not in _INITIALIZERS:
            raise ValueError(located(f"{layer}: unknown {what} {initializer!r}; give an initializer "
                                     f"(cc.zeros_initializer()) or one of {', '.join(sorted(_INITIALIZERS))}"))
        return _INITIALIZERS[initializer]()
    return initializer


def _regularizer(regularizer: Any, what: str, layer: str) -> Any:
    if regularizer is not None and not callable(regularizer):
        raise TypeError(located(f"{layer}: {what} must be a function of the weights giving a scalar loss (e.g. "
                                f"lambda w: 1e-4 * cc.nn.l2_loss(w)), got {regularizer!r}"))
    return regularizer


def _weight_arguments(layer: str, kernel_initializer: Any, bias_initializer: Any, kernel_regularizer: Any,
                      bias_regularizer: Any, activity_regularizer: Any) -> tuple[Any, Any, Any, Any, Any]:
    """The initializers (Keras's names resolved) and the regularizers (checked) of a layer with a
    kernel and a bias, in the order given."""
    return (_initializer(kernel_initializer, "kernel_initializer", layer),
            _initializer(bias_initializer, "bias_initializer", layer),
            _regularizer(kernel_regularizer, "kernel_regularizer", layer),
            _regularizer(bias_regularizer, "bias_regularizer", layer),
            _regularizer(activity_regularizer, "activity_regularizer", layer))


def _training(training: Any, layer: str) -> Any:
    """``training`` as TF1's layers take it: a bool scalar tensor, or a Python bool (0 and 1 too);
    anything else is refused (the string "False" is true in Python)."""
    if isinstance(training, Tensor):
        if training.dtype != dtypes.bool_ or training.shape != ():
            raise TypeError(located(f"{layer}: training must be a bool scalar tensor, got {training.dtype.name} "
                                    f"{format_shape(training.shape)} {training.name!r}"))
        return training
    if isinstance(training, (bool, np.bool_)) or (_is_int(training) and training in (0, 1)):
        return bool(training)
    raise TypeError(located(f"{layer}: training must be a Python bool or a bool scalar tensor, got {training!r}"))


def dense(inputs: Any, units: int, activation: Callable[[Tensor], Tensor] | str | None = None, use_bias: bool = True,
          kernel_initializer: Any = None, bias_initializer: Any = None, kernel_regularizer: Any = None,
          bias_regularizer: Any = None, activity_regularizer: Any = None, kernel_constraint: Any = None,
          bias_constraint: Any = None, trainable: bool = True, name: str | None = None,
          reuse: Any = None) -> Tensor:
    """``activation(inputs @ kernel + bias)`` over the last axis of ``inputs`` (any rank), with
    ``kernel`` ``[inputs.shape[-1], units]`` (Glorot uniform) and ``bias`` ``[units]`` (zeros);
    ``activity_regularizer(output)`` joins the regularization losses. As in TF1.15, ``activation``
    and the initializers may also be Keras's names ("relu", "glorot_normal", "zeros"...)."""
    x = _float_inputs(inputs, "dense")
    units = _positive(units, "units", "dense")
    activation = _activation(activation, "dense")
    kernel_initializer, bias_initializer, kernel_regularizer, bias_regularizer, activity_regularizer = \
        _weight_arguments("dense", kernel_initializer, bias_initializer, kernel_regularizer, bias_regularizer,
                          activity_regularizer)
    depth = x.shape[-1] if x.shape else None
    if depth is None:
        raise ValueError(located(f"dense: the last axis of {x.name!r} {format_shape(x.shape)} must be known"))
    with _layer_scope(name, "dense", [x], reuse):
        kernel = get_variable("kernel", [depth, units], x.dtype, kernel_initializer, kernel_regularizer, trainable,
                              constraint=kernel_constraint)
        y = matmul(x, kernel)
        if use_bias:
            bias = get_variable("bias", [units], x.dtype, bias_initializer or zeros_initializer(),
                                bias_regularizer, trainable, constraint=bias_constraint)
            y = y + bias
        return _activity(activation(y) if activation is not None else y, activity_regularizer)


def _activity(output: Tensor, regularizer: Any) -> Tensor:
    if regularizer is not None:
        loss = regularizer(output)
        if loss is not None:
            get_default_graph().add_to_collection(GraphKeys.REGULARIZATION_LOSSES, loss)
    return output


def conv2d(inputs: Any, filters: int, kernel_size: Any, strides: Any = (1, 1), padding: str = "valid",
           data_format: str = "channels_last", dilation_rate: Any = (1, 1),
           activation: Callable[[Tensor], Tensor] | str | None = None, use_bias: bool = True,
           kernel_initializer: Any = None, bias_initializer: Any = None, kernel_regularizer: Any = None,
           bias_regularizer: Any = None, activity_regularizer: Any = None, kernel_constraint: Any = None,
           bias_constraint: Any = None, trainable: bool = True, name: str | None = None,
           reuse: Any = None) -> Tensor:
    """A 2-D convolution layer on NHWC ``inputs``: ``kernel`` ``[kh, kw, in_channels, filters]``
    (Glorot uniform), ``bias`` ``[filters]`` (zeros), padding "valid" or "same"."""
    x = _float_inputs(inputs, "conv2d")
    _channels_last(data_format, "conv2d")
    filters = _positive(filters, "filters", "conv2d")
    activation = _activation(activation, "conv2d")
    kernel_initializer, bias_initializer, kernel_regularizer, bias_regularizer, activity_regularizer = \
        _weight_arguments("conv2d", kernel_initializer, bias_initializer, kernel_regularizer, bias_regularizer,
                          activity_regularizer)
    if len(x.shape) != 4 or x.shape[3] is None:
        raise ValueError(located(f"conv2d: the inputs must be NHWC with known channels, got {format_shape(x.shape)}"))
    kh, kw = _pair(kernel_size, "kernel_size", "conv2d")
    with _layer_scope(name, "conv2d", [x], reuse):
        kernel = get_variable("kernel", [kh, kw, x.shape[3], filters], x.dtype, kernel_initializer,
                              kernel_regularizer, trainable, constraint=kernel_constraint)
        y = _conv2d(x, kernel, strides=_pair(strides, "strides", "conv2d"), padding=_padding(padding, "conv2d"),
                    dilations=_pair(dilation_rate, "dilation_rate", "conv2d"))
        if use_bias:
            y = y + get_variable("bias", [filters], x.dtype, bias_initializer or zeros_initializer(),
                                 bias_regularizer, trainable, constraint=bias_constraint)
        return _activity(activation(y) if activation is not None else y, activity_regularizer)


def conv2d_transpose(inputs: Any, filters: int, kernel_size: Any, strides: Any = (1, 1), padding: str = "valid",
                     data_format: str = "channels_last", activation: Callable[[Tensor], Tensor] | str | None = None,
                     use_bias: bool = True, kernel_initializer: Any = None, bias_initializer: Any = None,
                     kernel_regularizer: Any = None, bias_regularizer: Any = None, activity_regularizer: Any = None,
                     kernel_constraint: Any = None, bias_constraint: Any = None, trainable: bool = True,
                     name: str | None = None, reuse: Any = None) -> Tensor:
    """A transposed 2-D convolution layer (TF1's ``layers.conv2d_transpose``, an upsampling
    "deconvolution") on NHWC ``inputs``: ``kernel`` ``[kh, kw, filters, in_channels]`` (Glorot
    uniform), ``bias`` ``[filters]``; the output is ``size * stride`` ("same") or ``size * stride +
    max(kernel - stride, 0)`` ("valid") along each spatial axis, as TF1's.

    >>> import compiler as cc
    >>> cc.layers.conv2d_transpose(cc.placeholder("float32", (None, 7, 7, 16)), 8, 3, strides=2,
    ...                            padding="same").shape
    (None, 14, 14, 8)
    """
    x = _float_inputs(inputs, "conv2d_transpose")
    _channels_last(data_format, "conv2d_transpose")
    filters = _positive(filters, "filters", "conv2d_transpose")
    activation = _activation(activation, "conv2d_transpose")
    kernel_initializer, bias_initializer, kernel_regularizer, bias_regularizer, activity_regularizer = \
        _weight_arguments("conv2d_transpose", kernel_initializer, bias_initializer, kernel_regularizer,
                          bias_regularizer, activity_regularizer)
    if len(x.shape) != 4 or None in x.shape[1:]:
        raise ValueError(located(f"conv2d_transpose: the inputs must be NHWC with known height, width and channels, "
                                 f"got {format_shape(x.shape)}"))
    kh, kw = _pair(kernel_size, "kernel_size", "conv2d_transpose")
    sh, sw = _pair(strides, "strides", "conv2d_transpose")
    mode = _padding(padding, "conv2d_transpose")

    def grown(size: int, kernel: int, stride: int) -> int:
        return size * stride + (max(kernel - stride, 0) if mode == "VALID" else 0)
    with _layer_scope(name, "conv2d_transpose", [x], reuse):
        kernel = get_variable("kernel", [kh, kw, filters, x.shape[3]], x.dtype, kernel_initializer,
                              kernel_regularizer, trainable, constraint=kernel_constraint)
        y = nn.conv2d_transpose(x, kernel, [x.shape[0], grown(x.shape[1], kh, sh), grown(x.shape[2], kw, sw), filters],
                                strides=[1, sh, sw, 1], padding=mode)
        if use_bias:
            y = y + get_variable("bias", [filters], x.dtype, bias_initializer or zeros_initializer(),
                                 bias_regularizer, trainable, constraint=bias_constraint)
        return _activity(activation(y) if activation is not None else y, activity_regularizer)


def max_pooling2d(inputs: Any, pool_size: Any, strides: Any, padding: str = "valid",
                  data_format: str = "channels_last", name: str | None = None) -> Tensor:
    """Max pooling over windows of ``pool_size`` (NHWC)."""
    _channels_last(data_format, "max_pooling2d")
    return max_pool(inputs, ksize=_pair(pool_size, "pool_size", "max_pooling2d"),
                    strides=_pair(strides, "strides", "max_pooling2d"), padding=_padding(padding, "max_pooling2d"),
                    name=name)


def average_pooling2d(inputs: Any, pool_size: Any, strides: Any, padding: str = "valid",
                      data_format: str = "channels_last", name: str | None = None) -> Tensor:
    """Average pooling over windows of ``pool_size`` (NHWC; "same" divides by the window's count
    of input elements, as TF1)."""
    _channels_last(data_format, "average_pooling2d")
    return avg_pool(inputs, ksize=_pair(pool_size, "pool_size", "average_pooling2d"),
                    strides=_pair(strides, "strides", "average_pooling2d"),
                    padding=_padding(padding, "average_pooling2d"), name=name)


def flatten(inputs: Any, name: str | None = None, data_format: str = "channels_last") -> Tensor:
    """``[batch, ...]`` as ``[batch, everything else]``."""
    _channels_last(data_format, "flatten")
    x = convert_to_tensor(inputs)
    if not x.shape:
        raise ValueError(located(f"flatten: the inputs need a batch axis, got a scalar {x.name!r}"))
    rest = x.shape[1:]
    if None in rest:
        raise ValueError(located(f"flatten: all axes but the first of {x.name!r} {format_shape(x.shape)} must be "
                                 f"known"))
    return reshape(x, (-1 if x.shape[0] is None or math.prod(rest) > 0 else x.shape[0], math.prod(rest)),
                   name=name)


def dropout(inputs: Any, rate: float = 0.5, noise_shape: Any = None, seed: int | None = None,
            training: Any = False, name: str | None = None) -> Tensor:
    """``nn.dropout(inputs, rate)`` when ``training`` (a Python bool or a bool scalar tensor),
    ``inputs`` unchanged otherwise (TF1's default: not training).

    With a tensor ``training`` it is a select between the two rather than TF1's ``cond``: the same
    values, and the random numbers stay an op of the enclosing function, so inside a loop body the
    gradient reads the very numbers each iteration drew (a ``cond`` there would draw them again)."""
    x = _float_inputs(inputs, "dropout")
    training = _training(training, "dropout")
    if isinstance(training, Tensor):
        with composite_scope(name or "dropout", [x, training]):
            return where(training, nn.dropout(x, rate=rate, noise_shape=noise_shape, seed=seed), x)
    if training:
        return nn.dropout(x, rate=rate, noise_shape=noise_shape, seed=seed, name=name)
    return x


def batch_normalization(inputs: Any, axis: int = -1, momentum: float = 0.99, epsilon: float = 1e-3,
                        center: bool = True, scale: bool = True, beta_initializer: Any = None,
                        gamma_initializer: Any = None, moving_mean_initializer: Any = None,
                        moving_variance_initializer: Any = None, beta_regularizer: Any = None,
                        gamma_regularizer: Any = None, training: Any = False, trainable: bool = True,
                        name: str | None = None, reuse: Any = None, renorm: bool = False, fused: Any = None,
                        virtual_batch_size: Any = None, adjustment: Any = None) -> Tensor:
    """Batch normalization over every axis but ``axis`` (the channels), as TF1's layer: when
    ``training`` (a Python bool or a bool scalar tensor) it normalizes with the batch's mean and
    variance and adds to ``GraphKeys.UPDATE_OPS`` the updates ``moving -= (moving - batch) * (1 -
    momentum)`` of ``moving_mean`` and ``moving_variance`` (run them with the training op, e.g.
    ``with cc.control_dependencies(cc.get_default_graph().get_collection(cc.GraphKeys.UPDATE_OPS))``);
    otherwise it normalizes with the moving statistics, and normalizes a batch with its variance
    divided by n (the values per channel). The moving variance averages, as TF1's layer does, the
    batch variance divided by n - 1 where TF1 takes its fused kernel (a 4-D input with the channels
    on axis 1 or 3, unless ``fused=False``), else divided by n."""
    x = _float_inputs(inputs, "batch_normalization")
    _unsupported("batch_normalization", renorm=(renorm, False), virtual_batch_size=(virtual_batch_size, None),
                 adjustment=(adjustment, None))
    training = _training(training, "batch_normalization")
    if isinstance(axis, (list, tuple)) and len(axis) == 1:
        axis = axis[0]                  # TF1.15's layer takes a list of axes; one is what this one normalizes
    if not _is_int(axis):
        raise TypeError(located(f"batch_normalization: axis must be an int (the channels), got {axis!r}"))
    if isinstance(momentum, bool) or not isinstance(momentum, (int, float, np.floating, np.integer)):
        raise TypeError(located(f"batch_normalization: momentum must be a number, got {momentum!r}"))
    beta_initializer, gamma_initializer, moving_mean_initializer, moving_variance_initializer = (
        _initializer(value, what, "batch_normalization") for value, what in (
            (beta_initializer, "beta_initializer"), (gamma_initializer, "gamma_initializer"),
            (moving_mean_initializer, "moving_mean_initializer"),
            (moving_variance_initializer, "moving_variance_initializer")))
    beta_regularizer, gamma_regularizer = (_regularizer(value, what, "batch_normalization") for value, what in (
        (beta_regularizer, "beta_regularizer"), (gamma_regularizer, "gamma_regularizer")))
    rank = len(x.shape)
    if not -rank <= axis < rank:
        raise ValueError(located(f"batch_normalization: axis {axis} is out of range for {format_shape(x.shape)}"))
    channel_axis = axis % rank
    channels = x.shape[channel_axis]
    if channels is None:
        raise ValueError(located(f"batch_normalization: axis {axis} of {format_shape(x.shape)} must be known"))
    reduced = [a for a in range(rank) if a != channel_axis]
    broadcast = [1 if a != channel_axis else channels for a in range(rank)]
    with _layer_scope(name, "batch_normalization", [x], reuse):
        # gamma first, as TF1 makes them (the order of global_variables() and of checkpoints' lists)
        gamma = get_variable("gamma", [channels], x.dtype, gamma_initializer or ones_initializer(),
                             gamma_regularizer, trainable) if scale else None
        beta = get_variable("beta", [channels], x.dtype, beta_initializer or zeros_initializer(), beta_regularizer,
                            trainable) if center else None
        moving_mean = get_variable("moving_mean", [channels], x.dtype, moving_mean_initializer or zeros_initializer(),
                                   trainable=False)
        moving_variance = get_variable("moving_variance", [channels], x.dtype,
                                       moving_variance_initializer or ones_initializer(), trainable=False)

        def shaped(t: Tensor | None) -> Tensor | None:
            return None if t is None else reshape(t, broadcast)

        def normalized(mean: Tensor, variance: Tensor) -> Tensor:
            return nn.batch_normalization(x, shaped(mean), shaped(variance), shaped(beta), shaped(gamma), epsilon)
        if not isinstance(training, Tensor) and not training:
            return normalized(moving_mean, moving_variance)
        batch_mean, batch_variance = nn.moments(x, reduced)
        averaged_variance = batch_variance
        if fused is not False and rank == 4 and channel_axis in (1, 3):
            # TF1's fused kernel hands the moving average the variance with Bessel's correction
            # (its V1 layer keeps it: _bessels_correction_test_only), n / (n - 1), 1 for n = 1.
            count = element_count(x, reduced)
            averaged_variance = batch_variance * (count / maximum(count - 1.0, 1.0))
        rate = 1.0 - momentum
        if isinstance(training, Tensor):
            # The updates run with every step; not training, they move the statistics toward
            # themselves (as TF1): no change, whatever the batch holds (an empty one's NaN too).
            batch_mean = where(training, batch_mean, moving_mean)
            batch_variance = where(training, batch_variance, moving_variance)
            averaged_variance = where(training, averaged_variance, moving_variance)
            output = cond(training, lambda: normalized(batch_mean, batch_variance),
                          lambda: normalized(moving_mean, moving_variance))
        else:
            output = normalized(batch_mean, batch_variance)
        updates = group(assign_sub(moving_mean, (moving_mean - batch_mean) * rate),
                        assign_sub(moving_variance, (moving_variance - averaged_variance) * rate))
        get_default_graph().add_to_collection(GraphKeys.UPDATE_OPS, updates)
        return output


# -- TF1's layer objects: tf.layers.Dense(units)(x) -----------------------------------------------

class Layer:
    """A layer object (TF1's ``tf.layers.Dense`` and the others): the functional layer's arguments
    kept, its variables made on the first call and shared by every later one, wherever it is
    called from (the scope is chosen at the first call, as TF1's ``dense``, ``dense_1``...).

    >>> import compiler as cc
    >>> with cc.Graph().as_default():
    ...     layer = cc.layers.Dense(4, activation="relu")
    ...     first, second = layer(cc.placeholder("float32", (None, 3))), layer(cc.placeholder("float32", (2, 3)))
    ...     print(first.shape, second.shape, [v.op.name for v in layer.trainable_variables])
    (None, 4) (2, 4) ['dense/kernel', 'dense/bias']
    """

    _base = "layer"
    _has_variables = True

    def __init__(self, *args: Any, name: str | None = None, **kwargs: Any) -> None:
        self._args, self._kwargs, self.name = args, kwargs, name
        self._scope: str | None = None    # the full variable scope, from the first call

    def _function(self, inputs: Any, *args: Any, **kwargs: Any) -> Tensor:
        raise NotImplementedError

    def __call__(self, inputs: Any, training: Any = None) -> Tensor:
        extra = {} if training is None else {"training": training}
        if not self._has_variables:
            return self._function(inputs, *self._args, name=self.name, **self._kwargs, **extra)
        first = self._scope is None
        if first:   # choose the scope as the functional layer would, here, and keep it
            with variable_scope(self.name, default_name=self._base) as scope:
                self._scope, self._graph = scope.name, get_default_graph()
        # the kept scope, from wherever this runs
        with variable_scope(top_variable_scope(), auxiliary_name_scope=False):
            return self._function(inputs, *self._args, name=self._scope, reuse=None if first else True,
                                  **self._kwargs, **extra)

    @property
    def variables(self) -> list[Any]:
        """The layer's variables (empty before its first call)."""
        if self._scope is None:
            return []
        prefix = self._scope + "/"
        return [v for v in self._graph.get_collection(GraphKeys.GLOBAL_VARIABLES) if v.op.name.startswith(prefix)]

    weights = variables

    @property
    def trainable_variables(self) -> list[Any]:
        return [v for v in self.variables if v.trainable]

    trainable_weights = trainable_variables

    def _named(self, leaf: str) -> Any:
        found = [v for v in self.variables if v.op.name == f"{self._scope}/{leaf}"]
        return found[0] if found else None

    @property
    def kernel(self) -> Any:
        return self._named("kernel")

    @property
    def bias(self) -> Any:
        return self._named("bias")

    apply = __call__


def _layer_class(name: str, function: Callable[..., Tensor], base: str | None, doc: str) -> type:
    """A ``Layer`` subclass calling ``function`` (``base``: the scope's default name; None for a
    layer without variables)."""
    return type(name, (Layer,), {"__doc__": doc, "_function": staticmethod(function), "_base": base or "layer",
                                 "_has_variables": base is not None, "__module__": __name__})


Dense = _layer_class("Dense", dense, "dense", "``tf.layers.Dense(units, activation=None, ...)``: ``dense``'s arguments.")
Conv2D = _layer_class("Conv2D", conv2d, "conv2d", "``tf.layers.Conv2D(filters, kernel_size, ...)``.")
Conv2DTranspose = _layer_class("Conv2DTranspose", conv2d_transpose, "conv2d_transpose",
                               "``tf.layers.Conv2DTranspose(filters, kernel_size, ...)``.")
BatchNormalization = _layer_class("BatchNormalization", batch_normalization, "batch_normalization",
                                  "``tf.layers.BatchNormalization(...)``, called as ``layer(x, training=...)``.")
MaxPooling2D = _layer_class("MaxPooling2D", max_pooling2d, None, "``tf.layers.MaxPooling2D(pool_size, strides, ...)``.")
AveragePooling2D = _layer_class("AveragePooling2D", average_pooling2d, None,
                                "``tf.layers.AveragePooling2D(pool_size, strides, ...)``.")
Flatten = _layer_class("Flatten", flatten, None, "``tf.layers.Flatten()``.")
Dropout = _layer_class("Dropout", dropout, None, "``tf.layers.Dropout(rate, ...)``, called as ``layer(x, training=...)``.")


__all__: Sequence[str] = ("dense", "conv2d", "max_pooling2d", "average_pooling2d", "flatten", "dropout",
                          "batch_normalization", "Layer", "Dense", "Conv2D", "Conv2DTranspose", "BatchNormalization",
                          "MaxPooling2D", "AveragePooling2D", "Flatten", "Dropout")

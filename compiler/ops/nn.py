"""Neural-network functions (``cc.nn``): compositions of primitive ops, written to be stable, and
``dropout`` (a draw of the ``RandomUniform`` op of ``random.py``).

None of these has rules of its own: their gradients come from the primitives they are built of.
As in TF1, ``name`` names the scope of the ops each function builds (TF1's default name otherwise).
"""
from __future__ import annotations

import math
from typing import Any, Sequence

import numpy as np

from .. import dtypes
from ..errors import DTypeError, ShapeError
from ..graph import Tensor, get_default_graph, located, user_location
from ..shapes import format_shape, normalize_axes
from .array import (element_count, expand_dims, identity, one_hot, ones_like, reshape, shape, squeeze, stop_gradient,
                    zeros_like)
from .base import composite_scope, constant, convert_to_tensor, literal_as, renamed_argument
from .elementwise import relu, sigmoid, tanh  # noqa: F401  (re-exported as cc.nn.*)
from .elementwise import abs as abs_
from .elementwise import (Softsign, add_n, cast, clip_by_value, equal, erf, exp, expm1, floordiv, floormod, greater,
                          greater_equal, less, less_equal, log, log1p, logical_and, maximum, minimum, negative, rsqrt,
                          sqrt, square, where)
from .creation import range as range_of
from .gather import gather as gather_along
from .padding import pad
from .joining import concat
from .linalg import matmul
from .numerics import internal_assert
from .random import RandomUniform, random_tensor, random_uniform, static_shape
from .random_seed import check_seed
from .reduction import reduce_all, reduce_max, reduce_mean, reduce_sum


def log_softmax(logits: Any, axis: int | None = None, name: str | None = None, dim: int | None = None) -> Tensor:
    """``logits - logsumexp(logits)`` along ``axis`` (the last by default; TF1's older name:
    ``dim``): stable for large or very negative logits."""
    axis = renamed_argument("log_softmax", "axis", axis, "dim", dim, default=-1)
    with composite_scope(name or "LogSoftmax", [logits]):
        logits = _float_features("log_softmax", logits)
        # (x - max) - log(sum(exp(x - max))), as TF: subtracting logsumexp(x) = log(sum) + max
        # instead would round log(sum) away when |max| is large (1e7 in float32).
        shifted = logits - stop_gradient(reduce_max(logits, axis=axis, keepdims=True))
        return shifted - log(reduce_sum(exp(shifted), axis=axis, keepdims=True))


def softmax(logits: Any, axis: int | None = None, name: str | None = None, dim: int | None = None) -> Tensor:
    """``exp(x - max) / sum(exp(x - max))`` along ``axis`` (the last by default; TF1's older name:
    ``dim``), as TF1's kernel: each slice sums to 1, and each value is within a few ulps (not
    ``exp(log_softmax)``, whose rounding of the log grows with the logits' spread)."""
    axis = renamed_argument("softmax", "axis", axis, "dim", dim, default=-1)
    with composite_scope(name or "Softmax", [logits]):
        logits = _float_features("softmax", logits)
        exponentials = exp(logits - stop_gradient(reduce_max(logits, axis=axis, keepdims=True)))
        return exponentials / reduce_sum(exponentials, axis=axis, keepdims=True)


def softmax_cross_entropy_with_logits(_sentinel: None = None, labels: Any = None, logits: Any = None,
                                      axis: int | None = None, name: str | None = None,
                                      dim: int | None = None) -> Tensor:
    """Per-example ``-sum(labels * log_softmax(logits))`` along ``axis`` (the last by default;
    TF1's older name: ``dim``).

    As in TF1, the gradient flows only into ``logits`` (``labels`` are treated as constants).
    """
    _named_arguments_only("softmax_cross_entropy_with_logits", _sentinel)
    return _softmax_cross_entropy("softmax_cross_entropy_with_logits", labels, logits, axis, dim, name,
                                  labels_differentiable=False)


def _named_arguments_only(function: str, sentinel: Any) -> None:
    """TF1 refuses positional labels and logits here (its ``_sentinel``): the older argument order
    was (logits, labels), and swapped they give a wrong loss without any error."""
    if sentinel is not None:
        raise ValueError(located(f"{function}: give labels and logits by name ({function}(labels=..., "
                                 "logits=...)), as TF1 requires; the older order was (logits, labels)"))


def _softmax_cross_entropy(function: str, labels: Any, logits: Any, axis: int | None, dim: int | None,
                           name: str | None, labels_differentiable: bool) -> Tensor:
    axis = renamed_argument(function, "axis", axis, "dim", dim, default=-1)
    with composite_scope(name or "softmax_cross_entropy_with_logits", [logits, labels]):
        logits = convert_to_tensor(logits)
        labels = convert_to_tensor(labels, logits.dtype)
        if labels.dtype != logits.dtype:
            raise DTypeError(located(f"{function}: labels are {labels.dtype.name} but logits are "
                                     f"{logits.dtype.name}"))
        # One-hot (or soft) labels, one per logit: a [batch, 1] or [batch] label would broadcast
        # into a wrong loss without any error.
        _check_same_shape(function, labels, logits)
        weights = labels if labels_differentiable else stop_gradient(labels)
        return -reduce_sum(weights * log_softmax(logits, axis=axis), axis=axis)


def sparse_softmax_cross_entropy_with_logits(_sentinel: None = None, labels: Any = None, logits: Any = None,
                                             name: str | None = None) -> Tensor:
    """Per-example cross-entropy with integer class ``labels`` (int32/int64) of shape ``logits[:-1]``.

    A label outside ``[0, classes)`` stops the run with ``InvalidArgumentError`` before any
    variable is assigned (as TF1 on a CPU); ``target="cuda"``, which runs no checks yet, skips
    this one, and the example's loss and gradient are NaN there (as TF1 on a GPU), not 0.
    """
    _named_arguments_only("sparse_softmax_cross_entropy_with_logits", _sentinel)
    with composite_scope(name or "SparseSoftmaxCrossEntropyWithLogits", [labels, logits]):
        logits = convert_to_tensor(logits)
        labels = convert_to_tensor(labels)
        if not dtypes.is_integer(labels.dtype):
            raise DTypeError(located(f"sparse_softmax_cross_entropy_with_logits: labels must be int32 or int64, "
                                     f"got {labels.dtype.name}"))
        if len(labels.shape) != len(logits.shape) - 1:
            raise ShapeError(located(f"sparse_softmax_cross_entropy_with_logits: labels {format_shape(labels.shape)} "
                                     f"must have rank one less than logits {format_shape(logits.shape)}"))
        depth = logits.shape[-1]
        if depth is None:
            raise ShapeError(located(f"sparse_softmax_cross_entropy_with_logits: the class dimension of logits "
                                     f"{format_shape(logits.shape)} must be known"))
        known = [(a, b) for a, b in zip(labels.shape, logits.shape[:-1]) if a is not None and b is not None]
        if any(a != b for a, b in known):
            raise ShapeError(located(f"sparse_softmax_cross_entropy_with_logits: labels {labels.name!r} "
                                     f"{format_shape(labels.shape)} must have the shape of logits {logits.name!r} "
                                     f"{format_shape(logits.shape)} without its class axis"))
        in_range = logical_and(greater_equal(labels, 0), less(labels, depth))
        labels_checked = internal_assert(reduce_all(in_range), (
            f"sparse_softmax_cross_entropy_with_logits: labels {labels.name!r} hold a value outside [0, {depth}), "
            f"the classes of logits {logits.name!r} {format_shape(logits.shape)}"))
        with get_default_graph().control_dependencies([labels_checked]):
            in_range = identity(in_range)
        poison = cast(where(in_range, 0.0, float("nan")), logits.dtype)   # a NaN row for a label out of range
        # log(sum(exp(x - max))) - (x - max)[label]: the label's logit is picked by a compare, not
        # multiplied by a one-hot row, so a -inf logit of another class (a masked one) is no 0 * -inf.
        shifted = logits - stop_gradient(reduce_max(logits, axis=-1, keepdims=True)) + expand_dims(poison, -1)
        is_label = equal(expand_dims(labels, -1), constant(np.arange(depth), labels.dtype))
        picked = reduce_sum(where(is_label, shifted, 0.0), axis=-1)
        return log(reduce_sum(exp(shifted), axis=-1)) - picked


def _float_features(function: str, features: Any) -> Tensor:
    x = convert_to_tensor(features)
    if not dtypes.is_floating(x.dtype):
        raise DTypeError(located(f"{function}: needs float32 or float64 features, got {x.dtype.name} "
                                 f"{x.name!r}"))
    return x


def softplus(features: Any, name: str | None = None) -> Tensor:
    """``log(1 + exp(x))``, computed as ``max(x, 0) + log1p(exp(-|x|))`` (no overflow, no
    cancellation). Both branches are picked by ``x >= 0``, so at 0 the graph is the identity
    ``x + softplus(-x)`` and gradients of every order are exact there too."""
    with composite_scope(name or "Softplus", [features]):
        x = _float_features("softplus", features)
        positive = greater_equal(x, 0.0)
        return where(positive, x, 0.0) + log1p(exp(where(positive, negative(x), x)))


def leaky_relu(features: Any, alpha: float = 0.2, name: str | None = None) -> Tensor:
    """``x`` where ``x > 0``, else ``alpha * x`` (TF: integer features are cast to float32)."""
    with composite_scope(name or "LeakyRelu", [features]):
        x = convert_to_tensor(features)
        if not dtypes.is_floating(x.dtype):
            x = cast(x, dtypes.float32)
        return where(greater(x, 0.0), x, x * alpha)


def elu(features: Any, name: str | None = None) -> Tensor:
    """``x`` where ``x > 0``, else ``exp(x) - 1``. The exponential only ever sees
    ``min(x, 0)``: no overflow, so no ``inf * 0`` in the gradient of the unused branch."""
    with composite_scope(name or "Elu", [features]):
        x = _float_features("elu", features)
        # As TF1's kernels: x < 0 picks the exponential (so 0 has gradient 1 and -0.0 stays -0.0);
        # NaN takes x's branch: gradient g.
        return where(less(x, 0.0), expm1(minimum(x, 0.0)), x)


def gelu(features: Any, approximate: bool = False, name: str | None = None) -> Tensor:
    """Gaussian error linear unit ``x * Phi(x)``.

    Exact: ``0.5 * x * (1 + erf(x / sqrt(2)))``; ``approximate=True``: the tanh form
    ``0.5 * x * (1 + tanh(sqrt(2/pi) * (x + 0.044715 * x**3)))`` (as TF).
    """
    with composite_scope(name or "Gelu", [features]):
        x = _float_features("gelu", features)
        if approximate:
            # Past |x| = 20 the tanh is exactly +-1; clipping there keeps x**3 finite, so the
            # gradient is 0 rather than 0 * inf for huge |x|. The values are unchanged.
            xc = clip_by_value(x, -20.0, 20.0)
            inner = 0.7978845608028654 * (xc + 0.044715 * (xc * xc * xc))
            return 0.5 * x * (1.0 + tanh(inner))
        return 0.5 * x * (1.0 + erf(x * 0.7071067811865476))


def _check_same_shape(function: str, labels: Tensor, logits: Tensor) -> None:
    a, b = labels.shape, logits.shape
    if len(a) != len(b) or any(x is not None and y is not None and x != y for x, y in zip(a, b)):
        raise ShapeError(located(f"{function}: logits {format_shape(b)} and labels {format_shape(a)} must "
                                 f"have the same shape"))


def sigmoid_cross_entropy_with_logits(_sentinel: None = None, labels: Any = None, logits: Any = None,
                                      name: str | None = None) -> Tensor:
    """Elementwise ``-z*log(sigmoid(x)) - (1-z)*log(1-sigmoid(x))`` for labels ``z``, logits ``x``.

    TF's stable form ``max(x, 0) - x*z + log1p(exp(-|x|))``, with both branches picked by
    ``x >= 0`` (exact gradients at 0). As in TF the gradient reaches labels too.
    """
    _named_arguments_only("sigmoid_cross_entropy_with_logits", _sentinel)
    with composite_scope(name or "logistic_loss", [logits, labels]):
        if labels is None or logits is None:
            raise ValueError("sigmoid_cross_entropy_with_logits needs labels= and logits=")
        logits = _float_features("sigmoid_cross_entropy_with_logits", logits)
        labels = convert_to_tensor(labels, logits.dtype)
        if labels.dtype != logits.dtype:
            raise DTypeError(located(f"sigmoid_cross_entropy_with_logits: labels are {labels.dtype.name} but "
                                     f"logits are {logits.dtype.name}"))
        _check_same_shape("sigmoid_cross_entropy_with_logits", labels, logits)
        positive = greater_equal(logits, 0.0)
        relu_logits = where(positive, logits, 0.0)
        neg_abs_logits = where(positive, negative(logits), logits)
        return relu_logits - logits * labels + log1p(exp(neg_abs_logits))


# -- layers' building blocks ------------------------------------------------------------------

def bias_add(value: Any, bias: Any, data_format: str | None = None, name: str | None = None) -> Tensor:
    """``value + bias`` with ``bias`` (1-D) added along the channels: the last dimension
    (``data_format`` None or "N...C", as TF1's default), or dimension 1 ("NC...")."""
    if data_format is not None and (not isinstance(data_format, str) or not data_format.startswith("N")
                                    or data_format[1] != "C" and not data_format.endswith("C")):
        raise ValueError(located(f"bias_add: data_format must be None, 'NHWC' or 'NCHW' (or another N...C or NC... "
                                 f"layout), got {data_format!r}"))
    channels_first = data_format is not None and data_format[1] == "C" and len(data_format) > 2
    with composite_scope(name or "BiasAdd", [value, bias]):
        value = convert_to_tensor(value)
        bias = convert_to_tensor(bias, value.dtype)
        axis = 1 if channels_first else -1
        if len(bias.shape) != 1 or len(value.shape) < (3 if channels_first else 2) or (
                bias.shape[0] is not None and value.shape[axis] is not None and bias.shape[0] != value.shape[axis]):
            raise ShapeError(located(f"bias_add: bias {format_shape(bias.shape)} must be 1-D with the size of the "
                                     f"channels (dimension {axis}) of {value.name!r} {format_shape(value.shape)}"))
        if channels_first:
            bias = reshape(bias, [-1] + [1] * (len(value.shape) - 2))
        return value + bias


def l2_loss(t: Any, name: str | None = None) -> Tensor:
    """``sum(t ** 2) / 2``, as TF1 (a weight-decay term)."""
    with composite_scope(name or "L2Loss", [t]):
        t = _float_features("l2_loss", t)
        return reduce_sum(t * t) * 0.5


def l2_normalize(x: Any, axis: int | None = None, epsilon: float = 1e-12, name: str | None = None,
                 dim: int | None = None) -> Tensor:
    """``x / sqrt(max(sum(x**2, axis), epsilon))``: unit L2 norm along ``axis`` (all axes when None;
    TF1's older name: ``dim``)."""
    axis = renamed_argument("l2_normalize", "axis", axis, "dim", dim)
    with composite_scope(name or "l2_normalize", [x]):
        x = _float_features("l2_normalize", x)
        squared = reduce_sum(x * x, axis, keepdims=True)
        return x * rsqrt(maximum(squared, epsilon))


def moments(x: Any, axes: Any, shift: Any = None, name: str | None = None, keep_dims: bool | None = None,
            keepdims: bool | None = None) -> tuple[Tensor, Tensor]:
    """(mean, variance) of ``x`` over ``axes``, as TF1, in TF1's argument order (the variance is the
    mean squared deviation; ``keep_dims`` is ``keepdims``' older name; ``shift`` is accepted and
    unused, as in TF1)."""
    keepdims = renamed_argument("moments", "keepdims", keepdims, "keep_dims", keep_dims, default=False)
    if isinstance(shift, (bool, np.bool_)):
        raise TypeError(located(f"moments: shift is {shift!r}; TF1's order is moments(x, axes, shift, name, keep_dims) "
                                "(pass keepdims= by keyword)"))
    if name is not None and not isinstance(name, str):
        raise TypeError(located(f"moments: name must be a string, got {name!r} (pass keepdims= by keyword)"))
    with composite_scope(name or "moments", [x]):
        x = _float_features("moments", x)
        mean = reduce_mean(x, axes, keepdims=True)
        variance = reduce_mean(square(x - mean), axes, keepdims=True)  # differentiable to every order
        if not keepdims:
            mean, variance = squeeze(mean, _axes_list(axes, len(x.shape))), squeeze(variance, _axes_list(axes, len(x.shape)))
        return mean, variance


def batch_normalization(x: Any, mean: Any, variance: Any, offset: Any, scale: Any, variance_epsilon: float,
                        name: str | None = None) -> Tensor:
    """``scale * (x - mean) / sqrt(variance + epsilon) + offset`` (offset and scale may be None)."""
    with composite_scope(name or "batchnorm", [x, mean, variance, offset, scale]):
        x = _float_features("batch_normalization", x)
        inverse = rsqrt(convert_to_tensor(variance, x.dtype) + variance_epsilon)
        if scale is not None:
            inverse = inverse * convert_to_tensor(scale, x.dtype)
        result = (x - convert_to_tensor(mean, x.dtype)) * inverse
        return result + convert_to_tensor(offset, x.dtype) if offset is not None else result


def in_top_k(predictions: Any, targets: Any, k: int, name: str | None = None) -> Tensor:
    """Whether each row's target class is among its ``k`` largest predictions (bool, per row).

    As TF1: a target whose prediction ties the k-th largest counts as in the top k; a row with a
    non-finite prediction (anywhere in it) or a target out of range is False."""
    with composite_scope(name or "InTopK", [predictions, targets]):
        predictions = _float_features("in_top_k", predictions)
        targets = convert_to_tensor(targets)
        if len(predictions.shape) != 2 or len(targets.shape) != 1:
            raise ShapeError(located(f"in_top_k: predictions must be [batch, classes] and targets [batch], got "
                                     f"{format_shape(predictions.shape)} and {format_shape(targets.shape)}"))
        if not dtypes.is_integer(targets.dtype):
            raise DTypeError(located(f"in_top_k: targets must be int32 or int64, got {targets.dtype.name}"))
        batch, target_count = predictions.shape[0], targets.shape[0]
        if batch is not None and target_count is not None and batch != target_count:
            raise ShapeError(located(f"in_top_k: predictions {format_shape(predictions.shape)} and targets "
                                     f"{format_shape(targets.shape)} have different batch sizes"))
        classes = predictions.shape[-1]
        if classes is None:
            raise ShapeError(located(f"in_top_k: the class dimension of predictions "
                                     f"{format_shape(predictions.shape)} must be known"))
        k = convert_to_tensor(k, dtypes.int32)   # an int, or a scalar tensor as in TF1
        if not dtypes.is_integer(k.dtype) or k.shape != ():
            raise TypeError(located(f"in_top_k: k must be an int or an integer scalar tensor, got "
                                    f"{k.dtype.name} {format_shape(k.shape)}"))
        chosen = one_hot(targets, classes, dtype=predictions.dtype)
        target_value = reduce_sum(where(greater(chosen, 0.0), predictions, 0.0), axis=1, keepdims=True)
        above = reduce_sum(cast(greater(predictions, target_value), k.dtype), axis=1)
        # As TF1: a row with any non-finite prediction (NaN or +-inf) is False, so is a target out of range.
        finite = equal(reduce_sum(cast(less(abs_(predictions), float("inf")), dtypes.int32), axis=1), classes)
        in_range = logical_and(greater_equal(targets, 0), less(targets, classes))
        return logical_and(logical_and(less(above, k), finite), in_range)


def _axes_list(axes: Any, rank: int) -> list[int]:
    return list(normalize_axes(axes, rank))


# -- dropout ------------------------------------------------------------------------------------

def dropout(x: Any, keep_prob: Any = None, noise_shape: Sequence[int | None] | None = None, seed: int | None = None,
            name: str | None = None, rate: Any = None) -> Tensor:
    """TF1 dropout: ``x / keep_prob`` where a uniform number is below ``keep_prob``, else 0.

    TF1.15's argument order (``dropout(x, keep_prob, noise_shape, seed, name, rate)``). Give
    exactly one of ``keep_prob`` (in ``(0, 1]``) and ``rate = 1 - keep_prob`` (in ``[0, 1)``):
    a Python number, or a scalar tensor (e.g. a placeholder fed 1.0 at evaluation). ``noise_shape``
    (broadcastable to ``x``'s shape; None entries stand for ``x``'s dims, an extension) shares one
    keep/drop decision along its size-1 dims. New decisions are drawn at every ``Session.run``;
    within a step the gradient uses the same mask as the forward value (it is the same tensor).

    >>> import numpy as np, compiler as cc
    >>> from runtime import Session
    >>> g = cc.Graph()
    >>> with g.as_default():
    ...     x = cc.placeholder("float32", shape=(None, 4))
    ...     y = cc.nn.dropout(x, rate=0.5, seed=0)
    >>> with Session(g) as sess:
    ...     out = sess.run(y, {x: np.ones((3, 4), "float32")})
    >>> sorted(set(out.ravel().tolist())) in ([0.0, 2.0], [0.0], [2.0])
    True
    """
    x = convert_to_tensor(x)
    where_at = user_location()
    if not dtypes.is_floating(x.dtype):
        raise DTypeError(located(f"dropout: x must be float32 or float64, got {x.dtype.name}", where_at))
    if (keep_prob is None) == (rate is None):
        raise ValueError(located("dropout: give exactly one of keep_prob and rate", where_at))
    shape = _noise_shape(noise_shape, x, where_at)
    seed = check_seed(seed, "dropout")
    probability = rate if rate is not None else keep_prob
    what = "rate" if rate is not None else "keep_prob"
    if isinstance(probability, Tensor):
        if probability.dtype != x.dtype:
            raise DTypeError(located(f"dropout: {what} is {probability.dtype.name} but x is {x.dtype.name}",
                                     where_at))
        if probability.shape not in ((), (1,)):
            raise ShapeError(located(f"dropout: {what} must be a scalar, got shape "
                                     f"{format_shape(probability.shape)}", where_at))
    else:
        try:
            value = float(probability)
        except (TypeError, ValueError):
            raise TypeError(located(f"dropout: {what} must be a number or a scalar tensor, got {probability!r}",
                                    where_at)) from None
        inside = 0.0 <= value < 1.0 if rate is not None else 0.0 < value <= 1.0
        if not inside:
            bounds = "[0, 1)" if rate is not None else "(0, 1]"
            raise ValueError(located(f"dropout: {what} must be in {bounds}, got {probability!r}", where_at))
        if value == (0.0 if rate is not None else 1.0):
            return x  # nothing is dropped (as TF1 does when keep_prob is known to be 1)
    with composite_scope(name or "dropout", [x]):
        if isinstance(probability, Tensor):
            keep = 1.0 - probability if rate is not None else probability
        else:
            keep_value = 1.0 - value if rate is not None else value
            keep = convert_to_tensor(np.asarray(keep_value, x.dtype), x.dtype)
        uniform = random_tensor(RandomUniform, shape, x.dtype, seed, like=x, name="RandomUniform")
        return where(less(uniform, keep), x / keep, 0.0)


def _noise_shape(noise_shape: Any, x: Tensor, where_at: Any) -> tuple:
    """The shape of the keep/drop decisions: None entries are taken from ``x`` when compiled."""
    if noise_shape is None:
        return (None,) * len(x.shape)
    shape = static_shape(noise_shape, "dropout", allow_unknown=True)
    if len(shape) > len(x.shape):
        raise ShapeError(located(f"dropout: noise_shape {format_shape(shape)} has more dims than x "
                                 f"{format_shape(x.shape)}", where_at))
    lead = len(x.shape) - len(shape)
    for d, full in zip(shape, x.shape[lead:]):
        if d is not None and d != 1 and full is not None and d != full:
            raise ShapeError(located(f"dropout: noise_shape {format_shape(shape)} does not broadcast to x's "
                                     f"shape {format_shape(x.shape)}", where_at))
    return shape


# -- more activations (compositions) -----------------------------------------------------------

_SELU_ALPHA, _SELU_SCALE = 1.6732632423543772, 1.0507009873554805


def relu6(features: Any, name: str | None = None) -> Tensor:
    """``min(max(x, 0), 6)`` (TF1's ``relu6``)."""
    with composite_scope(name or "Relu6", [features]):
        x = _float_features("relu6", features)
        # where, not minimum: at exactly 6 the gradient is 0, as TF1's (minimum's tie goes to x)
        return where(greater_equal(x, 6.0), literal_as(6.0, x.dtype, "relu6"), relu(x))


def selu(features: Any, name: str | None = None) -> Tensor:
    """Scaled exponential linear unit: ``scale * elu(x)`` with ELU's negative part times
    ``alpha`` (the self-normalising constants alpha = 1.6733, scale = 1.0507, as TF1)."""
    with composite_scope(name or "Selu", [features]):
        x = _float_features("selu", features)
        return where(less(x, 0.0), expm1(minimum(x, 0.0)) * (_SELU_SCALE * _SELU_ALPHA), x * _SELU_SCALE)


def swish(features: Any, name: str | None = None) -> Tensor:
    """``x * sigmoid(x)`` (TF's ``swish``, also called SiLU: ``cc.nn.silu``)."""
    with composite_scope(name or "Swish", [features]):
        x = _float_features("swish", features)
        return x * sigmoid(x)


silu = swish


def softsign(features: Any, name: str | None = None) -> Tensor:
    """``x / (1 + |x|)``."""
    with composite_scope(name or "Softsign", [features]):
        return Softsign(_float_features("softsign", features))


def log_sigmoid(x: Any, name: str | None = None) -> Tensor:
    """``log(sigmoid(x)) = -softplus(-x)``, without overflow for large ``|x|``."""
    with composite_scope(name or "LogSigmoid", [x]):
        return negative(softplus(negative(_float_features("log_sigmoid", x))))


def softmax_cross_entropy_with_logits_v2(_sentinel: None = None, labels: Any = None, logits: Any = None,
                                         axis: int | None = None, name: str | None = None,
                                         dim: int | None = None) -> Tensor:
    """``softmax_cross_entropy_with_logits`` whose gradient reaches ``labels`` too (TF1's ``_v2``;
    wrap the labels in ``stop_gradient`` for the first version's behaviour)."""
    _named_arguments_only("softmax_cross_entropy_with_logits_v2", _sentinel)
    return _softmax_cross_entropy("softmax_cross_entropy_with_logits_v2", labels, logits, axis, dim, name,
                                  labels_differentiable=True)


def weighted_cross_entropy_with_logits(labels: Any = None, logits: Any = None, pos_weight: Any = 1.0,
                                       name: str | None = None, targets: Any = None) -> Tensor:
    """``sigmoid_cross_entropy_with_logits`` with the positive term weighted by ``pos_weight``:
    ``-pos_weight * z * log(sigmoid(x)) - (1 - z) * log(1 - sigmoid(x))``, computed as TF1's
    ``(1 - z) * x + (1 + (q - 1) * z) * (log1p(exp(-|x|)) + max(-x, 0))`` (TF1's older name for
    ``labels``: ``targets``)."""
    labels = renamed_argument("weighted_cross_entropy_with_logits", "labels", labels, "targets", targets)
    with composite_scope(name or "logistic_loss", [logits, labels, pos_weight]):
        logits = _float_features("weighted_cross_entropy_with_logits", logits)
        labels = convert_to_tensor(labels, logits.dtype)
        _check_same_shape("weighted_cross_entropy_with_logits", labels, logits)
        log_weight = (pos_weight - 1.0) * labels + 1.0
        positive = greater_equal(logits, 0.0)
        softplus_of_negative = log1p(exp(where(positive, negative(logits), logits))) + where(positive, 0.0,
                                                                                               negative(logits))
        return (1.0 - labels) * logits + log_weight * softplus_of_negative


def xw_plus_b(x: Any, weights: Any, biases: Any, name: str | None = None) -> Tensor:
    """``matmul(x, weights) + biases`` (TF1's ``xw_plus_b``)."""
    with composite_scope(name or "xw_plus_b", [x, weights, biases]):
        return bias_add(matmul(x, weights), biases)


def zero_fraction(value: Any, name: str | None = None) -> Tensor:
    """The fraction of ``value``'s elements that are 0, as float32 (a sparsity summary)."""
    with composite_scope(name or "zero_fraction", [value]):
        value = convert_to_tensor(value)
        return reduce_mean(cast(equal(value, 0), dtypes.float32))


def embedding_lookup(params: Any, ids: Any, partition_strategy: str = "mod", name: str | None = None,
                     validate_indices: bool = True, max_norm: float | None = None) -> Tensor:
    """Rows of ``params`` for integer ``ids``: ``gather(params, ids)``, or, for a list of shards,
    TF1's partitioning (``"mod"``: id ``i`` is row ``i // n`` of shard ``i % n``; ``"div"``: the
    shards hold consecutive ranges of ids). An id out of range gives a row of zeros (as ``gather``).
    With ``max_norm``, rows whose L2 norm exceeds it are scaled down to it.

    A table, or each shard of one, read this way gets a sparse update from the optimizers that
    have one (only the looked-up rows and their slots change), as in TF1: each shard is read by
    its own gather, of the ids it holds.

    >>> import numpy as np, compiler as cc
    >>> table = cc.Variable(np.zeros((100, 8), "float32"))
    >>> cc.nn.embedding_lookup(table, cc.placeholder("int32", (None, 5))).shape
    (None, 5, 8)
    """
    del validate_indices   # accepted for TF1's signature; out-of-range ids give zeros
    with composite_scope(name or "embedding_lookup", [params, ids]):
        shards = list(params) if isinstance(params, (list, tuple)) else [params]
        if not shards:
            raise ValueError(located("embedding_lookup: params is an empty list"))
        shards = [convert_to_tensor(s) for s in shards]
        ids = convert_to_tensor(ids)
        if not dtypes.is_integer(ids.dtype):
            raise DTypeError(located(f"embedding_lookup: ids must be int32 or int64, got {ids.dtype.name} "
                                     f"{ids.name!r}"))
        if len(shards) == 1:
            rows = gather(shards[0], ids)
        else:
            rows = add_n([gather(shard, local) for shard, local in zip(shards, _shard_rows(shards, ids,
                                                                                            partition_strategy))])
        if max_norm is None:
            return rows
        # TF1's clip_by_norm of each row: rows * max_norm / max(norm, max_norm), with sqrt (whose
        # gradient is infinite at 0) taken only where the sum is positive: a zero row stays finite.
        sums = reduce_sum(square(rows), axis=list(range(len(ids.shape), len(rows.shape))), keepdims=True)
        positive = greater(sums, 0.0)
        norms = where(positive, sqrt(where(positive, sums, 1.0)), sums)
        return rows * max_norm / maximum(norms, max_norm)


def _shard_rows(shards: list[Tensor], ids: Tensor, partition_strategy: str) -> list[Tensor]:
    """Per shard, the row of it that each of ``ids`` reads: the id's row where the shard holds the
    id, else the shard's row count (out of range: the gather reads zeros and its gradient skips
    it, so only the rows looked up get an update)."""
    sizes = [s.shape[0] for s in shards]
    if any(size is None for size in sizes) or any(len(s.shape) < 1 for s in shards):
        raise ShapeError(located("embedding_lookup: every shard must have a known number of rows"))
    if any(s.shape[1:] != shards[0].shape[1:] or s.dtype != shards[0].dtype for s in shards):
        described = ", ".join(f"{s.dtype.name}{format_shape(s.shape)}" for s in shards)
        raise ShapeError(located(f"embedding_lookup: the shards must share their dtype and the shape of a row; "
                                 f"got {described}"))
    total, count = sum(sizes), len(shards)
    # TF1's split of `total` ids over `count` shards: the first `total % count` get one more row.
    expected = [total // count + (1 if k < total % count else 0) for k in range(count)]
    if sizes != expected:
        raise ShapeError(located(f"embedding_lookup: shards of {sizes} rows are not a partition of {total} ids "
                                 f"over {count} shards (TF1's has {expected})"))
    if partition_strategy not in ("mod", "div"):
        raise ValueError(located(f"embedding_lookup: partition_strategy must be 'mod' or 'div', got "
                                 f"{partition_strategy!r}"))
    if total >= 2**31:
        raise ShapeError(located(f"embedding_lookup: {total} ids in all; shards hold fewer than 2**31"))
    # Every id as an int32 in [0, total], `total` standing for the ids no shard holds.
    known = logical_and(greater_equal(ids, 0), less(ids, total))
    ids = cast(where(known, ids, constant(total, ids.dtype)), dtypes.int32)
    rows = []
    first = 0
    for k, size in enumerate(sizes):
        if partition_strategy == "mod":     # id i is row i // count of shard i % count
            held, local = logical_and(known, equal(floormod(ids, count), k)), floordiv(ids, count)
        else:                               # shard k holds ids first .. first + size - 1
            held, local = logical_and(greater_equal(ids, first), less(ids, first + size)), ids - first
        rows.append(where(held, local, size))
        first += size
    return rows


def gather_nd(params: Any, indices: Any, name: str | None = None) -> Tensor:
    """Entries (or slices) of ``params`` picked by the last axis of ``indices`` (TF1's
    ``gather_nd``): ``indices`` ``[..., m]`` reads ``params[i_0, ..., i_{m-1}]``, so the result has
    shape ``indices.shape[:-1] + params.shape[m:]``. As ``gather``: an index outside its axis gives
    zeros, and the gradient adds into what was read. The first ``m`` sizes of ``params`` must be
    known when the graph is built, but for the first (a batch fed), when the rest of ``params``' sizes
    are known.

    >>> import compiler as cc
    >>> from runtime import Session
    >>> table = cc.constant(np.arange(6.0).reshape(2, 3))
    >>> with Session() as sess:
    ...     sess.run(cc.gather_nd(table, [[1, 2], [0, 1]])).tolist()
    [5.0, 1.0]
    """
    with composite_scope(name or "GatherNd", [params, indices]):
        params, indices = convert_to_tensor(params), convert_to_tensor(indices)
        depth = indices.shape[-1] if indices.shape else None
        fed_batch = bool(params.shape) and params.shape[0] is None and None not in params.shape[1:]
        if not dtypes.is_integer(indices.dtype) or depth is None or depth > len(params.shape) or \
                None in params.shape[1 if fed_batch else 0:depth]:
            raise ShapeError(located(f"gather_nd: indices must be integers [..., m] with m known and at most the rank "
                                     f"of params, whose first m sizes are known (the first may be fed when all the "
                                     f"others are known); got indices {indices.dtype.name} "
                                     f"{format_shape(indices.shape)} and params {format_shape(params.shape)}"))
        sizes = params.shape[:depth]
        wide = cast(indices, dtypes.int64)
        strides = np.array([math.prod(sizes[k + 1:]) for k in range(depth)], np.int64)
        flat = reduce_sum(wide * strides, axis=-1)
        if fed_batch:   # the first bound is the fed batch: read from params' shape in the step
            bounds = concat([expand_dims(cast(shape(params)[0], dtypes.int64), 0),
                             constant(np.array(sizes[1:], np.int64))], axis=0)
        else:
            bounds = constant(np.array(sizes, np.int64))
        inside = reduce_all(logical_and(greater_equal(wide, 0), less(wide, bounds)), axis=-1)
        rows = reshape(params, [-1, *params.shape[depth:]])
        return gather(rows, where(inside, flat, -1))


def log_uniform_candidate_sampler(true_classes: Any, num_true: int, num_sampled: int, unique: bool,
                                  range_max: int, seed: int | None = None,
                                  name: str | None = None) -> tuple[Tensor, Tensor, Tensor]:
    """``num_sampled`` classes drawn from the log-uniform (Zipfian) distribution over ``[0,
    range_max)``, ``P(c) = log((c + 2) / (c + 1)) / log(range_max + 1)``, for classes sorted by
    decreasing frequency (TF1's ``log_uniform_candidate_sampler``): ``(sampled_candidates,
    true_expected_count, sampled_expected_count)``, the counts ``num_sampled * P(c)`` of the true
    classes (``[batch, num_true]``) and of the sampled ones. New classes at every run. The classes
    are drawn with replacement, also with ``unique=True`` (TF1 then draws distinct classes).
    """
    _positive_int(num_true, "num_true", "log_uniform_candidate_sampler")
    _positive_int(num_sampled, "num_sampled", "log_uniform_candidate_sampler")
    _positive_int(range_max, "range_max", "log_uniform_candidate_sampler")
    with composite_scope(name or "LogUniformCandidateSampler", [true_classes]):
        true_classes = cast(convert_to_tensor(true_classes), dtypes.int64)
        log_range = math.log(range_max + 1.0)
        drawn = random_uniform([int(num_sampled)], dtype="float64", seed=seed)
        sampled = cast(exp(drawn * log_range) - 1.0, dtypes.int64)       # floor: the values are positive
        sampled = minimum(maximum(sampled, 0), range_max - 1)

        def expected(classes: Tensor) -> Tensor:
            wide = cast(classes, dtypes.float64)
            return cast(num_sampled * (log1p(1.0 / (wide + 1.0)) / log_range), dtypes.float32)
        return sampled, expected(true_classes), expected(sampled)


def _positive_int(value: Any, what: str, function: str) -> int:
    if isinstance(value, bool) or not isinstance(value, (int, np.integer)) or value < 1:
        raise ValueError(located(f"{function}: {what} must be a positive int, got {value!r}"))
    return int(value)


def _sampled_logits(weights: Any, biases: Any, labels: Any, inputs: Any, num_sampled: int, num_classes: int,
                    num_true: int, sampled_values: Any, remove_accidental_hits: bool, partition_strategy: str,
                    seed: int | None, function: str) -> tuple[Tensor, Tensor]:
    """TF1's ``_compute_sampled_logits``: the logits of each example's true classes and of the
    sampled ones (shared by the batch), each less the log of its expected count, and their labels
    (``1 / num_true`` for the true classes, 0 for the sampled)."""
    inputs = convert_to_tensor(inputs)
    labels = cast(convert_to_tensor(labels), dtypes.int64)
    if len(inputs.shape) != 2 or len(labels.shape) != 2 or labels.shape[1] not in (None, num_true):
        raise ShapeError(located(f"{function}: inputs must be [batch, dim] and labels [batch, num_true={num_true}], "
                                 f"got {format_shape(inputs.shape)} and {format_shape(labels.shape)}"))
    if sampled_values is None:
        sampled_values = log_uniform_candidate_sampler(labels, num_true, num_sampled, True, num_classes, seed)
    sampled, true_expected, sampled_expected = sampled_values
    sampled = cast(convert_to_tensor(sampled), dtypes.int64)
    true_weights = embedding_lookup(weights, labels, partition_strategy)            # [batch, num_true, dim]
    true_biases = embedding_lookup(biases, labels, partition_strategy)              # [batch, num_true]
    sampled_weights = embedding_lookup(weights, sampled, partition_strategy)        # [num_sampled, dim]
    sampled_biases = embedding_lookup(biases, sampled, partition_strategy)          # [num_sampled]
    true_logits = reduce_sum(expand_dims(inputs, 1) * true_weights, axis=2) + true_biases
    sampled_logits = matmul(inputs, sampled_weights, transpose_b=True) + sampled_biases
    if remove_accidental_hits:   # a sampled class that is one of the example's own: out of its softmax
        hits = reduce_sum(cast(equal(expand_dims(labels, 2), sampled), inputs.dtype), axis=1)   # [batch, sampled]
        # once, however often the class is among the example's labels: 2 * FLT_MIN is -inf, NaN below
        sampled_logits = sampled_logits + minimum(hits, 1.0) * np.finfo(inputs.dtype).min
    true_logits = true_logits - log(cast(convert_to_tensor(true_expected), inputs.dtype))
    sampled_logits = sampled_logits - log(cast(convert_to_tensor(sampled_expected), inputs.dtype))
    logits = concat([true_logits, sampled_logits], axis=1)
    targets = concat([ones_like(true_logits) * (1.0 / num_true), zeros_like(sampled_logits)], axis=1)
    return logits, targets


def nce_loss(weights: Any, biases: Any, labels: Any, inputs: Any, num_sampled: int, num_classes: int,
             num_true: int = 1, sampled_values: Any = None, remove_accidental_hits: bool = False,
             partition_strategy: str = "mod", name: str = "nce_loss", seed: int | None = None) -> Tensor:
    """TF1's noise-contrastive estimation loss, per example (``[batch]``): a logistic regression of
    each example's true classes (``labels`` ``[batch, num_true]``) against ``num_sampled`` classes
    drawn by ``log_uniform_candidate_sampler`` (or given as ``sampled_values``), each logit less
    the log of its class's expected count. ``weights`` ``[num_classes, dim]`` (or its shards),
    ``biases`` ``[num_classes]``; only the rows looked up get gradients (sparse updates).
    """
    _positive_int(num_true, "num_true", "nce_loss")
    with composite_scope(name or "nce_loss", [inputs]):
        logits, targets = _sampled_logits(weights, biases, labels, inputs, num_sampled, num_classes, num_true,
                                          sampled_values, remove_accidental_hits, partition_strategy, seed,
                                          "nce_loss")
        return reduce_sum(sigmoid_cross_entropy_with_logits(labels=targets, logits=logits), axis=1)


def sampled_softmax_loss(weights: Any, biases: Any, labels: Any, inputs: Any, num_sampled: int, num_classes: int,
                         num_true: int = 1, sampled_values: Any = None, remove_accidental_hits: bool = True,
                         partition_strategy: str = "mod", name: str = "sampled_softmax_loss",
                         seed: int | None = None) -> Tensor:
    """TF1's sampled softmax loss, per example (``[batch]``): the softmax cross-entropy over each
    example's true classes and ``num_sampled`` drawn ones (as ``nce_loss``'s), a sampled class that
    is one of the example's own left out (``remove_accidental_hits``)."""
    _positive_int(num_true, "num_true", "sampled_softmax_loss")
    with composite_scope(name or "sampled_softmax_loss", [inputs]):
        logits, targets = _sampled_logits(weights, biases, labels, inputs, num_sampled, num_classes, num_true,
                                          sampled_values, remove_accidental_hits, partition_strategy, seed,
                                          "sampled_softmax_loss")
        return softmax_cross_entropy_with_logits_v2(labels=targets, logits=logits)


def crelu(features: Any, name: str | None = None, axis: int = -1) -> Tensor:
    """``concat([relu(x), relu(-x)], axis)``: twice the channels (TF1's ``crelu``).

    >>> import compiler as cc
    >>> cc.nn.crelu(cc.placeholder("float32", (None, 3))).shape
    (None, 6)
    """
    with composite_scope(name or "CRelu", [features]):
        x = _float_features("crelu", features)
        return concat([relu(x), relu(negative(x))], axis)


def normalize_moments(counts: Any, mean_ss: Any, variance_ss: Any, shift: Any, name: str | None = None,
                      ) -> tuple[Tensor, Tensor]:
    """(mean, variance) from sufficient statistics (TF1's ``normalize_moments``): ``mean_ss`` and
    ``variance_ss`` are the sums of ``x - shift`` and of its squares over ``counts`` values
    (``shift`` None: of ``x`` itself)."""
    with composite_scope(name or "normalize", [counts, mean_ss, variance_ss, shift]):
        mean_ss = _float_features("normalize_moments", mean_ss)
        divisor = convert_to_tensor(1, mean_ss.dtype) / convert_to_tensor(counts, mean_ss.dtype)
        shifted_mean = mean_ss * divisor
        mean = shifted_mean if shift is None else shifted_mean + convert_to_tensor(shift, mean_ss.dtype)
        variance = convert_to_tensor(variance_ss, mean_ss.dtype) * divisor - square(shifted_mean)
        return mean, variance


def weighted_moments(x: Any, axes: Any, frequency_weights: Any, name: str | None = None,
                     keep_dims: bool | None = None, keepdims: bool | None = None) -> tuple[Tensor, Tensor]:
    """(mean, variance) of ``x`` over ``axes``, each value counted ``frequency_weights`` times
    (broadcast against ``x``; TF1's ``weighted_moments``). Weights summing to 0 give NaN, as TF1.

    >>> import compiler as cc
    >>> from runtime import Session
    >>> mean, variance = cc.nn.weighted_moments(cc.constant([1.0, 3.0]), [0], cc.constant([3.0, 1.0]))
    >>> with Session() as sess:
    ...     [float(v) for v in sess.run([mean, variance])]
    [1.5, 0.75]
    """
    keepdims = renamed_argument("weighted_moments", "keepdims", keepdims, "keep_dims", keep_dims, default=False)
    with composite_scope(name or "weighted_moments", [x, frequency_weights]):
        x = _float_features("weighted_moments", x)
        weights = cast(convert_to_tensor(frequency_weights), x.dtype)   # as TF1
        axes = _axes_list(axes, len(x.shape))
        sum_of_weights = reduce_sum(weights + zeros_like(x), axes, keepdims=True)
        mean = reduce_sum(weights * x, axes, keepdims=True) / sum_of_weights
        variance = reduce_sum(weights * square(x - mean), axes, keepdims=True) / sum_of_weights
        if not keepdims:
            mean, variance = squeeze(mean, axes), squeeze(variance, axes)
        return mean, variance


def log_poisson_loss(targets: Any, log_input: Any, compute_full_loss: bool = False, name: str | None = None) -> Tensor:
    """The negative log-likelihood of ``targets`` under a Poisson of mean ``exp(log_input)``, without
    its constant ``log(targets!)`` (TF1's ``log_poisson_loss``): ``exp(log_input) - log_input *
    targets``; ``compute_full_loss`` adds Stirling's approximation of it for targets above 1."""
    with composite_scope(name or "log_poisson_loss", [targets, log_input]):
        log_input = _float_features("log_poisson_loss", log_input)
        targets = convert_to_tensor(targets, log_input.dtype)
        result = exp(log_input) - log_input * targets
        if not compute_full_loss:
            return result
        small = logical_and(greater_equal(targets, 0.0), less_equal(targets, 1.0))
        safe = where(small, ones_like(targets), targets)
        stirling = safe * log(safe) - safe + 0.5 * log(2.0 * math.pi * safe)
        return result + where(small, zeros_like(targets), stirling)


def fused_batch_normalization(x: Any, scale: Any, offset: Any, mean: Any = None, variance: Any = None,
                              epsilon: float = 0.001, data_format: str = "NHWC", is_training: bool = True,
                              name: str | None = None) -> tuple[Tensor, Tensor, Tensor]:
    """TF1's ``nn.fused_batch_norm`` on NHWC ``x``: ``(y, mean, variance)``. Training: the batch's
    statistics over every axis but the channels; ``y`` uses the variance divided by n, and the
    variance returned is divided by n - 1 (for a moving average, as TF1's kernel). Otherwise ``y``
    uses the ``mean`` and ``variance`` given, and returns them."""
    if data_format != "NHWC":
        raise ValueError(located(f"fused_batch_norm: only data_format='NHWC' is supported, got {data_format!r}"))
    with composite_scope(name or "FusedBatchNorm", [x, scale, offset, mean, variance]):
        x = _float_features("fused_batch_norm", x)
        if len(x.shape) != 4:
            raise ShapeError(located(f"fused_batch_norm: x must be 4-D NHWC, got {format_shape(x.shape)}"))
        if is_training:
            batch_mean, batch_variance = moments(x, [0, 1, 2])
            count = element_count(x, (0, 1, 2), x.dtype)
            corrected = batch_variance * count / maximum(count - 1.0, 1.0)
        elif mean is None or variance is None:
            raise ValueError(located("fused_batch_norm: is_training=False needs the mean and the variance"))
        else:
            batch_mean, batch_variance = convert_to_tensor(mean, x.dtype), convert_to_tensor(variance, x.dtype)
            corrected = batch_variance
        y = batch_normalization(x, batch_mean, batch_variance, offset, scale, epsilon)
        return y, batch_mean, corrected


def local_response_normalization(input: Any, depth_radius: int = 5, bias: float = 1.0, alpha: float = 1.0,  # noqa: A002
                                 beta: float = 0.5, name: str | None = None) -> Tensor:
    """Each value divided by ``(bias + alpha * s) ** beta``, ``s`` the sum of the squares of the
    values ``depth_radius`` channels around it, itself included (TF1's ``local_response_normalization``,
    AlexNet's, on NHWC; the last axis is the channels)."""
    with composite_scope(name or "LRN", [input]):
        x = _float_features("local_response_normalization", input)
        channels = x.shape[-1] if x.shape else None
        if channels is None or isinstance(depth_radius, bool) or not isinstance(depth_radius, (int, np.integer)) \
                or depth_radius < 0:
            raise ValueError(located(f"local_response_normalization: needs channels of known size and a depth_radius "
                                     f">= 0, got {format_shape(x.shape)} and {depth_radius!r}"))
        rank, radius = len(x.shape), int(depth_radius)
        padded = pad(square(x), [[0, 0]] * (rank - 1) + [[radius, radius]])
        window = add_n([padded[(Ellipsis, slice(k, k + channels))] for k in range(2 * radius + 1)]) \
            if radius else square(x)
        return x * (bias + alpha * window) ** (-beta)


def gather(params: Any, indices: Any, validate_indices: Any = None, name: str | None = None, axis: int | None = None,
           batch_dims: int = 0) -> Tensor:
    """TF1's ``gather``: ``gather.gather``'s rows along ``axis``; with ``batch_dims``, ``batch_gather``.

    >>> import numpy as np, compiler as cc
    >>> cc.gather(cc.constant(np.zeros((2, 4, 3))), cc.constant([[1], [0]]), batch_dims=1).shape
    (2, 1, 3)
    """
    if batch_dims:
        return batch_gather(params, indices, name=name, axis=axis, batch_dims=batch_dims)
    return gather_along(params, indices, validate_indices, name, axis)


def batch_gather(params: Any, indices: Any, name: str | None = None, axis: int | None = None,
                 batch_dims: int | None = None) -> Tensor:
    """For each position of the leading ``batch_dims`` dimensions (all but the last of
    ``indices`` by default), the rows of that batch entry of ``params`` that ``indices`` picks:
    TF1's ``batch_gather`` and ``gather(..., batch_dims=b)`` (along axis ``b``). An index outside
    its batch entry's rows gives zeros. The first batch size may be fed at any size.

    >>> import numpy as np, compiler as cc
    >>> from runtime import Session
    >>> params = cc.constant(np.arange(12.0).reshape(2, 3, 2))
    >>> with Session() as sess:
    ...     sess.run(cc.batch_gather(params, cc.constant([[2, 0], [1, 1]]))).tolist()
    [[[4.0, 5.0], [0.0, 1.0]], [[8.0, 9.0], [8.0, 9.0]]]
    """
    with composite_scope(name or "batch_gather", [params, indices]):
        params, indices = convert_to_tensor(params), convert_to_tensor(indices)
        batch = len(indices.shape) - 1 if batch_dims is None else int(batch_dims)
        if axis is not None and int(axis) % max(len(params.shape), 1) != batch:
            raise ValueError(located(f"gather: with batch_dims={batch} only axis={batch} is available, got {axis!r}"))
        shared = params.shape[:batch]
        if not 0 < batch <= len(indices.shape) or len(params.shape) <= batch or any(
                a is not None and b is not None and a != b for a, b in zip(shared, indices.shape[:batch])) \
                or None in params.shape[1:]:
            raise ValueError(located(f"batch_gather: params {format_shape(params.shape)} and indices "
                                     f"{format_shape(indices.shape)} must share {batch} leading dimensions, params' "
                                     f"sizes after the first known"))
        if batch > 1:   # fold the shared dimensions into one
            folded = batch_gather(reshape(params, [-1] + list(params.shape[batch:])),
                                  reshape(indices, [-1] + list(indices.shape[batch:])), batch_dims=1)
            return reshape(folded, [-1] + list(shared[1:]) + list(folded.shape[1:]))
        rows = params.shape[1]
        entries = params.shape[0] if params.shape[0] is not None else shape(params)[0]
        offsets = range_of(entries, dtype=indices.dtype) * literal_as(rows, indices.dtype, "batch_gather")
        offsets = reshape(offsets, [-1] + [1] * (len(indices.shape) - 1))
        inside = logical_and(greater_equal(indices, literal_as(0, indices.dtype, "batch_gather")),
                             less(indices, literal_as(rows, indices.dtype, "batch_gather")))
        flat = where(inside, indices + offsets, literal_as(-1, indices.dtype, "batch_gather"))
        return gather_along(reshape(params, [-1] + list(params.shape[2:])), flat)

"""graphgrad's graph-building API (TensorFlow 1.x conventions).

>>> import numpy as np
>>> import compiler as cc
>>> x = cc.placeholder("float32", shape=(None, 3), name="x")
>>> w = cc.Variable(np.ones((3, 1), "float32"), name="w")
>>> loss = cc.reduce_mean(cc.square(x @ w))
>>> (grad_w,) = cc.gradients(loss, [w])
"""
from __future__ import annotations

import types as _types
from typing import Any

import numpy as np

from . import dtypes, losses, nn, summary  # noqa: F401
from .control_flow import (case, cond, cumprod, foldl, foldr, fori_loop, map_fn, scan, switch_case,  # noqa: F401
                           while_loop)
from .autodiff import AggregationMethod, UnconnectedGradients, gradients, register_gradient_hook  # noqa: F401
from .custom_gradient import GradientRegistryError, RegisterGradient, custom_gradient  # noqa: F401
from .dtypes import bool_, float32, float64, int32, int64  # noqa: F401
from .dtypes import bool_ as bool  # noqa: F401,A001  (TF1's tf.bool; the builtin is not used below)
from .errors import (CompileError, DTypeError, FeedError, GraphgradError, GraphMismatchError,  # noqa: F401
                     InvalidArgumentError, NoGradientError, NumericsError, OutOfBoundsError, RaceError, ShapeError)
from .hessians import hessian_vector_product, hessians  # noqa: F401
from .clipping import clip_by_average_norm, clip_by_global_norm, clip_by_norm, global_norm  # noqa: F401
from .session_options import ConfigProto, GPUOptions  # noqa: F401
from . import initializers  # noqa: F401
from .initializers import (constant_initializer, glorot_normal_initializer, glorot_uniform_initializer,  # noqa: F401
                           identity_initializer, ones_initializer, orthogonal_initializer,
                           uniform_unit_scaling_initializer, random_normal_initializer,
                           random_uniform_initializer, truncated_normal_initializer, variance_scaling_initializer,
                           zeros_initializer)
from .variable_scope import (AUTO_REUSE, VariableScope, get_local_variable, get_variable,  # noqa: F401
                             get_variable_scope, variable_scope)
from . import layers  # noqa: F401,E402  (built on the ops above)
from . import debugging, metrics  # noqa: F401,E402
from .debugging import Print  # noqa: F401,E402
from .debugging import print_ as print  # noqa: F401,E402,A001  (TF1.15's tf.print)
from .debugging import (assert_equal, assert_greater, assert_greater_equal, assert_less,  # noqa: F401,E402
                        assert_less_equal, assert_near, assert_negative, assert_non_negative, assert_non_positive,
                        assert_none_equal, assert_positive, assert_rank)
from .graph import (Dimension, Graph, GraphKeys, Operation, SourceLocation, Tensor, TensorShape,  # noqa: F401
                    dimension_value, get_default_graph, get_default_session, name_scope, reset_default_graph)
from .ops.selection import where_rows as where  # noqa: F401  (TF1's where: a vector condition picks rows)
from .ops.array import (element_count, expand_dims, identity, one_hot, ones_like, rank, reshape,  # noqa: F401
                        reshape_like, shape, size, squeeze, stop_gradient, transpose, zeros_like)
from .ops.base import constant, convert_to_tensor  # noqa: F401
from .ops.base import literal_as as _literal_as
from .ops.broadcast import broadcast_like, broadcast_to, sum_to  # noqa: F401
from .ops.creation import (diag, eye, fill, linspace, matrix_band_part, matrix_diag, matrix_diag_part,  # noqa: F401
                           matrix_set_diag, ones, sequence_mask, trace, zeros)
from .ops.creation import range  # noqa: F401,A001
from .ops.einsum import einsum, tensordot  # noqa: F401
from .ops.elementwise import (abs, add, add_n, cast, clip_by_value, cos, divide, equal, erf, exp,  # noqa: F401
                              expm1, floor, floordiv, floormod, greater, greater_equal, is_nan, less,
                              less_equal, log, log1p, logical_and, logical_not, logical_or, logical_xor,
                              maximum, minimum, multiply, negative, not_equal, pow, reciprocal, relu,
                              rsqrt, sigmoid, sign, sin, sqrt, square, squared_difference, subtract, tan,
                              tanh)
from .ops.elementwise import ceil, div, to_double, to_float, to_int32, to_int64, truediv  # noqa: F401
from .ops.elementwise import (acosh, asinh, atanh, cosh, div_no_nan, is_finite, is_inf, round, sinh,  # noqa: F401,A004
                              truncatediv, truncatemod)
from .ops.elementwise import round as rint  # noqa: F401
from .ops.elementwise import floormod as mod  # noqa: F401
from .ops.gather import unsorted_segment_mean, unsorted_segment_sqrt_n, unsorted_segment_sum  # noqa: F401
from .ops.nn import batch_gather, gather  # noqa: F401  (gather with TF1's batch_dims)
from .ops.nn import gather_nd  # noqa: F401
from .ops.joining import concat, roll, split, stack, tile, unstack  # noqa: F401
from .ops.linalg import matmul  # noqa: F401
from .ops.numerics import Assert, add_check_numerics_ops, check_numerics  # noqa: F401
from .ops.padding import pad  # noqa: F401
from .ops.scatter import (scatter_add, scatter_nd, scatter_sub, tensor_scatter_nd_add,  # noqa: F401
                          tensor_scatter_nd_sub)
from .ops.random import (multinomial, random_crop, random_normal, random_shuffle, random_uniform,  # noqa: F401
                          truncated_normal)
from .ops.random_seed import set_random_seed  # noqa: F401
from .ops.reduction import (argmax, argmin, count_nonzero, cumsum, norm, reduce_all, reduce_any,  # noqa: F401
                            reduce_euclidean_norm, reduce_logsumexp, reduce_max, reduce_mean, reduce_min, reduce_prod,
                            reduce_std, reduce_sum, reduce_variance)
from .ops.slicing import getitem, reverse, strided_slice  # noqa: F401
newaxis = None   # TF1's tf.newaxis: x[:, cc.newaxis] adds an axis, as numpy's
from .ops.slicing import slice_ as slice  # noqa: F401,A001
from .ops.sources import (Variable, global_variables, local_variables, placeholder,  # noqa: F401
                          placeholder_with_default, trainable_variables)
from .ops.sources import global_variables as all_variables  # noqa: F401  (TF1's older name)
from .ops.state import (assign, assign_add, assign_sub, global_variables_initializer, group,  # noqa: F401
                        local_variables_initializer, no_op, variables_initializer)
from .ops.state import global_variables_initializer as initialize_all_variables  # noqa: F401  (older name)
from .ops.state import tuple_ as tuple  # noqa: F401,A001
from .ops.array import (depth_to_space, identity_n, matrix_transpose, shape_n, space_to_depth)  # noqa: F401,E402
from .ops.creation import diag_part, meshgrid  # noqa: F401,E402
from .ops.creation import linspace as lin_space  # noqa: F401,E402  (TF1's older name)
from .ops.elementwise import acos, asin, atan, atan2, realdiv, scalar_mul  # noqa: F401,E402
from .ops.elementwise import where as where_v2  # noqa: F401,E402  (TF1.14's broadcasting where)
from .ops.nn import log_sigmoid  # noqa: F401,E402
from . import image, linalg, math, random  # noqa: F401,E402  (tf.image, tf.linalg, tf.math, tf.random)
from . import distributions, regularizers  # noqa: E402
from .initializers import contrib_variance_scaling_initializer, xavier_initializer  # noqa: E402


# TF1 scripts' tf.contrib.layers and tf.keras.regularizers spellings of the regularizers and
# initializers they pass to layers (the rest of contrib and keras is not here).
contrib = _types.SimpleNamespace(layers=_types.SimpleNamespace(
    l1_regularizer=regularizers.l1_regularizer, l2_regularizer=regularizers.l2_regularizer,
    l1_l2_regularizer=regularizers.l1_l2_regularizer, xavier_initializer=xavier_initializer,
    variance_scaling_initializer=contrib_variance_scaling_initializer))
keras = _types.SimpleNamespace(regularizers=_types.SimpleNamespace(
    l1=regularizers.l1, l2=regularizers.l2, l1_l2=regularizers.l1_l2))

def get_collection(key: str, scope: str | None = None) -> list[Any]:
    """The default graph's collection ``key`` (names matching ``scope`` only, when given), as TF1's."""
    return get_default_graph().get_collection(key, scope)


def add_to_collection(name: str, value: Any) -> None:
    """Add ``value`` to the default graph's collection ``name``, as TF1's."""
    get_default_graph().add_to_collection(name, value)


def get_collection_ref(key: str) -> list[Any]:
    """The default graph's collection ``key`` itself (TF1's): changing the list changes it."""
    return get_default_graph().get_collection_ref(key)


def device(device_name_or_function: Any) -> Any:
    """TF1's ``with tf.device("/cpu:0"):``, accepted so that TF1 code runs as it is: the ops of a
    step run where the ``Session``'s target says (see ``Graph.device``)."""
    return get_default_graph().device(device_name_or_function)


def is_tensor(value: Any) -> bool:
    """Whether ``value`` is a graph tensor (a ``Variable`` is one), as TF1's ``is_tensor``."""
    return isinstance(value, Tensor)


def control_dependencies(control_inputs: Any) -> Any:
    """``with cc.control_dependencies([op]):`` new nodes run after ``op`` (and what it depends on);
    a variable they read that ``op`` assigned is read with its assigned value."""
    return get_default_graph().control_dependencies(control_inputs)


def _binary(function: Any, reflected: bool = False) -> Any:
    """A Tensor operator: a numpy array (or scalar) on the other side takes the tensor's dtype, as
    TF1's operators convert it (float64 arrays round to float32; a float into an integer tensor, or
    an integer that does not fit, is an error, as for Python numbers)."""
    def operands(self: Tensor, other: Any) -> Any:
        if isinstance(other, (np.ndarray, np.generic)) and other.dtype.kind in "biuf":
            other = _literal_as(other, self.dtype, function.__name__)
        return other
    if reflected:
        return lambda self, other: function(operands(self, other), self)
    return lambda self, other: function(self, operands(self, other))


Tensor.__add__ = _binary(add)
Tensor.__radd__ = _binary(add, reflected=True)
Tensor.__sub__ = _binary(subtract)
Tensor.__rsub__ = _binary(subtract, reflected=True)
Tensor.__mul__ = _binary(multiply)
Tensor.__rmul__ = _binary(multiply, reflected=True)
Tensor.__truediv__ = _binary(divide)
Tensor.__rtruediv__ = _binary(divide, reflected=True)
Tensor.__matmul__ = _binary(matmul)
Tensor.__rmatmul__ = _binary(matmul, reflected=True)
Tensor.__floordiv__ = _binary(floordiv)
Tensor.__rfloordiv__ = _binary(floordiv, reflected=True)
Tensor.__mod__ = _binary(floormod)
Tensor.__rmod__ = _binary(floormod, reflected=True)
Tensor.__and__ = _binary(logical_and)     # bool tensors, as TF1's operators
Tensor.__rand__ = _binary(logical_and, reflected=True)
Tensor.__or__ = _binary(logical_or)
Tensor.__ror__ = _binary(logical_or, reflected=True)
Tensor.__xor__ = _binary(logical_xor)
Tensor.__rxor__ = _binary(logical_xor, reflected=True)
Tensor.__invert__ = lambda self: logical_not(self)
Tensor.__pow__ = _binary(pow)
Tensor.__rpow__ = _binary(pow, reflected=True)
Tensor.__lt__ = _binary(less)
Tensor.__le__ = _binary(less_equal)
Tensor.__gt__ = _binary(greater)
Tensor.__ge__ = _binary(greater_equal)
Tensor.__neg__ = lambda self: negative(self)
Tensor.__getitem__ = getitem
Tensor.__abs__ = lambda self: abs(self)


def __getattr__(name: str) -> Any:
    """TF1's ``tf.train``, ``tf.Session`` and ``tf.InteractiveSession`` under ``compiler``, so a TF1
    script ports with ``import compiler as tf``: ``cc.train`` is the ``optim`` package, the sessions
    are ``runtime``'s (imported on first use: they build on this package)."""
    if name == "train":
        import optim
        return optim
    if name in ("Session", "InteractiveSession"):
        import runtime
        return getattr(runtime, name)
    raise AttributeError(f"module 'compiler' has no attribute {name!r}")

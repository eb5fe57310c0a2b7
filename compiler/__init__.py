"""graphgrad's graph-building API (TensorFlow 1.x conventions).

>>> import numpy as np
>>> import compiler as cc
>>> x = cc.placeholder("float32", shape=(None, 3), name="x")
>>> w = cc.Variable(np.ones((3, 1), "float32"), name="w")
>>> loss = cc.reduce_mean(cc.square(x @ w))
>>> (grad_w,) = cc.gradients(loss, [w])
"""
from __future__ import annotations

from typing import Any

from . import dtypes, losses, nn  # noqa: F401
from .autodiff import gradients
from .custom_gradient import GradientRegistryError, RegisterGradient, custom_gradient  # noqa: F401
from .dtypes import bool_, float32, float64, int32, int64  # noqa: F401
from .errors import (CompileError, DTypeError, FeedError, GraphgradError, GraphMismatchError,  # noqa: F401
                     NoGradientError, ShapeError)
from .hessians import hessian_vector_product, hessians  # noqa: F401
from .graph import (Graph, GraphKeys, Operation, SourceLocation, Tensor, get_default_graph,  # noqa: F401
                    name_scope, reset_default_graph)
from .ops.array import (broadcast_like, broadcast_to, element_count, expand_dims, identity,  # noqa: F401
                        one_hot, ones_like, reshape, reshape_like, squeeze, stop_gradient,
                        transpose, zeros_like)
from .ops.base import convert_to_tensor  # noqa: F401
from .ops.elementwise import (abs, add, cast, clip_by_value, cos, divide, equal, erf, exp,  # noqa: F401
                              expm1, floor, greater, greater_equal, is_nan, less, less_equal, log,
                              log1p, logical_and, logical_not, logical_or, maximum, minimum, multiply,
                              negative, not_equal, pow, relu, rsqrt, sigmoid, sign, sin, sqrt, square,
                              subtract, tanh, where)
from .ops.indexing import (concat, gather, getitem, pad, reverse, split, stack, strided_slice,  # noqa: F401
                           tile, unsorted_segment_sum, unstack)
from .ops.indexing import slice_ as slice  # noqa: F401,A001
from .ops.linalg import matmul  # noqa: F401
from .ops.random import random_normal, random_uniform, set_random_seed, truncated_normal  # noqa: F401
from .ops.reduction import (argmax, argmin, cumsum, reduce_logsumexp, reduce_max, reduce_mean,  # noqa: F401
                            reduce_min, reduce_prod, reduce_sum, sum_to)
from .ops.sources import (Variable, constant, global_variables, placeholder,  # noqa: F401
                          trainable_variables)
from .ops.state import (assign, assign_add, assign_sub, global_variables_initializer, group,  # noqa: F401
                        no_op)
from .ops.state import tuple_ as tuple  # noqa: F401,A001


def control_dependencies(control_inputs: Any) -> Any:
    """``with cc.control_dependencies([op]):`` new nodes run after ``op`` (and what it depends on);
    a variable they read that ``op`` assigned is read with its assigned value."""
    return get_default_graph().control_dependencies(control_inputs)


def _binary(function: Any, reflected: bool = False) -> Any:
    if reflected:
        return lambda self, other: function(other, self)
    return lambda self, other: function(self, other)


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
Tensor.__pow__ = _binary(pow)
Tensor.__rpow__ = _binary(pow, reflected=True)
Tensor.__lt__ = _binary(less)
Tensor.__le__ = _binary(less_equal)
Tensor.__gt__ = _binary(greater)
Tensor.__ge__ = _binary(greater_equal)
Tensor.__neg__ = lambda self: negative(self)
Tensor.__getitem__ = getitem
Tensor.__abs__ = lambda self: abs(self)

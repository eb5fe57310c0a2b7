"""``cc.math``: TF1's ``tf.math`` names for the ops of ``compiler`` (the same functions, no new
rules), so that code written against ``tf.math.*`` reads the same here.

>>> import compiler as cc
>>> cc.math.reduce_sum is cc.reduce_sum
True
"""
from .control_flow import cumprod  # noqa: F401
from .ops.array import shape_n  # noqa: F401
from .ops.creation import polyval  # noqa: F401
from .ops.elementwise import (abs, acos, acosh, add, add_n, asin, asinh, atan, atan2, atanh, ceil, cos, cosh,  # noqa: F401,A004
                              div_no_nan, divide, equal, erf, exp, expm1, floor, floordiv, floormod, greater,
                              greater_equal, is_finite, is_inf, is_nan, less, less_equal, log, log1p,
                              logical_and, logical_not, logical_or, logical_xor, maximum, minimum, multiply,
                              negative, not_equal, pow, realdiv, reciprocal, reciprocal_no_nan, round, rsqrt,
                              scalar_mul, sigmoid, sign, sin, sinh, sqrt, square, squared_difference,
                              subtract, tan, tanh, truediv, truncatediv, truncatemod, xdivy, xlogy)
from .ops.elementwise import div_no_nan as divide_no_nan  # noqa: F401
from .ops.elementwise import floormod as mod  # noqa: F401
from .ops.elementwise import round as rint  # noqa: F401
from .ops.gather import unsorted_segment_mean, unsorted_segment_sqrt_n, unsorted_segment_sum  # noqa: F401
from .ops.nn import in_top_k, l2_normalize, log_sigmoid, log_softmax, softmax, softplus, softsign, zero_fraction  # noqa: F401
from .ops.reduction import (argmax, argmin, count_nonzero, cumsum, reduce_all, reduce_any,  # noqa: F401
                            reduce_euclidean_norm, reduce_logsumexp, reduce_max, reduce_mean, reduce_min,
                            reduce_prod, reduce_std, reduce_sum, reduce_variance, top_k)

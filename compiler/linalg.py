"""``cc.linalg``: TF1's ``tf.linalg`` names for the matrix ops of ``compiler`` (the same
functions, no new rules).

>>> import compiler as cc
>>> cc.linalg.transpose(cc.placeholder("float32", (None, 2, 3))).shape
(None, 3, 2)
"""
from .ops.array import matrix_transpose as transpose  # noqa: F401
from .ops.creation import eye, trace  # noqa: F401
from .ops.creation import matrix_band_part as band_part  # noqa: F401
from .ops.creation import matrix_diag as diag  # noqa: F401
from .ops.creation import matrix_diag_part as diag_part  # noqa: F401
from .ops.creation import matrix_set_diag as set_diag  # noqa: F401
from .ops.einsum import einsum, tensordot  # noqa: F401
from .ops.linalg import matmul  # noqa: F401
from .ops.nn import l2_normalize  # noqa: F401
from .ops.reduction import norm  # noqa: F401

"""``cc.nn``: neural-network ops (activations, softmax, log_softmax, cross-entropies, convolution
and pooling)."""
from .ops.conv import avg_pool, conv2d, max_pool  # noqa: F401
from .ops.nn import (elu, gelu, leaky_relu, log_softmax, relu, sigmoid,  # noqa: F401
                     sigmoid_cross_entropy_with_logits, softmax, softmax_cross_entropy_with_logits,
                     softplus, sparse_softmax_cross_entropy_with_logits, tanh)
from .ops.random import dropout  # noqa: F401

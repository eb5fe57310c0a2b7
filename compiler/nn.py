"""``cc.nn``: neural-network ops (activations, softmax, log_softmax, cross-entropies)."""
from .ops.nn import (elu, gelu, leaky_relu, log_softmax, relu, sigmoid,  # noqa: F401
                     sigmoid_cross_entropy_with_logits, softmax, softmax_cross_entropy_with_logits,
                     softplus, sparse_softmax_cross_entropy_with_logits, tanh)

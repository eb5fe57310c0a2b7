"""``cc.nn``: neural-network ops (activations, softmax, log_softmax, cross-entropies, convolution
and pooling)."""
from .ops.conv import avg_pool, conv2d, max_pool  # noqa: F401
from .ops.nn import (batch_normalization, bias_add, dropout, elu, gelu, in_top_k, l2_loss,  # noqa: F401
                     l2_normalize, leaky_relu, log_softmax, moments, relu, sigmoid,
                     sigmoid_cross_entropy_with_logits, softmax, softmax_cross_entropy_with_logits,
                     softplus, sparse_softmax_cross_entropy_with_logits, tanh)

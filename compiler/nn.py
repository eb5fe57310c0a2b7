"""``cc.nn``: neural-network ops (relu, softmax, log_softmax, cross-entropies)."""
from .ops.nn import (log_softmax, relu, sigmoid, softmax, softmax_cross_entropy_with_logits,  # noqa: F401
                     sparse_softmax_cross_entropy_with_logits, tanh)

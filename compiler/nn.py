"""``cc.nn``: neural-network ops (activations, softmax, log_softmax, cross-entropies, embedding
lookups, convolution and pooling)."""
from .ops.conv import (atrous_conv2d, avg_pool, avg_pool1d, avg_pool2d, conv1d, conv2d, conv2d_transpose,  # noqa: F401
                       convolution, depthwise_conv2d, max_pool, max_pool1d, max_pool2d, pool, separable_conv2d)
from .ops.nn import (crelu, fused_batch_normalization, local_response_normalization, log_poisson_loss,  # noqa: F401
                     normalize_moments, weighted_moments)
from .ops.nn import fused_batch_normalization as fused_batch_norm  # noqa: F401
from .ops.nn import local_response_normalization as lrn  # noqa: F401
from .ops.nn import (batch_normalization, bias_add, dropout, elu, embedding_lookup, gelu, in_top_k,  # noqa: F401
                     l2_loss, l2_normalize, leaky_relu, log_sigmoid, log_softmax, moments, relu, relu6, selu,
                     sigmoid, sigmoid_cross_entropy_with_logits, silu, softmax, softmax_cross_entropy_with_logits,
                     softmax_cross_entropy_with_logits_v2, softplus, softsign,
                     sparse_softmax_cross_entropy_with_logits, swish, tanh, weighted_cross_entropy_with_logits,
                     xw_plus_b, zero_fraction)
from .ops.reduction import top_k  # noqa: F401,E402
from .ops.nn import gather_nd, log_uniform_candidate_sampler, nce_loss, sampled_softmax_loss  # noqa: F401,E402
from . import rnn_cell  # noqa: F401,E402  (cc.nn.rnn_cell.BasicLSTMCell...: compositions of the ops above)
from .rnn_cell import bidirectional_dynamic_rnn, dynamic_rnn, reverse_sequence, static_rnn  # noqa: F401,E402

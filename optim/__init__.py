"""Optimizers with TensorFlow 1.x's API and update equations.

>>> import numpy as np
>>> import compiler as cc
>>> import optim
>>> w = cc.Variable(np.ones(3), name="w")
>>> loss = cc.reduce_sum(cc.square(w))
>>> step = optim.get_or_create_global_step()
>>> train = optim.AdamOptimizer(1e-3).minimize(loss, global_step=step)
"""
from .accumulation import GradientAccumulator
from .adadelta import AdadeltaOptimizer
from .adagrad import AdagradOptimizer
from .adam import AdamOptimizer
from .adamw import AdamWOptimizer
from compiler.clipping import clip_by_average_norm, clip_by_global_norm, clip_by_norm, global_norm
from .distributed import (DistributedOptimizer, StepTimings, broadcast_variables, launched_by_mpiexec, rank,
                          shard, size, world)
from .ftrl import FtrlOptimizer
from .gradient_descent import GradientDescentOptimizer
from .learning_rate_decay import (cosine_decay, cosine_decay_restarts, exponential_decay, inverse_time_decay,
                                  linear_cosine_decay, natural_exp_decay, noisy_linear_cosine_decay, piecewise_constant,
                                  polynomial_decay)
from .momentum import MomentumOptimizer
from .moving_averages import ExponentialMovingAverage  # noqa: F401
from .optimizer import Optimizer
from .proximal import ProximalAdagradOptimizer, ProximalGradientDescentOptimizer
from .rmsprop import RMSPropOptimizer
from .saver import CheckpointError, CheckpointState, Saver, get_checkpoint_state, latest_checkpoint, load_checkpoint
from .training_util import (assert_global_step, create_global_step, get_global_step, get_or_create_global_step,
                            global_step)

__all__ = ["Optimizer", "GradientDescentOptimizer", "MomentumOptimizer", "AdamOptimizer",
           "AdagradOptimizer", "AdadeltaOptimizer", "RMSPropOptimizer", "AdamWOptimizer",
           "FtrlOptimizer", "ProximalGradientDescentOptimizer", "ProximalAdagradOptimizer", "GradientAccumulator",
           "ExponentialMovingAverage", "clip_by_norm", "clip_by_global_norm", "clip_by_average_norm", "global_norm",
           "exponential_decay", "inverse_time_decay", "natural_exp_decay", "polynomial_decay", "piecewise_constant",
           "cosine_decay", "cosine_decay_restarts", "linear_cosine_decay", "noisy_linear_cosine_decay",
           "get_or_create_global_step", "get_global_step", "create_global_step", "assert_global_step", "global_step",
           "Saver", "latest_checkpoint", "load_checkpoint", "get_checkpoint_state", "CheckpointState",
           "CheckpointError", "DistributedOptimizer", "StepTimings", "broadcast_variables", "shard", "rank",
           "size", "world", "launched_by_mpiexec"]

"""Optimizers with TensorFlow 1.x's API and update equations.

>>> import numpy as np
>>> import compiler as cc
>>> import optim
>>> w = cc.Variable(np.ones(3), name="w")
>>> loss = cc.reduce_sum(cc.square(w))
>>> step = optim.get_or_create_global_step()
>>> train = optim.AdamOptimizer(1e-3).minimize(loss, global_step=step)
"""
from .adam import AdamOptimizer
from .gradient_descent import GradientDescentOptimizer
from .momentum import MomentumOptimizer
from .optimizer import Optimizer
from .saver import Saver, latest_checkpoint
from .training_util import get_global_step, get_or_create_global_step

__all__ = ["Optimizer", "GradientDescentOptimizer", "MomentumOptimizer", "AdamOptimizer",
           "get_or_create_global_step", "get_global_step", "Saver", "latest_checkpoint"]

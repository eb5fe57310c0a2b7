"""The global step: an int64 scalar variable counting training steps (TF1's ``train`` helpers)."""
from __future__ import annotations

import numpy as np

import compiler as cc
from compiler import dtypes
from compiler.graph import Graph, located


def get_global_step(graph: Graph | None = None) -> cc.Variable | None:
    """The graph's global step variable: the one in collection ``GLOBAL_STEP``, else (as TF1) a
    variable named "global_step" made by hand (``cc.Variable(0, name="global_step",
    trainable=False)``), else None.

    >>> import compiler as cc
    >>> import optim
    >>> g = cc.Graph()
    >>> optim.get_global_step(g) is None
    True
    """
    graph = graph or cc.get_default_graph()
    found = graph.get_collection(cc.GraphKeys.GLOBAL_STEP)
    if not found:
        found = [v for v in graph.get_collection(cc.GraphKeys.GLOBAL_VARIABLES)
                 if isinstance(v, cc.Variable) and v.op.name == "global_step"][:1]
        if not found:
            return None
    if len(found) > 1:
        raise TypeError(f"more than one variable in the {cc.GraphKeys.GLOBAL_STEP!r} collection: "
                        f"{[v.name for v in found]}")
    step = found[0]
    # As TF1's assert_global_step: a step of another kind is an error, not a reason to make a second one.
    if not dtypes.is_integer(step.dtype):
        raise TypeError(located(f"the existing global step {step.name!r} does not have an integer type "
                                f"({step.dtype.name}); make it with dtype int64"))
    if step.shape != ():
        raise TypeError(located(f"the existing global step {step.name!r} is not a scalar (shape "
                                f"{list(step.shape)})"))
    return step


def get_or_create_global_step(graph: Graph | None = None) -> cc.Variable:
    """The graph's global step, created if missing: an int64 scalar Variable named
    "global_step", non-trainable, in ``GLOBAL_VARIABLES`` and ``GLOBAL_STEP``.

    >>> import compiler as cc
    >>> import optim
    >>> g = cc.Graph()
    >>> step = optim.get_or_create_global_step(g)
    >>> step.op.name, step.dtype.name, step is optim.get_or_create_global_step(g)
    ('global_step', 'int64', True)
    """
    graph = graph or cc.get_default_graph()
    step = get_global_step(graph)
    if step is None:
        with graph.init_scope():
            step = cc.Variable(np.zeros((), np.int64), name="global_step", trainable=False,
                               collections=[cc.GraphKeys.GLOBAL_VARIABLES, cc.GraphKeys.GLOBAL_STEP])
    return step

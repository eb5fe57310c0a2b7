"""The global step: an int64 scalar variable counting training steps (TF1's ``train`` helpers)."""
from __future__ import annotations

from typing import Any

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


def create_global_step(graph: Graph | None = None) -> cc.Variable:
    """A new global step (see ``get_or_create_global_step``); an error when the graph has one
    already (TF1's ``create_global_step``)."""
    graph = graph or cc.get_default_graph()
    existing = get_global_step(graph)
    if existing is not None:
        raise ValueError(located(f"create_global_step: the graph has a global step already ({existing.name!r})"))
    return get_or_create_global_step(graph)


def assert_global_step(global_step_tensor: Any) -> None:
    """An error unless ``global_step_tensor`` is an integer scalar variable (TF1's
    ``assert_global_step``)."""
    if not isinstance(global_step_tensor, cc.Variable) or not dtypes.is_integer(global_step_tensor.dtype) \
            or global_step_tensor.shape != ():
        raise TypeError(located(f"the global step must be an integer scalar Variable, got {global_step_tensor!r}"))


def global_step(sess: Any, global_step_tensor: Any) -> int:
    """The value of the global step in ``sess``, as a Python int (TF1's ``train.global_step``).

    >>> import compiler as cc, optim
    >>> from runtime import Session
    >>> with cc.Graph().as_default() as g:
    ...     step = optim.get_or_create_global_step()
    ...     with Session(g) as sess:
    ...         print(optim.global_step(sess, step))
    0
    """
    return int(sess.run(global_step_tensor))

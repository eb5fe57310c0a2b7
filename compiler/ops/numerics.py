"""Numerics checks (TF1's ``check_numerics`` and ``add_check_numerics_ops``, the engine's anomaly
mode): a checked value that holds NaN or Inf stops the run with a ``NumericsError`` that names the
op, its line, and for an op of the backward pass the forward op whose gradient it is.

``CheckNumerics`` passes its input through; the compiler gives it a buffer of its own and checks
that buffer right after the kernel that writes it, inside the compiled step (``Session(
check_numerics=True)`` checks every kernel's output that way). A failing check ends the step
before any assignment, so variables keep their values from before the run.
"""
from __future__ import annotations

from typing import Any

import numpy as np

from .. import dtypes
from ..errors import DTypeError
from ..graph import Graph, Operation, Tensor, get_default_graph, located
from .base import OpDef, convert_to_tensor
from .rules import floating_dtype, pass_through, same_shape_as_first
from .state import group


def _check_gradient(op: Operation, g: Tensor) -> list[Tensor | None]:
    # As TF1: the gradient flowing back through a check is checked too.
    return [check_numerics(g, f"{op.attrs['message']} (gradient)")]


CheckNumerics = OpDef("CheckNumerics", "elementwise", same_shape_as_first, floating_dtype,
                      reference=lambda values, attrs: np.array(values[0]),
                      grad_rule=_check_gradient, lower_scalar=pass_through)


def check_numerics(tensor: Any, message: str, name: str | None = None) -> Tensor:
    """``tensor`` unchanged, but a run in which it holds NaN or Inf raises ``NumericsError``
    with ``message``, the op and the user's line (TF1's ``tf.debugging.check_numerics``).

    >>> import numpy as np, compiler as cc
    >>> from runtime import Session
    >>> x = cc.placeholder("float32", (2,))
    >>> y = cc.check_numerics(cc.log(x), "log of x")
    >>> with Session() as sess:
    ...     sess.run(y, {x: np.ones(2, "float32")})
    array([0., 0.], dtype=float32)
    """
    tensor = convert_to_tensor(tensor)
    if not dtypes.is_floating(tensor.dtype):
        raise DTypeError(located(f"check_numerics: {tensor.name!r} is {tensor.dtype.name}; only float32 and "
                                 "float64 values can hold NaN or Inf"))
    return CheckNumerics(tensor, message=str(message), name=name)


def add_check_numerics_ops(graph: Graph | None = None) -> Operation:
    """One op that checks every float32/float64 value computed in the graph so far (TF1's
    ``tf.add_check_numerics_ops``): fetch it with the step to check all of them. The values inside
    a ``cond`` branch or a loop body cannot be checked from outside it (TF1 refuses such graphs
    altogether): those are left to ``Session(check_numerics=True)``, which checks them too."""
    graph = graph or get_default_graph()
    checks = []
    with graph.as_default():
        for op in list(graph.get_operations()):
            if op.type in ("CheckNumerics", "Placeholder", "Variable") or len(op.outputs) != 1:
                continue
            if op.region is not None or op.traced_in is not None:   # inside a branch or loop body
                continue
            output = op.outputs[0]
            if dtypes.is_floating(output.dtype) and op.opdef.kind in ("elementwise", "reduce", "layout"):
                checks.append(check_numerics(output, f"{op.describe()} (at {op.location})"))
        return group(*checks, name="CheckNumerics")


def describe_failure(op: Operation) -> str:
    """What a failed check says: the checked op and line, the user's message (for an explicit
    check), and for a backward-pass op the forward op whose gradient it is."""
    checked = op.inputs[0].op if op.type == "CheckNumerics" else op
    text = f"NaN or Inf in the output of {checked.describe()} (at {checked.location})"
    if op.type == "CheckNumerics":
        text = f"{op.attrs['message']}: {text}, checked by {op.describe()} (at {op.location})"
    forward = checked.gradient_of
    if forward is not None:
        text += f"; it is part of the gradient of {forward.describe()} (at {forward.location})"
    return text

"""Checks that stop a run: numerics checks (TF1's ``check_numerics`` and
``add_check_numerics_ops``, the engine's anomaly mode) and assertions (``Assert`` and the
``assert_*`` family). A checked value that holds NaN or Inf stops the run with a ``NumericsError``
that names the op, its line, and for an op of the backward pass the forward op whose gradient it
is; a failed assertion stops it with an ``InvalidArgumentError``.

``CheckNumerics`` passes its input through; the compiler gives it a buffer of its own and checks
that buffer right after the kernel that writes it, inside the compiled step (``Session(
check_numerics=True)`` checks every kernel's output that way). A failing check ends the step
before any assignment, so variables keep their values from before the run.

An assertion is a checked value too: ``Assert`` computes 0 where its condition holds and NaN
where it does not, and that value is checked like any other, on every target, with no machinery
of its own. The ``assert_*`` functions are compositions: a comparison, ``reduce_all``, ``Assert``;
when their operands are constants they are decided as the graph is built, as in TF1.
"""
from __future__ import annotations

from typing import Any, Mapping, Sequence

import numpy as np

from .. import dtypes
from ..errors import DTypeError, InvalidArgumentError, NumericsError, ShapeError
from ..graph import Graph, Operation, Tensor, get_default_graph, located, user_location
from ..shapes import RuleError
from .base import OpDef, convert_to_tensor
from .rules import floating_dtype, pass_through, same_shape_as_first
from .state import group

# The op types whose output is checked in the step; a failed assertion's message starts so.
CHECK_OPS = frozenset({"CheckNumerics", "Assert"})
ASSERTION_FAILED = "assertion failed"


def _check_gradient(op: Operation, g: Tensor) -> list[Tensor | None]:
    # As TF1: the gradient flowing back through a check is checked too.
    return [check_numerics(g, f"{op.attrs['message']} (gradient)")]


CheckNumerics = OpDef("CheckNumerics", "elementwise", same_shape_as_first, floating_dtype,
                      reference=lambda values, attrs: np.array(values[0]),
                      grad_rule=_check_gradient, lower_scalar=pass_through)


def _assertion_dtype(types: Sequence[np.dtype], attrs: Mapping[str, Any]) -> np.dtype:
    if types[0] != dtypes.bool_:
        raise RuleError(f"needs a bool condition, got {types[0].name}", "dtype")
    return dtypes.float32


def _lower_assertion(sb: Any, args: Sequence[Any], attrs: Mapping[str, Any]) -> Any:
    return sb.select(args[0], sb.literal(0.0, dtypes.float32), sb.literal(float("nan"), dtypes.float32))


# 0 where the condition holds, NaN where it does not: a value the step checks (see above).
AssertOp = OpDef("Assert", "elementwise", same_shape_as_first, _assertion_dtype,
                 reference=lambda values, attrs: np.where(values[0], np.float32(0), np.float32(np.nan)),
                 grad_rule=lambda op, g: [None], lower_scalar=_lower_assertion)


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
    if op.type == "Assert":
        return f"{ASSERTION_FAILED}: {op.attrs['message']} ({op.describe()} at {op.location})"
    checked = op.inputs[0].op if op.type == "CheckNumerics" else op
    text = f"NaN or Inf in the output of {checked.describe()} (at {checked.location})"
    if op.type == "CheckNumerics":
        text = f"{op.attrs['message']}: {text}, checked by {op.describe()} (at {op.location})"
    forward = checked.gradient_of
    if forward is not None:
        text += f"; it is part of the gradient of {forward.describe()} (at {forward.location})"
    return text


def failure_error(check: str) -> type[InvalidArgumentError] | type[NumericsError]:
    """The error a failed check of the step raises, from what the check says."""
    return InvalidArgumentError if check.startswith(ASSERTION_FAILED) else NumericsError


def _describe_data(item: Any) -> str:
    if isinstance(item, Tensor):
        return f"{item.name} (a {item.dtype.name} tensor)"
    return str(item)


def Assert(condition: Any, data: Sequence[Any], summarize: int | None = None,  # noqa: N802 (TF1's name)
           name: str | None = None) -> Operation:
    """An op that stops the run with ``InvalidArgumentError`` when the scalar bool ``condition``
    is false (TF1's ``tf.Assert``): fetch it, or make other ops depend on it with
    ``cc.control_dependencies``. The message lists ``data``: strings as they are, tensors by name
    (their values are not printed); ``summarize`` is accepted for TF1's signature.

    >>> import numpy as np, compiler as cc
    >>> from runtime import Session
    >>> x = cc.placeholder("float32", (3,), name="x")
    >>> check = cc.Assert(cc.reduce_all(x > 0.0), ["x must be positive:", x])
    >>> with cc.control_dependencies([check]):
    ...     y = cc.log(x)
    >>> with Session() as sess:
    ...     print(sess.run(y, {x: np.ones(3, "float32")}))
    ...     try:
    ...         sess.run(y, {x: -np.ones(3, "float32")})
    ...     except cc.InvalidArgumentError as error:
    ...         print(str(error).startswith("assertion failed: x must be positive:"))
    [0. 0. 0.]
    True
    """
    location = user_location()
    condition = convert_to_tensor(condition)
    if condition.dtype != dtypes.bool_:
        raise DTypeError(located(f"Assert: the condition {condition.name!r} must be bool, got "
                                 f"{condition.dtype.name}", location))
    if condition.shape != ():
        raise ShapeError(located(f"Assert: the condition {condition.name!r} must be a scalar, got shape "
                                 f"{condition.shape}; use cc.reduce_all", location))
    items = list(data) if isinstance(data, (list, tuple)) else [data]
    message = " ".join(_describe_data(item) for item in items)
    return AssertOp(condition, message=message, name=name or "Assert").op


#: The attribute of an ``Assert`` that a target which runs no checks (``target="cuda"``) may
#: skip rather than refuse the step: set by ops whose result already shows the failure (a NaN).
UNCHECKED_ON_GPU = "unchecked_on_gpu"


def internal_assert(condition: Tensor, message: str) -> Operation:
    """An ``Assert`` built by an op for its own arguments (``UNCHECKED_ON_GPU``)."""
    return AssertOp(condition, message=message, name="Assert", **{UNCHECKED_ON_GPU: True}).op


def required_checks(kernels: Sequence[Any], graph: Graph) -> list[Any]:
    """The kernels whose check a target must run: all but those that check only internal
    assertions (``internal_assert``)."""
    def optional(kernel: Any) -> bool:
        checked = [name for op_type, name, _ in kernel.covers if op_type in CHECK_OPS]
        return bool(checked) and all(graph.get_operation_by_name(name).attrs.get(UNCHECKED_ON_GPU) for name in checked)
    return [kernel for kernel in kernels if kernel.check and not optional(kernel)]

"""The control-flow primitives: a branch (``Cond``) and a loop (``While``) whose bodies are traced
regions of the graph (``compiler/control_flow.py`` builds them; users call ``cc.cond``,
``cc.while_loop``, ``cc.scan`` and ``cc.fori_loop``).

A region is a subgraph with parameters of its own (``RegionParam``): the function's arguments, then
one per tensor from outside that the function reads (its captures, which the control op takes as
inputs). The control op's single output is a *token*, an int scalar (the branch taken, or the trip
count); each value the construct returns is a ``RegionOutput`` of that token. Their gradients are
not ``grad_rule``s: ``control_flow`` registers each construct with ``gradients`` as a call with
several outputs (like a ``custom_gradient`` call), whose backward pass is again a ``cond`` or a
``while_loop``.

How they run: the numpy reference interprets the regions (``runtime/reference.py``); the compiler
lowers each region to kernels inside the one native step, in a branch or a loop of the step's
schedule (``compiler/passes/regions.py``).
"""
from __future__ import annotations

from typing import Any, Mapping, Sequence

import numpy as np

from .. import dtypes
from .base import OpDef
from .rules import dtype_from_attrs, first_dtype, no_gradient, pass_through, same_shape_as_first, shape_from_attrs

# A function's argument, or a value captured from outside the region, as the region sees it.
RegionParam = OpDef("RegionParam", "source", shape_from_attrs, dtype_from_attrs, reference=None,
                    grad_rule=no_gradient)


def _scalar(shapes: Sequence[tuple], attrs: Mapping[str, Any]) -> tuple:
    return ()


def _token_dtype(dtype: np.dtype) -> Any:
    return lambda types, attrs: dtype


# inputs: the scalar bool predicate, then the operands both branches read (the union of their
# captures). attrs: "branches" (false region, true region), "operands_of" (per branch, the input
# index each capture parameter takes its value from). Token: 1 if the true branch ran, else 0.
Cond = OpDef("Cond", "control", _scalar, _token_dtype(dtypes.int32), reference=None, grad_rule=no_gradient)

# inputs: the initial loop variables, then the captures of the condition and the body. attrs:
# "condition", "body" (regions), "variables" (how many loop variables), "captures_of" (per region,
# the input index each capture parameter reads), "maximum_iterations" (int or None), "history"
# (the loop variables whose per-iteration values are kept, see RegionOutput), "saved" (values of
# the body kept per iteration), "sliced" and "rows" (``scan``'s element tensors, inputs after the
# loop variables: iteration i passes the body row rows[0] + rows[1] * i of each). Token: the trip
# count.
While = OpDef("While", "control", _scalar, _token_dtype(dtypes.int64), reference=None, grad_rule=no_gradient)

# input: a control op's token. attrs: "index" (which value), "shape", "dtype" and, for a While,
# "history": then the value is the stack of loop variable ``index`` at the start of every
# iteration, ``maximum_iterations`` rows (rows past the trip count are zero); or "saved": the stack
# of the body's value ``attrs["saved"][index]`` in every iteration (kept for the backward pass).
RegionOutput = OpDef("RegionOutput", "control", shape_from_attrs, dtype_from_attrs, reference=None,
                     grad_rule=no_gradient)


# The value of input 0 with the gradient of input 1: a loop's backward pass reads a value the
# forward loop kept (input 0, a row of its stack) where its body computed it (input 1, the same
# computation again, which ``simplify.elide_noops`` then drops: only its gradient is built).
SavedValue = OpDef("SavedValue", "elementwise", same_shape_as_first, first_dtype,
                   reference=lambda values, attrs: values[0], grad_rule=lambda op, grad: [None, grad],
                   lower_scalar=pass_through)


def _stack_read_shape(shapes: Sequence[tuple], attrs: Mapping[str, Any]) -> tuple:
    return tuple(shapes[0][1:])


def _stack_read_lowering(sb: Any, args: Sequence[Any], attrs: Mapping[str, Any]) -> Any:
    stack, row = args
    shape = sb.output_shape
    size = int(np.prod(shape, dtype=np.int64))
    where = sb.mul(sb.cast(row, dtypes.int64), sb.literal(size, dtypes.int64))
    stride = size
    for dim, extent in enumerate(shape):
        stride //= max(extent, 1)
        if extent != 1:
            where = sb.add(where, sb.mul(sb.index(dim), sb.literal(stride, dtypes.int64)))
    return sb.gather(stack.operand, where, stack.dtype)


def _no_second_order(op: Any, grad: Any) -> list[Any]:
    from ..graph import located
    raise NotImplementedError(located(
        "second derivatives through a while_loop without maximum_iterations are not supported: give the "
        "loop a maximum_iterations (its stacks then have a fixed size and can be differentiated)", op.location))


# Row ``index`` of a loop's stack grown at run time (whose static length is unknown): the backward
# pass of a while_loop without maximum_iterations reads the forward iterations' values with it.
# The index is always a row the loop wrote, so there is no bounds check.
StackRead = OpDef("StackRead", "elementwise", _stack_read_shape, first_dtype,
                  reference=lambda values, attrs: np.asarray(values[0])[int(values[1])],
                  grad_rule=_no_second_order, lower_scalar=_stack_read_lowering, indexed_inputs=(0,),
                  dim_map=lambda shapes, out, attrs: [(None,) * len(shapes[0]), ()])


def regions_of(op: Any) -> tuple[Any, ...]:
    """The regions of a ``Cond`` (false, true) or a ``While`` (condition, body); () otherwise."""
    if op.opdef is Cond:
        return tuple(op.attrs["branches"])
    if op.opdef is While:
        return (op.attrs["condition"], op.attrs["body"])
    return ()


def region_variables(op: Any) -> list[Any]:
    """The variable ops that the regions of ``op`` (and the regions nested in them) use directly:
    those they assign. The step that runs ``op`` needs their buffers."""
    from .state import VariableOp
    found: dict[int, Any] = {}
    stack = list(regions_of(op))
    while stack:
        region = stack.pop()
        for inner in region.operations:
            for tensor in inner.inputs:
                if tensor.op.opdef is VariableOp:
                    found.setdefault(tensor.op.id, tensor.op)
            stack.extend(regions_of(inner))
    return [found[key] for key in sorted(found)]


def assigned_variables(op: Any) -> set[Any]:
    """The variable ops that running ``op`` (a ``Cond`` or ``While``, its nested constructs
    included) may assign."""
    found: set[Any] = set()
    for region in regions_of(op):
        found.update(state.inputs[0].op for state in region.state_ops)
        for inner in region.operations:
            found |= assigned_variables(inner)
    return found


def has_assignments(op: Any) -> bool:
    """Whether running ``op`` (a ``Cond`` or ``While``) may assign a variable: a step keeps such a
    construct even when nothing reads its values, as it keeps an assignment."""
    return any(region.state_ops or any(has_assignments(inner) for inner in region.operations)
               for region in regions_of(op))


def value_position(output_attrs: Mapping[str, Any], variables: int) -> int:
    """Where the value a ``RegionOutput`` stands for sits among its construct's values: a While's
    ``variables`` final loop variables, then their stacks ("history"), then its kept body values
    ("saved"); a Cond's outputs (``variables`` 0)."""
    kind_offset = variables if output_attrs.get("history") else 2 * variables if output_attrs.get("saved") else 0
    return output_attrs["index"] + kind_offset

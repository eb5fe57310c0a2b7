"""Control dependencies inside one step: which reads see a value assigned earlier in the step.

Without control dependencies every read of a variable sees its value from the start of the step.
An op built inside ``cc.control_dependencies([...])`` runs after those ops and everything they
depend on; if one of them assigned a variable the op reads, the op reads the assigned value (as a
TF1 variable read would). For an assignment that reads its own variable (``assign_add``,
``assign_sub``) the value it adds to is then the earlier assignment's result, so chained updates
compose. Both the compiler (``specialize``) and the reference evaluator use this one analysis.
"""
from __future__ import annotations

from typing import Sequence

from ..graph import Operation

Assignments = dict[Operation, Operation]        # variable op -> the latest assignment to it


def _merge(into: Assignments, other: Assignments) -> Assignments:
    """The later-built assignment wins (an assignment built after another may depend on it)."""
    if not other:
        return into
    if not into:
        return other
    merged = dict(into)
    for variable, assignment in other.items():
        current = merged.get(variable)
        if current is None or assignment.id > current.id:
            merged[variable] = assignment
    return merged


def control_reads(operations: Sequence[Operation]) -> dict[Operation, dict[int, Operation]]:
    """For each op (in creation order) that reads a variable after an assignment to it is known to
    have run: ``{input index: assignment}``. Index 0 of an assignment is its variable's old value."""
    done: dict[Operation, Assignments] = {}      # op -> assignments finished once op has run
    reads: dict[Operation, dict[int, Operation]] = {}
    for op in operations:
        visible: Assignments = {}
        for control in op.control_inputs:
            visible = _merge(visible, done.get(control, {}))
        if visible:
            for index, tensor in enumerate(op.inputs):
                assignment = visible.get(tensor.op) if tensor.op.type == "Variable" else None
                if assignment is not None and assignment is not op:
                    reads.setdefault(op, {})[index] = assignment
        finished = visible
        for tensor in op.inputs:
            finished = _merge(finished, done.get(tensor.op, {}))
        if op.opdef.kind == "state":
            finished = _merge(finished, {op.inputs[0].op: op})
        done[op] = finished
    return reads

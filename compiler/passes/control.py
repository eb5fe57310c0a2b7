"""Control dependencies inside one step: which reads see a value assigned earlier in the step.

Without control dependencies every read of a variable sees its value from the start of the step.
An op built inside ``cc.control_dependencies([...])`` runs after those ops and everything they
depend on; if one of them assigned a variable the op reads, the op reads the assigned value (as a
TF1 variable read would). For an assignment that reads its own variable (``assign_add``,
``assign_sub``) the value it adds to is then the earlier assignment's result, so chained updates
compose. Both the compiler (``specialize``) and the reference evaluator use this one analysis.

Assignments to one variable that no control dependency orders run in the order they were built,
each on the value the one before it left: an ``assign_add``/``assign_sub`` adds to that value (two
unordered ``assign_add``s both apply, as TF1's atomic read-modify-write updates do), and a plain
``assign`` replaces it (of two unordered ``assign``s the one built last wins). The value an
assignment returns is the variable's value right after it. A branch or loop that assigns a
variable an assignment built before it also assigns is refused (``CompileError``): nothing orders
the two.
"""
from __future__ import annotations

from typing import Sequence

from ..errors import CompileError
from ..graph import Operation, located
from ..ops.control import assigned_variables

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
    built: Assignments = {}                      # variable op -> its latest assignment built so far
    for op in operations:
        if op.opdef.kind == "control":
            _refuse_an_earlier_assignment(op, built)
        visible: Assignments = {}
        for control in op.control_inputs:
            visible = _merge(visible, done.get(control, {}))
        if visible:
            for index, tensor in enumerate(op.inputs):
                assignment = visible.get(tensor.op) if tensor.op.type == "Variable" else None
                if assignment is not None and assignment is not op:
                    reads.setdefault(op, {})[index] = assignment
        if op.opdef.kind == "state":
            # It applies to what the assignment built before it left (see above); its value
            # input still reads the variable as any other unordered read does.
            variable = op.inputs[0].op
            if variable in built:
                reads.setdefault(op, {})[0] = built[variable]
            built[variable] = op
        finished = visible
        for tensor in op.inputs:
            finished = _merge(finished, done.get(tensor.op, {}))
        if op.opdef.kind == "state":
            finished = _merge(finished, {op.inputs[0].op: op})
        done[op] = finished
    return reads


def _refuse_an_earlier_assignment(construct: Operation, built: Assignments) -> None:
    """A branch or loop that assigns a variable an assignment built before it also assigns: which
    value the construct reads, and which one the variable ends with, depend on an order nothing
    in the step gives (a compiled step and the reference evaluator chose differently), so say so."""
    for variable in sorted(assigned_variables(construct), key=lambda o: o.id):
        earlier = built.get(variable)
        if earlier is not None:
            raise CompileError(located(
                f"{construct.describe()} assigns the variable {variable.name!r}, which {earlier.describe()} (at "
                f"{earlier.location}), built before it, also assigns in the same step: build that assignment "
                "inside the construct, or after it (ops built after a branch or loop see what it assigned)",
                construct.location))

"""The numpy reference evaluator: the test oracle (``Session(target="reference")``).

It interprets the graph op by op with each op's numpy ``reference``. Same state semantics as the
compiled step (``compiler.passes.control``): reads see variables as they were at the start of the
step, unless a control dependency orders them after an assignment; assignments to one variable
apply in the order they were built (two unordered ``assign_add``s both apply) and land at the end.
It is never the product's execution path.
"""
from __future__ import annotations

from typing import Any, Sequence

import numpy as np

from compiler import dtypes
from compiler.errors import NumericsError
from compiler.graph import Operation, Tensor, located
from compiler.ops.numerics import describe_failure
from compiler.passes.control import control_reads
from compiler.passes.specialize import needed_operations


def evaluate(fetches: Sequence[Tensor | Operation], feeds: dict[Tensor, np.ndarray],
             variables: dict[Tensor, np.ndarray], check_numerics: bool = False
             ) -> tuple[list[np.ndarray | None], dict[Tensor, np.ndarray]]:
    """Values of ``fetches`` and the variables' new values (only those assigned). A
    ``CheckNumerics`` op (with ``check_numerics``: every float value an op computes, assignments
    aside) that sees NaN or Inf raises ``NumericsError``."""
    roots = [f.op if isinstance(f, Tensor) else f for f in fetches]
    values: dict[Tensor, np.ndarray] = {}
    updates: dict[Tensor, np.ndarray] = {}
    operations = needed_operations(roots)
    reads = control_reads(operations)
    with np.errstate(all="ignore"):
        for op in operations:
            kind = op.opdef.kind
            if op.type == "Placeholder":
                values[op.outputs[0]] = feeds[op.outputs[0]]
            elif op.type == "Variable":
                values[op.outputs[0]] = variables[op.outputs[0]].copy()
            elif kind in ("group", "host"):
                continue
            else:
                inputs = [values[t] for t in op.inputs]
                for index, assignment in reads.get(op, {}).items():
                    inputs[index] = values[assignment.outputs[0]]  # a read after that assignment
                try:
                    result = np.asarray(op.opdef.reference(inputs, op.attrs))
                except Exception as exc:
                    shapes = ", ".join(str(np.shape(v)) for v in inputs)
                    raise type(exc)(located(f"{op.describe()} on inputs of shapes {shapes}", op.location)
                                    + f": {exc}") from exc
                out = op.outputs[0]
                values[out] = np.array(result, dtype=out.dtype, order="C")
                checked = op.type == "CheckNumerics" or (check_numerics and kind != "state")
                if checked and dtypes.is_floating(out.dtype) and not np.isfinite(values[out]).all():
                    raise NumericsError(describe_failure(op))
                if kind == "state":
                    updates[op.inputs[0]] = values[out]
    results = [values[f].copy() if isinstance(f, Tensor) else None for f in fetches]
    return results, updates

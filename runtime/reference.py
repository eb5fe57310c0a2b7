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
from compiler.errors import NoGradientError
from compiler.graph import Operation, Tensor, located
from compiler.ops.control import value_position
from compiler.ops.numerics import CHECK_OPS, describe_failure, failure_error
from compiler.passes.control import control_reads
from compiler.passes.specialize import needed_operations


def evaluate(fetches: Sequence[Tensor | Operation], feeds: dict[Tensor, np.ndarray],
             variables: dict[Tensor, np.ndarray], check_numerics: bool = False,
             advance_random_counter: bool = True) -> tuple[list[np.ndarray | None], dict[Tensor, np.ndarray]]:
    """Values of ``fetches`` and the variables' new values (only those assigned). A
    ``CheckNumerics`` op (with ``check_numerics``: every float value an op computes, assignments
    aside) that sees NaN or Inf raises ``NumericsError``, a false ``Assert`` raises
    ``InvalidArgumentError``. Branches and loops run their regions (``_run_region``); an assignment inside one is seen by what runs after it in the region, by
    the next iteration and by the ops built after the construct."""
    roots = [f.op if isinstance(f, Tensor) else f for f in fetches]
    values: dict[Tensor, np.ndarray] = {}
    updates: dict[Tensor, np.ndarray] = {}
    state = dict(variables)                 # each variable's value as the step goes on
    produced: dict[Operation, list[np.ndarray]] = {}   # a branch's or loop's values, by its op
    # What the step's assign_adds (and subs) built before a branch or loop add to a variable that
    # the construct then assigns too (the hidden random counter: a step's increment, and a loop
    # that draws in its body): the construct ran from the step's start, and they apply on top of
    # what it left, as on the compiled targets.
    added: dict[Tensor, np.ndarray] = {}
    operations = needed_operations(roots, feeds, advance_random_counter)
    reads = control_reads(operations)
    with np.errstate(all="ignore"):
        for op in operations:
            kind = op.opdef.kind
            if op.type in ("Placeholder", "RegionParam") or (op.outputs and op.outputs[0] in feeds):
                values[op.outputs[0]] = feeds[op.outputs[0]]   # a fed intermediate tensor too
            elif op.type == "Variable":
                values[op.outputs[0]] = state[op.outputs[0]].copy()
            elif kind in ("group", "host"):
                continue
            elif kind == "control":
                inputs = [values[t] for t in op.inputs]
                for index, assignment in reads.get(op, {}).items():
                    inputs[index] = values[assignment.outputs[0]]   # a capture read after that assignment
                if op.type == "RegionOutput":
                    index = value_position(op.attrs, op.inputs[0].op.attrs.get("variables", 0))
                    values[op.outputs[0]] = produced[op.inputs[0].op][index]
                    continue
                token, produced[op], assigned = _run_control(op, inputs, state, check_numerics)
                values[op.outputs[0]] = token
                for variable, value in assigned.items():
                    state[variable] = updates[variable] = value
                    if variable in added:   # applied at the end of the step, on what the construct left
                        updates[variable] = np.asarray(value + added[variable], dtype=value.dtype)
                    if variable in values:
                        values[variable] = value.copy()
            else:
                inputs = [values[t] for t in op.inputs]
                for index, assignment in reads.get(op, {}).items():
                    inputs[index] = values[assignment.outputs[0]]  # a read after that assignment
                try:
                    result = np.asarray(op.opdef.reference(inputs, op.attrs))
                except Exception as exc:
                    shapes = ", ".join(str(np.shape(v)) for v in inputs)
                    raise _located_error(exc, located(f"{op.describe()} on inputs of shapes {shapes}",
                                                      op.location) + f": {exc}") from exc
                out = op.outputs[0]
                values[out] = np.array(result, dtype=out.dtype, order="C")
                # Constants are given, not computed: an inf in one (logsumexp's test for an
                # infinite max) is no failure, and the compiled targets check kernels only.
                checked = op.type in CHECK_OPS or (check_numerics and kind not in ("state", "source"))
                if checked and dtypes.is_floating(out.dtype) and not np.isfinite(values[out]).all():
                    raise failure_error(describe_failure(op))(describe_failure(op))
                if kind == "state":
                    updates[op.inputs[0]] = values[out]
                    if op.type in ("AssignAdd", "AssignSub"):
                        delta = np.broadcast_to(inputs[1], values[out].shape)
                        delta = delta if op.type == "AssignAdd" else -delta
                        added[op.inputs[0]] = added.get(op.inputs[0], 0) + delta
                    else:
                        added.pop(op.inputs[0], None)
    results = [values[f].copy() if isinstance(f, Tensor) else None for f in fetches]
    return results, updates


def _run_region(region: Any, arguments: Sequence[np.ndarray], state: dict[Tensor, np.ndarray],
                check_numerics: bool, extra: Sequence[Tensor] = ()) -> list[np.ndarray]:
    """The region's results (then the values of ``extra``, tensors of the region) for these
    parameter values; its assignments update ``state``."""
    feeds = dict(zip(region.params, arguments))
    fetches = list(region.results) + list(extra) + list(region.state_ops)
    results, updates = evaluate(fetches, feeds, state, check_numerics, not region.runs_once)
    state.update(updates)
    return [r for r in results[:len(region.results) + len(extra)]]


def _run_control(op: Operation, inputs: list[np.ndarray], variables: dict[Tensor, np.ndarray],
                 check_numerics: bool) -> tuple[np.ndarray, list[np.ndarray], dict[Tensor, np.ndarray]]:
    """Run a ``Cond`` or ``While``: its token, its values (for a While: the final loop variables,
    then their per-iteration stacks) and the variables it assigned."""
    state = dict(variables)
    if op.type == "Cond":
        taken = bool(inputs[0])
        region = op.attrs["branches"][int(taken)]
        operands = inputs[1:]
        results = _run_region(region, [operands[j] for j in op.attrs["operands_of"][int(taken)]], state,
                              check_numerics)
        token = np.array(int(taken), dtype=np.int32)
    else:
        count, limit = op.attrs["variables"], op.attrs["maximum_iterations"]
        condition, body = op.attrs["condition"], op.attrs["body"]

        def captures(which: int) -> list[np.ndarray]:
            # A captured variable that the loop has assigned by now is read as it is now (the
            # compiled targets read its buffer): a condition that reads what the body assigns, or
            # the random counter that each iteration advances, also where an enclosing construct
            # passed the variable in as one of its own captures.
            found = []
            for j in op.attrs["captures_of"][which]:
                variable = _variable_behind(op.inputs[j])
                found.append(state[variable] if variable in state and state[variable] is not variables.get(variable)
                             else inputs[j])
            return found
        elements = inputs[count:count + op.attrs["sliced"]]
        first_row, row_step = op.attrs["rows"]
        current = [np.array(v) for v in inputs[:count]]
        kept: list[list[np.ndarray]] = [[] for _ in range(count)]
        saved = op.attrs["saved"]
        saved_values: list[list[np.ndarray]] = [[] for _ in saved]
        trips = 0
        while limit is None or trips < limit:
            (go,) = _run_region(condition, current + captures(0), state, check_numerics)
            if not bool(go):
                break
            for stack, value in zip(kept, current):
                stack.append(value)
            rows = [element[first_row + row_step * trips] for element in elements]
            produced = _run_region(body, current + rows + captures(1), state, check_numerics, saved)
            current = [np.array(v) for v in produced[:count]]
            for stack, value in zip(saved_values, produced[count:]):
                stack.append(value)
            trips += 1
        rows_kept = limit if limit is not None else trips      # without a limit: as many rows as ran
        for k in sorted(op.attrs["history"]):
            shapes = list(dict.fromkeys(value.shape for value in kept[k]))
            if len(shapes) > 1:
                raise NoGradientError(located(
                    f"gradients: the while_loop {op.name!r} changes the shape of loop variable {k} (from {shapes[0]} "
                    f"to {shapes[1]}); its gradient needs every iteration's value at one shape, which is not "
                    f"supported. Keep the shape fixed (pad to the largest size) to differentiate the loop",
                    op.location))
        results = current + [_stacked(stack, value.shape, value.dtype, rows_kept) if k in op.attrs["history"]
                             else np.zeros(0, value.dtype) for k, (stack, value) in enumerate(zip(kept, current))]
        results += [_stacked(stack, tuple(t.shape), t.dtype, rows_kept) for stack, t in zip(saved_values, saved)]
        token = np.array(trips, dtype=np.int64)
    assigned = {v: value for v, value in state.items() if value is not variables.get(v)}
    return token, results, assigned


def _variable_behind(tensor: Tensor) -> Tensor:
    """The variable a region's capture parameter stands for (through enclosing regions), else
    ``tensor`` itself."""
    while tensor.op.type == "RegionParam" and tensor.op.region is not None:
        region = tensor.op.region
        position = region.params.index(tensor) - region.arguments
        if position < 0:
            break
        tensor = region.captures[position]
    return tensor


def _stacked(rows: list[np.ndarray], shape: tuple, dtype: np.dtype, length: int) -> np.ndarray:
    """``rows`` stacked into ``length`` rows, zeros after them (a loop's per-iteration values)."""
    if rows:
        shape = rows[0].shape
    shape = tuple(0 if d is None else d for d in shape)   # never read when the loop never ran
    stack = np.zeros((length,) + tuple(shape), dtype=dtype)
    if rows and length:
        stack[:len(rows)] = np.stack(rows[:length])
    return stack


def _located_error(exc: Exception, message: str) -> Exception:
    """``exc``'s kind of error with ``message``; when that kind cannot be made from a message alone
    (numpy's MemoryError takes a shape and a dtype), the nearest base class that can."""
    for kind in type(exc).__mro__:
        try:
            return kind(message)
        except Exception:
            continue
    return RuntimeError(message)

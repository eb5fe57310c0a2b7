"""Control flow in the graph: ``cond``, ``while_loop``, ``fori_loop`` and ``scan``, differentiable
(``case`` and ``switch_case`` are nested ``cond``s; ``foldl``, ``foldr`` and ``map_fn`` are ``scan``s).

Each construct traces the user's functions once into *regions* (``Region``): subgraphs of the
graph whose ops take their inputs from the region's parameters. Tracing runs the function on
scratch parameters, finds what it read from outside (its *captures*), then copies what it built
into the region proper, with one parameter per argument and per capture, made first so that the
graph's creation order stays topological. The scratch ops stay behind, unused. Variables that the
function assigns are read directly (an assignment in a loop body is seen by the next iteration);
every other outside value, variables included, is captured at the time the construct runs.

The primitives are ``Cond`` and ``While`` (``ops/control.py``); ``scan`` and ``fori_loop`` are
``while_loop``s. Gradients: a ``cond``'s gradient is a ``cond`` whose branches are the branches'
gradients. A ``while_loop``'s gradient is a ``while_loop`` that runs backwards over the values the
loop variables had at the start of every iteration (the loop keeps them, and its body's matrix
products, in stacks once a gradient asks for them: ``maximum_iterations`` rows, or grown as the
loop runs when it has no bound), recomputing the rest of each iteration's body from them and
applying its gradient.
"""
from __future__ import annotations

import contextlib
import dataclasses
import functools
from dataclasses import dataclass, field
from typing import Any, Callable, Iterator, Sequence

import numpy as np

from . import dtypes
from .custom_gradient import CUSTOM_GRADIENT_CALLS, CustomGradientCall
from .errors import DTypeError, NoGradientError, ShapeError
from .graph import Graph, Operation, SourceLocation, Tensor, get_default_graph, located, user_location
from .ops.array import expand_dims, identity, ones_like, transpose, zeros_like
from .ops.base import apply, constant, convert_to_tensor
from .ops.control import (Cond, RegionOutput, RegionParam, SavedValue, StackRead, While, assigned_variables,
                           regions_of)
from .ops.elementwise import cast, equal, less
from .ops.gather import gather
from .ops.joining import concat
from .ops.numerics import Assert
from .ops.padding import pad
from .ops.random import RANDOM_OP_TYPES, draws
from .ops.slicing import reverse
from .ops.sources import VariableOp
from .shapes import format_shape
from .variable_scope import (AUTO_REUSE, default_name_counts, get_variable_scope, set_default_name_counts,
                             variable_scope)

# -- nested structures ------------------------------------------------------------------------


def flatten(structure: Any) -> tuple[list[Any], Callable[[Sequence[Any]], Any]]:
    """The leaves of nested tuples, lists and dicts (keys sorted), and a function that puts new
    leaves back into the same structure."""
    if isinstance(structure, (list, tuple)):
        parts = [flatten(item) for item in structure]
        sizes = [len(leaves) for leaves, _ in parts]

        def rebuild_sequence(leaves: Sequence[Any]) -> Any:
            items, at = [], 0
            for (_, rebuild), size in zip(parts, sizes):
                items.append(rebuild(leaves[at:at + size]))
                at += size
            if isinstance(structure, tuple) and hasattr(structure, "_fields"):
                return type(structure)(*items)
            return type(structure)(items)
        return [leaf for leaves, _ in parts for leaf in leaves], rebuild_sequence
    if isinstance(structure, dict):
        keys = sorted(structure)
        inner, rebuild_values = flatten([structure[k] for k in keys])
        return inner, lambda leaves: dict(zip(keys, rebuild_values(leaves)))
    return [structure], lambda leaves: leaves[0]


def _describe_structure(structure: Any) -> str:
    if isinstance(structure, (list, tuple)):
        inner = ", ".join(_describe_structure(item) for item in structure)
        return f"({inner},)" if isinstance(structure, tuple) and len(structure) == 1 else (
            f"({inner})" if isinstance(structure, tuple) else f"[{inner}]")
    if isinstance(structure, dict):
        return "{" + ", ".join(f"{k!r}: {_describe_structure(structure[k])}" for k in sorted(structure)) + "}"
    return "tensor"


def _same_structure(a: Any, b: Any) -> bool:
    if isinstance(a, (list, tuple)) and isinstance(b, (list, tuple)):
        return len(a) == len(b) and all(_same_structure(x, y) for x, y in zip(a, b))
    if isinstance(a, dict) and isinstance(b, dict):
        return sorted(a) == sorted(b) and all(_same_structure(a[k], b[k]) for k in a)
    return not isinstance(a, (list, tuple, dict)) and not isinstance(b, (list, tuple, dict))


def function_location(fn: Callable[..., Any]) -> str:
    """Where a user function is defined (``file:line``), for errors about what it returned; a
    wrapper made here names the user's function it calls (``__graphgrad_location__``)."""
    wrapped = getattr(fn, "__graphgrad_location__", None)
    if wrapped is not None:
        return wrapped
    code = getattr(fn, "__code__", None)
    if code is None:
        return repr(fn)
    return f"{code.co_filename}:{code.co_firstlineno}"


# -- regions ------------------------------------------------------------------------------------


@dataclass(eq=False)
class Region:
    """A traced function: ops of the graph that read only the region's parameters (and the
    variables the function assigns). ``params`` are the arguments, then one per capture."""

    name: str
    params: tuple[Tensor, ...]
    arguments: int
    results: tuple[Tensor, ...]
    captures: tuple[Tensor, ...]          # the outside tensor each capture parameter stands for
    state_ops: tuple[Operation, ...]      # assignments the function made: they run with the region
    operations: tuple[Operation, ...]     # every op of the region, in creation order
    location: str                         # where the traced function is defined
    structure: Any = field(default=None)  # how the results were nested
    # A cond branch (it runs at most once per step): its random ops draw with the step's count,
    # as the ops outside do. A loop's regions advance the count at every iteration instead, so
    # that each iteration draws new numbers.
    runs_once: bool = False

    def __repr__(self) -> str:
        return f"<Region {self.name!r} of {len(self.operations)} ops, {len(self.captures)} captures>"


@contextlib.contextmanager
def _region_scope(graph: Graph, name: str) -> Iterator[None]:
    """Build inside a region: no control dependencies from the code around it (the construct's
    op gets those), in the name scope ``name``."""
    saved = graph._control_stack
    graph._control_stack = []
    graph.tracing += 1
    try:
        with graph.as_default(), graph.nested_scope(name):
            yield
    finally:
        graph._control_stack = saved
        graph.tracing -= 1


def _param(shape: tuple, dtype: np.dtype, name: str) -> Tensor:
    return apply(RegionParam, (), {"shape": tuple(shape), "dtype": dtypes.as_dtype(dtype)}, name)


def _is_variable(tensor: Tensor) -> bool:
    return tensor.op.opdef is VariableOp


def trace(graph: Graph, name: str, specs: Sequence[tuple[tuple, np.dtype]],
          function: Callable[[list[Tensor]], Any], location: str) -> Region:
    """Run ``function`` on parameters of the given (shape, dtype)s and make its region."""
    start = len(graph._operations)
    with _region_scope(graph, name):
        scratch = [_param(shape, dtype, f"arg{i}") for i, (shape, dtype) in enumerate(specs)]
        structure = function(scratch)
        leaves, rebuild = flatten(structure)
        converted = []
        for leaf in leaves:
            if leaf is None:
                raise TypeError(located(f"{name}: the function defined at {location} returned None where a "
                                        "tensor was expected"))
            if isinstance(leaf, Operation):   # TF1's `lambda: train_op` idiom
                raise TypeError(located(f"{name}: the function defined at {location} returned the operation "
                                        f"{leaf.name!r}, not a tensor; build the operation inside the function "
                                        "(its assignments run when the function does) and return a tensor, "
                                        "e.g. cc.constant(True)"))
            converted.append(convert_to_tensor(leaf))
    # What the function built itself: not a region's copy, nor what a construct inside it traced
    # (those ops run only through that construct's regions), nor the graph's own state it made on
    # first use (in init_scope: the random ops' counter, an optimizer's slots).
    built = [op for op in graph._operations[start:]
             if op.region is None and op.traced_in is None and not op.graph_level]
    state = [op for op in built if op.opdef.kind == "state"]
    scratch_ops = {t.op for t in scratch}

    # What the function built that its results or assignments need, and what it read from outside.
    reached: set[Operation] = set()
    stack = [t.op for t in converted] + state
    while stack:
        op = stack.pop()
        if (op in reached or op.id < start or op in scratch_ops or op.opdef is VariableOp or op.region is not None
                or op.graph_level):
            continue
        reached.add(op)
        stack.extend(t.op for t in op.inputs)
        stack.extend(c for c in op.control_inputs)
    # The variables the function assigns, in nested constructs too: what it reads of them is read
    # as it is at that point, not captured once when the construct starts.
    assigned = {op.inputs[0].op for op in reached if op.opdef.kind == "state"}
    for op in reached:
        if op.opdef.kind == "control":
            assigned |= assigned_variables(op)
    captures: list[Tensor] = []

    def outside(tensor: Tensor) -> bool:
        if tensor.op in scratch_ops:
            return False
        if _is_variable(tensor):
            return tensor.op not in assigned
        return tensor.op.id < start or tensor.op.graph_level

    for op in sorted(reached, key=lambda o: o.id):
        for index, tensor in enumerate(op.inputs):
            if op.opdef.kind == "state" and index == 0:
                continue  # the assigned variable itself
            if outside(tensor) and tensor not in captures:
                captures.append(tensor)
    for tensor in converted:
        if outside(tensor) and tensor not in captures:
            captures.append(tensor)

    first = len(graph._operations)
    with _region_scope(graph, name):
        params = [_param(shape, dtype, f"arg{i}") for i, (shape, dtype) in enumerate(specs)]
        params += [_param(t.shape, t.dtype, f"capture{i}") for i, t in enumerate(captures)]
        mapping: dict[Tensor, Tensor] = dict(zip(scratch, params))
        mapping.update(zip(captures, params[len(specs):]))
        copied = clone_operations(graph, sorted(reached, key=lambda o: o.id), mapping)
        results = [mapping.get(t, t) for t in converted]
    operations = tuple(op for op in graph._operations[first:] if op.region is None)
    region = Region(name, tuple(params), len(specs), tuple(results), tuple(captures),
                    tuple(copied[op] for op in state), operations, location)
    region.structure = (structure, rebuild)
    for op in operations:
        op.region = region
    # The traced originals (what the function built, but the variables it made: optimizer slots
    # are the graph's): computed only through the region's copy, when the region runs.
    for op in built:
        if op.opdef is not VariableOp:
            op.traced_in = region
    for op in scratch_ops:
        op.traced_in = region
    return region


def clone_operations(graph: Graph, operations: Sequence[Operation], mapping: dict[Tensor, Tensor],
                     kept: dict[Tensor, Tensor] | None = None) -> dict[Operation, Operation]:
    """Copy ``operations`` (in creation order) into the graph, each reading ``mapping[t]`` for an
    input ``t`` that has one (and adding the copies' outputs to ``mapping``). A copied branch or
    loop keeps its regions and gets its own gradient record. What reads a tensor ``t`` in ``kept``
    reads ``kept[t]`` instead, with the gradient of ``t``'s copy (``SavedValue``)."""
    copies: dict[Operation, Operation] = {}
    for op in operations:
        attrs = dict(op.attrs)
        if op.opdef is While:
            attrs["history"] = set(attrs["history"])
            attrs["saved"] = list(attrs["saved"])
        inputs = [mapping.get(t, t) for t in op.inputs]
        if op.opdef.kind == "state" and _is_variable(inputs[0]) is False:
            raise AssertionError("an assignment's target must stay a variable")
        copy = graph.add_operation(op.opdef, inputs, attrs, [(t.shape, t.dtype) for t in op.outputs],
                                   op.name.rpartition("/")[2], op.location)
        copy.control_inputs = tuple(copies[c] for c in op.control_inputs if c in copies)
        copy.gradient_override = op.gradient_override
        copy.gradient_of = op.gradient_of
        copies[op] = copy
        mapping.update(zip(op.outputs, copy.outputs))
        for tensor, copied in zip(op.outputs, copy.outputs):   # hooks registered inside the function
            for hook in graph.gradient_hooks(tensor):
                graph.add_gradient_hook(copied, hook)
        for tensor, copied in zip(op.outputs, copy.outputs):
            if kept is not None and tensor in kept:
                mapping[tensor] = SavedValue(kept[tensor], copied)
    records = graph.get_collection(CUSTOM_GRADIENT_CALLS)
    for record in records:   # a custom_gradient call whose boundary was copied gets its own record
        if isinstance(record, CustomGradientCall) and all(op in copies for op in record.boundary_ops):
            closure = {**mapping, **{t: mapping.get(c, c) for t, c in (record.closure or {}).items()}}
            graph.add_to_collection(CUSTOM_GRADIENT_CALLS, dataclasses.replace(
                record, inputs=tuple(mapping.get(t, t) for t in record.inputs),
                variables=tuple(mapping.get(t, t) for t in record.variables),
                outputs=tuple(mapping[t] for t in record.outputs), closure=closure))
    calls = {id(call.op): call for call in records if isinstance(call, ControlFlowCall)}
    for op, copy in copies.items():
        call = calls.get(id(op))
        if call is not None:
            outputs = [mapping[t] for t in call.outputs if t in mapping]
            copied_call = _register(copy, outputs, call.function_name, call.location)
            if "call" in copy.attrs:
                copy.attrs["call"] = copied_call
    return copies


def _draws_again_differently(construct: Operation, runs_once: bool) -> bool:
    """Whether running a copy of ``construct`` (a nested ``Cond`` or ``While``) in a gradient draws
    other random numbers than the original did. Random ops read the graph's run counter: a cond
    branch run once per step reads the step's count again and draws the same numbers, but a loop
    advances the count at every iteration, so a loop's copy (or anything nested in a loop
    iteration, whose count the gradient's loop does not reproduce) draws others."""
    if not runs_once or construct.opdef is While:
        return draws(construct)
    return any(op.opdef.kind == "control" and _draws_again_differently(op, True)
               for region in regions_of(construct) for op in region.operations)


def inline(region: Region, arguments: Sequence[Tensor], capture_values: Sequence[Tensor],
           kept: dict[Tensor, Tensor] | None = None) -> list[Tensor]:
    """The region's results computed again at this point of the graph (for its gradient), from
    ``arguments`` and the captured values; values in ``kept`` are read from there (see
    ``clone_operations``). Only what the results need is copied: the region's assignments were
    made when it ran and are not made again. A result that reads a variable the region assigns
    would read its value after the construct, not the one the region saw: that is an error."""
    mapping = dict(zip(region.params, list(arguments) + list(capture_values)))
    graph = region.params[0].graph if region.params else get_default_graph()
    members = set(region.operations)
    assigned = {state.inputs[0].op for state in region.state_ops}
    needed: set[Operation] = set()
    stack = [t.op for t in region.results]
    drawn = {op for op in members if op.type in RANDOM_OP_TYPES and kept and op.outputs[0] in kept}
    while stack:
        op = stack.pop()
        if op in needed or op not in members or op.opdef is RegionParam:
            continue
        if op in drawn:     # the forward iteration's numbers, read from their stack
            mapping[op.outputs[0]] = kept[op.outputs[0]]
            continue
        needed.add(op)
        if op.opdef.kind == "state":
            raise NoGradientError(located(
                f"gradients: the {region.name.rpartition('/')[2]} function defined at {region.location} uses the "
                f"value of the assignment {op.describe()} (at {op.location}); its gradient would make the assignment "
                f"again. Use the "
                f"value assigned (e.g. v + 1.0) instead of the assignment's result"))
        for tensor in op.inputs:
            if tensor.op in assigned:
                raise NoGradientError(located(
                    f"gradients: {op.describe()} (at {op.location}) in the {region.name.rpartition('/')[2]} function "
                    f"defined at {region.location} reads variable {tensor.op.name!r}, which that function also assigns; its "
                    f"gradient would need the value it read, which is not kept. Read the variable before the "
                    f"construct (or carry it as a loop variable) and assign it after"))
            stack.append(tensor.op)
    for op in needed:
        if op.opdef.kind == "control" and _draws_again_differently(op, region.runs_once):
            raise NoGradientError(located(
                f"gradients: the {region.name.rpartition('/')[2]} function defined at {region.location} holds "
                f"{op.describe()} (at {op.location}), which draws random numbers "
                f"{'in a loop' if region.runs_once else 'in each iteration'}; its gradient would run it again and "
                f"draw other numbers than the forward pass used, so it would be wrong. Draw the numbers in the "
                f"enclosing function instead (for dropout with a tensor switch: where(training, "
                f"nn.dropout(x, rate), x), as layers.dropout does), or stop the gradient at the construct"))
        if op.opdef.kind == "control" and assigned_variables(op):
            raise NoGradientError(located(
                f"gradients: {op.describe()} nested in the function defined at {region.location} assigns "
                f"variables; taking the gradient of the construct around it would assign them again. Move the "
                f"assignments out of the nested construct"))
    clone_operations(graph, [op for op in region.operations if op in needed], mapping, kept)
    return [mapping.get(t, t) for t in region.results]


# -- gradients ----------------------------------------------------------------------------------


@dataclass(eq=False)
class ControlFlowCall:
    """What ``gradients`` needs of one ``cond`` or ``while_loop``: like a ``custom_gradient`` call,
    several outputs whose gradients it takes together."""

    op: Operation
    output_list: list[Tensor]
    function_name: str
    location: SourceLocation

    @property
    def outputs(self) -> tuple[Tensor, ...]:
        return tuple(self.output_list)

    @property
    def boundary_ops(self) -> tuple[Operation, ...]:
        return tuple(out.op for out in self.output_list)

    @property
    def differentiable_inputs(self) -> tuple[Tensor, ...]:
        return self.op.inputs

    def input_gradients(self, output_grads: Sequence[Tensor | None]) -> list[Tensor | None]:
        if all(g is None for g in output_grads) or self.op.attrs.get("back_prop") is False:
            return [None] * len(self.op.inputs)
        if self.op.opdef is Cond:
            return _cond_gradients(self, list(output_grads))
        return _while_gradients(self, list(output_grads))


def _register(op: Operation, outputs: list[Tensor], name: str, location: SourceLocation) -> ControlFlowCall:
    call = ControlFlowCall(op, list(outputs), name, location)
    op.graph.add_to_collection(CUSTOM_GRADIENT_CALLS, call)
    return call


def _differentiable(tensor: Tensor) -> bool:
    return dtypes.is_differentiable(tensor.dtype)


def _gradients_or_zeros(ys: Sequence[Tensor], xs: Sequence[Tensor], grad_ys: Sequence[Tensor]) -> list[Tensor]:
    from .autodiff import gradients
    if not ys or not xs:
        return [zeros_like(x) for x in xs]
    grads = gradients(list(ys), list(xs), grad_ys=list(grad_ys))
    return [zeros_like(x) if g is None else g for x, g in zip(xs, grads)]


def _by_index(call: ControlFlowCall, output_grads: Sequence[Tensor | None], history: bool) -> dict[int, Tensor]:
    """The gradients that reached the construct's values (or, with ``history``, a loop's stacks),
    by the index of the value: values nothing used have no output tensor and no gradient."""
    return {out.op.attrs["index"]: grad for out, grad in zip(call.outputs, output_grads)
            if grad is not None and bool(out.op.attrs.get("history")) == history
            and not out.op.attrs.get("saved")}


def _params_reaching(region: Region, results: Sequence[int]) -> set[int]:
    """The positions of the region's parameters that the given results depend on (through
    nested constructs: on all their operands)."""
    position = {param: k for k, param in enumerate(region.params)}
    members = set(region.operations)
    found: set[int] = set()
    seen: set[Operation] = set()
    stack = [region.results[k] for k in results]
    while stack:
        tensor = stack.pop()
        if tensor in position:
            found.add(position[tensor])
        elif tensor.op in members and tensor.op not in seen:
            seen.add(tensor.op)
            stack.extend(tensor.op.inputs)
    return found


def _cond_gradients(call: ControlFlowCall, output_grads: list[Tensor | None]) -> list[Tensor | None]:
    op = call.op
    pred, operands = op.inputs[0], list(op.inputs[1:])
    results_like = op.attrs["branches"][1].results
    wanted = [k for k, t in enumerate(results_like) if _differentiable(t)]
    reached = _by_index(call, output_grads, history=False)
    # The operands that a result with a gradient depends on, in either branch: the others have none.
    connected = {op.attrs["operands_of"][which][k] for which in (0, 1)
                 for k in _params_reaching(op.attrs["branches"][which], sorted(reached))}
    targets = [j for j, t in enumerate(operands) if _differentiable(t) and j in connected]
    if not targets:
        return [None] * len(op.inputs)

    def branch(which: int) -> Callable[[], list[Tensor]]:
        region = op.attrs["branches"][which]

        def gradient() -> list[Tensor]:
            local = {j: identity(operands[j]) for j in set(op.attrs["operands_of"][which]) | set(targets)}
            results = inline(region, [], [local[j] for j in op.attrs["operands_of"][which]])
            grads = [reached[k] if k in reached else zeros_like(results[k]) for k in wanted]
            return _gradients_or_zeros([results[k] for k in wanted], [local[j] for j in targets], grads)
        return gradient

    input_grads = cond(pred, branch(1), branch(0), strict=True, name=f"{op.name.rpartition('/')[2]}_grad")
    result: list[Tensor | None] = [None] * len(op.inputs)
    for j, grad in zip(targets, input_grads if isinstance(input_grads, list) else [input_grads]):
        result[1 + j] = grad
    return result


def _stack(call: ControlFlowCall, kind: str, index: int, row_shape: tuple, dtype: np.dtype) -> Tensor:
    """The loop's stack of kind "history" or "saved" number ``index`` (``maximum_iterations`` rows
    of ``row_shape``, or as many as the loop ran), made on first use."""
    for out in call.outputs:
        if out.op.attrs.get(kind) and out.op.attrs["index"] == index:
            return out
    op = call.op
    with op.graph.as_default(), op.graph.nested_scope(op.name.rpartition("/")[2] + f"_{kind}"):
        out = apply(RegionOutput, [op.outputs[0]], {"index": index, "dtype": dtype, kind: True,
                                                    "shape": (op.attrs["maximum_iterations"],) + tuple(row_shape)},
                    f"{kind}{index}")
    call.output_list.append(out)
    return out


def _history(call: ControlFlowCall, index: int) -> Tensor:
    """The stack of loop variable ``index`` at the start of every iteration (the loop keeps it
    from now on)."""
    call.op.attrs["history"].add(index)
    param = call.op.attrs["body"].params[index]
    return _stack(call, "history", index, param.shape, param.dtype)


def _saved(call: ControlFlowCall, tensor: Tensor) -> Tensor:
    """The stack of the body's value ``tensor`` in every iteration (the loop keeps it from now on)."""
    saved = call.op.attrs["saved"]
    if tensor not in saved:
        saved.append(tensor)
    return _stack(call, "saved", saved.index(tensor), tensor.shape, tensor.dtype)


def _kept_values(body: Region) -> list[Tensor]:
    """What the backward pass reads from the forward loop instead of computing it again: the
    body's matrix products (the costly part of an RNN cell; their gradients need only their
    inputs, which are recomputed cheaply or are loop variables) and its random numbers (drawn
    again, they would differ: each iteration advances the count)."""
    return [op.outputs[0] for op in body.operations
            if (op.type == "MatMul" or op.type in RANDOM_OP_TYPES) and _differentiable(op.outputs[0])]


def _while_gradients(call: ControlFlowCall, output_grads: list[Tensor | None]) -> list[Tensor | None]:
    op = call.op
    count, sliced = op.attrs["variables"], op.attrs["sliced"]
    limit = op.attrs["maximum_iterations"]
    body: Region = op.attrs["body"]
    captured = [op.inputs[j] for j in op.attrs["captures_of"][1]]
    initial = list(op.inputs[:count])
    elements = list(op.inputs[count:count + sliced])
    first_row, row_step = op.attrs["rows"]
    reached = _by_index(call, output_grads, history=False)
    history_grads = _by_index(call, output_grads, history=True)
    # The loop variables whose gradient is not zero in some iteration: those that got one, and
    # (iteration by iteration) those they depend on; then the rows and captures those read.
    depends = [_params_reaching(body, [k]) for k in range(count)]
    carried = set(reached) | set(history_grads)
    read = set().union(*(depends[k] for k in carried))
    while not read.isdisjoint(set(range(count)) - carried):
        carried |= read & set(range(count))
        read = set().union(*(depends[k] for k in carried))
    wanted = [k for k in range(count) if _differentiable(initial[k]) and k in carried]
    # A loop variable whose shape shape_invariants relaxes is differentiated as long as its shape
    # stays as it is: the compiled targets require it, and the reference target checks it.
    row_targets = [r for r in range(sliced) if _differentiable(elements[r]) and count + r in read]
    targets = [j for j, t in enumerate(captured) if _differentiable(t) and count + sliced + j in read]
    if not (wanted or row_targets or targets):
        return [None] * len(op.inputs)
    histories = [_history(call, k) for k in range(count)]
    kept_stacks = {tensor: _saved(call, tensor) for tensor in _kept_values(body)}
    trips = op.outputs[0]
    final_grads = [reached[k] if k in reached else zeros_like(initial[k]) for k in wanted]
    row_grads = [zeros_like(elements[r][0]) for r in row_targets]
    capture_grads = [zeros_like(captured[j]) for j in targets]

    def condition(step: Tensor, *_: Any) -> Tensor:
        return less(step, trips)

    def backward(step: Tensor, variable_grads: list[Tensor], _: list[Tensor], accumulated: list[Tensor]) -> Any:
        at = trips - 1 - step
        read = gather if limit is not None else StackRead   # a grown stack has no static length
        # Copies: ``gradients`` below starts from them, not from the reads of the stacks.
        values = [identity(read(history, at)) for history in histories]
        row = at * np.int64(row_step) + np.int64(first_row)
        rows = [gather(element, row) for element in elements]
        # Fresh copies of the captured values: differentiating with respect to them must not walk
        # back into the forward loop, which reads the same tensors.
        local = [identity(t) for t in captured]
        kept = {tensor: read(stack, at) for tensor, stack in kept_stacks.items()}
        results = inline(body, values + rows, local, kept)
        grads = _gradients_or_zeros([results[k] for k in wanted],
                                    [values[k] for k in wanted] + [rows[r] for r in row_targets]
                                    + [local[j] for j in targets], variable_grads)
        new_variable_grads = grads[:len(wanted)]
        for position, k in enumerate(wanted):
            if k in history_grads:
                new_variable_grads[position] = new_variable_grads[position] + gather(history_grads[k], at)
        this_rows = grads[len(wanted):len(wanted) + len(row_targets)]
        new_accumulated = [a + g for a, g in zip(accumulated, grads[len(wanted) + len(row_targets):])]
        return step + 1, new_variable_grads, this_rows, new_accumulated

    # Rows of the stacks past the trip count hold zeros that depend on nothing: their gradient is
    # dropped, as the backward loop visits only the iterations that ran.
    start = constant(np.int64(0))
    _, initial_grads, last_rows, total_capture_grads = while_loop(
        condition, backward, (start, final_grads, row_grads, capture_grads), maximum_iterations=limit,
        name=f"{op.name.rpartition('/')[2]}_grad")
    result: list[Tensor | None] = [None] * len(op.inputs)
    for k, grad in zip(wanted, initial_grads):
        result[k] = grad
    if row_targets:
        # The gradient of each element row the loop read, one per backward iteration (each one
        # loop variable of the backward loop, stacked like scan's outputs); the loop ran ``limit``
        # times (only scan slices rows, and its condition is always true).
        backward_call = last_rows[0].op.inputs[0].op.attrs["call"]
        for position, (r, last) in enumerate(zip(row_targets, last_rows)):
            per_step = _stacked_steps(_history(backward_call, 1 + len(wanted) + position), last, limit)
            # Backward step s handled iteration limit - 1 - s, which read row first + step * that.
            ordered = reverse_rows(per_step) if row_step > 0 else per_step
            low = first_row if row_step > 0 else first_row - (limit - 1)
            length = elements[r].shape[0]
            padding = [[low, length - low - limit]] + [[0, 0]] * (len(elements[r].shape) - 1)
            result[count + r] = pad(ordered, padding) if low or length - low - limit else ordered
    for j, grad in zip(targets, total_capture_grads):
        index = op.attrs["captures_of"][1][j]
        result[index] = grad if result[index] is None else result[index] + grad
    return result


# -- the constructs ---------------------------------------------------------------------------


def _operand_index(operands: list[Tensor], tensor: Tensor) -> int:
    for index, present in enumerate(operands):
        if present is tensor:
            return index
    operands.append(tensor)
    return len(operands) - 1


def _merged_shape(a: tuple, b: tuple) -> tuple | None:
    if len(a) != len(b):
        return None
    if any(x is not None and y is not None and x != y for x, y in zip(a, b)):
        return None
    return tuple(x if x == y else None for x, y in zip(a, b))


def cond(pred: Any, true_fn: Callable[[], Any], false_fn: Callable[[], Any], strict: bool = False,
         name: str | None = None) -> Any:
    """``true_fn()`` if the scalar bool ``pred`` holds, else ``false_fn()`` (TF1's ``tf.cond``).
    As in TF1, a list or tuple of one result gives that one tensor unless ``strict``.

    Both functions are traced once, when ``cond`` is called; only the branch taken runs in the
    compiled step, and an assignment in the other branch does not happen. Their results must have
    the same structure (nested tuples, lists, dicts of tensors) and dtypes, and shapes that agree
    once the fed shapes are known. The gradient flows into the branch that ran.

    >>> import numpy as np
    >>> import compiler as cc
    >>> from runtime import Session
    >>> x = cc.placeholder("float64", shape=(), name="x")
    >>> y = cc.cond(x > 0.0, lambda: x * x, lambda: -x)
    >>> (dy,) = cc.gradients(y, [x])
    >>> with Session() as sess:
    ...     print(sess.run([y, dy], {x: 3.0}), sess.run([y, dy], {x: -2.0}))
    [array(9.), array(6.)] [array(2.), array(-1.)]
    """
    location = user_location()
    for label, fn in (("true_fn", true_fn), ("false_fn", false_fn)):
        if not callable(fn):
            raise TypeError(located(f"cond: {label} must be callable, got {fn!r}", location))
    pred = convert_to_tensor(pred)
    if pred.dtype != dtypes.bool_:
        raise DTypeError(located(f"cond: the predicate {pred.name!r} must be bool, got {pred.dtype.name}", location))
    if pred.shape != ():
        raise ShapeError(located(f"cond: the predicate {pred.name!r} must be a scalar, got shape "
                                 f"{format_shape(pred.shape)}", location))
    graph = pred.graph
    scope = name or "cond"
    with graph.as_default(), graph.nested_scope(scope):
        # true_fn first, as TF1 builds them: a layer made in it can be reused in false_fn.
        true_region, false_region = [trace(graph, label, [], lambda params, fn=fn: fn(), function_location(fn))
                                     for label, fn in (("true", true_fn), ("false", false_fn))]
    false_region.runs_once = true_region.runs_once = True
    false_structure, true_structure = false_region.structure[0], true_region.structure[0]
    where_true, where_false = function_location(true_fn), function_location(false_fn)
    if not _same_structure(true_structure, false_structure):
        raise ValueError(located(
            f"cond: the branches return different structures: true_fn (defined at {where_true}) returns "
            f"{_describe_structure(true_structure)}, false_fn (defined at {where_false}) returns "
            f"{_describe_structure(false_structure)}", location))
    shapes = []
    for k, (t, f) in enumerate(zip(true_region.results, false_region.results)):
        if t.dtype != f.dtype:
            raise DTypeError(located(
                f"cond: output {k} has dtype {t.dtype.name} in true_fn (defined at {where_true}) but "
                f"{f.dtype.name} in false_fn (defined at {where_false})", location))
        merged = _merged_shape(t.shape, f.shape)
        if merged is None:
            raise ShapeError(located(
                f"cond: output {k} has shape {format_shape(t.shape)} in true_fn (defined at {where_true}) "
                f"but {format_shape(f.shape)} in false_fn (defined at {where_false})", location))
        shapes.append(merged)
    operands: list[Tensor] = []
    operands_of = tuple(tuple(_operand_index(operands, t) for t in region.captures)
                        for region in (false_region, true_region))
    with graph.as_default():
        token = apply(Cond, [pred] + operands, {"branches": (false_region, true_region), "operands_of": operands_of},
                      scope)
        with graph.nested_scope(token.op.name.rpartition("/")[2]):
            outputs = [apply(RegionOutput, [token], {"index": k, "shape": shape, "dtype": t.dtype},
                             f"output{k}") for k, (t, shape) in enumerate(zip(true_region.results, shapes))]
    _register(token.op, outputs, scope, location)
    result = true_region.structure[1](outputs)
    if not strict and isinstance(result, (list, tuple)) and len(result) == 1:
        return result[0]
    return result


def _callable_or_error(function: str, label: str, fn: Any, location: SourceLocation) -> Callable[[], Any]:
    if not callable(fn):
        raise TypeError(located(f"{function}: {label} must be callable, got {fn!r}", location))
    return fn


def _chain(function: str, tests: Sequence[Callable[[], Tensor]], fns: Sequence[Callable[[], Any]],
           default: Callable[[], Any], checks: Sequence[Operation], location: SourceLocation) -> Any:
    """``fns[k]()`` for the first ``tests[k]()`` that holds, else ``default()``: nested conds, each
    built in the branch not taken by the one before. The results come after ``checks``."""
    def step(position: int) -> Any:
        if position == len(fns):
            return default()
        later = lambda: step(position + 1)   # noqa: E731
        later.__graphgrad_location__ = f"{location}, {function}'s branches after the {position + 1} first"   # type: ignore[attr-defined]
        return cond(tests[position](), fns[position], later, strict=True, name=function)
    result = step(0)
    if not checks:
        return result
    leaves, rebuild = flatten(result)
    with get_default_graph().control_dependencies(list(checks)):
        return rebuild([identity(leaf) for leaf in leaves])


def _predicate_count(predicates: Sequence[Tensor]) -> Tensor:
    counts = [cast(predicate, dtypes.int32) for predicate in predicates]
    return functools.reduce(lambda total, count: total + count, counts)


def case(pred_fn_pairs: Any, default: Callable[[], Any] | None = None, exclusive: bool = False,
         strict: bool = False, name: str = "case") -> Any:
    """The function of the first pair whose predicate holds, else ``default()`` (TF1's
    ``tf.case``): ``pred_fn_pairs`` is a list of ``(scalar bool, callable)`` pairs, or a dict in
    its order. Without ``default`` the last pair's function is the default, and a run in which no
    predicate holds raises ``InvalidArgumentError``; with ``exclusive`` a run in which more than
    one holds raises it too. Nested ``cond``s: differentiable, and only the chosen function runs.
    As with ``cond``, a list or tuple of one result gives that tensor unless ``strict``.

    >>> import numpy as np, compiler as cc
    >>> from runtime import Session
    >>> x = cc.placeholder("float32", (), name="x")
    >>> y = cc.case([(x < 0.0, lambda: -x), (x < 1.0, lambda: x * x)], default=lambda: 2.0 * x - 1.0)
    >>> with Session() as sess:
    ...     print([float(sess.run(y, {x: v})) for v in (-2.0, 0.5, 3.0)])
    [2.0, 0.25, 5.0]
    """
    location = user_location()
    items = list(pred_fn_pairs.items()) if isinstance(pred_fn_pairs, dict) else pred_fn_pairs
    if not isinstance(items, (list, tuple)):
        raise TypeError(located("case: pred_fn_pairs must be a list of (predicate, callable) pairs or a dict, got "
                                f"{type(pred_fn_pairs).__name__}", location))
    predicates, fns = [], []
    for k, pair in enumerate(items):
        if not isinstance(pair, (list, tuple)) or len(pair) != 2:
            raise TypeError(located(f"case: pred_fn_pairs[{k}] must be a (predicate, callable) pair, got {pair!r}",
                                    location))
        predicate = convert_to_tensor(pair[0])
        if predicate.dtype != dtypes.bool_ or predicate.shape != ():
            raise TypeError(located(f"case: the predicate of pair {k}, {predicate.name!r}, must be a scalar bool, got "
                                    f"{predicate.dtype.name} of shape {format_shape(predicate.shape)}", location))
        predicates.append(predicate)
        fns.append(_callable_or_error("case", f"the function of pair {k}", pair[1], location))
    if default is None and not fns:
        raise ValueError(located("case: pred_fn_pairs is empty and there is no default", location))
    graph = get_default_graph()
    checks = []
    with graph.as_default(), graph.name_scope(name):
        if default is None or exclusive:
            count = _predicate_count(predicates) if predicates else None
        if default is None:
            checks.append(Assert(count >= 1, [f"case: none of the predicates holds and there is no default "
                                              f"(case at {location})"], name="none_holds"))
        if exclusive and len(predicates) > 1:
            checks.append(Assert(count <= 1, [f"case: more than one predicate holds with exclusive=True "
                                              f"(case at {location})"], name="exclusive"))
    if default is None:
        predicates, default = predicates[:-1], fns.pop()
    default = _callable_or_error("case", "default", default, location)
    tests = [lambda predicate=predicate: predicate for predicate in predicates]
    result = _chain(name, tests, fns, default, checks, location)
    if not strict and isinstance(result, (list, tuple)) and len(result) == 1:
        return result[0]
    return result


def switch_case(branch_index: Any, branch_fns: Any, default: Callable[[], Any] | None = None,
                name: str = "switch_case") -> Any:
    """``branch_fns[branch_index]()`` (TF1's ``tf.switch_case``): ``branch_fns`` is a list of
    callables, a list of ``(index, callable)`` pairs or a dict, with the indices 0 to N - 1. An
    index outside them runs ``default``, or without one the last branch. Nested ``cond``s:
    differentiable, and only the chosen branch runs.

    >>> import numpy as np, compiler as cc
    >>> from runtime import Session
    >>> k = cc.placeholder("int32", (), name="k")
    >>> y = cc.switch_case(k, [lambda: cc.constant(10.0), lambda: cc.constant(20.0)], default=lambda: cc.constant(-1.0))
    >>> with Session() as sess:
    ...     print([float(sess.run(y, {k: v})) for v in (0, 1, 7)])
    [10.0, 20.0, -1.0]
    """
    location = user_location()
    index = convert_to_tensor(branch_index)
    if not dtypes.is_integer(index.dtype) or index.shape != ():
        raise TypeError(located(f"switch_case: branch_index {index.name!r} must be an integer scalar, got "
                                f"{index.dtype.name} of shape {format_shape(index.shape)}", location))
    if isinstance(branch_fns, dict):
        pairs = list(branch_fns.items())
    elif isinstance(branch_fns, (list, tuple)) and all(callable(fn) for fn in branch_fns):
        pairs = list(enumerate(branch_fns))
    elif isinstance(branch_fns, (list, tuple)) and all(isinstance(p, (list, tuple)) and len(p) == 2
                                                        for p in branch_fns):
        pairs = [tuple(p) for p in branch_fns]
    else:
        raise TypeError(located("switch_case: branch_fns must be a list of callables, a list of (index, callable) "
                                f"pairs or a dict, got {branch_fns!r}", location))
    if not pairs:
        raise ValueError(located("switch_case: branch_fns is empty", location))
    if not all(isinstance(key, (int, np.integer)) and not isinstance(key, (bool, np.bool_)) for key, _ in pairs):
        raise TypeError(located(f"switch_case: the branch indices must be ints, got {[key for key, _ in pairs]}",
                                location))
    pairs.sort(key=lambda pair: int(pair[0]))
    if [int(key) for key, _ in pairs] != list(range(len(pairs))):
        raise ValueError(located(f"switch_case: the branch indices must be 0 to {len(pairs) - 1}, each once, got "
                                 f"{[int(key) for key, _ in pairs]}", location))
    fns = [_callable_or_error("switch_case", f"branch {key}", fn, location) for key, fn in pairs]
    if default is None:
        default = fns.pop()
    default = _callable_or_error("switch_case", "default", default, location)
    with index.graph.as_default():
        tests = [lambda key=key: equal(index, cast(key, index.dtype)) for key in range(len(fns))]
        return _chain(name, tests, fns, default, [], location)


def _checked_limit(maximum_iterations: Any, location: SourceLocation) -> int | None:
    if maximum_iterations is None:
        return None
    if isinstance(maximum_iterations, Tensor):
        raise TypeError(located("while_loop: maximum_iterations must be a Python int (it sizes the values "
                                f"kept for gradients), got the tensor {maximum_iterations.name!r}; leave it "
                                "out to let the loop run until cond fails", location))
    if isinstance(maximum_iterations, (bool, np.bool_)) or not isinstance(maximum_iterations, (int, np.integer)):
        raise TypeError(located(f"while_loop: maximum_iterations must be a Python int, got {maximum_iterations!r}",
                                location))
    if maximum_iterations < 0:
        raise ValueError(located(f"while_loop: maximum_iterations must be >= 0, got {maximum_iterations}", location))
    return int(maximum_iterations)


def _shapes_like(shapes: Any, structure: Any) -> list[tuple] | None:
    """The shapes in ``shapes`` at the places of the leaves of ``structure`` (None if they do not
    line up). A shape is a tuple or list of ints and None."""
    if isinstance(structure, dict):
        if not isinstance(shapes, dict) or sorted(shapes) != sorted(structure):
            return None
        parts = [_shapes_like(shapes[k], structure[k]) for k in sorted(structure)]
    elif isinstance(structure, (list, tuple)):
        if not isinstance(shapes, (list, tuple)) or len(shapes) != len(structure):
            return None
        parts = [_shapes_like(s, item) for s, item in zip(shapes, structure)]
    else:
        if isinstance(shapes, (list, tuple)) and all(d is None or isinstance(d, (int, np.integer)) for d in shapes):
            return [tuple(None if d is None else int(d) for d in shapes)]
        return None
    if any(part is None for part in parts):
        return None
    return [shape for part in parts for shape in part]  # type: ignore[union-attr]


def _invariant_fits(invariant: tuple, shape: tuple) -> bool:
    return len(invariant) == len(shape) and all(i is None or i == s for i, s in zip(invariant, shape))


def while_loop(cond: Callable[..., Any], body: Callable[..., Any], loop_vars: Any, shape_invariants: Any = None,
               parallel_iterations: int = 10, back_prop: bool = True, swap_memory: bool = False,
               name: str | None = None, maximum_iterations: int | None = None,
               return_same_structure: bool = False) -> Any:
    """Repeat ``loop_vars = body(*loop_vars)`` while ``cond(*loop_vars)`` holds (TF1's
    ``tf.while_loop``); returns the final ``loop_vars``, in their structure, except that (as in
    TF1) a list or tuple of one loop variable gives that one tensor unless
    ``return_same_structure``; its body may return the tensor alone or in a list.

    ``loop_vars`` is a tensor or a nested tuple/list/dict of tensors (Python numbers become
    constants). Each loop variable keeps its dtype and shape from one iteration to the next; a
    ``shape_invariants`` entry (same structure) may relax a dimension to None. ``cond`` returns a
    scalar bool. ``maximum_iterations`` (a Python int) stops the loop after that many iterations.
    Gradients flow through the loop either way (without a bound, the values the backward pass
    needs are kept in memory that grows as the loop runs; second derivatives need the bound).
    An assignment in the body is seen by the next iteration. With ``back_prop=False`` no gradient
    flows through the loop (``gradients`` gives None for what reaches the result only through it)
    and it keeps nothing for one. ``parallel_iterations`` and ``swap_memory`` are accepted for TF1
    compatibility.

    >>> import numpy as np
    >>> import compiler as cc
    >>> from runtime import Session
    >>> x = cc.placeholder("float64", shape=(), name="x")
    >>> i, y = cc.while_loop(lambda i, y: y < 100.0, lambda i, y: (i + 1, y * x), (0, x),
    ...                      maximum_iterations=20)
    >>> (dy,) = cc.gradients(y, [x])
    >>> with Session() as sess:
    ...     print(sess.run([i, y, dy], {x: 3.0}))          # 3**5 = 243, d/dx x**5 = 5 x**4
    [array(4, dtype=int32), array(243.), array(405.)]
    """
    final = _loop(cond, body, loop_vars, shape_invariants, maximum_iterations, name, user_location(),
                  back_prop=back_prop)
    if isinstance(loop_vars, (list, tuple)) and len(loop_vars) == 1 and not return_same_structure:
        return final[0]
    return final


def _loop(cond: Callable[..., Any], body: Callable[..., Any], loop_vars: Any, shape_invariants: Any,
          maximum_iterations: int | None, name: str | None, location: SourceLocation,
          sliced: Sequence[Tensor] = (), rows: tuple[int, int] = (0, 1), back_prop: bool = True) -> Any:
    """``while_loop``. With ``sliced`` tensors (``scan``'s elements), iteration ``i`` also passes
    ``body`` a list of their rows ``rows[0] + rows[1] * i`` as a last argument."""
    for label, fn in (("cond", cond), ("body", body)):
        if not callable(fn):
            raise TypeError(located(f"while_loop: {label} must be callable, got {fn!r}", location))
    limit = _checked_limit(maximum_iterations, location)
    single = not isinstance(loop_vars, (list, tuple))     # one tensor or one dict: one argument
    leaves, rebuild = flatten(loop_vars)
    if not leaves:
        raise ValueError(located("while_loop: loop_vars is empty", location))
    graph = next((v.graph for v in leaves if isinstance(v, Tensor)), None) or get_default_graph()
    with graph.as_default():
        initial = [convert_to_tensor(v) for v in leaves]
    if shape_invariants is not None:
        invariants = _shapes_like(shape_invariants, loop_vars)
        if invariants is None:
            raise ValueError(located("while_loop: shape_invariants must have the structure of loop_vars, with "
                                     "a shape (a tuple of ints and None) for each tensor", location))
        for k, (tensor, invariant) in enumerate(zip(initial, invariants)):
            if not _invariant_fits(invariant, tensor.shape) and not (
                    len(invariant) == len(tensor.shape) and all(s is None for i, s in zip(invariant, tensor.shape)
                                                                if i is not None)):
                raise ShapeError(located(f"while_loop: the shape invariant {format_shape(invariant)} of loop "
                                         f"variable {k} does not fit its initial shape "
                                         f"{format_shape(tensor.shape)}", location))
    else:
        invariants = [tensor.shape for tensor in initial]
    specs = [(invariant, tensor.dtype) for invariant, tensor in zip(invariants, initial)]
    where_cond, where_body = function_location(cond), function_location(body)
    scope = name or "while"

    def call(fn: Callable[..., Any]) -> Callable[[list[Tensor]], Any]:
        def run(params: list[Tensor]) -> Any:
            packed = rebuild(params[:len(specs)])
            extra = [params[len(specs):]] if len(params) > len(specs) else []
            return fn(packed, *extra) if single else fn(*packed, *extra)
        return run

    row_specs = [(tuple(t.shape[1:]), t.dtype) for t in sliced]
    with graph.as_default(), graph.nested_scope(scope):
        condition = trace(graph, "cond", specs, call(cond), where_cond)
        loop_body = trace(graph, "body", specs + row_specs, call(body), where_body)
    (predicate,) = condition.results if len(condition.results) == 1 else (None,)
    if predicate is None or predicate.dtype != dtypes.bool_ or predicate.shape != ():
        got = ("a structure of " + str(len(condition.results)) + " tensors" if predicate is None
               else f"{predicate.dtype.name} of shape {format_shape(predicate.shape)}")
        raise TypeError(located(f"while_loop: cond (defined at {where_cond}) must return a scalar bool tensor, "
                                f"got {got}", location))
    returned = loop_body.structure[0]
    expected = loop_vars if not single else loop_vars
    if (single and isinstance(returned, (list, tuple)) and len(returned) == 1
            and not isinstance(returned[0], (list, tuple, dict))):
        pass  # a one-element tuple for one loop variable is fine
    elif (not single and len(loop_vars) == 1 and isinstance(returned, Tensor)
          and not isinstance(loop_vars[0], (list, tuple, dict))):
        pass  # so is one tensor for a list of one loop variable (TF1 wraps it)
    elif not _same_structure(returned, expected):
        raise ValueError(located(
            f"while_loop: body (defined at {where_body}) returns {_describe_structure(returned)} but loop_vars is "
            f"{_describe_structure(expected)}", location))
    if len(loop_body.results) != len(initial):
        raise ValueError(located(
            f"while_loop: body (defined at {where_body}) returns {len(loop_body.results)} tensors for "
            f"{len(initial)} loop variables", location))
    for k, (result, spec, tensor) in enumerate(zip(loop_body.results, specs, initial)):
        if result.dtype != tensor.dtype:
            raise DTypeError(located(
                f"while_loop: body (defined at {where_body}) changes loop variable {k} from {tensor.dtype.name} "
                f"to {result.dtype.name}", location))
        if not _invariant_fits(spec[0], result.shape):
            raise ShapeError(located(
                f"while_loop: body (defined at {where_body}) changes the shape of loop variable {k} from "
                f"{format_shape(spec[0])} to {format_shape(result.shape)}; shapes must stay the same from one "
                "iteration to the next (or pass shape_invariants with None for a dimension that changes)",
                location))
    operands = list(initial) + list(sliced)
    captures_of = tuple(tuple(_operand_index(operands, t) for t in region.captures)
                        for region in (condition, loop_body))
    with graph.as_default():
        token = apply(While, operands, {"condition": condition, "body": loop_body, "variables": len(initial),
                                        "sliced": len(sliced), "rows": rows, "captures_of": captures_of,
                                        "maximum_iterations": limit, "history": set(), "saved": [],
                                        "back_prop": bool(back_prop)}, scope)
        with graph.nested_scope(token.op.name.rpartition("/")[2]):
            outputs = [apply(RegionOutput, [token], {"index": k, "shape": spec[0], "dtype": spec[1]},
                             f"output{k}") for k, spec in enumerate(specs)]
    call_record = _register(token.op, outputs, scope, location)
    token.op.attrs["call"] = call_record
    return rebuild(outputs)


def fori_loop(lower: Any, upper: Any, body_fun: Callable[[Tensor, Any], Any], init_val: Any,
              name: str | None = None) -> Any:
    """``val = body_fun(i, val)`` for ``i`` from ``lower`` up to ``upper`` (excluded), as JAX's
    ``lax.fori_loop``; returns the final ``val`` (any nested structure of tensors). With Python int
    bounds the loop is differentiable (its trip count is known when the graph is built).

    >>> import numpy as np
    >>> import compiler as cc
    >>> from runtime import Session
    >>> x = cc.placeholder("float64", shape=(2,), name="x")
    >>> total = cc.fori_loop(0, 4, lambda i, acc: acc + cc.cast(i, "float64") * x, cc.zeros_like(x))
    >>> with Session() as sess:
    ...     print(sess.run(total, {x: np.array([1.0, 2.0])}))   # (0 + 1 + 2 + 3) * x
    [ 6. 12.]
    """
    static = all(isinstance(b, (int, np.integer)) and not isinstance(b, bool) for b in (lower, upper))
    limit = max(int(upper) - int(lower), 0) if static else None
    anchor = next((v for v in flatten(init_val)[0] if isinstance(v, Tensor)), None)
    graph = anchor.graph if anchor is not None else get_default_graph()
    with graph.as_default():
        # The counter's dtype: a tensor bound's (the wider of two, as JAX promotes), else int32.
        given = [b.dtype for b in (lower, upper) if isinstance(b, Tensor)]
        if any(not dtypes.is_integer(d) for d in given):
            raise DTypeError(located(f"fori_loop: the bounds must be integers, got {', '.join(d.name for d in given)}"))
        counter = np.result_type(*given) if given else np.dtype(np.int32)
        start, stop = (cast(b, counter) if isinstance(b, Tensor) else convert_to_tensor(np.array(b, dtype=counter))
                       for b in (lower, upper))
    location = user_location()
    if not callable(body_fun):
        raise TypeError(located(f"fori_loop: body_fun must be callable, got {body_fun!r}", location))

    def body(i: Tensor, val: Any) -> Any:
        new = body_fun(i, val)
        if not _same_structure(new, val):
            raise ValueError(located(
                f"fori_loop: body_fun (defined at {function_location(body_fun)}) returns "
                f"{_describe_structure(new)} but init_val is {_describe_structure(init_val)}", location))
        return i + 1, new
    body.__graphgrad_location__ = f"{function_location(body_fun)}, fori_loop's body_fun"  # type: ignore[attr-defined]
    _, result = while_loop(lambda i, val: less(i, stop), body,
                           (start, init_val), maximum_iterations=limit, name=name or "fori_loop")
    return result


def scan(fn: Callable[[Any, Any], Any], elems: Any, initializer: Any = None, parallel_iterations: int = 10,
         back_prop: bool = True, swap_memory: bool = False, infer_shape: bool = True, reverse: bool = False,
         name: str | None = None) -> Any:
    """TF1's ``tf.scan``: ``acc = fn(acc, elem)`` for each ``elem`` along the first dimension of
    ``elems`` (a tensor or nested structure of tensors of one length), returning every ``acc``
    stacked (the structure of ``initializer``, each leaf with that length in front). Without an
    ``initializer`` the first element is the first ``acc`` (and the first output); with
    ``reverse`` the elements are visited from last to first and the outputs are stored in place.
    Differentiable: the loop keeps every step's ``acc``, which the backward pass reads in reverse.

    >>> import numpy as np
    >>> import compiler as cc
    >>> from runtime import Session
    >>> x = cc.placeholder("float64", shape=(4,), name="x")
    >>> running = cc.scan(lambda acc, e: acc * e, x)        # cumulative product
    >>> (dx,) = cc.gradients(cc.reduce_sum(running), [x])
    >>> with Session() as sess:
    ...     print(sess.run(running, {x: np.array([1.0, 2.0, 3.0, 4.0])}))
    [ 1.  2.  6. 24.]
    """
    location = user_location()
    if not callable(fn):
        raise TypeError(located(f"scan: fn must be callable, got {fn!r}", location))
    elem_leaves, rebuild_elems = flatten(elems)
    if not elem_leaves:
        raise ValueError(located("scan: elems is empty", location))
    graph = next((v.graph for v in elem_leaves if isinstance(v, Tensor)), None) or get_default_graph()
    with graph.as_default():
        elem_leaves = [convert_to_tensor(v) for v in elem_leaves]
    lengths = {t.shape[0] if t.shape else "scalar" for t in elem_leaves}
    if "scalar" in lengths:
        raise ShapeError(located("scan: every tensor of elems needs a first dimension to scan along", location))
    if len(lengths) != 1:
        raise ShapeError(located(f"scan: the tensors of elems have different lengths {sorted(map(str, lengths))}",
                                 location))
    (length,) = lengths
    if length is None:
        raise ShapeError(located("scan: the length of elems (its first dimension) must be known when "
                                 "the graph is built", location))
    scope = name or "scan"
    with graph.as_default(), graph.nested_scope(scope):
        if initializer is None:
            if length == 0:
                raise ValueError(located("scan: elems is empty and there is no initializer", location))
            first = length - 1 if reverse else 0
            start_leaves = [gather(t, constant(np.int64(first))) for t in elem_leaves]
            init, rebuild_acc = start_leaves, rebuild_elems
            skip = 1
        else:
            init_leaves, rebuild_acc = flatten(initializer)
            init = [convert_to_tensor(v) for v in init_leaves]
            skip = 0
        steps = length - skip
        if steps == 0:
            stacked = [expand_dims(t, 0) if skip else zeros_like(expand_dims(t, 0)[:0]) for t in init]
            return rebuild_acc(stacked)

        def body(*arguments: Any) -> Any:
            *acc, rows = arguments
            new = fn(rebuild_acc(list(acc)), rebuild_elems(list(rows)))
            new_leaves, _ = flatten(new)
            if any(leaf is None for leaf in new_leaves):
                raise TypeError(located(f"scan: fn (defined at {function_location(fn)}) returned None where a "
                                        "tensor was expected", location))
            if len(new_leaves) != len(acc):
                raise ValueError(located(f"scan: fn (defined at {function_location(fn)}) returns {len(new_leaves)} "
                                         f"tensors for an accumulator of {len(acc)}", location))
            return [convert_to_tensor(v) for v in new_leaves]
        body.__graphgrad_location__ = f"{function_location(fn)}, scan's fn"   # type: ignore[attr-defined]

        # The loop runs exactly ``steps`` times (its maximum_iterations); iteration i reads row
        # skip + i of every element tensor (length - 1 - skip - i in reverse).
        rows = (length - 1 - skip, -1) if reverse else (skip, 1)
        finals = _loop(lambda *_: constant(True), body, list(init), None, steps, "loop", location,
                       sliced=elem_leaves, rows=rows, back_prop=back_prop)
        call_record = finals[0].op.inputs[0].op.attrs["call"]
        stacked = []
        for k, final in enumerate(finals):
            history = _history(call_record, k)
            values = _stacked_steps(history, final, steps)
            if skip:
                values = concat([history[:1], values], axis=0)
            stacked.append(reverse_rows(values) if reverse else values)
    return rebuild_acc(stacked)


def foldl(fn: Callable[[Any, Any], Any], elems: Any, initializer: Any = None, parallel_iterations: int = 10,
          back_prop: bool = True, swap_memory: bool = False, name: str | None = None) -> Any:
    """TF1's ``tf.foldl``: ``acc = fn(acc, elem)`` for each ``elem`` along the first dimension of
    ``elems``, first to last, returning the last ``acc`` (without an ``initializer`` the first
    element is the first ``acc``). A ``scan`` whose last row is kept: differentiable.

    >>> import numpy as np
    >>> import compiler as cc
    >>> from runtime import Session
    >>> x = cc.constant(np.array([1.0, 2.0, 3.0]))
    >>> with Session() as sess:
    ...     print(sess.run([cc.foldl(lambda acc, e: acc * 10.0 + e, x), cc.foldr(lambda acc, e: acc * 10.0 + e, x)]))
    [array(123.), array(321.)]
    """
    return _fold("foldl", fn, elems, initializer, back_prop, name, reverse=False)


def foldr(fn: Callable[[Any, Any], Any], elems: Any, initializer: Any = None, parallel_iterations: int = 10,
          back_prop: bool = True, swap_memory: bool = False, name: str | None = None) -> Any:
    """TF1's ``tf.foldr``: ``foldl`` from the last element to the first (see ``foldl``'s example)."""
    return _fold("foldr", fn, elems, initializer, back_prop, name, reverse=True)


def cumprod(x: Any, axis: int = 0, exclusive: bool = False, reverse: bool = False, name: str | None = None) -> Tensor:
    """Running products along ``axis`` (TF1's ``cumprod``; ``exclusive`` and ``reverse`` as
    ``cumsum``'s): a ``scan`` of multiplications, so it is exact at zeros and differentiable
    (through the loop), one step per element of the axis.

    >>> import compiler as cc
    >>> from runtime import Session
    >>> with Session() as sess:
    ...     sess.run(cc.cumprod(cc.constant([2.0, 3.0, 0.0, 5.0]), exclusive=True)).tolist()
    [1.0, 2.0, 6.0, 0.0]
    """
    x = convert_to_tensor(x)
    rank = len(x.shape)
    if rank == 0:
        raise ShapeError(located(f"cumprod needs at least one dimension, got the scalar {x.name!r}"))
    if isinstance(axis, bool) or not isinstance(axis, (int, np.integer)) or not -rank <= axis < rank:
        raise ShapeError(located(f"cumprod: axis {axis!r} is out of range for {x.name!r} {format_shape(x.shape)}"))
    axis = int(axis) % rank
    if x.shape[axis] == 0:
        return identity(x)
    if x.shape[axis] is None:
        raise ShapeError(located(f"cumprod: the length of axis {axis} of {x.name!r} {format_shape(x.shape)} must be "
                                 f"known when the graph is built (it runs one step per element)"))
    with x.graph.as_default(), x.graph.nested_scope(name or "Cumprod"):
        order = [axis] + [d for d in range(rank) if d != axis]
        moved = transpose(x, order) if axis else x
        if reverse:
            moved = reverse_rows(moved)
        if exclusive:   # shift by one: [1, x0, x1, ..., x(n-2)]
            moved = concat([ones_like(moved[:1]), moved[:-1]], axis=0)
        products = scan(lambda total, element: total * element, moved, name="products")
        if reverse:
            products = reverse_rows(products)
        return transpose(products, list(np.argsort(order))) if axis else products


def _fold(function: str, fn: Callable[[Any, Any], Any], elems: Any, initializer: Any, back_prop: bool,
          name: str | None, reverse: bool) -> Any:
    if not callable(fn):
        raise TypeError(located(f"{function}: fn must be callable, got {fn!r}", user_location()))
    step = lambda acc, element: fn(acc, element)   # noqa: E731
    step.__graphgrad_location__ = f"{function_location(fn)}, {function}'s fn"   # type: ignore[attr-defined]
    stacked = scan(step, elems, initializer=initializer, back_prop=back_prop, reverse=reverse, name=name or function)
    leaves, rebuild = flatten(stacked)
    # scan stores reversed outputs in place: the last step's value is row 0 in reverse.
    return rebuild([leaf[0] if reverse else leaf[-1] for leaf in leaves])


def map_fn(fn: Callable[[Any], Any], elems: Any, dtype: Any = None, parallel_iterations: int | None = None,
           back_prop: bool = True, swap_memory: bool = False, infer_shape: bool = True,
           name: str | None = None) -> Any:
    """TF1's ``tf.map_fn``: ``fn`` applied to each element along the first dimension of ``elems``
    (a tensor or a structure of tensors of one length), the results stacked (in ``fn``'s result
    structure). One ``scan``: a compiled loop, differentiable. ``fn`` is also called once on the
    first elements to learn its result's shapes (those ops are never run); the variables that call
    makes through ``get_variable`` (a layer's) are the ones the loop uses. The length must be
    known when the graph is built and above 0.

    >>> import numpy as np
    >>> import compiler as cc
    >>> from runtime import Session
    >>> x = cc.constant(np.array([[1.0, 2.0], [3.0, 4.0], [5.0, 6.0]]))
    >>> with Session() as sess:
    ...     sess.run(cc.map_fn(lambda row: cc.reduce_sum(row * row), x)).tolist()
    [5.0, 25.0, 61.0]
    """
    location = user_location()
    leaves, rebuild = flatten(elems)
    graph = next((v.graph for v in leaves if isinstance(v, Tensor)), None) or get_default_graph()
    with graph.as_default(), graph.nested_scope(name or "map"):
        leaves = [convert_to_tensor(t) for t in leaves]
        if not leaves or any(not t.shape for t in leaves):
            raise ValueError(located("map_fn: elems must be tensors with a first dimension to map over", location))
        if leaves[0].shape[0] == 0:
            raise ValueError(located("map_fn: elems is empty (no element to learn fn's result from)", location))
        if any(t.shape[0] is None for t in leaves):
            raise ShapeError(located("map_fn: the length of elems (its first dimension) must be known when the graph "
                                     "is built: feed a batch of fixed size, or apply fn to the whole batch at once "
                                     "(most ops broadcast over it)", location))
        # fn's shapes and structure (those ops never run). The variables it makes (a layer's) are
        # the loop's too: its second call names its scopes as the first did, and reuses them.
        names_before = default_name_counts(graph)
        probe = fn(rebuild([t[0] for t in leaves]))
        names_after = default_name_counts(graph)
        set_default_name_counts(graph, names_before)
        probe_leaves, rebuild_result = flatten(probe)
        if not probe_leaves or any(leaf is None for leaf in probe_leaves):
            raise TypeError(located(f"map_fn: fn (defined at {function_location(fn)}) returned "
                                    f"{'no tensor' if not probe_leaves else 'None'} where a tensor was expected",
                                    location))
        start = [zeros_like(convert_to_tensor(t)) for t in probe_leaves]
        def step(_: Any, element: Any) -> Any:
            with variable_scope(get_variable_scope(), reuse=AUTO_REUSE, auxiliary_name_scope=False):
                return fn(element)
        step.__graphgrad_location__ = f"{function_location(fn)}, map_fn's fn"   # type: ignore[attr-defined]
        stacked = scan(step, elems, initializer=rebuild_result(start), back_prop=back_prop, name="scan")
        set_default_name_counts(graph, names_after)
        return stacked


def _stacked_steps(history: Tensor, final: Tensor, steps: int) -> Tensor:
    """A loop variable's value after each of ``steps`` iterations (the loop ran all of them): its
    stack from the second row on, then its final value."""
    last = expand_dims(final, 0)   # not a reshape: two unknown sizes would be two -1s
    return concat([history[1:], last], axis=0) if steps > 1 else last


def reverse_rows(values: Tensor) -> Tensor:
    return reverse(values, axis=[0])

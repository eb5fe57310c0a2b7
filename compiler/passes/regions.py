"""Branches and loops in the compiled step: each region of a ``Cond`` or ``While`` is compiled like a
step of its own (specialise, simplify, fuse) and its kernels are merged into the enclosing step,
where the schedule (``kernel_ir.Branch`` / ``kernel_ir.Loop``) says when they run. So a whole
training step with control flow is still one native call.

Buffers: a region's parameters read the enclosing step's buffers in place (a capture that is not a
whole contiguous buffer is copied once, before the region). A loop's variables live in buffers of
their own (role "region"), which the condition and the body read as their parameters; after each
iteration the body's results are copied into them (through a staging copy when a result is itself
a view of a loop variable). A loop also keeps its trip count in an int64 buffer and, when a
gradient asks for it, the value of every loop variable at the start of every iteration in a stack
of ``maximum_iterations`` rows (written by a scatter kernel at the row of the trip count), or, for
a loop without that bound, in memory the step grows as the loop runs (``kernel_ir.Reserve``). Values
computed inside a region also get buffers of their own: they are written on every iteration and
must not share memory by liveness with the rest of the step.
"""
from __future__ import annotations

from typing import Any, Sequence

import numpy as np

from .. import dtypes
from ..errors import CompileError, ShapeError
from ..graph import located
from ..kernel_ir import (Access, Branch, Kernel, Loop, Program, Reserve, ScalarBuilder, Step, contiguous_strides,
                         shift_schedule)
from ..ops.control import value_position
from ..shapes import format_shape
from .specialize import Node, needed_operations, ordered_nodes, specialize


def _specialized(region: Any, shapes: Sequence[tuple[int, ...]], extra: Sequence[Any] = ()
                 ) -> tuple[list[Node], list[Node]]:
    """The region's nodes for these parameter shapes, and the nodes of its results (then of the
    tensors ``extra``)."""
    wanted = list(region.results) + list(extra)
    roots = [t.op for t in wanted] + list(region.state_ops)
    nodes_by_op = specialize(needed_operations(roots, advance_random_counter=not region.runs_once),
                             dict(zip(region.params, shapes)))
    return ordered_nodes(nodes_by_op), [nodes_by_op[t.op] for t in wanted]


def control_shapes(op: Any, input_shapes: Sequence[tuple[int, ...]]) -> list[tuple[int, ...]]:
    """The concrete shapes of the values a ``Cond`` or ``While`` returns (for a While, its loop
    variables, then their per-iteration stacks), given its inputs' shapes; errors when a branch's
    or the body's results do not keep to them."""
    if op.type == "While":
        count, limit = op.attrs["variables"], op.attrs["maximum_iterations"]
        variables = [tuple(s) for s in input_shapes[:count]]
        body = op.attrs["body"]
        rows = [tuple(s[1:]) for s in input_shapes[count:count + op.attrs["sliced"]]]
        captures = [input_shapes[j] for j in op.attrs["captures_of"][1]]
        _, results = _specialized(body, variables + rows + captures, op.attrs["saved"])
        changing = [(k, shape, node.shape) for k, (node, shape) in enumerate(zip(results, variables))
                    if node.shape != shape]
        if changing:   # the reference runs such a loop; compiling it is an error (``emit``)
            op.attrs["_changing"] = changing[0]
        return (variables + [(limit or 0,) + shape for shape in variables]
                + [(limit or 0,) + node.shape for node in results[count:]])
    branches = op.attrs["branches"]
    operands = input_shapes[1:]
    found = []
    for which in (1, 0):
        _, results = _specialized(branches[which], [operands[j] for j in op.attrs["operands_of"][which]])
        found.append([node.shape for node in results])
    for k, (taken, otherwise) in enumerate(zip(*found)):
        if taken != otherwise:
            raise ShapeError(located(
                f"{op.describe()}: with the fed shapes, output {k} is {format_shape(taken)} in the true branch "
                f"(defined at {branches[1].location}) but {format_shape(otherwise)} in the false branch (defined "
                f"at {branches[0].location})", op.location))
    return found[0]


def compile_region(region: Any, shapes: Sequence[tuple[int, ...]], check_numerics: bool,
                   extra: Sequence[Any] = ()) -> Program:
    """The region's kernels and buffers, as a program whose feeds are the region's parameters and
    whose fetches are its results (then the tensors ``extra``)."""
    from .fuse import build_program
    from .simplify import optimize
    nodes, results = _specialized(region, shapes, extra)
    nodes, fetched = optimize(nodes, results)
    return build_program(nodes, fetched, check_numerics)


class RegionEmitter:
    """Emits one ``Cond`` or ``While`` node into a kernel builder (``fuse._KernelBuilder``)."""

    def __init__(self, builder: Any, node: Node) -> None:
        self.builder = builder
        self.node = node

    # -- helpers ------------------------------------------------------------------------------
    def buffer(self, shape: tuple[int, ...], dtype: np.dtype, what: str) -> int:
        return self.builder.raw_buffer(tuple(shape), dtype, "region", f"{what} (in {self.node.opdef.name} "
                                                                       f"{self.node.label!r})")

    def kernel(self, kernel: Kernel) -> int:
        """Append a kernel; its position."""
        position = len(self.builder.kernels)
        suffix = kernel.name.partition("_")[2]
        self.builder.kernels.append(_renamed(kernel, f"k{position}" + (f"_{suffix}" if suffix else "")))
        return position

    def covers(self) -> tuple[tuple[str, str, str], ...]:
        return ((self.node.opdef.name, self.node.label, self.node.where),)

    def copy(self, source: Access | Any, shape: tuple[int, ...], dtype: np.dtype, target: int,
             name: str = "copy") -> int:
        """A kernel writing ``source`` (an Access walked over ``shape``, or a Python literal) into
        the whole of buffer ``target``."""
        sb = ScalarBuilder()
        if isinstance(source, Access):
            operands: tuple[Access, ...] = (source,)
            body = sb.load(0, dtype)
        else:
            operands, body = (), sb.literal(source, dtype)
        return self.kernel(Kernel(f"k_{name}", tuple(shape), operands, body,
                                  Access(target, contiguous_strides(shape)), dtype, covers=self.covers()))

    def whole_buffer(self, node: Node, what: str) -> Access:
        """Where a region reads ``node`` as a parameter: its own buffer when it fills one
        contiguously, else a copy made now."""
        builder = self.builder
        storage = builder.storage.get(id(node))
        if storage is not None and builder.buffers[storage.buffer].role == "stack":
            return storage          # grown at run time: its address is only in the buffer table
        if (storage is not None and storage.offset == 0 and storage.is_contiguous(node.shape)
                and builder.buffers[storage.buffer].size == node.size
                and builder.buffers[storage.buffer].dtype == node.dtype):
            return Access(storage.buffer, contiguous_strides(node.shape))
        target = self.buffer(node.shape, node.dtype, what)
        if storage is not None:
            self.copy(storage, node.shape, node.dtype, target)
        else:
            self.copy(builder.literal[id(node)], node.shape, node.dtype, target)
        return Access(target, contiguous_strides(node.shape))

    def merge(self, program: Program, params: dict[Any, Access]) -> tuple[list[Step], list[tuple[Access, tuple]]]:
        """Append the region program's kernels, its buffers mapped to this step's (its feeds to
        ``params``); its schedule and where each of its results lives."""
        builder = self.builder
        mapping: dict[int, int] = {}
        feeds = {index: tensor for tensor, index in program.feeds.items()}
        variables = {index: tensor for tensor, index in program.variables.items()}
        for buffer in program.buffers:
            if buffer.index in feeds:
                mapping[buffer.index] = params[feeds[buffer.index]].buffer
            elif buffer.index in variables:
                tensor = variables[buffer.index]
                if tensor not in builder.variables:
                    builder.variables[tensor] = builder.raw_buffer(buffer.shape, buffer.dtype, "variable",
                                                                   buffer.label)
                mapping[buffer.index] = builder.variables[tensor]
            elif buffer.index in program.constants:
                mapping[buffer.index] = builder.raw_buffer(buffer.shape, buffer.dtype, "constant", buffer.label)
                builder.constants[mapping[buffer.index]] = program.constants[buffer.index]
            elif buffer.role == "stack":
                # A loop's stack stays one: the step grows it (as its own) as the loop runs.
                mapping[buffer.index] = builder.raw_buffer(buffer.shape, buffer.dtype, "stack", buffer.label)
            else:
                mapping[buffer.index] = self.buffer(buffer.shape, buffer.dtype, buffer.label)
        offset = len(builder.kernels)
        for kernel in program.kernels:
            self.kernel(_rebuffered(kernel, mapping))
        steps = list(shift_schedule(_remapped_schedule(program.steps(), mapping), offset))
        results = [(Access(mapping[spec.buffer], spec.strides, spec.offset), spec.shape)
                   for spec in program.fetches]
        return steps, results

    def params(self, region: Any, arguments: Sequence[Access], capture_nodes: Sequence[Node]) -> dict[Any, Access]:
        params = dict(zip(region.params[:region.arguments], arguments))
        for param, node in zip(region.params[region.arguments:], capture_nodes):
            params[param] = self.whole_buffer(node, f"capture {param.op.name!r}")
        return params

    # -- the constructs -------------------------------------------------------------------------
    def emit_while(self) -> None:
        builder, node = self.builder, self.node
        attrs = node.attrs
        count, limit = attrs["variables"], attrs["maximum_iterations"]
        condition, body = attrs["condition"], attrs["body"]
        initial = node.inputs[:count]
        variables = [self.buffer(n.shape, n.dtype, f"loop variable {k}") for k, n in enumerate(initial)]
        for n, target in zip(initial, variables):
            storage = builder.storage.get(id(n))
            self.copy(storage if storage is not None else builder.literal[id(n)], n.shape, n.dtype, target,
                      "loop_init")
        counter = self.buffer((), dtypes.int64, "trip count")
        self.copy(0, (), dtypes.int64, counter, "loop_init")
        # Stacks: ``limit`` rows, or grown at run time (``Reserve``) when the loop has no limit.
        # Rows past the trip count are left as they were: nothing reads them.
        reservations: list[Reserve] = []

        def stack(shape: tuple[int, ...], dtype: np.dtype, what: str) -> int:
            if limit is not None:
                return self.buffer((limit,) + shape, dtype, what)
            index = builder.raw_buffer((0,) + shape, dtype, "stack", f"{what} (in {node.opdef.name} {node.label!r})")
            rows = self.buffer((), dtypes.int64, f"rows held by b{index}")
            row_bytes = int(np.prod(shape, dtype=np.int64)) * np.dtype(dtype).itemsize
            reservations.append(Reserve(index, rows, counter, max(row_bytes, 1)))
            return index
        history: dict[int, int] = {}
        for k in sorted(attrs["history"]):
            history[k] = stack(initial[k].shape, initial[k].dtype, f"stack of loop variable {k}")
        elements = node.inputs[count:count + attrs["sliced"]]
        element_sources = [self.whole_buffer(n, f"element {r}") for r, n in enumerate(elements)]
        rows = [self.buffer(n.shape[1:], n.dtype, f"row of element {r}") for r, n in enumerate(elements)]
        arguments = [Access(v, contiguous_strides(n.shape)) for v, n in zip(variables, initial)]
        row_arguments = [Access(row, contiguous_strides(n.shape[1:])) for row, n in zip(rows, elements)]
        shapes = [n.shape for n in initial]
        condition_params = self.params(condition, arguments, [node.inputs[j] for j in attrs["captures_of"][0]])
        body_params = self.params(body, arguments + row_arguments,
                                  [node.inputs[j] for j in attrs["captures_of"][1]])
        check = builder.check_numerics
        condition_program = compile_region(condition, shapes + [node.inputs[j].shape
                                                                for j in attrs["captures_of"][0]], check)
        saved = attrs["saved"]
        body_program = compile_region(body, shapes + [n.shape[1:] for n in elements]
                                      + [node.inputs[j].shape for j in attrs["captures_of"][1]], check, saved)
        saved_stacks = [stack(shape[1:], saved[j].dtype, f"stack of kept value {j}")
                        for j, shape in enumerate(attrs["_shapes"][2 * count:])]

        first = len(builder.kernels)
        condition_steps, (goes,) = self.merge(condition_program, condition_params)
        predicate = self.buffer((), dtypes.bool_, "loop predicate")
        sb = ScalarBuilder()
        holds = sb.load(0, dtypes.bool_)
        operands = [goes[0]]
        if limit is not None:
            operands.append(Access(counter, ()))
            holds = sb.logical_and(holds, sb.lt(sb.load(1, dtypes.int64), sb.literal(limit, dtypes.int64)))
        condition_steps.append(self.kernel(Kernel("k_loop_predicate", (), tuple(operands), holds,
                                                  Access(predicate, ()), dtypes.bool_, covers=self.covers())))
        body_steps: list[Step] = list(reservations)
        for k, kept in history.items():
            body_steps.append(self._push(initial[k], variables[k], counter, kept))
        for source, row, n in zip(element_sources, rows, elements):
            body_steps.append(self._row(source, n, row, counter, attrs["rows"]))
        steps, results = self.merge(body_program, body_params)
        body_steps += steps
        for (access, shape), kept, tensor in zip(results[count:], saved_stacks, saved):
            body_steps.append(self._push_value(access, shape, tensor.dtype, counter, kept))
        body_steps += self._copy_back(results[:count], variables, initial)
        sb = ScalarBuilder()
        body_steps.append(self.kernel(Kernel(
            "k_loop_count", (), (Access(counter, ()),), sb.add(sb.load(0, dtypes.int64), sb.literal(1, dtypes.int64)),
            Access(counter, ()), dtypes.int64, covers=self.covers())))
        builder.regions.append((first, len(builder.kernels), Loop(tuple(condition_steps), predicate,
                                                                  tuple(body_steps))))
        builder.storage[id(node)] = Access(counter, ())
        builder.region_values[id(node)] = ([Access(v, contiguous_strides(n.shape)) for v, n in zip(variables, initial)]
                                           + [Access(history[k], contiguous_strides((limit or 0,) + n.shape))
                                              if k in history else None for k, n in enumerate(initial)]
                                           + [Access(kept, contiguous_strides(shape)) for kept, shape
                                              in zip(saved_stacks, attrs["_shapes"][2 * count:])])

    def _row(self, source: Access, element: Node, row: int, counter: int, rows: tuple[int, int]) -> int:
        """A kernel that copies row ``rows[0] + rows[1] * counter`` of an element tensor (``scan``'s
        input) into the buffer the body reads it from."""
        sb = ScalarBuilder()
        shape = element.shape[1:]
        size = int(np.prod(shape, dtype=np.int64))
        first, step = rows
        at = sb.add(sb.mul(sb.load(0, dtypes.int64), sb.literal(step, dtypes.int64)), sb.literal(first, dtypes.int64))
        where = sb.mul(at, sb.literal(size, dtypes.int64))
        for axis, stride in enumerate(contiguous_strides(shape)):
            if shape[axis] != 1:
                where = sb.add(where, sb.mul(sb.axis_index(axis), sb.literal(stride, dtypes.int64)))
        operands = (Access(counter, (0,) * len(shape)), Access(source.buffer, (0,) * len(shape)))
        return self.kernel(Kernel("k_loop_row", shape, operands, sb.gather(1, where, element.dtype),
                                  Access(row, contiguous_strides(shape)), element.dtype, covers=self.covers()))

    def _push(self, node: Node, variable: int, counter: int, stack: int) -> int:
        """A kernel that writes the loop variable into row ``counter`` of its stack."""
        return self._push_value(Access(variable, contiguous_strides(node.shape)), node.shape, node.dtype,
                                counter, stack)

    def _push_value(self, value: Access, shape: tuple[int, ...], dtype: np.dtype, counter: int, stack: int) -> int:
        """A kernel that stores ``value`` (walked over ``shape``) into row ``counter`` of ``stack``."""
        sb = ScalarBuilder()
        row = int(np.prod(shape, dtype=np.int64))
        where = sb.mul(sb.load(1, dtypes.int64), sb.literal(row, dtypes.int64))
        for axis, stride in enumerate(contiguous_strides(shape)):
            if shape[axis] != 1:
                where = sb.add(where, sb.mul(sb.axis_index(axis), sb.literal(stride, dtypes.int64)))
        operands = (value, Access(counter, (0,) * len(shape)))
        return self.kernel(Kernel("k_loop_push", tuple(shape), operands, sb.load(0, dtype),
                                  Access(stack, (0,) * len(shape)), dtype, covers=self.covers(),
                                  scatter=where))

    def _copy_back(self, results: list[tuple[Access, tuple]], variables: list[int],
                   initial: Sequence[Node]) -> list[int]:
        """Kernels that make the body's results the next iteration's loop variables."""
        own = set(variables)
        staged: list[tuple[Access | None, int]] = []
        positions: list[int] = []
        for k, ((access, shape), target, n) in enumerate(zip(results, variables, initial)):
            if access.buffer == target and access.offset == 0 and access.strides == contiguous_strides(shape):
                staged.append((None, target))          # unchanged
            elif access.buffer in own:
                stage = self.buffer(shape, n.dtype, f"next value of loop variable {k}")
                positions.append(self.copy(access, shape, n.dtype, stage, "loop_stage"))
                staged.append((Access(stage, contiguous_strides(shape)), target))
            else:
                staged.append((access, target))
        for (access, target), n in zip(staged, initial):
            if access is not None:
                positions.append(self.copy(access, n.shape, n.dtype, target, "loop_next"))
        return positions

    def emit_cond(self) -> None:
        builder, node = self.builder, self.node
        attrs = node.attrs
        predicate = self.whole_buffer(node.inputs[0], "predicate").buffer
        operands = node.inputs[1:]
        shapes = attrs["_shapes"]
        out_dtypes = [t.dtype for t in attrs["branches"][1].results]
        outputs = [self.buffer(shape, out_dtype, f"output {k}")
                   for k, (shape, out_dtype) in enumerate(zip(shapes, out_dtypes))]
        token = self.buffer((), dtypes.int32, "branch taken")
        sb = ScalarBuilder()
        self.kernel(Kernel("k_branch_taken", (), (Access(predicate, ()),),
                           sb.cast(sb.load(0, dtypes.bool_), dtypes.int32), Access(token, ()), dtypes.int32,
                           covers=self.covers()))
        programs = []
        for which in (1, 0):
            region = attrs["branches"][which]
            captured = [operands[j] for j in attrs["operands_of"][which]]
            programs.append((region, captured, compile_region(region, [n.shape for n in captured],
                                                              builder.check_numerics)))
        # The parameters first: a captured value they copy (a literal) is copied before the branch
        # runs, not by a kernel that neither branch's schedule lists.
        parameters = [self.params(region, [], captured) for region, captured, _ in programs]
        first = len(builder.kernels)
        branches = []
        for (region, captured, program), params in zip(programs, parameters):
            steps, results = self.merge(program, params)
            for (access, shape), target, out_dtype in zip(results, outputs, out_dtypes):
                steps.append(self.copy(access, shape, out_dtype, target, "branch_output"))
            branches.append(tuple(steps))
        builder.regions.append((first, len(builder.kernels), Branch(predicate, branches[0], branches[1])))
        builder.storage[id(node)] = Access(token, ())
        builder.region_values[id(node)] = [Access(o, contiguous_strides(shape)) for o, shape in zip(outputs, shapes)]


def _renamed(kernel: Kernel, name: str) -> Kernel:
    from dataclasses import replace
    return replace(kernel, name=name)


def _rebuffered(kernel: Kernel, mapping: dict[int, int]) -> Kernel:
    from dataclasses import replace
    return replace(kernel, out=replace(kernel.out, buffer=mapping[kernel.out.buffer]),
                   operands=tuple(replace(a, buffer=mapping[a.buffer]) for a in kernel.operands))


def _remapped_schedule(steps: Sequence[Step], mapping: dict[int, int]) -> tuple[Step, ...]:
    """A region's schedule with its predicate buffers renumbered into the enclosing step's."""
    moved: list[Step] = []
    for step in steps:
        if isinstance(step, Branch):
            moved.append(Branch(mapping[step.predicate], _remapped_schedule(step.taken, mapping),
                                _remapped_schedule(step.otherwise, mapping)))
        elif isinstance(step, Loop):
            moved.append(Loop(_remapped_schedule(step.condition, mapping), mapping[step.predicate],
                              _remapped_schedule(step.body, mapping)))
        elif isinstance(step, Reserve):
            moved.append(Reserve(mapping[step.stack], mapping[step.capacity], mapping[step.counter], step.row_bytes))
        else:
            moved.append(step)
    return tuple(moved)


def emit(builder: Any, node: Node) -> None:
    """Emit a ``Cond`` or ``While`` node (its kernels and its place in the schedule), or give a
    ``RegionOutput`` node the storage of the value it stands for."""
    if node.opdef.name == "RegionOutput":
        token = node.inputs[0]
        values = builder.region_values[id(token)]
        builder.storage[id(node)] = values[value_position(node.attrs, token.attrs.get("variables", 0))]
        return
    emitter = RegionEmitter(builder, node)
    changing = node.origin.attrs.get("_changing") if node.origin is not None else None
    if node.opdef.name == "While" and changing is not None:
        k, before, after = changing
        raise CompileError(located(
            f"{node.origin.describe()}: with the fed shapes, its body (defined at {node.attrs['body'].location}) "
            f"turns loop variable {k} of shape {format_shape(before)} into {format_shape(after)}; a compiled "
            "loop keeps each loop variable's shape (the reference target runs it)", node.origin.location))
    if node.opdef.name == "While":
        emitter.emit_while()
    else:
        emitter.emit_cond()

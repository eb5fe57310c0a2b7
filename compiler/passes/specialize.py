"""Prune the user's graph to what the fetches need and re-run shape rules with concrete shapes.

The result is a list of ``Node``s (a private, mutable copy the later passes rewrite), in
topological order, each with a fully known shape.
"""
from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any, Collection, Iterable, Sequence

import numpy as np

from ..errors import CompileError, DTypeError, ShapeError
from ..graph import Operation, Tensor, located
from ..ops.base import OpDef
from ..ops.control import region_variables, value_position
from ..ops.sources import Placeholder
from ..shapes import RuleError, format_shape
from .control import control_reads


@dataclass(eq=False)
class Node:
    """One value of the compiled step (a specialised graph tensor)."""

    opdef: OpDef
    inputs: list["Node"]
    attrs: dict[str, Any]
    shape: tuple[int, ...]
    dtype: np.dtype
    origin: Operation | None = None
    tensor: Tensor | None = None               # placeholders and variables: the user's tensor
    value: np.ndarray | None = None            # constants
    control: list["Node"] = field(default_factory=list)
    forward: "Node | None" = None             # set when a pass replaces this node

    def resolve(self) -> "Node":
        """The node that now stands for this one after rewrites."""
        node = self
        while node.forward is not None:
            node = node.forward
        return node

    @property
    def kind(self) -> str:
        return self.opdef.kind

    @property
    def size(self) -> int:
        return math.prod(self.shape)

    def data_inputs(self) -> list["Node"]:
        return [n for i, n in enumerate(self.inputs) if i not in self.opdef.shape_only_inputs]

    @property
    def label(self) -> str:
        return self.origin.name if self.origin is not None else self.opdef.name

    @property
    def where(self) -> str:
        return str(self.origin.location) if self.origin is not None else "<compiler>"


def needed_operations(roots: Iterable[Operation], fed: Collection[Tensor] = (),
                      advance_random_counter: bool = True) -> list[Operation]:
    """Every operation the roots depend on (data and control), in creation (topological) order.
    A ``fed`` tensor's value is given: what computes it is not needed. With
    ``advance_random_counter``, a random op among them (or in a branch or loop among them) brings
    its graph's counter update (a cond branch's ops draw with the step's count: not there)."""
    seen: set[Operation] = set()
    stack = list(roots)
    while stack:
        op = stack.pop()
        if op in seen:
            continue
        seen.add(op)
        if op.outputs and op.outputs[0] in fed:
            continue
        stack.extend(t.op for t in op.inputs)
        stack.extend(op.control_inputs)
        if op.opdef.kind == "control":
            stack.extend(region_variables(op))   # assigned inside a branch or loop: read there directly
    # A step that computes a random op also advances its graph's run counter (ops/random.py).
    from ..ops.random import counter_updates
    updates = [op for op in counter_updates(seen) if op not in seen] if advance_random_counter else []
    if updates:
        return needed_operations(list(seen) + updates, fed)
    return sorted(seen, key=lambda o: o.id)


def specialize(operations: Sequence[Operation], feed_shapes: dict[Tensor, tuple[int, ...]]
               ) -> dict[Operation, Node]:
    """Build Nodes with concrete shapes; shape errors name the op and the user's line."""
    nodes: dict[Operation, Node] = {}
    reads = control_reads(operations)
    for op in operations:
        if op.outputs and op.outputs[0] in feed_shapes and op.type not in ("Placeholder", "RegionParam"):
            # An intermediate tensor fed for this run (TF1 allows it): a placeholder here.
            tensor = op.outputs[0]
            nodes[op] = Node(Placeholder, [], {}, tuple(feed_shapes[tensor]), tensor.dtype, origin=op, tensor=tensor)
            continue
        inputs = [nodes[t.op] for t in op.inputs]
        for index, assignment in reads.get(op, {}).items():
            if op.opdef.kind == "state" and index == 0:
                continue  # the target stays the variable; its old value is handled below
            inputs[index] = nodes[assignment]
        attrs = dict(op.attrs)
        dtype = op.outputs[0].dtype if op.outputs else None
        if op.type in ("Placeholder", "RegionParam"):
            shape = feed_shapes[op.outputs[0]]
        elif op.type in ("Cond", "While"):
            from .regions import control_shapes   # regions compiles with this module
            shape = ()
            attrs["_shapes"] = control_shapes(op, [n.shape for n in inputs])
        elif op.type == "RegionOutput":
            token = inputs[0]
            shape = token.attrs["_shapes"][value_position(attrs, token.attrs.get("variables", 0))]
        elif op.opdef.num_outputs == 0:
            shape = ()
        else:
            try:
                shape = tuple(op.opdef.shape_rule([n.shape for n in inputs], attrs))
            except RuleError as exc:
                operands = ", ".join(f"{t.name!r} {format_shape(n.shape)}" for t, n in zip(op.inputs, inputs))
                error = DTypeError if exc.kind == "dtype" else ShapeError
                raise error(located(f"{op.describe()}: {exc} with the fed shapes; operands: {operands}",
                                    op.location) + _fed_shapes(inputs)) from None
            if None in shape:
                raise CompileError(located(f"{op.describe()}: shape {format_shape(shape)} still unknown "
                                           f"after specialisation", op.location))
        node = Node(op.opdef, inputs, attrs, shape, dtype, origin=op,
                    tensor=op.outputs[0] if op.outputs else None,
                    value=attrs.get("value") if op.type == "Const" else None)
        node.control = [nodes[c] for c in op.control_inputs if c in nodes]
        if op.opdef.kind == "state" and 0 in reads.get(op, {}) and op.type != "Assign":
            node = _chained_update(node, nodes[reads[op][0]])
        nodes[op] = node
    return nodes


def _fed_shapes(inputs: Sequence[Node]) -> str:
    """``; fed shapes: 'x' (5, 3) at file:line, …`` for the placeholders with unknown dimensions
    that ``inputs`` depend on: the feeds that decided the shapes a rule has just rejected."""
    fed: dict[Operation, tuple[int, ...]] = {}
    seen: set[int] = set()
    stack = list(inputs)
    while stack:
        node = stack.pop()
        if id(node) in seen:
            continue
        seen.add(id(node))
        op = node.origin
        if op is not None and op.type == "Placeholder" and None in op.outputs[0].shape:
            fed[op] = node.shape
        stack.extend(node.inputs)
    if not fed:
        return ""
    return "; fed shapes: " + ", ".join(f"{op.name!r} {format_shape(shape)} at {op.location}"
                                        for op, shape in sorted(fed.items(), key=lambda item: item[0].id))


def ordered_nodes(nodes_by_op: dict[Operation, Node]) -> list[Node]:
    """The nodes in topological order, including nodes ``specialize`` made that stand for no op
    (the combined value of a chained assignment), each placed before its first consumer."""
    result: list[Node] = []
    placed: set[int] = set()

    def place(node: Node) -> None:
        if id(node) in placed:
            return
        for inp in node.inputs:
            place(inp)
        placed.add(id(node))
        result.append(node)
    for node in nodes_by_op.values():
        place(node)
    return result


def _chained_update(node: Node, earlier: Node) -> Node:
    """``assign_add/sub(v, x)`` that runs after another assignment to ``v``: ``assign(v, earlier ± x)``."""
    from ..ops.elementwise import Add, Sub
    from ..ops.state import Assign
    variable, value = node.inputs
    combine = Add if node.opdef.name == "AssignAdd" else Sub
    combined = Node(combine, [earlier, value], {}, node.shape, node.dtype, origin=node.origin)
    return Node(Assign, [variable, combined], node.attrs, node.shape, node.dtype, origin=node.origin,
                tensor=node.tensor, control=node.control)


def format_nodes(nodes: Sequence[Node], title: str) -> str:
    """One line per node: ``%name = Type(inputs) {attrs} : dtype[shape]  # file:line``."""
    names = {id(n): f"%{i}" for i, n in enumerate(nodes)}
    lines = [f"# {title}: {len(nodes)} nodes"]
    for node in nodes:
        args = ", ".join(names.get(id(i), "?") for i in node.inputs)
        attrs = {k: v for k, v in node.attrs.items() if k not in ("value", "shape", "dtype") and not k.startswith("_")}
        attr_text = (" " + ", ".join(f"{k}={v!r}" for k, v in attrs.items())) if attrs else ""
        if node.value is not None:
            attr_text += " value=" + (repr(node.value.item()) if node.value.size == 1 else f"<{node.value.size} elements>")
        dims = "x".join(str(d) for d in node.shape) or "scalar"
        dtype = node.dtype.name if node.dtype is not None else "-"
        lines.append(f"{names[id(node)]} = {node.opdef.name}({args}){attr_text} : {dtype}[{dims}]"
                     f"  # {node.label!r} {node.where}")
    return "\n".join(lines) + "\n"

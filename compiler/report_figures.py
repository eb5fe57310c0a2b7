"""The pictures and excerpts of the HTML step report (``exe.report(html=...)``), as plain data.

Everything here is geometry and text slicing; the template (``templates/report.html.j2``) turns it
into inline SVG and HTML with autoescaping on, so no name from the user's graph is ever written
unescaped.

- ``parse_graph_text``: the nodes and edges of a ``graph``/``optimized`` stage dump.
- ``layered_layout``: a layered drawing computed here (longest-path layers, long edges routed
  through virtual points, barycentric ordering sweeps), so the report needs no graphviz.
- ``memory_bars``: the buffer plan over time, one bar per placed temporary.
- ``function_texts``: each kernel's functions cut out of an LLVM, assembly or PTX listing.

>>> nodes = parse_graph_text("%0 = Placeholder() : float32[2]  # 'x' a.py:1\\n"
...                          "%1 = Exp(%0) : float32[2]  # 'Exp' a.py:2\\n")
>>> [(n.op_type, n.label, n.where, n.inputs) for n in nodes]
[('Placeholder', 'x', 'a.py:1', ()), ('Exp', 'Exp', 'a.py:2', (0,))]
>>> picture = layered_layout(nodes)
>>> [box.layer for box in picture.boxes], len(picture.edges)
([0, 1], 1)
"""
from __future__ import annotations

import ast
import re
from dataclasses import dataclass
from typing import Sequence

from .kernel_ir import Program

# ``%3 = MatMul(%0, %2) attrs : float32[6x7]  # 'name' file.py:8`` (see passes.specialize.format_nodes)
_NODE_HEAD = re.compile(r"%(\d+) = (\S+?)\(((?:%\d+|\?)(?:, (?:%\d+|\?))*)?\)")
_NODE_TAIL = re.compile(r"  # ('(?:[^'\\]|\\.)*'|\"(?:[^\"\\]|\\.)*\") (.*)$")


@dataclass(frozen=True)
class GraphNode:
    """One node of a stage dump: its number, op type, name, user line and input numbers."""

    index: int
    op_type: str
    label: str
    where: str
    inputs: tuple[int, ...]
    text: str           # the dump's whole line, shown as the node's tooltip


def parse_graph_text(text: str) -> list[GraphNode]:
    """The nodes of a ``graph`` or ``optimized`` stage dump, in order (inputs come first)."""
    nodes = []
    for line in text.splitlines():
        head = _NODE_HEAD.match(line)
        if head is None:
            continue
        tail = _NODE_TAIL.search(line, head.end())
        label, where = (ast.literal_eval(tail.group(1)), tail.group(2)) if tail else (head.group(2), "")
        inputs = tuple(int(arg[1:]) for arg in (head.group(3) or "").split(", ") if arg.startswith("%"))
        nodes.append(GraphNode(int(head.group(1)), head.group(2), label, where, inputs, line))
    return nodes


@dataclass(frozen=True)
class NodeBox:
    """A node drawn as a box: top-left corner, size, layer, and the texts shown in it."""

    node: GraphNode
    x: float
    y: float
    width: float
    height: float
    layer: int
    title: str           # the op type
    subtitle: str        # the name, shortened from the left when long


@dataclass(frozen=True)
class GraphPicture:
    """A laid-out graph: boxes, edges as point lists (through the virtual points of long edges),
    and the size of the drawing."""

    boxes: list[NodeBox]
    edges: list[list[tuple[float, float]]]
    width: float
    height: float
    method: str


CHAR_WIDTH = 7.0         # of the report's 12px monospace font
BOX_HEIGHT = 34.0
LAYER_GAP = 36.0
NODE_GAP = 14.0
VIRTUAL_WIDTH = 8.0
MARGIN = 10.0
MAX_LABEL = 30
ORDERING_SWEEPS = 6


def _shorten(text: str) -> str:
    return text if len(text) <= MAX_LABEL else "…" + text[-(MAX_LABEL - 1):]


def _layers(nodes: Sequence[GraphNode]) -> dict[int, int]:
    """Longest-path layers; a source node moves down to just above its nearest consumer."""
    known = {node.index for node in nodes}
    layer: dict[int, int] = {}
    consumers: dict[int, list[int]] = {node.index: [] for node in nodes}
    for node in nodes:
        inputs = [i for i in node.inputs if i in known]
        layer[node.index] = 1 + max((layer[i] for i in inputs), default=-1)
        for i in inputs:
            consumers[i].append(node.index)
    for node in nodes:
        if not node.inputs and consumers[node.index]:
            layer[node.index] = min(layer[c] for c in consumers[node.index]) - 1
    return layer


def layered_layout(nodes: Sequence[GraphNode]) -> GraphPicture:
    """Lay out a graph top to bottom: longest-path layering, virtual points on edges that span
    several layers, then barycentric ordering sweeps (down and up) to reduce crossings."""
    layer_of = _layers(nodes)
    by_index = {node.index: node for node in nodes}
    # Items of the drawing: ("n", node index) for nodes, ("v", number) for virtual points.
    item_layer: dict[tuple[str, int], int] = {("n", i): layer for i, layer in layer_of.items()}
    above: dict[tuple[str, int], list[tuple[str, int]]] = {item: [] for item in item_layer}
    below: dict[tuple[str, int], list[tuple[str, int]]] = {item: [] for item in item_layer}
    chains: list[list[tuple[str, int]]] = []
    virtual_count = 0
    for node in nodes:
        for source in node.inputs:
            if source not in by_index:
                continue
            chain = [("n", source)]
            for layer in range(layer_of[source] + 1, layer_of[node.index]):
                virtual = ("v", virtual_count)
                virtual_count += 1
                item_layer[virtual] = layer
                above[virtual], below[virtual] = [], []
                chain.append(virtual)
            chain.append(("n", node.index))
            for upper, lower in zip(chain, chain[1:]):
                below[upper].append(lower)
                above[lower].append(upper)
            chains.append(chain)

    layer_count = max(item_layer.values(), default=-1) + 1
    rows: list[list[tuple[str, int]]] = [[] for _ in range(layer_count)]
    for item in sorted(item_layer, key=lambda it: (it[0] == "v", it[1])):
        rows[item_layer[item]].append(item)

    def sweep(order: range, neighbours: dict[tuple[str, int], list[tuple[str, int]]], step: int) -> None:
        for layer in order:
            reference = {item: position for position, item in enumerate(rows[layer - step])}
            current = {item: position for position, item in enumerate(rows[layer])}

            def barycenter(item: tuple[str, int]) -> float:
                linked = [reference[n] for n in neighbours[item] if n in reference]
                return sum(linked) / len(linked) if linked else float(current[item])
            rows[layer].sort(key=barycenter)

    for _ in range(ORDERING_SWEEPS):
        sweep(range(1, layer_count), above, 1)
        sweep(range(layer_count - 2, -1, -1), below, -1)

    def width_of(item: tuple[str, int]) -> float:
        if item[0] == "v":
            return VIRTUAL_WIDTH
        node = by_index[item[1]]
        return CHAR_WIDTH * max(len(node.op_type), len(_shorten(node.label))) + 16.0

    row_widths = [sum(width_of(item) for item in row) + NODE_GAP * max(len(row) - 1, 0) for row in rows]
    drawing_width = max(row_widths, default=0.0) + 2 * MARGIN
    centers: dict[tuple[str, int], tuple[float, float]] = {}
    boxes: list[NodeBox] = []
    for layer, row in enumerate(rows):
        x = MARGIN + (drawing_width - 2 * MARGIN - row_widths[layer]) / 2
        y = MARGIN + layer * (BOX_HEIGHT + LAYER_GAP)
        for item in row:
            width = width_of(item)
            centers[item] = (x + width / 2, y + BOX_HEIGHT / 2)
            if item[0] == "n":
                node = by_index[item[1]]
                boxes.append(NodeBox(node, x, y, width, BOX_HEIGHT, layer, node.op_type, _shorten(node.label)))
            x += width + NODE_GAP
    edges = []
    for chain in chains:
        (x0, y0), (x1, y1) = centers[chain[0]], centers[chain[-1]]
        points = [(x0, y0 + BOX_HEIGHT / 2)]
        points += [centers[item] for item in chain[1:-1]]
        points.append((x1, y1 - BOX_HEIGHT / 2))
        edges.append(points)
    boxes.sort(key=lambda box: box.node.index)
    height = MARGIN * 2 + layer_count * BOX_HEIGHT + max(layer_count - 1, 0) * LAYER_GAP
    return GraphPicture(boxes, edges, drawing_width, height,
                        "a layered layout computed in Python (longest-path layers, "
                        "barycentric ordering); graphviz is not used")


@dataclass(frozen=True)
class MemoryBar:
    """A temporary buffer's life in its arena: kernels ``first``..``last`` (inclusive) at
    ``offset`` bytes from the start of all arenas, ``nbytes`` long."""

    buffer: int
    label: str
    arena: int
    offset: int
    nbytes: int
    first: int
    last: int


def memory_bars(program: Program) -> list[MemoryBar]:
    """One bar per placed temporary: from the first kernel that touches it (its writer) to the
    last that reads it; arenas are stacked, so ``offset`` counts from the first arena's start."""
    touched: dict[int, list[int]] = {}
    for position, kernel in enumerate(program.kernels):
        for buffer in {kernel.out.buffer, *(access.buffer for access in kernel.operands)}:
            touched.setdefault(buffer, []).append(position)
    arena_starts = [sum(program.arenas[:i]) for i in range(len(program.arenas))]
    bars = []
    for index, (arena, offset) in sorted(program.placement.items()):
        kernels = touched.get(index)
        if not kernels:
            continue
        buffer = program.buffers[index]
        bars.append(MemoryBar(index, buffer.label, arena, arena_starts[arena] + offset, buffer.nbytes,
                              min(kernels), max(kernels)))
    return bars


_PTX_FUNCTION = re.compile(r"\s*(?:\.visible\s+|\.weak\s+)?(?:\.entry|\.func)\s+(?:\([^)]*\)\s*)?([\w$]+)")


def _quoted_name(header: str) -> str | None:
    found = re.search(r'@"([^"]+)"\(|@([\w.$]+)\(', header)
    if found is None:
        return None
    return found.group(1) or found.group(2)


def function_texts(text: str, dialect: str) -> dict[str, str]:
    """Each function of a listing by name: ``dialect`` is ``"llvm"`` (``define … @name(…) {`` to
    ``}``), ``"asm"`` (``name:`` to ``.size name``) or ``"ptx"`` (``.entry name(`` or ``.func``
    to the closing ``}``)."""
    lines = text.splitlines()
    functions: dict[str, str] = {}
    start: int | None = None
    name: str | None = None
    for number, line in enumerate(lines):
        if start is None:
            if dialect == "llvm" and line.startswith("define "):
                name = _quoted_name(line)
            elif dialect == "ptx" and (found := _PTX_FUNCTION.match(line)):
                name = found.group(1)
            elif dialect == "asm" and re.match(r"[\w.$]+:\s*(#.*)?$", line) and not line.startswith("."):
                name = line.split(":", 1)[0]
            else:
                continue
            start = number
        elif (dialect in ("llvm", "ptx") and line.rstrip() == "}") or (
                dialect == "asm" and re.match(rf"\s*\.size\s+{re.escape(name or '')},", line)):
            if name:
                functions[name] = "\n".join(lines[start:number + 1]) + "\n"
            start, name = None, None
    return functions


def kernel_functions(functions: dict[str, str], kernel_name: str) -> str:
    """The kernel's own functions (the loop nest, its ``_init`` and ``_part``), joined."""
    parts = [functions[name] for name in (kernel_name, f"{kernel_name}_init", f"{kernel_name}_part")
             if name in functions]
    return "\n".join(parts)


@dataclass(frozen=True)
class MemoryRect:
    """One bar of the memory chart, in drawing coordinates."""

    bar: MemoryBar
    x: float
    y: float
    width: float
    height: float


@dataclass(frozen=True)
class MemoryChart:
    """The buffer plan over time: x is the kernel's position in the step, y the byte offset in the
    arenas (stacked), a bar's height its size. ``arena_lines`` are (y, label) of arena starts,
    ``ticks`` (x, kernel name) along the bottom."""

    rects: list[MemoryRect]
    arena_lines: list[tuple[float, str]]
    ticks: list[tuple[float, str]]
    width: float
    height: float
    plot_left: float
    plot_top: float
    plot_height: float
    total_bytes: int


CHART_PLOT_HEIGHT = 260.0
CHART_LEFT = 90.0
CHART_TOP = 10.0
CHART_BOTTOM = 70.0
MIN_BAR_HEIGHT = 2.0


def memory_chart(program: Program) -> MemoryChart:
    """Lay out ``memory_bars(program)`` as a chart (kernel slots 6 to 40 px wide)."""
    bars = memory_bars(program)
    kernel_count = max(len(program.kernels), 1)
    slot = max(6.0, min(40.0, 900.0 / kernel_count))
    total = max(sum(program.arenas), 1)
    scale = CHART_PLOT_HEIGHT / total
    rects = [MemoryRect(bar, CHART_LEFT + bar.first * slot, CHART_TOP + bar.offset * scale,
                        (bar.last - bar.first + 1) * slot, max(bar.nbytes * scale, MIN_BAR_HEIGHT))
             for bar in bars]
    starts = [sum(program.arenas[:i]) for i in range(len(program.arenas))]
    arena_lines = [(CHART_TOP + start * scale, f"arena {i}: {size} B")
                   for i, (start, size) in enumerate(zip(starts, program.arenas))]
    every = max(1, round(kernel_count / max(1, 900.0 / 28.0)))   # room for a rotated label every 28 px
    ticks = [(CHART_LEFT + (position + 0.5) * slot, kernel.name)
             for position, kernel in enumerate(program.kernels) if position % every == 0]
    return MemoryChart(rects, arena_lines, ticks, CHART_LEFT + kernel_count * slot + 20.0,
                       CHART_TOP + CHART_PLOT_HEIGHT + CHART_BOTTOM, CHART_LEFT, CHART_TOP,
                       CHART_PLOT_HEIGHT, sum(program.arenas))

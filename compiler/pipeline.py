"""The compiler's stages, in order. Each one is named and can be dumped as text.

    graph      the user's graph, pruned to what the fetches need, with concrete shapes
    optimized  after shape folding, no-op elision, constant folding, CSE and dead-code elimination
    kernels    the fused kernel IR and the buffer plan (each kernel lists the ops and lines it covers;
               temporaries share memory by liveness, variables are updated in place)
    llvm       LLVM IR for the host CPU: the kernels and the one entry point ``graphgrad_step``
    llvm-opt   the same after LLVM's O3 pipeline for this CPU
    asm        host assembly
    ptx        the same kernel IR lowered for ``nvptx64-nvidia-cuda`` (sm_80)

Follow ``exp(x * w)`` through ``compile_step`` below: ``specialize`` → ``simplify`` → ``fuse`` →
``codegen.cpu`` / ``codegen.nvptx``.
"""
from __future__ import annotations

import linecache
import os
import time
from dataclasses import dataclass, field
from typing import Any, Callable, Sequence

import jinja2

from . import progress
from .codegen import cpu, nvptx
from .graph import Operation, Tensor
from .kernel_ir import ROLES, Program, format_expr, format_program
from .passes import memory, simplify
from .passes.fuse import build_program
from .passes.specialize import Node, format_nodes, needed_operations, ordered_nodes, specialize
from .report_figures import function_texts, kernel_functions, layered_layout, memory_chart, parse_graph_text

STAGES = ("graph", "optimized", "kernels", "llvm", "llvm-opt", "asm", "ptx")
_FILE_SUFFIX = {"llvm": ".ll", "llvm-opt": ".ll", "asm": ".s", "ptx": ".ptx"}


@dataclass
class CompiledStep:
    """The result of compiling one fetch set for one set of feed shapes."""

    program: Program
    texts: dict[str, str]
    timings: dict[str, float] = field(default_factory=dict)
    _lazy: dict[str, Callable[[], str]] = field(default_factory=dict)
    # cuda-emulated with racecheck or memcheck: per kernel, the scheduled kernel's name, its shared
    # arrays (name, bytes per element) and its buffer arguments (names), to name an error it reports
    checked_kernels: tuple[tuple[str, tuple[tuple[str, int], ...], tuple[str, ...]], ...] | None = None
    target: str = "cpu"   # what the step's ``llvm`` stage runs: "cpu", "cuda-emulated" or "cuda"

    def dump(self, stage: str) -> str:
        if stage not in STAGES:
            raise ValueError(f"unknown stage {stage!r}; stages are: {', '.join(STAGES)}")
        if stage not in self.texts:
            self.texts[stage] = self._lazy[stage]()
        return self.texts[stage]


def compile_step(fetches: Sequence[Tensor | Operation], feed_shapes: dict[Tensor, tuple[int, ...]],
                 check_numerics: bool = False, cpu_code: bool = True, dump: bool = True) -> CompiledStep:
    """Compile the step that computes ``fetches`` (and every assignment they trigger). With
    ``check_numerics`` every float value the step computes is checked for NaN and Inf. Without
    ``cpu_code`` (a step for the GPU targets, which ``target_gpu`` then lowers) the CPU's LLVM
    module is made only if its ``llvm`` stage is asked for. With ``dump``, the stages are
    written where ``GRAPHGRAD_DUMP`` says (``write_requested_dumps``); a caller that lowers the
    step further (``target_gpu``) writes them itself afterwards."""
    timings: dict[str, float] = {}
    start = time.perf_counter()
    roots = [f.op if isinstance(f, Tensor) else f for f in fetches]
    nodes_by_op = specialize(needed_operations(roots, feed_shapes), feed_shapes)
    nodes: list[Node] = ordered_nodes(nodes_by_op)
    fetch_nodes: list[Node | None] = [nodes_by_op[f.op] if isinstance(f, Tensor) else None for f in fetches]
    texts = {"graph": format_nodes(nodes, "graph")}
    timings["specialize"] = time.perf_counter() - start

    start = time.perf_counter()
    progress.note(f"simplify ({len(nodes)} ops)")
    nodes, fetch_nodes = simplify.optimize(nodes, fetch_nodes)
    texts["optimized"] = format_nodes(nodes, "optimized")
    timings["simplify"] = time.perf_counter() - start

    start = time.perf_counter()
    progress.note(f"fuse ({len(nodes)} ops)")
    program = build_program(nodes, fetch_nodes, check_numerics)
    if program.schedule is None:
        # Assignments move only to after the last checked kernel: a failing check must find every
        # variable untouched. With branches and loops, kernels keep their positions (the schedule
        # refers to them).
        program = memory.alias_assignments(program)
        program = memory.hoist_assignments(program)
    program = memory.plan_buffers(memory.reuse_inputs_in_place(program))
    texts["kernels"] = format_program(program)
    timings["fuse"] = time.perf_counter() - start

    def cpu_module_text() -> str:
        start = time.perf_counter()
        progress.note(f"LLVM IR ({len(program.kernels)} kernels)")
        text = str(cpu.build_module(program))
        timings["codegen"] = time.perf_counter() - start
        return text

    if cpu_code:
        texts["llvm"] = cpu_module_text()
    step = CompiledStep(program, texts, timings)
    optimized: list[Any] = []

    def optimized_module() -> Any:  # the JIT keeps its own; this one is for the dumps
        if not optimized:
            optimized.append(cpu.optimize(step.dump("llvm")))
        return optimized[0]

    step._lazy = {"llvm": cpu_module_text, "llvm-opt": lambda: str(optimized_module()),
                  "asm": lambda: cpu.emit_assembly(optimized_module()),
                  "ptx": lambda: nvptx.emit_ptx(program)}
    if dump:
        write_requested_dumps(step)
    return step


def write_requested_dumps(step: CompiledStep) -> None:
    """Write the stages of ``step`` to ``GRAPHGRAD_DUMP`` (those of ``GRAPHGRAD_DUMP_STAGES``) when set."""
    dump_dir = os.environ.get("GRAPHGRAD_DUMP")
    if dump_dir:
        chosen = [name.strip() for name in os.environ.get("GRAPHGRAD_DUMP_STAGES", "").split(",") if name.strip()]
        unknown = [name for name in chosen if name not in STAGES]
        if unknown:
            raise ValueError(f"GRAPHGRAD_DUMP_STAGES names unknown stages {', '.join(map(repr, unknown))}; "
                             f"stages are: {', '.join(STAGES)}")
        try:
            write_dumps(step, dump_dir, chosen or STAGES)
        except OSError as error:   # say which setting points where it cannot write
            raise OSError(error.errno, f"GRAPHGRAD_DUMP={dump_dir!r} (or GRAPHGRAD_DUMP_HTML): cannot write the "
                                       f"compiled step's dumps there: {error.strerror or error}") from error


def target_gpu(step: CompiledStep, arch: str = nvptx.DEFAULT_ARCH, limits: nvptx.GpuLimits = nvptx.DEFAULT_LIMITS,
               emulated: bool = False, racecheck: bool = False, memcheck: bool = False) -> CompiledStep:
    """The step for ``target="cuda"`` (or ``"cuda-emulated"``): ``kernels`` also shows the GPU
    schedule, ``ptx`` is for ``arch`` with ``limits``. When ``emulated`` the ``llvm`` stage is the
    host module that runs the scheduled kernels block by block (what the runtime then runs), with
    ``racecheck`` checking their shared-memory accesses for races and with ``memcheck`` every
    access for its bounds (``codegen.sanitizer``); otherwise
    ``llvm`` and ``llvm-opt`` are the kernels' NVPTX module before and after O3, and ``asm`` is
    the PTX.

    The step's program becomes the GPU's: products with too few output tiles for the device are
    split along their depth (``nvptx.split_products``), each into a kernel of partial products
    and one that sums them, and ``kernels`` shows those."""
    from .codegen import cuda_emulated
    from .codegen.sanitizer import byte_size
    program = step.program = nvptx.split_products(step.program, limits)
    step.texts.pop("kernels")
    kernels = format_program(program)
    step.texts.pop("ptx", None)
    step._lazy["ptx"] = lambda: nvptx.emit_ptx(program, arch, limits)
    # Made when asked for: the register counts come from assembling the PTX.
    step._lazy["kernels"] = lambda: kernels + "\n" + nvptx.format_schedule(
        nvptx.schedule_program(program, limits), nvptx.kernel_resources(step.dump("ptx"), arch))
    step.texts.pop("llvm-opt", None)
    step.texts.pop("asm", None)
    step.target = "cuda-emulated" if emulated else "cuda"
    if emulated:
        start = time.perf_counter()
        scheduled = nvptx.schedule_program(program, limits)
        step.texts["llvm"] = str(cuda_emulated.build_module(program, limits, racecheck, memcheck, scheduled))
        if racecheck or memcheck:
            step.checked_kernels = tuple(
                (one.name, tuple((array.name, byte_size(array.element)) for array in one.shared),
                 cuda_emulated.describe_buffers(program, kernel))
                for one, kernel in zip(scheduled, program.kernels))
        step.timings["codegen"] = time.perf_counter() - start
    else:  # the GPU's own module, not the CPU's: llvm, llvm-opt and asm (the PTX) of the kernels it loads
        step.texts.pop("llvm", None)
        step._lazy["llvm"] = lambda: str(nvptx.build_module(program, limits, arch))
        step._lazy["llvm-opt"] = lambda: nvptx.optimized_ir(program, arch, limits)
        step._lazy["asm"] = lambda: step.dump("ptx")
    return step


_dump_counter = 0


def write_dumps(step: CompiledStep, directory: str, stages: Sequence[str] = STAGES) -> list[str]:
    """Write each stage to ``directory/step<N>.<stage><suffix>`` and the text report; returns the
    paths written. In a process an MPI launcher started, ``directory/rank<R>/`` instead (every
    rank compiles the same steps). When ``GRAPHGRAD_DUMP_HTML`` names a directory (``python -m compiler dump
    --html DIR`` sets it), the HTML report goes there too, as ``step<N>.html`` (``DIR/rank<R>/`` under
    a launcher)."""
    global _dump_counter
    unknown = [stage for stage in stages if stage not in STAGES]
    if unknown:   # before anything is written
        raise ValueError(f"unknown stage {unknown[0]!r}; stages are: {', '.join(STAGES)}")
    rank = _launcher_rank()
    html_directory = os.environ.get("GRAPHGRAD_DUMP_HTML")
    if rank is not None:   # the processes of one mpiexec job count their steps alike: one folder each
        directory = os.path.join(directory, f"rank{rank}")
        html_directory = html_directory and os.path.join(html_directory, f"rank{rank}")
    os.makedirs(directory, exist_ok=True)
    number = _dump_counter
    _dump_counter += 1
    paths = []
    for stage in stages:
        path = os.path.join(directory, f"step{number}.{stage}{_FILE_SUFFIX.get(stage, '.txt')}")
        with open(path, "w", encoding="utf-8") as handle:
            handle.write(step.dump(stage))
        paths.append(path)
    report = os.path.join(directory, f"step{number}.report.txt")
    with open(report, "w", encoding="utf-8") as handle:
        handle.write(render_report(step))
    paths.append(report)
    if html_directory:
        os.makedirs(html_directory, exist_ok=True)
        page = os.path.join(html_directory, f"step{number}.html")
        with open(page, "w", encoding="utf-8") as handle:
            handle.write(render_html_report(step))
        paths.append(page)
    return paths


def _launcher_rank() -> str | None:
    """This process's rank when an MPI launcher started it (Open MPI, PMIx or PMI), else None."""
    for variable in ("OMPI_COMM_WORLD_RANK", "PMIX_RANK", "PMI_RANK"):
        value = os.environ.get(variable, "").strip()
        if value.isdigit():
            return value
    return None


_ENVIRONMENT = jinja2.Environment(loader=jinja2.PackageLoader("compiler", "templates"),
                                  autoescape=False, keep_trailing_newline=True,
                                  trim_blocks=True, lstrip_blocks=True)


def render_report(step: CompiledStep) -> str:
    """A readable summary: timings, the buffer plan, and each kernel with the user lines it covers."""
    program = step.program
    return _ENVIRONMENT.get_template("report.txt.j2").render(
        program=program, timings=step.timings,
        kernel_count=len(program.kernels),
        bytes_by_role={role: sum(b.nbytes for b in program.buffers if b.role == role) for role in ROLES})


_HTML_ENVIRONMENT = jinja2.Environment(loader=jinja2.PackageLoader("compiler", "templates"),
                                       autoescape=True, trim_blocks=True, lstrip_blocks=True)
_LISTINGS = (("LLVM IR", "llvm", "llvm"), ("assembly", "asm", "asm"), ("PTX", "ptx", "ptx"))
_WHOLE_STAGES = ("graph", "optimized", "kernels", "asm")


def _stage_text(step: CompiledStep, stage: str) -> tuple[str | None, str]:
    """The stage's text, or None and why it could not be made (the report shows the reason)."""
    try:
        return step.dump(stage), ""
    except Exception as error:  # a stage that fails (say, PTX for this program) leaves the rest
        return None, f"{stage} could not be produced: {type(error).__name__}: {error}"


def _source_line(where: str) -> str:
    path, _, line = where.rpartition(":")
    return linecache.getline(path, int(line)).strip() if path and line.isdigit() else ""


def _kernel_colour(index: int | None) -> str:
    return "#e4e4e4" if index is None else f"hsl({index * 47 % 360}, 65%, 84%)"


def render_html_report(step: CompiledStep, profile: Sequence[dict[str, Any]] | None = None) -> str:
    """The step as one self-contained HTML page (no scripts, fonts or links to fetch): compile time
    per stage, the optimized graph as an SVG picture, the buffer plan over time, per-kernel times
    when ``profile`` (``Executable.profile``'s result) is given, and each kernel with its ops, the
    user's source lines, its kernel IR, LLVM IR, assembly and PTX. All text is HTML-escaped.

    >>> import numpy as np, compiler as cc
    >>> from runtime import Session
    >>> x = cc.placeholder("float32", shape=(None, 3), name="x")
    >>> y = cc.exp(x) * 2.0
    >>> with Session() as sess:
    ...     page = render_html_report(sess.compile(y, {x: np.ones((2, 3), "float32")}).step)
    >>> page.startswith("<!DOCTYPE html>") and "<svg" in page and "kernel-0" in page
    True
    """
    program = step.program
    graph = layered_layout(parse_graph_text(step.texts["optimized"]))
    kernel_of_op: dict[tuple[str, str, str], int] = {}
    for position, kernel in enumerate(program.kernels):
        for cover in kernel.covers:
            kernel_of_op.setdefault(cover, position)
    node_kernels = {box.node.index: kernel_of_op.get((box.node.op_type, box.node.label, box.node.where))
                    for box in graph.boxes}
    functions: dict[str, tuple[dict[str, str], str]] = {}
    for _, stage, dialect in _LISTINGS:
        text, problem = _stage_text(step, stage)
        functions[stage] = (function_texts(text, dialect) if text is not None else {}, problem)
    seconds_by_kernel = {entry["name"]: entry["seconds"] for entry in profile or ()}
    kernels = []
    for kernel in program.kernels:
        detail = ""
        if kernel.scan:
            detail = f"running {kernel.combiner} along axis {kernel.reduce_axes[0]}"
        elif kernel.reduce_axes:
            detail = f"{kernel.combiner} over axes {', '.join(map(str, kernel.reduce_axes))}"
        listings = []
        for title, stage, _ in _LISTINGS:
            found, problem = functions[stage]
            listings.append((title, kernel_functions(found, kernel.name),
                             problem or f"{kernel.name} is not a function of its own in this stage "
                                        f"(inlined into the step's entry point: see the whole {stage} below)"))
        kernels.append({
            "name": kernel.name, "kind": kernel.kind, "detail": detail,
            "space": "x".join(map(str, kernel.space)) or "scalar",
            "ops": [{"type": op_type, "name": name, "where": where, "source": _source_line(where)}
                    for op_type, name, where in kernel.covers],
            "body": "\n".join(format_expr(kernel.body, kernel.scatter)),
            "seconds": seconds_by_kernel.get(kernel.name), "listings": listings})
    stages = [(stage, text if text is not None else problem)
              for stage in _WHOLE_STAGES for text, problem in [_stage_text(step, stage)]]
    timings = list(step.timings.items())
    profile_seconds = [entry["seconds"] for entry in profile or ()]
    return _HTML_ENVIRONMENT.get_template("report.html.j2").render(
        kernels=kernels, graph=graph, node_kernels=node_kernels, colour=_kernel_colour,
        timings=timings, total_timing=sum(s for _, s in timings),
        longest_timing=max([s for _, s in timings] + [1e-9]),
        memory=memory_chart(program),
        bytes_by_role={role: sum(b.nbytes for b in program.buffers if b.role == role) for role in ROLES},
        temp_bytes=sum(b.nbytes for b in program.buffers if b.role == "temp"),
        profile=list(profile or ()), profile_total=sum(profile_seconds),
        profile_longest=max(profile_seconds, default=0.0), stages=stages)

"""A module in pieces that compile on their own and link by symbol (see ``runtime.jit``).

LLVM's cost grows with what it compiles, and much of a new step is kernels that an earlier step
or model already compiled: the same elementwise or reduction at the same shape, the same
optimizer update. ``split_module`` cuts a step module into *units*, one per kernel, each
compiled and cached under its own text, and an *entry* module with the step's entry point that
calls them, so that a changed model recompiles only its changed kernels. ``split_exports`` cuts
a library into one module per routine it exports, so that a process compiles only the routines
its steps call.

Both read the LLVM IR that llvmlite prints (``compiler.codegen``): one ``define`` per function
with its body between a ``{`` line and a ``}`` line, one line per ``declare`` and per global.
Text this reader does not know (metadata, attribute groups, named types, unusual linkage) is
not split: the module is then compiled whole, as before.

A unit's functions are renamed after what they compute: the symbol holds a hash of the unit's
text with its own names blanked out, so that the same kernel has the same symbol, and the same
cache entry, in every step and every model.
"""
from __future__ import annotations

import hashlib
import math
import re
from dataclasses import dataclass
from typing import Callable, Collection, Mapping

from compiler.codegen.cpu import plan_kernel, thread_count
from compiler.kernel_ir import Branch, Gather, Loop, Prim, Program, ScalarExpr, schedule_kernels

# A global name as llvmlite prints it (always quoted) or as LLVM does (bare where it may be).
_REFERENCE = re.compile(r'@"((?:[^"\\]|\\.)*)"|@([-a-zA-Z$._][-a-zA-Z$._0-9]*)')
_DEFINE = re.compile(r'define\s+(?:(internal|private)\s+)?')
_OTHER_LINKAGE = re.compile(r'(?:define|declare)\s+(?:available_externally|linkonce|linkonce_odr|weak|weak_odr|'
                            r'common|appending|extern_weak|external)\b')
_GLOBAL_LINKAGE = re.compile(r'\s*=\s*(internal|private)\b')
_HEADER_PREFIXES = ("target triple", "target datalayout", "source_filename")
SYMBOL_PREFIX = "graphgrad_kernel_"


@dataclass(frozen=True)
class Unit:
    """One kernel's module: ``text`` defines functions that were ``functions`` in the step module."""

    text: str
    functions: tuple[str, ...]


@dataclass(frozen=True)
class Split:
    """A step module as its kernels' units and the entry module that calls them."""

    units: tuple[Unit, ...]
    entry: str


@dataclass(frozen=True)
class _Chunk:
    kind: str          # "define", "declare" or "global"
    name: str
    text: str
    references: frozenset[str]

    @property
    def local(self) -> bool:
        """Whether it has internal or private linkage (is invisible outside its module)."""
        if self.kind == "define":
            match = _DEFINE.match(self.text)
            return match is not None and match.group(1) is not None
        if self.kind == "global":
            name = _REFERENCE.match(self.text)
            return name is not None and _GLOBAL_LINKAGE.match(self.text, name.end()) is not None
        return False


def _name_of(match: re.Match[str]) -> str:
    return match.group(1) if match.group(1) is not None else match.group(2)


def _read(text: str) -> tuple[str, list[_Chunk]] | None:
    """The module's header (triple, data layout) and its top-level entities in order, or None for
    text this reader does not know."""
    header: list[str] = []
    chunks: list[_Chunk] = []
    lines = text.splitlines()
    position = 0
    while position < len(lines):
        line = lines[position]
        position += 1
        if not line.strip() or line.startswith(";"):
            continue
        if line.startswith(_HEADER_PREFIXES) or re.match(r"![0-9A-Za-z_.]+ = ", line):
            # Named metadata (branch weights the math library's branches carry): every part
            # module gets all of it, unused metadata being harmless.
            header.append(line)
            continue
        if line.startswith("define "):
            try:
                end = lines.index("}", position)
            except ValueError:
                return None
            body, position, kind = [line, *lines[position:end + 1]], end + 1, "define"
        elif line.startswith("declare "):
            body, kind = [line], "declare"
        elif line.startswith("@"):
            body, kind = [line], "global"
        else:
            return None
        first = _REFERENCE.search(line)
        if first is None or _OTHER_LINKAGE.match(line):
            return None
        chunk_text = "\n".join(body)
        name = _name_of(first)
        references = frozenset(_name_of(m) for m in _REFERENCE.finditer(chunk_text)) - {name}
        chunks.append(_Chunk(kind, name, chunk_text, references))
    if len({chunk.name for chunk in chunks}) != len(chunks):
        return None
    return "\n".join(header), chunks


def _rename(text: str, names: Mapping[str, str]) -> str:
    def replace(match: re.Match[str]) -> str:
        name = _name_of(match)
        return f'@"{names[name]}"' if name in names else match.group(0)
    return _REFERENCE.sub(replace, text)


def _module(header: str, parts: list[str]) -> str:
    return "\n\n".join([header, *parts]) + "\n"


def split_module(text: str, entry_symbol: str,
                 separate: Callable[[tuple[str, ...]], bool] = lambda functions: True) -> Split | None:
    """Split a step module into units and an entry module, or None when it must be compiled
    whole. The functions the entry point's callees reach make one group per kernel (a kernel, its
    ``_init``, its ``_part``, its ``_check``); a group becomes a unit when ``separate`` (given the
    group's names) says so; the others stay in the entry module, as do functions that use a
    global variable. Kernels with the same text are one unit."""
    read = _read(text)
    if read is None:
        return None
    header, chunks = read
    by_name = {chunk.name: chunk for chunk in chunks}
    entry = by_name.get(entry_symbol)
    if entry is None or entry.kind != "define":
        return None
    defined = [chunk for chunk in chunks if chunk.kind == "define" and chunk is not entry]
    if any(entry_symbol in chunk.references for chunk in defined):
        return None
    # A function that uses a global variable (a split kernel's part, when profiling, writes the
    # profile's counters) stays with the entry point, which defines the variable.
    globals_ = {chunk.name for chunk in chunks if chunk.kind == "global"}
    defined = [chunk for chunk in defined if not chunk.references & globals_]

    parent = {chunk.name: chunk.name for chunk in defined}   # union-find over references

    def root(name: str) -> str:
        while parent[name] != name:
            parent[name] = parent[parent[name]]
            name = parent[name]
        return name
    for chunk in defined:
        for other in chunk.references & parent.keys():
            parent[root(other)] = root(chunk.name)
    groups: dict[str, list[_Chunk]] = {}
    for chunk in defined:
        groups.setdefault(root(chunk.name), []).append(chunk)

    units: dict[str, Unit] = {}
    renames: dict[str, str] = {}
    for members in groups.values():
        names = tuple(chunk.name for chunk in members)
        outside = frozenset().union(*(chunk.references for chunk in members)) - set(names)
        if not separate(names) or any(by_name[name].kind == "define" for name in outside if name in by_name):
            continue
        declarations = sorted(by_name[name].text for name in outside if name in by_name)
        blanked = [_rename(chunk.text, {name: f"@{index}" for index, name in enumerate(names)}) for chunk in members]
        digest = hashlib.sha256(_module(header, declarations + blanked).encode()).hexdigest()[:24]
        symbols = {name: f"{SYMBOL_PREFIX}{digest}_{index}" for index, name in enumerate(names)}
        renames.update(symbols)
        definitions = [_rename(chunk.text, symbols) for chunk in members]
        # External linkage for what the entry module calls; the rest stays internal.
        definitions = [_DEFINE.sub("define ", d, count=1) if any(chunk.name in c.references for c in chunks
                                                                 if c.name not in names) else d
                       for chunk, d in zip(members, definitions)]
        units.setdefault(digest, Unit(_module(header, declarations + definitions), names))

    # The entry module: the entry point and what stayed with it, declaring the units' functions.
    called = frozenset().union(*(chunk.references for chunk in chunks if chunk.name not in renames))
    declarations = list(dict.fromkeys(_DEFINE.sub("declare ", _rename(chunk.text, renames).splitlines()[0], count=1)
                                      for chunk in chunks if chunk.name in renames and chunk.name in called))
    rest = [_rename(chunk.text, renames) for chunk in chunks if chunk.name not in renames]
    return Split(tuple(units.values()), _module(header, declarations + rest))


def split_exports(text: str) -> dict[str, str] | None:
    """One module per function that ``text`` exports (defines with external linkage): the function,
    the internal functions and globals it reaches, and the declarations they need. Internal code
    or data two exports share is in both, each copy private to its module. None when an export
    reaches another export or a global that is not internal, or for text this reader does not
    know."""
    read = _read(text)
    if read is None:
        return None
    header, chunks = read
    by_name = {chunk.name: chunk for chunk in chunks}
    pieces: dict[str, str] = {}
    for export in (chunk for chunk in chunks if chunk.kind == "define" and not chunk.local):
        reached = {export.name}
        pending = [export]
        while pending:
            for name in pending.pop().references - reached:
                chunk = by_name.get(name)
                if chunk is None:
                    continue
                if chunk.kind != "declare" and not chunk.local:
                    return None
                reached.add(name)
                pending.append(chunk)
        pieces[export.name] = _module(header, [chunk.text for chunk in chunks if chunk.name in reached])
    return pieces


def kernel_work(program: Program) -> dict[str, int]:
    """How many points each kernel of ``program`` computes in a run, by kernel name (what its
    tier is chosen by): 0 for a kernel that is one call of the GEMM library (its output's size
    when it is checked for NaN and Inf, a loop over the output); a kernel inside a
    loop of the schedule may run any number of times, so it counts as large."""
    looped: set[int] = set()

    def walk(steps: tuple) -> None:
        for step in steps:
            if isinstance(step, Loop):
                looped.update(schedule_kernels(step.condition) + schedule_kernels(step.body))
            elif isinstance(step, Branch):
                walk(step.taken)
                walk(step.otherwise)
    walk(program.steps())
    threads = thread_count()
    work: dict[str, int] = {}
    for position, kernel in enumerate(program.kernels):
        if plan_kernel(kernel, threads).gemm:
            # The call itself is cheap to compile; its numerics check walks the whole output.
            work[kernel.name] = math.prod(kernel.out_space) if kernel.check else 0
        else:
            work[kernel.name] = 1 << 62 if position in looped else math.prod(kernel.space)
    return work


# Primitives whose evaluation is a long chain of dependent operations (mathlib's polynomials,
# reductions of the argument and divisions).
_LONG_PRIMITIVES = frozenset({"exp", "expm1", "log", "log1p", "tanh", "sigmoid", "sin", "cos", "erf", "atan",
                              "pow", "floormod"})


def chained_kernels(program: Program) -> frozenset[str]:
    """Names of the elementwise kernels whose body evaluates a transcendental function: compiled
    with more vectors interleaved per iteration (``tiers.HOT_CHAINS``) when they are large."""
    def long_chain(expr: ScalarExpr) -> bool:
        if isinstance(expr, Prim):
            return expr.op in _LONG_PRIMITIVES or any(long_chain(arg) for arg in expr.args)
        return isinstance(expr, Gather) and long_chain(expr.index)
    return frozenset(kernel.name for kernel in program.kernels
                     if kernel.kind == "elementwise" and long_chain(kernel.body))


def kernel_of(name: str, kernels: Collection[str]) -> str | None:
    """Which of ``kernels`` function ``name`` belongs to (``k7`` for ``k7_init``), or None."""
    while name:
        if name in kernels:
            return name
        name = name.rpartition("_")[0]
    return None


def work_of(name: str, work: Mapping[str, int]) -> int | None:
    """The work of the kernel that function ``name`` belongs to (``k7`` for ``k7_init``), or None."""
    kernel = kernel_of(name, work)
    return None if kernel is None else work[kernel]

"""The ops layer's imports: every module of ``compiler/ops`` imports, the modules import one another
without a cycle (counting imports inside functions too), and none imports ``compiler.codegen``."""
from __future__ import annotations

import ast
import importlib
import importlib.util
import pathlib

import pytest

import compiler.ops

OPS_DIR = pathlib.Path(compiler.ops.__file__).parent
OPS_PACKAGE = "compiler.ops"
MODULES = sorted(f"{OPS_PACKAGE}.{path.stem}" for path in OPS_DIR.glob("*.py") if path.stem != "__init__")


def _source_path(module: str) -> pathlib.Path:
    if module == OPS_PACKAGE:
        return OPS_DIR / "__init__.py"
    return OPS_DIR / f"{module.rpartition('.')[2]}.py"


def _imported_modules(module: str) -> set[str]:
    """Every module that ``module`` names in an import statement, anywhere in its source."""
    package = OPS_PACKAGE
    found: set[str] = set()
    for node in ast.walk(ast.parse(_source_path(module).read_text())):
        if isinstance(node, ast.Import):
            found.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            base = importlib.util.resolve_name("." * node.level + (node.module or ""), package)
            found.add(base)
            # ``from . import array`` names the module compiler.ops.array
            found.update(f"{base}.{alias.name}" for alias in node.names
                         if f"{base}.{alias.name}" in MODULES)
    return found


def _ops_graph() -> dict[str, set[str]]:
    return {module: {m for m in _imported_modules(module) if m in MODULES and m != module}
            for module in MODULES}


def _find_cycle(graph: dict[str, set[str]]) -> list[str] | None:
    """One import cycle as a path that returns to its start, or None."""
    done: set[str] = set()
    path: list[str] = []

    def visit(module: str) -> list[str] | None:
        if module in path:
            return path[path.index(module):] + [module]
        if module in done:
            return None
        path.append(module)
        for target in sorted(graph[module]):
            cycle = visit(target)
            if cycle:
                return cycle
        path.pop()
        done.add(module)
        return None

    for module in sorted(graph):
        cycle = visit(module)
        if cycle:
            return cycle
    return None


@pytest.mark.parametrize("module", MODULES)
def test_each_ops_module_imports(module: str) -> None:
    importlib.import_module(module)


def test_ops_modules_import_one_another_without_a_cycle() -> None:
    cycle = _find_cycle(_ops_graph())
    assert cycle is None, "import cycle in compiler/ops: " + " -> ".join(cycle or [])


@pytest.mark.parametrize("module", [OPS_PACKAGE] + MODULES)
def test_ops_modules_do_not_import_codegen(module: str) -> None:
    codegen = sorted(m for m in _imported_modules(module)
                     if m == "compiler.codegen" or m.startswith("compiler.codegen."))
    assert codegen == [], f"{module} imports {codegen}: ops may not depend on code generation"


def test_the_cycle_finder_finds_a_cycle() -> None:
    assert _find_cycle({"a": {"b"}, "b": {"c"}, "c": {"a"}}) == ["a", "b", "c", "a"]
    assert _find_cycle({"a": {"b"}, "b": set()}) is None

"""The ``>>>`` examples in the docstrings of ``compiler``, ``runtime`` and ``optim`` run as tests, one
test per docstring, so the documentation cannot drift from the code.

They run here rather than through ``--doctest-modules`` so that they share the test fixtures: the
examples that run a ``Session`` compile into the tests' private compile cache (``conftest.py``),
never into the user's.
"""
from __future__ import annotations

import doctest
import importlib
import pkgutil
from types import ModuleType

import pytest

PACKAGES = ("compiler", "runtime", "optim")
# Modules not imported for their examples, each with the reason.
NOT_IMPORTED = {
    "compiler.__main__": "the command line (``python -m compiler``); it holds no examples",
}
OPTION_FLAGS = doctest.ELLIPSIS | doctest.NORMALIZE_WHITESPACE


def _modules() -> list[ModuleType]:
    modules = []
    for package_name in PACKAGES:
        package = importlib.import_module(package_name)
        modules.append(package)
        for info in pkgutil.walk_packages(package.__path__, prefix=f"{package_name}."):
            if info.name not in NOT_IMPORTED:
                modules.append(importlib.import_module(info.name))
    return modules


def _docstring_examples() -> list[doctest.DocTest]:
    finder = doctest.DocTestFinder(exclude_empty=True)
    examples = [test for module in _modules() for test in finder.find(module) if test.examples]
    return sorted(examples, key=lambda test: test.name)


DOCSTRING_EXAMPLES = _docstring_examples()


def test_every_package_has_examples() -> None:
    # By package, not by module: modules move between packages' files, their examples with them.
    assert {test.name.split(".")[0] for test in DOCSTRING_EXAMPLES} == set(PACKAGES)
    assert len(DOCSTRING_EXAMPLES) >= 50


@pytest.mark.parametrize("example", DOCSTRING_EXAMPLES, ids=lambda test: test.name)
def test_docstring_example(example: doctest.DocTest) -> None:
    report: list[str] = []
    runner = doctest.DocTestRunner(optionflags=OPTION_FLAGS)
    result = runner.run(example, out=report.append)
    assert result.failed == 0, f"{example.filename}:{example.lineno}\n" + "".join(report)

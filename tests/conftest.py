"""Shared test helpers: fresh graphs, and running the same fetches on both targets."""
from __future__ import annotations

import shutil
import tempfile

import pytest
from hypothesis.configuration import set_hypothesis_home_dir

import compiler as cc

PTXAS = shutil.which("ptxas")

# Hypothesis caches the constants it reads from source files while the tests are collected (before
# any fixture runs): into a folder removed at exit, not a ``.hypothesis`` folder in the checkout.
# The property tests keep no example database.
_HYPOTHESIS_HOME = tempfile.TemporaryDirectory(prefix="graphgrad-hypothesis-")
set_hypothesis_home_dir(_HYPOTHESIS_HOME.name)


@pytest.fixture
def graph():
    """A fresh graph, made the default for the test."""
    g = cc.Graph()
    with g.as_default():
        yield g


@pytest.fixture(autouse=True, scope="session")
def _private_compile_cache(tmp_path_factory):
    """Tests use their own compile cache, so they neither read nor fill the user's."""
    import os
    os.environ["GRAPHGRAD_CACHE_DIR"] = str(tmp_path_factory.mktemp("compile-cache"))
    yield


@pytest.fixture(autouse=True, scope="session")
def _worker_pool_at_full_size():
    """The worker pool starts once per process, with the threads of that moment (workers stay):
    started here, before a test sets GRAPHGRAD_THREADS=1 for itself, so that the split kernels and
    GEMMs of every later test run on all of the pool's threads, not serially."""
    from runtime import jit
    jit.ensure_pool()
    yield


def pytest_sessionfinish(session) -> None:
    """Under pytest-xdist (``-n``), a worker hands its ptxas figures to the controller, which reports them."""
    workeroutput = getattr(session.config, "workeroutput", None)
    if workeroutput is not None:
        from .runtime import ptxas_check
        workeroutput["ptxas_assembled"] = [(test, arch, assembled.registers, assembled.spill_stores)
                                           for test, arch, assembled in ptxas_check.ASSEMBLED]


@pytest.hookimpl(optionalhook=True)
def pytest_testnodedown(node, error) -> None:
    """pytest-xdist's controller: a worker finished; keep its ptxas figures for the summary."""
    from .runtime import ptxas_check
    for test, arch, registers, spill_stores in getattr(node, "workeroutput", {}).get("ptxas_assembled", ()):
        ptxas_check.ASSEMBLED.append((test, arch, ptxas_check.Assembled(list(registers), list(spill_stores))))


def pytest_terminal_summary(terminalreporter) -> None:
    """The ptxas report of the GPU tests (registers and spills per arch), when any assembled PTX."""
    from .runtime import ptxas_check
    lines = ptxas_check.report()
    if lines:
        terminalreporter.section("ptxas: registers and spill stores of the GPU kernels")
        for line in lines:
            terminalreporter.write_line(line)

"""Shared test helpers: fresh graphs, and running the same fetches on both targets."""
from __future__ import annotations

import shutil

import pytest

import compiler as cc

PTXAS = shutil.which("ptxas")


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

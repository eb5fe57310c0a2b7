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

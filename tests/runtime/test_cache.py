"""The persistent compile cache: hits skip LLVM, bad entries are ignored and rebuilt."""
from __future__ import annotations

import subprocess
import sys

import numpy as np
import pytest

import compiler as cc
from runtime import Session, cache

SCRIPT = """
import numpy as np, compiler as cc
from runtime import Session
x = cc.placeholder("float32", (None, 3), name="x")
w = cc.Variable(np.arange(3, dtype="float32"), name="w")
total = cc.reduce_sum(cc.exp(x * w))
with Session() as sess:
    y = sess.run(total, {x: np.ones((2, 3), "float32")})
    exe = sess.compile(total, {x: np.ones((2, 3), "float32")})
    print(repr(float(y)), sorted(exe.step.timings))
"""


def _run(env: dict) -> tuple[float, list[str]]:
    result = subprocess.run([sys.executable, "-c", SCRIPT], capture_output=True, text=True, env=env, check=True)
    value, phases = result.stdout.strip().split(" ", 1)
    return float(value), eval(phases)


@pytest.fixture
def cache_env(tmp_path, monkeypatch):
    import os
    env = dict(os.environ, GRAPHGRAD_CACHE_DIR=str(tmp_path / "cache"))
    env.pop("GRAPHGRAD_CACHE", None)  # the cache is on unless a test turns it off
    return env, tmp_path / "cache"


def test_second_process_hits_the_cache(cache_env) -> None:
    env, root = cache_env
    first, phases = _run(env)
    assert "llvm-opt" in phases and "cache-hit" not in phases
    assert list(root.glob("*.obj"))
    second, phases = _run(env)
    assert "cache-hit" in phases and "llvm-opt" not in phases
    assert second == first == pytest.approx(2 * (1 + np.e + np.e ** 2), rel=1e-6)


@pytest.mark.parametrize("damage", ["truncate", "flip-payload", "foreign-key", "garbage", "empty"])
def test_a_bad_entry_is_ignored_and_rebuilt(cache_env, damage) -> None:
    env, root = cache_env
    expected, _ = _run(env)
    for path in root.glob("*.obj"):
        data = bytearray(path.read_bytes())
        if damage == "truncate":
            data = data[: len(data) // 2]
        elif damage == "flip-payload":
            data[-10] ^= 0xFF
        elif damage == "foreign-key":
            data[20] ^= 0xFF  # inside the stored key
        elif damage == "garbage":
            data = bytearray(b"\x7fELF not ours" * 50)
        else:
            data = bytearray()
        path.write_bytes(bytes(data))
    value, phases = _run(env)
    assert value == expected
    assert "llvm-opt" in phases  # rebuilt, not loaded
    value, phases = _run(env)     # and the rebuilt entry is good again
    assert "cache-hit" in phases and value == expected


def test_cache_can_be_turned_off(cache_env) -> None:
    env, root = cache_env
    env = dict(env, GRAPHGRAD_CACHE="0")
    _run(env)
    _, phases = _run(env)
    assert "llvm-opt" in phases and not root.exists()


def test_keys_depend_on_the_module_text() -> None:
    assert cache.key_for("a") != cache.key_for("b")
    assert cache.key_for("a") == cache.key_for("a")

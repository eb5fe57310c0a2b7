"""Steps compiled kernel by kernel (runtime.link, runtime.jit): each large kernel is a unit of its
own, named and cached by its text, so a kernel two models share is compiled once; the GEMM
library is split by the routines it exports."""
from __future__ import annotations

import json
import os
import subprocess
import sys

import llvmlite.binding as llvm
import numpy as np
import pytest

import compiler as cc
from compiler.codegen.cpu import STEP_SYMBOL
from compiler.codegen.gemm import LIBRARY_SYMBOLS, build_library
from compiler.codegen.tiers import HOT, HOT_CHAINS, HOT_WORK
from compiler.pipeline import compile_step
from runtime import Session, jit, link

# Two outputs: one whose kernel does not depend on the hidden width H, one whose kernels do.
SCRIPT = """
import json, sys
import numpy as np, compiler as cc
from runtime import Session
hidden = int(sys.argv[1])
x = cc.placeholder("float32", (64, 128), name="x")
w = cc.Variable(np.linspace(-1, 1, 128 * hidden, dtype="float32").reshape(128, hidden), name="w")
shared = cc.reduce_sum(cc.exp(x * 0.5), axis=1)
changed = cc.reduce_sum(cc.tanh(cc.matmul(x, w)), axis=0)
feeds = {x: np.linspace(-1, 1, 64 * 128, dtype="float32").reshape(64, 128)}
with Session() as sess:
    sess.run(cc.global_variables_initializer())
    exe = sess.compile([shared, changed], feeds)
    values = exe.run(feeds)
    print(json.dumps({"pieces": exe.pieces, "phases": sorted(exe.step.timings),
                      "shared": float(values[0].sum()), "changed": float(values[1].sum())}))
"""


def _run(env: dict, hidden: int) -> dict:
    result = subprocess.run([sys.executable, "-c", SCRIPT, str(hidden)], capture_output=True, text=True, env=env,
                            check=True)
    return json.loads(result.stdout)


@pytest.fixture
def cache_env(tmp_path):
    env = dict(os.environ, GRAPHGRAD_CACHE_DIR=str(tmp_path / "cache"))
    env.pop("GRAPHGRAD_CACHE", None)
    return env


def _reference(hidden: int) -> tuple[float, float]:
    x = np.linspace(-1, 1, 64 * 128).reshape(64, 128)
    w = np.linspace(-1, 1, 128 * hidden, dtype="float32").reshape(128, hidden).astype(np.float64)
    return float(np.exp(x * 0.5).sum()), float(np.tanh(x @ w).sum())


def test_a_second_model_compiles_only_the_kernels_it_changed(cache_env) -> None:
    first = _run(cache_env, 64)
    assert first["pieces"]["loaded"] == 0 and first["pieces"]["compiled"] >= 3
    again = _run(cache_env, 64)     # the same model: every piece is loaded
    assert again["pieces"] == {"compiled": 0, "loaded": first["pieces"]["compiled"], "reused": 0}
    assert "llvm-opt" not in again["phases"] and "cache-hit" in again["phases"]
    wider = _run(cache_env, 80)     # the exp kernel is the same, the tanh kernel and the entry point are new
    assert wider["pieces"]["loaded"] >= 1 and wider["pieces"]["compiled"] >= 2
    for result, hidden in ((first, 64), (again, 64), (wider, 80)):
        assert (result["shared"], result["changed"]) == pytest.approx(_reference(hidden), rel=1e-4)


def test_a_step_compiled_again_in_the_process_reuses_its_pieces(monkeypatch) -> None:
    monkeypatch.setenv("GRAPHGRAD_CACHE", "0")
    feeds_value = np.random.default_rng(0).standard_normal((64, 128)).astype("float32")
    counts = []
    for _ in range(2):
        graph = cc.Graph()
        with graph.as_default():
            x = cc.placeholder("float32", (64, 128), name="x")
            y = cc.reduce_sum(cc.sigmoid(x) * 3.25, axis=1)
            with Session(graph) as sess:
                exe = sess.compile(y, {x: feeds_value})
                np.testing.assert_allclose(exe.run({x: feeds_value})[0],
                                           (3.25 / (1.0 + np.exp(-feeds_value.astype(np.float64)))).sum(axis=1),
                                           rtol=1e-5)
                counts.append(exe.pieces)
    assert counts[0]["compiled"] >= 2 and counts[0]["reused"] == 0
    assert counts[1] == {"compiled": 0, "loaded": 0, "reused": counts[0]["compiled"]}


def _step_text(build) -> tuple[str, dict[str, int]]:
    graph = cc.Graph()
    with graph.as_default():
        fetches, feeds = build()
        step = compile_step(fetches, feeds)
    return step.texts["llvm"], link.kernel_work(step.program)


def _parses(text: str) -> None:
    llvm.parse_assembly(text).verify()


def test_units_verify_and_the_same_kernel_has_the_same_unit_in_two_models() -> None:
    def model(extra: bool):
        def build():
            x = cc.placeholder("float32", (64, 128), name="x")
            y = cc.tanh(x) * 2.0
            fetches = [y, cc.reduce_max(x * 3.0, axis=0)] if extra else [y]
            return fetches, {x: (64, 128)}
        return build
    splits = []
    for extra in (False, True):
        text, work = _step_text(model(extra))
        split = link.split_module(text, STEP_SYMBOL)
        assert split is not None
        for unit in split.units:
            _parses(unit.text)
            assert link.SYMBOL_PREFIX in unit.text and "internal" not in unit.text.split("{")[0]
        _parses(split.entry)
        assert f'define void @"{STEP_SYMBOL}"' in split.entry
        splits.append(split)
    # The kernel the models share (renamed k0 in both, but named by its text) is the same unit.
    alone, with_extra = ({unit.text for unit in split.units} for split in splits)
    assert alone and alone <= with_extra and len(with_extra) > len(alone)


def test_small_kernels_stay_with_the_entry_point() -> None:
    def build():
        x = cc.placeholder("float32", (64, 128), name="x")
        return [cc.exp(x), cc.reduce_sum(x[:2, :3])], {x: (64, 128)}
    text, work = _step_text(build)
    sizes = sorted(work.values())
    assert sizes[0] < HOT_WORK <= sizes[-1]
    split = link.split_module(text, STEP_SYMBOL, lambda functions: jit._is_hot(functions, work))
    assert split is not None and len(split.units) == 1
    (unit,) = split.units
    assert all(link.work_of(name, work) >= HOT_WORK for name in unit.functions)
    small = [name for name, size in work.items() if size < HOT_WORK]
    assert all(f'define internal void @"{name}"' in split.entry for name in small)


def test_large_elementwise_kernels_of_transcendentals_interleave_four_vectors(monkeypatch) -> None:
    """Only elementwise kernels whose body evaluates exp, tanh, ... compile at HOT_CHAINS (four
    vectors per iteration); others, reductions with an exp among them, keep HOT."""
    graph = cc.Graph()
    with graph.as_default():
        x = cc.placeholder("float32", (64, 128), name="x")
        fetches = [cc.tanh(x) * 2.0, x * 3.0 + 1.0, cc.reduce_sum(cc.exp(x), axis=1)]
    feeds = {x: np.linspace(-2, 2, 64 * 128, dtype="float32").reshape(64, 128)}
    tiers: dict[str, str] = {}
    add = jit._Linker.add

    def record(self, text, tier, key=None):  # type: ignore[no-untyped-def]
        names = [line.split('@"', 1)[1].split('"', 1)[0] for line in (text if isinstance(text, str) else "").splitlines()
                 if line.startswith("define")]
        for name in names:
            tiers[name] = tier.name
        return add(self, text, tier, key)
    monkeypatch.setattr(jit._Linker, "add", record)
    with Session(graph) as sess:
        program = sess.compile(fetches, feeds).program
        results = sess.run(fetches, feeds)
    chained = link.chained_kernels(program)
    kinds = {kernel.name: kernel.kind for kernel in program.kernels}
    assert len(chained) == 1 and all(kinds[name] == "elementwise" for name in chained)
    assert sorted(set(tiers.values())) == ["hot", "hot-chains", "light"]
    assert "interleave_count=4" in HOT_CHAINS.describe() and "interleave_count" not in HOT.describe()
    np.testing.assert_allclose(results[0], np.tanh(feeds[x]) * 2.0, rtol=2e-6)
    np.testing.assert_allclose(results[2], np.exp(feeds[x]).sum(axis=1), rtol=2e-6)


def test_kernels_in_a_loop_count_as_large() -> None:
    def build():
        x = cc.placeholder("float32", (4,), name="x")
        _, y = cc.while_loop(lambda i, v: i < 3, lambda i, v: (i + 1, cc.sin(v) * x + 1.0), (0, x))
        return [y], {x: (4,)}
    graph = cc.Graph()
    with graph.as_default():
        fetches, feeds = build()
        program = compile_step(fetches, feeds).program
    work = link.kernel_work(program)
    assert program.schedule is not None
    assert any(size >= HOT_WORK for size in work.values())


def test_a_checked_product_counts_its_output() -> None:
    # The GEMM call is cheap to compile, but its NaN/Inf check loops over the whole output.
    works = []
    for checked in (False, True):
        graph = cc.Graph()
        with graph.as_default():
            a = cc.placeholder("float32", (128, 256), name="a")
            b = cc.placeholder("float32", (256, 64), name="b")
            program = compile_step([a @ b], {a: (128, 256), b: (256, 64)}, check_numerics=checked).program
        assert program.kernels[0].kind == "matmul"
        works.append(link.kernel_work(program)[program.kernels[0].name])
    assert works == [0, 128 * 64]


def test_text_the_reader_does_not_know_is_compiled_whole() -> None:
    text = ('define void @"graphgrad_step"(ptr %t) {\n  ret void\n}\n'
            'module asm "nop"\n')
    assert link.split_module(text, STEP_SYMBOL) is None
    assert link.split_module('define void @"other"() {\n  ret void\n}\n', STEP_SYMBOL) is None


def test_the_library_splits_into_one_module_per_routine() -> None:
    pieces = link.split_exports(str(build_library("float32", 2)))
    assert pieces is not None
    assert set(pieces) == {symbol.format(dtype="float32") for symbol in LIBRARY_SYMBOLS}
    for name, text in pieces.items():
        _parses(text)
        exported = [line for line in text.splitlines() if line.startswith("define ") and "internal" not in line]
        assert len(exported) == 1 and f'@"{name}"' in exported[0]


@pytest.mark.parametrize("op", [cc.sin, cc.cos, lambda t: cc.random_normal((64, 128), seed=1) * t])
def test_a_step_whose_kernels_carry_branch_weights_is_split(op) -> None:
    # The math library's branches carry !prof metadata: a module the reader refused was compiled
    # whole at full optimisation, 20x slower, and cached as one piece.
    def build():
        x = cc.placeholder("float32", (64, 128), name="x")
        return [cc.reduce_sum(op(x), axis=1)], {x: (64, 128)}
    text, _ = _step_text(build)
    assert "!prof" in text
    split = link.split_module(text, STEP_SYMBOL)
    assert split is not None and split.units
    for unit in split.units:
        _parses(unit.text)
    _parses(split.entry)

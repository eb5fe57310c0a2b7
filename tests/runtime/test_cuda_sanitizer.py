"""``Session(target="cuda-emulated", racecheck=True, memcheck=True)`` on the real GPU schedules: the
tiled GEMM (double-buffered, asynchronous copies), block reductions and block scans report no race
as they are, and each one reports a race, naming the user's op and line, once a barrier or a wait
it needs is taken out of its schedule; a write past a buffer is dropped and reported. (The whole op table runs with race checking in
``test_cuda_emulated``; the rules themselves are tested in ``tests/compiler/codegen/test_sanitizer``.)
"""
from __future__ import annotations

import dataclasses
from typing import Callable

import numpy as np
import pytest

import compiler as cc
from compiler.codegen import nvptx
from compiler.codegen.gpu_kernel import AsyncWait, Barrier, Phase, Repeat, ScheduledKernel, ThreadState
from compiler.codegen.common import I64
from llvmlite import ir
from runtime import Session

from .test_cuda_emulated import SMALL

RNG = np.random.default_rng(7)


RIGHT = RNG.standard_normal((13, 11)).astype(np.float32)


def _case(shape: tuple[int, int], op: Callable[[cc.Tensor], cc.Tensor],
          reference: Callable[[np.ndarray], np.ndarray]) -> tuple[cc.Graph, cc.Tensor, dict, np.ndarray]:
    """A graph of ``op`` on one float32 placeholder of ``shape``: (graph, output, feeds, expected)."""
    value = RNG.standard_normal(shape).astype(np.float32)
    graph = cc.Graph()
    with graph.as_default():
        x = cc.placeholder("float32", shape=shape, name="x")
        output = op(x)
    return graph, output, {x: value}, reference(value)


def _matmul() -> tuple[cc.Graph, cc.Tensor, dict, np.ndarray]:
    return _case((19, 13), lambda x: cc.matmul(x, cc.constant(RIGHT), name="product"), lambda a: a @ RIGHT)


def _reduction() -> tuple[cc.Graph, cc.Tensor, dict, np.ndarray]:
    return _case((5, 37), lambda x: cc.reduce_sum(x, axis=1, name="row_sums"), lambda a: a.sum(axis=1))


def _scan() -> tuple[cc.Graph, cc.Tensor, dict, np.ndarray]:
    return _case((3, 29), lambda x: cc.cumsum(x, axis=1, name="running_total"), lambda a: np.cumsum(a, axis=1))


BUILDERS = {"matmul": _matmul, "reduction": _reduction, "scan": _scan}


def _without(statements: tuple, drop: Callable[[object], bool]) -> tuple:
    """The statements, inside loops too, less those ``drop`` picks."""
    kept = []
    for statement in statements:
        if isinstance(statement, Repeat):
            kept.append(dataclasses.replace(statement, body=_without(statement.body, drop)))
        elif not drop(statement):
            kept.append(statement)
    return tuple(kept)


def _mutated_schedules(monkeypatch: pytest.MonkeyPatch, drop: Callable[[object], bool]) -> None:
    original = nvptx.schedule_program

    def schedule(program, limits):  # type: ignore[no-untyped-def]
        kernels: list[ScheduledKernel] = original(program, limits)
        return [dataclasses.replace(kernel, statements=_without(kernel.statements, drop)) for kernel in kernels]
    monkeypatch.setattr(nvptx, "schedule_program", schedule)


@pytest.mark.parametrize("name", sorted(BUILDERS))
def test_the_schedules_as_they_are_have_no_race(name: str) -> None:
    graph, output, feeds, expected = BUILDERS[name]()
    with Session(graph, target="cuda-emulated", gpu_limits=SMALL, racecheck=True, memcheck=True) as sess:
        np.testing.assert_allclose(sess.run(output, feeds), expected, rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("name, op_name", [("matmul", "product"), ("reduction", "row_sums"),
                                           ("scan", "running_total")])
def test_a_schedule_without_its_barriers_races(name: str, op_name: str, monkeypatch: pytest.MonkeyPatch) -> None:
    _mutated_schedules(monkeypatch, lambda statement: isinstance(statement, Barrier))
    graph, output, feeds, _ = BUILDERS[name]()
    with Session(graph, target="cuda-emulated", gpu_limits=SMALL, racecheck=True) as sess:
        with pytest.raises(cc.RaceError, match=rf"'{op_name}' \(.*test_cuda_sanitizer.py:\d+\).*thread \d+"):
            sess.run(output, feeds)


def test_the_gemm_reads_its_asynchronous_copies_only_after_waiting(monkeypatch: pytest.MonkeyPatch) -> None:
    _mutated_schedules(monkeypatch, lambda statement: isinstance(statement, AsyncWait))
    graph, output, feeds, _ = _matmul()
    with Session(graph, target="cuda-emulated", gpu_limits=SMALL, racecheck=True) as sess:
        with pytest.raises(cc.RaceError, match="asynchronous copy"):
            sess.run(output, feeds)


def test_each_barrier_of_the_gemm_is_needed(monkeypatch: pytest.MonkeyPatch) -> None:
    graph, output, feeds, _ = _matmul()
    with Session(graph, target="cuda-emulated", gpu_limits=SMALL) as sess:
        barriers = sum(isinstance(s, Barrier) for kernel in nvptx.schedule_program(
            sess.compile(output, feeds).program, SMALL) for s in _flatten(kernel.statements))
    assert barriers >= 2
    for dropped in range(barriers):
        seen = [0]

        def drop(statement: object, dropped: int = dropped, seen: list[int] = seen) -> bool:
            if not isinstance(statement, Barrier):
                return False
            seen[0] += 1
            return seen[0] - 1 == dropped
        with monkeypatch.context() as patch:
            _mutated_schedules(patch, drop)
            with Session(graph, target="cuda-emulated", gpu_limits=SMALL, racecheck=True) as sess:
                with pytest.raises(cc.RaceError):
                    sess.run(output, feeds)


def _flatten(statements: tuple) -> list:
    flat = []
    for statement in statements:
        flat.extend(_flatten(statement.body) if isinstance(statement, Repeat) else [statement])
    return flat


def _with_extra_phase(monkeypatch: pytest.MonkeyPatch, emit: Callable[[ThreadState], None]) -> None:
    """Every scheduled kernel gets one more phase, ``emit``, at its end."""
    original = nvptx.schedule_program

    def schedule(program, limits):  # type: ignore[no-untyped-def]
        return [dataclasses.replace(kernel, statements=kernel.statements + (Phase(emit),))
                for kernel in original(program, limits)]
    monkeypatch.setattr(nvptx, "schedule_program", schedule)


def _store_float(state: ThreadState, value: ir.Value, index: ir.Value) -> None:
    """output[index] = value"""
    element = ir.FloatType()
    state.b.store(value, state.b.gep(state.arguments[0], [index], source_etype=element))


def test_a_write_past_a_buffer_is_dropped_and_named(monkeypatch: pytest.MonkeyPatch) -> None:
    # out[len + thread] = 7
    _with_extra_phase(monkeypatch, lambda state: _store_float(
        state, ir.Constant(ir.FloatType(), 7.0), state.b.add(ir.Constant(I64, 19 * 11), state.thread)))
    graph, output, feeds, _ = _matmul()
    with Session(graph, target="cuda-emulated", gpu_limits=SMALL, memcheck=True) as sess:
        with pytest.raises(cc.OutOfBoundsError, match=r"out-of-bounds write of buffer b\d+ \(.*836 bytes\) in GPU kernel "
                                                      r".*'product' \(.*thread 0 writes 4 bytes at byte 836"):
            sess.run(output, feeds)


def test_two_threads_storing_one_output_element_race(monkeypatch: pytest.MonkeyPatch) -> None:
    # out[0] = thread, by every thread
    _with_extra_phase(monkeypatch, lambda state: _store_float(
        state, state.b.uitofp(state.thread, ir.FloatType()), ir.Constant(I64, 0)))
    graph, output, feeds, _ = _reduction()
    with Session(graph, target="cuda-emulated", gpu_limits=SMALL, racecheck=True) as sess:
        with pytest.raises(cc.RaceError, match=r"write after write in the output buffer b\d+ .*'row_sums' .*"
                                               r"writes byte 0, which thread \d+ of block \d+ wrote"):
            sess.run(output, feeds)


@pytest.mark.parametrize("check", ["racecheck", "memcheck"])
def test_the_checks_need_the_emulated_target(check: str) -> None:
    with pytest.raises(ValueError, match=f"{check}=True needs target='cuda-emulated'"):
        Session(cc.Graph(), target="cpu", **{check: True})

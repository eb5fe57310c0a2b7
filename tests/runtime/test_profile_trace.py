"""``Executable.profile(..., trace=path)``: the Chrome trace-event file a trace viewer opens."""
from __future__ import annotations

import inspect
import json

import numpy as np
import pytest

import compiler as cc
from runtime import Session

RUNS = 4


def _line() -> int:
    return inspect.currentframe().f_back.f_lineno  # type: ignore[union-attr]


def _profiled_trace(tmp_path, monkeypatch):
    # Two threads, so the large elementwise kernel is split into parts for the worker pool.
    monkeypatch.setenv("GRAPHGRAD_THREADS", "2")
    x = cc.placeholder("float32", shape=(None, 512), name="x")
    row_sums = cc.reduce_sum(cc.tanh(x) * 2.0, axis=1); sums_line = _line()  # noqa: E702
    shifted = cc.exp(x) + 1.0; shifted_line = _line()  # noqa: E702
    feeds = {x: np.linspace(-1, 1, 512 * 512, dtype="float32").reshape(512, 512)}
    path = tmp_path / "step.json"
    with Session() as sess:
        exe = sess.compile([row_sums, shifted], feeds)
        times = exe.profile(feeds, runs=RUNS, trace=str(path))
    lines = {f"{__file__}:{sums_line}", f"{__file__}:{shifted_line}"}
    return exe, times, json.loads(path.read_text(encoding="utf-8")), lines


def test_trace_has_a_step_slice_per_run_holding_every_kernel_once(graph, tmp_path, monkeypatch) -> None:
    exe, times, trace, lines = _profiled_trace(tmp_path, monkeypatch)
    kernels = exe.program.kernels
    events = trace["traceEvents"]
    complete = [e for e in events if e["ph"] == "X"]
    assert all({"name", "ts", "dur", "pid", "tid", "args"} <= set(e) for e in complete)
    steps = [e for e in complete if e["cat"] == "step"]
    assert [e["args"]["run"] for e in steps] == list(range(RUNS))
    for step in steps:
        slices = [e for e in complete if e["cat"] == "kernel" and e["args"]["run"] == step["args"]["run"]]
        assert [e["name"] for e in slices] == [k.name for k in kernels]  # each kernel once, in order
        for event, kernel in zip(slices, kernels):
            assert event["dur"] >= 0
            assert (event["pid"], event["tid"]) == (step["pid"], step["tid"])
            assert step["ts"] <= event["ts"] and event["ts"] + event["dur"] <= step["ts"] + step["dur"] + 1e-3
            assert event["args"]["lines"] == list(dict.fromkeys(w for _, _, w in kernel.covers))
            assert [(o["type"], o["name"], o["line"]) for o in event["args"]["ops"]] == list(kernel.covers)
        # The kernels fill the native call: compared with the cycle-counter total of the run (the
        # step slice), not with the wall time around it, which also holds Python's own work.
        assert abs(sum(e["dur"] for e in slices) - step["dur"]) <= 0.1 * step["dur"] + 1e-3
        assert step["args"]["wall_us"] > 0
    assert lines <= {line for e in complete if e["cat"] == "kernel" for line in e["args"]["lines"]}
    # Runs follow each other on the calling thread's track without overlapping.
    for earlier, later in zip(steps, steps[1:]):
        assert earlier["ts"] + earlier["dur"] <= later["ts"] + 1e-3
    names = {e["name"]: e["args"]["name"] for e in events if e["ph"] == "M"}
    assert set(names) == {"process_name", "thread_name"}


def test_split_kernels_carry_their_parts_and_the_result_is_kept(graph, tmp_path, monkeypatch) -> None:
    exe, times, trace, _ = _profiled_trace(tmp_path, monkeypatch)
    kernel_events = [e for e in trace["traceEvents"] if e.get("cat") == "kernel" and e["args"]["run"] == 0]
    parts = {e["name"]: e["args"]["parts"] for e in kernel_events}
    assert max(parts.values()) > 1, parts  # 512x512 points on two threads: split
    assert parts == {entry["name"]: entry["parts"] for entry in times}
    assert exe.last_profile is times
    assert all(entry["seconds"] >= 0 for entry in times)
    # Each part of a split kernel is a slice on the track of the thread that ran it.
    split = [name for name, count in parts.items() if count > 1]
    part_events = [e for e in trace["traceEvents"] if e.get("cat") == "part"]
    runs = [e for e in trace["traceEvents"] if e.get("cat") == "step"]
    for run in range(len(runs)):
        for name in split:
            mine = [e for e in part_events if e["args"]["run"] == run and e["args"]["kernel"] == name]
            assert sorted(e["args"]["part"] for e in mine) == list(range(parts[name])), (run, name)
            assert all(e["dur"] >= 0 and isinstance(e["tid"], int) and e["tid"] > 0 for e in mine)
    named = {e["tid"] for e in trace["traceEvents"] if e["ph"] == "M" and e["name"] == "thread_name"}
    assert {e["tid"] for e in part_events} <= named


def test_profile_without_trace_writes_nothing(graph, tmp_path, monkeypatch) -> None:
    monkeypatch.chdir(tmp_path)
    x = cc.placeholder("float32", shape=(None, 3), name="x")
    feeds = {x: np.ones((2, 3), "float32")}
    with Session() as sess:
        times = sess.compile(cc.exp(x), feeds).profile(feeds, runs=1)
    assert [entry["name"] for entry in times] == ["k0"]
    assert list(tmp_path.iterdir()) == []


def test_profile_refuses_the_emulated_gpu_target() -> None:
    """cuda-emulated runs the GPU kernels thread by thread on the CPU: timing them (it timed a CPU
    build of the step instead) would say nothing of a GPU, so profile says so."""
    graph = cc.Graph()
    with graph.as_default():
        x = cc.placeholder("float32", (8, 4), name="x")
        y = cc.reduce_sum(x * 2.0)
    feeds = {x: np.ones((8, 4), "float32")}
    with Session(graph, target="cuda-emulated") as sess:
        exe = sess.compile(y, feeds)
        with pytest.raises(ValueError, match="profile times a step's kernels on target='cpu'"):
            exe.profile(feeds)
        assert sess.run(y, feeds) == 64.0

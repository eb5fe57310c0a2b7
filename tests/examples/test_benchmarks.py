"""Smoke tests of ``examples/benchmarks/run.py`` (it runs, checks results, and writes its JSON) and of ``pools.py``.

No assertion is made on speed (DESIGN.md, principle 7): only that every number is there and positive.
Every run goes through the worker processes (one per library) that run.py starts.
"""
from __future__ import annotations

import importlib.util
import json
import math
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

ROOT = Path(__file__).resolve().parents[2]
SCRIPT = ROOT / "examples" / "benchmarks" / "run.py"


def test_quick_run_writes_json_with_positive_numbers(tmp_path: Path) -> None:
    output = tmp_path / "results.json"
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(ROOT), env.get("PYTHONPATH", "")]))
    env.pop("GRAPHGRAD_DUMP", None)
    completed = subprocess.run(
        [sys.executable, str(SCRIPT), "--quick", "--only", "run-overhead,elementwise-16M",
         "--elements", "100000", "--rounds", "2", "--json", str(output)],
        cwd=ROOT, env=env, capture_output=True, text=True, timeout=120)
    assert completed.returncode == 0, (
        f"run.py exited with {completed.returncode}\n--- stdout\n{completed.stdout}\n"
        f"--- stderr\n{completed.stderr}")
    assert "run-overhead" in completed.stdout and "elementwise-16M" in completed.stdout

    data = json.loads(output.read_text())
    assert {"environment", "settings", "skipped", "results"} <= data.keys()
    assert data["settings"]["elements"] == 100000
    for key in ("date", "command", "cpu", "cores", "versions", "blas"):
        assert key in data["environment"], key
    assert "numpy" in data["environment"]["versions"]

    assert set(data["results"]) == {"run-overhead", "elementwise-16M"}
    expected_units = {"run-overhead": "us", "elementwise-16M": "ms"}
    for name, result in data["results"].items():
        assert result["unit"] == expected_units[name]
        libraries = result["libraries"]
        assert {"graphgrad", "numpy"} <= libraries.keys(), name
        for library, entry in libraries.items():
            for field in ("median_seconds", "value"):
                assert isinstance(entry[field], float) and math.isfinite(entry[field]), (name, library, field)
                assert entry[field] > 0, (name, library, field)
            assert len(entry["samples_seconds"]) == 2 and all(s > 0 for s in entry["samples_seconds"])
            assert entry["calls_per_sample"] >= 1
        ratios = result["ratios_graphgrad_over_other"]
        assert set(ratios) == set(libraries) - {"graphgrad"}
        assert all(r > 0 for r in ratios.values())
    # An optional library that is missing is named in "skipped", never silently absent.
    for library in ("torch", "jax"):
        assert library in data["results"]["run-overhead"]["libraries"] or library in data["skipped"]
    # Each library ran in its own process, none of them the script's.
    processes = data["environment"]["processes"]
    assert {"graphgrad", "numpy"} <= processes.keys()
    pids = [p["pid"] for p in processes.values()]
    assert len(set(pids)) == len(pids) and data["environment"]["pid"] not in pids
    assert any("openblas" in line for line in processes["numpy"]["threads"]) or not data["environment"]["blas"]


@pytest.mark.parametrize("arguments", [
    ["--only", "no-such-workload"],
    ["--target", "cuda-emulated", "--only", "run-overhead"],     # a CPU workload is no GPU workload
    ["--target", "cuda", "--only", "sgemm-big"],
])
def test_unknown_workload_is_an_error(arguments: list[str]) -> None:
    completed = subprocess.run([sys.executable, str(SCRIPT), *arguments],
                               cwd=ROOT, capture_output=True, text=True, timeout=60)
    assert completed.returncode == 2
    assert "unknown workload" in completed.stderr


def _quick_round(workloads: str, directory: Path, *options: str) -> tuple[dict, subprocess.CompletedProcess]:
    """Run one quick round of the comma-separated ``workloads`` (and ``options``); the JSON results
    and the process."""
    output = directory / "results.json"
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(ROOT), env.get("PYTHONPATH", "")]))
    env.pop("GRAPHGRAD_DUMP", None)
    completed = subprocess.run(
        [sys.executable, str(SCRIPT), "--quick", "--only", workloads, "--rounds", "1", "--sample-ms", "1",
         "--json", str(output), *options], cwd=ROOT, env=env, capture_output=True, text=True, timeout=300)
    assert completed.returncode == 0, f"{completed.stdout}\n{completed.stderr}"
    return json.loads(output.read_text()), completed


def _assert_positive(result: dict) -> None:
    for entry in result["libraries"].values():
        assert math.isfinite(entry["median_seconds"]) and entry["median_seconds"] > 0


def test_mpi_workload_reports_both_sides_and_the_allreduce(tmp_path: Path) -> None:
    if not (Path(sys.executable).parent / "mpiexec").exists():
        pytest.skip(f"no mpiexec beside {sys.executable} (pip install -e '.[mpi]')")
    data, completed = _quick_round("mlp-b1024-mpi2", tmp_path)
    result = data["results"]["mlp-b1024-mpi2"]
    assert set(result["libraries"]) == {"graphgrad", "one-process"}
    _assert_positive(result)
    details = "\n".join(result["details"])
    # The MLP's parameters in float32, padded to 64-byte lines: at least 669706 * 4 bytes.
    reduced = int(details.split(" bytes per step")[0].rsplit(" ", 1)[1])
    assert reduced >= 669706 * 4
    assert "in the allreduce" in details and "8 ranks:" in details and "64 ranks:" in details
    assert details in completed.stdout


@pytest.fixture(scope="module")
def training_steps(tmp_path_factory: pytest.TempPathFactory) -> dict:
    """One quick round of rnn-scan, cnn-b64 and attn-b32 (one set of worker processes for all)."""
    data, _ = _quick_round("rnn-scan,cnn-b64,attn-b32", tmp_path_factory.mktemp("training"))
    return data


def test_rnn_workload_checks_every_library_against_backpropagation_through_time(training_steps: dict) -> None:
    """rnn-scan runs, and before timing it checks each library's parameters after one GRU step
    against numpy's hand-written backpropagation through time (a wrong gradient through cc.scan
    would stop the script with an error)."""
    result = training_steps["results"]["rnn-scan"]
    assert {"graphgrad", "numpy"} <= set(result["libraries"])
    _assert_positive(result)


@pytest.mark.parametrize("workload", ["cnn-b64", "attn-b32"])
def test_training_workloads_check_every_library_against_numpy(training_steps: dict, workload: str) -> None:
    """cnn-b64 and attn-b32 run in every library's process after each library's parameter updates
    matched the float64 numpy reference's (convolutions and pooling, or attention, layer norm and
    GELU, with their gradients written by hand)."""
    result = training_steps["results"][workload]
    assert {"graphgrad", "numpy"} <= set(result["libraries"])
    for library in ("torch", "jax"):
        assert library in result["libraries"] or library in training_steps["skipped"]
    _assert_positive(result)


def _load_workloads_module() -> object:
    spec = importlib.util.spec_from_file_location("benchmark_workloads", SCRIPT.with_name("workloads.py"))
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module          # its dataclasses look their module up
    spec.loader.exec_module(module)
    return module


@pytest.mark.parametrize("workload", ["cnn-b64", "attn-b32"])
def test_training_checks_catch_a_wrong_gradient(workload: str) -> None:
    """The CNN's and the transformer block's checks compare each parameter's update with the
    float64 reference's: numpy's own float32 step passes, and an update 2% off in any one parameter
    fails."""
    bench = _load_workloads_module()
    data, step, names = {"cnn-b64": (bench.cnn_data, bench.numpy_cnn_step, bench.CNN_NAMES),
                         "attn-b32": (bench.attn_data, bench.numpy_attn_step, bench.ATTN_NAMES)}[workload]
    params, x, y = data()
    expected = [p.astype(np.float64) for p in params]
    step(expected, x.astype(np.float64), y.astype(np.float64) if y.dtype.kind == "f" else y)
    float32 = [p.copy() for p in params]
    step(float32, x, y)
    bench.check_updates("numpy", workload, params, float32, expected, names)
    for index, name in enumerate(names):
        wrong = list(float32)
        wrong[index] = params[index] + 1.02 * (expected[index] - params[index])
        with pytest.raises(bench.BenchmarkError, match=name):
            bench.check_updates("numpy", workload, params, wrong, expected, names)


def test_robustness_and_fresh_process_workloads_report_their_comparisons(tmp_path: Path) -> None:
    """The graphgrad-only workloads run in graphgrad's process and print their ratios under the table;
    the first-step workloads time new processes (graphgrad's check runs in each one)."""
    names = ["mlp-b128-blas-alive", "mlp-b128-2sessions", "first-step-fresh", "first-step-lib-cached"]
    data, completed = _quick_round(",".join(names), tmp_path)
    results = data["results"]
    assert set(results) == set(names)
    for name in names:
        _assert_positive(results[name])
        assert "graphgrad" in results[name]["libraries"]
    assert "quiet" in results["mlp-b128-blas-alive"]["libraries"]["graphgrad"]["extras"]
    assert "sequential" in results["mlp-b128-2sessions"]["libraries"]["graphgrad"]["extras"]
    for name in ("mlp-b128-blas-alive", "mlp-b128-2sessions", "first-step-lib-cached"):
        line = results[name]["details"][0]
        assert line.startswith(name) and line in completed.stdout
    assert "jax" in results["first-step-fresh"]["libraries"] or "jax" in data["skipped"]


def test_gpu_comparison_runs_emulated_with_its_goals(tmp_path: Path) -> None:
    """--target cuda-emulated runs the GPU comparison without a GPU (graphgrad's GPU kernels, torch and
    jax on the CPU): every library is checked, then timed; the JSON has the GPU workloads in their
    units, positive numbers, and the goals the run can check."""
    units = {"mlp-b128": "ms", "sgemm-64": "GFLOP/s", "elementwise-256M": "GB/s", "copy-256M": "GB/s"}
    data, completed = _quick_round(",".join(units), tmp_path, "--target", "cuda-emulated", "--elements", "65536")
    assert data["settings"]["target"] == "cuda-emulated" and data["settings"]["elements"] == 65536
    assert data["environment"]["target"] == "cuda-emulated"
    assert "cuda-emulated" in data["environment"]["gpu"][0]
    assert set(data["environment"]["processes"]) <= {"graphgrad", "torch", "jax"}
    results = data["results"]
    assert set(results) == set(units)
    for name, result in results.items():
        assert result["unit"] == units[name]
        assert "graphgrad" in result["libraries"] and "numpy" not in result["libraries"]
        _assert_positive(result)
        assert all(entry["value"] > 0 for entry in result["libraries"].values())
        for library in ("torch",) if name == "copy-256M" else ("torch", "jax"):
            assert library in result["libraries"] or library in data["skipped"], (name, library)
    assert results["mlp-b128"]["libraries"]["graphgrad"]["extras"]["fed"]["median"] > 0

    [copy_goal] = results["elementwise-256M"]["goals"]
    assert copy_goal["goal"] == "at least" and copy_goal["limit"] == 0.8 and copy_goal["value"] > 0
    [step_goal] = results["mlp-b128"]["goals"]
    assert step_goal["goal"] == "at most" and step_goal["limit"] == 0.5
    assert (step_goal["value"] > 0) == ("torch" in results["mlp-b128"]["libraries"])
    for name in ("elementwise-256M", "mlp-b128"):
        for line in results[name]["details"]:
            assert line in completed.stdout
    assert "[cuda-emulated: CPU figures, not a GPU measurement]" in completed.stdout or "torch" in data["skipped"]


def test_cuda_target_without_a_gpu_stops_with_the_reason() -> None:
    """With no GPU graphgrad can use (CUDA_VISIBLE_DEVICES="" hides every one), --target cuda stops
    with a message that gives the reason and the way out, not a traceback."""
    env = dict(os.environ, CUDA_VISIBLE_DEVICES="")
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(ROOT), env.get("PYTHONPATH", "")]))
    completed = subprocess.run([sys.executable, str(SCRIPT), "--target", "cuda", "--quick", "--only", "sgemm-64"],
                               cwd=ROOT, env=env, capture_output=True, text=True, timeout=120)
    assert completed.returncode == 1, completed.stderr
    assert "ERROR: --target cuda needs a GPU that graphgrad can use" in completed.stderr
    assert "Session(target='cuda') failed" in completed.stderr and "--target cuda-emulated" in completed.stderr
    assert "Traceback" not in completed.stderr


def _load_run_module() -> object:
    spec = importlib.util.spec_from_file_location("benchmark_run", SCRIPT)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module
    spec.loader.exec_module(module)
    return module


@pytest.mark.parametrize("workload, graphgrad_ms, others_ms, copy_ms, value, met", [
    ("mlp-b128", 1.0, {"torch": 2.5, "jax": 0.5}, None, 0.4, True),        # against torch, whatever jax does
    ("mlp-b128", 1.0, {"torch": 1.9}, None, 1.0 / 1.9, False),
    ("mlp-b4096", 13.0, {"torch": 10.0}, None, 1.3, True),
    ("sgemm-4096", 14.0, {"torch": 10.0}, None, 1.4, False),
    ("elementwise-256M", 1.0, {"torch": 3.0}, {"torch": 0.85}, 0.85, True),     # the same bytes: times
    ("elementwise-256M", 1.0, {}, {"graphgrad": 0.75}, 0.75, False),           # no torch: graphgrad's copy
    ("mlp-b4096", 1.0, {"jax": 1.0}, None, math.nan, None),                    # no torch: not checked
])
def test_gpu_goals(workload: str, graphgrad_ms: float, others_ms: dict, copy_ms: dict | None,
                   value: float, met: bool | None) -> None:
    """The goals under the GPU table: graphgrad's time over torch's at most 0.5 (mlp-b128) or 1.3
    (mlp-b4096, sgemm-4096), and the chain at least 80% of the copy's bandwidth on the same bytes."""
    run = _load_run_module()

    def record(name: str, times_ms: dict) -> object:
        cases = {library: run.CaseRecord(library, None, samples=[ms / 1e3]) for library, ms in times_ms.items()}
        return run.WorkloadRecord(name, "ms", "", bytes=8.0 * 2 ** 28, cases=cases)
    measured = record(workload, {"graphgrad": graphgrad_ms, **others_ms})
    by_name = {workload: measured}
    if copy_ms is not None:
        by_name["copy-256M"] = record("copy-256M", copy_ms)
    [goal] = run.gpu_goals(measured, by_name, "cuda")
    if met is None:
        assert not goal.checked and "not checked" in goal.line("cuda")
    else:
        assert goal.value == pytest.approx(value) and goal.met == met
        assert goal.line("cuda").endswith(": met" if met else ": NOT met")
        assert goal.line("cuda-emulated").endswith("not a GPU measurement]")
    if copy_ms is not None:
        assert next(iter(copy_ms)) in goal.measure


def test_pools_comparison_times_every_pool_in_every_quiet_neighbourhood(tmp_path: Path) -> None:
    """pools.py, shortened: each of graphgrad's pools and torch eager's own step, alone and right
    after a numpy or a torch matmul, each in its own process, into the JSON."""
    pytest.importorskip("torch")
    figures = tmp_path / "pools.json"
    completed = subprocess.run([sys.executable, str(SCRIPT.parent / "pools.py"), "--rounds", "1", "--steps", "2",
                                "--no-load", "--json", str(figures)], capture_output=True, text=True, timeout=300)
    assert completed.returncode == 0, completed.stderr
    written = json.loads(figures.read_text())
    assert set(written["figures_ms"]) == {"alone", "beside numpy", "beside torch"}
    for cells in written["figures_ms"].values():
        assert set(cells) == {"own", "openmp", "torch"} and all(value > 0 for value in cells.values())

"""Smoke test of ``examples/benchmarks/run.py``: it runs, checks results, and writes its JSON.

No assertion is made on speed (DESIGN.md, principle 7): only that every number is there and positive.
"""
from __future__ import annotations

import json
import math
import os
import subprocess
import sys
from pathlib import Path

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


def test_unknown_workload_is_an_error() -> None:
    completed = subprocess.run([sys.executable, str(SCRIPT), "--only", "no-such-workload"],
                               cwd=ROOT, capture_output=True, text=True, timeout=60)
    assert completed.returncode == 2
    assert "unknown workload" in completed.stderr


def _one_quick_round(workload: str, tmp_path: Path) -> tuple[dict, subprocess.CompletedProcess]:
    """Run one quick round of ``workload``; its JSON result and the finished process."""
    output = tmp_path / "results.json"
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(ROOT), env.get("PYTHONPATH", "")]))
    env.pop("GRAPHGRAD_DUMP", None)
    completed = subprocess.run(
        [sys.executable, str(SCRIPT), "--quick", "--only", workload, "--rounds", "1", "--sample-ms", "1",
         "--json", str(output)], cwd=ROOT, env=env, capture_output=True, text=True, timeout=300)
    assert completed.returncode == 0, f"{completed.stdout}\n{completed.stderr}"
    return json.loads(output.read_text())["results"][workload], completed


def test_mpi_workload_reports_both_sides_and_the_allreduce(tmp_path: Path) -> None:
    if not (Path(sys.executable).parent / "mpiexec").exists():
        pytest.skip(f"no mpiexec beside {sys.executable} (pip install -e '.[mpi]')")
    result, completed = _one_quick_round("mlp-b1024-mpi2", tmp_path)
    assert set(result["libraries"]) == {"graphgrad", "one-process"}
    for entry in result["libraries"].values():
        assert math.isfinite(entry["median_seconds"]) and entry["median_seconds"] > 0
    details = "\n".join(result["details"])
    # The MLP's parameters in float32, padded to 64-byte lines: at least 669706 * 4 bytes.
    reduced = int(details.split(" bytes per step")[0].rsplit(" ", 1)[1])
    assert reduced >= 669706 * 4
    assert "in the allreduce" in details and "8 ranks:" in details and "64 ranks:" in details
    assert details in completed.stdout


def test_rnn_workload_checks_every_library_against_backpropagation_through_time(tmp_path: Path) -> None:
    """rnn-scan runs, and before timing it checks each library's parameters after one GRU step
    against numpy's hand-written backpropagation through time (a wrong gradient through cc.scan
    would stop the script with an error)."""
    result, _ = _one_quick_round("rnn-scan", tmp_path)
    assert {"graphgrad", "numpy"} <= set(result["libraries"])
    for entry in result["libraries"].values():
        assert math.isfinite(entry["median_seconds"]) and entry["median_seconds"] > 0

"""Run each script in ``examples/`` as a user would, and check what it prints."""
from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
EXAMPLES = ROOT / "examples"


def run_example(name: str, *args: str, timeout: float = 60.0, environment: dict[str, str] | None = None) -> str:
    """Run ``examples/<name>`` with this interpreter (and ``environment`` added to its environment);
    return its stdout, failing on a non-zero exit."""
    env = dict(os.environ, **(environment or {}))
    # The repository root first, so the packages import from this checkout however it is installed.
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(ROOT), env.get("PYTHONPATH", "")]))
    env.pop("GRAPHGRAD_DUMP", None)
    completed = subprocess.run([sys.executable, str(EXAMPLES / name), *args], cwd=ROOT, env=env,
                               capture_output=True, text=True, timeout=timeout)
    assert completed.returncode == 0, (
        f"{name} exited with {completed.returncode}\n--- stdout\n{completed.stdout}\n"
        f"--- stderr\n{completed.stderr}")
    return completed.stdout


def test_train_digits_reaches_95_percent() -> None:
    pytest.importorskip("sklearn")
    pytest.importorskip("tqdm")
    output = run_example("train_digits.py")
    last_line = output.strip().splitlines()[-1]
    match = re.fullmatch(r"test accuracy: (\d\.\d{3})", last_line)
    assert match, f"unexpected last line: {last_line!r}"
    assert float(match.group(1)) >= 0.95, output


def test_train_digits_reference_target_and_report() -> None:
    pytest.importorskip("sklearn")
    pytest.importorskip("tqdm")
    output = run_example("train_digits.py", "--epochs", "2", "--target", "reference", "--seed", "1")
    assert re.search(r"^test accuracy: \d\.\d{3}$", output, re.MULTILINE), output
    output = run_example("train_digits.py", "--epochs", "1", "--verbose")
    assert "kernels" in output and "train_digits.py:" in output, output


def test_train_digits_writes_tensorboard_logs(tmp_path: Path) -> None:
    pytest.importorskip("sklearn")
    pytest.importorskip("tqdm")
    pytest.importorskip("tensorboard")
    from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

    output = run_example("train_digits.py", "--epochs", "2", "--logdir", str(tmp_path))
    steps = int(re.search(r"^(\d+) steps in", output, re.MULTILINE).group(1))
    final_accuracy = float(re.search(r"^test accuracy: (\d\.\d{3})$", output, re.MULTILINE).group(1))
    accumulator = EventAccumulator(str(tmp_path), size_guidance={"scalars": 0, "histograms": 0})
    accumulator.Reload()
    tags = accumulator.Tags()
    assert set(tags["scalars"]) == {"train/loss", "train/accuracy", "test/accuracy"}
    for tag in ("train/loss", "train/accuracy"):
        assert [event.step for event in accumulator.Scalars(tag)] == list(range(steps))
    test_accuracy = accumulator.Scalars("test/accuracy")
    assert [event.step for event in test_accuracy] == [steps // 2, steps]
    assert abs(test_accuracy[-1].value - final_accuracy) < 1e-3
    assert set(tags["histograms"]) == {"weights/hidden0/W", "weights/logits/W"}
    assert accumulator.Histograms("weights/hidden0/W")[-1].histogram_value.num == 64 * 128
    assert tags["graph"]
    node_names = {node.name for node in accumulator.Graph().node}
    assert {"images", "labels", "hidden0/W", "logits/W"} <= node_names


def test_train_digits_distributed_reaches_the_accuracy_of_one_process() -> None:
    pytest.importorskip("sklearn")
    pytest.importorskip("tqdm")
    mpiexec = Path(sys.executable).parent / "mpiexec"
    if not mpiexec.exists():
        pytest.skip(f"no mpiexec beside {sys.executable} (pip install -e '.[mpi]')")
    alone = run_example("train_digits.py", "--epochs", "5")
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(ROOT), env.get("PYTHONPATH", "")]))
    env.pop("GRAPHGRAD_DUMP", None)
    if os.geteuid() == 0:        # Open MPI refuses to run as root unless told it is meant
        env.update(OMPI_ALLOW_RUN_AS_ROOT="1", OMPI_ALLOW_RUN_AS_ROOT_CONFIRM="1")
    completed = subprocess.run([str(mpiexec), "-n", "2", "--oversubscribe", sys.executable,
                                str(EXAMPLES / "train_digits.py"), "--distributed", "--epochs", "5"],
                               cwd=ROOT, env=env, capture_output=True, text=True, timeout=120)
    assert completed.returncode == 0, f"{completed.stdout}\n{completed.stderr}"
    pattern = r"^(\d+) steps in .*\n^test accuracy: (\d\.\d{3})$"
    steps, accuracy = re.search(pattern, alone, re.MULTILINE).groups()
    match = re.search(pattern, completed.stdout, re.MULTILINE)
    assert match and "(cpu, 2 processes)" in completed.stdout, completed.stdout
    assert completed.stdout.count("test accuracy") == 1, completed.stdout      # rank 0 reports
    # The same updates as one process on the whole batch, up to rounding: at most one of the
    # 360 test digits may be classified otherwise.
    assert match.group(1) == steps
    assert abs(float(match.group(2)) - float(accuracy)) <= 1 / 360 + 1e-9, (alone, completed.stdout)
    assert float(accuracy) >= 0.9


def test_train_cnn_digits_reaches_97_percent() -> None:
    pytest.importorskip("sklearn")
    pytest.importorskip("tqdm")
    output = run_example("train_cnn_digits.py", timeout=120.0)
    match = re.search(r"^test accuracy: (\d\.\d{3})$", output, re.MULTILINE)
    assert match, output
    assert float(match.group(1)) >= 0.97, output


def test_train_cnn_digits_with_tf1_layers_reaches_97_percent() -> None:
    """The same network written with cc.layers: get_variable's Glorot kernels, batch normalization
    (its moving statistics used for the test set) and dropout switched by a bool placeholder."""
    pytest.importorskip("sklearn")
    pytest.importorskip("tqdm")
    output = run_example("train_cnn_digits.py", "--layers", timeout=120.0)
    match = re.search(r"^test accuracy: (\d\.\d{3})$", output, re.MULTILINE)
    assert match, output
    assert float(match.group(1)) >= 0.97, output


def test_train_rnn_digits_reaches_90_percent_and_the_reference_agrees() -> None:
    """The GRU (``cc.scan``) over the digits' rows: the full run on the cpu target, then one epoch
    interpreted by the numpy reference, which learns as far as one cpu epoch does."""
    pytest.importorskip("sklearn")
    pytest.importorskip("tqdm")
    accuracies = []
    for args in ((), ("--epochs", "1"), ("--epochs", "1", "--target", "reference")):
        output = run_example("train_rnn_digits.py", *args, timeout=120.0)
        match = re.search(r"^test accuracy: (\d\.\d{3})$", output, re.MULTILINE)
        assert match, output
        accuracies.append(float(match.group(1)))
    assert accuracies[0] >= 0.90, accuracies
    assert abs(accuracies[1] - accuracies[2]) <= 0.02 and accuracies[2] >= 0.5, accuracies


@pytest.mark.parametrize("script, epochs, at_least", [("train_digits.py", "3", 0.90),
                                                      ("train_cnn_digits.py", "1", 0.75),
                                                      ("train_rnn_digits.py", "1", 0.5)])
def test_examples_train_with_the_gpu_kernels_emulated(script: str, epochs: str, at_least: float) -> None:
    """Every kernel of the examples' steps, as scheduled for the GPU, run on the CPU with the race
    and memory checks of ``compute-sanitizer`` (a race or an access out of bounds would stop the
    run): a short training run still learns (the full runs reach 0.95 and 0.97 on the cpu target)."""
    pytest.importorskip("sklearn")
    pytest.importorskip("tqdm")
    output = run_example(script, "--target", "cuda-emulated", "--epochs", epochs, timeout=180.0,
                         environment={"GRAPHGRAD_RACECHECK": "1", "GRAPHGRAD_MEMCHECK": "1"})
    assert "(cuda-emulated)" in output
    match = re.search(r"^test accuracy: (\d\.\d{3})$", output, re.MULTILINE)
    assert match, output
    assert float(match.group(1)) >= at_least, output


def test_embeddings_trains_only_the_rows_it_looked_up() -> None:
    pytest.importorskip("sklearn")
    pytest.importorskip("tqdm")
    output = run_example("embeddings.py", "--epochs", "8", timeout=120.0)
    rows = re.search(r"^embedding rows changed: (\d+) of (\d+) \((\d+) tokens occur", output, re.MULTILINE)
    assert rows, output
    changed, total, seen = (int(g) for g in rows.groups())
    assert changed == seen < total, output
    accuracy = re.search(r"^test accuracy: (\d\.\d{3})$", output, re.MULTILINE)
    assert accuracy and float(accuracy.group(1)) >= 0.85, output


def test_linear_regression_recovers_the_true_parameters() -> None:
    output = run_example("linear_regression.py")
    rows = re.findall(r"^(w\[\d+\]|b)\s+(-?\d+\.\d+)\s+(-?\d+\.\d+)$", output, re.MULTILINE)
    assert len(rows) == 4, output                      # 3 weights and the bias
    for name, true_value, learned_value in rows:
        assert abs(float(true_value) - float(learned_value)) < 0.02, f"{name}: {output}"
    final_loss = re.search(r"^final loss: (\d+\.\d+)$", output, re.MULTILINE)
    assert final_loss and float(final_loss.group(1)) < 1e-3, output


def test_show_ir_prints_every_stage() -> None:
    output = run_example("show_ir.py")
    for heading in ("== forward graph", "== backward graph", "== backward graph, optimized",
                    "== kernels", "== LLVM IR", "== PTX"):
        assert heading in output, heading
    # forward and backward graphs (the gradient sums x * exp(x * w); the loss's own sum is not needed)
    assert "Exp(" in output and "SumTo(" in output
    assert "define void @\"graphgrad_step\"" in output or "define void @graphgrad_step" in output
    assert ".entry" in output
    compiled = re.search(r"d\(loss\)/dw, compiled\s+= (-?\d+\.\d+)", output)
    by_hand = re.search(r"by hand = (-?\d+\.\d+)", output)
    assert compiled and by_hand and abs(float(compiled.group(1)) - float(by_hand.group(1))) < 1e-4


def test_show_ir_single_stage() -> None:
    output = run_example("show_ir.py", "--stage", "llvm-opt")
    assert output.count("== llvm-opt:") == 2
    assert "define" in output

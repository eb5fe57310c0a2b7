"""Side-by-side benchmark: graphgrad against numpy, and PyTorch and JAX where they are installed.

Each library runs in its own processes, so that no library's thread pool takes cores from another
(numpy's OpenBLAS threads, PyTorch's OpenMP pool, XLA's pool and graphgrad's worker pool each spin
for a while after a call). This script starts one long-lived worker process per library
(``run.py --worker graphgrad`` and so on, code in ``workloads.py``); each imports only its library,
checks every case against numpy (a wrong result stops the run with ``FAILED:`` and exit status 1)
and warms it up. Then the script drives interleaved rounds: it asks each worker in turn for one
timed sample of a workload, so that only one process computes at a time while the others wait on a
pipe, and every worker answers only once its own threads have gone quiet. The table shows the
median over rounds of the time per call, and the ratio ``graphgrad time / other time`` (below 1:
graphgrad is faster). A round during which other processes (anything but this script and its
workers) kept the machine busy (``--max-other-load``) is thrown away and run again.

Workloads (all float32):

    mlp-b128, mlp-b1024   one SGD training step (lr 0.01) of an MLP 784-512-512-10 with relu and a
                          mean sparse softmax cross-entropy, batch 128 and 1024
    cnn-b64               one SGD training step of a CNN on 28x28x1 NHWC images, batch 64: conv 3x3x32
                          SAME + bias + relu, 2x2 max pool, conv 3x3x64, 2x2 max pool, dense 128 + relu,
                          dense 10, mean sparse softmax cross-entropy
    elementwise-16M       tanh(1.5*x + 0.3) * sigmoid(x) - exp(-x*x) on 2**24 elements
    sgemm-N               C = A @ B for square N x N matrices, N in 256, 512, 1024, 2048 (GFLOP/s)
    compile-mlp           the first sess.run of the mlp-b128 step in a fresh graph and Session,
                          compile cache empty (jax: first call of a new jax.jit of a new step
                          function; torch.compile: first step, measured once)
    compile-mlp-cached    the same, graphgrad only, when its on-disk compile cache holds the step
    first-step-fresh      the first sess.run of the mlp-b128 step in a new Python process with an
                          empty GRAPHGRAD_CACHE_DIR (imports and graph building not timed; jax: the
                          first call of the jitted step in a new process); each sample a new process
    first-step-lib-cached the same, graphgrad only, when the cache holds the GEMM library (left by a
                          process that ran another MLP) but not the step
    mlp-b128-checked      the mlp-b128 step in a Session(check_numerics=True), graphgrad only: the
                          cost of checking every value for NaN and Inf (compare with mlp-b128)
    mlp-b128-blas-alive   graphgrad only: the mlp-b128 step right after a 512x512 numpy matmul in the
                          same process (OpenBLAS's threads still spinning), against the same step
                          back to back (ratio under the table)
    mlp-b128-torch-alive  the same after a torch matmul (torch's OpenMP pool awake), if torch imports
    mlp-b128-2sessions    graphgrad only: two Sessions stepped from two Python threads at once, per
                          pair of steps, against the two stepped one after the other
    run-overhead          sess.run of x + 1.0 on a (1,) placeholder, in microseconds
    infer-8threads        the MLP's forward pass (logits, batch 32) called from 8 Python threads at
                          once on one Session (numpy, torch, jax: on shared parameters); the time
                          per call of the whole loop, in microseconds (throughput, not latency)
    rnn-scan              one SGD training step of a GRU classifier (28 steps of 28 features, hidden
                          128, batch 64): graphgrad's cc.scan, jax.lax.scan under jax.jit, torch eager
                          with a Python loop, numpy with backpropagation through time by hand
    attn-b32              one SGD training step of a pre-norm transformer block (width 128, 4 heads of
                          32, length 64, feed-forward 512 with tanh GELU, layer norms, mean squared
                          error), batch 32; numpy with the backward written by hand
    mlp-b1024-mpi2        the mlp-b1024 step data-parallel over MPI: 2 ranks (``mpiexec -n 2``, one
                          graphgrad thread each) x batch 512 with optim.DistributedOptimizer, against
                          one process x batch 1024 (column one-process, all cores), and the time in
                          the allreduce; needs ``pip install -e ".[mpi]"`` (skipped without mpiexec)

numpy's OpenBLAS is slowed down by the OPENBLAS_CORETYPE and OPENBLAS_L2_SIZE variables that some
environments set, so run it with them unset::

    env -u OPENBLAS_CORETYPE -u OPENBLAS_L2_SIZE python examples/benchmarks/run.py
    env -u OPENBLAS_CORETYPE -u OPENBLAS_L2_SIZE python examples/benchmarks/run.py --quick
    python examples/benchmarks/run.py --only sgemm-1024,run-overhead --json results.json
    python examples/benchmarks/run.py --no-torch-compile --rounds 5

PyTorch (``torch``) and JAX (``jax``) are optional: a library that cannot be imported is left out
of the table, and the script says so.

On a GPU (``--target cuda``) the workers are graphgrad (``Session(target="cuda")``), torch (CUDA)
and jax (GPU), all on device 0, and the workloads are:

    mlp-b128, mlp-b4096   the MLP step above at batch 128 and 4096 (any mlp-b<N> may be asked for)
    cnn-b64               the CNN step above (any cnn-b<N>)
    sgemm-1024, -4096     C = A @ B in float32 (torch: TF32 off; jax: precision HIGHEST), GFLOP/s
    elementwise-256M      the elementwise chain on 2**28 floats, GB/s = 8 bytes per element / time
    copy-256M             the device's copy bandwidth on the same bytes (torch: Tensor.copy_, the
                          driver's device-to-device copy; graphgrad: its own copy kernel)

Every library's batch, parameters and operands live on the device; torch synchronizes after every
call and jax blocks until its result is ready. graphgrad's runs fetch only an operation (the batch,
the operands and the results are variables), so nothing is downloaded, and a small fetch ends each
sample so that every run's kernels are counted to their end. Lines under the table give the goals:
mlp-b128 at most 0.5x torch eager, mlp-b4096 and sgemm-4096 at most 1.3x torch, elementwise-256M at
least 80% of the copy bandwidth. Without a GPU ``--target cuda`` stops with the reason;
``--target cuda-emulated`` runs the same comparison at small sizes with graphgrad's GPU kernels
(``Session(target="cuda-emulated")``), torch and jax all on the CPU, to test it::

    python examples/benchmarks/run.py --target cuda --json gpu.json
    python examples/benchmarks/run.py --target cuda-emulated --quick
"""
from __future__ import annotations

import argparse
import datetime
import json
import math
import os
import platform
import shlex
import statistics
import subprocess
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
ROOT = HERE.parents[1]
if str(HERE) not in sys.path:
    sys.path.insert(0, str(HERE))

import workloads as bench  # noqa: E402  - the library side (imports numpy, and graphgrad lazily)
from workloads import BenchmarkError, WORKLOADS  # noqa: E402

LIBRARIES: tuple[str, ...] = ("graphgrad", "numpy", "numpy-out", "torch", "torch.compile", "jax", "one-process")
PROCESS_ORDER: tuple[str, ...] = ("graphgrad", "numpy", "torch", "jax")
OPENBLAS_VARIABLES: tuple[str, ...] = ("OPENBLAS_CORETYPE", "OPENBLAS_L2_SIZE")
SETUP_LIMIT_S: float = 1800.0      # one worker's imports, checks, warm-ups (torch.compile included)
SAMPLE_LIMIT_S: float = 900.0
ETHERNET_BYTES_PER_S: float = 25e9 / 8     # 25 Gb/s
ETHERNET_LATENCY_S: float = 25e-6          # per message of the ring, TCP over a switch (assumed)
ALIVE_GOAL: float = 1.10                   # *-alive: at most 10% slower than back to back
TWO_SESSIONS_GOAL: float = 2.0             # two Sessions at once: at most 2x the sequential pair
GPU_DEVICE_ORDER: str = "PCI_BUS_ID"       # CUDA numbers the GPUs as nvidia-smi does


@dataclass(frozen=True)
class RatioGoal:
    """A goal of the GPU comparison: graphgrad's time on ``workload`` over ``other``'s time is at most ``limit``."""

    workload: str
    other: str
    limit: float
    why: str


GPU_RATIO_GOALS: tuple[RatioGoal, ...] = (
    RatioGoal("mlp-b128", "torch", 0.5, "a replayed CUDA graph against torch eager's launch per op"),
    RatioGoal("mlp-b4096", "torch", 1.3, "against cuBLAS in float32"),
    RatioGoal("sgemm-4096", "torch", 1.3, "against cuBLAS in float32, TF32 off"),
)
COPY_FRACTION_GOAL: float = 0.80           # elementwise-256M: at least 80% of the copy bandwidth


@dataclass(frozen=True)
class GoalResult:
    """One goal as measured: ``value`` against ``limit`` (at most, or at least when ``at_least``);
    ``value`` is NaN when the library compared with did not run. ``text`` says what was compared."""

    workload: str
    measure: str
    value: float
    limit: float
    at_least: bool
    text: str

    @property
    def checked(self) -> bool:
        return not math.isnan(self.value)

    @property
    def met(self) -> bool:
        return self.value >= self.limit if self.at_least else self.value <= self.limit

    def line(self, target: str) -> str:
        """The line under the table: the comparison and whether the goal is met."""
        if not self.checked:
            return self.text
        emulated = " [cuda-emulated: CPU figures, not a GPU measurement]" if target == "cuda-emulated" else ""
        return f"{self.text}: {'met' if self.met else 'NOT met'}{emulated}"


class WorkerError(RuntimeError):
    """A worker process crashed or raised something other than a wrong result."""


class GpuUnavailable(RuntimeError):
    """``--target cuda`` on a machine where graphgrad cannot use a GPU."""


def ring_allreduce_seconds(nbytes: float, ranks: int, bytes_per_s: float = ETHERNET_BYTES_PER_S,
                           latency_s: float = ETHERNET_LATENCY_S) -> float:
    """The ring allreduce's cost model: each rank sends and receives 2 (p - 1) / p of the buffer in
    2 (p - 1) messages (reduce-scatter, then allgather)."""
    return 2 * (ranks - 1) / ranks * nbytes / bytes_per_s + 2 * (ranks - 1) * latency_s


# ------------------------------------------------------------------------------------------------
# Worker processes
# ------------------------------------------------------------------------------------------------
class WorkerProcess(bench.ChildProcess):
    """One library's long-lived process (``run.py --worker NAME``), spoken to in JSON lines."""

    GOODBYE = json.dumps({"cmd": "quit"})

    def __init__(self, name: str, torch_compile: bool, target: str = "cpu") -> None:
        self.name = name
        env = dict(os.environ)
        env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(ROOT), env.get("PYTHONPATH", "")]))
        command = [sys.executable, str(Path(__file__).resolve()), "--worker", name]
        if not torch_compile:
            command.append("--no-torch-compile")
        if target != "cpu":
            command += ["--target", target]
        if target == "cuda":
            env["CUDA_DEVICE_ORDER"] = GPU_DEVICE_ORDER
        super().__init__(command, env)

    def request(self, message: dict[str, Any], timeout: float) -> dict[str, Any]:
        """Send one request and wait (blocked on the pipe) for its answer."""
        self.send(json.dumps(message))
        answer = self.receive(timeout)
        if "failed" in answer:
            raise BenchmarkError(answer["failed"])
        if "error" in answer:
            raise WorkerError(f"the {self.name} worker process raised:\n{answer['error']}")
        return answer

    def stopped(self) -> Exception:
        return WorkerError(f"the {self.name} worker process stopped answering (exit status "
                           f"{self.process.returncode}); its messages are above")


@dataclass
class CaseRecord:
    """One library on one workload, as the parent sees it: which worker times it, and its samples."""

    library: str
    worker: WorkerProcess | None
    calls: int = 1
    fixed: float | None = None
    note: str = ""
    samples: list[float] = field(default_factory=list)
    extras: list[dict[str, float]] = field(default_factory=list)


@dataclass
class WorkloadRecord:
    name: str
    unit: str
    description: str
    flops: float = 0.0
    once: bool = False
    bytes: float = 0.0
    facts: dict[str, Any] = field(default_factory=dict)
    cases: dict[str, CaseRecord] = field(default_factory=dict)


@dataclass
class Setup:
    workloads: list[WorkloadRecord]
    missing: dict[str, str]
    reports: dict[str, dict[str, Any]]


def start_workers(args: argparse.Namespace, workers: dict[str, WorkerProcess]) -> Setup:
    """Start the worker of every library that takes part in the chosen workloads (they import their
    libraries side by side), then have them set up one after the other (each checks and warms up
    its cases alone), and collect what they will time."""
    records: dict[str, WorkloadRecord] = {}
    missing: dict[str, str] = {}
    reports: dict[str, dict[str, Any]] = {}
    order = bench.GPU_PROCESS_ORDER if args.target in bench.GPU_TARGETS else PROCESS_ORDER
    wanted = {name: [w for w in args.workloads if name in bench.processes_of(w, args.target)] for name in order}
    print(f"starting the processes of {', '.join(name for name in order if wanted[name])} ...", file=sys.stderr)
    imports: dict[str, dict[str, Any]] = {}
    for name in order:
        if wanted[name]:
            workers[name] = WorkerProcess(name, args.torch_compile, args.target)
            if args.target == "cuda" and name == "graphgrad":
                # Without a GPU graphgrad can use there is nothing to compare: say so before
                # starting torch and jax.
                imports[name] = workers[name].receive(SETUP_LIMIT_S)
                if name in imports[name]["missing"]:
                    raise GpuUnavailable(imports[name]["missing"][name])
    for name, worker in list(workers.items()):
        imported = imports.get(name) or worker.receive(SETUP_LIMIT_S)
        missing.update(imported["missing"])
        if name in imported["missing"]:         # torch or jax could not be imported
            worker.close()
            del workers[name]
    for name, worker in list(workers.items()):
        answer = worker.request({"cmd": "setup", "workloads": wanted[name], "elements": args.elements,
                                 "sample_ms": args.sample_ms}, SETUP_LIMIT_S)
        missing.update(answer["missing"])
        if answer["workloads"]:
            reports[name] = answer["process"]
        else:                                   # its library is missing, or nothing to run
            worker.close()
            del workers[name]
        for workload_name, info in answer["workloads"].items():
            record = records.setdefault(workload_name, WorkloadRecord(
                workload_name, info["unit"], info["description"], info["flops"], info["once"], info["bytes"]))
            record.facts.update(info["facts"])
            for library, case in info["cases"].items():
                record.cases[library] = CaseRecord(library, worker if case["timed"] else None, case["calls"],
                                                   case["fixed"], case["note"])
    ordered = [records[name] for name in args.workloads if name in records]
    for record in ordered:                      # columns in the table's order
        record.cases = {library: record.cases[library] for library in LIBRARIES if library in record.cases}
    return Setup(ordered, missing, reports)


def close_workers(workers: dict[str, WorkerProcess]) -> None:
    for worker in workers.values():
        worker.close()


# ------------------------------------------------------------------------------------------------
# Load of other processes
# ------------------------------------------------------------------------------------------------
def system_cpu_seconds() -> float | None:
    """CPU seconds spent by the whole machine so far (all processes), from /proc/stat."""
    try:
        fields = Path("/proc/stat").read_text().splitlines()[0].split()
    except (OSError, IndexError):
        return None
    busy = sum(int(v) for v in fields[1:4] + fields[6:9])   # user nice system irq softirq steal
    return busy / os.sysconf("SC_CLK_TCK")


def own_cpu_seconds() -> float:
    """CPU seconds of this process, its finished children, and its live descendants (the worker
    processes, the processes they start, torch.compile's compile workers), which are not "other
    processes"."""
    times = os.times()
    total = times.user + times.system + times.children_user + times.children_system
    parents: dict[int, int] = {}
    cpu: dict[int, float] = {}
    ticks = os.sysconf("SC_CLK_TCK")
    for entry in Path("/proc").iterdir() if Path("/proc").is_dir() else []:
        if not entry.name.isdigit():
            continue
        try:
            stat = (entry / "stat").read_text()
        except OSError:
            continue
        fields = stat[stat.rindex(")") + 2:].split()   # after "pid (comm) "
        parents[int(entry.name)] = int(fields[1])
        cpu[int(entry.name)] = sum(int(v) for v in fields[11:15]) / ticks   # utime stime cutime cstime
    mine = {os.getpid()}
    changed = True
    while changed:
        changed = False
        for pid, parent in parents.items():
            if parent in mine and pid not in mine:
                mine.add(pid)
                changed = True
    return total + sum(cpu[pid] for pid in mine if pid != os.getpid())


class LoadMeter:
    """How many cores other processes kept busy while this one and its workers were measuring."""

    def __init__(self) -> None:
        self.system = system_cpu_seconds()
        self.own = own_cpu_seconds()
        self.wall = time.perf_counter()

    def other_cores(self) -> float | None:
        system = system_cpu_seconds()
        if system is None or self.system is None:
            return None
        wall = time.perf_counter() - self.wall
        other = (system - self.system) - (own_cpu_seconds() - self.own)
        return max(0.0, other / wall) if wall > 0 else None


# ------------------------------------------------------------------------------------------------
# Rounds
# ------------------------------------------------------------------------------------------------
def run_rounds(workloads: list[WorkloadRecord], rounds: int, max_other_load: float,
               progress: bool) -> dict[str, Any]:
    """Time ``rounds`` interleaved rounds: each worker in turn times one sample of each workload.
    A round during which other processes kept more than ``max_other_load`` cores busy is thrown
    away and run again (at most ``rounds`` times)."""
    kept, discarded, loads = 0, 0, []
    round_index = 0
    while kept < rounds:
        start = time.perf_counter()
        meter = LoadMeter()
        samples: list[tuple[CaseRecord, float, dict[str, float]]] = []
        for workload in workloads:
            cases = [c for c in workload.cases.values() if c.worker is not None]
            shift = round_index % max(len(cases), 1)        # rotate the order of libraries
            for case in cases[shift:] + cases[:shift]:
                assert case.worker is not None
                answer = case.worker.request({"cmd": "sample", "workload": workload.name, "library": case.library},
                                             SAMPLE_LIMIT_S)
                samples.append((case, float(answer["seconds"]), answer["extras"]))
        round_index += 1
        load = meter.other_cores()
        busy = load is not None and load > max_other_load
        if busy and discarded < rounds:
            discarded += 1
            verdict = "thrown away, run again"
        else:
            kept += 1
            loads.append(load)
            for case, seconds, extras in samples:
                case.samples.append(seconds)
                case.extras.append(extras)
            verdict = f"kept ({kept}/{rounds})"
        if progress:
            load_text = "?" if load is None else f"{load:.2f}"
            print(f"  round {round_index}: {time.perf_counter() - start:.1f} s, other processes "
                  f"{load_text} cores: {verdict}", file=sys.stderr)
    known = [x for x in loads if x is not None]
    return {"rounds_kept": kept, "rounds_discarded": discarded,
            "other_processes_cores": max(known) if known else None}


def median_seconds(case: CaseRecord) -> float:
    if case.fixed is not None:
        return case.fixed
    return statistics.median(case.samples)


def extra_medians(case: CaseRecord) -> dict[str, float]:
    keys = sorted({key for extras in case.extras for key in extras})
    return {key: statistics.median(e[key] for e in case.extras if key in e) for key in keys}


def display_value(workload: WorkloadRecord, seconds: float) -> float:
    if workload.unit == "GFLOP/s":
        return workload.flops / seconds / 1e9
    if workload.unit == "GB/s":
        return workload.bytes / seconds / 1e9
    if workload.unit == "us":
        return seconds * 1e6
    return seconds * 1e3


def format_number(value: float) -> str:
    if value >= 100:
        return f"{value:.0f}"
    if value >= 10:
        return f"{value:.1f}"
    if value >= 1:
        return f"{value:.2f}"
    return f"{value:.3f}"        # a GPU step's milliseconds


def render_table(workloads: list[WorkloadRecord]) -> str:
    present = {library for w in workloads for library in w.cases}
    columns = [library for library in LIBRARIES if library in present]
    others = [c for c in columns if c != "graphgrad"]
    header = ["workload", "unit", *columns, *[f"gg/{c}" for c in others]]
    rows = []
    for workload in workloads:
        row = [workload.name, workload.unit]
        medians = {lib: median_seconds(case) for lib, case in workload.cases.items()}
        for library in columns:
            row.append(format_number(display_value(workload, medians[library])) if library in medians else "-")
        for library in others:
            if "graphgrad" in medians and library in medians:
                row.append(f"{medians['graphgrad'] / medians[library]:.2f}")
            else:
                row.append("-")
        rows.append(row)
    widths = [max(len(str(r[i])) for r in [header, *rows]) for i in range(len(header))]
    lines = [" | ".join(h.ljust(w) if i < 2 else h.rjust(w) for i, (h, w) in enumerate(zip(header, widths)))]
    lines.append("-|-".join("-" * w for w in widths))
    for row in rows:
        lines.append(" | ".join(c.ljust(w) if i < 2 else c.rjust(w) for i, (c, w) in enumerate(zip(row, widths))))
    return "\n".join(lines)


# ------------------------------------------------------------------------------------------------
# Lines under the table
# ------------------------------------------------------------------------------------------------
def details(workload: WorkloadRecord, by_name: dict[str, WorkloadRecord], target: str = "cpu") -> list[str]:
    """The comparisons a workload's row alone does not show (also written to the JSON)."""
    if target in bench.GPU_TARGETS:
        return gpu_details(workload, by_name, target)
    name = workload.name
    case = workload.cases.get("graphgrad")
    if case is None or not case.samples:
        return []
    step = median_seconds(case)
    extras = extra_medians(case)
    if name == "mlp-b1024-mpi2":
        return mpi_details(workload, step, extras)
    if name in ("mlp-b128-blas-alive", "mlp-b128-torch-alive"):
        quiet = extras["quiet"]
        line = (f"{name}: {step * 1e3:.2f} ms per step right after a matmul by {workload.facts['pool']}, "
                f"{quiet * 1e3:.2f} ms back to back without it: {step / quiet:.2f}x (goal: at most {ALIVE_GOAL:.2f}x)")
        plain = by_name.get("mlp-b128")
        if plain is not None and "graphgrad" in plain.cases:
            line += f"; against the mlp-b128 row: {step / median_seconds(plain.cases['graphgrad']):.2f}x"
        return [line]
    if name == "mlp-b128-2sessions":
        sequential = extras["sequential"]
        return [f"{name}: two Sessions from two Python threads at once {step * 1e3:.2f} ms per pair of steps, "
                f"the same two one after the other {sequential * 1e3:.2f} ms: {step / sequential:.2f}x "
                f"(goal: at most {TWO_SESSIONS_GOAL:.0f}x)"]
    fresh = by_name.get("first-step-fresh")
    if name == "first-step-lib-cached" and fresh is not None and fresh.cases.get("graphgrad"):
        nothing = median_seconds(fresh.cases["graphgrad"])
        return [f"{name}: a new process's first step takes {nothing * 1e3:.0f} ms with nothing cached and "
                f"{step * 1e3:.0f} ms with the GEMM library cached: the cached library saves "
                f"{(nothing - step) * 1e3:.0f} ms"]
    return []


def gpu_goals(workload: WorkloadRecord, by_name: dict[str, WorkloadRecord], target: str) -> list[GoalResult]:
    """The goals of the GPU comparison that ``workload`` measures (none when graphgrad did not run;
    one that is not checked when the library it is compared with did not)."""
    case = workload.cases.get("graphgrad")
    if case is None or not case.samples:
        return []
    step = median_seconds(case)
    results = []
    for goal in GPU_RATIO_GOALS:
        if goal.workload == workload.name and goal.other not in workload.cases:
            text = f"{workload.name}: {goal.other} did not run, so the goal (at most {goal.limit:.2f}x) is not checked"
            results.append(GoalResult(workload.name, f"graphgrad time / {goal.other} time", math.nan, goal.limit,
                                      False, text))
        elif goal.workload == workload.name:
            ratio = step / median_seconds(workload.cases[goal.other])
            measure = f"graphgrad time / {goal.other} time"
            text = f"{workload.name}: {measure} = {ratio:.2f} (goal: at most {goal.limit:.2f}, {goal.why})"
            results.append(GoalResult(workload.name, measure, ratio, goal.limit, False, text))
    copy = by_name.get("copy-256M")
    if workload.name == "elementwise-256M" and copy is not None and copy.cases:
        # The device's copy: the driver's (torch), or graphgrad's own kernel when torch did not run.
        source = "torch" if "torch" in copy.cases else "graphgrad"
        which = {"torch": "torch's Tensor.copy_" + (", a device-to-device cudaMemcpyAsync" if target == "cuda" else ""),
                 "graphgrad": "graphgrad's own copy kernel: torch did not run"}[source]
        chain_rate = workload.bytes / step / 1e9             # GB/s
        copy_rate = copy.bytes / median_seconds(copy.cases[source]) / 1e9
        fraction = chain_rate / copy_rate
        text = (f"{workload.name}: graphgrad {chain_rate:.1f} GB/s, the device's copy {copy_rate:.1f} GB/s ({which}): "
                f"{100 * fraction:.0f}% of the copy bandwidth (goal: at least {100 * COPY_FRACTION_GOAL:.0f}%)")
        results.append(GoalResult(workload.name, f"fraction of the copy bandwidth ({source})", fraction,
                                  COPY_FRACTION_GOAL, True, text))
    return results


def gpu_details(workload: WorkloadRecord, by_name: dict[str, WorkloadRecord], target: str) -> list[str]:
    """Under the GPU table: graphgrad's step with its batch fed, and the goals."""
    lines = []
    case = workload.cases.get("graphgrad")
    if case is not None and case.samples and "fed" in extra_medians(case):
        lines.append(f"{workload.name}: graphgrad with the batch fed (uploaded by every run) "
                     f"{extra_medians(case)['fed'] * 1e3:.3f} ms per step, with it in variables on the device "
                     f"{median_seconds(case) * 1e3:.3f} ms (the table)")
    if workload.name == "elementwise-256M" and "copy-256M" not in by_name:
        lines.append(f"{workload.name}: copy-256M did not run, so there is no copy bandwidth to compare with "
                     "(--only elementwise-256M,copy-256M)")
    return lines + [goal.line(target) for goal in gpu_goals(workload, by_name, target)]


def mpi_details(workload: WorkloadRecord, step: float, extras: dict[str, float]) -> list[str]:
    name, facts = workload.name, workload.facts
    alone = median_seconds(workload.cases["one-process"])
    ranks, batch, global_batch = facts["ranks"], facts["batch_per_rank"], facts["global_batch"]
    reduce_s, nbytes = extras.get("allreduce", math.nan), int(extras.get("bytes_per_step", 0))
    lines = [f"{name}: {ranks} ranks x batch {batch} (1 thread each) {step * 1e3:.2f} ms per step, "
             f"one process x batch {global_batch} ({facts['threads_one_process']} threads) {alone * 1e3:.2f} ms: "
             f"speed-up {alone / step:.2f}x; in the allreduce {reduce_s * 1e3:.2f} ms per step "
             f"({100 * reduce_s / step:.0f}%), {nbytes} bytes per step in one Allreduce",
             f"{name}: paper estimate of the ring allreduce of those {nbytes} bytes over 25 Gb/s Ethernet "
             f"(2(p-1)/p * bytes / bandwidth + 2(p-1) * {ETHERNET_LATENCY_S * 1e6:.0f} us):"]
    for count in (8, 64):
        estimate = ring_allreduce_seconds(nbytes, count)
        lines.append(f"{name}:   {count} ranks: {estimate * 1e3:.2f} ms per step; added to the "
                     f"{alone * 1e3:.2f} ms of a batch-{global_batch} step on each rank (weak scaling), "
                     f"{100 * alone / (alone + estimate):.0f}% scaling efficiency")
    return lines


# ------------------------------------------------------------------------------------------------
# Environment report
# ------------------------------------------------------------------------------------------------
def cpu_model() -> str:
    """The CPU's model name, with its family and model numbers (a VM may show only "AMD EPYC")."""
    try:
        fields: dict[str, str] = {}
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            key, _, value = line.partition(":")
            fields.setdefault(key.strip(), value.strip())
        if "model name" in fields:
            numbers = [f"{key} {fields[key]}" for key in ("cpu family", "model") if key in fields]
            return fields["model name"] + (f" ({', '.join(numbers)})" if numbers else "")
    except OSError:
        pass
    return platform.processor() or platform.machine()


def git_revision() -> str:
    """The checkout's commit, with "+dirty" when the working tree has changes."""
    try:
        commit = subprocess.run(["git", "rev-parse", "--short", "HEAD"], cwd=ROOT, capture_output=True,
                                text=True, timeout=10, check=True).stdout.strip()
        dirty = subprocess.run(["git", "status", "--porcelain", "--untracked-files=no"], cwd=ROOT,
                               capture_output=True, text=True, timeout=10, check=True).stdout.strip()
    except (OSError, subprocess.SubprocessError):
        return "unknown"
    return commit + ("+dirty" if dirty else "")


def nvidia_smi_gpus() -> list[str]:
    """nvidia-smi's description of the GPU the workers use (CUDA device 0: with CUDA_DEVICE_ORDER=
    PCI_BUS_ID the first of CUDA_VISIBLE_DEVICES, or nvidia-smi's GPU 0), or of every GPU when that
    one cannot be named."""
    visible = os.environ.get("CUDA_VISIBLE_DEVICES", "").split(",")[0].strip() or "0"
    # compute_mode: the three workers need the GPU in the Default mode (not Exclusive_Process).
    query = ["nvidia-smi", "--query-gpu=index,name,driver_version,memory.total,pci.bus_id,compute_mode",
             "--format=csv,noheader"]
    for command in (query + ["-i", visible], query):
        try:
            completed = subprocess.run(command, capture_output=True, text=True, timeout=30)
        except (OSError, subprocess.SubprocessError) as error:
            return [f"nvidia-smi did not run ({type(error).__name__}: {error})"]
        if completed.returncode == 0 and completed.stdout.strip():
            return [f"index, name, driver, memory, PCI bus, compute mode: {line.strip()}"
                    for line in completed.stdout.splitlines()]
    return [f"nvidia-smi failed: {completed.stderr.strip() or completed.returncode}"]


def kernel_driver() -> list[str]:
    """The NVIDIA kernel module's version line (Linux), which names the driver without nvidia-smi."""
    try:
        return [Path("/proc/driver/nvidia/version").read_text().splitlines()[0].strip()]
    except (OSError, IndexError):
        return []


def gpu_environment(target: str) -> dict[str, Any]:
    if target == "cuda-emulated":
        return {"target": target, "gpu": ["none: graphgrad's GPU kernels ran on the CPU (Session(target="
                                          "'cuda-emulated')), torch and jax on the CPU; no GPU figures"]}
    return {"target": target, "gpu": nvidia_smi_gpus() + kernel_driver(),
            "cuda_visible_devices": os.environ.get("CUDA_VISIBLE_DEVICES"), "cuda_device_order": GPU_DEVICE_ORDER}


def environment(reports: dict[str, dict[str, Any]], target: str = "cpu") -> dict[str, Any]:
    versions = {"python": platform.python_version()}
    for report in reports.values():
        versions.update(report["versions"])
    affinity = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count()
    described = {
        "git": git_revision(),
        "pid": os.getpid(),
        "date": datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"),
        "command": " ".join(shlex.quote(a) for a in [os.path.basename(sys.executable), *sys.argv]),
        "cpu": cpu_model(),
        "cores": os.cpu_count(),
        "usable_cores": affinity,
        "platform": platform.platform(),
        "versions": versions,
        "blas": reports["numpy"]["pools"] if "numpy" in reports else [],
        "processes": {name: {"pid": r["pid"], "threads": r["threads"], "pools": r["pools"]}
                      for name, r in reports.items()},
        "openblas_variables": {name: os.environ[name] for name in OPENBLAS_VARIABLES if name in os.environ},
    }
    if target in bench.GPU_TARGETS:
        described.update(gpu_environment(target))
        for name, report in reports.items():
            described["processes"][name]["devices"] = report.get("devices", [])
    return described


def print_environment(env: dict[str, Any], missing: dict[str, str]) -> None:
    print(f"date:     {env['date']}")
    print(f"command:  {env['command']}")
    print(f"machine:  {env['cpu']}, {env['cores']} cores ({env['usable_cores']} usable), {env['platform']}")
    print(f"graphgrad: {ROOT} at {env['git']}")
    print("versions: " + ", ".join(f"{k} {v}" for k, v in env["versions"].items()))
    if "target" in env:
        print(f"target:   {env['target']}" + (f" (every library on CUDA device 0, CUDA_DEVICE_ORDER="
                                                 f"{env['cuda_device_order']}, CUDA_VISIBLE_DEVICES="
                                                 f"{env['cuda_visible_devices'] or 'unset'})"
                                                 if env["target"] == "cuda" else ""))
        for line in env["gpu"]:
            print(f"gpu:      {line}")
        for name, process in env["processes"].items():
            for line in process["devices"]:
                print(f"device:   {name}: {line}")
    processes = env["processes"]
    print("processes: one per library, " + ", ".join(f"{name} (pid {p['pid']})" for name, p in processes.items())
          + "; one computes at a time, the others wait on a pipe")
    for name, process in processes.items():
        for line in process["threads"]:
            print(f"threads:  {name}: {line}")
    for library, reason in missing.items():
        print(f"skipped:  {library}: {reason}")
    load = env.get("other_processes_cores")
    if load is not None:
        print(f"load:     other processes kept at most {load:.2f} cores busy during a kept round; "
              f"{env['rounds_discarded']} busier round(s) thrown away and run again")
        if load > env["max_other_load"]:
            print("WARNING:  the machine was not quiet: other processes competed for the cores, so the "
                  "numbers are noisy. Run again on an idle machine.")
    setup_load = env.get("setup_other_processes_cores")
    if setup_load is not None:
        print(f"load:     other processes kept {setup_load:.2f} cores busy during set-up (checks, warm-up, "
              "the one torch.compile measurement)")
    for name, value in env["openblas_variables"].items():
        print(f"WARNING:  {name}={value} is set; it changes numpy's OpenBLAS kernels (slower). Run with "
              f"`env -u OPENBLAS_CORETYPE -u OPENBLAS_L2_SIZE python examples/benchmarks/run.py`")


def to_json(workloads: list[WorkloadRecord], env: dict[str, Any], missing: dict[str, str],
            args: argparse.Namespace) -> dict[str, Any]:
    by_name = {w.name: w for w in workloads}
    results: dict[str, Any] = {}
    for workload in workloads:
        libraries = {}
        for library, case in workload.cases.items():
            seconds = median_seconds(case)
            entry: dict[str, Any] = {
                "median_seconds": seconds,
                "value": display_value(workload, seconds),
                "unit": workload.unit,
                "samples_seconds": [case.fixed] if case.fixed is not None else case.samples,
                "calls_per_sample": case.calls,
                "note": case.note,
            }
            if any(case.extras):
                entry["extras"] = {key: {"median": value, "samples": [e.get(key) for e in case.extras]}
                                   for key, value in extra_medians(case).items()}
            libraries[library] = entry
        ratios = {}
        if "graphgrad" in workload.cases:
            base = median_seconds(workload.cases["graphgrad"])
            ratios = {library: base / entry["median_seconds"] for library, entry in libraries.items()
                      if library != "graphgrad"}
        results[workload.name] = {"unit": workload.unit, "description": workload.description,
                                  "libraries": libraries, "ratios_graphgrad_over_other": ratios}
        lines = details(workload, by_name, args.target)
        if lines:
            results[workload.name]["details"] = lines
        goals = gpu_goals(workload, by_name, args.target) if args.target in bench.GPU_TARGETS else []
        if goals:
            results[workload.name]["goals"] = [
                {"measure": goal.measure, "value": goal.value if goal.checked else None,
                 "goal": "at least" if goal.at_least else "at most", "limit": goal.limit,
                 "met": goal.met if goal.checked else None} for goal in goals]
    return {"environment": env, "skipped": dict(missing),
            "settings": {"target": args.target, "rounds": args.rounds, "sample_ms": args.sample_ms,
                         "elements": args.elements, "quick": args.quick,
                         "max_other_load": None if math.isinf(args.max_other_load) else args.max_other_load},
            "results": results}


# ------------------------------------------------------------------------------------------------
# Command line
# ------------------------------------------------------------------------------------------------
def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(
        description="Benchmark graphgrad against numpy, PyTorch and JAX (one process per library, "
                    "interleaved rounds, medians).",
        epilog="Run as: env -u OPENBLAS_CORETYPE -u OPENBLAS_L2_SIZE python examples/benchmarks/run.py")
    parser.add_argument("--target", choices=bench.TARGETS, default="cpu",
                        help="cpu (default): graphgrad against numpy, torch and jax on the CPU; cuda: "
                             "graphgrad's Session(target='cuda') against torch (CUDA) and jax (GPU) on one GPU; "
                             "cuda-emulated: that comparison at small sizes with graphgrad's GPU kernels, torch "
                             "and jax all on the CPU (a test without a GPU)")
    parser.add_argument("--quick", action="store_true",
                        help="a smoke run: 3 rounds, short samples, 2**22 elements, no sgemm-2048, "
                             "no torch.compile (GPU targets: 3 rounds, short samples)")
    parser.add_argument("--only", type=str, default=None,
                        help=f"comma-separated workloads to run (default: all): {','.join(WORKLOADS)}; "
                             f"with --target cuda: {','.join(bench.GPU_WORKLOADS)} (any mlp-b<N>, cnn-b<N>, "
                             f"sgemm-<N>); cuda-emulated's default: {','.join(bench.EMULATED_WORKLOADS)}")
    parser.add_argument("--json", type=Path, default=None, help="also write the results to this JSON file")
    parser.add_argument("--rounds", type=int, default=None, help="interleaved rounds (default 7; 3 with --quick)")
    parser.add_argument("--sample-ms", type=float, default=None,
                        help="time one sample takes at least, per library and workload (default 40; 4 with --quick)")
    parser.add_argument("--elements", type=int, default=None,
                        help="size of elementwise-16M (default 2**24; 2**22 with --quick); with a GPU target "
                             f"of elementwise-256M and copy-256M (default 2**28; cuda-emulated "
                             f"2**{bench.EMULATED_ELEMENTS.bit_length() - 1})")
    parser.add_argument("--max-other-load", type=float, default=None,
                        help="a round during which other processes kept more cores busy than this is "
                             "run again, at most --rounds times (default 0.15; no re-runs with --quick)")
    parser.add_argument("--no-torch-compile", action="store_true", help="leave out the torch.compile column")
    # The processes this script starts: a library's worker, a new process's first step, an MPI rank.
    parser.add_argument("--worker", choices=PROCESS_ORDER, default=None, help=argparse.SUPPRESS)
    parser.add_argument("--fresh-step", choices=("graphgrad", "graphgrad-other", "jax"), default=None,
                        help=argparse.SUPPRESS)
    parser.add_argument("--mpi-worker", type=int, default=None, help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.rounds is None:
        args.rounds = 3 if args.quick else 7
    if args.sample_ms is None:
        args.sample_ms = 4.0 if args.quick else 40.0
    if args.max_other_load is None:
        args.max_other_load = math.inf if args.quick else 0.15
    gpu = args.target in bench.GPU_TARGETS
    if args.elements is None:
        if gpu:
            args.elements = bench.GPU_ELEMENTS if args.target == "cuda" else bench.EMULATED_ELEMENTS
        else:
            args.elements = 2 ** 22 if args.quick else 2 ** 24
    args.torch_compile = not (args.no_torch_compile or args.quick or gpu)   # not part of the GPU comparison
    if args.only:
        args.workloads = [w.strip() for w in args.only.split(",") if w.strip()]
        if gpu:
            unknown = [w for w in args.workloads if not bench.GPU_WORKLOAD_PATTERN.fullmatch(w)]
            known = f"{', '.join(bench.GPU_WORKLOADS)} (any mlp-b<N>, cnn-b<N>, sgemm-<N>) with --target {args.target}"
        else:
            unknown = [w for w in args.workloads if w not in WORKLOADS]
            known = ", ".join(WORKLOADS)
        if unknown:
            parser.error(f"unknown workload(s) {', '.join(unknown)}; choose from {known}")
    elif gpu:
        args.workloads = list(bench.GPU_WORKLOADS if args.target == "cuda" else bench.EMULATED_WORKLOADS)
    else:
        args.workloads = [w for w in WORKLOADS if not (args.quick and w == "sgemm-2048")]
    if args.rounds < 1 or args.elements < 1 or args.sample_ms <= 0:
        parser.error("--rounds, --elements and --sample-ms must be positive")
    return args


def print_gpu_legend(workloads: list[WorkloadRecord], args: argparse.Namespace) -> None:
    """What the GPU table's numbers are, and how each library's calls were timed."""
    print("Medians over rounds, per call: ms for the training steps (lower is better), GFLOP/s = 2n^3/t for "
          "sgemm and GB/s = 8 bytes per element / t for elementwise and copy (higher is better).")
    print("gg/X = graphgrad time / X time for every row: below 1, graphgrad is faster.")
    print("Every call ends on the device before the next: torch.cuda.synchronize() after each torch call, "
          "block_until_ready for jax; graphgrad's runs fetch only an operation (batch, parameters, operands "
          "and results are variables, so nothing is downloaded) and a fetch of a few values a run wrote ends "
          "each sample.")
    if args.target == "cuda-emulated":
        print("--target cuda-emulated: graphgrad's GPU kernels ran on the CPU, and torch and jax on the CPU: "
              "a test of the comparison, not GPU figures.")
    if any(w in args.workloads for w in ("elementwise-256M", "copy-256M")) and args.elements != bench.GPU_ELEMENTS:
        print(f"elementwise-256M and copy-256M ran on {args.elements} elements (--elements), not 2**28.")
    for workload in workloads:
        for case in workload.cases.values():
            if case.note:
                print(f"{workload.name} {case.library}: {case.note}")


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    if args.worker is not None:
        return bench.worker(args.worker, args.torch_compile, args.target)
    if args.fresh_step is not None:
        bench.fresh_step(args.fresh_step)
        return 0
    if args.mpi_worker is not None:
        bench.mpi_worker(args.mpi_worker)
        return 0
    started = time.perf_counter()
    workers: dict[str, WorkerProcess] = {}
    try:
        setup_meter = LoadMeter()
        setup = start_workers(args, workers)
        setup_load = setup_meter.other_cores()
        print(f"timing {args.rounds} interleaved rounds ...", file=sys.stderr)
        timing = run_rounds(setup.workloads, args.rounds, args.max_other_load, progress=True)
    finally:
        close_workers(workers)

    workloads = setup.workloads
    env = environment(setup.reports, args.target)
    env.update(timing)
    env["max_other_load"] = args.max_other_load
    env["setup_other_processes_cores"] = setup_load
    print_environment(env, setup.missing)
    print()
    print(render_table(workloads))
    print()
    if args.target in bench.GPU_TARGETS:
        print_gpu_legend(workloads, args)
    else:
        print("Medians over rounds, per call: ms (lower is better), GFLOP/s = 2n^3/t for sgemm (higher is "
              "better), us for run-overhead and infer-8threads.")
        print("gg/X = graphgrad time / X time for every row (sgemm included): below 1, graphgrad is faster.")
        print("graphgrad's elementwise and sgemm results go into reused outputs (Session.run out=; numpy's "
              "sgemm too: matmul out=); run-overhead includes feeding the input and copying the result.")
        if "elementwise-16M" in args.workloads and args.elements != 2 ** 24:
            print(f"elementwise-16M ran on {args.elements} elements (--elements), not 2**24.")
        for workload in workloads:
            for case in workload.cases.values():
                if case.note and case.fixed is not None:
                    print(f"{workload.name} {case.library}: {case.note}")
    by_name = {w.name: w for w in workloads}
    for workload in workloads:
        for line in details(workload, by_name, args.target):
            print(line)
    print(f"total time: {time.perf_counter() - started:.1f} s")
    if args.json is not None:
        args.json.write_text(json.dumps(to_json(workloads, env, setup.missing, args), indent=2))
        print(f"wrote {args.json}")
    return 0


if __name__ == "__main__":
    try:
        sys.exit(main())
    except BenchmarkError as failure:
        print(f"FAILED: {failure}", file=sys.stderr)
        sys.exit(1)
    except WorkerError as error:
        print(f"ERROR: {error}", file=sys.stderr)
        sys.exit(1)
    except GpuUnavailable as reason:
        print(f"ERROR: --target cuda needs a GPU that graphgrad can use, and here it cannot: {reason}\n"
              "Install the GPU runtime with `pip install -e \".[cuda]\"` on a machine with an NVIDIA GPU and "
              "driver, or run `python examples/benchmarks/run.py --target cuda-emulated` to test the GPU "
              "comparison with graphgrad's GPU kernels on the CPU.", file=sys.stderr)
        sys.exit(1)

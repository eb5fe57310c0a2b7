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


class WorkerError(RuntimeError):
    """A worker process crashed or raised something other than a wrong result."""


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

    def __init__(self, name: str, torch_compile: bool) -> None:
        self.name = name
        env = dict(os.environ)
        env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(ROOT), env.get("PYTHONPATH", "")]))
        command = [sys.executable, str(Path(__file__).resolve()), "--worker", name]
        if not torch_compile:
            command.append("--no-torch-compile")
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
    wanted = {name: [w for w in args.workloads if name in bench.PROCESSES[w]] for name in PROCESS_ORDER}
    print(f"starting the processes of {', '.join(name for name in PROCESS_ORDER if wanted[name])} ...",
          file=sys.stderr)
    for name in PROCESS_ORDER:
        if wanted[name]:
            workers[name] = WorkerProcess(name, args.torch_compile)
    for name, worker in list(workers.items()):
        imported = worker.receive(SETUP_LIMIT_S)
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
                workload_name, info["unit"], info["description"], info["flops"], info["once"]))
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
    if workload.unit == "us":
        return seconds * 1e6
    return seconds * 1e3


def format_number(value: float) -> str:
    if value >= 100:
        return f"{value:.0f}"
    if value >= 10:
        return f"{value:.1f}"
    return f"{value:.2f}"


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
def details(workload: WorkloadRecord, by_name: dict[str, WorkloadRecord]) -> list[str]:
    """The comparisons a workload's row alone does not show (also written to the JSON)."""
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
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
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


def environment(reports: dict[str, dict[str, Any]]) -> dict[str, Any]:
    versions = {"python": platform.python_version()}
    for report in reports.values():
        versions.update(report["versions"])
    affinity = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count()
    return {
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


def print_environment(env: dict[str, Any], missing: dict[str, str]) -> None:
    print(f"date:     {env['date']}")
    print(f"command:  {env['command']}")
    print(f"machine:  {env['cpu']}, {env['cores']} cores ({env['usable_cores']} usable), {env['platform']}")
    print(f"graphgrad: {ROOT} at {env['git']}")
    print("versions: " + ", ".join(f"{k} {v}" for k, v in env["versions"].items()))
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
        lines = details(workload, by_name)
        if lines:
            results[workload.name]["details"] = lines
    return {"environment": env, "skipped": dict(missing),
            "settings": {"rounds": args.rounds, "sample_ms": args.sample_ms, "elements": args.elements,
                         "quick": args.quick,
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
    parser.add_argument("--quick", action="store_true",
                        help="a smoke run: 3 rounds, short samples, 2**22 elements, no sgemm-2048, "
                             "no torch.compile")
    parser.add_argument("--only", type=str, default=None,
                        help=f"comma-separated workloads to run (default: all): {','.join(WORKLOADS)}")
    parser.add_argument("--json", type=Path, default=None, help="also write the results to this JSON file")
    parser.add_argument("--rounds", type=int, default=None, help="interleaved rounds (default 7; 3 with --quick)")
    parser.add_argument("--sample-ms", type=float, default=None,
                        help="time one sample takes at least, per library and workload (default 40; 4 with --quick)")
    parser.add_argument("--elements", type=int, default=None,
                        help="size of elementwise-16M (default 2**24; 2**22 with --quick)")
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
    if args.elements is None:
        args.elements = 2 ** 22 if args.quick else 2 ** 24
    args.torch_compile = not (args.no_torch_compile or args.quick)
    if args.only:
        args.workloads = [w.strip() for w in args.only.split(",") if w.strip()]
        unknown = [w for w in args.workloads if w not in WORKLOADS]
        if unknown:
            parser.error(f"unknown workload(s) {', '.join(unknown)}; choose from {', '.join(WORKLOADS)}")
    else:
        args.workloads = [w for w in WORKLOADS if not (args.quick and w == "sgemm-2048")]
    if args.rounds < 1 or args.elements < 1 or args.sample_ms <= 0:
        parser.error("--rounds, --elements and --sample-ms must be positive")
    return args


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    if args.worker is not None:
        return bench.worker(args.worker, args.torch_compile)
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
    env = environment(setup.reports)
    env.update(timing)
    env["max_other_load"] = args.max_other_load
    env["setup_other_processes_cores"] = setup_load
    print_environment(env, setup.missing)
    print()
    print(render_table(workloads))
    print()
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
        for line in details(workload, by_name):
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

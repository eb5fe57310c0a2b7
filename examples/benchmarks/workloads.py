"""The library side of ``run.py``: every workload as each library computes it, and the worker loop.

``run.py`` starts one worker process per library (``run.py --worker graphgrad``, ``numpy``,
``torch``, ``jax``); each imports only its own library, builds and checks its cases, warms them up,
and then answers the parent's requests for one timed sample at a time (JSON lines on its stdin and
stdout). So numpy's OpenBLAS threads, PyTorch's OpenMP pool, XLA's thread pool and graphgrad's
worker pool never live in one process, unless a workload puts them there on purpose
(``mlp-b128-blas-alive`` and ``mlp-b128-torch-alive`` call numpy or torch in the graphgrad process).

A case is one library on one workload: ``sample(n)`` times ``n`` calls and returns the seconds per
call (or ``(seconds, extras)``, where ``extras`` are other per-call figures the parent reports under
the table); ``check()`` compares one call's result with numpy's and raises ``BenchmarkError`` when
it is wrong. graphgrad is imported on first use (``import_graphgrad``), so the other workers never
load it.

With ``--target cuda`` (or ``cuda-emulated``) the workers are graphgrad, torch and jax on one GPU
(see "GPU target" below): the same models, every library's inputs and parameters resident on the
device, every timed call synchronized.
"""
from __future__ import annotations

import atexit
import contextlib
import functools
import itertools
import json
import math
import os
import platform
import re
import select
import shutil
import subprocess
import sys
import tempfile
import threading
import time
import traceback
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Iterator

import numpy as np

ROOT = Path(__file__).resolve().parents[2]
RUN_SCRIPT = Path(__file__).resolve().with_name("run.py")
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

# graphgrad's modules, bound by import_graphgrad() in the processes that use graphgrad.
cc: Any = None
optim: Any = None
Session: Any = None

INFERENCE_THREADS: int = 8
INFERENCE_BATCH: int = 32
MLP_SIZES: tuple[int, ...] = (784, 512, 512, 10)
OTHER_MLP_SIZES: tuple[int, ...] = (784, 256, 10)   # first-step-lib-cached's warm-up model
OTHER_MLP_BATCH: int = 32
LEARNING_RATE: float = 0.01
TORCH_COMPILE_LIMIT_S: float = 60.0
FRESH_PROCESS_LIMIT_S: float = 300.0
ALIVE_MATMUL: int = 512            # the numpy / torch matmul before each step of the *-alive workloads

# Which worker processes take part in each workload (graphgrad's also runs "one-process").
PROCESSES: dict[str, tuple[str, ...]] = {
    "mlp-b128": ("graphgrad", "numpy", "torch", "jax"),
    "mlp-b1024": ("graphgrad", "numpy", "torch", "jax"),
    "cnn-b64": ("graphgrad", "numpy", "torch", "jax"),
    "elementwise-16M": ("graphgrad", "numpy", "torch", "jax"),
    "sgemm-256": ("graphgrad", "numpy", "torch", "jax"),
    "sgemm-512": ("graphgrad", "numpy", "torch", "jax"),
    "sgemm-1024": ("graphgrad", "numpy", "torch", "jax"),
    "sgemm-2048": ("graphgrad", "numpy", "torch", "jax"),
    "compile-mlp": ("graphgrad", "torch", "jax"),
    "compile-mlp-cached": ("graphgrad",),
    "first-step-fresh": ("graphgrad", "jax"),
    "first-step-lib-cached": ("graphgrad",),
    "mlp-b128-checked": ("graphgrad",),
    "mlp-b128-blas-alive": ("graphgrad",),
    "mlp-b128-torch-alive": ("graphgrad",),
    "mlp-b128-2sessions": ("graphgrad",),
    "run-overhead": ("graphgrad", "numpy", "torch", "jax"),
    "infer-8threads": ("graphgrad", "numpy", "torch", "jax"),
    "mlp-b1024-mpi2": ("graphgrad",),
    "rnn-scan": ("graphgrad", "numpy", "torch", "jax"),
    "attn-b32": ("graphgrad", "numpy", "torch", "jax"),
}
WORKLOADS: tuple[str, ...] = tuple(PROCESSES)
# The columns (libraries) each worker process fills.
PROCESS_LIBRARIES: dict[str, tuple[str, ...]] = {
    "graphgrad": ("graphgrad", "one-process"), "numpy": ("numpy", "numpy-out"),
    "torch": ("torch", "torch.compile"), "jax": ("jax",)}

# The GPU comparison (run.py --target cuda): graphgrad's Session(target="cuda") against torch (CUDA)
# and jax (GPU). "cuda-emulated" runs graphgrad's GPU kernels on the CPU, and torch and jax on the CPU.
GPU_TARGETS: tuple[str, ...] = ("cuda", "cuda-emulated")
TARGETS: tuple[str, ...] = ("cpu", *GPU_TARGETS)
GPU_PROCESS_ORDER: tuple[str, ...] = ("graphgrad", "torch", "jax")
GPU_WORKLOADS: tuple[str, ...] = ("mlp-b128", "mlp-b4096", "cnn-b64", "sgemm-1024", "sgemm-4096",
                                  "elementwise-256M", "copy-256M")
# The same workloads at sizes the CPU emulation runs in seconds (the default of --target cuda-emulated).
EMULATED_WORKLOADS: tuple[str, ...] = ("mlp-b16", "mlp-b128", "cnn-b4", "sgemm-64", "sgemm-128",
                                       "elementwise-256M", "copy-256M")
GPU_ELEMENTS: int = 2 ** 28                # elementwise-256M and copy-256M: 1 GiB of float32
EMULATED_ELEMENTS: int = 2 ** 18
# Any batch or size: mlp-b<batch>, cnn-b<batch>, sgemm-<n>.
GPU_WORKLOAD_PATTERN = re.compile(r"(mlp|cnn)-b[1-9][0-9]*|sgemm-[1-9][0-9]*|elementwise-256M|copy-256M")
ELEMENTWISE_CHUNK: int = 2 ** 22           # elements per piece of the float64 reference check


def processes_of(workload: str, target: str) -> tuple[str, ...]:
    """The worker processes that take part in ``workload`` on ``target``."""
    if target not in GPU_TARGETS:
        return PROCESSES[workload]
    return ("graphgrad", "torch") if workload == "copy-256M" else GPU_PROCESS_ORDER


class BenchmarkError(RuntimeError):
    """A library computed a wrong result: the benchmark stops rather than time it."""


def import_graphgrad() -> None:
    """Import graphgrad's packages into this module's ``cc``, ``optim`` and ``Session``."""
    global cc, optim, Session
    if cc is None:
        import compiler as cc
        import optim
        from runtime import Session


# ------------------------------------------------------------------------------------------------
# The libraries of one worker process
# ------------------------------------------------------------------------------------------------
@dataclass
class Libraries:
    """What this process runs: graphgrad, numpy, or the optional torch / jax modules (None when the
    process is not theirs or they cannot be imported; ``missing`` says why). ``target`` is run.py's
    ``--target``; ``torch_device`` is torch's device on a GPU target (None: the CPU, as always on
    ``cpu``)."""

    graphgrad: bool = False
    numpy: bool = False
    torch: Any = None
    functional: Any = None
    jax: Any = None
    jnp: Any = None
    missing: dict[str, str] = field(default_factory=dict)
    target: str = "cpu"
    torch_device: Any = None


def open_libraries(process: str, use_torch_compile: bool, target: str = "cpu") -> Libraries:
    """Import the library of worker ``process``; an optional one that fails is named in ``missing``.
    On ``target="cuda"`` a library that cannot use the GPU is missing too (graphgrad included: the
    parent then stops with the reason)."""
    found = Libraries(target=target)
    if process == "graphgrad":
        import_graphgrad()
        found.graphgrad = True
        if target == "cuda":
            open_graphgrad_gpu(found)
    elif process == "numpy":
        found.numpy = True
    elif process == "torch":
        try:
            if use_torch_compile and "TORCHINDUCTOR_CACHE_DIR" not in os.environ:
                # A fresh inductor cache, so that compile-mlp measures a cold torch.compile.
                cache = tempfile.mkdtemp(prefix="graphgrad-bench-inductor-")
                os.environ["TORCHINDUCTOR_CACHE_DIR"] = cache
                atexit.register(shutil.rmtree, cache, ignore_errors=True)
            import torch
            import torch.nn.functional as functional
            found.torch, found.functional = torch, functional
        except Exception as error:  # noqa: BLE001 - any import failure just drops the columns
            found.missing["torch"] = f"not importable ({type(error).__name__}: {error})"
            found.missing["torch.compile"] = "torch is not importable"
        if found.torch is not None and target in GPU_TARGETS:
            open_torch_gpu(found)
        elif found.torch is not None and not use_torch_compile:
            found.missing["torch.compile"] = "disabled (--no-torch-compile or --quick)"
    elif process == "jax":
        try:
            if target == "cuda":
                os.environ["JAX_PLATFORMS"] = "cuda"
                # jax takes 75% of the GPU's memory when it starts unless told not to; graphgrad's
                # and torch's processes share the GPU with it.
                os.environ.setdefault("XLA_PYTHON_CLIENT_PREALLOCATE", "false")
            elif target == "cuda-emulated":
                os.environ["JAX_PLATFORMS"] = "cpu"
            else:
                os.environ.setdefault("JAX_PLATFORMS", "cpu")
            import jax
            import jax.numpy as jnp
            found.jax, found.jnp = jax, jnp
        except Exception as error:  # noqa: BLE001
            found.missing["jax"] = f"not importable ({type(error).__name__}: {error})"
        if found.jax is not None and target in GPU_TARGETS:
            open_jax_gpu(found)
    else:
        raise ValueError(f"unknown worker process {process!r}")
    return found


def open_graphgrad_gpu(found: Libraries) -> None:
    """Check that graphgrad can open the GPU (``Session(target="cuda")``); if not, graphgrad is missing."""
    try:
        Session(cc.Graph(), target="cuda").close()
    except Exception as error:  # noqa: BLE001 - no driver, no device, no cuda-bindings: all stop the run
        found.missing["graphgrad"] = f"Session(target='cuda') failed: {type(error).__name__}: {error}"
        found.graphgrad = False


def open_torch_gpu(found: Libraries) -> None:
    """torch for the GPU comparison: float32 products and convolutions computed in float32 (TF32
    off), on the GPU for ``cuda``; on the CPU for ``cuda-emulated``."""
    torch = found.torch
    torch.backends.cuda.matmul.allow_tf32 = False
    torch.backends.cudnn.allow_tf32 = False
    if found.target != "cuda":
        return
    if not torch.cuda.is_available():
        build = (f"built for CUDA {torch.version.cuda}" if torch.version.cuda
                 else "a CPU-only build: install a CUDA build")
        found.missing["torch"] = f"torch {torch.__version__} sees no GPU (torch.cuda.is_available() is False; {build})"
        found.torch = found.functional = None
        return
    torch.backends.cudnn.benchmark = True       # fixed shapes: cuDNN picks its fastest convolutions once
    found.torch_device = torch.device("cuda")


def open_jax_gpu(found: Libraries) -> None:
    """jax for the GPU comparison: products and convolutions in float32 (not TF32, jax's default on
    GPUs); on ``cuda`` its device must be a GPU."""
    jax = found.jax
    jax.config.update("jax_default_matmul_precision", "float32")
    if found.target != "cuda":
        return
    try:
        platform_name = jax.devices()[0].platform
    except Exception as error:  # noqa: BLE001 - jax raises RuntimeError when the cuda plugin is missing
        platform_name = f"none ({type(error).__name__}: {error})"
    if platform_name != "gpu":
        found.missing["jax"] = (f"jax {jax.__version__} has no GPU device (platform {platform_name}); install "
                                "a CUDA build: pip install -U 'jax[cuda12]'")
        found.jax = found.jnp = None


def torch_synchronized(libs: Libraries, call: Callable[[], Any]) -> Callable[[], Any]:
    """``call`` followed by ``torch.cuda.synchronize()`` when torch runs on the GPU (its kernels are
    launched asynchronously, so a call returns before they end); ``call`` itself on the CPU."""
    if libs.torch_device is None:
        return call
    synchronize = libs.torch.cuda.synchronize

    def synchronized() -> Any:
        result = call()
        synchronize()
        return result
    return synchronized


# ------------------------------------------------------------------------------------------------
# Cases: one library on one workload
# ------------------------------------------------------------------------------------------------
Sample = Callable[[int], "float | tuple[float, dict[str, float]]"]


@dataclass
class Case:
    """One library on one workload.

    ``sample(n)`` returns the seconds per call, measured over ``n`` calls (a ``once`` workload
    ignores ``n`` and measures one first call), or ``(seconds, extras)``. ``fixed`` holds a
    measurement taken once, at set-up, for cases that cannot be repeated cheaply (torch.compile's
    cold compile). ``warm=False``: the check already ran what a warm-up would.
    """

    library: str
    sample: Sample | None
    check: Callable[[], None] | None = None
    fixed: float | None = None
    calls: int = 1
    note: str = ""
    warm: bool = True


@dataclass
class Workload:
    name: str
    unit: str                      # "ms", "us", "GFLOP/s" or "GB/s"
    description: str
    cases: dict[str, Case]
    flops: float = 0.0             # per call, for GFLOP/s
    bytes: float = 0.0             # read and written per call, for GB/s
    once: bool = False             # one call per sample (first calls: compiles, new processes)
    facts: dict[str, Any] = field(default_factory=dict)   # sizes the parent's lines under the table use


def timed_calls(call: Callable[[], Any]) -> Callable[[int], float]:
    """``sample(n)``: seconds per call of ``call`` over ``n`` back-to-back calls.

    One untimed call goes first: between two samples of a library the others run for seconds,
    and on a virtual machine memory freed that long ago may have been handed back to the host,
    so the first large allocation after the pause is paged in again (numpy's elementwise
    expression on 2**24 elements: ~80 ms back to back, 250-650 ms after a 2-4 s pause).
    """
    def sample(count: int) -> float:
        call()
        start = time.perf_counter()
        for _ in range(count):
            call()
        return (time.perf_counter() - start) / count
    return sample


def time_threads(bodies: list[Callable[[], Any]]) -> float:
    """Run every body on its own Python thread, all released at once; the seconds until the last ends."""
    start = threading.Barrier(len(bodies) + 1)

    def run(body: Callable[[], Any]) -> None:
        start.wait()
        body()
    threads = [threading.Thread(target=run, args=(body,)) for body in bodies]
    for thread in threads:
        thread.start()
    start.wait()
    began = time.perf_counter()
    for thread in threads:
        thread.join()
    return time.perf_counter() - began


def assert_close(library: str, workload: str, actual: np.ndarray, expected: np.ndarray,
                 rtol: float, atol: float) -> None:
    actual = np.asarray(actual)
    if actual.shape != expected.shape or not np.allclose(actual, expected, rtol=rtol, atol=atol):
        worst = float(np.max(np.abs(actual.astype(np.float64) - expected))) if actual.shape == expected.shape else math.nan
        raise BenchmarkError(f"{library} computed a wrong result on {workload}: shape {actual.shape} vs "
                             f"{expected.shape}, max abs error {worst:g} (rtol={rtol}, atol={atol})")


def check_parameters(library: str, workload: str, actual: list[Any], expected: list[np.ndarray]) -> None:
    for got, want in zip(actual, expected):
        assert_close(library, workload, np.asarray(got), want, rtol=1e-3, atol=1e-4)


def after_one_step(step: Callable[[], Any], current: Callable[[], list[Any]],
                   verify: Callable[[list[np.ndarray]], None]) -> Callable[[], None]:
    """A case's check: run ``step`` once, then ``verify`` the parameters ``current()`` gives."""
    def check() -> None:
        step()
        verify([np.asarray(p) for p in current()])
    return check


def check_updates(library: str, workload: str, initial: list[np.ndarray], actual: list[Any],
                  expected: list[np.ndarray], names: tuple[str, ...]) -> None:
    """Compare each parameter's change in one step (``actual - initial``, i.e. -lr * gradient) with
    the float64 reference's, relative to the largest change of that parameter: a gradient that is
    1% off fails, which a comparison of the parameters themselves (dominated by their initial
    values) would let through. ``4 eps |initial|`` allows for rounding the float32 parameter."""
    for name, start, got, want in zip(names, initial, actual, expected):
        got = np.asarray(got, dtype=np.float64)
        start = np.asarray(start, dtype=np.float64)
        want_change = np.asarray(want, dtype=np.float64) - start
        if got.shape != start.shape:
            raise BenchmarkError(f"{library} computed a wrong result on {workload}: {name} has shape "
                                 f"{got.shape}, not {start.shape}")
        error = np.abs((got - start) - want_change)
        scale = float(np.max(np.abs(want_change)))
        allowed = 1e-2 * np.abs(want_change) + 1e-3 * scale + 4 * np.finfo(np.float32).eps * np.abs(start)
        if not np.all(error <= allowed):
            raise BenchmarkError(f"{library} computed a wrong gradient on {workload}: the update of {name} is off "
                                 f"by up to {float(np.max(error)):g} (largest update {scale:g})")


# ------------------------------------------------------------------------------------------------
# MLP training step
# ------------------------------------------------------------------------------------------------
def initial_mlp_parameters(seed: int = 0, sizes: tuple[int, ...] = MLP_SIZES) -> list[tuple[np.ndarray, np.ndarray]]:
    """He-initialised (W, b) per layer of the MLP (784-512-512-10 unless ``sizes`` says), float32."""
    rng = np.random.default_rng(seed)
    layers = []
    for fan_in, fan_out in zip(sizes[:-1], sizes[1:]):
        weights = (rng.standard_normal((fan_in, fan_out)) * np.sqrt(2.0 / fan_in)).astype(np.float32)
        bias = (rng.standard_normal(fan_out) * 0.01).astype(np.float32)
        layers.append((weights, bias))
    return layers


def mlp_batch(batch: int, seed: int = 1, sizes: tuple[int, ...] = MLP_SIZES) -> tuple[np.ndarray, np.ndarray]:
    rng = np.random.default_rng(seed)
    return (rng.random((batch, sizes[0]), dtype=np.float32),
            rng.integers(0, sizes[-1], batch).astype(np.int32))


def numpy_sgd_step(params: list[tuple[np.ndarray, np.ndarray]], x: np.ndarray, y: np.ndarray) -> None:
    """One SGD step, forward and backward written by hand; updates ``params`` in place."""
    activations = [x]
    hidden = x
    last = len(params) - 1
    for index, (weights, bias) in enumerate(params):
        hidden = hidden @ weights + bias
        if index < last:
            hidden = np.maximum(hidden, 0.0)
        activations.append(hidden)
    grad = softmax_cross_entropy_gradient(activations[-1], y)
    for index in range(last, -1, -1):
        weights, bias = params[index]
        inputs = activations[index]
        grad_weights = inputs.T @ grad
        grad_bias = grad.sum(axis=0)
        if index > 0:
            grad = grad @ weights.T
            grad *= inputs > 0
        weights -= np.asarray(LEARNING_RATE, weights.dtype) * grad_weights
        bias -= np.asarray(LEARNING_RATE, bias.dtype) * grad_bias


def softmax_cross_entropy_gradient(logits: np.ndarray, labels: np.ndarray) -> np.ndarray:
    """The gradient of the mean sparse softmax cross-entropy with respect to the logits."""
    probabilities = np.exp(logits - logits.max(axis=1, keepdims=True))
    probabilities /= probabilities.sum(axis=1, keepdims=True)
    probabilities[np.arange(len(labels)), labels] -= 1.0
    probabilities /= np.asarray(len(labels), probabilities.dtype)
    return probabilities


def expected_after_one_step(batch: int) -> list[np.ndarray]:
    params = initial_mlp_parameters()
    x, y = mlp_batch(batch)
    numpy_sgd_step(params, x, y)
    return [array for layer in params for array in layer]


def batch_inputs(xb: np.ndarray, yb: np.ndarray, x_shape: tuple, in_variables: bool) -> tuple[Any, Any]:
    """The graph's inputs x and y (labels): placeholders to feed, or untrained variables holding
    the batch (``in_variables``: on a GPU it then stays on the device)."""
    if in_variables:
        return cc.Variable(xb, name="x", trainable=False), cc.Variable(yb, name="y", trainable=False)
    return cc.placeholder("float32", shape=x_shape, name="x"), cc.placeholder("int32", shape=(None,), name="y")


def build_graphgrad_mlp(batch: int, check_numerics: bool = False, sizes: tuple[int, ...] = MLP_SIZES,
                        make_optimizer: Callable[[], Any] | None = None, target: str = "cpu",
                        batch_in_variables: bool = False) -> tuple[Any, Any, dict, list[Any]]:
    """A fresh graph and Session (on ``target``) with the MLP's training step (plain SGD unless
    ``make_optimizer`` says); returns (sess, train_op, feed, variables). ``batch_in_variables``:
    the batch is held in two untrained variables instead of fed (the feed is empty), so on a GPU
    it stays on the device."""
    import_graphgrad()
    xb, yb = mlp_batch(batch, sizes=sizes)
    graph = cc.Graph()
    with graph.as_default():
        x, y = batch_inputs(xb, yb, (None, sizes[0]), batch_in_variables)
        hidden = x
        variables = []
        layers = initial_mlp_parameters(sizes=sizes)
        for index, (weights, bias) in enumerate(layers):
            w_var = cc.Variable(weights, name=f"layer{index}/W")
            b_var = cc.Variable(bias, name=f"layer{index}/b")
            variables += [w_var, b_var]
            hidden = hidden @ w_var + b_var
            if index < len(layers) - 1:
                hidden = cc.nn.relu(hidden)
        loss = cc.reduce_mean(cc.nn.sparse_softmax_cross_entropy_with_logits(labels=y, logits=hidden))
        optimizer = make_optimizer() if make_optimizer else optim.GradientDescentOptimizer(LEARNING_RATE)
        train_op = optimizer.minimize(loss)
    feed = {} if batch_in_variables else {x: xb, y: yb}
    return Session(graph, target=target, check_numerics=check_numerics), train_op, feed, variables


def graphgrad_step_case(name: str, batch: int, check_numerics: bool = False) -> Case:
    """graphgrad's MLP step as a case: ``sess.run(train_op, feed)``, checked after one step."""
    expected = expected_after_one_step(batch)
    sess, train_op, feed, variables = build_graphgrad_mlp(batch, check_numerics)

    def check() -> None:
        sess.run(train_op, feed)
        check_parameters("graphgrad", name, sess.run(variables), expected)
    return Case("graphgrad", timed_calls(lambda: sess.run(train_op, feed)), check)


def mlp_workload(batch: int, libs: Libraries) -> Workload:
    name = f"mlp-b{batch}"
    expected = expected_after_one_step(batch)
    cases: dict[str, Case] = {}
    if libs.graphgrad:
        cases["graphgrad"] = graphgrad_step_case(name, batch)
    if libs.numpy:
        params = initial_mlp_parameters()
        x, y = mlp_batch(batch)

        def numpy_check() -> None:
            numpy_sgd_step(params, x, y)
            check_parameters("numpy", name, [a for layer in params for a in layer], expected)
        cases["numpy"] = Case("numpy", timed_calls(lambda: numpy_sgd_step(params, x, y)), numpy_check)
    if libs.torch is not None:
        cases["torch"] = torch_mlp_case(libs, name, batch, expected, compiled=False)
        if "torch.compile" not in libs.missing:
            cases["torch.compile"] = torch_mlp_case(libs, name, batch, expected, compiled=True)
    if libs.jax is not None:
        cases["jax"] = jax_mlp_case(libs, name, batch, expected)
    return Workload(name, "ms", f"SGD step, MLP {'-'.join(map(str, MLP_SIZES))}, batch {batch}", cases)


def torch_mlp_step(libs: Libraries, batch: int, compiled: bool) -> tuple[Callable[[], Any], list[Any]]:
    """A torch SGD step on fresh parameters (on ``libs.torch_device``): returns (step, parameters)."""
    torch, functional, device = libs.torch, libs.functional, libs.torch_device
    params = [torch.tensor(array, requires_grad=True, device=device)
              for layer in initial_mlp_parameters() for array in layer]
    xb, yb = mlp_batch(batch)
    x, y = torch.from_numpy(xb).to(device), torch.from_numpy(yb.astype(np.int64)).to(device)

    def loss_fn(inputs: Any, labels: Any) -> Any:
        hidden = inputs
        for index in range(0, len(params), 2):
            hidden = functional.linear(hidden, params[index].t(), params[index + 1])
            if index < len(params) - 2:
                hidden = functional.relu(hidden)
        return functional.cross_entropy(hidden, labels)

    forward = torch.compile(loss_fn) if compiled else loss_fn

    def step() -> None:
        forward(x, y).backward()
        torch_sgd_update(torch, params)
    return step, params


def torch_mlp_case(libs: Libraries, name: str, batch: int, expected: list[np.ndarray],
                   compiled: bool) -> Case:
    library = "torch.compile" if compiled else "torch"
    step, params = torch_mlp_step(libs, batch, compiled)

    def check() -> None:
        step()
        check_parameters(library, name, [p.detach().numpy() for p in params], expected)
    return Case(library, timed_calls(step), check)


def jax_cross_entropy(jax: Any, jnp: Any, logits: Any, labels: Any) -> Any:
    """The mean sparse softmax cross-entropy in jax."""
    log_probabilities = jax.nn.log_softmax(logits, axis=1)
    return -jnp.mean(jnp.take_along_axis(log_probabilities, labels[:, None], axis=1))


def jax_sgd_step(jax: Any, jnp: Any, loss_fn: Callable[[Any, Any, Any], Any], params: list[np.ndarray],
                 xb: np.ndarray, yb: np.ndarray) -> tuple[Callable[[], None], Callable[[], list[np.ndarray]]]:
    """``jax.jit`` of one SGD step on ``loss_fn(params, x, y)`` (a list of arrays): returns (step,
    the current parameters)."""
    jitted = jax.jit(lambda p, x, y: [a - LEARNING_RATE * g for a, g in zip(p, jax.grad(loss_fn)(p, x, y))])
    x, y = jnp.asarray(xb), jnp.asarray(yb)
    state = {"params": [jnp.asarray(p) for p in params]}

    def step() -> None:
        state["params"] = jax.block_until_ready(jitted(state["params"], x, y))
    return step, lambda: [np.asarray(p) for p in state["params"]]


def torch_sgd_update(torch: Any, params: list[Any]) -> None:
    """``param -= lr * param.grad`` for every parameter, then forget the gradients."""
    with torch.no_grad():
        for param in params:
            param.add_(param.grad, alpha=-LEARNING_RATE)
            param.grad = None


def jax_mlp_loss(jax: Any, jnp: Any) -> Callable[[Any, Any, Any], Any]:
    """The MLP's loss as a function of ([(W, b) per layer], x, y)."""
    def loss_fn(params: Any, x: Any, y: Any) -> Any:
        hidden = x
        for index, (weights, bias) in enumerate(params):
            hidden = hidden @ weights + bias
            if index < len(params) - 1:
                hidden = jax.nn.relu(hidden)
        return jax_cross_entropy(jax, jnp, hidden, y)
    return loss_fn


def jax_mlp_step_function(jax: Any, jnp: Any) -> Callable[[Any, Any, Any], Any]:
    """The pure (params, x, y) -> new params function (not yet jitted)."""
    loss_fn = jax_mlp_loss(jax, jnp)

    def step(params: Any, x: Any, y: Any) -> Any:
        _, grads = jax.value_and_grad(loss_fn)(params, x, y)
        return jax.tree_util.tree_map(lambda p, g: p - LEARNING_RATE * g, params, grads)
    return step


def jax_mlp_case(libs: Libraries, name: str, batch: int, expected: list[np.ndarray]) -> Case:
    jax, jnp = libs.jax, libs.jnp
    step = jax.jit(jax_mlp_step_function(jax, jnp))
    xb, yb = mlp_batch(batch)
    x, y = jnp.asarray(xb), jnp.asarray(yb)
    state = {"params": [(jnp.asarray(w), jnp.asarray(b)) for w, b in initial_mlp_parameters()]}

    def call() -> None:
        state["params"] = jax.block_until_ready(step(state["params"], x, y))

    def check() -> None:
        call()
        check_parameters("jax", name, [np.asarray(a) for layer in state["params"] for a in layer], expected)
    return Case("jax", timed_calls(call), check)


# ------------------------------------------------------------------------------------------------
# cnn-b64: a small convolutional network's training step
# ------------------------------------------------------------------------------------------------
CNN_BATCH, CNN_SIZE, CNN_CLASSES, CNN_HIDDEN = 64, 28, 10, 128
CNN_CHANNELS: tuple[int, int, int] = (1, 32, 64)
CNN_FLAT: int = (CNN_SIZE // 4) ** 2 * CNN_CHANNELS[2]          # 7 * 7 * 64 after two 2x2 poolings
CNN_NAMES: tuple[str, ...] = ("conv1/filters", "conv1/b", "conv2/filters", "conv2/b", "dense/W", "dense/b",
                              "logits/W", "logits/b")


def cnn_data(seed: int = 5, batch: int = CNN_BATCH) -> tuple[list[np.ndarray], np.ndarray, np.ndarray]:
    """The CNN's parameters (filters HWIO, He-initialised; small random biases), an NHWC batch of
    28x28x1 images in [0, 1) and its labels, float32."""
    rng = np.random.default_rng(seed)

    def he(shape: tuple[int, ...], fan_in: int) -> np.ndarray:
        return (rng.standard_normal(shape) * np.sqrt(2.0 / fan_in)).astype(np.float32)

    def bias(size: int) -> np.ndarray:
        return (rng.standard_normal(size) * 0.01).astype(np.float32)
    one, two, three = CNN_CHANNELS
    params = [he((3, 3, one, two), 9 * one), bias(two), he((3, 3, two, three), 9 * two), bias(three),
              he((CNN_FLAT, CNN_HIDDEN), CNN_FLAT), bias(CNN_HIDDEN), he((CNN_HIDDEN, CNN_CLASSES), CNN_HIDDEN),
              bias(CNN_CLASSES)]
    x = rng.random((batch, CNN_SIZE, CNN_SIZE, one), dtype=np.float32)
    y = rng.integers(0, CNN_CLASSES, batch).astype(np.int32)
    return params, x, y


def conv3x3_same(x: np.ndarray, filters: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """A 3x3 stride-1 SAME convolution of NHWC ``x`` with HWIO ``filters`` as one matrix product
    of the image's patches (im2col); returns (output, patches) for the backward pass."""
    batch, height, width, channels = x.shape
    padded = np.pad(x, ((0, 0), (1, 1), (1, 1), (0, 0)))
    patches = np.stack([padded[:, i:i + height, j:j + width, :] for i in range(3) for j in range(3)], axis=3)
    patches = patches.reshape(batch * height * width, 9 * channels)
    return (patches @ filters.reshape(9 * channels, -1)).reshape(batch, height, width, -1), patches


def conv3x3_same_backward(d_output: np.ndarray, patches: np.ndarray, filters: np.ndarray,
                          input_shape: tuple[int, ...], input_gradient: bool) -> tuple[np.ndarray, np.ndarray | None]:
    """Gradients of ``conv3x3_same`` with respect to its filters and (if asked) its input."""
    batch, height, width, channels = input_shape
    d_rows = d_output.reshape(-1, filters.shape[3])
    d_filters = (patches.T @ d_rows).reshape(filters.shape)
    if not input_gradient:
        return d_filters, None
    d_patches = (d_rows @ filters.reshape(9 * channels, -1).T).reshape(batch, height, width, 9, channels)
    d_padded = np.zeros((batch, height + 2, width + 2, channels), d_output.dtype)
    for k in range(9):
        i, j = divmod(k, 3)
        d_padded[:, i:i + height, j:j + width, :] += d_patches[:, :, :, k, :]
    return d_filters, d_padded[:, 1:-1, 1:-1, :]


def max_pool_2x2(x: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """2x2 max pooling, stride 2 (even sizes: SAME pads nothing); returns (output, the index of
    each window's first maximum)."""
    batch, height, width, channels = x.shape
    windows = (x.reshape(batch, height // 2, 2, width // 2, 2, channels).transpose(0, 1, 3, 5, 2, 4)
               .reshape(batch, height // 2, width // 2, channels, 4))
    first = windows.argmax(axis=-1)
    return np.take_along_axis(windows, first[..., None], axis=-1)[..., 0], first


def max_pool_2x2_backward(d_output: np.ndarray, first: np.ndarray, input_shape: tuple[int, ...]) -> np.ndarray:
    """The gradient goes to each window's first maximum (ties only occur among relu's zeros, where
    the relu below passes no gradient whichever element gets it)."""
    batch, height, width, channels = input_shape
    d_windows = np.zeros((*d_output.shape, 4), d_output.dtype)
    np.put_along_axis(d_windows, first[..., None], d_output[..., None], axis=-1)
    return (d_windows.reshape(batch, height // 2, width // 2, channels, 2, 2).transpose(0, 1, 4, 2, 5, 3)
            .reshape(input_shape))


def numpy_cnn_step(params: list[np.ndarray], x: np.ndarray, y: np.ndarray) -> None:
    """One SGD step of the CNN, forward and backward written by hand (in the dtype of ``params``);
    updates ``params`` in place."""
    filters1, bias1, filters2, bias2, dense_w, dense_b, logits_w, logits_b = params
    conv1, patches1 = conv3x3_same(x, filters1)
    conv1 += bias1
    relu1 = np.maximum(conv1, 0.0)
    pool1, first1 = max_pool_2x2(relu1)
    conv2, patches2 = conv3x3_same(pool1, filters2)
    conv2 += bias2
    relu2 = np.maximum(conv2, 0.0)
    pool2, first2 = max_pool_2x2(relu2)
    flat = pool2.reshape(len(x), -1)
    dense = flat @ dense_w + dense_b
    relu3 = np.maximum(dense, 0.0)
    d_logits = softmax_cross_entropy_gradient(relu3 @ logits_w + logits_b, y)
    d_relu3 = d_logits @ logits_w.T
    d_dense = d_relu3 * (dense > 0)
    d_pool2 = (d_dense @ dense_w.T).reshape(pool2.shape)
    d_conv2 = max_pool_2x2_backward(d_pool2, first2, relu2.shape) * (conv2 > 0)
    d_filters2, d_pool1 = conv3x3_same_backward(d_conv2, patches2, filters2, pool1.shape, True)
    d_conv1 = max_pool_2x2_backward(d_pool1, first1, relu1.shape) * (conv1 > 0)
    d_filters1, _ = conv3x3_same_backward(d_conv1, patches1, filters1, x.shape, False)
    grads = (d_filters1, d_conv1.sum(axis=(0, 1, 2)), d_filters2, d_conv2.sum(axis=(0, 1, 2)), flat.T @ d_dense,
             d_dense.sum(axis=0), relu3.T @ d_logits, d_logits.sum(axis=0))
    for param, grad in zip(params, grads):
        param -= np.asarray(LEARNING_RATE, param.dtype) * grad


def build_graphgrad_cnn(target: str = "cpu", batch: int = CNN_BATCH,
                        batch_in_variables: bool = False) -> tuple[Any, Any, dict, list[Any]]:
    """The CNN step in graphgrad (NHWC, HWIO filters) on ``target``: (sess, train_op, feed,
    variables). ``batch_in_variables``: the batch is held in untrained variables, not fed."""
    import_graphgrad()
    params, xb, yb = cnn_data(batch=batch)
    graph = cc.Graph()
    with graph.as_default():
        x, y = batch_inputs(xb, yb, (None, CNN_SIZE, CNN_SIZE, CNN_CHANNELS[0]), batch_in_variables)
        variables = [cc.Variable(p, name=name) for p, name in zip(params, CNN_NAMES)]
        filters1, bias1, filters2, bias2, dense_w, dense_b, logits_w, logits_b = variables
        hidden = cc.nn.relu(cc.nn.conv2d(x, filters1, strides=1, padding="SAME") + bias1)
        hidden = cc.nn.max_pool(hidden, ksize=2, strides=2, padding="SAME")
        hidden = cc.nn.relu(cc.nn.conv2d(hidden, filters2, strides=1, padding="SAME") + bias2)
        hidden = cc.nn.max_pool(hidden, ksize=2, strides=2, padding="SAME")
        hidden = cc.nn.relu(cc.reshape(hidden, (-1, CNN_FLAT)) @ dense_w + dense_b)
        logits = hidden @ logits_w + logits_b
        loss = cc.reduce_mean(cc.nn.sparse_softmax_cross_entropy_with_logits(labels=y, logits=logits))
        train_op = optim.GradientDescentOptimizer(LEARNING_RATE).minimize(loss)
    feed = {} if batch_in_variables else {x: xb, y: yb}
    return Session(graph, target=target), train_op, feed, variables


def torch_cnn_case(libs: Libraries, name: str, check: Callable[[str, list[np.ndarray]], None],
                   batch: int = CNN_BATCH) -> Case:
    """The CNN step in torch eager (on ``libs.torch_device``): NCHW images and OIHW filters (the
    same values, transposed), the dense layer's rows reordered from NHWC's flattening (h, w, c) to
    NCHW's (c, h, w)."""
    torch, functional, device = libs.torch, libs.functional, libs.torch_device
    params, xb, yb = cnn_data(batch=batch)
    side, channels = CNN_SIZE // 4, CNN_CHANNELS[2]

    def convert(index: int, value: np.ndarray, to_torch: bool) -> np.ndarray:
        """Parameter ``index`` in torch's layout (``to_torch``) or back in graphgrad's."""
        if index in (0, 2):                                      # filters: HWIO <-> OIHW
            return value.transpose((3, 2, 0, 1) if to_torch else (2, 3, 1, 0))
        if index == 4:                                           # dense rows: (h, w, c) <-> (c, h, w)
            rows, order = ((side, side, channels), (2, 0, 1, 3)) if to_torch else ((channels, side, side), (1, 2, 0, 3))
            return value.reshape(*rows, -1).transpose(order).reshape(CNN_FLAT, -1)
        return value

    tensors = [torch.tensor(np.ascontiguousarray(convert(i, p, True)), requires_grad=True, device=device)
               for i, p in enumerate(params)]
    x = torch.from_numpy(np.ascontiguousarray(xb.transpose(0, 3, 1, 2))).to(device)
    y = torch.from_numpy(yb.astype(np.int64)).to(device)

    def forward_backward_update() -> None:
        filters1, bias1, filters2, bias2, dense_w, dense_b, logits_w, logits_b = tensors
        hidden = functional.max_pool2d(functional.relu(functional.conv2d(x, filters1, bias1, padding=1)), 2, 2)
        hidden = functional.max_pool2d(functional.relu(functional.conv2d(hidden, filters2, bias2, padding=1)), 2, 2)
        hidden = functional.relu(hidden.reshape(hidden.shape[0], -1) @ dense_w + dense_b)
        functional.cross_entropy(hidden @ logits_w + logits_b, y).backward()
        torch_sgd_update(torch, tensors)
    step = torch_synchronized(libs, forward_backward_update)

    def check_step() -> None:
        step()
        check("torch", [convert(i, t.detach().cpu().numpy(), False) for i, t in enumerate(tensors)])
    return Case("torch", timed_calls(step), check_step, note="eager, NCHW (the same parameters, transposed)")


def jax_cnn_case(libs: Libraries, name: str, check: Callable[[str, list[np.ndarray]], None],
                 batch: int = CNN_BATCH) -> Case:
    """The CNN step under jax.jit: lax.conv_general_dilated (NHWC, HWIO) and lax.reduce_window."""
    jax, jnp = libs.jax, libs.jnp
    params, xb, yb = cnn_data(batch=batch)
    layout = ("NHWC", "HWIO", "NHWC")

    def pool(h: Any) -> Any:
        return jax.lax.reduce_window(h, -jnp.inf, jax.lax.max, (1, 2, 2, 1), (1, 2, 2, 1), "SAME")

    def loss_fn(p: Any, x: Any, y: Any) -> Any:
        filters1, bias1, filters2, bias2, dense_w, dense_b, logits_w, logits_b = p
        hidden = pool(jax.nn.relu(jax.lax.conv_general_dilated(x, filters1, (1, 1), "SAME",
                                                               dimension_numbers=layout) + bias1))
        hidden = pool(jax.nn.relu(jax.lax.conv_general_dilated(hidden, filters2, (1, 1), "SAME",
                                                               dimension_numbers=layout) + bias2))
        hidden = jax.nn.relu(hidden.reshape(hidden.shape[0], -1) @ dense_w + dense_b)
        return jax_cross_entropy(jax, jnp, hidden @ logits_w + logits_b, y)

    step, current = jax_sgd_step(jax, jnp, loss_fn, params, xb, yb)

    def check_step() -> None:
        step()
        check("jax", current())
    return Case("jax", timed_calls(step), check_step, note="jax.jit; lax.conv_general_dilated, reduce_window")


def cnn_check(name: str, batch: int = CNN_BATCH) -> Callable[[str, list[np.ndarray]], None]:
    """``check(library, parameters after one step)``: each parameter's update against a float64 numpy step."""
    params, xb, yb = cnn_data(batch=batch)
    expected = [p.astype(np.float64) for p in params]
    numpy_cnn_step(expected, xb.astype(np.float64), yb)

    def check(library: str, actual: list[np.ndarray]) -> None:
        check_updates(library, name, params, actual, expected, CNN_NAMES)
    return check


def cnn_description(batch: int) -> str:
    one, two, three = CNN_CHANNELS
    return (f"SGD step, CNN {CNN_SIZE}x{CNN_SIZE}x{one} -> conv 3x3x{two} -> pool -> conv 3x3x{three} -> pool "
            f"-> dense {CNN_HIDDEN} -> {CNN_CLASSES}, batch {batch}")


def cnn_workload(libs: Libraries) -> Workload:
    name = "cnn-b64"
    params, xb, yb = cnn_data()
    check = cnn_check(name)
    cases: dict[str, Case] = {}
    if libs.graphgrad:
        sess, train_op, feed, variables = build_graphgrad_cnn()
        graphgrad_step = lambda: sess.run(train_op, feed)  # noqa: E731

        def graphgrad_check() -> None:
            graphgrad_step()
            check("graphgrad", sess.run(variables))
        cases["graphgrad"] = Case("graphgrad", timed_calls(graphgrad_step), graphgrad_check)
    if libs.numpy:
        numpy_params = [p.copy() for p in params]
        numpy_step = lambda: numpy_cnn_step(numpy_params, xb, yb)  # noqa: E731

        def numpy_check() -> None:
            numpy_step()
            check("numpy", numpy_params)
        cases["numpy"] = Case("numpy", timed_calls(numpy_step), numpy_check,
                              note="forward and backward written by hand (convolutions as im2col products)")
    if libs.torch is not None:
        cases["torch"] = torch_cnn_case(libs, name, check)
    if libs.jax is not None:
        cases["jax"] = jax_cnn_case(libs, name, check)
    return Workload(name, "ms", cnn_description(CNN_BATCH), cases)


# ------------------------------------------------------------------------------------------------
# rnn-scan: a GRU training step with the recurrence as a scan
# ------------------------------------------------------------------------------------------------
RNN_STEPS, RNN_FEATURES, RNN_HIDDEN, RNN_BATCH, RNN_CLASSES = 28, 28, 128, 64, 10


def rnn_data(seed: int = 3) -> tuple[list[np.ndarray], np.ndarray, np.ndarray]:
    """GRU parameters (input weights [F, 3H], state weights [H, 3H], bias [3H], output weights and
    bias; gates in the order z, r, n), a batch [B, T, F] and its labels, float32."""
    rng = np.random.default_rng(seed)
    scale = 1.0 / np.sqrt(RNN_HIDDEN)

    def uniform(*shape: int) -> np.ndarray:
        return rng.uniform(-scale, scale, shape).astype(np.float32)
    params = [uniform(RNN_FEATURES, 3 * RNN_HIDDEN), uniform(RNN_HIDDEN, 3 * RNN_HIDDEN),
              np.zeros(3 * RNN_HIDDEN, np.float32), uniform(RNN_HIDDEN, RNN_CLASSES),
              np.zeros(RNN_CLASSES, np.float32)]
    x = rng.standard_normal((RNN_BATCH, RNN_STEPS, RNN_FEATURES)).astype(np.float32)
    y = rng.integers(0, RNN_CLASSES, RNN_BATCH).astype(np.int32)
    return params, x, y


def numpy_gru_step(params: list[np.ndarray], x: np.ndarray, y: np.ndarray) -> None:
    """One SGD step of the GRU classifier, forward and backward through time written by hand."""
    input_weights, state_weights, bias, output_weights, output_bias = params
    hidden, batch = RNN_HIDDEN, x.shape[0]
    projected = np.einsum("btf,fg->tbg", x, input_weights) + bias            # [T, B, 3H]
    h = np.zeros((batch, hidden), x.dtype)
    saved = []
    for t in range(RNN_STEPS):
        from_state = h @ state_weights
        z = 1.0 / (1.0 + np.exp(-(projected[t, :, :hidden] + from_state[:, :hidden])))
        r = 1.0 / (1.0 + np.exp(-(projected[t, :, hidden:2 * hidden] + from_state[:, hidden:2 * hidden])))
        n = np.tanh(projected[t, :, 2 * hidden:] + r * from_state[:, 2 * hidden:])
        saved.append((h, z, r, n, from_state))
        h = (1.0 - z) * n + z * h
    d_logits = softmax_cross_entropy_gradient(h @ output_weights + output_bias, y)
    d_output_weights, d_output_bias = h.T @ d_logits, d_logits.sum(axis=0)
    d_h = d_logits @ output_weights.T
    d_state_weights = np.zeros_like(state_weights)
    d_projected = np.zeros_like(projected)
    for t in reversed(range(RNN_STEPS)):
        h_before, z, r, n, from_state = saved[t]
        d_n_pre = d_h * (1.0 - z) * (1.0 - n * n)
        d_z_pre = d_h * (h_before - n) * z * (1.0 - z)
        d_r_pre = d_n_pre * from_state[:, 2 * hidden:] * r * (1.0 - r)
        d_from_state = np.concatenate([d_z_pre, d_r_pre, d_n_pre * r], axis=1)
        d_projected[t] = np.concatenate([d_z_pre, d_r_pre, d_n_pre], axis=1)
        d_state_weights += h_before.T @ d_from_state
        d_h = d_h * z + d_from_state @ state_weights.T
    d_input_weights = np.einsum("btf,tbg->fg", x, d_projected)
    d_bias = d_projected.sum(axis=(0, 1))
    for param, grad in zip(params, (d_input_weights, d_state_weights, d_bias, d_output_weights, d_output_bias)):
        param -= (LEARNING_RATE * grad).astype(param.dtype)


def build_graphgrad_gru() -> tuple[Any, Any, dict, list[Any]]:
    """The GRU step with ``cc.scan``: (sess, train_op, feed, variables)."""
    import_graphgrad()
    params, xb, yb = rnn_data()
    hidden = RNN_HIDDEN
    graph = cc.Graph()
    with graph.as_default():
        x = cc.placeholder("float32", shape=(None, RNN_STEPS, RNN_FEATURES), name="x")
        y = cc.placeholder("int32", shape=(None,), name="y")
        variables = [cc.Variable(p, name=name) for p, name in
                     zip(params, ("input_weights", "state_weights", "bias", "output_weights", "output_bias"))]
        input_weights, state_weights, bias, output_weights, output_bias = variables
        rows = cc.reshape(cc.transpose(x, [1, 0, 2]), (-1, RNN_FEATURES))
        projected = cc.reshape(rows @ input_weights + bias, (RNN_STEPS, -1, 3 * hidden))

        def cell(h: Any, p: Any) -> Any:
            from_state = h @ state_weights
            z = cc.sigmoid(p[:, :hidden] + from_state[:, :hidden])
            r = cc.sigmoid(p[:, hidden:2 * hidden] + from_state[:, hidden:2 * hidden])
            n = cc.tanh(p[:, 2 * hidden:] + r * from_state[:, 2 * hidden:])
            return (1.0 - z) * n + z * h
        states = cc.scan(cell, projected, initializer=cc.zeros_like(projected[0, :, :hidden]))
        logits = states[RNN_STEPS - 1] @ output_weights + output_bias
        loss = cc.reduce_mean(cc.nn.sparse_softmax_cross_entropy_with_logits(labels=y, logits=logits))
        train_op = optim.GradientDescentOptimizer(LEARNING_RATE).minimize(loss)
    return Session(graph), train_op, {x: xb, y: yb}, variables


def rnn_workload(libs: Libraries) -> Workload:
    name = "rnn-scan"
    params, xb, yb = rnn_data()
    expected = [p.astype(np.float64) for p in params]
    numpy_gru_step(expected, xb.astype(np.float64), yb)
    cases: dict[str, Case] = {}

    def check_of(library: str, step: Callable[[], Any], current: Callable[[], list[Any]]) -> Callable[[], None]:
        return after_one_step(step, current, lambda got: check_parameters(library, name, got, expected))

    if libs.graphgrad:
        sess, train_op, feed, variables = build_graphgrad_gru()
        graphgrad_step = lambda: sess.run(train_op, feed)  # noqa: E731
        cases["graphgrad"] = Case("graphgrad", timed_calls(graphgrad_step),
                                  check_of("graphgrad", graphgrad_step, lambda: sess.run(variables)),
                                  note="cc.scan; the backward loop reads the states and products the forward loop kept")
    if libs.numpy:
        numpy_params = [p.copy() for p in params]
        numpy_step = lambda: numpy_gru_step(numpy_params, xb, yb)  # noqa: E731
        cases["numpy"] = Case("numpy", timed_calls(numpy_step), check_of("numpy", numpy_step, lambda: numpy_params),
                              note="forward and backward through time written by hand")
    hidden = RNN_HIDDEN
    if libs.torch is not None:
        torch, functional = libs.torch, libs.functional
        torch_params = [torch.tensor(p, requires_grad=True) for p in params]
        x, y = torch.from_numpy(xb), torch.from_numpy(yb.astype(np.int64))

        def torch_step() -> None:
            input_weights, state_weights, bias, output_weights, output_bias = torch_params
            projected = torch.einsum("btf,fg->tbg", x, input_weights) + bias
            h = torch.zeros(x.shape[0], hidden)
            for t in range(RNN_STEPS):
                from_state = h @ state_weights
                z = torch.sigmoid(projected[t, :, :hidden] + from_state[:, :hidden])
                r = torch.sigmoid(projected[t, :, hidden:2 * hidden] + from_state[:, hidden:2 * hidden])
                n = torch.tanh(projected[t, :, 2 * hidden:] + r * from_state[:, 2 * hidden:])
                h = (1.0 - z) * n + z * h
            functional.cross_entropy(h @ output_weights + output_bias, y).backward()
            torch_sgd_update(torch, torch_params)
        cases["torch"] = Case("torch", timed_calls(torch_step),
                              check_of("torch", torch_step, lambda: [p.detach().numpy() for p in torch_params]),
                              note="eager, a Python loop over the time steps")
    if libs.jax is not None:
        jax, jnp = libs.jax, libs.jnp

        def loss_fn(p: Any, x: Any, y: Any) -> Any:
            input_weights, state_weights, bias, output_weights, output_bias = p
            projected = jnp.einsum("btf,fg->tbg", x, input_weights) + bias

            def cell(h: Any, q: Any) -> Any:
                from_state = h @ state_weights
                z = jax.nn.sigmoid(q[:, :hidden] + from_state[:, :hidden])
                r = jax.nn.sigmoid(q[:, hidden:2 * hidden] + from_state[:, hidden:2 * hidden])
                n = jnp.tanh(q[:, 2 * hidden:] + r * from_state[:, 2 * hidden:])
                new = (1.0 - z) * n + z * h
                return new, new
            h, _ = jax.lax.scan(cell, jnp.zeros((x.shape[0], hidden), jnp.float32), projected)
            return jax_cross_entropy(jax, jnp, h @ output_weights + output_bias, y)

        jax_step, current = jax_sgd_step(jax, jnp, loss_fn, params, xb, yb)
        cases["jax"] = Case("jax", timed_calls(jax_step), check_of("jax", jax_step, current),
                            note="jax.jit of jax.grad through jax.lax.scan")
    return Workload(name, "ms", f"SGD step, GRU over {RNN_STEPS} steps of {RNN_FEATURES} features, hidden "
                                f"{RNN_HIDDEN} (gates z, r, n in one [H, 3H] matrix), batch {RNN_BATCH}", cases)


# ------------------------------------------------------------------------------------------------
# attn-b32: a transformer block's training step
# ------------------------------------------------------------------------------------------------
ATTN_BATCH, ATTN_LENGTH, ATTN_WIDTH, ATTN_HEADS, ATTN_HIDDEN = 32, 64, 128, 4, 512
ATTN_NAMES: tuple[str, ...] = ("query", "key", "value", "output", "ffn/in", "ffn/out")
GELU_SCALE, GELU_CUBIC = float(np.sqrt(2.0 / np.pi)), 0.044715


def attn_data(seed: int = 9) -> tuple[list[np.ndarray], np.ndarray, np.ndarray]:
    """The block's weights (query, key, value and output projections [D, D], the feed-forward
    layer's [D, 4D] and [4D, D], scaled by 1/sqrt(fan-in)), a batch [B, T, D] and its target, float32."""
    rng = np.random.default_rng(seed)
    width, hidden = ATTN_WIDTH, ATTN_HIDDEN
    shapes = [(width, width)] * 4 + [(width, hidden), (hidden, width)]
    params = [(rng.standard_normal(shape) / np.sqrt(shape[0])).astype(np.float32) for shape in shapes]
    x = rng.standard_normal((ATTN_BATCH, ATTN_LENGTH, width)).astype(np.float32)
    target = rng.standard_normal((ATTN_BATCH, ATTN_LENGTH, width)).astype(np.float32)
    return params, x, target


def numpy_attn_step(params: list[np.ndarray], x: np.ndarray, target: np.ndarray) -> None:
    """One SGD step of the block (pre-norm: layer norm without scale and shift, softmax attention
    over 4 heads, a residual, layer norm, a tanh-GELU feed-forward layer, a residual; the mean
    squared error against ``target``), backward written by hand; updates ``params`` in place."""
    query_w, key_w, value_w, output_w, in_w, out_w = params
    batch, length, width = x.shape
    heads, depth = ATTN_HEADS, width // ATTN_HEADS

    def norm(v: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        centred = v - v.mean(axis=-1, keepdims=True)
        inverse = 1.0 / np.sqrt((centred * centred).mean(axis=-1, keepdims=True) + 1e-5)
        return centred * inverse, inverse

    def norm_backward(d: np.ndarray, normed: np.ndarray, inverse: np.ndarray) -> np.ndarray:
        return inverse * (d - d.mean(axis=-1, keepdims=True) - normed * (d * normed).mean(axis=-1, keepdims=True))

    def split(v: np.ndarray) -> np.ndarray:      # [B, T, D] -> [B, H, T, D/H]
        return v.reshape(batch, length, heads, depth).transpose(0, 2, 1, 3)

    def merge(v: np.ndarray) -> np.ndarray:
        return v.transpose(0, 2, 1, 3).reshape(batch, length, width)

    h, h_inverse = norm(x)
    q, k, v = split(h @ query_w), split(h @ key_w), split(h @ value_w)
    scores = q @ k.transpose(0, 1, 3, 2) / np.sqrt(depth)
    weights = np.exp(scores - scores.max(axis=-1, keepdims=True))
    weights /= weights.sum(axis=-1, keepdims=True)
    attended = merge(weights @ v)
    x2 = x + attended @ output_w
    h2, h2_inverse = norm(x2)
    u = h2 @ in_w
    t = np.tanh(GELU_SCALE * (u + GELU_CUBIC * u ** 3))
    gelu = 0.5 * u * (1.0 + t)
    out = x2 + gelu @ out_w
    d_out = 2.0 * (out - target) / out.size
    d_out_w = gelu.reshape(-1, ATTN_HIDDEN).T @ d_out.reshape(-1, width)
    d_u = (d_out @ out_w.T) * (0.5 * (1.0 + t) + 0.5 * u * (1.0 - t * t) * GELU_SCALE * (1.0 + 3 * GELU_CUBIC * u * u))
    d_in_w = h2.reshape(-1, width).T @ d_u.reshape(-1, ATTN_HIDDEN)
    d_x2 = d_out + norm_backward(d_u @ in_w.T, h2, h2_inverse)
    d_output_w = attended.reshape(-1, width).T @ d_x2.reshape(-1, width)
    d_attended = split(d_x2 @ output_w.T)
    d_weights = d_attended @ v.transpose(0, 1, 3, 2)
    d_v = weights.transpose(0, 1, 3, 2) @ d_attended
    d_scores = weights * (d_weights - (d_weights * weights).sum(axis=-1, keepdims=True)) / np.sqrt(depth)
    d_q, d_k = d_scores @ k, d_scores.transpose(0, 1, 3, 2) @ q
    rows = h.reshape(-1, width)
    grads = [rows.T @ merge(d).reshape(-1, width) for d in (d_q, d_k, d_v)] + [d_output_w, d_in_w, d_out_w]
    for param, grad in zip(params, grads):
        param -= (LEARNING_RATE * grad).astype(param.dtype)


def build_graphgrad_attn() -> tuple[Any, Any, dict, list[Any]]:
    """The block's step in graphgrad: (sess, train_op, feed, variables)."""
    import_graphgrad()
    params, xb, target_b = attn_data()
    width, heads, depth = ATTN_WIDTH, ATTN_HEADS, ATTN_WIDTH // ATTN_HEADS
    graph = cc.Graph()
    with graph.as_default():
        x = cc.placeholder("float32", (None, ATTN_LENGTH, width), name="x")
        target = cc.placeholder("float32", (None, ATTN_LENGTH, width), name="target")
        variables = [cc.Variable(p, name=name) for p, name in zip(params, ATTN_NAMES)]
        query_w, key_w, value_w, output_w, in_w, out_w = variables

        def norm(v: Any) -> Any:
            mean, variance = cc.nn.moments(v, axes=[-1], keepdims=True)
            return (v - mean) * cc.rsqrt(variance + 1e-5)

        def split(v: Any) -> Any:
            return cc.transpose(cc.reshape(v, (-1, ATTN_LENGTH, heads, depth)), [0, 2, 1, 3])
        h = norm(x)
        q, k, v = split(h @ query_w), split(h @ key_w), split(h @ value_w)
        weights = cc.nn.softmax(cc.matmul(q, k, transpose_b=True) * (1.0 / np.sqrt(depth)))
        attended = cc.reshape(cc.transpose(weights @ v, [0, 2, 1, 3]), (-1, ATTN_LENGTH, width))
        x2 = x + attended @ output_w
        out = x2 + cc.nn.gelu(norm(x2) @ in_w, approximate=True) @ out_w
        loss = cc.reduce_mean(cc.square(out - target))
        train_op = optim.GradientDescentOptimizer(LEARNING_RATE).minimize(loss)
    return Session(graph), train_op, {x: xb, target: target_b}, variables


def attn_workload(libs: Libraries) -> Workload:
    name = "attn-b32"
    params, xb, target_b = attn_data()
    expected = [p.astype(np.float64) for p in params]
    numpy_attn_step(expected, xb.astype(np.float64), target_b.astype(np.float64))
    width, heads, depth = ATTN_WIDTH, ATTN_HEADS, ATTN_WIDTH // ATTN_HEADS
    cases: dict[str, Case] = {}

    def check_of(library: str, step: Callable[[], Any], current: Callable[[], list[Any]]) -> Callable[[], None]:
        return after_one_step(step, current,
                              lambda got: check_updates(library, name, params, got, expected, ATTN_NAMES))

    if libs.graphgrad:
        sess, train_op, feed, variables = build_graphgrad_attn()
        graphgrad_step = lambda: sess.run(train_op, feed)  # noqa: E731
        cases["graphgrad"] = Case("graphgrad", timed_calls(graphgrad_step),
                                  check_of("graphgrad", graphgrad_step, lambda: sess.run(variables)))
    if libs.numpy:
        numpy_params = [p.copy() for p in params]
        numpy_step = lambda: numpy_attn_step(numpy_params, xb, target_b)  # noqa: E731
        cases["numpy"] = Case("numpy", timed_calls(numpy_step), check_of("numpy", numpy_step, lambda: numpy_params),
                              note="forward and backward written by hand")
    if libs.torch is not None:
        torch, functional = libs.torch, libs.functional
        torch_params = [torch.tensor(p, requires_grad=True) for p in params]
        x, target = torch.from_numpy(xb), torch.from_numpy(target_b)

        def torch_norm(v: Any) -> Any:
            centred = v - v.mean(-1, keepdim=True)
            return centred * torch.rsqrt((centred * centred).mean(-1, keepdim=True) + 1e-5)

        def torch_split(v: Any) -> Any:
            return v.reshape(v.shape[0], ATTN_LENGTH, heads, depth).transpose(1, 2)

        def torch_step() -> None:
            query_w, key_w, value_w, output_w, in_w, out_w = torch_params
            h = torch_norm(x)
            q, k, v = torch_split(h @ query_w), torch_split(h @ key_w), torch_split(h @ value_w)
            weights = torch.softmax(q @ k.transpose(-1, -2) / np.sqrt(depth), dim=-1)
            x2 = x + (weights @ v).transpose(1, 2).reshape(x.shape) @ output_w
            out = x2 + functional.gelu(torch_norm(x2) @ in_w, approximate="tanh") @ out_w
            ((out - target) ** 2).mean().backward()
            torch_sgd_update(torch, torch_params)
        cases["torch"] = Case("torch", timed_calls(torch_step),
                              check_of("torch", torch_step, lambda: [p.detach().numpy() for p in torch_params]),
                              note="eager")
    if libs.jax is not None:
        jax, jnp = libs.jax, libs.jnp

        def jax_norm(v: Any) -> Any:
            centred = v - v.mean(-1, keepdims=True)
            return centred * jax.lax.rsqrt((centred * centred).mean(-1, keepdims=True) + 1e-5)

        def jax_split(v: Any) -> Any:
            return v.reshape(v.shape[0], ATTN_LENGTH, heads, depth).transpose(0, 2, 1, 3)

        def loss_fn(p: Any, x: Any, target: Any) -> Any:
            query_w, key_w, value_w, output_w, in_w, out_w = p
            h = jax_norm(x)
            q, k, v = jax_split(h @ query_w), jax_split(h @ key_w), jax_split(h @ value_w)
            weights = jax.nn.softmax(q @ k.transpose(0, 1, 3, 2) / np.sqrt(depth), axis=-1)
            x2 = x + (weights @ v).transpose(0, 2, 1, 3).reshape(x.shape) @ output_w
            out = x2 + jax.nn.gelu(jax_norm(x2) @ in_w, approximate=True) @ out_w
            return jnp.mean((out - target) ** 2)

        jax_step, current = jax_sgd_step(jax, jnp, loss_fn, params, xb, target_b)
        cases["jax"] = Case("jax", timed_calls(jax_step), check_of("jax", jax_step, current),
                            note="jax.jit of jax.grad")
    return Workload(name, "ms", f"SGD step, pre-norm transformer block: width {width}, {heads} heads, length "
                                f"{ATTN_LENGTH}, feed-forward {ATTN_HIDDEN} (tanh GELU), batch {ATTN_BATCH}", cases)


# ------------------------------------------------------------------------------------------------
# compile-mlp: cold compile of the MLP b128 step in this process
# ------------------------------------------------------------------------------------------------
@contextlib.contextmanager
def graphgrad_cache_dir(path: str) -> Iterator[None]:
    """Point graphgrad's persistent compile cache (``GRAPHGRAD_CACHE_DIR``) at ``path`` for a while."""
    previous = os.environ.get("GRAPHGRAD_CACHE_DIR")
    os.environ["GRAPHGRAD_CACHE_DIR"] = path
    try:
        yield
    finally:
        if previous is None:
            del os.environ["GRAPHGRAD_CACHE_DIR"]
        else:
            os.environ["GRAPHGRAD_CACHE_DIR"] = previous


def graphgrad_first_run(batch: int, cache_dir: str, expected: list[np.ndarray] | None = None,
                        name: str = "") -> float:
    """Seconds taken by the first sess.run of the MLP step in a fresh graph and Session."""
    sess, train_op, feed, variables = build_graphgrad_mlp(batch)
    with graphgrad_cache_dir(cache_dir):
        start = time.perf_counter()
        sess.run(train_op, feed)
        elapsed = time.perf_counter() - start
    if expected is not None:
        check_parameters("graphgrad", name, sess.run(variables), expected)
    sess.close()
    return elapsed


def scratch_directory() -> str:
    """A temporary directory removed when this process exits."""
    scratch = tempfile.mkdtemp(prefix="graphgrad-bench-cache-")
    atexit.register(shutil.rmtree, scratch, ignore_errors=True)
    return scratch


def compile_workload(libs: Libraries) -> Workload:
    name = "compile-mlp"
    batch = 128
    expected = expected_after_one_step(batch)
    cases: dict[str, Case] = {}
    if libs.graphgrad:
        scratch = scratch_directory()
        counter = itertools.count()

        def graphgrad_sample(_: int) -> float:
            # An empty compile-cache directory each time: a cold compile, not a cache hit.
            return graphgrad_first_run(batch, os.path.join(scratch, f"cold{next(counter)}"))

        def graphgrad_check() -> None:
            graphgrad_first_run(batch, os.path.join(scratch, "check"), expected, name)
        cases["graphgrad"] = Case("graphgrad", graphgrad_sample, graphgrad_check)

    if libs.jax is not None:
        jax, jnp = libs.jax, libs.jnp
        xb, yb = mlp_batch(batch)
        x, y = jnp.asarray(xb), jnp.asarray(yb)
        params = [(jnp.asarray(w), jnp.asarray(b)) for w, b in initial_mlp_parameters()]

        def jax_sample(_: int) -> float:
            # A new function object: jax traces and compiles it again (jax.clear_caches() would
            # do too, but would also throw away the other workloads' compiled functions).
            step = jax.jit(jax_mlp_step_function(jax, jnp))
            start = time.perf_counter()
            jax.block_until_ready(step(params, x, y))
            return time.perf_counter() - start

        def jax_check() -> None:
            step = jax.jit(jax_mlp_step_function(jax, jnp))
            new = step(params, x, y)
            check_parameters("jax", name, [np.asarray(a) for layer in new for a in layer], expected)
        cases["jax"] = Case("jax", jax_sample, jax_check)

    if libs.torch is not None and "torch.compile" not in libs.missing:
        # Measured once, cold (fresh dynamo state and inductor cache dir): a torch.compile takes
        # seconds, too long to repeat every round.
        libs.torch._dynamo.reset()
        step, params_t = torch_mlp_step(libs, batch, compiled=True)
        try:
            start = time.perf_counter()
            step()
            elapsed = time.perf_counter() - start
        except Exception as error:  # noqa: BLE001 - a failing torch.compile drops its column
            libs.missing["torch.compile"] = f"failed ({type(error).__name__}: {str(error)[:200]})"
        else:
            if elapsed > TORCH_COMPILE_LIMIT_S:
                libs.missing["torch.compile"] = f"first call took {elapsed:.0f} s (> {TORCH_COMPILE_LIMIT_S:.0f} s)"
            else:
                check_parameters("torch.compile", name, [p.detach().numpy() for p in params_t], expected)
                cases["torch.compile"] = Case("torch.compile", None, fixed=elapsed,
                                              note="measured once (cold), not per round")
    return Workload(name, "ms", "first sess.run of the mlp-b128 step, fresh graph and Session (cold compile)",
                    cases, once=True)


def compile_cached_workload() -> Workload:
    """compile-mlp-cached: the same first run, when graphgrad's on-disk compile cache has the step."""
    name = "compile-mlp-cached"
    batch = 128
    expected = expected_after_one_step(batch)
    cached = os.path.join(scratch_directory(), "warm")

    def sample(_: int) -> float:
        return graphgrad_first_run(batch, cached)

    def check() -> None:            # also fills the cache
        graphgrad_first_run(batch, cached, expected, name)
    case = Case("graphgrad", sample, check)
    return Workload(name, "ms", "first sess.run of the mlp-b128 step, fresh graph and Session, "
                    "compile cache (GRAPHGRAD_CACHE_DIR) already holding it", {"graphgrad": case}, once=True)


# ------------------------------------------------------------------------------------------------
# first-step-fresh, first-step-lib-cached: the first step in a new Python process
# ------------------------------------------------------------------------------------------------
def fresh_step(kind: str) -> None:
    """``run.py --fresh-step KIND``: in this new process, build the mlp-b128 step (graphgrad, or jax's
    jitted step) and time its first call, imports and graph building excluded; print one JSON line
    ``{"seconds": ...}`` (or ``{"failed": ...}`` when the parameters after the step are wrong).
    ``graphgrad-other`` runs a different MLP instead (first-step-lib-cached's warm-up: it leaves
    the GEMM library, but not the mlp-b128 step, in the compile cache)."""
    batch = OTHER_MLP_BATCH if kind == "graphgrad-other" else 128
    sizes = OTHER_MLP_SIZES if kind == "graphgrad-other" else MLP_SIZES
    if kind in ("graphgrad", "graphgrad-other"):
        sess, train_op, feed, variables = build_graphgrad_mlp(batch, sizes=sizes)
        start = time.perf_counter()
        sess.run(train_op, feed)
        elapsed = time.perf_counter() - start
        result = [np.asarray(v) for v in sess.run(variables)]
    elif kind == "jax":
        os.environ.setdefault("JAX_PLATFORMS", "cpu")
        import jax
        import jax.numpy as jnp
        step = jax.jit(jax_mlp_step_function(jax, jnp))
        xb, yb = mlp_batch(batch)
        x, y = jnp.asarray(xb), jnp.asarray(yb)
        params = jax.block_until_ready([(jnp.asarray(w), jnp.asarray(b)) for w, b in initial_mlp_parameters()])
        start = time.perf_counter()
        new = jax.block_until_ready(step(params, x, y))
        elapsed = time.perf_counter() - start
        result = [np.asarray(a) for layer in new for a in layer]
    else:
        raise ValueError(f"unknown --fresh-step {kind!r}")
    answer: dict[str, Any] = {"seconds": elapsed}
    if kind != "graphgrad-other":
        try:
            check_parameters(kind, "first-step-fresh", result, expected_after_one_step(batch))
        except BenchmarkError as error:
            answer = {"failed": str(error)}
    print(json.dumps(answer), flush=True)


def run_fresh_step(kind: str, cache_dir: str | None) -> float:
    """Start ``run.py --fresh-step KIND`` in a new Python process (graphgrad's compile cache in
    ``cache_dir``) and return the seconds of its first step."""
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(ROOT), env.get("PYTHONPATH", "")]))
    env.pop("JAX_COMPILATION_CACHE_DIR", None)       # jax's persistent cache stays off: a cold compile
    if cache_dir is not None:
        env["GRAPHGRAD_CACHE_DIR"] = cache_dir
        env.pop("GRAPHGRAD_CACHE", None)
    completed = subprocess.run([sys.executable, str(RUN_SCRIPT), "--fresh-step", kind], env=env, cwd=ROOT,
                               stdout=subprocess.PIPE, text=True, timeout=FRESH_PROCESS_LIMIT_S)
    lines = completed.stdout.strip().splitlines()
    if completed.returncode != 0 or not lines:
        raise RuntimeError(f"`run.py --fresh-step {kind}` failed with exit status {completed.returncode}")
    answer = json.loads(lines[-1])
    if "failed" in answer:
        raise BenchmarkError(answer["failed"])
    return float(answer["seconds"])


def fresh_workload(libs: Libraries) -> Workload:
    """first-step-fresh: a new process's first step with nothing cached (graphgrad: an empty
    compile-cache directory; jax: no persistent cache). Every sample is a new process."""
    name = "first-step-fresh"
    cases: dict[str, Case] = {}
    if libs.graphgrad:
        scratch = scratch_directory()
        counter = itertools.count()
        sample = lambda _: run_fresh_step("graphgrad", os.path.join(scratch, f"empty{next(counter)}"))  # noqa: E731
        cases["graphgrad"] = Case("graphgrad", sample, lambda: sample(1), warm=False,
                                  note="new process, empty GRAPHGRAD_CACHE_DIR (the GEMM library is built too)")
    if libs.jax is not None:
        sample = lambda _: run_fresh_step("jax", None)  # noqa: E731
        cases["jax"] = Case("jax", sample, lambda: sample(1), warm=False, note="new process, first jitted call")
    return Workload(name, "ms", "first sess.run of the mlp-b128 step in a new Python process, nothing cached "
                    "(imports and graph building not timed)", cases, once=True)


def lib_cached_workload() -> Workload:
    """first-step-lib-cached: a new process's first step when the compile cache holds the GEMM
    library (left there by a process that ran another MLP) but not the step."""
    name = "first-step-lib-cached"
    scratch = scratch_directory()
    library_only = os.path.join(scratch, "library-only")
    run_fresh_step("graphgrad-other", library_only)
    counter = itertools.count()

    def sample(_: int) -> float:
        cache = os.path.join(scratch, f"copy{next(counter)}")
        shutil.copytree(library_only, cache)            # the step never lands in library_only
        return run_fresh_step("graphgrad", cache)
    case = Case("graphgrad", sample, lambda: sample(1), warm=False,
                note=f"new process; the cache holds what an MLP {'-'.join(map(str, OTHER_MLP_SIZES))} left")
    return Workload(name, "ms", "first sess.run of the mlp-b128 step in a new Python process whose compile cache "
                    "holds the GEMM library but not the step", {"graphgrad": case}, once=True)


def checked_mlp_workload() -> Workload:
    """mlp-b128-checked: the mlp-b128 step with every value checked for NaN and Inf in the step."""
    case = graphgrad_step_case("mlp-b128-checked", 128, check_numerics=True)
    return Workload("mlp-b128-checked", "ms", "the mlp-b128 step in Session(check_numerics=True)", {"graphgrad": case})


# ------------------------------------------------------------------------------------------------
# Robustness: graphgrad's step beside other thread pools, and two Sessions at once
# ------------------------------------------------------------------------------------------------
def alive_workload(name: str, libs: Libraries) -> Workload | None:
    """mlp-b128-blas-alive / mlp-b128-torch-alive: each timed step comes right after a 512x512
    float32 matmul by numpy (OpenBLAS's threads then spin for ~0.1 s) or torch (its OpenMP pool
    spins) in this process. Each sample also times the same step back to back without the matmul
    (extra ``quiet``), first, before the other pool is woken."""
    rng = np.random.default_rng(4)
    a, b = (rng.standard_normal((ALIVE_MATMUL, ALIVE_MATMUL)).astype(np.float32) for _ in range(2))
    if name == "mlp-b128-blas-alive":
        product = np.empty_like(a)
        wake = lambda: np.matmul(a, b, out=product)  # noqa: E731
        pool = "numpy's OpenBLAS"
    else:
        try:
            import torch
        except Exception as error:  # noqa: BLE001 - torch is optional
            libs.missing[name] = f"torch is not importable ({type(error).__name__}: {error})"
            return None
        at, bt, ct = torch.from_numpy(a), torch.from_numpy(b), torch.empty(ALIVE_MATMUL, ALIVE_MATMUL)
        wake = lambda: torch.matmul(at, bt, out=ct)  # noqa: E731
        pool = "torch's OpenMP"
    expected = expected_after_one_step(128)
    sess, train_op, feed, variables = build_graphgrad_mlp(128)
    step = lambda: sess.run(train_op, feed)  # noqa: E731
    quiet = timed_calls(step)

    def sample(count: int) -> tuple[float, dict[str, float]]:
        back_to_back = quiet(count)
        wake()
        step()
        total = 0.0
        for _ in range(count):
            wake()
            start = time.perf_counter()
            step()
            total += time.perf_counter() - start
        return total / count, {"quiet": back_to_back}

    def check() -> None:
        wake()
        step()
        check_parameters("graphgrad", name, sess.run(variables), expected)
    case = Case("graphgrad", sample, check,
                note=f"each step right after a {ALIVE_MATMUL}x{ALIVE_MATMUL} matmul by {pool}")
    return Workload(name, "ms", f"the mlp-b128 step right after a {ALIVE_MATMUL}x{ALIVE_MATMUL} float32 matmul "
                    f"by {pool} in the same process", {"graphgrad": case}, facts={"pool": pool})


def two_sessions_workload() -> Workload:
    """mlp-b128-2sessions: two Sessions (two graphs, each its own mlp-b128 step) stepped from two
    Python threads at once; the time per pair of steps. Each sample also times the same two
    stepped one after the other on one thread (extra ``sequential``)."""
    name = "mlp-b128-2sessions"
    expected = expected_after_one_step(128)
    built = [build_graphgrad_mlp(128) for _ in range(2)]
    steps = [lambda s=sess, t=train_op, f=feed: s.run(t, f) for sess, train_op, feed, _ in built]

    def both_at_once(count: int) -> float:
        for step in steps:
            step()                      # untimed, as timed_calls does
        return time_threads([lambda step=step: [step() for _ in range(count)] for step in steps]) / count

    one_after_the_other = timed_calls(lambda: [step() for step in steps])

    def sample(count: int) -> tuple[float, dict[str, float]]:
        return both_at_once(count), {"sequential": one_after_the_other(count)}

    def check() -> None:
        time_threads(steps)             # one step of each at once
        for sess, _, _, variables in built:
            check_parameters("graphgrad", name, sess.run(variables), expected)
    case = Case("graphgrad", sample, check, note="two Sessions, one Python thread each, per pair of steps")
    return Workload(name, "ms", "two mlp-b128 steps (two Sessions) from two Python threads at once, per pair",
                    {"graphgrad": case})


# ------------------------------------------------------------------------------------------------
# elementwise
# ------------------------------------------------------------------------------------------------
def elementwise_numpy(x: np.ndarray) -> np.ndarray:
    return np.tanh(1.5 * x + 0.3) * (1.0 / (1.0 + np.exp(-x))) - np.exp(-x * x)


@functools.lru_cache(maxsize=1)
def elementwise_input(elements: int) -> np.ndarray:
    """The elementwise workloads' input, float32 (made once per process: the copy workload reads it too)."""
    rng = np.random.default_rng(2)
    return (rng.standard_normal(elements) * 2.0).astype(np.float32)


def elementwise_workload(elements: int, libs: Libraries) -> Workload:
    name = "elementwise-16M"
    xv = elementwise_input(elements)
    expected = elementwise_numpy(xv.astype(np.float64))
    cases: dict[str, Case] = {}

    def check_of(library: str, compute: Callable[[], Any]) -> Callable[[], None]:
        return lambda: assert_close(library, name, np.asarray(compute()), expected, rtol=1e-4, atol=1e-5)

    if libs.graphgrad:
        graph = cc.Graph()
        with graph.as_default():
            x = cc.placeholder("float32", shape=(None,), name="x")
            result = cc.tanh(1.5 * x + 0.3) * cc.sigmoid(x) - cc.exp(-x * x)
        sess = Session(graph)
        feed = {x: xv}
        reused = np.empty_like(xv)
        graphgrad_call = lambda: sess.run(result, feed, out=reused)  # noqa: E731
        cases["graphgrad"] = Case("graphgrad", timed_calls(graphgrad_call), check_of("graphgrad", graphgrad_call),
                                  note="x fed, the result written into a reused output (Session.run out=)")
    if libs.numpy:
        numpy_call = lambda: elementwise_numpy(xv)  # noqa: E731
        cases["numpy"] = Case("numpy", timed_calls(numpy_call), check_of("numpy", numpy_call))
        buffers = [np.empty_like(xv) for _ in range(3)]

        def numpy_out() -> np.ndarray:
            a, b, c = buffers
            np.multiply(xv, np.float32(1.5), out=a)
            np.add(a, np.float32(0.3), out=a)
            np.tanh(a, out=a)                      # a = tanh(1.5x + 0.3)
            np.negative(xv, out=b)
            np.exp(b, out=b)
            np.add(b, np.float32(1.0), out=b)
            np.divide(a, b, out=a)                 # a = tanh(...) * sigmoid(x)
            np.multiply(xv, xv, out=c)
            np.negative(c, out=c)
            np.exp(c, out=c)
            np.subtract(a, c, out=a)
            return a
        cases["numpy-out"] = Case("numpy-out", timed_calls(numpy_out), check_of("numpy-out", numpy_out))
    if libs.torch is not None:
        torch = libs.torch
        xt = torch.from_numpy(xv)
        torch_call = lambda: torch.tanh(1.5 * xt + 0.3) * torch.sigmoid(xt) - torch.exp(-xt * xt)  # noqa: E731
        cases["torch"] = Case("torch", timed_calls(torch_call), check_of("torch", lambda: torch_call().numpy()))
    if libs.jax is not None:
        jax, jnp = libs.jax, libs.jnp
        xj = jnp.asarray(xv)
        function = jax.jit(lambda v: jnp.tanh(1.5 * v + 0.3) * jax.nn.sigmoid(v) - jnp.exp(-v * v))
        jax_call = lambda: jax.block_until_ready(function(xj))  # noqa: E731
        cases["jax"] = Case("jax", timed_calls(jax_call), check_of("jax", jax_call))
    return Workload(name, "ms", f"tanh(1.5x+0.3)*sigmoid(x)-exp(-x*x), {elements} elements", cases)


# ------------------------------------------------------------------------------------------------
# sgemm
# ------------------------------------------------------------------------------------------------
def sgemm_operands(n: int) -> tuple[np.ndarray, np.ndarray, Callable[[str, Callable[[], Any]], Callable[[], None]]]:
    """A and B (uniform in [-1, 1), float32) and ``check_of(library, compute)``: a check that
    compares ``compute()`` with the float64 product."""
    rng = np.random.default_rng(3)
    a = rng.uniform(-1.0, 1.0, (n, n)).astype(np.float32)
    b = rng.uniform(-1.0, 1.0, (n, n)).astype(np.float32)
    expected = a.astype(np.float64) @ b.astype(np.float64)

    def check_of(library: str, compute: Callable[[], Any]) -> Callable[[], None]:
        return lambda: assert_close(library, f"sgemm-{n}", np.asarray(compute()), expected, rtol=1e-4, atol=1e-5 * n)
    return a, b, check_of


def sgemm_workload(n: int, libs: Libraries) -> Workload:
    name = f"sgemm-{n}"
    a, b, check_of = sgemm_operands(n)
    cases: dict[str, Case] = {}

    if libs.graphgrad:
        graph = cc.Graph()
        with graph.as_default():
            pa = cc.placeholder("float32", shape=(n, n), name="A")
            pb = cc.placeholder("float32", shape=(n, n), name="B")
            product = cc.matmul(pa, pb)
        sess = Session(graph)
        feed = {pa: a, pb: b}
        # Both write C into a reused array (graphgrad: Session.run out=; numpy: matmul out=).
        c_graphgrad = np.empty((n, n), np.float32)
        graphgrad_call = lambda: sess.run(product, feed, out=c_graphgrad)  # noqa: E731
        cases["graphgrad"] = Case("graphgrad", timed_calls(graphgrad_call), check_of("graphgrad", graphgrad_call))
    if libs.numpy:
        c_numpy = np.empty((n, n), np.float32)
        numpy_call = lambda: np.matmul(a, b, out=c_numpy)  # noqa: E731
        cases["numpy"] = Case("numpy", timed_calls(numpy_call), check_of("numpy", numpy_call))
    if libs.torch is not None:
        torch = libs.torch
        at, bt = torch.from_numpy(a), torch.from_numpy(b)
        torch_call = lambda: torch.mm(at, bt)  # noqa: E731
        cases["torch"] = Case("torch", timed_calls(torch_call), check_of("torch", lambda: torch_call().numpy()))
    if libs.jax is not None:
        jax, jnp = libs.jax, libs.jnp
        aj, bj = jnp.asarray(a), jnp.asarray(b)
        function = jax.jit(jnp.matmul)
        jax_call = lambda: jax.block_until_ready(function(aj, bj))  # noqa: E731
        cases["jax"] = Case("jax", timed_calls(jax_call), check_of("jax", jax_call))
    return Workload(name, "GFLOP/s", f"C = A @ B, {n}x{n}", cases, flops=2.0 * n ** 3)


# ------------------------------------------------------------------------------------------------
# run-overhead
# ------------------------------------------------------------------------------------------------
def overhead_workload(libs: Libraries) -> Workload:
    name = "run-overhead"
    xv = np.array([2.0], dtype=np.float32)
    expected = np.array([3.0])
    cases: dict[str, Case] = {}

    def check_of(library: str, compute: Callable[[], Any]) -> Callable[[], None]:
        return lambda: assert_close(library, name, np.asarray(compute()), expected, rtol=1e-6, atol=0.0)

    if libs.graphgrad:
        graph = cc.Graph()
        with graph.as_default():
            x = cc.placeholder("float32", shape=(1,), name="x")
            result = x + 1.0
        sess = Session(graph)
        feed = {x: xv}
        graphgrad_call = lambda: sess.run(result, feed)  # noqa: E731
        cases["graphgrad"] = Case("graphgrad", timed_calls(graphgrad_call), check_of("graphgrad", graphgrad_call))
    if libs.numpy:
        numpy_call = lambda: xv + 1.0  # noqa: E731
        cases["numpy"] = Case("numpy", timed_calls(numpy_call), check_of("numpy", numpy_call))
    if libs.torch is not None:
        xt = libs.torch.from_numpy(xv)
        torch_call = lambda: xt + 1.0  # noqa: E731
        cases["torch"] = Case("torch", timed_calls(torch_call), check_of("torch", lambda: torch_call().numpy()))
    if libs.jax is not None:
        jax, jnp = libs.jax, libs.jnp
        xj = jnp.asarray(xv)
        function = jax.jit(lambda v: v + 1.0)
        jax_call = lambda: jax.block_until_ready(function(xj))  # noqa: E731
        cases["jax"] = Case("jax", timed_calls(jax_call), check_of("jax", jax_call))
    return Workload(name, "us", "x + 1.0 on a (1,) float32 input, per call", cases)


def threaded_calls(call: Callable[[], Any], threads: int) -> Callable[[int], float]:
    """``sample(n)``: seconds per call when ``threads`` threads make about ``n`` calls between them."""
    def sample(count: int) -> float:
        per_thread = max(1, -(-count // threads))

        def loop() -> None:
            for _ in range(per_thread):
                call()
        return time_threads([loop] * threads) / (per_thread * threads)
    return sample


def inference_workload(libs: Libraries) -> Workload:
    """The MLP's logits for a batch of 32, from 8 threads at once: how well concurrent calls on one
    model share the machine (graphgrad: one Session, per-call buffers, shared variables)."""
    name = "infer-8threads"
    params = initial_mlp_parameters()
    x, _ = mlp_batch(INFERENCE_BATCH)

    def forward(parameters: Any, inputs: Any, relu: Callable[[Any], Any]) -> Any:
        """The logits, in any library whose arrays have ``@`` and ``+``."""
        hidden = inputs
        for index, (weights, bias) in enumerate(parameters):
            hidden = hidden @ weights + bias
            if index < len(parameters) - 1:
                hidden = relu(hidden)
        return hidden

    def numpy_forward() -> np.ndarray:
        return forward(params, x, lambda h: np.maximum(h, 0.0))

    expected = numpy_forward().astype(np.float64)
    cases: dict[str, Case] = {}

    def case(library: str, call: Callable[[], Any]) -> Case:
        def check() -> None:
            results: list[Any] = []
            threaded_calls(lambda: results.append(np.asarray(call())), INFERENCE_THREADS)(INFERENCE_THREADS * 4)
            for result in results:
                assert_close(library, name, result, expected, rtol=1e-4, atol=1e-4)
        return Case(library, threaded_calls(call, INFERENCE_THREADS), check)

    if libs.graphgrad:
        graph = cc.Graph()
        with graph.as_default():
            placeholder = cc.placeholder("float32", shape=(None, MLP_SIZES[0]), name="x")
            hidden = placeholder
            for index, (weights, bias) in enumerate(params):
                weights_var = cc.Variable(weights, name=f"layer{index}/W")
                hidden = hidden @ weights_var + cc.Variable(bias, name=f"layer{index}/b")
                if index < len(params) - 1:
                    hidden = cc.nn.relu(hidden)
        sess = Session(graph)
        feed = {placeholder: x}
        cases["graphgrad"] = case("graphgrad", lambda: sess.run(hidden, feed))
    if libs.numpy:
        cases["numpy"] = case("numpy", numpy_forward)
    if libs.torch is not None:
        torch = libs.torch
        torch_params = [(torch.from_numpy(w), torch.from_numpy(b)) for w, b in params]
        xt = torch.from_numpy(x)

        def torch_forward() -> Any:
            with torch.no_grad():
                return forward(torch_params, xt, torch.relu).numpy()
        cases["torch"] = case("torch", torch_forward)
    if libs.jax is not None:
        jax, jnp = libs.jax, libs.jnp
        jax_params = [(jnp.asarray(w), jnp.asarray(b)) for w, b in params]
        xj = jnp.asarray(x)

        jax_forward = jax.jit(lambda parameters, inputs: forward(parameters, inputs, lambda h: jnp.maximum(h, 0.0)))
        cases["jax"] = case("jax", lambda: jax.block_until_ready(jax_forward(jax_params, xj)))
    return Workload(name, "us", f"MLP logits, batch {INFERENCE_BATCH}, from {INFERENCE_THREADS} threads "
                    "on one model, per call", cases)


# ------------------------------------------------------------------------------------------------
# mlp-b1024-mpi2: data-parallel over MPI
# ------------------------------------------------------------------------------------------------
MPI_RANKS: int = 2
MPI_GLOBAL_BATCH: int = 1024
MPI_STARTUP_S: float = 120.0


def mpi_worker(batch: int) -> None:
    """One rank of the ``mlp-b1024-mpi2`` job (``run.py --mpi-worker``, started by ``mpiexec``).

    Rank 0 reads requests from its stdin, one per line: N (time N steps) or EOF (stop), and
    answers each with one JSON line on stdout; the first line it writes says whether the first
    step gave the expected parameters. Between requests the other ranks wait with pauses (not in
    a busy MPI wait), so the job takes no CPU from the libraries timed meanwhile.
    """
    from mpi4py import MPI
    import_graphgrad()
    comm = MPI.COMM_WORLD
    rank, size = comm.Get_rank(), comm.Get_size()
    opt: Any = None

    def distributed() -> Any:
        nonlocal opt
        opt = optim.DistributedOptimizer(optim.GradientDescentOptimizer(LEARNING_RATE), comm=comm)
        return opt
    sess, train_op, feed, variables = build_graphgrad_mlp(batch * size, make_optimizer=distributed)
    feed = {placeholder: optim.shard(value, rank, size) for placeholder, value in feed.items()}
    optim.broadcast_variables(sess, comm=comm)
    sess.run(train_op, feed)
    status = "ok"
    if rank == 0:
        try:
            check_parameters("graphgrad", "mlp-b1024-mpi2", sess.run(variables), expected_after_one_step(batch * size))
        except BenchmarkError as error:
            status = str(error)
        print(json.dumps({"check": status, "ranks": size, "batch_per_rank": batch}), flush=True)
    request = np.zeros(1, dtype=np.int64)
    while True:
        if rank == 0:
            line = sys.stdin.readline()
            request[0] = int(line) if line.strip() else 0
        pending = comm.Ibcast(request, root=0)
        while not pending.Test():
            time.sleep(1e-3)
        steps = int(request[0])
        if steps <= 0:
            break
        sess.run(train_op, feed)              # one untimed step, as timed_calls does
        opt.timings.reset()
        comm.Barrier()
        start = time.perf_counter()
        for _ in range(steps):
            sess.run(train_op, feed)
        comm.Barrier()
        elapsed = time.perf_counter() - start
        reduce_s = comm.allreduce(opt.timings.allreduce_seconds, op=MPI.SUM) / size / steps
        if rank == 0:
            print(json.dumps({"seconds": elapsed / steps, "allreduce_seconds": reduce_s,
                              "bytes_per_step": opt.timings.bytes_per_step}), flush=True)
    sess.close()


class ChildProcess:
    """A child process spoken to in lines: requests on its stdin, one JSON answer per line on its
    stdout (its stderr is ours). ``close`` sends it ``GOODBYE``, then end of input."""

    GOODBYE = ""

    def __init__(self, command: list[str], env: dict[str, str]) -> None:
        self.process = subprocess.Popen(command, stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True,
                                        env=env, cwd=ROOT)
        atexit.register(self.close)

    def send(self, line: str) -> None:
        assert self.process.stdin is not None
        with contextlib.suppress(OSError):      # if it died, receive() says so
            self.process.stdin.write(line + "\n")
            self.process.stdin.flush()

    def receive(self, timeout: float) -> dict[str, Any]:
        """Its next answer, waiting for it blocked on the pipe (at most ``timeout`` seconds)."""
        assert self.process.stdout is not None
        ready, _, _ = select.select([self.process.stdout], [], [], timeout)
        line = self.process.stdout.readline() if ready else ""
        if not line:
            self.close()
            raise self.stopped()
        return json.loads(line)

    def stopped(self) -> Exception:
        """The error to raise when it stopped answering (after ``close``: the exit status is known)."""
        return RuntimeError(f"{self.process.args} stopped answering (exit status {self.process.returncode})")

    def close(self) -> None:
        if self.process.poll() is None:
            if self.GOODBYE:
                self.send(self.GOODBYE)
            with contextlib.suppress(OSError):
                self.process.stdin.close()  # type: ignore[union-attr]
            try:
                self.process.wait(timeout=30)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait()


class MpiJob(ChildProcess):
    """The ``mpiexec`` job of ``mpi_worker``, kept running between samples (a child of the graphgrad
    worker process). It is stopped by a request for 0 steps: ``mpiexec`` does not pass the end of
    its input on to rank 0."""

    GOODBYE = "0"

    def __init__(self, mpiexec: str, batch: int) -> None:
        env = dict(os.environ)
        env["GRAPHGRAD_THREADS"] = "1"          # one thread per rank: 2 ranks use the cores one process uses
        env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(ROOT), env.get("PYTHONPATH", "")]))
        if hasattr(os, "geteuid") and os.geteuid() == 0:
            env.update(OMPI_ALLOW_RUN_AS_ROOT="1", OMPI_ALLOW_RUN_AS_ROOT_CONFIRM="1")
        command = [mpiexec, "-n", str(MPI_RANKS)]
        if MPI_RANKS > (os.cpu_count() or 1):
            command.append("--oversubscribe")
        command += [sys.executable, str(RUN_SCRIPT), "--mpi-worker", str(batch)]
        super().__init__(command, env)
        self.first = self.receive(MPI_STARTUP_S)

    def stopped(self) -> Exception:
        return BenchmarkError(f"the mpiexec job of mlp-b1024-mpi2 stopped answering (exit status "
                              f"{self.process.returncode}); run `mpiexec -n {MPI_RANKS} python "
                              f"examples/benchmarks/run.py --mpi-worker 512` to see why")

    def sample(self, steps: int) -> tuple[float, dict[str, float]]:
        self.send(str(steps))
        answer = self.receive(MPI_STARTUP_S)
        return float(answer["seconds"]), {"allreduce": float(answer["allreduce_seconds"]),
                                          "bytes_per_step": float(answer["bytes_per_step"])}


def mpi_workload(libs: Libraries) -> Workload | None:
    name = "mlp-b1024-mpi2"
    mpiexec = Path(sys.executable).parent / "mpiexec"
    if not mpiexec.exists():
        found = shutil.which("mpiexec")
        if found is None:
            libs.missing[name] = "no mpiexec (pip install -e '.[mpi]' installs mpi4py and Open MPI)"
            return None
        mpiexec = Path(found)
    batch = MPI_GLOBAL_BATCH // MPI_RANKS
    job = MpiJob(str(mpiexec), batch)

    def check() -> None:
        if job.first.get("check") != "ok":
            raise BenchmarkError(str(job.first.get("check")))
    cases = {"graphgrad": Case("graphgrad", job.sample, check,
                               note=f"{MPI_RANKS} ranks x batch {batch}, GRAPHGRAD_THREADS=1 each")}
    one = graphgrad_step_case(name, MPI_GLOBAL_BATCH)
    cases["one-process"] = Case("one-process", one.sample, one.check,
                                note=f"one process x batch {MPI_GLOBAL_BATCH}, all cores")
    return Workload(name, "ms", f"SGD step, MLP {'-'.join(map(str, MLP_SIZES))}, batch {MPI_GLOBAL_BATCH} "
                    f"over {MPI_RANKS} MPI ranks", cases,
                    facts={"ranks": MPI_RANKS, "batch_per_rank": batch, "global_batch": MPI_GLOBAL_BATCH,
                           "threads_one_process": os.cpu_count()})


# ------------------------------------------------------------------------------------------------
# GPU target (run.py --target cuda): graphgrad's Session(target="cuda") against torch and jax
# ------------------------------------------------------------------------------------------------
# Every library keeps its inputs and parameters on the device, and every timed call has ended on
# the device when it is counted: torch synchronizes after each call, jax blocks until its result is
# ready, and graphgrad's runs fetch only an operation (its inputs and results are variables, so a
# run downloads nothing) with a small fetch closing each sample. "cuda-emulated" runs the same
# cases with graphgrad's GPU kernels, torch and jax all on the CPU.
MLP_NAMES: tuple[str, ...] = tuple(f"layer{index}/{part}" for index in range(len(MLP_SIZES) - 1) for part in "Wb")


def graphgrad_device_sample(sess: Any, step: Any, fence: Any, feed: dict | None = None) -> Callable[[int], float]:
    """``sample(n)`` of graphgrad on a GPU target: the seconds per ``sess.run(step, feed)`` over
    ``n`` runs after an untimed one. ``step`` is an operation, so a run downloads nothing. ``fence``
    is a few values the steps write, fetched after the untimed run and after the timed ones: a
    fetch returns the value left by every earlier run, so each run's kernels are counted to their
    end even if ``run`` returned before they finished."""
    def sample(count: int) -> float:
        sess.run(step, feed)
        sess.run(fence)
        start = time.perf_counter()
        for _ in range(count):
            sess.run(step, feed)
        sess.run(fence)
        return (time.perf_counter() - start) / count
    return sample


def graphgrad_gpu_step_case(build: Callable[..., tuple[Any, Any, dict, list[Any]]],
                            check: Callable[[str, list[np.ndarray]], None]) -> Case:
    """graphgrad's training step on a GPU target, built by ``build(batch_in_variables=...)``.
    Timed: the batch in variables (on the device, as torch's and jax's batches are), each run
    fetching only the train op. Extra ``fed``: the same step with the batch fed, so uploaded by
    every run. Both are checked after one step."""
    sessions = [build(batch_in_variables=True), build(batch_in_variables=False)]
    (resident_sess, resident_op, _, resident_variables), (fed_sess, fed_op, feed, fed_variables) = sessions
    resident = graphgrad_device_sample(resident_sess, resident_op, resident_variables[-1])
    fed = graphgrad_device_sample(fed_sess, fed_op, fed_variables[-1], feed)

    def sample(count: int) -> tuple[float, dict[str, float]]:
        return resident(count), {"fed": fed(count)}

    def check_both() -> None:
        for sess, train_op, run_feed, variables in sessions:
            sess.run(train_op, run_feed or None)
            check("graphgrad", sess.run(variables))
    return Case("graphgrad", sample, check_both,
                note="the batch in variables; each run fetches only the train op (nothing downloaded)")


def step_case(library: str, step: Callable[[], Any], current: Callable[[], list[Any]],
              check: Callable[[str, list[np.ndarray]], None], note: str) -> Case:
    """A training step timed call by call, checked by one step and the parameters it leaves (``current()``)."""
    def check_step() -> None:
        step()
        check(library, [np.asarray(p) for p in current()])
    return Case(library, timed_calls(step), check_step, note=note)


def torch_gpu_note(libs: Libraries, what: str) -> str:
    if libs.torch_device is None:
        return f"{what}, on the CPU"
    return f"{what}, torch.cuda.synchronize() after each call"


def gpu_mlp_workload(batch: int, libs: Libraries) -> Workload:
    """mlp-b<batch> on a GPU target; each library's update of every parameter after one step is
    checked against a float64 numpy step."""
    name = f"mlp-b{batch}"
    xb, yb = mlp_batch(batch)
    initial = [array for layer in initial_mlp_parameters() for array in layer]
    reference = [(w.astype(np.float64), b.astype(np.float64)) for w, b in initial_mlp_parameters()]
    numpy_sgd_step(reference, xb.astype(np.float64), yb)
    expected = [array for layer in reference for array in layer]

    def check(library: str, actual: list[np.ndarray]) -> None:
        check_updates(library, name, initial, actual, expected, MLP_NAMES)
    cases: dict[str, Case] = {}
    if libs.graphgrad:
        cases["graphgrad"] = graphgrad_gpu_step_case(
            lambda **options: build_graphgrad_mlp(batch, target=libs.target, **options), check)
    if libs.torch is not None:
        step, params = torch_mlp_step(libs, batch, compiled=False)
        cases["torch"] = step_case("torch", torch_synchronized(libs, step),
                                   lambda: [p.detach().cpu().numpy() for p in params], check,
                                   torch_gpu_note(libs, "eager"))
    if libs.jax is not None:
        jax, jnp = libs.jax, libs.jnp
        layer_loss = jax_mlp_loss(jax, jnp)
        loss = lambda p, x, y: layer_loss(list(zip(p[0::2], p[1::2])), x, y)  # noqa: E731
        step, current = jax_sgd_step(jax, jnp, loss, initial, xb, yb)
        cases["jax"] = step_case("jax", step, current, check, "jax.jit, block_until_ready")
    return Workload(name, "ms", f"SGD step, MLP {'-'.join(map(str, MLP_SIZES))}, batch {batch}", cases,
                    facts={"batch": batch})


def gpu_cnn_workload(batch: int, libs: Libraries) -> Workload:
    """cnn-b<batch> on a GPU target: the cnn-b64 workload's model and check, at any batch."""
    name = f"cnn-b{batch}"
    check = cnn_check(name, batch)
    cases: dict[str, Case] = {}
    if libs.graphgrad:
        cases["graphgrad"] = graphgrad_gpu_step_case(
            lambda **options: build_graphgrad_cnn(libs.target, batch, **options), check)
    if libs.torch is not None:
        cases["torch"] = torch_cnn_case(libs, name, check, batch)
        cases["torch"].note = torch_gpu_note(libs, "eager, NCHW (the same parameters, transposed)")
    if libs.jax is not None:
        cases["jax"] = jax_cnn_case(libs, name, check, batch)
    return Workload(name, "ms", cnn_description(batch), cases, facts={"batch": batch})


def graphgrad_resident_case(target: str, inputs: list[np.ndarray], compute: Callable[..., Any],
                            check: Callable[[np.ndarray], None], note: str) -> Case:
    """graphgrad on a GPU target computing ``compute(*inputs)`` from variables into a variable of
    the first input's shape (all on the device): each run is the op ``result.assign(...)``, which
    fetches nothing; ``check`` gets the result variable after one run."""
    import_graphgrad()
    graph = cc.Graph()
    with graph.as_default():
        sources = [cc.Variable(value, name=f"input{index}", trainable=False) for index, value in enumerate(inputs)]
        result = cc.Variable(np.zeros(inputs[0].shape, np.float32), name="result", trainable=False)
        step = cc.group(result.assign(compute(*sources)))
        fence = cc.reshape(result, (-1,))[:1]
    sess = Session(graph, target=target)

    def check_run() -> None:
        sess.run(step)
        check(np.asarray(sess.run(result)))
    return Case("graphgrad", graphgrad_device_sample(sess, step, fence), check_run, note=note)


def gpu_sgemm_workload(n: int, libs: Libraries) -> Workload:
    """sgemm-<n> on a GPU target: float32 products computed in float32 (TF32 off in torch, precision
    HIGHEST in jax; graphgrad's GEMM has no TF32 unless asked)."""
    name = f"sgemm-{n}"
    a, b, check_of = sgemm_operands(n)
    cases: dict[str, Case] = {}
    if libs.graphgrad:
        cases["graphgrad"] = graphgrad_resident_case(
            libs.target, [a, b], lambda x, y: cc.matmul(x, y),
            lambda value: check_of("graphgrad", lambda: value)(),
            note="A, B and C in variables; runs C.assign(A @ B), fetching nothing")
    if libs.torch is not None:
        torch, device = libs.torch, libs.torch_device
        at, bt = torch.from_numpy(a).to(device), torch.from_numpy(b).to(device)
        ct = torch.empty((n, n), dtype=torch.float32, device=device)
        call = torch_synchronized(libs, lambda: torch.mm(at, bt, out=ct))
        cases["torch"] = Case("torch", timed_calls(call), check_of("torch", lambda: call().cpu().numpy()),
                              note=torch_gpu_note(libs, "torch.mm(out=), TF32 off"))
    if libs.jax is not None:
        jax, jnp = libs.jax, libs.jnp
        aj, bj = jnp.asarray(a), jnp.asarray(b)
        function = jax.jit(lambda x, y: jnp.matmul(x, y, precision=jax.lax.Precision.HIGHEST))
        jax_call = lambda: jax.block_until_ready(function(aj, bj))  # noqa: E731
        cases["jax"] = Case("jax", timed_calls(jax_call), check_of("jax", jax_call),
                            note="jax.jit, precision=HIGHEST, block_until_ready")
    return Workload(name, "GFLOP/s", f"C = A @ B, {n}x{n}, float32 (no TF32)", cases, flops=2.0 * n ** 3,
                    facts={"n": n})


def check_elementwise(library: str, name: str, actual: Any, x: np.ndarray) -> None:
    """Compare the chain's result with float64 numpy piece by piece (on 2**28 elements a float64
    copy and its temporaries would take about 10 GiB)."""
    actual = np.asarray(actual)
    if actual.shape != x.shape:
        raise BenchmarkError(f"{library} computed a wrong result on {name}: shape {actual.shape} vs {x.shape}")
    for start in range(0, x.size, ELEMENTWISE_CHUNK):
        piece = slice(start, start + ELEMENTWISE_CHUNK)
        try:
            assert_close(library, name, actual[piece], elementwise_numpy(x[piece].astype(np.float64)),
                         rtol=1e-4, atol=1e-5)
        except BenchmarkError as error:
            last = min(start + ELEMENTWISE_CHUNK, x.size) - 1
            raise BenchmarkError(f"{error} (in elements {start} to {last})") from None


def gpu_elementwise_workload(elements: int, libs: Libraries) -> Workload:
    """elementwise-256M on a GPU target, in GB/s: 8 bytes per element (read x, write the result),
    the least any library must move; copy-256M moves the same bytes."""
    name = "elementwise-256M"
    xv = elementwise_input(elements)
    cases: dict[str, Case] = {}
    if libs.graphgrad:
        cases["graphgrad"] = graphgrad_resident_case(
            libs.target, [xv], lambda x: cc.tanh(1.5 * x + 0.3) * cc.sigmoid(x) - cc.exp(-x * x),
            lambda value: check_elementwise("graphgrad", name, value, xv),
            note="x and the result in variables; runs result.assign(chain), fetching nothing")
    if libs.torch is not None:
        torch = libs.torch
        xt = torch.from_numpy(xv).to(libs.torch_device)
        call = torch_synchronized(libs, lambda: torch.tanh(1.5 * xt + 0.3) * torch.sigmoid(xt) - torch.exp(-xt * xt))
        cases["torch"] = Case("torch", timed_calls(call),
                              lambda: check_elementwise("torch", name, call().cpu().numpy(), xv),
                              note=torch_gpu_note(libs, "eager (a kernel per op)"))
    if libs.jax is not None:
        jax, jnp = libs.jax, libs.jnp
        xj = jnp.asarray(xv)
        function = jax.jit(lambda v: jnp.tanh(1.5 * v + 0.3) * jax.nn.sigmoid(v) - jnp.exp(-v * v))
        jax_call = lambda: jax.block_until_ready(function(xj))  # noqa: E731
        cases["jax"] = Case("jax", timed_calls(jax_call), lambda: check_elementwise("jax", name, jax_call(), xv),
                            note="jax.jit, block_until_ready")
    return Workload(name, "GB/s", f"tanh(1.5x+0.3)*sigmoid(x)-exp(-x*x) on {elements} float32; GB/s counts "
                    "8 bytes per element (read x, write the result)", cases, bytes=8.0 * elements,
                    facts={"elements": elements})


def gpu_copy_workload(elements: int, libs: Libraries) -> Workload:
    """copy-256M: the device's copy bandwidth, measured in the same run as elementwise-256M on the
    same number of bytes. torch's column is the driver's device-to-device copy (``Tensor.copy_``
    of a contiguous tensor is a cudaMemcpyAsync); graphgrad's is its own copy kernel."""
    name = "copy-256M"
    xv = elementwise_input(elements)

    def check_copy(library: str, value: Any) -> None:
        if not np.array_equal(np.asarray(value), xv):
            raise BenchmarkError(f"{library} copied wrong values on {name}")
    cases: dict[str, Case] = {}
    if libs.graphgrad:
        cases["graphgrad"] = graphgrad_resident_case(
            libs.target, [xv], lambda x: x, lambda value: check_copy("graphgrad", value),
            note="runs result.assign(x) between two variables: graphgrad's own copy kernel")
    if libs.torch is not None:
        xt = libs.torch.from_numpy(xv).to(libs.torch_device)
        destination = libs.torch.empty_like(xt)
        call = torch_synchronized(libs, lambda: destination.copy_(xt))
        cases["torch"] = Case("torch", timed_calls(call), lambda: check_copy("torch", call().cpu().numpy()),
                              note=torch_gpu_note(libs, "Tensor.copy_" + (" (device to device: cudaMemcpyAsync)"
                                                                          if libs.torch_device is not None else "")))
    return Workload(name, "GB/s", f"copy of {elements} float32 (read and write: 8 bytes per element)", cases,
                    bytes=8.0 * elements, facts={"elements": elements})


def build_gpu_workload(name: str, libs: Libraries, elements: int) -> Workload:
    """The cases of GPU workload ``name`` (``GPU_WORKLOAD_PATTERN``) that this process's libraries run."""
    if name == "elementwise-256M":
        return gpu_elementwise_workload(elements, libs)
    if name == "copy-256M":
        return gpu_copy_workload(elements, libs)
    kind, size = name.split("-")
    builders: dict[str, Callable[[int, Libraries], Workload]] = {
        "mlp": gpu_mlp_workload, "cnn": gpu_cnn_workload, "sgemm": gpu_sgemm_workload}
    return builders[kind](int(size.lstrip("b")), libs)


# ------------------------------------------------------------------------------------------------
# Building, checking and warming up one process's cases
# ------------------------------------------------------------------------------------------------
def build_workload(name: str, libs: Libraries, elements: int) -> Workload | None:
    """The cases of workload ``name`` that this process's libraries run (None: a tool is missing)."""
    if libs.target in GPU_TARGETS:
        return build_gpu_workload(name, libs, elements)
    builders: dict[str, Callable[[], Workload | None]] = {
        "mlp-b128-checked": checked_mlp_workload,
        "mlp-b128-blas-alive": lambda: alive_workload(name, libs),
        "mlp-b128-torch-alive": lambda: alive_workload(name, libs),
        "mlp-b128-2sessions": two_sessions_workload,
        "mlp-b1024-mpi2": lambda: mpi_workload(libs),
        "rnn-scan": lambda: rnn_workload(libs),
        "attn-b32": lambda: attn_workload(libs),
        "cnn-b64": lambda: cnn_workload(libs),
        "elementwise-16M": lambda: elementwise_workload(elements, libs),
        "compile-mlp": lambda: compile_workload(libs),
        "compile-mlp-cached": compile_cached_workload,
        "first-step-fresh": lambda: fresh_workload(libs),
        "first-step-lib-cached": lib_cached_workload,
        "run-overhead": lambda: overhead_workload(libs),
        "infer-8threads": lambda: inference_workload(libs),
    }
    if name in builders:
        return builders[name]()
    if name.startswith("mlp-b"):
        return mlp_workload(int(name[len("mlp-b"):]), libs)
    if name.startswith("sgemm-"):
        return sgemm_workload(int(name[len("sgemm-"):]), libs)
    raise ValueError(f"unknown workload {name!r}")


def warm_up(workload: Workload, case: Case, target_s: float) -> None:
    """Run the case outside timing and choose how many calls one sample takes."""
    if case.sample is None:
        return
    if workload.once:
        if case.warm:
            case.sample(1)
        case.calls = 1
        return
    case.sample(1)
    estimate = seconds_of(case.sample(1))
    if estimate < 1e-3:              # a better estimate for cheap calls
        estimate = seconds_of(case.sample(max(1, int(1e-3 / max(estimate, 1e-7)))))
    case.calls = max(1, min(200_000, int(math.ceil(target_s / max(estimate, 1e-8)))))
    case.sample(min(case.calls, max(1, int(0.2 / max(estimate, 1e-8)))))


def seconds_of(result: float | tuple[float, dict[str, float]]) -> float:
    return result[0] if isinstance(result, tuple) else result


def settle(max_wait_s: float = 0.5, step_s: float = 0.005, busy_fraction: float = 0.25) -> float:
    """Wait until no thread of this process burns CPU any more; return the seconds waited.

    OpenBLAS's worker threads spin for about 2**28 cycles (~0.1 s) after each BLAS call, and
    PyTorch's OpenMP threads for a few ms. On a machine with few cores, a spinning pool takes a
    core away from whichever process runs next, so each worker answers only once it is quiet.
    """
    start = time.perf_counter()
    while time.perf_counter() - start < max_wait_s:
        cpu, wall = time.process_time(), time.perf_counter()
        time.sleep(step_s)
        if time.process_time() - cpu < busy_fraction * (time.perf_counter() - wall):
            break
    return time.perf_counter() - start


def set_up_case(workload: Workload, case: Case, libs: Libraries, sample_s: float) -> None:
    """Check the case's result, then warm it up. A torch.compile case that fails or takes too long
    is dropped (and named in ``libs.missing``); any other failure stops the benchmark."""
    if case.library == "torch.compile" and "torch.compile" in libs.missing:
        del workload.cases[case.library]
        return
    try:
        start = time.perf_counter()
        if case.check is not None:
            case.check()                          # raises BenchmarkError on a wrong result
        if case.library == "torch.compile" and time.perf_counter() - start > TORCH_COMPILE_LIMIT_S:
            libs.missing["torch.compile"] = f"first call took more than {TORCH_COMPILE_LIMIT_S:.0f} s"
            del workload.cases[case.library]
            return
        settle()
        warm_up(workload, case, sample_s)
    except BenchmarkError:
        raise
    except Exception as error:  # noqa: BLE001 - torch.compile is optional; the others must work
        if case.library != "torch.compile":
            raise
        libs.missing["torch.compile"] = f"failed ({type(error).__name__}: {str(error)[:200]})"
        del workload.cases[case.library]


def set_up(process: str, names: list[str], libs: Libraries, elements: int, sample_s: float) -> dict[str, Workload]:
    """Build, check and warm up this process's cases of every workload in ``names``."""
    # compile-mlp goes first so that torch.compile's cold measurement is the process's first.
    built: dict[str, Workload] = {}
    for name in sorted(names, key=lambda w: w != "compile-mlp"):
        if process not in processes_of(name, libs.target):
            continue
        print(f"setting up {name} ({process} process) ...", file=sys.stderr)
        workload = build_workload(name, libs, elements)
        if workload is None:           # its tool is missing; named on a skipped: line
            continue
        for case in list(workload.cases.values()):
            set_up_case(workload, case, libs, sample_s)
        built[name] = workload
    if "torch.compile" in libs.missing:     # it may have failed after some workloads had it
        for workload in built.values():
            workload.cases.pop("torch.compile", None)
    return built


# ------------------------------------------------------------------------------------------------
# What a worker process reports about itself
# ------------------------------------------------------------------------------------------------
def thread_pools() -> list[dict[str, Any]]:
    """The native thread pools loaded in this process, from threadpoolctl (empty without it)."""
    try:
        from threadpoolctl import threadpool_info
    except ImportError:
        return []
    keep = ("user_api", "internal_api", "architecture", "corename", "num_threads", "prefix", "version")
    return [{k: pool[k] for k in keep if k in pool} for pool in threadpool_info()]


def describe_pool(pool: dict[str, Any]) -> str:
    words = [f"{pool.get('user_api')}: {pool.get('internal_api')}"]
    if pool.get("version"):
        words.append(str(pool["version"]))
    if pool.get("architecture") or pool.get("corename"):
        words.append(f"({pool.get('architecture') or pool.get('corename')})")
    words.append(f"num_threads={pool.get('num_threads')} [{pool.get('prefix')}]")
    return " ".join(words)


def process_report(process: str, libs: Libraries) -> dict[str, Any]:
    """This worker's pid, library versions and thread settings (the header's ``threads:`` lines)."""
    versions: dict[str, str] = {"numpy": np.__version__}
    threads: list[str] = []
    pools = thread_pools()
    if process == "graphgrad":
        import llvmlite
        from compiler.codegen.cpu import thread_count
        versions["llvmlite"] = llvmlite.__version__
        try:
            from importlib.metadata import version
            versions["graphgrad"] = version("graphgrad")
        except Exception:  # noqa: BLE001 - not installed: run from the checkout
            versions["graphgrad"] = "checkout"
        configured = os.environ.get("GRAPHGRAD_THREADS")
        threads.append(f"{thread_count()} threads for large kernels (GRAPHGRAD_THREADS "
                       f"{'= ' + configured if configured else 'unset'})")
        threads += [f"{describe_pool(pool)} (loaded here; busy only in the *-alive workloads)" for pool in pools]
    elif process == "numpy":
        threads += [describe_pool(pool) for pool in pools] or ["threadpoolctl is not installed: numpy's BLAS "
                                                               "is not reported"]
    elif process == "torch" and libs.torch is not None:
        versions["torch"] = libs.torch.__version__
        threads.append(f"torch.get_num_threads() = {libs.torch.get_num_threads()}, "
                       f"get_num_interop_threads() = {libs.torch.get_num_interop_threads()}")
        threads += [describe_pool(pool) for pool in pools if pool.get("internal_api") != "openblas"]
    elif process == "jax" and libs.jax is not None:
        versions["jax"] = libs.jax.__version__
        devices = libs.jax.devices()
        threads.append(f"jax {len(devices)} {devices[0].platform} device(s), XLA's own thread pool "
                       f"(XLA_FLAGS {os.environ.get('XLA_FLAGS') or 'unset'})")
    report = {"pid": os.getpid(), "versions": versions, "threads": threads, "pools": pools,
              "python": platform.python_version()}
    if libs.target in GPU_TARGETS:
        report["devices"] = device_lines(process, libs)
    return report


def device_lines(process: str, libs: Libraries) -> list[str]:
    """Where this worker computes on a GPU target (the header's ``device:`` lines)."""
    if process == "graphgrad":
        where = "the GPU kernels run on the CPU" if libs.target == "cuda-emulated" else "device 0"
        return [f"Session(target={libs.target!r}): {where}"]
    if process == "torch" and libs.torch is not None:
        torch = libs.torch
        precision = (f"allow_tf32: matmul {torch.backends.cuda.matmul.allow_tf32}, "
                     f"cuDNN {torch.backends.cudnn.allow_tf32}")
        if libs.torch_device is None:
            return [f"the CPU (--target {libs.target}), {precision}"]
        major, minor = torch.cuda.get_device_capability(0)
        return [f"cuda:0 = {torch.cuda.get_device_name(0)} (sm_{major}{minor}), CUDA {torch.version.cuda}, "
                f"cuDNN {torch.backends.cudnn.version()}, {precision}, cudnn.benchmark on"]
    if process == "jax" and libs.jax is not None:
        device = libs.jax.devices()[0]
        return [f"{device.platform} device {device.id} = {device.device_kind}, default matmul precision "
                f"{libs.jax.config.jax_default_matmul_precision}"]
    return []


# ------------------------------------------------------------------------------------------------
# The worker loop
# ------------------------------------------------------------------------------------------------
def worker(process: str, use_torch_compile: bool, target: str = "cpu") -> int:
    """``run.py --worker PROCESS [--target T]``: one library's process. It imports its library (for
    ``target``: ``open_libraries``), says so with one
    JSON line on the original stdout (``{"missing": {...}}``: what could not be imported), then
    answers requests, JSON lines on stdin, one line each (everything else printed goes to stderr):

    - ``{"cmd": "setup", "workloads": [...], "elements": N, "sample_ms": MS}``: build, check and
      warm up its cases; answer with the cases (calls per sample, notes, one-off measurements),
      what is missing, and the process's thread settings;
    - ``{"cmd": "sample", "workload": W, "library": L}``: time one sample; answer with the seconds
      per call and any extras;
    - ``{"cmd": "quit"}`` or end of input: stop.

    Every answer is sent once no thread of this process burns CPU (``settle``), so the next
    process to compute has the cores to itself. A wrong result is answered with ``{"failed": ...}``
    and any other exception with ``{"error": traceback}``.
    """
    channel = os.fdopen(os.dup(1), "w", buffering=1)
    os.dup2(2, 1)                      # library chatter on stdout goes to stderr
    libs = open_libraries(process, use_torch_compile, target)
    channel.write(json.dumps({"missing": libs.missing}) + "\n")
    workloads: dict[str, Workload] = {}
    for line in sys.stdin:
        request = json.loads(line)
        try:
            if request["cmd"] == "quit":
                break
            if request["cmd"] == "setup":
                workloads = set_up(process, request["workloads"], libs, request["elements"],
                                   request["sample_ms"] / 1e3)
                answer = {"workloads": {w.name: describe_workload(w) for w in workloads.values()},
                          "missing": libs.missing, "process": process_report(process, libs)}
            elif request["cmd"] == "sample":
                case = workloads[request["workload"]].cases[request["library"]]
                assert case.sample is not None
                result = case.sample(case.calls)
                seconds, extras = result if isinstance(result, tuple) else (result, {})
                answer = {"seconds": seconds, "extras": extras}
            else:
                raise ValueError(f"unknown request {request!r}")
        except BenchmarkError as error:
            answer = {"failed": str(error)}
        except Exception:  # noqa: BLE001 - reported to the parent, which stops
            answer = {"error": traceback.format_exc()}
        settle()
        channel.write(json.dumps(answer) + "\n")
        if "failed" in answer or "error" in answer:
            break
    return 0


def describe_workload(workload: Workload) -> dict[str, Any]:
    return {"unit": workload.unit, "description": workload.description, "flops": workload.flops,
            "bytes": workload.bytes, "once": workload.once, "facts": workload.facts,
            "cases": {library: {"calls": case.calls, "fixed": case.fixed, "note": case.note,
                                "timed": case.sample is not None}
                      for library, case in workload.cases.items()}}

"""Side-by-side benchmark: graphgrad against numpy, and PyTorch and JAX where they are installed.

Every workload is run by every available library in ONE process, in interleaved rounds (each round
times a few calls of every library on every workload), after a warm-up and a correctness check
against numpy. The table shows the median over rounds of the time per call, and the ratio
``graphgrad time / other time`` (below 1: graphgrad is faster). A round during which other
processes kept the machine busy (``--max-other-load``) is thrown away and run again.

Workloads (all float32):

    mlp-b128, mlp-b1024   one SGD training step (lr 0.01) of an MLP 784-512-512-10 with relu and a
                          mean sparse softmax cross-entropy, batch 128 and 1024
    elementwise-16M       tanh(1.5*x + 0.3) * sigmoid(x) - exp(-x*x) on 2**24 elements
    sgemm-N               C = A @ B for square N x N matrices, N in 256, 512, 1024, 2048 (GFLOP/s)
    compile-mlp           the first sess.run of the mlp-b128 step in a fresh graph and Session,
                          compile cache empty (jax: first call of a new jax.jit of a new step
                          function; torch.compile: first step, measured once)
    compile-mlp-cached    the same, graphgrad only, when its on-disk compile cache holds the step
    mlp-b128-checked      the mlp-b128 step in a Session(check_numerics=True), graphgrad only: the
                          cost of checking every value for NaN and Inf (compare with mlp-b128)
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
import atexit
import contextlib
import datetime
import itertools
import json
import math
import os
import platform
import select
import shlex
import shutil
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Iterator

# Run from a checkout without installing: the repository root goes first on the import path.
ROOT = Path(__file__).resolve().parents[2]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

import numpy as np  # noqa: E402

import compiler as cc  # noqa: E402
import optim  # noqa: E402
from runtime import Session  # noqa: E402

LIBRARIES: tuple[str, ...] = ("graphgrad", "numpy", "numpy-out", "torch", "torch.compile", "jax", "one-process")
WORKLOADS: tuple[str, ...] = ("mlp-b128", "mlp-b1024", "elementwise-16M", "sgemm-256", "sgemm-512",
                              "sgemm-1024", "sgemm-2048", "compile-mlp", "compile-mlp-cached", "mlp-b128-checked",
                              "run-overhead", "infer-8threads", "mlp-b1024-mpi2", "rnn-scan")
INFERENCE_THREADS: int = 8
INFERENCE_BATCH: int = 32
MLP_SIZES: tuple[int, ...] = (784, 512, 512, 10)
LEARNING_RATE: float = 0.01
TORCH_COMPILE_LIMIT_S: float = 60.0
OPENBLAS_VARIABLES: tuple[str, ...] = ("OPENBLAS_CORETYPE", "OPENBLAS_L2_SIZE")


class BenchmarkError(RuntimeError):
    """A library computed a wrong result: the benchmark stops rather than time it."""


# ------------------------------------------------------------------------------------------------
# Optional libraries
# ------------------------------------------------------------------------------------------------
@dataclass
class Libraries:
    """The optional reference libraries that could be imported, and why the others are missing."""

    torch: Any = None
    functional: Any = None
    jax: Any = None
    jnp: Any = None
    missing: dict[str, str] = field(default_factory=dict)


def import_optional(use_torch_compile: bool) -> Libraries:
    found = Libraries()
    try:
        if use_torch_compile:
            # A fresh inductor cache, so that compile-mlp measures a cold torch.compile.
            if "TORCHINDUCTOR_CACHE_DIR" not in os.environ:
                cache = tempfile.mkdtemp(prefix="graphgrad-bench-inductor-")
                os.environ["TORCHINDUCTOR_CACHE_DIR"] = cache
                atexit.register(shutil.rmtree, cache, ignore_errors=True)
        import torch
        import torch.nn.functional as functional
        found.torch, found.functional = torch, functional
    except Exception as error:  # noqa: BLE001 - any import failure just drops the columns
        found.missing["torch"] = f"not importable ({type(error).__name__}: {error})"
        found.missing["torch.compile"] = "torch is not importable"
    if found.torch is not None and not use_torch_compile:
        found.missing["torch.compile"] = "disabled (--no-torch-compile or --quick)"
    try:
        os.environ.setdefault("JAX_PLATFORMS", "cpu")
        import jax
        import jax.numpy as jnp
        found.jax, found.jnp = jax, jnp
    except Exception as error:  # noqa: BLE001
        found.missing["jax"] = f"not importable ({type(error).__name__}: {error})"
    return found


# ------------------------------------------------------------------------------------------------
# Cases: one library on one workload
# ------------------------------------------------------------------------------------------------
@dataclass
class Case:
    """One library on one workload.

    ``sample(n)`` returns the seconds per call, measured over ``n`` calls (a compile case ignores
    ``n`` and measures one cold compile). ``fixed`` holds a measurement taken once, at setup, for
    cases that cannot be repeated cheaply (torch.compile's cold compile).
    """

    library: str
    sample: Callable[[int], float] | None
    check: Callable[[], None] | None = None
    fixed: float | None = None
    calls: int = 1
    samples: list[float] = field(default_factory=list)
    note: str = ""


@dataclass
class Workload:
    name: str
    unit: str                      # "ms", "us" or "GFLOP/s"
    description: str
    cases: dict[str, Case]
    flops: float = 0.0             # per call, for GFLOP/s
    once: bool = False             # one call per sample (compile)
    details: Callable[[], list[str]] | None = None   # lines printed under the table (and in the JSON)


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


def assert_close(library: str, workload: str, actual: np.ndarray, expected: np.ndarray,
                 rtol: float, atol: float) -> None:
    actual = np.asarray(actual)
    if actual.shape != expected.shape or not np.allclose(actual, expected, rtol=rtol, atol=atol):
        worst = float(np.max(np.abs(actual.astype(np.float64) - expected))) if actual.shape == expected.shape else math.nan
        raise BenchmarkError(f"{library} computed a wrong result on {workload}: shape {actual.shape} vs "
                             f"{expected.shape}, max abs error {worst:g} (rtol={rtol}, atol={atol})")


# ------------------------------------------------------------------------------------------------
# MLP training step
# ------------------------------------------------------------------------------------------------
def initial_mlp_parameters(seed: int = 0) -> list[tuple[np.ndarray, np.ndarray]]:
    """He-initialised (W, b) per layer of the MLP 784-512-512-10, float32."""
    rng = np.random.default_rng(seed)
    layers = []
    for fan_in, fan_out in zip(MLP_SIZES[:-1], MLP_SIZES[1:]):
        weights = (rng.standard_normal((fan_in, fan_out)) * np.sqrt(2.0 / fan_in)).astype(np.float32)
        bias = (rng.standard_normal(fan_out) * 0.01).astype(np.float32)
        layers.append((weights, bias))
    return layers


def mlp_batch(batch: int, seed: int = 1) -> tuple[np.ndarray, np.ndarray]:
    rng = np.random.default_rng(seed)
    return (rng.random((batch, MLP_SIZES[0]), dtype=np.float32),
            rng.integers(0, MLP_SIZES[-1], batch).astype(np.int32))


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
    logits = activations[-1]
    shifted = logits - logits.max(axis=1, keepdims=True)
    probabilities = np.exp(shifted)
    probabilities /= probabilities.sum(axis=1, keepdims=True)
    grad = probabilities
    grad[np.arange(len(y)), y] -= 1.0
    grad /= np.float32(len(y))
    for index in range(last, -1, -1):
        weights, bias = params[index]
        inputs = activations[index]
        grad_weights = inputs.T @ grad
        grad_bias = grad.sum(axis=0)
        if index > 0:
            grad = grad @ weights.T
            grad *= inputs > 0
        weights -= np.float32(LEARNING_RATE) * grad_weights
        bias -= np.float32(LEARNING_RATE) * grad_bias


def expected_after_one_step(batch: int) -> list[np.ndarray]:
    params = initial_mlp_parameters()
    x, y = mlp_batch(batch)
    numpy_sgd_step(params, x, y)
    return [array for layer in params for array in layer]


def check_parameters(library: str, workload: str, actual: list[Any], expected: list[np.ndarray]) -> None:
    for got, want in zip(actual, expected):
        assert_close(library, workload, np.asarray(got), want, rtol=1e-3, atol=1e-4)


def build_graphgrad_mlp(batch: int, check_numerics: bool = False) -> tuple[Session, Any, dict, list[Any]]:
    """A fresh graph and Session with the MLP's training step; returns (sess, train_op, feed, params)."""
    graph = cc.Graph()
    with graph.as_default():
        x = cc.placeholder("float32", shape=(None, MLP_SIZES[0]), name="x")
        y = cc.placeholder("int32", shape=(None,), name="y")
        hidden = x
        variables = []
        layers = initial_mlp_parameters()
        for index, (weights, bias) in enumerate(layers):
            w_var = cc.Variable(weights, name=f"layer{index}/W")
            b_var = cc.Variable(bias, name=f"layer{index}/b")
            variables += [w_var, b_var]
            hidden = hidden @ w_var + b_var
            if index < len(layers) - 1:
                hidden = cc.nn.relu(hidden)
        loss = cc.reduce_mean(cc.nn.sparse_softmax_cross_entropy_with_logits(labels=y, logits=hidden))
        train_op = optim.GradientDescentOptimizer(LEARNING_RATE).minimize(loss)
    xb, yb = mlp_batch(batch)
    return Session(graph, check_numerics=check_numerics), train_op, {x: xb, y: yb}, variables


def mlp_workload(batch: int, libs: Libraries) -> Workload:
    name = f"mlp-b{batch}"
    expected = expected_after_one_step(batch)
    x, y = mlp_batch(batch)
    cases: dict[str, Case] = {}

    sess, train_op, feed, variables = build_graphgrad_mlp(batch)

    def graphgrad_check() -> None:
        sess.run(train_op, feed)
        check_parameters("graphgrad", name, sess.run(variables), expected)
    cases["graphgrad"] = Case("graphgrad", timed_calls(lambda: sess.run(train_op, feed)), graphgrad_check)

    params = initial_mlp_parameters()

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
    """A torch SGD step on fresh parameters: returns (step, parameters)."""
    torch, functional = libs.torch, libs.functional
    params = [torch.tensor(array, requires_grad=True) for layer in initial_mlp_parameters() for array in layer]
    xb, yb = mlp_batch(batch)
    x, y = torch.from_numpy(xb), torch.from_numpy(yb.astype(np.int64))

    def loss_fn(inputs: Any, labels: Any) -> Any:
        hidden = inputs
        for index in range(0, len(params), 2):
            hidden = functional.linear(hidden, params[index].t(), params[index + 1])
            if index < len(params) - 2:
                hidden = functional.relu(hidden)
        return functional.cross_entropy(hidden, labels)

    forward = torch.compile(loss_fn) if compiled else loss_fn

    def step() -> None:
        loss = forward(x, y)
        loss.backward()
        with torch.no_grad():
            for param in params:
                param.add_(param.grad, alpha=-LEARNING_RATE)
                param.grad = None
    return step, params


def torch_mlp_case(libs: Libraries, name: str, batch: int, expected: list[np.ndarray],
                   compiled: bool) -> Case:
    library = "torch.compile" if compiled else "torch"
    step, params = torch_mlp_step(libs, batch, compiled)

    def check() -> None:
        step()
        check_parameters(library, name, [p.detach().numpy() for p in params], expected)
    return Case(library, timed_calls(step), check)


def jax_mlp_step_function(libs: Libraries) -> Callable[[Any, Any, Any], Any]:
    """The pure (params, x, y) -> new params function (not yet jitted)."""
    jax, jnp = libs.jax, libs.jnp

    def loss_fn(params: Any, x: Any, y: Any) -> Any:
        hidden = x
        for index, (weights, bias) in enumerate(params):
            hidden = hidden @ weights + bias
            if index < len(params) - 1:
                hidden = jax.nn.relu(hidden)
        log_probabilities = jax.nn.log_softmax(hidden, axis=1)
        return -jnp.mean(jnp.take_along_axis(log_probabilities, y[:, None], axis=1))

    def step(params: Any, x: Any, y: Any) -> Any:
        _, grads = jax.value_and_grad(loss_fn)(params, x, y)
        return jax.tree_util.tree_map(lambda p, g: p - LEARNING_RATE * g, params, grads)
    return step


def jax_mlp_case(libs: Libraries, name: str, batch: int, expected: list[np.ndarray]) -> Case:
    jax, jnp = libs.jax, libs.jnp
    step = jax.jit(jax_mlp_step_function(libs))
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
    logits = h @ output_weights + output_bias
    probabilities = np.exp(logits - logits.max(axis=1, keepdims=True))
    probabilities /= probabilities.sum(axis=1, keepdims=True)
    probabilities[np.arange(batch), y] -= 1.0
    d_logits = probabilities / batch
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


def build_graphgrad_gru() -> tuple[Session, Any, dict, list[Any]]:
    """The GRU step with ``cc.scan``: (sess, train_op, feed, variables)."""
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
        def check() -> None:
            step()
            check_parameters(library, name, [np.asarray(p) for p in current()], expected)
        return check

    sess, train_op, feed, variables = build_graphgrad_gru()
    graphgrad_step = lambda: sess.run(train_op, feed)  # noqa: E731
    cases["graphgrad"] = Case("graphgrad", timed_calls(graphgrad_step),
                              check_of("graphgrad", graphgrad_step, lambda: sess.run(variables)),
                              note="cc.scan; the backward loop reads the states and products the forward loop kept")
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
            with torch.no_grad():
                for param in torch_params:
                    param.add_(param.grad, alpha=-LEARNING_RATE)
                    param.grad = None
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
            log_probabilities = jax.nn.log_softmax(h @ output_weights + output_bias, axis=1)
            return -jnp.mean(jnp.take_along_axis(log_probabilities, y[:, None], axis=1))

        jitted = jax.jit(lambda p, x, y: [a - LEARNING_RATE * g for a, g in zip(p, jax.grad(loss_fn)(p, x, y))])
        xj, yj = jnp.asarray(xb), jnp.asarray(yb)
        state = {"params": [jnp.asarray(p) for p in params]}

        def jax_step() -> None:
            state["params"] = jax.block_until_ready(jitted(state["params"], xj, yj))
        cases["jax"] = Case("jax", timed_calls(jax_step), check_of("jax", jax_step, lambda: state["params"]),
                            note="jax.jit of jax.grad through jax.lax.scan")
    return Workload(name, "ms", f"SGD step, GRU over {RNN_STEPS} steps of {RNN_FEATURES} features, hidden "
                                f"{RNN_HIDDEN} (gates z, r, n in one [H, 3H] matrix), batch {RNN_BATCH}", cases)


# ------------------------------------------------------------------------------------------------
# compile-mlp: cold compile of the MLP b128 step
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


def compile_workload(libs: Libraries) -> Workload:
    name = "compile-mlp"
    batch = 128
    expected = expected_after_one_step(batch)
    cases: dict[str, Case] = {}
    scratch = tempfile.mkdtemp(prefix="graphgrad-bench-cache-")
    atexit.register(shutil.rmtree, scratch, ignore_errors=True)
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
            step = jax.jit(jax_mlp_step_function(libs))
            start = time.perf_counter()
            jax.block_until_ready(step(params, x, y))
            return time.perf_counter() - start

        def jax_check() -> None:
            step = jax.jit(jax_mlp_step_function(libs))
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
    scratch = tempfile.mkdtemp(prefix="graphgrad-bench-cache-")
    atexit.register(shutil.rmtree, scratch, ignore_errors=True)
    cached = os.path.join(scratch, "warm")

    def sample(_: int) -> float:
        return graphgrad_first_run(batch, cached)

    def check() -> None:            # also fills the cache
        graphgrad_first_run(batch, cached, expected, name)
    case = Case("graphgrad", sample, check)
    return Workload(name, "ms", "first sess.run of the mlp-b128 step, fresh graph and Session, "
                    "compile cache (GRAPHGRAD_CACHE_DIR) already holding it", {"graphgrad": case}, once=True)


def checked_mlp_workload() -> Workload:
    """mlp-b128-checked: the mlp-b128 step with every value checked for NaN and Inf in the step."""
    name = "mlp-b128-checked"
    expected = expected_after_one_step(128)
    sess, train_op, feed, variables = build_graphgrad_mlp(128, check_numerics=True)

    def check() -> None:
        sess.run(train_op, feed)
        check_parameters("graphgrad", name, sess.run(variables), expected)
    case = Case("graphgrad", timed_calls(lambda: sess.run(train_op, feed)), check)
    return Workload(name, "ms", "the mlp-b128 step in Session(check_numerics=True)", {"graphgrad": case})


# ------------------------------------------------------------------------------------------------
# elementwise
# ------------------------------------------------------------------------------------------------
def elementwise_numpy(x: np.ndarray) -> np.ndarray:
    return np.tanh(1.5 * x + 0.3) * (1.0 / (1.0 + np.exp(-x))) - np.exp(-x * x)


def elementwise_workload(elements: int, libs: Libraries) -> Workload:
    name = "elementwise-16M"
    rng = np.random.default_rng(2)
    xv = (rng.standard_normal(elements) * 2.0).astype(np.float32)
    expected = elementwise_numpy(xv.astype(np.float64))
    cases: dict[str, Case] = {}

    def check_of(library: str, compute: Callable[[], Any]) -> Callable[[], None]:
        return lambda: assert_close(library, name, np.asarray(compute()), expected, rtol=1e-4, atol=1e-5)

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
def sgemm_workload(n: int, libs: Libraries) -> Workload:
    name = f"sgemm-{n}"
    rng = np.random.default_rng(3)
    a = rng.uniform(-1.0, 1.0, (n, n)).astype(np.float32)
    b = rng.uniform(-1.0, 1.0, (n, n)).astype(np.float32)
    expected = a.astype(np.float64) @ b.astype(np.float64)
    atol = 1e-5 * n
    cases: dict[str, Case] = {}

    def check_of(library: str, compute: Callable[[], Any]) -> Callable[[], None]:
        return lambda: assert_close(library, name, np.asarray(compute()), expected, rtol=1e-4, atol=atol)

    graph = cc.Graph()
    with graph.as_default():
        pa = cc.placeholder("float32", shape=(n, n), name="A")
        pb = cc.placeholder("float32", shape=(n, n), name="B")
        product = cc.matmul(pa, pb)
    sess = Session(graph)
    feed = {pa: a, pb: b}
    # Both write C into a reused array (graphgrad: Session.run out=; numpy: matmul out=).
    c_graphgrad, c_numpy = np.empty((n, n), np.float32), np.empty((n, n), np.float32)
    graphgrad_call = lambda: sess.run(product, feed, out=c_graphgrad)  # noqa: E731
    cases["graphgrad"] = Case("graphgrad", timed_calls(graphgrad_call), check_of("graphgrad", graphgrad_call))
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

    graph = cc.Graph()
    with graph.as_default():
        x = cc.placeholder("float32", shape=(1,), name="x")
        result = x + 1.0
    sess = Session(graph)
    feed = {x: xv}
    graphgrad_call = lambda: sess.run(result, feed)  # noqa: E731
    cases["graphgrad"] = Case("graphgrad", timed_calls(graphgrad_call), check_of("graphgrad", graphgrad_call))
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
        start = threading.Barrier(threads + 1)

        def loop() -> None:
            start.wait()
            for _ in range(per_thread):
                call()
        workers = [threading.Thread(target=loop) for _ in range(threads)]
        for worker in workers:
            worker.start()
        start.wait()
        began = time.perf_counter()
        for worker in workers:
            worker.join()
        return (time.perf_counter() - began) / (per_thread * threads)
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

    graph = cc.Graph()
    with graph.as_default():
        placeholder = cc.placeholder("float32", shape=(None, MLP_SIZES[0]), name="x")
        hidden = placeholder
        for index, (weights, bias) in enumerate(params):
            hidden = hidden @ cc.Variable(weights, name=f"layer{index}/W") + cc.Variable(bias, name=f"layer{index}/b")
            if index < len(params) - 1:
                hidden = cc.nn.relu(hidden)
    sess = Session(graph)
    feed = {placeholder: x}
    cases["graphgrad"] = case("graphgrad", lambda: sess.run(hidden, feed))
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
ETHERNET_BYTES_PER_S: float = 25e9 / 8     # 25 Gb/s
ETHERNET_LATENCY_S: float = 25e-6          # per message of the ring, TCP over a switch (assumed)
MPI_STARTUP_S: float = 120.0


def ring_allreduce_seconds(nbytes: float, ranks: int, bytes_per_s: float = ETHERNET_BYTES_PER_S,
                           latency_s: float = ETHERNET_LATENCY_S) -> float:
    """The ring allreduce's cost model: each rank sends and receives 2 (p - 1) / p of the buffer in
    2 (p - 1) messages (reduce-scatter, then allgather)."""
    return 2 * (ranks - 1) / ranks * nbytes / bytes_per_s + 2 * (ranks - 1) * latency_s


def mpi_worker(batch: int) -> None:
    """One rank of the ``mlp-b1024-mpi2`` job (``run.py --mpi-worker``, started by ``mpiexec``).

    Rank 0 reads requests from its stdin, one per line: N (time N steps) or EOF (stop), and
    answers each with one JSON line on stdout; the first line it writes says whether the first
    step gave the expected parameters. Between requests the other ranks wait with pauses (not in
    a busy MPI wait), so the job takes no CPU from the libraries timed meanwhile.
    """
    from mpi4py import MPI
    comm = MPI.COMM_WORLD
    rank, size = comm.Get_rank(), comm.Get_size()
    graph = cc.Graph()
    with graph.as_default():
        x = cc.placeholder("float32", shape=(None, MLP_SIZES[0]), name="x")
        y = cc.placeholder("int32", shape=(None,), name="y")
        hidden, variables = x, []
        layers = initial_mlp_parameters()
        for index, (weights, bias) in enumerate(layers):
            w_var, b_var = cc.Variable(weights, name=f"layer{index}/W"), cc.Variable(bias, name=f"layer{index}/b")
            variables += [w_var, b_var]
            hidden = hidden @ w_var + b_var
            if index < len(layers) - 1:
                hidden = cc.nn.relu(hidden)
        loss = cc.reduce_mean(cc.nn.sparse_softmax_cross_entropy_with_logits(labels=y, logits=hidden))
        opt = optim.DistributedOptimizer(optim.GradientDescentOptimizer(LEARNING_RATE), comm=comm)
        train_op = opt.minimize(loss)
    xb, yb = mlp_batch(batch * size)
    feed = {x: optim.shard(xb, rank, size), y: optim.shard(yb, rank, size)}
    sess = Session(graph)
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


class MpiJob:
    """The ``mpiexec`` job of ``mpi_worker``, kept running between samples."""

    def __init__(self, mpiexec: str, batch: int) -> None:
        env = dict(os.environ)
        env["GRAPHGRAD_THREADS"] = "1"          # one thread per rank: 2 ranks use the cores one process uses
        env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(ROOT), env.get("PYTHONPATH", "")]))
        if hasattr(os, "geteuid") and os.geteuid() == 0:
            env.update(OMPI_ALLOW_RUN_AS_ROOT="1", OMPI_ALLOW_RUN_AS_ROOT_CONFIRM="1")
        command = [mpiexec, "-n", str(MPI_RANKS)]
        if MPI_RANKS > (os.cpu_count() or 1):
            command.append("--oversubscribe")
        command += [sys.executable, str(Path(__file__).resolve()), "--mpi-worker", str(batch)]
        self.process = subprocess.Popen(command, stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True,
                                        env=env, cwd=ROOT)
        atexit.register(self.close)
        self.bytes_per_step = 0
        self.allreduce: list[float] = []
        self.first = self.receive(MPI_STARTUP_S)

    def receive(self, timeout: float) -> dict[str, Any]:
        assert self.process.stdout is not None
        ready, _, _ = select.select([self.process.stdout], [], [], timeout)
        line = self.process.stdout.readline() if ready else ""
        if not line:
            self.close()
            raise BenchmarkError(f"the mpiexec job of mlp-b1024-mpi2 stopped answering (exit status "
                                 f"{self.process.returncode}); run `mpiexec -n {MPI_RANKS} python "
                                 f"examples/benchmarks/run.py --mpi-worker 512` to see why")
        return json.loads(line)

    def sample(self, steps: int) -> float:
        assert self.process.stdin is not None
        self.process.stdin.write(f"{steps}\n")
        self.process.stdin.flush()
        answer = self.receive(MPI_STARTUP_S)
        self.bytes_per_step = int(answer["bytes_per_step"])
        self.allreduce.append(float(answer["allreduce_seconds"]))
        return float(answer["seconds"])

    def close(self) -> None:
        if self.process.poll() is None:
            with contextlib.suppress(OSError):
                self.process.stdin.close()  # type: ignore[union-attr]   # EOF: the ranks stop
            try:
                self.process.wait(timeout=10)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait()


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
    one = mlp_workload(MPI_GLOBAL_BATCH, Libraries()).cases["graphgrad"]
    cases["one-process"] = Case("one-process", one.sample, one.check,
                                note=f"one process x batch {MPI_GLOBAL_BATCH}, all cores")

    def details() -> list[str]:
        step = median_seconds(cases["graphgrad"])
        alone = median_seconds(cases["one-process"])
        reduce_s = statistics.median(job.allreduce) if job.allreduce else math.nan
        nbytes = job.bytes_per_step
        lines = [f"{name}: {MPI_RANKS} ranks x batch {batch} (1 thread each) {step * 1e3:.2f} ms per step, "
                 f"one process x batch {MPI_GLOBAL_BATCH} ({os.cpu_count()} threads) {alone * 1e3:.2f} ms: "
                 f"speed-up {alone / step:.2f}x; in the allreduce {reduce_s * 1e3:.2f} ms per step "
                 f"({100 * reduce_s / step:.0f}%), {nbytes} bytes per step in one Allreduce",
                 f"{name}: paper estimate of the ring allreduce of those {nbytes} bytes over 25 Gb/s Ethernet "
                 f"(2(p-1)/p * bytes / bandwidth + 2(p-1) * {ETHERNET_LATENCY_S * 1e6:.0f} us):"]
        for ranks in (8, 64):
            estimate = ring_allreduce_seconds(nbytes, ranks)
            lines.append(f"{name}:   {ranks} ranks: {estimate * 1e3:.2f} ms per step; added to the "
                         f"{alone * 1e3:.2f} ms of a batch-{MPI_GLOBAL_BATCH} step on each rank (weak scaling), "
                         f"{100 * alone / (alone + estimate):.0f}% scaling efficiency")
        return lines
    return Workload(name, "ms", f"SGD step, MLP {'-'.join(map(str, MLP_SIZES))}, batch {MPI_GLOBAL_BATCH} "
                    f"over {MPI_RANKS} MPI ranks", cases, details=details)


# ------------------------------------------------------------------------------------------------
# Running
# ------------------------------------------------------------------------------------------------
def build_workload(name: str, libs: Libraries, args: argparse.Namespace) -> Workload | None:
    if name == "mlp-b128-checked":
        return checked_mlp_workload()
    if name == "mlp-b1024-mpi2":
        return mpi_workload(libs)
    if name == "rnn-scan":
        return rnn_workload(libs)
    if name.startswith("mlp-b"):
        return mlp_workload(int(name[len("mlp-b"):]), libs)
    if name == "elementwise-16M":
        return elementwise_workload(args.elements, libs)
    if name.startswith("sgemm-"):
        return sgemm_workload(int(name[len("sgemm-"):]), libs)
    if name == "compile-mlp":
        return compile_workload(libs)
    if name == "compile-mlp-cached":
        return compile_cached_workload()

    if name == "run-overhead":
        return overhead_workload(libs)
    if name == "infer-8threads":
        return inference_workload(libs)
    raise ValueError(f"unknown workload {name!r}")


def warm_up(workload: Workload, case: Case, target_s: float) -> None:
    """Run the case outside timing and choose how many calls one sample takes."""
    if case.sample is None:
        return
    if workload.once:
        case.sample(1)
        case.calls = 1
        return
    case.sample(1)
    estimate = case.sample(1)
    if estimate < 1e-3:              # a better estimate for cheap calls
        estimate = case.sample(max(1, int(1e-3 / max(estimate, 1e-7))))
    case.calls = max(1, min(200_000, int(math.ceil(target_s / max(estimate, 1e-8)))))
    case.sample(min(case.calls, max(1, int(0.2 / max(estimate, 1e-8)))))


def settle(max_wait_s: float = 0.5, step_s: float = 0.005, busy_fraction: float = 0.25) -> float:
    """Wait until no thread of this process burns CPU any more; return the seconds waited.

    OpenBLAS's worker threads spin for about 2**28 cycles (~0.1 s) after each BLAS call, and
    PyTorch's OpenMP threads for a few ms. On a machine with few cores, a spinning pool takes a
    core away from whichever library runs next, so every sample starts from a quiet process.
    """
    start = time.perf_counter()
    while time.perf_counter() - start < max_wait_s:
        cpu, wall = time.process_time(), time.perf_counter()
        time.sleep(step_s)
        if time.process_time() - cpu < busy_fraction * (time.perf_counter() - wall):
            break
    return time.perf_counter() - start


def system_cpu_seconds() -> float | None:
    """CPU seconds spent by the whole machine so far (all processes), from /proc/stat."""
    try:
        fields = Path("/proc/stat").read_text().splitlines()[0].split()
    except (OSError, IndexError):
        return None
    busy = sum(int(v) for v in fields[1:4] + fields[6:9])   # user nice system irq softirq steal
    return busy / os.sysconf("SC_CLK_TCK")


def own_cpu_seconds() -> float:
    """CPU seconds of this process, its finished children, and its live descendants (such as
    torch.compile's compile workers), which are not "other processes"."""
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
    """How many cores other processes kept busy while this one was measuring."""

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


def run_rounds(workloads: list[Workload], rounds: int, max_other_load: float,
               progress: bool) -> dict[str, Any]:
    """Time ``rounds`` interleaved rounds; a round during which other processes kept more than
    ``max_other_load`` cores busy is thrown away and run again (at most ``rounds`` times)."""
    kept, discarded, loads = 0, 0, []
    round_index = 0
    while kept < rounds:
        start = time.perf_counter()
        meter = LoadMeter()
        samples: list[tuple[Case, float]] = []
        for workload in workloads:
            cases = [c for c in workload.cases.values() if c.sample is not None]
            shift = round_index % max(len(cases), 1)        # rotate the order of libraries
            for case in cases[shift:] + cases[:shift]:
                settle()
                samples.append((case, case.sample(case.calls)))
        round_index += 1
        load = meter.other_cores()
        busy = load is not None and load > max_other_load
        if busy and discarded < rounds:
            discarded += 1
            verdict = "thrown away, run again"
        else:
            kept += 1
            loads.append(load)
            for case, seconds in samples:
                case.samples.append(seconds)
            verdict = f"kept ({kept}/{rounds})"
        if progress:
            load_text = "?" if load is None else f"{load:.2f}"
            print(f"  round {round_index}: {time.perf_counter() - start:.1f} s, other processes "
                  f"{load_text} cores: {verdict}", file=sys.stderr)
    known = [x for x in loads if x is not None]
    return {"rounds_kept": kept, "rounds_discarded": discarded,
            "other_processes_cores": max(known) if known else None}


def median_seconds(case: Case) -> float:
    if case.fixed is not None:
        return case.fixed
    return statistics.median(case.samples)


def display_value(workload: Workload, seconds: float) -> float:
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


def columns_of(workloads: list[Workload]) -> list[str]:
    present = {library for w in workloads for library in w.cases}
    return [library for library in LIBRARIES if library in present]


def render_table(workloads: list[Workload]) -> str:
    columns = columns_of(workloads)
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


def blas_info() -> list[dict[str, Any]]:
    try:
        from threadpoolctl import threadpool_info
    except ImportError:
        return []
    keep = ("user_api", "internal_api", "architecture", "corename", "num_threads", "prefix", "version")
    return [{k: pool[k] for k in keep if k in pool} for pool in threadpool_info()]


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


def environment(libs: Libraries) -> dict[str, Any]:
    import llvmlite
    versions = {"python": platform.python_version(), "numpy": np.__version__, "llvmlite": llvmlite.__version__}
    try:
        from importlib.metadata import version
        versions["graphgrad"] = version("graphgrad")
    except Exception:  # noqa: BLE001 - not installed: run from the checkout
        versions["graphgrad"] = "checkout"
    if libs.torch is not None:
        versions["torch"] = libs.torch.__version__
    if libs.jax is not None:
        versions["jax"] = libs.jax.__version__
    affinity = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count()
    threads = {}
    if libs.torch is not None:
        threads["torch"] = libs.torch.get_num_threads()
    return {
        "git": git_revision(),
        "date": datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"),
        "command": " ".join(shlex.quote(a) for a in [os.path.basename(sys.executable), *sys.argv]),
        "cpu": cpu_model(),
        "cores": os.cpu_count(),
        "usable_cores": affinity,
        "platform": platform.platform(),
        "versions": versions,
        "blas": blas_info(),
        "threads": threads,
        "openblas_variables": {name: os.environ[name] for name in OPENBLAS_VARIABLES if name in os.environ},
    }


def print_environment(env: dict[str, Any], libs: Libraries) -> None:
    print(f"date:     {env['date']}")
    print(f"command:  {env['command']}")
    print(f"machine:  {env['cpu']}, {env['cores']} cores ({env['usable_cores']} usable), {env['platform']}")
    print(f"graphgrad: {ROOT} at {env['git']}")
    print("versions: " + ", ".join(f"{k} {v}" for k, v in env["versions"].items()))
    for pool in env["blas"]:
        words = [f"{pool.get('user_api')}: {pool.get('internal_api')}"]
        if pool.get("version"):
            words.append(str(pool["version"]))
        if pool.get("architecture") or pool.get("corename"):
            words.append(f"({pool.get('architecture') or pool.get('corename')})")
        words.append(f"num_threads={pool.get('num_threads')} [{pool.get('prefix')}]")
        print("threads:  " + " ".join(words))
    if not env["blas"]:
        print("threads:  threadpoolctl is not installed: numpy's BLAS is not reported")
    for library, count in env["threads"].items():
        print(f"threads:  {library}.get_num_threads() = {count}")
    for library, reason in libs.missing.items():
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


def to_json(workloads: list[Workload], env: dict[str, Any], libs: Libraries,
            args: argparse.Namespace) -> dict[str, Any]:
    results: dict[str, Any] = {}
    for workload in workloads:
        libraries = {}
        for library, case in workload.cases.items():
            seconds = median_seconds(case)
            libraries[library] = {
                "median_seconds": seconds,
                "value": display_value(workload, seconds),
                "unit": workload.unit,
                "samples_seconds": [case.fixed] if case.fixed is not None else case.samples,
                "calls_per_sample": case.calls,
                "note": case.note,
            }
        ratios = {}
        if "graphgrad" in workload.cases:
            base = median_seconds(workload.cases["graphgrad"])
            ratios = {library: base / entry["median_seconds"] for library, entry in libraries.items()
                      if library != "graphgrad"}
        results[workload.name] = {"unit": workload.unit, "description": workload.description,
                                  "libraries": libraries, "ratios_graphgrad_over_other": ratios}
        if workload.details is not None:
            results[workload.name]["details"] = workload.details()
    return {"environment": env, "skipped": dict(libs.missing),
            "settings": {"rounds": args.rounds, "sample_ms": args.sample_ms, "elements": args.elements,
                         "quick": args.quick,
                         "max_other_load": None if math.isinf(args.max_other_load) else args.max_other_load},
            "results": results}


# ------------------------------------------------------------------------------------------------
# Command line
# ------------------------------------------------------------------------------------------------
def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(
        description="Benchmark graphgrad against numpy, PyTorch and JAX (interleaved rounds, medians).",
        epilog="Run as: env -u OPENBLAS_CORETYPE -u OPENBLAS_L2_SIZE python examples/benchmarks/run.py")
    parser.add_argument("--quick", action="store_true",
                        help="a smoke run (< 30 s): 3 rounds, short samples, 2**22 elements, no sgemm-2048, "
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
    parser.add_argument("--mpi-worker", type=int, default=None, help=argparse.SUPPRESS)  # a rank of mlp-b1024-mpi2
    args = parser.parse_args(argv)
    if args.rounds is None:
        args.rounds = 3 if args.quick else 7
    if args.sample_ms is None:
        args.sample_ms = 4.0 if args.quick else 40.0
    if args.max_other_load is None:
        args.max_other_load = math.inf if args.quick else 0.15
    if args.elements is None:
        args.elements = 2 ** 22 if args.quick else 2 ** 24
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


def set_up(names: list[str], libs: Libraries, args: argparse.Namespace) -> list[Workload]:
    """Build, check and warm up every workload, in the order of ``names``."""
    # compile-mlp is set up first so that its torch.compile measurement is the process's first.
    built: dict[str, Workload] = {}
    for name in sorted(names, key=lambda w: w != "compile-mlp"):
        print(f"setting up {name} ...", file=sys.stderr)
        workload = build_workload(name, libs, args)
        if workload is None:           # its tool is missing; named on a skipped: line
            continue
        for case in list(workload.cases.values()):
            set_up_case(workload, case, libs, args.sample_ms / 1e3)
        built[name] = workload
    workloads = [built[name] for name in names if name in built]
    if "torch.compile" in libs.missing:     # it may have failed after some workloads had it
        for workload in workloads:
            workload.cases.pop("torch.compile", None)
    return workloads


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    if args.mpi_worker is not None:
        mpi_worker(args.mpi_worker)
        return 0
    use_torch_compile = not (args.no_torch_compile or args.quick)
    libs = import_optional(use_torch_compile)
    started = time.perf_counter()
    setup_meter = LoadMeter()
    workloads = set_up(args.workloads, libs, args)
    setup_load = setup_meter.other_cores()

    print(f"timing {args.rounds} interleaved rounds ...", file=sys.stderr)
    timing = run_rounds(workloads, args.rounds, args.max_other_load, progress=True)

    env = environment(libs)
    env.update(timing)
    env["max_other_load"] = args.max_other_load
    env["setup_other_processes_cores"] = setup_load
    print_environment(env, libs)
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
    notes = {f"{w.name} {c.library}": c.note for w in workloads for c in w.cases.values()
             if c.note and c.fixed is not None}
    for key, note in notes.items():
        print(f"{key}: {note}")
    for workload in workloads:
        for line in workload.details() if workload.details is not None else []:
            print(line)
    print(f"total time: {time.perf_counter() - started:.1f} s")
    if args.json is not None:
        args.json.write_text(json.dumps(to_json(workloads, env, libs, args), indent=2))
        print(f"wrote {args.json}")
    return 0


if __name__ == "__main__":
    try:
        sys.exit(main())
    except BenchmarkError as failure:
        print(f"FAILED: {failure}", file=sys.stderr)
        sys.exit(1)

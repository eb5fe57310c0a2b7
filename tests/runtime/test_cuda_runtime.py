"""``target="cuda"``'s bookkeeping, run against a fake CUDA driver (no GPU needed).

``FakeDriver`` implements the part of ``cuda.bindings.driver`` that ``runtime.cuda`` calls, with
the same return convention (a tuple: the CUresult, then the values). Device memory is numpy byte
arrays (their host addresses are the device pointers), every copy and launch is logged as it
executes, stream capture records operations into a graph that ``cuGraphLaunch`` replays, and
kernels compute nothing (a test may give them an effect). The fake rejects what the real driver
rejects where the runtime could get it wrong: a pointer outside every allocation, a pageable copy
or a synchronize while capturing, a call from a thread with no current context, a launch with
another number of arguments than the PTX entry declares. The last test replays the calls the
runtime made through NVIDIA's real bindings, so their argument types are checked too.
"""
from __future__ import annotations

import ctypes
import enum
import inspect
import re
import sys
import threading
from dataclasses import dataclass, field
from types import SimpleNamespace
from typing import Any, Callable

import numpy as np
import pytest

import compiler as cc
import optim
from runtime import Session
from runtime import cuda as cuda_runtime
from runtime.cuda import CudaError

CUresult = enum.IntEnum("CUresult", {
    "CUDA_SUCCESS": 0, "CUDA_ERROR_INVALID_VALUE": 1, "CUDA_ERROR_OUT_OF_MEMORY": 2, "CUDA_ERROR_NO_DEVICE": 100,
    "CUDA_ERROR_INVALID_CONTEXT": 201, "CUDA_ERROR_INVALID_PTX": 218, "CUDA_ERROR_INVALID_HANDLE": 400,
    "CUDA_ERROR_ILLEGAL_ADDRESS": 700, "CUDA_ERROR_LAUNCH_OUT_OF_RESOURCES": 701,
    "CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED": 900, "CUDA_ERROR_CONTAINED": 912})
CUjit_option = enum.IntEnum("CUjit_option", {
    "CU_JIT_INFO_LOG_BUFFER": 3, "CU_JIT_INFO_LOG_BUFFER_SIZE_BYTES": 4, "CU_JIT_ERROR_LOG_BUFFER": 5,
    "CU_JIT_ERROR_LOG_BUFFER_SIZE_BYTES": 6})
CUdevice_attribute = enum.IntEnum("CUdevice_attribute", {
    "CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR": 75, "CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR": 76})
CUstreamCaptureMode = enum.IntEnum("CUstreamCaptureMode", {"CU_STREAM_CAPTURE_MODE_GLOBAL": 0,
                                                           "CU_STREAM_CAPTURE_MODE_THREAD_LOCAL": 1})
CUstream_flags = enum.IntEnum("CUstream_flags", {"CU_STREAM_DEFAULT": 0, "CU_STREAM_NON_BLOCKING": 1})


class Handle:
    """An opaque driver handle (stream, module, function, graph, ...)."""

    def __init__(self, kind: str, **fields: Any) -> None:
        self.kind = kind
        self.__dict__.update(fields)


@dataclass
class FakeDriver:
    """The subset of ``cuda.bindings.driver`` that the runtime uses, on host memory."""

    driver_version: int = 12040
    capability: tuple[int, int] = (8, 6)
    device_count: int = 1
    init_status: CUresult = CUresult.CUDA_SUCCESS
    memory_limit: int = 1 << 30
    jit_failure: str | None = None                   # the kernel whose PTX the JIT refuses
    launch_failure: tuple[str, CUresult] | None = None  # (kernel, error) of a failing launch
    sync_failure: CUresult | None = None             # the error the next synchronize reports
    instantiate_failure: CUresult | None = None      # the error cuGraphInstantiate reports
    on_launch: Callable[[str, list[int]], None] | None = None   # a kernel's effect
    calls: list[tuple[str, tuple]] = field(default_factory=list)
    executed: list[tuple] = field(default_factory=list)  # ("htod"|"dtoh", device, host, n), ("kernel", name)
    device_memory: dict[int, np.ndarray] = field(default_factory=dict)
    pinned_memory: dict[int, np.ndarray] = field(default_factory=dict)
    live: dict[str, int] = field(default_factory=dict)     # handles created and not destroyed, by kind
    current: dict[int, Any] = field(default_factory=dict)  # thread -> context

    CUresult = CUresult
    CUjit_option = CUjit_option
    CUdevice_attribute = CUdevice_attribute
    CUstreamCaptureMode = CUstreamCaptureMode
    CUstream_flags = CUstream_flags

    def __post_init__(self) -> None:
        self.context = Handle("context")
        self.lock = threading.Lock()

    def __getattribute__(self, name: str) -> Any:
        attribute = object.__getattribute__(self, name)
        if name.startswith("cu") and callable(attribute):
            def logged(*args: Any) -> Any:
                with object.__getattribute__(self, "lock"):
                    self.calls.append((name, args))
                    return attribute(*args)
            return logged
        return attribute

    # -- helpers for the tests -----------------------------------------------------------------
    def count(self, name: str) -> int:
        return sum(1 for call, _ in self.calls if call == name)

    def copies(self, direction: str, device: int | None = None) -> list[tuple]:
        return [op for op in self.executed if op[0] == direction and (device is None or op[1] == device)]

    def device_array(self, pointer: int, dtype: Any, shape: tuple[int, ...]) -> np.ndarray:
        nbytes = int(np.prod(shape)) * np.dtype(dtype).itemsize
        return self._bytes(self.device_memory, pointer, nbytes).view(dtype).reshape(shape)

    def _bytes(self, memory: dict[int, np.ndarray], address: int, nbytes: int) -> np.ndarray:
        for base, block in memory.items():
            if base <= address and address + nbytes <= base + block.size:
                return block[address - base:address - base + nbytes]
        raise LookupError(address)

    def _create(self, kind: str, **fields: Any) -> Handle:
        self.live[kind] = self.live.get(kind, 0) + 1
        return Handle(kind, **fields)

    def _destroy(self, handle: Handle, kind: str) -> tuple:
        if not isinstance(handle, Handle) or handle.kind != kind:
            return (CUresult.CUDA_ERROR_INVALID_HANDLE,)
        self.live[kind] -= 1
        return (CUresult.CUDA_SUCCESS,)

    def _no_context(self) -> bool:
        return self.current.get(threading.get_ident()) is not self.context

    def _enqueue(self, stream: Any, operation: tuple) -> tuple:
        """Run an operation, or record it when the stream is capturing."""
        if not isinstance(stream, Handle) or stream.kind != "stream":
            return (CUresult.CUDA_ERROR_INVALID_HANDLE,)
        if stream.capture is not None:
            stream.capture.append(operation)
        else:
            self._execute(operation)
        return (CUresult.CUDA_SUCCESS,)

    def _execute(self, operation: tuple) -> None:
        kind = operation[0]
        if kind == "htod":
            _, device, host, nbytes = operation
            self._bytes(self.device_memory, device, nbytes)[...] = np.ctypeslib.as_array(
                (ctypes.c_uint8 * nbytes).from_address(host))
        elif kind == "dtoh":
            _, device, host, nbytes = operation
            ctypes.memmove(host, self._bytes(self.device_memory, device, nbytes).ctypes.data, nbytes)
        elif kind == "memset":
            _, device, value, nbytes = operation
            self._bytes(self.device_memory, device, nbytes)[...] = value
        elif kind == "kernel" and self.on_launch is not None:
            self.on_launch(operation[1], operation[2])
        self.executed.append(operation)

    def _check_range(self, memory: dict[int, np.ndarray], address: int, nbytes: int) -> bool:
        try:
            self._bytes(memory, int(address), nbytes)
        except LookupError:
            return False
        return True

    # -- the driver API ------------------------------------------------------------------------
    def cuGetErrorName(self, error: CUresult) -> tuple:
        return (CUresult.CUDA_SUCCESS, CUresult(error).name.encode())

    def cuGetErrorString(self, error: CUresult) -> tuple:
        return (CUresult.CUDA_SUCCESS, f"fake description of {CUresult(error).name}".encode())

    def cuInit(self, flags: int) -> tuple:
        return (self.init_status,)

    def cuDriverGetVersion(self) -> tuple:
        return (CUresult.CUDA_SUCCESS, self.driver_version)

    def cuDeviceGetCount(self) -> tuple:
        return (CUresult.CUDA_SUCCESS, self.device_count)

    def cuDeviceGet(self, ordinal: int) -> tuple:
        return (CUresult.CUDA_SUCCESS, Handle("device", ordinal=ordinal))

    def cuDeviceGetAttribute(self, attribute: CUdevice_attribute, device: Handle) -> tuple:
        major, minor = self.capability
        return (CUresult.CUDA_SUCCESS,
                major if attribute == CUdevice_attribute.CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR else minor)

    def cuDeviceGetName(self, length: int, device: Handle) -> tuple:
        return (CUresult.CUDA_SUCCESS, b"Fake GPU".ljust(length, b"\0"))

    def cuDevicePrimaryCtxRetain(self, device: Handle) -> tuple:
        return (CUresult.CUDA_SUCCESS, self.context)

    def cuCtxSetCurrent(self, context: Any) -> tuple:
        self.current[threading.get_ident()] = context
        return (CUresult.CUDA_SUCCESS,)

    def cuStreamCreate(self, flags: int) -> tuple:
        if self._no_context():
            return (CUresult.CUDA_ERROR_INVALID_CONTEXT, None)
        return (CUresult.CUDA_SUCCESS, self._create("stream", capture=None, flags=flags))

    def cuStreamDestroy(self, stream: Handle) -> tuple:
        return self._destroy(stream, "stream")

    def cuStreamSynchronize(self, stream: Handle) -> tuple:
        if stream.capture is not None:
            return (CUresult.CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED,)
        failure, self.sync_failure = self.sync_failure, None
        return (failure or CUresult.CUDA_SUCCESS,)

    def cuMemAlloc(self, nbytes: int) -> tuple:
        used = sum(block.size for block in self.device_memory.values())
        if self._no_context() or nbytes <= 0:
            return (CUresult.CUDA_ERROR_INVALID_VALUE, 0)
        if used + nbytes > self.memory_limit:
            return (CUresult.CUDA_ERROR_OUT_OF_MEMORY, 0)
        return self._allocate(self.device_memory, nbytes)

    @staticmethod
    def _allocate(memory: dict[int, np.ndarray], nbytes: int) -> tuple:
        block = np.zeros(nbytes, np.uint8)
        memory[block.ctypes.data] = block
        return (CUresult.CUDA_SUCCESS, block.ctypes.data)

    @staticmethod
    def _free(memory: dict[int, np.ndarray], address: int) -> tuple:
        found = memory.pop(int(address), None) is not None
        return (CUresult.CUDA_SUCCESS if found else CUresult.CUDA_ERROR_INVALID_VALUE,)

    def cuMemFree(self, pointer: int) -> tuple:
        return self._free(self.device_memory, pointer)

    def cuMemGetInfo(self) -> tuple:
        used = sum(block.size for block in self.device_memory.values())
        return (CUresult.CUDA_SUCCESS, self.memory_limit - used, self.memory_limit)

    def cuMemHostAlloc(self, nbytes: int, flags: int) -> tuple:
        return self._allocate(self.pinned_memory, nbytes)

    def cuMemFreeHost(self, address: int) -> tuple:
        return self._free(self.pinned_memory, address)

    def _copy(self, kind: str, device: int, host: int, nbytes: int, stream: Handle) -> tuple:
        if self._no_context():
            return (CUresult.CUDA_ERROR_INVALID_CONTEXT,)
        if not isinstance(host, int) or not self._check_range(self.device_memory, device, nbytes):
            return (CUresult.CUDA_ERROR_INVALID_VALUE,)
        if stream.capture is not None and not self._check_range(self.pinned_memory, host, nbytes):
            return (CUresult.CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED,)   # pageable memory cannot be captured
        return self._enqueue(stream, (kind, int(device), host, nbytes))

    def cuMemcpyHtoDAsync(self, device: int, host: int, nbytes: int, stream: Handle) -> tuple:
        return self._copy("htod", device, host, nbytes, stream)

    def cuMemcpyDtoHAsync(self, host: int, device: int, nbytes: int, stream: Handle) -> tuple:
        return self._copy("dtoh", device, host, nbytes, stream)

    def cuMemsetD8Async(self, device: int, value: int, nbytes: int, stream: Handle) -> tuple:
        if not self._check_range(self.device_memory, device, nbytes):
            return (CUresult.CUDA_ERROR_INVALID_VALUE,)
        return self._enqueue(stream, ("memset", int(device), value, nbytes))

    def cuModuleLoadDataEx(self, image: bytes, count: int, options: list, values: list) -> tuple:
        assert image.endswith(b"\0") and count == len(options) == len(values)
        ptx = image[:-1].decode()
        self.loaded_ptx = ptx
        entries = {name: params.count(".param") for name, params in
                   re.findall(r"\.entry\s+(\w+)\s*\(([^)]*)\)", ptx)}
        if self.jit_failure is not None:
            line = next(number for number, text in enumerate(ptx.splitlines(), 1)
                        if re.search(rf"\.entry\s+{self.jit_failure}\b", text)) + 3
            log = f"ptxas application ptx input, line {line}; error   : Unknown symbol 'oops'".encode()
            buffer = values[options.index(CUjit_option.CU_JIT_ERROR_LOG_BUFFER)]
            buffer[:len(log)] = log
            return (CUresult.CUDA_ERROR_INVALID_PTX, None)
        return (CUresult.CUDA_SUCCESS, self._create("module", entries=entries))

    def cuModuleUnload(self, module: Handle) -> tuple:
        return self._destroy(module, "module")

    def cuModuleGetFunction(self, module: Handle, name: bytes) -> tuple:
        if name.decode() not in module.entries:
            return (CUresult.CUDA_ERROR_INVALID_HANDLE, None)
        return (CUresult.CUDA_SUCCESS, Handle("function", name=name.decode(),
                                              parameters=module.entries[name.decode()]))

    def cuLaunchKernel(self, function: Handle, grid_x: int, grid_y: int, grid_z: int, block_x: int, block_y: int,
                       block_z: int, shared: int, stream: Handle, parameters: int, extra: int) -> tuple:
        if self._no_context() or not isinstance(parameters, int) or grid_x < 1 or block_x < 1:
            return (CUresult.CUDA_ERROR_INVALID_VALUE,)
        if self.launch_failure is not None and self.launch_failure[0] == function.name:
            return (self.launch_failure[1],)
        slots = (ctypes.c_uint64 * function.parameters).from_address(parameters)
        pointers = [ctypes.c_uint64.from_address(slot).value for slot in slots]
        if any(p and not self._check_range(self.device_memory, p, 1) for p in pointers):
            return (CUresult.CUDA_ERROR_INVALID_VALUE,)
        return self._enqueue(stream, ("kernel", function.name, pointers))

    def cuStreamBeginCapture(self, stream: Handle, mode: CUstreamCaptureMode) -> tuple:
        if not isinstance(mode, CUstreamCaptureMode) or stream.capture is not None:
            return (CUresult.CUDA_ERROR_INVALID_VALUE,)
        stream.capture = []
        return (CUresult.CUDA_SUCCESS,)

    def cuStreamEndCapture(self, stream: Handle) -> tuple:
        operations, stream.capture = stream.capture, None
        return (CUresult.CUDA_SUCCESS, self._create("graph", operations=operations))

    def cuGraphInstantiate(self, graph: Handle, flags: int) -> tuple:
        if self.instantiate_failure is not None:
            return (self.instantiate_failure, None)
        return (CUresult.CUDA_SUCCESS, self._create("graph_exec", operations=list(graph.operations)))

    def cuGraphLaunch(self, graph_exec: Handle, stream: Handle) -> tuple:
        for operation in graph_exec.operations:
            self._execute(operation)
        return (CUresult.CUDA_SUCCESS,)

    def cuGraphDestroy(self, graph: Handle) -> tuple:
        return self._destroy(graph, "graph")

    def cuGraphExecDestroy(self, graph_exec: Handle) -> tuple:
        return self._destroy(graph_exec, "graph_exec")


@pytest.fixture
def fake(monkeypatch: pytest.MonkeyPatch) -> FakeDriver:
    driver = FakeDriver()
    monkeypatch.setattr(cuda_runtime, "driver_module", lambda: driver)
    return driver


def _model() -> SimpleNamespace:
    """A linear model trained by gradient descent, with a variable no step assigns."""
    graph = cc.Graph()
    with graph.as_default():
        x = cc.placeholder("float32", (None, 4), name="x")
        w = cc.Variable(np.ones((4, 2), "float32"), name="w")
        scale = cc.Variable(np.full(3, 2.0, "float32"), name="scale")    # read, never assigned
        loss = cc.reduce_sum(cc.square(x @ w)) * scale[0]
        train = optim.GradientDescentOptimizer(0.1).minimize(loss, var_list=[w])
    return SimpleNamespace(graph=graph, x=x, w=w, scale=scale, loss=loss, train=train,
                           feeds={x: np.ones((3, 4), "float32")})


def _pointer(sess: Session, variable: Any) -> int:
    return sess._device_variables.pointers[variable]


# -- device-resident variables -------------------------------------------------------------------------

def test_variables_are_uploaded_once_and_feeds_every_run(fake: FakeDriver) -> None:
    m = _model()
    with Session(m.graph, target="cuda") as sess:
        for _ in range(4):
            sess.run(m.train, m.feeds)
        assert len(fake.copies("htod", _pointer(sess, m.w))) == 1
        assert len(fake.copies("htod", _pointer(sess, m.scale))) == 1
        feed_buffer = sess.compile(m.train, m.feeds).program.feeds[m.x]
        feed_pointer = sess.compile(m.train, m.feeds)._pointers[feed_buffer]
        assert len(fake.copies("htod", feed_pointer)) == 4
        assert fake.copies("dtoh") == []       # nothing fetched: nothing comes back


def test_a_fetch_downloads_only_the_fetched_buffers(fake: FakeDriver) -> None:
    m = _model()
    with Session(m.graph, target="cuda") as sess:
        for run in range(3):
            sess.run([m.train, m.loss], m.feeds)
            assert len(fake.copies("dtoh")) == run + 1     # the loss, once per run
        assert fake.copies("dtoh", _pointer(sess, m.w)) == []


def test_a_fetched_variable_comes_back_with_the_device_bytes_once(fake: FakeDriver) -> None:
    m = _model()
    with Session(m.graph, target="cuda") as sess:
        sess.run(m.train, m.feeds)
        fake.device_array(_pointer(sess, m.w), np.float32, (4, 2))[...] = 7.5   # what the step "computed"
        np.testing.assert_array_equal(sess.run(m.w), np.full((4, 2), 7.5, "float32"))
        np.testing.assert_array_equal(sess.run(m.w), np.full((4, 2), 7.5, "float32"))
        assert len(fake.copies("dtoh", _pointer(sess, m.w))) == 1       # the host array is current now
        np.testing.assert_array_equal(sess.run(m.scale), [2.0, 2.0, 2.0])
        assert fake.copies("dtoh", _pointer(sess, m.scale)) == []       # never assigned: the host has it


def _load(sess: Session, m: SimpleNamespace, tmp_path: Any) -> None:
    sess.load_variable(m.w, np.full((4, 2), 3.0, "float32"))


def _initialize(sess: Session, m: SimpleNamespace, tmp_path: Any) -> None:
    sess.load_variable(m.w, np.full((4, 2), -1.0, "float32"))
    sess.run(m.train, m.feeds)
    with m.graph.as_default():
        sess.run(cc.global_variables_initializer())


def _restore(sess: Session, m: SimpleNamespace, tmp_path: Any) -> None:
    with m.graph.as_default():
        saver = optim.Saver({"w": m.w})
    sess.run(m.train, m.feeds)
    driver = cuda_runtime.driver_module()
    driver.device_array(_pointer(sess, m.w), np.float32, (4, 2))[...] = 5.0    # what the step "computed"
    path = saver.save(sess, str(tmp_path / "ckpt"))        # downloads w
    sess.load_variable(m.w, np.zeros((4, 2), "float32"))
    saver.restore(sess, path)


@pytest.mark.parametrize("write, expected", [(_load, 3.0), (_initialize, 1.0), (_restore, 5.0)],
                         ids=["load_variable", "initializer", "saver-restore"])
def test_host_writes_reach_the_device_before_the_next_run(fake: FakeDriver, tmp_path: Any, write: Callable,
                                                          expected: float) -> None:
    m = _model()
    seen: list[np.ndarray] = []
    with Session(m.graph, target="cuda") as sess:
        sess.run(m.train, m.feeds)
        w_pointer = _pointer(sess, m.w)
        write(sess, m, tmp_path)
        fake.on_launch = lambda name, pointers: seen.append(fake.device_array(w_pointer, np.float32, (4, 2)).copy())
        uploads = len(fake.copies("htod", w_pointer))
        sess.run(m.train, m.feeds)
        sess.run(m.train, m.feeds)
        assert len(fake.copies("htod", w_pointer)) == uploads + 1      # uploaded once, before the run
        np.testing.assert_array_equal(seen[0], np.full((4, 2), expected, "float32"))


def test_two_steps_share_the_variables(fake: FakeDriver) -> None:
    m = _model()
    with Session(m.graph, target="cuda") as sess:
        sess.run(m.train, m.feeds)
        sess.run(m.loss, m.feeds)
        assert len(fake.copies("htod", _pointer(sess, m.w))) == 1
        assert {sess.compile(f, m.feeds)._pointers[sess.compile(f, m.feeds).program.variables[m.w]]
                for f in (m.train, m.loss)} == {_pointer(sess, m.w)}


# -- CUDA graphs -------------------------------------------------------------------------------------------

def test_the_step_is_captured_after_its_first_run_and_replayed(fake: FakeDriver) -> None:
    m = _model()
    with Session(m.graph, target="cuda") as sess:
        sess.run([m.train, m.loss], m.feeds)
        exe = sess.compile([m.train, m.loss], m.feeds)
        kernels = len(exe.program.kernels)
        assert exe.captured and fake.count("cuStreamBeginCapture") == 1
        assert fake.count("cuLaunchKernel") == 2 * kernels       # run 1, then the capture
        for _ in range(3):
            sess.run([m.train, m.loss], m.feeds)
        assert fake.count("cuLaunchKernel") == 2 * kernels and fake.count("cuGraphLaunch") == 3
        assert exe.graph_launches == 3 and fake.count("cuStreamSynchronize") == 1 + 4  # the build, runs 1 to 4
        assert len([op for op in fake.executed if op[0] == "kernel"]) == 4 * kernels


def test_a_step_that_cannot_be_captured_says_why_and_launches_its_kernels(fake: FakeDriver) -> None:
    m = _model()
    fake.instantiate_failure = CUresult.CUDA_ERROR_INVALID_VALUE
    with Session(m.graph, target="cuda") as sess:
        with pytest.warns(RuntimeWarning, match="could not be captured as a CUDA graph"):
            sess.run(m.train, m.feeds)
        sess.run(m.train, m.feeds)
        exe = sess.compile(m.train, m.feeds)
        assert not exe.captured and "cuGraphInstantiate failed: CUDA_ERROR_INVALID_VALUE" in exe.capture_error
        kernels = len(exe.program.kernels)
        assert [op[0] for op in fake.executed].count("kernel") == 2 * kernels and fake.count("cuGraphLaunch") == 0


def test_a_step_with_a_branch_reads_its_predicate_and_is_not_captured(fake: FakeDriver) -> None:
    graph = cc.Graph()
    with graph.as_default():
        x = cc.placeholder("float32", (3,), name="x")
        y = cc.cond(cc.reduce_sum(x) > 0.0, lambda: cc.exp(x), lambda: cc.sin(x))
    with Session(graph, target="cuda") as sess:
        for _ in range(3):
            sess.run(y, {x: np.ones(3, "float32")})
        exe = sess.compile(y, {x: np.ones(3, "float32")})
        assert not exe.captured and fake.count("cuStreamBeginCapture") == 0 and fake.count("cuGraphLaunch") == 0
        assert fake.count("cuLaunchKernel") >= 3 * 2     # the predicate's kernel and a branch's, every run


# -- errors ------------------------------------------------------------------------------------------------

def _big_variable(graph: cc.Graph) -> tuple[Any, dict]:
    with graph.as_default():
        x = cc.placeholder("float32", (None,), name="x")
        big = cc.Variable(np.zeros(1 << 18, "float32"), name="big")
        return cc.reduce_sum(big) + cc.reduce_sum(x), x


@pytest.mark.parametrize("limit, feed_size, names", [
    (1 << 16, 4, ["variable 'big'", "1048576 bytes"]),
    (4 << 20, 1 << 21, ["Placeholder 'x'", "8388608 bytes"]),
], ids=["variable", "feed"])
def test_out_of_device_memory_names_the_buffer_and_its_size(fake: FakeDriver, limit: int, feed_size: int,
                                                             names: list[str]) -> None:
    fake.memory_limit = limit
    graph = cc.Graph()
    total, x = _big_variable(graph)
    with Session(graph, target="cuda") as sess, pytest.raises(CudaError, match="out of GPU memory") as error:
        sess.run(total, {x: np.ones(feed_size, "float32")})
    for name in names:
        assert name in str(error.value)


def test_a_jit_error_names_the_kernel_and_the_user_line(fake: FakeDriver) -> None:
    graph = cc.Graph()
    with graph.as_default():
        x = cc.placeholder("float32", (8, 8), name="x")
        y = cc.reduce_max(cc.exp(x) @ x, axis=1); line = inspect.currentframe().f_lineno  # noqa: E702
    with Session(graph, target="cuda-emulated") as emulated:
        kernels = emulated.compile(y, {x: np.ones((8, 8), "float32")}).program.kernels
    culprit = next(k for k in kernels if k.kind == "reduce")
    fake.jit_failure = culprit.name
    with Session(graph, target="cuda") as sess, pytest.raises(CudaError) as error:
        sess.run(y, {x: np.ones((8, 8), "float32")})
    message = str(error.value)
    assert "CUDA_ERROR_INVALID_PTX" in message and "Unknown symbol 'oops'" in message
    assert f"kernel {culprit.name} (reduce)" in message and f"test_cuda_runtime.py:{line}" in message
    assert all(f"kernel {k.name} " not in message for k in kernels if k is not culprit)


@pytest.mark.parametrize("failure, usable", [
    ("sync", False),            # an illegal address: the context is lost
    ("contained", False),       # Hopper's error containment: so is it
    ("launch", True),           # a launch refused: nothing ran, the session goes on
    ("launch-after-fault", False),  # a launch reporting an earlier kernel's fault
])
def test_a_failed_step_lists_its_kernels_and_says_whether_the_session_goes_on(fake: FakeDriver, failure: str,
                                                                               usable: bool) -> None:
    m = _model()
    with Session(m.graph, target="cuda") as sess:
        sess.run(m.train, m.feeds)
        kernels = sess.compile(m.train, m.feeds).program.kernels
        if failure in ("sync", "contained"):
            fake.sync_failure = (CUresult.CUDA_ERROR_ILLEGAL_ADDRESS if failure == "sync"
                                 else CUresult.CUDA_ERROR_CONTAINED)
        else:
            sess._cache.clear()      # a fresh step: launched kernel by kernel on its first run
            sess._repeats.clear()
            fake.launch_failure = ((kernels[0].name, CUresult.CUDA_ERROR_LAUNCH_OUT_OF_RESOURCES)
                                   if failure == "launch" else (kernels[2].name, CUresult.CUDA_ERROR_ILLEGAL_ADDRESS))
        with pytest.raises(CudaError) as error:
            sess.run(m.train, m.feeds)
        message = str(error.value)
        if usable:
            assert f"launching kernel {kernels[0].name}" in message and "still usable" in message
            # what the step queued before the refused launch ends before the next run reuses its buffers
            names = [name for name, _ in fake.calls]
            assert names[-1] == "cuStreamSynchronize" and "cuLaunchKernel" in names
            fake.launch_failure = None
            sess.run(m.train, m.feeds)
        else:
            assert "unusable" in message
            if failure == "launch-after-fault":   # the kernels that ran before it are the suspects
                assert "from a fault of a kernel that ran before it" in message
                assert all(f"kernel {k.name} " in message for k in kernels[:3])
                assert all(f"kernel {k.name} " not in message for k in kernels[3:])
            else:
                assert all(f"kernel {k.name} " in message for k in kernels)
            with pytest.raises(CudaError, match="lost to an earlier error"):
                sess.run(m.train, m.feeds)


def _no_package(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "cuda.bindings", None)   # the import fails as when not installed


def _no_driver(monkeypatch: pytest.MonkeyPatch) -> None:
    def missing(flags: int) -> tuple:
        raise RuntimeError('"cuda" is an NVIDIA driver library and can only be found via system search')
    driver = FakeDriver()
    driver.cuInit = missing   # type: ignore[method-assign]
    monkeypatch.setattr(cuda_runtime, "driver_module", lambda: driver)


def _no_device(monkeypatch: pytest.MonkeyPatch) -> None:
    driver = FakeDriver(init_status=CUresult.CUDA_ERROR_NO_DEVICE)
    monkeypatch.setattr(cuda_runtime, "driver_module", lambda: driver)


def _no_device_counted(monkeypatch: pytest.MonkeyPatch) -> None:
    driver = FakeDriver(device_count=0)
    monkeypatch.setattr(cuda_runtime, "driver_module", lambda: driver)


@pytest.mark.parametrize("setup, message", [
    (_no_package, 'needs NVIDIA\'s cuda-bindings package, which is not installed: pip install -e ".[cuda]"'),
    (_no_driver, "needs the NVIDIA driver (libcuda.so), which was not found"),
    (_no_device, "finds no CUDA device"),
    (_no_device_counted, "finds no CUDA device"),
], ids=["package", "driver", "device", "device-count"])
def test_what_is_missing_is_said_at_construction(monkeypatch: pytest.MonkeyPatch, setup: Callable,
                                                  message: str) -> None:
    setup(monkeypatch)
    assert not cuda_runtime.gpu_available()
    with pytest.raises(CudaError) as error:
        Session(cc.Graph(), target="cuda")
    assert message in str(error.value)


@pytest.mark.parametrize("driver_version, capability, arch, version", [
    (12040, (8, 6), "sm_86", ".version 8.4"),
    (12060, (9, 0), "sm_90", ".version 8.5"),
    (13000, (8, 0), "sm_80", ".version 9.0"),
    (11040, (8, 0), "sm_80", ".version 7.4"),
])
def test_the_ptx_is_for_the_device_and_the_driver(fake: FakeDriver, graph: cc.Graph, driver_version: int,
                                                  capability: tuple[int, int], arch: str, version: str) -> None:
    fake.driver_version, fake.capability = driver_version, capability
    x = cc.placeholder("float32", (3,), name="x")
    with Session(x.graph, target="cuda") as sess:
        sess.run(cc.exp(x), {x: np.ones(3, "float32")})
        assert sess.arch == arch
        assert f"{version}\n.target {arch}" in sess.compile(cc.exp(x), {x: np.ones(3, "float32")}).dump("ptx")
        assert f"{version}\n.target {arch}" in fake.loaded_ptx


def test_a_driver_too_old_for_the_architecture_is_an_error(fake: FakeDriver, graph: cc.Graph) -> None:
    fake.driver_version, fake.capability = 11070, (9, 0)    # sm_90 needs PTX ISA 7.8 (CUDA 11.8)
    x = cc.placeholder("float32", (3,), name="x")
    with Session(x.graph, target="cuda") as sess, pytest.raises(CudaError, match="sm_90 needs PTX ISA 7.8"):
        sess.run(cc.exp(x), {x: np.ones(3, "float32")})


def test_a_gpu_whose_architecture_llvm_does_not_know_is_an_error(fake: FakeDriver, graph: cc.Graph) -> None:
    fake.capability = (8, 1)
    with pytest.raises(CudaError, match=r"'sm_81' is not one this LLVM .* arch='sm_90'"):
        Session(graph, target="cuda")


# -- threads and cleanup --------------------------------------------------------------------------------

def test_two_threads_share_a_session(fake: FakeDriver) -> None:
    m = _model()
    errors: list[BaseException] = []
    with Session(m.graph, target="cuda") as sess:
        sess.run(m.train, m.feeds)

        def train() -> None:
            try:
                for _ in range(20):
                    sess.run(m.train, m.feeds)
                    sess.load_variable(m.w, np.ones((4, 2), "float32"))
            except BaseException as exc:  # reported below
                errors.append(exc)
        threads = [threading.Thread(target=train) for _ in range(2)]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
        assert errors == [] and sess.compile(m.train, m.feeds).graph_launches == 40


def test_close_frees_everything(fake: FakeDriver) -> None:
    m = _model()
    sess = Session(m.graph, target="cuda")
    sess.run([m.train, m.loss], m.feeds)
    sess.run(m.w)
    exe = sess.compile([m.train, m.loss], m.feeds)
    sess.close()
    assert fake.device_memory == {} and fake.pinned_memory == {}
    assert all(count == 0 for count in fake.live.values()), fake.live
    with pytest.raises(RuntimeError, match="Session is closed"):
        exe.run(m.feeds)


# -- the calls, through NVIDIA's bindings ---------------------------------------------------------------

def test_the_driver_calls_convert_through_cuda_bindings(fake: FakeDriver) -> None:
    """Every call the runtime made to the fake, replayed through ``cuda.bindings.driver`` with
    null handles, zero addresses and sizes and empty data (harmless with or without a GPU): the
    bindings accept each argument's type (a TypeError here is a call the real driver would never see)."""
    from cuda.bindings import driver as real
    m = _model()
    with Session(m.graph, target="cuda") as sess:
        for _ in range(2):
            sess.run([m.train, m.loss], m.feeds)
        sess.run(m.w)
        with pytest.raises(CudaError):
            fake.sync_failure = CUresult.CUDA_ERROR_ILLEGAL_ADDRESS
            sess.run([m.train, m.loss], m.feeds)
    null = {"stream": real.CUstream(0), "module": real.CUmodule(), "function": real.CUfunction(),
            "graph": real.CUgraph(), "graph_exec": real.CUgraphExec(), "context": real.CUcontext(),
            "device": real.CUdevice(0)}

    def harmless(value: Any) -> Any:
        if isinstance(value, Handle):
            return null[value.kind]
        if isinstance(value, enum.IntEnum):
            return getattr(getattr(real, type(value).__name__), value.name)
        if isinstance(value, bytes):
            return b"\0"
        if isinstance(value, (list, tuple)):
            return type(value)(harmless(item) for item in value)
        if isinstance(value, int):
            return 0
        return value

    checked = set()
    for name, args in fake.calls:
        if name in ("cuDevicePrimaryCtxRetain", "cuStreamCreate", "cuStreamDestroy"):
            continue   # these would act on a real driver's resources; their arguments are a device, an integer
        try:
            getattr(real, name)(*[harmless(a) for a in args])
        except (TypeError, ValueError, OverflowError) as exc:
            pytest.fail(f"{name}{args!r}: {exc}")
        except RuntimeError:   # no driver on this machine: the arguments were converted first
            pass
        checked.add(name)
    assert {"cuModuleLoadDataEx", "cuLaunchKernel", "cuMemcpyHtoDAsync", "cuMemcpyDtoHAsync", "cuGraphLaunch",
            "cuStreamBeginCapture", "cuGraphInstantiate", "cuMemAlloc"} <= checked

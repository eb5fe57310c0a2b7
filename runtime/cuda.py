"""Running a compiled step's PTX on an NVIDIA GPU through the CUDA driver API (``libcuda``).

``CudaExecutable`` loads the step's PTX once, keeps one device buffer per program buffer, and per
run copies feeds and variables in, launches the kernels as the GPU schedule says
(``compiler.codegen.nvptx.schedule_program``) in the step's order (a branch or loop reads its
predicate back to the host to choose what to launch next), and copies fetches and variables back. Variables stay owned by the session's host
arrays; keeping them resident on the device is a later step.
"""
from __future__ import annotations

import ctypes
import functools
from typing import Callable, Sequence

import numpy as np

from compiler.codegen.kernel_body import kernel_buffers
from compiler.codegen.nvptx import DEFAULT_ARCH, DEFAULT_LIMITS, GpuLimits, emit_ptx, schedule_program
from compiler.graph import Operation, Tensor
from compiler.kernel_ir import Branch, Loop, Program, Step
from compiler.pipeline import CompiledStep

from .executable import host_array, read_fetch


class CudaError(RuntimeError):
    """A CUDA driver call failed (or no GPU is present)."""


@functools.lru_cache(maxsize=1)
def _driver() -> ctypes.CDLL:
    try:
        driver = ctypes.CDLL("libcuda.so.1")
    except OSError as exc:
        raise CudaError("no CUDA driver (libcuda.so.1) on this machine") from exc
    _check(driver, driver.cuInit(0), "cuInit")
    return driver


def _check(driver: ctypes.CDLL, status: int, what: str) -> None:
    if status != 0:
        message = ctypes.c_char_p()
        driver.cuGetErrorString(status, ctypes.byref(message))
        text = message.value.decode() if message.value else f"error {status}"
        raise CudaError(f"{what}: {text}")


def gpu_available() -> bool:
    """Whether a CUDA driver and at least one device are present."""
    try:
        driver = _driver()
    except CudaError:
        return False
    count = ctypes.c_int()
    return driver.cuDeviceGetCount(ctypes.byref(count)) == 0 and count.value > 0


@functools.lru_cache(maxsize=1)
def _context() -> tuple[ctypes.CDLL, ctypes.c_void_p]:
    driver = _driver()
    device = ctypes.c_int()
    context = ctypes.c_void_p()
    _check(driver, driver.cuDeviceGet(ctypes.byref(device), 0), "cuDeviceGet")
    _check(driver, driver.cuDevicePrimaryCtxRetain(ctypes.byref(context), device), "cuDevicePrimaryCtxRetain")
    return driver, context


class CudaExecutable:
    """One compiled step run on the GPU: the same kernel IR as the CPU, lowered to PTX."""

    def __init__(self, step: CompiledStep, fetches: Sequence[Tensor | Operation],
                 variable_arrays: dict[Tensor, np.ndarray], arch: str = DEFAULT_ARCH,
                 limits: GpuLimits = DEFAULT_LIMITS) -> None:
        self.step = step
        self.fetches = list(fetches)
        program: Program = step.program
        driver, context = _context()
        self._driver = driver
        _check(driver, driver.cuCtxSetCurrent(context), "cuCtxSetCurrent")
        ptx = emit_ptx(program, arch, limits)
        self._module = ctypes.c_void_p()
        _check(driver, driver.cuModuleLoadData(ctypes.byref(self._module), ptx.encode() + b"\0"),
               "cuModuleLoadData")
        self._functions = []
        for kernel in program.kernels:
            function = ctypes.c_void_p()
            _check(driver, driver.cuModuleGetFunction(ctypes.byref(function), self._module,
                                                      kernel.name.encode()), "cuModuleGetFunction")
            self._functions.append(function)
        self._host: list[np.ndarray] = []
        self._device: list[ctypes.c_uint64] = []
        if any(buffer.role == "stack" for buffer in program.buffers):
            raise CudaError("a loop without maximum_iterations whose gradient is taken grows its stacks at run "
                            "time, which target='cuda' does not do yet: give the while_loop a maximum_iterations")
        for buffer in program.buffers:
            host = host_array(program, buffer, variable_arrays)
            pointer = ctypes.c_uint64()
            _check(driver, driver.cuMemAlloc_v2(ctypes.byref(pointer), ctypes.c_size_t(max(host.nbytes, 1))),
                   "cuMemAlloc")
            self._host.append(host)
            self._device.append(pointer)
        for index, buffer in enumerate(program.buffers):
            if buffer.role == "constant":
                self._upload(index)
        self._launches = []
        for kernel, scheduled, function in zip(program.kernels, schedule_program(program, limits), self._functions):
            arguments = [ctypes.c_uint64(self._device[b].value) for b in kernel_buffers(kernel)]
            pointers = (ctypes.c_void_p * len(arguments))(*[ctypes.addressof(a) for a in arguments])
            self._launches.append((function, scheduled.launch, arguments, pointers))

    def _upload(self, index: int, array: np.ndarray | None = None) -> None:
        host = self._host[index] if array is None else array
        if host.nbytes:
            _check(self._driver, self._driver.cuMemcpyHtoD_v2(
                self._device[index], host.ctypes.data_as(ctypes.c_void_p), ctypes.c_size_t(host.nbytes)),
                "cuMemcpyHtoD")

    def _download(self, index: int) -> None:
        host = self._host[index]
        if host.nbytes:
            _check(self._driver, self._driver.cuMemcpyDtoH_v2(
                host.ctypes.data_as(ctypes.c_void_p), self._device[index], ctypes.c_size_t(host.nbytes)),
                "cuMemcpyDtoH")

    def run(self, feeds: dict[Tensor, np.ndarray]) -> list[np.ndarray | None]:
        program = self.step.program
        driver = self._driver
        for tensor, index in program.feeds.items():
            self._upload(index, np.array(feeds[tensor], dtype=program.buffers[index].dtype, order="C"))
        variable_buffers = sorted(program.variables.values())
        for index in variable_buffers:
            self._upload(index)
        def launch_kernel(position: int) -> None:
            function, launch, _, pointers = self._launches[position]
            _check(driver, driver.cuLaunchKernel(function, launch.grid, 1, 1, launch.block, 1, 1, 0, None,
                                                 pointers, None), "cuLaunchKernel")
        run_schedule(program.steps(), launch_kernel, self._predicate)
        _check(driver, driver.cuCtxSynchronize(), "cuCtxSynchronize")
        fetched = {spec.buffer for spec in program.fetches if spec is not None}
        for index in sorted(fetched | set(variable_buffers)):
            self._download(index)
        return [None if spec is None else read_fetch(self._host, spec) for spec in program.fetches]

    def _predicate(self, index: int) -> bool:
        """The bool scalar in device buffer ``index``, read back (after the kernels before it)."""
        self._download(index)
        return bool(self._host[index].reshape(-1)[0])

    def dump(self, stage: str) -> str:
        return self.step.dump(stage)


def run_schedule(steps: Sequence[Step], launch: Callable[[int], None], holds: Callable[[int], bool]) -> None:
    """Walk a step's schedule from the host: ``launch(position)`` for each kernel; for a branch or a
    loop, read its predicate back with ``holds(buffer)`` and go on accordingly. (The native CPU and
    cuda-emulated steps do the same in generated code: ``codegen.common.emit_schedule``.)"""
    for step in steps:
        if isinstance(step, Branch):
            run_schedule(step.taken if holds(step.predicate) else step.otherwise, launch, holds)
        elif isinstance(step, Loop):
            while True:
                run_schedule(step.condition, launch, holds)
                if not holds(step.predicate):
                    break
                run_schedule(step.body, launch, holds)
        else:
            launch(step)

    def __del__(self) -> None:
        try:
            for pointer in self._device:
                self._driver.cuMemFree_v2(pointer)
            self._driver.cuModuleUnload(self._module)
        except Exception:  # interpreter shutdown: the driver may already be gone
            pass

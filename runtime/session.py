"""``Session``: runs fetches of a graph, owning the variables' memory and the compiled steps."""
from __future__ import annotations

import contextlib
import dataclasses
import collections
import collections.abc
import os
import re
import sys
import threading
import weakref
from dataclasses import dataclass
from typing import Any, Callable, Iterator, Sequence

import numpy as np

from compiler import progress
from compiler.errors import CompileError, DTypeError, FeedError, GraphMismatchError, NumericsError, ShapeError
from compiler.debugging import PRINTS
from compiler.graph import Graph, Operation, Tensor, default_session, get_default_graph, operations_reached
from compiler.ops.numerics import required_checks
from compiler.ops.sources import Variable
from compiler.ops.state import initialized_variable_names
from compiler.passes.specialize import needed_operations, specialize
from compiler.summary import encode_summary, is_summary
from compiler.codegen.common import LLVM_LOCK
from compiler.codegen.nvptx import DEFAULT_ARCH, DEFAULT_LIMITS, GpuLimits, check_arch
from compiler.pipeline import compile_step, target_gpu, write_requested_dumps

from . import reference
from .executable import Executable, ReadWriteLock, check_output
from .feeds import check_feeds, convert_losslessly, fed_intermediates

TARGETS = ("cpu", "reference", "cuda", "cuda-emulated")
STEPS_KEEPING_BUFFERS = 8   # the compiled steps, most recently run, that keep their run buffers

# -- steps split at a host call ---------------------------------------------------------------
# An Operation with this attribute runs as more than one compiled step with host work between
# them (optim.DistributedOptimizer: gradient phase, allreduce, apply phase). ``run`` hands a fetch
# set holding it to ``op.split_runner(session, leaves, feed_dict, outputs)``, which returns the
# leaves' values. (An attribute of the op, so that it lives and dies with the graph.)
SPLIT_RUNNER = "split_runner"
SPLIT_INPUT = "split_input"     # on a placeholder a split step feeds itself: the name of its owner


def _flatten(structure: Any, leaves: list[Any], graph: Graph) -> Callable[[list[Any]], Any]:
    """Collect the leaves of nested lists/tuples/dicts; return a function that rebuilds it. A
    string names a tensor (``"op_name:0"``) or an operation of ``graph``, as in TF1."""
    if isinstance(structure, str):
        structure = graph.get_tensor_by_name(structure) if ":" in structure else \
            graph.get_operation_by_name(structure)
    if isinstance(structure, (Tensor, Operation)):
        position = len(leaves)
        leaves.append(structure)
        return lambda values: values[position]
    if isinstance(structure, collections.abc.Mapping):
        builders = {key: _flatten(value, leaves, graph) for key, value in structure.items()}
        kind = type(structure)
        if isinstance(structure, collections.defaultdict):   # its constructor takes the factory first
            factory = structure.default_factory
            return lambda values: kind(factory, ((key, build(values)) for key, build in builders.items()))
        if not isinstance(structure, dict):   # any Mapping, as TF1: rebuilt as its type where it can be
            def rebuild(values: list[Any]) -> Any:
                pairs = {key: build(values) for key, build in builders.items()}
                try:
                    return kind(pairs)
                except TypeError:
                    return pairs
            return rebuild
        return lambda values: kind((key, build(values)) for key, build in builders.items())
    if isinstance(structure, (list, tuple)):
        builders_list = [_flatten(item, leaves, graph) for item in structure]
        if isinstance(structure, tuple) and hasattr(structure, "_fields"):
            kind_nt = type(structure)
            return lambda values: kind_nt(*(build(values) for build in builders_list))
        kind_seq = type(structure)
        return lambda values: kind_seq(build(values) for build in builders_list)
    hint = ("; gradients() gives None for a tensor the loss does not depend on (pass "
            "unconnected_gradients='zero' for zeros)") if structure is None else ""
    raise TypeError(f"cannot fetch {structure!r}: fetches must be Tensors, Operations, their names, or "
                    f"lists/tuples/dicts (mappings) of them{hint}")


def _outputs_like(fetches: Any, out: Any, count: int) -> list[Any]:
    """The arrays of ``out`` in the order ``_flatten`` visits ``fetches`` (None where absent)."""
    targets: list[Any] = []

    def walk(structure: Any, mirror: Any) -> None:
        if isinstance(structure, (Tensor, Operation, str)):
            targets.append(mirror)
        elif isinstance(structure, collections.abc.Mapping):
            for key, value in structure.items():
                walk(value, None if mirror is None else mirror.get(key))
        else:
            mirror_items = list(mirror) if mirror is not None else [None] * len(structure)
            if len(mirror_items) != len(structure):
                raise ValueError("out= must have the same structure as fetches")
            for item, mirror_item in zip(structure, mirror_items):
                walk(item, mirror_item)

    walk(fetches, out)
    walk = None   # type: ignore[assignment]  # a recursive closure is a cycle: it would keep the arrays alive
    assert len(targets) == count
    return targets


_PHASES = threading.local()   # how deep this thread is inside a split step's own runs


@contextlib.contextmanager
def running_phase() -> Iterator[None]:
    """Around the runs a split step makes of its phases: the step they reach is not split again."""
    depth = getattr(_PHASES, "depth", 0)
    _PHASES.depth = depth + 1
    try:
        yield
    finally:
        _PHASES.depth = depth


def _split_runner(needed: list[Operation]) -> Callable[..., list[Any]] | None:
    """The runner of the one split step the fetches reach (``SPLIT_RUNNER``: fetched, or run
    before a fetch by a control dependency), or None. A phase input (``SPLIT_INPUT``) reached
    without its step is an error: nothing would feed it."""
    if getattr(_PHASES, "depth", 0):
        return None
    runners = {id(op): getattr(op, SPLIT_RUNNER) for op in needed if getattr(op, SPLIT_RUNNER, None) is not None}
    if len(runners) > 1:
        raise ValueError("cannot run two distributed training ops in one run(); fetch one of them")
    if not runners:
        for op in needed:
            owner = getattr(op, SPLIT_INPUT, None)
            if owner is not None:
                raise ValueError(f"these fetches read {op.name!r}, which {owner} fills in the run of its training "
                                 "op (the op its minimize or apply_gradients returned) between the gradient and "
                                 "the update phases; fetch them together with that op")
    return next(iter(runners.values()), None)


@dataclass
class _Plan:
    """What one fetch set needs, kept per session so each ``run`` skips the graph walks."""

    needed: list[Operation]
    placeholders: list[Tensor]
    initializes: tuple[Operation, ...]   # the initializers among the fetches (read when they run)
    compute: list[Any]
    computes_anything: bool
    leaves: list[Any]          # keeps the fetched objects (and so the ids in the key) alive
    summaries: tuple[int, ...]  # the positions of summary fetches, given as serialized ``Summary`` bytes
    split: Callable[..., list[Any]] | None = None  # the runner of a split step (SPLIT_RUNNER)
    prints: tuple[Operation, ...] = ()   # the cc.Print ops the step computes, whose data it fetches too
    printed: tuple[Tensor, ...] = ()     # their data, in order: computed after the fetches


def _check_fetchable(leaves: list[Any]) -> None:
    """A tensor or operation built inside a loop body or a cond branch exists only while that
    function runs (once per iteration, or not at all): it cannot be fetched from outside."""
    for leaf in leaves:
        op = leaf.op if isinstance(leaf, Tensor) else leaf
        region = getattr(op, "region", None) or getattr(op, "traced_in", None)
        if region is not None:
            raise ValueError(f"cannot fetch {leaf.name!r} (built at {op.location}): it is computed inside a "
                             f"cond branch or a loop body (the function defined at {region.location}), which may "
                             "run many times or not at all; return it from that function instead")


def _repeat_key(fetches: Any, feed_dict: Any) -> Any:
    """The key of a run that ``_RepeatRun`` may redo: one tensor or operation, or a flat list or
    tuple of them, fed nothing or a dict. Ids only: an entry under the key keeps those objects
    alive, so a live object with one of its ids is that very object. None: not a candidate."""
    kind = type(fetches)
    if kind is Tensor or kind is Operation:
        fetch_key: Any = id(fetches)
    elif kind is list or kind is tuple:
        # Only tensors and operations: a nested list or a name string is not kept alive by the
        # entry, so its id may come back as another object's (and a hit would return flat values).
        if not all(type(leaf) is Tensor or type(leaf) is Operation for leaf in fetches):
            return None
        fetch_key = (kind, *map(id, fetches))
    else:
        return None
    if feed_dict is None:
        return fetch_key, None
    if type(feed_dict) is not dict:
        return None
    return fetch_key, tuple(map(id, feed_dict))


def _is_initializer(leaf: Any) -> bool:
    """A fetched variable initializer (``run`` applies it on the host before the step)."""
    return isinstance(leaf, Operation) and leaf.type == "InitVariables"


_NOT_REPEATED = object()   # what a ``_RepeatRun`` returns when the feeds differ from the first run's


@dataclass(frozen=True)
class _RepeatRun:
    """A run done before whose every check holds again when its feeds are numpy arrays of the same
    shapes and dtypes (the key holds the same fetches and feed keys): the loop of a training
    script. It runs the same executable straight away; any other feed takes the full path."""

    executable: Any
    leaves: list[Any]                                   # these two keep the key's ids alive
    feed_keys: tuple[Tensor, ...]
    feed_layout: tuple[tuple[tuple[int, ...], np.dtype], ...]
    kind: type | None                                   # list or tuple; None for a single fetch

    def __call__(self, feed_dict: dict | None, out: Any) -> Any:
        if feed_dict is not None:
            for value, (shape, dtype) in zip(feed_dict.values(), self.feed_layout):
                if type(value) is not np.ndarray or value.shape != shape or value.dtype is not dtype:
                    return _NOT_REPEATED
        wanted = None
        if out is not None:   # ``out=`` mirrors the fetches: an array, or a list or tuple of them
            if self.kind is None:
                wanted = [out]
            elif (type(out) is list or type(out) is tuple) and len(out) == len(self.leaves):
                wanted = list(out)
            else:
                return _NOT_REPEATED
        values = self.executable.run_checked(feed_dict or {}, wanted)
        if self.kind is None:
            return values[0]
        return values if self.kind is list else tuple(values)


class Session:
    """Runs parts of a graph. ``target="cpu"`` compiles each fetch set to one native step.

    >>> import numpy as np, compiler as cc
    >>> x = cc.placeholder("float32", shape=(None,))
    >>> with Session() as sess:
    ...     sess.run(cc.exp(x), feed_dict={x: np.zeros(2, "float32")})
    array([1., 1.], dtype=float32)
    """

    def __init__(self, graph: Graph | None = None, target: str = "cpu", arch: str | None = None,
                 gpu_limits: GpuLimits | None = None, check_numerics: bool = False, racecheck: bool | None = None,
                 memcheck: bool | None = None, config: Any = None) -> None:
        """``target``: "cpu" (LLVM, the default), "reference" (the numpy oracle), "cuda" (an NVIDIA
        GPU, through NVIDIA's cuda-bindings: ``pip install -e ".[cuda]"``; variables stay on the
        device between runs, see ``runtime.cuda``), or "cuda-emulated": the kernels ``target="cuda"``
        would run for ``arch``, scheduled for the GPU and run block by block on the CPU, so GPU
        schedules are tested without a GPU (``dump("ptx")`` is the PTX for ``arch``). ``arch``
        defaults to the GPU's own on "cuda" and to "sm_80" on "cuda-emulated"; "cuda" raises
        ``runtime.cuda.CudaError`` here when the package, the driver or a device is missing.
        ``gpu_limits`` overrides the GPU schedule's block and grid sizes
        (``compiler.codegen.nvptx.GpuLimits``); tests use small ones.
        ``check_numerics``: every float value a step computes is checked for NaN and Inf inside the
        compiled step (as ``cc.add_check_numerics_ops`` would); the first one found raises
        ``NumericsError`` naming the op, its line and, in the backward pass, the forward op whose
        gradient it is, and the run assigns no variable. Not on ``target="cuda"`` yet.
        ``racecheck`` (``target="cuda-emulated"`` only): every shared-memory access of the GPU
        kernels is checked against the other threads of its block since the last barrier, as
        ``compute-sanitizer --tool racecheck`` does on a GPU, and every access to a kernel's output
        against the other threads of its launch; the first race found raises
        ``RaceError`` naming the kernel, its ops and lines, the shared array and the threads. It
        runs the kernels several times slower: a tool for tests and for a schedule being written.
        ``memcheck`` (``target="cuda-emulated"`` only): every access of the GPU kernels to a buffer
        or a shared array is checked against its bounds (``compute-sanitizer --tool memcheck``); one
        outside is dropped and raises ``OutOfBoundsError`` after its kernel. Unset, each follows the
        environment: ``GRAPHGRAD_RACECHECK=1`` and ``GRAPHGRAD_MEMCHECK=1`` check every
        cuda-emulated session of the process (as running it under compute-sanitizer would).
        ``config`` (TF1's ``cc.ConfigProto``) is accepted and kept as ``self.config``: its options
        (device placement, GPU memory growth, thread pools) have no counterpart here, where the
        target places every op and ``GRAPHGRAD_THREADS`` sizes the one worker pool."""
        if isinstance(graph, str):
            raise TypeError(f"Session's first argument is the graph, got the string {graph!r}; give the target "
                            f"by name: Session(target={graph!r})")
        if graph is not None and not isinstance(graph, Graph):
            raise TypeError(f"Session's first argument is the graph (a cc.Graph), got {type(graph).__name__}")
        if target not in TARGETS:
            raise ValueError(f"unknown target {target!r}; targets are {', '.join(TARGETS)}")
        if arch is not None:
            check_arch(arch)
        if gpu_limits is not None and not isinstance(gpu_limits, GpuLimits):
            raise TypeError(f"gpu_limits must be a compiler.codegen.nvptx.GpuLimits, not {type(gpu_limits).__name__}")
        if check_numerics and target == "cuda":
            raise ValueError("check_numerics=True is not supported on target='cuda' yet; use 'cuda-emulated' "
                             "or 'cpu' to find the op")
        for name, asked in (("racecheck", racecheck), ("memcheck", memcheck)):
            if asked and target != "cuda-emulated":
                raise ValueError(f"{name}=True needs target='cuda-emulated' (the GPU kernels run on the CPU, "
                                 f"checked), not {target!r}")
        if racecheck is None:
            racecheck = target == "cuda-emulated" and os.environ.get("GRAPHGRAD_RACECHECK", "") not in ("", "0")
        if memcheck is None:
            memcheck = target == "cuda-emulated" and os.environ.get("GRAPHGRAD_MEMCHECK", "") not in ("", "0")
        self.graph = graph or get_default_graph()
        self.config = config
        self.target = target
        self.racecheck = bool(racecheck)
        self.memcheck = bool(memcheck)
        self.check_numerics = bool(check_numerics)
        self.gpu_limits = gpu_limits or DEFAULT_LIMITS
        self._variables: dict[Tensor, np.ndarray] = {}
        # target="cuda": the variables' device buffers, shared by the session's compiled steps.
        self._device_variables: Any = None
        if target == "cuda":
            from .cuda import CudaError, DeviceVariables, open_device
            device = open_device()
            if arch is None:
                try:
                    arch = check_arch(device.arch)
                except ValueError as error:
                    raise CudaError(f"{error}, and it is this GPU's ({device.name}): pass an older architecture the "
                                    "GPU also runs, such as arch='sm_90', or update llvmlite") from None
            self._device_variables = DeviceVariables(device, self._variable_array)
        self.arch = arch or DEFAULT_ARCH
        # Runs that assign variables hold it alone, runs that only read them share it.
        self._variable_lock = ReadWriteLock()
        self._lock = threading.RLock()  # the variables' arrays and the compiled steps are made once
        self._cache: dict[Any, Executable] = {}
        # The steps run last, which keep their run buffers; older ones let them go (a step
        # compiled for each of many batch sizes would otherwise hold the memory of all of them).
        self._recent: collections.OrderedDict[int, Executable] = collections.OrderedDict()
        self._recent_lock = threading.Lock()
        self._print_counts: "weakref.WeakKeyDictionary[Operation, int]" = weakref.WeakKeyDictionary()
        self._plans: dict[tuple[int, ...], _Plan] = {}
        self._repeats: dict[Any, _RepeatRun] = {}   # by ``_repeat_key``
        self._default_scopes: list[Any] = []        # one per ``with`` block this session is the default in
        self._closed = False

    # -- context manager -----------------------------------------------------------------------
    def __enter__(self) -> "Session":
        # The default session inside the block, and its graph the default graph, as TF1's:
        # x.eval() and op.run() run in it, and ops built in the block go to its graph.
        scopes = contextlib.ExitStack()
        scopes.enter_context(self.graph.as_default())
        scopes.enter_context(default_session(self))
        self._default_scopes.append(scopes)
        return self

    def __exit__(self, *exc: Any) -> None:
        try:
            if self._default_scopes:
                self._default_scopes.pop().close()
        finally:
            self.close()

    def as_default(self) -> Any:
        """``with sess.as_default():`` makes this the default session in the block (for
        ``Tensor.eval`` and ``Operation.run``) without closing it at the end, as TF1's."""
        return default_session(self)

    def close(self) -> None:
        """Release compiled steps and variable memory; the session cannot run afterwards."""
        with self._lock:   # after a compile in flight, which then finds the session closed
            if self._device_variables is not None and not self._closed:
                with self._device_variables.lock:
                    for executable in self._cache.values():
                        executable.release()  # type: ignore[attr-defined]
                    self._device_variables.release()
            for executable in self._cache.values():
                executable.closed = True   # a step from sess.compile refuses to run from now on
            self._cache.clear()
            self._plans.clear()
            self._repeats.clear()
            self._variables.clear()
            self._closed = True

    # -- variables -----------------------------------------------------------------------------
    def _variable_array(self, variable: Tensor) -> np.ndarray:
        array = self._variables.get(variable)
        if array is None:
            with self._lock:
                array = self._variables.get(variable)
                if array is None:
                    if self._closed:   # a run that raced close(): not its initial value, silently
                        raise RuntimeError("this Session is closed")
                    array = np.array(variable.initial_value, copy=True)  # type: ignore[attr-defined]
                    self._variables[variable] = array
        return array

    def _initialize(self, names: frozenset[str]) -> None:
        """Reset the variables named ``names`` that this session holds (the others get their
        initial values when first used)."""
        with self._writing():
            reset = [variable for variable in self._variables if variable.op.name in names]
            for variable in reset:
                np.copyto(self._variables[variable], variable.initial_value)  # type: ignore[attr-defined]
            if self._device_variables is not None and reset:
                self._device_variables.host_changed(reset)

    @contextlib.contextmanager
    def _writing(self) -> Iterator[None]:
        """Hold the variables alone: no compiled step runs meanwhile."""
        self._variable_lock.acquire(True)
        try:
            if self._device_variables is None:
                yield
            else:  # runs on the GPU hold this lock instead
                with self._device_variables.lock:
                    yield
        finally:
            self._variable_lock.release(True)

    def load_variable(self, variable: Variable, value: Any) -> None:
        """Set ``variable`` to ``value`` in this session (TF1's ``Variable.load(value, session)``).

        The value is copied into the variable's memory, which compiled steps read and write in
        place, so the next ``run`` sees it on every target. ``value`` must have the variable's
        shape and a dtype that converts to the variable's without loss; Python numbers and lists
        take the variable's dtype.

        >>> import numpy as np, compiler as cc
        >>> v = cc.Variable(np.zeros(2, "float32"), name="v")
        >>> with Session() as sess:
        ...     sess.load_variable(v, [1.0, 2.0])
        ...     sess.run(v)
        array([1., 2.], dtype=float32)
        """
        self.load_variables([(variable, value)])

    def load_variables(self, pairs: Sequence[tuple[Variable, Any]]) -> None:
        """``load_variable`` for each ``(variable, value)`` pair, all at once: every value is checked
        first, then all are copied while no step runs, so a step run from another thread sees
        either none of them or all (``Saver.restore`` loads a checkpoint this way).

        >>> import numpy as np, compiler as cc
        >>> a, b = cc.Variable(np.zeros(2, "float32")), cc.Variable(np.zeros(2, "float32"))
        >>> with Session() as sess:
        ...     sess.load_variables([(a, [1.0, 2.0]), (b, [3.0, 4.0])])
        ...     sess.run([a, b])
        [array([1., 2.], dtype=float32), array([3., 4.], dtype=float32)]
        """
        checked = []
        for variable, value in pairs:
            array = self._loadable(variable, value)
            checked.append((self._variable_array(variable), array))
        with self._writing():
            for host, array in checked:
                np.copyto(host, array, casting="unsafe")
            if self._device_variables is not None:
                self._device_variables.host_changed([variable for variable, _ in pairs])

    def _loadable(self, variable: Variable, value: Any) -> np.ndarray:
        """``value`` converted for ``variable``, or the error ``load_variable`` raises."""
        if self._closed:
            raise RuntimeError("this Session is closed")
        if not isinstance(variable, Variable):
            raise TypeError(f"load_variable needs a Variable, got {variable!r}")
        if variable.graph is not self.graph:
            raise GraphMismatchError(f"cannot load {variable.op.name!r}: it belongs to another graph "
                                     "than this session's")
        target = variable.dtype
        try:
            array = convert_losslessly(value, target)
        except (ValueError, TypeError) as exc:  # ragged nested lists, objects that are not numbers
            raise DTypeError(f"cannot load this {type(value).__name__} into the {target.name} variable "
                             f"{variable.op.name!r}: it is not an array of numbers ({exc})") from None
        if array is None:
            raise DTypeError(f"cannot load {np.asarray(value).dtype.name} data into the {target.name} variable "
                             f"{variable.op.name!r} without losing information; convert it first")
        if array.shape != variable.shape:
            raise ShapeError(f"cannot load a value of shape {array.shape} into variable "
                             f"{variable.op.name!r} of shape {variable.shape}")
        return array

    # -- running -------------------------------------------------------------------------------
    def _run_control_inputs_of(self, initializers: Sequence[Operation], others: Sequence[Any], feed_dict: Any) -> None:
        """Run what initializers built under ``control_dependencies`` wait for, before they are
        applied on the host (as TF1 runs an op's control inputs first). What the run's other
        fetches reach runs in the step as before (a group holding the initializer); so does all of
        it where running it first would apply an assignment that the step applies too."""
        before = [control for op in initializers for control in op.control_inputs]
        if not before:
            return
        reached = operations_reached([leaf if isinstance(leaf, Operation) else leaf.op for leaf in others])
        pending = [op for op in before if op not in reached]
        if not pending or any(op.opdef.kind == "state" for op in operations_reached(pending) & reached):
            return
        self.run(pending, feed_dict)

    def _prepare(self, fetches: Any, feed_dict: Any) -> tuple[list[Any], Callable, dict, _Plan]:
        if self._closed:
            raise RuntimeError("this Session is closed")
        leaves: list[Any] = []
        rebuild = _flatten(fetches, leaves, self.graph)
        for leaf in leaves:
            if leaf.graph is not self.graph:
                raise GraphMismatchError(f"cannot fetch {getattr(leaf, 'name', leaf)!r}: it belongs to "
                                         "another graph than this session's")
        fed = fed_intermediates(self.graph, feed_dict)
        key = (tuple(map(id, leaves)), tuple(sorted(map(id, fed)))) if fed else tuple(map(id, leaves))
        if getattr(_PHASES, "depth", 0):
            key = ("phase", key)     # a split step's own run of its phase: planned apart
        plan = self._plans.get(key)
        if plan is None:  # what these fetches need, worked out once per fetch set (and fed tensors)
            _check_fetchable(leaves)
            roots = [t.op if isinstance(t, Tensor) else t for t in leaves]
            needed = needed_operations(roots, fed)
            prints: tuple[Operation, ...] = ()
            while True:   # a Print's data run too (and may reach other Prints)
                found = tuple(op for op in needed if op in PRINTS and op.region is None)
                if found == prints:
                    break
                prints = found
                needed = needed_operations(roots + [t.op for op in prints for t in PRINTS[op].data], fed)
            compute = [leaf for leaf in leaves if not _is_initializer(leaf)]
            computes = any(op.opdef.kind not in ("host", "group") for op in needed_operations(
                [t.op if isinstance(t, Tensor) else t for t in compute], fed))
            plan = _Plan(needed, [op.outputs[0] for op in needed if op.type == "Placeholder"] + sorted(fed, key=id),
                         tuple(op for op in needed if op.type == "InitVariables"), compute, computes, leaves,
                         tuple(position for position, leaf in enumerate(leaves) if is_summary(leaf)),
                         _split_runner(needed), prints, tuple(t for op in prints for t in PRINTS[op].data))
            self._plans[key] = plan
        if plan.split is not None:  # its runner checks the feeds and feeds each phase
            return leaves, rebuild, {}, plan
        feeds = check_feeds(self.graph, feed_dict, plan.placeholders)
        return leaves, rebuild, feeds, plan

    def run(self, fetches: Any, feed_dict: Any = None, options: Any = None, run_metadata: Any = None, *,
            out: Any = None) -> Any:
        """Compute ``fetches`` (a tensor, an operation, or nested lists/tuples/dicts of them).

        Returns the same structure with numpy arrays (``None`` for operations). Assignments the
        fetches depend on are applied; variables keep their values between runs. ``options`` and
        ``run_metadata`` are TF1's and must be None (for timings per kernel, see
        ``Executable.profile``). ``out`` (an extension to TF1's signature, by keyword) mirrors
        ``fetches`` with preallocated arrays (or None) that receive the results, so a loop can
        reuse its output memory.
        """
        if options is not None or run_metadata is not None:
            raise TypeError("Session.run: options and run_metadata (TF1's RunOptions and RunMetadata) are not "
                            "supported; pass None. Per-kernel timings: sess.compile(fetches, feed_dict).profile(...)")
        repeat = self._repeats.get(_repeat_key(fetches, feed_dict))
        if repeat is not None and not self._closed:
            result = repeat(feed_dict, out)
            if result is not _NOT_REPEATED:
                return result
        leaves, rebuild, feeds, plan = self._prepare(fetches, feed_dict)
        targets = _outputs_like(fetches, out, len(leaves)) if out is not None else None
        if plan.split is not None:
            return rebuild(plan.split(self, leaves, feed_dict, targets))
        if plan.initializes:   # the collections as they are now: also variables made since the first run
            self._run_control_inputs_of(plan.initializes, [leaf for leaf in leaves if not _is_initializer(leaf)],
                                        feed_dict)
            self._initialize(frozenset().union(*map(initialized_variable_names, plan.initializes)))
        compute, needed = plan.compute, plan.needed
        if not plan.computes_anything:
            return rebuild([None] * len(leaves))
        # compute is leaves without initializers, in order: targets go by position (a tensor
        # fetched twice may have an out= array at each place).
        computed = [not _is_initializer(leaf) for leaf in leaves]
        wanted = [t for t, c in zip(targets, computed) if c] if targets is not None else None
        if plan.printed:   # computed with the fetches, written after the step
            compute = compute + list(plan.printed)
            wanted = None if wanted is None else wanted + [None] * len(plan.printed)
        if self.target == "reference":
            with self._writing():
                values = self._run_reference(compute, feeds, needed, wanted)
            if wanted is not None:
                for value, target in zip(values, wanted):
                    if target is not None and value is not None:
                        np.copyto(target, value)
                values = [t if t is not None else v for v, t in zip(values, wanted)]
        else:  # cpu, cuda-emulated, cuda (whose step holds the session's device variables alone while it runs)
            executable = self._executable(compute, feeds)
            try:
                values = executable.run_checked(feeds, wanted)
            except NumericsError as error:
                if not self.check_numerics:
                    raise   # a cc.check_numerics op of the user's: its own report
                raise self._first_non_finite(compute, feeds, error) from None
            self._remember_repeat(fetches, feed_dict, feeds, plan, executable)
        if plan.printed:
            self._print(plan, values[len(values) - len(plan.printed):])
        in_order = iter(values)
        results = [next(in_order) if c else None for c in computed]
        for position in plan.summaries:  # the step computed the numbers; only the encoding is here
            results[position] = encode_summary(leaves[position], results[position])
        return rebuild(results)

    def _print(self, plan: _Plan, values: list[Any]) -> None:
        """What the step's ``cc.Print`` ops write, to stderr, each within its ``first_n`` runs."""
        position = 0
        for op in plan.prints:
            spec = PRINTS[op]
            with self._lock:
                count = self._print_counts.get(op, 0)
                self._print_counts[op] = count + 1
            if spec.first_n is None or count < spec.first_n:
                (sys.stdout if spec.stream == "stdout" else sys.stderr).write(
                    spec.text(values[position:position + len(spec.data)]))
            position += len(spec.data)

    def _remember_repeat(self, fetches: Any, feed_dict: Any, feeds: dict[Tensor, np.ndarray], plan: _Plan,
                         executable: Any) -> None:
        """Keep a run of ``executable`` that ``_RepeatRun`` can redo: the fetches all computed (no
        initializer or summary among them), and every feed a tensor given an array used as it is; not
        with ``check_numerics``, whose failures ``run`` traces back to their op."""
        key = _repeat_key(fetches, feed_dict)
        if (key is None or self.check_numerics or plan.initializes or plan.summaries or plan.prints
                or len(plan.compute) != len(plan.leaves)
                or not all(type(leaf) is Tensor or type(leaf) is Operation for leaf in plan.leaves)):
            return
        items = list((feed_dict or {}).items())
        if not all(type(tensor) is Tensor and type(value) is np.ndarray and feeds.get(tensor) is value
                   for tensor, value in items):
            return
        self._repeats[key] = _RepeatRun(executable, plan.leaves, tuple(t for t, _ in items),
                                        tuple((v.shape, v.dtype) for _, v in items),
                                        None if type(fetches) in (Tensor, Operation) else type(fetches))

    def _first_non_finite(self, fetches: list[Any], feeds: dict, error: NumericsError) -> NumericsError:
        """The op that first made a NaN or Inf, found by running the failed step again op by op
        (``reference.evaluate``, on the variables' unchanged values): a compiled kernel checks only
        its own output, and the op at fault may be fused into it (a gradient into the optimizer's
        update). ``error`` itself when the op-by-op run finds nothing (other rounding)."""
        operations = needed_operations([t.op if isinstance(t, Tensor) else t for t in fetches], feeds)
        variables = {op.outputs[0]: self._variable_array(op.outputs[0]).copy()
                     for op in operations if op.type == "Variable"}
        try:
            reference.evaluate(fetches, feeds, variables, check_numerics=True)
        except NumericsError as precise:
            kernel = re.search(r"\(kernel (\w+)\)", str(error))
            where = f" (the compiled step stopped in kernel {kernel.group(1)})" if kernel else ""
            return NumericsError(f"{precise}{where}; the step stopped before assigning any variable")
        except Exception:   # noqa: BLE001 - the compiled step's own report stands
            return error
        return error

    def _run_reference(self, fetches: list[Any], feeds: dict, needed: list[Operation],
                       targets: list[Any] | None = None) -> list[Any]:
        # Shape rules run with the fed shapes first, so errors name the op and line as on "cpu".
        specialize(needed_operations([t.op if isinstance(t, Tensor) else t for t in fetches], feeds),
                   {t: tuple(v.shape) for t, v in feeds.items()})
        variables = {op.outputs[0]: self._variable_array(op.outputs[0]) for op in needed if op.type == "Variable"}
        values, updates = reference.evaluate(fetches, feeds, variables, self.check_numerics)
        for value, target in zip(values, targets or []):   # before any variable changes, as on "cpu"
            if target is not None and value is not None:
                check_output(target, value.shape, value.dtype)
        for variable, value in updates.items():
            np.copyto(self._variable_array(variable), value)
        return values

    def _executable(self, fetches: list[Any], feeds: dict[Tensor, np.ndarray]) -> Executable:
        executable = self._compiled(fetches, feeds)
        if isinstance(executable, Executable):
            with self._recent_lock:
                self._recent[id(executable)] = executable
                self._recent.move_to_end(id(executable))
                while len(self._recent) > STEPS_KEEPING_BUFFERS:
                    self._recent.popitem(last=False)[1].release_buffers()
        return executable

    def _compiled(self, fetches: list[Any], feeds: dict[Tensor, np.ndarray]) -> Executable:
        key = (tuple(id(f) for f in fetches),
               tuple(sorted((id(t), v.shape) for t, v in feeds.items())))
        executable = self._cache.get(key)
        if executable is not None:
            return executable
        with self._lock, LLVM_LOCK, progress.task("compiling a step"):  # one compile per key; LLVM one at a time
            if self._closed:
                raise RuntimeError("this Session is closed")
            executable = self._cache.get(key)
            if executable is None:
                step = compile_step(fetches, {t: tuple(v.shape) for t, v in feeds.items()}, self.check_numerics,
                                    cpu_code=self.target == "cpu", dump=False)
                if self.target == "cuda":
                    if required_checks(step.program.kernels, self.graph):
                        raise CompileError("check_numerics ops are not checked on target='cuda' yet; run this "
                                           "step on 'cuda-emulated' or 'cpu' to check it")
                    # The ops' own checks (a sparse label out of range) are skipped: their results show NaN.
                    step.program.kernels = [dataclasses.replace(kernel, check=None) if kernel.check else kernel
                                            for kernel in step.program.kernels]
                if self.target in ("cuda", "cuda-emulated"):
                    step = target_gpu(step, self.arch, self.gpu_limits, emulated=self.target == "cuda-emulated",
                                      racecheck=self.racecheck, memcheck=self.memcheck)
                write_requested_dumps(step)   # what this target runs: the GPU's schedule and arch
                if self.target == "cuda":
                    from .cuda import CudaExecutable
                    executable = CudaExecutable(step, fetches, self._device_variables,  # type: ignore[assignment]
                                                self.arch, self.gpu_limits)
                else:
                    arrays = {t: self._variable_array(t) for t in step.program.variables}
                    executable = Executable(step, fetches, arrays, self._variable_lock)
                self._cache[key] = executable
        return executable

    def compile(self, fetches: Any, feed_dict: Any = None) -> Executable:
        """The compiled step for these fetches and feed shapes (cached), without running it.

        ``exe.dump("llvm")`` shows its LLVM IR; stages: graph, optimized, kernels, llvm, llvm-opt,
        asm, ptx.
        """
        if self.target == "reference":
            raise ValueError("compile() needs target='cpu', 'cuda-emulated' or 'cuda'; 'reference' interprets the graph")
        leaves, _, feeds, plan = self._prepare(fetches, feed_dict)
        if plan.split is not None:
            raise ValueError("compile(): these fetches hold a step that runs as several compiled steps with "
                             "host work between them (a DistributedOptimizer's training op); run it with run()")
        if plan.initializes:
            raise ValueError("compile(): these fetches hold an initializer, which run() applies on the host before "
                             "the step and a compiled step would skip; run the initializer with sess.run(init) "
                             "and compile the rest")
        return self._executable(leaves, feeds)


class InteractiveSession(Session):
    """TF1's ``InteractiveSession``: a ``Session`` that makes itself the default session (and a
    ``graph`` given the default graph) when made, until ``close()``, so that ``x.eval()`` and
    ``op.run()`` work at a prompt without a ``with`` block.

    >>> import compiler as cc
    >>> from runtime import InteractiveSession
    >>> sess = InteractiveSession()
    >>> float(cc.constant(2.0).eval())
    2.0
    >>> sess.close()
    """

    def __init__(self, graph: Graph | None = None, *args: Any, **kwargs: Any) -> None:
        super().__init__(graph, *args, **kwargs)
        scopes = contextlib.ExitStack()
        if graph is not None:   # as TF1: only a graph given is made the default (the default one already is)
            scopes.enter_context(self.graph.as_default())
        scopes.enter_context(default_session(self))
        self._interactive_scopes: contextlib.ExitStack | None = scopes

    def close(self) -> None:
        scopes, self._interactive_scopes = getattr(self, "_interactive_scopes", None), None
        try:
            if scopes is not None:
                scopes.close()
        finally:
            super().close()

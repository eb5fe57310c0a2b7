"""The static graph: ``Graph``, ``Operation``, ``Tensor`` and where each node was built.

A graph is append-only. Every node records the user's ``file:line`` (the first stack frame outside
graphgrad's own packages), its inferred shape and dtype, and its inputs. Nothing here computes values.
"""
from __future__ import annotations

import contextlib
import importlib
import math
import os
import re
import sys
import threading
from dataclasses import dataclass
from typing import Any, Iterator, Sequence

import numpy as np

from .errors import GraphMismatchError

Shape = tuple  # tuple[int | None, ...]

_PACKAGE_DIRS = tuple(
    os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), name) + os.sep
    for name in ("compiler", "runtime", "optim")
)


@dataclass(frozen=True)
class SourceLocation:
    """Where the user's code built a node."""

    filename: str
    lineno: int

    def __str__(self) -> str:
        return f"{self.filename}:{self.lineno}"


_IMPORTLIB = os.path.dirname(os.path.abspath(importlib.__file__)) + os.sep
# contextlib: a scope that graphgrad writes as a generator (@contextmanager) raises from inside it.
_CONTEXTLIB = os.path.abspath(contextlib.__file__)


def user_location() -> SourceLocation:
    """The innermost stack frame that is not inside graphgrad itself."""
    frame = sys._getframe(1)
    while frame is not None:
        name = frame.f_code.co_filename
        filename = os.path.abspath(name)
        # Not graphgrad's frames, nor the import machinery's (frozen, or the standard library's
        # importlib); a user's path that merely contains "importlib" is the user's.
        if not (filename.startswith(_PACKAGE_DIRS) or name.startswith("<frozen ") or filename.startswith(_IMPORTLIB)
                or filename == _CONTEXTLIB):
            return SourceLocation(name, frame.f_lineno)
        frame = frame.f_back  # type: ignore[assignment]
    return SourceLocation("<unknown>", 0)


def located(message: str, location: SourceLocation | None = None) -> str:
    """``message (at file:line)``: where an error points the user, at ``location`` (an op's) or
    else at the user's line that is running now."""
    return f"{message} (at {location if location is not None else user_location()})"


class Operation:
    """A node of the graph: one op applied to input tensors, with attributes and outputs."""

    def __init__(self, graph: "Graph", opdef: Any, name: str, inputs: Sequence["Tensor"],
                 attrs: dict[str, Any], location: SourceLocation,
                 control_inputs: Sequence["Operation"] = ()) -> None:
        self.graph = graph
        self.opdef = opdef
        self.name = name
        self.inputs: tuple[Tensor, ...] = tuple(inputs)
        self.attrs = dict(attrs)
        self.location = location
        self.control_inputs: tuple[Operation, ...] = tuple(control_inputs)
        self.outputs: tuple[Tensor, ...] = ()
        self.id = len(graph._operations)
        # The registered gradient name this op takes its gradient from, when it was built inside
        # ``graph.gradient_override_map({type: name})``; None: the op's own ``grad_rule``.
        self.gradient_override: str | None = None
        # The forward op whose gradient ``gradients()`` built this op for (None: a forward op).
        self.gradient_of: Operation | None = None
        # The control-flow region (a branch or loop body, ``compiler.control_flow.Region``) this op
        # belongs to; None: the graph's top level.
        self.region: Any = None
        # The region traced from the function that built this op: the op is the function's
        # original, computed only through the region's copy (None for the rest of the graph).
        self.traced_in: Any = None
        # Built inside ``graph.init_scope()``: it belongs to the graph as a whole, also when a cond
        # or loop function was being traced then (a library's state made on first use).
        self.graph_level = graph._init_depth > 0

    @property
    def type(self) -> str:
        return self.opdef.name

    def describe(self) -> str:
        """``Type 'name'`` as used in error messages."""
        return f"{self.type} {self.name!r}"

    def __repr__(self) -> str:
        return f"<Operation {self.describe()} at {self.location}>"

    def run(self, feed_dict: Any = None, session: Any = None) -> None:
        """``session.run(self, feed_dict)`` in ``session``, else the default session (TF1's
        ``Operation.run``: ``cc.global_variables_initializer().run()``)."""
        session_for(f"run {self.describe()}", session).run(self, feed_dict)

    def get_attr(self, name: str) -> Any:
        """The attribute ``name`` of the op (TF1's ``Operation.get_attr``)."""
        if name not in self.attrs:
            raise ValueError(located(f"{self.describe()} has no attribute {name!r}; it has "
                                     f"{sorted(self.attrs) or 'none'}"))
        return self.attrs[name]

    def values(self) -> tuple["Tensor", ...]:
        """The op's outputs (TF1's ``Operation.values()``)."""
        return self.outputs

    @property
    def device(self) -> str:
        """Always ``""``: ops run on their Session's target (see ``Graph.device``)."""
        return ""


class Annotations:
    """A table keyed by graph objects (operations, tensors, graphs) that keeps each entry on its key
    itself: the entry lives as long as the key, and one that refers back to its key's graph does
    not keep the graph alive (a ``WeakKeyDictionary``'s values are strong references: they did, so
    every graph that used ``Print``, ``get_variable`` or ``clip_by_norm`` stayed in memory)."""

    def __init__(self, name: str) -> None:
        self._attribute = f"_annotation_{name}"

    def __contains__(self, key: Any) -> bool:
        return self._attribute in getattr(key, "__dict__", {})

    def __getitem__(self, key: Any) -> Any:
        try:
            return key.__dict__[self._attribute]
        except (AttributeError, KeyError):
            raise KeyError(key) from None

    def get(self, key: Any, default: Any = None) -> Any:
        return getattr(key, "__dict__", {}).get(self._attribute, default)

    def __setitem__(self, key: Any, value: Any) -> None:
        key.__dict__[self._attribute] = value


class TensorShape(tuple):
    """A tensor's static shape: a tuple of sizes, None where a size is known only when the step is
    compiled, with TF1's ``TensorShape`` methods.

    >>> import compiler as cc
    >>> shape = cc.placeholder("float32", (None, 3)).get_shape()
    >>> shape == (None, 3), shape.as_list(), shape.ndims, shape.is_fully_defined()
    (True, [None, 3], 2, False)
    """

    def __getitem__(self, key: Any) -> Any:   # a slice stays a TensorShape: x.shape[1:].as_list()
        part = tuple.__getitem__(self, key)
        return TensorShape(part) if isinstance(key, slice) else part

    def as_list(self) -> list[int | None]:
        return list(self)

    @property
    def ndims(self) -> int:
        return len(self)

    @property
    def rank(self) -> int:
        return len(self)

    def is_fully_defined(self) -> bool:
        return None not in self

    def num_elements(self) -> int | None:
        return None if None in self else math.prod(self)

    def __eq__(self, other: object) -> bool:   # TF1 compares with lists too: x.shape == [2, 3]
        return tuple(self) == (tuple(other) if isinstance(other, list) else other)

    def __ne__(self, other: object) -> bool:
        return not self == other

    __hash__ = tuple.__hash__

    @property
    def dims(self) -> list[int | None]:
        return list(self)

    def is_compatible_with(self, other: Any) -> bool:
        """Whether the two shapes can describe one tensor: equal ranks, and sizes equal where both
        are known (TF1's)."""
        other = tuple(other)
        return len(self) == len(other) and all(a is None or b is None or a == b for a, b in zip(self, other))

    def merge_with(self, other: Any) -> "TensorShape":
        """The shape that both describe (TF1's); ``ValueError`` when they are not compatible."""
        if not self.is_compatible_with(other):
            raise ValueError(f"shapes {format_sizes(self)} and {format_sizes(tuple(other))} are not compatible")
        return TensorShape(a if a is not None else b for a, b in zip(self, tuple(other)))

    def concatenate(self, other: Any) -> "TensorShape":
        return TensorShape(tuple(self) + tuple(other))

    def with_rank(self, rank: int) -> "TensorShape":
        if len(self) != rank:
            raise ValueError(f"shape {format_sizes(self)} must have rank {rank}")
        return self


def format_sizes(shape: Sequence[int | None]) -> str:
    return "(" + ", ".join("?" if size is None else str(size) for size in shape) + ")"


class Dimension(int):
    """A known size as TF1's ``get_shape()[i]`` gives it: an int with ``.value`` (TF1 scripts read
    ``x.get_shape()[1].value``); an unknown size is None."""

    @property
    def value(self) -> int:
        return int(self)

    __repr__ = int.__repr__


def dimension_value(dimension: Any) -> int | None:
    """The size as an int or None, from an int, None or a ``Dimension`` (TF1's
    ``dimension_value``)."""
    return None if dimension is None else int(dimension)


class _TF1Shape(TensorShape):
    """What ``get_shape()`` returns: a ``TensorShape`` whose known sizes are ``Dimension``s."""

    def __getitem__(self, key: Any) -> Any:
        part = tuple.__getitem__(self, key)
        if isinstance(key, slice):
            return _TF1Shape(part)
        return None if part is None else Dimension(part)


class _DefaultSessions(threading.local):
    def __init__(self) -> None:
        self.stack: list[Any] = []


_default_sessions = _DefaultSessions()


def get_default_session() -> Any:
    """The session of the innermost ``with Session() as sess:`` (or ``sess.as_default()``) in this
    thread, else None (TF1's ``get_default_session``)."""
    return _default_sessions.stack[-1] if _default_sessions.stack else None


@contextlib.contextmanager
def default_session(session: Any) -> Iterator[Any]:
    """Make ``session`` the default inside the block (``Session.__enter__`` and ``as_default``)."""
    _default_sessions.stack.append(session)
    try:
        yield session
    finally:   # this block's entry: the last of the session's (it may be nested in itself)
        stack = _default_sessions.stack
        del stack[len(stack) - 1 - stack[::-1].index(session)]


def session_for(what: str, session: Any) -> Any:
    session = session if session is not None else get_default_session()
    if session is None:
        raise ValueError(located(f"cannot {what}: no default session is registered; run it inside "
                                 f"`with Session() as sess:` (or `with sess.as_default():`), or pass session=sess"))
    return session


class Tensor:
    """A symbolic value: output ``value_index`` of ``op``, with a static (partially known) shape."""

    __array_priority__ = 100  # so numpy defers `ndarray + Tensor` to Tensor.__radd__

    def __init__(self, op: Operation, value_index: int, shape: Shape, dtype: np.dtype) -> None:
        self.op = op
        self.value_index = value_index
        self.shape: TensorShape = TensorShape(shape)
        self.dtype: np.dtype = dtype

    def get_shape(self) -> TensorShape:
        """The static shape (TF1's ``get_shape()``; ``shape`` with each known size a
        ``Dimension``, so ``x.get_shape()[1].value`` works as in TF1)."""
        return _TF1Shape(self.shape)

    def consumers(self) -> list[Operation]:
        """The ops that take this tensor as an input, in the order they were built (TF1's)."""
        return [op for op in self.graph.get_operations() if any(t is self for t in op.inputs)]

    @property
    def device(self) -> str:
        return ""

    def eval(self, feed_dict: Any = None, session: Any = None) -> Any:
        """``session.run(self, feed_dict)`` in ``session``, else the default session (TF1's
        ``Tensor.eval``: inside ``with Session() as sess:``)."""
        return session_for(f"evaluate {self.name!r}", session).run(self, feed_dict)

    @property
    def name(self) -> str:
        return f"{self.op.name}:{self.value_index}"

    @property
    def graph(self) -> "Graph":
        return self.op.graph

    @property
    def ndim(self) -> int:
        return len(self.shape)

    def __repr__(self) -> str:
        from .shapes import format_shape
        return f"<Tensor {self.name!r} shape={format_shape(self.shape)} dtype={self.dtype.name}>"

    def __hash__(self) -> int:
        return id(self)

    def __eq__(self, other: object) -> bool:  # identity, so tensors can be dict keys (as in TF1)
        return self is other

    def __bool__(self) -> bool:
        raise TypeError("a symbolic Tensor has no truth value; use cc.where / comparisons as ops")

    def _no_value(self) -> TypeError:
        return TypeError(located(f"the symbolic Tensor {self.name!r} has no value while the graph is built; "
                                 "give a Python number here (sizes, axes, depths and permutations are fixed "
                                 "when the graph is built)"))

    def __int__(self) -> int:
        raise self._no_value()

    def __index__(self) -> int:
        raise self._no_value()

    def __float__(self) -> float:
        raise self._no_value()

    def __iter__(self) -> Any:
        # Without this, Python would iterate through __getitem__ (attached later): 0, 1, 2, ...
        # without end along a dimension of unknown size, a new slice op at each step.
        raise TypeError(located(f"a symbolic Tensor is not iterable: {self.name!r} (shape "
                                f"{list(self.shape)}); index it (x[0]) or split it with cc.unstack(x), or "
                                "pass a list of tensors where a list is wanted"))

    def __array__(self, dtype: Any = None, copy: Any = None) -> Any:
        # As TF1: numpy would otherwise wrap the tensor in an object array, and np.sum(x) would
        # return x itself, silently.
        raise NotImplementedError(located(
            f"cannot convert the symbolic Tensor {self.name!r} to a numpy array: it has a value only "
            "when a step runs (use the cc ops: cc.reduce_sum, cc.exp..., or sess.run(x) for its value)"))

    # numpy's ufuncs and operators defer to the tensor's own: np.ones(3) + x is x.__radd__, and
    # np.exp(x) a TypeError rather than an object array of tensors.
    __array_ufunc__ = None

    # Operators are attached by compiler/__init__.py (they need the op declarations).


class Graph:
    """A container of operations. ``with g.as_default():`` makes it the target of new nodes."""

    def __init__(self) -> None:
        self._operations: list[Operation] = []
        self._operation_names: set[str] = set()   # _names also holds the names of name scopes
        self._names: dict[str, int] = {}
        self._name_stack: list[str] = []
        self._collections: dict[str, list[Any]] = {}
        self._control_stack: list[list[Operation]] = []
        self._gradient_override_map: dict[str, str] = {}
        self._init_depth = 0         # how many init_scope()s are open
        self._gradient_hooks: dict[Tensor, list[Any]] = {}
        self.seed: int | None = None
        self._version = 0
        self._finalized = False
        # How many cond branches or loop bodies are being traced now (compiler.control_flow).
        self.tracing = 0

    # -- naming -------------------------------------------------------------------------------
    def unique_name(self, base: str) -> str:
        """Scope-qualified, de-duplicated name (``scope/base``, ``scope/base_1``…). As in TF1, a
        name with ``:`` is refused (``"a:0"`` names a tensor), and one ending in ``/`` is taken as
        the whole name, outside the scopes and as it is (an error if it is taken)."""
        if base and ":" in base:
            raise ValueError(located(f"{base!r} is not a valid name: ':' separates an op's name from its "
                                     f"output's index ('{base.partition(':')[0]}:0')"))
        if base and base.endswith("/"):
            # A name scope's own name ("a/" from ``name_scope("a") as scope``) is free for one node.
            full = base.rstrip("/")
            if not full or full in self._operation_names:
                raise ValueError(located(f"cannot name a node {base!r}: " + ("the name is empty" if not full
                                                                             else f"{full!r} is taken")))
            self._names.setdefault(full, 1)
            return full
        full = "/".join(self._name_stack + [base or "op"])
        if full not in self._names:
            self._names[full] = 1
            return full
        count = self._names[full]
        while f"{full}_{count}" in self._names:
            count += 1
        self._names[full] = count + 1
        self._names[f"{full}_{count}"] = 1
        return f"{full}_{count}"

    @contextlib.contextmanager
    def name_scope(self, name: str | None, default_name: str | None = None, values: Any = None) -> Iterator[str]:
        """TF1's name scope: the nodes built inside are named ``name/...``, ``name`` made unique in
        the scope around as an op's name is (``"a"``, then ``"a_1"``); yields the scope with its
        slash (``"a/"``), which as a name (``cc.identity(h, name=scope)``) names the node
        ``"a"`` itself. A name ending in ``/`` re-enters that scope as it is; None (without
        ``default_name``, which a None ``name`` takes) or ``""`` is the top, outside every scope.
        ``values`` is accepted for TF1's signature.

        >>> import compiler as cc
        >>> with cc.Graph().as_default() as g:
        ...     with g.name_scope("layer") as scope:
        ...         w = cc.constant(1.0, name="w")
        ...     with g.name_scope("layer"):
        ...         again = cc.constant(1.0, name="w")
        ...     with g.name_scope(scope):
        ...         bias = cc.constant(1.0, name="b")
        >>> scope, w.op.name, again.op.name, bias.op.name
        ('layer/', 'layer/w', 'layer_1/w', 'layer/b')
        """
        if name is None and default_name is not None:
            name = default_name
        if name is not None and not isinstance(name, str):
            raise TypeError(located(f"name_scope: the name must be a string or None, got {name!r}"))
        if not name:
            stack: list[str] = []
        elif name.endswith("/"):
            stack = [part for part in name.split("/") if part]
        else:
            stack = self.unique_name(name).split("/")
        saved = self._name_stack
        self._name_stack = stack
        try:
            yield "/".join(stack) + "/" if stack else ""
        finally:
            self._name_stack = saved

    @contextlib.contextmanager
    def nested_scope(self, name: str) -> Iterator[str]:
        """Prefix the names of nodes built inside with ``name/`` inside the scopes open, entered as
        it is (not made unique: a second ``nested_scope("a")`` names ``a/Add_1``): graphgrad's own
        composite ops name their parts this way. Yields the scope without its slash."""
        self._name_stack.append(name)
        try:
            yield "/".join(self._name_stack)
        finally:
            self._name_stack.pop()

    # -- default graph ------------------------------------------------------------------------
    @contextlib.contextmanager
    def as_default(self) -> Iterator["Graph"]:
        """Make this graph the default for nodes built inside the ``with`` block."""
        _default_graph_stack.stack.append(self)
        try:
            yield self
        finally:   # this block's entry: the last of the graph's (an InteractiveSession's may end out of order)
            stack = _default_graph_stack.stack
            if self in stack:   # not when ended on another thread (the stack is per thread)
                del stack[len(stack) - 1 - stack[::-1].index(self)]

    # -- nodes -------------------------------------------------------------------------------
    def add_operation(self, opdef: Any, inputs: Sequence[Tensor], attrs: dict[str, Any],
                      output_specs: Sequence[tuple[Shape, np.dtype]], name: str | None,
                      location: SourceLocation) -> Operation:
        if self._finalized:
            raise RuntimeError(located(f"{opdef.name}: the graph is finalized and cannot be modified", location))
        for tensor in inputs:
            if tensor.graph is not self:
                raise GraphMismatchError(
                    located(f"{opdef.name}: input {tensor.name!r} belongs to another graph", location))
        control = [op for frame in self._control_stack for op in frame]
        op = Operation(self, opdef, self.unique_name(name or opdef.name), inputs, attrs, location,
                       control)
        op.outputs = tuple(Tensor(op, i, shape, dtype) for i, (shape, dtype) in enumerate(output_specs))
        op.gradient_override = self._gradient_override_map.get(opdef.name)
        self._operations.append(op)
        self._operation_names.add(op.name)
        self._version += 1
        return op

    def get_operations(self) -> list[Operation]:
        """The operations in the order they were built (a new list)."""
        return list(self._operations)

    def finalize(self) -> None:
        """Make the graph read-only: building an op in it raises ``RuntimeError`` (TF1's
        ``Graph.finalize``, which catches a training loop that keeps adding ops)."""
        self._finalized = True

    @property
    def finalized(self) -> bool:
        return self._finalized

    @contextlib.contextmanager
    def unfinalized(self) -> Iterator[None]:
        """Build in a finalized graph for the block: what TF1 makes up front and graphgrad on
        first use (a variable's ``initializer``)."""
        finalized, self._finalized = self._finalized, False
        try:
            yield
        finally:
            self._finalized = finalized

    def device(self, device_name_or_function: Any) -> contextlib.AbstractContextManager[None]:
        """TF1's device scope, accepted so that TF1 code runs: every op of a step runs where its
        ``Session``'s target says (``"cpu"``, ``"cuda"``, ...), whatever the scope names."""
        return contextlib.nullcontext()

    def operation_count(self) -> int:
        """How many operations the graph holds (without copying their list)."""
        return len(self._operations)

    def operations_since(self, first: int) -> list[Operation]:
        """The operations built since there were ``first`` of them, in order."""
        return self._operations[first:]

    def get_operation_by_name(self, name: str) -> Operation:
        for op in self._operations:
            if op.name == name:
                return op
        raise KeyError(f"the graph has no operation named {name!r}")

    def get_tensor_by_name(self, name: str) -> Tensor:
        """The tensor ``"op_name:index"`` (TF1's naming)."""
        op_name, _, index = name.rpartition(":")
        if not op_name or not index.isdigit():
            raise ValueError(f"{name!r} is not a tensor name: tensor names look like 'op_name:0'")
        try:
            return self.get_operation_by_name(op_name).outputs[int(index)]
        except (KeyError, IndexError):
            raise KeyError(f"the graph has no tensor named {name!r}") from None

    # -- collections ---------------------------------------------------------------------------
    def add_to_collection(self, key: str, value: Any) -> None:
        self._collections.setdefault(key, []).append(value)

    def get_collection_ref(self, key: str) -> list[Any]:
        """The list of the collection itself (TF1's): changing it changes the collection."""
        return self._collections.setdefault(key, [])

    def clear_collection(self, key: str) -> None:
        self._collections.pop(key, None)

    def get_collection(self, key: str, scope: str | None = None) -> list[Any]:
        """The values added under ``key``; with ``scope``, those whose ``name`` matches it from its
        start (a regular expression, as TF1's)."""
        values = list(self._collections.get(key, []))
        if scope is None:
            return values
        pattern = re.compile(scope)
        return [v for v in values if isinstance(getattr(v, "name", None), str) and pattern.match(v.name)]

    # -- gradient hooks (``compiler.autodiff.register_gradient_hook``) ------------------------------
    def add_gradient_hook(self, tensor: Tensor, hook: Any) -> None:
        """Record ``hook`` for ``tensor``'s gradient, after the hooks it already has."""
        if tensor.graph is not self:
            raise GraphMismatchError(located(f"gradient hook: {tensor.name!r} belongs to another graph"))
        self._gradient_hooks.setdefault(tensor, []).append(hook)

    def remove_gradient_hook(self, tensor: Tensor, hook: Any) -> bool:
        """Forget ``hook`` on ``tensor``; False if it was not there (already removed)."""
        hooks = self._gradient_hooks.get(tensor, [])
        for index, present in enumerate(hooks):
            if present is hook:
                del hooks[index]
                if not hooks:
                    del self._gradient_hooks[tensor]
                return True
        return False

    def tensors_with_gradient_hook(self, hook: Any) -> list[Tensor]:
        """The tensors ``hook`` is on (the one it was registered on, and the copies a traced branch
        or loop body made of it)."""
        return [tensor for tensor, hooks in self._gradient_hooks.items() if any(h is hook for h in hooks)]

    def gradient_hooks(self, tensor: Tensor) -> list[Any]:
        """The hooks on ``tensor``'s gradient, in registration order (a new list)."""
        return list(self._gradient_hooks.get(tensor, []))

    def control_dependencies(self, ops: Sequence[Any] | None) -> contextlib.AbstractContextManager[None]:
        """Nodes built inside run after ``ops``: their reads of a variable that ``ops`` assigned see
        the assigned value (``compiler.passes.control``). ``None`` clears the dependencies of the
        code around it, as in TF1."""
        if ops is None:
            return self._control_frame(None)
        frame = []
        for item in ops:   # checked here, at the user's line, not when the with statement enters
            op = item.op if isinstance(item, Tensor) else item
            if not isinstance(op, Operation):
                raise TypeError(located(f"control_dependencies takes operations and tensors, got {item!r}"))
            if op.graph is not self:
                raise GraphMismatchError(located(f"control_dependencies: {op.name!r} belongs to another graph"))
            if op.traced_in is not None and not self.tracing:
                # It runs only inside its branch or loop body (TF1 refuses it too): a batch norm's
                # UPDATE_OPS built in a cond branch, for one.
                raise ValueError(located(f"control_dependencies: {op.name!r} was built inside a cond branch or a "
                                         f"loop body (the function defined at {op.traced_in.location}) and runs "
                                         "only there; build what depends on it inside that function"))
            frame.append(op)
        return self._control_frame(frame)

    @contextlib.contextmanager
    def _control_frame(self, frame: list[Operation] | None) -> Iterator[None]:
        if frame is None:
            saved, self._control_stack = self._control_stack, []
            try:
                yield
            finally:
                self._control_stack = saved
            return
        self._control_stack.append(frame)
        try:
            yield
        finally:
            self._control_stack.pop()

    @contextlib.contextmanager
    def absolute_name_scope(self, name: str) -> Iterator[None]:
        """Name the nodes built inside as if the name scopes open were exactly ``name``
        (``"a/b"``; ``""`` for none), whatever is open around (TF1 names a variable by its
        variable scope, not by the name scopes)."""
        saved = self._name_stack
        self._name_stack = [part for part in name.split("/") if part]
        try:
            yield
        finally:
            self._name_stack = saved

    @contextlib.contextmanager
    def no_control_dependencies(self) -> Iterator[None]:
        """Nodes built inside get no control dependencies from the ``control_dependencies``
        blocks around (a variable: reading it must not run what they list)."""
        saved = self._control_stack
        self._control_stack = []
        try:
            yield
        finally:
            self._control_stack = saved

    @contextlib.contextmanager
    def init_scope(self) -> Iterator["Graph"]:
        """Build nodes that belong to the graph as a whole, not to the code around them (TF1's
        ``tf.init_scope``): inside, this graph is the default and new nodes have no control
        dependencies, the root name scope and no gradient override. Variables that a library makes
        on first use (an optimizer's slots, the random ops' run counter) are built this way.

        >>> import compiler as cc
        >>> g = cc.Graph()
        >>> with g.as_default(), g.name_scope("layer"):
        ...     first = cc.constant(1.0, name="first")
        ...     with g.control_dependencies([first]), g.init_scope():
        ...         state = cc.constant(0.0, name="state")
        >>> state.op.name, state.op.control_inputs
        ('state', ())
        """
        saved = (self._name_stack, self._control_stack, self._gradient_override_map)
        self._name_stack, self._control_stack, self._gradient_override_map = [], [], {}
        self._init_depth += 1
        try:
            with self.as_default():
                yield self
        finally:
            self._name_stack, self._control_stack, self._gradient_override_map = saved
            self._init_depth -= 1

    @contextlib.contextmanager
    def gradient_override_map(self, op_type_map: dict[str, str]) -> Iterator[None]:
        """Ops of the given types built inside take their gradient from a registered function.

        ``op_type_map`` maps an op type (``Operation.type``, e.g. ``"Relu"``) to a name registered
        with ``cc.RegisterGradient`` (or to another op type, whose gradient rule is then used).
        The name is looked up when gradients are taken. Nested maps add to the enclosing one.

        >>> import compiler as cc
        >>> g = cc.Graph()
        >>> with g.as_default():
        ...     x = cc.placeholder("float32", shape=(3,), name="x")
        ...     with g.gradient_override_map({"Sign": "Identity"}):   # straight-through sign
        ...         y = cc.sign(x)
        >>> y.op.gradient_override
        'Identity'
        """
        if not isinstance(op_type_map, dict):
            raise TypeError(located(f"gradient_override_map needs a dict of op type -> gradient name, "
                                    f"got {type(op_type_map).__name__}"))
        for op_type, grad_name in op_type_map.items():
            if not isinstance(op_type, str) or not isinstance(grad_name, str):
                raise TypeError(located(f"gradient_override_map: op type and gradient name must be strings, "
                                        f"got {op_type!r}: {grad_name!r}"))
        saved = self._gradient_override_map
        self._gradient_override_map = {**saved, **op_type_map}
        try:
            yield
        finally:
            self._gradient_override_map = saved


def operations_reached(roots: Sequence[Operation], first_op_id: int = 0) -> set[Operation]:
    """The operations ``roots`` depend on through inputs and control inputs (the roots included),
    among those built at or after ``first_op_id``; the walk stops at older ones."""
    reached: set[Operation] = set()
    stack = list(roots)
    while stack:
        op = stack.pop()
        if op.id < first_op_id or op in reached:
            continue
        reached.add(op)
        stack.extend(t.op for t in op.inputs)
        stack.extend(op.control_inputs)
    return reached


class _DefaultGraphStack(threading.local):
    def __init__(self) -> None:
        self.stack: list[Graph] = []


_default_graph_stack = _DefaultGraphStack()
_global_default_graph = Graph()


def get_default_graph() -> Graph:
    """The graph new nodes go to: the innermost ``as_default()``, else the global default."""
    if _default_graph_stack.stack:
        return _default_graph_stack.stack[-1]
    return _global_default_graph


def reset_default_graph() -> None:
    """Replace the global default graph with a new, empty one."""
    global _global_default_graph
    if _default_graph_stack.stack:
        raise RuntimeError("reset_default_graph() inside a `with graph.as_default()` block")
    _global_default_graph = Graph()


def name_scope(name: str | None, default_name: str | None = None,
               values: Any = None) -> contextlib.AbstractContextManager[str]:
    """``with cc.name_scope("layer1") as scope:`` prefixes names in the default graph (TF1's
    ``tf.name_scope``; see ``Graph.name_scope``): a second ``"layer1"`` is ``"layer1_1"``, and
    ``scope`` is ``"layer1/"``."""
    return get_default_graph().name_scope(name, default_name, values)


class GraphKeys:
    GLOBAL_VARIABLES = "variables"
    LOCAL_VARIABLES = "local_variables"
    TRAINABLE_VARIABLES = "trainable_variables"
    GLOBAL_STEP = "global_step"
    SUMMARIES = "summaries"
    REGULARIZATION_LOSSES = "regularization_losses"   # what get_variable's regularizers add
    UPDATE_OPS = "update_ops"                         # what layers.batch_normalization's training adds
    LOSSES = "losses"                                 # what cc.losses adds
    MODEL_VARIABLES = "model_variables"
    MOVING_AVERAGE_VARIABLES = "moving_average_variables"
    INIT_OP = "init_op"
    TRAIN_OP = "train_op"

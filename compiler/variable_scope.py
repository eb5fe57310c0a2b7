"""``variable_scope`` and ``get_variable``: variables named by scope and shared by name, as TF1.

``get_variable("w", shape)`` inside ``variable_scope("layer1")`` makes (or, with ``reuse``, finds)
the variable ``layer1/w``. Each graph keeps its own store of them. A scope also opens a name scope
for the ops built inside.

>>> import compiler as cc
>>> with cc.Graph().as_default():
...     with cc.variable_scope("layer"):
...         w = cc.get_variable("w", [3, 2])
...     with cc.variable_scope("layer", reuse=True):
...         again = cc.get_variable("w")
...     print(w.op.name, again is w)
layer/w True
"""
from __future__ import annotations

import contextlib
import functools
from dataclasses import dataclass
from typing import Any, Callable, Iterator, Sequence

import numpy as np

from . import dtypes
from .graph import Annotations, Graph, GraphKeys, Tensor, get_default_graph, located
from .initializers import glorot_uniform_initializer, zeros_initializer
from .ops.sources import Variable, value_when_made


class _AutoReuse:
    def __repr__(self) -> str:
        return "AUTO_REUSE"


AUTO_REUSE: Any = _AutoReuse()   # get_variable makes the variable if it is missing, else returns it


@dataclass
class VariableScope:
    """A scope's settings: its full ``name``, ``reuse`` (False, True or AUTO_REUSE), and the
    defaults ``initializer``, ``regularizer`` and ``dtype`` of the variables made in it."""

    name: str
    reuse: Any = False
    initializer: Any = None
    regularizer: Callable[[Tensor], Any] | None = None
    dtype: Any = dtypes.float32
    custom_getter: Callable[..., Any] | None = None
    original_name_scope: str = ""   # the name scope opened with it ("" for the top), as TF1's
    constraint: Callable[[Tensor], Any] | None = None

    def reuse_variables(self) -> None:
        """From now on, ``get_variable`` in this scope returns existing variables."""
        self.reuse = True

    def set_initializer(self, initializer: Any) -> None:
        self.initializer = initializer

    def set_regularizer(self, regularizer: Callable[[Tensor], Any] | None) -> None:
        self.regularizer = regularizer

    def set_dtype(self, dtype: Any) -> None:
        self.dtype = dtypes.as_dtype(dtype)

    def set_custom_getter(self, custom_getter: Callable[..., Any] | None) -> None:
        self.custom_getter = custom_getter


class _Store:
    """One graph's variables by full name, its open scopes and the default names it gave."""

    def __init__(self) -> None:
        self.variables: dict[str, Variable] = {}
        self.scopes: list[VariableScope] = [VariableScope("")]
        # How many times each scope (by full name) was opened, as TF1 counts them for unique
        # default names; a named scope's sub-scopes count from 0 again once it closes (so a model
        # function called twice in one scope names its layers the same both times).
        self.opened: dict[str, int] = {}


_STORES = Annotations("variable_store")   # kept on each graph


def _store(graph: Graph) -> _Store:
    if graph not in _STORES:
        _STORES[graph] = _Store()
    return _STORES[graph]


def default_name_counts(graph: Graph) -> dict[str, int]:
    """How many times each scope was opened, which decides the next default name (``dense``,
    ``dense_1``...): saved and set again around a function called twice that must make the same
    variables (``map_fn``'s probe)."""
    return dict(_store(graph).opened)


def set_default_name_counts(graph: Graph, counts: dict[str, int]) -> None:
    _store(graph).opened = dict(counts)


def _wrapped_getter(custom_getter: Callable[..., Any], enclosing: Callable[..., Any]) -> Callable[..., Any]:
    """A scope's custom getter inside another's: it is called first, and its ``getter`` goes
    through the enclosing one (TF1's order)."""
    def wrapped(getter: Callable[..., Any], *args: Any, **kwargs: Any) -> Any:
        return custom_getter(functools.partial(enclosing, getter), *args, **kwargs)
    return wrapped


def top_variable_scope(graph: Graph | None = None) -> VariableScope:
    """The graph's outermost variable scope (named "", whatever scopes are open)."""
    return _store(graph or get_default_graph()).scopes[0]


def get_variable_scope() -> VariableScope:
    """The innermost open variable scope of the default graph (the root scope, named "", outside
    any)."""
    return _store(get_default_graph()).scopes[-1]


@contextlib.contextmanager
def variable_scope(name_or_scope: str | VariableScope | None, default_name: str | None = None,
                   values: Sequence[Any] | None = None, initializer: Any = None,
                   regularizer: Callable[[Tensor], Any] | None = None, caching_device: Any = None,
                   partitioner: Any = None, custom_getter: Callable[..., Any] | None = None, reuse: Any = None,
                   dtype: Any = None, use_resource: Any = None, constraint: Callable[[Tensor], Any] | None = None,
                   auxiliary_name_scope: bool = True) -> Iterator[VariableScope]:
    """Open the variable scope ``name_or_scope`` (a name below the current scope, or a
    ``VariableScope`` to enter again by its full name); with ``name_or_scope=None``,
    ``default_name`` made unique (``dense``, ``dense_1``...). ``reuse``: True (and in every scope
    inside) ``get_variable`` returns existing variables, AUTO_REUSE makes missing ones, None
    inherits the enclosing scope's. The ops built inside are named under the scope too.
    ``initializer``, ``regularizer``, ``dtype``, ``constraint`` and ``custom_getter`` are the
    defaults of ``get_variable`` inside (a custom getter wraps the enclosing scope's, as TF1's);
    TF1's argument order, whose ``caching_device``, ``partitioner`` and ``use_resource`` change
    nothing here.

    >>> import compiler as cc
    >>> with cc.Graph().as_default():
    ...     with cc.variable_scope(None, default_name="dense"):
    ...         first = cc.get_variable("kernel", [2, 2])
    ...     with cc.variable_scope(None, default_name="dense"):
    ...         second = cc.get_variable("kernel", [2, 2])
    ...     print(first.op.name, second.op.name)
    dense/kernel dense_1/kernel
    """
    graph = next((v.graph for v in values or () if isinstance(v, Tensor)), None) or get_default_graph()
    store = _store(graph)
    parent = store.scopes[-1]
    if isinstance(name_or_scope, VariableScope):
        full = name_or_scope.name
        inherited = name_or_scope
    elif name_or_scope is None:
        if not default_name:
            raise ValueError(located("variable_scope: give name_or_scope, or default_name when it is None"))
        base = f"{parent.name}/{default_name}" if parent.name else default_name
        full, index = base, 1
        while store.opened.get(full, 0):
            full, index = f"{base}_{index}", index + 1
        inherited = parent
    elif isinstance(name_or_scope, str) and name_or_scope.strip("/") and "//" not in name_or_scope.strip("/"):
        relative = name_or_scope.strip("/")          # "rnn/lstm_cell": two levels at once, as TF1
        full = f"{parent.name}/{relative}" if parent.name else relative
        inherited = parent
    else:
        raise ValueError(located(f"variable_scope: name_or_scope must be a name (levels separated by '/'), a "
                                 f"VariableScope or None, got {name_or_scope!r}"))
    if name_or_scope is None and reuse is True:
        raise ValueError(located("variable_scope: reuse=True cannot be used without a name_or_scope (as TF1)"))
    if custom_getter is not None and not callable(custom_getter):
        raise TypeError(located(f"variable_scope: custom_getter must be callable, got {custom_getter!r}"))
    if reuse is not None and reuse is not True and reuse is not False and reuse is not AUTO_REUSE:
        raise ValueError(located(f"variable_scope: reuse must be True, False, None or AUTO_REUSE, got {reuse!r}"))
    # As TF1: reuse True or AUTO_REUSE holds in every scope inside; False or None inherits.
    effective = reuse if reuse in (True, AUTO_REUSE) else (parent.reuse if parent.reuse else inherited.reuse)
    getter = inherited.custom_getter
    if custom_getter is not None:
        getter = custom_getter if getter is None else _wrapped_getter(custom_getter, getter)
    scope = VariableScope(full, effective,
                          initializer if initializer is not None else inherited.initializer,
                          regularizer if regularizer is not None else inherited.regularizer,
                          dtypes.as_dtype(dtype) if dtype is not None else inherited.dtype, getter,
                          inherited.original_name_scope if isinstance(name_or_scope, VariableScope) else "",
                          constraint if constraint is not None else inherited.constraint)
    store.scopes.append(scope)
    store.opened[full] = store.opened.get(full, 0) + 1
    counts_before = dict(store.opened)
    try:
        with graph.as_default():
            # As TF1, the ops inside go in a name scope made unique as cc.name_scope makes it (a
            # scope opened again names its ops "foo_1/..."); a VariableScope given enters one
            # named as its last level, and the top scope (get_variable_scope() at the top) none.
            if isinstance(name_or_scope, VariableScope):
                name_scope = full.rpartition("/")[2]
            else:
                name_scope = full[len(parent.name) + 1:] if parent.name else full
            if auxiliary_name_scope and name_scope:
                with graph.name_scope(name_scope) as opened:
                    if not isinstance(name_or_scope, VariableScope):
                        scope.original_name_scope = opened
                    yield scope
            else:
                yield scope
    finally:
        store.scopes.pop()
        if isinstance(name_or_scope, VariableScope):
            store.opened = counts_before
        else:
            store.opened = {name: count for name, count in store.opened.items() if not name.startswith(full + "/")}


def _variable_shape(shape: Any, full: str) -> tuple[int, ...]:
    """``shape`` as sizes: a list of ints, or one int (TF1 takes ``get_variable("v", 3)``)."""
    listed = list(shape) if isinstance(shape, (list, tuple, np.ndarray)) else [shape]
    if any(d is None or d == -1 for d in listed):
        raise ValueError(located(f"get_variable: the shape of a new variable must be fully defined, but {full} "
                                 f"is given {shape!r}"))
    if not all(isinstance(d, (int, np.integer)) and not isinstance(d, bool) and d >= 0 for d in listed):
        raise TypeError(located(f"get_variable: the shape of {full} must be non-negative Python ints, got {shape!r}"))
    return tuple(int(d) for d in listed)


def get_variable(name: str, shape: Sequence[int] | None = None, dtype: Any = None, initializer: Any = None,
                 regularizer: Callable[[Tensor], Any] | None = None, trainable: bool | None = None,
                 collections: Sequence[str] | None = None, caching_device: Any = None, partitioner: Any = None,
                 validate_shape: bool = True, use_resource: Any = None, custom_getter: Callable[..., Any] | None = None,
                 constraint: Callable[[Tensor], Any] | None = None, synchronization: Any = None,
                 aggregation: Any = None) -> Variable:
    """The variable ``scope/name``: made from ``initializer`` (an initializer, a number or an
    array; the scope's, else Glorot uniform for floats and zeros for integers) when the scope does
    not reuse, returned when it does; an error when it exists and the scope does not reuse, or is
    missing and the scope reuses (but AUTO_REUSE makes it). ``regularizer(variable)`` adds a loss
    to ``GraphKeys.REGULARIZATION_LOSSES`` (see ``cc.losses.get_regularization_loss``).
    ``constraint(variable)`` is what an optimizer sets the variable to after each update. As TF1,
    ``custom_getter`` (or the scope's) is called instead, as ``custom_getter(getter, name, *args,
    **kwargs)`` with the full name and this function's other arguments; ``getter`` makes or
    returns the variable, and what the custom getter returns is the result. ``caching_device``,
    ``partitioner`` (one variable is made whole), ``validate_shape``, ``use_resource``,
    ``synchronization`` and ``aggregation`` are TF1's and change nothing here.

    >>> import compiler as cc
    >>> with cc.Graph().as_default():
    ...     b = cc.get_variable("b", [4], initializer=cc.zeros_initializer())
    ...     print(b.shape, b.dtype.name)
    (4,) float32
    """
    if not isinstance(name, str) or not name:
        raise ValueError(located(f"get_variable: name must be a non-empty str, got {name!r}"))
    if constraint is not None and not callable(constraint):
        raise TypeError(located(f"get_variable: constraint must be a function of the variable, got {constraint!r}"))
    scope = _store(get_default_graph()).scopes[-1]
    full = f"{scope.name}/{name}" if scope.name else name
    custom_getter = custom_getter if custom_getter is not None else scope.custom_getter
    constraint = constraint if constraint is not None else scope.constraint
    if custom_getter is None:
        return _true_getter(full, shape, dtype, initializer, regularizer, trainable, collections, constraint)
    if not callable(custom_getter):
        raise TypeError(located(f"get_variable: custom_getter must be callable, got {custom_getter!r}"))
    return custom_getter(getter=_true_getter, name=full, shape=shape, dtype=dtype, initializer=initializer,
                         regularizer=regularizer, reuse=scope.reuse, trainable=trainable, collections=collections,
                         caching_device=caching_device, partitioner=partitioner, validate_shape=validate_shape,
                         use_resource=use_resource, constraint=constraint, synchronization=synchronization,
                         aggregation=aggregation)


def get_local_variable(name: str, shape: Sequence[int] | None = None, dtype: Any = None, initializer: Any = None,
                       regularizer: Callable[[Tensor], Any] | None = None, trainable: bool = False,
                       collections: Sequence[str] | None = None, **tf1_arguments: Any) -> Variable:
    """``get_variable`` for a local variable (TF1's ``get_local_variable``): not trainable, in
    ``GraphKeys.LOCAL_VARIABLES`` (and ``collections``), so ``local_variables_initializer`` resets it.

    >>> import compiler as cc
    >>> with cc.Graph().as_default():
    ...     count = cc.get_local_variable("count", [], initializer=cc.zeros_initializer())
    ...     print(count in cc.local_variables(), count in cc.global_variables())
    True False
    """
    return get_variable(name, shape, dtype, initializer, regularizer, trainable,
                        list(collections or []) + [GraphKeys.LOCAL_VARIABLES], **tf1_arguments)


def _true_getter(name: str, shape: Sequence[int] | None = None, dtype: Any = None, initializer: Any = None,
                 regularizer: Callable[[Tensor], Any] | None = None, trainable: bool | None = None,
                 collections: Sequence[str] | None = None, constraint: Callable[[Tensor], Any] | None = None,
                 **tf1_arguments: Any) -> Variable:
    """The variable named ``name`` (a full name) made or returned as the open scope says: the
    ``getter`` a custom getter is given."""
    unknown = sorted(set(tf1_arguments) - {"caching_device", "partitioner", "validate_shape", "use_resource",
                                           "synchronization", "aggregation", "reuse"})
    if unknown:
        raise TypeError(located(f"get_variable: unexpected argument(s) {', '.join(unknown)}"))
    trainable = True if trainable is None else trainable
    graph = get_default_graph()
    store = _store(graph)
    scope = store.scopes[-1]
    full = name
    existing = store.variables.get(full)
    sizes = None if shape is None else _variable_shape(shape, full)
    if existing is not None:
        if scope.reuse is False:
            raise ValueError(located(f"Variable {full} already exists, disallowed. Did you mean to set reuse=True "
                                     f"or reuse=AUTO_REUSE in its variable_scope? (made at {existing.op.location})"))
        if sizes is not None and sizes != existing.shape:
            raise ValueError(located(f"get_variable: trying to share variable {full}, but its shape {sizes} differs "
                                     f"from the existing {existing.shape}"))
        if dtype is not None and dtypes.as_dtype(dtype) != existing.dtype:
            raise ValueError(located(f"get_variable: trying to share variable {full}, but its dtype "
                                     f"{dtypes.as_dtype(dtype).name} differs from the existing {existing.dtype.name}"))
        return existing
    if scope.reuse is True:
        raise ValueError(located(f"Variable {full} does not exist, or was not created with get_variable(). Did you "
                                 f"mean to set reuse=AUTO_REUSE in its variable_scope?"))
    value = _initial_value(full, sizes, dtype, initializer if initializer is not None else scope.initializer,
                           scope.dtype)
    if full in graph._operation_names:
        raise ValueError(located(f"get_variable: the name {full!r} is already taken by an op made without "
                                 f"get_variable; choose another name"))
    # As TF1: made for the graph as a whole (no control dependencies, outside any cond or loop
    # being traced), named by the variable scope whatever name scopes are open.
    scope_name, _, leaf = full.rpartition("/")
    with graph.init_scope(), graph.absolute_name_scope(scope_name):
        variable = Variable(value, name=leaf, trainable=trainable, collections=collections, constraint=constraint)
    store.variables[full] = variable
    regularizer = regularizer if regularizer is not None else scope.regularizer
    if regularizer is not None:
        with graph.init_scope(), graph.absolute_name_scope(f"{full}/Regularizer"):
            loss = regularizer(variable)
        if loss is not None:
            graph.add_to_collection(GraphKeys.REGULARIZATION_LOSSES, loss)
    return variable


def _initial_value(full: str, sizes: tuple[int, ...] | None, dtype: Any, initializer: Any,
                   scope_dtype: Any) -> np.ndarray:
    if isinstance(initializer, type):    # TF1 takes the class too: cc.zeros_initializer
        initializer = initializer()
    if isinstance(initializer, Tensor):   # TF1: its value, the shape from it
        initializer = value_when_made(initializer, f"get_variable {full}")
    if initializer is not None and not callable(initializer):
        value = np.asarray(initializer)
        literal = not isinstance(initializer, (np.ndarray, np.generic))
        if dtype is not None:
            target = dtypes.as_dtype(dtype)
        elif value.dtype.kind == "f":
            target = dtypes.as_dtype(scope_dtype) if literal else value.dtype
        else:
            target = dtypes.int32 if literal and value.dtype.kind in "iu" else value.dtype
        if sizes is not None and value.shape != sizes:
            if value.size != 1:
                raise ValueError(located(f"get_variable {full}: an initial value of shape {value.shape} for shape "
                                         f"{sizes}"))
            value = np.full(sizes, value.reshape(()))
        return value.astype(target)
    if sizes is None:
        raise ValueError(located(f"get_variable {full}: the shape is needed to make a new variable (give shape=, "
                                 f"or an initial value as initializer)"))
    target = dtypes.as_dtype(dtype) if dtype is not None else dtypes.as_dtype(scope_dtype)
    if initializer is None:
        initializer = glorot_uniform_initializer() if dtypes.is_floating(target) else zeros_initializer()
    value = np.asarray(initializer(sizes, dtype=target))
    if value.shape != sizes:
        raise ValueError(located(f"get_variable {full}: the initializer made shape {value.shape}, not {sizes}"))
    return value.astype(target)

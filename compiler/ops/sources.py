"""Where values come from besides constants (``base.py``): placeholders, fed at each step, and
variables, whose values persist across steps and change only by the assignments of ``state.py``."""
from __future__ import annotations

from typing import Any, Sequence

import numpy as np

from .. import dtypes
from ..errors import DTypeError, ShapeError
from ..graph import (GraphKeys, Operation, Tensor, TensorShape, get_default_graph, located, session_for,
                     user_location)
from ..shapes import format_shape
from .array import identity
from .base import UNSHAPED, OpDef, apply, convert_to_tensor, number_array
from .rules import dtype_from_attrs, no_gradient, shape_from_attrs
from .state import VariableOp, check_flags, assign, assign_add, assign_sub, variables_initializer


Placeholder = OpDef("Placeholder", "source", shape_from_attrs, dtype_from_attrs, reference=None,
                    grad_rule=no_gradient)


def placeholder(dtype: Any, shape: Sequence[int | None] | None = None, name: str | None = None) -> Tensor:
    """A value fed at each ``Session.run``. ``None`` dims take the fed size (fixed per compile).
    Without a shape (TF1's ``placeholder(tf.float32)``, whose rank is open) it is a scalar: the
    shapes of everything built on it are known when the graph is built here; errors about it say so.

    >>> x = placeholder("float32", shape=(None, 3), name="x")
    >>> x.shape, placeholder("float32", name="keep_prob").shape
    ((None, 3), ())
    """
    dtype = dtypes.as_dtype(dtype)
    if shape is None:
        return apply(Placeholder, (), {"shape": (), "dtype": dtype, UNSHAPED: True}, name or "Placeholder")
    shape = placeholder_shape(shape, f"placeholder {name!r}" if name else "placeholder")
    return apply(Placeholder, (), {"shape": shape, "dtype": dtype}, name or "Placeholder")


def placeholder_shape(shape: Any, label: str) -> tuple[int | None, ...]:
    """A placeholder's shape as a tuple: a list of ints and Nones, or one int (a vector's length)."""
    if shape is None:
        raise ShapeError(located(f"{label}: a shape is required: () for a scalar, None for a size known only "
                                 f"when it is fed (e.g. (None, 3)); the rank must be known when the graph is built"))
    if isinstance(shape, (int, np.integer)) and not isinstance(shape, bool):
        shape = (shape,)    # TF1 takes a number for a vector's length
    if isinstance(shape, np.ndarray) and shape.ndim == 1:
        shape = shape.tolist()
    if not isinstance(shape, (list, tuple)) or not all(
            d is None or (isinstance(d, (int, np.integer)) and not isinstance(d, bool)) for d in shape):
        raise ShapeError(located(f"{label}: the shape must be a list of ints or None, got {shape!r}"))
    shape = tuple(None if d is None else int(d) for d in shape)
    if any(d is not None and d < 0 for d in shape):
        raise ShapeError(located(f"{label}: negative dimension in {shape}"))
    return shape


def placeholder_with_default(input: Any, shape: Sequence[int | None], name: str | None = None) -> Tensor:  # noqa: A002
    """``input`` unless a value is fed for it (TF1's ``placeholder_with_default``): e.g. a
    training flag that is False unless fed True. ``shape`` must fit ``input``'s shape, and is the
    tensor's static shape: a size None there may be fed at any size (a default batch, others fed).

    >>> import compiler as cc
    >>> from runtime import Session
    >>> training = cc.placeholder_with_default(False, shape=())
    >>> with Session() as sess:
    ...     bool(sess.run(training)), bool(sess.run(training, {training: True}))
    (False, True)
    """
    value = convert_to_tensor(input)
    given = placeholder_shape(shape, "placeholder_with_default")
    if len(given) != len(value.shape) or any(g is not None and v is not None and g != v
                                             for g, v in zip(given, value.shape)):
        raise ShapeError(located(f"placeholder_with_default: the shape {list(given)} does not fit the default's "
                                 f"{format_shape(value.shape)}"))
    result = identity(value, name=name or "PlaceholderWithDefault")
    result.shape = TensorShape(given)   # TF1's: a None size may be fed at any size
    return result


def _initial_as(given: Any, value: np.ndarray, target: np.dtype, name: str | None) -> np.ndarray:
    """A variable's initial value converted to ``target`` as ``constant`` converts: Python numbers
    only when nothing is lost (TF1 raises), numpy arrays as numpy's ``astype`` (as TF1), but never an
    integer wrapped into a narrower type."""
    label = f"Variable {name!r}" if name else "Variable"
    literal = not isinstance(given, (np.ndarray, np.generic))
    if literal:
        fitted = dtypes.convert_losslessly(value, target, literal=True)
        if fitted is None:
            raise DTypeError(located(f"{label}: the initial value {np.array2string(value, threshold=6)} cannot be "
                                     f"{target.name} without changing it; give numbers that fit, or a numpy array "
                                     f"(converted as astype)"))
        return fitted
    if value.dtype.kind in "iub" and target.kind in "iu" and value.size and (
            value.min() < np.iinfo(target).min or value.max() > np.iinfo(target).max):
        raise DTypeError(located(f"{label}: the initial value holds integers outside {target.name}'s range "
                                 f"(from {value.min()} to {value.max()}); they would wrap"))
    return value.astype(target)


def value_when_made(tensor: Tensor, label: str) -> np.ndarray:
    """The value of ``tensor`` computed now, with each op's numpy reference: TF1's
    ``Variable(<tensor>)`` (``tf.truncated_normal(...)``, ``tf.zeros(...)``, ``2 * w.initial_value``).
    Random ops give their first step's numbers (their seeds as always) and a variable its initial
    value; a placeholder, an assignment or a cond or loop has no value here and is refused."""
    needed: dict[int, Any] = {}
    stack = [tensor.op]
    while stack:
        op = stack.pop()
        if op.id not in needed:
            needed[op.id] = op
            stack.extend(t.op for t in op.inputs)
    values: dict[Tensor, np.ndarray] = {}
    for op in (needed[key] for key in sorted(needed)):   # an op's inputs were built before it
        output = op.outputs[0] if op.outputs else None
        if op.type == "Variable":
            values[output] = np.asarray(output.initial_value)  # type: ignore[union-attr]
        elif op.type == "Placeholder" or op.opdef.kind in ("control", "group", "host", "state") \
                or getattr(op, "traced_in", None) is not None or getattr(op, "region", None) is not None:
            raise TypeError(located(f"{label}: its initial value {tensor.name!r} is computed when the variable is "
                                    f"made, and it depends on {op.describe()} (built at {op.location}), "
                                    f"which has no value then; give a numpy value or an initializer, or assign "
                                    f"the variable in a run"))
        else:
            result = op.opdef.reference([values[t] for t in op.inputs], op.attrs)
            values[output] = np.array(result, dtype=output.dtype, order="C")  # type: ignore[union-attr]
    return values[tensor]


class Variable(Tensor):
    """A tensor whose value persists across ``Session.run`` calls in runtime-owned memory.

    Initialised from ``initial_value`` the first time a session uses it: a number, an array, or a
    tensor (TF1's ``Variable(cc.truncated_normal(...))``) computed when the variable is made (see
    ``value_when_made``; running the initializer again gives the same numbers).

    >>> v = Variable(np.zeros(3, "float32"), name="v")
    >>> v.shape, v.trainable
    ((3,), True)
    """

    def __init__(self, initial_value: Any = None, trainable: bool | None = None,
                 collections: Sequence[str] | None = None, validate_shape: bool = True, caching_device: Any = None,
                 name: str | None = None, variable_def: Any = None, dtype: Any = None,
                 constraint: Any = None) -> None:
        # TF1's arguments, in TF1's order. A variable's shape is its initial value's, and every op
        # runs where the Session's target says: validate_shape and caching_device change nothing.
        if name is not None and not isinstance(name, str):
            raise TypeError(located(f"Variable: name must be a string, got {name!r}"))
        label = f"Variable {name!r}" if name else "Variable"
        if isinstance(collections, str):
            raise ValueError(located(f"{label}: collections must be a list of collection names, got the string "
                                     f"{collections!r}"))
        if trainable is not None and not isinstance(trainable, (bool, np.bool_)):
            raise TypeError(located(f"{label}: trainable must be True or False, got {trainable!r} (TF1's order: "
                                    f"Variable(initial_value, trainable, collections, ...); pass name= by keyword)"))
        if variable_def is not None:
            raise ValueError(located(f"{label}: variable_def is not supported"))
        if constraint is not None and not callable(constraint):
            raise TypeError(located(f"{label}: constraint must be a function of the variable, got {constraint!r}"))
        if callable(initial_value):   # TF1's deferred initial value
            initial_value = initial_value()
        trainable = True if trainable is None else bool(trainable)
        if isinstance(initial_value, Tensor):
            initial_value = value_when_made(initial_value, label)
        value = number_array(initial_value, f"{label} (its initial value)")
        if dtype is None and not isinstance(initial_value, (np.ndarray, np.generic)):
            # Python numbers as in TF1 (numpy keeps its dtype): floats make float32 variables, ints
            # int32 (int64 where they do not fit).
            if value.dtype == np.float64:
                dtype = dtypes.float32
            elif value.dtype.kind in "iu" and dtypes.convert_losslessly(value, dtypes.int32, True) is not None:
                dtype = dtypes.int32
        target = dtypes.as_dtype(dtype or value.dtype)
        if value.dtype != target:
            value = _initial_as(initial_value, value, target, name)
        value = np.array(value, dtype=target, order="C")
        value.setflags(write=False)
        graph = get_default_graph()
        # No control dependencies (TF1 makes variables in init_scope): reading the variable must
        # not run the assignments around where it was made.
        with graph.no_control_dependencies():
            op = graph.add_operation(VariableOp, (), {"shape": value.shape, "dtype": value.dtype},
                                     [(value.shape, value.dtype)], name or "Variable", user_location())
        Tensor.__init__(self, op, 0, value.shape, value.dtype)
        op.outputs = (self,)
        self.initial_value = value
        self.trainable = trainable
        # As TF1: an optimizer sets the variable to constraint(variable) after each update.
        self.constraint = constraint
        self._initializer: Operation | None = None
        keys = list(collections) if collections is not None else [GraphKeys.GLOBAL_VARIABLES]
        if trainable and GraphKeys.TRAINABLE_VARIABLES not in keys:
            keys.append(GraphKeys.TRAINABLE_VARIABLES)
        for key in keys:
            graph.add_to_collection(key, self)

    def __repr__(self) -> str:
        return f"<Variable {self.op.name!r} shape={self.shape} dtype={self.dtype.name}>"

    def assign(self, value: Any, use_locking: bool | None = None, name: str | None = None,
               read_value: bool = True) -> Any:
        """An op that sets the variable to ``value`` when run; its output is the new value (the
        operation itself with ``read_value=False``, as TF1's)."""
        check_flags("assign", use_locking)
        result = assign(self, value, name=name)
        return result if read_value else result.op

    def assign_add(self, delta: Any, use_locking: bool | None = None, name: str | None = None,
                   read_value: bool = True) -> Any:
        check_flags("assign_add", use_locking)
        result = assign_add(self, delta, name=name)
        return result if read_value else result.op

    def assign_sub(self, delta: Any, use_locking: bool | None = None, name: str | None = None,
                   read_value: bool = True) -> Any:
        check_flags("assign_sub", use_locking)
        result = assign_sub(self, delta, name=name)
        return result if read_value else result.op

    def read_value(self) -> Tensor:
        return identity(self)

    def value(self) -> Tensor:
        """The variable's value (TF1's ``Variable.value()``)."""
        return identity(self)

    def initialized_value(self) -> Tensor:
        """The variable's value, initialized first (TF1's): a variable initializes itself when a
        run first uses it, and ``Variable(w.initialized_value() * 2)`` starts from twice ``w``'s
        initial value."""
        return identity(self)

    @property
    def initializer(self) -> Operation:
        """The op that sets the variable to its initial value (TF1's ``sess.run(v.initializer)``)."""
        if self._initializer is None:   # TF1 has it from the start: a finalized graph still gets it
            with self.graph.as_default(), self.graph.unfinalized():
                self._initializer = variables_initializer([self], name=f"{self.op.name}/Assign")
        return self._initializer

    def load(self, value: Any, session: Any = None) -> None:
        """Set the variable to ``value`` in ``session`` (the default session when None) now,
        without running an op (TF1's ``Variable.load``; the same as
        ``session.load_variable(variable, value)``)."""
        session_for(f"load {self.name!r}", session).load_variable(self, value)


def _collected(key: str, scope: Any, graph: Any) -> list[Variable]:
    """The collection ``key`` of ``graph`` (the default graph), filtered by ``scope`` as TF1's
    ``get_collection``: the names that match it from their start (a regular expression). A graph
    given first, in ``scope``'s place, is taken as the graph."""
    if scope is not None and not isinstance(scope, str):
        scope, graph = None, scope
    return (graph or get_default_graph()).get_collection(key, scope)


def global_variables(scope: str | None = None, graph: Any = None) -> list[Variable]:
    """The global variables (``scope``: only those whose names match it, e.g. "generator")."""
    return _collected(GraphKeys.GLOBAL_VARIABLES, scope, graph)


def local_variables(scope: str | None = None, graph: Any = None) -> list[Variable]:
    """The local variables (``scope``: only those whose names match it)."""
    return _collected(GraphKeys.LOCAL_VARIABLES, scope, graph)


def trainable_variables(scope: str | None = None, graph: Any = None) -> list[Variable]:
    """The trainable variables (``scope``: only those whose names match it, as TF1's
    ``trainable_variables("generator")`` for a GAN's two optimizers)."""
    return _collected(GraphKeys.TRAINABLE_VARIABLES, scope, graph)

"""Where values come from: placeholders (fed each step), constants, and variables (state)."""
from __future__ import annotations

from typing import Any, Sequence

import numpy as np

from .. import dtypes
from ..errors import DTypeError, ShapeError
from ..graph import GraphKeys, Tensor, get_default_graph, user_location
from .base import OpDef, apply, no_gradient


def _attr_shape(shapes: Sequence[tuple], attrs: dict) -> tuple:
    return tuple(attrs["shape"])


def _attr_dtype(types: Sequence[np.dtype], attrs: dict) -> np.dtype:
    return attrs["dtype"]


Placeholder = OpDef("Placeholder", "source", _attr_shape, _attr_dtype, reference=None,
                    grad_rule=no_gradient)
Const = OpDef("Const", "source", _attr_shape, _attr_dtype,
              reference=lambda values, attrs: attrs["value"], grad_rule=no_gradient)
VariableOp = OpDef("Variable", "source", _attr_shape, _attr_dtype, reference=None,
                   grad_rule=no_gradient)


def placeholder(dtype: Any, shape: Sequence[int | None] | None = None, name: str | None = None) -> Tensor:
    """A value fed at each ``Session.run``. ``None`` dims take the fed size (fixed per compile).

    >>> x = placeholder("float32", shape=(None, 3), name="x")
    >>> x.shape
    (None, 3)
    """
    if shape is None:
        raise ShapeError(f"placeholder {name!r}: a shape is required (use None for unknown dims) "
                         f"(at {user_location()})")
    shape = tuple(None if d is None else int(d) for d in shape)
    if any(d is not None and d < 0 for d in shape):
        raise ShapeError(f"placeholder {name!r}: negative dimension in {shape} (at {user_location()})")
    return apply(Placeholder, (), {"shape": shape, "dtype": dtypes.as_dtype(dtype)}, name or "Placeholder")


def constant(value: Any, dtype: Any = None, shape: Sequence[int] | None = None,
             name: str | None = None) -> Tensor:
    """A constant tensor.

    >>> constant([1.0, 2.0], dtype="float32").shape
    (2,)
    """
    array = np.asarray(value)
    if dtype is None:
        # Python floats default to float32 and ints to int32, as in TF1.
        if not isinstance(value, np.ndarray) and not isinstance(value, np.generic):
            dtype = {"f": dtypes.float32, "i": dtypes.int32, "u": dtypes.int32, "b": dtypes.bool_}.get(
                array.dtype.kind, array.dtype)
        else:
            dtype = array.dtype
    dtype = dtypes.as_dtype(dtype)
    try:
        array = array.astype(dtype)
    except (TypeError, ValueError) as exc:
        raise DTypeError(f"constant {name!r}: cannot convert value to {dtype.name} "
                         f"(at {user_location()})") from exc
    if shape is not None:
        try:
            array = np.broadcast_to(array, tuple(shape)).copy()
        except ValueError:
            raise ShapeError(f"constant {name!r}: value of shape {array.shape} does not fit shape "
                             f"{tuple(shape)} (at {user_location()})") from None
    array = np.array(array, order="C")
    array.setflags(write=False)
    return apply(Const, (), {"value": array, "shape": array.shape, "dtype": dtype}, name or "Const")


class Variable(Tensor):
    """A tensor whose value persists across ``Session.run`` calls in runtime-owned memory.

    Initialised from ``initial_value`` the first time a session uses it.

    >>> v = Variable(np.zeros(3, "float32"), name="v")
    >>> v.shape, v.trainable
    ((3,), True)
    """

    def __init__(self, initial_value: Any, name: str | None = None, trainable: bool = True,
                 dtype: Any = None, collections: Sequence[str] | None = None) -> None:
        if isinstance(initial_value, Tensor):
            raise TypeError("Variable needs a concrete initial value (numpy array or Python number), "
                            f"not the tensor {initial_value.name!r} (at {user_location()})")
        value = np.asarray(initial_value)
        if dtype is None and value.dtype == np.float64 and not isinstance(initial_value, np.ndarray):
            dtype = dtypes.float32  # Python floats make float32 variables, as in TF1
        value = np.array(value, dtype=dtypes.as_dtype(dtype or value.dtype), order="C")
        value.setflags(write=False)
        graph = get_default_graph()
        op = graph.add_operation(VariableOp, (), {"shape": value.shape, "dtype": value.dtype},
                                 [(value.shape, value.dtype)], name or "Variable", user_location())
        Tensor.__init__(self, op, 0, value.shape, value.dtype)
        op.outputs = (self,)
        self.initial_value = value
        self.trainable = trainable
        keys = list(collections) if collections is not None else [GraphKeys.GLOBAL_VARIABLES]
        if trainable and GraphKeys.TRAINABLE_VARIABLES not in keys:
            keys.append(GraphKeys.TRAINABLE_VARIABLES)
        for key in keys:
            graph.add_to_collection(key, self)

    def __repr__(self) -> str:
        return f"<Variable {self.op.name!r} shape={self.shape} dtype={self.dtype.name}>"

    def assign(self, value: Any, name: str | None = None) -> Tensor:
        """An op that sets the variable to ``value`` when run; its output is the new value."""
        from .state import assign
        return assign(self, value, name=name)

    def assign_add(self, delta: Any, name: str | None = None) -> Tensor:
        from .state import assign_add
        return assign_add(self, delta, name=name)

    def assign_sub(self, delta: Any, name: str | None = None) -> Tensor:
        from .state import assign_sub
        return assign_sub(self, delta, name=name)

    def read_value(self) -> Tensor:
        from .array import identity
        return identity(self)

    def load(self, value: Any, session: Any) -> None:
        """Set the variable to ``value`` in ``session`` now, without running an op (TF1's
        ``Variable.load``; the same as ``session.load_variable(variable, value)``)."""
        session.load_variable(self, value)


def global_variables(graph: Any = None) -> list[Variable]:
    return (graph or get_default_graph()).get_collection(GraphKeys.GLOBAL_VARIABLES)


def trainable_variables(graph: Any = None) -> list[Variable]:
    return (graph or get_default_graph()).get_collection(GraphKeys.TRAINABLE_VARIABLES)

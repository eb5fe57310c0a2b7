"""The ``Optimizer`` base class (TensorFlow 1.x's API): gradients, slots and the update step.

An optimizer turns ``[(grad, var), …]`` into one ``Operation`` that, when run, applies an update to
every variable. Inside one compiled step every read of a variable sees its value from the start of
the step and every assignment takes effect at the end, so an update is written directly from the
start-of-step values of the variable and its slots (no control-dependency ordering is needed).

Subclasses implement, as in TF1:

- ``_create_slots(var_list)``: make the per-variable state (``self._zeros_slot(var, "m", self._name)``);
- ``_prepare()``: read the hyperparameters once per ``apply_gradients`` call;
- ``_apply_dense(grad, var)``: the update of one variable: an assignment, an ``Operation``, or a
  list/tuple of them;
- ``_finish(update_ops, name)``: group the updates (and add any per-step updates of non-slot state).

A gradient that comes only from ``gather`` (an embedding lookup) is, in TF1, an ``IndexedSlices``
that the sparse kernels of Momentum, RMSProp, Adadelta and Ftrl (and AdamW's weight decay) apply
to the looked-up rows alone: the other rows and their slots keep their values, where the dense
formula with a zero gradient would still move them (Ftrl zeroes them). Here such a gradient is a
dense scatter, and those optimizers (``_updates_only_gathered_rows``) restrict their assignments
to the rows the lookups hit with ``_looked_up(value, otherwise)``. The others' dense update equals
TF1's sparse one (Adam's sparse kernel also updates every row). The gradient may be scaled by a
scalar on the way (``clip_by_global_norm``); one accumulated in a variable or averaged across
processes is dense.
"""
from __future__ import annotations

from numbers import Real
from typing import Any, Iterable, Sequence

import numpy as np

import compiler as cc
from compiler import dtypes
from compiler.autodiff import aggregation_method_value
from compiler.clipping import DENSE_CLIPS, ROW_WISE_CLIPS
from compiler.graph import Graph, Operation, Tensor, located

GradsAndVars = list  # [(Tensor | None, Variable), ...]


def _flatten(updates: Any) -> list[Any]:
    if isinstance(updates, (list, tuple)):
        return [item for part in updates for item in _flatten(part)]
    return [updates]


class Optimizer:
    """Base class of the optimizers: ``minimize`` = ``compute_gradients`` + ``apply_gradients``.

    Not used directly; subclass it and implement ``_create_slots``, ``_prepare``, ``_apply_dense``
    (and ``_finish`` if the optimizer has per-step state of its own).

    >>> import numpy as np
    >>> import compiler as cc
    >>> import optim
    >>> w = cc.Variable(np.ones(3), name="w")
    >>> loss = cc.reduce_sum(cc.square(w))
    >>> opt = optim.GradientDescentOptimizer(0.1)
    >>> grads_and_vars = opt.compute_gradients(loss)          # [(grad, w)]
    >>> train = opt.apply_gradients(grads_and_vars)          # one Operation; run it in a Session

    ``gate_gradients`` (TF1's values) and what each means in a compiled step, where kernels run one
    after another in the order their nodes were built:

    - ``GATE_NONE`` (0): no ordering asked for.
    - ``GATE_OP`` (1, the default): all input gradients of an op are computed before any of them is
      used, so that no race changes them. A compiled step has no such race: its kernels run one
      after another, and a gradient is a value that no kernel overwrites while it is still read.
    - ``GATE_GRAPH`` (2): no variable changes before every gradient is computed. In a compiled
      step every gradient is computed from the values the variables had at the start of the step:
      an update is moved earlier only past kernels that do not read the variable it writes (to free
      its gradient sooner), never before one that reads its old value. So every gradient sees the
      pre-update values, which is what GATE_GRAPH guards.

    The three give the same results; no gate adds a node or changes the compiled step.
    """

    GATE_NONE = 0
    GATE_OP = 1
    GATE_GRAPH = 2
    # Whether a gradient from gather updates only the looked-up rows (see the module docstring).
    _updates_only_gathered_rows = False

    def __init__(self, use_locking: bool = False, name: str | None = None) -> None:
        if not name:
            raise ValueError(located(f"{type(self).__name__}: an Optimizer needs a non-empty name, got {name!r}"))
        self._use_locking = use_locking  # kept for TF1 compatibility; updates are never racy here
        self._name = name
        # slot name -> {variable -> slot variable}
        self._slots: dict[str, dict[cc.Variable, cc.Variable]] = {}
        # (name, graph) -> non-slot variable (e.g. Adam's beta1_power), one per graph
        self._non_slot_dict: dict[tuple[str, Graph], cc.Variable] = {}
        self._hyper_cache: dict[tuple[str, np.dtype], Tensor] = {}
        self._rows_looked_up: Tensor | None = None   # while one variable's update is built

    def get_name(self) -> str:
        return self._name

    # -- the public API ----------------------------------------------------------------------------
    def minimize(self, loss: Tensor, global_step: cc.Variable | None = None,
                 var_list: Sequence[cc.Variable] | None = None, gate_gradients: int = GATE_OP,
                 aggregation_method: int | None = None, colocate_gradients_with_ops: bool = False,
                 name: str | None = None, grad_loss: Any = None) -> Operation:
        """An Operation that updates ``var_list`` (default: the trainable variables) to reduce
        ``loss``, and increments ``global_step`` by one if given. ``gate_gradients``,
        ``aggregation_method`` and ``colocate_gradients_with_ops`` are as in ``compute_gradients``.

        Raises ``cc.NoGradientError`` if no variable has a path to ``loss``.

        >>> import numpy as np
        >>> import compiler as cc
        >>> import optim
        >>> w = cc.Variable(np.array([3.0, -2.0]), name="w")
        >>> step = optim.get_or_create_global_step()
        >>> train = optim.MomentumOptimizer(0.1, 0.9).minimize(cc.reduce_sum(w * w), global_step=step)
        """
        grads_and_vars = self.compute_gradients(
            loss, var_list=var_list, gate_gradients=gate_gradients, aggregation_method=aggregation_method,
            colocate_gradients_with_ops=colocate_gradients_with_ops, grad_loss=grad_loss)
        if all(grad is None for grad, _ in grads_and_vars):
            names = [v.name for _, v in grads_and_vars]
            raise cc.NoGradientError(
                located("No gradients provided for any variable, check your graph for ops that do not "
                        f"support gradients, between variables {names} and loss {loss.name!r}"))
        return self.apply_gradients(grads_and_vars, global_step=global_step, name=name)

    def compute_gradients(self, loss: Tensor, var_list: Sequence[cc.Variable] | None = None,
                          gate_gradients: int = GATE_OP, aggregation_method: int | None = None,
                          colocate_gradients_with_ops: bool = False, grad_loss: Any = None) -> GradsAndVars:
        """``[(grad, var), …]`` for the variables in ``var_list`` (a Variable, or a list, tuple or
        dict of them; default: the graph's trainable variables); ``grad`` is ``None`` for a variable
        with no path to ``loss`` and for integer variables.
        ``grad_loss`` weights the loss (ones by default). ``aggregation_method`` (a
        ``cc.AggregationMethod``) says how contributions to one gradient are summed;
        ``colocate_gradients_with_ops`` has no effect (a step runs on one device).

        ``gate_gradients`` is ``Optimizer.GATE_NONE``, ``GATE_OP`` or ``GATE_GRAPH``; see the class
        docstring for what each guarantees in a compiled step (every value gives the same results).

        >>> import numpy as np
        >>> import compiler as cc
        >>> import optim
        >>> a = cc.Variable(np.ones(2), name="a")
        >>> b = cc.Variable(np.ones(2), name="b")
        >>> pairs = optim.GradientDescentOptimizer(0.1).compute_gradients(cc.reduce_sum(a * a), [a, b])
        >>> pairs[1][0] is None
        True
        """
        if gate_gradients not in (self.GATE_NONE, self.GATE_OP, self.GATE_GRAPH):
            raise ValueError(located(f"{self._name}: gate_gradients must be Optimizer.GATE_NONE (0), GATE_OP (1) "
                                     f"or GATE_GRAPH (2), got {gate_gradients!r}"))
        aggregation_method_value(aggregation_method, self._name)
        loss = cc.convert_to_tensor(loss)
        if not dtypes.is_floating(loss.dtype):
            raise cc.DTypeError(located(f"{self._name}: the loss {loss.name!r} is {loss.dtype.name}; "
                                        f"it must be float32 or float64"))
        graph = loss.graph
        if var_list is None:
            var_list = graph.get_collection(cc.GraphKeys.TRAINABLE_VARIABLES)
        variables: list[cc.Variable] = []
        seen: set[int] = set()
        for var in _flatten_var_list(var_list):
            if not isinstance(var, cc.Variable):
                raise TypeError(located(f"{self._name}: var_list holds {var!r}, which is not a Variable"))
            if var.graph is not graph:
                raise cc.GraphMismatchError(located(f"{self._name}: variable {var.name!r} belongs to another "
                                                    f"graph than the loss {loss.name!r}"))
            if id(var) not in seen:   # duplicates count once
                seen.add(id(var))
                variables.append(var)
        if not variables:
            raise ValueError(located(f"{self._name}: no variables to optimize"))
        # Integer (and bool) variables carry no gradient, as in TF1: their pairs hold None.
        floating = [var for var in variables if dtypes.is_floating(var.dtype)]
        grads = cc.gradients(loss, floating, grad_ys=grad_loss, gate_gradients=gate_gradients == self.GATE_OP,
                             aggregation_method=aggregation_method,
                             colocate_gradients_with_ops=colocate_gradients_with_ops) if floating else []
        by_variable = {id(var): grad for var, grad in zip(floating, grads)}
        return [(by_variable.get(id(var)), var) for var in variables]

    def apply_gradients(self, grads_and_vars: Iterable[tuple[Any, cc.Variable]],
                        global_step: cc.Variable | None = None, name: str | None = None) -> Operation:
        """One Operation that applies every ``(grad, var)`` whose grad is not None (and increments
        ``global_step`` by one if given). Raises ``cc.NoGradientError`` if every grad is None.

        >>> import numpy as np
        >>> import compiler as cc
        >>> import optim
        >>> w = cc.Variable(np.ones(3), name="w")
        >>> opt = optim.GradientDescentOptimizer(0.5)
        >>> (g, _), = opt.compute_gradients(cc.reduce_sum(w * w), [w])
        >>> train = opt.apply_gradients([(g * 0.5, w)])            # e.g. a scaled gradient
        """
        pairs = self._check_grads_and_vars(grads_and_vars)
        var_list = [v for g, v in pairs if g is not None]
        if not var_list:
            raise cc.NoGradientError(located("No gradients provided for any variable: "
                                             f"{[v.name for _, v in pairs]}"))
        if global_step is not None:
            if not isinstance(global_step, cc.Variable) or not dtypes.is_integer(global_step.dtype):
                raise TypeError(located(f"{self._name}: global_step must be an integer Variable, got "
                                        f"{global_step!r}"))
            if global_step.graph is not var_list[0].graph:
                raise cc.GraphMismatchError(located(f"{self._name}: global_step belongs to another graph"))
        graph = var_list[0].graph
        with graph.init_scope():
            self._create_slots(var_list)
        scope = name or self._name
        with graph.as_default():
            with graph.nested_scope(scope):
                self._hyper_cache = {}
                self._prepare()
                update_ops: list[Any] = []
                for grad, var in pairs:
                    if grad is None:
                        continue
                    with graph.nested_scope("update_" + var.op.name):
                        grad = _only_rows_looked_up(grad, var)
                        if self._updates_only_gathered_rows:
                            self._rows_looked_up = _rows_looked_up(grad, var)
                        try:
                            updates = _flatten(self._apply_dense(grad, var))
                        finally:
                            self._rows_looked_up = None
                        update_ops.extend(updates)
                        constraint = getattr(var, "constraint", None)
                        if constraint is not None:   # as TF1: projected after its update
                            with graph.control_dependencies(updates):
                                update_ops.append(cc.assign(var, constraint(var)))
                if global_step is not None:
                    update_ops.append(cc.assign_add(global_step, 1))
            return self._finish(update_ops, scope)

    def get_slot(self, var: cc.Variable, name: str) -> cc.Variable | None:
        """The slot variable ``name`` ("momentum", "m", "v"…) made for ``var``, or None.

        >>> import numpy as np
        >>> import compiler as cc
        >>> import optim
        >>> with cc.Graph().as_default():
        ...     w = cc.Variable(np.ones(2), name="w")
        ...     opt = optim.MomentumOptimizer(0.1, 0.9)
        ...     train = opt.minimize(cc.reduce_sum(w * w), var_list=[w])
        >>> opt.get_slot(w, "momentum").op.name, opt.get_slot_names()
        ('w/Momentum', ['momentum'])
        """
        return self._slots.get(name, {}).get(var)

    def get_slot_names(self) -> list[str]:
        """The sorted names of the slots this optimizer makes (e.g. ``["m", "v"]`` for Adam)."""
        return sorted(self._slots)

    def variables(self) -> list[cc.Variable]:
        """Every variable this optimizer created (slots and non-slot state such as beta powers)."""
        found = [v for slots in self._slots.values() for v in slots.values()]
        found.extend(self._non_slot_dict.values())
        return sorted(found, key=lambda v: v.op.id)

    # -- for subclasses ----------------------------------------------------------------------------
    def _create_slots(self, var_list: list[cc.Variable]) -> None:
        """Create the slots ``_apply_dense`` needs for each variable (none by default)."""

    def _prepare(self) -> None:
        """Read hyperparameters once per ``apply_gradients`` (e.g. call a callable learning rate)."""

    def _apply_dense(self, grad: Tensor, var: cc.Variable) -> Any:
        raise NotImplementedError(f"{type(self).__name__} does not implement _apply_dense")

    def _finish(self, update_ops: list[Any], name: str) -> Operation:
        """Group the updates into the Operation that ``apply_gradients`` returns."""
        return cc.group(*update_ops, name=name)

    def _looked_up(self, value: Any, otherwise: Any) -> Any:
        """``value`` in the rows of the variable being updated that its gather-only gradient looked
        up, ``otherwise`` elsewhere; ``value`` everywhere for any other gradient."""
        if self._rows_looked_up is None:
            return value
        return cc.where(self._rows_looked_up, value, otherwise)

    def _zeros_slot(self, var: cc.Variable, slot_name: str, op_name: str) -> cc.Variable:
        """The slot ``slot_name`` of ``var``, created as zeros named ``<var>/<op_name>`` if new."""
        slots = self._slots.setdefault(slot_name, {})
        if var not in slots:
            # Non-trainable and in GLOBAL_VARIABLES only; unique_name adds _1, _2… for more slots.
            slots[var] = cc.Variable(np.zeros_like(var.initial_value), name=f"{var.op.name}/{op_name}",
                                     trainable=False, collections=[cc.GraphKeys.GLOBAL_VARIABLES])
        return slots[var]

    def _get_or_make_slot(self, var: cc.Variable, value: Any, slot_name: str,
                          op_name: str) -> cc.Variable:
        """The slot ``slot_name`` of ``var``, created with initial value ``value`` if new."""
        slots = self._slots.setdefault(slot_name, {})
        if var not in slots:
            initial = np.broadcast_to(np.asarray(value, dtype=var.dtype), var.shape).copy()
            slots[var] = cc.Variable(initial, name=f"{var.op.name}/{op_name}", trainable=False,
                                     collections=[cc.GraphKeys.GLOBAL_VARIABLES])
        return slots[var]

    def _create_non_slot_variable(self, initial_value: Any, name: str, colocate_with: cc.Variable
                                  ) -> cc.Variable:
        """A non-trainable variable shared by all of this optimizer's updates in one graph, with the
        dtype of ``colocate_with`` (TF1 places it beside that variable but makes it float32 from
        the Python number: here a float64 model's beta powers are float64)."""
        graph = colocate_with.graph
        key = (name, graph)
        if key not in self._non_slot_dict:
            with graph.init_scope():
                self._non_slot_dict[key] = cc.Variable(
                    np.asarray(initial_value, dtype=colocate_with.dtype), name=name, trainable=False,
                    collections=[cc.GraphKeys.GLOBAL_VARIABLES])
        return self._non_slot_dict[key]

    def _get_non_slot_variable(self, name: str, graph: Graph | None = None) -> cc.Variable | None:
        return self._non_slot_dict.get((name, graph or cc.get_default_graph()))

    def _hyper(self, name: str, value: Any, dtype: np.dtype) -> Tensor:
        """A hyperparameter as a tensor of ``dtype``: a constant for a Python number, the tensor
        itself (cast if its dtype differs) for a Tensor. Constants are shared within one step."""
        if isinstance(value, Tensor):
            if value.shape != ():
                raise ValueError(located(f"{self._name}: {name} must be a scalar, got the tensor {value.name!r} "
                                         f"of shape {value.shape}"))
            if value.graph is not cc.get_default_graph():
                raise cc.GraphMismatchError(located(f"{self._name}: {name} {value.name!r} belongs to another graph "
                                                    f"than the variables it updates"))
            if not (dtypes.is_floating(value.dtype) or dtypes.is_integer(value.dtype)):
                raise cc.DTypeError(located(f"{self._name}: {name} {value.name!r} is {value.dtype.name}; it must "
                                            f"be a number"))
            return cc.cast(value, dtype)
        if isinstance(value, (bool, np.bool_)) or not isinstance(value, (Real, np.ndarray, np.generic)) \
                or np.ndim(value) != 0 or np.asarray(value).dtype.kind not in "iuf":
            raise (ValueError if value is None or np.ndim(value) else TypeError)(located(
                f"{self._name}: {name} must be a number or a scalar Tensor, got {value!r}"))
        key = (name, np.dtype(dtype))
        if key not in self._hyper_cache:
            self._hyper_cache[key] = cc.constant(np.asarray(value, dtype=dtype), name=name)
        return self._hyper_cache[key]

    # -- checks ------------------------------------------------------------------------------------
    def _check_grads_and_vars(self, grads_and_vars: Iterable[tuple[Any, cc.Variable]]
                              ) -> list[tuple[Tensor | None, cc.Variable]]:
        pairs: list[tuple[Tensor | None, cc.Variable]] = []
        paired: set[int] = set()   # the ids of the variables in pairs
        for item in grads_and_vars:
            try:
                grad, var = item
            except (TypeError, ValueError):
                raise TypeError(located(f"{self._name}: grads_and_vars must hold (grad, var) pairs, got "
                                        f"{item!r}")) from None
            if not isinstance(var, cc.Variable):
                raise TypeError(located(f"{self._name}: {var!r} is not a Variable"))
            if id(var) in paired:
                raise ValueError(located(f"{self._name}: variable {var.name!r} appears more than once in "
                                         f"grads_and_vars"))
            if grad is not None:
                if not isinstance(grad, Tensor):
                    with var.graph.as_default():
                        grad = cc.convert_to_tensor(np.asarray(grad, dtype=var.dtype))
                if grad.graph is not var.graph:
                    raise cc.GraphMismatchError(located(f"{self._name}: the gradient {grad.name!r} and variable "
                                                        f"{var.name!r} belong to different graphs"))
                if grad.dtype != var.dtype:
                    raise cc.DTypeError(located(f"{self._name}: the gradient {grad.name!r} is {grad.dtype.name} "
                                                f"but variable {var.name!r} is {var.dtype.name}"))
                if not dtypes.is_floating(var.dtype):
                    raise cc.DTypeError(located(f"{self._name}: cannot update the {var.dtype.name} variable "
                                                f"{var.name!r}"))
                if len(grad.shape) != len(var.shape) or any(g is not None and g != v
                                                             for g, v in zip(grad.shape, var.shape)):
                    raise cc.ShapeError(located(f"{self._name}: the gradient {grad.name!r} of shape {grad.shape} "
                                                f"does not match variable {var.name!r} of shape {var.shape}"))
            if pairs and var.graph is not pairs[0][1].graph:
                raise cc.GraphMismatchError(located(f"{self._name}: variables {pairs[0][1].name!r} and {var.name!r} "
                                                    f"belong to different graphs"))
            pairs.append((grad, var))
            paired.add(id(var))
        if not pairs:
            raise ValueError(located(f"{self._name}: no variables provided"))
        return pairs


def _flatten_var_list(var_list: Any) -> list[Any]:
    """TF1's ``nest.flatten`` of a ``var_list``: a Variable alone, or lists, tuples and dicts
    (in the order of their sorted keys) of them."""
    if isinstance(var_list, cc.Variable):
        return [var_list]
    if isinstance(var_list, dict):
        return [v for key in sorted(var_list) for v in _flatten_var_list(var_list[key])]
    if isinstance(var_list, (list, tuple)):
        return [v for item in var_list for v in _flatten_var_list(item)]
    if isinstance(var_list, Tensor) or not isinstance(var_list, Iterable):
        return [var_list]   # named in the caller's error
    return [v for item in var_list for v in _flatten_var_list(item)]




def _gathered_indices(grad: Tensor, zeros_moved: list[Tensor] | None = None) -> list[Tensor] | None:
    """The indices of the row lookups (``gather`` along axis 0) whose gradients, summed, are
    ``grad``; None if anything else contributes to it. The clips on the way that may turn the
    zeros of rows not looked up into something else are appended to ``zeros_moved``."""
    clipped = ROW_WISE_CLIPS.get(grad)
    if clipped is not None:
        return _gathered_indices(clipped, zeros_moved)
    if grad in DENSE_CLIPS:
        return None
    name = grad.op.opdef.name
    if name == "GatherGrad":
        return [grad.op.inputs[1]] if grad.op.attrs["axis"] == 0 else None
    inputs = grad.op.inputs
    if name in ("Identity", "Neg", "Cast"):   # a table cast before its lookup: TF1 casts the slices
        return _gathered_indices(inputs[0], zeros_moved)
    # clip_by_value with scalar bounds (and clip_by_norm, above): TF1 clips the slices and keeps
    # them slices (the rows not looked up are not updated, whatever the clip makes of their zeros).
    if name == "ClipByValue" and all(all(d == 1 for d in bound.shape) for bound in inputs[1:]):
        if zeros_moved is not None and not _brackets_zero(inputs[1], inputs[2]):
            zeros_moved.append(grad)
        return _gathered_indices(inputs[0], zeros_moved)
    # Scaled by a scalar (clip_by_global_norm's factor, an average's 1/n): still zero off the rows.
    # Not a scaling that gradients() made for a table scaled before its lookup (gather(w * 2.0,
    # ids)): TF1's Mul and Div gradients turn the slices into a dense gradient there.
    if name in ("Mul", "Div") and len(inputs) == 2 and grad.op.gradient_of is None:
        scalars = [all(d == 1 for d in t.shape) for t in inputs]
        for position in ((0,) if name == "Div" else (0, 1)):
            if scalars[1 - position] and inputs[position].shape == grad.shape:
                return _gathered_indices(inputs[position], zeros_moved)
        return None
    if name in ("Add", "AddN") and grad.op.inputs and all(t.shape == grad.shape for t in grad.op.inputs):
        found: list[Tensor] = []
        for term in grad.op.inputs:
            indices = _gathered_indices(term, zeros_moved)
            if indices is None:
                return None
            found.extend(indices)
        return found
    return None


def _brackets_zero(low: Tensor, high: Tensor) -> bool:
    """Whether clipping to [low, high] certainly leaves 0 at 0 (both bounds constants around it)."""
    if low.op.opdef.name != "Const" or high.op.opdef.name != "Const":
        return False
    return bool(np.all(np.asarray(low.op.attrs["value"]) <= 0) and np.all(np.asarray(high.op.attrs["value"]) >= 0))


def _only_rows_looked_up(grad: Tensor, var: cc.Variable) -> Tensor:
    """``grad`` with the rows not looked up set back to zero where a clip on its way may have moved
    them (clip_by_value(g, 0.5, 1.0) makes their zeros 0.5): TF1 clips only the looked-up slices."""
    zeros_moved: list[Tensor] = []
    if _gathered_indices(grad, zeros_moved) is None or not zeros_moved:
        return grad
    rows = _rows_looked_up(grad, var)
    return grad if rows is None else cc.where(rows, grad, cc.zeros_like(grad))


def _rows_looked_up(grad: Tensor, var: cc.Variable) -> Tensor | None:
    """A bool tensor of shape ``[rows, 1, ...]``: which rows of ``var`` the lookups behind its
    gather-only gradient hit (ids outside the rows hit none); None for any other gradient."""
    indices = _gathered_indices(grad)
    if indices is None or not var.shape:
        return None
    with grad.graph.nested_scope("rows_looked_up"):
        flat = cc.concat([cc.reshape(cc.cast(i, "int64"), (-1,)) for i in indices], axis=0)
        hits = cc.unsorted_segment_sum(cc.ones_like(flat, dtype="float32"), flat, var.shape[0])
        return cc.reshape(hits > 0.0, (var.shape[0],) + (1,) * (len(var.shape) - 1))


def _call_if_callable(value: Any) -> Any:
    """TF1 allows hyperparameters given as zero-argument callables, read at ``_prepare``."""
    return value() if callable(value) and not isinstance(value, Tensor) else value


HyperParameter = Any  # a Python number, a Tensor, or a zero-argument callable returning either

"""``cc.nn.rnn_cell`` and ``cc.nn.dynamic_rnn``: TF1's recurrent cells and the functions that run
them over a sequence, as compositions of ``cc`` ops (no rules of their own).

A cell is called as ``output, new_state = cell(inputs, state)`` on one time step; it makes its
variables with ``get_variable`` the first time, in the variable scope open around it (its own
name inside: ``rnn/basic_lstm_cell/kernel``, as TF1's), and shares them on later calls.
``dynamic_rnn`` runs a cell over the time axis with ``cc.scan`` (one compiled loop; its gradient
is backpropagation through time), ``static_rnn`` over a Python list of steps.

>>> import numpy as np, compiler as cc
>>> from runtime import Session
>>> graph = cc.Graph()
>>> with graph.as_default():
...     x = cc.placeholder("float32", (None, 5, 3), name="x")
...     outputs, state = cc.nn.dynamic_rnn(cc.nn.rnn_cell.BasicLSTMCell(4), x, dtype="float32")
...     names = [v.op.name for v in cc.trainable_variables()]
>>> outputs.shape, state.h.shape, names
((None, 5, 4), (None, 4), ['rnn/basic_lstm_cell/kernel', 'rnn/basic_lstm_cell/bias'])
>>> with Session(graph) as sess:
...     sess.run(outputs, {x: np.ones((2, 5, 3), "float32")}).shape
(2, 5, 4)
"""
from __future__ import annotations

import hashlib
import itertools
from typing import Any, Callable, Iterator, NamedTuple, Sequence

import numpy as np

from . import dtypes
from .control_flow import flatten, scan
from .graph import Tensor, TensorShape, located
from .initializers import constant_initializer, zeros_initializer
from .ops.array import ones_like, reshape, transpose
from .ops.array import shape as shape_of
from .ops.base import composite_scope, convert_to_tensor
from .ops.creation import zeros
from .ops.elementwise import cast, clip_by_value, less, minimum, sigmoid, tanh, where
from .ops.gather import gather
from .ops.joining import concat, split
from .ops.linalg import matmul
from .ops.nn import dropout
from .ops.reduction import cumsum
from .ops.slicing import reverse
from .variable_scope import VariableScope, get_variable, variable_scope


class LSTMStateTuple(NamedTuple):
    """An LSTM's state: the cell ``c`` and the output ``h`` (TF1's ``LSTMStateTuple``)."""
    c: Any
    h: Any



class RNNCell:
    """The base of the cells: ``state_size``, ``output_size``, ``zero_state(batch_size, dtype)``
    and ``__call__(inputs, state, scope=None) -> (output, new_state)``."""

    scope_name = "rnn_cell"

    def __init__(self, name: str | None = None, reuse: Any = None, dtype: Any = None) -> None:
        self._name = name
        self._reuse = reuse
        self._dtype = dtype
        self._scope: VariableScope | None = None   # the variable scope of the first call: later calls share it

    @property
    def state_size(self) -> Any:
        raise NotImplementedError

    @property
    def output_size(self) -> int:
        raise NotImplementedError

    def zero_state(self, batch_size: Any, dtype: Any) -> Any:
        """Zeros of ``[batch_size, size]`` for each part of the state; ``batch_size`` a Python int
        or the fed batch (``cc.shape(x)[0]``)."""
        dtype = dtypes.as_dtype(dtype)
        sizes, rebuild = flatten(self.state_size)
        return rebuild([zeros([batch_size, size], dtype) for size in sizes])

    def __call__(self, inputs: Any, state: Any, scope: Any = None) -> tuple[Tensor, Any]:
        inputs = convert_to_tensor(inputs)
        if len(inputs.shape) != 2 or inputs.shape[1] is None:
            raise ValueError(located(f"{type(self).__name__}: the inputs must be [batch, depth] with a known depth, "
                                     f"got {inputs.shape} {inputs.name!r}"))
        if not dtypes.is_floating(inputs.dtype):
            raise TypeError(located(f"{type(self).__name__}: the inputs must be float32 or float64, got "
                                    f"{inputs.dtype.name} {inputs.name!r}"))
        self._check_state(inputs, state)
        if self._scope is None:
            with variable_scope(scope or self._name or self.scope_name, reuse=self._reuse) as opened:
                self._scope = opened
                return self.call(inputs, state)
        with variable_scope(self._scope, reuse=True):
            return self.call(inputs, state)

    def _check_state(self, inputs: Tensor, state: Any) -> None:
        """The state against ``state_size`` before any variable is made (TF1 fails in the matmul;
        a kernel sized from a wrong state would be made first)."""
        sizes = _state_parts(self.state_size)
        leaves = [convert_to_tensor(leaf) for leaf in flatten(state)[0]]
        cell = type(self).__name__
        if not all(isinstance(size, int) for size in sizes):
            return   # a cell's own state of other shapes (a TensorShape per part): its call checks it
        if len(leaves) != len(sizes):
            raise ValueError(located(f"{cell}: the state has {len(leaves)} parts but the cell's state_size "
                                     f"{self.state_size} has {len(sizes)}"))
        for k, (leaf, size) in enumerate(zip(leaves, sizes)):
            batch = leaf.shape[0] if len(leaf.shape) == 2 else None
            if (len(leaf.shape) != 2 or leaf.shape[1] not in (None, size)
                    or None not in (batch, inputs.shape[0]) and batch != inputs.shape[0]):
                raise ValueError(located(f"{cell}: state part {k} {leaf.name!r} must be [batch, {size}] for inputs "
                                         f"{inputs.shape}, got {leaf.shape} (the cell's state_size is "
                                         f"{self.state_size})"))

    def call(self, inputs: Tensor, state: Any) -> tuple[Tensor, Any]:
        raise NotImplementedError

    def _linear(self, name: str | None, values: Sequence[Tensor], size: int, bias_initializer: Any,
                kernel_initializer: Any = None) -> Tensor:
        """``concat(values) @ kernel + bias`` with ``kernel`` ``[depth, size]`` and ``bias``
        ``[size]`` named as TF1's (``name/kernel``, ``name/bias``; no sub-scope when ``name`` is None)."""
        joined = concat(list(values), axis=1) if len(values) > 1 else values[0]
        depth, dtype = joined.shape[1], joined.dtype

        def make() -> Tensor:
            kernel = get_variable("kernel", [depth, size], dtype, kernel_initializer)
            bias = get_variable("bias", [size], dtype, bias_initializer or zeros_initializer())
            return matmul(joined, kernel) + bias
        if name is None:
            return make()
        with variable_scope(name):
            return make()


def _state_parts(state_size: Any) -> list[Any]:
    """The sizes of a state's parts: ints, or a ``TensorShape`` (a part of more dimensions) each."""
    if isinstance(state_size, TensorShape):
        return [state_size]
    if isinstance(state_size, (list, tuple)):
        return [part for item in state_size for part in _state_parts(item)]
    return [int(state_size) if isinstance(state_size, (int, np.integer)) else state_size]


class BasicRNNCell(RNNCell):
    """``h = activation(concat([x, h]) @ kernel + bias)``, tanh by default (TF1's ``BasicRNNCell``)."""

    scope_name = "basic_rnn_cell"

    def __init__(self, num_units: int, activation: Callable[[Tensor], Tensor] | None = None, reuse: Any = None,
                 name: str | None = None, dtype: Any = None) -> None:
        super().__init__(name, reuse, dtype)
        self._units = _units(num_units, type(self).__name__)
        self._activation = activation or tanh

    @property
    def state_size(self) -> int:
        return self._units

    @property
    def output_size(self) -> int:
        return self._units

    def call(self, inputs: Tensor, state: Tensor) -> tuple[Tensor, Tensor]:
        output = self._activation(self._linear(None, [inputs, state], self._units, None))
        return output, output


class GRUCell(BasicRNNCell):
    """TF1's ``GRUCell``: gates ``r, u = sigmoid(concat([x, h]) @ gates/kernel + gates/bias)``
    (bias 1 by default), candidate ``c = tanh(concat([x, r * h]) @ candidate/kernel +
    candidate/bias)``, ``h = u * h + (1 - u) * c``."""

    scope_name = "gru_cell"

    def __init__(self, num_units: int, activation: Callable[[Tensor], Tensor] | None = None, reuse: Any = None,
                 kernel_initializer: Any = None, bias_initializer: Any = None, name: str | None = None,
                 dtype: Any = None) -> None:
        super().__init__(num_units, activation, reuse, name, dtype)
        self._kernel_initializer = kernel_initializer
        self._bias_initializer = bias_initializer

    def call(self, inputs: Tensor, state: Tensor) -> tuple[Tensor, Tensor]:
        gates = sigmoid(self._linear("gates", [inputs, state], 2 * self._units,
                                     self._bias_initializer or constant_initializer(1.0), self._kernel_initializer))
        reset, update = split(gates, 2, axis=1)
        candidate = self._activation(self._linear("candidate", [inputs, reset * state], self._units,
                                                  self._bias_initializer, self._kernel_initializer))
        new = update * state + (1.0 - update) * candidate
        return new, new


class BasicLSTMCell(RNNCell):
    """TF1's ``BasicLSTMCell``: ``i, j, f, o = split(concat([x, h]) @ kernel + bias, 4)``,
    ``c = c * sigmoid(f + forget_bias) + sigmoid(i) * tanh(j)``, ``h = tanh(c) * sigmoid(o)``;
    the state is ``LSTMStateTuple(c, h)``."""

    scope_name = "basic_lstm_cell"

    def __init__(self, num_units: int, forget_bias: float = 1.0, state_is_tuple: bool = True,
                 activation: Callable[[Tensor], Tensor] | None = None, reuse: Any = None, name: str | None = None,
                 dtype: Any = None) -> None:
        super().__init__(name, reuse, dtype)
        if state_is_tuple is not True:
            raise ValueError(located(f"{type(self).__name__}: only state_is_tuple=True is supported (TF1's default)"))
        self._units = _units(num_units, type(self).__name__)
        self._forget_bias = float(forget_bias)
        self._activation = activation or tanh

    @property
    def state_size(self) -> LSTMStateTuple:
        return LSTMStateTuple(self._units, self._units)

    @property
    def output_size(self) -> int:
        return self._units

    def call(self, inputs: Tensor, state: Any) -> tuple[Tensor, LSTMStateTuple]:
        c, h = _lstm_state(state, type(self).__name__)
        i, j, f, o = split(self._linear(None, [inputs, h], 4 * self._units, None), 4, axis=1)
        new_c = c * sigmoid(f + self._forget_bias) + sigmoid(i) * self._activation(j)
        new_h = self._activation(new_c) * sigmoid(o)
        return new_h, LSTMStateTuple(new_c, new_h)


class LSTMCell(RNNCell):
    """TF1's ``LSTMCell``: ``BasicLSTMCell``'s equations with an ``initializer`` for the kernel,
    and optionally peepholes (``use_peepholes``: the diagonal weights ``w_f_diag``, ``w_i_diag``,
    ``w_o_diag`` add ``w * c`` to the gates), ``cell_clip`` (c clipped to ``[-clip, clip]``) and a
    projection of the output (``num_proj``: ``h = m @ projection/kernel``, clipped by
    ``proj_clip``)."""

    scope_name = "lstm_cell"

    def __init__(self, num_units: int, use_peepholes: bool = False, cell_clip: float | None = None,
                 initializer: Any = None, num_proj: int | None = None, proj_clip: float | None = None,
                 num_unit_shards: Any = None, num_proj_shards: Any = None, forget_bias: float = 1.0,
                 state_is_tuple: bool = True, activation: Callable[[Tensor], Tensor] | None = None,
                 reuse: Any = None, name: str | None = None, dtype: Any = None) -> None:
        super().__init__(name, reuse, dtype)
        if state_is_tuple is not True:
            raise ValueError(located(f"{type(self).__name__}: only state_is_tuple=True is supported (TF1's default)"))
        if num_unit_shards is not None or num_proj_shards is not None:
            raise ValueError(located(f"{type(self).__name__}: num_unit_shards and num_proj_shards are not supported "
                                     f"(TF1 deprecated them)"))
        self._units = _units(num_units, type(self).__name__)
        self._proj = None if num_proj is None else _units(num_proj, type(self).__name__)
        self._peepholes = bool(use_peepholes)
        self._cell_clip, self._proj_clip = cell_clip, proj_clip
        self._initializer = initializer
        self._forget_bias = float(forget_bias)
        self._activation = activation or tanh

    @property
    def state_size(self) -> LSTMStateTuple:
        return LSTMStateTuple(self._units, self._proj or self._units)

    @property
    def output_size(self) -> int:
        return self._proj or self._units

    def call(self, inputs: Tensor, state: Any) -> tuple[Tensor, LSTMStateTuple]:
        c, h = _lstm_state(state, type(self).__name__)
        i, j, f, o = split(self._linear(None, [inputs, h], 4 * self._units, None, self._initializer), 4, axis=1)
        dtype = inputs.dtype
        if self._peepholes:
            w_f, w_i, w_o = (get_variable(name, [self._units], dtype, self._initializer)
                             for name in ("w_f_diag", "w_i_diag", "w_o_diag"))
            new_c = c * sigmoid(f + self._forget_bias + w_f * c) + sigmoid(i + w_i * c) * self._activation(j)
        else:
            new_c = c * sigmoid(f + self._forget_bias) + sigmoid(i) * self._activation(j)
        if self._cell_clip is not None:
            new_c = clip_by_value(new_c, -self._cell_clip, self._cell_clip)
        gate = sigmoid(o + w_o * new_c) if self._peepholes else sigmoid(o)
        new_h = gate * self._activation(new_c)
        if self._proj is not None:
            with variable_scope("projection"):
                new_h = matmul(new_h, get_variable("kernel", [self._units, self._proj], dtype, self._initializer))
            if self._proj_clip is not None:
                new_h = clip_by_value(new_h, -self._proj_clip, self._proj_clip)
        return new_h, LSTMStateTuple(new_c, new_h)


class MultiRNNCell(RNNCell):
    """Cells stacked: each one's output is the next one's input (TF1's ``MultiRNNCell``; the
    state is the tuple of theirs, variables under ``multi_rnn_cell/cell_<i>``)."""

    scope_name = "multi_rnn_cell"

    def __init__(self, cells: Sequence[RNNCell], state_is_tuple: bool = True) -> None:
        super().__init__()
        if not cells or not all(isinstance(cell, RNNCell) for cell in cells):
            raise ValueError(located(f"MultiRNNCell: cells must be a non-empty list of cells, got {cells!r}"))
        if state_is_tuple is not True:
            raise ValueError(located("MultiRNNCell: only state_is_tuple=True is supported (TF1's default)"))
        self._cells = list(cells)

    @property
    def state_size(self) -> tuple:
        return tuple(cell.state_size for cell in self._cells)

    @property
    def output_size(self) -> int:
        return self._cells[-1].output_size

    def call(self, inputs: Tensor, state: Any) -> tuple[Tensor, tuple]:
        if not isinstance(state, (tuple, list)) or len(state) != len(self._cells):
            raise ValueError(located(f"MultiRNNCell: the state must be a tuple of {len(self._cells)} cells' states"))
        output, new_states = inputs, []
        for index, (cell, cell_state) in enumerate(zip(self._cells, state)):
            with variable_scope(f"cell_{index}"):     # TF1: multi_rnn_cell/cell_0/gru_cell/...
                output, new_state = cell(output, cell_state)
            new_states.append(new_state)
        return output, tuple(new_states)


def _units(value: Any, cell: str) -> int:
    if isinstance(value, bool) or not isinstance(value, (int, np.integer)) or value < 1:
        raise ValueError(located(f"{cell}: num_units must be a positive int, got {value!r}"))
    return int(value)


def _lstm_state(state: Any, cell: str) -> tuple[Tensor, Tensor]:
    if not isinstance(state, (tuple, list)) or len(state) != 2:
        raise ValueError(located(f"{cell}: the state must be an LSTMStateTuple(c, h), got {state!r}"))
    return state[0], state[1]


def _initial_state(cell: RNNCell, batch: Any, initial_state: Any, dtype: Any, function: str) -> Any:
    if initial_state is not None:
        return initial_state
    if dtype is None:
        raise ValueError(located(f"{function}: give initial_state or dtype (the zero state's dtype), as in TF1"))
    return cell.zero_state(batch, dtype)


def _sequence_lengths(sequence_length: Any, batch: Any, function: str) -> Tensor | None:
    """``sequence_length`` as int64, after TF1's checks: integers, one per sequence."""
    if sequence_length is None:
        return None
    lengths = convert_to_tensor(sequence_length)
    if not dtypes.is_integer(lengths.dtype):
        raise TypeError(located(f"{function}: sequence_length {lengths.name!r} must be int32 or int64, got "
                                f"{lengths.dtype.name}"))
    if len(lengths.shape) != 1 or None not in (lengths.shape[0], batch if isinstance(batch, int) else None) \
            and lengths.shape[0] != batch:
        raise ValueError(located(f"{function}: sequence_length {lengths.name!r} must be a vector of one length per "
                                 f"sequence ([{batch if isinstance(batch, int) else 'batch'}]), got shape "
                                 f"{lengths.shape}"))
    return cast(lengths, dtypes.int64)


def dynamic_rnn(cell: RNNCell, inputs: Any, sequence_length: Any = None, initial_state: Any = None,
                dtype: Any = None, parallel_iterations: int | None = None, swap_memory: bool = False,
                time_major: bool = False, scope: Any = None) -> tuple[Tensor, Any]:
    """Run ``cell`` over the time axis of ``inputs`` (``[batch, time, depth]``, or ``[time, batch,
    depth]`` with ``time_major``; the number of steps known when the graph is built) as TF1's
    ``dynamic_rnn``: returns ``(outputs, final_state)``, the outputs of every step stacked like the
    inputs. With ``sequence_length`` (``[batch]`` ints), a sequence's steps past its length output
    zeros and keep its state, so ``final_state`` is the state after its last step. Variables go
    under the variable scope ``scope`` (default ``"rnn"``). One ``cc.scan``: the step is one
    compiled loop, and its gradient runs through time."""
    inputs = convert_to_tensor(inputs)
    if len(inputs.shape) != 3:
        raise ValueError(located(f"dynamic_rnn: the inputs must be [batch, time, depth] (or [time, batch, depth] "
                                 f"with time_major), got {inputs.shape} {inputs.name!r}"))
    steps = inputs if time_major else transpose(inputs, [1, 0, 2])
    if steps.shape[0] is None:
        raise ValueError(located(f"dynamic_rnn: the number of time steps of {inputs.name!r} {inputs.shape} must be "
                                 f"known when the graph is built"))
    batch = shape_of(steps)[1] if steps.shape[1] is None else steps.shape[1]
    with variable_scope(scope or "rnn"):
        state = _initial_state(cell, batch, initial_state, dtype, "dynamic_rnn")
        lengths = _sequence_lengths(sequence_length, batch, "dynamic_rnn")
        output_zeros = zeros([batch, cell.output_size], steps.dtype)
        if steps.shape[0] == 0:
            empty = zeros([0, batch, cell.output_size], steps.dtype)
            return (empty if time_major else transpose(empty, [1, 0, 2])), state

        state_leaves, rebuild_state = flatten(state)

        def step(carry: list[Tensor], x: Tensor) -> list[Tensor]:
            time, _, *leaves = carry
            output, new_state = cell(x, rebuild_state(leaves))
            new_leaves = flatten(new_state)[0]
            if lengths is not None:   # past its length a sequence outputs zeros and keeps its state
                running = less(time, lengths)[:, None]
                output = where(running, output, 0.0)
                new_leaves = [where(running, new, old) for new, old in zip(new_leaves, leaves)]
            return [time + 1, output, *new_leaves]

        start = [convert_to_tensor(np.int64(0)), output_zeros, *state_leaves]
        stacked = scan(step, steps, initializer=start)
        outputs, final = stacked[1], [leaf[-1] for leaf in stacked[2:]]
        return (outputs if time_major else transpose(outputs, [1, 0, 2])), rebuild_state(final)


def static_rnn(cell: RNNCell, inputs: Sequence[Any], initial_state: Any = None, dtype: Any = None,
               sequence_length: Any = None, scope: Any = None) -> tuple[list[Tensor], Any]:
    """Run ``cell`` over a Python list of ``[batch, depth]`` steps, one graph step each (TF1's
    ``static_rnn``): returns ``(outputs, final_state)``; ``sequence_length`` as ``dynamic_rnn``'s."""
    if not inputs:
        raise ValueError(located("static_rnn: inputs must be a non-empty list of [batch, depth] tensors"))
    inputs = [convert_to_tensor(x) for x in inputs]
    batch = shape_of(inputs[0])[0] if inputs[0].shape[0] is None else inputs[0].shape[0]
    with variable_scope(scope or "rnn"):
        state = _initial_state(cell, batch, initial_state, dtype, "static_rnn")
        lengths = _sequence_lengths(sequence_length, batch, "static_rnn")
        outputs = []
        for time, x in enumerate(inputs):
            output, new_state = cell(x, state)
            if lengths is not None:
                running = less(np.int64(time), lengths)[:, None]
                output = where(running, output, 0.0)
                old_leaves, rebuild_state = flatten(state)
                new_state = rebuild_state([where(running, new, old)
                                           for new, old in zip(flatten(new_state)[0], old_leaves)])
            outputs.append(output)
            state = new_state
        return outputs, state


def reverse_sequence(input: Any, seq_lengths: Any, seq_axis: int = 1, batch_axis: int = 0,  # noqa: A002
                     name: str | None = None) -> Tensor:
    """Each sequence's first ``seq_lengths[b]`` steps in reverse, the rest as they are (TF1's
    ``reverse_sequence``, for ``[batch, time, ...]`` (``seq_axis=1, batch_axis=0``) or ``[time,
    batch, ...]`` (``seq_axis=0, batch_axis=1``) inputs); a gather of each sequence's rows, so its
    gradient is the reverse permutation. A length past the sequence's end reverses all of it."""
    x = convert_to_tensor(input)
    if (seq_axis, batch_axis) not in ((1, 0), (0, 1)) or len(x.shape) < 2:
        raise ValueError(located(f"reverse_sequence: seq_axis and batch_axis must be 1 and 0 or 0 and 1 of an input "
                                 f"of rank 2 or more, got {seq_axis} and {batch_axis} for {x.shape}"))
    time = x.shape[seq_axis]
    if time is None:
        raise ValueError(located(f"reverse_sequence: the sequence axis of {x.name!r} {x.shape} must be known"))
    with composite_scope(name or "ReverseSequence", [x]):
        swap = [1, 0] + list(range(2, len(x.shape)))
        batch_first = x if batch_axis == 0 else transpose(x, swap)
        # lengths past the sequences' end reverse the whole sequence (TF1 raises)
        lengths = minimum(cast(convert_to_tensor(seq_lengths), dtypes.int64), time)[:, None]   # [batch, 1]
        positions = convert_to_tensor(np.arange(time, dtype=np.int64))[None, :]               # [1, time]
        source = where(less(positions, lengths), lengths - 1 - positions, positions)         # [batch, time]
        sequence = cumsum(ones_like(lengths[:, 0]), exclusive=True)                           # 0, 1, ... batch - 1
        rows = reshape(batch_first, [-1, *batch_first.shape[2:]])                            # [batch * time, ...]
        picked = gather(rows, sequence[:, None] * time + source)                            # a gather: NaN stays put
        return picked if batch_axis == 0 else transpose(picked, swap)


def bidirectional_dynamic_rnn(cell_fw: RNNCell, cell_bw: RNNCell, inputs: Any, sequence_length: Any = None,
                              initial_state_fw: Any = None, initial_state_bw: Any = None, dtype: Any = None,
                              parallel_iterations: int | None = None, swap_memory: bool = False,
                              time_major: bool = False, scope: Any = None) -> tuple[tuple[Tensor, Tensor], tuple]:
    """TF1's ``bidirectional_dynamic_rnn``: ``cell_fw`` over the sequences and ``cell_bw`` over
    them reversed (each within its length), under ``bidirectional_rnn/fw`` and ``/bw``; returns
    ``((outputs_fw, outputs_bw), (state_fw, state_bw))``, ``outputs_bw`` in the inputs' order."""
    inputs = convert_to_tensor(inputs)
    seq_axis, batch_axis = (0, 1) if time_major else (1, 0)

    def reversed_steps(x: Tensor) -> Tensor:
        if sequence_length is None:
            return reverse(x, [seq_axis])
        return reverse_sequence(x, sequence_length, seq_axis, batch_axis)
    with variable_scope(scope or "bidirectional_rnn"):
        with variable_scope("fw") as fw_scope:
            outputs_fw, state_fw = dynamic_rnn(cell_fw, inputs, sequence_length, initial_state_fw, dtype,
                                               time_major=time_major, scope=fw_scope)
        with variable_scope("bw") as bw_scope:
            outputs_bw, state_bw = dynamic_rnn(cell_bw, reversed_steps(inputs), sequence_length, initial_state_bw,
                                               dtype, time_major=time_major, scope=bw_scope)
        return (outputs_fw, reversed_steps(outputs_bw)), (state_fw, state_bw)


__all__ = ["RNNCell", "BasicRNNCell", "GRUCell", "BasicLSTMCell", "LSTMCell", "MultiRNNCell", "LSTMStateTuple",
           "dynamic_rnn", "static_rnn", "bidirectional_dynamic_rnn", "reverse_sequence"]


class _Wrapper(RNNCell):
    """A cell around another: its state, output size and variables are the inner cell's."""

    def __init__(self, cell: RNNCell) -> None:
        super().__init__()
        if not isinstance(cell, RNNCell):
            raise TypeError(located(f"{type(self).__name__}: cell must be an RNN cell, got {cell!r}"))
        self._cell = cell

    @property
    def state_size(self) -> Any:
        return self._cell.state_size

    @property
    def output_size(self) -> int:
        return self._cell.output_size

    def zero_state(self, batch_size: Any, dtype: Any) -> Any:
        return self._cell.zero_state(batch_size, dtype)


class DropoutWrapper(_Wrapper):
    """Dropout on a cell's inputs, outputs and new state (TF1's ``DropoutWrapper``): a new mask at
    every step, ``keep_prob`` a number or a scalar tensor (a placeholder fed 1.0 at evaluation).
    The state's LSTM memory ``c`` is left alone, as TF1's default filter does. The cell's own
    variables, under its own names. ``variational_recurrent`` (one mask per sequence) is not
    available."""

    def __init__(self, cell: RNNCell, input_keep_prob: Any = 1.0, output_keep_prob: Any = 1.0,
                 state_keep_prob: Any = 1.0, variational_recurrent: bool = False, input_size: Any = None,
                 dtype: Any = None, seed: int | None = None, dropout_state_filter_visitor: Any = None) -> None:
        super().__init__(cell)
        if variational_recurrent or dropout_state_filter_visitor is not None:
            raise ValueError(located("DropoutWrapper: variational_recurrent and dropout_state_filter_visitor are "
                                     "not available"))
        for label, keep in (("input_keep_prob", input_keep_prob), ("output_keep_prob", output_keep_prob),
                            ("state_keep_prob", state_keep_prob)):
            if not isinstance(keep, Tensor) and not (isinstance(keep, (int, float, np.integer, np.floating))
                                                     and not isinstance(keep, bool) and 0.0 < keep <= 1.0):
                raise ValueError(located(f"DropoutWrapper: {label} must be in (0, 1] or a scalar tensor, got {keep!r}"))
        self._seed = seed
        self._keep = (input_keep_prob, output_keep_prob, state_keep_prob)

    def _seed_for(self, salt: str, index: int) -> int | None:
        """TF1's seed of one dropout of the wrapper: each (input, state or output part) its own
        mask, from the md5 of the seed and the part's salt, as TF1 derives it."""
        if self._seed is None:
            return None
        digest = hashlib.md5(f"{self._seed}{salt}_{index}".encode("utf-8")).hexdigest()
        return int(digest[:8], 16) & 0x7FFFFFFF

    def _dropped(self, x: Tensor, keep: Any, salt: str, index: int) -> Tensor:
        if not isinstance(keep, Tensor) and keep == 1.0:
            return x
        return dropout(x, keep_prob=keep, seed=self._seed_for(salt, index))

    def __call__(self, inputs: Any, state: Any, scope: Any = None) -> tuple[Tensor, Any]:
        input_keep, output_keep, state_keep = self._keep
        output, new_state = self._cell(self._dropped(convert_to_tensor(inputs), input_keep, "input", 0), state,
                                       scope)
        if isinstance(state_keep, Tensor) or state_keep != 1.0:
            new_state = _drop_state(new_state, lambda part, index: self._dropped(part, state_keep, "state", index),
                                    itertools.count())
        return self._dropped(output, output_keep, "output", 0), new_state


def _drop_state(state: Any, drop: Callable[[Tensor, int], Tensor], positions: Iterator[int]) -> Any:
    """The state with ``drop(part, its position among the state's tensors)`` applied to each part."""
    if isinstance(state, LSTMStateTuple):   # the memory c is kept whole, as TF1's default
        next(positions)
        return LSTMStateTuple(state.c, drop(state.h, next(positions)))
    if isinstance(state, (tuple, list)):
        return tuple(_drop_state(part, drop, positions) for part in state)
    return drop(state, next(positions))


class ResidualWrapper(_Wrapper):
    """The cell's output plus its input (TF1's ``ResidualWrapper``): they must have one size."""

    def __init__(self, cell: RNNCell, residual_fn: Callable[[Tensor, Tensor], Tensor] | None = None) -> None:
        super().__init__(cell)
        self._residual = residual_fn or (lambda inputs, output: inputs + output)

    def __call__(self, inputs: Any, state: Any, scope: Any = None) -> tuple[Tensor, Any]:
        inputs = convert_to_tensor(inputs)
        output, new_state = self._cell(inputs, state, scope)
        if inputs.shape[-1] != output.shape[-1]:
            raise ValueError(located(f"ResidualWrapper: the input's size {inputs.shape[-1]} and the output's "
                                     f"{output.shape[-1]} must be equal"))
        return self._residual(inputs, output), new_state

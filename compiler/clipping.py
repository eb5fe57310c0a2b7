"""Gradient clipping by norm (TF1's ``clip_by_norm``, ``clip_by_global_norm``, ``global_norm``,
``clip_by_average_norm``; ``cc.clip_by_norm`` as ``tf.clip_by_norm``, and ``optim.clip_by_norm``).

The usual pattern clips the gradients between ``compute_gradients`` and ``apply_gradients``::

    grads, variables = zip(*opt.compute_gradients(loss))
    clipped, norm = optim.clip_by_global_norm(grads, 5.0)
    train = opt.apply_gradients(zip(clipped, variables))
"""
from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import Any

import weakref

import numpy as np

from . import dtypes
from .errors import DTypeError, GraphMismatchError
from .graph import Annotations, Graph, Tensor, get_default_graph, located
from .ops.array import identity, size
from .ops.base import constant, convert_to_tensor
from .ops.elementwise import cast, maximum, sqrt, where
from .ops.reduction import reduce_sum

# The results of clip_by_norm, each with the tensor it clips (one scale per row or one for all):
# the optimizers keep a clipped embedding gradient's row-sparse update (optim.optimizer).
ROW_WISE_CLIPS = Annotations("row_wise_clip")
# Results that are dense gradients whatever they clip (TF1's clip_by_average_norm converts its
# input to a tensor first): an optimizer updates every row for them.
DENSE_CLIPS: "weakref.WeakSet[Tensor]" = weakref.WeakSet()


def _float_tensor(value: Any, function: str, what: str, graph: Graph | None = None) -> Tensor:
    """``value`` as a Tensor (numbers and arrays become constants), which must be float."""
    if not isinstance(value, Tensor):
        with (graph or get_default_graph()).as_default():
            value = convert_to_tensor(value)
    if not dtypes.is_floating(value.dtype):
        raise DTypeError(located(f"{function}: {what} {value.name!r} is {value.dtype.name}; it must be "
                                    f"float32 or float64"))
    return value


def _scalar(value: Any, dtype: np.dtype, graph: Graph, function: str, what: str,
            positive: bool = True) -> Tensor:
    """A Python number (positive if ``positive``) or a scalar Tensor, as a scalar of ``dtype``."""
    if isinstance(value, Tensor):
        if value.graph is not graph:
            raise GraphMismatchError(located(f"{function}: {what} {value.name!r} belongs to another graph"))
        if value.shape != ():
            raise ValueError(located(f"{function}: {what} must be a scalar, got shape {value.shape}"))
        return cast(value, dtype)
    array = np.asarray(value)
    if array.shape != () or array.dtype.kind not in "iuf":
        raise ValueError(located(f"{function}: {what} must be a scalar number or Tensor, got {value!r}"))
    if positive and not array > 0:
        raise ValueError(located(f"{function}: {what} must be positive, got {value!r}"))
    with graph.as_default():
        return constant(array.astype(dtype), name=what)


def _check_sequence(t_list: Any, function: str) -> list[Any]:
    """A list, tuple or other iterable of entries; a lone Tensor or string is an error."""
    if isinstance(t_list, (str, bytes, Tensor, np.ndarray)) or not isinstance(t_list, Iterable):
        raise TypeError(located(f"{function}: t_list must be a sequence of Tensors, got {t_list!r}"))
    return list(t_list)


def _tensors(t_list: Any, function: str, *others: Any) -> tuple[list[Tensor | None], Graph]:
    """The entries as float Tensors (None kept), all in one graph: that of the first Tensor among
    the entries and then ``others``, else the default graph."""
    items = _check_sequence(t_list, function)
    anchor = next((t for t in (*items, *others) if isinstance(t, Tensor)), None)
    graph = anchor.graph if anchor is not None else get_default_graph()
    tensors: list[Tensor | None] = []
    for index, item in enumerate(items):
        if item is None:
            tensors.append(None)
            continue
        tensor = _float_tensor(item, function, f"t_list[{index}]", graph)
        if tensor.graph is not graph:
            raise GraphMismatchError(located(f"{function}: t_list[{index}] {tensor.name!r} belongs to "
                                                f"another graph than {anchor.name!r}"))
        tensors.append(tensor)
    return tensors, graph


def _widest(tensors: list[Tensor | None]) -> np.dtype:
    """float64 if any tensor is float64, else float32."""
    present = [t.dtype for t in tensors if t is not None]
    return dtypes.float64 if any(d == dtypes.float64 for d in present) else dtypes.float32


def _norm_of_squares(l2sum: Tensor) -> Tensor:
    """``sqrt(l2sum)`` with a finite gradient where the sum is 0 (sqrt's is infinite there):
    taken only where the sum is positive."""
    positive = l2sum > 0.0
    return where(positive, sqrt(where(positive, l2sum, 1.0)), l2sum)


def clip_by_norm(t: Any, clip_norm: Any, axes: int | Sequence[int] | None = None,
                 name: str | None = None) -> Tensor:
    """``t * clip_norm / max(l2norm(t), clip_norm)``: ``t`` rescaled so that its L2 norm (over
    ``axes``, all axes by default) is at most ``clip_norm``; unchanged if it already is.

    ``clip_norm`` is a positive number or a scalar Tensor (cast to ``t``'s dtype). The gradient is
    finite everywhere, also where ``t`` is all zeros.

    >>> import numpy as np
    >>> import compiler as cc
    >>> import optim
    >>> from runtime import Session
    >>> t = constant(np.array([[3.0, 4.0], [0.3, 0.4]]))
    >>> with Session(target="reference") as sess:
    ...     print(sess.run(optim.clip_by_norm(t, 1.0, axes=1)))    # row norms 5 and 0.5
    [[0.6 0.8]
     [0.3 0.4]]
    """
    t = _float_tensor(t, "clip_by_norm", "t")
    graph = t.graph
    clip = _scalar(clip_norm, t.dtype, graph, "clip_by_norm", "clip_norm")
    with graph.as_default(), graph.nested_scope(name or "clip_by_norm"):
        l2norm = _norm_of_squares(reduce_sum(t * t, axis=axes, keepdims=True))
        clipped = identity(t * clip / maximum(l2norm, clip), name="values_clip")
    ROW_WISE_CLIPS[clipped] = t   # an embedding's gather-only gradient stays one (sparse updates)
    return clipped


def clip_by_average_norm(t: Any, clip_norm: Any, name: str | None = None) -> Tensor:
    """``t * clip_norm / max(l2norm(t) / size(t), clip_norm)`` (TF1's ``clip_by_average_norm``):
    ``t`` rescaled so that its L2 norm divided by its number of elements is at most ``clip_norm``.

    >>> import numpy as np
    >>> import compiler as cc
    >>> import optim
    >>> from runtime import Session
    >>> t = constant(np.array([6.0, 8.0]))            # norm 10, average norm 5
    >>> with Session(target="reference") as sess:
    ...     print(sess.run(optim.clip_by_average_norm(t, 2.5)))
    [3. 4.]
    """
    t = _float_tensor(t, "clip_by_average_norm", "t")
    graph = t.graph
    clip = _scalar(clip_norm, t.dtype, graph, "clip_by_average_norm", "clip_norm")
    with graph.as_default(), graph.nested_scope(name or "clip_by_average_norm"):
        average = _norm_of_squares(reduce_sum(t * t)) / cast(size(t), t.dtype)
        clipped = identity(t * clip / maximum(average, clip), name="values_clip")
    DENSE_CLIPS.add(clipped)
    return clipped


def global_norm(t_list: Sequence[Any], name: str | None = None) -> Tensor:
    """``sqrt(sum(sum(t ** 2) for t in t_list))``, skipping None entries: the L2 norm of all the
    tensors together. Computed in float64 if any tensor is float64, else in float32.

    Raises ValueError if every entry is None.

    >>> import numpy as np
    >>> import compiler as cc
    >>> import optim
    >>> from runtime import Session
    >>> a, b = constant(np.array([3.0])), constant(np.array([[4.0, 12.0]]))
    >>> with Session(target="reference") as sess:
    ...     print(sess.run(optim.global_norm([a, None, b])))
    13.0
    """
    tensors, graph = _tensors(t_list, "global_norm")
    present = [t for t in tensors if t is not None]
    if not present:
        raise ValueError(located("global_norm: t_list has no tensors (every entry is None)"))
    dtype = _widest(tensors)
    with graph.as_default(), graph.nested_scope(name or "global_norm"):
        total = None
        for t in present:
            wide = cast(t, dtype)   # squared in the wider dtype: 3e20 squared is inf in float32
            squares = reduce_sum(wide * wide)
            total = squares if total is None else total + squares
        return sqrt(total, name="global_norm")


def clip_by_global_norm(t_list: Sequence[Any], clip_norm: Any, use_norm: Any = None,
                        name: str | None = None) -> tuple[list[Tensor | None], Tensor]:
    """``(list_clipped, global_norm)``: every tensor scaled by ``clip_norm / max(global_norm,
    clip_norm)``, so that their joint L2 norm is at most ``clip_norm``. None entries stay None.

    ``use_norm`` replaces the computed global norm (e.g. one computed once for several lists). As in
    TF1, if the norm is inf or NaN every clipped tensor is NaN, so a diverged step is visible.

    >>> import numpy as np
    >>> import compiler as cc
    >>> import optim
    >>> from runtime import Session
    >>> a, b = constant(np.array([3.0])), constant(np.array([4.0]))
    >>> (ca, none, cb), norm = optim.clip_by_global_norm([a, None, b], 1.0)
    >>> with Session(target="reference") as sess:
    ...     print(none, sess.run([ca, cb, norm]))
    None [array([0.6]), array([0.8]), array(5.)]
    """
    tensors, graph = _tensors(t_list, "clip_by_global_norm", use_norm, clip_norm)
    if use_norm is None and all(t is None for t in tensors):
        raise ValueError(located("clip_by_global_norm: t_list has no tensors (every entry is None) and no "
                                 f"use_norm is given"))
    dtype = _widest(tensors)
    if (all(t is None for t in tensors) and isinstance(use_norm, Tensor)
            and dtypes.is_floating(use_norm.dtype)):
        dtype = use_norm.dtype  # nothing to clip: keep the given norm's dtype
    if use_norm is not None:
        use_norm = _scalar(use_norm, dtype, graph, "clip_by_global_norm", "use_norm", positive=False)
    clip = _scalar(clip_norm, dtype, graph, "clip_by_global_norm", "clip_norm")
    clipped: list[Tensor | None] = []
    with graph.as_default(), graph.nested_scope(name or "clip_by_global_norm"):
        if use_norm is None:
            use_norm = global_norm(tensors)
        # TF1's clip * min(1 / norm, 1 / clip), without its inf for a zero norm (which a numerics
        # check would report though the result is finite).
        scale_for_finite = clip / maximum(use_norm, clip)
        # Zero for a finite norm; NaN for inf or NaN, which then spreads to every output.
        scale = scale_for_finite + (use_norm - use_norm)
        for t in tensors:
            clipped.append(None if t is None else identity(t * cast(scale, t.dtype)))
    return clipped, use_norm

"""Run-time checks and prints (TF1's ``tf.debugging``): ``Assert``, ``check_numerics``, the
``assert_*`` family, also at the top level (``cc.assert_less``, as TF1's ``tf.assert_less``), and
``Print``.

``Print`` is an identity whose op ``Session.run`` recognises (``PRINTS``): a run that computes it
fetches its data too, and writes them to stderr after the step.

Each ``assert_*`` is a composition: an elementwise comparison, ``reduce_all``, then ``Assert``
(``ops/numerics.py``), which stops the run with ``InvalidArgumentError`` when the condition is
false. As in TF1, an assertion whose operands are constants is decided while the graph is built:
one that holds is a no-op, one that fails raises ``InvalidArgumentError`` at once. Shapes
broadcast as in the comparison; an assertion over no elements holds.

>>> import numpy as np, compiler as cc
>>> from runtime import Session
>>> x = cc.placeholder("float32", (None,), name="x")
>>> with cc.control_dependencies([cc.debugging.assert_non_negative(x)]):
...     y = cc.sqrt(x)
>>> with Session() as sess:
...     print(sess.run(y, {x: np.array([4.0, 9.0], "float32")}))
[2. 3.]
"""
from __future__ import annotations

import sys
from dataclasses import dataclass
from typing import Any, Callable, Sequence

import numpy as np

from . import dtypes
from .errors import InvalidArgumentError, ShapeError
from .graph import Annotations, Operation, Tensor, get_default_graph, located, user_location
from .ops.array import identity
from .ops.base import convert_to_tensor
from .ops.elementwise import abs, equal, greater, greater_equal, less, less_equal, not_equal
from .ops.numerics import Assert, check_numerics
from .ops.reduction import reduce_all
from .ops.state import no_op

__all__ = ["Assert", "Print", "assert_equal", "assert_greater", "assert_greater_equal", "assert_less",
           "assert_less_equal", "assert_near", "assert_negative", "assert_non_negative",
           "assert_non_positive", "assert_none_equal", "assert_positive", "assert_rank", "check_numerics"]


def _constant_value(tensor: Tensor) -> np.ndarray | None:
    return np.asarray(tensor.op.attrs["value"]) if tensor.op.type == "Const" else None


def _compared(function: str, x: Any, y: Any, compare: Callable[[Tensor, Tensor], Tensor],
              numpy_compare: Callable[[np.ndarray, np.ndarray], np.ndarray], relation: str,
              data: Sequence[Any] | None, summarize: int | None, message: str | None,
              name: str | None) -> Operation:
    location = user_location()
    x = convert_to_tensor(x)
    y = convert_to_tensor(y, dtype=x.dtype) if not isinstance(y, Tensor) else y
    try:
        holds = compare(x, y)
    except ShapeError as error:   # as TF1: shapes that cannot broadcast fail when built (already located)
        raise ShapeError(f"{function}: {x.name!r} and {y.name!r} cannot be compared: {error}") from None
    if data is None:
        data = [f"Condition {relation} did not hold element-wise:", f"x = {x.name}", f"y = {y.name}"]
    data = ([message] if message else []) + list(data)
    return _asserted(function, holds, x, y, numpy_compare, data, summarize, name, location)


def _asserted(function: str, holds: Tensor, x: Tensor, y: Tensor,
              numpy_compare: Callable[..., np.ndarray], data: Sequence[Any], summarize: int | None,
              name: str | None, location: Any) -> Operation:
    constants = [_constant_value(t) for t in (x, y)]
    if all(value is not None for value in constants):
        with np.errstate(all="ignore"):
            if not np.all(numpy_compare(*constants)):
                text = " ".join(str(item.name if isinstance(item, Tensor) else item) for item in data)
                values = ", ".join(f"{label} = {value.tolist()}" for label, value in zip("xy", constants))
                raise InvalidArgumentError(located(f"{function}: {text} (decided when built: the operands are "
                                                   f"constants, {values})", location))
        with holds.graph.as_default():
            return no_op(name=name or function)
    return Assert(reduce_all(holds), data, summarize=summarize, name=name or function)


def assert_equal(x: Any, y: Any, data: Sequence[Any] | None = None, summarize: int | None = None,
                 message: str | None = None, name: str | None = None) -> Operation:
    """Asserts ``x == y`` element-wise (TF1's ``tf.assert_equal``; see the module's example)."""
    return _compared("assert_equal", x, y, equal, np.equal, "x == y", data, summarize, message, name)


def assert_none_equal(x: Any, y: Any, data: Sequence[Any] | None = None, summarize: int | None = None,
                      message: str | None = None, name: str | None = None) -> Operation:
    """Asserts ``x != y`` element-wise (TF1's ``tf.assert_none_equal``)."""
    return _compared("assert_none_equal", x, y, not_equal, np.not_equal, "x != y", data, summarize, message, name)


def assert_less(x: Any, y: Any, data: Sequence[Any] | None = None, summarize: int | None = None,
                message: str | None = None, name: str | None = None) -> Operation:
    """Asserts ``x < y`` element-wise (TF1's ``tf.assert_less``)."""
    return _compared("assert_less", x, y, less, np.less, "x < y", data, summarize, message, name)


def assert_less_equal(x: Any, y: Any, data: Sequence[Any] | None = None, summarize: int | None = None,
                      message: str | None = None, name: str | None = None) -> Operation:
    """Asserts ``x <= y`` element-wise (TF1's ``tf.assert_less_equal``)."""
    return _compared("assert_less_equal", x, y, less_equal, np.less_equal, "x <= y", data, summarize, message,
                     name)


def assert_greater(x: Any, y: Any, data: Sequence[Any] | None = None, summarize: int | None = None,
                   message: str | None = None, name: str | None = None) -> Operation:
    """Asserts ``x > y`` element-wise (TF1's ``tf.assert_greater``)."""
    return _compared("assert_greater", x, y, greater, np.greater, "x > y", data, summarize, message, name)


def assert_greater_equal(x: Any, y: Any, data: Sequence[Any] | None = None, summarize: int | None = None,
                         message: str | None = None, name: str | None = None) -> Operation:
    """Asserts ``x >= y`` element-wise (TF1's ``tf.assert_greater_equal``)."""
    return _compared("assert_greater_equal", x, y, greater_equal, np.greater_equal, "x >= y", data, summarize,
                     message, name)


def _against_zero(function: str, x: Any, compare: Callable[[Tensor, Tensor], Tensor],
                  numpy_compare: Callable[[np.ndarray, np.ndarray], np.ndarray], relation: str,
                  data: Sequence[Any] | None, summarize: int | None, message: str | None,
                  name: str | None) -> Operation:
    x = convert_to_tensor(x)
    if data is None:
        data = [f"Condition {relation} did not hold element-wise:", f"x = {x.name}"]
    return _compared(function, x, convert_to_tensor(np.zeros((), x.dtype)), compare, numpy_compare, relation,
                     data, summarize, message, name)


def assert_positive(x: Any, data: Sequence[Any] | None = None, summarize: int | None = None,
                    message: str | None = None, name: str | None = None) -> Operation:
    """Asserts ``x > 0`` element-wise (TF1's ``tf.assert_positive``)."""
    return _against_zero("assert_positive", x, greater, np.greater, "x > 0", data, summarize, message, name)


def assert_negative(x: Any, data: Sequence[Any] | None = None, summarize: int | None = None,
                    message: str | None = None, name: str | None = None) -> Operation:
    """Asserts ``x < 0`` element-wise (TF1's ``tf.assert_negative``)."""
    return _against_zero("assert_negative", x, less, np.less, "x < 0", data, summarize, message, name)


def assert_non_negative(x: Any, data: Sequence[Any] | None = None, summarize: int | None = None,
                        message: str | None = None, name: str | None = None) -> Operation:
    """Asserts ``x >= 0`` element-wise (TF1's ``tf.assert_non_negative``)."""
    return _against_zero("assert_non_negative", x, greater_equal, np.greater_equal, "x >= 0", data, summarize,
                         message, name)


def assert_non_positive(x: Any, data: Sequence[Any] | None = None, summarize: int | None = None,
                        message: str | None = None, name: str | None = None) -> Operation:
    """Asserts ``x <= 0`` element-wise (TF1's ``tf.assert_non_positive``)."""
    return _against_zero("assert_non_positive", x, less_equal, np.less_equal, "x <= 0", data, summarize,
                         message, name)


def assert_near(x: Any, y: Any, rtol: float | None = None, atol: float | None = None,
                data: Sequence[Any] | None = None, summarize: int | None = None, message: str | None = None,
                name: str | None = None) -> Operation:
    """Asserts ``|x - y| <= atol + rtol * |y|`` element-wise (TF1's ``tf.assert_near``); both
    tolerances default to 10 times the float dtype's machine epsilon."""
    x = convert_to_tensor(x)
    if not dtypes.is_floating(x.dtype):
        raise TypeError(located(f"assert_near: {x.name!r} is {x.dtype.name}; it compares float tensors"))
    eps = float(np.finfo(x.dtype).eps)
    rtol = 10 * eps if rtol is None else float(rtol)
    atol = 10 * eps if atol is None else float(atol)
    relation = f"|x - y| <= {atol:g} + {rtol:g} * |y|"
    return _compared("assert_near", x, y, lambda a, b: less_equal(abs(a - b), atol + rtol * abs(b)),
                     lambda a, b: np.abs(a - b) <= atol + rtol * np.abs(b), relation, data, summarize, message,
                     name)


def assert_rank(x: Any, rank: int, data: Sequence[Any] | None = None, summarize: int | None = None,
                message: str | None = None, name: str | None = None) -> Operation:
    """Asserts that ``x`` has rank ``rank`` (TF1's ``tf.assert_rank``). Ranks are known when the
    graph is built, so the check happens then: a wrong rank raises ``ValueError`` at once."""
    x = convert_to_tensor(x)
    if len(x.shape) != int(rank):
        text = f"{message}: " if message else ""
        raise ValueError(located(f"assert_rank: {text}{x.name!r} must have rank {int(rank)}, but has shape "
                                 f"{x.shape}"))
    with x.graph.as_default():
        return no_op(name=name or "assert_rank")


@dataclass(frozen=True)
class PrintSpec:
    """What a ``Print`` writes: ``message``, then each of ``data`` as ``[v0 v1 v2...]`` (its first
    ``summarize`` entries; every entry when it is negative)."""

    data: tuple[Tensor, ...]
    message: str
    first_n: int | None
    summarize: int
    # tf.print's form: the texts and tensors in order (None stands for the next tensor), joined by
    # ``sep``, ended by ``end``, written to ``stream`` ("stderr" or "stdout").
    layout: tuple[str | None, ...] | None = None
    sep: str = " "
    end: str = "\n"
    stream: str = "stderr"

    def text(self, values: Sequence[Any]) -> str:
        """The line to write (``end`` included)."""
        def shown(value: Any) -> str:
            flat = np.asarray(value).reshape(-1)
            if np.ndim(value) == 0 and self.layout is not None:
                return str(flat[0])
            shown_count = flat.size if self.summarize < 0 else self.summarize
            head = " ".join(str(v) for v in flat[:shown_count])   # numpy's short forms: 0.1, not 0.10000000149
            return f"[{head}{'...' if flat.size > shown_count else ''}]"
        if self.layout is None:
            return self.message + "".join(shown(value) for value in values) + self.end
        pending = iter(values)
        return self.sep.join(part if part is not None else shown(next(pending)) for part in self.layout) + self.end


# The Print identities of every graph and what they print (kept on the op itself).
PRINTS = Annotations("print")


def Print(input_: Any, data: Sequence[Any], message: str | None = None, first_n: int | None = None,  # noqa: N802
          summarize: int | None = None, name: str | None = None) -> Tensor:
    """``input_`` unchanged; a run that computes it writes ``message`` and the values of ``data``
    to stderr after the step (TF1's ``tf.Print``): the first ``summarize`` (3; negative: all) entries of each,
    for the first ``first_n`` runs of the op (every run when None or negative). Not inside a cond
    branch or a loop body.

    >>> import numpy as np, compiler as cc
    >>> from runtime import Session
    >>> x = cc.placeholder("float32", (4,), name="x")
    >>> y = cc.Print(x * 2.0, [cc.reduce_sum(x), x], "sum and x: ")
    >>> with Session() as sess:
    ...     sess.run(y, {x: np.arange(4, dtype="float32")})     # stderr: sum and x: [6.0][0.0 1.0 2.0...]
    array([0., 2., 4., 6.], dtype=float32)
    """
    location = user_location()
    x = convert_to_tensor(input_)
    items = [convert_to_tensor(item) for item in (data if isinstance(data, (list, tuple)) else [data])]
    graph = x.graph
    if graph.tracing:
        raise ValueError(located("Print: not available inside a cond branch or a loop body; print what the cond "
                                 "or loop returns", location))
    for item in items:
        if item.graph is not graph:
            raise ValueError(located(f"Print: {item.name!r} belongs to another graph than {x.name!r}", location))
    for label, value in (("first_n", first_n), ("summarize", summarize)):
        if value is not None and (isinstance(value, bool) or not isinstance(value, (int, np.integer))):
            raise TypeError(located(f"Print: {label} must be an int or None, got {value!r}", location))
    with graph.as_default():
        printed = identity(x, name=name or "Print")
    PRINTS[printed.op] = PrintSpec(tuple(items), "" if message is None else str(message),
                                   None if first_n is None or first_n < 0 else int(first_n),
                                   3 if summarize is None else -1 if summarize < 0 else int(summarize))
    return printed


def print_(*inputs: Any, output_stream: Any = None, summarize: int | None = 3, sep: str = " ", end: str = "\n",
           name: str | None = None) -> Operation:
    """TF1.15's ``tf.print``: an op that writes ``inputs`` (texts as they are, tensors as their
    values, the first ``summarize`` entries of each) joined by ``sep`` when it runs; run it, or
    make other ops depend on it (``with cc.control_dependencies([cc.print(...)])``).
    ``output_stream``: ``sys.stderr`` (the default) or ``sys.stdout``.

    >>> import compiler as cc
    >>> from runtime import Session
    >>> loss = cc.constant(0.25)
    >>> with Session() as sess:
    ...     sess.run(cc.print("loss:", loss, output_stream=sys.stdout))
    loss: 0.25
    """
    location = user_location()
    stream = "stderr" if output_stream in (None, sys.stderr) else "stdout" if output_stream is sys.stdout else None
    if stream is None:
        raise ValueError(located(f"print: output_stream must be sys.stderr or sys.stdout, got {output_stream!r}",
                                 location))
    layout: list[str | None] = []
    items: list[Tensor] = []
    for item in inputs:
        if isinstance(item, str):
            layout.append(item)
        else:
            items.append(convert_to_tensor(item))
            layout.append(None)
    graph = items[0].graph if items else get_default_graph()
    if graph.tracing:
        raise ValueError(located("print: not available inside a cond branch or a loop body; print what the cond or "
                                 "loop returns", location))
    with graph.as_default():
        marker = identity(convert_to_tensor(np.int32(0)), name=name or "PrintV2")
    PRINTS[marker.op] = PrintSpec(tuple(items), "", None, -1 if summarize is None or summarize < 0 else int(summarize),
                                  tuple(layout), sep, end, stream)
    return marker.op

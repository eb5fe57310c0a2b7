"""``einsum`` and ``tensordot``: compositions of transposes, sums and matrix products.

An equation is contracted two operands at a time, left to right. For each pair, an index kept for
later (in the output or a later operand) and present in both is a batch axis, one in both and not
kept is summed over (the matrix product's depth), and one in only one operand is that operand's
free axis (its rows or columns). Each pair becomes one ``matmul`` (whose batch axes broadcast), so
the products run as GEMMs and their gradients come from ``matmul``'s rule; an index summed over in
one operand only is a ``reduce_sum`` first, and a pair with nothing to sum over is a broadcast
product.
"""
from __future__ import annotations

import math
import string
from typing import Any, Sequence

from ..graph import Tensor, located
from .array import expand_dims, reshape, squeeze, transpose
from .base import composite_scope, convert_to_tensor
from .elementwise import multiply
from .linalg import matmul
from .reduction import reduce_sum

_ELLIPSIS_LABELS = "".join(chr(0x391 + i) for i in range(24))   # Greek capitals: never an equation's letters


def _parse(equation: str, operands: Sequence[Tensor]) -> tuple[list[str], str]:
    """Each operand's labels (one per axis, "..." spelt out as its own labels) and the output's."""
    equation = equation.replace(" ", "")
    inputs_text, arrow, output_text = equation.partition("->")
    terms = inputs_text.split(",")
    if len(terms) != len(operands):
        raise ValueError(located(f"einsum: the equation {equation!r} has {len(terms)} operand(s), "
                                 f"{len(operands)} tensor(s) were given"))
    labels: list[str] = []
    widest = 0
    for term, operand in zip(terms, operands):
        rank = len(operand.shape)
        explicit = term.replace("...", "")
        if any(c not in string.ascii_letters for c in explicit) or term.count("...") > 1:
            raise ValueError(located(f"einsum: {term!r} in {equation!r}: indices are letters, with at most one "
                                     f"'...'"))
        spread = rank - len(explicit)
        if spread < 0 or (spread > 0 and "..." not in term):
            raise ValueError(located(f"einsum: {term!r} in {equation!r} names {len(explicit)} axes of "
                                     f"{operand.name!r}, which has {rank} {format_rank(operand)}"))
        widest = max(widest, spread)
        labels.append(term.replace("...", _ELLIPSIS_LABELS[:spread][::-1]))   # counted from the right
        for letter in set(explicit):
            if explicit.count(letter) > 1:
                raise ValueError(located(f"einsum: {term!r} repeats {letter!r}: diagonals and traces are not "
                                         f"supported (take them with a mask and reduce_sum)"))
    ellipsis = _ELLIPSIS_LABELS[:widest][::-1]
    if arrow:
        if any(c not in string.ascii_letters for c in output_text.replace("...", "")):
            raise ValueError(located(f"einsum: the output {output_text!r} of {equation!r} has a character "
                                     f"that is not a letter"))
        output = output_text.replace("...", ellipsis)
    else:   # numpy's implicit output: the "..." axes, then the letters used once, in order
        letters = "".join(terms).replace("...", "")
        output = ellipsis + "".join(sorted(c for c in set(letters) if letters.count(c) == 1))
    used = set("".join(labels))
    for letter in output:
        if output.count(letter) > 1 or letter not in used:
            raise ValueError(located(f"einsum: the output index {letter!r} of {equation!r} "
                                     + ("appears twice" if output.count(letter) > 1 else "is in no operand")))
    return labels, output


def format_rank(operand: Tensor) -> str:
    return "axis" if len(operand.shape) == 1 else "axes"


def _check_sizes(equation: str, labels: Sequence[str], operands: Sequence[Tensor]) -> None:
    sizes: dict[str, int] = {}
    for term, operand in zip(labels, operands):
        for letter, size in zip(term, operand.shape):
            if size is None or size == 1:
                continue      # unknown until compiled, or broadcast
            if sizes.setdefault(letter, size) != size:
                shown = "..." if letter in _ELLIPSIS_LABELS else repr(letter)
                raise ValueError(located(f"einsum: index {shown} of {equation!r} has size {sizes[letter]} in one "
                                         f"operand and {size} in {operand.name!r}"))


def _sum_out(x: Tensor, labels: str, keep: str) -> tuple[Tensor, str]:
    """Sum over ``x``'s axes whose labels are not in ``keep``."""
    axes = [a for a, letter in enumerate(labels) if letter not in keep]
    if not axes:
        return x, labels
    return reduce_sum(x, axes), "".join(letter for letter in labels if letter in keep)


def _arrange(x: Tensor, labels: str, order: str) -> Tensor:
    """``x`` with its axes in ``order`` (each of ``order``'s labels one of ``labels``)."""
    perm = [labels.index(letter) for letter in order]
    return x if perm == sorted(perm) else transpose(x, perm)


def _contract_pair(a: Tensor, a_labels: str, b: Tensor, b_labels: str, keep: str) -> tuple[Tensor, str]:
    """The product of ``a`` and ``b`` summed over their shared labels not in ``keep``; returns it
    with its labels (batch, ``a``'s free, ``b``'s free)."""
    for letter in [c for c in a_labels if c in b_labels and c not in keep]:
        # A summed index of size 1 in one operand only broadcasts: the other sums over it alone.
        size_a, size_b = a.shape[a_labels.index(letter)], b.shape[b_labels.index(letter)]
        if size_a == 1 and size_b != 1:
            a, a_labels = squeeze(a, [a_labels.index(letter)]), a_labels.replace(letter, "")
        elif size_b == 1 and size_a != 1:
            b, b_labels = squeeze(b, [b_labels.index(letter)]), b_labels.replace(letter, "")
    a, a_labels = _sum_out(a, a_labels, keep + b_labels)
    b, b_labels = _sum_out(b, b_labels, keep + a_labels)
    shared = [c for c in a_labels if c in b_labels]
    batch = "".join(c for c in shared if c in keep)
    depth = "".join(c for c in shared if c not in keep)
    rows = "".join(c for c in a_labels if c not in b_labels)
    columns = "".join(c for c in b_labels if c not in a_labels)
    if not depth:   # nothing to sum over: a broadcast product
        left = _arrange(a, a_labels, batch + rows)
        right = _arrange(b, b_labels, batch + columns)
        for _ in columns:
            left = expand_dims(left, -1)
        for _ in rows:
            right = expand_dims(right, len(batch))
        return multiply(left, right), batch + rows + columns
    if len(depth) > 1:   # one depth axis for the product: merge them (their sizes must be known)
        depth_sizes = [a.shape[a_labels.index(c)] if a.shape[a_labels.index(c)] is not None
                       else b.shape[b_labels.index(c)] for c in depth]
        if None in depth_sizes or None in a.shape or None in b.shape:
            product = multiply(_align(_arrange(a, a_labels, batch + rows + depth), batch + rows + depth,
                                      batch + rows + columns + depth),
                               _align(_arrange(b, b_labels, batch + columns + depth), batch + columns + depth,
                                      batch + rows + columns + depth))
            return reduce_sum(product, list(range(-len(depth), 0))), batch + rows + columns
    # The matrix product's operands: a as (batch, rows, depth), b as (batch, columns but the last,
    # depth, the last column axis), several depth axes merged into one.
    left = _arrange(a, a_labels, batch + rows + depth)
    right = _arrange(b, b_labels, batch + columns[:-1] + depth + columns[-1:])
    if len(depth) > 1:
        merged = math.prod(depth_sizes)
        left = reshape(left, (*left.shape[:-len(depth)], merged))
        lead = len(batch) + len(columns[:-1])
        right = reshape(right, (*right.shape[:lead], merged, *right.shape[lead + len(depth):]))
    # matmul's batch axes broadcast: a's extra row axes and b's extra column axes become batch
    # axes, with size-1 axes in the other operand; a missing row or column axis is a size-1 one.
    if not rows:
        left = expand_dims(left, -2)
    if not columns:
        right = expand_dims(right, -1)
    for _ in columns[:-1]:
        left = expand_dims(left, len(batch) + max(len(rows) - 1, 0))
    for _ in rows[:-1]:
        right = expand_dims(right, len(batch))
    product = matmul(left, right)
    if not columns:
        product = squeeze(product, [-1])
    if not rows:
        product = squeeze(product, [-1 if not columns else -2])
    return product, batch + rows[:-1] + columns[:-1] + rows[-1:] + columns[-1:]


def _align(x: Tensor, labels: str, order: str) -> Tensor:
    """``x`` (whose labels are a subsequence of ``order``) with size-1 axes for the labels it lacks."""
    for position, letter in enumerate(order):
        if letter not in labels:
            x = expand_dims(x, position)
            labels = labels[:position] + letter + labels[position:]
    return x


def einsum(equation: str, *inputs: Any, name: str | None = None) -> Tensor:
    """Sums of products named by index letters, as ``np.einsum`` and TF1's ``einsum``:
    ``"ij,jk->ik"`` (a matrix product), ``"bhqd,bhkd->bhqk"`` (attention scores), ``"...ij,jk"``
    (``...`` stands for leading axes, which broadcast), ``"ij->ji"``, ``"ij->"``; without ``->``
    the output is numpy's (the ``...`` axes, then the letters used once, sorted). Each pair of
    operands becomes a matrix product. A letter repeated in one operand (a diagonal or trace) is
    not supported.

    >>> import numpy as np, compiler as cc
    >>> q, k = cc.constant(np.ones((2, 4, 5, 8))), cc.constant(np.ones((2, 4, 6, 8)))
    >>> cc.einsum("bhqd,bhkd->bhqk", q, k).shape
    (2, 4, 5, 6)
    """
    if not isinstance(equation, str):
        raise TypeError(located(f"einsum: the first argument is the equation (a str), got "
                                f"{type(equation).__name__}"))
    if not inputs:
        raise ValueError(located("einsum needs at least one operand"))
    with composite_scope(name or "Einsum", list(inputs)):
        operands = [convert_to_tensor(x) for x in inputs]
        labels, output = _parse(equation, operands)
        _check_sizes(equation, labels, operands)
        result, result_labels = _sum_out(operands[0], labels[0], output + "".join(labels[1:]))
        for position in range(1, len(operands)):
            keep = output + "".join(labels[position + 1:])
            result, result_labels = _contract_pair(result, result_labels, operands[position], labels[position], keep)
        result, result_labels = _sum_out(result, result_labels, output)
        return _arrange(result, result_labels, output)


def tensordot(a: Any, b: Any, axes: Any, name: str | None = None) -> Tensor:
    """The sum of products over ``a``'s axes ``axes[0]`` and ``b``'s ``axes[1]`` (TF1's
    ``tensordot``); an int ``n`` pairs ``a``'s last n axes with ``b``'s first n. The result has
    ``a``'s other axes, then ``b``'s.

    >>> import numpy as np, compiler as cc
    >>> cc.tensordot(cc.constant(np.ones((2, 3, 4))), cc.constant(np.ones((4, 3, 5))), [[1, 2], [1, 0]]).shape
    (2, 5)
    """
    with composite_scope(name or "Tensordot", [a, b]):
        a, b = convert_to_tensor(a), convert_to_tensor(b)
        rank_a, rank_b = len(a.shape), len(b.shape)
        if isinstance(axes, Tensor) or (isinstance(axes, (list, tuple)) and any(
                isinstance(a, Tensor) or (isinstance(a, (list, tuple)) and any(isinstance(i, Tensor) for i in a))
                for a in axes)):
            raise TypeError(located("tensordot: axes must be Python ints (an int, or two lists of axes), not "
                                    "tensors"))
        if isinstance(axes, int) or (hasattr(axes, "ndim") and getattr(axes, "ndim") == 0):
            count = int(axes)
            if not 0 <= count <= min(rank_a, rank_b):
                raise ValueError(located(f"tensordot: axes={count} but the operands have ranks {rank_a} and "
                                         f"{rank_b}"))
            pairs = (list(range(rank_a - count, rank_a)), list(range(count)))
        else:
            try:
                first, second = ([int(axis)] if not hasattr(axis, "__len__") else [int(i) for i in axis]
                                 for axis in axes)
            except (TypeError, ValueError):
                raise ValueError(located(f"tensordot: axes must be an int or a pair of axis lists, got "
                                         f"{axes!r}")) from None
            if len(first) != len(second):
                raise ValueError(located(f"tensordot: axes {first} of a and {second} of b differ in length"))
            for axis, rank, which in [(i, rank_a, "a") for i in first] + [(i, rank_b, "b") for i in second]:
                if not -rank <= axis < rank:
                    raise ValueError(located(f"tensordot: axis {axis} is out of range for {which}, of rank {rank}"))
            pairs = ([i % rank_a for i in first], [i % rank_b for i in second])
            for which, listed in (("a", pairs[0]), ("b", pairs[1])):
                if len(set(listed)) != len(listed):
                    raise ValueError(located(f"tensordot: axes {listed} of {which} repeat an axis"))
        for i, j in zip(*pairs):     # summed together: the sizes must be equal (no broadcasting)
            if a.shape[i] is not None and b.shape[j] is not None and a.shape[i] != b.shape[j]:
                raise ValueError(located(f"tensordot: axis {i} of a ({a.shape[i]}) and axis {j} of b "
                                         f"({b.shape[j]}) are summed together but differ in size"))
        letters = iter(string.ascii_letters)
        a_labels = [next(letters) for _ in range(rank_a)]
        b_labels = [next(letters) for _ in range(rank_b)]
        for i, j in zip(*pairs):
            b_labels[j] = a_labels[i]
        output = [c for i, c in enumerate(a_labels) if i not in pairs[0]] + \
                 [c for j, c in enumerate(b_labels) if j not in pairs[1]]
        return einsum(f"{''.join(a_labels)},{''.join(b_labels)}->{''.join(output)}", a, b)

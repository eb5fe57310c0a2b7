"""The dtypes graphgrad knows: numpy dtype objects, with a few rules about them."""
from __future__ import annotations

from typing import Any

import numpy as np

float32 = np.dtype("float32")
float64 = np.dtype("float64")
int32 = np.dtype("int32")
int64 = np.dtype("int64")
bool_ = np.dtype("bool")

SUPPORTED = (float32, float64, int32, int64, bool_)


# TF1's own spellings where numpy reads them differently: "float" and Python's float are float32
# there (numpy: float64), "double" is float64.
_TF1_NAMES: dict[object, np.dtype] = {"float": float32, float: float32, "double": float64}


def as_dtype(value: object) -> np.dtype:
    """Turn "float32", np.float32, np.dtype(...) into a supported numpy dtype, or raise TypeError.
    TF1's names mean what they mean in TF1: ``"float"`` and ``float`` are float32.

    >>> as_dtype("float").name, as_dtype(float).name, as_dtype("double").name
    ('float32', 'float32', 'float64')
    """
    try:
        if isinstance(value, (tuple, list, dict)):   # numpy reads these as record types
            raise TypeError(value)
        dtype = _TF1_NAMES.get(value) if isinstance(value, (str, type)) else None
        dtype = np.dtype(value) if dtype is None else dtype  # type: ignore[call-overload]
    except TypeError as exc:
        raise TypeError(_located(f"not a dtype: {value!r} (supported: {_SUPPORTED_NAMES})")) from exc
    if dtype not in SUPPORTED:
        raise TypeError(_located(f"dtype {dtype.name} is not supported (supported: {_SUPPORTED_NAMES})"))
    return dtype


_SUPPORTED_NAMES = ", ".join(d.name for d in SUPPORTED)


def _located(message: str) -> str:
    from .graph import located   # the graph module imports this one
    return located(message)


def is_floating(dtype: np.dtype) -> bool:
    return dtype.kind == "f"


def is_integer(dtype: np.dtype) -> bool:
    return dtype.kind in "iu"


def is_differentiable(dtype: np.dtype) -> bool:
    """Only floating tensors carry gradients (integer and bool tensors get None, as in TF1)."""
    return is_floating(dtype)


def can_convert_losslessly(source: np.dtype, target: np.dtype) -> bool:
    """Whether every value of ``source`` is represented exactly by ``target`` (for feeds)."""
    if source == target:
        return True
    if source.kind in "iu" and target.kind == "f" and source.itemsize * 8 > np.finfo(target).nmant + 1:
        return False   # numpy calls int64 -> float64 safe, but 2**53 + 1 has no float64
    return bool(np.can_cast(source, target, casting="safe"))


def convert_losslessly(array: np.ndarray, target: np.dtype, literal: bool) -> np.ndarray | None:
    """``array`` as dtype ``target``, or None if that would lose information (for feeds and for
    Python numbers given as constants); floats into a narrower float round, as TF1's feeds do. ``literal``: the array was made from Python numbers or
    (nested) lists, which take the target dtype where their kind allows it (bools anywhere, ints into
    float, 0 and 1 into bool, floats into float), as in TF1; ints into ints take a range check
    instead, so that a value that does not fit is not wrapped."""
    if literal and array.dtype != target:
        kind = array.dtype.kind
        if (array.size == 0 or kind == "b" or (kind in "iu" and target.kind not in "iu")
                or (kind == "f" and target.kind == "f")):
            with np.errstate(over="ignore"):
                converted = array.astype(target)
            if kind in "fiu" and target.kind == "f" and np.any(np.isinf(converted) & np.isfinite(array)):
                return None   # a number too large for the target (1e39 as float32) is not rounded to inf
            if kind in "iu" and target.kind == "b" and np.any((array != 0) & (array != 1)):
                return None   # 2 is not True: only 0 and 1 are bools unchanged
            return converted
    if array.dtype != target:
        lossless = can_convert_losslessly(array.dtype, target)
        if not lossless and array.dtype.kind == "f" and target.kind == "f":
            # float64 data into float32 (pixels / 255, np.random, a scaler's output): rounded to
            # nearest, as TF1 feeds it; only a value beyond the target's range is refused.
            with np.errstate(over="ignore"):
                converted = array.astype(target)
            return None if np.any(np.isinf(converted) & np.isfinite(array)) else converted
        if not lossless and array.dtype.kind in "iuf" and target.kind == "f":
            # int64 into float64, float64 into float32 (digits' pixel values, np.ones): fine when
            # every value converts exactly (NaN and inf included).
            with np.errstate(over="ignore", invalid="ignore"):
                converted = array.astype(target)
                lossless = array.size == 0 or bool(np.array_equal(converted.astype(array.dtype), array,
                                                                  equal_nan=array.dtype.kind == "f")
                                                   and (array.dtype.kind == "f" or np.isfinite(converted).all()))
        if not lossless and array.dtype.kind in "iub" and target.kind in "iu":
            # Narrowing integers is fine when every value fits (e.g. int64 labels into int32).
            info = np.iinfo(target)
            lossless = array.size == 0 or (array.min() >= info.min and array.max() <= info.max)
        if not lossless:
            return None
        array = array.astype(target)
    return array


# -- what a value that is not an array of numbers holds (for errors) ------------------------

_NUMBERS = (bool, int, float, complex, np.number, np.bool_)


def _is_nested(item: Any) -> bool:
    return isinstance(item, (list, tuple)) or (isinstance(item, np.ndarray) and item.ndim > 0)


def where_ragged(value: Any) -> str | None:
    """Where nested lists stop being rectangular (``value[1] has length 1 but value[0] has length 2``)."""
    lengths: list[int] = []  # along value[0][0]…
    item = value
    while _is_nested(item):
        lengths.append(len(item))
        if not len(item):
            break
        item = item[0]

    def show(index: tuple[int, ...], length: int | None) -> str:
        path = "value" + "".join(f"[{i}]" for i in index)
        return f"{path} is a scalar" if length is None else f"{path} has length {length}"

    def walk(item: Any, index: tuple[int, ...]) -> str | None:
        depth = len(index)
        expected = lengths[depth] if depth < len(lengths) else None
        length = len(item) if _is_nested(item) else None
        if length != expected:
            return f"{show(index, length)} but {show((0,) * depth, expected)}"
        for position, inner in enumerate(item if length else ()):
            found = walk(inner, index + (position,))
            if found is not None:
                return found
        return None

    return walk(value, ())


def why_not_numbers(value: Any, array: np.ndarray) -> str | None:
    """Why ``array`` (made from ``value``) is not numbers (None, strings, other objects), or None."""
    kind = array.dtype.kind
    if kind in "US":
        return f"it holds strings ({array.dtype.name} data)"
    if kind in "VMm":
        return f"it holds {array.dtype.name} data"
    if kind != "O":
        return None
    for item in array.flat:
        if item is None:
            return "it holds None"
        if isinstance(item, int) and not -2 ** 63 <= item < 2 ** 64:
            return f"it holds an integer of {item.bit_length()} bits, too large for any integer dtype"
        if not isinstance(item, _NUMBERS):
            return f"it holds a {type(item).__name__!r} ({item!r:.40})"
    return "it is an array of dtype object"

"""The dtypes graphgrad knows: numpy dtype objects, with a few rules about them."""
from __future__ import annotations

import numpy as np

float32 = np.dtype("float32")
float64 = np.dtype("float64")
int32 = np.dtype("int32")
int64 = np.dtype("int64")
bool_ = np.dtype("bool")

SUPPORTED = (float32, float64, int32, int64, bool_)


def as_dtype(value: object) -> np.dtype:
    """Turn "float32", np.float32, np.dtype(...) into a supported numpy dtype, or raise TypeError."""
    try:
        dtype = np.dtype(value)  # type: ignore[call-overload]
    except TypeError as exc:
        raise TypeError(f"not a dtype: {value!r}") from exc
    if dtype not in SUPPORTED:
        names = ", ".join(d.name for d in SUPPORTED)
        raise TypeError(f"dtype {dtype.name} is not supported (supported: {names})")
    return dtype


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
    return bool(np.can_cast(source, target, casting="safe"))

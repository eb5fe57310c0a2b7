"""TF1's ``tf.image`` ops on NHWC batches (or single HWC images, where TF1 takes them): flips,
crops, resizes, colour adjustments and the total variation. Compositions of gathers, slices and
elementwise ops, so their gradients come from those; sizes are known when the graph is built."""
from __future__ import annotations

from typing import Any, Sequence

import numpy as np

from .. import dtypes
from ..errors import ShapeError
from ..graph import Tensor, located
from ..shapes import format_shape
from .array import expand_dims, shape, squeeze
from .base import composite_scope, convert_to_tensor
from .elementwise import abs as abs_
from .elementwise import add, cast, greater, maximum, multiply, rsqrt, subtract, where
from .gather import gather
from .random import random_uniform
from .reduction import reduce_mean, reduce_sum
from .slicing import getitem, reverse


def _images(function: str, images: Any) -> tuple[Tensor, bool]:
    """(a float NHWC batch of known height, width and channels, whether a single image was given)."""
    x = convert_to_tensor(images)
    if len(x.shape) not in (3, 4) or any(d is None for d in x.shape[-3:]):
        raise ShapeError(located(f"image.{function}: needs an image [height, width, channels] or a batch of them "
                                 f"of known height, width and channels, got {x.name!r} {format_shape(x.shape)}"))
    single = len(x.shape) == 3
    x = expand_dims(x, 0) if single else x
    return (x if dtypes.is_floating(x.dtype) else cast(x, dtypes.float32)), single


def _as_given(x: Tensor, single: bool) -> Tensor:
    return squeeze(x, [0]) if single else x


def flip_left_right(image: Any) -> Tensor:
    """The image mirrored left to right (TF1's ``image.flip_left_right``)."""
    x = convert_to_tensor(image)
    return reverse(x, [len(x.shape) - 2])


def flip_up_down(image: Any) -> Tensor:
    """The image mirrored top to bottom (TF1's ``image.flip_up_down``)."""
    x = convert_to_tensor(image)
    return reverse(x, [len(x.shape) - 3])


def _random_flip(image: Any, flipped: Tensor, seed: int | None) -> Tensor:
    x = convert_to_tensor(image)
    if len(x.shape) == 4:   # one draw per image of the batch (fed at any size)
        batch = x.shape[0] if x.shape[0] is not None else shape(x)[0]
        draws = random_uniform([batch, 1, 1, 1], seed=seed)
    else:
        draws = random_uniform([], seed=seed)
    return where(greater(draws, 0.5), flipped, x)


def random_flip_left_right(image: Any, seed: int | None = None) -> Tensor:
    """Each image mirrored left to right with probability 1/2, drawn anew at every run."""
    return _random_flip(image, flip_left_right(image), seed)


def random_flip_up_down(image: Any, seed: int | None = None) -> Tensor:
    """Each image mirrored top to bottom with probability 1/2, drawn anew at every run."""
    return _random_flip(image, flip_up_down(image), seed)


def central_crop(image: Any, central_fraction: float) -> Tensor:
    """The centre ``central_fraction`` of each image's height and width (TF1's rule for the offsets)."""
    if not 0.0 < central_fraction <= 1.0:
        raise ValueError(located(f"image.central_crop: central_fraction must be in (0, 1], got {central_fraction!r}"))
    x = convert_to_tensor(image)
    height, width = x.shape[-3], x.shape[-2]
    if height is None or width is None:
        raise ShapeError(located(f"image.central_crop: needs a known height and width, got {format_shape(x.shape)}"))
    top, left = int((height - height * central_fraction) / 2), int((width - width * central_fraction) / 2)
    rows = slice(top, height - top)
    columns = slice(left, width - left)
    return getitem(x, (Ellipsis, rows, columns, slice(None)))


def rgb_to_grayscale(images: Any, name: str | None = None) -> Tensor:
    """Luma ``0.2989 R + 0.5870 G + 0.1140 B`` with one channel kept (TF1's ``rgb_to_grayscale``)."""
    with composite_scope(name or "rgb_to_grayscale", [images]):
        x = convert_to_tensor(images)
        if not x.shape or x.shape[-1] != 3:
            raise ShapeError(located(f"image.rgb_to_grayscale: needs 3 channels last, got {format_shape(x.shape)}"))
        weights = convert_to_tensor(np.array([0.2989, 0.5870, 0.1140]), x.dtype if dtypes.is_floating(x.dtype)
                                    else dtypes.float32)
        values = x if dtypes.is_floating(x.dtype) else cast(x, dtypes.float32)
        return expand_dims(reduce_sum(multiply(values, weights), -1), -1)


def adjust_brightness(image: Any, delta: Any) -> Tensor:
    """``image + delta`` (TF1's ``adjust_brightness``, for float images)."""
    x = convert_to_tensor(image)
    return add(x, convert_to_tensor(delta, x.dtype))


def random_brightness(image: Any, max_delta: float, seed: int | None = None) -> Tensor:
    """``image + delta``, ``delta`` uniform in [-max_delta, max_delta) and drawn anew at every run."""
    if max_delta < 0:
        raise ValueError(located(f"image.random_brightness: max_delta must be >= 0, got {max_delta!r}"))
    x = convert_to_tensor(image)
    return add(x, random_uniform([], -max_delta, max_delta, dtype=x.dtype, seed=seed))


def adjust_contrast(images: Any, contrast_factor: Any) -> Tensor:
    """Each channel of each image moved away from its mean by ``contrast_factor`` (TF1's)."""
    x, single = _images("adjust_contrast", images)
    mean = reduce_mean(x, [1, 2], keepdims=True)
    return _as_given(add(multiply(subtract(x, mean), convert_to_tensor(contrast_factor, x.dtype)), mean), single)


def per_image_standardization(image: Any) -> Tensor:
    """Each image scaled to mean 0 and standard deviation 1, the deviation kept at least
    ``1/sqrt(pixels)`` (TF1's ``per_image_standardization``)."""
    x, single = _images("per_image_standardization", image)
    pixels = float(np.prod(x.shape[-3:]))
    mean = reduce_mean(x, [1, 2, 3], keepdims=True)
    centred = subtract(x, mean)
    variance = reduce_mean(multiply(centred, centred), [1, 2, 3], keepdims=True)
    floor_variance = convert_to_tensor(np.asarray(1.0 / pixels), x.dtype)
    return _as_given(multiply(centred, rsqrt(maximum(variance, floor_variance))), single)


def total_variation(images: Any, name: str | None = None) -> Tensor:
    """The sum of absolute differences of neighbouring pixels, down and across, per image (TF1's
    ``total_variation``: a scalar for one image, a vector for a batch)."""
    with composite_scope(name or "total_variation", [images]):
        x, single = _images("total_variation", images)
        down = abs_(subtract(x[:, 1:], x[:, :-1]))
        across = abs_(subtract(x[:, :, 1:], x[:, :, :-1]))
        total = add(reduce_sum(down, [1, 2, 3]), reduce_sum(across, [1, 2, 3]))
        return squeeze(total, [0]) if single else total


def _source_positions(size_in: int, size_out: int, align_corners: bool) -> np.ndarray:
    """TF1's source coordinates of the output rows (half_pixel_centers=False)."""
    if align_corners and size_out > 1:
        scale = (size_in - 1) / (size_out - 1)
    else:
        scale = size_in / size_out
    return np.arange(size_out) * scale


def resize_nearest_neighbor(images: Any, size: Sequence[int], align_corners: bool = False,
                            name: str | None = None) -> Tensor:
    """Each output pixel the input pixel at its scaled position (TF1's ``resize_nearest_neighbor``)."""
    with composite_scope(name or "resize_nearest_neighbor", [images]):
        x, single = _images("resize_nearest_neighbor", images)
        for axis, (size_in, size_out) in enumerate(zip(x.shape[1:3], _size(size)), start=1):
            source = _source_positions(size_in, size_out, align_corners)
            picked = np.round(source) if align_corners else np.floor(source)
            x = gather(x, convert_to_tensor(np.minimum(picked, size_in - 1).astype(np.int32)), axis=axis)
        return _as_given(x, single)


def resize_bilinear(images: Any, size: Sequence[int], align_corners: bool = False, name: str | None = None) -> Tensor:
    """Each output pixel interpolated between the four input pixels around its scaled position
    (TF1's ``resize_bilinear``, float32 results)."""
    with composite_scope(name or "resize_bilinear", [images]):
        x, single = _images("resize_bilinear", images)
        for axis, (size_in, size_out) in enumerate(zip(x.shape[1:3], _size(size)), start=1):
            source = _source_positions(size_in, size_out, align_corners)
            low = np.floor(source).astype(np.int32)
            high = np.minimum(low + 1, size_in - 1).astype(np.int32)
            shape = [1, 1, 1, 1]
            shape[axis] = size_out
            fraction = convert_to_tensor((source - low).reshape(shape), x.dtype)
            below = gather(x, convert_to_tensor(low), axis=axis)
            above = gather(x, convert_to_tensor(high), axis=axis)
            x = add(below, multiply(subtract(above, below), fraction))
        return _as_given(x, single)


def resize_images(images: Any, size: Sequence[int], method: Any = 0, align_corners: bool = False,
                  preserve_aspect_ratio: bool = False, name: str | None = None) -> Tensor:
    """TF1's ``image.resize_images``: ``method`` 0 / "bilinear" or 1 / "nearest" (``ResizeMethod``)."""
    if preserve_aspect_ratio:
        raise ValueError(located("image.resize_images: preserve_aspect_ratio is not available"))
    if method in (0, "bilinear", "BILINEAR"):
        return resize_bilinear(images, size, align_corners, name)
    if method in (1, "nearest", "NEAREST_NEIGHBOR"):
        return resize_nearest_neighbor(images, size, align_corners, name)
    raise ValueError(located(f"image.resize_images: method must be BILINEAR (0) or NEAREST_NEIGHBOR (1), got "
                             f"{method!r}"))


def _size(size: Any) -> tuple[int, int]:
    values = [int(v) for v in np.atleast_1d(size)] if not isinstance(size, Tensor) else None
    if values is None or len(values) != 2 or min(values) < 1:
        raise ValueError(located(f"image: size must be two Python ints [height, width] of at least 1, got {size!r}"))
    return values[0], values[1]


class ResizeMethod:
    """TF1's ``image.ResizeMethod`` values."""

    BILINEAR = 0
    NEAREST_NEIGHBOR = 1

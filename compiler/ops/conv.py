"""Convolution and pooling over NHWC images, as loop nests that read the image at computed positions.

``conv2d``: ``out[n, oh, ow, f] = sum over kh, kw, c of x[n, ih, iw, c] * w[kh, kw, c, f]`` with
``ih = oh * stride + kh * dilation - pad_top`` (zero outside the image). Its two gradients are ops of
the same form (``conv2d_backprop_input``, ``conv2d_backprop_filter``), and each of the three is the
gradient of the others, so second derivatives need nothing more. Each also says how it reads as one
matrix product over an implicit im2col (``kernel_ir.WindowMatmul``): rows are output pixels and depth
the filter taps (the filter gradient: the transpose), which the CPU runs through its GEMM library.

Pooling: ``max_pool`` is a max over the window (padding never wins); its gradient goes to the first
position in the window that holds the max (as TF), found by ``MaxPoolArgmax``; where windows do not
overlap, ``MaxPoolGradFromPeak`` instead lets each input element compare its window's taps with the
pooled max, an elementwise op that fuses with what follows. ``avg_pool`` divides
by the number of image elements in the window (SAME padding is not counted, as TF).

Window geometry (TF's rules): VALID: ``out = ceil((size - span + 1) / stride)``, an error when
``span > size`` (TF1's "Negative dimension size"); SAME: ``out =
ceil(size / stride)``, padded by ``max((out - 1) * stride + span - size, 0)``, the smaller half
before; ``span = (k - 1) * dilation + 1``.
"""
from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any, Mapping, Sequence

import numpy as np

from .. import dtypes
from ..errors import ShapeError
from ..graph import Operation, Tensor, located
from ..kernel_ir import IndexedInput, WindowMatmul
from ..shapes import RuleError, format_shape
from .array import expand_dims, reshape, squeeze, transpose, zeros_like
from .base import LoopNest, OpDef, composite_scope, convert_to_tensor, renamed_argument
from .creation import dynamic_sizes, zeros
from .elementwise import add_n, cast
from .padding import pad
from .slicing import getitem
from .rules import clamp_index, first_dtype, floating_dtype, same_shape_as_second, same_shape_as_third

I64 = dtypes.int64


@dataclass(frozen=True)
class Window:
    """One spatial dimension of a convolution or pool."""

    size: int        # input extent
    kernel: int
    stride: int
    dilation: int
    out: int
    pad: int         # padding before the first element

    @staticmethod
    def of(size: int | None, kernel: int | None, stride: int, dilation: int, padding: str) -> "Window":
        if size is None or kernel is None:
            return Window(-1, -1, stride, dilation, -1, 0)
        span = (kernel - 1) * dilation + 1
        if padding == "VALID":
            if size < span:   # TF1 shape inference: "Negative dimension size caused by subtracting"
                raise RuleError(f"a VALID window spanning {span} does not fit an input of size {size}: the output "
                                f"size would be negative (use a smaller window or SAME padding)")
            out = -(-(size - span + 1) // stride)
            return Window(size, kernel, stride, dilation, out, 0)
        out = -(-size // stride)
        total = max((out - 1) * stride + span - size, 0)
        return Window(size, kernel, stride, dilation, out, total // 2)

    def source(self, sb: Any, out_index: Any, kernel_index: Any) -> Any:
        """The input position read by output ``out_index`` at kernel tap ``kernel_index``."""
        position = sb.mul(out_index, self.stride) if self.stride != 1 else out_index
        tap = sb.mul(kernel_index, self.dilation) if self.dilation != 1 else kernel_index
        position = sb.add(position, tap)
        return sb.sub(position, self.pad) if self.pad else position

    def output_of(self, sb: Any, in_index: Any, kernel_index: Any) -> tuple[Any, Any]:
        """(output position, whether it exists) that reads input ``in_index`` at tap ``kernel_index``."""
        tap = sb.mul(kernel_index, self.dilation) if self.dilation != 1 else kernel_index
        offset = sb.sub(sb.add(in_index, self.pad) if self.pad else in_index, tap)
        valid = sb.ge(offset, 0)
        if self.stride != 1:
            valid = sb.logical_and(valid, sb.eq(sb.index_rem(offset, self.stride), 0))
            offset = sb.index_div(offset, self.stride)
        return offset, sb.logical_and(valid, sb.lt(offset, self.out))


def _inside(sb: Any, index: Any, size: int) -> Any:
    return sb.logical_and(sb.ge(index, 0), sb.lt(index, size))


def _tap(sb: Any, x: IndexedInput, rows: Window, cols: Window, n: Any, oh: Any, kh: Any, ow: Any, kw: Any,
         c: Any) -> tuple[Any, Any]:
    """(whether it lies inside the image, the pixel) that output (oh, ow) reads at tap (kh, kw)."""
    ih, iw = rows.source(sb, oh, kh), cols.source(sb, ow, kw)
    inside = sb.logical_and(_inside(sb, ih, rows.size), _inside(sb, iw, cols.size))
    return inside, x.at(sb, [n, clamp_index(sb, ih, rows.size), clamp_index(sb, iw, cols.size), c])


def _reading_window(sb: Any, rows: Window, cols: Window) -> tuple[Any, Any, Any]:
    """For gradient loop nests over (n, ih, iw, c, kh, kw, ...): the output position (oh, ow), kept
    in range, whose window reads input (ih, iw) at tap (kh, kw), and whether there is one."""
    oh, row_ok = rows.output_of(sb, sb.axis_index(1), sb.axis_index(4))
    ow, col_ok = cols.output_of(sb, sb.axis_index(2), sb.axis_index(5))
    return clamp_index(sb, oh, rows.out), clamp_index(sb, ow, cols.out), sb.logical_and(row_ok, col_ok)


def _pair(value: Any, name: str) -> tuple[int, int]:
    """TF's 4-element NHWC form ``[1, h, w, 1]``, a pair, or one int."""
    values = _whole_numbers(value, name)
    if len(values) == 1:
        values = values * 2
    elif len(values) == 4:
        if values[0] != 1 or values[3] != 1:
            raise ValueError(f"{name} {value!r}: only the spatial entries may differ from 1 (NHWC)")
        values = values[1:3]
    if len(values) != 2 or min(values) < 1:
        raise ValueError(f"{name} {value!r} must be a positive int, a pair, or [1, h, w, 1]")
    return values[0], values[1]


def _whole_numbers(value: Any, name: str) -> list[int]:
    """The ints of a window argument (strides, dilations, ksize); a float or a bool is refused, as
    TF1's ``list(int)`` attributes do (1.5 ran as 1)."""
    array = np.atleast_1d(np.asarray(value))
    if array.dtype.kind not in "iu" or array.ndim != 1:
        raise ValueError(f"{name} must be an int or a list of ints, got {value!r}")
    return [int(v) for v in array]


def _padding(padding: str) -> str:
    padding = str(padding).upper()
    if padding not in ("SAME", "VALID"):
        raise ValueError(f"padding must be 'SAME' or 'VALID', got {padding!r}")
    return padding


def _windows(image: tuple, kernel: tuple, attrs: Mapping[str, Any]) -> tuple[Window, Window]:
    return tuple(Window.of(image[1 + d], kernel[d], attrs["strides"][d], attrs["dilations"][d],
                           attrs["padding"]) for d in range(2))  # type: ignore[return-value]


def _check_image(shape: tuple, what: str) -> None:
    if len(shape) != 4:
        raise RuleError(f"{what} must be 4-D NHWC, got {format_shape(shape)}")


# -- conv2d and its two gradients -----------------------------------------------------------------

def _conv_shape(shapes: Sequence[tuple], attrs: Mapping[str, Any]) -> tuple:
    image, filters = shapes
    _check_image(image, "the input")
    if len(filters) != 4:
        raise RuleError(f"the filter must be 4-D [height, width, in_channels, out_channels], got "
                        f"{format_shape(filters)}")
    if image[3] is not None and filters[2] is not None and image[3] != filters[2]:
        raise RuleError(f"the input has {image[3]} channels but the filter expects {filters[2]}")
    if 0 in filters[:2]:
        raise RuleError(f"the filter's height and width must be at least 1, got {format_shape(filters)}")
    rows, cols = _windows(image, filters, attrs)
    return (image[0], None if rows.out < 0 else rows.out, None if cols.out < 0 else cols.out, filters[3])


def _conv_nest(shapes: Sequence[tuple], out: tuple, attrs: Mapping[str, Any]) -> LoopNest:
    image, filters = shapes
    rows, cols = _windows(image, filters, attrs)
    kh, kw, channels, features = filters
    space = (image[0], rows.out, cols.out, features, kh, kw, channels)
    body = _pixel_times_operand(image, rows, cols, dict(n=0, oh=1, ow=2, kh=4, kw=5, c=6))
    return LoopNest(space, ((None,) * 4, (4, 5, 6, 3)), (4, 5, 6), "sum", body)


def _pixel_times_operand(image: tuple, rows: Window, cols: Window, axes: Mapping[str, int]) -> Any:
    """A loop-nest body: the image pixel a tap reads (0 in the padding) times the second input;
    ``axes`` names the space axes of batch, output row and column, tap row and column, channel."""
    def body(sb: Any, args: Sequence[Any]) -> Any:
        x: IndexedInput = args[0]
        zero = sb.literal(0, x.dtype)
        if 0 in image:
            return zero
        n, oh, ow, kh, kw, c = (sb.axis_index(axes[name]) for name in ("n", "oh", "ow", "kh", "kw", "c"))
        inside, pixel = _tap(sb, x, rows, cols, n, oh, kh, ow, kw, c)
        return sb.mul(sb.select(inside, pixel, zero), args[1])
    return body


def _backprop_input_nest(shapes: Sequence[tuple], out: tuple, attrs: Mapping[str, Any]) -> LoopNest:
    # The filter comes with its channel axes swapped ([kh, kw, out, in]) so that the input channels,
    # the output's contiguous axis, are contiguous in it too: the innermost loop runs along them.
    grad, swapped, image = shapes
    rows, cols = _windows(image, swapped, attrs)
    kh, kw, features, channels = swapped
    space = (image[0], image[1], image[2], channels, kh, kw, features)

    def body(sb: Any, args: Sequence[Any]) -> Any:
        g: IndexedInput = args[0]
        zero = sb.literal(0, g.dtype)
        if 0 in grad:
            return zero
        oh, ow, read = _reading_window(sb, rows, cols)
        value = g.at(sb, [sb.axis_index(0), oh, ow, sb.axis_index(6)])
        return sb.mul(sb.select(read, value, zero), args[1])
    return LoopNest(space, ((None,) * 4, (4, 5, 6, 3), (None,) * 4), (4, 5, 6), "sum", body)


def _backprop_filter_nest(shapes: Sequence[tuple], out: tuple, attrs: Mapping[str, Any]) -> LoopNest:
    image, grad, filters = shapes
    rows, cols = _windows(image, filters, attrs)
    kh, kw, channels, features = filters
    space = (kh, kw, channels, features, image[0], rows.out, cols.out)
    body = _pixel_times_operand(image, rows, cols, dict(kh=0, kw=1, c=2, n=4, oh=5, ow=6))
    return LoopNest(space, ((None,) * 4, (4, 5, 6, 3), (None,) * 4), (4, 5, 6), "sum", body)


def _conv_window(shapes: Sequence[tuple], attrs: Mapping[str, Any], strides: tuple[int, ...]) -> WindowMatmul:
    """conv2d as a product: rows are output pixels, depth the filter taps, columns the features."""
    image, filters = shapes
    rows, cols = _windows(image, filters, attrs)
    return WindowMatmul(tuple(image), tuple(strides), (image[0], rows.out, cols.out), tuple(filters[:3]),
                        (rows.stride, cols.stride), (rows.dilation, cols.dilation), (-rows.pad, -cols.pad), True,
                        (0, 1, 2), (4, 5, 6), 3)


def _backprop_input_window(shapes: Sequence[tuple], attrs: Mapping[str, Any],
                           strides: tuple[int, ...]) -> WindowMatmul | None:
    """The input gradient at stride 1 as a product over the output gradient: input pixel (i, j) at
    tap (u, v) reads the gradient at ``i + pad - u * dilation`` (a stride skips rows: no product)."""
    grad, swapped, image = shapes
    rows, cols = _windows(image, swapped, attrs)
    if rows.stride != 1 or cols.stride != 1:
        return None
    return WindowMatmul(tuple(grad), tuple(strides), tuple(image[:3]), tuple(swapped[:3]), (1, 1),
                        (-rows.dilation, -cols.dilation), (rows.pad, cols.pad), True, (0, 1, 2), (4, 5, 6), 3)


def _backprop_filter_window(shapes: Sequence[tuple], attrs: Mapping[str, Any],
                            strides: tuple[int, ...]) -> WindowMatmul:
    """The filter gradient as a product: rows are taps, depth the output pixels, columns features."""
    image, grad, filters = shapes
    rows, cols = _windows(image, filters, attrs)
    return WindowMatmul(tuple(image), tuple(strides), (image[0], rows.out, cols.out), tuple(filters[:3]),
                        (rows.stride, cols.stride), (rows.dilation, cols.dilation), (-rows.pad, -cols.pad), False,
                        (0, 1, 2), (4, 5, 6), 3)


def _reference_windows(image_shape: tuple, filter_shape: tuple, attrs: Mapping[str, Any]) -> tuple[Window, Window]:
    return _windows(tuple(image_shape), tuple(filter_shape), attrs)


def _padded(x: np.ndarray, rows: Window, cols: Window, fill: float = 0.0) -> np.ndarray:
    """x padded so every tap of every window lies inside (NHWC)."""
    height = max((rows.out - 1) * rows.stride + (rows.kernel - 1) * rows.dilation + 1, rows.size + rows.pad)
    width = max((cols.out - 1) * cols.stride + (cols.kernel - 1) * cols.dilation + 1, cols.size + cols.pad)
    result = np.full((x.shape[0], max(height, 0), max(width, 0), x.shape[3]), fill, x.dtype)
    result[:, rows.pad:rows.pad + rows.size, cols.pad:cols.pad + cols.size, :] = x
    return result


def _taps(x: np.ndarray, rows: Window, cols: Window, fill: float = 0.0) -> np.ndarray:
    """[N, OH, OW, KH, KW, C]: the input under each kernel tap of each output position."""
    result = np.empty((x.shape[0], rows.out, cols.out, rows.kernel, cols.kernel, x.shape[3]), x.dtype)
    if 0 in (rows.out, cols.out):   # the slices below would not be empty: their stop is below their start
        return result
    padded = _padded(x, rows, cols, fill)
    for i in range(rows.kernel):
        for j in range(cols.kernel):
            top, left = i * rows.dilation, j * cols.dilation
            result[:, :, :, i, j, :] = padded[:, top:top + (rows.out - 1) * rows.stride + 1:rows.stride,
                                              left:left + (cols.out - 1) * cols.stride + 1:cols.stride, :]
    return result


def _conv_reference(values: Sequence[np.ndarray], attrs: Mapping[str, Any]) -> np.ndarray:
    x, w = np.asarray(values[0]), np.asarray(values[1])
    rows, cols = _reference_windows(x.shape, w.shape, attrs)
    if 0 in (rows.out, cols.out) or 0 in x.shape:
        return np.zeros((x.shape[0], rows.out, cols.out, w.shape[3]), x.dtype)
    return np.einsum("nhwijc,ijcf->nhwf", _taps(x, rows, cols), w).astype(x.dtype)


def _backprop_input_reference(values: Sequence[np.ndarray], attrs: Mapping[str, Any]) -> np.ndarray:
    g, w, like = np.asarray(values[0]), np.swapaxes(np.asarray(values[1]), 2, 3), np.asarray(values[2])
    rows, cols = _reference_windows(like.shape, w.shape, attrs)
    padded = np.zeros(_padded(np.zeros(like.shape, g.dtype), rows, cols).shape, g.dtype)
    contributions = np.einsum("nhwf,ijcf->nhwijc", g, w)
    if 0 in (rows.out, cols.out):   # no output position: nothing flows back
        return np.zeros(like.shape, g.dtype)
    for i in range(rows.kernel):
        for j in range(cols.kernel):
            top, left = i * rows.dilation, j * cols.dilation
            padded[:, top:top + (rows.out - 1) * rows.stride + 1:rows.stride,
                   left:left + (cols.out - 1) * cols.stride + 1:cols.stride, :] += contributions[:, :, :, i, j, :]
    return padded[:, rows.pad:rows.pad + rows.size, cols.pad:cols.pad + cols.size, :].copy()


def _backprop_filter_reference(values: Sequence[np.ndarray], attrs: Mapping[str, Any]) -> np.ndarray:
    x, g, like = np.asarray(values[0]), np.asarray(values[1]), np.asarray(values[2])
    rows, cols = _reference_windows(x.shape, like.shape, attrs)
    if 0 in (rows.out, cols.out) or 0 in x.shape:
        return np.zeros(like.shape, x.dtype)
    return np.einsum("nhwijc,nhwf->ijcf", _taps(x, rows, cols), g).astype(x.dtype)


def _conv_attrs(op: Operation) -> dict[str, Any]:
    return {k: op.attrs[k] for k in ("strides", "dilations", "padding")}


def _swap_channels(w: Tensor) -> Tensor:
    return transpose(w, (0, 1, 3, 2))


def _conv_grad(op: Operation, g: Tensor) -> list[Tensor]:
    x, w = op.inputs
    attrs = _conv_attrs(op)
    return [Conv2DBackpropInput(g, _swap_channels(w), x, **attrs), Conv2DBackpropFilter(x, g, w, **attrs)]


def _backprop_input_grad(op: Operation, g: Tensor) -> list[Tensor | None]:
    grad, swapped, _ = op.inputs
    w = _swap_channels(swapped)
    return [Conv2D(g, w, **_conv_attrs(op)), _swap_channels(Conv2DBackpropFilter(g, grad, w, **_conv_attrs(op))),
            None]


def _backprop_filter_grad(op: Operation, g: Tensor) -> list[Tensor | None]:
    x, grad, _ = op.inputs
    return [Conv2DBackpropInput(grad, _swap_channels(g), x, **_conv_attrs(op)), Conv2D(x, g, **_conv_attrs(op)),
            None]


Conv2D = OpDef("Conv2D", "reduce", _conv_shape, floating_dtype, reference=_conv_reference,
               grad_rule=_conv_grad, loop_nest=_conv_nest, indexed_inputs=(0,), window_matmul=_conv_window)


def _backprop_input_shape(shapes: Sequence[tuple], attrs: Mapping[str, Any]) -> tuple:
    """The third input's shape (the convolution's input), checked against the gradient: a
    ``conv2d_transpose`` whose ``output_shape`` names a batch reads the value's rows by it."""
    grad, swapped, image = shapes
    _check_image(image, "the output shape")
    rows, cols = _windows(image, swapped, attrs)
    expected = (image[0], rows.out if rows.out >= 0 else None, cols.out if cols.out >= 0 else None, swapped[2])
    for axis, (got, wanted) in enumerate(zip(grad, expected)):
        if got is not None and wanted is not None and got != wanted:
            what = ("batch", "height", "width", "channels")[axis]
            raise RuleError(f"the gradient {format_shape(grad)} does not fit a convolution of {format_shape(image)}: "
                            f"its {what} is {got}, the convolution's {wanted}")
    return tuple(image)


Conv2DBackpropInput = OpDef(
    "Conv2DBackpropInput", "reduce", _backprop_input_shape,
    lambda types, attrs: floating_dtype(types[:2], attrs), reference=_backprop_input_reference,
    grad_rule=_backprop_input_grad, loop_nest=_backprop_input_nest, indexed_inputs=(0,), shape_only_inputs=(2,),
    window_matmul=_backprop_input_window)
Conv2DBackpropFilter = OpDef(
    "Conv2DBackpropFilter", "reduce", same_shape_as_third,
    lambda types, attrs: floating_dtype(types[:2], attrs), reference=_backprop_filter_reference,
    grad_rule=_backprop_filter_grad, loop_nest=_backprop_filter_nest, indexed_inputs=(0,), shape_only_inputs=(2,),
    window_matmul=_backprop_filter_window)


def conv2d(input: Any, filter: Any = None, strides: Any = 1, padding: str = "VALID",  # noqa: A002
           use_cudnn_on_gpu: bool = True, data_format: str | None = "NHWC", dilations: Any = 1,
           name: str | None = None, filters: Any = None) -> Tensor:
    """2-D convolution (cross-correlation, as TF) of NHWC ``input`` with ``filter`` (or ``filters``)
    of shape ``[height, width, in_channels, out_channels]``. ``strides``/``dilations``: an int, a
    pair, or TF's ``[1, h, w, 1]``; ``padding``: ``"SAME"`` or ``"VALID"``. TF1's signature;
    ``use_cudnn_on_gpu`` is ignored.

    >>> import numpy as np, compiler as cc
    >>> x = cc.placeholder("float32", (None, 8, 8, 1))
    >>> cc.nn.conv2d(x, cc.Variable(np.zeros((3, 3, 1, 4), "float32")), padding="SAME").shape
    (None, 8, 8, 4)
    """
    filter = renamed_argument("conv2d", "filters", filters, "filter", filter)  # noqa: A001
    if data_format not in (None, "NHWC"):
        raise ValueError(located(f"conv2d: only data_format='NHWC' is supported, got {data_format!r}"))
    try:
        attrs = dict(strides=_pair(strides, "strides"), padding=_padding(padding),
                     dilations=_pair(1 if dilations is None else dilations, "dilations"))
    except ValueError as exc:
        raise ValueError(located(f"conv2d: {exc}")) from None
    if max(attrs["strides"]) > 1 and max(attrs["dilations"]) > 1:
        raise ValueError(located("conv2d: strides and dilations cannot both exceed 1 (as TF)"))
    return Conv2D(input, filter, name=name, **attrs)


# -- pooling --------------------------------------------------------------------------------------

def _pool_windows(image: tuple, attrs: Mapping[str, Any]) -> tuple[Window, Window]:
    return tuple(Window.of(image[1 + d], attrs["ksize"][d], attrs["strides"][d], 1, attrs["padding"])
                 for d in range(2))  # type: ignore[return-value]


def _pool_shape(shapes: Sequence[tuple], attrs: Mapping[str, Any]) -> tuple:
    image = shapes[0]
    _check_image(image, "the input")
    rows, cols = _pool_windows(image, attrs)
    return (image[0], None if rows.out < 0 else rows.out, None if cols.out < 0 else cols.out, image[3])


def _pool_nest(kind: str):
    def loop_nest(shapes: Sequence[tuple], out: tuple, attrs: Mapping[str, Any]) -> LoopNest:
        image = shapes[0]
        rows, cols = _pool_windows(image, attrs)
        space = (image[0], rows.out, cols.out, image[3], rows.kernel, cols.kernel)

        def body(sb: Any, args: Sequence[Any]) -> Any:
            x: IndexedInput = args[0]
            empty = sb.literal(-np.inf if kind == "max" else 0, x.dtype)
            if 0 in image:
                return sb.literal(rows.kernel * cols.kernel, I64) if kind == "argmax" else empty
            n, oh, ow, c, kh, kw = (sb.axis_index(a) for a in range(6))
            inside, pixel = _tap(sb, x, rows, cols, n, oh, kh, ow, kw, c)
            if kind == "max":
                return sb.select(inside, pixel, empty)
            if kind == "argmax":  # the first tap (row-major) that holds the max, or the first NaN
                peak = args[1]
                hit = sb.logical_and(inside, sb.logical_or(sb.eq(pixel, peak), sb.isnan(pixel)))
                tap = sb.add(sb.mul(sb.axis_index(4), cols.kernel), sb.axis_index(5))
                return sb.select(hit, tap, sb.literal(rows.kernel * cols.kernel, I64))
            count = sb.mul(_window_count(sb, rows, sb.axis_index(1)), _window_count(sb, cols, sb.axis_index(2)))
            return sb.select(inside, sb.div(pixel, sb.cast(count, x.dtype)), empty)
        combiner = {"max": "max", "argmax": "min", "avg": "sum"}[kind]
        inputs: tuple = ((None,) * 4,) if kind != "argmax" else ((None,) * 4, (0, 1, 2, 3))
        return LoopNest(space, inputs, (4, 5), combiner, body)
    return loop_nest


def _window_count(sb: Any, window: Window, out_index: Any) -> Any:
    """How many taps of output ``out_index``'s window lie inside the input (avg_pool's divisor)."""
    start = window.source(sb, out_index, sb.literal(0, I64))
    stop = sb.add(start, window.kernel)
    return sb.sub(sb.minimum(stop, window.size), sb.maximum(start, 0))


def _pool_taps_reference(x: np.ndarray, attrs: Mapping[str, Any], fill: float) -> tuple[np.ndarray, Window, Window]:
    rows, cols = _pool_windows(x.shape, attrs)
    return _taps(x, rows, cols, fill), rows, cols


def _max_pool_reference(values: Sequence[np.ndarray], attrs: Mapping[str, Any]) -> np.ndarray:
    x = np.asarray(values[0])
    rows, cols = _pool_windows(x.shape, attrs)
    if 0 in x.shape or 0 in (rows.out, cols.out):
        return np.full((x.shape[0], rows.out, cols.out, x.shape[3]), -np.inf, x.dtype)
    taps, _, _ = _pool_taps_reference(x, attrs, -np.inf)
    return taps.max(axis=(3, 4))


def _counts_reference(window: Window) -> np.ndarray:
    starts = np.arange(window.out) * window.stride - window.pad
    return np.minimum(starts + window.kernel, window.size) - np.maximum(starts, 0)


def _avg_pool_reference(values: Sequence[np.ndarray], attrs: Mapping[str, Any]) -> np.ndarray:
    x = np.asarray(values[0])
    rows, cols = _pool_windows(x.shape, attrs)
    if 0 in x.shape or 0 in (rows.out, cols.out):
        return np.zeros((x.shape[0], rows.out, cols.out, x.shape[3]), x.dtype)
    taps, _, _ = _pool_taps_reference(x, attrs, 0.0)
    counts = np.outer(_counts_reference(rows), _counts_reference(cols)).astype(x.dtype)
    return (taps.sum(axis=(3, 4)) / counts[None, :, :, None]).astype(x.dtype)


def _argmax_reference(values: Sequence[np.ndarray], attrs: Mapping[str, Any]) -> np.ndarray:
    x = np.asarray(values[0])
    rows, cols = _pool_windows(x.shape, attrs)
    taps, _, _ = _pool_taps_reference(x, attrs, -np.inf)
    inside, _, _ = _pool_taps_reference(np.ones(x.shape, bool), attrs, False)

    def flat(per_tap: np.ndarray) -> np.ndarray:
        # The window's taps spelled out (not -1): reshape cannot infer a size next to a size-0 axis.
        return per_tap.transpose(0, 1, 2, 5, 3, 4).reshape(x.shape[0], rows.out, cols.out, x.shape[3],
                                                           rows.kernel * cols.kernel)
    values, inside = flat(taps), flat(inside)
    # Padding never wins, even where every tap inside the image is -inf.
    peak = np.where(inside, values, -np.inf).max(axis=-1, keepdims=True, initial=-np.inf)
    hits = inside & ((values == peak) | np.isnan(values))
    return np.where(hits.any(axis=-1), hits.argmax(axis=-1), rows.kernel * cols.kernel).astype(np.int64)


def _pool_attrs(op: Operation) -> dict[str, Any]:
    return {k: op.attrs[k] for k in ("ksize", "strides", "padding")}


def _max_pool_grad(op: Operation, g: Tensor) -> list[Tensor]:
    x, attrs = op.inputs[0], _pool_attrs(op)
    if all(attrs["strides"][d] >= attrs["ksize"][d] for d in range(2)):
        # Windows that do not overlap: each input element finds its one window's max itself.
        return [MaxPoolGradFromPeak(g, op.outputs[0], x, **attrs)]
    taps = MaxPoolArgmax(x, op.outputs[0], **attrs)
    return [MaxPoolGrad(g, taps, x, **attrs)]


def _max_pool_grad_from_peak_lower(sb: Any, args: Sequence[Any], attrs: Mapping[str, Any]) -> Any:
    # dx[n, ih, iw, c] = g at the one window (oh, ow) holding (ih, iw) if (ih, iw) is that window's
    # first tap (row-major) equal to its max or NaN (MaxPoolArgmax's choice), else 0. Each window
    # tap is read again (at most kh * kw loads, all near the element) instead of storing an argmax.
    g, peak, x = args
    zero = sb.literal(0, g.dtype)
    if 0 in g.shape or 0 in x.shape:
        return zero
    rows, cols = _pool_windows(x.shape, attrs)
    n, c = sb.index(0), sb.index(3)
    (oh, row), (ow, col) = (_window_holding(sb, window, sb.index(1 + d)) for d, window in enumerate((rows, cols)))
    inside_window = sb.logical_and(sb.logical_and(sb.lt(row, rows.kernel), sb.lt(oh, rows.out)),
                                   sb.logical_and(sb.lt(col, cols.kernel), sb.lt(ow, cols.out)))
    oh, ow = clamp_index(sb, oh, rows.out), clamp_index(sb, ow, cols.out)
    top = peak.at(sb, [n, oh, ow, c])
    # The first tap as int32: a vector of it is as wide as one of float32 pixels.
    first = sb.literal(rows.kernel * cols.kernel, dtypes.int32)
    for tap in reversed(range(rows.kernel * cols.kernel)):
        inside, pixel = _tap(sb, x, rows, cols, n, oh, tap // cols.kernel, ow, tap % cols.kernel, c)
        hit = sb.logical_and(inside, sb.logical_or(sb.eq(pixel, top), sb.isnan(pixel)))
        first = sb.select(hit, sb.literal(tap, dtypes.int32), first)
    own = sb.cast(sb.add(sb.mul(row, cols.kernel), col), dtypes.int32)
    chosen = sb.logical_and(inside_window, sb.eq(first, own))
    return sb.select(chosen, g.at(sb, [n, oh, ow, c]), zero)


def _window_holding(sb: Any, window: Window, in_index: Any) -> tuple[Any, Any]:
    """(output position, tap) of the window that reads ``in_index`` when windows do not overlap (the
    tap may reach past the kernel: a gap between windows)."""
    offset = sb.add(in_index, window.pad) if window.pad else in_index
    if window.stride == 1:
        return offset, sb.literal(0, I64)
    out = sb.index_div(offset, window.stride)
    return out, sb.sub(offset, sb.mul(out, window.stride))


def _max_pool_grad_from_peak_grad(op: Operation, g: Tensor) -> list[Tensor | None]:
    _, peak, x = op.inputs
    taps = MaxPoolArgmax(x, peak, **_pool_attrs(op))
    return [MaxPoolGather(g, taps, **_pool_attrs(op)), None, None]


def _max_pool_grad_from_peak_reference(values: Sequence[np.ndarray], attrs: Mapping[str, Any]) -> np.ndarray:
    g, peak, x = (np.asarray(v) for v in values)
    return _max_pool_grad_reference([g, _argmax_reference([x, peak], attrs), x], attrs)


def _max_pool_grad_nest(shapes: Sequence[tuple], out: tuple, attrs: Mapping[str, Any]) -> LoopNest:
    # dx[n, ih, iw, c] = sum over taps (i, j) whose window put its max here of g at that window.
    grad, _, image = shapes
    rows, cols = _pool_windows(image, attrs)
    space = (image[0], image[1], image[2], image[3], rows.kernel, cols.kernel)

    def body(sb: Any, args: Sequence[Any]) -> Any:
        g, taps = args[0], args[1]
        zero = sb.literal(0, g.dtype)
        if 0 in grad:
            return zero
        oh, ow, read = _reading_window(sb, rows, cols)
        at = [sb.axis_index(0), oh, ow, sb.axis_index(3)]
        tap = sb.add(sb.mul(sb.axis_index(4), cols.kernel), sb.axis_index(5))
        chosen = sb.logical_and(read, sb.eq(taps.at(sb, at), tap))
        return sb.select(chosen, g.at(sb, at), zero)
    return LoopNest(space, ((None,) * 4, (None,) * 4, (None,) * 4), (4, 5), "sum", body)


def _max_pool_grad_grad(op: Operation, g: Tensor) -> list[Tensor | None]:
    _, taps, _ = op.inputs
    return [MaxPoolGather(g, taps, **_pool_attrs(op)), None, None]


def _max_pool_gather_lower(sb: Any, args: Sequence[Any], attrs: Mapping[str, Any]) -> Any:
    # out[n, oh, ow, c] = x at the tap of window (oh, ow) that held the max.
    x: IndexedInput = args[0]
    if 0 in x.shape:
        return sb.literal(0, x.dtype)
    rows, cols = _pool_windows(x.shape, attrs)
    tap = args[1]
    ih = rows.source(sb, sb.index(1), sb.index_div(tap, cols.kernel))
    iw = cols.source(sb, sb.index(2), sb.index_rem(tap, cols.kernel))
    inside = sb.logical_and(_inside(sb, ih, rows.size), _inside(sb, iw, cols.size))
    value = x.at(sb, [sb.index(0), clamp_index(sb, ih, rows.size), clamp_index(sb, iw, cols.size), sb.index(3)])
    return sb.select(inside, value, sb.literal(0, x.dtype))


def _max_pool_gather_reference(values: Sequence[np.ndarray], attrs: Mapping[str, Any]) -> np.ndarray:
    x, taps = np.asarray(values[0]), np.asarray(values[1])
    rows, cols = _pool_windows(x.shape, attrs)
    every = _taps(x, rows, cols, 0.0).transpose(0, 1, 2, 5, 3, 4)
    every = every.reshape(taps.shape + (math.prod(every.shape[4:]),))   # not -1: numpy refuses it when empty
    return np.take_along_axis(every, np.clip(taps, 0, every.shape[-1] - 1)[..., None], axis=-1)[..., 0]


def _max_pool_grad_reference(values: Sequence[np.ndarray], attrs: Mapping[str, Any]) -> np.ndarray:
    g, taps, like = np.asarray(values[0]), np.asarray(values[1]), np.asarray(values[2])
    rows, cols = _pool_windows(like.shape, attrs)
    padded = np.zeros(_padded(np.zeros(like.shape, g.dtype), rows, cols).shape, g.dtype)
    for n, oh, ow, c in np.ndindex(*g.shape):
        i, j = divmod(int(taps[n, oh, ow, c]), cols.kernel)
        padded[n, oh * rows.stride + i, ow * cols.stride + j, c] += g[n, oh, ow, c]
    return padded[:, rows.pad:rows.pad + rows.size, cols.pad:cols.pad + cols.size, :].copy()


def _avg_pool_grad(op: Operation, g: Tensor) -> list[Tensor]:
    return [AvgPoolGrad(g, op.inputs[0], **_pool_attrs(op))]


def _avg_pool_grad_nest(shapes: Sequence[tuple], out: tuple, attrs: Mapping[str, Any]) -> LoopNest:
    grad, image = shapes
    rows, cols = _pool_windows(image, attrs)
    space = (image[0], image[1], image[2], image[3], rows.kernel, cols.kernel)

    def body(sb: Any, args: Sequence[Any]) -> Any:
        g: IndexedInput = args[0]
        zero = sb.literal(0, g.dtype)
        if 0 in grad:
            return zero
        oh, ow, read = _reading_window(sb, rows, cols)
        count = sb.mul(_window_count(sb, rows, oh), _window_count(sb, cols, ow))
        value = sb.div(g.at(sb, [sb.axis_index(0), oh, ow, sb.axis_index(3)]), sb.cast(count, g.dtype))
        return sb.select(read, value, zero)
    return LoopNest(space, ((None,) * 4, (None,) * 4), (4, 5), "sum", body)


def _avg_pool_grad_reference(values: Sequence[np.ndarray], attrs: Mapping[str, Any]) -> np.ndarray:
    g, like = np.asarray(values[0]), np.asarray(values[1])
    rows, cols = _pool_windows(like.shape, attrs)
    if 0 in (rows.out, cols.out):   # no window: nothing flows back
        return np.zeros(like.shape, g.dtype)
    padded = np.zeros(_padded(np.zeros(like.shape, g.dtype), rows, cols).shape, g.dtype)
    counts = np.outer(_counts_reference(rows), _counts_reference(cols)).astype(g.dtype)
    share = g / counts[None, :, :, None] if g.size else g
    for i in range(rows.kernel):
        for j in range(cols.kernel):
            padded[:, i:i + (rows.out - 1) * rows.stride + 1:rows.stride,
                   j:j + (cols.out - 1) * cols.stride + 1:cols.stride, :] += share
    return padded[:, rows.pad:rows.pad + rows.size, cols.pad:cols.pad + cols.size, :].copy()


MaxPool = OpDef("MaxPool", "reduce", _pool_shape, floating_dtype, reference=_max_pool_reference,
                grad_rule=_max_pool_grad, loop_nest=_pool_nest("max"), indexed_inputs=(0,))
MaxPoolArgmax = OpDef("MaxPoolArgmax", "reduce", lambda shapes, attrs: _pool_shape(shapes[:1], attrs),
                      lambda types, attrs: I64, reference=_argmax_reference,
                      grad_rule=lambda op, g: [None, None], loop_nest=_pool_nest("argmax"), indexed_inputs=(0,))
MaxPoolGrad = OpDef("MaxPoolGrad", "reduce", same_shape_as_third,
                    first_dtype, reference=_max_pool_grad_reference,
                    grad_rule=_max_pool_grad_grad, loop_nest=_max_pool_grad_nest,
                    indexed_inputs=(0, 1), shape_only_inputs=(2,))
MaxPoolGradFromPeak = OpDef("MaxPoolGradFromPeak", "elementwise", same_shape_as_third, first_dtype,
                            reference=_max_pool_grad_from_peak_reference, grad_rule=_max_pool_grad_from_peak_grad,
                            lower_scalar=_max_pool_grad_from_peak_lower,
                            dim_map=lambda shapes, out, attrs: [(None,) * 4] * 3, indexed_inputs=(0, 1, 2))
MaxPoolGather = OpDef("MaxPoolGather", "elementwise", same_shape_as_second,
                      first_dtype, reference=_max_pool_gather_reference,
                      grad_rule=lambda op, g: [MaxPoolGrad(g, op.inputs[1], op.inputs[0], **_pool_attrs(op)), None],
                      lower_scalar=_max_pool_gather_lower,
                      dim_map=lambda shapes, out, attrs: [(None,) * 4, (0, 1, 2, 3)], indexed_inputs=(0,))
AvgPool = OpDef("AvgPool", "reduce", _pool_shape, floating_dtype, reference=_avg_pool_reference,
                grad_rule=_avg_pool_grad, loop_nest=_pool_nest("avg"), indexed_inputs=(0,))
AvgPoolGrad = OpDef("AvgPoolGrad", "reduce", same_shape_as_second,
                    first_dtype, reference=_avg_pool_grad_reference,
                    grad_rule=lambda op, g: [AvgPool(g, **_pool_attrs(op)), None],
                    loop_nest=_avg_pool_grad_nest, indexed_inputs=(0,), shape_only_inputs=(1,))


def _pool(opdef: OpDef, what: str, value: Any, ksize: Any, strides: Any, padding: str, data_format: str | None,
          name: str | None, input: Any) -> Tensor:  # noqa: A002
    value = renamed_argument(what, "input", input, "value", value)
    if data_format not in (None, "NHWC"):
        raise ValueError(located(f"{what}: only data_format='NHWC' is supported, got {data_format!r}"))
    try:
        attrs = dict(ksize=_pair(ksize, "ksize"), strides=_pair(strides, "strides"), padding=_padding(padding))
    except ValueError as exc:
        raise ValueError(located(f"{what}: {exc}")) from None
    return opdef(value, name=name, **attrs)


def max_pool(value: Any = None, ksize: Any = None, strides: Any = None, padding: str = "VALID",
             data_format: str | None = "NHWC", name: str | None = None, input: Any = None) -> Tensor:  # noqa: A002
    """Max over ``ksize`` windows of NHWC ``value`` (padding never wins); the gradient goes to the
    first position of each window that holds its max.

    >>> import compiler as cc
    >>> x = cc.placeholder("float32", (None, 8, 8, 3))
    >>> cc.nn.max_pool(x, ksize=2, strides=2).shape
    (None, 4, 4, 3)
    """
    return _pool(MaxPool, "max_pool", value, ksize, strides, padding, data_format, name, input)


def avg_pool(value: Any = None, ksize: Any = None, strides: Any = None, padding: str = "VALID",
             data_format: str | None = "NHWC", name: str | None = None, input: Any = None) -> Tensor:  # noqa: A002
    """Mean over ``ksize`` windows of NHWC ``value``, counting only elements inside the image."""
    return _pool(AvgPool, "avg_pool", value, ksize, strides, padding, data_format, name, input)


def conv1d(value: Any = None, filters: Any = None, stride: Any = 1, padding: str = "VALID",
           use_cudnn_on_gpu: bool | None = None, data_format: str | None = "NWC", name: str | None = None,
           input: Any = None, dilations: Any = 1) -> Tensor:  # noqa: A002
    """1-D convolution of ``[batch, width, in_channels]`` with ``filters`` of shape ``[width,
    in_channels, out_channels]``: a ``conv2d`` over an image of height 1 (TF1's ``conv1d``;
    ``input`` is ``value``'s newer name).

    >>> import numpy as np, compiler as cc
    >>> x = cc.placeholder("float32", (None, 20, 3))
    >>> cc.nn.conv1d(x, cc.constant(np.ones((5, 3, 8), "float32")), stride=2, padding="SAME").shape
    (None, 10, 8)
    """
    value = renamed_argument("conv1d", "value", value, "input", input)
    if data_format not in (None, "NWC"):
        raise ValueError(located(f"conv1d: only data_format='NWC' is supported, got {data_format!r}"))
    with composite_scope(name or "conv1d", [value, filters]):
        value, filters = convert_to_tensor(value), convert_to_tensor(filters)
        if len(value.shape) != 3 or len(filters.shape) != 3:
            raise ShapeError(located(f"conv1d: the input must be [batch, width, channels] and the filters [width, "
                                     f"in_channels, out_channels], got {format_shape(value.shape)} and "
                                     f"{format_shape(filters.shape)}"))
        stride, dilation = (_single(v, what) for v, what in ((stride, "stride"),
                                                             (1 if dilations is None else dilations, "dilations")))
        image = conv2d(expand_dims(value, 1), expand_dims(filters, 0), strides=(1, stride), padding=padding,
                       dilations=(1, dilation))
        return squeeze(image, [1])


def _single(value: Any, what: str) -> int:
    """An int, or TF's ``[1, n, 1]`` form, as one int."""
    try:
        values = _whole_numbers(value, what)
    except ValueError as exc:
        raise ValueError(located(f"conv1d: {exc}")) from None
    if len(values) == 3 and values[0] == values[2] == 1:
        values = values[1:2]
    if len(values) != 1 or values[0] < 1:
        raise ValueError(located(f"conv1d: {what} must be a positive int (or [1, n, 1]), got {value!r}"))
    return values[0]


def conv2d_transpose(value: Any = None, filter: Any = None, output_shape: Any = None,  # noqa: A002
                     strides: Any = 1, padding: str = "SAME", data_format: str = "NHWC", name: str | None = None,
                     input: Any = None, filters: Any = None, dilations: Any = 1) -> Tensor:  # noqa: A002
    """The transpose of ``conv2d`` (the gradient of a convolution with respect to its input; a
    "deconvolution" that upsamples): ``value`` ``[batch, height, width, in_channels]``, ``filter``
    ``[height, width, output_channels, in_channels]``, and the result has ``output_shape``
    ``[batch, out_height, out_width, output_channels]``, the shape whose ``conv2d`` with these
    ``strides`` and ``padding`` has ``value``'s shape (TF1's ``conv2d_transpose``; ``input`` and
    ``filters`` are the newer names). The batch entry may be None, -1 or ``shape(value)[0]``:
    ``value``'s batch.

    >>> import numpy as np, compiler as cc
    >>> x = cc.placeholder("float32", (None, 7, 7, 16))
    >>> w = cc.constant(np.ones((3, 3, 8, 16), "float32"))
    >>> cc.nn.conv2d_transpose(x, w, [None, 14, 14, 8], strides=2).shape
    (None, 14, 14, 8)
    """
    value = renamed_argument("conv2d_transpose", "value", value, "input", input)
    filter = renamed_argument("conv2d_transpose", "filter", filter, "filters", filters)  # noqa: A001
    if data_format != "NHWC":
        raise ValueError(located(f"conv2d_transpose: only data_format='NHWC' is supported, got {data_format!r}"))
    if isinstance(output_shape, Tensor) or (isinstance(output_shape, (list, tuple))
                                            and any(isinstance(d, Tensor) for d in output_shape)):
        # TF1's [shape(x)[0], h, w, c] (or any sizes known now): the batch may be read from value's
        sizes, dynamic = dynamic_sizes("conv2d_transpose", output_shape)
        if any(position != 0 or source is not value or axis != 0 for position, source, axis in dynamic):
            raise TypeError(located(f"conv2d_transpose: output_shape may read only value's batch from a shape "
                                    f"(shape(value)[0]); the other sizes must be known now, got {output_shape!r}"))
        output_shape = list(sizes)
    if output_shape is None or len(output_shape) != 4 or any(isinstance(d, Tensor) for d in output_shape):
        raise TypeError(located(f"conv2d_transpose: output_shape must be 4 Python ints [batch, height, width, "
                                f"channels] (batch may be None), got {output_shape!r}"))
    try:
        attrs = dict(strides=_pair(strides, "strides"), dilations=_pair(dilations, "dilations"),
                     padding=_padding(padding))
    except ValueError as exc:
        raise ValueError(located(f"conv2d_transpose: {exc}")) from None
    with composite_scope(name or "conv2d_transpose", [value, filter]):
        value, filter = convert_to_tensor(value), convert_to_tensor(filter)
        if len(value.shape) != 4 or len(filter.shape) != 4:
            raise ShapeError(located(f"conv2d_transpose: value must be 4-D NHWC and filter [height, width, "
                                     f"output_channels, in_channels], got {format_shape(value.shape)} and "
                                     f"{format_shape(filter.shape)}"))
        batch, height, width, channels = (None if d is None or d == -1 else int(d) for d in output_shape)
        if None in (height, width, channels):
            raise ValueError(located(f"conv2d_transpose: only the batch of output_shape may be unknown, got "
                                     f"{output_shape!r}"))
        if filter.shape[2] is not None and filter.shape[2] != channels:
            raise ShapeError(located(f"conv2d_transpose: output_shape has {channels} channels but the filter "
                                     f"{format_shape(filter.shape)} makes {filter.shape[2]} (its third axis)"))
        if value.shape[3] is not None and filter.shape[3] is not None and value.shape[3] != filter.shape[3]:
            raise ShapeError(located(f"conv2d_transpose: value has {value.shape[3]} channels but the filter "
                                     f"{format_shape(filter.shape)} takes {filter.shape[3]} (its last axis)"))
        for axis, size in ((1, height), (2, width)):
            try:
                window = Window.of(size, filter.shape[axis - 1], attrs["strides"][axis - 1],
                                   attrs["dilations"][axis - 1], attrs["padding"])
            except RuleError as exc:
                raise ShapeError(located(f"conv2d_transpose: output_shape {list(output_shape)}: {exc}")) from None
            if value.shape[axis] is not None and window.out >= 0 and window.out != value.shape[axis]:
                raise ShapeError(located(
                    f"conv2d_transpose: output_shape {list(output_shape)} does not fit value "
                    f"{format_shape(value.shape)}: a conv2d of {'height' if axis == 1 else 'width'} {size} with "
                    f"this filter, strides and padding gives {window.out}, not {value.shape[axis]}"))
        if batch is not None and value.shape[0] is not None and batch != value.shape[0]:
            raise ShapeError(located(f"conv2d_transpose: output_shape's batch {batch} differs from value's "
                                     f"{value.shape[0]}"))
        # The result's shape, as a tensor whose values are never read (a shape-only input): the
        # batch of output_shape where it names one (a value fed with another batch is then an error).
        shape_of_result = zeros_like(value[:, :1, :1, :1]) + zeros((1, height, width, channels), value.dtype) \
            if batch is None else zeros((batch, height, width, channels), value.dtype)
        return Conv2DBackpropInput(value, _swap_channels(filter), shape_of_result, **attrs)


def max_pool2d(input: Any, ksize: Any, strides: Any, padding: str, data_format: str = "NHWC",  # noqa: A002
               name: str | None = None) -> Tensor:
    """TF1.15's ``nn.max_pool2d``: ``max_pool`` with ``input`` first."""
    return max_pool(input, ksize, strides, padding, data_format, name)


def avg_pool2d(input: Any, ksize: Any, strides: Any, padding: str, data_format: str = "NHWC",  # noqa: A002
               name: str | None = None) -> Tensor:
    """TF1.15's ``nn.avg_pool2d``: ``avg_pool`` with ``input`` first."""
    return avg_pool(input, ksize, strides, padding, data_format, name)


def depthwise_conv2d(input: Any, filter: Any, strides: Any, padding: str, rate: Any = None,  # noqa: A002
                     name: str | None = None, data_format: str | None = None, dilations: Any = None) -> Tensor:
    """Each input channel convolved with its own filters (TF1's ``depthwise_conv2d``): ``filter``
    ``[height, width, in_channels, multiplier]`` gives ``in_channels * multiplier`` output channels,
    ``out[b, i, j, k * multiplier + q] = sum over di, dj of x[b, i*s + di*r - pad, j*s + dj*r - pad, k]
    * filter[di, dj, k, q]``. ``rate`` (or ``dilations``) dilates the filter; strides and a rate
    above 1 do not mix, as TF1.

    A composition: one strided slice of the padded image per tap, times that tap's weights, summed;
    the slices, products and sum fuse into one kernel, and the gradients follow from them.

    >>> import numpy as np, compiler as cc
    >>> x = cc.placeholder("float32", (None, 8, 8, 3))
    >>> w = cc.constant(np.ones((3, 3, 3, 2), "float32"))
    >>> cc.nn.depthwise_conv2d(x, w, [1, 2, 2, 1], "SAME").shape
    (None, 4, 4, 6)
    """
    if data_format not in (None, "NHWC"):
        raise ValueError(located(f"depthwise_conv2d: only data_format='NHWC' is supported, got {data_format!r}"))
    rate = renamed_argument("depthwise_conv2d", "rate", rate, "dilations", dilations, default=1)
    try:
        steps, spread, padding = _pair(strides, "strides"), _pair(rate, "rate"), _padding(padding)
    except ValueError as exc:
        raise ValueError(located(f"depthwise_conv2d: {exc}")) from None
    if max(steps) > 1 and max(spread) > 1:
        raise ValueError(located("depthwise_conv2d: strides and rate cannot both exceed 1 (as TF1)"))
    with composite_scope(name or "depthwise", [input, filter]):
        x, w = convert_to_tensor(input), convert_to_tensor(filter)
        if len(x.shape) != 4 or len(w.shape) != 4 or any(d is None for d in (*x.shape[1:], *w.shape)):
            raise ShapeError(located(f"depthwise_conv2d: the input must be NHWC with known height, width and channels "
                                     f"and the filter [height, width, in_channels, multiplier] of known sizes, got "
                                     f"{format_shape(x.shape)} and {format_shape(w.shape)}"))
        if x.shape[3] != w.shape[2]:
            raise ShapeError(located(f"depthwise_conv2d: the input {x.name!r} has {x.shape[3]} channels but the "
                                     f"filter {w.name!r} expects {w.shape[2]}"))
        if not dtypes.is_floating(x.dtype):
            raise TypeError(located(f"depthwise_conv2d: needs a float input, got {x.dtype.name} {x.name!r}"))
        try:
            rows, cols = (Window.of(x.shape[1 + d], w.shape[d], steps[d], spread[d], padding) for d in range(2))
        except RuleError as exc:
            raise ShapeError(located(f"depthwise_conv2d: {exc}")) from None
        if 0 in (w.shape[0], w.shape[1]):
            raise ShapeError(located(f"depthwise_conv2d: the filter's height and width must be at least 1, got "
                                     f"{format_shape(w.shape)}"))
        w = cast(w, x.dtype)

        def after(window: Window) -> int:   # padding after the image, so that every slice stays inside
            return max((window.out - 1) * window.stride + (window.kernel - 1) * window.dilation + 1
                       - window.size - window.pad, 0)
        padded = x
        if rows.pad or cols.pad or after(rows) or after(cols):
            padded = pad(x, [[0, 0], [rows.pad, after(rows)], [cols.pad, after(cols)], [0, 0]])
        channels, multiplier = w.shape[2], w.shape[3]
        taps = []
        for i in range(rows.kernel):
            for j in range(cols.kernel):
                top, left = i * rows.dilation, j * cols.dilation
                window = getitem(padded, (slice(None), slice(top, top + (rows.out - 1) * rows.stride + 1, rows.stride),
                                          slice(left, left + (cols.out - 1) * cols.stride + 1, cols.stride),
                                          slice(None)))
                weights = w[i, j]                                   # [channels, multiplier]
                taps.append(expand_dims(window, -1) * weights if multiplier != 1 else window * weights[:, 0])
        total = add_n(taps) if len(taps) > 1 else taps[0]
        if multiplier == 1:
            return total
        batch = -1 if x.shape[0] is None else x.shape[0]
        return reshape(total, [batch, rows.out, cols.out, channels * multiplier])


def separable_conv2d(input: Any, depthwise_filter: Any, pointwise_filter: Any, strides: Any, padding: str,  # noqa: A002
                     rate: Any = None, name: str | None = None, data_format: str | None = None,
                     dilations: Any = None) -> Tensor:
    """``depthwise_conv2d`` followed by a 1x1 ``conv2d`` with ``pointwise_filter`` ``[1, 1,
    in_channels * multiplier, out_channels]`` (TF1's ``separable_conv2d``).

    >>> import numpy as np, compiler as cc
    >>> x = cc.placeholder("float32", (None, 8, 8, 3))
    >>> depthwise, pointwise = cc.constant(np.ones((3, 3, 3, 2), "float32")), cc.constant(np.ones((1, 1, 6, 4), "float32"))
    >>> cc.nn.separable_conv2d(x, depthwise, pointwise, [1, 1, 1, 1], "VALID").shape
    (None, 6, 6, 4)
    """
    with composite_scope(name or "separable_conv2d", [input, depthwise_filter, pointwise_filter]):
        depthwise = depthwise_conv2d(input, depthwise_filter, strides, padding, rate=rate, data_format=data_format,
                                     dilations=dilations)
        pointwise = convert_to_tensor(pointwise_filter)
        if len(pointwise.shape) != 4 or tuple(pointwise.shape[:2]) != (1, 1) \
                or pointwise.shape[2] != depthwise.shape[3]:
            raise ShapeError(located(f"separable_conv2d: the pointwise filter must be [1, 1, {depthwise.shape[3]}, "
                                     f"out_channels], got {format_shape(pointwise.shape)}"))
        return conv2d(depthwise, pointwise, strides=1, padding="VALID")


def atrous_conv2d(value: Any, filters: Any, rate: int, padding: str, name: str | None = None) -> Tensor:
    """``conv2d`` with the filter's taps ``rate`` apart (TF1's ``atrous_conv2d``: a dilated
    convolution, stride 1)."""
    return conv2d(value, filters, strides=1, padding=padding, dilations=rate, name=name)


def _pool1d(function: str, pool: Any, input: Any, ksize: Any, strides: Any, padding: str,  # noqa: A002
            data_format: str, name: str | None) -> Tensor:
    if data_format not in (None, "NWC"):
        raise ValueError(located(f"{function}: only data_format='NWC' is supported, got {data_format!r}"))
    with composite_scope(name or function, [input]):
        x = convert_to_tensor(input)
        if len(x.shape) != 3:
            raise ShapeError(located(f"{function}: the input must be [batch, width, channels], got "
                                     f"{format_shape(x.shape)}"))
        pooled = pool(expand_dims(x, 1), ksize=(1, _single(ksize, "ksize")), strides=(1, _single(strides, "strides")),
                      padding=padding)
        return squeeze(pooled, [1])


def max_pool1d(input: Any, ksize: Any, strides: Any, padding: str, data_format: str = "NWC",  # noqa: A002
               name: str | None = None) -> Tensor:
    """Max over windows of ``[batch, width, channels]`` (TF1.15's ``nn.max_pool1d``)."""
    return _pool1d("max_pool1d", max_pool, input, ksize, strides, padding, data_format, name)


def avg_pool1d(input: Any, ksize: Any, strides: Any, padding: str, data_format: str = "NWC",  # noqa: A002
               name: str | None = None) -> Tensor:
    """Mean over windows of ``[batch, width, channels]`` (TF1.15's ``nn.avg_pool1d``)."""
    return _pool1d("avg_pool1d", avg_pool, input, ksize, strides, padding, data_format, name)


def convolution(input: Any, filter: Any, padding: str, strides: Any = None, dilation_rate: Any = None,  # noqa: A002
                name: str | None = None, data_format: str | None = None, filters: Any = None,
                dilations: Any = None) -> Tensor:
    """TF1's ``nn.convolution`` for 1-D and 2-D inputs (``[batch, width, channels]`` or NHWC): a
    ``conv1d`` or ``conv2d`` with ``strides`` and ``dilation_rate`` (one entry per spatial axis)."""
    filter = renamed_argument("convolution", "filter", filter, "filters", filters)  # noqa: A001
    dilation_rate = renamed_argument("convolution", "dilation_rate", dilation_rate, "dilations", dilations)
    x = convert_to_tensor(input)
    spatial = len(x.shape) - 2
    strides = [1] * spatial if strides is None else list(np.atleast_1d(strides))
    dilation_rate = [1] * spatial if dilation_rate is None else list(np.atleast_1d(dilation_rate))
    if spatial == 1:
        return conv1d(x, filter, stride=int(strides[0]), padding=padding, data_format=data_format or "NWC",
                      dilations=int(dilation_rate[0]), name=name)
    if spatial == 2:
        return conv2d(x, filter, strides=tuple(int(s) for s in strides), padding=padding,
                      data_format=data_format or "NHWC", dilations=tuple(int(d) for d in dilation_rate), name=name)
    raise ShapeError(located(f"convolution: 1-D and 2-D convolutions are available, got an input of rank "
                             f"{len(x.shape)} {format_shape(x.shape)}"))


def pool(input: Any, window_shape: Any, pooling_type: str, padding: str, dilation_rate: Any = None,  # noqa: A002
         strides: Any = None, name: str | None = None, data_format: str | None = None) -> Tensor:
    """TF1's ``nn.pool`` for 1-D and 2-D inputs: ``pooling_type`` "MAX" or "AVG" over
    ``window_shape`` windows moved by ``strides`` (default 1; dilation_rate must be 1)."""
    if pooling_type not in ("MAX", "AVG"):
        raise ValueError(located(f"pool: pooling_type must be 'MAX' or 'AVG', got {pooling_type!r}"))
    if dilation_rate is not None and any(int(d) != 1 for d in np.atleast_1d(dilation_rate)):
        raise ValueError(located(f"pool: dilation_rate {dilation_rate!r} other than 1 is not available"))
    x = convert_to_tensor(input)
    window = [int(w) for w in np.atleast_1d(window_shape)]
    steps = [1] * len(window) if strides is None else [int(s) for s in np.atleast_1d(strides)]
    if len(x.shape) == 3:
        pooled = max_pool1d if pooling_type == "MAX" else avg_pool1d
        return pooled(x, window[0], steps[0], padding, data_format or "NWC", name)
    if len(x.shape) == 4:
        pooled = max_pool if pooling_type == "MAX" else avg_pool
        return pooled(x, tuple(window), tuple(steps), padding, data_format or "NHWC", name)
    raise ShapeError(located(f"pool: 1-D and 2-D pooling are available, got an input of rank {len(x.shape)}"))

"""TensorBoard summaries (TF1's ``tf.summary``): ``scalar``, ``histogram``, ``image``, ``text``,
``merge``, ``merge_all`` and ``FileWriter`` (which also writes the graph for TensorBoard's graph
tab, see ``graph_def``).

A summary is a node of the graph. Its numbers are computed inside the compiled step by ordinary
ops: a scalar is cast to float64; a histogram's min, max, count, sum and sum of squares are
reductions, and its bucket counts are comparisons of every value against the bucket limits summed
over the values; an image's pixels are scaled to 0..255 (PNG encoding is done on the host, by
``encode_png``); a text is a Python string kept in the layout. The summary is a ``StopGradient``
node whose value is those numbers packed into one float64 vector, with a ``_summary_layout``
attribute that says what each number is (so summaries add no op type and carry no gradient). ``Session.run`` turns the value of a fetched summary into a
serialized ``Summary`` protocol buffer (bytes, as in TF1) on the host, after the step: only the
encoding happens outside the step.

The protocol buffers and the event-file writer are the ``tensorboard`` package's own
(``pip install "graphgrad[tensorboard]"``); it is imported when a summary is encoded or written, so
building graphs with summaries does not need it.

Histogram buckets: TF1's default limits grow by 10% from 1e-12 to 1e20, mirrored below zero, which
is 1551 limits, and every value is compared against each. ``histogram`` builds the same kind of
limits with a growth factor of 1.5 (``DEFAULT_BUCKET_GROWTH``), 367 limits over the same range
(``default_bucket_limits(1.1)`` gives TF1's exact ones); pass ``bucket_limits=`` to choose others.
Runs of empty buckets are collapsed when encoded, as TF1 does.

>>> import numpy as np, compiler as cc
>>> from runtime import Session
>>> x = cc.placeholder("float32", shape=(None,), name="x")
>>> mean_summary = cc.summary.scalar("mean", cc.reduce_mean(x))
>>> with Session() as sess:
...     encoded = sess.run(mean_summary, feed_dict={x: np.array([1.0, 2.0], "float32")})
>>> from tensorboard.compat.proto.summary_pb2 import Summary
>>> [(value.tag, value.simple_value) for value in Summary.FromString(encoded).value]
[('mean', 1.5)]
"""
from __future__ import annotations

import os
import re
import struct
import time
import weakref
import zlib
from types import TracebackType
from typing import Any, Sequence

import numpy as np

from . import dtypes
from .errors import NumericsError, ShapeError
from .graph import Graph, GraphKeys, Tensor, get_default_graph, located
from .ops.array import StopGradient, element_count, expand_dims, reshape
from .ops.base import composite_scope, constant
from .ops.elementwise import abs as abs_
from .ops.elementwise import add, cast, clip_by_value, divide, floor, less, maximum, multiply, where
from .ops.joining import concat
from .ops.reduction import reduce_all, reduce_max, reduce_min, reduce_sum
from .ops.slicing import strided_slice

# The collection ``merge_all`` reads.
SUMMARIES = GraphKeys.SUMMARIES
# The growth factor of the default histogram bucket limits (TF1's is 1.1); see the module docstring.
DEFAULT_BUCKET_GROWTH = 1.5
# Numbers a histogram packs before its cumulative bucket counts: min, max, num, sum, sum_squares.
_HISTOGRAM_STATISTICS = 5

# Channels an image summary takes and the PNG colour type of each: grey, RGB, RGBA.
_PNG_COLOR_TYPES = {1: 0, 3: 2, 4: 6}

# One entry of a summary's layout: ("scalar", tag), ("histogram", tag, bucket_limits),
# ("image", tag, (height, width, channels), max_outputs) or ("text", tag, text).
LayoutEntry = tuple


def default_bucket_limits(growth: float = DEFAULT_BUCKET_GROWTH) -> tuple[float, ...]:
    """Histogram bucket limits built as TF1 builds its defaults: from 1e-12, each ``growth`` times
    the last, below 1e20; mirrored below zero, with 0 and ±DBL_MAX. ``growth=1.1`` gives TF1's.

    >>> limits = default_bucket_limits()
    >>> len(limits), limits[0] == -limits[-1], 0.0 in limits
    (367, True, True)
    >>> len(default_bucket_limits(1.1))
    1551
    """
    if not growth > 1.0:
        raise ValueError(f"the bucket growth factor must be greater than 1, got {growth!r}")
    positive = []
    limit = 1.0e-12
    while limit < 1.0e20:
        positive.append(limit)
        limit *= growth
    largest = float(np.finfo(np.float64).max)
    positive.append(largest)
    return tuple([-value for value in reversed(positive)] + [0.0] + positive)


_INVALID_TAG_CHARACTERS = re.compile(r"[^-/\w.]")


def _scope_and_family(name: str, family: str | None) -> tuple[str, str | None]:
    """TF1's summary scope: ``name`` (and ``family``) with the characters a tag cannot hold made
    ``_`` and leading slashes dropped ("train loss" is "train_loss"), the scope under the family."""
    name = _INVALID_TAG_CHARACTERS.sub("_", str(name)).lstrip("/")
    if family is None:
        return name, None
    family = _INVALID_TAG_CHARACTERS.sub("_", str(family)).lstrip("/")
    return f"{family}/{name}", family


def _packed(layout: tuple[LayoutEntry, ...], packed_values: Tensor, name: str,
            collections: Sequence[str] | None, family: str | None = None) -> Tensor:
    # As TF1's, a family prefixes the tag once more (TensorBoard's tab): "train/train/loss".
    summary = StopGradient(packed_values, _summary_layout=layout, _summary_family=family, name=name)
    graph = summary.graph
    for key in (SUMMARIES,) if collections is None else collections:
        graph.add_to_collection(key, summary)
    return summary


def _as_vector(value: Tensor) -> Tensor:
    return reshape(cast(value, dtypes.float64), [1])


def scalar(name: str, tensor: Any, collections: Sequence[str] | None = None, family: str | None = None) -> Tensor:
    """A summary of one scalar value; its tag is ``name`` in the current name scope (made unique;
    characters a tag cannot hold become ``_``, and a ``family`` goes in front, as TF1's).

    Added to ``collections`` (default: the summaries collection that ``merge_all`` reads).
    Fetching it gives a serialized ``Summary`` with one ``simple_value``.

    >>> import compiler as cc
    >>> loss = cc.constant(0.25)
    >>> cc.summary.scalar("loss", loss).shape
    (1,)
    """
    name, family = _scope_and_family(name, family)
    with composite_scope(name, [tensor]):
        value = tensor if isinstance(tensor, Tensor) else constant(tensor, dtype=dtypes.float32)
        if value.shape != ():
            raise ShapeError(located(f"summary.scalar {name!r}: needs a scalar, got a tensor of shape "
                                     f"{value.shape}"))
        packed_values = _as_vector(value)
    return _packed((("scalar", ""),), packed_values, name, collections, family)


def histogram(name: str, values: Any, collections: Sequence[str] | None = None, family: str | None = None,
              bucket_limits: Sequence[float] | None = None) -> Tensor:
    """A histogram of all elements of ``values`` (any shape), computed inside the compiled step
    (TF1's arguments and tags, as ``scalar``'s).

    ``bucket_limits`` (increasing) defaults to ``default_bucket_limits()``. Bucket ``i`` counts
    the values ``v`` with ``limits[i-1] <= v < limits[i]``, as TF1 does; the last bucket also takes
    everything above. Fetching it gives a serialized ``Summary`` with a ``HistogramProto``; a NaN
    among the values is a ``NumericsError`` then, as in TF1.

    >>> import numpy as np, compiler as cc
    >>> weights = cc.Variable(np.zeros((3, 4), "float32"), name="weights")
    >>> cc.summary.histogram("weights", weights, bucket_limits=[-1.0, 0.0, 1.0]).shape
    (8,)
    """
    limits = tuple(float(limit) for limit in (default_bucket_limits() if bucket_limits is None
                                               else bucket_limits))
    if not limits or any(not later > earlier for earlier, later in zip(limits, limits[1:])):
        raise ValueError(located(f"summary.histogram {name!r}: bucket_limits must be a non-empty "
                                 "increasing sequence"))
    name, family = _scope_and_family(name, family)
    with composite_scope(name, [values]):
        value_tensor = values if isinstance(values, Tensor) else constant(values, dtype=dtypes.float32)
        flat = cast(reshape(value_tensor, [-1]), dtypes.float64)
        limit_row = expand_dims(constant(np.array(limits, np.float64)), 0)
        # below[i]: how many values are less than limits[i]; the encoder takes differences.
        below = reduce_sum(cast(less(expand_dims(flat, 1), limit_row), dtypes.float64), axis=0)
        statistics = [reduce_min(flat), reduce_max(flat), element_count(flat),
                      reduce_sum(flat), reduce_sum(multiply(flat, flat))]
        packed_values = concat([_as_vector(statistic) for statistic in statistics] + [below], 0)
    return _packed((("histogram", "", limits),), packed_values, name, collections, family)


def image(name: str, tensor: Any, max_outputs: int = 3, collections: Sequence[str] | None = None,
          family: str | None = None) -> Tensor:
    """Up to ``max_outputs`` images of the NHWC batch ``tensor`` (1, 3 or 4 channels: grey, RGB,
    RGBA), as TF1's ``tf.summary.image``. Integer pixels (0..255; a numpy ``uint8`` array is
    accepted as a constant) are kept; float pixels are scaled inside the step, each image by its
    own finite values as TF1 does: with none below 0, ``255 / max`` (so [0, 0.25, 0.5] shows as 0,
    127, 255); otherwise ``127 / max|value|`` around 128 (-1, 0, 1 show as 1, 128, 255); the
    result truncated to an integer, and a pixel with a NaN or infinite channel painted red (255,
    0, 0). The batch may be unknown (None); its first images are taken. Encoding
    to PNG happens on the host when ``Session.run`` serializes the ``Summary``. Tags are
    ``name/image/0``, ``name/image/1``, … (``name/image`` when ``max_outputs`` is 1).

    >>> import numpy as np, compiler as cc
    >>> from runtime import Session
    >>> batch = cc.placeholder("float32", shape=(None, 2, 3, 1), name="batch")
    >>> image_summary = cc.summary.image("inputs", batch, max_outputs=1)
    >>> with Session() as sess:
    ...     encoded = sess.run(image_summary, feed_dict={batch: np.ones((5, 2, 3, 1), "float32")})
    >>> from tensorboard.compat.proto.summary_pb2 import Summary
    >>> [(value.tag, value.image.height, value.image.width, value.image.encoded_image_string[1:4])
    ...  for value in Summary.FromString(encoded).value]
    [('inputs/image', 2, 3, b'PNG')]
    """
    if max_outputs < 1:
        raise ValueError(f"summary.image {name!r}: max_outputs must be at least 1, got {max_outputs}")
    name, family = _scope_and_family(name, family)
    with composite_scope(name, [tensor]):
        if isinstance(tensor, Tensor):
            images = tensor
        else:
            array = np.asarray(tensor)
            images = constant(array.astype(np.int32) if array.dtype.kind in "ui" else array.astype(np.float32))
        if len(images.shape) != 4 or images.shape[3] not in _PNG_COLOR_TYPES \
                or images.shape[1] is None or images.shape[2] is None:
            raise ShapeError(located(f"summary.image {name!r}: needs images of shape (batch, height, width, "
                                     f"1, 3 or 4 channels) with a known height and width, got {images.shape}"))
        first_images = strided_slice(images, [slice(0, max_outputs)] + [slice(None)] * 3)
        if np.dtype(images.dtype).kind == "f":
            pixels = cast(_float_image_as_bytes(first_images), dtypes.float64)
        else:
            pixels = clip_by_value(cast(first_images, dtypes.float64), 0.0, 255.0)
        image_count = _as_vector(element_count(first_images, axis=0))
        packed_values = concat([image_count, reshape(pixels, [-1])], 0)
    image_shape = tuple(int(size) for size in images.shape[1:])
    return _packed((("image", "", image_shape, int(max_outputs)),), packed_values, name, collections, family)


def _float_image_as_bytes(images: Tensor) -> Tensor:
    """TF1's scaling of float images to 0..255 (``NormalizeFloatImage``), per image of the NHWC
    batch, in the images' own dtype: an affine map chosen from the image's finite minimum and
    maximum, truncated; pixels with a non-finite channel become red."""
    image_axes = [1, 2, 3]
    finite = less(abs_(images), float("inf"))   # false for NaN too
    smallest = reduce_min(where(finite, images, float("inf")), axis=image_axes, keepdims=True)
    largest = reduce_max(where(finite, images, float("-inf")), axis=image_axes, keepdims=True)
    signed = less(smallest, 0.0)
    extent = where(signed, maximum(abs_(smallest), abs_(largest)), largest)
    # Below TF1's threshold of 1e-6 the image is all zero (scale 0), not divided by ~0.
    scale = where(less(extent, 1e-6), 0.0, divide(where(signed, 127.0, 255.0), maximum(extent, 1e-6)))
    scaled = floor(add(multiply(images, scale), where(signed, 128.0, 0.0)))
    channels = images.shape[3]
    red = constant(np.array([255.0, 0.0, 0.0, 255.0][:channels], np.dtype(images.dtype)))
    pixel_finite = reduce_all(finite, axis=3, keepdims=True)
    return where(pixel_finite, clip_by_value(scaled, 0.0, 255.0), red)


def text(name: str, text_value: str, collections: Sequence[str] | None = None) -> Tensor:
    """A text summary (TensorBoard's Text tab) of the Python string ``text_value``; graphgrad graphs
    hold no string tensors, so the text is fixed when the graph is built (a run's settings, notes).

    >>> import compiler as cc
    >>> from runtime import Session
    >>> notes = cc.summary.text("notes", "batch size 32, Adam 3e-3")
    >>> with Session() as sess:
    ...     encoded = sess.run(notes)
    >>> from tensorboard.compat.proto.summary_pb2 import Summary
    >>> (value,) = Summary.FromString(encoded).value
    >>> value.tag, value.metadata.plugin_data.plugin_name, value.tensor.string_val[0].decode()
    ('notes', 'text', 'batch size 32, Adam 3e-3')
    """
    if not isinstance(text_value, str):
        raise TypeError(located(f"summary.text {name!r}: takes a Python string (graphs hold no string tensors), "
                                f"got {type(text_value).__name__}"))
    try:
        text_value.encode("utf-8")
    except UnicodeEncodeError as error:   # a lone surrogate: no event file can hold it
        raise ValueError(located(f"summary.text {name!r}: the text is not valid Unicode ({error.reason} at "
                                 f"position {error.start})")) from None
    name, _ = _scope_and_family(name, None)
    with composite_scope(name, []):
        # Nothing is computed; one zero keeps the packed values a vector like every summary's.
        packed_values = constant(np.zeros(1, np.float64))
    return _packed((("text", "", text_value),), packed_values, name, collections)


def is_summary(tensor: Any) -> bool:
    """Whether ``tensor`` is a summary (which ``Session.run`` gives as serialized ``Summary`` bytes)."""
    return isinstance(tensor, Tensor) and "_summary_layout" in tensor.op.attrs


def merge(inputs: Sequence[Tensor], collections: Sequence[str] | None = (),
          name: str | None = None) -> Tensor:
    """One summary holding the values of all of ``inputs`` (summaries or merged summaries).

    >>> import compiler as cc
    >>> merged = cc.summary.merge([cc.summary.scalar("a", 1.0), cc.summary.scalar("b", 2.0)])
    >>> merged.shape
    (2,)
    """
    inputs = list(inputs)
    collections = () if collections is None else collections
    if not inputs:
        raise ValueError("summary.merge needs at least one summary")
    for tensor in inputs:
        op = getattr(tensor, "op", None)
        region = getattr(op, "region", None) or getattr(op, "traced_in", None)
        if region is not None:
            raise ValueError(located(f"summary.merge: the summary {tensor.name!r} (built at {tensor.op.location}) is "
                                     f"inside a cond branch or a loop body (the function defined at "
                                     f"{region.location}), which may run many times or not at all; write the "
                                     "summary from a value the function returns"))
        if not is_summary(tensor):
            raise TypeError(f"summary.merge: {tensor!r} is not a summary (made by cc.summary.scalar, "
                            "histogram, image, text or merge)")
    layout = tuple(entry for tensor in inputs for entry in _named_layout(tensor))
    with composite_scope(name or "Merge", inputs):
        packed_values = concat(list(inputs), 0) if len(inputs) > 1 else inputs[0]
    return _packed(layout, packed_values, name or "Merge", collections)


def merge_all(key: str = SUMMARIES, graph: Graph | None = None) -> Tensor | None:
    """All summaries of the collection ``key`` merged into one (None when there is none), as TF1.

    >>> import compiler as cc
    >>> with cc.Graph().as_default():
    ...     print(cc.summary.merge_all())
    ...     _ = cc.summary.scalar("loss", 0.5)
    ...     cc.summary.merge_all().shape
    None
    (1,)
    """
    summaries = (graph or get_default_graph()).get_collection(key)
    if not summaries:
        return None
    return merge(summaries)


def _named_layout(summary: Tensor) -> tuple[LayoutEntry, ...]:
    """The layout of ``summary`` with each tag filled in (a tag left empty is the summary's name)."""
    family = summary.op.attrs.get("_summary_family")
    tag = summary.op.name if family is None else f"{family}/{summary.op.name}"
    return tuple((entry[0], entry[1] or tag) + tuple(entry[2:]) for entry in summary.op.attrs["_summary_layout"])


def _tensorboard_protos() -> tuple[Any, Any]:
    try:
        from tensorboard.compat.proto import event_pb2, summary_pb2
    except ImportError:
        raise ImportError('summaries are encoded with the tensorboard package: '
                          'pip install "graphgrad[tensorboard]"') from None
    return summary_pb2, event_pb2


def _histogram_proto(summary_pb2: Any, numbers: np.ndarray, limits: tuple[float, ...]) -> Any:
    low, high, count, total, total_squares = (float(number) for number in numbers[:_HISTOGRAM_STATISTICS])
    if count == 0:   # TF1's empty histogram: min DBL_MAX, max -DBL_MAX (the reductions give inf, -inf)
        low, high = float(np.finfo(np.float64).max), float(-np.finfo(np.float64).max)
    below = numbers[_HISTOGRAM_STATISTICS:]
    counts = np.diff(below, prepend=0.0)
    counts[-1] = count - (below[-2] if len(below) > 1 else 0.0)
    proto = summary_pb2.HistogramProto(min=low, max=high, num=count, sum=total, sum_squares=total_squares)
    position = 0
    while position < len(counts):  # runs of empty buckets become one, as TF1 encodes them
        end, bucket_count = limits[position], counts[position]
        position += 1
        if bucket_count <= 0.0:
            while position < len(counts) and counts[position] <= 0.0:
                end, bucket_count = limits[position], counts[position]
                position += 1
        proto.bucket_limit.append(end)
        proto.bucket.append(float(bucket_count))
    return proto


def encode_png(pixels: np.ndarray) -> bytes:
    """PNG bytes of an 8-bit ``(height, width, channels)`` image (1, 3 or 4 channels), every row
    stored unfiltered and the whole deflated with zlib.

    >>> png = encode_png(np.zeros((2, 3, 1), np.uint8))
    >>> png[:8] == b"\\x89PNG\\r\\n\\x1a\\n", struct.unpack(">II", png[16:24])
    (True, (3, 2))
    """
    height, width, channels = pixels.shape
    rows = np.asarray(pixels, np.uint8).reshape(height, width * channels)
    unfiltered_rows = np.concatenate([np.zeros((height, 1), np.uint8), rows], axis=1)  # filter type 0

    def chunk(kind: bytes, data: bytes) -> bytes:
        return struct.pack(">I", len(data)) + kind + data + struct.pack(">I", zlib.crc32(kind + data))

    header = struct.pack(">IIBBBBB", width, height, 8, _PNG_COLOR_TYPES[channels], 0, 0, 0)
    return (b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", header)
            + chunk(b"IDAT", zlib.compress(unfiltered_rows.tobytes())) + chunk(b"IEND", b""))


def _text_tensor_proto(text_value: str) -> tuple[Any, Any]:
    from tensorboard.compat.proto import tensor_pb2, tensor_shape_pb2, types_pb2
    from tensorboard.compat.proto.summary_pb2 import SummaryMetadata
    metadata = SummaryMetadata(plugin_data=SummaryMetadata.PluginData(plugin_name="text"))
    tensor = tensor_pb2.TensorProto(dtype=types_pb2.DT_STRING, tensor_shape=tensor_shape_pb2.TensorShapeProto(),
                                    string_val=[text_value.encode()])
    return metadata, tensor


def encode_summary(summary: Tensor, numbers: np.ndarray) -> bytes:
    """The serialized ``Summary`` for the packed ``numbers`` that a step computed for ``summary``."""
    summary_pb2, _ = _tensorboard_protos()
    proto = summary_pb2.Summary()
    position = 0
    for entry in _named_layout(summary):
        kind, tag = entry[0], entry[1]
        if kind == "scalar":
            proto.value.add(tag=tag, simple_value=float(numbers[position]))
            position += 1
        elif kind == "image":
            (height, width, channels), max_outputs = entry[2], entry[3]
            image_count = int(numbers[position])
            pixel_count = image_count * height * width * channels
            pixels = numbers[position + 1:position + 1 + pixel_count].astype(np.uint8)
            for index, one_image in enumerate(pixels.reshape(image_count, height, width, channels)):
                image_proto = summary_pb2.Summary.Image(height=height, width=width, colorspace=channels,
                                                        encoded_image_string=encode_png(one_image))
                image_tag = f"{tag}/image" if max_outputs == 1 else f"{tag}/image/{index}"
                proto.value.add(tag=image_tag, image=image_proto)
            position += 1 + pixel_count
        elif kind == "text":
            metadata, tensor = _text_tensor_proto(entry[2])
            proto.value.add(tag=tag, metadata=metadata, tensor=tensor)
            position += 1
        else:
            limits = entry[2]
            width = _HISTOGRAM_STATISTICS + len(limits)
            low, high = numbers[position:position + 2]
            if np.isnan(low) or np.isnan(high):   # min and max propagate NaN: some value is NaN
                raise NumericsError(f"NaN in the values of summary.histogram {tag!r}: a histogram has no bucket "
                                    "for it (TF1 refuses it too); cc.check_numerics finds where it comes from")
            histogram_proto = _histogram_proto(summary_pb2, numbers[position:position + width], limits)
            proto.value.add(tag=tag, histo=histogram_proto)
            position += width
    return proto.SerializeToString()


# TensorBoard's ``DataType`` enum names for the dtypes a graphgrad graph holds.
_TENSORBOARD_DTYPE_NAMES = {"float32": "DT_FLOAT", "float64": "DT_DOUBLE", "int32": "DT_INT32",
                            "int64": "DT_INT64", "bool": "DT_BOOL"}
# The NodeDef attribute that holds the user's file:line where the op was built.
LOCATION_ATTR = "_graphgrad_location"


def _shape_proto(tensor_shape_pb2: Any, shape: tuple) -> Any:
    """A ``TensorShapeProto``; an unknown dimension (None) is -1, as TensorFlow writes it."""
    return tensor_shape_pb2.TensorShapeProto(
        dim=[tensor_shape_pb2.TensorShapeProto.Dim(size=-1 if size is None else int(size)) for size in shape])


def _input_name(tensor: Tensor) -> str:
    """A NodeDef input: the producing op's name, with ``:index`` for outputs after the first."""
    return tensor.op.name if tensor.value_index == 0 else f"{tensor.op.name}:{tensor.value_index}"


def graph_def(graph: Graph) -> Any:
    """``graph`` as a TensorBoard ``GraphDef``: one ``NodeDef`` per operation, named by the op's name
    (name scopes give TF1's ``scope/name`` paths, which TensorBoard shows as collapsible groups),
    ``op`` its type, ``input`` the producing ops (``^name`` for control inputs), and attributes
    ``dtype`` and ``shape`` of the first output (``_output_shapes`` lists them all) and
    ``_graphgrad_location``, the user's ``file:line`` that built the op.

    >>> import compiler as cc
    >>> with cc.Graph().as_default() as g:
    ...     with cc.name_scope("dense"):
    ...         y = cc.placeholder("float32", shape=(None, 3), name="x") * 2.0
    >>> nodes = graph_def(g).node
    >>> [(node.name, node.op) for node in nodes][0]
    ('dense/x', 'Placeholder')
    >>> list(nodes[-1].input) == [tensor.op.name for tensor in y.op.inputs]
    True
    >>> nodes[0].attr["shape"].shape.dim[0].size, nodes[0].attr["dtype"].type == 1  # DT_FLOAT
    (-1, True)
    """
    try:
        from tensorboard.compat.proto import (attr_value_pb2, graph_pb2, node_def_pb2,
                                              tensor_shape_pb2, types_pb2)
    except ImportError:
        raise ImportError('the graph is written with the tensorboard package: '
                          'pip install "graphgrad[tensorboard]"') from None
    proto = graph_pb2.GraphDef()
    for op in graph.get_operations():
        node = node_def_pb2.NodeDef(name=op.name, op=op.type)
        node.input.extend([_input_name(tensor) for tensor in op.inputs])
        node.input.extend([f"^{control.name}" for control in op.control_inputs])
        if op.outputs:
            first = op.outputs[0]
            dtype_name = _TENSORBOARD_DTYPE_NAMES.get(np.dtype(first.dtype).name, "DT_INVALID")
            node.attr["dtype"].CopyFrom(attr_value_pb2.AttrValue(type=types_pb2.DataType.Value(dtype_name)))
            node.attr["shape"].CopyFrom(attr_value_pb2.AttrValue(shape=_shape_proto(tensor_shape_pb2, first.shape)))
            node.attr["_output_shapes"].list.shape.extend(
                [_shape_proto(tensor_shape_pb2, output.shape) for output in op.outputs])
        node.attr[LOCATION_ATTR].CopyFrom(attr_value_pb2.AttrValue(s=str(op.location).encode()))
        proto.node.append(node)
    return proto


class FileWriter:
    """Writes summaries to an event file in ``logdir`` for ``tensorboard --logdir`` (TF1's
    ``tf.summary.FileWriter``), through the tensorboard package's own event writer (records with
    their CRCs, written by a background thread every ``flush_secs`` or ``max_queue`` events).

    ``graph``: when given, written first for TensorBoard's graph tab (see ``add_graph``).

    >>> import tempfile, compiler as cc
    >>> from runtime import Session
    >>> loss_summary = cc.summary.scalar("loss", cc.constant(0.5))
    >>> with Session() as sess, FileWriter(tempfile.mkdtemp()) as writer:
    ...     writer.add_summary(sess.run(loss_summary), global_step=1)
    """

    def __init__(self, logdir: str | os.PathLike[str], graph: Graph | None = None, max_queue: int = 10,
                 flush_secs: float = 120, filename_suffix: str = "") -> None:
        self._arguments = (os.fspath(logdir), max_queue, flush_secs, filename_suffix)
        self._open()
        if graph is not None:
            self.add_graph(graph)

    def _open(self) -> None:
        try:
            from tensorboard.summary.writer.event_file_writer import EventFileWriter
        except ImportError:
            raise ImportError('FileWriter writes with the tensorboard package: '
                              'pip install "graphgrad[tensorboard]"') from None
        self._event_writer = EventFileWriter(*self._arguments)
        self._closed = False
        # A writer dropped without close() (or left open at exit) still flushes, and its
        # background thread ends rather than living as long as the process.
        self._finalizer = weakref.finalize(self, self._event_writer.close)

    def reopen(self) -> None:
        """After ``close``, start a new event file in the same directory for further events (TF1's
        ``reopen``); nothing happens when the writer is open."""
        if self._closed:
            self._open()

    def add_event(self, event: Any) -> None:
        """Write an ``Event`` protocol buffer as it is."""
        if self._closed:
            raise RuntimeError("this FileWriter is closed (reopen() starts a new event file)")
        self._event_writer.add_event(event)

    def add_session_log(self, session_log: Any, global_step: int | None = None) -> None:
        """Write a ``SessionLog`` protocol buffer (e.g. ``SessionLog(status=SessionLog.START)``, which
        tells TensorBoard that a restarted run discards the events after ``global_step``)."""
        _, event_pb2 = _tensorboard_protos()
        self.add_event(event_pb2.Event(wall_time=time.time(), step=0 if global_step is None else int(global_step),
                                       session_log=session_log))

    def get_logdir(self) -> str:
        """The directory the event file is in."""
        return str(self._event_writer.get_logdir())

    def add_summary(self, summary: bytes | Any, global_step: int | None = None) -> None:
        """Write ``summary`` (the bytes ``Session.run`` gives for a summary, or a ``Summary``
        protocol buffer) as an event at ``global_step`` (0 when None) and the current time."""
        summary_pb2, event_pb2 = _tensorboard_protos()
        if isinstance(summary, (bytes, bytearray)):
            summary = summary_pb2.Summary.FromString(bytes(summary))
        if isinstance(global_step, np.ndarray):
            global_step = global_step.item()
        step = 0 if global_step is None else int(global_step)
        self.add_event(event_pb2.Event(wall_time=time.time(), step=step, summary=summary))

    def add_graph(self, graph: Graph, global_step: int | None = None) -> None:
        """Write ``graph`` for TensorBoard's graph tab, as the ``GraphDef`` ``graph_def(graph)`` gives."""
        _, event_pb2 = _tensorboard_protos()
        self.add_event(event_pb2.Event(wall_time=time.time(), step=0 if global_step is None else int(global_step),
                                       graph_def=graph_def(graph).SerializeToString()))

    def flush(self) -> None:
        """Write the pending events to disk."""
        if not self._closed:
            self._event_writer.flush()

    def close(self) -> None:
        """Flush and close the event file; further ``add_summary`` calls are errors until ``reopen``."""
        if not self._closed:
            self._finalizer()
            self._closed = True

    def __enter__(self) -> "FileWriter":
        return self

    def __exit__(self, exc_type: type[BaseException] | None, exc: BaseException | None,
                 traceback: TracebackType | None) -> None:
        self.close()

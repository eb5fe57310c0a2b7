"""``cc.summary``: summaries computed in the step, written by ``FileWriter`` and read back with
TensorBoard's own reader."""
from __future__ import annotations

import struct
import zlib
from pathlib import Path

import numpy as np
import pytest

import compiler as cc
from runtime import Session

pytest.importorskip("tensorboard")
from tensorboard.backend.event_processing.event_accumulator import EventAccumulator  # noqa: E402
from tensorboard.compat.proto.summary_pb2 import Summary  # noqa: E402

TARGETS = ("cpu", "reference")


def _numpy_bucket_counts(values: np.ndarray, limits: tuple[float, ...]) -> np.ndarray:
    """TF1's bucketing: bucket i holds limits[i-1] <= v < limits[i]; the last one all above."""
    positions = np.minimum(np.searchsorted(np.asarray(limits), values.ravel(), side="right"), len(limits) - 1)
    return np.bincount(positions, minlength=len(limits)).astype(np.float64)


def _nonempty_buckets(limits: list[float] | tuple[float, ...], counts: list[float] | np.ndarray) -> dict:
    return {float(limit): float(count) for limit, count in zip(limits, counts) if count > 0}


def _read_back(logdir: Path) -> EventAccumulator:
    accumulator = EventAccumulator(str(logdir), size_guidance={"scalars": 0, "histograms": 0})
    accumulator.Reload()
    return accumulator


@pytest.mark.parametrize("target", TARGETS)
def test_scalars_and_histogram_read_back_with_tensorboard(target: str, tmp_path: Path) -> None:
    graph = cc.Graph()
    with graph.as_default():
        x = cc.placeholder("float32", shape=(None, 4), name="x")
        with cc.name_scope("train"):
            loss_summary = cc.summary.scalar("loss", cc.reduce_mean(cc.square(x)))
        histogram_summary = cc.summary.histogram("activations", cc.tanh(x) * 3.0)
        merged = cc.summary.merge_all()
    batches = [np.random.default_rng(seed).normal(size=(5 + seed, 4)).astype("float32") for seed in range(3)]
    with Session(graph, target=target) as sess, cc.summary.FileWriter(tmp_path) as writer:
        for step, batch in enumerate(batches):
            writer.add_summary(sess.run(merged, feed_dict={x: batch}), global_step=10 * step)
        writer.add_summary(sess.run(histogram_summary, feed_dict={x: batches[0]}), global_step=99)
        loss_only = sess.run(loss_summary, feed_dict={x: batches[1]})
    assert isinstance(loss_only, bytes)
    (value,) = Summary.FromString(loss_only).value
    assert value.tag == "train/loss"
    assert value.simple_value == pytest.approx(float(np.mean(batches[1].astype(np.float64) ** 2)), rel=1e-6)

    accumulator = _read_back(tmp_path)
    assert set(accumulator.Tags()["scalars"]) == {"train/loss"}
    assert set(accumulator.Tags()["histograms"]) == {"activations"}
    scalars = accumulator.Scalars("train/loss")
    assert [event.step for event in scalars] == [0, 10, 20]
    expected_losses = [np.mean(batch.astype(np.float64) ** 2) for batch in batches]
    np.testing.assert_allclose([event.value for event in scalars], expected_losses, rtol=1e-6)

    histograms = accumulator.Histograms("activations")
    assert [event.step for event in histograms] == [0, 10, 20, 99]
    limits = cc.summary.default_bucket_limits()
    for event, batch in zip(histograms, batches + [batches[0]]):
        values = (np.tanh(batch) * 3.0).astype(np.float64)
        histogram = event.histogram_value
        assert histogram.num == values.size
        assert histogram.min == pytest.approx(values.min(), rel=1e-6)
        assert histogram.max == pytest.approx(values.max(), rel=1e-6)
        assert histogram.sum == pytest.approx(values.sum(), rel=1e-5)
        assert histogram.sum_squares == pytest.approx((values ** 2).sum(), rel=1e-5)
        assert sum(histogram.bucket) == values.size
        # A value's bucket is decided in float32 on the step's side; keep values off the limits.
        assert _nonempty_buckets(histogram.bucket_limit, histogram.bucket) == \
            _nonempty_buckets(limits, _numpy_bucket_counts(values, limits))


@pytest.mark.parametrize("target", TARGETS)
def test_histogram_with_given_limits_counts_as_numpy(target: str) -> None:
    limits = (-2.0, -0.5, 0.0, 0.5, 2.0)
    values = np.array([[-3.0, -2.0, -1.0, -0.25], [0.0, 0.25, 1.0, 2.5]], "float32")
    graph = cc.Graph()
    with graph.as_default():
        histogram_summary = cc.summary.histogram("h", cc.constant(values), bucket_limits=limits)
    with Session(graph, target=target) as sess:
        (value,) = Summary.FromString(sess.run(histogram_summary)).value
    expected = _numpy_bucket_counts(values, limits)
    assert expected.tolist() == [1, 2, 1, 2, 2]
    assert list(value.histo.bucket_limit) == list(limits)
    assert list(value.histo.bucket) == expected.tolist()


def test_empty_bucket_runs_are_collapsed_as_tf1_encodes_them() -> None:
    graph = cc.Graph()
    with graph.as_default():
        histogram_summary = cc.summary.histogram("h", [5.0, 5.0, -5.0])
    with Session(graph) as sess:
        (value,) = Summary.FromString(sess.run(histogram_summary)).value
    counts = list(value.histo.bucket)
    # empty run, -5, empty run, 5, empty run up to DBL_MAX
    assert counts == [0.0, 1.0, 0.0, 2.0, 0.0]
    assert value.histo.bucket_limit[-1] == np.finfo(np.float64).max


def test_merge_and_fetch_structure() -> None:
    graph = cc.Graph()
    with graph.as_default():
        a = cc.summary.scalar("a", 1.0)
        b = cc.summary.scalar("b", cc.constant(2, dtype="int32"), collections=["other"])
        assert graph.get_collection(cc.summary.SUMMARIES) == [a]
        assert graph.get_collection("other") == [b]
        merged = cc.summary.merge([a, cc.summary.merge([b])])
        assert graph.get_collection(cc.summary.SUMMARIES) == [a]
        total = cc.constant(3.0)
    with Session(graph) as sess:
        encoded, plain = sess.run([merged, total])
        by_name = sess.run({"summary": a})
    assert [(v.tag, v.simple_value) for v in Summary.FromString(encoded).value] == [("a", 1.0), ("b", 2.0)]
    assert plain == 3.0
    assert [v.tag for v in Summary.FromString(by_name["summary"]).value] == ["a"]


def test_build_errors() -> None:
    graph = cc.Graph()
    with graph.as_default():
        assert cc.summary.merge_all() is None
        with pytest.raises(cc.ShapeError, match="needs a scalar"):
            cc.summary.scalar("vector", cc.constant([1.0, 2.0]))
        with pytest.raises(TypeError, match="not a summary"):
            cc.summary.merge([cc.constant(1.0)])
        with pytest.raises(ValueError, match="increasing"):
            cc.summary.histogram("h", cc.constant([1.0]), bucket_limits=[1.0, 0.0])


def test_file_writer_closes(tmp_path: Path) -> None:
    writer = cc.summary.FileWriter(tmp_path / "run")
    assert writer.get_logdir() == str(tmp_path / "run")
    writer.close()
    writer.close()
    with pytest.raises(RuntimeError, match="closed"):
        writer.add_summary(b"", global_step=0)
    with pytest.raises(RuntimeError, match="closed"):
        writer.add_graph(cc.Graph())
    assert len(list((tmp_path / "run").glob("events.out.tfevents.*"))) == 1


def _loss_summary() -> bytes:
    """A scalar summary 'loss' = 0.5, as ``Session.run`` gives it."""
    graph = cc.Graph()
    with graph.as_default():
        loss_summary = cc.summary.scalar("loss", cc.constant(0.5))
    with Session(graph) as sess:
        return sess.run(loss_summary)


def test_file_writer_reopens_into_a_new_event_file_and_writes_session_logs(tmp_path: Path) -> None:
    from tensorboard.compat.proto.event_pb2 import Event, SessionLog
    encoded = _loss_summary()
    writer = cc.summary.FileWriter(tmp_path)
    writer.reopen()   # open: nothing happens
    writer.add_summary(encoded, global_step=1)
    writer.close()
    writer.reopen()
    writer.add_session_log(SessionLog(status=SessionLog.START), global_step=2)
    writer.add_event(Event(wall_time=1.0, step=3, summary=Summary.FromString(encoded)))
    writer.close()
    files = sorted(tmp_path.glob("events.out.tfevents.*"))
    assert len(files) == 2
    assert [event.step for event in _read_back(tmp_path).Scalars("loss")] == [1, 3]
    logs = [event for path in files for event in _events(path) if event.HasField("session_log")]
    assert [(event.step, event.session_log.status) for event in logs] == [(2, SessionLog.START)]


def test_a_file_writer_dropped_without_close_flushes_and_ends_its_thread(tmp_path: Path) -> None:
    import gc
    import threading
    encoded = _loss_summary()
    before = threading.active_count()
    for step in range(5):
        writer = cc.summary.FileWriter(tmp_path, flush_secs=1000)
        writer.add_summary(encoded, global_step=step)
        del writer
    gc.collect()
    assert threading.active_count() == before
    assert sorted(event.step for event in _read_back(tmp_path).Scalars("loss")) == [0, 1, 2, 3, 4]


def _events(path: Path) -> list:
    """The events of one file, record by record (length, its CRC, data, the data's CRC)."""
    from tensorboard.compat.proto.event_pb2 import Event
    data, events, position = path.read_bytes(), [], 0
    while position < len(data):
        (length,) = struct.unpack("<Q", data[position:position + 8])
        events.append(Event.FromString(data[position + 12:position + 12 + length]))
        position += 12 + length + 4
    return events


def test_graph_tab_reads_back_with_scopes_inputs_and_locations(tmp_path: Path) -> None:
    graph = cc.Graph()
    with graph.as_default():
        x = cc.placeholder("float32", shape=(None, 4), name="x")
        with cc.name_scope("dense"):
            weights = cc.Variable(np.ones((4, 2), "float32"), name="W")
            product = cc.matmul(x, weights)  # the line recorded as its location
        loss = cc.reduce_mean(cc.square(product), name="loss")
        with graph.control_dependencies([loss.op]):
            after_loss = cc.identity(loss, name="after_loss")
    with cc.summary.FileWriter(tmp_path, graph=graph):
        pass
    accumulator = EventAccumulator(str(tmp_path))
    accumulator.Reload()
    assert accumulator.Tags()["graph"]
    nodes = {node.name: node for node in accumulator.Graph().node}
    assert len(accumulator.Graph().node) == len(graph.get_operations())
    assert set(nodes) == {op.name for op in graph.get_operations()}
    assert product.op.name.startswith("dense/") and weights.op.name.startswith("dense/")

    product_node = nodes[product.op.name]
    assert product_node.op == product.op.type
    assert list(product_node.input) == [x.op.name, weights.op.name]
    assert product_node.attr["dtype"].type == 1  # DT_FLOAT
    assert [dim.size for dim in product_node.attr["shape"].shape.dim] == [-1, 2]
    location = product_node.attr[cc.summary.LOCATION_ATTR].s.decode()
    assert location == str(product.op.location)
    assert location.startswith(__file__) and location.endswith(f":{product.op.location.lineno}")
    assert f"^{loss.op.name}" in nodes[after_loss.op.name].input


def test_add_graph_beside_summaries(tmp_path: Path) -> None:
    graph = cc.Graph()
    with graph.as_default():
        loss_summary = cc.summary.scalar("loss", cc.constant(0.5))
    with Session(graph) as sess, cc.summary.FileWriter(tmp_path) as writer:
        writer.add_summary(sess.run(loss_summary), global_step=3)
        writer.add_graph(graph)
    accumulator = _read_back(tmp_path)
    assert [event.step for event in accumulator.Scalars("loss")] == [3]
    assert len(accumulator.Graph().node) == len(graph.get_operations())


def _decode_png(png: bytes) -> np.ndarray:
    """The pixels of an 8-bit PNG whose rows are unfiltered (what ``encode_png`` writes)."""
    assert png[:8] == b"\x89PNG\r\n\x1a\n"
    position, chunks = 8, {}
    while position < len(png):
        (length,) = struct.unpack(">I", png[position:position + 4])
        kind, data = png[position + 4:position + 8], png[position + 8:position + 8 + length]
        (crc,) = struct.unpack(">I", png[position + 8 + length:position + 12 + length])
        assert crc == zlib.crc32(kind + data)
        chunks[kind] = chunks.get(kind, b"") + data
        position += 12 + length
    width, height, bit_depth, color_type = struct.unpack(">IIBB", chunks[b"IHDR"][:10])
    assert bit_depth == 8
    channels = {0: 1, 2: 3, 6: 4}[color_type]
    rows = np.frombuffer(zlib.decompress(chunks[b"IDAT"]), np.uint8).reshape(height, 1 + width * channels)
    assert not rows[:, 0].any()  # filter type 0 on every row
    return rows[:, 1:].reshape(height, width, channels)


def _tf1_image_bytes(image: np.ndarray) -> np.ndarray:
    """TF1's NormalizeFloatImage for one HWC float32 image, written out plainly."""
    finite = np.isfinite(image)
    low, high = image[finite].min(initial=np.inf), image[finite].max(initial=-np.inf)
    if low < 0:
        extent = max(abs(low), abs(high))
        scale, offset = (0.0 if extent < 1e-6 else np.float32(127.0) / np.float32(extent)), 128.0
    else:
        scale, offset = (0.0 if high < 1e-6 else np.float32(255.0) / np.float32(high)), 0.0
    out = np.floor(image * np.float32(scale) + np.float32(offset)).astype(np.uint8)
    out[~finite.all(axis=-1)] = [255, 0, 0, 255][:image.shape[-1]]
    return out


@pytest.mark.parametrize("target", TARGETS)
@pytest.mark.parametrize("pixels, expected", [
    ([0.0, 0.25, 0.5], [0, 127, 255]),        # nothing below 0: 255 / max
    ([-1.0, 0.0, 1.0], [1, 128, 255]),        # signed: 127 / max|value| around 128
    ([0.0, 100.0, 255.0], [0, 100, 255]),     # already 0..255
    ([0.0, 0.0, 0.0], [0, 0, 0]),
    ([np.nan, 0.5, np.inf], [255, 255, 255]),  # non-finite pixels are red (grey: 255)
    ([-np.inf, -0.5, 0.25], [255, 1, 191]),   # the scale comes from the finite pixels
])
def test_float_images_are_scaled_as_tf1_scales_them(target: str, pixels: list, expected: list) -> None:
    graph = cc.Graph()
    with graph.as_default():
        image = cc.placeholder("float32", shape=(1, 1, 3, 1), name="image")
        summary = cc.summary.image("image", image)
    with Session(graph, target=target) as sess:
        encoded = sess.run(summary, {image: np.array(pixels, "float32").reshape(1, 1, 3, 1)})
    (value,) = Summary.FromString(encoded).value
    np.testing.assert_array_equal(_decode_png(value.image.encoded_image_string).ravel(), expected)


@pytest.mark.parametrize("target", TARGETS)
def test_images_read_back_as_the_same_pixels(target: str, tmp_path: Path) -> None:
    rng = np.random.default_rng(0)
    float_batch = rng.uniform(-0.2, 1.2, size=(5, 3, 4, 3)).astype("float32")
    grey_pixels = rng.integers(0, 256, size=(2, 5, 2, 1)).astype(np.uint8)
    graph = cc.Graph()
    with graph.as_default():
        batch = cc.placeholder("float32", shape=(None, 3, 4, 3), name="batch")
        cc.summary.image("colour", batch)
        cc.summary.image("grey", grey_pixels, max_outputs=1)
        cc.summary.text("notes", "seed 0")
        merged = cc.summary.merge_all()
    with Session(graph, target=target) as sess, cc.summary.FileWriter(tmp_path) as writer:
        writer.add_summary(sess.run(merged, feed_dict={batch: float_batch}), global_step=7)
        writer.add_summary(sess.run(merged, feed_dict={batch: float_batch[:2]}), global_step=8)
    accumulator = EventAccumulator(str(tmp_path), size_guidance={"images": 0, "tensors": 0})
    accumulator.Reload()
    assert set(accumulator.Tags()["images"]) == {"colour/image/0", "colour/image/1", "colour/image/2",
                                                 "grey/image"}
    expected_colour = np.stack([_tf1_image_bytes(image) for image in float_batch])
    for index in range(3):
        events = accumulator.Images(f"colour/image/{index}")
        assert [event.step for event in events] == ([7, 8] if index < 2 else [7])
        for event in events:
            assert (event.width, event.height) == (4, 3)
            np.testing.assert_array_equal(_decode_png(event.encoded_image_string), expected_colour[index])
    (grey_event,) = accumulator.Images("grey/image")[:1]
    np.testing.assert_array_equal(_decode_png(grey_event.encoded_image_string), grey_pixels[0])
    try:  # a PNG reader that graphgrad does not use, when one is installed
        import io

        from PIL import Image
    except ImportError:
        pass
    else:
        decoded = np.asarray(Image.open(io.BytesIO(grey_event.encoded_image_string)))
        np.testing.assert_array_equal(decoded, grey_pixels[0, :, :, 0])
    text_events = accumulator.Tensors("notes")
    assert [event.tensor_proto.string_val[0] for event in text_events] == [b"seed 0", b"seed 0"]


def test_image_and_text_build_errors() -> None:
    with cc.Graph().as_default():
        with pytest.raises(cc.ShapeError, match="needs images of shape"):
            cc.summary.image("flat", cc.constant(np.zeros((2, 4), "float32")))
        with pytest.raises(cc.ShapeError, match="needs images of shape"):
            cc.summary.image("two_channels", cc.constant(np.zeros((1, 2, 2, 2), "float32")))
        with pytest.raises(ValueError, match="max_outputs"):
            cc.summary.image("none", cc.constant(np.zeros((1, 2, 2, 1), "float32")), max_outputs=0)
        with pytest.raises(TypeError, match="Python string"):
            cc.summary.text("notes", cc.constant(1.0))  # type: ignore[arg-type]


@pytest.mark.parametrize("target", ["reference", "cpu"])
def test_a_nan_in_a_histogram_is_an_error_naming_the_tag(target: str) -> None:
    """As TF1 ("Nan in summary histogram"): a NaN has no bucket, and was counted as a huge value."""
    graph = cc.Graph()
    with graph.as_default():
        values = cc.placeholder("float32", (3,), name="values")
        summary = cc.summary.histogram("weights", values)
    with Session(graph, target=target) as sess:
        sess.run(summary, {values: np.array([np.inf, 1.0, -np.inf], "float32")})   # infinities have buckets
        with pytest.raises(cc.NumericsError, match="NaN in the values of summary.histogram 'weights'"):
            sess.run(summary, {values: np.array([np.nan, 1.0, 2.0], "float32")})


def test_tags_arguments_and_empty_histograms_follow_tf1() -> None:
    """TF1 cleans a summary's name into a tag ("train loss" is "train_loss", "a:b" is "a_b", a
    leading "/" is dropped), puts a family in front (scope and tag: "train/train/loss"), takes
    histogram's third positional argument as its collections, and writes an empty histogram's
    min and max as DBL_MAX and -DBL_MAX."""
    graph = cc.Graph()
    with graph.as_default():
        x = cc.constant(1.5)
        cleaned = [cc.summary.scalar(name, x) for name in ("train loss", "a:b", "/abs")]
        family = cc.summary.scalar("loss", x, family="train")
        values = cc.placeholder("float32", (None,), name="values")
        histogram = cc.summary.histogram("h", values, ["mine"])
        assert graph.get_collection("mine") == [histogram]
    with Session(graph) as sess:
        encoded = sess.run(cleaned + [family, histogram], {values: np.zeros(0, np.float32)})
    tags = [[value.tag for value in Summary.FromString(e).value] for e in encoded[:4]]
    assert tags == [["train_loss"], ["a_b"], ["abs"], ["train/train/loss"]]
    (empty,) = Summary.FromString(encoded[4]).value
    assert (empty.histo.num, empty.histo.min, empty.histo.max) == (0.0, np.finfo(np.float64).max,
                                                                   -np.finfo(np.float64).max)

"""``Saver``, ``latest_checkpoint`` and ``load_checkpoint``: TF1-style checkpoints as safetensors files,
restored bit for bit in a new process, written atomically, refused when damaged; files of graphgrad's
earlier format still read; and ``Session.load_variable``, which restore relies on."""
from __future__ import annotations

import json
import os
import re
import shutil
import signal
import struct
import subprocess
import sys
import textwrap
import zlib

import numpy as np
import pytest
import safetensors
import safetensors.numpy

import compiler as cc
import optim
from optim.saver import CheckpointError
from runtime import Session

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
# Written by graphgrad's Saver before checkpoints became safetensors files (format version 2).
LEGACY_CHECKPOINT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "data", "legacy-3")
LEGACY_VALUES = {"dense/kernel": np.arange(6, dtype="float32").reshape(2, 3) / 4,
                 "dense/bias": np.array([-1.5, 0.25]), "counts": np.arange(4, dtype="int32"),
                 "flags": np.array([True, False, True]), "global_step": np.int64(3)}
TARGETS = ["cpu", "reference"]

# The same model is built by the test and by the scripts it starts in new processes.
MODEL_SOURCE = textwrap.dedent('''
    import numpy as np
    import compiler as cc
    import optim

    def build_model():
        """An MLP trained by Adam with a global step; returns (train, loss, feeds, step)."""
        rng = np.random.default_rng(7)
        x = cc.placeholder("float32", shape=(None, 5), name="x")
        y = cc.placeholder("int32", shape=(None,), name="y")
        w1 = cc.Variable((rng.normal(size=(5, 16)) * 0.4).astype("float32"), name="w1")
        b1 = cc.Variable(np.zeros(16, "float32"), name="b1")
        w2 = cc.Variable((rng.normal(size=(16, 3)) * 0.4).astype("float32"), name="w2")
        b2 = cc.Variable(np.zeros(3, "float32"), name="b2")
        logits = cc.nn.relu(x @ w1 + b1) @ w2 + b2
        loss = cc.reduce_mean(cc.nn.sparse_softmax_cross_entropy_with_logits(labels=y, logits=logits))
        step = optim.get_or_create_global_step()
        train = optim.AdamOptimizer(0.01).minimize(loss, global_step=step)
        feeds = {x: rng.normal(size=(24, 5)).astype("float32"),
                 y: rng.integers(0, 3, 24).astype("int32")}
        return train, loss, feeds, step
''')


def _model():
    namespace: dict = {}
    exec(compile(MODEL_SOURCE, "<model>", "exec"), namespace)
    return namespace["build_model"]()


def _run_script(tmp_path, source: str, *args: str) -> subprocess.CompletedProcess:
    script = tmp_path / "script.py"
    script.write_text(source)
    env = dict(os.environ)
    env["PYTHONPATH"] = REPO + os.pathsep + env.get("PYTHONPATH", "")
    return subprocess.run([sys.executable, str(script), *args], cwd=str(tmp_path), env=env,
                          capture_output=True, text=True, timeout=300)


def _values(sess: Session, variables) -> dict[str, np.ndarray]:
    return dict(zip([v.op.name for v in variables], sess.run(list(variables))))


def _metadata(path) -> dict[str, str]:
    """A safetensors file's ``__metadata__``, read by the safetensors package."""
    with safetensors.safe_open(str(path), framework="numpy") as file:
        return file.metadata()


# A file in graphgrad's earlier format: magic, header length and CRC-32, JSON header, padding to
# 64 bytes, data.
_PREFIX = struct.Struct("<QI")


def _split_checkpoint(path) -> tuple[dict, bytes]:
    """The JSON header and the data bytes of a file in graphgrad's earlier format."""
    with open(path, "rb") as file:
        content = file.read()
    length, _ = _PREFIX.unpack_from(content, 8)
    header_end = 8 + _PREFIX.size + length
    data_start = (header_end + 63) // 64 * 64
    return json.loads(content[8 + _PREFIX.size:header_end]), content[data_start:]


def _rewrite_header(path, header: dict | bytes) -> None:
    """Give a file in graphgrad's earlier format another header, with a valid checksum, keeping
    its data bytes."""
    _, data = _split_checkpoint(path)
    raw = header if isinstance(header, bytes) else json.dumps(header).encode("utf-8")
    prefix = b"GGCKPT\x00\x01" + _PREFIX.pack(len(raw), zlib.crc32(raw)) + raw
    with open(path, "wb") as file:
        file.write(prefix + bytes(-len(prefix) % 64) + data)


# -- (1) restore in a new process continues training bit for bit ---------------------------------

RESUME_SCRIPT = MODEL_SOURCE + textwrap.dedent('''
    import sys
    from runtime import Session

    target, directory, out = sys.argv[1:4]
    train, loss, feeds, step = build_model()
    saver = optim.Saver()
    with Session(target=target) as sess:
        saver.restore(sess, optim.latest_checkpoint(directory))
        losses = [sess.run([train, loss], feeds)[1] for _ in range(20)]
        saver.save(sess, directory + "/model", global_step=step)
        variables = cc.global_variables()
        values = sess.run(variables)
    np.savez(out, names=np.array([v.op.name for v in variables]), losses=np.array(losses), *values)
''')


@pytest.mark.parametrize("target", TARGETS)
def test_adam_training_resumed_in_a_new_process_is_bit_identical(graph, tmp_path, target) -> None:
    train, loss, feeds, step = _model()
    variables = cc.global_variables()
    names = {v.op.name for v in variables}
    # The default var_list holds the slots, Adam's beta powers and the global step.
    assert {"w1/Adam", "w1/Adam_1", "beta1_power", "beta2_power", "global_step"} <= names
    saver = optim.Saver()
    directory = tmp_path / "ckpt"
    with Session(graph, target=target) as sess:
        for _ in range(20):
            sess.run(train, feeds)
        path = saver.save(sess, str(directory / "model"), global_step=step)
        losses = [sess.run([train, loss], feeds)[1] for _ in range(20)]
        uninterrupted = _values(sess, variables)
    assert path == str(directory / "model-20")
    assert optim.latest_checkpoint(str(directory)) == path

    result = _run_script(tmp_path, RESUME_SCRIPT, target, str(directory), str(tmp_path / "out.npz"))
    assert result.returncode == 0, result.stderr
    with np.load(tmp_path / "out.npz", allow_pickle=False) as out:
        resumed = {str(name): out[f"arr_{i}"] for i, name in enumerate(out["names"])}
        resumed_losses = out["losses"]
    assert set(resumed) == set(uninterrupted)
    for name, value in uninterrupted.items():
        assert value.dtype == resumed[name].dtype and np.array_equal(value, resumed[name]), name
    assert int(resumed["global_step"]) == 40
    assert np.array_equal(np.array(losses), resumed_losses)
    # The new process kept the index up to date: its checkpoint is now the latest.
    assert optim.latest_checkpoint(str(directory)) == str(directory / "model-40")
    with Session(graph, target=target) as sess:
        saver.restore(sess, optim.latest_checkpoint(str(directory)))
        for name, value in _values(sess, variables).items():
            assert np.array_equal(value, uninterrupted[name]), name


@pytest.mark.parametrize("target", TARGETS)
def test_restore_into_a_session_that_already_compiled_the_step(graph, tmp_path, target) -> None:
    train, loss, feeds, step = _model()
    variables = cc.global_variables()
    saver = optim.Saver()
    with Session(graph, target=target) as sess:
        path = saver.save(sess, str(tmp_path / "start"))
        first = [sess.run([train, loss], feeds)[1] for _ in range(5)]
        after_five = _values(sess, variables)
        saver.restore(sess, path)              # the compiled step must see the restored values
        assert int(sess.run(step)) == 0
        again = [sess.run([train, loss], feeds)[1] for _ in range(5)]
        for name, value in _values(sess, variables).items():
            assert np.array_equal(value, after_five[name]), name
    assert np.array_equal(np.array(first), np.array(again))


# -- Session.load_variable -----------------------------------------------------------------------

@pytest.mark.parametrize("target", TARGETS)
def test_load_variable_is_seen_by_the_next_run(graph, target) -> None:
    v = cc.Variable(np.zeros(3, "float32"), name="v")
    n = cc.Variable(np.int64(0), name="n")
    update = cc.group(cc.assign_add(v, np.ones(3, "float32")), cc.assign_add(n, 1))
    with Session(graph, target=target) as sess:
        sess.run(update)
        sess.load_variable(v, np.array([10.0, 20.0, 30.0], "float32"))
        sess.load_variable(n, 41)
        sess.run(update)                       # the step compiled before the load sees the new values
        assert np.array_equal(sess.run(v), np.array([11.0, 21.0, 31.0], "float32"))
        assert int(sess.run(n)) == 42
        sess.load_variable(v, [1, 2, 3])       # literals take the variable's dtype
        assert sess.run(v).dtype == np.float32
        n.load(7, sess)                        # TF1's Variable.load
        assert int(sess.run(n)) == 7
        with pytest.raises(cc.ShapeError, match="'v'.*shape"):
            sess.load_variable(v, np.zeros(4, "float32"))
        with pytest.raises(cc.DTypeError, match="'v'"):
            sess.load_variable(v, np.full(3, 1e300))   # beyond float32 (0.1 rounds to float32, as TF1's load)
        with pytest.raises(TypeError, match="Variable"):
            sess.load_variable(v.read_value(), np.zeros(3, "float32"))
        with pytest.raises(cc.DTypeError, match="'v'.*not an array of numbers"):
            sess.load_variable(v, [[1.0, 2.0], [3.0]])   # ragged
        assert np.array_equal(sess.run(v), np.array([1.0, 2.0, 3.0], "float32"))
    with cc.Graph().as_default():
        other = cc.Variable(np.zeros(3, "float32"), name="v")
    with Session(graph, target=target) as sess:
        with pytest.raises(cc.GraphMismatchError):
            sess.load_variable(other, np.zeros(3, "float32"))


def test_load_variable_before_first_use_is_not_overwritten_by_initial_value(graph) -> None:
    v = cc.Variable(np.float64(1.0), name="v")
    with Session(graph) as sess:
        sess.load_variable(v, 5.0)
        assert float(sess.run(cc.assign_add(v, 1.0))) == 6.0
        sess.run(cc.global_variables_initializer())  # TF1: the initializer resets it
        assert float(sess.run(v)) == 1.0


# -- (2) a save that dies midway leaves the previous checkpoint usable ---------------------------

def test_failed_rename_leaves_previous_checkpoint(graph, tmp_path, monkeypatch) -> None:
    w = cc.Variable(np.arange(6.0).reshape(2, 3), name="w")
    saver = optim.Saver()
    with Session(graph) as sess:
        first = saver.save(sess, str(tmp_path / "model"), global_step=1)
        index_before = (tmp_path / "checkpoint").read_bytes()
        sess.load_variable(w, -np.ones((2, 3)))

        def failing_replace(source, destination):
            raise OSError("disk unplugged")

        monkeypatch.setattr(os, "replace", failing_replace)
        with pytest.raises(OSError, match="disk unplugged"):
            saver.save(sess, str(tmp_path / "model"), global_step=2)
        monkeypatch.undo()
        assert sorted(os.listdir(tmp_path)) == ["checkpoint", "model-1"]  # no temporary left
        assert (tmp_path / "checkpoint").read_bytes() == index_before
        assert optim.latest_checkpoint(str(tmp_path)) == first
        assert saver.last_checkpoints == [first]
        saver.restore(sess, optim.latest_checkpoint(str(tmp_path)))
        assert np.array_equal(sess.run(w), np.arange(6.0).reshape(2, 3))


def test_failed_index_write_keeps_index_on_previous(graph, tmp_path, monkeypatch) -> None:
    w = cc.Variable(np.arange(4.0), name="w")
    saver = optim.Saver()
    real_replace = os.replace
    with Session(graph) as sess:
        first = saver.save(sess, str(tmp_path / "model"), global_step=1)

        def replace_then_fail_on_index(source, destination):
            if os.path.basename(destination) == "checkpoint":
                raise OSError("killed before the index")
            real_replace(source, destination)

        monkeypatch.setattr(os, "replace", replace_then_fail_on_index)
        with pytest.raises(OSError, match="killed before the index"):
            saver.save(sess, str(tmp_path / "model"), global_step=2)
        monkeypatch.undo()
        assert optim.latest_checkpoint(str(tmp_path)) == first
        assert not [name for name in os.listdir(tmp_path) if ".tmp" in name]
        saver.restore(sess, first)
        assert np.array_equal(sess.run(w), np.arange(4.0))


KILLED_SAVE_SCRIPT = textwrap.dedent('''
    import os, signal, sys
    import numpy as np
    import compiler as cc
    import optim
    from runtime import Session

    directory, stage = sys.argv[1:3]
    w = cc.Variable(np.arange(100000.0), name="w")
    saver = optim.Saver([w])
    with Session() as sess:
        saver.save(sess, os.path.join(directory, "model"), global_step=1)
        sess.load_variable(w, -np.arange(100000.0))
        real_write = os.write

        def write_then_die(fd, data):
            # "data": partway through the variable's bytes; "index": in the index file's write
            is_index = bytes(memoryview(data)[:21]) == b"model_checkpoint_path"
            if (len(data) > 1000) if stage == "data" else is_index:
                real_write(fd, bytes(memoryview(data)[: len(data) // 2]))
                open(os.path.join(directory, "died"), "w").close()
                os.kill(os.getpid(), signal.SIGKILL)
            return real_write(fd, data)

        os.write = write_then_die
        saver.save(sess, os.path.join(directory, "model"), global_step=2)
    print("not reached")
''')


@pytest.mark.skipif(not hasattr(signal, "SIGKILL"), reason="needs POSIX signals")
@pytest.mark.parametrize("stage", ["data", "index"])
def test_process_killed_during_save_leaves_previous_checkpoint(graph, tmp_path, stage) -> None:
    directory = tmp_path / "ckpt"
    directory.mkdir()
    result = _run_script(tmp_path, KILLED_SAVE_SCRIPT, str(directory), stage)
    assert result.returncode == -signal.SIGKILL, result.stderr
    assert "not reached" not in result.stdout
    assert (directory / "died").exists()
    names = os.listdir(directory)
    partial = [name for name in names if ".tmp" in name]
    assert len(partial) == 1 and (directory / partial[0]).stat().st_size > 0
    if stage == "data":
        assert "model-2" not in names and partial[0].startswith(".model-2.tmp")
        assert (directory / partial[0]).stat().st_size < 800000
    else:                                     # the new file is complete, but the index never saw it
        assert "model-2" in names and partial[0].startswith(".checkpoint.tmp")
    assert optim.latest_checkpoint(str(directory)) == str(directory / "model-1")
    w = cc.Variable(np.zeros(100000), name="w")
    with Session(graph) as sess:
        optim.Saver([w]).restore(sess, optim.latest_checkpoint(str(directory)))
        assert np.array_equal(sess.run(w), np.arange(100000.0))
        # The next save removes the leftover once it is older than the saving process.
        os.utime(directory / partial[0], (1_000_000_000, 1_000_000_000))
        optim.Saver([w]).save(sess, str(directory / "model"), global_step=3)
    assert not [name for name in os.listdir(directory) if ".tmp" in name]


# -- (3) mismatches name the variable ------------------------------------------------------------

def _save_reference(tmp_path) -> str:
    with cc.Graph().as_default() as g:
        cc.Variable(np.ones((2, 3), "float32"), name="w")
        cc.Variable(np.int32(5), name="n")
        with Session(g) as sess:
            return optim.Saver().save(sess, str(tmp_path / "ref"))


def test_shape_mismatch_names_variable_and_file(graph, tmp_path) -> None:
    path = _save_reference(tmp_path)
    n = cc.Variable(np.int32(0), name="n")
    cc.Variable(np.zeros((3, 2), "float32"), name="w")
    with Session(graph) as sess:
        with pytest.raises(cc.ShapeError, match=r"'w'.*\(3, 2\).*" + re.escape(path) + r".*\(2, 3\)"):
            optim.Saver().restore(sess, path)
        assert int(sess.run(n)) == 0                 # nothing was loaded


def test_dtype_mismatch_names_variable_and_file(graph, tmp_path) -> None:
    path = _save_reference(tmp_path)
    cc.Variable(np.ones((2, 3), "float64"), name="w")
    cc.Variable(np.int32(0), name="n")
    with Session(graph) as sess:
        with pytest.raises(cc.DTypeError, match=r"'w' is float64.*" + re.escape(path) + ".*float32"):
            optim.Saver().restore(sess, path)


def test_missing_variable_names_it(graph, tmp_path) -> None:
    path = _save_reference(tmp_path)
    cc.Variable(np.ones((2, 3), "float32"), name="w")
    cc.Variable(np.zeros(2), name="extra")
    with Session(graph) as sess:
        with pytest.raises(CheckpointError, match="'extra' is not in checkpoint " + re.escape(repr(path))):
            optim.Saver().restore(sess, path)
        with pytest.raises(CheckpointError, match="no checkpoint file"):
            optim.Saver().restore(sess, str(tmp_path / "nothing-here"))


def test_a_checkpoint_from_before_any_random_op_restores_into_a_graph_that_draws(graph, tmp_path) -> None:
    # The hidden run count is a global variable (checkpointed, reset by the initializer), but a
    # checkpoint of a graph without random ops (or TF1's) has none: restoring it keeps the count.
    path = _save_reference(tmp_path)
    w = cc.Variable(cc.truncated_normal([2, 3], stddev=0.1), name="w")
    noise = cc.random_uniform([4])
    averages = optim.ExponentialMovingAverage(0.9).variables_to_restore()
    assert "random_counter" not in averages and "random_counter" in [v.op.name for v in cc.global_variables()]
    with Session(graph) as sess:
        first = sess.run(noise)
        optim.Saver().restore(sess, path)
        np.testing.assert_array_equal(sess.run(w), np.ones((2, 3), "float32"))
        assert not np.array_equal(sess.run(noise), first)     # the count went on


# -- (4) damaged files are refused ---------------------------------------------------------------

BYTE_DAMAGE = {
    "flip-data": lambda content: content[:-7] + bytes([content[-7] ^ 0x10]) + content[-6:],
    "flip-header": lambda content: content[:30] + bytes([content[30] ^ 0x01]) + content[31:],
    "header-garbage": lambda content: content[:12] + b"\xff\xfe" + content[14:],
    "header-length-huge": lambda content: (10 ** 12).to_bytes(8, "little") + content[8:],
    "dtype-flipped": lambda content: content.replace(b'"F64"', b'"I64"', 1),
    "truncate-data": lambda content: content[:-9],
    "truncate-header": lambda content: content[:25],
    "empty": lambda content: b"",
    "appended": lambda content: content + b"\0" * 8,
    "not-a-checkpoint": lambda content: b"PK\x03\x04 something else entirely",
}


@pytest.mark.parametrize("damage", sorted(BYTE_DAMAGE))
def test_damaged_checkpoint_is_refused(graph, tmp_path, damage) -> None:
    w = cc.Variable(np.linspace(0.0, 1.0, 50), name="w")
    saver = optim.Saver([w])
    with Session(graph) as sess:
        path = saver.save(sess, str(tmp_path / "model"))
        content = open(path, "rb").read()
        damaged = BYTE_DAMAGE[damage](content)
        assert damaged != content
        with open(path, "wb") as file:
            file.write(damaged)
        sess.load_variable(w, np.zeros(50))
        expected = "is not a checkpoint file" if damage == "not-a-checkpoint" else "is damaged"
        with pytest.raises(CheckpointError, match=re.escape(repr(path)) + " " + expected):
            saver.restore(sess, path)
        with pytest.raises(CheckpointError, match=re.escape(repr(path))):
            optim.load_checkpoint(path)
        assert np.array_equal(sess.run(w), np.zeros(50))


# Valid safetensors files whose graphgrad metadata no longer fits them: changes to the saved
# metadata (None deletes a key), other arrays in place of the saved ones, and what the error says.
METADATA_DAMAGE = {
    "crc-mismatch": ({}, lambda arrays: {"w": arrays["w"] + 1.0},
                     "the checksum of variable 'w' does not match"),
    "extra-variable": ({}, lambda arrays: {**arrays, "v": np.ones(1)},
                       r"lists \['w'\] but the file holds \['v', 'w'\]"),
    "crc-missing-variable": ({"crc32": "{}"}, None, r"graphgrad.crc32 lists \[\] but the file holds \['w'\]"),
    "crc-not-json": ({"crc32": "{w: 1"}, None, "unreadable metadata"),
    "crc-negative": ({"crc32": '{"w": -1}'}, None, "checksum of variable 'w' is -1"),
    "crc-a-list": ({"crc32": "[1]"}, None, "not an object"),
    "step-changed": ({"global_step": "8"}, None,
                     "the checksum of its metadata, dtypes and shapes does not match"),
    "step-fraction": ({"global_step": "1.5"}, None, "global step is 1.5"),
    "name-empty": ({"name": ""}, None, "graphgrad.name is empty"),
    "name-missing": ({"name": None}, None, "KeyError: 'graphgrad.name'"),
    "header-crc-missing": ({"header_crc32": None}, None, "KeyError: 'graphgrad.header_crc32'"),
    "version-missing": ({"version": None}, None, "lacks 'graphgrad.version'"),
}


@pytest.mark.parametrize("damage", sorted(METADATA_DAMAGE))
def test_safetensors_file_with_damaged_metadata_is_refused(graph, tmp_path, damage) -> None:
    w = cc.Variable(np.linspace(0.0, 1.0, 50), name="w")
    saver = optim.Saver([w])
    with Session(graph) as sess:
        path = saver.save(sess, str(tmp_path / "model"))
        changes, other_arrays, reason = METADATA_DAMAGE[damage]
        arrays, metadata = safetensors.numpy.load_file(path), _metadata(path)
        for key, value in changes.items():
            if value is None:
                del metadata["graphgrad." + key]
            else:
                metadata["graphgrad." + key] = value
        safetensors.numpy.save_file(other_arrays(arrays) if other_arrays else arrays, path, metadata=metadata)
        sess.load_variable(w, np.zeros(50))
        with pytest.raises(CheckpointError, match=re.escape(repr(path)) + " is damaged: .*" + reason):
            saver.restore(sess, path)
        assert np.array_equal(sess.run(w), np.zeros(50))


def test_unknown_version_is_refused(graph, tmp_path) -> None:
    w = cc.Variable(np.linspace(0.0, 1.0, 5), name="w")
    saver = optim.Saver([w])
    with Session(graph) as sess:
        path = saver.save(sess, str(tmp_path / "model"))
        safetensors.numpy.save_file(safetensors.numpy.load_file(path), path,
                                    metadata={**_metadata(path), "graphgrad.version": "4"})
        with pytest.raises(CheckpointError, match=re.escape(repr(path)) + ".*version '4'.*reads"):
            saver.restore(sess, path)


def test_file_format_is_self_describing(graph, tmp_path) -> None:
    cc.Variable(np.arange(6, dtype="int64").reshape(3, 2), name="scope/ints")
    cc.Variable(np.array([True, False]), name="flags")
    cc.Variable(np.float32(2.5), name="scalar")
    with Session(graph) as sess:
        path = optim.Saver().save(sess, str(tmp_path / "model"))
    stored = safetensors.numpy.load_file(path)         # the safetensors package alone reads it
    assert sorted(stored) == ["flags", "scalar", "scope/ints"]
    assert stored["scope/ints"].dtype == np.int64 and stored["scope/ints"].shape == (3, 2)
    assert stored["flags"].dtype == np.bool_ and stored["scalar"].shape == ()
    assert np.array_equal(stored["scope/ints"], np.arange(6).reshape(3, 2))
    metadata = _metadata(path)
    assert sorted(metadata) == ["graphgrad.crc32", "graphgrad.global_step", "graphgrad.header_crc32",
                                "graphgrad.name", "graphgrad.version"]
    assert (metadata["graphgrad.version"], metadata["graphgrad.name"]) == ("3", "model")
    assert metadata["graphgrad.global_step"] == "null"
    crcs = json.loads(metadata["graphgrad.crc32"])
    assert crcs == {name: zlib.crc32(np.ascontiguousarray(value).tobytes()) for name, value in stored.items()}
    loaded = optim.load_checkpoint(path)
    assert all(np.array_equal(loaded[name], stored[name]) for name in stored)
    loaded["scalar"][()] = 1.0                           # the arrays are the caller's own


def test_reserved_safetensors_name_is_refused(graph) -> None:
    v = cc.Variable(np.zeros(2), name="v")
    with pytest.raises(ValueError, match="'__metadata__' is reserved"):
        optim.Saver({"__metadata__": v})


def test_plain_safetensors_file_restores_by_name(graph, tmp_path) -> None:
    w = cc.Variable(np.zeros((2, 2), "float32"), name="w")
    n = cc.Variable(np.int64(0), name="n")
    path = str(tmp_path / "from-elsewhere.safetensors")
    safetensors.numpy.save_file({"w": np.eye(2, dtype="float32"), "n": np.array(9), "unused": np.ones(3)},
                                path, metadata={"format": "pt"})
    with Session(graph) as sess:
        optim.Saver().restore(sess, path)
        assert np.array_equal(sess.run(w), np.eye(2)) and int(sess.run(n)) == 9
        safetensors.numpy.save_file({"w": np.eye(2, dtype="float32")}, path)
        with pytest.raises(CheckpointError, match="'n' is not in checkpoint " + re.escape(repr(path))):
            optim.Saver().restore(sess, path)


# -- (4b) graphgrad's earlier format is still read ------------------------------------------------

def _legacy_variables() -> list[cc.Variable]:
    """Variables shaped like those of LEGACY_CHECKPOINT, all zero."""
    return [cc.Variable(np.zeros_like(value), name=name) for name, value in LEGACY_VALUES.items()]


def _legacy_copy(tmp_path) -> str:
    path = str(tmp_path / "legacy-3")
    shutil.copyfile(LEGACY_CHECKPOINT, path)
    return path


@pytest.mark.parametrize("target", TARGETS)
def test_checkpoint_in_earlier_format_restores(graph, tmp_path, target) -> None:
    assert open(LEGACY_CHECKPOINT, "rb").read(8) == b"GGCKPT\x00\x01"
    variables = _legacy_variables()
    saver = optim.Saver(max_to_keep=None)
    with Session(graph, target=target) as sess:
        saver.restore(sess, LEGACY_CHECKPOINT)
        for name, value in _values(sess, variables).items():
            expected = LEGACY_VALUES[name]
            assert value.dtype == expected.dtype and np.array_equal(value, expected), name
        # Saved again, it becomes a safetensors file with the same values.
        path = saver.save(sess, str(tmp_path / "legacy"), global_step=3)
    loaded = optim.load_checkpoint(path)
    assert open(path, "rb").read(8) != b"GGCKPT\x00\x01"
    assert _metadata(path)["graphgrad.global_step"] == "3"
    for stored in (optim.load_checkpoint(LEGACY_CHECKPOINT), loaded):
        assert sorted(stored) == sorted(LEGACY_VALUES)
        for name, value in LEGACY_VALUES.items():
            assert stored[name].dtype == value.dtype and np.array_equal(stored[name], value), name
    renamed = str(tmp_path / "legacy-4")
    shutil.copyfile(LEGACY_CHECKPOINT, renamed)
    with pytest.raises(CheckpointError, match=r"holds checkpoint 'legacy-3' \(global step 3\), but "
                                              r"checkpoint 'legacy-4' was asked for"):
        optim.load_checkpoint(renamed)


# -- (5) max_to_keep ------------------------------------------------------------------------------

def test_max_to_keep_deletes_older_checkpoints(graph, tmp_path) -> None:
    w = cc.Variable(np.zeros(2), name="w")
    step = optim.get_or_create_global_step()
    bump = cc.group(cc.assign_add(w, np.ones(2)), cc.assign_add(step, 1))
    saver = optim.Saver(max_to_keep=2)
    with Session(graph) as sess:
        for _ in range(4):
            sess.run(bump)
            saver.save(sess, str(tmp_path / "model"), global_step=step)
        assert sorted(os.listdir(tmp_path)) == ["checkpoint", "model-3", "model-4"]
        assert saver.last_checkpoints == [str(tmp_path / "model-3"), str(tmp_path / "model-4")]
        index = (tmp_path / "checkpoint").read_text().splitlines()
        assert index == ['model_checkpoint_path: "model-4"', 'all_model_checkpoint_paths: "model-3"',
                         'all_model_checkpoint_paths: "model-4"']
        saver.save(sess, str(tmp_path / "model"), global_step=4)   # the same step again: no duplicate
        assert saver.last_checkpoints == [str(tmp_path / "model-3"), str(tmp_path / "model-4")]
        saver.restore(sess, optim.latest_checkpoint(str(tmp_path)))
        assert np.array_equal(sess.run(w), [4.0, 4.0])

        keep_all = optim.Saver(max_to_keep=None)
        paths = [keep_all.save(sess, str(tmp_path / "all"), global_step=number) for number in range(7)]
        assert len([n for n in os.listdir(tmp_path) if n.startswith("all-")]) == 7
        assert optim.latest_checkpoint(str(tmp_path)) == str(tmp_path / "all-6")
        # As TF1's: keeping all, nothing is recorded and the index names only the latest.
        assert keep_all.last_checkpoints == []
        assert optim.get_checkpoint_state(str(tmp_path)).all_model_checkpoint_paths == [str(tmp_path / "all-6")]

        recovered = optim.Saver(max_to_keep=3)
        recovered.recover_last_checkpoints(paths)
        recovered.save(sess, str(tmp_path / "all"), global_step=7)
        assert sorted(n for n in os.listdir(tmp_path) if n.startswith("all-")) == ["all-5", "all-6", "all-7"]


def test_latest_checkpoint_without_index_is_none(tmp_path) -> None:
    assert optim.latest_checkpoint(str(tmp_path)) is None
    assert optim.latest_checkpoint(str(tmp_path / "missing")) is None


# -- (6) var_list as a list and as a dict ----------------------------------------------------------

def test_var_list_as_list_and_dict(graph, tmp_path) -> None:
    a = cc.Variable(np.array([1.0, 2.0]), name="a")
    b = cc.Variable(np.array([3.0]), name="b")
    with Session(graph) as sess:
        only_a = optim.Saver([a]).save(sess, str(tmp_path / "list"))
        renamed = optim.Saver({"first": a, "second": b}).save(sess, str(tmp_path / "dict"))
        everything = optim.Saver().save(sess, str(tmp_path / "all"))
    assert sorted(optim.load_checkpoint(only_a)) == ["a"]
    assert sorted(optim.load_checkpoint(renamed)) == ["first", "second"]

    with cc.Graph().as_default() as other:
        x = cc.Variable(np.zeros(2), name="x")
        y = cc.Variable(np.zeros(1), name="y")
        with Session(other) as sess:
            optim.Saver({"first": x, "second": y}).restore(sess, renamed)
            assert np.array_equal(sess.run(x), [1.0, 2.0]) and np.array_equal(sess.run(y), [3.0])
            with pytest.raises(CheckpointError, match=r"'first' \(graph variable 'x'\)"):
                optim.Saver({"first": x}).restore(sess, only_a)
    with Session(graph) as sess:
        sess.load_variable(a, np.zeros(2))
        optim.Saver([a]).restore(sess, everything)  # entries not in var_list ("b") are ignored
        assert np.array_equal(sess.run(a), [1.0, 2.0])
        with pytest.raises(ValueError, match="two variables"):
            optim.Saver([a, a])
        with pytest.raises(TypeError, match="not a Variable"):
            optim.Saver([a, a + 1.0])
    with cc.Graph().as_default(), pytest.raises(ValueError, match="no variables"):
        optim.Saver()


def test_save_arguments(graph, tmp_path) -> None:
    w = cc.Variable(np.zeros(2), name="w")
    saver = optim.Saver([w])
    with Session(graph) as sess:
        path = saver.save(sess, str(tmp_path / "sub" / "m"), global_step=np.int64(3))
        assert path == str(tmp_path / "sub" / "m-3")
        assert optim.latest_checkpoint(str(tmp_path / "sub")) == str(tmp_path / "sub" / "m-3")
        with pytest.raises(TypeError, match="global_step"):
            saver.save(sess, str(tmp_path / "m"), global_step=1.5)
        with pytest.raises(ValueError, match="directory"):
            saver.save(sess, str(tmp_path))


# -- (7) a file records its own name and step; restore refuses another checkpoint's file ----------

@pytest.mark.parametrize("target", TARGETS)
def test_file_replaced_by_another_checkpoint_is_refused(graph, tmp_path, target) -> None:
    w = cc.Variable(np.zeros(3), name="w")
    step = optim.get_or_create_global_step()
    bump = cc.group(cc.assign_add(w, np.ones(3)), cc.assign_add(step, 1))
    saver = optim.Saver(max_to_keep=None)
    with Session(graph, target=target) as sess:
        sess.run(bump)
        first = saver.save(sess, str(tmp_path / "model"), global_step=step)
        sess.run(bump)
        second = saver.save(sess, str(tmp_path / "model"), global_step=step)
        unnumbered = saver.save(sess, str(tmp_path / "plain"))
        metadata = _metadata(first)
        assert (metadata["graphgrad.name"], metadata["graphgrad.global_step"]) == ("model-1", "1")
        metadata = _metadata(unnumbered)
        assert (metadata["graphgrad.name"], metadata["graphgrad.global_step"]) == ("plain", "null")

        shutil.copyfile(second, first)         # model-1 now holds step 2's bytes
        sess.load_variable(w, np.full(3, -1.0))
        expected = (re.escape(repr(first)) + r" holds checkpoint 'model-2' \(global step 2\), but "
                    r"checkpoint 'model-1' was asked for")
        with pytest.raises(CheckpointError, match=expected):
            saver.restore(sess, first)
        os.replace(unnumbered, tmp_path / "renamed")
        with pytest.raises(CheckpointError, match=r"holds checkpoint 'plain' \(no global step\), "
                                                  r"but checkpoint 'renamed' was asked for"):
            saver.restore(sess, str(tmp_path / "renamed"))
        assert np.array_equal(sess.run(w), np.full(3, -1.0))   # nothing was loaded
        saver.restore(sess, second)
        assert np.array_equal(sess.run(w), np.full(3, 2.0)) and int(sess.run(step)) == 2


@pytest.mark.parametrize("target", TARGETS)
def test_version_1_files_are_read_and_unknown_versions_refused(graph, tmp_path, target) -> None:
    variables = _legacy_variables()
    saver = optim.Saver()
    with Session(graph, target=target) as sess:
        path = _legacy_copy(tmp_path)
        header, _ = _split_checkpoint(path)
        assert (header["name"], header["global_step"], header["version"]) == ("legacy-3", 3, 2)
        old = {key: value for key, value in header.items() if key not in ("name", "global_step")}
        _rewrite_header(path, {**old, "version": 1})       # as graphgrad wrote it before names
        saver.restore(sess, path)
        for name, value in _values(sess, variables).items():
            assert np.array_equal(value, LEGACY_VALUES[name]), name
        _rewrite_header(path, {**header, "version": 3})
        with pytest.raises(CheckpointError, match=re.escape(repr(path)) + ".*version 3.*reads"):
            saver.restore(sess, path)


LEGACY_BYTE_DAMAGE = {
    "flip-data": lambda content: content[:-7] + bytes([content[-7] ^ 0x10]) + content[-6:],
    "flip-header": lambda content: content[:30] + bytes([content[30] ^ 0x01]) + content[31:],
    "truncate-data": lambda content: content[:-9],
    "truncate-header": lambda content: content[:25],
    "truncate-magic": lambda content: content[:5],
    "appended": lambda content: content + b"\0" * 8,
}


@pytest.mark.parametrize("damage", sorted(LEGACY_BYTE_DAMAGE))
def test_damaged_file_in_earlier_format_is_refused(graph, tmp_path, damage) -> None:
    _legacy_variables()
    path = _legacy_copy(tmp_path)
    with open(path, "rb") as file:
        content = file.read()
    with open(path, "wb") as file:
        file.write(LEGACY_BYTE_DAMAGE[damage](content))
    with Session(graph) as sess:
        with pytest.raises(CheckpointError, match=re.escape(repr(path)) + " is damaged"):
            optim.Saver().restore(sess, path)


# -- (8) an unreadable index is a CheckpointError naming it ------------------------------------------

def test_unreadable_index_names_the_file(tmp_path) -> None:
    index = tmp_path / "checkpoint"
    index.write_bytes(b"\x89PNG\r\n\x1a\n\xff\xfe\x00\x01")
    with pytest.raises(CheckpointError, match=re.escape(repr(str(index))) + ".*not UTF-8"):
        optim.latest_checkpoint(str(tmp_path))
    index.unlink()
    index.mkdir()
    with pytest.raises(CheckpointError, match=re.escape(repr(str(index))) + " is a directory"):
        optim.latest_checkpoint(str(tmp_path))
    a_file = tmp_path / "model-3"
    a_file.write_bytes(b"")
    with pytest.raises(CheckpointError, match=re.escape(repr(str(a_file))) + " is not a directory"):
        optim.latest_checkpoint(str(a_file))
    with pytest.raises(CheckpointError, match="cannot read checkpoint index.*null"):
        optim.latest_checkpoint(str(tmp_path) + "\0")


# -- (9) graphgrad's earlier format: damaged headers with valid checksums are refused ----------

def _damage_entry(**fields):
    def damage(header: dict) -> dict:
        header["variables"][0].update(fields)
        return header
    return damage


HEADER_DAMAGE = {
    "shape-infinite": _damage_entry(shape=[float("inf")]),
    "shape-huge-float": _damage_entry(shape=[1e300]),
    "shape-huge-int": _damage_entry(shape=[10 ** 30]),
    "shape-negative": _damage_entry(shape=[-50]),
    "shape-fraction": _damage_entry(shape=[50.5]),
    "shape-not-a-list": _damage_entry(shape="50"),
    "shape-product-mismatch": _damage_entry(shape=[7, 7]),
    "shape-too-many-dimensions": _damage_entry(shape=[6] + [1] * 70),   # 6 float32: its nbytes
    "dtype-unknown": _damage_entry(dtype="nonsense"),
    "dtype-object": _damage_entry(dtype="|O"),
    "dtype-big-endian": _damage_entry(dtype=">f8"),
    "offset-infinite": _damage_entry(offset=float("inf")),
    "nbytes-negative": _damage_entry(nbytes=-400),
    "crc-not-a-number": _damage_entry(crc32="0"),
    "listed-twice": lambda header: {**header, "variables": header["variables"] * 2},
}
FILE_DAMAGE = {
    "data-nbytes-infinite": lambda header: {**header, "data_nbytes": float("inf")},
    "version-true": lambda header: {**header, "version": True},
    "name-not-a-string": lambda header: {**header, "name": 5},
    "step-fraction": lambda header: {**header, "global_step": 1.5},
    "variables-not-a-list": lambda header: {**header, "variables": {"w": header["variables"][0]}},
    "not-an-object": lambda header: [header],
    "deeply-nested": lambda header: b"[" * 100000 + b"]" * 100000,
}


@pytest.mark.parametrize("target", TARGETS)
@pytest.mark.parametrize("damage", sorted(HEADER_DAMAGE) + sorted(FILE_DAMAGE))
def test_checksummed_but_malformed_header_is_refused(graph, tmp_path, target, damage) -> None:
    variables = _legacy_variables()
    saver = optim.Saver()
    with Session(graph, target=target) as sess:
        path = _legacy_copy(tmp_path)
        header, _ = _split_checkpoint(path)
        _rewrite_header(path, {**HEADER_DAMAGE, **FILE_DAMAGE}[damage](header))
        names = re.escape(repr(path)) + (".*'dense/kernel'" if damage in HEADER_DAMAGE else "")
        with pytest.raises(CheckpointError, match=names):
            saver.restore(sess, path)
        for value in _values(sess, variables).values():
            assert not value.any()             # nothing was loaded


# -- (10) a save removes the temporaries that killed saves of its prefix left behind -----------------

@pytest.mark.parametrize("target", TARGETS)
def test_save_removes_only_stale_temporaries_of_its_prefix(graph, tmp_path, target) -> None:
    w = cc.Variable(np.ones(2), name="w")
    finished = subprocess.Popen([sys.executable, "-c", "pass"])
    finished.wait()
    own, dead, running = os.getpid(), finished.pid, os.getppid()
    long_ago = 1_000_000_000                  # 2001: before this process started
    stale = [f".model-3.tmp-{own}-0123abcd", f".model.tmp-{dead}-89abcdef",
             f".checkpoint.tmp-{dead}-00c0ffee"]
    kept_old = [f".model-4.tmp-{running}-11111111",     # its writer still runs
                f".model-best.tmp-{dead}-22222222",     # another prefix
                f".other-3.tmp-{dead}-33333333", f"model-3.tmp-{dead}-44444444",
                f".model-3.tmp-{dead}-not-hex", f".model-3.tmp-{dead}-55555555.bak"]
    fresh = [f".model-5.tmp-{own}-66666666", f".model-6.tmp-{dead}-77777777"]  # may be being written
    for name in stale + kept_old + fresh:
        (tmp_path / name).write_bytes(b"partial")
    for name in stale + kept_old:
        os.utime(tmp_path / name, (long_ago, long_ago))
    with Session(graph, target=target) as sess:
        path = optim.Saver([w]).save(sess, str(tmp_path / "model"), global_step=7)
    assert sorted(os.listdir(tmp_path)) == sorted(["checkpoint", "model-7", *kept_old, *fresh])
    assert optim.latest_checkpoint(str(tmp_path)) == path


def test_max_to_keep_deletes_the_file_it_wrote_after_a_chdir(graph, tmp_path, monkeypatch) -> None:
    """Checkpoints are remembered by absolute path: after a chdir, a relative save_path names
    another directory, and the old checkpoint deleted is still the one this Saver wrote."""
    for run in ("run1", "run2"):
        (tmp_path / run / "ckpt").mkdir(parents=True)
    v = cc.Variable(np.zeros(2, "float32"), name="v")
    saver = optim.Saver([v], max_to_keep=1)
    with Session(graph) as sess:
        monkeypatch.chdir(tmp_path / "run1")
        saver.save(sess, "ckpt/model", global_step=1)
        monkeypatch.chdir(tmp_path / "run2")
        optim.Saver([v]).save(sess, "ckpt/model", global_step=1)      # another Saver's file
        saver.save(sess, "ckpt/model", global_step=2)
    assert sorted(os.listdir(tmp_path / "run1" / "ckpt")) == ["checkpoint"]
    assert sorted(os.listdir(tmp_path / "run2" / "ckpt")) == ["checkpoint", "model-1", "model-2"]
    assert saver.last_checkpoints == [str(tmp_path / "run2" / "ckpt" / "model-2")]


@pytest.mark.parametrize("save_path, error, pattern", [
    ("", ValueError, "save_path '' names no file"),
    ("newdir/", ValueError, "save_path 'newdir/' names no file"),
    ("/dev/null/model", OSError, "cannot write the checkpoint '/dev/null/model'"),
])
def test_a_checkpoint_that_cannot_be_written_is_named_in_the_error(graph, save_path, error, pattern) -> None:
    v = cc.Variable(np.zeros(2, "float32"), name="v")
    with Session(graph) as sess, pytest.raises(error, match=pattern) as raised:
        optim.Saver([v]).save(sess, save_path)
    assert f"(at {__file__}:" in str(raised.value)


@pytest.mark.parametrize("prefix, latest_filename", [("checkpoint", None), ("model", "model")])
def test_a_checkpoint_named_as_the_index_is_refused_before_anything_is_written(graph, tmp_path, prefix,
                                                                            latest_filename) -> None:
    """The index would overwrite such a checkpoint as soon as it was written (the weights lost);
    with ``write_state=False`` no index is written and the name is fine."""
    v = cc.Variable(np.arange(3, dtype="float32"), name="v")
    with Session(graph) as sess:
        with pytest.raises(ValueError, match="would have the name of the directory's index file") as raised:
            optim.Saver([v]).save(sess, str(tmp_path / prefix), latest_filename=latest_filename)
        assert f"(at {__file__}:" in str(raised.value)
        assert os.listdir(tmp_path) == []
        path = optim.Saver([v]).save(sess, str(tmp_path / prefix), write_state=False)
        sess.run(v.assign([7.0, 7.0, 7.0]))
        optim.Saver([v]).restore(sess, path)
        np.testing.assert_array_equal(sess.run(v), [0.0, 1.0, 2.0])


def test_tf1_save_options_index_name_state_and_kept_hours(graph, tmp_path) -> None:
    """TF1's Saver and save arguments: ``latest_filename`` names the index (read back by
    ``latest_checkpoint`` and ``get_checkpoint_state``), ``write_state=False`` leaves it alone, and
    ``keep_checkpoint_every_n_hours`` keeps checkpoints out of ``max_to_keep``'s deletions."""
    v = cc.Variable(np.zeros(2, "float32"), name="v")
    with Session(graph) as sess:
        saver = optim.Saver([v], max_to_keep=1, name="mine", sharded=False)
        first = saver.save(sess, str(tmp_path / "a" / "m"), global_step=1, latest_filename="index",
                           write_meta_graph=False)
        assert optim.latest_checkpoint(str(tmp_path / "a"), latest_filename="index") == first
        assert optim.latest_checkpoint(str(tmp_path / "a")) is None          # no file "checkpoint"
        second = saver.save(sess, str(tmp_path / "a" / "m"), global_step=2, latest_filename="index",
                            write_state=False)
        state = optim.get_checkpoint_state(str(tmp_path / "a"), latest_filename="index")
        assert state.model_checkpoint_path == first and state.all_model_checkpoint_paths == [first]
        # TF1 records and deletes nothing without write_state: the index's checkpoint is still there.
        assert os.path.isfile(first) and os.path.isfile(second) and saver.last_checkpoints == [first]
        hourly = optim.Saver([v], max_to_keep=1, keep_checkpoint_every_n_hours=1e-12)   # every save is due
        for step in range(3):
            hourly.save(sess, str(tmp_path / "b" / "m"), global_step=step)
        daily = optim.Saver([v], max_to_keep=1)
        for step in range(3):
            daily.save(sess, str(tmp_path / "c" / "m"), global_step=step)
    assert sorted(os.listdir(tmp_path / "b")) == ["checkpoint", "m-0", "m-1", "m-2"]
    assert sorted(os.listdir(tmp_path / "c")) == ["checkpoint", "m-2"]


def test_restore_is_seen_whole_by_steps_on_other_threads(graph, tmp_path) -> None:
    """Every step, save and restore treats A and B together, so no run may see them differ; a
    restore used to load one variable at a time, and a step between the two loads left them
    apart for good."""
    import threading
    a = cc.Variable(np.full(1000, 100.0, "float32"), name="A")
    b = cc.Variable(np.full(1000, 100.0, "float32"), name="B")
    step = cc.group(cc.assign_add(a, np.ones(1000, "float32")), cc.assign_add(b, np.ones(1000, "float32")))
    apart = cc.reduce_max(cc.abs(a - b))
    seen: list[float] = []
    stop = threading.Event()
    with Session(graph) as sess:
        saver = optim.Saver([a, b])
        path = saver.save(sess, str(tmp_path / "ckpt"))

        def train() -> None:
            while not stop.is_set():
                sess.run(step)

        def read() -> None:
            while not stop.is_set():
                seen.append(float(sess.run(apart)))
        threads = [threading.Thread(target=train), threading.Thread(target=read)]
        for thread in threads:
            thread.start()
        try:
            for _ in range(150):
                saver.restore(sess, path)
        finally:
            stop.set()
            for thread in threads:
                thread.join()
        assert float(sess.run(apart)) == 0.0
    assert seen and max(seen) == 0.0


def test_keep_checkpoint_every_n_hours_keeps_one_per_period_on_a_fixed_grid(graph, tmp_path, monkeypatch) -> None:
    """TF1 moves the next due time by one period per checkpoint kept; it restarted from the kept
    checkpoint's own time, keeping one per ~100 minutes for saves every 50 and a 1 hour period.
    A save that fails keeps the bookkeeping as it was (the checkpoint due was then deleted)."""
    import optim.saver as saver_module
    clock = [1_000_000.0]
    monkeypatch.setattr(saver_module.time, "time", lambda: clock[0])
    v = cc.Variable(np.float32(1.0), name="v")
    saver = optim.Saver([v], max_to_keep=1, keep_checkpoint_every_n_hours=1.0)
    with Session(graph) as sess:
        for minute in range(0, 601, 50):
            clock[0] = 1_000_000.0 + minute * 60 + 1
            if minute == 450:   # a full disk: nothing written, nothing forgotten
                monkeypatch.setattr(saver_module.os, "replace", _raise_no_space)
                with pytest.raises(OSError):
                    saver.save(sess, str(tmp_path / "m"), global_step=minute)
                monkeypatch.undo()
                monkeypatch.setattr(saver_module.time, "time", lambda: clock[0])
                continue
            saver.save(sess, str(tmp_path / "m"), global_step=minute)
    kept = sorted(int(name.split("-")[1]) for name in os.listdir(tmp_path) if name.startswith("m-"))
    assert kept == [100, 150, 200, 250, 300, 400, 500, 550, 600]


def _raise_no_space(*_: object) -> None:
    raise OSError(28, "No space left on device")


def test_saves_from_two_threads_keep_max_to_keep_files(graph, tmp_path) -> None:
    # Each save chooses what to keep from the others' checkpoints too, so none is left behind.
    import threading
    cc.Variable(np.ones(200_000, "float32"), name="w")
    saver = optim.Saver(max_to_keep=2)
    with Session(graph) as sess:
        def save_many(first: int) -> None:
            for number in range(first, first + 20):
                saver.save(sess, str(tmp_path / "m"), global_step=number)
        threads = [threading.Thread(target=save_many, args=(first,)) for first in (0, 1000)]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
    kept = sorted(name for name in os.listdir(tmp_path) if name.startswith("m-"))
    assert len(kept) == 2 and sorted(os.path.basename(path) for path in saver.last_checkpoints) == kept
    state = optim.get_checkpoint_state(str(tmp_path))
    assert sorted(state.all_model_checkpoint_paths) == sorted(str(tmp_path / name) for name in kept)


def test_save_paths_with_dot_dot_write_the_index_beside_the_checkpoint(graph, tmp_path) -> None:
    cc.Variable(np.arange(3.0), name="w")
    saver = optim.Saver()
    with Session(graph) as sess:
        # A directory that does not exist yet, left again with "..": the file lands in "f".
        path = saver.save(sess, str(tmp_path / "f" / "sub" / ".." / "m"), global_step=1)
        assert path == str(tmp_path / "f" / "sub" / ".." / "m-1")
        assert optim.latest_checkpoint(str(tmp_path / "f")) == str(tmp_path / "f" / "m-1")
        saver.restore(sess, path)   # the path returned opens
        # A symbolic link followed by "..": the OS goes up from the link's target.
        (tmp_path / "real" / "deep").mkdir(parents=True)
        os.symlink(tmp_path / "real" / "deep", tmp_path / "link")
        saver.save(sess, str(tmp_path / "link" / ".." / "m"), global_step=2)
        assert optim.latest_checkpoint(str(tmp_path / "real")) == str(tmp_path / "real" / "m-2")
        assert not (tmp_path / "checkpoint").exists()
        saver.restore(sess, optim.latest_checkpoint(str(tmp_path / "real")))


def test_a_saver_of_another_graph_names_the_variable(tmp_path) -> None:
    other = cc.Graph()
    with other.as_default():
        cc.Variable(np.zeros(2), name="w")
        saver = optim.Saver()
    graph = cc.Graph()
    with graph.as_default():
        cc.Variable(np.zeros(2), name="w")
    with Session(graph) as sess:
        for call in (lambda: saver.save(sess, str(tmp_path / "m")), lambda: saver.restore(sess, str(tmp_path / "m"))):
            with pytest.raises(cc.GraphMismatchError, match=r"variable 'w' \(made at .*test_saver\.py:\d+\) belongs "
                                                            r"to another graph than the session's"):
                call()

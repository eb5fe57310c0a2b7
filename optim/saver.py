"""Checkpoints in TensorFlow 1.x style: ``Saver`` writes and restores variables, and a small text
index named "checkpoint" in the checkpoint directory records the latest files.

One checkpoint is one safetensors file (written and parsed by the ``safetensors`` package, no
pickle): the variables under their names, with their own dtypes and shapes, so that
``safetensors.numpy.load_file`` and ``safetensors.torch.load_file`` read it without graphgrad. The
path is the file: ``save(sess, "dir/model", global_step=20)`` writes "dir/model-20", with no
extension added. The header's ``__metadata__`` (string values only) holds graphgrad's checks::

    graphgrad.version       "3"
    graphgrad.name          the basename the file was saved under, e.g. "model-20"
    graphgrad.global_step   JSON: the global step, or null without one
    graphgrad.crc32         JSON: {variable name: CRC-32 of its little-endian C-order bytes}
    graphgrad.header_crc32  CRC-32 of the other metadata and every variable's dtype and shape

A restore refuses a file whose recorded name is not the basename it was asked for (a file replaced
by or renamed from another checkpoint), and a damaged one. A safetensors file with no
"graphgrad.*" metadata (one written by PyTorch, say) is restored by variable name, without those
checks. Files in graphgrad's earlier format (at the end of this text) are still read.

Every file is written to a temporary name in the same directory, flushed, fsync'ed and then
renamed over the final name (and the directory fsync'ed), so a save that dies midway leaves the
previous checkpoint and index as they were. The temporaries such a save leaves behind are removed
by a later save with the same prefix once they are stale: older than the process that saves, and
not written by a process still running on this host. Reading checks the format, the checksums,
the sizes and every metadata field, and refuses a damaged file with a ``CheckpointError`` naming
it.

graphgrad's earlier format, versions 1 and 2, read but no longer written::

    magic      8 bytes   b"GGCKPT\\x00\\x01"
    length     uint64    little-endian byte length of the header
    crc        uint32    little-endian CRC-32 of the header
    header     JSON      {"format", "version", "name", "global_step", "data_nbytes",
                          "variables": [{"name", "dtype", "shape", "offset", "nbytes", "crc32"}, ...]}
    padding    zeros up to a multiple of 64 bytes
    data       each variable's bytes, C order, little-endian, at its offset (64-byte aligned)

Version 1 files record neither "name" nor "global_step".
"""
from __future__ import annotations

import contextlib
import json
import math
import os
import re
import secrets
import struct
import threading
import time
import zlib
from typing import Any, Iterable, Mapping, NamedTuple, Sequence

import numpy as np
import safetensors
import safetensors.numpy

import compiler as cc
from compiler.errors import DTypeError, GraphgradError, GraphMismatchError, ShapeError
from compiler.graph import Tensor, located
from compiler.ops.random_seed import get_random_counter

from .distributed import world

INDEX_FILENAME = "checkpoint"
VERSION = 3                              # 3: safetensors with graphgrad's metadata
VERSION_KEY = "graphgrad.version"
NAME_KEY = "graphgrad.name"
GLOBAL_STEP_KEY = "graphgrad.global_step"
CRC32_KEY = "graphgrad.crc32"
HEADER_CRC32_KEY = "graphgrad.header_crc32"
_METADATA_PREFIX = "graphgrad."
_SAFETENSORS_RESERVED = "__metadata__"  # the header key of the metadata; no tensor may take it
_HEADER_LENGTH = struct.Struct("<Q")     # a safetensors file starts with its header's byte length

LEGACY_MAGIC = b"GGCKPT\x00\x01"
LEGACY_FORMAT = "graphgrad-checkpoint"
_LEGACY_VERSIONS = (1, 2)               # 2: the header records "name" and "global_step"
ALIGNMENT = 64
_PREFIX = struct.Struct("<QI")           # header length, header CRC-32
_DATA_KINDS = "biufc"                    # dtypes a checkpoint may hold (never objects)


class CheckpointError(GraphgradError, ValueError):
    """A checkpoint that cannot be used: missing, damaged, truncated, or lacking a variable."""


def _align(offset: int) -> int:
    return (offset + ALIGNMENT - 1) // ALIGNMENT * ALIGNMENT


def _little_endian(dtype: np.dtype) -> np.dtype:
    return dtype.newbyteorder("<") if dtype.byteorder not in ("|", "<") else dtype


# -- durable writes ------------------------------------------------------------------------------

def _fsync_directory(directory: str) -> None:
    """Make a rename in ``directory`` durable (a no-op where directories cannot be opened)."""
    try:
        fd = os.open(directory, os.O_RDONLY)
    except OSError:
        return
    try:
        os.fsync(fd)
    except OSError:
        pass
    finally:
        os.close(fd)


def _temporary_path(path: str) -> str:
    """A fresh hidden name next to ``path`` for writing it: ".NAME.tmp-PID-RANDOM"."""
    directory, name = os.path.split(os.path.abspath(path))
    return os.path.join(directory, f".{name}.tmp-{os.getpid()}-{secrets.token_hex(4)}")


def _temporary_pattern(name_pattern: str) -> re.Pattern[str]:
    """Matches the temporaries of ``_temporary_path`` for a file name matching ``name_pattern``
    (a regular expression); group "pid" is the writing process."""
    return re.compile(rf"\.(?:{name_pattern})\.tmp-(?P<pid>[0-9]+)-[0-9a-f]{{8}}")


# Temporaries this process is writing now, which a cleanup must never take for stale ones.
_ACTIVE_TEMPORARIES: set[str] = set()
_ACTIVE_LOCK = threading.Lock()


def _write_atomically(path: str, chunks: Iterable[Any]) -> None:
    """Write ``chunks`` (bytes-like) to ``path`` so that ``path`` holds either its old content or
    all of the new one, whatever happens midway."""
    directory = os.path.dirname(os.path.abspath(path))
    temporary = _temporary_path(path)
    with _ACTIVE_LOCK:
        _ACTIVE_TEMPORARIES.add(temporary)
    try:
        _write_and_rename(temporary, path, chunks)
    finally:
        with _ACTIVE_LOCK:
            _ACTIVE_TEMPORARIES.discard(temporary)
    _fsync_directory(directory)


def _write_and_rename(temporary: str, path: str, chunks: Iterable[Any]) -> None:
    """Create ``temporary``, write ``chunks`` to it durably and rename it to ``path``; on any
    failure after creating it, delete it."""
    fd = os.open(temporary, os.O_WRONLY | os.O_CREAT | os.O_EXCL | getattr(os, "O_BINARY", 0), 0o666)
    try:
        try:
            for chunk in chunks:
                view = memoryview(chunk).cast("B")
                while view:
                    written = os.write(fd, view)
                    view = view[written:]
            os.fsync(fd)
        finally:
            os.close(fd)
        os.replace(temporary, path)
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(temporary)
        raise


def _process_start_time() -> float:
    """When this process started, in seconds since the epoch: from /proc where there is one, and
    never later than the import of this module."""
    imported = time.time()
    try:
        with open("/proc/self/stat", "rb") as file:
            # Field 22 is the start time in clock ticks after boot; the command name (field 2)
            # may hold spaces, so count from its closing parenthesis.
            start_ticks = int(file.read().rsplit(b")", 1)[1].split()[19])
        with open("/proc/stat", "rb") as file:
            boot_time = next(int(line.split()[1]) for line in file if line.startswith(b"btime "))
        return min(imported, boot_time + start_ticks / os.sysconf("SC_CLK_TCK"))
    except (OSError, ValueError, IndexError, StopIteration):
        return imported


_PROCESS_START = _process_start_time()


def _may_be_running(pid: int) -> bool:
    """False only when no process ``pid`` runs on this host (where that can be told)."""
    if os.name != "posix":
        return False                      # unknowable here; an open file cannot be deleted there anyway
    try:
        os.kill(pid, 0)                   # signal 0: a check for existence, nothing is sent
    except ProcessLookupError:
        return False
    except (OSError, OverflowError, ValueError):
        return True
    return True


def _remove_stale_temporaries(directory: str, pattern: re.Pattern[str]) -> None:
    """Delete the files in ``directory`` named by ``pattern`` that a save killed midway left
    behind: older than this process, not being written by it, and whose writing process (the pid
    in the name) no longer runs. Best effort: a file that cannot be examined or deleted is kept."""
    try:
        entries = list(os.scandir(directory))
    except OSError:
        return
    own_pid = os.getpid()
    for entry in entries:
        match = pattern.fullmatch(entry.name)
        if match is None:
            continue
        path = os.path.join(directory, entry.name)
        with _ACTIVE_LOCK:
            if path in _ACTIVE_TEMPORARIES:
                continue
        try:
            if not entry.is_file(follow_symlinks=False):
                continue
            if entry.stat(follow_symlinks=False).st_mtime >= _PROCESS_START:
                continue                  # possibly a live writer's, even one of another host
            writer = int(match.group("pid"))
            if writer != own_pid and _may_be_running(writer):
                continue
            os.unlink(path)
        except OSError:
            continue


# -- the checkpoint file: safetensors with graphgrad's metadata -----------------------------------

def _data_crc32(array: np.ndarray) -> int:
    """CRC-32 of a C-contiguous little-endian array's bytes."""
    return zlib.crc32(array.reshape(-1).view(np.uint8))


def _header_crc32(metadata: Mapping[str, str], arrays: Mapping[str, np.ndarray]) -> int:
    """CRC-32 of the metadata other than the header checksum itself, and of every array's dtype
    and shape (which safetensors does not checksum: a flipped "F64" may read as "I64")."""
    description = {"metadata": {key: value for key, value in metadata.items() if key != HEADER_CRC32_KEY},
                   "tensors": {name: [array.dtype.str, list(array.shape)] for name, array in arrays.items()}}
    return zlib.crc32(json.dumps(description, sort_keys=True).encode("utf-8"))


def _write_checkpoint(path: str, values: Mapping[str, np.ndarray], global_step: int | None) -> None:
    """Write ``values`` to the safetensors file ``path``, recording its basename, global step and
    checksums in the metadata."""
    arrays = {}
    for name, value in values.items():
        array = np.asarray(value)
        arrays[name] = np.asarray(array, dtype=_little_endian(array.dtype), order="C")
    metadata = {VERSION_KEY: str(VERSION), NAME_KEY: os.path.basename(path),
                GLOBAL_STEP_KEY: json.dumps(global_step),
                CRC32_KEY: json.dumps({name: _data_crc32(array) for name, array in arrays.items()},
                                      sort_keys=True)}
    metadata[HEADER_CRC32_KEY] = str(_header_crc32(metadata, arrays))
    _write_atomically(path, [safetensors.numpy.save(arrays, metadata=metadata)])


def _whole_number(value: Any, what: str) -> int:
    """``value`` if it is a non-negative JSON integer (not a float, not a bool), else ValueError."""
    if isinstance(value, bool) or not isinstance(value, int) or value < 0:
        raise ValueError(f"{what} is {value!r}, not a non-negative integer")
    return value


class _Checkpoint(NamedTuple):
    name: str | None                     # None where the file does not record it
    global_step: int | None
    arrays: dict[str, np.ndarray]        # read-only


def _read_file(path: str) -> bytes:
    try:
        with open(path, "rb") as file:
            return file.read()
    except (FileNotFoundError, NotADirectoryError):
        raise CheckpointError(f"no checkpoint file at {path!r}") from None
    except IsADirectoryError:
        raise CheckpointError(f"{path!r} is a directory, not a checkpoint file; "
                              "use latest_checkpoint(directory) to find one") from None
    except (OSError, ValueError) as exc:
        raise CheckpointError(f"cannot read checkpoint file {path!r}: {exc}") from exc


def _damaged(path: str, reason: str) -> CheckpointError:
    return CheckpointError(f"checkpoint file {path!r} is damaged: {reason}; refusing to load it")


def _resolved(path: str) -> str:
    """``path`` with its directory resolved as the OS does (symbolic links, then ".."), absolute:
    how a Saver names the checkpoints it keeps."""
    return os.path.join(os.path.realpath(os.path.dirname(path) or os.curdir), os.path.basename(path))


def _refuse_other_name(path: str, name: str, global_step: int | None) -> None:
    """Raise if ``name``, recorded in the file ``path``, is not its basename."""
    requested = os.path.basename(path)
    if name != requested:
        step = "no global step" if global_step is None else f"global step {global_step}"
        raise CheckpointError(f"checkpoint file {path!r} holds checkpoint {name!r} ({step}), but "
                              f"checkpoint {requested!r} was asked for; the file was replaced by or "
                              "renamed from another checkpoint, refusing to load it")


def _load_checkpoint(path: str) -> _Checkpoint:
    """Read and check the checkpoint file ``path``, in either format; a file that records another
    name than the basename of ``path`` is refused."""
    content = _read_file(path)
    if not content:
        raise _damaged(path, "it is empty")
    if content.startswith(LEGACY_MAGIC) or LEGACY_MAGIC.startswith(content):
        return _load_legacy_checkpoint(path, content)
    return _load_safetensors_checkpoint(path, content)


class Unloadable(NamedTuple):
    """A tensor of a checkpoint file in a dtype numpy has no type for (bfloat16, float8): the
    other tensors of the file load; restoring or loading this one is an error that names it."""

    dtype: str
    shape: tuple[int, ...]


_SAFETENSORS_DTYPES = {"F64": "<f8", "F32": "<f4", "F16": "<f2", "I64": "<i8", "I32": "<i4", "I16": "<i2",
                       "I8": "i1", "U8": "u1", "U16": "<u2", "U32": "<u4", "U64": "<u8", "BOOL": "?"}


def _arrays_beside_unloadable(path: str, content: bytes) -> dict[str, Any]:
    """The tensors of a safetensors file (already validated by the library) read from its header,
    each that numpy cannot hold as an ``Unloadable``."""
    (header_length,) = _HEADER_LENGTH.unpack_from(content)
    start = _HEADER_LENGTH.size + header_length
    header = json.loads(content[_HEADER_LENGTH.size:start])
    arrays: dict[str, Any] = {}
    for name, entry in header.items():
        if name == _SAFETENSORS_RESERVED:
            continue
        shape, (begin, end) = tuple(entry["shape"]), entry["data_offsets"]
        dtype = _SAFETENSORS_DTYPES.get(entry["dtype"])
        arrays[name] = (Unloadable(entry["dtype"], shape) if dtype is None else
                        np.frombuffer(content, dtype=dtype, count=int(np.prod(shape, dtype=np.int64)),
                                      offset=start + begin).reshape(shape))
    return arrays


def _refuse_unloadable(path: str, name: str, value: Any) -> None:
    if isinstance(value, Unloadable):
        raise CheckpointError(f"checkpoint file {path!r} holds tensor {name!r} as {value.dtype} {value.shape}, a "
                              "dtype numpy (and so graphgrad) has no type for; convert it where it was written")


def _load_safetensors_checkpoint(path: str, content: bytes) -> _Checkpoint:
    try:
        arrays = safetensors.numpy.load(content)
    except safetensors.SafetensorError as exc:
        header_start = _HEADER_LENGTH.size
        if content[header_start:header_start + 1] != b"{":
            raise CheckpointError(f"{path!r} is not a checkpoint file: neither safetensors nor "
                                  f"graphgrad's earlier format ({exc})") from None
        raise _damaged(path, f"not a valid safetensors file ({exc})") from None
    except KeyError:                             # a dtype numpy has no type for, e.g. bfloat16
        arrays = _arrays_beside_unloadable(path, content)
    # The library has checked the header; it gives the tensors but not the metadata.
    (header_length,) = _HEADER_LENGTH.unpack_from(content)
    try:
        header = json.loads(content[_HEADER_LENGTH.size:_HEADER_LENGTH.size + header_length])
    except (ValueError, RecursionError) as exc:
        raise _damaged(path, f"unreadable header ({type(exc).__name__}: {exc})") from None
    metadata: dict[str, str] = header.get(_SAFETENSORS_RESERVED) or {}
    if not any(key.startswith(_METADATA_PREFIX) for key in metadata):
        return _Checkpoint(None, None, arrays)   # a plain safetensors file, written elsewhere
    version = metadata.get(VERSION_KEY)
    if version is None:
        raise _damaged(path, f"its metadata lacks {VERSION_KEY!r}")
    if version != str(VERSION):
        raise CheckpointError(f"checkpoint file {path!r} has graphgrad format version {version!r}; "
                              f"this graphgrad reads safetensors checkpoints of version {VERSION}")
    try:
        name = metadata[NAME_KEY]
        if not name:
            raise ValueError(f"{NAME_KEY} is empty")
        global_step = json.loads(metadata[GLOBAL_STEP_KEY])
        if global_step is not None and (isinstance(global_step, bool) or not isinstance(global_step, int)):
            raise ValueError(f"its global step is {global_step!r}, not an integer or null")
        crcs = json.loads(metadata[CRC32_KEY])
        if not isinstance(crcs, dict):
            raise ValueError(f"{CRC32_KEY} is a JSON {type(crcs).__name__}, not an object")
        if set(crcs) != set(arrays):
            raise ValueError(f"{CRC32_KEY} lists {sorted(crcs)} but the file holds {sorted(arrays)}")
        for variable, crc in crcs.items():
            _whole_number(crc, f"the checksum of variable {variable!r}")
        header_crc = metadata[HEADER_CRC32_KEY]
    except (KeyError, ValueError, RecursionError) as exc:
        raise _damaged(path, f"unreadable metadata ({type(exc).__name__}: {exc})") from None
    if header_crc != str(_header_crc32(metadata, arrays)):
        raise _damaged(path, "the checksum of its metadata, dtypes and shapes does not match")
    _refuse_other_name(path, name, global_step)
    for variable, array in arrays.items():
        if _data_crc32(array) != crcs[variable]:
            raise _damaged(path, f"the checksum of variable {variable!r} does not match")
    return _Checkpoint(name, global_step, arrays)


# -- graphgrad's earlier format, read for older checkpoints -------------------------------------

def _load_legacy_checkpoint(path: str, content: bytes) -> _Checkpoint:
    """Check and read the checkpoint ``content`` of ``path``, in graphgrad's earlier format."""
    def damaged(reason: str) -> CheckpointError:
        return _damaged(path, reason)

    header_start = len(LEGACY_MAGIC) + _PREFIX.size
    if len(content) < header_start:
        raise damaged(f"truncated ({len(content)} bytes)")
    header_length, header_crc = _PREFIX.unpack_from(content, len(LEGACY_MAGIC))
    header_bytes = content[header_start:header_start + header_length]
    if len(header_bytes) != header_length:
        raise damaged(f"truncated in its header ({len(content)} bytes)")
    if zlib.crc32(header_bytes) != header_crc:
        raise damaged("the header's checksum does not match")
    try:
        header = json.loads(header_bytes.decode("utf-8"))
    except (ValueError, RecursionError) as exc:   # RecursionError: absurdly nested JSON
        raise damaged(f"unreadable header ({type(exc).__name__}: {exc})") from None
    if not isinstance(header, dict):
        raise damaged(f"its header is a JSON {type(header).__name__}, not an object")
    version = header.get("version")
    if header.get("format") != LEGACY_FORMAT or type(version) is not int or version not in _LEGACY_VERSIONS:
        raise CheckpointError(f"checkpoint file {path!r} has format {header.get('format')!r} version "
                              f"{version!r}; this graphgrad reads {LEGACY_FORMAT!r} versions "
                              f"{', '.join(map(str, _LEGACY_VERSIONS))} and safetensors files")
    name: str | None = None
    global_step: int | None = None
    try:
        if version >= 2:
            name, global_step = header["name"], header["global_step"]
            if not isinstance(name, str) or not name:
                raise ValueError(f"its name is {name!r}, not a non-empty string")
            if global_step is not None and (isinstance(global_step, bool)
                                            or not isinstance(global_step, int)):
                raise ValueError(f"its global step is {global_step!r}, not an integer or null")
        data_nbytes = _whole_number(header["data_nbytes"], "data_nbytes")
        entries = header["variables"]
        if not isinstance(entries, list):
            raise ValueError(f"variables is a JSON {type(entries).__name__}, not an array")
    except (KeyError, ValueError) as exc:
        raise damaged(f"unreadable header ({type(exc).__name__}: {exc})") from None
    if name is not None:
        _refuse_other_name(path, name, global_step)
    data_start = _align(header_start + header_length)
    if len(content) != data_start + data_nbytes:
        kind = "truncated" if len(content) < data_start + data_nbytes else "longer than its header says"
        raise damaged(f"{kind} ({len(content)} bytes, expected {data_start + data_nbytes})")
    data = memoryview(content)[data_start:]
    arrays: dict[str, np.ndarray] = {}
    for number, entry in enumerate(entries):
        label = f"variable number {number}"
        try:
            if not isinstance(entry, dict):
                raise ValueError(f"its entry is a JSON {type(entry).__name__}, not an object")
            variable = entry["name"]
            if not isinstance(variable, str) or not variable:
                raise ValueError(f"its name is {variable!r}, not a non-empty string")
            label = f"variable {variable!r}"
            if variable in arrays:
                raise ValueError("it is listed twice")
            offset = _whole_number(entry["offset"], "its offset")
            nbytes = _whole_number(entry["nbytes"], "its nbytes")
            crc = _whole_number(entry["crc32"], "its crc32")
            dtype_name = entry["dtype"]
            if not isinstance(dtype_name, str):
                raise ValueError(f"its dtype is {dtype_name!r}, not a string")
            try:
                dtype = np.dtype(dtype_name)
            except (TypeError, ValueError, OverflowError):
                raise ValueError(f"its dtype {dtype_name!r} is not a numpy dtype") from None
            if dtype.kind not in _DATA_KINDS or dtype.hasobject:
                raise ValueError(f"its dtype {dtype.str!r} is not supported")
            if dtype != _little_endian(dtype):
                raise ValueError(f"its dtype {dtype.str!r} is not little-endian")
            shape = entry["shape"]
            if not isinstance(shape, list):
                raise ValueError(f"its shape {shape!r} is not a list")
            shape = tuple(_whole_number(size, "a size in its shape") for size in shape)
            if nbytes != math.prod(shape) * dtype.itemsize:
                raise ValueError(f"its shape {shape} of {dtype.name} does not make {nbytes} bytes")
            if offset + nbytes > data_nbytes:
                raise ValueError(f"its bytes {offset}..{offset + nbytes} lie outside the data "
                                 f"({data_nbytes} bytes)")
        except (KeyError, ValueError) as exc:
            raise damaged(f"the header's entry of {label} is malformed "
                          f"({type(exc).__name__}: {exc})") from None
        chunk = data[offset:offset + nbytes]
        if zlib.crc32(chunk) != crc:
            raise damaged(f"the checksum of variable {variable!r} does not match")
        try:
            arrays[variable] = np.frombuffer(chunk, dtype=dtype).reshape(shape)
        except ValueError as exc:                # e.g. more dimensions than numpy supports
            raise damaged(f"variable {variable!r} cannot be read with shape {shape} ({exc})") from None
    return _Checkpoint(name, global_step, arrays)


def load_checkpoint(path: str | os.PathLike[str]) -> dict[str, np.ndarray]:
    """The variables in the checkpoint file at ``path``, by name, as numpy arrays: a safetensors
    file (graphgrad's own or a plain one written elsewhere) or one in graphgrad's earlier format.

    The file is checked as ``Saver.restore`` checks it: a damaged file, or one that records
    another checkpoint's name than the basename of ``path``, raises ``CheckpointError``.

    >>> import os, tempfile
    >>> import numpy as np, safetensors.numpy
    >>> path = os.path.join(tempfile.mkdtemp(), "weights")
    >>> safetensors.numpy.save_file({"w": np.eye(2, dtype="float32")}, path)
    >>> load_checkpoint(path)["w"]
    array([[1., 0.],
           [0., 1.]], dtype=float32)
    """
    arrays = _load_checkpoint(os.fspath(path)).arrays
    for name, array in arrays.items():
        _refuse_unloadable(os.fspath(path), name, array)
    return {name: array.copy() for name, array in arrays.items()}


# -- the index file -------------------------------------------------------------------------------

def _write_index(directory: str, latest: str, paths: Sequence[str], index_name: str = INDEX_FILENAME) -> None:
    def entry(path: str) -> str:
        if os.path.dirname(os.path.abspath(path)) == os.path.abspath(directory):
            path = os.path.basename(path)
        return json.dumps(path)

    lines = [f"model_checkpoint_path: {entry(latest)}"]
    lines.extend(f"all_model_checkpoint_paths: {entry(path)}" for path in paths)
    _write_atomically(os.path.join(directory, index_name), ["\n".join(lines).encode("utf-8") + b"\n"])


def _read_index(directory: str, index_name: str = INDEX_FILENAME) -> tuple[str | None, list[str]]:
    """(latest, all) checkpoint paths listed in ``directory``'s index, relative ones made absolute
    against ``directory``; (None, []) if there is no index."""
    index = os.path.join(directory, index_name)
    try:
        with open(index, encoding="utf-8") as file:
            text = file.read()
    except FileNotFoundError:
        return None, []
    except IsADirectoryError:
        raise CheckpointError(f"checkpoint index {index!r} is a directory, not an index file") from None
    except NotADirectoryError:
        raise CheckpointError(f"checkpoint directory {directory!r} is not a directory (give the "
                              "directory that holds the checkpoints and their index)") from None
    except UnicodeDecodeError as exc:
        raise CheckpointError(f"checkpoint index {index!r} is not UTF-8 text ({exc}); "
                              "it is damaged or not a graphgrad index") from None
    except (OSError, ValueError) as exc:          # ValueError: e.g. a NUL in the path
        raise CheckpointError(f"cannot read checkpoint index {index!r}: {exc}") from exc
    latest: str | None = None
    paths: list[str] = []
    for number, line in enumerate(text.splitlines(), 1):
        if not line.strip():
            continue
        key, _, value = line.partition(":")
        try:
            path = json.loads(value.strip())
            if not isinstance(path, str):
                raise ValueError("not a string")
        except ValueError:
            raise CheckpointError(f"checkpoint index {index!r}, line {number}: cannot read "
                                  f"{line!r}") from None
        path = os.path.join(directory, path)
        if key.strip() == "model_checkpoint_path":
            latest = path
        elif key.strip() == "all_model_checkpoint_paths":
            paths.append(path)
    return latest, paths


class CheckpointState(NamedTuple):
    """What a directory's checkpoint index lists (TF1's ``CheckpointState``): the newest
    checkpoint and every one kept, oldest first."""

    model_checkpoint_path: str
    all_model_checkpoint_paths: list[str]


def get_checkpoint_state(checkpoint_dir: str, latest_filename: str | None = None) -> CheckpointState | None:
    """The index of ``checkpoint_dir`` (its file "checkpoint", or ``latest_filename``), or None
    when there is none; e.g. for ``Saver.recover_last_checkpoints`` in a restarted process.

    >>> import tempfile
    >>> get_checkpoint_state(tempfile.mkdtemp()) is None
    True
    """
    latest, paths = _read_index(os.fspath(checkpoint_dir), latest_filename or INDEX_FILENAME)
    return None if latest is None else CheckpointState(latest, paths)


def latest_checkpoint(checkpoint_dir: str, latest_filename: str | None = None) -> str | None:
    """The path of the newest checkpoint that ``Saver.save`` recorded in ``checkpoint_dir`` (read
    from the index file "checkpoint" there, or ``latest_filename``), or None when there is none.

    An index that cannot be read (not text, a directory, unparsable lines) raises
    ``CheckpointError`` naming it.

    >>> import tempfile
    >>> latest_checkpoint(tempfile.mkdtemp()) is None
    True
    """
    latest, _ = _read_index(os.fspath(checkpoint_dir), latest_filename or INDEX_FILENAME)
    if latest is None or not os.path.isfile(latest):
        return None
    return latest


# -- Saver ----------------------------------------------------------------------------------------

def _variables_by_name(var_list: Any) -> dict[str, cc.Variable]:
    if var_list is None:
        var_list = cc.global_variables()
    if isinstance(var_list, Mapping):
        items = list(var_list.items())
    elif isinstance(var_list, (list, tuple)):
        items = []
        for var in var_list:
            if not isinstance(var, cc.Variable):
                raise TypeError(f"Saver: var_list holds {var!r}, which is not a Variable")
            items.append((var.op.name, var))
    else:
        raise TypeError("Saver: var_list must be None, a list of Variables, or a dict "
                        f"name -> Variable; got {type(var_list).__name__}")
    by_name: dict[str, cc.Variable] = {}
    for name, var in items:
        if not isinstance(name, str) or not name:
            raise TypeError(f"Saver: checkpoint names must be non-empty strings, got {name!r}")
        if name == _SAFETENSORS_RESERVED:
            raise ValueError(f"Saver: the name {name!r} is reserved by the safetensors format; "
                             "pass var_list as a dict to save the variable under another name")
        if not isinstance(var, cc.Variable):
            raise TypeError(f"Saver: {name!r} maps to {var!r}, which is not a Variable")
        if name in by_name:
            raise ValueError(f"Saver: two variables would be saved under the name {name!r}")
        by_name[name] = var
    graphs = {id(var.graph) for var in by_name.values()}
    if len(graphs) > 1:
        raise cc.GraphMismatchError("Saver: var_list holds variables of more than one graph")
    return by_name


class Saver:
    """Saves variables to checkpoint files and restores them (TF1's ``tf.train.Saver``).

    ``var_list``: None for every global variable of the default graph at the time the Saver is
    built (trainable variables, optimizer slots, non-slot state such as Adam's beta powers, and
    the global step), a list of Variables (saved under their op names), or a dict name ->
    Variable. ``max_to_keep``: how many of its most recent checkpoints a Saver keeps; older files
    it wrote are deleted (None or 0 keeps them all).

    On a distributed run (``mpiexec``; ``comm``, default ``optim.world()``) the ranks hold the
    same variables, so ``save`` writes on rank 0 only, and the other ranks wait until it has
    written (or failed: then they raise too, with rank 0's message) and return the same path;
    ``restore`` reads the file on every rank (the directory must be shared by the ranks, as it
    is on one machine).

    >>> import os, tempfile
    >>> import numpy as np, compiler as cc
    >>> from runtime import Session
    >>> w = cc.Variable(np.arange(3.0), name="w")
    >>> saver = Saver([w])
    >>> directory = tempfile.mkdtemp()
    >>> with Session() as sess:
    ...     path = saver.save(sess, os.path.join(directory, "model"), global_step=7)
    ...     sess.load_variable(w, np.zeros(3))
    ...     saver.restore(sess, latest_checkpoint(directory))
    ...     sess.run(w)
    array([0., 1., 2.])
    >>> os.path.basename(path)
    'model-7'
    """

    def __init__(self, var_list: Sequence[cc.Variable] | Mapping[str, cc.Variable] | None = None,
                 max_to_keep: int | None = 5, comm: Any = None, *, keep_checkpoint_every_n_hours: float = 10000.0,
                 name: str | None = None, sharded: bool = False) -> None:
        """``comm``: on a distributed run (``mpiexec``), the ranks that share the checkpoints;
        default ``optim.world()``, every rank of the job (one process alone without mpiexec).
        ``keep_checkpoint_every_n_hours`` (TF1's): one checkpoint per that many hours is kept out
        of ``max_to_keep``'s deletions. ``name`` and ``sharded`` are TF1's and change nothing:
        a checkpoint is always one file."""
        if max_to_keep is not None and (not isinstance(max_to_keep, int) or max_to_keep < 0):
            raise ValueError(f"Saver: max_to_keep must be None or a non-negative int, got {max_to_keep!r}")
        if not keep_checkpoint_every_n_hours > 0:
            raise ValueError(f"Saver: keep_checkpoint_every_n_hours must be positive, got "
                             f"{keep_checkpoint_every_n_hours!r}")
        self._keep_every = float(keep_checkpoint_every_n_hours) * 3600.0
        self._next_kept_time = time.time() + self._keep_every
        self._saved_at: dict[str, float] = {}
        self._var_list = _variables_by_name(var_list)
        if not self._var_list:
            raise ValueError("Saver: no variables to save")
        self._max_to_keep = max_to_keep
        self._last_checkpoints: list[str] = []
        self._comm = comm
        # Saves from several threads: each one's choice of what to keep and delete must see the
        # others' checkpoints, or max_to_keep leaks files.
        self._save_lock = threading.Lock()

    @property
    def last_checkpoints(self) -> list[str]:
        """The checkpoints this Saver wrote and still keeps, oldest first (absolute paths)."""
        return list(self._last_checkpoints)

    def recover_last_checkpoints(self, checkpoint_paths: Sequence[str]) -> None:
        """Adopt checkpoints written earlier (e.g. by another process), oldest first, so that
        ``max_to_keep`` counts and deletes them too. Paths that do not exist are skipped.

        >>> import tempfile
        >>> import compiler as cc
        >>> saver = Saver([cc.Variable(0.0, name="x")])
        >>> saver.recover_last_checkpoints([tempfile.mkdtemp() + "/gone-1"])
        >>> saver.last_checkpoints
        []
        """
        with self._save_lock:
            self._last_checkpoints = [_resolved(p) for p in checkpoint_paths if os.path.isfile(p)]

    def save(self, sess: Any, save_path: str, global_step: int | Tensor | None = None,
             latest_filename: str | None = None, meta_graph_suffix: str = "meta", write_meta_graph: bool = True,
             write_state: bool = True) -> str:
        """Write the variables' values in ``sess`` to a checkpoint and return its path:
        ``save_path``, or ``f"{save_path}-{step}"`` with a ``global_step`` (an int, or a global step
        Variable whose value is read through ``sess``). The file at that path (no extension is
        added) is a safetensors file that records its own name (the
        basename of the returned path) and the global step. Updates the "checkpoint" index in the
        directory and deletes this Saver's checkpoints beyond ``max_to_keep``, and the stale
        temporaries that earlier saves with this prefix left when killed midway. TF1's other
        arguments: ``latest_filename`` names the index (default "checkpoint"), ``write_state=False``
        leaves it alone and neither records nor deletes a checkpoint (with ``max_to_keep`` None or
        0 the index names only the latest, as TF1's); ``meta_graph_suffix`` and
        ``write_meta_graph`` change nothing (graphgrad writes no meta graph: the graph is the
        Python that builds it).

        >>> import os, tempfile
        >>> import numpy as np, compiler as cc
        >>> from runtime import Session
        >>> v = cc.Variable(np.ones(2, "float32"), name="v")
        >>> with Session() as sess:
        ...     path = Saver({"renamed_v": v}).save(sess, os.path.join(tempfile.mkdtemp(), "ckpt"))
        >>> os.path.basename(path)
        'ckpt'
        """
        save_path = os.fspath(save_path)
        if not os.path.basename(save_path):
            raise ValueError(located(f"Saver.save: save_path {save_path!r} names no file; give a file path prefix "
                                     "(e.g. 'DIR/model')"))
        prefix = save_path
        self._check_graph("save", sess)
        comm = world() if self._comm is None else self._comm
        together, writes = comm.Get_size() > 1, comm.Get_rank() == 0
        # The step and the values come from one run, so a step trained on another thread meanwhile
        # cannot make the file's name and its contents disagree.
        names = list(self._var_list)
        fetches: list[Any] = [self._var_list[name] for name in names] if writes else []
        if isinstance(global_step, Tensor):
            fetches.append(global_step)
        fetched = list(sess.run(fetches)) if fetches else []
        step: int | None = None
        if global_step is not None:
            step_value = np.asarray(fetched.pop() if isinstance(global_step, Tensor) else global_step)
            if step_value.shape != () or step_value.dtype.kind not in "iu":
                raise TypeError(located(f"Saver.save: global_step must be an integer scalar, got {global_step!r}"))
            step = int(step_value)
            save_path = f"{save_path}-{step}"
        # Where the OS puts the file: a symbolic link followed by ".." leads elsewhere than the
        # path's text says, and the index must be written beside the checkpoint.
        directory = os.path.dirname(_resolved(save_path))
        if os.path.isdir(save_path):
            raise ValueError(located(f"Saver.save: {save_path!r} is a directory; give a file path prefix "
                                     "inside it (e.g. 'DIR/model')"))
        index_name = latest_filename or INDEX_FILENAME
        if write_state and os.path.basename(save_path) == index_name:
            # The index would be written over the checkpoint just written (TF1's files have suffixes).
            raise ValueError(located(f"Saver.save: the checkpoint {save_path!r} would have the name of the "
                                     f"directory's index file {index_name!r}; choose another prefix "
                                     "(e.g. 'DIR/model')"))
        # Kept as absolute paths: a later chdir must not make max_to_keep delete another file.
        absolute = _resolved(save_path)
        with self._save_lock:
            self._save_locked(names, fetched, save_path, absolute, step, directory, prefix, index_name, write_state,
                              comm, together, writes)
        return save_path

    def _save_locked(self, names: list[str], fetched: list[Any], save_path: str, absolute: str, step: int | None,
                     directory: str, prefix: str, index_name: str, write_state: bool, comm: Any, together: bool,
                     writes: bool) -> None:
        """The part of ``save`` that writes and keeps the books, one save at a time."""
        # As TF1's: without write_state nothing is recorded or deleted; with max_to_keep None or 0
        # nothing is recorded and the index names only this checkpoint. The bookkeeping changes
        # only once the checkpoint is written.
        next_kept_time = self._next_kept_time
        removed: list[str] = []
        if not write_state:
            kept = list(self._last_checkpoints)
        elif not self._max_to_keep:
            kept = [absolute]
        else:
            kept = [p for p in self._last_checkpoints if p != absolute] + [absolute]
            removed, kept = kept[:-self._max_to_keep], kept[-self._max_to_keep:]
            for path in list(removed):   # TF1: one per keep_checkpoint_every_n_hours survives, on a fixed grid
                if self._saved_at.get(path, 0.0) >= next_kept_time:
                    removed.remove(path)
                    next_kept_time += self._keep_every
        saved_at = time.time()
        if writes:
            try:
                try:
                    self._write(dict(zip(names, fetched)), absolute, step, directory, prefix, kept, removed,
                                index_name if write_state else None)
                except OSError as error:   # the same kind of error, naming the checkpoint and the line
                    message = located(f"Saver.save: cannot write the checkpoint {save_path!r}: "
                                      f"{error.strerror or error}")
                    raise (type(error)(error.errno, message) if error.errno is not None
                           else type(error)(message)) from error
            except Exception as error:
                if together:  # the other ranks raise it too, rather than wait
                    comm.bcast(f"{type(error).__name__}: {error}", root=0)
                raise
        if together:
            # Rank 0 says it has written the checkpoint (None) or why it could not; the other
            # ranks wait here for that word.
            failure = comm.bcast(None, root=0)
            if failure is not None:
                raise CheckpointError(f"Saver.save: rank 0 could not write {save_path!r}: {failure}")
        if write_state:
            self._saved_at[absolute] = saved_at
            self._next_kept_time = next_kept_time
            self._last_checkpoints = kept if self._max_to_keep else []

    def _check_graph(self, method: str, sess: Any) -> None:
        """A variable of another graph than ``sess``'s is an error that names it (a Saver built
        while another graph was the default)."""
        graph = getattr(sess, "graph", None)
        for name, var in self._var_list.items():
            if graph is not None and var.graph is not graph:
                raise GraphMismatchError(located(f"Saver.{method}: variable {name!r} (made at {var.op.location}) "
                                                 "belongs to another graph than the session's; build the Saver "
                                                 "in the session's graph"))

    def _write(self, values: dict[str, Any], save_path: str, step: int | None, directory: str, prefix: str,
               kept: list[str], removed: list[str], index_name: str | None) -> None:
        """Write the checkpoint and the index ``index_name`` (none when None), and delete ``removed``
        (rank 0's part of ``save``)."""
        # The directories as the path names them (so that the path returned opens), then where
        # they lead.
        os.makedirs(os.path.dirname(prefix) or os.curdir, exist_ok=True)
        os.makedirs(directory, exist_ok=True)
        # This prefix's checkpoint files (with or without a step) and the index a save rewrites.
        own_files = (rf"{re.escape(os.path.basename(prefix))}(?:--?[0-9]+)?|"
                     rf"{re.escape(index_name or INDEX_FILENAME)}")
        _remove_stale_temporaries(directory, _temporary_pattern(own_files))
        _write_checkpoint(save_path, values, step)
        if index_name is not None:
            _write_index(directory, save_path, kept, index_name)
        for path in removed:
            with contextlib.suppress(FileNotFoundError):
                os.remove(path)

    def restore(self, sess: Any, save_path: str) -> None:
        """Set the variables in ``sess`` to their values in the checkpoint at ``save_path``.

        Every variable of ``var_list`` must be in the file with the same shape and dtype; else a
        ``CheckpointError`` (missing), ``ShapeError`` or ``DTypeError`` names it and the file, and
        no variable is changed. A damaged or truncated file raises ``CheckpointError``, and so does
        a file that records another checkpoint's name than the basename of ``save_path`` (one
        replaced by another checkpoint's file, or renamed). ``save_path`` may also be a plain
        safetensors file written elsewhere (e.g. by ``safetensors.torch.save_file``): its tensors
        are matched by name, without the name and checksum checks that it has no metadata for.
        Files in graphgrad's earlier format are read too.

        >>> import os, tempfile
        >>> import numpy as np, compiler as cc
        >>> from runtime import Session
        >>> a = cc.Variable(np.float32(1.5), name="a")
        >>> saver = Saver([a])
        >>> with Session(target="reference") as sess:
        ...     path = saver.save(sess, os.path.join(tempfile.mkdtemp(), "a"))
        ...     sess.load_variable(a, 0.0)
        ...     saver.restore(sess, path)
        ...     float(sess.run(a))
        1.5
        """
        if save_path is None:
            raise CheckpointError("Saver.restore: save_path is None (latest_checkpoint found no checkpoint?)")
        save_path = os.fspath(save_path)
        self._check_graph("restore", sess)
        stored = _load_checkpoint(save_path).arrays
        checked: list[tuple[cc.Variable, np.ndarray]] = []
        for name, var in self._var_list.items():
            label = repr(name) if name == var.op.name else f"{name!r} (graph variable {var.op.name!r})"
            if name not in stored and var is get_random_counter(var.graph):
                continue   # the hidden run count: a checkpoint from before the first random op, or TF1's
            if name not in stored:
                raise CheckpointError(f"variable {label} is not in checkpoint {save_path!r} "
                                      f"(it holds {sorted(stored)})")
            value = stored[name]
            _refuse_unloadable(save_path, name, value)
            if value.dtype != _little_endian(var.dtype):
                raise DTypeError(f"variable {label} is {var.dtype.name} but checkpoint {save_path!r} "
                                 f"holds it as {value.dtype.name}")
            if value.shape != var.shape:
                raise ShapeError(f"variable {label} has shape {var.shape} but checkpoint "
                                 f"{save_path!r} holds it with shape {value.shape}")
            checked.append((var, value))
        sess.load_variables(checked)   # all at once: a step on another thread sees none or all

"""The persistent compile cache: machine code of compiled steps (and of the GEMM library) on disk.

An entry is keyed by a hash of everything that determines the machine code: the unoptimised LLVM
IR of the module, the host CPU name and features, the target triple, LLVM's and llvmlite's
versions and graphgrad's cache format. Each file carries a header (magic, format, key) and a
checksum of its payload; a file that is unreadable, truncated, foreign or stale is ignored and
rebuilt, never loaded blindly. Files are written atomically (temporary file, then rename).

The directory is ``$GRAPHGRAD_CACHE_DIR``, else ``$XDG_CACHE_HOME/graphgrad``, else
``~/.cache/graphgrad``. ``GRAPHGRAD_CACHE=0`` turns the cache off.
"""
from __future__ import annotations

import hashlib
import os
import struct
import tempfile
from pathlib import Path

import llvmlite
import llvmlite.binding as llvm

MAGIC = b"GRAPHGRAD-OBJ\0"
FORMAT = 1
_HEADER = struct.Struct("<14sI32sQ32s")  # magic, format, key, payload length, payload sha256


def directory() -> Path | None:
    """Where entries live, or None when the cache is turned off."""
    if os.environ.get("GRAPHGRAD_CACHE", "1").strip().lower() in ("0", "off", "false", "no"):
        return None
    configured = os.environ.get("GRAPHGRAD_CACHE_DIR")
    if configured:
        return Path(configured)
    base = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return Path(base) / "graphgrad"


def key_for(module_text: str) -> bytes:
    """The key of a module's machine code on this host."""
    digest = hashlib.sha256()
    for part in (f"format={FORMAT}", f"llvmlite={llvmlite.__version__}",
                 "llvm=" + ".".join(map(str, llvm.llvm_version_info)), llvm.get_default_triple(),
                 llvm.get_host_cpu_name(), llvm.get_host_cpu_features().flatten(), module_text):
        digest.update(part.encode())
        digest.update(b"\0")
    return digest.digest()


def _path(key: bytes) -> Path | None:
    root = directory()
    return None if root is None else root / f"{key.hex()}.obj"


def load(key: bytes) -> bytes | None:
    """The cached object code for ``key``, or None if there is no valid entry."""
    path = _path(key)
    if path is None:
        return None
    try:
        data = path.read_bytes()
    except OSError:
        return None
    if len(data) < _HEADER.size:
        return None
    magic, version, stored_key, length, checksum = _HEADER.unpack_from(data)
    payload = data[_HEADER.size:]
    if (magic != MAGIC or version != FORMAT or stored_key != key or length != len(payload)
            or hashlib.sha256(payload).digest() != checksum):
        return None
    return payload


def store(key: bytes, payload: bytes) -> None:
    """Write an entry atomically; a cache that cannot be written is silently skipped."""
    path = _path(key)
    if path is None:
        return
    header = _HEADER.pack(MAGIC, FORMAT, key, len(payload), hashlib.sha256(payload).digest())
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        handle, temporary = tempfile.mkstemp(dir=path.parent, prefix=".tmp-", suffix=".obj")
        try:
            with os.fdopen(handle, "wb") as stream:
                stream.write(header + payload)
            os.replace(temporary, path)
        except BaseException:
            os.unlink(temporary)
            raise
    except OSError:
        pass

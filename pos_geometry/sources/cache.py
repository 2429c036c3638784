"""pos_geometry's own cache of tensors fetched from the Hub by range reads.

A positional table read over HTTP is stored once, so that a second load makes no
network request. Layout under :func:`cache_dir`::

    hub/<org>--<name>/<commit>/<quoted tensor key>.safetensors   one tensor, as stored
    hub/<org>--<name>/<commit>/@<quoted result name>.safetensors  a small result computed from that commit
    hub/<org>--<name>/refs/<quoted revision>                      the commit a revision resolved to

Entries are keyed by the RESOLVED 40-hex commit, never by a branch name, so a
cached tensor always belongs to one immutable snapshot; ``refs`` only remember
which commit a name (``main``, ``checkpoint-400``) pointed to when it was fetched.

Each tensor file is a safetensors file holding the tensor under its checkpoint key,
in its stored dtype, with metadata ``repo_id``, ``commit``, ``key``, ``file``,
``dtype`` and ``available_keys`` (JSON). A result file (:func:`store_result`: e.g. the rotary
atlas's per-head sums of a q/k tensor, so that a second atlas reads nothing) holds named tensors
with metadata ``repo_id``, ``commit``, ``result`` and ``spec`` (what it was computed from); a
``@`` never starts a quoted tensor key, so the two kinds cannot collide. Every write goes
through the package's one atomic writer (:func:`pos_geometry._files.atomic_write`: a temporary
file in the same directory, fsynced, then ``os.replace``), so a crash leaves either the old
state or the complete new file, never a partial file under a name that is read back.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import math
import re
import shutil
import struct
from pathlib import Path
from urllib.parse import quote

import torch
from huggingface_hub.errors import HFValidationError
from huggingface_hub.utils import validate_repo_id
from safetensors import SafetensorError, safe_open
from safetensors.torch import save

from pos_geometry._files import atomic_write, atomic_writer, cache_dir, remove_stale_temporaries
from pos_geometry._json import loads
from pos_geometry._names import inside
from pos_geometry.errors import InvalidArgumentError
from pos_geometry.sources.keys import select_key
from pos_geometry.sources.tensor_record import TensorRecord, Which, dtype_name

__all__ = [
    "cache_dir",
    "cached_path",
    "cached_ref",
    "cached_result",
    "cached_table",
    "cached_tensor",
    "clear",
    "commit_dir",
    "is_commit",
    "store_ref",
    "store_result",
    "store_tensor",
    "WRITE_CHUNK",
]

_COMMIT = re.compile(r"^[0-9a-f]{40}$")
_SUFFIX = ".safetensors"
_MAX_NAME = 200
WRITE_CHUNK = 4 * 1024 * 1024
"""Bytes written per step when a tensor is stored (slices of its own memory: no serialised copy)."""


DEFAULT_ENDPOINT = "https://huggingface.co"


def endpoint() -> str:
    """The hub endpoint in use (``HF_ENDPOINT``, as huggingface_hub sees it), without a trailing slash: every
    cache entry records the one it came from and is served only for that one."""
    from huggingface_hub import constants

    return str(constants.ENDPOINT).rstrip("/")


def is_commit(revision: str | None) -> bool:
    """Whether ``revision`` is a full 40-hex commit hash (immutable)."""
    return revision is not None and _COMMIT.fullmatch(revision) is not None


def _repo_dir(repo_id: str) -> Path:
    try:
        validate_repo_id(repo_id)
    except HFValidationError as exc:
        raise InvalidArgumentError(
            f"{repo_id!r} is not a valid Hugging Face repo id ('name' or 'org/name', letters, digits, "
            f"'-', '_', '.'): {exc}"
        ) from None
    return cache_dir() / "hub" / repo_id.replace("/", "--")


def _check_commit(commit: str) -> None:
    if not is_commit(commit):
        raise InvalidArgumentError(
            f"the pos_geometry cache is keyed by resolved commit hashes (40 lowercase hex digits); got "
            f"{commit!r}. Resolve the revision first (pos_geometry.sources.hub.resolve_commit)."
        )


def _safe_name(text: str) -> str:
    name = quote(text, safe="-_.+=")
    if len(name) > _MAX_NAME or name.startswith("."):
        name = "sha256-" + hashlib.sha256(text.encode()).hexdigest()
    return name


def commit_dir(repo_id: str, commit: str) -> Path:
    """The folder holding ``repo_id``'s cached tensors at ``commit`` (a 40-hex commit; it may not exist yet)."""
    _check_commit(commit)
    return _repo_dir(repo_id) / commit


def _tensor_path(repo_id: str, commit: str, key: str) -> Path:
    return inside(commit_dir(repo_id, commit) / (_safe_name(key) + _SUFFIX), cache_dir())


def _load(path: Path, repo_id: str, commit: str, key: str | None) -> TensorRecord | None:
    """Read one cached tensor file; ``None`` (and the file removed) if it is not a valid entry."""
    try:
        with safe_open(str(path), framework="pt") as fh:
            meta = fh.metadata() or {}
            stored = meta.get("key", "")
            if (
                (key is not None and stored != key)
                or meta.get("repo_id") != repo_id
                or meta.get("commit") != commit
                or meta.get("endpoint", DEFAULT_ENDPOINT) != endpoint()  # a mirror's copy is not another's
            ):
                return None
            tensor = fh.get_tensor(stored)
        available = tuple(loads(meta.get("available_keys", "[]"), "a cached tensor's key list"))
    except (SafetensorError, OSError, ValueError):  # a CheckpointFormatError is a ValueError
        with contextlib.suppress(OSError):
            path.unlink()  # unreadable: never trusted, refetched next time
        return None
    return TensorRecord(
        tensor=tensor, key=stored, file=meta.get("file", ""), dtype=meta.get("dtype", dtype_name(tensor.dtype)),
        available_keys=available, origin="pos_geometry cache",
    )  # fmt: skip


def cached_tensor(repo_id: str, commit: str, key: str) -> TensorRecord | None:
    """The tensor ``key`` of ``repo_id`` at ``commit`` if it was stored before, else ``None``.

    The tensor comes back on CPU in its stored dtype and shape; no network is used.
    """
    path = _tensor_path(repo_id, commit, key)
    return _load(path, repo_id, commit, key) if path.is_file() else None


def cached_path(repo_id: str, commit: str, key: str) -> Path | None:
    """The cache file holding tensor ``key`` of ``repo_id`` at ``commit``, else ``None``.

    Only the file's header is read (its metadata must name this repo, commit and key, and the
    file must be a valid safetensors file); the tensor's bytes are left for the caller to read,
    e.g. a few rows at a time. An unreadable entry is removed, as by :func:`cached_tensor`.
    """
    path = _tensor_path(repo_id, commit, key)
    if not path.is_file():
        return None
    try:
        with safe_open(str(path), framework="pt") as fh:
            meta = fh.metadata() or {}
            if meta.get("key") != key or meta.get("repo_id") != repo_id or meta.get("commit") != commit:
                return None
            if key not in fh.keys():  # noqa: SIM118 (safe_open is not a mapping)
                raise SafetensorError(f"no tensor {key!r}")
    except (SafetensorError, OSError, ValueError):
        with contextlib.suppress(OSError):
            path.unlink()
        return None
    return path


def cached_table(
    repo_id: str, commit: str, which: Which = "position", key: str | None = None, preferred: str | None = None
) -> TensorRecord | None:
    """The cached ``which`` table of ``repo_id`` at ``commit`` (or tensor ``key``), else ``None``.

    Without ``key`` the stored keys of that commit are matched with
    :func:`pos_geometry.sources.keys.select_key` (so a cached ``transformer.wpe.weight``
    answers ``which="position"``).
    """
    if key is not None:
        return cached_tensor(repo_id, commit, key)
    folder = commit_dir(repo_id, commit)
    if not folder.is_dir():
        return None
    found: dict[str, Path] = {}
    for path in sorted(folder.glob("*" + _SUFFIX)):
        if path.name.startswith("."):
            continue  # a temp file left by a crash: never read
        try:
            with safe_open(str(path), framework="pt") as fh:
                stored = (fh.metadata() or {}).get("key")
        except (SafetensorError, OSError):
            continue
        if stored:
            found[stored] = path
    if not found:
        return None
    try:
        chosen = select_key(found, which, preferred=preferred)
    except LookupError:
        return None
    return _load(found[chosen], repo_id, commit, chosen)


_CODES = {
    torch.bool: "BOOL", torch.uint8: "U8", torch.int8: "I8", torch.int16: "I16", torch.int32: "I32",
    torch.int64: "I64", torch.float16: "F16", torch.bfloat16: "BF16", torch.float32: "F32",
    torch.float64: "F64",
}  # fmt: skip


def _header(key: str, dtype: torch.dtype, shape: tuple[int, ...], meta: dict[str, str]) -> bytes:
    """The safetensors header (``u64`` length + JSON padded to 8 bytes) of a file holding one tensor."""
    if dtype not in _CODES:
        raise InvalidArgumentError(f"the cache stores {sorted(map(str, _CODES))} tensors; got {dtype}.")
    nbytes = math.prod(shape) * dtype.itemsize
    body = {
        "__metadata__": meta,
        key: {"dtype": _CODES[dtype], "shape": list(shape), "data_offsets": [0, nbytes]},
    }
    text = json.dumps(body, separators=(",", ":")).encode()
    text += b" " * (-len(text) % 8)
    return struct.pack("<Q", len(text)) + text


def _meta(repo_id: str, commit: str, key: str, file: str, dtype: str, available: tuple[str, ...]) -> dict:
    return {
        "repo_id": repo_id,
        "commit": commit,
        "key": key,
        "file": file,
        "dtype": dtype,
        "available_keys": json.dumps(list(available)),
        "endpoint": endpoint(),
    }


def store_tensor(repo_id: str, commit: str, record: TensorRecord) -> Path:
    """Store ``record`` for ``repo_id`` at the resolved ``commit``; returns the file written.

    Atomic: the safetensors bytes go to a temp file in the same directory, which is
    fsynced and renamed over the final name with ``os.replace``. The stored dtype,
    key, source file and the checkpoint's other keys are kept in the metadata. The tensor's
    bytes are written from its own memory in :data:`WRITE_CHUNK` slices (no serialised copy).
    """
    tensor = record.tensor.detach().to("cpu").contiguous()
    raw = memoryview(tensor.reshape(-1).view(torch.uint8).numpy()) if tensor.numel() else memoryview(b"")
    meta = _meta(repo_id, commit, record.key, record.file, record.dtype, record.available_keys)
    path = _tensor_path(repo_id, commit, record.key)
    remove_stale_temporaries(path.parent)  # a loader killed while writing here left its temporary file
    with atomic_writer(path) as fh:
        fh.write(_header(record.key, tensor.dtype, tuple(tensor.shape), meta))
        for offset in range(0, raw.nbytes, WRITE_CHUNK):
            fh.write(raw[offset : offset + WRITE_CHUNK])
    return path


def _result_path(repo_id: str, commit: str, name: str) -> Path:
    return inside(commit_dir(repo_id, commit) / ("@" + _safe_name(name) + _SUFFIX), cache_dir())


def store_result(
    repo_id: str,
    commit: str,
    name: str,
    tensors: dict[str, torch.Tensor],
    spec: str,
    meta: dict[str, str] | None = None,
) -> Path:
    """Store the small result ``name`` computed from ``repo_id`` at ``commit``: ``tensors`` (moved to
    the CPU) with ``spec``, the text that identifies how it was computed (a later lookup must give the
    same), and extra string ``meta``. Atomic like :func:`store_tensor`; returns the file written."""
    _check_commit(commit)
    payload = save(
        {k: v.detach().to("cpu").contiguous() for k, v in tensors.items()},
        metadata={
            **(meta or {}),
            "repo_id": repo_id,
            "commit": commit,
            "result": name,
            "spec": spec,
            "endpoint": endpoint(),
        },
    )
    path = _result_path(repo_id, commit, name)
    remove_stale_temporaries(path.parent)
    return atomic_write(path, payload)


def cached_result(
    repo_id: str, commit: str, name: str, spec: str
) -> tuple[dict[str, torch.Tensor], dict[str, str]] | None:
    """``(tensors, metadata)`` of the result ``name`` stored for ``repo_id`` at ``commit`` with this
    ``spec``, else ``None`` (an unreadable file is removed; one with another spec is left alone)."""
    path = _result_path(repo_id, commit, name)
    if not path.is_file():
        return None
    try:
        with safe_open(str(path), framework="pt") as fh:
            meta = fh.metadata() or {}
            if (meta.get("repo_id"), meta.get("commit"), meta.get("result"), meta.get("spec"),
                meta.get("endpoint", DEFAULT_ENDPOINT)) != (
                repo_id, commit, name, spec, endpoint(),
            ):  # fmt: skip
                return None
            tensors = {k: fh.get_tensor(k) for k in fh.keys()}  # noqa: SIM118 (safe_open is not a mapping)
    except (SafetensorError, OSError, ValueError):
        with contextlib.suppress(OSError):
            path.unlink()
        return None
    return tensors, meta


def _ref_path(repo_id: str, revision: str) -> Path:
    if not revision:
        raise InvalidArgumentError(
            "a revision name must be a non-empty string, e.g. 'main' or 'checkpoint-400'."
        )
    return inside(_repo_dir(repo_id) / "refs" / _safe_name(revision), cache_dir())


def cached_ref(repo_id: str, revision: str) -> str | None:
    """The commit ``revision`` of ``repo_id`` resolved to when last fetched from this endpoint, else ``None``."""
    path = _ref_path(repo_id, revision)
    try:
        lines = path.read_text().split()
    except OSError:
        return None
    if not lines or (lines[1] if len(lines) > 1 else DEFAULT_ENDPOINT) != endpoint():
        return None
    return lines[0] if is_commit(lines[0]) else None


def store_ref(repo_id: str, revision: str, commit: str) -> None:
    """Remember that ``revision`` of ``repo_id`` resolved to ``commit`` (atomic write)."""
    _check_commit(commit)
    if revision == commit:
        return
    atomic_write(_ref_path(repo_id, revision), f"{commit}\n{endpoint()}\n")


def clear(repo_id: str | None = None) -> None:
    """Remove the cached entries of ``repo_id`` (or of every repo)."""
    target = _repo_dir(repo_id) if repo_id is not None else cache_dir() / "hub"
    shutil.rmtree(target, ignore_errors=True)

"""Read one embedding table from a checkpoint file or a local Hugging Face model directory.

:func:`read_checkpoint_tensor` works on any :class:`ByteSource` (a local file or an HTTP
range reader) and reads only the header/index and the wanted tensor's bytes.
:func:`read_local` adds the local layer: a file path, a shard index, or a model directory
(``WEIGHT_FILES`` order; a shard index opens only the shard that holds the tensor).
"""

from __future__ import annotations

import dataclasses
import os
import struct
from pathlib import Path
from typing import Any, Literal

from pos_geometry._limits import check_regular_file, read_config_json
from pos_geometry.errors import CheckpointFormatError, InvalidArgumentError
from pos_geometry.sources import numpy_format, safetensors_format, torch_zip
from pos_geometry.sources.byte_source import ByteSource, FileByteSource
from pos_geometry.sources.keys import select_key
from pos_geometry.sources.sharded import INDEX_SUFFIX, MAX_INDEX_BYTES, WEIGHT_FILES, parse_index, shard_for
from pos_geometry.sources.tensor_record import TensorRecord, Which, check_which, dtype_name

__all__ = [
    "Format",
    "FORMATS",
    "CHECKPOINT_SUFFIXES",
    "detect_format",
    "read_checkpoint_tensor",
    "local_config",
    "read_local",
]

Format = Literal["safetensors", "torch-zip", "npy", "npz"]
FORMATS: tuple[str, ...] = ("safetensors", "torch-zip", "npy", "npz")
CHECKPOINT_SUFFIXES: tuple[str, ...] = (
    ".safetensors",
    ".bin",
    ".pt",
    ".pth",
    ".ckpt",
    ".npy",
    ".npz",
    ".gguf",
)
_ACCEPTED = "safetensors, PyTorch >= 1.6 zip checkpoints (.bin/.pt/.pth), .npy, .npz and GGUF (.gguf)"


def detect_format(src: ByteSource) -> Format:
    """The checkpoint format of ``src``, from its first bytes (never from a file extension).

    safetensors: a u64 length then ``{``; torch-zip: ``PK\\x03\\x04`` whose first member is not a
    ``.npy``; npz: a ZIP whose first member is a ``.npy``; npy: ``\\x93NUMPY``.

    Raises:
        CheckpointFormatError: anything else; legacy (pre-1.6) torch pickles and Git LFS pointer
            files get their own explanation.
    """
    head = src.read(0, min(src.size, 64))
    if head[:6] == numpy_format.NPY_MAGIC:
        return "npy"
    if head[:4] == b"PK\x03\x04" and len(head) >= 30:
        (name_len,) = struct.unpack_from("<H", head, 26)
        name = src.read(30, min(name_len, max(src.size - 30, 0)))
        return "npz" if name.endswith(b".npy") else "torch-zip"
    if len(head) > 8 and head[8:9] == b"{":
        return "safetensors"
    if len(head) >= 2 and head[0] == 0x80 and 2 <= head[1] <= 5:
        raise CheckpointFormatError(
            f"{src.name!r} is a legacy (pre-1.6, non-zip) PyTorch pickle, which cannot be read without "
            "executing it. Load it with a current torch in an environment you trust and re-save it "
            "(torch.save writes the zip format, or use safetensors.torch.save_file)."
        )
    if head.startswith(b"version https://git-lfs"):
        raise CheckpointFormatError(
            f"{src.name!r} is a Git LFS pointer, not the weights. Fetch the real file (git lfs pull, or "
            "hf download)."
        )
    raise CheckpointFormatError(
        f"{src.name!r} is not a checkpoint format pos_geometry reads (first bytes {head[:16]!r}, "
        f"{src.size} bytes in all). Accepted: {_ACCEPTED}. Re-download it, or convert it to safetensors."
    )


def read_checkpoint_tensor(
    src: ByteSource,
    *,
    which: Which = "position",
    key: str | None = None,
    fmt: str | None = None,
    preferred: str | None = None,
) -> TensorRecord:
    """Read the ``which`` table (or exactly ``key``) from one checkpoint file.

    ``fmt`` is one of :data:`FORMATS`, or None to detect it. A ``.npy`` holds one array and
    no keys (``which``/``key`` are not consulted; the record's key is ``""``); a ``.npz``
    with a single array returns it, otherwise the key is chosen like for other formats.

    Returns:
        a :class:`TensorRecord`: the tensor on CPU in the stored dtype and shape, bit-exact.

    Raises:
        CheckpointFormatError, UnsafeCheckpointError: unreadable, corrupted or hostile file.
        MissingTensorError: no such table; the message lists the keys present.
    """
    check_which(which)
    if fmt is None:
        fmt = detect_format(src)
    if fmt == "safetensors":
        header = safetensors_format.read_header(src)
        keys = tuple(header.entries)
        found = select_key(keys, which, key, src.name, preferred)
        tensor = safetensors_format.read_tensor(src, header, found)
    elif fmt == "torch-zip":
        index = torch_zip.read_index(src)
        keys = torch_zip.tensor_keys(index)
        found = select_key(keys, which, key, src.name, preferred)
        tensor = torch_zip.read_tensor(src, index, found)
    elif fmt == "npz":
        members = numpy_format.npz_members(src)
        keys = tuple(members)
        found = (
            keys[0] if key is None and len(keys) == 1 else select_key(keys, which, key, src.name, preferred)
        )
        tensor = numpy_format.read_npz_member(src, members[found])
    elif fmt == "npy":
        keys, found = (), ""
        tensor = numpy_format.read_npy(src)
    else:
        raise InvalidArgumentError(f"fmt must be one of {FORMATS} or None (detect); got {fmt!r}.")
    return TensorRecord(tensor, found, src.name, dtype_name(tensor.dtype), keys)


def load_index(path: Path) -> dict:
    """A local shard index (``*.index.json``), its size checked before it is read."""
    check_regular_file(path)
    size = path.stat().st_size
    if size > MAX_INDEX_BYTES:
        raise CheckpointFormatError(
            f"{str(path)!r} is {size} bytes, too large for a shard index; re-download it."
        )
    return parse_index(path.read_bytes(), str(path))


def _read_index_file(path: Path, which: Which, key: str | None) -> TensorRecord:
    index = load_index(path)
    found, shard = shard_for(index, which, key, source=str(path))
    shard_path = path.parent / shard
    if not shard_path.is_file():
        raise CheckpointFormatError(
            f"{str(path)!r} puts {found!r} in {shard!r}, but {str(shard_path)!r} does not exist. "
            "Download that shard (or the whole model) again."
        )
    record = read_checkpoint_tensor(FileByteSource(shard_path), which=which, key=found)
    return dataclasses.replace(record, available_keys=tuple(index["weight_map"]))


def _weights_in(directory: Path) -> Path:
    for name in WEIGHT_FILES:
        if (directory / name).is_file():
            return directory / name
    present = sorted(p.name for p in directory.iterdir())
    candidates = [
        directory / n for n in present if n.endswith(CHECKPOINT_SUFFIXES) or n.endswith(INDEX_SUFFIX)
    ]
    if len(candidates) == 1:
        return candidates[0]
    raise CheckpointFormatError(
        f"{str(directory)!r} holds none of {WEIGHT_FILES} and not exactly one checkpoint file "
        f"(it has: {present[:20]}). Point at the weights file itself, or download the model's weights."
    )


def read_local(
    path: str | os.PathLike[str], *, which: Which = "position", key: str | None = None
) -> TensorRecord:
    """Read the ``which`` table (or exactly ``key``) from a local file or Hugging Face model directory.

    ``path`` is a checkpoint file (.safetensors, .bin/.pt/.pth zip, .npy, .npz; the format is
    detected from its bytes), a shard index (``*.index.json``), or a directory holding one of
    :data:`WEIGHT_FILES` (tried in that order). A shard index opens only the shard holding the tensor.

    Raises:
        InvalidArgumentError: ``path`` does not exist.
        CheckpointFormatError, UnsafeCheckpointError, MissingTensorError: see :func:`read_checkpoint_tensor`.
    """
    check_which(which)
    p = Path(path)
    check_regular_file(p)
    if p.is_dir():
        p = _weights_in(p)
    elif not p.is_file():
        raise InvalidArgumentError(
            f"No checkpoint file or model directory at {str(p)!r}. Check the path (or give a hub repo id)."
        )
    if p.name.endswith(INDEX_SUFFIX):
        return _read_index_file(p, which, key)
    return read_checkpoint_tensor(FileByteSource(p), which=which, key=key)


def local_config(path: Path) -> dict[str, Any] | None:
    """The ``config.json`` beside ``path`` (a folder, or a file in one), read with the JSON bounds; ``None``
    where there is none."""
    folder = path if path.is_dir() else path.parent
    cfg = folder / "config.json"
    if not cfg.is_file():
        return None
    return read_config_json(cfg, repr(str(cfg)))

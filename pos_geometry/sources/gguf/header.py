"""The header of a GGUF file (llama.cpp's format): its metadata and where each tensor's bytes lie.

A GGUF file is ``GGUF`` + version + tensor count + metadata count, then the metadata as typed
key/value pairs, then one record per tensor (name, dimensions, ggml type, offset), then the
tensor data, aligned. :func:`read_header` parses exactly that through a
:class:`~pos_geometry.sources.byte_source.ByteSource` (a local file or HTTP range reads), fetching
the header in growing pieces, so only the header's bytes are read.

Why not ``gguf.GGUFReader``: it memory-maps a local file and builds one numpy view per element of
every array field; on SmolLM2-135M's header (a 49152-token vocabulary and its merges) that takes
5.3 s here, for metadata we do not use. This parser keeps small arrays as tuples and only counts
the elements of large ones (the tokenizer), which it skips. The ggml type numbers, block sizes
and value types are the ``gguf`` package's own (:mod:`gguf.constants`); the tensors are decoded by
``gguf.quants.dequantize`` (:mod:`pos_geometry.sources.gguf.checkpoint`). A test checks every field
and tensor record against ``GGUFReader`` on a real file.

Every count and length is checked against the file's size before anything is allocated.
"""

from __future__ import annotations

import struct
from dataclasses import dataclass
from typing import Any

from pos_geometry.errors import CheckpointFormatError
from pos_geometry.sources.byte_source import ByteSource

__all__ = ["GGUF_MAGIC", "GGUFHeader", "GGUFTensorInfo", "LargeArray", "is_gguf", "read_header"]

GGUF_MAGIC = b"GGUF"
SUPPORTED_VERSIONS = (2, 3)
MAX_DIMS = 4  # GGML_MAX_DIMS
SMALL_ARRAY = 4096
"""Arrays with at most this many elements are kept as tuples; longer ones only as a :class:`LargeArray`."""
MAX_HEADER_BYTES = 1 << 30
_FIRST_PIECE = 1 << 18

# GGUFValueType -> struct format (gguf.constants.GGUFValueType: UINT8=0 .. FLOAT64=12)
_SCALARS = {0: "B", 1: "b", 2: "H", 3: "h", 4: "I", 5: "i", 6: "f", 7: "?", 10: "Q", 11: "q", 12: "d"}
_STRING, _ARRAY = 8, 9


@dataclass(frozen=True)
class LargeArray:
    """An array field too long to keep (a tokenizer's vocabulary): its element type and length."""

    value_type: int
    count: int


@dataclass(frozen=True)
class GGUFTensorInfo:
    """One tensor record: ``shape`` in row-major order (GGUF lists dimensions fastest first), the
    ggml type number, and the absolute byte offset and length of its data."""

    name: str
    shape: tuple[int, ...]
    ggml_type: int
    offset: int
    n_bytes: int


@dataclass(frozen=True)
class GGUFHeader:
    """A parsed GGUF header: ``fields`` (key -> value: int, float, bool, str, tuple or
    :class:`LargeArray`), ``tensors`` (name -> :class:`GGUFTensorInfo`, in file order), the version,
    the alignment and the offset where tensor data starts."""

    version: int
    fields: dict[str, Any]
    tensors: dict[str, GGUFTensorInfo]
    alignment: int
    data_offset: int
    header_bytes: int


class _Cursor:
    """Sequential reads from a :class:`ByteSource`, fetched in pieces that double as needed."""

    def __init__(self, src: ByteSource) -> None:
        self.src, self.pos, self.buf = src, 0, b""

    def need(self, n: int) -> None:
        end = self.pos + n
        if end > self.src.size:
            raise CheckpointFormatError(
                f"{self.src.name!r} is truncated or not a GGUF file: its header needs {end} bytes but the file "
                f"has {self.src.size}. Re-download it."
            )
        if end > MAX_HEADER_BYTES:
            raise CheckpointFormatError(
                f"{self.src.name!r}: the GGUF header runs past {MAX_HEADER_BYTES} bytes; refused as corrupt."
            )
        if end > len(self.buf):
            want = min(self.src.size, max(end, 2 * len(self.buf), _FIRST_PIECE))
            self.buf += self.src.read(len(self.buf), want - len(self.buf))

    def unpack(self, fmt: str) -> Any:
        size = struct.calcsize("<" + fmt)
        self.need(size)
        value = struct.unpack_from("<" + fmt, self.buf, self.pos)[0]
        self.pos += size
        return value

    def string(self, what: str) -> str:
        length = self.unpack("Q")
        self.need(length)
        raw = self.buf[self.pos : self.pos + length]
        self.pos += length
        try:
            return raw.decode("utf-8")
        except UnicodeDecodeError:
            raise CheckpointFormatError(f"{self.src.name!r}: {what} is not valid UTF-8.") from None

    def skip(self, n: int) -> None:
        self.need(n)
        self.pos += n


def _value(cur: _Cursor, value_type: int, key: str) -> Any:
    if value_type in _SCALARS:
        return cur.unpack(_SCALARS[value_type])
    if value_type == _STRING:
        return cur.string(f"the value of {key[:200]!r}")
    if value_type != _ARRAY:
        raise CheckpointFormatError(
            f"{cur.src.name!r}: metadata {key[:200]!r} has unknown value type {value_type}."
        )
    item_type, count = cur.unpack("I"), cur.unpack("Q")
    if item_type == _ARRAY:
        raise CheckpointFormatError(f"{cur.src.name!r}: metadata {key[:200]!r} nests arrays; refused.")
    if item_type in _SCALARS:
        size = struct.calcsize(_SCALARS[item_type])
        cur.need(count * size)  # checked against the file size before anything is allocated
        if count > SMALL_ARRAY:
            cur.skip(count * size)
            return LargeArray(item_type, count)
        values = struct.unpack_from(f"<{count}{_SCALARS[item_type]}", cur.buf, cur.pos)
        cur.pos += count * size
        return values
    if item_type != _STRING:
        raise CheckpointFormatError(
            f"{cur.src.name!r}: metadata {key[:200]!r} has unknown item type {item_type}."
        )
    cur.need(8 * count)  # every string costs at least its 8-byte length
    if count > SMALL_ARRAY:
        length_at = struct.Struct("<Q").unpack_from
        for _ in range(count):
            if cur.pos + 8 > len(cur.buf):
                cur.need(8)
            end = cur.pos + 8 + length_at(cur.buf, cur.pos)[0]
            if end > len(cur.buf):
                cur.need(end - cur.pos)
            cur.pos = end
        return LargeArray(item_type, count)
    return tuple(cur.string(f"an element of {key[:200]!r}") for _ in range(count))


def is_gguf(src: ByteSource) -> bool:
    """Whether ``src`` starts with the GGUF magic."""
    return src.size >= 4 and src.read(0, 4) == GGUF_MAGIC


def read_header(src: ByteSource) -> GGUFHeader:
    """Parse the GGUF header of ``src`` (see the module docstring).

    Raises:
        CheckpointFormatError: not GGUF, a big-endian or unsupported version, a count or length that
            the file cannot hold, a duplicate key or tensor, a tensor outside the file.
    """
    from gguf.constants import GGML_QUANT_SIZES, GGMLQuantizationType

    cur = _Cursor(src)
    cur.need(24)
    if cur.buf[:4] != GGUF_MAGIC:
        raise CheckpointFormatError(f"{src.name!r} is not a GGUF file (it does not start with 'GGUF').")
    cur.pos = 4
    version = cur.unpack("I")
    if version & 0xFFFF == 0:
        raise CheckpointFormatError(
            f"{src.name!r} is a big-endian GGUF file; only little-endian files are read."
        )
    if version not in SUPPORTED_VERSIONS:
        raise CheckpointFormatError(
            f"{src.name!r} is GGUF version {version}; versions {SUPPORTED_VERSIONS} are read."
        )
    n_tensors, n_fields = cur.unpack("Q"), cur.unpack("Q")
    if n_tensors > src.size // 24 or n_fields > src.size // 12:  # each record takes at least that many bytes
        raise CheckpointFormatError(
            f"{src.name!r} claims {n_tensors} tensors and {n_fields} metadata fields, more than its "
            f"{src.size} bytes can hold; it is corrupt."
        )
    fields: dict[str, Any] = {}
    for _ in range(n_fields):
        key = cur.string("a metadata key")
        if key in fields:
            raise CheckpointFormatError(f"{src.name!r} repeats the metadata key {key[:200]!r}.")
        fields[key] = _value(cur, cur.unpack("I"), key)
    records = []
    for _ in range(n_tensors):
        name = cur.string("a tensor name")
        n_dims = cur.unpack("I")
        if not 1 <= n_dims <= MAX_DIMS:
            raise CheckpointFormatError(
                f"{src.name!r}: tensor {name[:200]!r} has {n_dims} dimensions (1..4 allowed)."
            )
        dims = [cur.unpack("Q") for _ in range(n_dims)]
        if 0 in dims:
            raise CheckpointFormatError(
                f"{src.name!r}: tensor {name[:200]!r} has a dimension of 0 ({tuple(reversed(dims))}); no weight of a "
                "model is empty. The file is corrupt."
            )
        records.append((name, tuple(reversed(dims)), cur.unpack("I"), cur.unpack("Q")))
    alignment = fields.get("general.alignment", 32)
    if not isinstance(alignment, int) or alignment < 1 or alignment & (alignment - 1):
        raise CheckpointFormatError(f"{src.name!r}: general.alignment {alignment!r} is not a power of two.")
    data_offset = -(-cur.pos // alignment) * alignment
    tensors: dict[str, GGUFTensorInfo] = {}
    for name, shape, ggml_type, offset in records:
        try:
            block, type_size = GGML_QUANT_SIZES[GGMLQuantizationType(ggml_type)]
        except (ValueError, KeyError):
            raise CheckpointFormatError(
                f"{src.name!r}: tensor {name[:200]!r} has ggml type {ggml_type}, unknown to the gguf package "
                "installed; upgrade gguf."
            ) from None
        n_elements = 1
        for d in shape:
            n_elements *= d
        if shape[-1] % block:
            raise CheckpointFormatError(
                f"{src.name!r}: tensor {name[:200]!r} rows of {shape[-1]} values do not fill blocks of {block}."
            )
        n_bytes = n_elements // block * type_size
        start = data_offset + offset
        if name in tensors or start + n_bytes > src.size:
            why = (
                "is listed twice" if name in tensors else f"lies past the end of the file ({src.size} bytes)"
            )
            raise CheckpointFormatError(f"{src.name!r}: tensor {name[:200]!r} {why}; the file is corrupt.")
        tensors[name] = GGUFTensorInfo(name, shape, ggml_type, start, n_bytes)
    return GGUFHeader(version, fields, tensors, alignment, data_offset, cur.pos)

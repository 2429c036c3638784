"""safetensors, read lazily: the 8-byte header length, the JSON header, then one tensor's bytes.

Layout: ``u64 little-endian N`` | ``N bytes of JSON`` | data. The JSON maps each key to
``{"dtype": "F16", "shape": [...], "data_offsets": [begin, end]}`` (offsets relative to the
start of the data) plus an optional ``"__metadata__": {str: str}``. Every field is checked
before anything is read, so a corrupted or hostile header cannot trigger a huge read.

The header is held to the rules of the ``safetensors`` library itself (``safe_open`` refuses
what :func:`read_header` refuses), checked on the header alone because a hub read fetches
only the header and one tensor: no key twice, ``__metadata__`` a map of strings (or null),
and the tensors' byte ranges tile the data section exactly (no overlap, no gap, nothing after
the last tensor).
"""

from __future__ import annotations

import json
import math
import struct
from collections.abc import Mapping
from dataclasses import dataclass
from types import MappingProxyType
from typing import Any

import torch

from pos_geometry._describe import describe
from pos_geometry.errors import CheckpointFormatError
from pos_geometry.sources.byte_source import ByteSource, read_into
from pos_geometry.sources.keys import select_key
from pos_geometry.sources.tensor_record import tensor_from_buffer

__all__ = ["SafetensorsHeader", "read_header", "read_tensor", "SAFETENSORS_DTYPES", "MAX_HEADER_BYTES"]

MAX_HEADER_BYTES = 100_000_000  # the limit the safetensors library itself applies
_MAX_NDIM = 32
_MAX_DIM = 2**40

SAFETENSORS_DTYPES: Mapping[str, torch.dtype] = MappingProxyType(
    {
        code: getattr(torch, name)
        for code, name in {
            "BOOL": "bool",
            "U8": "uint8",
            "I8": "int8",
            "I16": "int16",
            "U16": "uint16",
            "I32": "int32",
            "U32": "uint32",
            "I64": "int64",
            "U64": "uint64",
            "F16": "float16",
            "BF16": "bfloat16",
            "F32": "float32",
            "F64": "float64",
            "C64": "complex64",
            "F8_E4M3": "float8_e4m3fn",
            "F8_E5M2": "float8_e5m2",
        }.items()
        if hasattr(torch, name)
    }
)

_FIX = "Re-download the file (or re-save it with safetensors.torch.save_file)."


@dataclass(frozen=True)
class SafetensorsHeader:
    """A validated safetensors header.

    Attributes:
        entries: key -> (dtype code such as ``"F16"``, shape, (begin, end) relative to ``data_offset``).
        data_offset: ``8 + header length``: where the data section starts in the file.
        metadata: the ``__metadata__`` strings (empty when absent).
    """

    entries: Mapping[str, tuple[str, tuple[int, ...], tuple[int, int]]]
    data_offset: int
    metadata: Mapping[str, str]


def _is_int(v: Any) -> bool:
    return isinstance(v, int) and not isinstance(v, bool)


def _entry(
    src: ByteSource, key: str, info: Any, data_offset: int
) -> tuple[str, tuple[int, ...], tuple[int, int]]:
    where = f"{src.name!r}: tensor {key!r}"
    if not isinstance(info, dict):
        raise CheckpointFormatError(
            f"{where} must be described by a JSON object; got {describe(info)}. {_FIX}"
        )
    code, shape, offsets = info.get("dtype"), info.get("shape"), info.get("data_offsets")
    if not isinstance(code, str) or code not in SAFETENSORS_DTYPES:
        raise CheckpointFormatError(
            f"{where} has dtype {describe(code)}, not one of {sorted(SAFETENSORS_DTYPES)}. {_FIX}"
        )
    if (
        not isinstance(shape, list)
        or len(shape) > _MAX_NDIM
        or not all(_is_int(d) and 0 <= d <= _MAX_DIM for d in shape)
    ):
        raise CheckpointFormatError(
            f"{where} has shape {describe(shape)}; a shape is a list of at most {_MAX_NDIM} "
            f"non-negative integers. {_FIX}"
        )
    if not (isinstance(offsets, list) and len(offsets) == 2 and all(_is_int(o) for o in offsets)):
        raise CheckpointFormatError(
            f"{where} has data_offsets {describe(offsets)}; expected [begin, end]. {_FIX}"
        )
    begin, end = offsets
    if not 0 <= begin <= end or data_offset + end > src.size:
        raise CheckpointFormatError(
            f"{where} has data_offsets [{begin}, {end}], outside the data section "
            f"(0..{src.size - data_offset} bytes): the file is truncated or corrupted. {_FIX}"
        )
    itemsize = SAFETENSORS_DTYPES[code].itemsize
    expected = math.prod(shape) * itemsize
    if expected != end - begin:
        raise CheckpointFormatError(
            f"{where}: shape {shape} of {code} needs {expected} bytes but data_offsets "
            f"[{begin}, {end}] span {end - begin}. {_FIX}"
        )
    return code, tuple(shape), (begin, end)


class _DuplicateKey(ValueError):
    pass


def _no_duplicates(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    out = dict(pairs)
    if len(out) != len(pairs):
        seen: set[str] = set()
        twice = next(k for k, _ in pairs if k in seen or seen.add(k))
        raise _DuplicateKey(describe(twice))
    return out


def _check_tiling(
    src: ByteSource, entries: Mapping[str, tuple[Any, Any, tuple[int, int]]], size: int
) -> None:
    """The tensors' byte ranges, in order, must tile ``[0, size)`` exactly (safetensors' own rule)."""
    pos = 0
    for key, (_code, _shape, (begin, end)) in sorted(entries.items(), key=lambda kv: kv[1][2]):
        if begin != pos:
            what = "overlaps the tensor before it" if begin < pos else f"leaves a gap after byte {pos}"
            raise CheckpointFormatError(
                f"{src.name!r}: tensor {key!r} has data_offsets [{begin}, {end}], which {what}; the tensors "
                f"of a safetensors file must tile its data section (safetensors refuses this file). {_FIX}"
            )
        pos = end
    if pos != size:
        raise CheckpointFormatError(
            f"{src.name!r}: the tensors cover {pos} bytes of a {size}-byte data section; the rest is not "
            f"part of any tensor (safetensors refuses this file: truncated or padded). {_FIX}"
        )


def read_header(src: ByteSource) -> SafetensorsHeader:
    """Read and validate the header (the first ``8 + N`` bytes, nothing else).

    Checks: ``N`` within the file and at most :data:`MAX_HEADER_BYTES`; valid UTF-8 JSON object;
    each dtype known; each shape a list of non-negative ints; ``0 <= begin <= end`` inside the
    file; ``prod(shape) * itemsize == end - begin``; no key twice; ``__metadata__`` absent, null or a
    map of strings; the byte ranges tile the data section exactly.

    Raises:
        CheckpointFormatError: any check fails (truncated files are reported as truncated).
    """
    if src.size < 8:
        raise CheckpointFormatError(
            f"{src.name!r} is truncated: {src.size} bytes, fewer than the 8-byte safetensors header length. {_FIX}"
        )
    (n,) = struct.unpack("<Q", src.read(0, 8))
    if n > MAX_HEADER_BYTES:
        raise CheckpointFormatError(
            f"{src.name!r}: the safetensors header length is {n} bytes, more than the "
            f"{MAX_HEADER_BYTES}-byte limit; the file is corrupted or not safetensors. {_FIX}"
        )
    if 8 + n > src.size:
        raise CheckpointFormatError(
            f"{src.name!r} is truncated: its header claims {n} bytes but only {src.size - 8} follow. {_FIX}"
        )
    try:
        parsed = json.loads(src.read(8, n).decode("utf-8"), object_pairs_hook=_no_duplicates)
    except _DuplicateKey as exc:
        raise CheckpointFormatError(
            f"{src.name!r}: the safetensors header names {exc.args[0]} twice; which one is meant is ambiguous "
            f"(safetensors refuses such files). {_FIX}"
        ) from None
    except (ValueError, RecursionError) as exc:  # UnicodeDecodeError and JSONDecodeError are ValueErrors
        raise CheckpointFormatError(
            f"{src.name!r}: the safetensors header is not valid JSON ({str(exc)[:200]}). {_FIX}"
        ) from None
    if not isinstance(parsed, dict):
        raise CheckpointFormatError(
            f"{src.name!r}: the safetensors header must be a JSON object; got {type(parsed).__name__}. {_FIX}"
        )
    metadata = parsed.pop("__metadata__", None)
    metadata = {} if metadata is None else metadata
    if not isinstance(metadata, dict) or not all(isinstance(v, str) for v in metadata.values()):
        raise CheckpointFormatError(
            f"{src.name!r}: __metadata__ must map strings to strings; got {describe(metadata)}. {_FIX}"
        )
    data_offset = 8 + n
    entries = {key: _entry(src, key, info, data_offset) for key, info in parsed.items()}
    _check_tiling(src, entries, src.size - data_offset)
    return SafetensorsHeader(MappingProxyType(entries), data_offset, MappingProxyType(dict(metadata)))


def read_tensor(src: ByteSource, header: SafetensorsHeader, key: str) -> torch.Tensor:
    """Read exactly the bytes of ``key`` and return them as a CPU tensor in the stored dtype and shape.

    Raises:
        MissingTensorError: ``key`` is not in the header (the message lists the keys it has).
    """
    select_key(header.entries, key=key, source=src.name)
    code, shape, (begin, _end) = header.entries[key]  # end - begin == prod(shape) * itemsize (checked)
    offset = header.data_offset + begin

    def fill(buf: memoryview) -> None:
        read_into(src, offset, buf)  # straight into the tensor's memory: no intermediate bytes

    return tensor_from_buffer(fill, SAFETENSORS_DTYPES[code], shape, little_endian=True)

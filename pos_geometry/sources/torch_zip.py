"""PyTorch >= 1.6 zip checkpoints (``pytorch_model.bin``, ``*.pt``), read without ``torch.load``.

``torch.save`` writes a ZIP archive ``<prefix>/data.pkl`` (the pickled object, usually a
state dict), ``<prefix>/byteorder`` and one uncompressed record ``<prefix>/data/<key>`` per
storage. ``data.pkl`` is decoded by the RESTRICTED, bounded unpickler of
:mod:`pos_geometry.sources._pickle`, which maps the few globals a state dict needs to inert
stand-ins that merely record (storage key, dtype, offset, shape, stride); torch's own rebuild
functions are never called, and any other global raises :class:`UnsafeCheckpointError`
before anything runs. Each view is checked against the bytes actually in its record before
anything is allocated.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass
from types import MappingProxyType
from typing import Any

import torch

from pos_geometry._describe import describe, printable
from pos_geometry.errors import CheckpointFormatError, InvalidArgumentError
from pos_geometry.sources._pickle import FIX as _FIX
from pos_geometry.sources._pickle import TensorRef, unpickle
from pos_geometry.sources._zip import ZipEntry, check_member, read_directory, read_member, read_member_into
from pos_geometry.sources.byte_source import ByteSource
from pos_geometry.sources.keys import select_key
from pos_geometry.sources.tensor_record import tensor_from_buffer

__all__ = ["TorchZipIndex", "TensorRef", "read_index", "tensor_keys", "read_tensor", "MAX_PICKLE_BYTES"]

MAX_PICKLE_BYTES = 16 * 1024 * 1024
"""The largest ``data.pkl`` read (a state dict needs about 100 bytes per tensor: 150k tensors fit)."""
_MAX_DEPTH = 8


@dataclass(frozen=True)
class TorchZipIndex:
    """What :func:`read_index` learned: the ZIP members and where each tensor lives.

    Attributes:
        entries: member name -> :class:`ZipEntry` (offset, sizes, compression method).
        prefix: the archive's top folder (``"archive"``, or the file stem for older torch).
        tensors: state-dict key -> :class:`TensorRef`; nested dicts are flattened with ``"."``
            (``{"model": {"wpe.weight": t}}`` -> ``"model.wpe.weight"``).
        little_endian: the ``byteorder`` record (absent means little-endian).
    """

    entries: Mapping[str, ZipEntry]
    prefix: str
    tensors: Mapping[str, TensorRef]
    little_endian: bool = True


def _flatten(
    obj: Any, prefix: str, out: dict[str, TensorRef], depth: int, seen: set[int], clashes: set[str]
) -> None:
    """Collect tensor refs from nested dicts. Each dict is visited once (a pickle can alias one dict
    many times to make a naive walk exponential); ``dict.items`` is called unbound because BUILD
    may have planted an ``items`` attribute on an unpickled OrderedDict; non-string keys are skipped.
    A name reached twice (``{"a.b": t, "a": {"b": u}}``) keeps its first tensor and goes to ``clashes``."""
    if isinstance(obj, TensorRef):
        if prefix in out:
            clashes.add(prefix)
            return
        out[prefix] = obj
    elif isinstance(obj, dict) and depth < _MAX_DEPTH and id(obj) not in seen:
        seen.add(id(obj))
        for k, v in dict.items(obj):
            if isinstance(k, str):
                _flatten(v, f"{prefix}.{k}" if prefix else k, out, depth + 1, seen, clashes)


def read_index(src: ByteSource) -> TorchZipIndex:
    """Read the end-of-central-directory records, the central directory, ``data.pkl`` and ``byteorder``.

    Raises:
        CheckpointFormatError: not a ZIP, no ``data.pkl``, damaged records, oversized ``data.pkl``,
            a root object that is not a dict, an unknown ``byteorder``.
        UnsafeCheckpointError: ``data.pkl`` names a global outside the allow-list (nothing runs).
    """
    entries = read_directory(src)
    pickles = [n for n in entries if n.endswith("/data.pkl") and n.count("/") == 1]
    if len(pickles) != 1:
        raise CheckpointFormatError(
            f"{src.name!r} is a ZIP archive but not a PyTorch checkpoint: expected one '<prefix>/data.pkl' "
            f"member, found {len(pickles)} among {sorted(entries)[:10]}. {_FIX}"
        )
    prefix = pickles[0][: -len("/data.pkl")]
    entry = entries[pickles[0]]
    if entry.size > MAX_PICKLE_BYTES:
        raise CheckpointFormatError(
            f"{src.name!r}: data.pkl is {entry.size} bytes, more than the {MAX_PICKLE_BYTES} a state dict "
            f"needs; the file is corrupted or not a plain state dict. {_FIX}"
        )
    root = unpickle(read_member(src, entry), src.name)
    if not isinstance(root, dict):
        raise CheckpointFormatError(
            f"{src.name!r}: data.pkl holds a {type(root).__name__}, not a state dict (a dict of tensors). {_FIX}"
        )
    little = True
    order = entries.get(f"{prefix}/byteorder")
    if order is not None:
        value = read_member(src, order) if order.size <= 16 else b"?" * 17
        if value not in (b"little", b"big"):
            raise CheckpointFormatError(
                f"{src.name!r}: byteorder record is {value[:16]!r}, not 'little' or 'big'. {_FIX}"
            )
        little = value == b"little"
    tensors: dict[str, TensorRef] = {}
    clashes: set[str] = set()
    _flatten(root, "", tensors, 0, set(), clashes)
    for name in clashes:  # torch.load, and so transformers, gives the top-level tensor under its own name
        top = dict.get(root, name)
        if isinstance(top, TensorRef):
            tensors[name] = top
    ambiguous = sorted(n for n in clashes if not isinstance(dict.get(root, n), TensorRef))
    if ambiguous:
        raise CheckpointFormatError(
            f"{src.name!r}: {len(ambiguous)} key(s) name two nested tensors once flattened (e.g. "
            f"{printable(ambiguous[0], 80)!r}); which one is meant is ambiguous, and torch.load would give "
            f"neither under that name. Re-save the state dict flat (one tensor per key). {_FIX}"
        )
    return TorchZipIndex(MappingProxyType(entries), prefix, MappingProxyType(tensors), little)


def tensor_keys(index: TorchZipIndex) -> tuple[str, ...]:
    """The (flattened) state-dict keys that hold tensors, in file order."""
    return tuple(index.tensors)


def _check_view(where: str, ref: TensorRef) -> int:
    """The view's extent (elements from its offset to its last element), after checking it. The view must not repeat elements (no zero or overlapping strides: a table row never shares
    its numbers with another) and must lie inside its storage. Then the elements read are at most
    those of the storage, which fits its record: a view cannot allocate more than the file holds."""
    need = 1
    for stride, n in sorted((s, n) for n, s in zip(ref.shape, ref.stride, strict=True) if n > 1):
        if stride < need:
            raise CheckpointFormatError(
                f"{where}: shape {ref.shape} with stride {ref.stride} has zero or overlapping strides, so "
                "elements would repeat; a stored tensor never does. The file is corrupted or hostile. " + _FIX
            )
        need = stride * n
    extent = 1 + sum((n - 1) * s for n, s in zip(ref.shape, ref.stride, strict=True))
    if ref.offset + extent > ref.storage_numel:
        raise CheckpointFormatError(
            f"{where}: shape {ref.shape}, stride {ref.stride} at offset {ref.offset} needs elements up to "
            f"{ref.offset + extent} of a storage of {ref.storage_numel}. {_FIX}"
        )
    return extent


def read_tensor(
    src: ByteSource, index: TorchZipIndex, key: str, rows: tuple[int, int] | None = None
) -> torch.Tensor:
    """Read ``key``'s tensor from its storage record: only the bytes it spans (exactly its own
    bytes when it is contiguous). Views (``storage_offset``, strides) are honoured; the result
    is a contiguous CPU tensor in the stored dtype and shape.

    ``rows=(start, stop)`` reads only rows ``[start, stop)`` of the first dimension, shape
    ``(stop - start, *shape[1:])``: the view moved by ``start`` first-dimension strides, so
    only those rows' bytes are read (one head of a fused projection, say).

    Raises:
        MissingTensorError: ``key`` is not in the state dict.
        CheckpointFormatError: the storage record is missing, compressed, or smaller than its storage;
            the view has zero or overlapping strides or runs past its storage.
        InvalidArgumentError: ``rows`` is not within the tensor's first dimension.
    """
    select_key(index.tensors, key=key, source=src.name)
    ref = index.tensors[key]
    where = f"{src.name!r}: tensor {key!r}"
    if rows is not None:
        start, stop = rows
        if not ref.shape or not 0 <= start <= stop <= ref.shape[0]:
            raise InvalidArgumentError(
                f"rows [{start}, {stop}) are not within the first dimension of {key!r} (shape {ref.shape})."
            )
        ref = ref._replace(offset=ref.offset + start * ref.stride[0], shape=(stop - start, *ref.shape[1:]))
    record = index.entries.get(f"{index.prefix}/data/{ref.storage}")
    if record is None:
        raise CheckpointFormatError(
            f"{where} refers to storage {describe(ref.storage)}, which has no data record. {_FIX}"
        )
    itemsize = ref.dtype.itemsize
    if ref.storage_numel * itemsize > record.size:
        raise CheckpointFormatError(
            f"{where}: its storage declares {ref.storage_numel} elements ({ref.storage_numel * itemsize} bytes) "
            f"but the record holds {record.size} bytes. {_FIX}"
        )
    numel = math.prod(ref.shape)
    if numel == 0:
        return torch.empty(ref.shape, dtype=ref.dtype)
    extent = _check_view(where, ref)
    contiguous, expected = True, 1
    for n, s in zip(reversed(ref.shape), reversed(ref.stride), strict=True):
        if n != 1 and s != expected:
            contiguous = False
        expected *= n
    # validated before the tensor is allocated: a damaged record size cannot cause a huge allocation
    check_member(src, record, ref.offset * itemsize, (numel if contiguous else extent) * itemsize)

    def fill(buf: memoryview) -> None:  # straight from the record into the tensor's memory
        read_member_into(src, record, ref.offset * itemsize, buf)

    if contiguous:
        return tensor_from_buffer(fill, ref.dtype, ref.shape, little_endian=index.little_endian)
    flat = tensor_from_buffer(fill, ref.dtype, (extent,), little_endian=index.little_endian)
    return torch.as_strided(flat, ref.shape, ref.stride).contiguous()

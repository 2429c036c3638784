"""PyTorch >= 1.6 zip checkpoints (``pytorch_model.bin``, ``*.pt``), read without ``torch.load``.

``torch.save`` writes a ZIP archive ``<prefix>/data.pkl`` (the pickled object, usually a
state dict), ``<prefix>/byteorder`` and one uncompressed record ``<prefix>/data/<key>`` per
storage. ``data.pkl`` is decoded by a RESTRICTED unpickler: the only globals it may name are
``collections.OrderedDict``, torch's tensor/parameter rebuild functions and the typed storage
classes, and each is mapped to an inert stand-in here that merely records
(storage key, dtype, offset, shape, stride). torch's own rebuild functions are never called;
any other global raises :class:`UnsafeCheckpointError` before anything runs.
"""

from __future__ import annotations

import collections
import io
import math
import pickle
import pickletools
from collections.abc import Mapping
from dataclasses import dataclass
from types import MappingProxyType
from typing import Any, NamedTuple

import torch

from pos_geometry.errors import CheckpointFormatError, PosGeometryError, UnsafeCheckpointError
from pos_geometry.sources._zip import ZipEntry, check_member, read_directory, read_member, read_member_into
from pos_geometry.sources.byte_source import ByteSource
from pos_geometry.sources.keys import select_key
from pos_geometry.sources.tensor_record import tensor_from_buffer

__all__ = ["TorchZipIndex", "TensorRef", "read_index", "tensor_keys", "read_tensor", "MAX_PICKLE_BYTES"]

MAX_PICKLE_BYTES = 64 * 1024 * 1024
_MAX_DEPTH = 8
_MAX_NDIM = 32
_FIX = "Re-download the file, or load it with a trusted torch and re-save it (torch.save or safetensors)."

_STORAGE_DTYPES: dict[str, torch.dtype] = {
    "DoubleStorage": torch.float64,
    "FloatStorage": torch.float32,
    "HalfStorage": torch.float16,
    "BFloat16Storage": torch.bfloat16,
    "LongStorage": torch.int64,
    "IntStorage": torch.int32,
    "ShortStorage": torch.int16,
    "CharStorage": torch.int8,
    "ByteStorage": torch.uint8,
    "BoolStorage": torch.bool,
    "ComplexDoubleStorage": torch.complex128,
    "ComplexFloatStorage": torch.complex64,
}


class _StorageRef(NamedTuple):
    key: str
    dtype: torch.dtype
    numel: int


class TensorRef(NamedTuple):
    """Where a tensor lives: ``shape``/``stride``/``offset`` in elements of storage ``storage``."""

    storage: str
    dtype: torch.dtype
    storage_numel: int
    offset: int
    shape: tuple[int, ...]
    stride: tuple[int, ...]


def _int_tuple(value: Any, what: str) -> tuple[int, ...]:
    if not isinstance(value, tuple | list | torch.Size) or len(value) > _MAX_NDIM:
        raise CheckpointFormatError(f"data.pkl gives a tensor {what} of {value!r:.80}. {_FIX}")
    if not all(isinstance(v, int) and not isinstance(v, bool) and 0 <= v < 2**62 for v in value):
        raise CheckpointFormatError(
            f"data.pkl gives a tensor {what} {value!r:.80} with a negative or huge entry. {_FIX}"
        )
    return tuple(value)


def _rebuild_tensor(storage: Any, storage_offset: Any, size: Any, stride: Any, *_ignored: Any) -> TensorRef:
    """Inert stand-in for ``torch._utils._rebuild_tensor(_v2)``: records where the tensor lives."""
    if not isinstance(storage, _StorageRef):
        raise CheckpointFormatError(
            f"data.pkl rebuilds a tensor from {type(storage).__name__}, not a storage. {_FIX}"
        )
    if not isinstance(storage_offset, int) or isinstance(storage_offset, bool) or storage_offset < 0:
        raise CheckpointFormatError(
            f"data.pkl gives a tensor storage offset of {storage_offset!r:.40}. {_FIX}"
        )
    shape, strides = _int_tuple(size, "shape"), _int_tuple(stride, "stride")
    if len(shape) != len(strides):
        raise CheckpointFormatError(f"data.pkl gives a tensor shape {shape} with strides {strides}. {_FIX}")
    return TensorRef(storage.key, storage.dtype, storage.numel, storage_offset, shape, strides)


def _rebuild_parameter(data: Any, *_ignored: Any) -> TensorRef:
    """Inert stand-in for ``torch._utils._rebuild_parameter(_with_state)``: a Parameter is its tensor."""
    if not isinstance(data, TensorRef):
        raise CheckpointFormatError(
            f"data.pkl wraps {type(data).__name__} in a Parameter, not a tensor. {_FIX}"
        )
    return data


_ALLOWED: dict[tuple[str, str], Any] = {
    ("collections", "OrderedDict"): collections.OrderedDict,
    ("torch._utils", "_rebuild_tensor"): _rebuild_tensor,
    ("torch._utils", "_rebuild_tensor_v2"): _rebuild_tensor,
    ("torch._utils", "_rebuild_parameter"): _rebuild_parameter,
    ("torch._utils", "_rebuild_parameter_with_state"): _rebuild_parameter,
    **{("torch", name): dtype for name, dtype in _STORAGE_DTYPES.items()},
}


class _RestrictedUnpickler(pickle.Unpickler):
    """Resolves only the globals in ``_ALLOWED`` (to inert stand-ins); storages become :class:`_StorageRef`."""

    def __init__(self, data: bytes, source: str):
        super().__init__(io.BytesIO(data))
        self._source = source

    def find_class(self, module: str, name: str) -> Any:
        try:
            return _ALLOWED[(module, name)]
        except (KeyError, TypeError):
            raise _refuse(module, name, self._source) from None

    def persistent_load(self, pid: Any) -> _StorageRef:
        ok = (
            isinstance(pid, tuple)
            and len(pid) == 5
            and pid[0] == "storage"
            and isinstance(pid[1], torch.dtype)
            and isinstance(pid[2], str)
            and isinstance(pid[4], int)
            and not isinstance(pid[4], bool)
            and 0 <= pid[4] < 2**62
        )
        if not ok:
            raise CheckpointFormatError(
                f"{self._source!r}: data.pkl has a malformed storage reference {pid!r:.120}. {_FIX}"
            )
        return _StorageRef(pid[2], pid[1], pid[4])


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


def _flatten(obj: Any, prefix: str, out: dict[str, TensorRef], depth: int, seen: set[int]) -> None:
    """Collect tensor refs from nested dicts. Each dict is visited once (a pickle can alias one dict
    many times to make a naive walk exponential); ``dict.items`` is called unbound because BUILD
    may have planted an ``items`` attribute on an unpickled OrderedDict; non-string keys are skipped."""
    if isinstance(obj, TensorRef):
        out[prefix] = obj
    elif isinstance(obj, dict) and depth < _MAX_DEPTH and id(obj) not in seen:
        seen.add(id(obj))
        for k, v in dict.items(obj):
            if isinstance(k, str):
                _flatten(v, f"{prefix}.{k}" if prefix else k, out, depth + 1, seen)


def _refuse(module: str, name: str, source: str) -> UnsafeCheckpointError:
    return UnsafeCheckpointError(
        f"{source!r}: data.pkl asks for the global {module}.{name}, which a state dict of tensors "
        "never needs; it was refused and nothing was executed. Only load checkpoints you trust, and "
        "prefer .safetensors files (or re-save this one from a trusted environment)."
    )


def _prescan(data: bytes, source: str) -> None:
    """Walk the opcodes without executing any (``pickletools.genops``): every length-prefixed
    argument must fit in the data (so the unpickler never pre-allocates a huge buffer on a
    forged length), and every GLOBAL/INST name must be allowed — refused here, before the
    unpickler runs at all. STACK_GLOBAL names are checked by ``find_class``."""
    try:
        for opcode, arg, _ in pickletools.genops(data):
            if opcode.name in ("GLOBAL", "INST"):
                module, _, name = str(arg).partition(" ")
                if (module, name) not in _ALLOWED:
                    raise _refuse(module, name, source)
    except PosGeometryError:
        raise
    except Exception as exc:  # ValueError on bad opcodes/short data; others on damaged text arguments
        raise CheckpointFormatError(
            f"{source!r}: data.pkl is corrupted ({type(exc).__name__}: {exc!s:.200}). {_FIX}"
        ) from exc


def _unpickle(data: bytes, source: str) -> Any:
    _prescan(data, source)
    try:
        return _RestrictedUnpickler(data, source).load()
    except PosGeometryError:
        raise
    except Exception as exc:  # the pickle VM raises many types on damaged input; all mean "corrupted"
        raise CheckpointFormatError(
            f"{source!r}: data.pkl is corrupted ({type(exc).__name__}: {exc!s:.200}). {_FIX}"
        ) from exc


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
    root = _unpickle(read_member(src, entry), src.name)
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
    _flatten(root, "", tensors, 0, set())
    return TorchZipIndex(MappingProxyType(entries), prefix, MappingProxyType(tensors), little)


def tensor_keys(index: TorchZipIndex) -> tuple[str, ...]:
    """The (flattened) state-dict keys that hold tensors, in file order."""
    return tuple(index.tensors)


def read_tensor(src: ByteSource, index: TorchZipIndex, key: str) -> torch.Tensor:
    """Read ``key``'s tensor from its storage record: only the bytes it spans (exactly its own
    bytes when it is contiguous). Views (``storage_offset``, strides) are honoured; the result
    is a contiguous CPU tensor in the stored dtype and shape.

    Raises:
        MissingTensorError: ``key`` is not in the state dict.
        CheckpointFormatError: the storage record is missing, compressed, or too small for the view.
    """
    select_key(index.tensors, key=key, source=src.name)
    ref = index.tensors[key]
    where = f"{src.name!r}: tensor {key!r}"
    record = index.entries.get(f"{index.prefix}/data/{ref.storage}")
    if record is None:
        raise CheckpointFormatError(
            f"{where} refers to storage {ref.storage!r:.40}, which has no data record. {_FIX}"
        )
    itemsize = torch.empty((), dtype=ref.dtype).element_size()
    numel = math.prod(ref.shape)
    if numel == 0:
        return torch.empty(ref.shape, dtype=ref.dtype)
    extent = 1 + sum((n - 1) * s for n, s in zip(ref.shape, ref.stride, strict=True))
    if numel > ref.storage_numel or ref.offset + extent > min(ref.storage_numel, record.size // itemsize):
        raise CheckpointFormatError(
            f"{where}: shape {ref.shape}, stride {ref.stride} at offset {ref.offset} needs elements up to "
            f"{ref.offset + extent} of a storage of {ref.storage_numel} ({record.size} bytes on disk), "
            f"or more elements than the storage holds. {_FIX}"
        )
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

"""The restricted, bounded unpickler for the ``data.pkl`` of PyTorch zip checkpoints.

The only globals a pickle may name are ``collections.OrderedDict``, torch's tensor/parameter
rebuild functions and the typed storage classes. Each maps to an inert stand-in defined here
that merely records (storage key, dtype, offset, shape, stride); torch's own functions are
never called, and any other global raises :class:`UnsafeCheckpointError` before anything runs.

The stand-ins refuse ``BUILD`` (``__setstate__``), so a pickle cannot set attributes on them,
on this module's functions or on torch objects. Before the unpickler runs, every opcode is
walked without executing any (:func:`prescan`): the number of opcodes, of containers and the
memo indices are bounded (:data:`MAX_OPCODES`, :data:`MAX_CONTAINERS`), so a small file cannot
make the unpickler allocate gigabytes. Error messages describe untrusted values with
:func:`~pos_geometry._describe.describe`, never with an unbounded ``repr``.
"""

from __future__ import annotations

import io
import pickle
import pickletools
from collections.abc import Callable
from typing import Any, NamedTuple

import torch

from pos_geometry._describe import describe, describe_exception
from pos_geometry.errors import CheckpointFormatError, PosGeometryError, UnsafeCheckpointError

__all__ = ["TensorRef", "StorageRef", "unpickle", "MAX_OPCODES", "MAX_CONTAINERS"]

MAX_OPCODES = 1 << 22
"""Opcodes a ``data.pkl`` may hold (a state dict needs about 35 per tensor: 100k tensors fit)."""
MAX_CONTAINERS = 1 << 18
"""Tuples, lists, dicts, sets and calls a ``data.pkl`` may build (about 5 per tensor)."""
_MAX_NDIM = 32
FIX = "Re-download the file, or load it with a trusted torch and re-save it (torch.save or safetensors)."

STORAGE_DTYPES: dict[str, torch.dtype] = {
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

_CONTAINER_OPS = frozenset(
    [
        "EMPTY_LIST",
        "EMPTY_DICT",
        "EMPTY_SET",
        "LIST",
        "DICT",
        "TUPLE",
        "TUPLE1",
        "TUPLE2",
        "TUPLE3",
        "FROZENSET",
        "REDUCE",
        "NEWOBJ",
        "NEWOBJ_EX",
        "OBJ",
        "INST",
    ]
)
_PUT_OPS = frozenset(("PUT", "BINPUT", "LONG_BINPUT"))


class StorageRef(NamedTuple):
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


def _no_build(name: str) -> UnsafeCheckpointError:
    return UnsafeCheckpointError(
        f"data.pkl tries to set the state of {name} (a BUILD opcode), which a state dict of tensors never "
        "does; it was refused and nothing was changed. Only load checkpoints you trust."
    )


class _Inert:
    """An allowed global: calls its stand-in, and refuses ``BUILD`` so the pickle cannot mutate it."""

    __slots__ = ("_call", "_name")

    def __init__(self, name: str, call: Callable[..., Any]):
        self._name, self._call = name, call

    def __call__(self, *args: Any) -> Any:
        return self._call(*args)

    def __setstate__(self, state: Any) -> None:
        raise _no_build(self._name)


class _StorageType:
    """A typed storage class (``torch.FloatStorage``...): only named in a storage reference."""

    __slots__ = ("dtype", "name")

    def __init__(self, name: str, dtype: torch.dtype):
        self.name, self.dtype = name, dtype

    def __setstate__(self, state: Any) -> None:
        raise _no_build(f"torch.{self.name}")


class _StateDict(dict):
    """What ``collections.OrderedDict()`` becomes. ``BUILD`` with a dict (torch's ``_metadata``) is
    accepted and ignored; anything else is refused."""

    def __setstate__(self, state: Any) -> None:
        if not isinstance(state, dict):
            raise _no_build(f"an OrderedDict (with a {type(state).__name__})")


def _int_tuple(value: Any, what: str) -> tuple[int, ...]:
    if not isinstance(value, tuple | list | torch.Size) or len(value) > _MAX_NDIM:
        raise CheckpointFormatError(f"data.pkl gives a tensor {what} of {describe(value)}. {FIX}")
    if not all(isinstance(v, int) and not isinstance(v, bool) and 0 <= v < 2**62 for v in value):
        raise CheckpointFormatError(
            f"data.pkl gives a tensor {what} {describe(value)} with a negative, huge or non-integer entry. {FIX}"
        )
    return tuple(value)


def _rebuild_tensor(storage: Any, storage_offset: Any, size: Any, stride: Any, *_ignored: Any) -> TensorRef:
    """Inert stand-in for ``torch._utils._rebuild_tensor(_v2)``: records where the tensor lives."""
    if not isinstance(storage, StorageRef):
        raise CheckpointFormatError(
            f"data.pkl rebuilds a tensor from {type(storage).__name__}, not a storage. {FIX}"
        )
    if (
        not isinstance(storage_offset, int)
        or isinstance(storage_offset, bool)
        or not 0 <= storage_offset < 2**62
    ):
        raise CheckpointFormatError(
            f"data.pkl gives a tensor storage offset of {describe(storage_offset)}. {FIX}"
        )
    shape, strides = _int_tuple(size, "shape"), _int_tuple(stride, "stride")
    if len(shape) != len(strides):
        raise CheckpointFormatError(f"data.pkl gives a tensor shape {shape} with strides {strides}. {FIX}")
    return TensorRef(storage.key, storage.dtype, storage.numel, storage_offset, shape, strides)


def _rebuild_parameter(data: Any, *_ignored: Any) -> TensorRef:
    """Inert stand-in for ``torch._utils._rebuild_parameter(_with_state)``: a Parameter is its tensor."""
    if not isinstance(data, TensorRef):
        raise CheckpointFormatError(
            f"data.pkl wraps {type(data).__name__} in a Parameter, not a tensor. {FIX}"
        )
    return data


def _ordered_dict(*args: Any) -> _StateDict:
    """Stand-in for ``collections.OrderedDict``: torch.save always calls it without arguments
    (items follow with SETITEMS), so copying an argument (which can make a small pickle do
    quadratic work) is refused."""
    if args:
        raise CheckpointFormatError(
            f"data.pkl calls OrderedDict with {len(args)} argument(s); torch.save never does. {FIX}"
        )
    return _StateDict()


ALLOWED: dict[tuple[str, str], Any] = {
    ("collections", "OrderedDict"): _Inert("collections.OrderedDict", _ordered_dict),
    ("torch._utils", "_rebuild_tensor"): _Inert("torch._utils._rebuild_tensor", _rebuild_tensor),
    ("torch._utils", "_rebuild_tensor_v2"): _Inert("torch._utils._rebuild_tensor_v2", _rebuild_tensor),
    ("torch._utils", "_rebuild_parameter"): _Inert("torch._utils._rebuild_parameter", _rebuild_parameter),
    ("torch._utils", "_rebuild_parameter_with_state"): _Inert(
        "torch._utils._rebuild_parameter_with_state", _rebuild_parameter
    ),
    **{("torch", name): _StorageType(name, dtype) for name, dtype in STORAGE_DTYPES.items()},
}


def refuse(module: str, name: str, source: str) -> UnsafeCheckpointError:
    return UnsafeCheckpointError(
        f"{source!r}: data.pkl asks for the global {module[:100]}.{name[:100]}, which a state dict of "
        "tensors never needs; it was refused and nothing was executed. Only load checkpoints you trust, and "
        "prefer .safetensors files (or re-save this one from a trusted environment)."
    )


class _RestrictedUnpickler(pickle.Unpickler):
    """Resolves only the globals in ``ALLOWED`` (to inert stand-ins); storages become :class:`StorageRef`."""

    def __init__(self, data: bytes, source: str):
        super().__init__(io.BytesIO(data))
        self._source = source

    def find_class(self, module: str, name: str) -> Any:
        try:
            return ALLOWED[(module, name)]
        except (KeyError, TypeError):
            raise refuse(str(module), str(name), self._source) from None

    def persistent_load(self, pid: Any) -> StorageRef:
        ok = (
            type(pid) is tuple
            and len(pid) == 5
            and pid[0] == "storage"
            and isinstance(pid[1], _StorageType)
            and isinstance(pid[2], str)
            and isinstance(pid[4], int)
            and not isinstance(pid[4], bool)
            and 0 <= pid[4] < 2**62
        )
        if not ok:
            raise CheckpointFormatError(
                f"{self._source!r}: data.pkl has a malformed storage reference {describe(pid)}. {FIX}"
            )
        return StorageRef(pid[2], pid[1].dtype, pid[4])


def _corrupted(source: str, exc: BaseException) -> CheckpointFormatError:
    return CheckpointFormatError(f"{source!r}: data.pkl is corrupted ({describe_exception(exc)}). {FIX}")


def _too_many(source: str, what: str, limit: int) -> CheckpointFormatError:
    return CheckpointFormatError(
        f"{source!r}: data.pkl holds more than {limit} {what}, more than a state dict of 50,000 tensors "
        f"needs; it is refused before it is decoded (a small pickle can otherwise take gigabytes). {FIX}"
    )


def prescan(data: bytes, source: str) -> None:
    """Walk the opcodes without executing any (``pickletools.genops``).

    Every length-prefixed argument must fit in the data (so the unpickler never pre-allocates
    a huge buffer on a forged length); every GLOBAL/INST name must be allowed (STACK_GLOBAL
    names are checked by ``find_class``); at most :data:`MAX_OPCODES` opcodes and
    :data:`MAX_CONTAINERS` container-building ones; a memo index (PUT) at most the number of
    opcodes read so far (the unpickler sizes its memo by the largest index).
    """
    opcodes = containers = 0
    try:
        for opcode, arg, _ in pickletools.genops(data):
            opcodes += 1
            name = opcode.name
            if opcodes > MAX_OPCODES:
                raise _too_many(source, "opcodes", MAX_OPCODES)
            if name in _CONTAINER_OPS:
                containers += 1
                if containers > MAX_CONTAINERS:
                    raise _too_many(source, "containers and calls", MAX_CONTAINERS)
            if name in ("GLOBAL", "INST"):
                module, _, attr = str(arg).partition(" ")
                if (module, attr) not in ALLOWED:
                    raise refuse(module, attr, source)
            elif name in _PUT_OPS and not (isinstance(arg, int) and 0 <= arg <= opcodes):
                raise CheckpointFormatError(
                    f"{source!r}: data.pkl stores to memo slot {describe(arg)} after {opcodes} opcodes; a "
                    f"pickle numbers its memo slots in order. {FIX}"
                )
    except PosGeometryError:
        raise
    except Exception as exc:  # ValueError on bad opcodes/short data; others on damaged text arguments
        raise _corrupted(source, exc) from None


def unpickle(data: bytes, source: str) -> Any:
    """Decode ``data.pkl`` with the restricted unpickler, after :func:`prescan`."""
    prescan(data, source)
    try:
        return _RestrictedUnpickler(data, source).load()
    except PosGeometryError:
        raise
    except Exception as exc:  # the pickle VM raises many types on damaged input; all mean "corrupted"
        raise _corrupted(source, exc) from None  # not chained: its arguments may be hostile objects

"""What every checkpoint reader returns: one tensor, exactly as stored, and where it came from."""

from __future__ import annotations

import math
import sys
from collections.abc import Callable
from dataclasses import dataclass
from typing import Literal

import torch

from pos_geometry._dtypes import dtype_name
from pos_geometry._limits import check_elements
from pos_geometry.errors import InvalidArgumentError

__all__ = [
    "TensorRecord",
    "Which",
    "WHICH",
    "dtype_name",
    "check_which",
    "tensor_from_buffer",
    "tensor_from_bytes",
]

Which = Literal["position", "token"]
WHICH: tuple[str, ...] = ("position", "token")


def check_which(which: str) -> None:
    """Raise :class:`InvalidArgumentError` unless ``which`` is ``"position"`` or ``"token"``."""
    if which not in WHICH:
        raise InvalidArgumentError(
            f"which must be one of {WHICH} (the positional table or the token-embedding table); "
            f"got {which!r}."
        )


@dataclass(frozen=True, eq=False)
class TensorRecord:
    """One tensor read from a checkpoint.

    Attributes:
        tensor: on CPU, in the STORED dtype (fp16 stays fp16, bf16 stays bf16), with the stored
            shape — for a positional table ``(n_rows, d_model)``; bit-identical to what was saved.
        key: the checkpoint key it was read from, e.g. ``"transformer.wpe.weight"``
            (``""`` for a bare ``.npy`` file, which has no keys).
        file: the file it came from (a path, or a repo-relative filename for hub reads).
        dtype: the stored dtype name: ``"float16"``, ``"float32"``, ``"bfloat16"``, ...
        available_keys: the keys the file holds (for messages); may be empty.
        origin: where the file was read, when not a path the user gave: ``"pos_geometry cache"``,
            ``"HF cache"`` or the hub endpoint (``""`` for local files).
    """

    tensor: torch.Tensor
    key: str
    file: str
    dtype: str
    available_keys: tuple[str, ...] = ()
    origin: str = ""


def tensor_from_buffer(
    fill: Callable[[memoryview], None],
    dtype: torch.dtype,
    shape: tuple[int, ...],
    *,
    little_endian: bool = True,
) -> torch.Tensor:
    """A CPU tensor of ``dtype`` and ``shape`` whose bytes ``fill`` writes in place.

    The tensor's memory is allocated once (``prod(shape) * itemsize`` bytes) and handed to
    ``fill`` as a writable byte ``memoryview`` (e.g. ``lambda buf: read_into(src, offset, buf)``),
    so the bytes are never held twice. ``little_endian`` says how they are stored; they are
    byte-swapped (one extra copy) when that differs from this machine.
    """
    nbytes = math.prod(shape) * dtype.itemsize
    if nbytes == 0:
        return torch.empty(shape, dtype=dtype)
    check_elements(
        f"a {dtype_name(dtype)} tensor read from a checkpoint", tuple(shape),
        "Check the file: a declared shape this large is rarely a positional table or a q/k weight.",
    )  # fmt: skip
    raw = torch.empty(nbytes, dtype=torch.uint8)
    fill(memoryview(raw.numpy()))
    if little_endian != (sys.byteorder == "little") and dtype.itemsize > 1:
        raw = raw.reshape(-1, dtype.itemsize).flip(1).reshape(-1)
    if dtype == torch.bool:  # only 0/1 bytes are valid bools in torch; normalise instead of trusting the file
        return (raw != 0).reshape(shape)
    return raw.view(dtype).reshape(shape)


def tensor_from_bytes(
    data: bytes, dtype: torch.dtype, shape: tuple[int, ...], *, little_endian: bool = True
) -> torch.Tensor:
    """A CPU tensor of ``dtype`` and ``shape`` whose memory is exactly ``data`` (a copy, writable).

    ``little_endian`` says how ``data`` is stored; it is byte-swapped when that differs
    from this machine. ``len(data)`` must equal ``prod(shape) * itemsize`` (checked by the callers).
    """

    def fill(buf: memoryview) -> None:
        buf[:] = data

    return tensor_from_buffer(fill, dtype, shape, little_endian=little_endian)

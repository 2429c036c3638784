"""What every checkpoint reader returns: one tensor, exactly as stored, and where it came from."""

from __future__ import annotations

import sys
from dataclasses import dataclass
from typing import Literal

import torch

from pos_geometry.errors import InvalidArgumentError

__all__ = ["TensorRecord", "Which", "WHICH", "dtype_name", "check_which", "tensor_from_bytes"]

Which = Literal["position", "token"]
WHICH: tuple[str, ...] = ("position", "token")


def dtype_name(dtype: torch.dtype) -> str:
    """``torch.float16`` -> ``"float16"``."""
    return str(dtype).removeprefix("torch.")


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
    """

    tensor: torch.Tensor
    key: str
    file: str
    dtype: str
    available_keys: tuple[str, ...] = ()


def tensor_from_bytes(
    data: bytes, dtype: torch.dtype, shape: tuple[int, ...], *, little_endian: bool = True
) -> torch.Tensor:
    """A CPU tensor of ``dtype`` and ``shape`` whose memory is exactly ``data`` (a copy, writable).

    ``little_endian`` says how ``data`` is stored; it is byte-swapped when that differs
    from this machine. ``len(data)`` must equal ``prod(shape) * itemsize`` (checked by the callers).
    """
    if len(data) == 0:
        return torch.empty(shape, dtype=dtype)
    buf = bytearray(data)
    itemsize = torch.empty((), dtype=dtype).element_size()
    if little_endian != (sys.byteorder == "little") and itemsize > 1:
        raw = torch.frombuffer(buf, dtype=torch.uint8).reshape(-1, itemsize).flip(1).contiguous()
        buf = bytearray(raw.numpy().tobytes())
    if dtype == torch.bool:  # only 0/1 bytes are valid bools in torch; normalise instead of trusting the file
        return (torch.frombuffer(buf, dtype=torch.uint8) != 0).reshape(shape)
    return torch.frombuffer(buf, dtype=dtype).reshape(shape)

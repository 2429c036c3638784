"""Random access to bytes, wherever they live.

Checkpoint parsers (safetensors, PyTorch zip) read through a :class:`ByteSource`,
so the same parser serves a local file and an HTTP range reader: only the bytes
of the header and of the wanted tensor are ever read.

Sources that can also fill a caller's buffer in place (``readinto(offset, buffer)``: a local
file, an in-memory buffer, a slice of either) let :func:`read_into` put a tensor's bytes
straight into the tensor's own memory, with no intermediate ``bytes`` object.
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from typing import Protocol, runtime_checkable

from pos_geometry.errors import CheckpointFormatError

__all__ = ["ByteSource", "FileByteSource", "BytesSource", "read_into"]


@runtime_checkable
class ByteSource(Protocol):
    """Anything that can return ``length`` bytes at ``offset``.

    ``name`` is used in error messages; ``size`` is the total size in bytes;
    ``bytes_read`` counts the bytes actually fetched so far (for benchmarks and tests).
    ``read`` raises :class:`CheckpointFormatError` when fewer bytes exist than asked for.
    """

    name: str
    size: int
    bytes_read: int

    def read(self, offset: int, length: int) -> bytes: ...


def _check_range(src: ByteSource, offset: int, length: int) -> None:
    if offset < 0 or length < 0 or offset + length > src.size:
        raise CheckpointFormatError(
            f"{src.name!r} is truncated or corrupted: a read of {length} bytes at offset {offset} "
            f"goes past its end ({src.size} bytes). Re-download the file."
        )


@dataclass
class FileByteSource:
    """A local file, opened for each read and read at an offset (no memory map, nothing kept open between reads)."""

    path: str | os.PathLike[str]
    name: str = ""
    size: int = 0
    bytes_read: int = field(default=0)

    def __post_init__(self) -> None:
        from pos_geometry._limits import check_regular_file

        self.path = os.fspath(self.path)
        self.name = self.name or self.path
        check_regular_file(self.path, repr(self.name))
        self.size = os.path.getsize(self.path)

    def read(self, offset: int, length: int) -> bytes:
        _check_range(self, offset, length)
        with open(self.path, "rb") as fh:
            fh.seek(offset)
            data = fh.read(length)
        if len(data) != length:
            raise CheckpointFormatError(
                f"{self.name!r} changed while being read (got {len(data)} of {length} bytes at {offset})."
            )
        self.bytes_read += length
        return data

    def readinto(self, offset: int, buffer: memoryview) -> None:
        """Fill ``buffer`` (writable, byte-addressed) with the ``len(buffer)`` bytes at ``offset``."""
        length = buffer.nbytes
        _check_range(self, offset, length)
        done = 0
        with open(self.path, "rb", buffering=0) as fh:
            fh.seek(offset)
            while done < length:
                n = fh.readinto(buffer[done:])
                if not n:
                    raise CheckpointFormatError(
                        f"{self.name!r} changed while being read (got {done} of {length} bytes at {offset})."
                    )
                done += n
        self.bytes_read += length


@dataclass
class BytesSource:
    """An in-memory buffer (tests, fuzzing)."""

    data: bytes
    name: str = "<bytes>"
    size: int = 0
    bytes_read: int = field(default=0)

    def __post_init__(self) -> None:
        self.size = len(self.data)

    def read(self, offset: int, length: int) -> bytes:
        _check_range(self, offset, length)
        self.bytes_read += length
        return bytes(self.data[offset : offset + length])

    def readinto(self, offset: int, buffer: memoryview) -> None:
        """Fill ``buffer`` with the ``len(buffer)`` bytes at ``offset``."""
        length = buffer.nbytes
        _check_range(self, offset, length)
        self.bytes_read += length
        buffer[:] = memoryview(self.data)[offset : offset + length]


def read_into(src: ByteSource, offset: int, buffer: memoryview) -> None:
    """Fill the writable byte buffer ``buffer`` with ``len(buffer)`` bytes of ``src`` at ``offset``.

    Uses ``src.readinto`` when the source has one (no intermediate copy), else ``src.read``
    followed by one copy. Raises :class:`CheckpointFormatError` like ``read``.
    """
    fill = getattr(src, "readinto", None)
    if fill is not None:
        fill(offset, buffer)
    else:
        buffer[:] = src.read(offset, buffer.nbytes)

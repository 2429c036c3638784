"""One weight file of a checkpoint, opened: its header parsed once, its tensors and rows read by offset.

:class:`WeightFile` wraps a :class:`~pos_geometry.sources.byte_source.ByteSource` holding a
safetensors file or a PyTorch zip (``.bin``), local or remote. :class:`PiecewiseReads` is the
remote flavour of a source: long reads in bounded pieces, and whole-tensor streams in one request.
"""

from __future__ import annotations

import math
from collections.abc import Callable

import torch

from pos_geometry.errors import CheckpointFormatError
from pos_geometry.sources import safetensors_format, torch_zip
from pos_geometry.sources.byte_source import ByteSource, read_into
from pos_geometry.sources.local import detect_format
from pos_geometry.sources.tensor_record import tensor_from_buffer

__all__ = ["PiecewiseReads", "WeightFile"]


_PIECE = 8 * 1024 * 1024


class PiecewiseReads:
    """A remote :class:`ByteSource` whose ``readinto`` fetches a long range in 8 MiB pieces.

    The readers fill a tensor's memory through ``readinto`` when a source has one; without it a
    remote tensor would first arrive whole as ``bytes`` (twice its size in memory while joined).
    Pieces keep the extra memory at one piece; the bytes transferred are the same.
    """

    def __init__(self, src: ByteSource) -> None:
        self.src = src
        self.name, self.size = src.name, src.size

    @property
    def bytes_read(self) -> int:
        return self.src.bytes_read

    def read(self, offset: int, length: int) -> bytes:
        return self.src.read(offset, length)

    def readinto(self, offset: int, buffer: memoryview) -> None:
        view = buffer.cast("B")
        for start in range(0, view.nbytes, _PIECE):
            stop = min(start + _PIECE, view.nbytes)
            view[start:stop] = self.src.read(offset + start, stop - start)

    def stream_to(self, offset: int, length: int, sink: Callable[[memoryview], object]) -> None:
        """Bytes ``[offset, offset + length)`` in one request, each body chunk handed to ``sink`` as it arrives."""
        stream = getattr(self.src, "stream_to", None)
        if stream is not None:
            stream(offset, length, sink)
            return
        for start in range(offset, offset + length, _PIECE):
            sink(memoryview(self.src.read(start, min(_PIECE, offset + length - start))))


class WeightFile:
    """One weight file with its parsed header: ``keys`` and ``read(key)``."""

    def __init__(self, src: ByteSource) -> None:
        self.src = src
        self.fmt = detect_format(src)
        if self.fmt == "safetensors":
            self._header = safetensors_format.read_header(src)
            self.keys: tuple[str, ...] = tuple(self._header.entries)
        elif self.fmt == "torch-zip":
            self._index = torch_zip.read_index(src)
            self.keys = torch_zip.tensor_keys(self._index)
        else:
            raise CheckpointFormatError(
                f"{src.name!r} is a {self.fmt} file; model weights are read from safetensors or PyTorch zip files."
            )
        self._keyset = frozenset(self.keys)

    def has(self, key: str) -> bool:
        return key in self._keyset

    def read(self, key: str) -> torch.Tensor:
        if self.fmt == "safetensors":
            return safetensors_format.read_tensor(self.src, self._header, key)
        return torch_zip.read_tensor(self.src, self._index, key)

    def shape(self, key: str) -> tuple[int, ...]:
        if self.fmt == "safetensors":
            return self._header.entries[key][1]
        return tuple(self._index.tensors[key].shape)

    def span(self, key: str) -> tuple[torch.dtype, tuple[int, ...], int] | None:
        """``(dtype, shape, byte offset)`` of a tensor stored contiguously (safetensors), else None."""
        if self.fmt != "safetensors":
            return None
        code, shape, (begin, _end) = self._header.entries[key]
        return safetensors_format.SAFETENSORS_DTYPES[code], shape, self._header.data_offset + begin

    def read_rows(self, key: str, start: int, stop: int) -> torch.Tensor:
        """Rows ``[start, stop)`` of ``key`` along its first dimension, a new tensor: only their bytes."""
        span = self.span(key)
        if span is None:  # a PyTorch zip tensor (maybe a strided view): only the rows' bytes
            return torch_zip.read_tensor(self.src, self._index, key, rows=(start, stop))
        dtype, shape, offset = span
        row = math.prod(shape[1:]) * dtype.itemsize

        def fill(buf: memoryview) -> None:
            read_into(self.src, offset + start * row, buf)

        return tensor_from_buffer(fill, dtype, (stop - start, *shape[1:]), little_endian=True)

"""Reading a tensor's bytes straight into its own memory (``read_into`` / ``tensor_from_buffer``).

The in-place path must give exactly what the ``read``-then-copy path gives, for every source kind
(file, in-memory, ZIP slice, a source with only ``read``), dtype and byte order, and keep the same
typed errors on short or out-of-range reads.
"""

from __future__ import annotations

import numpy as np
import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from pos_geometry.errors import CheckpointFormatError
from pos_geometry.sources._zip import SliceSource
from pos_geometry.sources.byte_source import BytesSource, FileByteSource, read_into
from pos_geometry.sources.tensor_record import tensor_from_buffer, tensor_from_bytes


class ReadOnlySource:
    """A source with ``read`` only (like a remote reader): ``read_into`` must fall back to it."""

    def __init__(self, data: bytes) -> None:
        self.data, self.name, self.size, self.bytes_read = data, "<read-only>", len(data), 0

    def read(self, offset: int, length: int) -> bytes:
        return BytesSource(self.data).read(offset, length)


def _sources(data: bytes, tmp_path):
    path = tmp_path / "blob.bin"
    path.write_bytes(b"xyz" + data + b"tail")
    return {
        "file": (FileByteSource(path), 3),
        "bytes": (BytesSource(data), 0),
        "slice": (SliceSource(BytesSource(b"ab" + data), 2, len(data), name="slice"), 0),
        "read-only": (ReadOnlySource(data), 0),
    }


@settings(max_examples=40, deadline=None)
@given(data=st.binary(min_size=1, max_size=4096), cut=st.data())
def test_read_into_matches_read_for_every_source(tmp_path_factory, data, cut) -> None:
    start = cut.draw(st.integers(0, len(data) - 1))
    length = cut.draw(st.integers(0, len(data) - start))
    for kind, (src, base) in _sources(data, tmp_path_factory.mktemp("s")).items():
        buf = np.full(length, 0xAA, dtype=np.uint8)
        read_into(src, base + start, memoryview(buf))
        assert buf.tobytes() == data[start : start + length], kind


@pytest.mark.parametrize("kind", ["file", "bytes", "slice", "read-only"])
def test_read_into_past_the_end_is_a_format_error(tmp_path, kind) -> None:
    src, _ = _sources(b"0123456789", tmp_path)[kind]
    buf = np.zeros(8, dtype=np.uint8)
    with pytest.raises(CheckpointFormatError, match="past its end"):
        read_into(src, src.size - 4, memoryview(buf))


def test_file_that_shrinks_while_read_is_reported(tmp_path) -> None:
    path = tmp_path / "w.bin"
    path.write_bytes(bytes(range(256)) * 4)
    src = FileByteSource(path)  # size recorded now: 1024 bytes
    path.write_bytes(bytes(100))
    with pytest.raises(CheckpointFormatError, match="changed while being read"):
        read_into(src, 0, memoryview(np.zeros(1024, dtype=np.uint8)))


@pytest.mark.parametrize(
    "dtype", [torch.float16, torch.bfloat16, torch.float32, torch.float64, torch.int64, torch.uint8]
)
@pytest.mark.parametrize("little_endian", [True, False])
def test_tensor_from_buffer_is_bit_exact(dtype, little_endian) -> None:
    gen = torch.Generator().manual_seed(0)
    values = (torch.randn(7, 5, generator=gen) * 100).to(dtype)
    native = values.numpy() if dtype != torch.bfloat16 else values.view(torch.int16).numpy()
    stored = native.astype(native.dtype.newbyteorder("<" if little_endian else ">")).tobytes()

    def fill(buf: memoryview) -> None:
        buf[:] = stored

    out = tensor_from_buffer(fill, dtype, (7, 5), little_endian=little_endian)
    assert out.dtype == dtype and out.shape == (7, 5)
    assert torch.equal(out.view(torch.uint8), values.contiguous().view(torch.uint8))
    assert torch.equal(tensor_from_bytes(stored, dtype, (7, 5), little_endian=little_endian), out)
    assert out.zero_().count_nonzero() == 0  # writable: it owns its memory


def test_tensor_from_buffer_normalises_bools_and_skips_empty() -> None:
    def fill(buf: memoryview) -> None:
        buf[:] = bytes([0, 1, 2, 255])

    assert tensor_from_buffer(fill, torch.bool, (2, 2)).tolist() == [[False, True], [True, True]]

    def never(buf: memoryview) -> None:
        raise AssertionError("an empty tensor reads nothing")

    assert tensor_from_buffer(never, torch.float32, (0, 4)).shape == (0, 4)

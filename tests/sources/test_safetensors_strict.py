"""safetensors headers are held to the safetensors library's own rules (issue 10, item 7).

Each reproduction is a file that ``safetensors`` refuses but pos_geometry used to accept; both
must now refuse it, and a valid file must still read the same in both.
"""

from __future__ import annotations

import struct

import pytest
import torch
from safetensors import SafetensorError
from safetensors.torch import load as safetensors_load
from safetensors.torch import save

from pos_geometry.errors import CheckpointFormatError
from pos_geometry.sources.byte_source import BytesSource
from pos_geometry.sources.safetensors_format import read_header, read_tensor

_A = '"a": {"dtype": "F32", "shape": [2], "data_offsets": [0, 8]}'
_B = '"b": {"dtype": "F32", "shape": [2], "data_offsets": [8, 16]}'


def _file(header: str, data: bytes = bytes(range(16))) -> bytes:
    raw = header.encode()
    return struct.pack("<Q", len(raw)) + raw + data


CASES = {
    "overlapping offsets": (
        _file('{"a": {"dtype": "F32", "shape": [2], "data_offsets": [0, 8]}, '
              '"b": {"dtype": "F32", "shape": [2], "data_offsets": [4, 12]}}', bytes(12)),
        "overlaps the tensor before it",
    ),
    "the same bytes twice": (
        _file('{"a": {"dtype": "F32", "shape": [2], "data_offsets": [0, 8]}, '
              '"b": {"dtype": "F32", "shape": [2], "data_offsets": [0, 8]}}', bytes(8)),
        "overlaps the tensor before it",
    ),
    "duplicate key (the last one won)": (_file("{" + _A + ", " + _A.replace("[0, 8]", "[8, 16]") + "}"), "names 'a' twice"),
    "__metadata__ is a list": (_file('{"__metadata__": [], ' + _A + ", " + _B + "}"), "__metadata__ must map"),
    "a gap": (_file('{"a": {"dtype": "F32", "shape": [1], "data_offsets": [0, 4]}, ' + _B + "}"), "leaves a gap"),
    "bytes after the last tensor": (_file("{" + _A + ", " + _B + "}", bytes(20)), "cover 16 bytes of a 20-byte"),
}  # fmt: skip


@pytest.mark.parametrize("name", sorted(CASES))
def test_files_safetensors_refuses_are_refused(name: str) -> None:
    data, message = CASES[name]
    with pytest.raises(SafetensorError):
        safetensors_load(data)  # the library that owns the format refuses it
    with pytest.raises(CheckpointFormatError, match=message):
        read_header(BytesSource(data, name=name))


def test_valid_files_read_the_same_as_safetensors() -> None:
    tensors = {"z": torch.zeros(0), "a": torch.randn(3, 2), "b": torch.arange(5, dtype=torch.int64)}
    for data in (
        save(tensors, metadata={"k": "v"}),
        _file('{"__metadata__": null, ' + _A + ", " + _B + "}"),
        _file("{" + _B + ", " + _A + "}   "),  # keys out of order, trailing spaces in the header
    ):
        expected = safetensors_load(data)
        src = BytesSource(data)
        header = read_header(src)
        assert set(header.entries) == set(expected)
        for key, value in expected.items():
            assert torch.equal(read_tensor(src, header, key), value)


def test_the_header_alone_is_enough() -> None:
    """The hub reads only the header and one tensor's bytes: the checks use the header and the size."""
    data = _file("{" + _A + ", " + _B + "}")
    header_end = len(data) - 16  # the 16 data bytes follow the header

    class HeaderOnly(BytesSource):
        def read(self, offset: int, length: int) -> bytes:
            assert offset + length <= header_end, "read past the header"
            return super().read(offset, length)

    assert set(read_header(HeaderOnly(data)).entries) == {"a", "b"}

"""safetensors: bit-exact reads of the real GPT-2 table, minimal bytes read, every header check."""

from __future__ import annotations

import json
import struct
from pathlib import Path

import numpy as np
import pytest
import torch
from safetensors import safe_open

from pos_geometry.errors import CheckpointFormatError, MissingTensorError
from pos_geometry.sources.byte_source import BytesSource, FileByteSource
from pos_geometry.sources.safetensors_format import MAX_HEADER_BYTES, read_header, read_tensor


def _bits(t: torch.Tensor) -> torch.Tensor:
    """The raw bit patterns of ``t`` (so -0.0 vs 0.0 and NaN payloads count)."""
    return t.view({1: torch.uint8, 2: torch.int16, 4: torch.int32, 8: torch.int64}[t.element_size()])


def _raw(header: dict, data: bytes = b"") -> bytes:
    body = json.dumps(header).encode()
    return struct.pack("<Q", len(body)) + body + data


@pytest.mark.parametrize("dtype", [torch.float32, torch.float16, torch.bfloat16])
def test_real_gpt2_table_round_trips_bit_exactly(
    tmp_path: Path, gpt2_wpe: np.ndarray, write_safetensors, dtype
) -> None:
    wpe = torch.from_numpy(gpt2_wpe).to(dtype)
    filler = torch.randn(4096, 768, generator=torch.Generator().manual_seed(1)).to(dtype)
    path = write_safetensors(
        tmp_path / "m.safetensors", {"transformer.wte.weight": filler, "transformer.wpe.weight": wpe}
    )
    src = FileByteSource(path)
    header = read_header(src)
    out = read_tensor(src, header, "transformer.wpe.weight")
    assert out.dtype == dtype and out.shape == (1024, 768)
    assert torch.equal(_bits(out), _bits(wpe))
    # exactly the 8-byte length, the header, and the table's bytes
    assert src.bytes_read == header.data_offset + wpe.numel() * wpe.element_size()
    assert src.bytes_read < 0.25 * src.size


def test_header_matches_the_safetensors_library(tmp_path: Path, write_safetensors) -> None:
    tensors = {
        "a": torch.zeros(3, 4, dtype=torch.float16),
        "b": torch.arange(5, dtype=torch.int64),
        "c": torch.ones(2, 2, 2, dtype=torch.bfloat16),
        "empty": torch.zeros(0, 7),
    }
    path = write_safetensors(tmp_path / "x.safetensors", tensors, metadata={"format": "pt", "note": "hi"})
    src = FileByteSource(path)
    header = read_header(src)
    with safe_open(str(path), "pt") as f:
        assert set(header.entries) == set(f.keys())
        assert dict(header.metadata) == f.metadata()
        for key in f.keys():  # noqa: SIM118 - safe_open is not a dict
            ref = f.get_tensor(key)
            _, shape, _ = header.entries[key]
            assert shape == tuple(ref.shape)
            got = read_tensor(src, header, key)
            assert got.dtype == ref.dtype and torch.equal(got, ref)
    assert header.entries["a"][0] == "F16" and header.entries["c"][0] == "BF16"


def test_unknown_key_lists_the_keys() -> None:
    data = _raw({"x.weight": {"dtype": "F32", "shape": [1], "data_offsets": [0, 4]}}, b"\0" * 4)
    src = BytesSource(data)
    with pytest.raises(MissingTensorError, match=r"x\.weight"):
        read_tensor(src, read_header(src), "wpe.weight")


def _entry(**over) -> dict:
    return {"dtype": "F32", "shape": [2, 2], "data_offsets": [0, 16]} | over


@pytest.mark.parametrize(
    ("entry", "pattern"),
    [
        (_entry(dtype="F17"), "dtype 'F17'"),
        (_entry(dtype=["F32"]), "dtype"),
        (_entry(shape=[2, -2]), "shape"),
        (_entry(shape=[2, True]), "shape"),
        (_entry(shape="2x2"), "shape"),
        (_entry(shape=[2] * 40), "shape"),
        (_entry(shape=[2, 3]), "needs 24 bytes but data_offsets"),
        (_entry(data_offsets=[0, 32]), r"outside the data section"),
        (_entry(data_offsets=[-4, 12]), r"outside the data section"),
        (_entry(data_offsets=[8, 4]), r"outside the data section"),
        (_entry(data_offsets=[0]), r"expected \[begin, end\]"),
        ("not an object", "JSON object"),
    ],
)
def test_each_bad_entry_is_a_format_error_naming_the_value(entry, pattern: str) -> None:
    src = BytesSource(_raw({"w": entry}, b"\0" * 16), name="bad.safetensors")
    with pytest.raises(CheckpointFormatError, match=pattern) as info:
        read_header(src)
    assert "bad.safetensors" in str(info.value) and "Re-download" in str(info.value)


@pytest.mark.parametrize(
    ("data", "pattern"),
    [
        (b"\x05\0\0", "truncated"),
        (struct.pack("<Q", MAX_HEADER_BYTES + 1) + b"{}", f"{MAX_HEADER_BYTES + 1} bytes"),
        (struct.pack("<Q", 2**64 - 1) + b"{}", "header length"),
        (struct.pack("<Q", 500) + b'{"a": 1}', "truncated: its header claims 500 bytes"),
        (struct.pack("<Q", 5) + b"{'a':", "not valid JSON"),
        (struct.pack("<Q", 2) + b"\xff\xfe", "not valid JSON"),
        (struct.pack("<Q", 2) + b"[]", "JSON object"),
        (_raw({"__metadata__": {"a": 1}}), "__metadata__"),
        (_raw({"a": {"dtype": "F32", "shape": [1], "data_offsets": [0, 4]}}), "outside the data section"),
    ],
)
def test_header_level_errors(data: bytes, pattern: str) -> None:
    with pytest.raises(CheckpointFormatError, match=pattern):
        read_header(BytesSource(data))


def test_truncated_data_section_is_reported_as_truncated(tmp_path: Path, write_safetensors) -> None:
    path = write_safetensors(tmp_path / "t.safetensors", {"wpe.weight": torch.ones(64, 8)})
    whole = path.read_bytes()
    with pytest.raises(CheckpointFormatError, match="truncated"):
        read_header(BytesSource(whole[:-10]))


def test_zero_sized_tensor() -> None:
    src = BytesSource(_raw({"e": {"dtype": "F16", "shape": [0, 4], "data_offsets": [0, 0]}}))
    out = read_tensor(src, read_header(src), "e")
    assert out.shape == (0, 4) and out.dtype == torch.float16

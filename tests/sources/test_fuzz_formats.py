"""Fuzzing the parsers: any mutation of a valid file yields a tensor or a PosGeometryError, nothing else.

Base files are small but realistic (a positional table among other tensors); mutations are
truncations, random byte overwrites, absurd safetensors header lengths, corrupted JSON shapes
and offsets, corrupted ZIP directory / EOCD fields, and damaged ``data.pkl`` bytes.
"""

from __future__ import annotations

import collections
import functools
import io
import json
import struct
from datetime import timedelta

import numpy as np
import pytest
import torch
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from safetensors.torch import save as save_safetensors

from pos_geometry.errors import PosGeometryError
from pos_geometry.sources.byte_source import BytesSource
from pos_geometry.sources.local import read_checkpoint_tensor
from pos_geometry.sources.tensor_record import TensorRecord

FUZZ = settings(
    max_examples=300,
    deadline=timedelta(seconds=5),  # generous: only a pathological (unbounded) case could hit it
    suppress_health_check=[HealthCheck.too_slow],
    derandomize=True,
)


@functools.cache
def _tensors() -> dict[str, torch.Tensor]:
    gen = torch.Generator().manual_seed(3)
    return {
        "transformer.wte.weight": torch.randn(40, 8, generator=gen),
        "transformer.wpe.weight": torch.randn(16, 8, generator=gen).half(),
        "transformer.ln_f.bias": torch.zeros(8, dtype=torch.bfloat16),
        "step": torch.tensor(7),
    }


@functools.cache
def _safetensors() -> bytes:
    return save_safetensors(_tensors(), metadata={"format": "pt"})


@functools.cache
def _torch_bin() -> bytes:
    buf = io.BytesIO()
    sd = collections.OrderedDict(_tensors())
    sd["view"] = sd["transformer.wte.weight"][3:9, 1:5]  # a strided view sharing storage
    torch.save(sd, buf)
    return buf.getvalue()


@functools.cache
def _npz() -> bytes:
    buf = io.BytesIO()
    np.savez(buf, wpe=np.arange(24, dtype=np.float32).reshape(6, 4), other=np.ones(3))
    return buf.getvalue()


BASES = {"safetensors": _safetensors, "bin": _torch_bin, "npz": _npz}


def _check(data: bytes) -> None:
    """The property: a TensorRecord no larger than the file, or a PosGeometryError."""
    for which in ("position", "token"):
        try:
            record = read_checkpoint_tensor(BytesSource(bytes(data), name="fuzz"), which=which)
        except PosGeometryError:
            continue
        assert isinstance(record, TensorRecord)
        assert record.tensor.numel() * record.tensor.element_size() <= len(data)


def test_unmutated_bases_are_read() -> None:
    expected = _tensors()["transformer.wpe.weight"]
    for name in ("safetensors", "bin"):
        record = read_checkpoint_tensor(BytesSource(BASES[name]()))
        assert torch.equal(record.tensor, expected) and record.dtype == "float16"
    assert read_checkpoint_tensor(BytesSource(_npz())).tensor.shape == (6, 4)


@pytest.mark.parametrize("base", sorted(BASES))
@FUZZ
@given(data=st.data())
def test_truncation_anywhere(base: str, data: st.DataObject) -> None:
    raw = BASES[base]()
    _check(raw[: data.draw(st.integers(0, len(raw) - 1))])


@pytest.mark.parametrize("base", sorted(BASES))
@FUZZ
@given(data=st.data())
def test_random_byte_overwrites(base: str, data: st.DataObject) -> None:
    raw = bytearray(BASES[base]())
    flips = data.draw(
        st.lists(st.tuples(st.integers(0, len(raw) - 1), st.integers(0, 255)), min_size=1, max_size=8)
    )
    for pos, value in flips:
        raw[pos] = value
    _check(raw)


@FUZZ
@given(length=st.one_of(st.integers(0, 2**64 - 1), st.integers(0, 4096)))
def test_absurd_safetensors_header_lengths(length: int) -> None:
    _check(struct.pack("<Q", length) + _safetensors()[8:])


_VALUES = st.one_of(
    st.integers(-(2**70), 2**70),
    st.integers(-3, 5000),
    st.lists(st.integers(-(2**66), 2**66), max_size=4),
    st.none(),
    st.booleans(),
    st.text(max_size=5),
    st.floats(allow_nan=True),
)


@FUZZ
@given(data=st.data())
def test_corrupted_safetensors_json_fields(data: st.DataObject) -> None:
    raw = _safetensors()
    (n,) = struct.unpack("<Q", raw[:8])
    header = json.loads(raw[8 : 8 + n])
    key = data.draw(st.sampled_from(sorted(k for k in header if k != "__metadata__")))
    field = data.draw(st.sampled_from(["shape", "data_offsets", "dtype"]))
    if field != "dtype" and data.draw(st.booleans()):
        entry = header[key][field]
        if entry:
            entry[data.draw(st.integers(0, len(entry) - 1))] = data.draw(_VALUES)
        else:
            entry.append(data.draw(_VALUES))
    else:
        header[key][field] = data.draw(_VALUES)
    body = json.dumps(header).encode()
    _check(struct.pack("<Q", len(body)) + body + raw[8 + n :])


def _zip_field_offsets(raw: bytes) -> list[tuple[int, int]]:
    """(offset, width) of every size/offset/count field in the central directory and EOCD records."""
    fields = []
    pos = raw.find(b"PK\x01\x02")
    while pos >= 0:
        fields += [(pos + o, w) for o, w in [(10, 2), (20, 4), (24, 4), (28, 2), (30, 2), (32, 2), (42, 4)]]
        pos = raw.find(b"PK\x01\x02", pos + 4)
    for sig, layout in [
        (b"PK\x06\x06", [(4, 8), (24, 8), (32, 8), (40, 8), (48, 8)]),
        (b"PK\x06\x07", [(4, 4), (8, 8)]),
        (b"PK\x05\x06", [(4, 2), (8, 2), (10, 2), (12, 4), (16, 4), (20, 2)]),
    ]:
        at = raw.rfind(sig)
        if at >= 0:
            fields += [(at + o, w) for o, w in layout]
    return fields


@pytest.mark.parametrize("base", ["bin", "npz"])
@FUZZ
@given(data=st.data())
def test_corrupted_zip_directory_fields(base: str, data: st.DataObject) -> None:
    raw = bytearray(BASES[base]())
    fields = _zip_field_offsets(bytes(raw))
    for _ in range(data.draw(st.integers(1, 3))):
        pos, width = data.draw(st.sampled_from(fields))
        top = 2 ** (8 * width) - 1
        value = data.draw(st.one_of(st.integers(0, top), st.sampled_from([0, 1, top, top - 1, len(raw)])))
        raw[pos : pos + width] = value.to_bytes(width, "little")
    _check(raw)


@FUZZ
@given(data=st.data())
def test_damaged_data_pkl(data: st.DataObject) -> None:
    raw = bytearray(_torch_bin())
    start = raw.find(b"\x80\x02")  # data.pkl is the first member, stored: its bytes are in place
    end = raw.find(b"PK\x03\x04", start)
    for _ in range(data.draw(st.integers(1, 6))):
        raw[data.draw(st.integers(start, end - 1))] = data.draw(st.integers(0, 255))
    _check(raw)

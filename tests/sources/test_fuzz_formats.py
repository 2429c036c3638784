"""Fuzzing the parsers: any mutation of a valid file yields a tensor or a PosGeometryError, nothing else.

Base files are small but realistic (a positional table among other tensors); mutations are
truncations, random byte overwrites, absurd safetensors header lengths, corrupted JSON shapes
and offsets, corrupted ZIP directory / EOCD fields, and damaged ``data.pkl`` bytes. Hostile
``data.pkl`` shapes are generated too: self-aliasing lists in any field of a tensor, random
shapes/strides/offsets over small records, and floods of one opcode.

Budget (issue 10): for an input under 1 MB, a load ends in under 2 s and allocates under 200 MB.
:func:`_check` measures each case: wall time, the Python heap's peak (``tracemalloc``, which sees
the unpickler's objects) and the returned tensor, the only large torch allocation a read makes,
which must be no larger than the file.
"""

from __future__ import annotations

import collections
import functools
import io
import json
import struct
import tracemalloc

import _pos_geometry_tests_torch_pickles as tp  # registered by conftest.py
import numpy as np
import pytest
import torch
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from safetensors.torch import load as safetensors_load
from safetensors.torch import save as save_safetensors

from pos_geometry.errors import PosGeometryError
from pos_geometry.sources.byte_source import BytesSource
from pos_geometry.sources.local import read_checkpoint_tensor
from pos_geometry.sources.tensor_record import TensorRecord

FUZZ = settings(
    max_examples=300,
    deadline=None,  # no clock: _check bounds the work by counts (bytes read, bytes allocated)
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


BUDGET_READ_FACTOR = 4  # the bytes a reader may ask of its source, in multiples of the input's size
BUDGET_READ_SLACK = 4096
BUDGET_BYTES = 200 * 2**20


def _check(data: bytes, key: str | None = None) -> None:
    """The property: a TensorRecord no larger than the file, or a PosGeometryError, with bounded work.

    The same input is read twice (as the positional, then as the token table: the parsing is the same). The
    work is bounded by counts, never by a clock (a loaded machine stretches any clock): the bytes the
    reader asks of the source (:data:`BUDGET_READ_FACTOR` times the input, at most: a parser that loops
    back over its input is caught) and the memory it allocates (``tracemalloc``). The time a worst case
    takes is measured in ``benchmarks/bench_fuzz_formats.py``."""
    data = bytes(data)
    for which in ("position", "token"):
        traced = which == "token"
        if traced:
            tracemalloc.start()
        src = BytesSource(data, name="fuzz")
        try:
            record = read_checkpoint_tensor(src, which=which, key=key)
        except PosGeometryError:
            record = None
        finally:
            peak = tracemalloc.get_traced_memory()[1] if traced else 0
            tracemalloc.stop()
        if len(data) < 2**20:
            limit = BUDGET_READ_FACTOR * len(data) + BUDGET_READ_SLACK
            assert src.bytes_read <= limit, (
                f"a {len(data)}-byte input made the reader ask for {src.bytes_read} bytes"
            )
            assert peak < BUDGET_BYTES, f"a {len(data)}-byte input allocated {peak} bytes"
        if record is not None:
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
    mutated = struct.pack("<Q", len(body)) + body + raw[8 + n :]
    _check(mutated)
    try:
        read_checkpoint_tensor(BytesSource(mutated))
    except PosGeometryError:
        return
    safetensors_load(mutated)  # what pos_geometry accepts, the safetensors library accepts too


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


HOSTILE = settings(FUZZ, max_examples=40)


def _aliased(depth: int) -> list:
    inner: list = []
    for _ in range(depth):
        inner = [inner, inner]
    return inner


@HOSTILE
@given(
    place=st.sampled_from(["offset", "shape", "stride", "key", "numel", "storage", "root"]),
    depth=st.integers(1, 64),
)
def test_self_aliasing_lists_anywhere(place: str, depth: int) -> None:
    alias = _aliased(depth)
    storage = tp.Storage(alias if place == "key" else "0", alias if place == "numel" else 4)
    tensor = tp.Tensor(
        alias if place == "storage" else storage,
        alias if place == "offset" else 0,
        (2, alias) if place == "shape" else (2, 2),
        (alias, 1) if place == "stride" else (2, 1),
    )
    state = (
        {"transformer.wpe.weight": tensor}
        if place != "root"
        else {"transformer.wpe.weight": tensor, "x": alias}
    )
    _check(tp.checkpoint(state, {"0": bytes(16)}), key="transformer.wpe.weight")


_DIM = st.one_of(st.integers(0, 40), st.sampled_from([2**14, 2**17, 2**30, 2**40]))
_STRIDE = st.one_of(st.integers(0, 50), st.sampled_from([0, 1, 2**17, 2**34]))


@HOSTILE
@given(
    shape_stride=st.integers(1, 3).flatmap(lambda n: st.tuples(st.lists(_DIM, min_size=n, max_size=n),
                                                              st.lists(_STRIDE, min_size=n, max_size=n))),
    offset=st.one_of(st.integers(0, 64), st.just(2**40)),
    numel=st.one_of(st.integers(0, 4096), st.sampled_from([2**34, 2**61])),
    record=st.integers(0, 4096),
    kind=st.sampled_from([torch.FloatStorage, torch.HalfStorage, torch.DoubleStorage, torch.ComplexFloatStorage]),
)  # fmt: skip
def test_random_views_over_small_records(shape_stride, offset: int, numel: int, record: int, kind) -> None:
    shape, stride = shape_stride
    state = {
        "transformer.wpe.weight": tp.Tensor(tp.Storage("0", numel, kind), offset, tuple(shape), tuple(stride))
    }
    _check(tp.checkpoint(state, {"0": bytes(record)}), key="transformer.wpe.weight")


_FLOOD_UNITS = [
    b"\x8f",  # EMPTY_SET
    b"]",  # EMPTY_LIST
    b"}",  # EMPTY_DICT
    b"(",  # MARK
    b")",  # EMPTY_TUPLE
    b"K\x07",  # BININT1
    b"\x8c\x01a",  # SHORT_BINUNICODE
    b"]\x94",  # EMPTY_LIST + MEMOIZE
    b"h\x00",  # BINGET 0
    b"\x85",  # TUPLE1
    b"]q\x00",  # EMPTY_LIST + BINPUT 0
    b"N",  # NONE
]


_COUNTS = st.one_of(st.integers(1, 5000), st.sampled_from([2**18 - 4, 2**18 + 1, 330_000]))


@settings(FUZZ, max_examples=10)
@pytest.mark.slow
@given(unit=st.sampled_from(_FLOOD_UNITS), count=_COUNTS, tail=st.sampled_from([b"}.", b".", b"0}."]))
def test_opcode_floods(unit: bytes, count: int, tail: bytes) -> None:
    # the reproduction was 48 MiB of EMPTY_SET (11 GB, 80 s); under 1 MB each case must fit the budget
    pkl = b"\x80\x04]\x94" + unit * count + tail
    _check(tp.checkpoint(None, {}, pkl=pkl[: 2**20 - 4096]))

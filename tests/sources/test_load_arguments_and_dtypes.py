"""A positional table is real floating point, cast without loss; bad argument types are typed errors.

Issue 10, items 6 and 10: each test is built from its reproduction (complex storages lost their
imaginary part, 1e-300 in F64 loaded as zeros, integer and bool tables were cast silently,
``load(..., revision=3)`` and ``np.longdouble`` gave bare TypeErrors).
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
import torch

from pos_geometry import PositionalEmbedding, Provenance, load, load_token_embedding
from pos_geometry.errors import CheckpointFormatError, InvalidArgumentError

_KEY = "transformer.wpe.weight"


@pytest.fixture(params=["safetensors", "bin"])
def write_table(request, tmp_path: Path, write_safetensors, write_torch_bin):
    def write(table: torch.Tensor) -> Path:
        if request.param == "safetensors":
            return write_safetensors(tmp_path / "t.safetensors", {_KEY: table})
        return write_torch_bin(tmp_path / "t.bin", {_KEY: table})

    write.fmt = request.param
    return write


@pytest.mark.parametrize(
    "dtype", [torch.complex64, torch.int8, torch.bool, torch.int64, torch.uint64, torch.uint8]
)
def test_tables_that_are_not_real_floating_point_are_refused(write_table, dtype: torch.dtype) -> None:
    if dtype == torch.uint64 and write_table.fmt == "bin":
        pytest.skip(
            "torch.save writes uint64 as an UntypedStorage, a global the restricted unpickler refuses"
        )
    table = (torch.arange(12).reshape(4, 3) % 2).to(dtype)
    path = write_table(table)
    name = str(dtype).removeprefix("torch.")
    with pytest.raises(CheckpointFormatError, match=rf"stored as {name}; an embedding table must be real"):
        load(path)


def test_complex_table_is_refused_not_stripped_of_its_imaginary_part(write_table) -> None:
    table = torch.complex(torch.ones(4, 3), torch.full((4, 3), 2.0))
    with pytest.raises(CheckpointFormatError, match="imaginary part"):
        load(write_table(table))


def test_tiny_float64_values_do_not_underflow_to_zero(write_table) -> None:
    table = torch.full((4, 3), 1e-300, dtype=torch.float64)
    path = write_table(table)
    with pytest.raises(
        InvalidArgumentError, match=r"12 nonzero value\(s\) would become 0.*dtype=torch\.float64"
    ):
        load(path)  # the default dtype, float32, cannot hold 1e-300
    exact = load(path, dtype=torch.float64)
    assert exact.matrix.dtype == torch.float64 and torch.equal(exact.matrix, table)


def test_huge_float64_values_do_not_overflow_to_inf(write_table) -> None:
    table = torch.ones(4, 3, dtype=torch.float64)
    table[1, 2] = 1e300
    with pytest.raises(InvalidArgumentError, match=r"1 finite value\(s\) would become infinite"):
        load(write_table(table), dtype=torch.float16)


def test_an_ordinary_float64_table_still_casts(write_table) -> None:
    table = torch.randn(4, 3, dtype=torch.float64, generator=torch.Generator().manual_seed(0))
    table[0, 0] = 0.0  # zeros stay zeros: not an underflow
    assert torch.equal(load(write_table(table)).matrix, table.float())


@pytest.mark.parametrize(
    ("args", "kwargs", "message"),
    [
        (("gpt2",), {"revision": 3}, r"revision must be a str or None; got 3 \(int\)"),
        ((3,), {}, r"name_or_path must be .* got 3 \(int\)"),
        ((["gpt2"],), {}, r"name_or_path must be .* \(list\)"),
        (("gpt2",), {"key": b"wpe"}, r"key must be a str or None; got b'wpe' \(bytes\)"),
        (("gpt2",), {"offline": "yes"}, r"offline must be a bool or None"),
        (("gpt2",), {"n_positions": True}, r"n_positions must be an int or None; got True"),
        (("gpt2",), {"model_id": 1}, r"model_id must be a str or None"),
        (("gpt2",), {"dtype": torch.int8}, r"dtype must be a floating torch.dtype .* got torch.int8"),
        (("gpt2",), {"dtype": "float32"}, r"dtype must be a floating torch.dtype .* got 'float32'"),
    ],
)
def test_bad_argument_types_are_invalid_argument_errors(args: tuple, kwargs: dict, message: str) -> None:
    with pytest.raises(InvalidArgumentError, match=message):
        load(*args, **kwargs)


def test_bad_argument_types_of_load_token_embedding() -> None:
    with pytest.raises(InvalidArgumentError, match="revision must be a str"):
        load_token_embedding("gpt2", revision=3)
    with pytest.raises(InvalidArgumentError, match="name_or_path must be"):
        load_token_embedding(None)


def test_positional_embedding_refuses_dtypes_torch_cannot_hold() -> None:
    prov = Provenance("toy", "learned", "test")
    with pytest.raises(InvalidArgumentError, match=r"numpy dtype (float128|longdouble)"):
        PositionalEmbedding(np.ones((3, 2), dtype=np.longdouble), prov)
    with pytest.raises(InvalidArgumentError, match=r"floating point; got dtype torch\.complex64"):
        PositionalEmbedding(np.ones((3, 2), dtype=np.complex64), prov)
    with pytest.raises(InvalidArgumentError, match="provenance must be a Provenance"):
        PositionalEmbedding(torch.ones(3, 2), "toy")


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"model_id": 3}, r"model_id must be a str; got 3"),
        ({"source": None}, r"source must be a str"),
        ({"revision": 3}, r"revision must be a str or None"),
        ({"row_offset": -1}, r"row_offset must be an int >= 0"),
        ({"row_offset": True}, r"row_offset must be an int >= 0"),
        ({"processing": [1]}, r"processing must be a sequence of str"),
        ({"config": 5}, r"config must be a mapping"),
        ({"kind": ["learned"]}, r"kind must be one of"),
    ],
)
def test_provenance_fields_have_their_types(kwargs: dict, message: str) -> None:
    fields = {"model_id": "toy", "kind": "learned", "source": "test"} | kwargs
    with pytest.raises(InvalidArgumentError, match=message):
        Provenance(**fields)

""".npy / .npz: exact reads (byte order, Fortran order, compression), no pickle, bounded headers."""

from __future__ import annotations

import io
from pathlib import Path

import numpy as np
import pytest
import torch

from pos_geometry.errors import CheckpointFormatError
from pos_geometry.sources.byte_source import BytesSource, FileByteSource
from pos_geometry.sources.numpy_format import npz_members, read_npy, read_npz_member


def _npy(arr: np.ndarray, **kw) -> bytes:
    buf = io.BytesIO()
    np.save(buf, arr, **kw)
    return buf.getvalue()


def test_real_gpt2_table_from_npy_reads_header_and_array_only(
    real_data_dir: Path, gpt2_wpe: np.ndarray
) -> None:
    src = FileByteSource(real_data_dir / "gpt2_small_wpe.npy")
    out = read_npy(src)
    assert out.dtype == torch.float32 and torch.equal(out, torch.from_numpy(gpt2_wpe))
    assert src.bytes_read == src.size  # a .npy is header + array, nothing else


@pytest.mark.parametrize("dtype", ["<f2", ">f4", "<f8", ">i8", "|u1"])
@pytest.mark.parametrize("order", ["C", "F"])
def test_dtypes_byte_orders_and_fortran_order(dtype: str, order: str) -> None:
    arr = np.asarray(np.arange(-12, 12).reshape(4, 6), dtype=dtype, order=order)
    out = read_npy(BytesSource(_npy(arr)))
    assert out.shape == (4, 6) and np.array_equal(out.numpy(), arr)
    assert out.numpy().dtype == arr.dtype.newbyteorder("=")


def test_object_arrays_are_refused_without_unpickling() -> None:
    data = _npy(np.array([{"a": 1}, None], dtype=object), allow_pickle=True)
    with pytest.raises(CheckpointFormatError, match="object arrays would need pickle"):
        read_npy(BytesSource(data))


@pytest.mark.parametrize(
    ("mutate", "pattern"),
    [
        (lambda d: d[:9], "truncated"),
        (lambda d: d[:-1], "truncated: shape"),
        (lambda d: b"\x93NUMPZ" + d[6:], "not a .npy"),
        (lambda d: d[:6] + b"\x03\x00" + d[8:], "not a .npy file of format 1.0 or 2.0"),
        (lambda d: d.replace(b"'shape': (3, 2)", b"'shape': (3,-2)"), "shape"),
        (lambda d: d.replace(b"'descr': '<f4'", b"'descr': 'zz4'"), "malformed"),
        (lambda d: d.replace(b"'fortran_order'", b"'fortran_orderX"), "malformed"),
        (lambda d: d[:8] + b"\xff\xff" + d[10:], "header claims 65535 bytes"),
    ],
)
def test_damaged_npy(mutate, pattern: str) -> None:
    data = _npy(np.ones((3, 2), dtype="<f4"))
    with pytest.raises(CheckpointFormatError, match=pattern):
        read_npy(BytesSource(mutate(data), name="t.npy"))


@pytest.mark.parametrize("compressed", [False, True])
def test_npz_members_stored_and_compressed(tmp_path: Path, gpt2_wpe: np.ndarray, compressed: bool) -> None:
    path = tmp_path / "tables.npz"
    other = np.zeros((2048, 768), dtype=np.float32)
    (np.savez_compressed if compressed else np.savez)(path, wpe=gpt2_wpe, other=other)
    src = FileByteSource(path)
    members = npz_members(src)
    assert set(members) == {"wpe", "other"}
    out = read_npz_member(src, members["wpe"])
    assert torch.equal(out, torch.from_numpy(gpt2_wpe))
    if not compressed:  # read in place: the directory, one local header, the .npy header and the array
        assert src.bytes_read < gpt2_wpe.nbytes + 4096 < src.size

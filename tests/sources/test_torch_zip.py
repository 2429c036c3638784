"""PyTorch zip checkpoints: bit-exact reads, views, minimal bytes, and the restricted unpickler."""

from __future__ import annotations

import builtins
import io
import pickle
import tracemalloc
import zipfile
from pathlib import Path

import _pos_geometry_tests_torch_pickles as tp  # registered by conftest.py
import numpy as np
import pytest
import torch

from pos_geometry.errors import (
    CheckpointFormatError,
    InvalidArgumentError,
    MissingTensorError,
    UnsafeCheckpointError,
)
from pos_geometry.sources import torch_zip
from pos_geometry.sources.byte_source import BytesSource, FileByteSource
from pos_geometry.sources.tensor_record import tensor_from_bytes
from pos_geometry.sources.torch_zip import read_index, read_tensor, tensor_keys


def _bits(t: torch.Tensor) -> torch.Tensor:
    return t.view({1: torch.uint8, 2: torch.int16, 4: torch.int32, 8: torch.int64}[t.element_size()])


_Storage, _Tensor, _checkpoint, _zip = tp.Storage, tp.Tensor, tp.checkpoint, tp.zip_members
_Pickler = tp.Pickler


@pytest.mark.parametrize("dtype", [torch.float32, torch.float16, torch.bfloat16])
def test_real_gpt2_table_from_torch_save(
    tmp_path: Path, gpt2_wpe: np.ndarray, write_torch_bin, dtype
) -> None:
    wpe = torch.from_numpy(gpt2_wpe).to(dtype)
    filler = torch.randn(4096, 768, generator=torch.Generator().manual_seed(2)).to(dtype)
    path = write_torch_bin(
        tmp_path / "pytorch_model.bin", {"transformer.wte.weight": filler, "transformer.wpe.weight": wpe}
    )
    src = FileByteSource(path)
    index = read_index(src)
    assert tensor_keys(index) == ("transformer.wte.weight", "transformer.wpe.weight")
    out = read_tensor(src, index, "transformer.wpe.weight")
    assert out.dtype == dtype and torch.equal(_bits(out), _bits(wpe))
    if dtype == torch.float16:
        assert torch.equal(out, torch.from_numpy(gpt2_wpe).half())
    table_bytes = wpe.numel() * wpe.element_size()
    assert table_bytes <= src.bytes_read < table_bytes + 8192  # directory, data.pkl, byteorder, one header
    assert src.bytes_read < 0.25 * src.size


def test_views_into_shared_storage_are_honoured(tmp_path: Path, write_torch_bin) -> None:
    base = torch.arange(64 * 48, dtype=torch.float32).reshape(64, 48)
    views = {
        "full": base,
        "rows": base[10:20],  # storage offset, contiguous
        "cols": base[:, 5:9],  # non-contiguous
        "t": base.t(),  # transposed
        "step": base[::3, ::2],
        "row": base[7],
        "scalar": base[3, 4],
    }
    path = write_torch_bin(tmp_path / "v.pt", views)
    data = path.read_bytes()
    index = read_index(BytesSource(data))
    assert {r.storage for r in index.tensors.values()} == {index.tensors["full"].storage}
    for key, expected in views.items():
        src = BytesSource(data)
        index = read_index(src)
        before = src.bytes_read
        out = read_tensor(src, index, key)
        assert torch.equal(out, expected) and out.shape == expected.shape and out.is_contiguous()
        if key in ("rows", "row", "scalar"):  # contiguous views read only their own bytes (+ a local header)
            assert src.bytes_read - before <= expected.numel() * 4 + 30 + 200


@pytest.mark.parametrize("key", ["full", "rows", "cols", "t", "step"])
def test_rows_of_a_view_read_only_their_bytes(tmp_path: Path, write_torch_bin, key: str) -> None:
    """``rows=`` gives exactly ``tensor[start:stop]`` for any view, and a row-major view's rows
    cost only their own bytes (one head of a fused projection, not the whole tensor)."""
    base = torch.arange(64 * 48, dtype=torch.float32).reshape(64, 48)
    views = {"full": base, "rows": base[10:40], "cols": base[:, 5:29], "t": base.t(), "step": base[::2, ::2]}
    data = write_torch_bin(tmp_path / "v.pt", views).read_bytes()
    expected = views[key]
    for start, stop in [(0, 1), (3, 11), (expected.shape[0] - 5, expected.shape[0]), (4, 4)]:
        src = BytesSource(data)
        index = read_index(src)
        before = src.bytes_read
        out = read_tensor(src, index, key, rows=(start, stop))
        assert torch.equal(out, expected[start:stop]) and out.shape == expected[start:stop].shape
        if key in ("full", "rows"):
            assert src.bytes_read - before <= (stop - start) * 48 * 4 + 30 + 200
    with pytest.raises(InvalidArgumentError, match=r"rows \[5, 99\) are not within"):
        read_tensor(BytesSource(data), read_index(BytesSource(data)), key, rows=(5, 99))


def test_parameters_nested_dicts_and_prefix_from_file_stem(tmp_path: Path) -> None:
    wpe = torch.nn.Parameter(torch.randn(16, 8))
    path = tmp_path / "ckpt.pt"
    torch.save({"model": {"_orig_mod.transformer.wpe.weight": wpe}, "iter_num": 5, "config": {"n": 3}}, path)
    src = FileByteSource(path)
    index = read_index(src)
    assert tensor_keys(index) == ("model._orig_mod.transformer.wpe.weight",)
    assert torch.equal(read_tensor(src, index, "model._orig_mod.transformer.wpe.weight"), wpe.detach())
    with pytest.raises(MissingTensorError, match=r"model\._orig_mod"):
        read_tensor(src, index, "wpe.weight")


def test_handcrafted_checkpoint_and_plain_zip_without_zip64() -> None:
    values = torch.randn(6, 4, dtype=torch.float64)
    state = {"wpe.weight": _Tensor(_Storage("0", 24, torch.DoubleStorage), 0, (6, 4), (4, 1))}
    data = _checkpoint(state, {"0": values.numpy().tobytes()}, comment=b"an archive comment")
    assert b"PK\x06\x06" not in data  # Python's zipfile writes no zip64 record for a small archive
    src = BytesSource(data)
    assert torch.equal(read_tensor(src, read_index(src), "wpe.weight"), values)


def test_big_endian_byteorder_is_swapped() -> None:
    values = torch.randn(5, 3)
    state = {"wpe.weight": _Tensor(_Storage("7", 15), 0, (5, 3), (3, 1))}
    data = _checkpoint(state, {"7": values.numpy().astype(">f4").tobytes()}, byteorder=b"big")
    src = BytesSource(data)
    assert torch.equal(read_tensor(src, read_index(src), "wpe.weight"), values)
    raw = values.numpy().astype(">f2").tobytes()
    assert torch.equal(tensor_from_bytes(raw, torch.float16, (5, 3), little_endian=False), values.half())


MALICIOUS_GLOBALS = [
    ("builtins", "exec"),
    ("builtins", "eval"),
    ("__builtin__", "eval"),  # what protocol-2 pickles name builtins
    ("posix", "system"),
    ("subprocess", "Popen"),
    ("torch", "load"),
    ("torch._utils", "_rebuild_device_tensor_from_numpy"),
]


def _evil_checkpoint(payload: object, global_name: bytes = b"builtins\nexec") -> tuple[bytes, bytes]:
    """(data.pkl, whole zip): a valid one-tensor checkpoint whose state dict also holds ``payload``
    (its ``builtins.exec`` global renamed to ``global_name``)."""
    buf = io.BytesIO()
    state = {"x": payload, "transformer.wpe.weight": _Tensor(_Storage("0", 4), 0, (2, 2), (2, 1))}
    _Pickler(buf, protocol=2, fix_imports=False).dump(state)
    pkl = buf.getvalue().replace(b"cbuiltins\nexec\n", b"c" + global_name + b"\n")
    members = {"archive/data.pkl": pkl, "archive/byteorder": b"little", "archive/data/0": bytes(16)}
    return pkl, _zip(members)


@pytest.mark.parametrize(("module", "name"), MALICIOUS_GLOBALS)
def test_malicious_pickle_is_refused_before_anything_runs(tmp_path: Path, module: str, name: str) -> None:
    marker = tmp_path / "pwned"
    code = f"open({str(marker)!r}, 'w').close()"

    class Payload:
        def __reduce__(self):
            return (builtins.exec, (code,))

    pkl, _ = _evil_checkpoint(Payload())
    # the payload is live: a plain unpickler runs it (then stops at the first storage reference)
    with pytest.raises(pickle.UnpicklingError):
        pickle.loads(pkl)  # running it is the point
    assert marker.exists()
    marker.unlink()
    _, data = _evil_checkpoint(Payload(), f"{module}\n{name}".encode())
    with pytest.raises(UnsafeCheckpointError, match=rf"{module}\.{name}") as info:
        read_index(BytesSource(data, name="evil.bin"))
    assert "nothing was executed" in str(info.value) and "evil.bin" in str(info.value)
    assert not marker.exists()
    # control: the same checkpoint with a harmless value in place of the payload reads fine
    _, benign = _evil_checkpoint(12)
    src = BytesSource(benign)
    assert torch.equal(read_tensor(src, read_index(src), "transformer.wpe.weight"), torch.zeros(2, 2))


def test_protocol_4_stack_global_payload_is_refused(tmp_path: Path) -> None:
    marker = tmp_path / "pwned"

    class Payload:
        def __reduce__(self):
            return (builtins.exec, (f"open({str(marker)!r}, 'w').close()",))

    pkl = pickle.dumps({"wpe.weight": Payload()}, protocol=4)
    assert b"\x93" in pkl  # STACK_GLOBAL: the name comes off the stack, so find_class must refuse it
    data = _zip({"archive/data.pkl": pkl, "archive/byteorder": b"little"})
    with pytest.raises(UnsafeCheckpointError, match=r"builtins\.exec"):
        read_index(BytesSource(data))
    assert not marker.exists()


@pytest.mark.parametrize("opcode", [b"\x8e", b"\x8d", b"\x96"])  # BINBYTES8, BINUNICODE8, BYTEARRAY8
def test_forged_lengths_in_data_pkl_allocate_nothing(opcode: bytes) -> None:
    # a plain C unpickler pre-allocates the declared 512 MiB before finding the data missing
    pkl = b"\x80\x05" + opcode + (2**29).to_bytes(8, "little") + b"abc."
    data = _zip({"archive/data.pkl": pkl})
    tracemalloc.start()
    try:
        with pytest.raises(CheckpointFormatError, match=r"data\.pkl is corrupted"):
            read_index(BytesSource(data))
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert peak < 2**24


def test_a_pickled_module_is_refused(tmp_path: Path) -> None:
    path = tmp_path / "module.pt"
    torch.save({"layer": torch.nn.Linear(2, 2)}, path)
    with pytest.raises(UnsafeCheckpointError, match=r"torch\.nn\.modules\.linear\.Linear"):
        read_index(FileByteSource(path))


def test_legacy_format_is_not_a_zip(tmp_path: Path) -> None:
    path = tmp_path / "legacy.bin"
    torch.save({"wpe.weight": torch.ones(2, 2)}, path, _use_new_zipfile_serialization=False)
    with pytest.raises(CheckpointFormatError, match="not a ZIP archive"):
        read_index(FileByteSource(path))


def test_compressed_records_are_refused(tmp_path: Path, write_torch_bin) -> None:
    path = write_torch_bin(tmp_path / "c.bin", {"wpe.weight": torch.zeros(32, 8)})
    with zipfile.ZipFile(path) as zf:
        members = {i.filename: zf.read(i) for i in zf.infolist()}
    data = _zip(members, method=zipfile.ZIP_DEFLATED)
    with pytest.raises(CheckpointFormatError, match="compressed"):
        read_index(BytesSource(data))


@pytest.mark.parametrize(
    ("state", "storages", "pattern"),
    [
        ({"w": _Tensor(_Storage("0", 4), 0, (2, 2), (2, 1))}, {}, "no data record"),
        ({"w": _Tensor(_Storage("0", 4), 2, (2, 2), (2, 1))}, {"0": bytes(16)}, "needs elements up to 6"),
        ({"w": _Tensor(_Storage("0", 4), 0, (2, 2), (2, 1))}, {"0": bytes(8)}, "record holds 8 bytes"),
        ({"w": _Tensor(_Storage("0", 4), 0, (100, 100), (0, 0))}, {"0": bytes(16)}, "zero or overlapping"),
        ({"w": _Tensor(_Storage("0", 4), 0, (2, -2), (2, 1))}, {"0": bytes(16)}, "negative, huge"),
        ({"w": _Tensor(_Storage("0", 4), -1, (2,), (1,))}, {"0": bytes(16)}, "storage offset of -1"),
        ({"w": _Tensor(_Storage("0", 4), 0, (2, 2), (1,))}, {"0": bytes(16)}, "with strides"),
        ({"w": _Tensor(_Storage("0", -3), 0, (2,), (1,))}, {"0": bytes(16)}, "malformed storage reference"),
        ([1, 2], {}, "not a state dict"),
    ],
)
def test_inconsistent_tensor_records(state, storages: dict, pattern: str) -> None:
    src = BytesSource(_checkpoint(state, storages), name="x.bin")
    with pytest.raises(CheckpointFormatError, match=pattern):
        read_tensor(src, read_index(src), "w")


def test_oversized_data_pkl_and_bad_byteorder(monkeypatch: pytest.MonkeyPatch) -> None:
    data = _checkpoint({"w": _Tensor(_Storage("0", 1), 0, (1,), (1,))}, {"0": bytes(4)})
    monkeypatch.setattr(torch_zip, "MAX_PICKLE_BYTES", 50)
    with pytest.raises(CheckpointFormatError, match=r"data\.pkl is .* bytes, more than the 50"):
        read_index(BytesSource(data))
    monkeypatch.undo()
    bad = _checkpoint({"w": _Tensor(_Storage("0", 1), 0, (1,), (1,))}, {"0": bytes(4)}, byteorder=b"middle")
    with pytest.raises(CheckpointFormatError, match="byteorder"):
        read_index(BytesSource(bad))


def test_zip_without_data_pkl_and_damaged_directory(tmp_path: Path, write_torch_bin) -> None:
    with pytest.raises(CheckpointFormatError, match="not a PyTorch checkpoint"):
        read_index(BytesSource(_zip({"hello.txt": b"hi"})))
    data = bytearray(write_torch_bin(tmp_path / "d.bin", {"wpe.weight": torch.ones(4, 4)}).read_bytes())
    cd = data.rfind(b"PK\x01\x02")
    data[cd + 42 : cd + 46] = (len(data) * 2).to_bytes(4, "little")  # a member's local-header offset
    with pytest.raises(CheckpointFormatError, match="outside the file"):
        read_index(BytesSource(bytes(data)))
    with pytest.raises(CheckpointFormatError, match="truncated"):
        read_index(BytesSource(bytes(data[:-30])))

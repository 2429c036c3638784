"""Hostile ``data.pkl`` and views (issue 10): each test is built from the reproduction it guards.

Every case must end in a typed error quickly, allocate no more than the file holds, and
leave the library unchanged.
"""

from __future__ import annotations

import _pos_geometry_tests_torch_pickles as tp  # registered by conftest.py
import pytest
import torch

from pos_geometry.errors import CheckpointFormatError, UnsafeCheckpointError
from pos_geometry.sources import _pickle
from pos_geometry.sources.byte_source import BytesSource
from pos_geometry.sources.local import read_checkpoint_tensor
from pos_geometry.sources.torch_zip import read_index, read_tensor


def _read(data: bytes, key: str = "w") -> torch.Tensor:
    src = BytesSource(data, name="hostile.bin")
    return read_tensor(src, read_index(src), key)


def _aliased(depth: int) -> list:
    """``[L, L]`` nested ``depth`` times, each level one memo entry: ~26 bytes a level once pickled,
    but its repr has 2**depth leaves."""
    inner: list = []
    for _ in range(depth):
        inner = [inner, inner]
    return inner


@pytest.mark.parametrize("place", ["storage_offset", "shape", "storage key", "storage numel"])
def test_self_aliasing_list_in_an_error_message_is_described_not_repred(place: str) -> None:
    alias = _aliased(64)
    storage = tp.Storage(alias if place == "storage key" else "0", alias if place == "storage numel" else 4)
    offset = alias if place == "storage_offset" else 0
    shape = (2, alias) if place == "shape" else (2, 2)
    data = tp.checkpoint({"w": tp.Tensor(storage, offset, shape, (2, 1))}, {"0": bytes(16)})
    assert len(data) < 4096  # the reproduction: a small file
    with pytest.raises(CheckpointFormatError) as info:
        _read(data)
    assert len(str(info.value)) < 1000 and "list" in str(info.value)


def test_zero_strides_over_a_tiny_record_with_a_huge_declared_storage() -> None:
    # the reproduction: (2**17, 2**17) at stride 0 over a 4-byte record declaring 2**34 elements
    data = tp.checkpoint({"w": tp.Tensor(tp.Storage("0", 2**34), 0, (2**17, 2**17), (0, 0))}, {"0": bytes(4)})
    with pytest.raises(CheckpointFormatError, match=r"declares 17179869184 elements .* record holds 4 bytes"):
        _read(data)


@pytest.mark.parametrize(
    ("numel", "record", "stride"),
    [(1, 4, (0, 0)), (32768, 128 * 1024, (1, 1)), (2**14 + 1, 4 * (2**14 + 1), (1, 0))],
    ids=["zero-stride", "overlapping-(1,1)", "zero-inner"],
)
def test_views_that_repeat_elements_are_refused(numel: int, record: int, stride: tuple) -> None:
    # the reproductions loaded a 16384 x 16384 table (1 GiB) from a record of at most 128 KiB
    data = tp.checkpoint(
        {"w": tp.Tensor(tp.Storage("0", numel), 0, (2**14, 2**14), stride)}, {"0": bytes(record)}
    )
    with pytest.raises(CheckpointFormatError, match="zero or overlapping strides"):
        _read(data)


def test_legitimate_views_still_load() -> None:
    base = torch.arange(48, dtype=torch.float32)
    cases = {
        "t": ((4, 6), (1, 4)),
        "step": ((3, 4), (16, 2)),
        "row": ((1, 6), (100, 1)),
        "bcast1": ((5, 1), (1, 0)),
    }
    for key, (shape, stride) in cases.items():
        data = tp.checkpoint(
            {key: tp.Tensor(tp.Storage("0", 48), 2, shape, stride)}, {"0": base.numpy().tobytes()}
        )
        assert torch.equal(_read(data, key), torch.as_strided(base, shape, stride, 2))


def test_a_48_mib_pickle_of_empty_sets_is_refused_by_its_size() -> None:
    flood = b"\x80\x04" + b"\x8f" * (48 << 20) + b"}."  # EMPTY_SET x 48 Mi, then {} as the root
    data = tp.checkpoint(None, {}, pkl=flood)
    with pytest.raises(CheckpointFormatError, match=r"data\.pkl is \d+ bytes, more than the 16777216"):
        read_index(BytesSource(data))


def test_container_flood_under_the_size_limit_is_refused_before_decoding() -> None:
    flood = b"\x80\x04" + b"\x8f" * (_pickle.MAX_CONTAINERS + 1) + b"}."
    with pytest.raises(CheckpointFormatError, match=r"more than 262144 containers"):
        read_index(BytesSource(tp.checkpoint(None, {}, pkl=flood)))


def test_a_forged_memo_index_is_refused() -> None:
    # LONG_BINPUT 2**32-1: the unpickler would size its memo for four billion entries
    pkl = b"\x80\x02}r\xff\xff\xff\xff."
    with pytest.raises(CheckpointFormatError, match="memo slot 4294967295"):
        read_index(BytesSource(tp.checkpoint(None, {}, pkl=pkl)))


def test_ordered_dict_called_with_an_argument_is_refused() -> None:
    # OrderedDict(d) copies d: a memo'd big dict copied once per 6 bytes is quadratic work
    pkl = b"\x80\x02ccollections\nOrderedDict\n}\x85R."
    with pytest.raises(CheckpointFormatError, match="calls OrderedDict with 1 argument"):
        read_index(BytesSource(tp.checkpoint(None, {}, pkl=pkl)))


_PWN_NAME = (
    b"\x80\x02ctorch._utils\n_rebuild_tensor_v2\nN}X\x08\x00\x00\x00__name__X\x05\x00\x00\x00PWNEDs\x86b0}."
)
_PWN_DICT = (
    b"\x80\x02ctorch._utils\n_rebuild_parameter\nN}X\x08\x00\x00\x00__dict__}X\x04\x00\x00\x00evil"
    b"X\x03\x00\x00\x00yesss\x86b0}."
)
_PWN_STORAGE = b"\x80\x02ctorch\nFloatStorage\n}X\x01\x00\x00\x00xK\x01sb0}."


@pytest.mark.parametrize("pkl", [_PWN_NAME, _PWN_DICT, _PWN_STORAGE], ids=["__name__", "__dict__", "storage"])
def test_build_on_an_allowed_global_is_refused_and_changes_nothing(pkl: bytes) -> None:
    # the reproduction set _rebuild_tensor.__name__ = 'PWNED' and _rebuild_parameter.__dict__ = {'evil': 'yes'}
    with pytest.raises(UnsafeCheckpointError, match="BUILD"):
        read_index(BytesSource(tp.checkpoint(None, {}, pkl=pkl)))
    assert _pickle._rebuild_tensor.__name__ == "_rebuild_tensor"
    assert _pickle._rebuild_parameter.__dict__ == {}
    assert torch._utils._rebuild_tensor_v2.__name__ == "_rebuild_tensor_v2"
    for stand_in in _pickle.ALLOWED.values():
        assert not hasattr(stand_in, "x") and not hasattr(stand_in, "evil")


def test_a_real_module_state_dict_with_metadata_loads(tmp_path) -> None:
    # nn.Module.state_dict() carries a _metadata attribute, pickled with BUILD on the OrderedDict
    model = torch.nn.Sequential(torch.nn.Embedding(12, 4), torch.nn.Linear(4, 3))
    path = tmp_path / "m.pt"
    torch.save(model.state_dict(), path)
    assert b"_metadata" in path.read_bytes()
    record = read_checkpoint_tensor(BytesSource(path.read_bytes()), key="0.weight")
    assert torch.equal(record.tensor, model[0].weight.detach())


def test_build_on_a_plain_container_is_a_typed_error() -> None:
    pkl = b"\x80\x02}}X\x01\x00\x00\x00xK\x01sb."  # BUILD on a dict
    with pytest.raises(CheckpointFormatError):
        read_index(BytesSource(tp.checkpoint(None, {}, pkl=pkl)))

"""The pos_geometry tensor cache: exact round trips, commit keys, and atomic writes."""

from __future__ import annotations

import os
from pathlib import Path

import _pos_geometry_tests_hub_server as hub_server  # registered by conftest.py
import pytest
import torch
from safetensors.torch import save_file

from pos_geometry.errors import InvalidArgumentError
from pos_geometry.sources import cache
from pos_geometry.sources.cache import (
    cache_dir,
    cached_ref,
    cached_table,
    cached_tensor,
    store_ref,
    store_tensor,
)
from pos_geometry.sources.hub import read_hub_tensor
from pos_geometry.sources.tensor_record import TensorRecord

COMMIT = "0123456789abcdef0123456789abcdef01234567"
OTHER = "f" * 40


@pytest.fixture(autouse=True)
def private_cache(monkeypatch, tmp_path):
    monkeypatch.setenv("POS_GEOMETRY_CACHE", str(tmp_path / "pgc"))
    return tmp_path / "pgc"


def _record(dtype: torch.dtype, key: str = "transformer.wpe.weight") -> TensorRecord:
    table = torch.randn(64, 16, generator=torch.Generator().manual_seed(3)).to(dtype)
    name = str(dtype).removeprefix("torch.")
    return TensorRecord(table, key, "model.safetensors", name, ("transformer.wte.weight", key))


def _files(root: Path) -> list[Path]:
    return sorted(p for p in root.rglob("*") if p.is_file()) if root.exists() else []


def test_cache_dir_precedence(monkeypatch, tmp_path):
    monkeypatch.setenv("POS_GEOMETRY_CACHE", str(tmp_path / "explicit"))
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "xdg"))
    assert cache_dir() == tmp_path / "explicit"
    monkeypatch.delenv("POS_GEOMETRY_CACHE")
    assert cache_dir() == tmp_path / "xdg" / "pos_geometry"
    monkeypatch.delenv("XDG_CACHE_HOME")
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    assert cache_dir() == tmp_path / "home" / ".cache" / "pos_geometry"


@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16, torch.float32])
def test_round_trip_keeps_bits_and_stored_dtype(dtype):
    record = _record(dtype)
    path = store_tensor("org/model", COMMIT, record)
    assert path.is_file() and COMMIT in path.parts
    back = cached_tensor("org/model", COMMIT, record.key)
    assert back is not None
    assert back.tensor.dtype == dtype
    assert torch.equal(back.tensor.view(torch.uint8), record.tensor.view(torch.uint8))
    assert (back.key, back.file, back.dtype, back.available_keys) == (
        record.key,
        record.file,
        record.dtype,
        record.available_keys,
    )


def test_entries_are_per_repo_commit_and_key():
    store_tensor("org/model", COMMIT, _record(torch.float32))
    assert cached_tensor("org/model", OTHER, "transformer.wpe.weight") is None
    assert cached_tensor("org/other", COMMIT, "transformer.wpe.weight") is None
    assert cached_tensor("org/model", COMMIT, "transformer.wte.weight") is None


def test_cached_table_finds_the_table_by_role():
    store_tensor("org/model", COMMIT, _record(torch.float16, key="transformer.wte.weight"))
    assert cached_table("org/model", COMMIT, "position") is None
    store_tensor("org/model", COMMIT, _record(torch.float16))
    assert cached_table("org/model", COMMIT, "position").key == "transformer.wpe.weight"
    assert cached_table("org/model", COMMIT, "token").key == "transformer.wte.weight"


def test_branch_names_are_refused_as_keys():
    with pytest.raises(InvalidArgumentError, match="resolved commit"):
        store_tensor("org/model", "main", _record(torch.float32))
    with pytest.raises(InvalidArgumentError, match="not a valid Hugging Face repo id"):
        cached_tensor("../../etc", COMMIT, "x")


def test_refs_round_trip():
    assert cached_ref("org/model", "checkpoint-400") is None
    store_ref("org/model", "checkpoint-400", COMMIT)
    store_ref("org/model", "refs/pr/1", OTHER)
    assert cached_ref("org/model", "checkpoint-400") == COMMIT
    assert cached_ref("org/model", "refs/pr/1") == OTHER
    with pytest.raises(InvalidArgumentError):
        store_ref("org/model", "main", "not-a-commit")


class _Crash(BaseException):
    """Stands for the process dying mid-write (not an ordinary, catchable error)."""


def test_crash_while_writing_leaves_nothing(monkeypatch, private_cache):
    record = _record(torch.float32)
    store_tensor("org/model", COMMIT, _record(torch.float16, key="transformer.wte.weight"))
    before = _files(private_cache)
    real_fsync = os.fsync

    def crash_after_data_is_written(fd):
        assert os.fstat(fd).st_size > 0  # the partial bytes are on disk at this point
        raise _Crash

    monkeypatch.setattr(os, "fsync", crash_after_data_is_written)
    with pytest.raises(_Crash):
        store_tensor("org/model", COMMIT, record)
    monkeypatch.setattr(os, "fsync", real_fsync)
    assert _files(private_cache) == before  # no partial file, no temp file
    assert cached_tensor("org/model", COMMIT, record.key) is None


def test_failed_rename_leaves_nothing(monkeypatch, private_cache):
    def refuse(src, dst):
        raise OSError("disk full")

    monkeypatch.setattr(os, "replace", refuse)
    with pytest.raises(OSError, match="disk full"):
        store_tensor("org/model", COMMIT, _record(torch.float32))
    assert _files(private_cache) == []


def test_a_damaged_entry_is_not_trusted(private_cache):
    path = store_tensor("org/model", COMMIT, _record(torch.float32))
    path.write_bytes(path.read_bytes()[:-100])  # truncated behind our back
    assert cached_tensor("org/model", COMMIT, "transformer.wpe.weight") is None
    assert not path.exists()


def test_temp_files_are_never_read(private_cache):
    path = store_tensor("org/model", COMMIT, _record(torch.float32))
    path.rename(path.with_name(".tmp-abc.part"))
    assert cached_table("org/model", COMMIT, "position") is None


# -- through read_hub_tensor: a failed write costs a refetch, never a wrong answer -------------------
@pytest.fixture
def small_hub(monkeypatch, tmp_path):
    table = torch.randn(1024, 64, generator=torch.Generator().manual_seed(7))
    path = tmp_path / "model.safetensors"
    save_file({"wpe.weight": table, "h.0.weight": torch.zeros(256, 1024)}, path)
    with hub_server.HubServer() as server:
        commit = server.add_revision("org/small", {"model.safetensors": path})
        hub_server.point_hub_at(monkeypatch, server, tmp_path)
        yield server, commit, table


def test_crash_during_store_then_next_call_refetches(small_hub, monkeypatch):
    server, commit, table = small_hub
    real_fsync = os.fsync

    def crash(fd):
        raise _Crash

    monkeypatch.setattr(os, "fsync", crash)
    with pytest.raises(_Crash):
        read_hub_tensor("org/small")
    monkeypatch.setattr(os, "fsync", real_fsync)
    assert _files(cache_dir()) == []
    server.clear_log()
    record, got = read_hub_tensor("org/small")
    assert got == commit and torch.equal(record.tensor, table)
    assert any(r.range for r in server.requests()), "expected a fresh range read"
    server.clear_log()
    read_hub_tensor("org/small")
    assert server.requests() == []


def test_unwritable_cache_warns_and_still_returns_the_table(small_hub, monkeypatch):
    _, _, table = small_hub

    def refuse(src, dst):
        raise OSError("read-only file system")

    monkeypatch.setattr(os, "replace", refuse)
    with pytest.warns(RuntimeWarning, match="could not write its cache"):
        record, _ = read_hub_tensor("org/small")
    assert torch.equal(record.tensor, table)
    assert _files(cache_dir()) == []


# -- small results computed from a commit -------------------------------------------------------------
def test_a_result_round_trips_only_under_its_spec(private_cache):
    sums = {"norms": torch.rand(8, 4, dtype=torch.float32), "cross": torch.rand(8, 2, dtype=torch.float32)}
    path = cache.store_result(
        "org/model", COMMIT, "sums/q.weight/abc", sums, '{"planes":[[0,1]]}', {"n": "8"}
    )
    assert path.name.startswith("@") and path.parent == cache.commit_dir("org/model", COMMIT)
    tensors, meta = cache.cached_result("org/model", COMMIT, "sums/q.weight/abc", '{"planes":[[0,1]]}')
    assert set(tensors) == {"norms", "cross"} and meta["n"] == "8" and meta["result"] == "sums/q.weight/abc"
    for name in sums:
        assert torch.equal(tensors[name], sums[name])
    # another spec, name, commit or repo is no hit; the entry stays for its own spec
    assert cache.cached_result("org/model", COMMIT, "sums/q.weight/abc", '{"planes":[[0,2]]}') is None
    assert cache.cached_result("org/model", COMMIT, "sums/k.weight/abc", '{"planes":[[0,1]]}') is None
    assert cache.cached_result("org/model", OTHER, "sums/q.weight/abc", '{"planes":[[0,1]]}') is None
    assert cache.cached_result("org/other", COMMIT, "sums/q.weight/abc", '{"planes":[[0,1]]}') is None
    assert path.exists()
    # a result is never taken for a table, nor a table for a result
    assert cached_table("org/model", COMMIT, "position") is None
    store_tensor("org/model", COMMIT, _record(torch.float32, key="@sums"))
    assert cache.cached_result("org/model", COMMIT, "sums", "") is None


def test_a_damaged_result_is_removed_and_a_failed_write_leaves_nothing(monkeypatch, private_cache):
    path = cache.store_result("org/model", COMMIT, "r", {"x": torch.ones(3)}, "spec")
    path.write_bytes(path.read_bytes()[:-5])
    assert cache.cached_result("org/model", COMMIT, "r", "spec") is None
    assert not path.exists()

    def crash(*args, **kwargs):
        raise OSError("disk full")

    monkeypatch.setattr(os, "fsync", crash)
    with pytest.raises(OSError):
        cache.store_result("org/model", COMMIT, "r", {"x": torch.ones(3)}, "spec")
    assert _files(private_cache) == []

"""Finding the tables: the real-data folder, the caches, given paths, and honest misses."""

from __future__ import annotations

from pathlib import Path

import numpy as np

from pos_geometry.reproduction.located import locate
from pos_geometry.sources.locations import (
    DATA_ENV,
    REAL_TABLES,
    cache_status,
    fetch_command,
    find_data_dir,
)


def test_the_checkout_finds_the_shared_folder(real_data_dir, monkeypatch, tmp_path):
    monkeypatch.delenv(DATA_ENV, raising=False)
    monkeypatch.chdir(tmp_path)  # found from the package's own checkout, not the cwd
    assert find_data_dir().resolve() == real_data_dir.resolve()


def test_env_and_explicit_folders(monkeypatch, tmp_path):
    empty = tmp_path / "empty"
    empty.mkdir()
    assert find_data_dir(empty) is None
    np.save(tmp_path / REAL_TABLES["gpt2"], np.zeros((4, 2), np.float32))
    assert find_data_dir(tmp_path) == tmp_path
    monkeypatch.setenv(DATA_ENV, str(tmp_path))
    assert find_data_dir() == tmp_path


def test_real_table_is_used_and_labelled(real_data_dir, gpt2_wpe):
    loc = locate("gpt2-small", data_dir=real_data_dir)
    assert loc.found and loc.name == "gpt2"
    assert np.array_equal(loc.table.numpy(), gpt2_wpe)
    assert loc.table.provenance.model_id == "gpt2" and "gpt2_small_wpe.npy" in loc.where


def test_missing_models_are_reported_never_faked(real_data_dir):
    loc = locate("gpt2-xl", data_dir=real_data_dir)
    assert not loc.found and loc.table is None
    assert loc.fetch == "pos-geometry fetch gpt2-xl"
    # a revision the real table does not stand for is missing too
    assert not locate("gpt2", revision="0" * 40, data_dir=real_data_dir).found


def test_given_paths_win(tmp_path):
    path = tmp_path / "medium.npy"
    table = np.random.default_rng(0).normal(size=(8, 4)).astype(np.float32)
    np.save(path, table)
    loc = locate("gpt2-medium", paths={"gpt2-medium": path})
    assert loc.found and np.array_equal(loc.table.numpy(), table) and "--model" in loc.where


def test_rotary_rows_are_computed_not_fetched():
    loc = locate("pythia-70m", n_positions=64)
    assert loc.found and loc.table.kind == "rotary" and loc.table.shape == (64, 16)
    assert cache_status("pythia-70m").computed


def test_cache_status_sees_the_pos_geometry_cache(tmp_path):
    import torch

    from pos_geometry.sources.cache import store_ref, store_tensor
    from pos_geometry.sources.tensor_record import TensorRecord

    assert not cache_status("gpt2").any
    commit = "a" * 40
    record = TensorRecord(
        tensor=torch.zeros(4, 2), key="wpe.weight", file="model.safetensors", dtype="float32"
    )
    store_tensor("openai-community/gpt2", commit, record)
    store_ref("openai-community/gpt2", "main", commit)
    status = cache_status("gpt2")
    assert status.any and status.pos_geometry is not None and Path(status.pos_geometry).is_dir()
    assert fetch_command("gpt2", "main") == "pos-geometry fetch gpt2"

"""Where a model-table row's table is found offline: caches, data/tables, the real tables; NAME=PATH."""

from __future__ import annotations

import json
import socket
from pathlib import Path

import numpy as np
import pytest
import torch

import pos_geometry as pg
from pos_geometry.errors import (
    InvalidArgumentError,
    NoLearnedTableError,
    NotCachedError,
    UnknownModelError,
)
from pos_geometry.reproduction import parse_model_paths
from pos_geometry.sources.cache import store_ref, store_tensor
from pos_geometry.sources.locations import (
    DATA_ENV,
    TABLES_ENV,
    export_stem,
    fetch_command,
    find_local_table,
    parse_named_path,
    table_locations,
)
from pos_geometry.sources.tensor_record import TensorRecord


@pytest.fixture
def offline(monkeypatch, tmp_path):
    """Empty private caches, an empty data/tables, and no socket may connect."""
    import huggingface_hub.constants

    monkeypatch.setenv("POS_GEOMETRY_CACHE", str(tmp_path / "pg-cache"))
    monkeypatch.setattr(huggingface_hub.constants, "HF_HUB_CACHE", str(tmp_path / "hf-cache"))
    monkeypatch.setenv(TABLES_ENV, str(tmp_path / "tables"))
    monkeypatch.delenv(DATA_ENV, raising=False)

    def refuse(*args, **kwargs):
        raise AssertionError("network touched")

    monkeypatch.setattr(socket.socket, "connect", refuse)
    return tmp_path


def _export(folder: Path, stem: str, table: np.ndarray, **meta) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    np.save(folder / f"{stem}.npy", table)
    (folder / f"{stem}.provenance.json").write_text(json.dumps(meta))
    return folder / f"{stem}.npy"


def test_gpt2_by_name_offline_is_the_real_table_and_says_so(offline, real_data_dir, gpt2_wpe):
    pe = pg.load("gpt2", offline=True)
    assert np.array_equal(pe.numpy(), gpt2_wpe)
    prov = pe.provenance
    assert prov.model_id == "gpt2" and prov.revision == "main" and prov.commit is None
    assert prov.source == f"{real_data_dir / 'gpt2_small_wpe.npy'} (real tables)"
    # online too: the real table answers before any request (the socket refuses connections)
    assert np.array_equal(pg.load("gpt2-small", offline=False).numpy(), gpt2_wpe)
    # a revision the real table does not stand for is not answered by it
    with pytest.raises(NotCachedError, match=r"pos-geometry fetch gpt2"):
        pg.load("gpt2", revision="0" * 40, offline=True)


def test_data_tables_answer_before_the_real_tables(offline, real_data_dir):
    table = np.random.default_rng(1).normal(size=(1024, 768)).astype(np.float32)
    commit = "c" * 40
    path = _export(offline / "tables", "gpt2", table, commit=commit, key="wpe.weight", stored_dtype="float32")
    pe = pg.load("gpt2", offline=True)
    assert np.array_equal(pe.numpy(), table)
    assert pe.provenance.commit == commit and pe.provenance.tensor_key == "wpe.weight"
    assert pe.provenance.source == f"{path} (data/tables)"
    found = find_local_table("gpt2")
    assert found is not None and found.origin == "data/tables" and found.path == path


def test_a_revision_is_its_own_file_and_offsets_come_from_the_row(offline):
    # OPT's stored table has 2 leading rows that are not positions: an export keeps them, load drops them
    stored = np.arange(2050 * 4, dtype=np.float32).reshape(2050, 4)
    assert export_stem(pg.get_spec("opt-125m")) == "opt-125m"
    _export(offline / "tables", "opt-125m", stored, commit="d" * 40)
    pe = pg.load("opt-125m", offline=True)
    assert np.array_equal(pe.numpy(), stored[2:]) and pe.provenance.row_offset == 2
    spec = pg.get_spec("alias-gpt2-small-x21")
    assert export_stem(spec, "checkpoint-400") == "alias-gpt2-small-x21_checkpoint-400"
    ckpt = np.ones((1024, 8), np.float32)
    _export(offline / "tables", "alias-gpt2-small-x21_checkpoint-400", ckpt)
    pe = pg.load("crfm-gpt2-small-x21", revision="checkpoint-400", offline=True)
    assert np.array_equal(pe.numpy(), ckpt) and pe.provenance.revision == "checkpoint-400"
    with pytest.raises(NotCachedError):  # the default revision has no export here
        pg.load("alias-gpt2-small-x21", offline=True)


def test_the_pos_geometry_cache_answers_first(offline, real_data_dir):
    commit = "a" * 40
    cached = torch.full((1024, 768), 0.5)
    store_tensor(
        "openai-community/gpt2", commit, TensorRecord(cached, "wpe.weight", "model.safetensors", "float32")
    )
    store_ref("openai-community/gpt2", "main", commit)
    pe = pg.load("gpt2", offline=True)
    assert torch.equal(pe.matrix, cached) and pe.provenance.commit == commit
    assert pe.provenance.source == "model.safetensors::wpe.weight (pos_geometry cache)"
    places = table_locations("gpt2")
    assert [(p.label, p.found) for p in places] == [
        ("pos_geometry cache", True),
        ("HF cache", False),
        ("data/tables", False),
        ("real tables", True),
    ]


def test_table_locations_name_every_place_found_or_not(offline, monkeypatch):
    monkeypatch.setenv(DATA_ENV, str(offline / "no-real-tables"))
    places = table_locations("gpt2-medium")
    assert [p.label for p in places] == ["pos_geometry cache", "HF cache", "data/tables"]
    assert not any(p.found for p in places)
    assert places[2].where == str(offline / "tables" / "gpt2-medium.npy")
    gpt2 = table_locations("gpt2")
    assert gpt2[-1].label == "real tables" and not gpt2[-1].found and DATA_ENV in gpt2[-1].where
    (rotary,) = table_locations("pythia-70m")
    assert rotary.found and rotary.label == "model table"
    assert fetch_command("gpt2") == "pos-geometry fetch gpt2"
    assert fetch_command("pythia-70m", "step1000") == "pos-geometry fetch pythia-70m --revision step1000"
    with pytest.raises(NotCachedError, match=r"pos-geometry fetch gpt2-medium"):
        pg.load("gpt2-medium", offline=True)


# --- NAME=PATH ---------------------------------------------------------------------------------------
def test_name_equals_path_is_the_row_read_from_the_file(real_data_dir, gpt2_wpe):
    path = real_data_dir / "gpt2_small_wpe.npy"
    pe = pg.load(f"gpt2-small={path}")
    assert np.array_equal(pe.numpy(), gpt2_wpe)
    assert pe.provenance.model_id == "gpt2" and pe.provenance.source == str(path)
    assert parse_named_path(f"GPT2-Small={path}") == ("gpt2", path)
    assert parse_named_path("gpt2") is None


def test_name_equals_path_takes_the_row_offset(tmp_path):
    stored = np.arange(2050 * 3, dtype=np.float32).reshape(2050, 3)
    np.save(tmp_path / "opt.npy", stored)
    pe = pg.load(f"opt-125m={tmp_path / 'opt.npy'}")
    assert np.array_equal(pe.numpy(), stored[2:]) and pe.provenance.row_offset == 2
    np.save(tmp_path / "positions.npy", stored[2:])  # already cut to its 2048 positions
    pe = pg.load(f"opt-125m={tmp_path / 'positions.npy'}")
    assert np.array_equal(pe.numpy(), stored[2:]) and pe.provenance.row_offset == 0


def test_any_name_labels_the_file_and_a_table_row_says_it_applied(tmp_path):
    """Issue 21: NAME=PATH works with any NAME; a model-table NAME brings its row, and the provenance says so."""
    np.save(tmp_path / "t.npy", np.arange(32, dtype=np.float32).reshape(8, 4))
    mine = pg.load(f"mine={tmp_path / 't.npy'}")
    assert mine.provenance.model_id == "mine" and "model_table_row" not in mine.provenance.config_dict
    assert parse_named_path(f"org/finetuned={tmp_path / 't.npy'}") == ("org/finetuned", tmp_path / "t.npy")
    known = pg.load(f"GPT2-Small={tmp_path / 't.npy'}")
    assert known.provenance.model_id == "gpt2" and known.provenance.config_dict["model_table_row"] == "gpt2"
    for bad in ("../x", "a/b/c", "/abs", "~home", "a\\b"):
        with pytest.raises(InvalidArgumentError, match="a label, not a path"):
            pg.load(f"{bad}={tmp_path / 't.npy'}")
    with pytest.raises(
        UnknownModelError, match="gpt2"
    ):  # where a row is needed (the reproduction), typos still fail
        parse_named_path(f"gtp2={tmp_path / 't.npy'}", known=True)


def test_name_equals_path_refuses_what_it_cannot_be(tmp_path):
    np.save(tmp_path / "t.npy", np.ones((8, 4), np.float32))
    with pytest.raises(InvalidArgumentError, match=r"does not exist"):
        pg.load(f"gpt2={tmp_path / 'missing.npy'}")
    with pytest.raises(InvalidArgumentError, match=r"NAME=PATH"):
        pg.load("=x")
    with pytest.raises(NoLearnedTableError, match=r"pythia-70m is a rotary model"):
        pg.load(f"pythia-70m={tmp_path / 't.npy'}")


def test_reproduce_shares_the_parser(tmp_path):
    np.save(tmp_path / "t.npy", np.ones((8, 4), np.float32))
    item = f"gpt2-355m={tmp_path / 't.npy'}"
    assert parse_model_paths([item]) == dict([parse_named_path(item)]) == {"gpt2-medium": tmp_path / "t.npy"}

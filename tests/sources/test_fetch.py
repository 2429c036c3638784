"""``fetch_table`` / ``pos-geometry fetch``: only the table's bytes into the cache, an atomic export to
data/tables/, and afterwards ``load`` and ``info`` find it offline (against the loopback hub)."""

from __future__ import annotations

import hashlib
import json
import re
from pathlib import Path

import _pos_geometry_tests_hub_server as hub_server  # registered by conftest.py
import numpy as np
import pytest
import torch
from safetensors.torch import save_file
from typer.testing import CliRunner

import pos_geometry as pg
from pos_geometry.cli import app
from pos_geometry.errors import NotApplicableError, NotCachedError, RemoteError
from pos_geometry.sources import cache
from pos_geometry.sources.fetch import fetch_table
from pos_geometry.sources.locations import TABLES_ENV

REPO = "openai-community/gpt2"
runner = CliRunner()


@pytest.fixture(scope="module")
def served(tmp_path_factory):
    root = tmp_path_factory.mktemp("fetch_repo")
    gen = torch.Generator().manual_seed(3)
    tables = {}
    for branch in ("main", "other"):
        wpe = torch.randn(1024, 32, generator=gen)
        path = root / f"{branch}.safetensors"
        # the token table is 16x the positional one: a fetch that downloaded the file would show
        save_file({"wte.weight": torch.randn(16 * 1024, 32, generator=gen), "wpe.weight": wpe}, path)
        tables[branch] = (wpe, path)
    (root / "config.json").write_text(json.dumps({"model_type": "gpt2", "n_positions": 1024, "n_embd": 32}))
    with hub_server.HubServer() as server:
        commits = {
            branch: server.add_revision(
                REPO, {"config.json": root / "config.json", "model.safetensors": path}, refs=(branch,)
            )
            for branch, (_, path) in tables.items()
        }
        yield server, commits, {b: t for b, (t, _) in tables.items()}


@pytest.fixture
def hub(served, monkeypatch, tmp_path):
    server, commits, tables = served
    hub_server.point_hub_at(monkeypatch, server, tmp_path)
    exported = tmp_path / "tables"
    monkeypatch.setenv(TABLES_ENV, str(exported))
    server.fault = None
    server.clear_log()
    yield server, commits, tables, exported
    server.fault = None


def _files(folder: Path) -> list[Path]:
    return sorted(p for p in folder.rglob("*") if p.is_file()) if folder.exists() else []


def test_fetch_reads_only_the_table_and_load_finds_it_offline(hub, monkeypatch):
    server, commits, tables, exported = hub
    got = fetch_table("gpt2-small")
    assert (got.name, got.revision, got.commit, got.tensor_key) == (
        "gpt2",
        "main",
        commits["main"],
        "wpe.weight",
    )
    assert got.shape == (1024, 32) and got.stored_dtype == "float32" and got.exported is None
    body = sum(r.body_bytes for r in server.requests() if r.range)
    assert 1024 * 32 * 4 <= body < 1024 * 32 * 4 + 64 * 1024  # the table, not the 16x token table
    assert _files(exported) == []  # no export without --export
    hub_server.go_offline(monkeypatch)
    server.clear_log()
    pe = pg.load("gpt2")
    assert server.requests() == [] and torch.equal(pe.matrix, tables["main"])
    assert pe.provenance.commit == commits["main"] and pe.provenance.source.endswith("(pos_geometry cache)")
    res = runner.invoke(app, ["info", "gpt2"])
    assert re.search(r"available offline\s*│\s*yes \(pos_geometry cache\)", res.stdout), res.stdout


def test_export_writes_the_table_and_its_provenance_and_load_finds_it_offline(hub, monkeypatch):
    server, commits, tables, exported = hub
    res = runner.invoke(app, ["fetch", "gpt2", "--revision", "other", "--export"])
    assert res.exit_code == 0, res.output
    npy, meta_path = exported / "gpt2_other.npy", exported / "gpt2_other.provenance.json"
    assert _files(exported) == [npy, meta_path]
    assert f"exported to {npy}" in res.stdout and commits["other"][:12] in res.stdout
    assert np.array_equal(np.load(npy), tables["other"].numpy())
    meta = json.loads(meta_path.read_text())
    assert meta["commit"] == commits["other"] and meta["revision"] == "other" and meta["key"] == "wpe.weight"
    assert meta["sha256"] == hashlib.sha256(npy.read_bytes()).hexdigest() and meta["row_offset"] == 0
    cache.clear()  # only the export is left
    hub_server.go_offline(monkeypatch)
    server.clear_log()
    pe = pg.load("gpt2", revision="other")
    assert server.requests() == [] and torch.equal(pe.matrix, tables["other"])
    assert pe.provenance.source == f"{npy} (data/tables)" and pe.provenance.commit == commits["other"]
    with pytest.raises(NotCachedError):  # main was neither cached nor exported
        pg.load("gpt2")
    info = runner.invoke(app, ["info", "gpt2", "--revision", "other"])
    assert re.search(rf"found\s*│\s*data/tables: {re.escape(str(npy))}", info.stdout), info.stdout
    # a table swapped behind the provenance file's back is refused, not mislabelled
    np.save(npy, np.zeros((1024, 32), np.float32))
    with pytest.raises(pg.CheckpointFormatError, match="sha256 differs"):
        pg.load("gpt2", revision="other")


@pytest.mark.parametrize("kind", ["drop", "short"])
def test_a_server_failing_mid_body_leaves_no_file_anywhere(hub, kind):
    server, _, tables, exported = hub
    server.fault = hub_server.Fault(kind, after=0)
    res = runner.invoke(app, ["fetch", "gpt2", "--export"])
    assert res.exit_code == 1 and "Traceback" not in res.output
    assert _files(exported) == []
    assert [p for p in _files(cache.cache_dir()) if "refs" not in p.parts] == []
    server.fault = None
    got = fetch_table("gpt2", export=True)  # the next good fetch is complete
    assert np.array_equal(np.load(got.exported), tables["main"].numpy())


def test_rotary_rows_have_nothing_to_fetch(hub):
    server, _, _, exported = hub
    with pytest.raises(NotApplicableError, match="rotary"):
        fetch_table("pythia-70m", export=True)
    assert server.requests() == [] and _files(exported) == []
    res = runner.invoke(app, ["fetch", "gtp2"])
    assert res.exit_code == 1 and "gpt2" in res.stderr


def test_a_fetch_error_is_typed(hub):
    server, _, _, _ = hub
    server.fault = hub_server.Fault("status", status=500)
    with pytest.raises(RemoteError, match="HTTP 500"):
        fetch_table("gpt2")

"""Metadata files (config.json, shard indexes) enter the HF cache only whole and within their bound, which
holds while they stream: a file announced over the limit is refused before
any byte of it, a server that sends more than it announced is cut off, and nothing partial stays behind."""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path

import _pos_geometry_tests_hub_server as hub_server  # registered by conftest.py
import pytest
import torch
from huggingface_hub import try_to_load_from_cache
from safetensors.torch import save_file

from pos_geometry import load
from pos_geometry.errors import CheckpointFormatError
from pos_geometry.sources import metadata_files
from pos_geometry.sources.hf_cache import hf_repo_dir
from pos_geometry.sources.hub import read_config

REPO = "acme/meta"
CONFIG = {"model_type": "gpt2", "n_positions": 64, "n_embd": 16, "n_layer": 1, "padding": "x" * 4000}


@pytest.fixture(scope="module")
def served(tmp_path_factory):
    root = tmp_path_factory.mktemp("meta")
    (root / "config.json").write_text(json.dumps(CONFIG))
    wpe = torch.randn(64, 16, generator=torch.Generator().manual_seed(0))
    save_file({"transformer.wpe.weight": wpe}, root / "model.safetensors")
    with hub_server.HubServer() as server:
        commit = server.add_revision(
            REPO, {"config.json": root / "config.json", "model.safetensors": root / "model.safetensors"}
        )
        yield server, commit, wpe


@pytest.fixture
def hub(served, monkeypatch, tmp_path):
    server, commit, wpe = served
    hub_server.point_hub_at(monkeypatch, server, tmp_path)
    return server, commit, wpe


def _left_in_hf_cache() -> list[str]:
    repo = hf_repo_dir(REPO)
    return sorted(str(p.relative_to(repo)) for p in repo.rglob("*") if p.is_file() or p.is_symlink())


def test_a_config_lands_whole_in_the_hf_cache_layout_and_serves_offline(hub, monkeypatch):
    _, commit, wpe = hub
    config, got_commit = read_config(REPO)
    assert config["padding"] == CONFIG["padding"] and got_commit == commit
    snapshot = try_to_load_from_cache(REPO, "config.json", revision="main")  # huggingface_hub finds it
    assert snapshot is not None and json.loads(Path(snapshot).read_text()) == CONFIG
    assert [p for p in _left_in_hf_cache() if "incomplete" in p or p.startswith("snapshots/.")] == []
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    assert read_config(REPO, offline=True) == (config, commit)
    monkeypatch.delenv("HF_HUB_OFFLINE")
    assert torch.equal(load(REPO).matrix, wpe)


@pytest.mark.parametrize("limit", [16, 1024, 4000])
def test_a_file_announced_over_the_limit_is_refused_before_any_byte(hub, monkeypatch, limit):
    server, _, _ = hub
    monkeypatch.setenv("POS_GEOMETRY_MAX_METADATA_BYTES", str(limit))
    server.clear_log()
    with pytest.raises(
        CheckpointFormatError, match=rf"over the limit of {limit:,} bytes .* POS_GEOMETRY_MAX_METADATA_BYTES"
    ):
        read_config(REPO)
    assert [r for r in server.requests() if r.method == "GET" and "config.json" in r.path] == []
    assert _left_in_hf_cache() == []


@pytest.mark.parametrize("announced", [0, 10, 2000, len(json.dumps(CONFIG)) - 1])
def test_a_server_that_sends_more_than_it_announced_is_cut_off(hub, monkeypatch, announced):
    """The HEAD's size is the bound while the body streams: a server announcing fewer bytes than it sends
    (any number of them) leaves nothing in the cache, not even a partial blob."""
    real = metadata_files.get_hf_file_metadata

    def lying(url, **kwargs):
        meta = real(url, **kwargs)
        return dataclasses.replace(meta, size=announced)

    monkeypatch.setattr(metadata_files, "get_hf_file_metadata", lying)
    with pytest.raises(
        CheckpointFormatError, match=f"more than the {announced:,} bytes its server announced"
    ):
        read_config(REPO)
    assert _left_in_hf_cache() == []


def test_a_server_that_sends_less_than_it_announced_leaves_nothing(hub, monkeypatch):
    real = metadata_files.get_hf_file_metadata

    def inflated(url, **kwargs):
        meta = real(url, **kwargs)
        return dataclasses.replace(meta, size=meta.size + 100)

    monkeypatch.setattr(metadata_files, "get_hf_file_metadata", inflated)
    with pytest.raises(CheckpointFormatError, match="transfer ended after"):
        read_config(REPO)
    assert _left_in_hf_cache() == []


def test_an_unsafe_etag_does_not_name_the_blob(hub, monkeypatch):
    """The ETag is the server's word: one that is not a plain name (``../../x``) does not become a path; the
    blob is named by the SHA-256 of its bytes."""
    real = metadata_files.get_hf_file_metadata

    def hostile(url, **kwargs):
        meta = real(url, **kwargs)
        return dataclasses.replace(meta, etag="../../../outside")

    monkeypatch.setattr(metadata_files, "get_hf_file_metadata", hostile)
    read_config(REPO)
    blobs = [p for p in _left_in_hf_cache() if p.startswith("blobs/")]
    assert len(blobs) == 1 and len(blobs[0].split("/")[1]) == 64
    assert not (hf_repo_dir(REPO).parents[2] / "outside").exists()

"""A model-table row's tensor key and weight files are what the hub read tries first (the registry is the source)."""

from __future__ import annotations

import _pos_geometry_tests_hub_server as hub_server  # registered by conftest.py
import pytest
import torch
from safetensors.torch import save_file

import pos_geometry as pg
from pos_geometry.sources.hub import read_hub_tensor

KEYS_REPO = "stanford-crfm/alias-gpt2-small-x21"  # row: position_key transformer.wpe.weight
FILES_REPO = "stanford-crfm/battlestar-gpt2-small-x49"  # row: weight_files (pytorch_model.bin,)


@pytest.fixture(scope="module")
def served(tmp_path_factory):
    root = tmp_path_factory.mktemp("row_hints")
    gen = torch.Generator().manual_seed(5)
    a, b, c = (torch.randn(1024, 8, generator=gen) for _ in range(3))
    both_keys = root / "both_keys.safetensors"
    save_file({"wpe.weight": a, "transformer.wpe.weight": b}, both_keys)
    st, binary = root / "model.safetensors", root / "pytorch_model.bin"
    save_file({"transformer.wpe.weight": a}, st)
    torch.save({"transformer.wpe.weight": c}, binary)
    with hub_server.HubServer() as server:
        server.add_revision(KEYS_REPO, {"model.safetensors": both_keys})
        server.add_revision(FILES_REPO, {"model.safetensors": st, "pytorch_model.bin": binary})
        yield server, a, b, c


@pytest.fixture
def hub(served, monkeypatch, tmp_path):
    hub_server.point_hub_at(monkeypatch, served[0], tmp_path)
    served[0].clear_log()
    return served


def test_the_rows_tensor_key_is_taken_when_present(hub):
    _, a, b, _ = hub
    assert pg.get_spec(KEYS_REPO).position_key == "transformer.wpe.weight"
    pe = pg.load("alias-gpt2-small-x21")
    assert torch.equal(pe.matrix, b) and pe.provenance.tensor_key == "transformer.wpe.weight"
    pg.sources.cache.clear()
    assert torch.equal(read_hub_tensor(KEYS_REPO)[0].tensor, a)  # without the row: the generic key order


def test_the_rows_weight_files_are_tried_first(hub):
    server, a, _, c = hub
    assert pg.get_spec(FILES_REPO).weight_files == ("pytorch_model.bin",)
    pe = pg.load("battlestar-gpt2-small-x49")
    assert torch.equal(pe.matrix, c) and pe.provenance.source.startswith("pytorch_model.bin::")
    assert not [r for r in server.requests() if FILES_REPO in r.path and r.path.endswith("model.safetensors")]
    pg.sources.cache.clear()
    assert torch.equal(read_hub_tensor(FILES_REPO)[0].tensor, a)  # without the row: safetensors first

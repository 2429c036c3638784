"""The cache knows where an entry came from (hostile inputs, class 2): endpoint + repo + commit + file + tensor."""

from __future__ import annotations

import json
import socket

import _pos_geometry_tests_hub_server as hub_server  # registered by conftest.py
import pytest
import torch
from huggingface_hub import constants
from safetensors.torch import save_file

from pos_geometry.errors import NotCachedError, RemoteError
from pos_geometry.sources.cache import cached_ref, cached_tensor
from pos_geometry.sources.hub import read_hub_tensor

REPO = "acme/mirrored"


@pytest.fixture(scope="module")
def served(tmp_path_factory):
    root = tmp_path_factory.mktemp("mirror")
    (root / "config.json").write_text(json.dumps({"model_type": "gpt2", "n_positions": 32, "n_embd": 8}))
    wpe = torch.randn(32, 8, generator=torch.Generator().manual_seed(0))
    save_file({"transformer.wpe.weight": wpe}, root / "model.safetensors")
    with hub_server.HubServer() as server:
        commit = server.add_revision(
            REPO, {"config.json": root / "config.json", "model.safetensors": root / "model.safetensors"}
        )
        yield server, wpe, commit


@pytest.fixture
def hub(served, monkeypatch, tmp_path):
    server, wpe, commit = served
    hub_server.point_hub_at(monkeypatch, server, tmp_path)
    server.answer_sha = None
    yield server, wpe, commit
    server.answer_sha = None


def _closed_endpoint() -> str:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return f"http://127.0.0.1:{sock.getsockname()[1]}"


def test_an_entry_from_one_endpoint_is_not_served_for_another(hub, monkeypatch) -> None:
    server, wpe, commit = hub
    record, got = read_hub_tensor(REPO)
    assert got == commit and torch.equal(record.tensor, wpe)
    assert (
        cached_tensor(REPO, commit, "transformer.wpe.weight") is not None
        and cached_ref(REPO, "main") == commit
    )
    other = _closed_endpoint()  # another endpoint (a mirror that is down)
    monkeypatch.setattr(constants, "ENDPOINT", other)
    assert cached_tensor(REPO, commit, "transformer.wpe.weight") is None  # not this endpoint's entry
    assert cached_ref(REPO, "main") is None
    with pytest.raises((NotCachedError, RemoteError)):
        read_hub_tensor(REPO, revision=commit)
    monkeypatch.setattr(constants, "ENDPOINT", server.url)
    server.clear_log()
    again, _ = read_hub_tensor(REPO, revision=commit)
    assert torch.equal(again.tensor, wpe) and not [r for r in server.requests() if r.range]  # its own entry


def test_a_listing_of_another_commit_is_refused(hub) -> None:
    server, _, commit = hub
    server.answer_sha = "b" * 40
    with pytest.raises(
        RemoteError, match=f"answered with commit {'b' * 40} when commit {commit} was asked for"
    ):
        read_hub_tensor(REPO, revision=commit)
    assert cached_tensor(REPO, commit, "transformer.wpe.weight") is None
    assert cached_tensor(REPO, "b" * 40, "transformer.wpe.weight") is None

"""A GGUF file on a (loopback) hub: the atlas range-reads its header and q/k tensors only, pinned to one
commit; offline it reads the HF cache; nothing is kept under transformers key names in pos_geometry's cache."""

from __future__ import annotations

import _pos_geometry_tests_gguf_files as gguf_files
import _pos_geometry_tests_hub_server as hub_server  # registered by conftest.py
import pytest
import torch
import transformers

import pos_geometry as pg
from pos_geometry.errors import InvalidArgumentError, NotCachedError
from pos_geometry.sources.byte_source import FileByteSource
from pos_geometry.sources.gguf.header import read_header

REPO = "tiny/llama-gguf"
NAME = "tiny.F32.gguf"


@pytest.fixture(scope="module")
def served(tmp_path_factory):
    root = tmp_path_factory.mktemp("gguf_hub")
    config = transformers.LlamaConfig(
        hidden_size=64,
        intermediate_size=2048,
        num_attention_heads=4,
        num_key_value_heads=2,
        num_hidden_layers=2,
        vocab_size=4096,
        max_position_embeddings=256,
    )  # fmt: skip  (wide MLP and vocabulary: most of the file is not q/k)
    torch.manual_seed(0)
    path = gguf_files.llama_to_gguf(transformers.LlamaForCausalLM(config), root / NAME, "F32")
    with hub_server.HubServer() as server:
        commit = server.add_revision(REPO, {NAME: path})
        yield server, commit, path


@pytest.fixture
def hub(served, monkeypatch, tmp_path):
    server, commit, path = served
    hub_server.point_hub_at(monkeypatch, server, tmp_path)
    server.clear_log()
    return server, commit, path


def test_hub_atlas_equals_local_and_reads_only_header_and_qk(hub, tmp_path):
    server, commit, path = hub
    atlas = pg.rotary_atlas(REPO, gguf_file=NAME)
    local = pg.rotary_atlas(path)
    torch.testing.assert_close(atlas.qk_share, local.qk_share, rtol=0, atol=0)
    assert atlas.provenance.commit == commit and atlas.provenance.model_id == REPO
    header = read_header(FileByteSource(path))
    qk = sum(t.n_bytes for n, t in header.tensors.items() if n.endswith(("attn_q.weight", "attn_k.weight")))
    assert path.stat().st_size > 10 * qk  # the file is mostly other weights ...
    assert server.bytes_sent < header.data_offset + qk + (1 << 20)  # ... which never travel
    assert not list((tmp_path / "pos_geometry_cache").rglob("*.safetensors"))  # no tensor cached by key name


def test_offline_reads_the_hf_cache_or_says_what_is_missing(hub, monkeypatch):
    from huggingface_hub import hf_hub_download

    server, commit, path = hub
    pg.rotary_atlas(REPO, gguf_file=NAME, layers=[0])  # resolves and remembers the commit
    hub_server.go_offline(monkeypatch)
    with pytest.raises(NotCachedError, match="hf download"):
        pg.rotary_atlas(REPO, gguf_file=NAME)
    monkeypatch.setenv("HF_HUB_OFFLINE", "0")
    from huggingface_hub import constants

    monkeypatch.setattr(constants, "HF_HUB_OFFLINE", False)
    hf_hub_download(REPO, NAME, revision=commit)
    hub_server.go_offline(monkeypatch)
    server.clear_log()
    atlas = pg.rotary_atlas(REPO, gguf_file=NAME)
    assert not server.requests()
    torch.testing.assert_close(atlas.qk_share, pg.rotary_atlas(path).qk_share, rtol=0, atol=0)


@pytest.mark.parametrize("name", ["../x.gguf", "/abs.gguf", "a\\b.gguf", "model.bin", "", "a//b.gguf"])
def test_gguf_file_names_never_become_paths(hub, name):
    with pytest.raises(InvalidArgumentError, match="gguf_file"):
        pg.rotary_atlas(REPO, gguf_file=name)


def test_load_reads_only_the_header_from_the_hub(hub):
    server, commit, path = hub
    table = pg.load(REPO, gguf_file=NAME)
    assert table.kind == "rotary" and table.provenance.commit == commit
    torch.testing.assert_close(table.matrix, pg.load(path).matrix, rtol=0, atol=0)
    assert server.bytes_sent < read_header(FileByteSource(path)).data_offset + (1 << 20)

"""read_hub_tensor / resolve_commit / read_config against a local hub-compatible server.

The served checkpoints hold GPT-2's real positional table beside large other tensors
(a 50257×768 token table, transformer blocks), so reading the whole file would be
obvious in the server's log: every byte-count assertion sums what the server wrote
to its sockets, not what the client says it read.
"""

from __future__ import annotations

import json
import socket
from pathlib import Path

import _pos_geometry_tests_hub_server as hub_server  # registered by conftest.py
import numpy as np
import pytest
import torch
from huggingface_hub import constants, hf_hub_download
from safetensors.torch import save_file

from pos_geometry.errors import (
    CheckpointFormatError,
    MissingTensorError,
    NotCachedError,
    RevisionNotFoundError,
    UnknownModelError,
)
from pos_geometry.sources.hub import is_offline, read_config, read_hub_tensor, resolve_commit

SLACK = 256 * 1024  # allowed beyond the tensor's own bytes: headers, listings, read-ahead
CONFIG = {"model_type": "gpt2", "n_positions": 1024, "n_embd": 768, "n_layer": 12}


@pytest.fixture(scope="module")
def repos(tmp_path_factory, gpt2_wpe):
    """Serve GPT-2-like repos; yields (server, {name: commit}, expected tables)."""
    root = tmp_path_factory.mktemp("hub_repos")
    gen = torch.Generator().manual_seed(0)
    wpe = torch.from_numpy(gpt2_wpe)
    wte = torch.randn(50257, 768, generator=gen)
    block = torch.randn(768, 2304, generator=gen)
    init_wpe = torch.randn(1024, 768, generator=gen) * 0.01  # what checkpoint-0 of a replica would hold
    config = root / "config.json"
    config.write_text(json.dumps(CONFIG))

    st = root / "model.safetensors"
    save_file(
        {
            "transformer.h.0.attn.c_attn.weight": block,
            "transformer.wpe.weight": wpe,
            "transformer.wte.weight": wte,
        },
        st,
    )
    bin16, bin32 = root / "fp16.bin", root / "fp32.bin"
    torch.save(
        {k: v.half() for k, v in {"transformer.wte.weight": wte, "transformer.wpe.weight": wpe}.items()},
        bin16,
    )
    other = {"transformer.wte.weight": wte[:8192].clone(), "transformer.h.0.attn.c_attn.weight": block}
    torch.save({**other, "transformer.wpe.weight": init_wpe}, bin32)
    shard1, shard2 = root / "model-00001-of-00002.safetensors", root / "model-00002-of-00002.safetensors"
    save_file(other, shard1)
    last = {"transformer.h.1.attn.c_attn.weight": block, "transformer.ln_f.weight": torch.ones(768)}
    save_file({**last, "transformer.wpe.weight": wpe}, shard2)
    index = root / "model.safetensors.index.json"
    weight_map = {k: shard1.name for k in other} | {k: shard2.name for k in [*last, "transformer.wpe.weight"]}
    index.write_text(json.dumps({"metadata": {"total_size": 0}, "weight_map": weight_map}))

    with hub_server.HubServer() as server:
        commits = {
            "st": server.add_revision(
                "openai-community/gpt2", {"config.json": config, "model.safetensors": st}
            ),
            "main": server.add_revision(
                "crfm/gpt2-replica", {"config.json": config, "pytorch_model.bin": bin16}
            ),
            "ckpt0": server.add_revision(
                "crfm/gpt2-replica",
                {"config.json": config, "pytorch_model.bin": bin32},
                refs=("checkpoint-0",),
            ),
            "sharded": server.add_revision(
                "org/gpt2-sharded",
                {"config.json": config, index.name: index, shard1.name: shard1, shard2.name: shard2},
            ),
            "noweights": server.add_revision("org/tokenizer-only", {"config.json": config}),
        }
        yield server, commits, {"wpe": wpe, "init_wpe": init_wpe}


@pytest.fixture
def hub(repos, monkeypatch, tmp_path):
    server, commits, tables = repos
    hub_server.point_hub_at(monkeypatch, server, tmp_path)
    server.ignore_range = server.lfs_redirect = False
    server.clear_log()
    yield server, commits, tables
    server.ignore_range = server.lfs_redirect = False


def _weight_gets(server):
    """GETs of weight files (not of config.json or a shard index, which are fetched whole)."""
    return [r for r in server.requests() if r.method == "GET" and r.path.endswith((".safetensors", ".bin"))]


def _check_transfer(server, tensor: torch.Tensor, label: str) -> int:
    sent = server.bytes_sent
    nbytes = tensor.numel() * tensor.element_size()
    print(f"{label}: server sent {sent} bytes for a {nbytes}-byte tensor ({sent - nbytes} overhead)")
    assert sent < nbytes + SLACK, f"{label}: {sent} bytes sent for a {nbytes}-byte tensor"
    assert all(r.range for r in _weight_gets(server)), "a weight file was requested without Range"
    return sent


def test_safetensors_reads_only_the_table(hub):
    server, commits, tables = hub
    record, commit = read_hub_tensor("openai-community/gpt2")
    assert commit == commits["st"]
    assert torch.equal(record.tensor, tables["wpe"])
    assert (record.key, record.file, record.dtype) == (
        "transformer.wpe.weight",
        "model.safetensors",
        "float32",
    )
    assert "transformer.wte.weight" in record.available_keys
    _check_transfer(server, record.tensor, "model.safetensors")


def test_second_call_makes_no_request(hub):
    server, commits, _ = hub
    first, _ = read_hub_tensor("openai-community/gpt2")
    server.clear_log()
    again, commit = read_hub_tensor("openai-community/gpt2")
    assert server.requests() == []
    assert commit == commits["st"]
    assert torch.equal(again.tensor, first.tensor)
    assert (again.key, again.file, again.dtype) == (first.key, first.file, first.dtype)
    again, _ = read_hub_tensor("openai-community/gpt2", revision=commits["st"], key="transformer.wpe.weight")
    assert server.requests() == []


@pytest.mark.parametrize(
    ("revision", "dtype", "table"),
    [("main", torch.float16, "wpe"), ("checkpoint-0", torch.float32, "init_wpe")],
)
def test_bin_only_repo_reads_one_storage_record(hub, revision, dtype, table):
    server, commits, tables = hub
    record, commit = read_hub_tensor("crfm/gpt2-replica", revision=revision)
    assert commit == commits["main" if revision == "main" else "ckpt0"]
    assert record.tensor.dtype == dtype and record.dtype == str(dtype).removeprefix("torch.")
    assert torch.equal(record.tensor, tables[table].to(dtype))
    assert record.file == "pytorch_model.bin"
    _check_transfer(server, record.tensor, f"pytorch_model.bin {revision}")


def test_revisions_differ(hub):
    _, commits, _ = hub
    final, c_main = read_hub_tensor("crfm/gpt2-replica")
    start, c_0 = read_hub_tensor("crfm/gpt2-replica", revision="checkpoint-0")
    assert c_main != c_0
    assert not torch.equal(final.tensor.float(), start.tensor)
    assert resolve_commit("crfm/gpt2-replica", "checkpoint-0") == commits["ckpt0"]
    assert resolve_commit("crfm/gpt2-replica") == commits["main"]


def test_sharded_repo_reads_the_index_and_one_shard(hub):
    server, commits, tables = hub
    record, commit = read_hub_tensor("org/gpt2-sharded")
    assert commit == commits["sharded"]
    assert torch.equal(record.tensor, tables["wpe"])
    assert record.file == "model-00002-of-00002.safetensors"
    assert not any("00001" in r.path for r in server.requests())
    _check_transfer(server, record.tensor, "sharded")


def test_lfs_style_redirects_are_followed(hub):
    server, _, tables = hub
    server.lfs_redirect = True
    record, _ = read_hub_tensor("org/gpt2-sharded")
    assert torch.equal(record.tensor, tables["wpe"])
    assert any(r.status == 302 for r in server.requests())
    _check_transfer(server, record.tensor, "sharded via redirect")


def test_resolve_commit_of_a_hash_needs_no_request(hub):
    server, commits, _ = hub
    assert resolve_commit("crfm/gpt2-replica", commits["ckpt0"]) == commits["ckpt0"]
    assert server.requests() == []


def test_read_config_reads_only_config_json(hub):
    server, commits, _ = hub
    config, commit = read_config("crfm/gpt2-replica", "checkpoint-0")
    assert config == CONFIG
    assert commit == commits["ckpt0"]
    assert {r.path.rsplit("/", 1)[-1] for r in server.requests()} == {"config.json"}


def test_offline_from_a_prepared_hf_cache(hub, monkeypatch, tmp_path):
    server, commits, tables = hub
    for name in ("config.json", "model.safetensors.index.json", "model-00002-of-00002.safetensors"):
        hf_hub_download("org/gpt2-sharded", name)  # the HF cache layout: refs/main + snapshots/<commit>/
    hub_server.go_offline(monkeypatch)
    assert is_offline()
    server.clear_log()
    record, commit = read_hub_tensor("org/gpt2-sharded")
    assert commit == commits["sharded"] == resolve_commit("org/gpt2-sharded")
    assert torch.equal(record.tensor, tables["wpe"])
    assert record.file == "model-00002-of-00002.safetensors"
    assert read_config("org/gpt2-sharded") == (CONFIG, commits["sharded"])
    assert server.requests() == []


def test_offline_from_the_pos_geometry_cache(hub, monkeypatch):
    server, commits, tables = hub
    read_hub_tensor("crfm/gpt2-replica", revision="checkpoint-0")
    monkeypatch.setenv("POS_GEOMETRY_OFFLINE", "1")
    assert is_offline()
    server.clear_log()
    record, commit = read_hub_tensor("crfm/gpt2-replica", revision="checkpoint-0")
    assert commit == resolve_commit("crfm/gpt2-replica", "checkpoint-0") == commits["ckpt0"]
    assert torch.equal(record.tensor, tables["init_wpe"])
    assert server.requests() == []


def test_offline_and_not_cached_says_how_to_fetch(hub, monkeypatch):
    server, _, _ = hub
    hub_server.go_offline(monkeypatch)
    with pytest.raises(NotCachedError, match=r"hf download openai-community/gpt2 .*--revision checkpoint-9"):
        read_hub_tensor("openai-community/gpt2", revision="checkpoint-9")
    with pytest.raises(NotCachedError, match="openai-community/gpt2"):
        resolve_commit("openai-community/gpt2")
    with pytest.raises(NotCachedError, match="HF_HUB_OFFLINE"):
        read_config("openai-community/gpt2")
    assert server.requests() == []


def test_unknown_repo(hub):
    with pytest.raises(UnknownModelError, match="no-such/model") as info:
        read_hub_tensor("no-such/model")
    assert info.value.name == "no-such/model"
    with pytest.raises(UnknownModelError, match="not a valid Hugging Face repo id"):
        read_hub_tensor("bad//name")


def test_unknown_revision_lists_the_existing_ones(hub):
    with pytest.raises(RevisionNotFoundError, match=r"checkpoint-7.*checkpoint-0, main") as info:
        read_hub_tensor("crfm/gpt2-replica", revision="checkpoint-7")
    assert "crfm/gpt2-replica" in str(info.value)
    with pytest.raises(RevisionNotFoundError):
        resolve_commit("crfm/gpt2-replica", "step1000")


def test_repo_without_weights(hub):
    with pytest.raises(CheckpointFormatError, match=r"none of the weight files.*config\.json"):
        read_hub_tensor("org/tokenizer-only")


def test_missing_key_lists_the_keys(hub):
    with pytest.raises(MissingTensorError, match=r"transformer\.wte\.weight"):
        read_hub_tensor("org/gpt2-sharded", key="lm_head.weight")


def test_server_ignoring_range_is_refused_not_downloaded(hub):
    server, _, _ = hub
    server.ignore_range = True
    with pytest.raises(CheckpointFormatError, match="ignored the HTTP Range request"):
        read_hub_tensor("openai-community/gpt2")
    full = [r for r in _weight_gets(server) if r.status == 200]
    assert full, "the server should have answered 200"
    file_size = 50257 * 768 * 4
    sent = server.bytes_sent
    print(f"range ignored: server managed to send {sent} bytes of a {file_size}-byte file before the cut")
    assert sent < file_size // 4
    assert not list(Path(constants.HF_HUB_CACHE).rglob("*.safetensors"))  # nor saved in the HF cache
    server.ignore_range = False
    server.clear_log()
    record, _ = read_hub_tensor("openai-community/gpt2")  # nothing half-cached: a clean fetch
    assert _weight_gets(server)
    assert record.tensor.shape == (1024, 768)


def test_unreachable_hub_is_not_cached_error(hub, monkeypatch):
    with socket.socket() as sock:  # a port nothing listens on
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    url = f"http://127.0.0.1:{port}"
    monkeypatch.setattr(constants, "ENDPOINT", url)
    monkeypatch.setattr(
        constants, "HUGGINGFACE_CO_URL_TEMPLATE", url + "/{repo_id}/resolve/{revision}/{filename}"
    )
    with pytest.raises(NotCachedError, match=r"Could not reach .*ConnectError"):
        read_hub_tensor("openai-community/gpt2", offline=False)  # the network asked for: the request fails
    with pytest.raises(
        NotCachedError, match=rf"Offline \(no network: 127.0.0.1:{port} could not be reached\)"
    ):
        read_hub_tensor("openai-community/gpt2")  # the default: the probe finds no hub, and says so


def test_gpt2_table_matches_numpy_oracle(hub, gpt2_wpe):
    """The bytes survive the whole path: equal to the .npy copy of the real table, element for element."""
    record, _ = read_hub_tensor("openai-community/gpt2")
    np.testing.assert_array_equal(record.tensor.numpy(), gpt2_wpe)

"""The atlas of a Mistral-7B-shaped checkpoint served by a loopback hub: only the q/k bytes travel.

The checkpoint has Mistral-7B's real key names and shapes (hidden 4096, 32 query heads, 8 key
heads, head_dim 128; bf16) but one layer, random q/k and a 32 MiB zero ``o_proj`` beside them, so
that reading "only the q/k bytes" is measurable: the server counts every byte it writes.
"""

from __future__ import annotations

import json
import warnings

import _pos_geometry_tests_hub_server as hub_server  # registered by conftest.py
import pytest
import torch
from safetensors.torch import save_file

from pos_geometry import rotary_atlas
from pos_geometry.errors import RemoteError
from pos_geometry.sources.roles import read_qk

REPO = "mistralai/Mistral-7B-v0.1"
LAYER = "model.layers.0."
SLACK = 256 * 1024
MISTRAL_CONFIG = {
    "architectures": ["MistralForCausalLM"],
    "model_type": "mistral",
    "hidden_size": 4096,
    "intermediate_size": 14336,
    "num_attention_heads": 32,
    "num_key_value_heads": 8,
    "num_hidden_layers": 1,
    "max_position_embeddings": 32768,
    "rope_theta": 10000.0,
    "rms_norm_eps": 1e-05,
    "sliding_window": 4096,
    "vocab_size": 32000,
    "torch_dtype": "bfloat16",
}


@pytest.fixture(scope="module")
def served(tmp_path_factory):
    root = tmp_path_factory.mktemp("mistral_shaped")
    gen = torch.Generator().manual_seed(0)
    tensors = {
        LAYER + "self_attn.q_proj.weight": torch.randn(4096, 4096, generator=gen).to(torch.bfloat16),
        LAYER + "self_attn.k_proj.weight": torch.randn(1024, 4096, generator=gen).to(torch.bfloat16),
        LAYER + "self_attn.o_proj.weight": torch.zeros(4096, 4096, dtype=torch.bfloat16),
        LAYER + "input_layernorm.weight": torch.rand(4096, generator=gen).to(torch.bfloat16),
    }
    save_file(tensors, root / "model.safetensors")
    (root / "config.json").write_text(json.dumps(MISTRAL_CONFIG))
    with hub_server.HubServer() as server:
        commit = server.add_revision(
            REPO, {"config.json": root / "config.json", "model.safetensors": root / "model.safetensors"}
        )
        yield server, commit, tensors


@pytest.fixture
def hub(served, monkeypatch, tmp_path):
    server, commit, tensors = served
    hub_server.point_hub_at(monkeypatch, server, tmp_path)
    server.clear_log()
    return server, commit, tensors


def test_only_the_q_and_k_bytes_are_transferred(hub):
    server, commit, tensors = hub
    atlas = rotary_atlas(REPO)
    assert atlas.shape == (1, 32, 64)
    assert atlas.kv_heads[:5] == (0, 0, 0, 0, 1)
    assert atlas.provenance.commit == commit
    assert atlas.provenance.original_dtype == "bfloat16"
    qk = [tensors[LAYER + f"self_attn.{p}_proj.weight"] for p in "qk"]
    needed = sum(t.numel() * t.element_size() for t in qk)
    weight_gets = [r for r in server.requests() if r.method == "GET" and r.path.endswith(".safetensors")]
    assert weight_gets and all(r.range for r in weight_gets)
    assert needed <= server.bytes_sent <= needed + SLACK, (server.bytes_sent, needed)


def test_the_weights_are_the_served_ones_and_a_second_read_is_free(hub, monkeypatch):
    server, _, tensors = hub
    w = read_qk(REPO, norm=True)
    torch.testing.assert_close(
        w.q[0, 9], tensors[LAYER + "self_attn.q_proj.weight"][9 * 128 : 10 * 128].float()
    )
    torch.testing.assert_close(w.k[0, 7], tensors[LAYER + "self_attn.k_proj.weight"][7 * 128 :].float())
    torch.testing.assert_close(w.norm[0], tensors[LAYER + "input_layernorm.weight"].float())
    server.clear_log()
    hub_server.go_offline(monkeypatch)
    again = rotary_atlas(REPO, fold_norm=True)
    assert server.requests() == []
    assert again.provenance.processing == ("fold_norm",)


def test_a_second_atlas_reads_nothing_and_no_tensor_is_kept(hub, monkeypatch):
    """The atlas reduces the streamed q/k bytes without writing them to the tensor cache; it keeps its
    per-tensor sums instead, so the same atlas again (even offline) makes no request and is identical."""
    from pos_geometry.sources import cache

    server, commit, _ = hub
    first = rotary_atlas(REPO)
    for p in "qk":
        assert cache.cached_path(REPO, commit, LAYER + f"self_attn.{p}_proj.weight") is None
    kept = sorted(p.name for p in cache.commit_dir(REPO, commit).iterdir())
    assert len(kept) == 2 and all(name.startswith("@") for name in kept)
    assert sum(p.stat().st_size for p in cache.commit_dir(REPO, commit).iterdir()) < 64 * 1024
    server.clear_log()
    hub_server.go_offline(monkeypatch)
    again = rotary_atlas(REPO)
    assert server.requests() == []
    for name in ("q_norm", "k_norm", "qk_share", "q_pair_cosine", "k_pair_cosine"):
        assert torch.equal(getattr(again, name), getattr(first, name)), name
    assert again.provenance.config_dict["tensor_keys"] == first.provenance.config_dict["tensor_keys"]
    assert again.provenance.original_dtype == "bfloat16"
    # folding the norm gain is another computation: offline, with only the sums kept, it cannot run
    from pos_geometry.errors import NotCachedError

    with pytest.raises(NotCachedError):
        rotary_atlas(REPO, fold_norm=True)


def test_visit_rows_streams_one_request_from_the_first_range_to_the_last(hub):
    from pos_geometry.sources.opening import open_checkpoint

    server, _, tensors = hub
    key = LAYER + "self_attn.q_proj.weight"
    ckpt = open_checkpoint(REPO)
    ckpt.open_files([key])
    server.clear_log()
    ranges = [(128, 192), (256, 384), (4000, 4096)]
    seen = []
    ckpt.visit_rows(key, ranges, lambda i, rows: seen.append((i, rows.clone())))
    assert [i for i, _ in seen] == [0, 1, 2]
    for (i, rows), (a, b) in zip(seen, ranges, strict=True):
        assert torch.equal(rows, tensors[key][a:b]), i
    (request,) = server.requests()
    assert request.body_bytes == (4096 - 128) * 4096 * 2


def test_offline_from_the_hf_cache(tiny_model, tmp_path, monkeypatch):
    """Files already in the HF cache are read offline, without the pos_geometry cache."""
    from huggingface_hub import snapshot_download

    _, folder = tiny_model("mistral", tmp_path / "tiny")
    files = {p.name: p for p in folder.iterdir() if p.is_file()}
    with hub_server.HubServer() as server:
        server.add_revision("org/tiny-mistral", files)
        hub_server.point_hub_at(monkeypatch, server, tmp_path / "caches")
        snapshot_download("org/tiny-mistral")
        hub_server.go_offline(monkeypatch)
        server.clear_log()
        atlas = rotary_atlas("org/tiny-mistral")
        assert server.requests() == []
    torch.testing.assert_close(atlas.qk_share, rotary_atlas(folder).qk_share)
    assert atlas.provenance.commit is not None


def test_an_unwritable_cache_still_gives_the_atlas_with_a_warning(hub, monkeypatch):
    from pos_geometry.sources import tensor_set

    def refuse(*args, **kwargs):
        raise OSError("read-only file system")

    monkeypatch.setattr(tensor_set, "store_result", refuse)
    with pytest.warns(RuntimeWarning, match="could not write its cache") as caught:
        atlas = rotary_atlas(REPO)
    assert len([w for w in caught if "could not write" in str(w.message)]) == 1  # once, not per tensor
    _, _, tensors = hub
    q = tensors[LAYER + "self_attn.q_proj.weight"].double()
    torch.testing.assert_close(
        atlas.q_norm[0, 3, 5], q[[3 * 128 + 5, 3 * 128 + 69]].norm(), rtol=2e-6, atol=0
    )


@pytest.mark.parametrize("kind", ["drop", "short", "changed"])
def test_a_failed_stream_leaves_nothing_in_the_cache_and_a_retry_reads_all(hub, kind, tmp_path):
    """Both q/k tensors stream concurrently into the cache; a fault in their range requests raises a
    typed error, leaves no file (complete or temporary) behind, and the next call fetches them."""
    from pos_geometry.errors import PosGeometryError
    from pos_geometry.sources.cache import cache_dir

    server, _, tensors = hub
    other = None
    if kind == "changed":
        other = tmp_path / "other.safetensors"
        save_file({"x": torch.zeros(4)}, other)
    server.fault = hub_server.Fault(kind, after=1, other=other)  # the header GET succeeds, the tensors do not
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # a transfer failure is not reported as an unwritable cache
        with pytest.raises(PosGeometryError):
            rotary_atlas(REPO)
    # (the derived attention layout, a description of the architecture, is no part of the download)
    left = [p for p in cache_dir().rglob("*") if p.is_file() and not {"refs", "layouts"} & set(p.parts)]
    assert left == []
    server.fault = None
    atlas = rotary_atlas(REPO)
    q = tensors[LAYER + "self_attn.q_proj.weight"].double()
    torch.testing.assert_close(atlas.q_norm[0, 0, 0], q[[0, 64]].norm(), rtol=2e-6, atol=0)


def test_a_pytorch_bin_checkpoint_sends_only_its_q_and_k_rows(served, monkeypatch, tmp_path):
    """A repo that ships ``pytorch_model.bin`` (a torch zip, as the CRFM replicas and older Pythia
    steps do): each head's rows are range-read from the zip record, so the bytes stay within the q/k
    tensors plus headers, and the atlas equals the safetensors one."""
    _, _, tensors = served
    root = tmp_path / "bin"
    root.mkdir()
    torch.save(tensors, root / "pytorch_model.bin")
    (root / "config.json").write_text(json.dumps(MISTRAL_CONFIG))
    with hub_server.HubServer() as server:
        server.add_revision(
            "org/mistral-bin",
            {"config.json": root / "config.json", "pytorch_model.bin": root / "pytorch_model.bin"},
        )
        hub_server.point_hub_at(monkeypatch, server, tmp_path / "home")
        atlas = rotary_atlas("org/mistral-bin")
        qk = [tensors[LAYER + f"self_attn.{p}_proj.weight"] for p in "qk"]
        needed = sum(t.numel() * t.element_size() for t in qk)
        assert needed <= server.bytes_sent <= needed + SLACK, (server.bytes_sent, needed)
    assert atlas.shape == (1, 32, 64)
    for name, heads in (("q", 32), ("k", 8)):  # rotate-half: plane i of a head is its rows i and i + 64
        w = tensors[LAYER + f"self_attn.{name}_proj.weight"].double().reshape(heads, 2, 64, 4096)
        expected = (w**2).sum((1, 3)).sqrt()
        got = torch.as_tensor(getattr(atlas, f"{name}_norm")[0], dtype=torch.float64)
        if name == "k":  # the atlas repeats each key head over its 4 query heads
            got = got[::4]
        torch.testing.assert_close(got, expected, rtol=1e-5, atol=0)


def test_the_number_of_workers_changes_nothing_but_the_concurrency(hub, monkeypatch, tmp_path):
    """One tensor per thread: the same sums whether one or three threads read them (each from a fresh
    cache, so each reads the weights); n_workers must be a positive int."""
    from pos_geometry.errors import InvalidArgumentError

    atlases = []
    for n in (1, 3):
        monkeypatch.setenv("POS_GEOMETRY_CACHE", str(tmp_path / f"cache-{n}"))
        hub[0].clear_log()
        atlases.append(rotary_atlas(REPO, n_workers=n))
        assert len([r for r in hub[0].requests() if r.range]) >= 2  # read, not taken from a cache
    for name in ("q_norm", "k_norm", "qk_share", "q_pair_cosine", "k_pair_cosine"):
        assert torch.equal(getattr(atlases[0], name), getattr(atlases[1], name)), name
    for bad in (0, -1, 1.5, True, "2"):
        with pytest.raises(InvalidArgumentError, match="n_workers must be a positive int"):
            rotary_atlas(REPO, n_workers=bad)


def test_a_trickled_q_k_body_is_stopped_by_the_load_deadline(hub, monkeypatch):
    """The atlas's q/k range reads run under the load deadline
    (``POS_GEOMETRY_LOAD_TIMEOUT``); a server trickling the q/k bytes used to keep it busy for minutes."""
    from pos_geometry.errors import RemoteError
    from pos_geometry.sources.cache import cache_dir

    server, _, _ = hub
    monkeypatch.setenv("POS_GEOMETRY_LOAD_TIMEOUT", "1.5")
    server.fault = hub_server.Fault("trickle", after=1, trickle_s=0.05)  # the header GET succeeds
    with pytest.raises(RemoteError, match=r"within its 1\.5 s deadline.*POS_GEOMETRY_LOAD_TIMEOUT"):
        rotary_atlas(REPO)  # the deadline's own error: given up at the deadline, not after the trickle
    assert [p for p in cache_dir().rglob("*") if p.is_file() and not {"refs", "layouts"} & set(p.parts)] == []
    server.fault = None


def test_a_server_without_validators_that_keeps_changing_the_file_is_refused(hub, tmp_path, monkeypatch):
    """Hostile inputs, class 1, on the atlas's path (``Checkpoint`` reads, streamed rows): a server that sends
    no ETag, Last-Modified or commit header and changes the file at every second answer gives no atlas and
    leaves nothing in the cache; the same server serving one version gives the atlas a pinned server gives."""
    server, _, tensors = hub
    other = tmp_path / "other.safetensors"
    gen = torch.Generator().manual_seed(1)
    save_file({k: torch.randn(v.shape, generator=gen).to(v.dtype) for k, v in tensors.items()}, other)
    pinned = rotary_atlas(REPO, fold_norm=True)
    try:
        server.validators = "none"
        server.fault = hub_server.Fault("alternate", other=other)
        cache = tmp_path / "fresh_cache"  # nothing computed before: every byte comes from the server
        monkeypatch.setenv("POS_GEOMETRY_CACHE", str(cache))
        with pytest.raises(RemoteError, match="came from more than one version"):
            rotary_atlas(REPO, fold_norm=True)
        assert not [p for p in cache.rglob("*") if p.is_file() and not {"refs", "layouts"} & set(p.parts)]
        server.fault = None
        monkeypatch.setenv("POS_GEOMETRY_CACHE", str(tmp_path / "another_cache"))
        unpinned = rotary_atlas(REPO, fold_norm=True)
        assert torch.equal(unpinned.qk_share, pinned.qk_share)
    finally:
        server.fault, server.validators = None, "all"

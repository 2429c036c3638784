"""Issue 2's promises checked through the public entry point, ``pos_geometry.load``.

The readers have their own tests (``test_hub.py``, ``test_local.py``, ...); these check that what a
user types (a model-table name, a repo id, a path) reaches them and comes back as the right
``PositionalEmbedding``, and that every case of the issue's bad-input list surfaces from ``load``
as its typed error with nothing left in any cache. The hub is a hub-compatible HTTP server on
127.0.0.1 serving the real GPT-2 table beside large other tensors.
"""

from __future__ import annotations

import builtins
import json
from pathlib import Path

import _pos_geometry_tests_hub_server as hub_server  # registered by conftest.py
import numpy as np
import pytest
import torch
from huggingface_hub import hf_hub_download
from safetensors.torch import save_file

import pos_geometry as pg
from pos_geometry.encodings import rotary_params, rotary_table
from pos_geometry.errors import (
    CheckpointFormatError,
    MissingTensorError,
    NonFiniteError,
    NotCachedError,
    RevisionNotFoundError,
    UnsafeCheckpointError,
)

SLACK = 256 * 1024  # the allowance beyond the tensor's own bytes
GPT2_CONFIG = {"model_type": "gpt2", "n_positions": 1024, "n_embd": 768, "n_layer": 12}
ROPE_V5_CONFIG = {
    "model_type": "newrope",
    "hidden_size": 256,
    "num_attention_heads": 4,
    "max_position_embeddings": 128,
    "rope_parameters": {"rope_type": "default", "rope_theta": 500.0, "partial_rotary_factor": 0.5},
}


class _Payload:
    """Pickles as a call to ``builtins.exec``: what a malicious checkpoint smuggles in."""

    def __init__(self, marker: Path):
        self.code = f"open({str(marker)!r}, 'w').close()"

    def __reduce__(self):
        return (builtins.exec, (self.code,))


def _write_json(path: Path, data: dict) -> Path:
    path.write_text(json.dumps(data))
    return path


@pytest.fixture(scope="module")
def served(tmp_path_factory, gpt2_wpe):
    """Repos named as in the model table (and a few others); yields (server, commits, tables, marker)."""
    root = tmp_path_factory.mktemp("load_contract_repos")
    gen = torch.Generator().manual_seed(1)
    wpe = torch.from_numpy(gpt2_wpe)
    wte = torch.randn(16384, 768, generator=gen)  # 48 MiB beside the 3 MiB table
    init_wpe = torch.randn(1024, 768, generator=gen) * 0.02
    opt_table = torch.randn(34, 8, generator=gen)
    nan_table = wpe[:64].clone()
    nan_table[5, 7] = float("nan")
    marker = root / "executed"

    gpt2_cfg = _write_json(root / "gpt2_config.json", GPT2_CONFIG)
    gpt2_st = root / "gpt2.safetensors"
    save_file({"h.0.attn.c_attn.weight": wte[:768].clone(), "wpe.weight": wpe, "wte.weight": wte}, gpt2_st)
    crfm_final, crfm_init = root / "final.bin", root / "init.bin"
    torch.save({"transformer.wte.weight": wte.half(), "transformer.wpe.weight": wpe.half()}, crfm_final)
    torch.save({"transformer.wte.weight": wte, "transformer.wpe.weight": init_wpe}, crfm_init)
    opt_cfg = _write_json(root / "opt_config.json", {"model_type": "opt", "max_position_embeddings": 32})
    opt_st = root / "opt.safetensors"
    save_file(
        # not the model table row's key ("decoder.embed_positions.weight", as OPTModel saves it): the
        # row's key is a hint, and a table saved from OPTForCausalLM must be found as well
        {"model.decoder.embed_positions.weight": opt_table, "lm_head.weight": wte[:100].clone()},
        opt_st,
    )
    rope_cfg = _write_json(root / "rope_config.json", ROPE_V5_CONFIG)
    nan_st = root / "nan.safetensors"
    save_file({"transformer.wpe.weight": nan_table}, nan_st)
    truncated = root / "truncated.safetensors"
    truncated.write_bytes(gpt2_st.read_bytes()[: 3 * 2**20])
    evil = root / "evil.bin"
    torch.save({"transformer.wpe.weight": wpe[:4].clone(), "x": _Payload(marker)}, evil)
    no_table = root / "no_table.safetensors"
    save_file(
        {"transformer.wte.weight": wte[:50].clone(), "transformer.ln_f.weight": torch.ones(768)}, no_table
    )

    with hub_server.HubServer() as server:
        commits = {
            "gpt2": server.add_revision(
                "openai-community/gpt2", {"config.json": gpt2_cfg, "model.safetensors": gpt2_st}
            ),
            "crfm": server.add_revision(
                "stanford-crfm/alias-gpt2-small-x21",
                {"config.json": gpt2_cfg, "pytorch_model.bin": crfm_final},
            ),
            "crfm0": server.add_revision(
                "stanford-crfm/alias-gpt2-small-x21",
                {"config.json": gpt2_cfg, "pytorch_model.bin": crfm_init},
                refs=("checkpoint-0",),
            ),
            "opt": server.add_revision(
                "facebook/opt-125m", {"config.json": opt_cfg, "model.safetensors": opt_st}
            ),
            "rope": server.add_revision("org/rope-v5", {"config.json": rope_cfg}),
            "nan": server.add_revision(
                "org/nan-table", {"config.json": gpt2_cfg, "model.safetensors": nan_st}
            ),
            "truncated": server.add_revision(
                "org/truncated", {"config.json": gpt2_cfg, "model.safetensors": truncated}
            ),
            "evil": server.add_revision("org/evil", {"config.json": gpt2_cfg, "pytorch_model.bin": evil}),
            "no_table": server.add_revision(
                "org/no-table", {"config.json": gpt2_cfg, "model.safetensors": no_table}
            ),
        }
        tables = {"wpe": wpe, "init_wpe": init_wpe, "opt": opt_table}
        yield server, commits, tables, marker


@pytest.fixture
def hub(served, monkeypatch, tmp_path):
    server, commits, tables, marker = served
    hub_server.point_hub_at(monkeypatch, server, tmp_path)
    server.clear_log()
    yield server, commits, tables, marker


def _check_transfer(server, tensor: torch.Tensor) -> None:
    nbytes = tensor.numel() * tensor.element_size()
    assert server.bytes_sent < nbytes + SLACK, f"{server.bytes_sent} bytes sent for a {nbytes}-byte tensor"


def _cache_files(tmp_path: Path) -> list[Path]:
    """Every file in the pos_geometry cache and the HF cache of this test."""
    return [
        p for d in ("pos_geometry_cache", "hf_home/hub") for p in (tmp_path / d).rglob("*") if p.is_file()
    ]


def _half_written_or_tensors(tmp_path: Path) -> list[Path]:
    """Partial downloads or temp files in either cache, and tensors in pos_geometry's (refs are fine)."""
    return [
        p
        for p in _cache_files(tmp_path)
        if p.name.endswith((".incomplete", ".tmp"))
        or (p.is_relative_to(tmp_path / "pos_geometry_cache") and "refs" not in p.parts)
    ]


# --- what comes back ---------------------------------------------------------------------------------
def test_gpt2_by_name_reads_only_the_table_and_records_where_it_came_from(hub, gpt2_wpe):
    server, commits, _, _ = hub
    pe = pg.load("gpt2")
    np.testing.assert_array_equal(pe.numpy(), gpt2_wpe)  # bit-exact: the real table, through HTTP
    _check_transfer(server, pe.matrix)
    prov = pe.provenance
    assert (prov.model_id, prov.kind, prov.revision, prov.commit) == (
        "gpt2",
        "learned",
        "main",
        commits["gpt2"],
    )
    assert (prov.tensor_key, prov.original_dtype, prov.row_offset, prov.processing) == (
        "wpe.weight",
        "float32",
        0,
        (),
    )
    assert "model.safetensors" in prov.source and prov.package_version == pg.__version__
    server.clear_log()
    again = pg.load("gpt2-small", dtype=torch.float64)  # an alias; served from the pos_geometry cache
    assert server.requests() == []
    assert again.dtype == torch.float64 and np.array_equal(again.numpy(), gpt2_wpe)


def test_crfm_replica_final_fp16_and_checkpoint_0_fp32(hub, gpt2_wpe):
    server, commits, tables, _ = hub
    final = pg.load("stanford-crfm/alias-gpt2-small-x21", dtype=torch.float16)
    assert final.provenance.original_dtype == "float16" and final.provenance.commit == commits["crfm"]
    assert torch.equal(final.matrix.view(torch.int16), tables["wpe"].half().view(torch.int16))
    _check_transfer(server, final.matrix)
    server.clear_log()
    init = pg.load("crfm-gpt2-small-x21", revision="checkpoint-0")
    assert init.provenance.original_dtype == "float32" and init.provenance.revision == "checkpoint-0"
    assert init.provenance.commit == commits["crfm0"]
    assert torch.equal(init.matrix.view(torch.int32), tables["init_wpe"].view(torch.int32))
    _check_transfer(server, init.matrix)


def test_opt_from_the_model_table_drops_and_records_its_two_rows(hub):
    _, _, tables, _ = hub
    pe = pg.load("opt-125m")
    assert torch.equal(pe.matrix, tables["opt"][2:])
    assert pe.provenance.row_offset == 2 and pe.n_positions == 32


def test_an_unlisted_rope_repo_is_built_from_config_json_alone(hub):
    server, _, _, _ = hub
    pe = pg.load("org/rope-v5")
    assert pe.kind == "rotary" and pe.provenance.tensor_key is None
    assert torch.equal(pe.matrix, rotary_table(rotary_params(ROPE_V5_CONFIG)))
    assert pe.shape == (128, 32)  # head_dim 64, partial_rotary_factor 0.5
    assert pe.provenance.config_dict["rope_parameters.rope_theta"] == 500.0
    files = {r.path.rsplit("/", 1)[-1] for r in server.requests() if "/resolve/" in r.path}
    assert files == {"config.json"}


@pytest.mark.parametrize("name", ["mistral-7b-v0.1", "mistral-7b-v0.3", "pythia-12b-deduped"])
def test_rotary_rows_of_the_table_need_no_server_at_all(hub, name):
    server, _, _, _ = hub
    pe = pg.load(name, n_positions=64)
    assert pe.kind == "rotary" and pe.provenance.source == "model table"
    assert server.requests() == []
    base = rotary_params(pg.get_spec(name).rotary_config).base
    assert base == {"mistral-7b-v0.1": 1e4, "mistral-7b-v0.3": 1e6, "pythia-12b-deduped": 1e4}[name]


def test_offline_from_a_prepared_hf_cache(hub, monkeypatch, gpt2_wpe):
    server, commits, _, _ = hub
    for name in ("config.json", "model.safetensors"):
        hf_hub_download("openai-community/gpt2", name)
    hub_server.go_offline(monkeypatch)
    server.clear_log()
    pe = pg.load("gpt2")
    assert server.requests() == []
    assert pe.provenance.commit == commits["gpt2"] and np.array_equal(pe.numpy(), gpt2_wpe)


# --- bad input, through load ---------------------------------------------------------------------------
def test_offline_and_not_cached_says_how_to_fetch(hub, monkeypatch, tmp_path):
    server, _, _, _ = hub
    hub_server.go_offline(monkeypatch)
    with pytest.raises(NotCachedError, match=r"hf download openai-community/gpt2") as info:
        pg.load("gpt2")
    assert "gpt2" in str(info.value)
    assert server.requests() == [] and _half_written_or_tensors(tmp_path) == []


def test_revisions_that_do_not_exist(hub, tmp_path):
    server, _, _, _ = hub
    with pytest.raises(RevisionNotFoundError, match="no-such-branch"):
        pg.load("gpt2", revision="no-such-branch")
    server.clear_log()
    with pytest.raises(RevisionNotFoundError, match=r"checkpoint-0 or checkpoint-10"):
        pg.load("alias-gpt2-small-x21", revision="checkpoint-7")  # not in the 609-step schedule
    assert server.requests() == []  # refused from the schedule, before any request
    with pytest.raises(RevisionNotFoundError, match="step"):
        pg.load("pythia-70m", revision="step1001")
    assert _half_written_or_tensors(tmp_path) == []


@pytest.mark.parametrize(
    ("repo", "error", "pattern"),
    [
        ("org/nan-table", NonFiniteError, r"NaN/inf .*row 5, column 7"),
        ("org/truncated", CheckpointFormatError, r"truncated or corrupted"),
        ("org/no-table", MissingTensorError, r"transformer\.ln_f\.weight.*transformer\.wte\.weight"),
        ("org/evil", UnsafeCheckpointError, r"builtin_*\.exec.*nothing was executed"),
    ],
)
def test_bad_checkpoints_on_the_hub(hub, tmp_path, repo, error, pattern):
    _, _, _, marker = hub
    with pytest.raises(error, match=pattern):
        pg.load(repo)
    assert not marker.exists()
    # nothing half-written anywhere, and no tensor cached from a checkpoint that failed to parse
    # (the NaN table's bytes are intact and complete: caching them is not half-writing)
    leftovers = _half_written_or_tensors(tmp_path)
    if error is NonFiniteError:
        leftovers = [p for p in leftovers if not (p.suffix == ".safetensors" and "nan-table" in str(p))]
    assert leftovers == []


def test_bad_local_files(tmp_path, gpt2_wpe):
    text = tmp_path / "notes.bin"
    text.write_text("these are not weights\n")
    with pytest.raises(CheckpointFormatError, match=r"first bytes .*Accepted"):
        pg.load(text)
    good = tmp_path / "model.safetensors"
    save_file({"transformer.wpe.weight": torch.from_numpy(gpt2_wpe)}, good)
    cut = tmp_path / "cut.safetensors"
    cut.write_bytes(good.read_bytes()[:-1000])
    with pytest.raises(CheckpointFormatError, match="truncated"):
        pg.load(cut)
    inf = torch.from_numpy(gpt2_wpe[:16].copy())
    inf[3, 2] = float("-inf")
    save_file({"wpe.weight": inf}, tmp_path / "inf.safetensors")
    with pytest.raises(NonFiniteError, match="row 3, column 2"):
        pg.load(tmp_path / "inf.safetensors")
    save_file({"wte.weight": torch.ones(4, 2), "ln_f.bias": torch.zeros(2)}, tmp_path / "tokens.safetensors")
    with pytest.raises(MissingTensorError, match=r"ln_f\.bias, wte\.weight") as info:
        pg.load(tmp_path / "tokens.safetensors")
    assert set(info.value.keys) == {"wte.weight", "ln_f.bias"}
    marker = tmp_path / "executed"
    torch.save({"wpe.weight": torch.ones(2, 2), "x": _Payload(marker)}, tmp_path / "evil.bin")
    with pytest.raises(UnsafeCheckpointError, match=r"builtin_*\.exec"):
        pg.load(tmp_path / "evil.bin")
    assert not marker.exists()


@pytest.mark.parametrize("fmt", ["safetensors", "bin", "sharded-safetensors", "sharded-bin"])
@pytest.mark.parametrize("dtype", [torch.float32, torch.float16])
def test_real_table_round_trips_through_load(tmp_path, gpt2_wpe, hf_gpt2_dir, fmt, dtype):
    """Written in each HF layout and dtype, read back by ``load`` bit-exactly in the stored dtype."""
    directory = hf_gpt2_dir(tmp_path / "gpt2", gpt2_wpe, fmt=fmt, dtype=dtype)
    stored = torch.from_numpy(gpt2_wpe).to(dtype)
    pe = pg.load(directory, dtype=dtype)
    bits = {torch.float32: torch.int32, torch.float16: torch.int16}[dtype]
    assert torch.equal(pe.matrix.view(bits), stored.view(bits))
    assert pe.provenance.original_dtype == str(dtype).removeprefix("torch.")
    assert pe.provenance.tensor_key == "transformer.wpe.weight"
    assert torch.equal(pg.load(directory).matrix, stored.float())  # the default float32 is exact

"""``pos_geometry.load``: the entry point, end to end on checkpoints written by ``transformers``.

The format readers and the hub client have their own tests (tests/sources); these check
what ``load`` adds: the kind decided from the config, OPT's offset rows dropped and
recorded, rotary tables built from the config (never a learned matrix), the recorded
model id, the offline switch, and name errors.
"""

from __future__ import annotations

import socket
from pathlib import Path

import numpy as np
import pytest
import torch
import transformers

from pos_geometry import NotCachedError, UnknownModelError, load
from pos_geometry.encodings.rotary import inverse_frequencies, rotary_params

COMMON = {"vocab_size": 100, "max_position_embeddings": 64, "num_hidden_layers": 1, "num_attention_heads": 2}


@pytest.fixture(scope="module")
def saved(tmp_path_factory) -> dict[str, tuple[Path, torch.nn.Module]]:
    """Tiny GPT-2, OPT, GPT-NeoX (Pythia) and Mistral models saved with ``save_pretrained``."""
    torch.manual_seed(0)
    root = tmp_path_factory.mktemp("tiny_models")
    models = {
        "gpt2": transformers.GPT2LMHeadModel(
            transformers.GPT2Config(n_layer=1, n_embd=32, n_head=2, n_positions=64, vocab_size=100)
        ),
        "opt": transformers.OPTForCausalLM(
            transformers.OPTConfig(hidden_size=32, ffn_dim=64, word_embed_proj_dim=32, **COMMON)
        ),
        "neox": transformers.GPTNeoXForCausalLM(
            transformers.GPTNeoXConfig(hidden_size=32, intermediate_size=64, rotary_pct=0.5, **COMMON)
        ),
        "mistral": transformers.MistralForCausalLM(
            transformers.MistralConfig(hidden_size=32, intermediate_size=64, num_key_value_heads=1, **COMMON)
        ),
    }
    out = {}
    for name, model in models.items():
        model.save_pretrained(root / name)
        out[name] = (root / name, model)
    return out


def test_gpt2_directory_is_the_learned_table(saved):
    path, model = saved["gpt2"]
    pe = load(path)
    assert pe.kind == "learned" and pe.shape == (64, 32)
    assert torch.equal(pe.matrix, model.transformer.wpe.weight.detach())
    assert pe.provenance.tensor_key == "transformer.wpe.weight"
    assert pe.provenance.model_id == str(path) and pe.provenance.row_offset == 0


def test_opt_offset_rows_are_dropped_and_recorded(saved):
    path, model = saved["opt"]
    pe = load(path)
    stored = model.model.decoder.embed_positions.weight.detach()
    assert stored.shape == (66, 32)
    assert torch.equal(pe.matrix, stored[2:])
    assert pe.provenance.row_offset == 2 and pe.n_positions == 64


@pytest.mark.parametrize("name", ["neox", "mistral"])
def test_rotary_checkpoints_give_the_rotary_table_not_a_learned_one(saved, name):
    path, model = saved[name]
    pe = load(path)
    assert pe.kind == "rotary"
    config = model.config.to_dict()
    params = rotary_params(config)
    assert pe.shape == (64, params.rotary_dim)
    # independent: transformers' own inverse frequencies for this config
    rotary = getattr(model, "gpt_neox", getattr(model, "model", None)).rotary_emb
    torch.testing.assert_close(
        inverse_frequencies(params).float(), rotary.inv_freq.float(), rtol=1e-6, atol=0
    )
    angles = torch.arange(64, dtype=torch.float64)[:, None] * inverse_frequencies(params)[None, :].double()
    torch.testing.assert_close(pe.matrix[:, 0::2].double(), torch.cos(angles), rtol=0, atol=1e-6)
    torch.testing.assert_close(pe.matrix[:, 1::2].double(), torch.sin(angles), rtol=0, atol=1e-6)


def test_model_id_is_recorded_for_local_files(tmp_path, gpt2_wpe):
    path = tmp_path / "wpe.npy"
    np.save(path, gpt2_wpe)
    pe = load(path, model_id="gpt2")
    assert pe.provenance.model_id == "gpt2" and str(path) in pe.provenance.source
    assert np.array_equal(pe.numpy(), gpt2_wpe)


def test_model_table_rotary_rows_load_without_any_network(monkeypatch):
    def refuse(*args, **kwargs):
        raise AssertionError("network touched")

    monkeypatch.setattr(socket.socket, "connect", refuse)
    pe = load("pythia-160m", n_positions=128)
    assert pe.kind == "rotary" and pe.shape == (128, 16)  # head_dim 64, rotary_pct 0.25
    assert pe.provenance.source == "model table"


def test_offline_true_never_asks_the_hub(monkeypatch, tmp_path):
    monkeypatch.setenv("POS_GEOMETRY_CACHE", str(tmp_path / "pg"))
    monkeypatch.setenv("HF_HUB_CACHE", str(tmp_path / "hf"))
    monkeypatch.delenv("HF_HUB_OFFLINE", raising=False)
    monkeypatch.delenv("POS_GEOMETRY_OFFLINE", raising=False)

    def refuse(*args, **kwargs):
        raise AssertionError("network touched")

    monkeypatch.setattr(socket.socket, "connect", refuse)
    with pytest.raises(NotCachedError, match="gpt2") as info:
        load("gpt2-medium", offline=True)
    assert "hf download" in str(info.value)


def test_unknown_name_suggests_the_closest():
    with pytest.raises(UnknownModelError) as info:
        load("gtp2-medum")
    assert "gpt2-medium" in info.value.suggestions
    assert "gpt2-medium" in str(info.value)


def test_roberta_padding_rows_are_dropped(tmp_path):
    torch.manual_seed(0)
    config = transformers.RobertaConfig(
        vocab_size=50, hidden_size=16, num_hidden_layers=1, num_attention_heads=2, intermediate_size=32,
        max_position_embeddings=66, pad_token_id=1,
    )  # fmt: skip
    model = transformers.RobertaModel(config)
    model.save_pretrained(tmp_path / "roberta")
    pe = load(tmp_path / "roberta")
    stored = model.embeddings.position_embeddings.weight.detach()
    assert pe.provenance.row_offset == 2 and pe.shape == (64, 16)
    assert torch.equal(pe.matrix, stored[2:])


@pytest.mark.parametrize("name", ["/nope/wpe.npy", "./missing", "ckpt/run1/model.safetensors", "wpe.npy"])
def test_a_missing_path_is_named_as_missing(name, monkeypatch):
    def refuse(*args, **kwargs):
        raise AssertionError("network touched")

    monkeypatch.setattr(socket.socket, "connect", refuse)
    with pytest.raises(UnknownModelError, match="no such file or folder"):
        load(name)

"""Role-based reading against transformers' own attention: the q/k it computes equal W_q x, W_k x as read."""

from __future__ import annotations

import importlib
import json

import pytest
import torch
import transformers

from pos_geometry import NotApplicableError, rotary_atlas
from pos_geometry.sources.roles import read_qk

MODULES = {
    "gpt_neox": "transformers.models.gpt_neox.modeling_gpt_neox",
    "phi3": "transformers.models.phi3.modeling_phi3",
    "mistral": "transformers.models.mistral.modeling_mistral",
}


def _capture(monkeypatch, model, arch: str, layer: int, attention_module) -> dict[str, torch.Tensor]:
    """Run the model once; return the attention input and the pre-rotary q/k transformers computed."""
    seen: dict[str, torch.Tensor] = {}
    module = importlib.import_module(MODULES[arch])
    original = module.apply_rotary_pos_emb

    def spy(q, k, cos, sin, *args, **kwargs):
        seen.setdefault("q", q.detach().clone())  # the first call is layer 0
        seen.setdefault("k", k.detach().clone())
        return original(q, k, cos, sin, *args, **kwargs)

    monkeypatch.setattr(module, "apply_rotary_pos_emb", spy)
    attn = attention_module(model, arch, layer)

    def keep_input(mod, args, kwargs) -> None:
        seen.setdefault("x", (args[0] if args else kwargs["hidden_states"]).detach().clone())

    handle = attn.register_forward_pre_hook(keep_input, with_kwargs=True)
    with torch.no_grad():
        model(torch.tensor([[3, 1, 4, 1, 5, 9, 2, 6]]))
    handle.remove()
    return seen


@pytest.mark.parametrize("arch", sorted(MODULES))
def test_read_qk_times_hidden_state_is_transformers_q_and_k(
    arch, tiny_model, attention_of, tmp_path, monkeypatch
):
    model, folder = tiny_model(arch, tmp_path)

    with torch.no_grad():  # the atlas reads weights, not biases: remove them from the comparison
        for name, p in model.named_parameters():
            if name.endswith("bias") and ("query_key_value" in name or "qkv_proj" in name):
                p.zero_()
    seen = _capture(monkeypatch, model, arch, 0, attention_of)
    w = read_qk(folder, layers=[0])
    x = seen["x"][0]  # (seq, d_model)
    q = torch.einsum("hjd,sd->hsj", w.q[0], x)
    k = torch.einsum("hjd,sd->hsj", w.k[0], x)
    torch.testing.assert_close(q, seen["q"][0], rtol=1e-5, atol=1e-6)
    torch.testing.assert_close(k, seen["k"][0], rtol=1e-5, atol=1e-6)
    assert w.q.shape[1] == model.config.num_attention_heads
    assert w.k.shape[1] == (
        getattr(model.config, "num_key_value_heads", None) or model.config.num_attention_heads
    )


def test_headless_checkpoint_and_selected_layers(tmp_path):
    """A bare GPTNeoXModel saves keys without 'gpt_neox.'; layer -1 is the last layer."""
    config = transformers.GPTNeoXConfig(
        hidden_size=64, intermediate_size=128, num_attention_heads=4, num_hidden_layers=3, vocab_size=50,
        max_position_embeddings=64,
    )  # fmt: skip
    torch.manual_seed(1)
    bare = transformers.GPTNeoXModel(config)
    bare.save_pretrained(tmp_path)
    w = read_qk(tmp_path, layers=-1, norm=True)
    assert w.layers == (2,)
    assert w.keys[0] == "layers.2.attention.query_key_value.weight"
    fused = bare.layers[2].attention.query_key_value.weight.detach().reshape(4, 3, 16, 64)
    torch.testing.assert_close(w.q[0], fused[:, 0])
    torch.testing.assert_close(w.norm[0], bare.layers[2].input_layernorm.weight.detach())


def test_fold_norm_multiplies_the_gain_into_every_column(tiny_model, tmp_path):
    model, _ = tiny_model("llama", tmp_path / "a")
    with torch.no_grad():
        gain = torch.rand(64) * 2
        model.model.layers[1].input_layernorm.weight.copy_(gain)
    model.save_pretrained(tmp_path / "b")
    atlas = rotary_atlas(tmp_path / "b", layers=[1], fold_norm=True)
    wq = model.model.layers[1].self_attn.q_proj.weight.detach().double() * gain.double()
    # head 0, plane 5 of a rotate-half head of 16 dims: rows 5 and 13
    assert float(atlas.q_norm[0, 0, 5]) == pytest.approx(float(wq[[5, 13]].norm()), rel=1e-6)
    assert atlas.provenance.processing == ("fold_norm",)
    plain = rotary_atlas(tmp_path / "b", layers=[1])
    assert not torch.allclose(plain.q_norm, atlas.q_norm)


def test_sharded_checkpoint_gives_the_same_atlas(tiny_model, tmp_path):
    model, _ = tiny_model("mistral", tmp_path / "single")
    model.save_pretrained(tmp_path / "sharded", max_shard_size="40KB")
    index = json.loads((tmp_path / "sharded" / "model.safetensors.index.json").read_text())
    assert len(set(index["weight_map"].values())) > 2
    one = rotary_atlas(tmp_path / "single")
    many = rotary_atlas(tmp_path / "sharded")
    torch.testing.assert_close(one.qk_share, many.qk_share)


def test_learned_table_model_does_not_apply(tmp_path):
    config = transformers.GPT2Config(n_embd=32, n_layer=1, n_head=2, n_positions=16, vocab_size=20)
    transformers.GPT2LMHeadModel(config).save_pretrained(tmp_path)
    with pytest.raises(NotApplicableError, match="learned table"):
        rotary_atlas(tmp_path)


def test_atlas_result_contract(tiny_model, tmp_path):
    _, folder = tiny_model("mistral", tmp_path)
    atlas = rotary_atlas(folder, model_id="tiny-mistral")
    data = json.loads(atlas.to_json(allow_nan=False))
    assert data["type"] == "RotaryAtlas"
    assert data["provenance"]["model_id"] == "tiny-mistral"
    assert atlas.kv_heads == (0, 0, 1, 1)
    assert atlas.critical.tolist() == [w <= 256 for w in atlas.wavelengths.tolist()]
    assert atlas.critical_dimension == 2 * int(atlas.critical.sum())
    torch.testing.assert_close(
        atlas.short_share + atlas.qk_share[..., ~atlas.critical].sum(-1),
        torch.ones(2, 4, dtype=torch.float64),
    )
    torch.testing.assert_close(atlas.layer_short_share, atlas.short_share.mean(dim=1))
    assert "tiny-mistral" in atlas.summary()
    with pytest.raises(AttributeError):
        atlas.layers = (0,)

"""Multi-head latent attention (DeepSeek-V3): the rotary part of each head, read as a product of the
low-rank projections, against the model itself.

Oracles: each head's rotary query rows formed here from the modules' own weights, as DeepSeek-V3's forward
computes ``q_b_proj(q_a_layernorm(q_a_proj(x)))`` and splits it per head (``view(..., nope + rope)``, the
last ``rope`` dims rotate); and a plane planted in one head, whose logits in transformers' own attention
oscillate at the wavelength the atlas gives it.
"""

from __future__ import annotations

import _pos_geometry_tests_planted as planted
import numpy as np
import pytest
import torch
import transformers

import pos_geometry as pg
from pos_geometry.registry.derived_layout import derive_layout

NOPE, ROPE, KV_LORA, HEADS = 8, 8, 16, 4


def _config(q_lora_rank):
    config = transformers.AutoConfig.for_model(
        "deepseek_v3", hidden_size=64, intermediate_size=64, moe_intermediate_size=32, num_attention_heads=HEADS,
        num_key_value_heads=HEADS, num_hidden_layers=2, vocab_size=64, q_lora_rank=q_lora_rank,
        kv_lora_rank=KV_LORA, qk_rope_head_dim=ROPE, qk_nope_head_dim=NOPE, v_head_dim=8, n_routed_experts=2,
        num_experts_per_tok=1, n_group=1, topk_group=1, first_k_dense_replace=2, max_position_embeddings=512,
    )  # fmt: skip
    config._attn_implementation = "eager"
    return config


def _model(q_lora_rank, seed=0):
    torch.manual_seed(seed)
    model = transformers.AutoModelForCausalLM.from_config(_config(q_lora_rank)).eval()
    with torch.no_grad():  # norm gains away from 1, so a gain left out shows
        for name, param in model.named_parameters():
            if "layernorm" in name:
                param.add_(0.5 * torch.randn_like(param))
    return model


def _oracle_rows(attn, q_lora_rank):
    """``(q (HEADS, ROPE, d), k (ROPE, d))``: the rotary query/key rows from the modules' weights."""
    with torch.no_grad():
        if q_lora_rank is None:
            w = attn.q_proj.weight
        else:
            w = attn.q_b_proj.weight @ torch.diag(attn.q_a_layernorm.weight) @ attn.q_a_proj.weight
        q = w.view(HEADS, NOPE + ROPE, -1)[:, NOPE:]
        k = attn.kv_a_proj_with_mqa.weight[KV_LORA:]
    return q.detach().double(), k.detach().double()


@pytest.mark.parametrize("q_lora_rank", [24, None], ids=["q_lora", "q_proj"])
def test_latent_heads_are_read_as_the_model_forms_them(tmp_path, q_lora_rank):
    model = _model(q_lora_rank)
    model.save_pretrained(tmp_path)
    derived = derive_layout(model.config.to_dict())
    assert derived.layout.latent is not None and derived.layout.pairing == "interleaved"
    atlas = pg.rotary_atlas(tmp_path)
    assert atlas.shape == (2, HEADS, ROPE // 2) and atlas.kv_heads == (0,) * HEADS
    for row, layer in enumerate(atlas.layers):
        q, k = _oracle_rows(model.model.layers[layer].self_attn, q_lora_rank)
        for h in range(HEADS):
            strength = np.array([
                np.linalg.norm((q[h, 2 * i : 2 * i + 2].T @ k[2 * i : 2 * i + 2]).numpy()) for i in range(ROPE // 2)
            ])  # fmt: skip
            np.testing.assert_allclose(atlas.qk_share[row, h].numpy(), strength / strength.sum(), rtol=1e-5)


@pytest.mark.parametrize("plane", [0, 1])
def test_a_planted_latent_plane_oscillates_at_its_atlas_wavelength(tmp_path, plane):
    """Head 2's rotary plane ``plane`` (dims 2i, 2i+1: DeepSeek-V3 rotates interleaved pairs) made to
    dominate through q_b_proj and the shared key's rows of kv_a_proj_with_mqa: it is the atlas's dominant
    plane for that head, and transformers' own logits oscillate at its wavelength."""
    model = _model(24, seed=1)
    attn = model.model.layers[0].self_attn
    dims = torch.tensor([2 * plane, 2 * plane + 1])
    with torch.no_grad():
        attn.q_b_proj.weight[2 * (NOPE + ROPE) + NOPE + dims] *= 20.0
        attn.kv_a_proj_with_mqa.weight[KV_LORA + dims] *= 20.0
    model.save_pretrained(tmp_path)
    atlas = pg.rotary_atlas(tmp_path, layers=[0], fold_norm=True)
    assert atlas.dominant_plane[0, 2] == plane and atlas.qk_share[0, 2, plane] > 0.9
    assert planted.logit_period(model, 0, 2, 256) == pytest.approx(float(atlas.wavelengths[plane]), rel=0.03)


def test_mla_with_biases_is_refused_with_the_reason():
    config = _config(24)
    config.attention_bias = True
    from pos_geometry.registry.derived_layout import LayoutUnavailable

    with pytest.raises(LayoutUnavailable, match="latent RMSNorm"):
        derive_layout(config.to_dict())


def test_the_pairing_swap_reorders_every_latent_heads_rotary_rows_alike(tmp_path):
    """In MLA the swap reorders each head's rotary query rows (through q_b_proj) and the shared rotary key's
    rows alike: every head's unrotated rotary form is unchanged, the model's loss is not."""
    from pos_geometry.hidden.opening import open_model
    from pos_geometry.interventions import SwapPairing
    from pos_geometry.interventions.target import EditTarget

    _model(24).save_pretrained(tmp_path)
    loaded = open_model(tmp_path, device="cpu", head=True)
    attn = loaded.module.model.layers[1].self_attn
    q0, k0 = _oracle_rows(attn, 24)
    target = EditTarget(loaded)
    with target.editing():
        SwapPairing().apply(target)
        q, k = _oracle_rows(attn, 24)
        assert not torch.equal(q, q0) and not torch.equal(k, k0)
        torch.testing.assert_close(
            q.transpose(1, 2) @ k[None], q0.transpose(1, 2) @ k0[None], rtol=1e-6, atol=1e-9
        )
    assert torch.equal(_oracle_rows(attn, 24)[0], q0)  # undone
    tokens = np.random.default_rng(0).integers(0, 64, size=(2, 32))
    r = pg.intervene(tmp_path, tokens, SwapPairing(), attention=False, device="cpu", n_bootstrap=10)
    assert r.delta != 0.0

"""The q/k biases in the rotary atlas, against the model's own query/key projections.

Oracle: transformers' own ``q_proj``/``k_proj`` modules of the tiny Qwen2 and Starcoder2 in
``tests/data/gguf_parity`` (random biases), applied to independent unit-variance Gaussian inputs ``x``,
``y``: each plane's mean squared dot product ``(q_p(x)·k_p(y))²`` over many draws (Monte Carlo) and, exactly,
from the projections' own outputs on the basis vectors (their columns) and on zero (their biases).
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
import torch
import transformers

import pos_geometry as pg
from pos_geometry.atlas.plane_biases import TERMS

DATA = Path(__file__).resolve().parents[1] / "data" / "gguf_parity"


def _projections(arch: str, layer: int):
    model = transformers.AutoModelForCausalLM.from_pretrained(DATA / arch, dtype=torch.float64).eval()
    attn = model.model.layers[layer].self_attn
    return model.config, attn.q_proj, attn.k_proj


def _exact_terms(arch: str, layer: int) -> np.ndarray:
    """``(n_heads, n_planes, 4)`` the four terms from the modules' outputs (rotate-half planes)."""
    config, q_proj, k_proj = _projections(arch, layer)
    d, heads, kv = config.hidden_size, config.num_attention_heads, config.num_key_value_heads
    hd = config.hidden_size // heads
    with torch.no_grad():
        zero = torch.zeros(1, d, dtype=torch.float64)
        a_all, c_all = q_proj(zero)[0], k_proj(zero)[0]  # the biases
        wq = (q_proj(torch.eye(d, dtype=torch.float64)) - a_all).T  # (heads * hd, d): the model's own columns
        wk = (k_proj(torch.eye(d, dtype=torch.float64)) - c_all).T
    out = np.zeros((heads, hd // 2, 4))
    for h in range(heads):
        g = h // (heads // kv)
        for p in range(hd // 2):
            rows_q = [h * hd + p, h * hd + p + hd // 2]
            rows_k = [g * hd + p, g * hd + p + hd // 2]
            A, B = wq[rows_q].numpy(), wk[rows_k].numpy()
            a, c = a_all[rows_q].numpy(), c_all[rows_k].numpy()
            out[h, p] = [np.sum((A.T @ B) ** 2), np.sum((B.T @ a) ** 2), np.sum((A.T @ c) ** 2), (a @ c) ** 2]
    return out


@pytest.mark.parametrize("arch", ["qwen2", "starcoder2"])
def test_bias_shares_are_the_models_own_expected_squared_logits(arch):
    atlas = pg.rotary_atlas(DATA / arch)
    weights_only = pg.rotary_atlas(DATA / arch, biases=False)
    assert atlas.includes == "weights and q/k biases" and weights_only.includes.startswith("weights only")
    assert atlas.provenance.config_dict["shares_of"] == atlas.includes
    assert any(k.endswith("q_proj.bias") for k in atlas.provenance.config_dict["tensor_keys"])
    for row, layer in enumerate(atlas.layers):
        terms = _exact_terms(arch, layer)
        strength = np.sqrt(terms.sum(-1))
        np.testing.assert_allclose(atlas.qk_share[row].numpy(), strength / strength.sum(-1, keepdims=True),
                                   rtol=1e-5, atol=1e-7)  # fmt: skip
        head_terms = terms.sum(1)
        np.testing.assert_allclose(atlas.term_share[row].numpy(), head_terms / head_terms.sum(-1, keepdims=True),
                                   rtol=1e-5, atol=1e-7)  # fmt: skip
        weight_strength = np.sqrt(terms[..., 0])
        np.testing.assert_allclose(weights_only.qk_share[row].numpy(),
                                   weight_strength / weight_strength.sum(-1, keepdims=True), rtol=1e-5, atol=1e-7)  # fmt: skip
    # the biases are not a detail here: they move the shares
    assert (atlas.qk_share - weights_only.qk_share).abs().max() > 0.05
    assert atlas.term_share[..., 1:].sum(-1).min() > 0.1


def test_the_four_terms_are_expected_squared_logits_over_unit_variance_inputs():
    """Monte Carlo: the mean of ``(q_p(x)·k_p(y))²`` over 200k independent Gaussian draws is the sum of the four
    terms, plane by plane (within 3%)."""
    config, q_proj, k_proj = _projections("qwen2", 0)
    gen = torch.Generator().manual_seed(0)
    d, heads, hd = (
        config.hidden_size,
        config.num_attention_heads,
        config.hidden_size // config.num_attention_heads,
    )
    kv = config.num_key_value_heads
    x = torch.randn(200_000, d, generator=gen, dtype=torch.float64)
    y = torch.randn(200_000, d, generator=gen, dtype=torch.float64)
    with torch.no_grad():
        q = q_proj(x).view(-1, heads, 2, hd // 2)
        k = k_proj(y).view(-1, kv, 2, hd // 2).repeat_interleave(heads // kv, dim=1)
    sampled = ((q * k).sum(2) ** 2).mean(0).numpy()  # (heads, planes)
    np.testing.assert_allclose(sampled, _exact_terms("qwen2", 0).sum(-1), rtol=0.03)


def test_a_model_without_biases_says_so():
    atlas = pg.rotary_atlas(DATA / "llama")
    assert atlas.term_share is None and atlas.includes == "weights (the model has no q/k biases)"
    assert TERMS == ("weights", "query_bias", "key_bias", "constant")


def test_the_gguf_gives_the_same_bias_split():
    folder, gguf = pg.rotary_atlas(DATA / "qwen2"), pg.rotary_atlas(DATA / "qwen2-f32.gguf")
    torch.testing.assert_close(gguf.term_share, folder.term_share, rtol=1e-6, atol=1e-9)
    torch.testing.assert_close(gguf.qk_share, folder.qk_share, rtol=1e-6, atol=1e-9)

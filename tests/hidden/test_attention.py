"""attention_by_offset against output_attentions, the model's own q/k, and a planted rotary plane."""

from __future__ import annotations

import json

import numpy as np
import pytest
import torch
import transformers

import pos_geometry as pg
from pos_geometry.errors import NotApplicableError


def _by_offset(matrices: np.ndarray) -> np.ndarray:
    """(C, H, T, T) -> (H, T): mean over contexts and queries i >= Δ of m[c, h, i, i - Δ], written out."""
    _, h, t, _ = matrices.shape
    out = np.zeros((h, t))
    for delta in range(t):
        rows = np.arange(delta, t)
        out[:, delta] = matrices[:, :, rows, rows - delta].mean(axis=(0, 2))
    return out


def test_equals_a_direct_computation_from_output_attentions_and_the_models_q_k(tiny_gpt2):
    tokens = np.random.default_rng(0).integers(0, 50, size=(6, 24))
    res = pg.attention_by_offset(tiny_gpt2, tokens, batch_size=4)
    assert tiny_gpt2.config._attn_implementation == "eager"  # restored afterwards
    with torch.no_grad():
        out = tiny_gpt2(torch.from_numpy(tokens), output_attentions=True, output_hidden_states=True)
    np.testing.assert_array_equal(res.offsets, np.arange(24))
    np.testing.assert_array_equal(res.counts, 6 * (24 - np.arange(24)))
    for layer in (0, 1):
        np.testing.assert_allclose(
            res.mean_probability[layer], _by_offset(out.attentions[layer].numpy()), atol=1e-6
        )
        block = tiny_gpt2.h[layer]
        with torch.no_grad():  # GPT-2's own projections: c_attn on ln_1 of the block's input
            q, k, _ = block.attn.c_attn(block.ln_1(out.hidden_states[layer])).split(64, dim=-1)
        q = q.view(6, 24, 4, 16).transpose(1, 2)
        k = k.view(6, 24, 4, 16).transpose(1, 2)
        logits = (q @ k.transpose(-1, -2) / 4.0).numpy()
        np.testing.assert_allclose(res.mean_logit[layer], _by_offset(logits), atol=1e-5)
    assert res.rotary_status.startswith("does not apply") and res.plane_usage is None
    data = json.loads(res.to_json(allow_nan=False))
    assert data["type"] == "AttentionByOffset" and "random tokens" not in data["corpus"]


def test_the_probe_leaves_the_models_output_unchanged_grouped_query_heads_included(tiny_llama):
    model = tiny_llama()  # 4 query heads on 2 key heads
    tokens = torch.randint(0, 50, (3, 20), generator=torch.Generator().manual_seed(0))
    seen = []
    handle = model.norm.register_forward_hook(lambda m, a, o: seen.append(o.clone()))
    try:
        with torch.no_grad():
            expected = model(tokens).last_hidden_state
            out = model(tokens, output_attentions=True)
        res = pg.attention_by_offset(model, tokens.numpy(), layers=[1], max_offset=5)
    finally:
        handle.remove()
    assert len(seen) == 2  # the probe's run stopped after block 1, before the final norm
    np.testing.assert_allclose(
        res.mean_probability[0], _by_offset(out.attentions[1].numpy())[:, :6], atol=1e-6
    )
    np.testing.assert_array_equal(res.offsets, np.arange(6))
    assert torch.equal(model(tokens).last_hidden_state, expected)
    assert res.rotary_status == "measured" and res.plane_usage.shape == (1, 4, 8)
    np.testing.assert_allclose(res.plane_usage.sum(axis=-1), 1.0)


def _sinusoid(offsets: np.ndarray, y: np.ndarray, wavelength: float) -> tuple[float, float]:
    """(R², amplitude) of the least-squares sinusoid of ``wavelength`` through the centred curve."""
    x = np.stack([np.cos(2 * np.pi * offsets / wavelength), np.sin(2 * np.pi * offsets / wavelength)], axis=1)
    y = y - y.mean()
    coef = np.linalg.lstsq(x, y, rcond=None)[0]
    return 1 - np.square(y - x @ coef).sum() / np.square(y).sum(), float(np.hypot(*coef))


def _fit_r2(offsets: np.ndarray, y: np.ndarray, wavelength: float) -> float:
    return _sinusoid(offsets, y, wavelength)[0]


def test_a_planted_rotary_plane_makes_the_logit_oscillate_at_its_wavelength(tiny_llama):
    layer, head, plane = 0, 1, 2  # plane 2 of head_dim 16, base 10000: wavelength 2π·10000^(4/16) = 62.8
    model = tiny_llama((layer, head, plane, 8.0))
    wavelengths = 2 * np.pi * 10000.0 ** (np.arange(8) * 2 / 16)
    # random contexts: the planted plane is the best-fitting wavelength of the offset curve
    res = pg.attention_by_offset(model, layers=[layer], n_sequences=16, seq_len=128, random_state=0)
    np.testing.assert_allclose(res.wavelengths, wavelengths, rtol=1e-12)
    offsets, logit = res.profile(layer, head)
    fits = [_fit_r2(offsets[1:], logit[1:], w) for w in wavelengths]  # Δ = 0 pairs a token with itself
    assert int(np.argmax(fits)) == plane and fits[plane] > 3 * sorted(fits)[-2]
    assert int(np.argmax(res.plane_usage[0, head])) == plane and res.plane_usage[0, head, plane] > 0.5
    # one repeated token: q and k are the same at every position, the curve is the sum of plane cosines
    same = pg.attention_by_offset(model, np.full((2, 128), 7), layers=[layer])
    r2, amplitude = _sinusoid(*same.profile(layer, head), wavelengths[plane])
    assert r2 > 0.95
    unplanted = pg.attention_by_offset(tiny_llama(), np.full((2, 128), 7), layers=[layer])
    assert amplitude > 20 * _sinusoid(*unplanted.profile(layer, head), wavelengths[plane])[1]  # factor² = 64


def test_one_pass_with_hidden_positions_equals_the_two_separate_calls(tiny_gpt2):
    tokens = np.random.default_rng(6).integers(0, 50, size=(5, 20))
    calls = []
    handle = tiny_gpt2.register_forward_pre_hook(lambda module, args: calls.append(1))
    try:
        both = pg.hidden_positions(
            tiny_gpt2, tokens, layers=[1, 2], batch_size=2, attention=True, max_offset=9
        )
        assert len(calls) == 3  # ceil(5 / 2) forward passes, not twice that
        alone = pg.hidden_positions(tiny_gpt2, tokens, layers=[1, 2], batch_size=2)
        att = pg.attention_by_offset(tiny_gpt2, tokens, layers=[1], batch_size=2, max_offset=9)
    finally:
        handle.remove()
    assert both.attention is not None and both.attention.layers == (1,)  # layer 2 is the last block's output
    for name in ("offsets", "counts", "mean_probability", "mean_logit"):
        np.testing.assert_allclose(getattr(both.attention, name), getattr(att, name), atol=1e-6, err_msg=name)
    for layer in (1, 2):  # the probe's eager arithmetic vs the model's own attention: float rounding only
        np.testing.assert_allclose(both.positional[layer].numpy(), alone.positional[layer].numpy(), atol=1e-5)
    assert "attention" not in json.loads(both.to_json(allow_nan=False))
    explicit = pg.hidden_positions(tiny_gpt2, tokens, layers=[2], attention=[0, 1], batch_size=5)
    assert explicit.attention.layers == (0, 1)
    assert pg.hidden_positions(tiny_gpt2, tokens, layers=[2], attention=True).attention is None


def test_a_model_whose_attention_bypasses_transformers_interface_is_refused_before_it_runs(tmp_path):
    """Bloom (ALiBi) computes attention itself: transformers declines the probe (it only logs), so attention by
    offset is refused with the way out, and the hidden states alone still read."""
    import transformers

    from pos_geometry.errors import NotApplicableError

    config = transformers.BloomConfig(vocab_size=61, hidden_size=32, n_layer=2, n_head=4)
    transformers.BloomForCausalLM(config).save_pretrained(tmp_path)
    tokens = np.random.default_rng(0).integers(0, 61, size=(3, 16))
    with pytest.raises(NotApplicableError, match="attention=False"):
        pg.attention_by_offset(tmp_path, tokens, device="cpu", progress=False)
    alone = pg.hidden_positions(tmp_path, tokens, attention=False, device="cpu", progress=False)
    assert alone.attention is None and len(alone.metrics_rows()) == 3


def test_per_plane_usage_reads_the_architecture_transformers_describes(tmp_path):
    # gemma3_text has no row in the hand-written layout table: its planes come from transformers' description,
    # and its two layer types rotate with different bases (sliding 10000, full 1e6), each block with its own.
    # This was "does not apply: ... has no row in pos_geometry/registry/attention.py" (a source path, on a user's page)
    import transformers

    from pos_geometry.registry import ATTENTION_LAYOUTS

    config = transformers.Gemma3TextConfig(
        vocab_size=61, hidden_size=32, intermediate_size=64, num_hidden_layers=2, num_attention_heads=4,
        num_key_value_heads=2, head_dim=8, max_position_embeddings=128, sliding_window=16,
        layer_types=["sliding_attention", "full_attention"],
        rope_parameters={"sliding_attention": {"rope_type": "default", "rope_theta": 10000.0},
                         "full_attention": {"rope_type": "default", "rope_theta": 1e6}},
    )  # fmt: skip
    assert config.model_type not in ATTENTION_LAYOUTS
    transformers.AutoModelForCausalLM.from_config(config).save_pretrained(tmp_path)
    tokens = np.random.default_rng(0).integers(0, 61, size=(2, 32))
    res = pg.attention_by_offset(str(tmp_path), tokens, layers=[0, 1])
    assert res.rotary_status == "measured" and res.plane_usage.shape == (2, 4, 4)
    truth = [2 * np.pi * base ** (np.arange(4) * 2 / 8) for base in (10000.0, 1e6)]
    np.testing.assert_allclose(res.wavelengths, np.stack(truth), rtol=1e-6)
    usage = dict(res.summary_rows())["rotary per-plane usage (mean over layers and heads)"]
    assert "by layer type" in usage and "registry/attention.py" not in usage
    # one layer type read: one row of wavelengths, its own
    one = pg.attention_by_offset(str(tmp_path), tokens, layers=[1])
    np.testing.assert_allclose(one.wavelengths, truth[1], rtol=1e-6)


def test_a_hybrid_models_blocks_without_attention_are_named_not_read(tmp_path):
    """LFM2 interleaves short convolutions with attention: only the attention blocks have offsets to read; the
    others are named in the provenance, and asking for them alone is refused with the reason."""
    config = transformers.Lfm2Config(
        vocab_size=64, hidden_size=32, intermediate_size=64, num_hidden_layers=4, num_attention_heads=4,
        num_key_value_heads=2, layer_types=["conv", "full_attention", "conv", "full_attention"],
        max_position_embeddings=64,
    )  # fmt: skip
    torch.manual_seed(0)
    transformers.Lfm2ForCausalLM(config).save_pretrained(tmp_path)
    tokens = np.arange(2, 18)[None].repeat(2, 0) % 64
    att = pg.attention_by_offset(tmp_path, tokens, device="cpu", progress=None)
    assert att.layers == (1, 3) and att.mean_probability.shape[0] == 2
    assert att.provenance.config_dict["blocks without softmax attention (not read)"] == (0, 2)
    assert att.rotary_status == "measured" and np.allclose(att.plane_usage.sum(-1), 1.0)
    with pytest.raises(NotApplicableError, match="none of them computed softmax attention"):
        pg.attention_by_offset(tmp_path, tokens, layers=[0, 2], device="cpu", progress=None)

"""Query/key norms (Qwen3, OLMo-2): folded into the atlas exactly, checked against the model's own attention.

A plane planted in W_q/W_k dominates the head's QK form; the q/k norm gain of one of its two rows set
to zero switches it off in the model (its logits no longer oscillate at that wavelength). The atlas
with ``fold_norm=True`` must see that, the atlas without it must not; and the folded rows must be what
the model computes before its rotation, up to the per-token RMS divisor (one scalar per head).
"""

from __future__ import annotations

import importlib

import numpy as np
import pytest
import torch
import transformers

from pos_geometry import rotary_atlas
from pos_geometry.sources.roles import read_qk

N = 256
LAYER, HEAD, PLANE = (
    0,
    1,
    2,
)  # rows 2 and 10 of head 1 (rotate-half, head_dim 16): wavelength 2π·10000^(4/16)·... ≈ 63


def _model(arch: str, tmp_path, kill_gain: bool):
    common = dict(
        hidden_size=64, intermediate_size=128, num_attention_heads=4, num_key_value_heads=2, head_dim=16,
        num_hidden_layers=2, vocab_size=50, max_position_embeddings=N,
    )  # fmt: skip
    config = (transformers.Qwen3Config if arch == "qwen3" else transformers.Olmo2Config)(**common)
    config._attn_implementation = "eager"
    torch.manual_seed(0)
    model = transformers.AutoModelForCausalLM.from_config(config).eval()
    attn = model.model.layers[LAYER].self_attn
    with torch.no_grad():
        for proj, norm, head in ((attn.q_proj, attn.q_norm, HEAD), (attn.k_proj, attn.k_norm, HEAD // 2)):
            norm.weight.copy_(0.5 + torch.rand(norm.weight.shape))  # gains of varied size
            rows = torch.tensor([PLANE, PLANE + 8]) + 16 * head
            proj.weight[rows] *= 30.0
            if kill_gain:  # the norm switches the planted plane off: zero gain on both of its rows
                norm.weight[rows if norm.weight.numel() > 16 else rows - 16 * head] = 0.0
    model.save_pretrained(tmp_path)
    return model


def _logits_by_offset(model) -> np.ndarray:
    with torch.no_grad():
        out = model.double()(torch.full((1, N), 7), output_attentions=True)
    return torch.log(out.attentions[LAYER][0, HEAD, N - 1]).flip(0).numpy()


def _power_at(signal: np.ndarray, period: float) -> float:
    t = np.arange(signal.size)
    y = signal - signal.mean()
    basis = np.stack([np.cos(2 * np.pi * t / period), np.sin(2 * np.pi * t / period)], 1)
    coef, *_ = np.linalg.lstsq(basis, y, rcond=None)
    return float(np.sum((basis @ coef) ** 2) / np.sum(y**2))


@pytest.mark.parametrize("arch", ["qwen3", "olmo2"])
def test_a_plane_switched_off_by_its_norm_gain_is_off_in_the_folded_atlas(arch, tmp_path):
    live = _model(arch, tmp_path / "live", kill_gain=False)
    dead = _model(arch, tmp_path / "dead", kill_gain=True)
    wavelength = float(rotary_atlas(tmp_path / "live").wavelengths[PLANE])
    # the model: the planted plane drives the logits unless its gain is zero
    assert _power_at(_logits_by_offset(live), wavelength) > 0.5
    assert _power_at(_logits_by_offset(dead), wavelength) < 0.05
    # the atlas: folded, it agrees with the model; unfolded, it cannot see the norm
    assert rotary_atlas(tmp_path / "live", fold_norm=True).qk_share[LAYER, HEAD, PLANE] > 0.8
    folded = rotary_atlas(tmp_path / "dead", fold_norm=True)
    assert folded.qk_share[LAYER, HEAD, PLANE] < 1e-6
    assert rotary_atlas(tmp_path / "dead").qk_share[LAYER, HEAD, PLANE] > 0.8
    assert folded.provenance.processing == ("fold_norm", "fold_qk_norm")
    assert any(key.endswith("q_norm.weight") for key in folded.provenance.config_dict["tensor_keys"])


@pytest.mark.parametrize("arch", ["qwen3", "olmo2"])
def test_folded_rows_are_what_the_model_rotates_up_to_one_scalar_per_head(arch, tmp_path, monkeypatch):
    model = _model(arch, tmp_path, kill_gain=False)
    module = importlib.import_module(f"transformers.models.{arch}.modeling_{arch}")
    seen: dict[str, torch.Tensor] = {}
    original = module.apply_rotary_pos_emb

    def spy(q, k, *args, **kwargs):
        seen.setdefault("q", q.detach().double())
        seen.setdefault("k", k.detach().double())
        return original(q, k, *args, **kwargs)

    monkeypatch.setattr(module, "apply_rotary_pos_emb", spy)
    attn = model.model.layers[LAYER].self_attn

    def keep_input(mod, args, kwargs) -> None:
        seen.setdefault("x", (args[0] if args else kwargs["hidden_states"]).detach().double())

    handle = attn.register_forward_pre_hook(keep_input, with_kwargs=True)
    with torch.no_grad():
        model.double()(torch.tensor([[3, 4, 5, 9, 2, 6, 7, 8]]))  # no pad id (1): its embedding is 0
    handle.remove()
    w = read_qk(tmp_path, layers=[LAYER])
    reader_gains = {
        "q": attn.q_norm.weight.detach().double().reshape(-1, 16).expand(4, 16),
        "k": attn.k_norm.weight.detach().double().reshape(-1, 16).expand(2, 16),
    }
    from pos_geometry.sources.roles import open_qk

    reader = open_qk(tmp_path)
    for which, weight in (("q", w.q[0]), ("k", w.k[0])):
        gain, _ = reader.qk_norm_gain(LAYER, which)
        torch.testing.assert_close(gain.double(), reader_gains[which])
        folded = weight.double() * gain.double()[:, :, None]  # (heads, head_dim, d_model)
        ours = torch.einsum("hjd,sd->hsj", folded, seen["x"][0])
        theirs = seen[which][0]  # (heads, seq, head_dim): normed, not yet rotated
        ratio = theirs / ours
        torch.testing.assert_close(ratio, ratio[..., :1].expand_as(ratio), rtol=1e-6, atol=1e-9)

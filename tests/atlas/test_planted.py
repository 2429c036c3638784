"""A plane planted in one head is what the atlas singles out, and what transformers' own logits oscillate at.

Each tiny model gets one rotation plane of one head amplified in W_q and W_k (rows chosen by the
test from each architecture's pairing convention). The atlas must put that head's share on that
plane. Independently, transformers itself runs the model on a sequence of one repeated token:
the eager attention probabilities of the last query give its pre-softmax logits as a function of
the offset to each key (up to a constant), and their dominant period must be the atlas's
wavelength for that plane. A wrong pairing convention moves the amplified rows into other planes,
whose wavelengths differ by a factor of ≥ 1.8, so both checks would fail.
"""

from __future__ import annotations

import math

import numpy as np
import pytest
import torch

from pos_geometry import rotary_atlas

# arch -> (layer, head, plane): planes whose wavelength fits 4-13 times in 256 positions
PLANTS = {
    "llama": (0, 2, 3),
    "mistral": (0, 1, 2),
    "gpt_neox": (0, 3, 1),
    "gptj": (0, 1, 1),
    "phi3": (0, 3, 2),
}
N = 256


def _dominant_period(signal: np.ndarray) -> float:
    """The period (in samples) of the single sinusoid that explains most of ``signal`` (least squares)."""
    t = np.arange(signal.size)
    y = signal - signal.mean()
    best, best_period = -1.0, math.nan
    for period in np.geomspace(3.0, 2.0 * signal.size, 4000):
        basis = np.stack([np.cos(2 * np.pi * t / period), np.sin(2 * np.pi * t / period), np.ones_like(y)], 1)
        coef, *_ = np.linalg.lstsq(basis, y, rcond=None)
        explained = 1 - np.sum((y - basis @ coef) ** 2) / np.sum(y**2)
        if explained > best:
            best, best_period = explained, period
    return best_period


def _logits_by_offset(model, layer: int, head: int) -> np.ndarray:
    """Pre-softmax logit of the last position's query against the key at offset Δ = 0..N-1, up to a constant."""
    model = model.double().eval()
    with torch.no_grad():
        out = model(torch.full((1, N), 7), output_attentions=True)
    probs = out.attentions[layer][0, head, N - 1]  # keys at positions 0..N-1
    return torch.log(probs).flip(0).numpy()  # index Δ = N-1-n


@pytest.mark.parametrize("arch", sorted(PLANTS))
def test_atlas_singles_out_the_planted_plane(arch, tiny_model, tmp_path):
    layer, head, plane = PLANTS[arch]
    model, folder = tiny_model(arch, tmp_path, plant=(layer, head, plane, 30.0))
    atlas = rotary_atlas(folder)

    flat = int(atlas.qk_share[layer].argmax())
    assert divmod(flat, atlas.shape[2]) == (head, plane)
    assert atlas.qk_share[layer, head, plane] > 0.9
    assert int(atlas.dominant_plane[layer, head]) == plane
    torch.testing.assert_close(atlas.qk_share.sum(-1), torch.ones(atlas.shape[:2], dtype=torch.float64))
    others = [h for h in range(atlas.shape[1]) if atlas.kv_heads[h] != atlas.kv_heads[head]]
    assert all(atlas.qk_share[layer, h].max() < 0.6 for h in others)

    logits = _logits_by_offset(model, layer, head)
    assert np.isfinite(logits).all()
    period = _dominant_period(logits)
    assert period == pytest.approx(float(atlas.wavelengths[plane]), rel=0.03)
    # and no other plane's wavelength is within 30% of the measured period
    for i, wavelength in enumerate(atlas.wavelengths.tolist()):
        if i != plane:
            assert abs(wavelength / period - 1) > 0.3

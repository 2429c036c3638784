"""GPT-2's real attention weights (../shared/data/real/gpt2_small_attention): the position-QK view with the
c_attn biases, against an independent float64 computation from the safetensors file.

Measured here (all 12 layers, 1024 positions): the query-bias term (a function of the key's position
alone) holds 0.32 of layer 0's positional-logit energy and 0.05 over all layers; adding the biases moves
``offset_r2`` of layer 2's head 7 by 0.31 (the largest change), and L4H11's peak offset from 0 to 512.

The "look back N tokens" measures (all layers): the normed table turns 0.0122 rad per position in its
top plane at layer 0 (period 516); the position terms' Toeplitz share is 0.52 on average against 0.27
for the same heads with W_k's rows permuted (126 of 144 heads above their null); 73 heads' forms on
that plane are more than 90% a rotation (11 in the null; L0H3: 1.000). The rotation's implied
look-back and the logits' peak agree within a factor of 2 for 40 of the 45 rotating heads that peak
past offset 0, nearly all at 400-460 positions; the short look-backs agree in order of magnitude only
(L5H1: 14 vs 7 positions, L6H9: 22 vs 9).
"""

from __future__ import annotations

import numpy as np
import pytest
import torch
from safetensors.numpy import load_file

import pos_geometry as pg
from pos_geometry.atlas.position_qk import TERMS

LAYERS = [0, 2]


@pytest.fixture(scope="module")
def folder(real_data_dir):
    path = real_data_dir / "gpt2_small_attention"
    if not (path / "model.safetensors").is_file():
        pytest.skip(f"the real GPT-2 attention folder is not at {path}")
    return path


@pytest.fixture(scope="module")
def views(folder):
    return pg.position_qk_atlas(folder, layers=LAYERS), pg.position_qk_atlas(
        folder, layers=LAYERS, biases=False
    )


@pytest.fixture(scope="module")
def null(folder):
    return pg.position_qk_atlas(folder, layers=LAYERS, permute_key_rows=True)


def _independent(folder, layer: int, head: int) -> dict[str, np.ndarray]:
    """Logit terms of one head written out in numpy float64 from the raw tensors."""
    w = load_file(folder / "model.safetensors")
    table = w["transformer.wpe.weight"].astype(np.float64)
    g = w[f"transformer.h.{layer}.ln_1.weight"].astype(np.float64)
    b = w[f"transformer.h.{layer}.ln_1.bias"].astype(np.float64)
    x = (table - table.mean(1, keepdims=True)) / np.sqrt(table.var(1, keepdims=True) + 1e-5) * g + b
    weight = w[f"transformer.h.{layer}.attn.c_attn.weight"].astype(np.float64)
    bias = w[f"transformer.h.{layer}.attn.c_attn.bias"].astype(np.float64)
    q, k = slice(64 * head, 64 * (head + 1)), slice(768 + 64 * head, 768 + 64 * (head + 1))
    qx, kx = x @ weight[:, q], x @ weight[:, k]
    terms = {
        "position": qx @ kx.T / 8,
        "query_bias": np.broadcast_to(kx @ bias[q] / 8, (1024, 1024)),
        "key_bias": np.broadcast_to((qx @ bias[k] / 8)[:, None], (1024, 1024)),
    }
    terms["all"] = terms["position"] + terms["query_bias"] + terms["key_bias"] + bias[q] @ bias[k] / 8
    return terms


@pytest.mark.parametrize("layer, head", [(0, 3), (2, 7)])
def test_profile_and_term_shares_equal_an_independent_computation(folder, views, layer, head):
    with_biases, _ = views
    terms = _independent(folder, layer, head)
    i, j = np.tril_indices(1024)
    profile = np.array([np.diag(terms["all"], -d).mean() for d in range(1024)])
    np.testing.assert_allclose(
        with_biases.offset_profile[LAYERS.index(layer), head].numpy(), profile, atol=1e-9
    )
    energy = np.array([((terms[t][i, j] - terms[t][i, j].mean()) ** 2).sum() for t in TERMS[:3]] + [0.0])
    np.testing.assert_allclose(with_biases.term_share[LAYERS.index(layer), head].numpy(), energy / energy.sum(),
                               rtol=1e-9)  # fmt: skip
    assert int(with_biases.peak_offset[LAYERS.index(layer), head]) == int(np.argmax(profile[:513]))


def test_the_biases_change_real_heads_and_the_view_says_it_is_the_direct_path(views):
    with_biases, without = views
    change = (with_biases.offset_r2 - without.offset_r2).abs()
    assert float(change.max()) > 0.25 and int(change.argmax()) == LAYERS.index(2) * 12 + 7  # L2H7: 0.31
    assert float(with_biases.term_share[0, :, 1].mean()) > 0.25  # layer 0: the query-bias term, 0.32
    torch.testing.assert_close(without.term_share[..., 0], torch.ones(2, 12, dtype=torch.float64))
    assert with_biases.path == "direct" and "misses composed position" in with_biases.summary()
    assert "c_attn biases in the logits" in with_biases.provenance.processing


def test_look_back_measures_on_the_real_table_beat_their_null(views, null):
    """The null: the same heads with W_k's rows permuted (the key reads a smooth curve, not the trained one).
    Layers 0 and 2 measured: Toeplitz share 0.65 vs 0.18 on average (every head above its null); rotation fit
    0.96 vs 0.41."""
    view, _ = views
    assert view.plane_step.shape == (2,) and 2 * np.pi / abs(float(view.plane_step[0])) == pytest.approx(
        516, rel=0.01
    )
    assert null.permuted_key_rows and torch.equal(null.plane_step, view.plane_step)
    assert bool((view.toeplitz_share > null.toeplitz_share).float().mean() > 0.75)
    assert float(null.toeplitz_share.mean()) + 0.15 < float(view.toeplitz_share.mean())
    assert float(null.rotation_fit.mean()) + 0.2 < float(view.rotation_fit.mean())
    assert float(view.rotation_fit[0, 3]) > 0.99
    offsets = view.implied_offset
    assert offsets.shape == (2, 12) and bool(
        ((offsets >= 0) & (offsets < 2 * np.pi / view.plane_step.abs()[:, None])).all()
    )

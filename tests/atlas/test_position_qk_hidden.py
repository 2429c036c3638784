"""``path="hidden"``: the position-QK view on each layer's input positional part, on a tiny GPT-2 with a
planted previous-token head that reads only position composed by an earlier layer.

The plant: the table is a two-frequency helix in dimensions 0-7 (each row sums to zero, so LayerNorm
only rescales it); layer 0's MLP copies the normed helix into dimensions 8-11 (GELU is the identity
up to 1e-12 on its inputs there: every unit is offset by +10 and the offset taken off again); layer 1
head 0 reads dimensions 8-11 only, its query rotated one position back against its key. The table has
nothing in dimensions 8-11, so the direct path sees no position in that head at all; the hidden path
sees the helix the MLP wrote and finds the look-back of one token.
"""

from __future__ import annotations

import math

import numpy as np
import pytest
import torch
import transformers

import pos_geometry as pg
from pos_geometry.errors import InvalidArgumentError

N_POS, D, HEADS, DH = 64, 32, 2, 16
OMEGA = (2 * math.pi / 16, 2 * math.pi / 12.8)  # whole turns in 64 positions: the helix is centred


def _rotation(angle: float) -> np.ndarray:
    return np.array([[math.cos(angle), -math.sin(angle)], [math.sin(angle), math.cos(angle)]])


@pytest.fixture(scope="module")
def planted(tmp_path_factory):
    config = transformers.GPT2Config(
        vocab_size=50, n_positions=N_POS, n_embd=D, n_layer=2, n_head=HEADS, n_inner=8,
        attn_pdrop=0.0, resid_pdrop=0.0, embd_pdrop=0.0,
    )  # fmt: skip
    torch.manual_seed(0)
    model = transformers.GPT2LMHeadModel(config).eval()
    t = np.arange(N_POS)
    helix = np.stack([f(w * t) for w in OMEGA for f in (np.cos, np.sin)], axis=1)  # (64, 4)
    wpe = np.zeros((N_POS, D))
    wpe[:, :4], wpe[:, 4:8] = helix, -helix
    with torch.no_grad():
        tr = model.transformer
        tr.wpe.weight.copy_(torch.from_numpy(wpe))
        tr.wte.weight.zero_()
        tr.wte.weight[:, 20:].normal_(0, 0.01)  # tokens live apart from the helix and its copy
        for block in tr.h:
            for norm in (block.ln_1, block.ln_2):
                norm.weight.fill_(1.0)
                norm.bias.zero_()
            block.attn.c_attn.bias.zero_()
            block.attn.c_proj.weight.zero_()  # no attention output: only the MLP composes position
            block.attn.c_proj.bias.zero_()
            block.mlp.c_fc.weight.zero_()
            block.mlp.c_fc.bias.fill_(-10.0)  # GELU(-10) ~ 0: unused units stay silent
            block.mlp.c_proj.weight.zero_()
            block.mlp.c_proj.bias.zero_()
        mlp = tr.h[0].mlp
        for k in range(4):  # unit k = LN(x)[k] + 10; output dim 8 + k = unit k - 10
            mlp.c_fc.weight[k, k] = 1.0
            mlp.c_fc.bias[k] = 10.0
            mlp.c_proj.weight[k, 8 + k] = 1.0
        mlp.c_proj.bias[8:12] = -10.0
        w = tr.h[1].attn.c_attn.weight  # (D, 3D): query columns 0..15, key columns D..D+15 for head 0
        w[:, :DH].zero_()
        w[:, D : D + DH].zero_()
        for p, omega in enumerate(OMEGA):
            rows = slice(8 + 2 * p, 10 + 2 * p)
            # q_i = R(ω)ᵀ c(i) = c(i - 1) against k_j = c(j): largest when i - j = 1
            w[rows, 2 * p : 2 * p + 2] = torch.from_numpy(_rotation(omega)) * 3.0
            w[rows, D + 2 * p : D + 2 * p + 2] = torch.eye(2) * 3.0
    folder = tmp_path_factory.mktemp("planted_previous_token")
    model.save_pretrained(folder)
    hidden = pg.hidden_positions(folder, n_sequences=16, device="cpu")
    return folder, hidden


def test_the_hidden_path_finds_the_previous_token_head_the_direct_path_misses(planted):
    folder, hidden = planted
    direct = pg.position_qk_atlas(folder, n_components=4)
    composed = pg.position_qk_atlas(folder, n_components=4, path="hidden", hidden=hidden)
    assert direct.path == "direct" and composed.path == "hidden" and composed.layers == (0, 1)
    # the direct path: the table has nothing where L1H0 reads, so its position logits are zero
    assert float(direct.logit_std[1, 0]) < 1e-9 and int(direct.peak_offset[1, 0]) == 0
    # the hidden path: the look-back of one token, and a head that depends on the offset alone
    assert int(composed.peak_offset[1, 0]) == 1
    assert float(composed.offset_r2[1, 0]) > 0.95 and float(composed.toeplitz_share[1, 0]) > 0.95
    assert float(composed.logit_std[1, 0]) > 1.0
    assert composed.provenance.kind == "hidden" and "hidden path" in " ".join(composed.provenance.processing)
    assert composed.provenance.config_dict["corpus"] == hidden.corpus
    assert "composed through earlier layers" in composed.summary()


def test_hidden_path_logits_equal_an_independent_computation(planted):
    """L1H0's offset profile from the hidden result's own pos[t], normed and projected in numpy."""
    folder, hidden = planted
    composed = pg.position_qk_atlas(folder, layers=[1], path="hidden", hidden=hidden, biases=False)
    model = transformers.GPT2LMHeadModel.from_pretrained(folder)
    pos = hidden.positional[1].matrix.double().numpy()
    x = (pos - pos.mean(1, keepdims=True)) / np.sqrt(pos.var(1, keepdims=True) + 1e-5)  # ln_1: gain 1, bias 0
    w = model.transformer.h[1].attn.c_attn.weight.detach().double().numpy()
    logits = (x @ w[:, :DH]) @ (x @ w[:, D : D + DH]).T / math.sqrt(DH)
    profile = np.array([np.diag(logits, -d).mean() for d in range(N_POS)])
    np.testing.assert_allclose(composed.offset_profile[0, 0].numpy(), profile, atol=1e-9)
    # and the plant itself: the profile is the two cosines one position late
    delta = np.arange(N_POS // 2)
    expected = sum(np.cos(w_ * (delta - 1)) for w_ in OMEGA)
    assert np.corrcoef(profile[: N_POS // 2], expected)[0, 1] > 0.99


def test_layer_0_reads_the_same_rows_on_both_paths(planted):
    """The residual stream entering block 0 is the table plus tokens: its positional part is the
    (centred) table up to the tokens' sampling noise."""
    folder, hidden = planted
    direct = pg.position_qk_atlas(folder, layers=[0], n_components=4)
    composed = pg.position_qk_atlas(folder, layers=[0], n_components=4, path="hidden", hidden=hidden)
    np.testing.assert_allclose(composed.offset_profile.numpy(), direct.offset_profile.numpy(), atol=0.02)
    assert torch.equal(composed.peak_offset, direct.peak_offset)


def test_the_null_permutes_key_rows_reproducibly(planted):
    folder, hidden = planted
    kwargs = {"path": "hidden", "hidden": hidden, "layers": [1]}
    real = pg.position_qk_atlas(folder, **kwargs)
    null = pg.position_qk_atlas(folder, permute_key_rows=True, **kwargs)
    again = pg.position_qk_atlas(folder, permute_key_rows=True, **kwargs)
    other = pg.position_qk_atlas(folder, permute_key_rows=True, random_state=1, **kwargs)
    assert null.permuted_key_rows and not real.permuted_key_rows
    assert "W_k rows permuted (random_state 0)" in " ".join(null.provenance.processing)
    torch.testing.assert_close(null.offset_profile, again.offset_profile)
    assert not torch.allclose(null.offset_profile, other.offset_profile)
    # the planted head's key no longer reads the helix its query rotates: the look-back is gone
    # (measured: peak 32, Toeplitz share 0.39, rotation fit 0.50 against 1, 0.99 and 0.999)
    assert int(null.peak_offset[0, 0]) != 1 and float(null.toeplitz_share[0, 0]) < 0.9
    assert float(null.rotation_fit[0, 0]) < 0.9 < float(real.rotation_fit[0, 0])
    assert "null" in null.summary()


@pytest.mark.parametrize(
    "kwargs, words",
    [
        ({"path": "hidden"}, "hidden=pg.hidden_positions"),
        ({"path": "composed"}, "path must be one of"),
        ({"random_state": -1}, "random_state must be an int >= 0"),
    ],
)
def test_bad_path_arguments_are_refused_with_the_fix(planted, kwargs, words):
    folder, _ = planted
    with pytest.raises(InvalidArgumentError, match=words):
        pg.position_qk_atlas(folder, **kwargs)


def test_hidden_of_another_model_or_missing_layers_is_refused(planted, tmp_path):
    folder, hidden = planted
    with pytest.raises(InvalidArgumentError, match="hidden= is read only with path='hidden'"):
        pg.position_qk_atlas(folder, hidden=hidden)
    partial = pg.hidden_positions(folder, layers=[0], n_sequences=2, device="cpu")
    with pytest.raises(InvalidArgumentError, match=r"no positional part for layer\(s\) \[1\]"):
        pg.position_qk_atlas(folder, layers=[1], path="hidden", hidden=partial)
    config = transformers.GPT2Config(
        vocab_size=50, n_positions=N_POS, n_embd=16, n_layer=2, n_head=2, n_inner=8
    )
    transformers.GPT2LMHeadModel(config).save_pretrained(tmp_path)
    with pytest.raises(InvalidArgumentError, match="same model"):
        pg.position_qk_atlas(tmp_path, path="hidden", hidden=hidden)

"""The learned-table QK view on a tiny GPT-2 carrying GPT-2 small's real position table.

Independent references: transformers' own attention (eager, ``output_attentions``) for a
position-only input; scikit-learn's PCA of the model's own ``ln_1`` applied to the table; the
``d_model × d_model`` form ``W_q W_kᵀ`` written out in numpy; diagonals read with ``np.diagonal``.
"""

from __future__ import annotations

import json

import numpy as np
import pytest
import torch
import transformers
from sklearn.decomposition import PCA

from pos_geometry import position_qk_atlas, rotary_atlas
from pos_geometry.atlas.position_qk import position_logits
from pos_geometry.errors import InvalidArgumentError, NotApplicableError

N_POS, D, HEADS, DH = 96, 768, 12, 64
PLANTED = (1, 3)  # layer, head whose W_q, W_k read only the table's top-2 PCA directions


@pytest.fixture(scope="module")
def tiny_gpt2(tmp_path_factory, gpt2_wpe):
    config = transformers.GPT2Config(
        vocab_size=10, n_positions=N_POS, n_embd=D, n_layer=2, n_head=HEADS, n_inner=32,
        attn_pdrop=0.0, resid_pdrop=0.0, embd_pdrop=0.0,
    )  # fmt: skip
    config._attn_implementation = "eager"
    torch.manual_seed(0)
    model = transformers.GPT2LMHeadModel(config).eval()
    with torch.no_grad():
        model.transformer.wpe.weight.copy_(torch.from_numpy(gpt2_wpe[:N_POS]))
        for block in model.transformer.h:
            block.attn.c_attn.bias.zero_()  # the view studies the weights' bilinear form
            block.ln_1.weight.uniform_(0.5, 1.5)
            block.ln_1.bias.normal_(0, 0.1)
        layer, head = PLANTED
        block = model.transformer.h[layer]
        x = block.ln_1(model.transformer.wpe.weight).double().numpy()
        top = PCA(2).fit(x).components_.T  # (d, 2)
        mix = torch.randn(2, DH, generator=torch.Generator().manual_seed(1)).double().numpy()
        w = block.attn.c_attn.weight
        w[:, head * DH : (head + 1) * DH] = torch.from_numpy(top @ mix)
        w[:, D + head * DH : D + (head + 1) * DH] = torch.from_numpy(top @ mix[::-1].copy())
    folder = tmp_path_factory.mktemp("tiny_gpt2")
    model.save_pretrained(folder)
    return model, folder


def test_layer0_logits_are_transformers_attention_scores(tiny_gpt2):
    """Position-only input (token embeddings zero): transformers' layer-0 attention probabilities are
    softmax(L) over the causal row, so log p - mean(log p) per row equals L - mean(L) per row."""
    model, folder = tiny_gpt2
    ours = position_logits(folder, 0).numpy()
    assert ours.shape == (HEADS, N_POS, N_POS)
    with torch.no_grad():
        out = model.double()(
            inputs_embeds=torch.zeros(1, N_POS, D, dtype=torch.float64), output_attentions=True
        )
        model.float()
    log_p = torch.log(out.attentions[0][0]).numpy()
    rows, cols = np.tril_indices(N_POS)
    for h in range(HEADS):
        theirs, mine = np.full((N_POS, N_POS), np.nan), np.full((N_POS, N_POS), np.nan)
        theirs[rows, cols], mine[rows, cols] = log_p[h][rows, cols], ours[h][rows, cols]
        theirs -= np.nanmean(theirs, axis=1, keepdims=True)
        mine -= np.nanmean(mine, axis=1, keepdims=True)
        np.testing.assert_allclose(mine[rows, cols], theirs[rows, cols], atol=1e-9)


def test_atlas_against_independent_computations(tiny_gpt2):
    model, folder = tiny_gpt2
    atlas = position_qk_atlas(folder, n_components=8)
    assert atlas.shape == (2, HEADS) and atlas.offset_profile.shape == (2, HEADS, N_POS)
    assert atlas.provenance.kind == "learned" and atlas.n_positions == N_POS
    for layer in (0, 1):
        block = model.transformer.h[layer]
        with torch.no_grad():  # transformers' LayerNorm module's parameters, applied in float64
            ln = block.ln_1
            x = torch.nn.functional.layer_norm(
                model.transformer.wpe.weight.double(),
                ln.normalized_shape,
                ln.weight.double(),
                ln.bias.double(),
                ln.eps,
            ).numpy()
        pca = PCA(8).fit(x)
        np.testing.assert_allclose(
            atlas.explained_variance_ratio[layer], pca.explained_variance_ratio_, rtol=1e-6
        )
        p = pca.components_.T
        w = block.attn.c_attn.weight.detach().double().numpy()
        logits = position_logits(folder, layer).numpy()
        for head in (0, 3, 11):
            form = w[:, head * DH : (head + 1) * DH] @ w[:, D + head * DH : D + (head + 1) * DH].T  # (d, d)
            share = np.linalg.norm(p.T @ form @ p) ** 2 / np.linalg.norm(form) ** 2
            assert atlas.form_share[layer, head] == pytest.approx(share, rel=1e-7)
            diagonals = [np.diagonal(logits[head], offset=-k) for k in range(N_POS)]
            np.testing.assert_allclose(
                atlas.offset_profile[layer, head], [d.mean() for d in diagonals], atol=1e-10
            )
            causal = np.concatenate(diagonals)
            between = sum(len(d) * (d.mean() - causal.mean()) ** 2 for d in diagonals)
            assert atlas.offset_r2[layer, head] == pytest.approx(
                between / causal.var() / causal.size, rel=1e-8
            )
            assert atlas.logit_std[layer, head] == pytest.approx(causal.std(ddof=1), rel=1e-8)
    # the planted head reads only the top-2 directions: its form lies inside the top 8, and its logits
    # are rebuilt exactly from the rank-8 table; the random heads' forms barely touch those 8 directions
    layer, head = PLANTED
    assert atlas.form_share[layer, head] == pytest.approx(1.0, abs=1e-9)
    assert atlas.logit_share[layer, head] == pytest.approx(1.0, abs=1e-9)
    others = np.delete(atlas.form_share.numpy().ravel(), layer * HEADS + head)
    assert others.max() < 0.05
    assert json.loads(atlas.to_json())["form_share"][layer][head] == pytest.approx(1.0, abs=1e-9)


def test_device_argument(tiny_gpt2, tiny_model, tmp_path):
    _, folder = tiny_gpt2
    reference = position_qk_atlas(folder, layers=[1])
    on_cpu = position_qk_atlas(folder, layers=[1], device="cpu")
    torch.testing.assert_close(on_cpu.offset_profile, reference.offset_profile, rtol=0, atol=0)
    _, rotary = tiny_model("mistral", tmp_path / "mistral")
    torch.testing.assert_close(
        rotary_atlas(rotary, device="cpu").qk_share, rotary_atlas(rotary).qk_share, rtol=0, atol=0
    )
    if not torch.cuda.is_available():
        for fn, path in ((position_qk_atlas, folder), (rotary_atlas, rotary)):
            with pytest.raises(InvalidArgumentError, match="no CUDA device"):
                fn(path, device="cuda")
    with pytest.raises(InvalidArgumentError, match="n_components"):
        position_qk_atlas(folder, n_components=0)


def test_neither_rotary_nor_a_learned_table_layout_does_not_apply(tmp_path):
    (tmp_path / "config.json").write_text(json.dumps({"model_type": "bloom", "n_layer": 2, "n_head": 4}))
    for fn in (position_qk_atlas, rotary_atlas):
        with pytest.raises(NotApplicableError, match="does not apply"):
            fn(tmp_path)


def test_a_headless_checkpoint_reads_the_same(tiny_gpt2, tmp_path):
    """The hub's gpt2 stores bare keys (``h.0.attn.c_attn.weight``, ``wpe.weight``), as GPT2Model saves them."""
    model, folder = tiny_gpt2
    model.transformer.save_pretrained(tmp_path / "bare")
    from safetensors import safe_open

    with safe_open(str(tmp_path / "bare" / "model.safetensors"), framework="pt") as fh:
        assert "wpe.weight" in fh.keys() and "h.1.attn.c_attn.weight" in fh.keys()  # noqa: SIM118
    bare, full = position_qk_atlas(tmp_path / "bare", layers=[1]), position_qk_atlas(folder, layers=[1])
    torch.testing.assert_close(bare.form_share, full.form_share, rtol=0, atol=0)
    assert dict(bare.provenance.config)["tensor_keys"][0] == "wpe.weight"


def test_a_model_table_name_finds_the_real_weights_beside_the_checkout_offline(real_data_dir, monkeypatch):
    """``position_qk_atlas("gpt2")`` and ``qk_atlas("gpt2")`` read ``../shared/data/real/gpt2_small_attention``
    offline, as ``load("gpt2")`` reads the real table there (they raised NotCachedError)."""
    import pos_geometry as pg

    folder = real_data_dir / "gpt2_small_attention"
    if not (folder / "config.json").is_file():
        pytest.skip(f"the real GPT-2 attention folder is not at {folder}")
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    atlas = pg.position_qk_atlas("gpt2", layers=[0])
    assert atlas.provenance.model_id == "gpt2" and "gpt2_small_attention" in atlas.provenance.source
    both = pg.qk_atlas("gpt2", layers=[0])
    assert both.provenance.model_id == "gpt2"

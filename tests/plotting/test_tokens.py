"""plot_token_positions: both clouds in the positional PCA basis (scikit-learn as oracle), subsampling, title."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import plotly.graph_objects as go
import pytest
import torch
from sklearn.decomposition import PCA

from pos_geometry.analysis.pca import pca
from pos_geometry.analysis.subspace import subspace_overlap
from pos_geometry.embedding import PositionalEmbedding, Provenance, TokenEmbedding
from pos_geometry.errors import InvalidArgumentError
from pos_geometry.plotting.export import save_figure
from pos_geometry.plotting.tokens import plot_token_positions, subsample_indices


def helix_table(n: int = 256, d: int = 16, seed: int = 0) -> np.ndarray:
    """A drifting helix in a random 3-D subspace of R^d, plus a little noise, float64."""
    rng = np.random.default_rng(seed)
    t = np.arange(n, dtype=np.float64)
    z = np.stack([3 * np.cos(2 * np.pi * t / 64), 3 * np.sin(2 * np.pi * t / 64), 0.02 * t], axis=1)
    basis = np.linalg.qr(rng.normal(size=(d, 3)))[0]
    return z @ basis.T + 0.02 * rng.normal(size=(n, d))


def token_matrix(vocab: int, d: int, seed: int = 1) -> np.ndarray:
    """Random token-like rows, offset from the origin so that using the wrong mean would show."""
    rng = np.random.default_rng(seed)
    return rng.normal(loc=0.7, scale=0.5, size=(vocab, d))


def _xy(trace) -> np.ndarray:
    cols = [trace.x, trace.y] + ([trace.z] if trace.type == "scatter3d" else [])
    return np.stack([np.asarray(c, dtype=np.float64) for c in cols], axis=1)


def _trace(fig: go.Figure, prefix: str):
    return next(t for t in fig.data if t.name.startswith(prefix))


def test_both_clouds_are_in_the_positional_basis_with_the_positional_mean() -> None:
    x, tok = helix_table(), token_matrix(500, 16)
    fig = plot_token_positions(x, tok, max_tokens=None)
    assert [t.type for t in fig.data] == ["scatter", "scatter"]
    ref = PCA(2, svd_solver="full").fit(x)
    pts, toks = _trace(fig, "positions"), _trace(fig, "tokens")
    np.testing.assert_allclose(_xy(pts), ref.fit_transform(x), atol=1e-8)
    # tokens use the positions' mean and axes, not their own
    np.testing.assert_allclose(_xy(toks), (tok - x.mean(0)) @ ref.components_.T, atol=1e-8)
    np.testing.assert_array_equal(pts.customdata, np.arange(256))
    np.testing.assert_array_equal(toks.customdata, np.arange(500))
    assert pts.marker.color == "#1f5fbf" and toks.marker.color == "#d62728"
    assert toks.name == "tokens (all 500 tokens)"
    assert pts.hovertemplate.startswith("position %{customdata}") and "PC2 %{y" in pts.hovertemplate
    assert toks.hovertemplate.startswith("token %{customdata}")
    assert fig.layout.yaxis.scaleanchor == "x"
    assert fig.layout.xaxis.title.text == f"PC1 ({100 * ref.explained_variance_ratio_[0]:.1f}%)"


def test_three_components_and_a_window_give_a_3d_scatter() -> None:
    x, tok = helix_table(), token_matrix(300, 16)
    fig = plot_token_positions(x, torch.from_numpy(tok), components=(0, 2, 3), window=(10, 200))
    assert [t.type for t in fig.data] == ["scatter3d", "scatter3d"]
    ref = PCA(4, svd_solver="full").fit(x[10:200])
    np.testing.assert_allclose(
        _xy(_trace(fig, "positions")), ref.transform(x[10:200])[:, [0, 2, 3]], atol=1e-8
    )
    np.testing.assert_allclose(
        _xy(_trace(fig, "tokens")), ((tok - x[10:200].mean(0)) @ ref.components_.T)[:, [0, 2, 3]], atol=1e-8
    )
    np.testing.assert_array_equal(_trace(fig, "positions").customdata, np.arange(10, 200))
    assert "rows 10–199" in fig.layout.title.text and "PC1,3,4" in fig.layout.title.text
    assert fig.layout.scene.zaxis.title.text.startswith("PC4 (")
    assert "PC4 %{z" in _trace(fig, "tokens").hovertemplate


def test_subsampling_is_seeded_sorted_and_announced() -> None:
    x, tok = helix_table(), token_matrix(5000, 16)
    fig = plot_token_positions(x, tok, max_tokens=700, seed=3)
    toks = _trace(fig, "tokens")
    idx = np.asarray(toks.customdata)
    assert idx.shape == (700,) and len(np.unique(idx)) == 700 and np.all(np.diff(idx) > 0)
    np.testing.assert_array_equal(idx, np.sort(np.random.default_rng(3).choice(5000, 700, replace=False)))
    ref = PCA(2, svd_solver="full").fit(x)
    np.testing.assert_allclose(_xy(toks), (tok[idx] - x.mean(0)) @ ref.components_.T, atol=1e-8)
    assert toks.name == "tokens (700 of 5000 tokens)"
    assert fig.layout.title.text.endswith(" · 700 of 5000 tokens shown")
    again = plot_token_positions(x, tok, max_tokens=700, seed=3)
    np.testing.assert_array_equal(_trace(again, "tokens").customdata, idx)
    other = np.asarray(_trace(plot_token_positions(x, tok, max_tokens=700, seed=4), "tokens").customdata)
    assert not np.array_equal(other, idx)
    # no subsample when the vocabulary fits
    np.testing.assert_array_equal(subsample_indices(5000, 5000), np.arange(5000))
    assert "shown" not in plot_token_positions(x, tok[:50], max_tokens=50).layout.title.text


def test_title_share_equals_subspace_overlap_and_tracks_the_geometry(gpt2_wpe: np.ndarray) -> None:
    pe = PositionalEmbedding(
        torch.from_numpy(gpt2_wpe), Provenance("gpt2", "learned", "wpe", revision="main")
    )
    rng = np.random.default_rng(0)
    random_tokens = rng.normal(scale=0.1, size=(4000, 768)).astype(np.float32)
    fig = plot_token_positions(pe, random_tokens, components=(0, 1, 2), window=(1, 1024), max_tokens=1000)
    # independent oracle: scikit-learn's axes, numpy's variance share
    ref = PCA(3, svd_solver="full").fit(gpt2_wpe[1:].astype(np.float64))
    tc = random_tokens.astype(np.float64) - random_tokens.mean(0, dtype=np.float64)
    share = ((tc @ ref.components_.T) ** 2).sum() / (tc**2).sum()
    ov = subspace_overlap(pe, random_tokens, 3, window=(1, 1024))
    assert share == pytest.approx(ov.token_variance_fraction, rel=1e-4)
    title = fig.layout.title.text
    assert title.startswith(
        f"Tokens vs positions · gpt2 @ main · rows 1–1023 · PC1–3: {100 * ref.explained_variance_ratio_.sum():.1f}%"
    )
    assert f"token variance in PC1–3: {100 * share:.2f}% (random subspace 3/768: 0.39%)" in title
    assert 0.5 < share / (3 / 768) < 2.0  # random tokens: about the random share
    # tokens with the positional directions removed avoid the subspace; positional-like tokens fill it
    avoiding = random_tokens - (random_tokens @ ref.components_.T) @ ref.components_
    assert (
        "token variance in PC1–3: 0.00%"
        in plot_token_positions(pe, avoiding, window=(1, 1024), components=(0, 1, 2)).layout.title.text
    )
    like = gpt2_wpe[rng.integers(1, 1024, 3000)] + rng.normal(scale=0.01, size=(3000, 768)).astype(np.float32)
    high = plot_token_positions(pe, like, window=(1, 1024), components=(0, 1, 2)).layout.title.text
    assert float(high.split("token variance in PC1–3: ")[1].split("%")[0]) > 80
    # a precomputed SubspaceOverlap supplies the same numbers; overlap=False leaves them out
    given = plot_token_positions(
        pe, random_tokens, components=(0, 1, 2), window=(1, 1024), max_tokens=1000, overlap=ov
    )
    assert given.layout.title.text == title
    assert "token variance" not in plot_token_positions(pe, random_tokens, overlap=False).layout.title.text


def test_token_embedding_input_names_its_model_and_pca_result_is_reused() -> None:
    x, tok = helix_table(), token_matrix(200, 16)
    te = TokenEmbedding(torch.from_numpy(tok), Provenance("toy", "learned", "wte"))
    res = pca(x, n_components=2)
    fig = plot_token_positions(res, te)
    assert _trace(fig, "tokens").name == "tokens of toy (all 200 tokens)"
    np.testing.assert_allclose(_xy(_trace(fig, "tokens")), res.transform(tok).numpy(), atol=1e-10)


def test_bad_inputs_raise_typed_errors() -> None:
    x, tok = helix_table(), token_matrix(100, 16)
    with pytest.raises(
        InvalidArgumentError, match=r"d_model=16 .* shape \(10, 8\)\. Pass the token embedding"
    ):
        plot_token_positions(x, np.zeros((10, 8)))
    with pytest.raises(InvalidArgumentError, match="2 \\(a 2D scatter\\) or 3"):
        plot_token_positions(x, tok, components=(0, 1, 2, 3))
    with pytest.raises(InvalidArgumentError, match="2 distinct"):
        plot_token_positions(x, tok, components=(1, 1))
    with pytest.raises(InvalidArgumentError, match="max_tokens must be a positive integer"):
        plot_token_positions(x, tok, max_tokens=0)
    with pytest.raises(InvalidArgumentError, match="seed must be"):
        plot_token_positions(x, tok, seed=-1)
    with pytest.raises(InvalidArgumentError, match="floating-point token-embedding matrix"):
        plot_token_positions(x, np.zeros(16))
    with pytest.raises(InvalidArgumentError, match="floating-point token-embedding matrix"):
        plot_token_positions(x, np.zeros((10, 16), dtype=np.int64))
    with pytest.raises(InvalidArgumentError, match="overlap must be"):
        plot_token_positions(x, tok, overlap="yes")
    with pytest.raises(InvalidArgumentError, match="batch of 2"):
        plot_token_positions(np.stack([x, x]), tok)
    with pytest.raises(InvalidArgumentError, match="does not describe the plotted subspace"):
        plot_token_positions(x, tok, overlap=subspace_overlap(x, tok, 3))


@pytest.mark.browser
@pytest.mark.slow
def test_gpt2_token_scatter_renders_in_chromium(gpt2_wpe: np.ndarray, tmp_path: Path, browser_probe) -> None:
    pe = PositionalEmbedding(
        torch.from_numpy(gpt2_wpe), Provenance("gpt2", "learned", "wpe", revision="main")
    )
    tokens = np.random.default_rng(0).normal(scale=0.1, size=(3000, 768)).astype(np.float32)
    count = "Array.from(document.querySelectorAll('.scatterlayer .trace')).map(t => t.querySelectorAll('.points path').length)"
    report = browser_probe(
        save_figure(plot_token_positions(pe, tokens), tmp_path / "tokens.html"), action=count
    )
    assert report["errors"] == []
    assert report["roots"] == 1 and report["main_svg"] >= 1
    assert "Tokens vs positions · gpt2 @ main" in report["text"]
    assert report["action"] == [2000, 1024]  # every drawn token (subsample) and every position is a point
    shot = report["screenshot"][..., :3].reshape(-1, 3).astype(int)
    blue = shot[:, 2] > shot[:, 0] + 80  # position blue #1f5fbf
    red = (shot[:, 0] > shot[:, 1] + 60) & (shot[:, 0] > shot[:, 2] + 60)  # token red, also at opacity 0.5
    assert blue.sum() > 500 and red.sum() > 100, (blue.sum(), red.sum())  # more than the legend swatches

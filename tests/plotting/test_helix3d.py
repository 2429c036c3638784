"""plot_helix: traces, colour bar, hover, title numbers (checked against scikit-learn), overlays."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import plotly.graph_objects as go
import pytest
import torch
from sklearn.decomposition import PCA

from pos_geometry.analysis.helix import fit_helix
from pos_geometry.analysis.pca import pca
from pos_geometry.embedding import PositionalEmbedding, Provenance
from pos_geometry.errors import InvalidArgumentError
from pos_geometry.plotting.export import save_figure
from pos_geometry.plotting.helix3d import block_means, helix_curve, plot_helix


def synthetic_helix(
    n: int = 256, d: int = 16, period: float = 64.0, noise: float = 0.02, seed: int = 0
) -> np.ndarray:
    """A helix (radius 3, drift 0.02/position) embedded in a random 3-D subspace of R^d, plus noise."""
    rng = np.random.default_rng(seed)
    t = np.arange(n, dtype=np.float64)
    z = np.stack([3 * np.cos(2 * np.pi * t / period), 3 * np.sin(2 * np.pi * t / period), 0.02 * t], axis=1)
    basis = np.linalg.qr(rng.normal(size=(d, 3)))[0]  # (d, 3) orthonormal columns
    return (z @ basis.T + noise * rng.normal(size=(n, d))).astype(np.float32)


def embedding(
    matrix: np.ndarray, model: str = "toy-helix", revision: str | None = "step42"
) -> PositionalEmbedding:
    return PositionalEmbedding(
        torch.from_numpy(matrix), Provenance(model, "learned", "synthetic", revision=revision)
    )


def _points(fig: go.Figure) -> go.Scatter3d:
    return next(t for t in fig.data if t.name == "positions")


def test_structure_colourbar_hover_and_title() -> None:
    x = synthetic_helix()
    fig = plot_helix(embedding(x), window=(10, 250))
    assert isinstance(fig, go.Figure)
    assert [t.type for t in fig.data] == ["scatter3d", "scatter3d"]
    pts = _points(fig)
    assert pts.mode == "markers"
    assert pts.marker.showscale and pts.marker.colorbar.title.text == "position"
    np.testing.assert_array_equal(pts.marker.color, np.arange(10, 250))
    np.testing.assert_array_equal(pts.customdata, np.arange(10, 250))
    assert "position %{customdata}" in pts.hovertemplate and "PC1 %{x" in pts.hovertemplate
    assert fig.data[1].mode == "lines" and fig.data[1].hoverinfo == "skip"
    ref = PCA(3).fit(x[10:250].astype(np.float64))
    expected = f"{100 * ref.explained_variance_ratio_.sum():.1f}%"
    assert fig.layout.title.text == f"toy-helix @ step42 · rows 10–249 · PC1–3: {expected}"
    assert fig.layout.scene.xaxis.title.text == f"PC1 ({100 * ref.explained_variance_ratio_[0]:.1f}%)"
    # coordinates are the PCA coordinates (scikit-learn as oracle, its sign convention included)
    np.testing.assert_allclose(np.stack([pts.x, pts.y, pts.z], 1), ref.transform(x[10:250]), atol=1e-3)


def test_selected_components_and_no_line() -> None:
    x = synthetic_helix(d=12, noise=0.3)
    fig = plot_helix(x, components=(0, 2, 3), line=False)
    assert len(fig.data) == 1
    ref = PCA(4).fit(x.astype(np.float64))
    ratios = ref.explained_variance_ratio_
    assert fig.layout.title.text.endswith(f"PC1,3,4: {100 * (ratios[0] + ratios[2] + ratios[3]):.1f}%")
    assert fig.layout.title.text.startswith("array · rows 0–255")
    np.testing.assert_allclose(np.abs(fig.data[0].z), np.abs(ref.transform(x)[:, 3]), atol=1e-3)
    assert fig.layout.scene.zaxis.title.text.startswith("PC4 (")


def test_gpt2_title_has_model_window_and_variance_of_plotted_components(gpt2_wpe: np.ndarray) -> None:
    pe = PositionalEmbedding(
        torch.from_numpy(gpt2_wpe),
        Provenance("gpt2", "learned", "model.safetensors::wpe.weight", revision="main"),
    )
    res = pca(pe, n_components=3, window=(1, 1024))
    fig = plot_helix(res)
    oracle = PCA(3, svd_solver="full").fit(gpt2_wpe[1:].astype(np.float64)).explained_variance_ratio_.sum()
    assert fig.layout.title.text == f"gpt2 @ main · rows 1–1023 · PC1–3: {100 * oracle:.1f}%"
    assert (
        fig.layout.title.text
        == f"gpt2 @ main · rows 1–1023 · PC1–3: {100 * float(res.explained_variance_ratio_.sum()):.1f}%"
    )
    assert 0.85 < oracle < 0.95  # the helix holds ~90% of the variance
    assert len(_points(fig).x) == 1023


def test_fit_overlay_follows_the_points_and_matches_the_fit() -> None:
    x = synthetic_helix(noise=0.0)
    pe = embedding(x)
    res = pca(pe, n_components=3)
    fit = fit_helix(res)
    fig = plot_helix(res, fit=fit)
    overlay = [t for t in fig.data if t.name.startswith("fitted helix")]
    assert len(overlay) == 1 and overlay[0].mode == "lines"
    # the documented model, evaluated at the fitted positions, reproduces the fit's own R²
    z = res.coordinates.double().numpy()
    curve = helix_curve(fit, res.positions.numpy())
    r2 = 1 - ((z - curve) ** 2).sum() / ((z - z.mean(0)) ** 2).sum()
    assert r2 == pytest.approx(fit.r2, abs=1e-6)
    assert fit.r2 > 0.999
    # the drawn curve passes through the points (noise-free helix)
    drawn = np.stack([overlay[0].x, overlay[0].y, overlay[0].z], 1)
    t = np.asarray(overlay[0].customdata)
    at_integers = drawn[np.isin(t, res.positions.numpy())]
    assert np.abs(at_integers - z[np.round(t[np.isin(t, res.positions.numpy())]).astype(int)]).max() < 0.05
    # fit=True fits on the same rows
    assert any(t.name.startswith("fitted helix") for t in plot_helix(pe, fit=True).data)


def test_no_fitted_curve_unless_the_verdict_is_helix() -> None:
    # a random walk's top PCs are smooth sinusoids, but it is not a helix: its fit must not be drawn
    walk = np.cumsum(np.random.default_rng(3).normal(size=(256, 16)), axis=0)
    res = pca(embedding(walk), n_components=3)
    fit = fit_helix(res, n_surrogates=19, alpha=0.05)
    assert fit.verdict != "helix"
    fig = plot_helix(res, fit=fit)
    assert not [t for t in fig.data if "fitted" in (t.name or "")]
    assert [t.name for t in fig.data] == ["positions", "consecutive positions"]


def test_titles_name_the_model_never_its_path(tmp_path: Path) -> None:
    from pos_geometry import load

    path = tmp_path / "nested" / "my_table.npy"
    path.parent.mkdir()
    np.save(path, synthetic_helix())
    pe = load(str(path))
    assert pe.provenance.model_id == str(path) and str(path) in pe.provenance.source  # provenance keeps it
    title = plot_helix(pe).layout.title.text
    assert title.startswith("my_table · rows 0–255 · PC1–3: ") and str(tmp_path) not in title
    named = load(str(path), model_id="gpt2-copy")
    assert plot_helix(named).layout.title.text.startswith("gpt2-copy · rows 0–255")


def test_rotary_table_is_titled_as_one_and_gets_no_helix() -> None:
    from pos_geometry import analyze, load

    rope = load("pythia-70m", n_positions=256)
    a = analyze(rope, analyses=("helix",))
    assert a.helix is None and "rotary" in a.notes["helix"]  # analytic tables get no helix fit
    fig = plot_helix(a.pca, fit=a.helix)
    assert fig.layout.title.text.startswith("pythia-70m @ main (rotary table) · rows 0–255")
    assert [t.name for t in fig.data] == ["positions", "consecutive positions"]


def test_extra_points_are_projected_into_the_full_table_basis() -> None:
    x = synthetic_helix()
    means, centres = block_means(x, 32)
    np.testing.assert_allclose(means, x.astype(np.float64).reshape(8, 32, -1).mean(1), rtol=1e-6)
    np.testing.assert_allclose(centres, np.arange(8) * 32 + 15.5)
    fig = plot_helix(x, extra_points=means, extra_positions=centres, extra_label="means of 32 rows")
    extra = fig.data[-1]
    assert extra.name == "means of 32 rows" and len(extra.x) == 8
    ref = PCA(3).fit(x.astype(np.float64))
    np.testing.assert_allclose(np.stack([extra.x, extra.y, extra.z], 1), ref.transform(means), atol=1e-3)
    np.testing.assert_allclose(extra.customdata, centres)


def test_bad_inputs_raise_typed_errors() -> None:
    x = synthetic_helix()
    res = pca(x, n_components=3)
    with pytest.raises(InvalidArgumentError, match="cannot be applied to a PCAResult"):
        plot_helix(res, window=(0, 100))
    with pytest.raises(InvalidArgumentError, match="batch of 2"):
        plot_helix(pca(np.stack([x, x]), n_components=3))
    with pytest.raises(InvalidArgumentError, match="3 distinct 0-based"):
        plot_helix(x, components=(0, 0, 1))
    with pytest.raises(InvalidArgumentError, match=r"needs 5 principal components .* holds 3"):
        plot_helix(res, components=(0, 1, 4))
    with pytest.raises(InvalidArgumentError, match="does not match the plotted PCA"):
        plot_helix(x, window=(0, 200), fit=fit_helix(x))
    with pytest.raises(InvalidArgumentError, match="fit must be"):
        plot_helix(x, fit="yes")
    with pytest.raises(InvalidArgumentError, match="size must be an integer"):
        block_means(x, 0)


def test_never_shows(monkeypatch: pytest.MonkeyPatch) -> None:
    def refuse(*args, **kwargs):
        raise AssertionError("a plotting function must not show the figure")

    monkeypatch.setattr(go.Figure, "show", refuse)
    monkeypatch.setattr("plotly.io.show", refuse)
    plot_helix(synthetic_helix(), fit=True)


@pytest.mark.browser
@pytest.mark.slow
def test_gpt2_helix_html_renders_in_chromium(gpt2_wpe: np.ndarray, tmp_path: Path, browser_probe) -> None:
    pe = PositionalEmbedding(
        torch.from_numpy(gpt2_wpe), Provenance("gpt2", "learned", "wpe", revision="main")
    )
    means, centres = block_means(pe, 32)
    out = save_figure(
        plot_helix(pe, window=(1, 1024), extra_points=means, extra_positions=centres), tmp_path / "h.html"
    )
    report = browser_probe(out)
    assert report["errors"] == []
    assert report["roots"] == 1 and report["main_svg"] >= 1 and report["canvases"] >= 1
    assert "gpt2 @ main · rows 1–1023 · PC1–3:" in report["text"]
    assert "WebGL is not supported" not in report["text"]
    shot = report["screenshot"][..., :3]
    assert len(np.unique(shot.reshape(-1, 3), axis=0)) > 100, "screenshot looks blank"

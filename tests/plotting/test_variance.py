"""plot_explained_variance: several models on one chart, dash by kind, numbers from PCA."""

from __future__ import annotations

import numpy as np
import pytest
import torch
from sklearn.decomposition import PCA

from pos_geometry.analysis.pca import pca
from pos_geometry.embedding import PositionalEmbedding, Provenance
from pos_geometry.errors import InvalidArgumentError
from pos_geometry.plotting.variance import plot_explained_variance


def _rotary_table(n: int = 128, dim: int = 32, base: float = 10000.0) -> np.ndarray:
    """cos/sin of a rotary code, rows = positions (as the rotary loader returns it)."""
    inv = base ** (-np.arange(0, dim, 2) / dim)
    ang = np.arange(n)[:, None] * inv[None, :]
    return np.concatenate([np.cos(ang), np.sin(ang)], axis=1).astype(np.float32)


def test_learned_and_rotary_side_by_side(gpt2_wpe) -> None:
    learned = PositionalEmbedding(
        torch.from_numpy(gpt2_wpe), Provenance("gpt2", "learned", "wpe", revision="main")
    )
    rotary = PositionalEmbedding(
        torch.from_numpy(_rotary_table()), Provenance("toy-rope", "rotary", "config.json")
    )
    fig = plot_explained_variance([learned, rotary], n_components=8)
    a, b = fig.data
    assert a.name == "gpt2 @ main (rows 0–1023)" and b.name == "toy-rope (rows 0–127)"
    assert (a.line.dash, b.line.dash) == ("solid", "dash")
    assert (a.legendgroup, b.legendgroup) == ("learned", "rotary")
    assert a.legendgrouptitle.text == "learned" and b.legendgrouptitle.text == "rotary"
    np.testing.assert_array_equal(a.x, np.arange(1, 9))
    oracle = np.cumsum(PCA(8, svd_solver="full").fit(gpt2_wpe.astype(np.float64)).explained_variance_ratio_)
    np.testing.assert_allclose(a.y, 100 * oracle, atol=0.05)
    assert np.all(np.diff(b.y) >= 0) and b.y[-1] <= 100.0001
    assert fig.layout.yaxis.range == (0, 101)
    # tables of different widths: the figure says so (a d-column table reaches 100% by component d)
    widths = (gpt2_wpe.shape[1], _rotary_table().shape[1])
    (note,) = fig.layout.annotations
    assert f"{min(widths)} and {max(widths)} columns" in note.text and "100% by component d" in note.text
    (same,) = plot_explained_variance(
        [learned, learned], n_components=3, labels=["a", "b"]
    ).layout.annotations
    assert same.text == "a and b lie on top of each other (at most 0.0 points apart)."  # said, not hidden
    two = plot_explained_variance([learned, _rotary_table()], n_components=3, labels=["a", "b"])
    assert "lie on top" not in two.layout.annotations[0].text


def test_per_component_labels_and_batched_result() -> None:
    rng = np.random.default_rng(0)
    x = rng.normal(size=(3, 64, 16)).astype(np.float32) * np.linspace(3, 0.2, 16, dtype=np.float32)
    res = pca(x, n_components=5)
    fig = plot_explained_variance(res, n_components=5, cumulative=False, labels=["a", "b", "c"])
    assert [t.name for t in fig.data] == ["a", "b", "c"]
    for i, tr in enumerate(fig.data):
        np.testing.assert_allclose(
            tr.y, 100 * PCA(5).fit(x[i].astype(np.float64)).explained_variance_ratio_, atol=1e-3
        )
    # the legend title of a kind appears once
    assert [t.legendgrouptitle.text for t in fig.data] == ["learned", None, None]
    assert fig.layout.yaxis.title.text == "% of variance"


def test_bad_arguments() -> None:
    x = np.random.default_rng(1).normal(size=(32, 8)).astype(np.float32)
    with pytest.raises(InvalidArgumentError, match="n_components must be a positive integer"):
        plot_explained_variance([x], n_components=0)
    with pytest.raises(InvalidArgumentError, match="one entry per item"):
        plot_explained_variance([x, x], labels=["one"])
    with pytest.raises(InvalidArgumentError, match=r"needs 6 principal components .* holds 3"):
        plot_explained_variance([pca(x, n_components=3)], n_components=6)

"""plot_similarity / plot_similarity_by_offset: the heatmap and the offset curve of a periodicity result."""

from __future__ import annotations

import numpy as np
import plotly.graph_objects as go
import pytest

from pos_geometry.errors import InvalidArgumentError
from pos_geometry.plotting.similarity import plot_similarity, plot_similarity_by_offset


def _cosine(x: np.ndarray) -> np.ndarray:
    x = x.astype(np.float64)
    x = x / np.linalg.norm(x, axis=1, keepdims=True)
    return x @ x.T


def test_heatmap_is_the_cosine_similarity(periodic_embedding, periodic_result) -> None:
    fig = plot_similarity(periodic_result)
    assert [t.type for t in fig.data] == ["heatmap"]
    heat = fig.data[0]
    np.testing.assert_allclose(heat.z, _cosine(periodic_embedding.numpy()), atol=1e-5)
    assert (heat.zmin, heat.zmax, heat.zmid) == (-1.0, 1.0, 0.0)
    assert heat.colorbar.title.text == "cosine" and "cosine similarity %{z" in heat.hovertemplate
    np.testing.assert_array_equal(heat.x, np.arange(160))
    assert fig.layout.yaxis.autorange == "reversed"
    assert fig.layout.title.text == (
        f"Cosine similarity · toy-periodic @ v1 · rows 0–159 · Toeplitz score {periodic_result.toeplitz_score:.3f}"
    )


def test_heatmap_from_an_embedding_with_a_window(periodic_embedding) -> None:
    fig = plot_similarity(periodic_embedding, window=(20, 100), n_surrogates=19, alpha=0.05)
    np.testing.assert_allclose(fig.data[0].z, _cosine(periodic_embedding.numpy()[20:100]), atol=1e-5)
    np.testing.assert_array_equal(fig.data[0].y, np.arange(20, 100))
    assert "rows 20–99" in fig.layout.title.text


def test_offset_curve_is_the_mean_of_each_diagonal(periodic_embedding, periodic_result) -> None:
    fig = plot_similarity_by_offset(periodic_result)
    solid, faint = fig.data  # offsets past 3/4 of the window (few pairs each) are drawn faint
    assert solid.showlegend and not faint.showlegend and faint.opacity < solid.opacity
    assert solid.x[-1] == faint.x[0] == 120 and list(faint.customdata) == [160 - k for k in range(120, 160)]
    x = np.concatenate([solid.x, faint.x[1:]])
    y = np.concatenate([solid.y, faint.y[1:]])
    sim = _cosine(periodic_embedding.numpy())
    expected = [np.diagonal(sim, k).mean() for k in range(160)]
    np.testing.assert_allclose(y, expected, atol=1e-5)
    np.testing.assert_array_equal(x, np.arange(160))
    # a period-32 code: similar again one period later, opposite half a period later
    assert y[32] > 0.9 and y[16] < -0.9
    assert "fewer than 25% of its rows' pairs" in fig.layout.annotations[0].text
    assert fig.layout.title.text == "Mean cosine similarity by offset · toy-periodic @ v1 · rows 0–159"


def test_several_models_share_the_chart(periodic_embedding, gpt2_wpe) -> None:
    fig = plot_similarity_by_offset(
        [periodic_embedding, gpt2_wpe[:256]],
        labels=["toy", "gpt2"],
        max_offset=100,
        n_surrogates=19,
        alpha=0.05,
    )
    assert [t.name for t in fig.data] == ["toy", "gpt2"]
    assert all(t.line.dash is None for t in fig.data)  # no dash pattern: fast oscillations stay readable
    assert all(len(t.y) == 101 for t in fig.data)
    assert fig.layout.showlegend is True
    assert fig.data[1].y[0] == pytest.approx(1.0, abs=1e-5)  # every row is similar to itself


def test_bad_arguments(periodic_result) -> None:
    with pytest.raises(InvalidArgumentError, match="cannot be applied to a PeriodicityResult"):
        plot_similarity(periodic_result, window=(0, 10))
    with pytest.raises(InvalidArgumentError, match="one entry per item"):
        plot_similarity_by_offset([periodic_result], labels=["a", "b"])
    with pytest.raises(InvalidArgumentError, match="max_offset"):
        plot_similarity_by_offset(periodic_result, max_offset=0)
    assert isinstance(plot_similarity_by_offset(periodic_result), go.Figure)


def test_long_windows_are_drawn_as_block_means(periodic_embedding, periodic_result) -> None:
    fig = plot_similarity(periodic_result, max_cells=40)  # 160 positions -> 4×4 blocks
    m = np.asarray(periodic_embedding.matrix, dtype=np.float64)
    unit = m / np.linalg.norm(m, axis=1, keepdims=True)
    sim = unit @ unit.T
    expected = sim.reshape(40, 4, 40, 4).mean(axis=(1, 3))
    heat = fig.data[0]
    np.testing.assert_allclose(np.asarray(heat.z), expected, atol=1e-5)
    assert list(heat.x[:3]) == [0, 4, 8] and fig.layout.title.text.endswith("4×4 block means")
    with pytest.raises(InvalidArgumentError, match="max_cells"):
        plot_similarity(periodic_result, max_cells=1)

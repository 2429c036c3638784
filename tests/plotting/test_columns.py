"""plot_columns: individual columns against position with their sinusoid fits."""

from __future__ import annotations

import numpy as np
import pytest

from pos_geometry.errors import InvalidArgumentError
from pos_geometry.plotting.columns import plot_columns, sinusoid_curve


def test_best_columns_with_fits(periodic_embedding, periodic_result) -> None:
    fig = plot_columns(periodic_embedding, 3, result=periodic_result)
    r2 = periodic_result.column_r2.numpy()
    best = np.argsort(-r2, kind="stable")[:3]
    data = [t for t in fig.data if t.name == "column values"]
    fits = [t for t in fig.data if t.name == "sinusoid fit"]
    assert len(data) == len(fits) == 3
    x = periodic_embedding.numpy()
    for j, tr, fit in zip(best, data, fits, strict=True):
        np.testing.assert_allclose(tr.y, x[:, j], rtol=1e-6)
        np.testing.assert_array_equal(tr.x, np.arange(160))
        # the drawn fit reproduces the analysis' R² for that column
        resid = x[:, j] - fit.y
        assert 1 - (resid**2).sum() / ((x[:, j] - x[:, j].mean()) ** 2).sum() == pytest.approx(
            r2[j], abs=1e-4
        )
    titles = [a.text for a in fig.layout.annotations]
    periods = periodic_result.column_periods.numpy()
    assert titles == [f"column {j}: period {periods[j]:.1f}, R² {r2[j]:.3f}" for j in best]
    assert all("period 32.0" in t for t in titles)
    assert fig.layout.title.text == "Columns vs position · toy-periodic @ v1 · rows 0–159"


def test_sinusoid_curve_recovers_a_known_wave() -> None:
    t = np.arange(200.0)
    y = 0.3 + 1.5 * np.cos(2 * np.pi * t / 50 + 0.7)
    curve, r2 = sinusoid_curve(t, y, 50.0)
    np.testing.assert_allclose(curve, y, atol=1e-9)
    assert r2 == pytest.approx(1.0)


def test_explicit_columns_without_fits_and_window(periodic_embedding) -> None:
    fig = plot_columns(periodic_embedding, [4, 1], fits=False, window=(10, 90))
    assert [t.name for t in fig.data] == ["column values", "column values"]
    np.testing.assert_allclose(fig.data[1].y, periodic_embedding.numpy()[10:90, 1], rtol=1e-6)
    assert [a.text for a in fig.layout.annotations] == ["column 4", "column 1"]


def test_bad_arguments(periodic_embedding, periodic_result) -> None:
    with pytest.raises(InvalidArgumentError, match=r"indices in 0\.\.11"):
        plot_columns(periodic_embedding, [12], result=periodic_result)
    with pytest.raises(InvalidArgumentError, match="best columns"):
        plot_columns(periodic_embedding, 0, result=periodic_result)
    with pytest.raises(InvalidArgumentError, match="computed on window"):
        plot_columns(periodic_embedding, 2, window=(0, 100), result=periodic_result)

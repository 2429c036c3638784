"""plot_recurrence: eigenvalues of the fitted transition matrix and its prediction error."""

from __future__ import annotations

import numpy as np
import pytest

from pos_geometry.analysis.pca import pca
from pos_geometry.analysis.recurrence import fit_recurrence
from pos_geometry.errors import InvalidArgumentError
from pos_geometry.plotting.recurrence import plot_recurrence


def _rotary(n: int = 200, thetas=(0.5, 0.05)) -> np.ndarray:
    ang = np.arange(n)[:, None] * np.asarray(thetas)
    return np.concatenate([np.cos(ang), np.sin(ang)], axis=1)


def test_rotations_sit_on_the_unit_circle() -> None:
    fig = plot_recurrence(_rotary(), n_components=4, horizons=(1, 4, 16, 64))
    circle, eig, model, persistence = fig.data
    assert circle.name == "unit circle" and eig.name == "eigenvalues"
    lam = np.asarray(eig.x) + 1j * np.asarray(eig.y)
    np.testing.assert_allclose(np.abs(lam), 1.0, atol=1e-6)
    np.testing.assert_allclose(np.sort(np.unique(np.round(np.abs(np.angle(lam)), 6))), [0.05, 0.5], atol=1e-6)
    assert sorted(set(eig.customdata[:, 1])) == [f"{2 * np.pi / 0.5:.1f}", f"{2 * np.pi / 0.05:.1f}"]
    # an exact rotary code is predicted exactly; persistence is not
    assert list(model.x) == [1, 4, 16, 64]
    assert max(model.y) < 1e-6 < min(persistence.y)
    ratio = pca(_rotary(), n_components=4, center=False).explained_variance_ratio_.sum()
    assert (
        fig.layout.title.text
        == f"Recurrence z[t+1] ≈ M z[t] · array · rows 0–199 · PC1–4: {100 * float(ratio):.1f}%"
    )
    assert fig.layout.xaxis2.type == "log" and fig.layout.yaxis2.type == "log"
    # labelled ticks only (plotly's own minor log ticks are bare "2", "5"): the horizons, and 1/2/5 x 10^k
    assert list(fig.layout.xaxis2.tickvals) == [1, 4, 16, 64]
    ticks = fig.layout.yaxis2.tickvals
    assert ticks and all(f"{v:e}"[0] in "125" for v in ticks)
    assert list(fig.layout.yaxis2.ticktext) == [f"{v:g}" for v in ticks]


def test_from_a_fit_and_batch_error() -> None:
    fit = fit_recurrence(_rotary(), n_components=4, horizons=(1, 8))
    fig = plot_recurrence(fit)
    np.testing.assert_allclose(fig.data[2].y, [fit.prediction_error[1], fit.prediction_error[8]])
    with pytest.raises(InvalidArgumentError, match="batch of 2"):
        plot_recurrence(np.stack([_rotary(), _rotary()]), n_components=4)

"""How many rows' worth the smooth-GP null's column covariance rests on (``analysis/nulls/gp_dof.py``)."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from pos_geometry.analysis.nulls.smoothness import gp_column_covariance, kernel


def test_the_likelihood_counts_the_rows_a_noise_free_curve_has():
    from pos_geometry.analysis.nulls.gp_dof import likelihood_dof
    from pos_geometry.analysis.nulls.smoothness import NUGGET_FLOOR

    # with a noise share at or above the floor the solves hold, every row counts (one goes to the mean)
    assert likelihood_dof(256, 25.0, 1e-3) == 255.0
    # a noise-free curve: each eigen-direction of the kernel counts λ / (λ + δ) of a row (the oracle: numpy's
    # eigenvalues of the same kernel)
    t = np.arange(256.0)
    lam = np.linalg.eigvalsh(np.exp(-0.5 * ((t[:, None] - t[None, :]) / 25.0) ** 2))
    truth = float(np.sum(lam / (lam + NUGGET_FLOOR))) - 1
    got = likelihood_dof(256, 25.0, 0.0)
    assert got == pytest.approx(truth, rel=1e-6) and 20 < got < 150


def _gp(n: int, ell: float, nugget: float, seed: int, d: int = 64) -> torch.Tensor:
    """A GP table ``(n, d)`` of iid columns (kernel ``exp(-Δ²/2ℓ²)``) plus the ``nugget`` share of white noise."""
    w, v = np.linalg.eigh(kernel(n, ell, 0.0).numpy())
    rng = np.random.default_rng(seed)
    y = (v * np.sqrt(np.clip(w, 0, None))) @ rng.standard_normal((n, d))
    return torch.from_numpy(y + np.sqrt(nugget) * rng.standard_normal((n, d)))


def _dof(y: torch.Tensor, ell: float, nugget: float) -> float:
    from pos_geometry.analysis.nulls.gp_dof import effective_dof

    y = y.to(torch.float64) - y.to(torch.float64).mean(dim=0)
    lam, _, z = gp_column_covariance(y, ell, nugget, innovations=True)
    return effective_dof(z, lam)


def test_a_length_scale_read_too_long_leaves_few_rows_worth_and_no_false_spikes():
    # A noise-free GP table (ℓ = 100, 1024 positions, 64 iid columns: its column covariance is isotropic) whose
    # length scale is read 13% too long: the kernel's fast directions hold far more of the table than the
    # kernel expects and a few frequencies of its whitened rows carry the likelihood's estimate: about 10 rows'
    # worth, not the 25 the kernel counts. Read as 25, its spread stayed as "spikes" 7-9 times the mean, and
    # surrogates drawn with them turned less than the table (helix at α = 0.05 in 20 of 200 such tables).
    from pos_geometry.analysis.nulls.basis import _decomposition, _likelihood_axes
    from pos_geometry.analysis.nulls.gp_dof import likelihood_dof
    from pos_geometry.analysis.nulls.stationary import shrink_spread

    x = _gp(1024, 100.0, 0.0, seed=0).to(torch.float32)
    dec = _decomposition(x)
    y = dec["coords"]
    assert _dof(y, 100.0, 0.0) > likelihood_dof(
        1024, 100.0, 0.0
    )  # it fits: the kernel's count is the smaller
    assert _dof(y, 113.0, 0.0) < 0.6 * likelihood_dof(1024, 113.0, 0.0)
    raw, _ = gp_column_covariance(y, 113.0, 0.0)
    assert (
        float(shrink_spread(raw, likelihood_dof(1024, 113.0, 0.0)).max() / raw.mean()) > 4
    )  # the old spikes
    lam, _ = _likelihood_axes(dec, "smooth_gp", 113.0)
    assert float(lam.max() / lam.mean()) == pytest.approx(1.0, abs=1e-9)  # isotropic, as the truth is


@pytest.mark.parametrize(("nugget", "low"), [(1e-6, 0.5), (6e-3, 0.9)])
def test_with_a_noise_share_every_row_counts_until_the_length_scale_is_read_too_long(nugget, low):
    # GPT-2's length scale with a noise share of 1e-6 (the calibration's GP family) or GPT-2's own 0.006: at
    # the true ℓ every row counts; read 13% too long, the smaller share lets a few frequencies carry the
    # estimate, the larger bounds their weight. (The null counts them only for a noise-free curve: SMALL_NUGGET.)
    y = _gp(1024, 78.6, nugget, seed=2)
    assert _dof(y, 78.6, nugget) == pytest.approx(1023.0, rel=0.02)
    long = _dof(y, 78.6 * 1.13, nugget)
    assert (long < low * 1023.0) if nugget < 1e-3 else (long > low * 1023.0)

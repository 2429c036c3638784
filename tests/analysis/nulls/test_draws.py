"""Gaussian-process draws by circulant embedding (``analysis/nulls/draws.py``): the kernel's covariance, exactly
where it is defined, with only the bins that hold variance drawn."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from pos_geometry.analysis.nulls import draws as _draws
from pos_geometry.analysis.nulls.draws import circulant_spectrum, fourier_draws, mode_variances


@pytest.mark.parametrize("ell", [2.5, 9.0])
def test_fourier_draws_have_the_kernels_covariance_and_draw_only_the_bins_that_hold_variance(
    monkeypatch, ell
):
    n, count = 48, 6000
    m, lam = circulant_spectrum(n, ell)
    var = mode_variances(lam, m, 0.0)
    drawn = []
    real_randn = _draws.randn
    monkeypatch.setattr(_draws, "randn", lambda shape, *a: drawn.append(shape) or real_randn(shape, *a))
    f = fourier_draws(var, n, m, (count, 1), torch.Generator().manual_seed(0))[:, 0]  # (count, n)
    assert f.shape == (count, n)
    # a squared-exponential spectrum falls off like a Gaussian: far fewer weights than M/2 + 1 are needed
    kept = drawn[0][-2]
    assert kept < var.shape[0] and float(var[kept:].max()) <= 1e-13 * float(var.max())
    emp = (f.T @ f / count).numpy()  # mean zero by construction
    lags = np.abs(np.arange(n)[:, None] - np.arange(n)[None, :])
    want = np.exp(-(lags**2) / (2 * ell**2))
    se = np.sqrt((1 + want**2) / count)  # sampling error of a Gaussian product moment
    assert np.max(np.abs(emp - want) / se) < 5.5


def test_a_flat_spectrum_draws_every_bin_and_gives_white_noise():
    n, m = 32, 64
    var = mode_variances(torch.full((m // 2 + 1,), 1.0, dtype=torch.float64), m, 0.0)
    f = fourier_draws(var, n, m, (8000, 1), torch.Generator().manual_seed(1))[:, 0]
    emp = (f.T @ f / 8000).numpy()
    np.testing.assert_allclose(emp, np.eye(n), atol=5.5 * np.sqrt(2 / 8000))

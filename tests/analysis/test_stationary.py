"""_stationary and the stationary null: the table's own pooled spectrum, its likelihood's column covariance."""

from __future__ import annotations

import numpy as np
import pytest
import torch
from scipy.signal import lfilter

from pos_geometry.analysis._nulls import stationary
from pos_geometry.analysis._stationary import (
    pooled_spectrum,
    shrink_spread,
    stationary_column_covariance,
    toeplitz_kernel,
)


def _ar1(n: int, d: int, phi: float, seed: int) -> torch.Tensor:
    """``d`` iid AR(1) columns over ``n`` positions (after a burn-in), centred over positions."""
    e = np.random.default_rng(seed).standard_normal((n + 300, d))
    x = torch.from_numpy(lfilter([1.0], [1.0, -phi], e, axis=0)[300:])
    return x - x.mean(dim=0)


def test_the_pooled_spectrum_is_the_sample_autocovariance_and_basis_free():
    c = _ar1(200, 12, 0.9, 0)
    lam = pooled_spectrum(c)
    k = toeplitz_kernel(lam, 200)
    # independent oracle: the biased sample autocovariance summed over columns, over its value at 0
    acov = np.array([(c[: 200 - o] * c[o:]).sum().item() for o in range(200)])
    np.testing.assert_allclose(k[0].numpy(), acov / acov[0], atol=1e-12)
    q, _ = torch.linalg.qr(
        torch.randn(12, 12, dtype=torch.float64, generator=torch.Generator().manual_seed(1))
    )
    torch.testing.assert_close(pooled_spectrum(c @ q), lam)  # a rotation of the columns changes nothing
    assert float(lam.min()) >= 0


def test_stationary_draws_have_the_tables_autocovariance_and_scales():
    c = _ar1(256, 16, 0.95, 2)
    lam = pooled_spectrum(c)
    scales = torch.linspace(1.0, 3.0, 16, dtype=torch.float64)
    draws = stationary(c, 1.0, 0.0, scales=scales, spectrum=lam)(800, torch.Generator().manual_seed(0))
    assert draws.shape == (800, 256, 16)
    # E[y_s y_{s+o}] at offsets 0..5, pooled over draws, positions and columns, vs the kernel's
    expected = toeplitz_kernel(lam, 256)[0, :6].numpy()
    unit = draws / scales
    got = np.array([(unit[:, : 256 - o] * unit[:, o:]).mean().item() for o in range(6)])
    np.testing.assert_allclose(got, expected, rtol=0.03)
    np.testing.assert_allclose(draws.std(dim=(0, 1)).numpy(), scales.numpy(), rtol=0.05)


def test_the_likelihood_covariance_of_iid_red_noise_is_flat_where_the_sample_one_is_not():
    # 64 iid AR(1) columns of phi = 0.99 over 1024 positions hold about ten rows' worth of information, so
    # their sample covariance is spread (its top axis far above 1/64); whitened by the kernel it is not.
    c = _ar1(1024, 64, 0.99, 3)
    lam, w = stationary_column_covariance(c, pooled_spectrum(c))
    sample = torch.linalg.eigvalsh(c.T @ c).flip(0)
    assert float(sample[0] / sample.sum()) > 0.06
    assert float(lam[0] / lam.sum()) < 2.5 / 64
    torch.testing.assert_close(w.T @ w, torch.eye(64, dtype=torch.float64))


def test_shrinking_the_spread_undoes_a_wishart_estimates_spread():
    # 300 columns estimated from 400 iid rows: the sample eigenvalues spread from ~0.02 to ~3.4 times their
    # mean (Marchenko–Pastur, ratio 0.75). With an isotropic truth the shrunk ones are flat; with a spike
    # (one axis 50 times the others) the spike stays and the bulk is flat.
    rng = np.random.default_rng(0)
    for spike in (1.0, 50.0):
        scales = np.ones(300)
        scales[0] = np.sqrt(spike)
        z = rng.standard_normal((400, 300)) * scales
        evals = torch.linalg.eigvalsh(torch.from_numpy(z.T @ z / 399)).flip(0)
        assert float(evals[1] / evals[-1]) > 50  # the estimate is spread
        out = shrink_spread(evals, 399)
        bulk = out[1:]
        assert float(bulk.max() / bulk.min()) < 1.5
        assert float(out.sum()) == pytest.approx(float(evals.sum()))  # the total variance is kept
        assert float(out[0] / bulk.mean()) == pytest.approx(spike, rel=0.3)


def test_the_shrinkage_target_is_the_unbiased_sum_of_squares():
    # E tr(S²) of Wishart estimates against the truth: the shrunk tr(S²) is unbiased for tr(Σ²) (Monte Carlo
    # over 200 draws, to 4%: a sample eigenvalue peeled off as a spike keeps its upward bias) where the raw
    # one is 25% too large.
    rng = np.random.default_rng(1)
    true = np.geomspace(4.0, 0.5, 40)
    raw, shrunk = [], []
    for _ in range(200):
        z = rng.standard_normal((60, 40)) * np.sqrt(true)
        evals = torch.linalg.eigvalsh(torch.from_numpy(z.T @ z / 59)).flip(0)
        raw.append(float((evals**2).sum()))
        shrunk.append(float((shrink_spread(evals, 59) ** 2).sum()))
    truth = float((true**2).sum())
    assert np.mean(raw) / truth > 1.2
    assert np.mean(shrunk) / truth == pytest.approx(1.0, abs=0.04)

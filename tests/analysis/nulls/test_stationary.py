"""_stationary and the stationary null: the table's own pooled spectrum, its likelihood's column covariance."""

from __future__ import annotations

import numpy as np
import pytest
import torch
from scipy.signal import lfilter

from pos_geometry.analysis.nulls.stationary import (
    pooled_autocovariance,
    pooled_spectrum,
    shrink_spread,
    stationary_column_covariance,
    toeplitz_kernel,
)
from pos_geometry.analysis.nulls.surrogates import stationary


def _ar1(n: int, d: int, phi: float, seed: int) -> torch.Tensor:
    """``d`` iid AR(1) columns over ``n`` positions (after a burn-in), centred over positions."""
    e = np.random.default_rng(seed).standard_normal((n + 300, d))
    x = torch.from_numpy(lfilter([1.0], [1.0, -phi], e, axis=0)[300:])
    return x - x.mean(dim=0)


def test_the_pooled_autocovariance_averages_each_offset_over_its_pairs():
    c = _ar1(200, 12, 0.9, 0)
    got = pooled_autocovariance(c).numpy()
    # independent oracle: Σ over columns and the n − o pairs of offset o, over n − o; from n/2 on the constant
    # of those offsets pooled over all their pairs
    sums = np.array([(c[: 200 - o] * c[o:]).sum().item() for o in range(200)])
    pairs = 200 - np.arange(200)
    np.testing.assert_allclose(got[:100], sums[:100] / pairs[:100], rtol=1e-10)
    np.testing.assert_allclose(got[100:], sums[100:].sum() / pairs[100:].sum(), rtol=1e-10)


def test_the_pooled_spectrum_is_basis_free_and_a_valid_kernel():
    c = _ar1(200, 12, 0.9, 0)
    lam = pooled_spectrum(c)
    q, _ = torch.linalg.qr(
        torch.randn(12, 12, dtype=torch.float64, generator=torch.Generator().manual_seed(1))
    )
    torch.testing.assert_close(pooled_spectrum(c @ q), lam)  # a rotation of the columns changes nothing
    assert float(lam.min()) >= 0
    assert float(toeplitz_kernel(lam, 200)[0, 0]) == pytest.approx(1.0)


def test_centred_draws_have_the_tables_centred_autocorrelation():
    # 768 AR(1) columns (φ = 0.9) over 256 positions. Draws through the spectrum, centred as every statistic
    # centres them, must have the table's own centred autocorrelation. Through the usual estimate (every
    # offset over n) they had 0.525, 0.253, 0.102 at offsets 5, 10, 15 where the table had 0.546, 0.284, 0.132.
    c = _ar1(256, 768, 0.9, 5)
    lam = pooled_spectrum(c)
    draws = stationary(c[:, :64], 1.0, 0.0, scales=torch.ones(64, dtype=torch.float64), spectrum=lam)(
        60, torch.Generator().manual_seed(0)
    )

    def centred_acf(z: torch.Tensor) -> np.ndarray:
        z = z - z.mean(dim=-2, keepdim=True)
        out = np.array([(z[..., : 256 - o, :] * z[..., o:, :]).sum().item() for o in range(0, 30, 5)])
        return out / out[0]

    np.testing.assert_allclose(centred_acf(draws), centred_acf(c), atol=0.012)


def test_spectral_lines_are_taken_out_and_a_line_free_spectrum_is_kept():
    # A line is what a helix is made of: a period-32 sinusoid on 8 of 48 AR(1) columns stands ~50 times
    # above its neighbours in the raw spectrum and is capped to their level; without it the spectrum is
    # unchanged (within a few %) below the shoulder, where the AR(1) background follows it.
    c = _ar1(512, 48, 0.5, 6)
    lam = pooled_spectrum(c)
    t = torch.arange(512, dtype=torch.float64)[:, None]
    lined = c.clone()
    lined[:, :8] += 3 * torch.cos(2 * torch.pi * t / 32 + torch.arange(8))
    with_line = pooled_spectrum(lined)
    line = 2 * 512 // 32  # bin of period 32 on the circulant of 1024
    raw = torch.fft.rfft(lined - lined.mean(dim=0), n=1024, dim=0).abs().square().sum(dim=1)
    assert float(raw[line] / raw[line + 8 : line + 16].mean()) > 30
    assert float(with_line[line] / with_line[line + 8 : line + 16].mean()) < 3
    ar1 = (1 - 0.25) / (1 + 0.25 - 2 * 0.5 * torch.cos(2 * torch.pi * torch.arange(513) / 1024))
    np.testing.assert_allclose((lam[1:200] / ar1[1:200]).mean().item(), 1.0, atol=0.1)


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


def test_a_bulk_with_fewer_degrees_of_freedom_than_axes_is_made_flat():
    # 64 isotropic axes seen through 28 degrees of freedom: rank 28, the other 36 eigenvalues 0. No shrinkage
    # toward the mean recovers the truth from so few; the bulk is made flat (its total kept), a spike kept
    rng = np.random.default_rng(0)
    z = rng.standard_normal((28, 64))
    z[:, 0] *= 6.0  # one real spike
    evals = torch.from_numpy(np.sort(np.linalg.eigvalsh(z.T @ z / 28))[::-1].copy())
    out = shrink_spread(evals, 28)
    assert float(out[0]) == pytest.approx(float(evals[0]))  # the spike stays as it is
    bulk = out[1:]
    assert float(bulk.max() - bulk.min()) < 1e-12 and float(bulk.sum()) == pytest.approx(
        float(evals[1:].sum())
    )
    # with degrees of freedom to spare the bulk keeps part of its structure (the rule above only where m < p)
    scales = np.sqrt(np.linspace(0.5, 1.5, 64))[:, None]  # a real ramp of variances
    many = torch.from_numpy(
        np.sort(np.linalg.eigvalsh(np.cov(scales * rng.standard_normal((64, 400)))))[::-1].copy()
    )
    assert float(shrink_spread(many, 399).std()) > 0.1

"""The smooth-GP null's parameters (``analysis/nulls/smoothness.py``): length scale, noise share, column
covariance, checked on tables drawn from the model itself with known parameters."""

from __future__ import annotations

import numpy as np
import pytest
import torch

import pos_geometry as pg
from pos_geometry.analysis.nulls.smoothness import gp_column_covariance, kernel, length_scale


def _matrix_normal(n: int, ell: float, nugget: float, sigma: np.ndarray, seed: int) -> torch.Tensor:
    """``K_η^{1/2} Z Σ^{1/2}`` with ``Σ = diag(sigma²)``, rows by an eigen square root of ``K_η``."""
    w, v = np.linalg.eigh(kernel(n, ell, nugget).numpy())
    root = v * np.sqrt(np.clip(w, 0, None))
    z = np.random.default_rng(seed).standard_normal((n, sigma.shape[0]))
    return torch.from_numpy(root @ z * sigma)


@pytest.mark.parametrize(("n", "ell"), [(256, 20.0), (1024, 78.6)])
def test_a_noise_free_gp_gets_no_noise_share(n, ell):
    # A smooth kernel drops by 1/2ℓ² from offset 0 to 1 on its own; that drop is not noise. (Read as noise,
    # it gave this table a share of 0.002 at ℓ = 20, and its surrogates were visibly rougher.)
    x = _matrix_normal(n, ell, 0.0, np.ones(64), seed=1)
    got_ell, got_nugget = length_scale(x)
    assert got_ell == pytest.approx(ell, rel=0.15)
    assert got_nugget < 2e-4


@pytest.mark.parametrize("seed", [5, 24])
def test_a_noise_free_float32_curve_reads_no_share_near_the_autocorrelation_s_resolution(seed):
    # Length scale 100 over 1024 positions, stored in float32: the autocorrelation's share of these two tables is
    # 2 and 4.8 times the smooth part's drop 1/2ℓ² (sampling error, not noise); taken as noise, their smooth-GP
    # surrogates predicted less well than the tables and the recurrence called them rotations. The likelihood
    # reads them right, and still reads a true share of 1e-4 on the same curve.
    x = _matrix_normal(1024, 100.0, 0.0, np.ones(64), seed=seed).to(torch.float32)
    assert length_scale(x)[1] < 1e-7
    noisy = x + 1e-2 * torch.from_numpy(np.random.default_rng(seed).standard_normal(tuple(x.shape))).float()
    assert 0.5e-4 < length_scale(noisy)[1] < 2e-4  # within a factor 2


@pytest.mark.parametrize("nugget", [0.01, 0.1, 0.5])
def test_the_noise_share_is_recovered(nugget):
    x = _matrix_normal(1024, 40.0, nugget, np.ones(64), seed=2)
    got_ell, got_nugget = length_scale(x)
    assert got_nugget == pytest.approx(nugget, rel=0.1, abs=2e-3)
    assert got_ell == pytest.approx(40.0, rel=0.15)


def test_white_noise_is_all_noise():
    x = torch.from_numpy(np.random.default_rng(3).standard_normal((512, 32)))
    assert length_scale(x) == (0.5, 1.0) or length_scale(x)[1] > 0.9


def test_column_covariance_by_likelihood_is_the_models_not_the_samples():
    # 64 iid GP columns: every column has the same variance, yet the sample covariance's principal axes
    # carry a quarter of it on the first (the rows are far from independent). The likelihood's covariance
    # gives every axis about the same: what the surrogates must be drawn with.
    n, ell = 1024, 78.6
    x = _matrix_normal(n, ell, 1e-6, np.ones(64), seed=4)
    y = x - x.mean(dim=0)
    sample = torch.linalg.eigvalsh(y.T @ y).flip(0)
    lam, w = gp_column_covariance(y, ell, 1e-6)
    assert float(sample[0] / sample.sum()) > 0.15
    assert float(lam[0] / lam.sum()) < 2.5 / 64 and float(lam[-1] / lam.sum()) > 0.3 / 64
    torch.testing.assert_close(w.T @ w, torch.eye(64, dtype=torch.float64), rtol=0, atol=1e-10)


def test_column_covariance_recovers_a_known_anisotropic_sigma():
    # Σ = diag(σ²) with σ over two decades, in a random basis: the likelihood's eigenvalues are σ² (to the
    # sampling error of 256 rows of length scale 4), its eigenvectors the basis.
    n, ell, d = 1024, 4.0, 8
    sigma = np.geomspace(10.0, 0.1, d)
    basis = np.linalg.qr(np.random.default_rng(5).standard_normal((d, d)))[0]
    x = _matrix_normal(n, ell, 0.05, sigma, seed=6) @ torch.from_numpy(basis.T)
    y = x - x.mean(dim=0)
    lam, w = gp_column_covariance(y, ell, 0.05)
    np.testing.assert_allclose(lam.numpy(), sigma**2, rtol=0.35)
    alignment = np.abs(w.numpy().T @ basis).max(axis=1)
    assert (alignment[:4] > 0.95).all()


def test_smooth_gp_surrogates_are_as_predictable_as_gp_tables():
    # The calibration failure of issue 25: the recurrence's gain 64 rows ahead is 0.96 on a GP table, and
    # its smooth-GP surrogates were drawn axis by axis with the table's sample variances (median 0.77), so
    # 6 to 9 GP tables in 20 got "rotations". With the likelihood's covariance the table sits inside its null.
    import pos_geometry as pg

    x = _matrix_normal(256, 19.65, 1e-6, np.ones(64), seed=7)
    fit = pg.fit_recurrence(x, n_surrogates=99)
    gp = [t for t in fit.tests if t.null == "smooth_gp"]
    if gp:  # the null runs only when the fit leaves the question open
        (test,) = gp
        assert test.p_value > 0.05 and test.null_q95 > test.observed > test.null_median - 0.1
    # the null ran and lost ("not significant"), or the fit alone said no ("does not apply")
    assert fit.status == ("not significant" if gp else "does not apply")


def _noise_free_gp_tables(n: int, ell: float, count: int, seed: int):
    """``count`` float32 tables ``(n, 64)`` of iid noise-free GP columns of length scale ``ell``."""
    rng = np.random.default_rng(seed)
    t = np.arange(float(n))
    w, v = np.linalg.eigh(np.exp(-((t[:, None] - t[None, :]) ** 2) / (2 * ell**2)))
    factor = v * np.sqrt(np.clip(w, 0, None))
    for _ in range(count):
        yield torch.from_numpy((factor @ rng.standard_normal((n, 64))).astype(np.float32))


@pytest.mark.slow
def test_noise_free_gp_tables_are_not_helices_beyond_alpha():
    # GP curves of length scale 25 over 256 positions, no noise, 64 columns: the smooth-GP null took the
    # Wishart spread out of its column covariance as if it had 255 rows' worth of data, left most of it, and
    # the tables beat their surrogates: "helix" at α = 0.05 in 11 of 40. Counted with the rows they hold: 2 of 40
    helices = sum(
        pg.fit_helix(table, n_surrogates=99, alpha=0.05, random_state=i).verdict == "helix"
        for i, table in enumerate(_noise_free_gp_tables(256, 25.0, 20, seed=3))
    )
    assert helices <= 3  # α = 0.05 over 20 tables: P(more than 3) = 1.6% for a calibrated test


@pytest.mark.slow
def test_noise_free_gp_tables_with_fewer_axes_than_columns_are_not_helices_beyond_alpha():
    # 1024 positions of length scale 100 in float32: the table spans about 28 of its 64 axes, so its likelihood
    # covariance has rank 28; drawn with that spread the surrogates turned less than the table ("helix" in 31 of
    # 200 at α = 0.05). Its degrees of freedom are its rank, and a bulk it cannot resolve is flat
    p_values = []
    for i, table in enumerate(_noise_free_gp_tables(1024, 100.0, 12, seed=5)):
        fit = pg.fit_helix(table, n_surrogates=99, alpha=0.05, random_state=i, sequential=False)
        p_values.append(next(t.p_value for t in fit.tests if t.null == "smooth_gp"))
    assert sum(p <= 0.05 for p in p_values) <= 2 and np.median(p_values) > 0.2


def test_the_rounding_of_a_half_precision_storage_is_not_noise():
    """A smooth curve stored in float16 varies slowly across its rounding grid: its rounding error is not white
    noise, and a nugget of that size made the smooth-GP surrogates less predictable than the table. The share the
    rounding gives is computed from the grid (also for float16 values held in float32), and a share within
    STORAGE times it is 0; a real share of 1e-4 on the same curve is kept."""
    from pos_geometry.analysis.nulls.smoothness import STORAGE, storage_noise_share

    x = _matrix_normal(512, 40.0, 0.0, np.ones(64), seed=3).to(torch.float16)
    share = storage_noise_share(x)
    u = 2.0 ** (torch.frexp(x.double()).exponent - 11)  # float16's spacing at each entry: 2^(e − 1 − 10)
    expected = float((u**2 / 12).mean() / x.double().var(dim=0, unbiased=False).mean())
    assert share == pytest.approx(expected, rel=1e-6) and 1e-8 < share < 1e-7
    assert storage_noise_share(x.float()) == share  # read as float32: the same grid
    assert storage_noise_share(x.float() + 1e-3) == 0.0  # off the grid: a float32 table
    assert length_scale(x.double(), share)[1] == 0.0
    raw = length_scale(x.double())[1]  # without the storage: the rounding read as noise
    assert 0 < raw <= STORAGE * share
    noisy = (
        x.double() + 1e-2 * torch.from_numpy(np.random.default_rng(4).standard_normal(tuple(x.shape)))
    ).half()
    assert 0.5e-4 < length_scale(noisy.double(), storage_noise_share(noisy))[1] < 2e-4


def test_a_batch_of_tables_reads_as_each_table_alone():
    # The smooth-GP null's spread reads the length scale of 64 surrogates at once: the batched
    # autocorrelation and bisection must give what one table at a time gives, edge cases included (a curve
    # that never falls that far, and white noise, which falls at offset 1).
    from pos_geometry.analysis.nulls.smoothness import _ell_given, _ells_given, autocorrelation

    rng = np.random.default_rng(5)
    w, v = np.linalg.eigh(kernel(128, 9.0, 0.0).numpy())
    smooth = (v * np.sqrt(np.clip(w, 0, None))) @ rng.standard_normal((128, 6))
    line = np.linspace(-1, 1, 128)[:, None] * rng.standard_normal((1, 6))  # never falls to e^{-1/2} of c(1)
    tables = torch.from_numpy(np.stack([smooth, smooth + 0.1 * rng.standard_normal(smooth.shape), line,
                                        rng.standard_normal((128, 6))]))  # fmt: skip
    batch = autocorrelation(tables)
    assert batch.shape == (4, 128)
    for t, c in zip(tables, batch, strict=True):
        torch.testing.assert_close(c, autocorrelation(t), rtol=1e-12, atol=1e-12)
    for nugget in (0.0, 0.01):
        ells = _ells_given(batch.numpy(), nugget)
        alone = [_ell_given(c.numpy(), nugget) for c in batch]
        assert ells.tolist() == pytest.approx(alone, rel=1e-12)
        assert ells[2] == 128.0 and ells[3] < 2.0 and 6.0 < ells[0] < 13.0

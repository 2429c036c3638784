"""fit_recurrence: rotary tables are exact one-parameter groups; GPT-2 has a rotation; noise does not."""

from __future__ import annotations

import numpy as np
import pytest
import scipy.linalg
import torch

from pos_geometry.analysis._batch import BatchResult
from pos_geometry.analysis.pca import pca
from pos_geometry.analysis.recurrence import RecurrenceFit, fit_recurrence
from pos_geometry.errors import InvalidArgumentError


def rotary_table(n: int, rotary_dim: int, base: float = 10000.0) -> tuple[np.ndarray, np.ndarray]:
    """Column pairs (cos(p·θ_i), sin(p·θ_i)) with θ_i = base^(-2i/rotary_dim); returns table and θ."""
    theta = base ** (-2.0 * np.arange(rotary_dim // 2) / rotary_dim)
    ang = np.arange(n)[:, None] * theta[None, :]
    return np.stack([np.cos(ang), np.sin(ang)], axis=2).reshape(n, rotary_dim), theta


def test_rope_eigenfrequencies_are_its_inverse_frequencies():
    table, theta = rotary_table(512, 16)
    fit = fit_recurrence(table, n_components=16)
    assert isinstance(fit, RecurrenceFit)
    # Each θ appears twice (a conjugate pair); sorted angles must be θ, each repeated.
    expected = np.sort(np.repeat(theta, 2))
    np.testing.assert_allclose(fit.angles, expected, atol=1e-5)
    resolved = expected > 2 * np.pi / 512  # at least one turn in the window: relative precision too
    np.testing.assert_allclose(fit.angles[resolved], expected[resolved], rtol=1e-8)
    np.testing.assert_allclose(fit.moduli, 1.0, atol=1e-6)
    assert all(e < 1e-10 for e in fit.prediction_error.values())
    # The generator is skew-symmetric up to the basis change: exp(A) = M and eig(A) = ±iθ.
    assert fit.generator is not None
    np.testing.assert_allclose(scipy.linalg.expm(fit.generator), fit.transition, atol=1e-9)
    np.testing.assert_allclose(np.sort(np.abs(np.linalg.eigvals(fit.generator).imag)), expected, atol=1e-5)


def test_rope_in_a_random_basis_with_centring_needs_the_affine_term():
    table, theta = rotary_table(300, 8, base=100.0)
    q, _ = np.linalg.qr(np.random.default_rng(0).standard_normal((24, 8)))
    x = table @ q.T  # the same code in a rotated 24-dim space
    affine = fit_recurrence(x, n_components=8, center=True, affine=True)
    np.testing.assert_allclose(affine.angles, np.sort(np.repeat(theta, 2)), rtol=1e-8)
    assert affine.offset is not None and affine.prediction_error[64] < 1e-8
    linear = fit_recurrence(x, n_components=8, center=True, affine=False)  # centred but linear: misspecified
    assert linear.prediction_error[64] > 1e3 * affine.prediction_error[64]


def test_random_matrix_is_not_a_recurrence():
    x = np.random.default_rng(1).standard_normal((200, 32))
    fit = fit_recurrence(x)
    assert fit.prediction_error[1] > 0.9
    assert fit.moduli.max() < 0.5  # no persistent rotation


def test_horizons_longer_than_the_window_are_skipped_and_batches():
    table, _ = rotary_table(50, 8, base=20.0)
    fit = fit_recurrence(table, n_components=8, horizons=(1, 8, 64))
    assert set(fit.prediction_error) == {1, 8} and fit.skipped_horizons == (64,)
    assert "skipped" in str(fit)
    batch = fit_recurrence(torch.tensor(np.stack([table, 2 * table])), n_components=8)
    assert isinstance(batch, BatchResult) and len(batch) == 2
    np.testing.assert_allclose(batch[1].angles, fit.angles, atol=1e-9)
    from_pca = fit_recurrence(pca(table, n_components=8, center=False), n_components=8)
    np.testing.assert_allclose(from_pca.transition, fit.transition, atol=1e-9)
    assert batch.to_dict()["type"] == "BatchResult"


def test_bad_arguments():
    table, _ = rotary_table(40, 8)
    with pytest.raises(InvalidArgumentError, match="horizons"):
        fit_recurrence(table, horizons=(0,))
    with pytest.raises(InvalidArgumentError, match="n_components must be a positive integer"):
        fit_recurrence(table, n_components=0)


def test_gpt2_has_an_undamped_rotation(gpt2_wpe):
    # Measured (positions 1..1023, top 3 PCs, uncentred): one conjugate pair, period ≈ 492 positions,
    # |λ| ≈ 0.9998; prediction error 0.035 / 0.061 / 0.29 at h = 1 / 8 / 64 (persistence 0.037 / 0.105 / 0.69);
    # its 64-step gain over persistence (0.58) beats random walks of its own steps (median 0.15, p = 0.01).
    fit = fit_recurrence(gpt2_wpe, n_components=3, window=(1, 1024))
    pairs = fit.rotation_pairs()
    assert fit.status == "rotations" and fit.test.p_value == pytest.approx(fit.test.min_p_value)
    assert len(pairs) == 1
    period, modulus = pairs[0]
    assert 300 < period < 800 and abs(modulus - 1) < 0.01
    assert fit.prediction_error[64] < 0.5 * fit.persistence_error[64]  # the rotation predicts far ahead
    wide = fit_recurrence(gpt2_wpe, n_components=8, window=(1, 1024))
    assert any(300 < p < 800 and abs(m - 1) < 0.01 for p, m in wide.rotation_pairs())


def test_eigenfrequencies_of_a_model_table_rope_are_its_inverse_frequencies():
    """The rotary table pos_geometry.load builds for Pythia-70m (from the model table, offline)."""
    import pos_geometry as pg
    from pos_geometry.encodings import inverse_frequencies, rotary_params

    theta = inverse_frequencies(rotary_params(pg.get_spec("pythia-70m").rotary_config)).numpy()
    table = pg.load("pythia-70m", n_positions=512, dtype=torch.float64)
    fit = fit_recurrence(table, n_components=table.d_model)
    expected = np.sort(np.repeat(theta, 2))  # 8 frequencies, from 1 to 10000^(-7/8) rad/position
    np.testing.assert_allclose(fit.angles, expected, rtol=0, atol=1e-6)
    # frequencies with at least one turn in the window are exact to round-off; slower rotations
    # (down to 0.03 turns over 512 positions) are ill-conditioned, hence the absolute bound above
    resolved = expected >= 2 * np.pi / 512
    np.testing.assert_allclose(fit.angles[resolved], expected[resolved], rtol=1e-9)
    np.testing.assert_allclose(fit.moduli, 1.0, atol=1e-8)
    assert len(fit.rotation_pairs()) == len(theta)
    assert all(fit.prediction_error[h] < 1e-10 for h in (1, 8, 64))
    assert fit.provenance.model_id == "pythia-70m" and fit.provenance.kind == "rotary"

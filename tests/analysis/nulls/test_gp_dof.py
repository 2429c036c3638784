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


def test_a_length_scale_read_too_long_leaves_few_rows_worth_and_no_false_spikes():
    # A noise-free GP table (ℓ = 100, 1024 positions, 64 iid columns: its column covariance is isotropic) whose
    # length scale is read 13% too long: the kernel's fast directions hold far more of the table than the
    # kernel expects and dominate the likelihood's estimate, which then rests on about 12 rows' worth, not the
    # 25 the kernel counts. Read as 25, its spread stayed as "spikes" 7-9 times the mean, and surrogates drawn
    # with them turned less than the table (helix at α = 0.05 in 20 of 200 such tables).
    from pos_geometry.analysis.nulls.basis import _decomposition, _likelihood_axes
    from pos_geometry.analysis.nulls.gp_dof import effective_dof, likelihood_dof
    from pos_geometry.analysis.nulls.stationary import shrink_spread

    w, v = np.linalg.eigh(kernel(1024, 100.0, 0.0).numpy())
    root = v * np.sqrt(np.clip(w, 0, None))
    x = torch.from_numpy((root @ np.random.default_rng(0).standard_normal((1024, 64))).astype(np.float32))
    dec = _decomposition(x)
    y = dec["coords"]
    assert effective_dof(y, 100.0, 0.0) == pytest.approx(
        likelihood_dof(1024, 100.0, 0.0), rel=0.05
    )  # it fits
    assert effective_dof(y, 113.0, 0.0) < 0.6 * likelihood_dof(1024, 113.0, 0.0)
    raw, _ = gp_column_covariance(y, 113.0, 0.0)
    assert (
        float(shrink_spread(raw, likelihood_dof(1024, 113.0, 0.0)).max() / raw.mean()) > 4
    )  # the old spikes
    lam, _ = _likelihood_axes(dec, "smooth_gp", 113.0)
    assert float(lam.max() / lam.mean()) == pytest.approx(1.0, abs=1e-9)  # isotropic, as the truth is
    # with a noise share the solves bound every direction: the count is every row
    assert effective_dof(y, 113.0, 1e-3) == likelihood_dof(1024, 113.0, 1e-3) == 1023.0


def test_a_long_table_is_read_on_its_first_rows_as_a_share_of_their_count():
    # 1500 positions: the eigendecomposition runs on the first 1024 and scales the count of all 1500
    from pos_geometry.analysis.nulls.gp_dof import effective_dof, likelihood_dof

    w, v = np.linalg.eigh(kernel(1500, 100.0, 0.0).numpy())
    root = v * np.sqrt(np.clip(w, 0, None))
    y = torch.from_numpy(root @ np.random.default_rng(1).standard_normal((1500, 32)))
    y = y - y.mean(dim=0)
    assert effective_dof(y, 100.0, 0.0) == pytest.approx(likelihood_dof(1500, 100.0, 0.0), rel=0.05)
    assert effective_dof(y, 113.0, 0.0) < 0.6 * likelihood_dof(1500, 113.0, 0.0)

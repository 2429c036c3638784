"""Each rotation of the recurrence against the smooth background: its line, the surrogates' own pairs, the verdict."""

from __future__ import annotations

import math

import numpy as np
import pytest
import torch

import pos_geometry as pg
from pos_geometry.analysis._recurrence_map import fit_map, fitted_gain
from pos_geometry.analysis._recurrence_pairs import MODULUS_TOLERANCE, PairClass, classify_pairs
from pos_geometry.analysis.nulls.pair_background import (
    PAD,
    background_test,
    eligible_angles,
    power_spectra,
    surrogate_columns,
)

PERIOD = 1024 / 3.4


def _maps(z: torch.Tensor) -> torch.Tensor:
    """The affine one-step maps of trajectories ``z`` ``(B, n, k)``, fitted as the recurrence's null fits them."""
    return fitted_gain(z, 1e-10, 1, True)[1]


def test_power_spectra_put_a_sinusoid_at_its_grid_point_and_are_scale_free():
    n, theta = 256, 2 * math.pi * 10 / 256
    t = np.arange(n)
    z = torch.from_numpy(np.stack([np.cos(theta * t), np.sin(theta * t)], 1))[None]
    power = power_spectra(z)[0].numpy()
    assert power.shape == (PAD * n // 2 + 1,)
    assert int(np.argmax(power)) == PAD * 10  # angle 2π·10/n is grid point PAD·10
    np.testing.assert_allclose(power_spectra(1e6 * z)[0].numpy(), power, rtol=1e-9, atol=1e-12 * power.max())
    # Parseval on the padded grid: the periodogram over the 2n points sums to 2n times the sum of squares
    full = np.concatenate([power, power[1:-1][::-1]])
    assert full.sum() == pytest.approx(PAD * n, rel=1e-9)


def test_eligible_angles_are_the_rotation_rule_without_its_stability_check():
    # For trajectories of sinusoids in noise, the batched rule marks the upper eigenvalues that the
    # recurrence's classify_pairs calls rotations (the same modulus, turn and Fourier-bin rules).
    rng = np.random.default_rng(3)
    n, t = 300, np.arange(300.0)
    batch, expected = [], []
    for angles in ([0.3, 0.05], [0.3, 0.302], [0.01, 0.2], [0.12]):
        cols = [f(a * t) for a in angles for f in (np.cos, np.sin)]
        z = np.stack(cols, 1) @ rng.standard_normal((2 * len(angles), 6)) + 0.01 * rng.standard_normal((n, 6))
        batch.append(z)
        m, _, _ = fit_map(z / np.abs(z).max(), True, 1e-10)
        ev = np.linalg.eigvals(m)
        classes = classify_pairs(ev, n, MODULUS_TOLERANCE)
        expected.append(
            sorted(abs(np.angle(e)) for e, c in zip(ev, classes, strict=True) if c == PairClass.ROTATION)
        )
    got = eligible_angles(_maps(torch.from_numpy(np.stack(batch))), n).numpy()
    for row, want in zip(got, expected, strict=True):
        np.testing.assert_allclose(np.sort(row[np.isfinite(row)]), want, rtol=1e-8)
    assert [len(w) for w in expected] == [2, 0, 1, 1]  # resolved, unresolved, one slower than the window


def test_a_line_passes_and_a_smooth_background_is_exchangeable_with_its_surrogates():
    # The max-statistic test over each table's own selected pairs: a surrogate taken as the table is one more
    # draw of the null, so a background pair passes at most α of the time; a sinusoid well above the
    # background's power passes every time.
    rng = np.random.default_rng(0)
    n, k, s, alpha, reps = 256, 6, 39, 0.1, 150
    kernel = np.exp(-0.5 * (np.arange(-40, 41) / 12.0) ** 2)

    def smooth(count: int) -> np.ndarray:
        noise = rng.standard_normal((count, n + 80, k))
        return np.stack([np.stack([np.convolve(c, kernel, "valid") for c in x.T], 1) for x in noise])

    passed, found = 0, 0
    for _ in range(reps):
        tables = torch.from_numpy(smooth(s + 1))
        cols = surrogate_columns(tables, _maps(tables)).numpy()
        own = cols[0, -k:]
        own = own[np.isfinite(own)]
        if own.size:
            found += 1
            _, p, _ = background_test(cols[1:], tables[0].numpy(), own, alpha, "fast")
            passed += bool(np.any(p <= alpha))
    assert found > 30  # the smooth curves do have pairs that the map calls rotations
    assert passed / reps <= alpha + 2 * math.sqrt(alpha * (1 - alpha) / reps)
    t = np.arange(n)
    line = smooth(1)[0]
    line[:, :2] += 3 * line.std() * np.stack([np.cos(0.2 * t), np.sin(0.2 * t)], 1)
    null = torch.from_numpy(smooth(s))
    cols = surrogate_columns(null, _maps(null)).numpy()
    ratios, p, test = background_test(cols, line, np.array([0.2]), alpha, "fast")
    assert p[0] == pytest.approx(1 / (s + 1)) and test.significant and ratios[0] > 10


def test_a_background_pair_beside_a_rotation_is_named_and_given_no_period_or_plane(circle_on_a_gp):
    # Measured (seed 1, 1024 × 256): the map's rotations are the circle (period 301) and a pair of the GP
    # background at 489. The circle's line is 0.01 (the smallest p of 99); the background's is no stronger
    # than the surrogates' own pairs (p ≈ 0.1): it is named, with no period and no helix.
    a = pg.analyze(circle_on_a_gp(1), analyses=("helix", "recurrence"), progress=False, random_state=0)
    fit = a.recurrence
    assert fit.status == "rotations"
    ((period, low, high),) = fit.rotation_periods()
    assert abs(period / PERIOD - 1) < 0.02 and low < period < high
    ((dropped, _),) = fit.pairs(PairClass.BACKGROUND)
    assert 400 < dropped < 600
    p = fit.background_p[np.isfinite(fit.background_p)]
    assert sorted(p)[0] <= 0.05 < sorted(p)[1]
    i = int(np.flatnonzero(np.array(fit.pair_classes) == PairClass.BACKGROUND)[0])
    quoted = f"1 more pair(s) not above it, not reported: period {fit.periods[i]:.4g}: "
    assert quoted in fit.reason and f"p = {fit.background_p[i]:.3g}" in fit.reason  # text from the fields
    assert f"{fit.periods[i]:.4g} (p = {fit.background_p[i]:.3g})" in dict(fit.summary_rows())["not testable"]
    assert np.isnan(fit.refined_periods[np.abs(fit.periods - fit.periods[i]) < 1e-9]).all()
    assert fit.tests[-1].statistic == "rotation_line_over_background" and fit.tests[-1].significant
    assert all(abs(float(h.periods[0]) / PERIOD - 1) < 0.05 for h in a.helices if len(h.periods))
    assert "not above the background" in dict(fit.summary_rows())["not testable"]

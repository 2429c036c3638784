"""_fourier: the spectra's backgrounds (the running median that follows a smooth spectrum, not a line)."""

from __future__ import annotations

import math

import numpy as np
import pytest
import torch

from pos_geometry.analysis._spectra import local_background, red_background, tapered_power

PAD = 8


def test_local_background_follows_a_smooth_shape_and_passes_under_a_line():
    # A Gaussian shoulder (what a GP's spectrum has and no AR(1) spectrum does) on every bin, with a line
    # three native bins wide at native bin 40: the median follows the shoulder to a few percent and stays
    # under the line.
    f = (torch.arange(1, 128 * PAD + 1, dtype=torch.float64)) / PAD  # in native bins
    shoulder = torch.exp(-0.5 * (f / 30.0) ** 2) + 1e-3
    line = torch.where((f - 40).abs() <= 1.5, 50.0 * shoulder, torch.zeros_like(f))
    smooth = local_background(shoulder[None], pad=PAD)[0] * math.log(2.0)
    inner = (f > 12) & (f < 110)
    np.testing.assert_allclose(smooth[inner].numpy(), shoulder[inner].numpy(), rtol=0.06)
    bg = local_background((shoulder + line)[None], pad=PAD)[0] * math.log(2.0)
    at_line = (f - 40).abs() <= 1.5
    assert float((bg[at_line] / shoulder[at_line]).max()) < 1.2  # the line is 50x above it
    assert (
        float((bg[inner] / shoulder[inner]).max()) < 1.25
    )  # three outlying bins move a 17-bin median little
    # the first native bin is repeated below the lowest frequency: a falling spectrum is not undercut there
    assert float(bg[0]) >= 0.99 * float(shoulder[PAD * 8])


def test_local_background_of_white_noise_is_its_mean_level():
    # The median of an exponential variable is ln 2 times its mean: divided by ln 2, the background of a
    # white spectrum is its mean level (1 / number of bins), like the red-noise background's.
    y = torch.randn(400, 256, generator=torch.Generator().manual_seed(0), dtype=torch.float64)
    power, _ = tapered_power(y, pad=PAD)
    local = local_background(power, pad=PAD)
    red = red_background(y, power.shape[-1], pad=PAD)
    ratio = (local / red)[:, 4 * PAD : -4 * PAD].mean().item()
    assert 0.85 < ratio < 1.15, ratio


def test_family_levels_standardise_every_bin_and_leave_each_surrogate_out():
    # Bins whose null ratios are larger (a smooth family's shoulder) must not take over the max-T: once
    # each bin is put on its family's own 95th-percentile level, the surrogates' maxima fall on every bin
    # about equally often. And a surrogate is judged against the level of the other surrogates only.
    from pos_geometry.analysis.nulls.period import QUANTILE, _family_backgrounds

    rng = np.random.default_rng(0)
    s, b = 199, 50
    scale = np.where(np.arange(b) < 5, 40.0, 1.0)  # five heavy bins
    power = {"g": rng.exponential(size=(s, b)) * scale, "h": rng.exponential(size=(s, b))}
    background, null_max = _family_backgrounds(power)
    assert background[:5].min() > 20 and np.allclose(background[5:], 1.0, atol=0.8)
    for name, p in power.items():
        for i in (0, 17, 198):  # brute force: the same order statistic of the other S - 1, the other family
            others = np.delete(p, i, axis=0)
            level = np.sort(others, axis=0)[int(np.ceil(QUANTILE * (s - 1))) - 1] / -np.log1p(-QUANTILE)
            rest = next(m for k, m in power.items() if k != name)
            rest_level = np.sort(rest, axis=0)[int(np.ceil(QUANTILE * s)) - 1] / -np.log1p(-QUANTILE)
            expected = (p[i] / np.maximum(np.maximum(level, rest_level), 1.0)).max()
            assert null_max[name][i] == pytest.approx(expected, rel=1e-12)
    arg = (power["g"] / background).argmax(axis=1)
    assert (arg < 5).mean() < 0.3  # unstandardised, every maximum would sit in the five heavy bins


def _red(seed: int, n: int, rho: float) -> np.ndarray:
    """AR(1) noise of unit variance, ``e[t] = ρ e[t−1] + √(1−ρ²) z[t]``."""
    rng = np.random.default_rng(seed)
    z = rng.normal(size=n) * math.sqrt(1 - rho**2)
    e = np.empty(n)
    e[0] = rng.normal()
    for i in range(1, n):
        e[i] = rho * e[i - 1] + z[i]
    return e


def test_noise_colour_is_the_spectrum_beside_the_line_over_the_mean():
    # AR(1) noise's spectrum at w over its variance is (1−ρ²)/(1 − 2ρ cos w + ρ²) (16.4 at ρ = 0.9, period
    # 150); averaged over seeds the residual's local reading lands on it. White noise reads 1.
    from pos_geometry.analysis._fourier import noise_colour

    w, rho, n = 2 * math.pi / 150, 0.9, 2048
    analytic = (1 - rho**2) / (1 - 2 * rho * math.cos(w) + rho**2)
    red = [noise_colour(_red(s, n, rho), w) for s in range(30)]
    assert np.mean(red) == pytest.approx(analytic, rel=0.15)
    white = [noise_colour(np.random.default_rng(s).normal(size=n), w) for s in range(30)]
    assert 1.0 <= np.mean(white) < 1.3 and min(white) >= 1.0


def test_a_period_error_bar_covers_the_truth_in_red_noise_and_the_white_one_does_not():
    # A sinusoid of period 150 in AR(1) noise (ρ = 0.9): ± 1.96 of refine_period's error covers the true
    # frequency at about its nominal 95%; the white-noise formula's (the same, without the colour) about a third.
    from pos_geometry.analysis._fourier import _sinusoid_fit, noise_colour, refine_period

    n, w = 1024, 2 * math.pi / 150
    t = np.arange(n, dtype=np.float64)
    scaled, white = [], []
    for seed in range(150):
        rng = np.random.default_rng(1000 + seed)
        y = 3 * np.cos(w * t + rng.uniform(0, 2 * math.pi)) + _red(seed, n, 0.9)
        got, std, at_edge, off_peak = refine_period(
            y, t, w * (1 + 0.003 * rng.normal()), 2 * math.pi / n, math.pi
        )
        assert not at_edge and not off_peak
        colour = noise_colour(_sinusoid_fit(y, t, got)[2], got)
        scaled.append(abs(got - w) <= 1.96 * std)
        white.append(abs(got - w) <= 1.96 * std / math.sqrt(colour))
    assert 0.90 <= np.mean(scaled) <= 0.99
    assert np.mean(white) < 0.6


def test_a_fit_that_runs_out_of_its_bins_is_a_side_lobe():
    # Started 2.2 bins from a clean line, the fit runs to the end of the two bins it may search, towards
    # the line: flagged off the peak (not a sinusoid of its own). Started near the line, it is not.
    from pos_geometry.analysis._fourier import refine_period

    n, w = 1024, 2 * math.pi / 100
    t = np.arange(n, dtype=np.float64)
    y = np.cos(w * t) + 0.1 * np.random.default_rng(0).normal(size=n)
    bin_w = 2 * math.pi / n
    got, _, at_edge, off_peak = refine_period(y, t, w + 2.2 * bin_w, 2 * math.pi / n, math.pi)
    assert off_peak and not at_edge and got == pytest.approx(w + 0.2 * bin_w, rel=1e-6)
    got, std, at_edge, off_peak = refine_period(y, t, w + 0.4 * bin_w, 2 * math.pi / n, math.pi)
    assert not off_peak and abs(got - w) < 4 * std

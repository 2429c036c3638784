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
    fit = fit_recurrence(table, n_components=16)  # centred, affine (the defaults)
    assert isinstance(fit, RecurrenceFit) and fit.center and fit.affine
    turning = theta >= 2 * np.pi / 512  # at least one turn in the window
    found = np.sort(fit.angles[fit.eigenvalues.imag > 0])
    np.testing.assert_allclose(found[-turning.sum() :], np.sort(theta[turning]), rtol=1e-8)
    # the two slower planes (0.16 and 0.51 rad over the window) are never rotations: less than a turn
    # cannot show a fixed rate (centred, the slowest is nearly constant and its plane falls below rcond)
    slow = fit.pairs("slower than the window")
    assert slow and all(p > 512 for p, _ in slow)
    assert fit.status == "rotations" and all(p <= 512 for p, _ in fit.rotation_pairs())
    # The uncentred linear fit of the same table is exact for every plane, slow ones included.
    fit = fit_recurrence(table, n_components=16, center=False, affine=False)
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
    from_pca = fit_recurrence(pca(table, n_components=8), n_components=8)
    np.testing.assert_allclose(from_pca.transition, fit.transition, atol=1e-9)
    assert batch.to_dict()["type"] == "BatchResult"


def test_bad_arguments():
    table, _ = rotary_table(40, 8)
    with pytest.raises(InvalidArgumentError, match="horizons"):
        fit_recurrence(table, horizons=(0,))
    with pytest.raises(InvalidArgumentError, match="n_components must be a positive integer"):
        fit_recurrence(table, n_components=0)


def test_a_learned_table_in_half_precision_keeps_its_components(gpt2_wpe):
    # GPT-2's spectrum decays smoothly far above its rounding: stored in float16 or bfloat16 it is no low-rank
    # code, and auto takes the same 27 components (99.9% of the variance) as in float32.
    x = torch.as_tensor(gpt2_wpe)
    assert {
        fit_recurrence(x.to(dt), n_surrogates=0).n_components
        for dt in (torch.float32, torch.float16, torch.bfloat16)
    } == {27}


def test_gpt2_has_an_undamped_rotation(gpt2_wpe):
    # Measured (positions 1..1023, top 3 PCs, uncentred): one conjugate pair, period ≈ 492 positions,
    # |λ| ≈ 0.9998; prediction error 0.035 / 0.061 / 0.29 at h = 1 / 8 / 64 (persistence 0.037 / 0.105 / 0.69);
    # its 64-step gain over persistence (0.58) beats random walks of its own steps (median 0.15, p = 0.01)
    # and smooth GP curves from the model's likelihood (p = 0.01), and its line stands above the smooth
    # background's (2.1 times its mean power, p = 0.03 against the surrogates' own pairs, the largest of
    # tests). (With the 27 components of the default,
    # the GP curves predict as well: test_gpt2_recurrence_is_no_better_than_a_smooth_curve.)
    fit = fit_recurrence(gpt2_wpe, n_components=3, window=(1, 1024))
    pairs = fit.rotation_pairs()
    assert fit.status == "rotations" and all(t.p_value <= 0.05 for t in fit.tests), fit.tests
    assert fit.test.statistic == "rotation_line_over_background" and 0.01 < fit.test.p_value <= 0.05
    assert len(pairs) == 1
    period, modulus = pairs[0]
    assert 300 < period < 800 and abs(modulus - 1) < 0.01
    assert fit.prediction_error[64] < 0.5 * fit.persistence_error[64]  # the rotation predicts far ahead
    # With 8 components the pair near 512 has a neighbour at 417, closer than one Fourier bin (2π/1023):
    # still undamped, but "unresolved", never passed off as a separate rotation.
    wide = fit_recurrence(gpt2_wpe, n_components=8, window=(1, 1024))
    assert any(300 < p < 800 and abs(m - 1) < 0.01 for p, m in wide.pairs("unresolved"))


def test_eigenfrequencies_of_a_model_table_rope_are_its_inverse_frequencies():
    """The rotary table pos_geometry.load builds for Pythia-70m (from the model table, offline)."""
    import pos_geometry as pg
    from pos_geometry.encodings import inverse_frequencies, rotary_params

    theta = inverse_frequencies(rotary_params(pg.get_spec("pythia-70m").rotary_config)).numpy()
    table = pg.load("pythia-70m", n_positions=512, dtype=torch.float64)
    fit = fit_recurrence(table, n_components=table.d_model, center=False, affine=False)
    expected = np.sort(np.repeat(theta, 2))  # 8 frequencies, from 1 to 10000^(-7/8) rad/position
    np.testing.assert_allclose(fit.angles, expected, rtol=0, atol=1e-6)
    # frequencies with at least one turn in the window are exact to round-off; slower rotations
    # (down to 0.03 turns over 512 positions) are ill-conditioned, hence the absolute bound above
    resolved = expected >= 2 * np.pi / 512
    np.testing.assert_allclose(fit.angles[resolved], expected[resolved], rtol=1e-9)
    np.testing.assert_allclose(fit.moduli, 1.0, atol=1e-8)
    # 4 planes turn at least once in 512 positions (periods 6.3 to 199): rotations; the 4 slower ones
    # (628 to 19869) are listed, exact, as slower than the window
    assert [round(p, 1) for p, _ in fit.rotation_pairs()] == [198.7, 62.8, 19.9, 6.3]
    assert [round(p) for p, _ in fit.pairs("slower than the window")] == [19869, 6283, 1987, 628]
    assert all(fit.prediction_error[h] < 1e-10 for h in (1, 8, 64))
    assert fit.provenance.model_id == "pythia-70m" and fit.provenance.kind == "rotary"


# --- issue 25: the one-parameter groups known exactly, and maps that are not -------------------------
def _true_rotations(theta: np.ndarray, n: int) -> np.ndarray:
    """The θ a window of n positions can show: a turn at least, and a Fourier bin from its neighbours."""
    bin_width = 2 * np.pi / n
    gaps = np.where(np.eye(theta.size, dtype=bool), np.inf, np.abs(theta[:, None] - theta[None, :]))
    return theta[(theta >= bin_width) & (gaps.min(axis=1) >= bin_width)]


@pytest.mark.parametrize(
    ("n", "d", "layout", "dtype", "tolerance"),
    [(1024, 128, "interleaved", torch.float64, 1e-6), (1024, 128, "interleaved", torch.float32, 1e-6),
     (1500, 384, "blocks", torch.float32, 1e-6), (1024, 128, "interleaved", torch.float16, 1e-4),
     (1024, 128, "interleaved", torch.bfloat16, 3e-4),
     pytest.param(1500, 384, "blocks", torch.float16, 1e-4, marks=pytest.mark.slow)],
)  # fmt: skip
def test_sinusoidal_tables_are_one_parameter_groups(n, d, layout, dtype, tolerance):
    # Measured before: Vaswani 1024×128 gave 13 pairs with up to 38% error (auto = 32 components), Whisper's
    # 16 pairs matched no frequency. Now auto takes the table's numerical rank, and every pair it calls a
    # rotation is a true frequency to 1e-6, with none spurious. In half precision the rank is counted above
    # the rounding's spectral edge (float16 Whisper was 32 components and 2 rotations; now ~148 and 51): every
    # rotation to 1e-4 (bfloat16: 3e-4), again all the window resolves.
    import pos_geometry as pg
    from pos_geometry.encodings.sinusoidal import frequencies

    fit = fit_recurrence(pg.sinusoidal(n, d, layout=layout, dtype=dtype), n_surrogates=0)
    theta = frequencies(d, layout=layout).numpy()
    assert fit.status == "rotations" and fit.n_components > 32
    found = np.array([2 * np.pi / p for p, _ in fit.rotation_pairs()])
    error = np.abs(found[:, None] - theta[None, :]).min(axis=1) / found
    assert error.max() < tolerance, error.max()
    # the frequencies the window can show are found, all but at most the one at the resolution's edge
    visible = _true_rotations(theta, n)
    missed = np.abs(visible[:, None] - found[None, :]).min(axis=1) / visible > tolerance
    assert len(visible) >= 20 and missed.sum() <= 1, (len(visible), 2 * np.pi / visible[missed])


def test_analyze_and_fit_recurrence_give_one_answer_on_a_rotary_table():
    # analyze fitted a centred linear map and got Pythia's slow periods as 4894 and 4652 (truth: 6283 and
    # 19869). Both now fit the affine map in the centred PCA basis: the same pairs, the true ones.
    import pos_geometry as pg
    from pos_geometry.encodings import inverse_frequencies, rotary_params

    rope = pg.load("pythia-70m")
    theta = inverse_frequencies(rotary_params(pg.get_spec("pythia-70m").rotary_config)).numpy()
    a = pg.analyze(rope, analyses=("recurrence",)).recurrence
    b = fit_recurrence(rope)
    np.testing.assert_allclose(np.array(a.pairs()), np.array(b.pairs()), rtol=1e-9)
    periods = np.array([p for p, _ in a.pairs()])
    np.testing.assert_allclose(np.sort(periods), np.sort(2 * np.pi / theta), rtol=1e-3)
    np.testing.assert_allclose(  # the planes that turn within the 2048 positions, to float32 round-off
        np.sort([p for p, _ in a.rotation_pairs()]), np.sort(2 * np.pi / theta[theta >= 2 * np.pi / 1000]),
        rtol=1e-6,
    )  # fmt: skip
    slow = np.array([p for p, _ in a.pairs("slower than the window")])  # 0.65 and 2 rad over the window
    np.testing.assert_allclose(slow, [19869.18, 6283.19], rtol=1e-3)


def test_a_growing_map_is_reported_as_such_and_never_enters_a_null():
    # A BERT-like table's map had |λ| > 1: its 64-step error reached 4655× the table's scale and entered
    # the statistic as a gain of −3554. Now the growth is the reason, and the gain is floored at −1.
    from pos_geometry.analysis._recurrence_map import GAIN_FLOOR, improvement

    t = np.arange(200)[:, None]
    spiral = 1.1**t * np.concatenate(
        [np.cos(0.2 * t), np.sin(0.2 * t), np.cos(0.05 * t), np.sin(0.05 * t)], 1
    )
    fit = fit_recurrence(spiral, n_components=4)
    assert fit.status == "does not apply" and "grows" in fit.reason and "diverge" in fit.reason
    assert fit.spectral_radius == pytest.approx(1.1, rel=1e-6) and fit.test is None
    assert fit.pairs("growing") and fit.rotation_pairs() == []
    # 14 rows of white noise in 10 coordinates: overfitted maps, some of which blow up 6 steps ahead
    noise = torch.from_numpy(np.random.default_rng(0).standard_normal((20, 14, 10)))
    gains = improvement(noise, 1e-10, 6, True)
    assert torch.isfinite(gains).all() and gains.min() == GAIN_FLOOR and (gains > GAIN_FLOOR).sum() >= 15


@pytest.mark.parametrize(("n", "d"), [(256, 768), (40, 64), (12, 8)])
def test_auto_components_fit_windows_shorter_than_the_table_is_wide(n, d):
    # A 256×768 table has rank 255 once centred: the shape, not a low-rank code. "auto" took all 255
    # components and the fit refused its own choice (found by the calibration benchmark).
    x = np.cumsum(np.random.default_rng(0).standard_normal((n, d)), axis=0)
    fit = fit_recurrence(x, n_surrogates=0)
    assert 2 <= fit.n_components <= min(32, n - 4)


@pytest.mark.slow
def test_gpt2_recurrence_is_no_better_than_a_smooth_curve(gpt2_wpe):
    # Issue 25's calibration: on GP tables the smooth-GP null drawn with the table's sample variances made
    # 6-9 of 20 tables "rotations"; drawn from the model's likelihood (noise share and column covariance) it
    # makes 0-2. Against it GPT-2's 27-component map (gain 0.84 over persistence 64 rows ahead) is no
    # better than smooth curves of its length scale (median 0.82, p = 0.24), although it beats random walks
    # of its own steps (median 0.65, p = 0.01). Its helix still beats both (test_controls).
    fit = fit_recurrence(gpt2_wpe)
    walk, gp = fit.tests
    assert (
        fit.n_components == 27 and fit.status == "not significant" and "smooth Gaussian-process" in fit.reason
    )
    assert walk.null == "step_walk" and walk.p_value == pytest.approx(walk.min_p_value)
    assert gp.null == "smooth_gp" and gp.p_value > 0.05
    assert gp.observed == pytest.approx(0.84, abs=0.01) and 0.78 < gp.null_median < 0.87


def _one_plane(phase: np.ndarray, noise: float, seed: int, d: int = 64) -> torch.Tensor:
    rng = np.random.default_rng(seed)
    basis = np.linalg.qr(rng.normal(size=(d, 2)))[0]
    x = np.stack([np.cos(phase), np.sin(phase)], 1) @ basis.T * np.sqrt(d / 2)
    return torch.from_numpy(x + noise * rng.normal(size=x.shape))


def test_a_drifting_frequency_is_not_called_a_constant_rotation():
    """A chirp whose period drifts from 400 to 324 over 1024 positions: its angle on the two halves of the window
    (no row in common) differs beyond their fitted error bars, so it is "drifting", with the range said."""
    t = np.arange(1024)
    chirp = 2 * np.pi * (t / 400 + (1 / 324 - 1 / 400) * t**2 / 2048)
    fit = fit_recurrence(_one_plane(chirp, 0.05, 0), n_components=2, affine=True, n_surrogates=0)
    assert fit.pair_classes.count("drifting") == 1 and "rotation" not in fit.pair_classes
    assert fit.status == "does not apply" and "the period drifts from" in fit.reason
    (i,) = [j for j, c in enumerate(fit.pair_classes) if c == "drifting"]
    first, second = fit.period_halves[i]
    assert 362 < first < 400 and 324 < second < 362  # the mean period of each half
    assert "drifting" in fit.summary()


@pytest.mark.parametrize("seed", range(5))
def test_a_constant_rotation_in_noise_is_not_called_drifting(seed):
    t = np.arange(1024)
    fit = fit_recurrence(
        _one_plane(2 * np.pi * t / 300, 0.5, seed), n_components=2, affine=True, n_surrogates=0
    )
    assert fit.pair_classes.count("rotation") == 1 and "drifting" not in fit.pair_classes
    (i,) = [j for j, c in enumerate(fit.pair_classes) if c == "rotation"]
    assert fit.period_halves[i] == pytest.approx([300, 300], rel=0.1)  # least squares on noisy rows: biased


def _unit_plane(phase: np.ndarray, seed: int, background=None, d: int = 64) -> torch.Tensor:
    """A unit circle turning by ``phase`` in ``d`` dimensions at SNR 1 (white noise of the circle's total
    variance), plus ``background(rng)`` when given."""
    rng = np.random.default_rng(seed)
    basis = np.linalg.qr(rng.normal(size=(d, 2)))[0]
    x = np.stack([np.cos(phase), np.sin(phase)], 1) @ basis.T * np.sqrt(d) + rng.normal(size=(len(phase), d))
    return torch.from_numpy(x if background is None else x + background(rng))


_T = np.arange(1024)


def _chirp(p0: float, p1: float) -> np.ndarray:
    return 2 * np.pi * (_T / p0 + (1 / p1 - 1 / p0) * _T**2 / 2048)


def _jump(p0: float, p1: float) -> np.ndarray:
    return np.where(_T < 512, 2 * np.pi * _T / p0, 2 * np.pi * (511 / p0 + (_T - 511) / p1))


@pytest.mark.parametrize(
    ("phase", "halves"),
    [
        (_chirp(300, 291), ((296, 301), (290, 296))),  # 3% over the window
        (_chirp(300, 285), ((292, 300), (284, 292))),  # 5%
        (_jump(300, 250), ((297, 303), (247, 253))),  # from 300 to 250 halfway
    ],
    ids=["chirp 3%", "chirp 5%", "jump"],
)
@pytest.mark.parametrize("seed", range(3))
def test_a_small_drift_at_snr_1_is_found_and_gets_two_periods(phase, halves, seed):
    """The halves are fitted by the variable-projection refinement the intervals use: a 3% chirp is drifting at
    SNR 1, and a drifting pair gets its two periods, never one constant period with an interval."""
    fit = fit_recurrence(_unit_plane(phase, seed), n_surrogates=0)
    assert "drifting" in fit.pair_classes and "rotation" not in fit.pair_classes
    (i,) = [j for j, c in enumerate(fit.pair_classes) if c == "drifting" and fit.eigenvalues[j].imag > 0]
    (lo1, hi1), (lo2, hi2) = halves
    assert lo1 < fit.period_halves[i][0] < hi1 and lo2 < fit.period_halves[i][1] < hi2
    assert fit.rotation_periods() == [] and np.isnan(fit.refined_periods).all()
    assert np.isnan(fit.period_interval).all()
    assert "drifting" in fit.summary() and "the period drifts from" in fit.reason


@pytest.mark.parametrize("background", ["white", "gp"])
@pytest.mark.parametrize("seed", range(4))
def test_a_constant_rotation_is_not_drifting_at_snr_1_or_on_a_smooth_background(background, seed):
    """The same fit on a constant rotation: alone at SNR 1 (period 300), or on a smooth GP background (length
    scale 60, twice the circle's variance; period 150), whose level near the rotation's angle widens the
    halves' errors and whose phase-randomised copies are the drift's null."""
    t = _T.astype(np.float64)
    kernel = np.exp(-((t[:, None] - t[None, :]) ** 2) / (2 * 60.0**2))
    w, v = np.linalg.eigh(kernel)
    factor = v * np.sqrt(np.clip(w, 0, None))

    def gp(rng):
        g = factor @ rng.normal(size=(1024, 64))
        return g / np.sqrt((g**2).sum(1).mean()) * np.sqrt(64 * 2)

    period = 150 if background == "gp" else 300
    fit = fit_recurrence(
        _unit_plane(2 * np.pi * _T / period, seed, gp if background == "gp" else None), n_surrogates=0
    )
    assert "drifting" not in fit.pair_classes
    if background == "white":
        (low_high,) = [(lo, hi) for p, lo, hi in fit.rotation_periods()]
        assert low_high[0] < 300 < low_high[1]
    else:
        assert "rotation" in fit.pair_classes

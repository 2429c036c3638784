"""analyze(): one PCA per table and window, every analysis fitted on it, equal to the analyses run alone."""

from __future__ import annotations

import numpy as np
import pytest
import torch
from sklearn.decomposition import PCA

from pos_geometry import (
    Analysis,
    InvalidArgumentError,
    PositionalEmbedding,
    Provenance,
    analyze,
    fit_helix,
    fit_recurrence,
    pca,
    periodicity,
    sinusoidal,
)


def _helix(n=300, d=16, period=75.0, noise=0.001, seed=0) -> np.ndarray:
    t = np.arange(float(n))
    z = np.stack([np.cos(2 * np.pi * t / period), np.sin(2 * np.pi * t / period), t / n], axis=1)
    q, _ = np.linalg.qr(np.random.default_rng(seed).normal(size=(d, 3)))
    return z @ q.T + noise * np.random.default_rng(seed + 1).normal(size=(n, d))


def test_real_table_figures_match_sklearn(gpt2_wpe, record_decompositions, monkeypatch):
    pe = PositionalEmbedding(gpt2_wpe, Provenance("gpt2", "learned", "test"))
    calls = record_decompositions(monkeypatch)
    a = analyze(pe, window=(100, 1024), analyses=())
    assert len(calls) == 1
    rows = gpt2_wpe[100:].astype(np.float64)
    oracle = np.cumsum(PCA(10).fit(rows).explained_variance_ratio_)
    assert a.top1 == pytest.approx(oracle[0], abs=1e-6)
    assert a.top3 == pytest.approx(oracle[2], abs=1e-6) and a.top3 == pytest.approx(0.9511, abs=1e-3)
    assert a.top10 == pytest.approx(oracle[9], abs=1e-6)
    s = np.linalg.svd(rows - rows.mean(0), compute_uv=False)
    assert a.stable_rank == pytest.approx((s**2).sum() / s[0] ** 2, rel=1e-6)
    row = a.row()
    assert row["window"] == "100:1024" and row["kind"] == "learned" and row["helix_verdict"] == "not run"
    assert row["processing"] == ["rows[100:1024]", "center_positions"]
    assert "1024×768 learned, rows 100–1023" in a.line() and f"{100 * oracle[2]:.2f}%" in a.line()


def test_every_analysis_is_fitted_on_one_pca_and_equals_the_analysis_alone(
    record_decompositions, monkeypatch
):
    table = PositionalEmbedding(_helix(noise=0.02), Provenance("toy", "learned", "test"))
    nulls = {"n_surrogates": 19, "alpha": 0.05}
    calls = record_decompositions(monkeypatch)
    a = analyze(table, window=(10, 290), **nulls)
    assert len(calls) == 1  # PCA, helix, periodicity and recurrence share one decomposition
    alone = fit_helix(table, window=(10, 290), **nulls)
    assert a.helix.verdict == alone.verdict == "helix"
    assert a.helix.periods[0] == pytest.approx(alone.periods[0], rel=1e-6)
    assert a.helix.periods[0] == pytest.approx(75, rel=0.01)
    per = periodicity(table, window=(10, 290), **nulls)
    assert [p.period for p in a.periodicity.peaks] == pytest.approx([p.period for p in per.peaks], rel=1e-6)
    assert [p.p_value for p in a.periodicity.peaks] == [p.p_value for p in per.peaks]
    assert a.recurrence is not None and a.notes == {}
    assert a.row()["helix_verdict"] == "helix" and a.row()["recurrence_status"] == a.recurrence.status


def test_recurrence_is_fitted_in_the_same_basis():
    table = _helix()
    a = analyze(table, analyses=("recurrence",))
    direct = fit_recurrence(pca(table, 16, solver="exact"), "auto")
    assert a.recurrence.n_components == direct.n_components
    np.testing.assert_allclose(np.sort(a.recurrence.angles), np.sort(direct.angles), atol=1e-9)
    assert a.recurrence.status == "rotations"
    # the planted period is among the rotation angles (2π/75 per step)
    assert np.min(np.abs(np.abs(a.recurrence.angles) - 2 * np.pi / 75)) < 1e-3


def test_analytic_tables_get_no_helix_fit():
    a = analyze(sinusoidal(256, 32), analyses=("helix",))
    assert a.helix is None and "computed from a formula" in a.notes["helix"]
    assert a.row()["helix_verdict"] == "not run"


def test_long_windows_are_not_helix_fitted_and_say_why():
    table = np.random.default_rng(0).normal(size=(64, 4))
    a = analyze(table, analyses=("helix",), helix_max_positions=32)
    assert a.helix is None and "64 positions > 32" in a.notes["helix"] and "helix not fitted" in a.line()
    assert a.top10 is None and a.top3 is not None  # only 4 components exist
    assert isinstance(a, Analysis) and a.pca.n_components_ == 4


@pytest.mark.parametrize(
    ("kwargs", "match"),
    [({"analyses": ("helix", "spectra")}, "subset of"), ({"n_components": 0}, "n_components")],
)
def test_bad_arguments_state_the_rule(kwargs, match):
    with pytest.raises(InvalidArgumentError, match=match):
        analyze(_helix(), **kwargs)


def test_a_batch_is_refused_with_the_fix():
    with pytest.raises(InvalidArgumentError, match="once per table"):
        analyze(np.stack([_helix(), _helix(seed=3)]))


def test_periodicity_of_a_pca_result_refuses_uncentred_fits():
    with pytest.raises(InvalidArgumentError, match="centred over positions"):
        periodicity(pca(_helix(), 3, center=False))


def test_the_analyses_side_by_side_give_what_one_thread_gives(monkeypatch):
    # On two threads analyze runs the helix, periodicity and recurrence side by side (each kernel
    # single-threaded) on one decomposition computed first (beside identify, in a helper thread, and then the
    # caller's: the analyses reuse it); on one thread, one after the other. Same nulls.
    import torch

    from pos_geometry.analysis.nulls import basis as _null_basis
    from pos_geometry.analysis.nulls import smoothness as _smoothness

    table = PositionalEmbedding(_helix(noise=0.02, seed=4), Provenance("toy", "learned", "test"))
    before = torch.get_num_threads()
    got = {}
    estimates = []
    length_scale = _smoothness.length_scale
    monkeypatch.setattr(_smoothness, "length_scale", lambda *a: estimates.append(1) or length_scale(*a))
    try:
        for threads in (1, 2):
            torch.set_num_threads(threads)
            _null_basis._memory.set(None)
            estimates.clear()
            got[threads] = analyze(table, n_surrogates=19, alpha=0.05)
            assert len(estimates) == 1  # the nulls' decomposition: once, whatever the threads
    finally:
        torch.set_num_threads(before)
    one, two = got[1], got[2]
    tests = [(one.helix.tests, two.helix.tests), (one.recurrence.tests, two.recurrence.tests)]
    for a, b in tests:
        assert [t.p_value for t in a] == [t.p_value for t in b]
        for s, t in zip(a, b, strict=True):
            np.testing.assert_allclose(s.values, t.values, rtol=1e-5)
    assert [p.p_value for p in one.periodicity.peaks] == [p.p_value for p in two.periodicity.peaks]
    assert [p.period for p in one.periodicity.peaks] == pytest.approx(
        [p.period for p in two.periodicity.peaks], rel=1e-6
    )
    assert (
        one.helix.verdict == two.helix.verdict == "helix" and one.recurrence.status == two.recurrence.status
    )


def test_the_helix_reason_never_contradicts_the_rotations_found_beside_it():
    """Two helices of equal variance (periods 512 and 97, disjoint subspaces): the top-3 helix fit mixes them and
    says "not a helix", while the recurrence finds both rotations and periodicity the period 97; the helix's
    reason says so instead of pointing at random walks alone. A random walk gets no such sentence."""
    rng = np.random.default_rng(0)
    n, d = 1024, 64
    t = np.arange(n)[:, None]
    q = np.linalg.qr(rng.normal(size=(d, 6)))[0]
    h1 = np.concatenate([np.cos(2 * np.pi * t / 512), np.sin(2 * np.pi * t / 512), t / n], 1) @ q[:, :3].T
    h2 = np.concatenate([np.cos(2 * np.pi * t / 97), np.sin(2 * np.pi * t / 97), t / n], 1) @ q[:, 3:].T
    two = analyze(torch.from_numpy((h1 + h2) * 3 + 0.3 * rng.normal(size=(n, d))))
    assert two.recurrence.status == "rotations" and two.periodicity.dominant_periods
    assert two.helix.verdict == "not a helix"  # the top-3 fit cannot see either helix: it says why
    assert "the recurrence finds 2 rotation(s)" in two.helix.reason
    assert "periodicity finds significant period(s) 97" in two.helix.reason
    # every number it quotes is a field of the same call: the refined periods with their intervals (never the
    # eigenvalues' raw periods), periodicity's own peaks, and each plane's own helix fit
    assert f"(periods {two.recurrence.rotation_words()})" in two.helix.reason
    raw = [f"{p:.4g}" for p, _ in two.recurrence.rotation_pairs()]
    shown = [f"{p:.5g}" for p, _, _ in two.recurrence.rotation_periods()]
    assert all(r not in two.helix.reason for r in raw if not any(r in s for s in shown))
    peaks = ", ".join(f"{p.period:.4g}" for p in two.periodicity.dominant_periods)
    assert f"significant period(s) {peaks}" in two.helix.reason
    for h in two.helices:
        assert f"period {h.periods[0]:.4g}: {h.verdict} (p = {h.p_value:.3g})" in two.helix.reason
    walk = analyze(torch.from_numpy(rng.normal(size=(256, 16)).cumsum(0)), n_surrogates=39, alpha=0.05)
    assert "In the same analysis" not in walk.helix.reason


def _chirp_helix(drift: bool, seed: int = 0, d: int = 64) -> torch.Tensor:
    """A helix whose period drifts from 400 to 324 over 1024 positions (``drift``), or stays at 360."""
    rng = np.random.default_rng(seed)
    t = np.arange(1024)
    phase = 2 * np.pi * (t / 400 + (1 / 324 - 1 / 400) * t**2 / 2048) if drift else 2 * np.pi * t / 360
    basis = np.linalg.qr(rng.normal(size=(d, 3)))[0]
    x = np.stack([np.cos(phase), np.sin(phase), t / 1024], 1) @ basis.T * np.sqrt(d / 2)
    return torch.from_numpy(x + 0.05 * rng.normal(size=x.shape))


@pytest.mark.parametrize("drift", [True, False])
def test_a_helix_whose_period_drifts_says_its_period_is_a_mean(drift):
    a = analyze(_chirp_helix(drift), analyses=("helix", "recurrence"), n_surrogates=99, progress=False)
    assert a.helix.verdict == "helix"
    said = (
        "Its period is a mean: in the same analysis the recurrence finds the period drifting from"
        in a.helix.reason
    )
    assert said == drift == ("drifting" in a.recurrence.pair_classes)

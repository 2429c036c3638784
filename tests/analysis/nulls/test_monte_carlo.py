"""Sequential Monte-Carlo tests (Besag & Clifford 1991; issue 26): a null that stops once ``h`` surrogates
reach the table gives a valid p-value and the decision all its surrogates would give, from the first of the
same surrogates, on any number of threads."""

from __future__ import annotations

import numpy as np
import pytest
import torch

import pos_geometry as pg
from pos_geometry import _progress
from pos_geometry.analysis.nulls.helix_test import helix_null_tests, rotation_scan
from pos_geometry.analysis.nulls.monte_carlo import SEQUENTIAL_EXCEEDANCES, StopRule, monte_carlo_p
from pos_geometry.analysis.nulls.surrogates import surrogate_values


def test_the_rule_stops_past_alpha_times_the_surrogates():
    # h > α·S, so that a stop (h of S reach the table) means "not significant" for the full test too
    assert StopRule.for_level(1.0, 199, 0.01).stop_after == SEQUENTIAL_EXCEEDANCES == 10
    assert StopRule.for_level(1.0, 999, 0.05).stop_after == 50  # α·S = 49.95: 50 of 999 reach it, p ≥ 51/1000
    assert StopRule.for_level(1.0, 2000, 0.05).stop_after == 101
    rule = StopRule(0.5, 3, 20)
    values = np.array([0.1, 0.6, 0.2, 0.5, 0.3, 0.9, 0.7])  # 0.5 reaches 0.5 (>=)
    assert rule.drawn(values) == 6 and rule.drawn(values[:5]) is None


def test_the_sequential_p_value_is_valid_and_decides_as_the_full_test():
    # Under the null the table's statistic is exchangeable with its surrogates' (here: iid uniforms). The
    # sequential p-value must then satisfy P(p <= u) <= u, and at α its decision is the full test's, whose
    # rejection rate is exactly floor(α(S + 1)) / (S + 1) = 5%.
    rng = np.random.default_rng(0)
    trials, s, alpha = 4000, 99, 0.05
    draws = rng.random((trials, s + 1))
    p_seq, p_full, used = np.empty(trials), np.empty(trials), np.empty(trials)
    for i, row in enumerate(draws):
        observed, values = row[0], row[1:]
        rule = StopRule.for_level(observed, s, alpha)
        drawn = rule.drawn(values) or s
        test = monte_carlo_p("u", observed, "step_walk", values[:drawn], alpha, rule=rule)
        full = monte_carlo_p("u", observed, "step_walk", values, alpha)
        assert test.significant == full.significant
        assert test.stopped == (drawn < s or int(np.sum(values >= observed)) >= rule.stop_after)
        p_seq[i], p_full[i], used[i] = test.p_value, full.p_value, test.n_surrogates
    se = lambda u: 3 * np.sqrt(u * (1 - u) / trials)  # noqa: E731
    for u in (0.02, 0.05, 0.1, 0.2, 0.5):
        assert np.mean(p_seq <= u) <= u + se(u), u
    assert np.mean(p_seq <= alpha) == pytest.approx(0.05, abs=se(0.05))
    # and it is cheap where the null explains the table: ~h / p surrogates, ~31 of 99 on average here
    assert used.mean() < 40


def _smooth_curve(n: int = 160, d: int = 12, seed: int = 4) -> np.ndarray:
    # a smooth random curve: what the helix test's GP null describes
    rng = np.random.default_rng(seed)
    t = np.arange(n)[:, None]
    k = np.exp(-0.5 * ((t - t.T) / 12.0) ** 2) + 1e-6 * np.eye(n)
    return np.linalg.cholesky(k) @ rng.standard_normal((n, d))


def _helix(n: int = 160, d: int = 12, seed: int = 4) -> np.ndarray:
    t = np.arange(n, dtype=np.float64)
    curve = np.stack([np.cos(2 * np.pi * t / 40), np.sin(2 * np.pi * t / 40), t / 80], axis=1)
    frame = np.linalg.qr(np.random.default_rng(seed).standard_normal((d, 3)))[0]
    return curve @ frame.T + 0.05 * np.random.default_rng(seed + 1).standard_normal((n, d))


@pytest.mark.parametrize("table", [_smooth_curve, _helix])
def test_a_sequential_null_is_the_first_surrogates_of_the_full_one(table):
    x = torch.from_numpy(table())
    z = pg.pca(x, 3).transform(x)
    observed = float(rotation_scan(x.shape[0], 1.0)(z[None].double())[0][0])
    args = dict(min_turns=1.0, n_surrogates=99, alpha=0.05, random_state=0)
    full = helix_null_tests(x, 3, observed, **args)
    seq = helix_null_tests(x, 3, observed, **args, sequential=True)
    for f, s in zip(full, seq, strict=True):
        assert s.significant == f.significant and s.max_surrogates == 99 and f.max_surrogates is None
        np.testing.assert_array_equal(s.values, f.values[: s.n_surrogates])  # the same draws, cut
        if s.stopped:
            assert s.p_value == s.stop_after / s.n_surrogates and "stopped after" in s.words()
            assert int(np.sum(s.values >= observed)) == s.stop_after and s.values[-1] >= observed
        else:
            assert s.n_surrogates == 99 and s.p_value == f.p_value and s.min_p_value == f.min_p_value
    if table is _smooth_curve:  # the null explains it: every null stops early, none is significant
        assert all(s.stopped and s.n_surrogates < 30 and not s.significant for s in seq)
    else:  # a helix: every surrogate drawn, as the full test
        assert all(not s.stopped and s.significant for s in seq)


def test_the_stop_does_not_depend_on_the_number_of_threads():
    x = torch.from_numpy(_smooth_curve())
    rule = StopRule(0.0, 10, 199)  # a statistic every surrogate reaches: the stop at the 10th
    stat = lambda coords: coords[:, :, 0].abs().amax(dim=1)  # noqa: E731
    kw = dict(n_components=3, coordinates=True, budget_bytes=64 * 160 * 8 * 2)  # chunks of a few surrogates
    one = surrogate_values(x, "smooth_gp", 199, 5, stat, workers=1, rule=rule, **kw)
    two = surrogate_values(x, "smooth_gp", 199, 5, stat, workers=2, rule=rule, **kw)
    full = surrogate_values(x, "smooth_gp", 199, 5, stat, workers=2, **kw)
    assert one.shape == (10,)
    np.testing.assert_array_equal(one, two)
    np.testing.assert_array_equal(one, full[:10])


def test_a_stopped_null_still_fills_the_progress_line(monkeypatch):
    counted = []
    monkeypatch.setattr(_progress, "advance", counted.append)
    x = torch.from_numpy(_smooth_curve())
    stat = lambda coords: coords[:, :, 0].abs().amax(dim=1)  # noqa: E731
    values = surrogate_values(
        x, "step_walk", 199, 0, stat, n_components=3, coordinates=True, rule=StopRule(0.0, 10, 199), workers=1
    )
    assert values.shape == (10,) and sum(counted) == 199


def test_values_that_do_not_end_at_the_stop_are_refused():
    rule = StopRule(0.5, 2, 10)
    with pytest.raises(ValueError, match="do not end where the sequential rule"):
        monte_carlo_p("s", 0.5, "step_walk", np.array([0.9, 0.1, 0.8, 0.2]), 0.05, rule=rule)  # past the stop
    with pytest.raises(ValueError, match="do not end where the sequential rule"):
        monte_carlo_p("s", 0.5, "step_walk", np.array([0.1, 0.2]), 0.05, rule=rule)  # stopped before it
    ok = monte_carlo_p("s", 0.5, "step_walk", np.array([0.9, 0.1, 0.8]), 0.05, rule=rule)
    assert ok.stopped and ok.p_value == pytest.approx(2 / 3) and ok.min_p_value == pytest.approx(1 / 11)


def test_sequential_is_a_switch_of_every_analysis_with_nulls_that_allow_it():
    x = _smooth_curve(seed=6)
    for fit in (pg.fit_helix, pg.fit_recurrence, pg.analyze):
        with pytest.raises(pg.InvalidArgumentError, match=r"sequential must be True or False .*'yes'"):
            fit(x, sequential="yes")
    fit = pg.fit_helix(x, n_surrogates=99, alpha=0.05, sequential=False)
    assert all(t.n_surrogates == 99 and not t.stopped and t.max_surrogates is None for t in fit.tests)
    fit = pg.fit_helix(x, n_surrogates=99, alpha=0.05)  # sequential by default
    assert fit.verdict == "not a helix" and all(t.stopped and t.max_surrogates == 99 for t in fit.tests)
    record = fit.to_dict()["tests"][0]
    assert record["stopped"] is True and record["max_surrogates"] == 99 and record["stop_after"] == 10

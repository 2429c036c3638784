"""Every verdict of the report is a function of its numbers by a stated rule; tables built to land on each side
of each rule get the verdict the rule names (the real GPT-2 numbers are in test_runner.py)."""

from __future__ import annotations

import numpy as np
import pytest
import torch

import pos_geometry.reproduction.claims as C
from pos_geometry import PositionalEmbedding, Provenance, analyze, periodicity
from pos_geometry.reproduction.rules import FAILS, HOLDS, UNDECIDABLE, above, below, combine, within
from pos_geometry.reproduction.uncertainty import top3_intervals, top3_nulls, truncation_null


def _pe(x: np.ndarray) -> PositionalEmbedding:
    return PositionalEmbedding(
        torch.from_numpy(np.asarray(x, dtype=np.float64)), Provenance("toy", "learned", "t")
    )


def _helix(n: int = 1024, noise=0.45, d: int = 32, seed: int = 0) -> np.ndarray:
    rng = np.random.default_rng(seed)
    t = np.arange(float(n))[:, None]
    x = np.concatenate([np.cos(t / 60), np.sin(t / 60), t / 400], axis=1) @ rng.normal(size=(3, d))
    return x + rng.normal(size=x.shape) * np.broadcast_to(noise, (n, 1))


@pytest.mark.parametrize(
    "low, high, expected",
    [(0.1, 0.2, HOLDS), (-0.2, -0.1, FAILS), (-0.1, 0.1, UNDECIDABLE), (0.0, 0.1, UNDECIDABLE)],
)
def test_above_and_below_by_the_interval(low, high, expected):
    assert above(low, high, 0.0) == expected
    assert below(low, high, 0.0) == {HOLDS: FAILS, FAILS: HOLDS, UNDECIDABLE: UNDECIDABLE}[expected]


@pytest.mark.parametrize(
    "interval, expected",
    [
        ((0.86, 0.94), HOLDS),
        ((0.96, 0.99), FAILS),
        ((0.5, 0.8), FAILS),
        ((0.83, 0.98), UNDECIDABLE),
        ((0.9, 0.97), UNDECIDABLE),
    ],
)
def test_within_a_band(interval, expected):
    assert within(*interval, (0.85, 0.95)) == expected


@pytest.mark.parametrize(
    "parts, verdict",
    [
        ([HOLDS, HOLDS], "reproduced"),
        ([HOLDS, FAILS], "partly reproduced"),
        ([FAILS, FAILS], "not reproduced"),
        ([FAILS, UNDECIDABLE], "not reproduced"),
        ([HOLDS, UNDECIDABLE], "undecidable from this table"),
        ([UNDECIDABLE], "undecidable from this table"),
        ([HOLDS, FAILS, UNDECIDABLE], "partly reproduced"),
    ],
)
def test_parts_combine_by_one_rule(parts, verdict):
    assert combine(parts) == verdict


def test_combine_refuses_what_is_not_a_part():
    with pytest.raises(ValueError, match="parts must be"):
        combine(["maybe"])
    with pytest.raises(ValueError):
        combine([])


@pytest.mark.parametrize(
    "noise, verdict",
    [
        (0.45, "reproduced"),  # ~0.89, its whole interval inside [0.85, 0.95]
        (0.01, "not reproduced"),  # ~1.0: far more than "about 90%"
        (1.5, "not reproduced"),  # far less
        (0.5, "undecidable from this table"),  # ~0.865, the interval crosses 0.85
    ],
)
def test_the_variance_claim_on_each_side_of_its_band(noise, verdict):
    table = _pe(_helix(noise=noise))
    iv = top3_intervals(table, {"all rows": (0, 1024)})
    claim = C.claim_variance(analyze(table, analyses=()), None, iv)
    assert claim.verdict == verdict, claim.measured


def test_the_variance_claim_states_its_nulls():
    table = _pe(_helix(noise=0.45))
    nulls = top3_nulls(table, n_surrogates=19)
    claim = C.claim_variance(analyze(table, analyses=()), None, None, nulls)
    assert set(nulls) == {"step_walk", "smooth_gp"} and all(len(v) == 19 for v in nulls.values())
    assert "random walks of its own steps give a median of" in claim.measured
    assert claim.values["null[step_walk]"]["n_surrogates"] == 19


def test_the_truncation_claim_on_each_side_of_its_rules():
    """(a) holds when the first 100 rows matter more than any other 100 (noisy first rows), fails when dropping
    them lowers the ratio (clean first rows on a noisy rest); (b) follows rows 1-99's interval."""
    noisy_first = np.full((1024, 1), 0.1)
    noisy_first[:100] = 1.0
    clean_first = np.full((1024, 1), 0.5)
    clean_first[:100] = 0.02
    outcomes = {}
    for name, noise in (("noisy first", noisy_first), ("clean first", clean_first)):
        table = _pe(_helix(noise=noise))
        a = analyze(table, analyses=())
        windows = C.fit_windows(table, a)
        iv = top3_intervals(table, C.TRUNCATION_WINDOWS, differences=C.TRUNCATION_DIFFERENCES)
        claim = C.claim_truncation(windows, iv, truncation_null(table))
        outcomes[name] = (claim.values["parts"], claim.verdict)
    assert outcomes["noisy first"] == (
        {"truncated_view_cleaner": HOLDS, "first_100_close_to_3d": FAILS},
        "partly reproduced",
    )
    assert outcomes["clean first"] == (
        {"truncated_view_cleaner": FAILS, "first_100_close_to_3d": HOLDS},
        "partly reproduced",
    )


def test_a_gain_that_any_run_of_rows_gives_cannot_decide():
    table = _pe(_helix(noise=0.3))  # the same noise everywhere: the first rows are not special
    runs = truncation_null(table)
    assert runs.p_value > 0.05
    windows = C.fit_windows(table, analyze(table, analyses=()))
    claim = C.claim_truncation(windows, None, runs)
    assert claim.values["parts"]["truncated_view_cleaner"] in (UNDECIDABLE, FAILS)


def test_a_period_with_too_few_cycles_is_undecidable_and_one_with_many_is_not():
    rng = np.random.default_rng(1)
    walk = periodicity(_pe(rng.normal(size=(256, 16)).cumsum(0)), n_surrogates=99)
    t = np.arange(256.0)[:, None]
    circle = _pe(
        np.concatenate([np.cos(2 * np.pi * t / 32), np.sin(2 * np.pi * t / 32)], axis=1).repeat(4, axis=1)
    )
    periodic = C.claim_similarity(periodicity(circle, n_surrogates=99))
    assert periodic.verdict == "reproduced" and periodic.values["cycles_in_window"] == pytest.approx(
        8, rel=0.02
    )
    slow = _pe(np.cos(2 * np.pi * t / 200) + 0.3 * rng.normal(size=(256, 8)))  # 1.3 cycles in the window
    too_few = C.claim_similarity(periodicity(slow, n_surrogates=99))
    assert too_few.values["cycles_in_window"] < 2 and too_few.verdict == "undecidable from this table"
    assert "cannot be told apart from a smooth curve" in too_few.measured
    walk_claim = C.claim_similarity(walk)  # a random walk's strongest "period" is its length: undecidable
    assert walk_claim.values["cycles_in_window"] < 2 and walk_claim.verdict == "undecidable from this table"
    noise = C.claim_similarity(periodicity(_pe(rng.normal(size=(512, 16))), n_surrogates=99))
    assert (
        noise.values["cycles_in_window"] >= 2 and noise.verdict == "not reproduced"
    )  # many cycles, no period

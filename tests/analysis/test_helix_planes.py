"""Several helices at once: when the recurrence finds several rotations, each gets its own helix fit in its own
plane with its own nulls, and the top-3 verdict's reason names them instead of contradicting them."""

from __future__ import annotations

import numpy as np
import pytest
import torch

import pos_geometry as pg
from pos_geometry.analysis.helix_planes import plane_tables

N, D = 1024, 64


def _helices(periods: tuple[float, ...], seed: int = 0) -> torch.Tensor:
    """Helices of equal variance in disjoint subspaces (the first with a drift along its axis)."""
    rng = np.random.default_rng(seed)
    t = np.arange(N)[:, None]
    parts = []
    for i, p in enumerate(periods):
        parts.append(np.hstack([np.cos(2 * np.pi * t / p), np.sin(2 * np.pi * t / p), t / N * (i == 0)]))
    basis = np.linalg.qr(rng.normal(size=(D, 3 * len(periods))))[0]
    x = np.hstack(parts) @ basis.T * np.sqrt(D / 3) + 0.3 * rng.normal(size=(N, D))
    return torch.from_numpy(x)


@pytest.fixture(scope="module")
def two():
    return pg.analyze(
        _helices((512.0, 97.0)), analyses=("helix", "recurrence"), n_surrogates=99, progress=False
    )


def test_two_helices_of_equal_variance_each_get_their_own_verdict(two):
    a = two
    assert a.helix.verdict != "helix"  # the top three components mix the two
    assert [round(h.periods[0]) for h in a.helices] == [512, 97]
    assert all(h.verdict == "helix" and h.p_value <= 0.01 for h in a.helices)
    assert all(h.provenance.processing[-2].startswith("plane of the rotation of period") for h in a.helices)
    # the three verdicts of the call agree: the reason names both helices
    assert "period 511.7: helix" in a.helix.reason or "period 512" in a.helix.reason
    assert "97" in a.helix.reason and "does not contradict" in a.helix.reason
    assert dict(a.summary_rows())["helices (one per rotation plane)"].count(": helix (p = ") == 2


def test_one_helix_is_the_top_three_fit_s_alone():
    a = pg.analyze(_helices((300.0,)), analyses=("helix", "recurrence"), n_surrogates=99, progress=False)
    assert a.helix.verdict == "helix" and a.helices == ()


def test_each_plane_table_holds_its_rotation(two):
    tables = plane_tables(two.pca, two.recurrence)
    assert [round(p) for p, _ in tables] == [511, 97] or [round(p) for p, _ in tables] == [512, 97]
    for period, table in tables:
        assert table.shape == (N, 3)
        phase = np.unwrap(np.angle(table[:, 0] + 1j * table[:, 1]))
        turns = abs(phase[-1] - phase[0]) / (2 * np.pi)
        assert turns == pytest.approx(N / period, rel=0.02)  # the plane turns at its own rate


def test_each_plane_is_held_to_alpha_over_the_number_of_planes(two):
    # two planes at the call's α = 0.01: each tested at 0.005 (Bonferroni), with enough surrogates to reach it
    # (the call asked for 99, whose smallest p = 0.01 could never pass 0.005)
    for h in two.helices:
        assert all(t.alpha == pytest.approx(0.005) for t in h.tests)
        assert all((t.max_surrogates or t.n_surrogates) >= 199 for t in h.tests)
        assert "each of the 2 planes tested at α/2 = 0.005, Bonferroni" in h.reason


def _helix_behind_walk(seed: int) -> torch.Tensor:
    """A helix of period 150 (SNR 1 against white noise) behind a random walk of three times its variance."""
    rng = np.random.default_rng(seed)
    t = np.arange(N, dtype=np.float64)
    phase = 2 * np.pi * t / 150.0
    basis = np.linalg.qr(rng.normal(size=(D, 3)))[0]
    x = np.stack([np.cos(phase), np.sin(phase), (t - t.mean()) / N], axis=1) @ basis.T * np.sqrt(D)
    walk = rng.normal(size=(N, D)).cumsum(0)
    walk -= walk.mean(0)
    walk *= np.sqrt(3 * D / (walk**2).sum(1).mean())
    return torch.from_numpy(x + rng.normal(size=(N, D)) + walk)


def test_one_rotation_behind_a_walk_is_fitted_in_its_own_plane():
    # the walk holds the top three components, so the top-3 fit sees no helix; the recurrence finds the one
    # rotation, and its plane (with the trend of the rest) is a helix of its period. It was never fitted:
    # plane fits ran only for two rotations or more
    a = pg.analyze(_helix_behind_walk(0), analyses=("helix", "recurrence"), n_surrogates=99, alpha=0.05,
                   progress=False)  # fmt: skip
    assert a.helix.verdict != "helix" and len(a.recurrence.rotation_pairs()) == 1
    (plane,) = a.helices
    assert plane.verdict == "helix" and plane.periods[0] == pytest.approx(150.0, rel=0.02)
    assert "Bonferroni" not in plane.reason  # one plane: no correction to state

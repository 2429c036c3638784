"""fit_helix: recovery of known helices, the sceptic's baselines, and the real GPT-2 table."""

from __future__ import annotations

import math

import numpy as np
import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from pos_geometry.analysis._batch import BatchResult
from pos_geometry.analysis.helix import HelixFit
from pos_geometry.analysis.helix import fit_helix as _fit_helix
from pos_geometry.analysis.pca import pca
from pos_geometry.embedding import PositionalEmbedding, Provenance
from pos_geometry.errors import InvalidArgumentError


def fit_helix(*args, **kwargs):
    """fit_helix without its null (n_surrogates=0): these tests check the geometry of the fit; the verdicts
    against their nulls are tested in test_controls.py."""
    kwargs.setdefault("n_surrogates", 0)
    return _fit_helix(*args, **kwargs)


def _embed(z: np.ndarray, d: int, noise: float, rng: np.random.Generator) -> np.ndarray:
    """Put a 3-D curve into R^d with a random orthonormal map and add isotropic noise in all d dims."""
    q, _ = np.linalg.qr(rng.standard_normal((d, z.shape[1])))
    return z @ q.T + noise * rng.standard_normal((z.shape[0], d))


def _helix(n, period, radius, pitch, phase, semi_minor=None):
    t = np.arange(n, dtype=np.float64)
    a = 2 * np.pi * t / period + phase
    b = radius if semi_minor is None else semi_minor
    return np.stack([radius * np.cos(a), b * np.sin(a), pitch * t / period], axis=1)


@settings(max_examples=12, deadline=None)
@given(
    period=st.floats(20.0, 150.0),
    radius=st.floats(1.0, 5.0),
    pitch_ratio=st.floats(0.5, 3.0),
    phase=st.floats(0.0, 2 * math.pi),
    noise_ratio=st.floats(0.0, 0.05),
    seed=st.integers(0, 2**16),
)
def test_recovers_known_helix(period, radius, pitch_ratio, phase, noise_ratio, seed):
    # n = 400 positions: at least 400/150 = 2.7 turns.
    rng = np.random.default_rng(seed)
    pitch = pitch_ratio * radius
    x = _embed(_helix(400, period, radius, pitch, phase), d=8, noise=noise_ratio * radius, rng=rng)
    fit = fit_helix(x, n_components=3)
    assert isinstance(fit, HelixFit)
    assert fit.periods[0] == pytest.approx(period, rel=0.02)
    assert fit.circular_period == pytest.approx(period, rel=0.02)
    assert fit.radii[0] == pytest.approx(radius, rel=0.05)
    assert fit.circular_radius == pytest.approx(radius, rel=0.05)
    assert fit.pitch == pytest.approx(pitch, rel=0.05)
    assert fit.turns[0] == pytest.approx(400 / period, rel=0.02)
    assert fit.shape in ("circular_helix", "helix")
    assert min(fit.bic["circular_helix"], fit.bic["helix"]) < min(fit.bic["line"], fit.bic["ellipse"])


def test_circular_helix_preferred_to_elliptical_and_vice_versa():
    rng = np.random.default_rng(1)
    circ = fit_helix(_helix(500, 70.0, 2.0, 1.5, 0.3) + 0.02 * rng.standard_normal((500, 3)))
    assert circ.shape == "circular_helix"
    ell = fit_helix(_helix(500, 70.0, 3.0, 1.5, 0.3, semi_minor=1.0) + 0.02 * rng.standard_normal((500, 3)))
    assert ell.shape == "helix"
    assert sorted(ell.semi_axes[0]) == pytest.approx([1.0, 3.0], rel=0.03)
    # Nine parameters for k = 3: the number that enters the BIC penalty.
    assert (ell.n_params["line"], ell.n_params["ellipse"], ell.n_params["circular_helix"]) == (6, 10, 11)
    assert ell.n_params["helix"] == 6 + ell.n_harmonics * 7


@pytest.mark.parametrize("seed", range(5))
def test_noisy_line_is_a_line(seed):
    rng = np.random.default_rng(seed)
    t = np.arange(300.0)[:, None]
    x = t * rng.standard_normal((1, 16)) / 100 + 0.05 * rng.standard_normal((300, 16))
    fit = fit_helix(x)
    assert fit.shape == "line", fit.summary()


@pytest.mark.parametrize("seed", range(3))
def test_ellipse_is_an_ellipse(seed):
    rng = np.random.default_rng(seed)
    z = _helix(300, 60.0, 3.0, 0.0, 0.0, semi_minor=1.5)
    fit = fit_helix(_embed(z, d=10, noise=0.05, rng=rng))
    assert fit.shape == "ellipse", fit.summary()


def test_two_harmonics_found():
    t = np.arange(600.0)
    z = _helix(600, 100.0, 3.0, 2.0, 0.0)
    z[:, :2] += 0.8 * np.stack([np.cos(2 * np.pi * t / 37), np.sin(2 * np.pi * t / 37)], axis=1)
    z += 0.02 * np.random.default_rng(3).standard_normal(z.shape)
    fit = fit_helix(z, max_harmonics=3)
    assert fit.shape == "helix"
    assert fit.periods[:2] == pytest.approx([100.0, 37.0], rel=0.01)
    assert fit.radii[:2] == pytest.approx([3.0, 0.8], rel=0.05)


def test_pca_result_batch_and_provenance():
    rng = np.random.default_rng(4)
    mats = [_embed(_helix(300, p, 2.0, 1.0, 0.0), 6, 0.02, rng) for p in (40.0, 55.0)]
    embs = [
        PositionalEmbedding(torch.tensor(m), Provenance(f"toy{i}", "learned", "synthetic helix"))
        for i, m in enumerate(mats)
    ]
    batch = fit_helix(embs)
    assert isinstance(batch, BatchResult) and len(batch) == 2
    for i, emb in enumerate(embs):
        single = fit_helix(emb)
        assert batch[i].provenance == single.provenance
        assert batch[i].provenance.model_id == emb.provenance.model_id
        assert "center_positions" in single.provenance.processing  # the PCA step is carried forward
        assert batch[i].periods == pytest.approx(single.periods)
    from_pca = fit_helix(pca(embs[0], n_components=5))
    assert from_pca.periods[0] == pytest.approx(batch[0].periods[0])
    windowed = fit_helix(embs[1], window=(100, 300))
    assert windowed.window == (100, 300) and windowed.n_positions == 200
    assert windowed.periods[0] == pytest.approx(55.0, rel=0.02)
    d = batch.to_dict()
    assert d["type"] == "BatchResult" and len(d["items"]) == 2
    assert "ΔBIC" in str(batch[0]) and "<table>" in batch._repr_html_()


def test_bad_arguments():
    x = _helix(100, 20.0, 1.0, 1.0, 0.0)
    with pytest.raises(InvalidArgumentError, match="n_components must be >= 2"):
        fit_helix(x, n_components=1)
    with pytest.raises(InvalidArgumentError, match="max_harmonics"):
        fit_helix(x, max_harmonics=0)
    with pytest.raises(InvalidArgumentError, match="at least"):
        fit_helix(x, window=(0, 12))


def test_gpt2_helix_shape_beats_a_line_and_an_ellipse(gpt2_wpe):
    # Measured (positions 1..1023): helix BIC ≈ −5.4e3 vs ellipse ≈ +0.7e3 and line ≈ +2.8e3, i.e.
    # ΔBIC > 6000. The threshold of 1000 leaves room for the residuals' serial correlation
    # (which inflates ΔBIC) while still demanding an overwhelming preference.
    fit = fit_helix(gpt2_wpe, window=(1, 1024))
    assert fit.shape in ("helix", "circular_helix")
    best = min(fit.bic["helix"], fit.bic["circular_helix"])
    assert fit.bic["line"] - best > 1000
    assert fit.bic["ellipse"] - best > 1000
    assert fit.r2 > 0.9
    assert 1.5 < fit.turns[0] < 3.0  # the dominant turn: period ≈ 550 positions


@pytest.mark.parametrize(
    "name",
    [
        "growing radius (cone)",
        pytest.param("shrinking radius", marks=pytest.mark.slow),
        "drifting pitch, 2.5 turns",
        pytest.param("drifting pitch, 2 turns", marks=pytest.mark.slow),
        "radius modulated",
    ],
)  # two of five in the slow tier: the default suite stays under 5 minutes
def test_helices_with_a_varying_radius_or_pitch_are_helices(name):
    # A cone (4 clean turns of period 256, radius growing along the axis) was "does not apply: the curve
    # turns less than the band allows": the sideband the growth makes sat one resolution step from the
    # leading harmonic, and the separation limit flagged the lead instead of the sideband.
    t = np.arange(1024.0)
    period, radius, axis = {
        "growing radius (cone)": (256.0, 0.2 + t / 1024, t / 1024),
        "shrinking radius": (256.0, 1.2 - t / 1024, t / 1024),
        "drifting pitch, 2.5 turns": (400.0, np.ones_like(t), (t / 1024) ** 2),
        "drifting pitch, 2 turns": (512.0, np.ones_like(t), np.exp(t / 512) / 7),
        "radius modulated": (256.0, 1 + 0.3 * np.cos(2 * np.pi * t / 1024), t / 1024),
    }[name]
    a = 2 * np.pi * t / period
    curve = np.stack([radius * np.cos(a), radius * np.sin(a), axis], axis=1)
    rng = np.random.default_rng(0)
    table = curve @ np.linalg.qr(rng.standard_normal((64, 3)))[0].T + 0.01 * rng.standard_normal((1024, 64))
    fit = fit_helix(table, n_surrogates=199, alpha=0.01)  # the defaults of analyze
    assert fit.verdict == "helix", fit.reason
    assert fit.period == pytest.approx(period, rel=0.01)

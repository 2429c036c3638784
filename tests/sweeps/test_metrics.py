"""The sweep's per-checkpoint metrics and drift, against independent computations (scipy, numpy)."""

from __future__ import annotations

import math

import numpy as np
import pytest
import scipy.linalg
from scipy.stats import ortho_group

from pos_geometry.errors import InvalidArgumentError
from pos_geometry.sweeps.metrics import SweepConfig, add_drift, basis_drift, shape_drift


def orthonormal(k: int, d: int, seed: int) -> np.ndarray:
    return np.linalg.qr(np.random.default_rng(seed).normal(size=(d, k)))[0].T


def test_basis_drift_is_the_principal_angle_distance():
    a, b = orthonormal(3, 20, 0), orthonormal(3, 20, 1)
    angles = scipy.linalg.subspace_angles(a.T, b.T)
    assert basis_drift(a, b) == pytest.approx(math.sqrt(1 - np.cos(angles).mean()), abs=1e-9)
    rot = ortho_group.rvs(3, random_state=2)
    assert basis_drift(rot @ a, a) == pytest.approx(0.0, abs=1e-7)  # same subspace, axes turned
    c = np.linalg.qr(np.concatenate([a, orthonormal(3, 20, 3)]).T)[0].T[3:]  # orthogonal to a
    assert basis_drift(c, a) == pytest.approx(1.0, abs=1e-9)


def test_shape_drift_ignores_rotation_and_scale():
    rng = np.random.default_rng(0)
    y = rng.normal(size=(50, 3))
    assert shape_drift(3.0 * y @ ortho_group.rvs(3, random_state=1) + 2.0, y) == pytest.approx(0.0, abs=1e-12)
    z = rng.normal(size=(50, 3))
    a, b = y - y.mean(0), z - z.mean(0)  # written out: centre, unit norm, best rotation and scale
    a, b = a / np.linalg.norm(a), b / np.linalg.norm(b)
    assert shape_drift(z, y) == pytest.approx(
        1 - np.linalg.svd(a.T @ b, compute_uv=False).sum() ** 2, abs=1e-12
    )


def test_add_drift_skips_failed_checkpoints():
    bases = [(orthonormal(3, 8, i), np.random.default_rng(i).normal(size=(20, 3))) for i in range(3)]
    rows = add_drift([bases[0], None, bases[1], bases[2]], ["a", "b", "c", "d"])
    assert rows[1] == {} and rows[0]["drift_previous"] is None
    assert rows[2]["drift_previous_revision"] == "a" and rows[3]["drift_final"] == pytest.approx(
        0.0, abs=1e-12
    )
    assert rows[2]["drift_previous"] == pytest.approx(basis_drift(bases[1][0], bases[0][0]))
    assert {r.get("drift_final_revision") for r in rows if r} == {"d"}


def test_config_validates_and_fingerprints():
    cheap = SweepConfig.make("cheap")
    assert cheap.analyses == ("norms", "pca", "drift")
    assert SweepConfig.make(["drift"]).analyses == ("pca", "drift")  # drift needs the PCA bases
    assert cheap.fingerprint() == SweepConfig.make(["drift", "norms", "pca"]).fingerprint()
    assert cheap.fingerprint() != SweepConfig.make("cheap", n_components=5).fingerprint()
    with pytest.raises(InvalidArgumentError, match="unknown"):
        SweepConfig.make(["helix", "spectra"])
    with pytest.raises(InvalidArgumentError, match="alpha"):
        SweepConfig.make("all", n_surrogates=19, alpha=0.01)  # smallest reachable p is 0.05
    with pytest.raises(InvalidArgumentError, match="periodicity needs n_surrogates >= 1"):
        SweepConfig.make(["periodicity"], n_surrogates=0)
    assert SweepConfig.make(["helix"], n_surrogates=0).n_surrogates == 0  # the helix is then "untested"


def test_sequential_helix_nulls_are_part_of_the_config():
    # the helix nulls' p-values differ when they stop early: stored results of the other setting are recomputed;
    # a sweep without the helix keeps its hash
    helix = SweepConfig.make(["helix"])
    assert helix.sequential is True
    assert helix.fingerprint() != SweepConfig.make(["helix"], sequential=False).fingerprint()
    assert SweepConfig.make(["periodicity"]).fingerprint() == (
        SweepConfig.make(["periodicity"], sequential=False).fingerprint()
    )
    with pytest.raises(InvalidArgumentError, match=r"sequential must be True or False .*'no'"):
        SweepConfig.make(["helix"], sequential="no")


def test_the_helix_row_counts_the_surrogates_drawn():
    from pos_geometry.sweeps.metrics import _helix

    t = np.arange(160)[:, None]
    kernel = np.exp(-0.5 * ((t - t.T) / 12.0) ** 2) + 1e-6 * np.eye(160)
    # a smooth random curve: the nulls explain it
    curve = np.linalg.cholesky(kernel) @ np.random.default_rng(6).standard_normal((160, 12))
    drawn = _helix(curve, SweepConfig.make(["helix"], n_surrogates=99, alpha=0.05))
    full = _helix(curve, SweepConfig.make(["helix"], n_surrogates=99, alpha=0.05, sequential=False))
    assert drawn["helix_verdict"] == full["helix_verdict"] == "not a helix"
    assert full["helix_n_surrogates"] == 99 and 10 <= drawn["helix_n_surrogates"] < 99

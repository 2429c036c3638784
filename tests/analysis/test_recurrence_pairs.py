"""The classes of a one-step map's eigenvalues (:mod:`pos_geometry.analysis._recurrence_pairs`): one rule for one map
and for a batch, each class on both sides of its boundary."""

from __future__ import annotations

import math

import numpy as np

from pos_geometry.analysis._recurrence_pairs import PairClass, classify_pairs, conjugates, pair_classes
from pos_geometry.analysis._recurrence_periods import conjugate_pair

N = 100
BIN = 2 * math.pi / N


def _pairs(*pairs: tuple[float, float], real: tuple[float, ...] = ()) -> np.ndarray:
    """Eigenvalues ``ρ e^{±iα}`` for each ``(ρ, α)``, then the real ones."""
    ev = [rho * np.exp(sign * 1j * alpha) for rho, alpha in pairs for sign in (1, -1)]
    return np.array(ev + list(real), dtype=np.complex128)


def _upper(ev: np.ndarray, classes) -> list[tuple[float, str]]:
    return sorted(
        (round(abs(float(np.angle(e))), 6), str(c)) for e, c in zip(ev, classes, strict=True) if e.imag > 0
    )


def test_each_class_on_both_sides_of_its_boundary():
    tol = 0.01
    ev = _pairs(
        (1.0, 0.5),  # undamped, a bin from everything: a rotation
        (1.0 + 0.9 * tol, 1.0),  # just inside the modulus tolerance: still a rotation
        (1.0 + 1.1 * tol, 1.5),  # just outside: growing
        (1.0 - 1.1 * tol, 2.0),  # damped
        (1.0, 0.99 * BIN),  # turns less than once in the window: slower than the window
        real=(0.7, 1.0),
    )
    got = _upper(ev, classify_pairs(ev, N, tol))
    assert got == [
        (round(0.99 * BIN, 6), PairClass.SLOW),
        (0.5, PairClass.ROTATION),
        (1.0, PairClass.ROTATION),
        (1.5, PairClass.GROWING),
        (2.0, PairClass.DAMPED),
    ]
    assert [c for e, c in zip(ev, classify_pairs(ev, N, tol), strict=True) if e.imag <= 0] == [""] * 7


def test_a_pair_within_a_bin_of_another_eigenvalue_is_unresolved_but_its_own_conjugate_does_not_count():
    near = _pairs((1.0, 0.5), (1.0, 0.5 + 0.9 * BIN))
    assert {c for _, c in _upper(near, classify_pairs(near, N, 0.01))} == {PairClass.UNRESOLVED}
    apart = _pairs((1.0, 0.5), (1.0, 0.5 + 1.1 * BIN))
    assert {c for _, c in _upper(apart, classify_pairs(apart, N, 0.01))} == {PairClass.ROTATION}
    # a real eigenvalue counts too: −1 (angle π) against a pair within a bin of π, and a bin and more away
    close = _pairs((1.0, math.pi - 0.9 * BIN), real=(-1.0,))
    assert _upper(close, classify_pairs(close, N, 0.01))[0][1] == PairClass.UNRESOLVED
    far = _pairs((1.0, math.pi - 1.1 * BIN), real=(-1.0,))
    assert _upper(far, classify_pairs(far, N, 0.01))[0][1] == PairClass.ROTATION


def test_a_batch_of_maps_gets_the_classes_of_each_map_alone():
    rng = np.random.default_rng(0)
    maps = []
    for _ in range(6):
        q, _ = np.linalg.qr(rng.standard_normal((7, 7)))
        maps.append(q * (1 + rng.normal(0, 0.01)) + rng.normal(0, 1e-3, (7, 7)))
    ev = np.linalg.eigvals(np.stack(maps))  # (6, 7)
    batch = pair_classes(ev, 60, 0.01)
    assert batch.shape == (6, 7)
    assert [list(row) for row in batch] == [classify_pairs(e, 60, 0.01) for e in ev]
    assert {str(c) for c in batch.ravel()} - {""} <= {
        PairClass.ROTATION, PairClass.SLOW, PairClass.UNRESOLVED, PairClass.DAMPED, PairClass.GROWING,
    }  # fmt: skip
    assert (batch == PairClass.ROTATION).any()  # orthogonal maps turn


def test_each_eigenvalue_is_paired_with_its_mirror_image_and_a_real_one_with_itself():
    rng = np.random.default_rng(1)
    ev = np.linalg.eigvals(rng.standard_normal((20, 9, 9)))  # real maps: exact conjugate pairs, and real ones
    conj = conjugates(ev)
    rows = np.arange(20)[:, None]
    np.testing.assert_array_equal(ev[rows, conj], np.conj(ev))
    np.testing.assert_array_equal(conj[rows, conj], np.broadcast_to(np.arange(9), (20, 9)))  # an involution
    real = ev.imag == 0
    assert real.any() and (conj[real] == np.nonzero(real)[1]).all()
    # the periods' pairs read the same rule: an upper eigenvalue and its conjugate, never a nearer upper one
    near_real = np.array([1.0 + 1e-4j, 1.0 - 1e-4j, 1.0 + 5e-5j, 1.0 - 5e-5j])
    assert conjugate_pair(near_real, 0) == {0, 1} and conjugate_pair(near_real, 2) == {2, 3}

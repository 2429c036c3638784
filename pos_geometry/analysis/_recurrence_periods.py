"""The rotations' periods on the whole window and on its halves: refined periods with intervals, and drifts.

:func:`refined_periods` refines each rotation's angle on the trajectory (:func:`refine_angles`) and gives its
``CONFIDENCE`` interval; :func:`drifts` fits the same on the window's two halves and decides which pairs drift
(:func:`~pos_geometry.analysis._recurrence_pairs.drifting`, then
:func:`~pos_geometry.analysis._recurrence_phase.drift_p_value`). Both read the classes of
:mod:`~pos_geometry.analysis._recurrence_pairs` and leave every other pair NaN.
"""

from __future__ import annotations

import math

import numpy as np

from pos_geometry.analysis._recurrence_pairs import (
    DRIFT_ALPHA,
    DRIFT_SURROGATES,
    PairClass,
    conjugates,
    drifting,
)
from pos_geometry.analysis._recurrence_phase import drift_p_value, refine_angles, refine_halves
from pos_geometry.analysis._recurrence_results import period_interval

__all__ = ["CONFIDENCE", "EXACT", "REFINE_CAP", "conjugate_pair", "drifts", "refined_periods"]

CONFIDENCE = 0.95
"""The level of the rotations' period intervals."""
REFINE_CAP = 16
"""At most this many rotations are refined (a wider spectrum keeps its eigenvalues' periods, with no interval)."""
EXACT = 1e-9
"""A one-step prediction error below this is round-off: the eigenvalues are already exact, and so is each period."""


def _rotation_rows(ev: np.ndarray, classes: list[str]) -> tuple[list[int], np.ndarray]:
    """``(upper, rot)``: the upper-half-plane eigenvalues of undamped pairs (slow ones too: they stay in the
    refinement's model at their own angle) and which of them are rotations."""
    undamped = (PairClass.DAMPED, PairClass.GROWING)
    upper = [i for i, c in enumerate(classes) if c and c not in undamped and ev[i].imag > 0]
    return upper, np.array([classes[i] == PairClass.ROTATION for i in upper], dtype=bool)


def conjugate_pair(ev: np.ndarray, i: int) -> set[int]:
    """``{i, its conjugate's index}`` (:func:`~pos_geometry.analysis._recurrence_pairs.conjugates`)."""
    return {i, int(conjugates(ev)[i])}


def refined_periods(
    z: np.ndarray, ev: np.ndarray, classes: list[str], pred_err: dict[int, float]
) -> tuple[np.ndarray, np.ndarray]:
    """``(refined periods (k,), intervals (k, 2))`` of the rotations (both eigenvalues of a pair), NaN elsewhere:
    the angles refined on the trajectory with their standard errors (:func:`refine_angles`)."""
    k = len(ev)
    periods, interval = np.full(k, np.nan), np.full((k, 2), np.nan)
    upper, rot = _rotation_rows(ev, classes)
    if not rot.any():
        return periods, interval
    start = np.abs(np.angle(ev[upper]))
    if pred_err.get(1, math.inf) < EXACT:
        angles, errors = start, np.where(rot, 0.0, np.nan)
    elif rot.sum() > REFINE_CAP:
        return periods, interval
    else:
        angles, errors = refine_angles(z, start, rot)
    for i, a, e, r in zip(upper, angles, errors, rot, strict=True):
        if not r:
            continue
        for j in conjugate_pair(ev, i):
            periods[j] = 2 * math.pi / a
            if np.isfinite(e):
                interval[j] = period_interval(a, e, CONFIDENCE)
    return periods, interval


def drifts(
    z: np.ndarray,
    ev: np.ndarray,
    classes: list[str],
    pred_err: dict[int, float],
    whole: np.ndarray,
    seed: int,
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """``(angles (k, 2), errors (k, 2), drifting (k,))``: each rotation's angle refined on the first and on the
    second half of the window (:func:`refine_halves`, the refinement the intervals use), for both eigenvalues
    of its pair (NaN elsewhere, and everywhere when the map is exact, which cannot drift, or there are more
    than ``REFINE_CAP`` rotations); a pair drifts when the change passes :func:`drifting` and beats constant
    rotations with the table's own background (:func:`drift_p_value`, p ≤ ``DRIFT_ALPHA``). ``whole``: the
    whole window's angle of each eigenvalue (refined where it was)."""
    k = len(ev)
    angles, errors, moving = np.full((k, 2), np.nan), np.full((k, 2), np.nan), np.zeros(k, dtype=bool)
    upper, rot = _rotation_rows(ev, classes)
    if not rot.any() or pred_err.get(1, math.inf) < EXACT or rot.sum() > REFINE_CAP:
        return angles, errors, moving
    fitted, error = refine_halves(z, whole[upper], rot)
    screened = drifting(fitted, error, whole[upper]) & rot
    for row, i in enumerate(upper):
        change = abs(fitted[row, 0] - fitted[row, 1])
        drifts = bool(screened[row]) and (
            drift_p_value(z, whole[upper], rot, row, change, DRIFT_SURROGATES, seed + row) <= DRIFT_ALPHA
        )
        for j in conjugate_pair(ev, i):
            angles[j], errors[j], moving[j] = fitted[row], error[row], drifts
    return angles, errors, moving

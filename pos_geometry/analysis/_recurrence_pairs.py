"""Which eigenvalues of a fitted one-step map are rotations of the table, and why a fit does not apply.

The rules are :mod:`pos_geometry.analysis.recurrence`'s (its module docstring states them); the numbers
they use live here, re-exported there.
"""

from __future__ import annotations

import math

import numpy as np

from pos_geometry.analysis._recurrence_map import fit_map

__all__ = [
    "AUTO_CAP",
    "AUTO_VARIANCE",
    "MODULUS_TOLERANCE",
    "PERSISTENCE_RATIO",
    "RANK_TOLERANCE",
    "SMALL_TABLE",
    "SPREAD_TOLERANCE",
    "VARIANCE_CAP",
    "PairClass",
    "auto_components",
    "DRIFT_ALPHA",
    "DRIFT_CHANGE",
    "DRIFT_SURROGATES",
    "DRIFT_Z",
    "classify_pairs",
    "conjugates",
    "pair_classes",
    "drifting",
    "spread",
    "status_before_null",
]

AUTO_VARIANCE = 0.999
AUTO_CAP = 256
VARIANCE_CAP = 32
SMALL_TABLE = 32
SPREAD_TOLERANCE = 0.1
RANK_TOLERANCE = 1e-5
MODULUS_TOLERANCE = 0.05
PERSISTENCE_RATIO = 1.0
DRIFT_Z = 3.0
"""A rotation drifts when its angle on the two halves of the window differs by more than this many standard
errors (each half fitted by the variable-projection refinement the intervals use, its error scaled by the
residual's level near the angle: :mod:`~pos_geometry.analysis._recurrence_phase`)..."""
DRIFT_ALPHA, DRIFT_SURROGATES = 0.05, 39
"""...and the change beats constant rotations with the table's own background at this level, with this many
surrogates (:func:`~pos_geometry.analysis._recurrence_phase.drift_p_value`)..."""
DRIFT_CHANGE = 0.005
"""...and by more than this relative change (a change smaller than half a percent between the halves is not
a drift a reader could use, whatever its errors)."""


class PairClass:
    """The classes of an upper-half-plane eigenvalue ``λ = ρ e^{iα}`` of the one-step map."""

    ROTATION = "rotation"
    SLOW = "slower than the window"
    UNRESOLVED = "unresolved"
    UNSTABLE = "unstable"
    DAMPED = "damped"
    GROWING = "growing"
    DRIFTING = "drifting"
    BACKGROUND = "not above the background"


def classify_pairs(ev: np.ndarray, n: int, tolerance: float) -> list[str]:
    """A :class:`PairClass` for each eigenvalue in ``ev`` ``(k,)`` (``""`` for real ones and Im λ < 0): the
    rule of :func:`pair_classes` for one map."""
    return [str(c) for c in pair_classes(np.asarray(ev)[None], n, tolerance)[0]]


def conjugates(ev: np.ndarray) -> np.ndarray:
    """``(..., k)`` int: each eigenvalue's conjugate in a batch of maps ``ev`` ``(..., k)``: for ``Im λ > 0`` the
    lower-half eigenvalue nearest its mirror image ``conj(λ)``, for ``Im λ < 0`` the upper-half one, for a real
    eigenvalue itself (the one rule for pairing, read by :func:`pair_classes` and by the periods' pairs)."""
    ev = np.asarray(ev, dtype=np.complex128)
    mirror = np.abs(ev[..., None, :] - np.conj(ev)[..., :, None])  # [..., i, j] = |λ_j − conj(λ_i)|
    other_half = np.sign(ev.imag)[..., None, :] == -np.sign(ev.imag)[..., :, None]
    nearest = np.where(other_half, mirror, np.inf).argmin(axis=-1)
    return np.where(ev.imag == 0, np.arange(ev.shape[-1]), nearest)


def pair_classes(ev: np.ndarray, n: int, tolerance: float) -> np.ndarray:
    """``(..., k)`` str: a :class:`PairClass` for each eigenvalue of a batch of maps ``ev`` ``(..., k)`` (``""``
    for real ones and Im λ < 0). One rule, read by the recurrence for its own map and by the smooth-GP null's
    line test for every surrogate's (:func:`~pos_geometry.analysis.nulls.pair_background.eligible_angles`).

    Undamped (``| |λ| − 1 | ≤ tolerance``) pairs are rotations when they turn at least once within the
    ``n`` positions (``α ≥ 2π/n``) and lie at least one Fourier bin (``2π/n``) away in angle from every other
    eigenvalue but their own conjugate (the classical resolution of an ``n``-position window: nearer
    frequencies cannot be told apart from the window alone); slower undamped pairs are "slower than the
    window", nearer ones "unresolved".
    """
    ev = np.asarray(ev, dtype=np.complex128)
    k = ev.shape[-1]
    angles = np.abs(np.angle(ev))
    bin_width = 2 * math.pi / n
    own = np.eye(k, dtype=bool) | (np.arange(k) == conjugates(ev)[..., None])
    gap = np.abs(angles[..., None, :] - angles[..., :, None])
    near = np.where(own, np.inf, gap).min(axis=-1, initial=np.inf)
    mod = np.abs(ev)
    return np.select(
        [ev.imag <= 1e-12, mod > 1 + tolerance, mod < 1 - tolerance, angles < bin_width, near >= bin_width],
        [np.str_(""), PairClass.GROWING, PairClass.DAMPED, PairClass.SLOW, PairClass.ROTATION],
        default=PairClass.UNRESOLVED,
    )


def _matched_angles(m: np.ndarray, ev: np.ndarray) -> np.ndarray:
    """``(k,)``: for each eigenvalue in ``ev``, the angle of the nearest eigenvalue of ``m`` (one eigen-solve)."""
    sub = np.linalg.eigvals(m)
    return np.abs(np.angle(sub[np.argmin(np.abs(sub[None, :] - ev[:, None]), axis=1)]))


def drifting(angles: np.ndarray, errors: np.ndarray, whole: np.ndarray) -> np.ndarray:
    """``(k,)`` bool: the angle changes between the halves by more than :data:`DRIFT_Z` standard errors and
    more than :data:`DRIFT_CHANGE` of its size, and the whole window's angle ``whole`` ``(k,)`` lies between
    the two (within :data:`DRIFT_Z` errors): halves that both moved away from the whole window's rotation
    fitted something else (a background), not this rotation's drift."""
    with np.errstate(invalid="ignore", divide="ignore"):
        change = np.abs(angles[:, 0] - angles[:, 1])
        error = np.sqrt(errors[:, 0] ** 2 + errors[:, 1] ** 2)
        z = change / error
        relative = change / np.abs(angles).mean(axis=1)
        lo, hi = np.fmin(angles[:, 0], angles[:, 1]), np.fmax(angles[:, 0], angles[:, 1])
        between = (whole >= lo - DRIFT_Z * error) & (whole <= hi + DRIFT_Z * error)
    return (np.nan_to_num(z, posinf=np.inf) > DRIFT_Z) & (np.nan_to_num(relative) > DRIFT_CHANGE) & between


def status_before_null(
    ev: np.ndarray,
    classes: list[str],
    pred: dict[int, float],
    pers: dict[int, float],
    n: int,
    drift_words: list[str] | None = None,
) -> tuple[str, str] | None:
    """Why rotations do not apply, from the fit alone; None when only the null can tell."""
    moduli = np.abs(ev)
    if moduli.max(initial=0.0) > 1 + MODULUS_TOLERANCE:
        far = max(pred, default=None)
        error = f" (error {pred[far]:.3g}× the table's scale at h={far})" if far is not None else ""
        return "does not apply", (
            f"the fitted map grows (largest |λ| {float(moduli.max()):.4g} > 1 + {MODULUS_TOLERANCE}): its "
            f"h-step predictions diverge{error}, so it is not a one-parameter group of rotations"
        )
    if 1 in pred and pred[1] >= PERSISTENCE_RATIO * pers[1]:
        return "does not apply", (
            f"the fitted map predicts the next row no better than persistence z[t+1] = z[t] (one-step error "
            f"{pred[1]:.3g} vs {pers[1]:.3g}): a random-walk-like curve, whose eigenvalues near 1 are not rotations"
        )
    undamped = [
        c
        for c in classes
        if c
        in (PairClass.ROTATION, PairClass.SLOW, PairClass.UNRESOLVED, PairClass.UNSTABLE, PairClass.DRIFTING)
    ]
    if not undamped:
        return "does not apply", (
            f"no conjugate pair has |λ| within {MODULUS_TOLERANCE} of 1 (largest |λ| {float(moduli.max()):.3g}): "
            "the map damps rather than rotates"
        )
    if PairClass.ROTATION not in classes:
        slow, unstable = classes.count(PairClass.SLOW), classes.count(PairClass.UNSTABLE)
        unresolved = classes.count(PairClass.UNRESOLVED)
        parts = []
        if slow:
            parts.append(f"{slow} turn(s) less than once in the {n} positions (slower than the window)")
        if unresolved:
            parts.append(
                f"{unresolved} lie(s) within one Fourier bin (2π/{n}) of another eigenvalue (the window cannot "
                "separate them)"
            )
        if unstable:
            parts.append(
                f"{unstable} change(s) angle by more than {SPREAD_TOLERANCE:.0%} between the first and the last "
                "7/8 of the window"
            )
        if drift_words:
            parts.append("a drifting frequency is not a one-parameter group: " + "; ".join(drift_words))
        return "does not apply", "no undamped pair is testable: " + "; ".join(parts)
    return None


def auto_components(
    ratios: np.ndarray, d: int, n: int, center: bool, affine: bool, floor: float = 0.0
) -> int:
    """``n_components="auto"`` for a window of ``n`` positions and ``d`` columns whose PCA computed
    ``ratios`` (see the recurrence module docstring). A rank that only the window's shape limits (a
    256-row window of 768 columns has rank 255 once centred) is not a low-rank code. ``floor``: the edge of
    the storage rounding's spectrum relative to the largest singular value (``_dtypes.rounding_edge``);
    directions below twice it are rounding, so a half-precision code's rank is counted above it (a float16
    Whisper table has 150 directions above its rounding, not 384). The result leaves the
    fit at least one equation more than its unknowns (``n ≥ k + 3 + affine``)."""
    most = max(2, n - 3 - int(affine))
    if d <= SMALL_TABLE:
        return max(2, min(d, int(ratios.size), most))
    ratios = np.clip(ratios, 0.0, None)
    full = min(n - 1 if center else n, d)  # the largest rank the window's shape allows
    if ratios.size and ratios[0] > 0:
        rank = int(np.count_nonzero(np.sqrt(ratios / ratios[0]) > max(RANK_TOLERANCE, 2 * floor)))
        if rank < min(int(ratios.size), full):  # an exact code of low rank (sinusoidal, rotary): all of it
            return max(2, min(rank, most))
    reached = np.nonzero(np.cumsum(ratios) >= AUTO_VARIANCE)[0]
    k = int(reached[0]) + 1 if reached.size else int(ratios.size)
    return max(2, min(k, VARIANCE_CAP, int(ratios.size), most))


def spread(z: np.ndarray, ev: np.ndarray, affine: bool, rcond: float) -> np.ndarray:
    """Relative change of each eigenvalue's angle between the fits on the first and the last 7/8 of ``z``."""
    n, k = z.shape
    cut = max(1, n // 8)
    out = np.full(ev.shape, np.nan)
    if n - cut < k + 3 + int(affine):
        return out
    subs = [fit_map(part, affine, rcond)[0] for part in (z[: n - cut], z[cut:])]
    angle = np.abs(np.angle(ev))
    matched = [_matched_angles(m, ev) for m in subs]
    for i in range(len(ev)):
        if angle[i] > 0:
            shift = max(float(a[i]) - angle[i] for a in matched)
            out[i] = abs(shift) / angle[i]
    return out

"""Is each rotation of a fitted one-step map a line in the spectrum, above a smooth background?

A smooth curve's one-step map has undamped conjugate pairs too: PCA turns a Gaussian-process curve into
near-sinusoids, and the slowest of them (one or two turns in the window) are resolved from the rest and pass
as rotations. The recurrence's null tests the map as a whole (its gain over persistence); a table with one
real rotation beside such a background beats it, and every background pair would then be reported with it
(a period-301 circle on a GP background of twice its variance, 1024 × 768: in 5 of 20 tables the reported
"rotation" was a background pair at 476–822, and its plane then a "helix").

Each rotation is therefore tested on its own, as a line: the power of the window's top-``k`` (centred)
trajectory at the rotation's angle (the periodogram summed over the ``k`` coordinates, on a grid of half
Fourier bins, the largest within half a bin of the angle) over the mean power there of the table's smooth-GP
surrogates (the recurrence's own null, same seed, through the same PCA): a rotation carries a line that a
smooth background with the table's spectrum does not put at its frequency, however many other rotations
share the table. The background's pairs are where its own power happens to be high, so each surrogate goes
through the same selection: the same map is fitted to it, and its statistic is the largest ratio among its
own pairs that could have been called rotations (undamped, turning at least once in the window, a Fourier
bin from every other eigenvalue; the stability check across overlapping windows is left out, which can
only admit more pairs), 0 when it has none. Comparing each rotation with that maximum is a max-statistic
test (Westfall & Young's single step) of the selected pairs: the chance that any background pair is
selected and passes is at most ``α`` however many pairs were found.
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np
import torch

from pos_geometry.analysis._recurrence_pairs import MODULUS_TOLERANCE, PairClass, pair_classes
from pos_geometry.analysis.nulls.monte_carlo import NullTest, monte_carlo_p

__all__ = [
    "BACKGROUND_NULL",
    "PAD",
    "background_test",
    "eligible_angles",
    "mark_background",
    "power_spectra",
    "surrogate_columns",
]

BACKGROUND_NULL = "smooth_gp"
"""The background a rotation's line must stand above (the recurrence's smooth-GP null, same seed)."""
PAD = 2
"""The spectra are read on a grid this many times finer than the Fourier bins."""


def power_spectra(z: torch.Tensor) -> torch.Tensor:
    """``(B, PAD·n // 2 + 1)``: the periodogram of each centred trajectory ``z`` ``(B, n, k)``, summed over its
    ``k`` coordinates, over its total sum of squares (scale-free), at angles ``2π g / (PAD·n)``."""
    z = z.to(torch.float64)
    z = z - z.mean(dim=-2, keepdim=True)
    power = torch.fft.rfft(z, n=PAD * z.shape[-2], dim=-2).abs().square().sum(dim=-1)
    return power / (z * z).sum(dim=(-2, -1))[:, None].clamp_min(1e-300)


def eligible_angles(maps: torch.Tensor, n: int) -> torch.Tensor:
    """``(B, k)``: the angles (rad/position) of the upper-half-plane eigenvalues of one-step maps fitted to
    ``n``-position trajectories (``maps`` ``(B, k+1, k+1)`` in row form, as
    :func:`~pos_geometry.analysis._recurrence_map.fitted_gain` returns them) that could be rotations: the
    recurrence's own rule (:func:`~pos_geometry.analysis._recurrence_pairs.pair_classes`: undamped, turning at
    least once in the window, a Fourier bin from every other eigenvalue), without its stability check; NaN
    elsewhere."""
    k = maps.shape[-1] - 1
    values = torch.linalg.eigvals(maps[:, :k, :k].to("cpu", torch.float64)).numpy()
    rotation = pair_classes(values, n, MODULUS_TOLERANCE) == PairClass.ROTATION
    angle = torch.from_numpy(np.where(rotation, np.abs(np.angle(values)), np.nan))
    return angle.to(maps.device)


def surrogate_columns(z: torch.Tensor, maps: torch.Tensor) -> torch.Tensor:
    """``(B, G + k)``: each trajectory's :func:`power_spectra` (``z`` ``(B, n, k)``) and the
    :func:`eligible_angles` of its fitted ``maps``, side by side."""
    return torch.cat([power_spectra(z), eligible_angles(maps, z.shape[-2]).to(z.device)], dim=-1)


def _near(angles: np.ndarray, n: int, size: int) -> list[np.ndarray]:
    """The grid points within half a Fourier bin of each angle."""
    centre = np.asarray(angles, dtype=np.float64) * PAD * n / (2 * math.pi)
    half = PAD / 2
    return [np.arange(max(0, math.ceil(c - half)), min(size - 1, math.floor(c + half)) + 1) for c in centre]


def _ratios(power: np.ndarray, angles: np.ndarray, n: int) -> np.ndarray:
    """``(J,)``: the largest of ``power`` ``(G,)`` within half a Fourier bin of each angle."""
    return np.array([float(power[g].max()) if g.size else 0.0 for g in _near(angles, n, power.size)])


def background_test(
    columns: np.ndarray, z: np.ndarray, angles: np.ndarray, alpha: float, method: str
) -> tuple[np.ndarray, np.ndarray, NullTest]:
    """``(ratios (J,), p-values (J,), test)`` of the rotations at ``angles`` ``(J,)`` (rad/position) of the
    trajectory ``z`` ``(n, k)``: each rotation's power over the surrogates' mean power at its angle, and its
    p-value against the largest such ratio among each surrogate's own eligible pairs (module docstring);
    ``test``: the strongest rotation's :class:`NullTest` at ``alpha``. ``columns`` ``(S, G + k)``: the
    :func:`surrogate_columns` of the table's :data:`BACKGROUND_NULL` surrogates, drawn by ``method``, through
    the same PCA as ``z``."""
    n, k = z.shape
    spectra, eligible = columns[:, :-k], columns[:, -k:]
    mean = np.maximum(spectra.mean(axis=0), 1e-300)
    largest = np.array(
        [
            _ratios(s / mean, a[np.isfinite(a)], n).max(initial=0.0)
            for s, a in zip(spectra, eligible, strict=True)
        ]
    )
    observed = power_spectra(torch.from_numpy(np.asarray(z, dtype=np.float64))[None])[0].numpy() / mean
    ratios = _ratios(observed, angles, n)
    p = (1 + (largest[None, :] >= ratios[:, None] * (1 - 1e-12)).sum(axis=1)) / (1 + largest.size)
    test = monte_carlo_p(
        "rotation_line_over_background",
        float(ratios.max(initial=0.0)),
        BACKGROUND_NULL,
        largest,
        alpha,
        method,
    )
    return ratios, p.astype(np.float64), test


def mark_background(
    z: np.ndarray,
    ev: np.ndarray,
    classes: list[str],
    columns: np.ndarray,
    tests: tuple[NullTest, ...],
    background: np.ndarray,
    null: dict[str, Any],
) -> tuple[tuple[NullTest, ...], tuple[str, str] | None, str]:
    """Each rotation of the map (``classes`` of its eigenvalues ``ev`` ``(k,)``, fitted to ``z`` ``(n, k)``), at
    its eigenvalue's angle, against the smooth background (:func:`background_test` on the surrogates'
    ``columns``): writes its p-value into ``background`` ``(k,)`` and turns ``classes`` of those not above it
    into ``"not above the background"``. Returns the tests with the strongest rotation's, the verdict (None, or
    "not significant" when no rotation is above the background) and the words for the pairs left out."""
    upper = [i for i, c in enumerate(classes) if c == PairClass.ROTATION and ev[i].imag > 0]
    if not upper:
        return tests, None, ""
    angles = np.abs(np.angle(ev[upper]))  # the map's own angles: the surrogates' pairs are selected by theirs
    ratios, p, line = background_test(columns, z, angles, null["alpha"], null["method"])
    background[upper] = p
    out = [(2 * math.pi / a, r, q) for a, r, q in zip(angles, ratios, p, strict=True) if q > null["alpha"]]
    for i, q in zip(upper, p, strict=True):
        if q > null["alpha"]:
            classes[i] = PairClass.BACKGROUND
    left = "; ".join(
        f"period {t:.4g}: {r:.3g}× the background's mean power there, p = {q:.3g}" for t, r, q in out
    )
    if not line.significant:
        return (
            (*tests, line),
            (
                "not significant",
                f"the map beats its nulls as a whole, but none of its {len(upper)} rotation pair(s) is a line above a "
                f"smooth background at its frequency ({left}; the largest ratio among each surrogate's own rotation "
                f"pairs, 0 for none: median {line.null_median:.3g}, 95% {line.null_q95:.3g})",
            ),
            "",
        )
    words = f"{len(out)} more pair(s) not above it, not reported: {left}" if out else ""
    return (*tests, line), None, words

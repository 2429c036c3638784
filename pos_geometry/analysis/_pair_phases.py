"""The phases of a table's stored column pairs: which arrangement of its columns in pairs rebuilds it, and
each pair's frequency with its standard error.

A sinusoidal or rotary table puts each frequency in one pair of columns (see :mod:`pos_geometry.analysis.identify`
for the arrangements). For each arrangement, every pair's phase ``φ_i(p) = atan2(sine, cosine)`` is unwrapped
and fitted by a line (least squares, float64); the table is rebuilt from those slopes and one amplitude, and the
arrangement that rebuilds it best is the table's. :func:`identify` reads formulas from it;
:func:`stored_planes` gives the recurrence each plane fitted on its own pair.
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np
import torch

__all__ = [
    "TOLERANCE",
    "best_arrangement",
    "pair_indices",
    "rebuild",
    "standard_errors",
    "stored_planes",
    "unit_scaled",
]

TOLERANCE = 1e-2
"""The relative error within which a rebuilt table is the table (a bfloat16 copy of a formula is within 3e-3, a
float16 copy within 4e-4; a learned table is near 1)."""


def pair_indices(d: int, layout: str, order: str) -> tuple[np.ndarray, np.ndarray]:
    """Column indices of the sines and the cosines ``(d/2,)`` each."""
    half = d // 2
    first, second = (
        (np.arange(0, d, 2), np.arange(1, d, 2))
        if layout == "interleaved"
        else (np.arange(half), np.arange(half, d))
    )
    return (first, second) if order == "sin-cos" else (second, first)


def _rule(d: int, layout: str) -> np.ndarray:
    """``c_i`` with ``log ω_i = −c_i log(base)``: ``2i/d`` (interleaved) or ``i/(d/2 − 1)`` (blocks)."""
    i = np.arange(d // 2, dtype=np.float64)
    return 2 * i / d if layout == "interleaved" else i / (d // 2 - 1)


def rebuild(
    positions: np.ndarray,
    freqs: np.ndarray,
    amplitude: float,
    sin_cols: np.ndarray,
    cos_cols: np.ndarray,
    d: int,
) -> np.ndarray:
    """The table ``(n, d)`` holding ``amplitude·sin(p ω_i)`` in ``sin_cols`` and ``amplitude·cos(p ω_i)`` in
    ``cos_cols``, for ``positions`` ``(n,)`` and ``freqs`` ``(d/2,)``."""
    ang = positions[:, None] * freqs[None, :]
    out = np.empty((positions.size, d))
    out[:, sin_cols] = amplitude * np.sin(ang)
    out[:, cos_cols] = amplitude * np.cos(ang)
    return out


def _fit(x: np.ndarray, positions: np.ndarray, layout: str, order: str) -> dict[str, Any]:
    """One arrangement's fit of ``x`` ``(n, d)``: each pair's phase slope ``freqs`` ``(d/2,)`` and the scatter of
    its phase about the line ``phase_noise`` ``(d/2,)``, the positions' ``spread`` (``Σ (p − p̄)²``), one
    ``amplitude``, the rebuild's relative error ``residual``, and the ``base`` of the arrangement's rule with its
    rebuild's error ``formula`` (None when the slopes follow no positive base)."""
    d = x.shape[1]
    s_cols, c_cols = pair_indices(d, layout, order)
    s, c = x[:, s_cols], x[:, c_cols]
    amplitude = float(np.sqrt(np.mean(s**2 + c**2)))
    phase = np.unwrap(np.arctan2(s, c), axis=0)  # (n, d/2)
    # the slope of φ(p) = ω p + c (the rebuild below, from absolute positions, checks c = ω·start mod 2π)
    centred = positions - positions.mean()
    spread = float(centred @ centred)
    freqs = centred @ (phase - phase.mean(axis=0)) / spread
    line = phase - phase.mean(axis=0) - centred[:, None] * freqs[None, :]
    phase_noise = np.sqrt(np.sum(line**2, axis=0) / max(positions.size - 2, 1))  # (d/2,)
    norm = float(np.linalg.norm(x)) or 1.0
    residual = float(np.linalg.norm(x - rebuild(positions, freqs, amplitude, s_cols, c_cols, d))) / norm
    base = formula = None
    coef = _rule(d, layout)
    if np.all(freqs > 0) and coef[-1] > 0:
        log_base = float(-(coef @ np.log(freqs)) / (coef @ coef))
        if math.isfinite(log_base) and log_base > 0:
            base = math.exp(log_base)
            formula = (
                float(
                    np.linalg.norm(
                        x - rebuild(positions, np.exp(-coef * log_base), amplitude, s_cols, c_cols, d)
                    )
                )
                / norm
            )
    return {
        "layout": layout,
        "order": order,
        "freqs": freqs,
        "phase_noise": phase_noise,
        "spread": spread,
        "amplitude": amplitude,
        "residual": residual,
        "base": base,
        "formula": formula,
    }


def unit_scaled(table: np.ndarray) -> tuple[np.ndarray | None, float]:
    """``(table / scale, scale)`` with ``scale`` the power of two at or just above the largest ``|value|``: the
    division is exact (only exponents change), and every norm, square and ratio taken on the result stays far
    from float64's overflow and underflow, so a table scaled by 1e300 or 1e-300 gets the answers it gets
    unscaled. ``(None, peak)`` when the table is zero, or holds NaN or infinity (``peak`` says which)."""
    peak = float(np.max(np.abs(table))) if table.size else 0.0
    if not math.isfinite(peak) or peak == 0.0:
        return None, peak
    scale = math.ldexp(1.0, math.frexp(peak)[1])
    return table / scale, scale


def best_arrangement(table: np.ndarray, positions: np.ndarray) -> dict[str, Any]:
    """The :func:`_fit` of the arrangement (layout and order of the pairs) that rebuilds ``table`` best."""
    fits = [_fit(table, positions, layout, order) for layout in ("interleaved", "blocks")
            for order in ("sin-cos", "cos-sin")]  # fmt: skip
    return min(fits, key=lambda f: (f["residual"], f["formula"] if f["formula"] is not None else math.inf))


def standard_errors(fit: dict[str, Any], n: int) -> np.ndarray:
    """``(d/2,)``: the standard error of each pair's phase slope, from the scatter of its phase about the
    line; at least the slope's own float64 arithmetic (a sum of ``n`` products: ``4 √n ε |ω|``), which is
    what limits an exact table's."""
    floor = 4 * math.sqrt(n) * float(np.finfo(np.float64).eps) * np.abs(fit["freqs"])
    return np.maximum(fit["phase_noise"] / math.sqrt(fit["spread"]), floor)


def _may_pair(table: np.ndarray, layout: str) -> bool:
    """Whether ``layout`` can pass :data:`TOLERANCE`, from the pairs' radii alone (a cheap test first). A point's
    distance to the circle of radius ``A`` is at most its distance to any point on it, so the rebuild's error
    is at least ``‖r − A‖`` (``r`` the pairs' radii, ``A`` the amplitude :func:`_fit` uses)."""
    first, second = pair_indices(table.shape[1], layout, "sin-cos")
    r2 = table[:, first] ** 2 + table[:, second] ** 2
    amplitude = math.sqrt(float(r2.mean()))
    norm = float(np.linalg.norm(table)) or 1.0
    return float(np.linalg.norm(np.sqrt(r2) - amplitude)) <= TOLERANCE * norm


def stored_planes(rows: torch.Tensor, start: int = 0) -> tuple[np.ndarray, np.ndarray, str] | None:
    """The rotation planes that a table's stored columns hold, one per pair of columns.

    ``rows`` ``(n, d)``: the table at positions ``start .. start + n - 1``. When some arrangement of its
    columns in pairs (interleaved or blocks, sine or cosine first) rebuilds it to :data:`TOLERANCE` -- a
    sinusoidal or rotary table, whatever its frequencies -- returns ``(frequencies (d/2,), standard errors
    (d/2,), arrangement)`` in rad/position; else None. Each frequency is the least-squares slope of its
    pair's unwrapped phase: at high signal-to-noise the maximum-likelihood estimate of one rotation in white
    noise (Tretter, 1985), and, reading only its own two columns, undisturbed by any neighbouring frequency
    however close (where a shift map of the whole table cannot separate planes within a Fourier bin of each
    other). Its standard error is the slope's, from the scatter of the phase about its line."""
    n, d = int(rows.shape[0]), int(rows.shape[1])
    if n < 3 or d < 4 or d % 2:
        return None
    table = unit_scaled(rows.detach().to("cpu", torch.float64).numpy())[0]
    if table is None or not any(_may_pair(table, layout) for layout in ("interleaved", "blocks")):
        return None
    best = best_arrangement(table, np.arange(start, start + n, dtype=np.float64))
    if not best["residual"] <= TOLERANCE:
        return None
    where = f"{best['layout']} layout, {best['order']} pairs"
    return best["freqs"], standard_errors(best, n), where

"""The periodicity test's statistic: each series' power over a background that every null family fits.

A series' tapered power ``P(f)`` (:func:`~pos_geometry.analysis._spectra.tapered_power`) is first divided by
its own background ``E(f)`` (:func:`whitened`): the larger of the AR(1)-plus-white spectrum fitted to it and
a running median of its spectrum (:func:`~pos_geometry.analysis._spectra.local_background`). The surrogates
of each null family ``g`` go through the same steps, and their ratios' level at each frequency, ``C_g(f)``
(the 95th percentile over that of a whitened bin, :data:`QUANTILE`), is what that family leaves once
whitened so (≈ 1 where ``E`` fits it; a smooth curve's spectrum falls off faster than any AR(1) spectrum).
:func:`against_nulls` raises the background to ``max(1, C_g(f))`` over the families and gives each family's
max-T null: every surrogate's largest ratio over the band, its own ratio left out of its family's level, so
it is judged against a background it did not make, as the table is.
"""

from __future__ import annotations

import numpy as np
import torch

from pos_geometry.analysis._spectra import local_background, red_background, tapered_power

__all__ = ["against_nulls", "whitened"]


def whitened(ms: torch.Tensor, zs: torch.Tensor, *, pad: int) -> torch.Tensor:
    """Power over own background of the similarity-by-offset curves ``ms`` ``(c, L₁)`` and the PCA
    coordinates ``zs`` ``(c, k, L₂)``: ``(c, F₁ + k·F₂)``, the series one after the other."""
    po, pp = tapered_power(ms, pad=pad)[0], tapered_power(zs, pad=pad)[0]
    po = po / torch.maximum(red_background(ms, po.shape[-1], pad=pad), local_background(po, pad=pad))
    pp = pp / torch.maximum(red_background(zs, pp.shape[-1], pad=pad), local_background(pp, pad=pad))
    return torch.cat([po, pp.reshape(pp.shape[0], -1)], dim=1)


def against_nulls(
    observed: np.ndarray, null_power: dict[str, np.ndarray], band: np.ndarray, lengths: list[int]
) -> tuple[np.ndarray, dict[str, np.ndarray]]:
    """The table's statistic on every bin and each family's max-T null.

    ``observed`` ``(F,)``: the table's :func:`whitened` spectra; ``null_power``: per family, the surrogates'
    ``(S, B)`` on the ``B`` bins in ``band`` ``(F,)`` (bool); ``lengths``: the series' lengths in ``F``.
    Returns ``(ratio (F,), {null: (S,)})``: the observed spectra over the background (outside the band,
    where nothing is tested, the nearest in-band background of the same series, so a drawn curve stays
    continuous) and each surrogate's largest ratio over the band.
    """
    background, null_max = _family_backgrounds(null_power)
    full = np.full(observed.shape, np.nan)
    full[band] = background
    return observed / _fill_outside(full, lengths), null_max


QUANTILE = 0.95
"""Each family's level at a frequency is its surrogates' 95th percentile there, over that of a whitened bin
(``−ln 0.05``: the power over its mean of one Fourier bin of noise is exponential)."""


def _family_backgrounds(null_power: dict[str, np.ndarray]) -> tuple[np.ndarray, dict[str, np.ndarray]]:
    """The background and each family's max-T null from the surrogates' whitened spectra ``{null: (S, B)}``.

    Returns ``(background (B,), {null: (S,)})``. A family's level ``C_g`` at a bin is its surrogates'
    :data:`QUANTILE` there over ``−ln(1 − QUANTILE)`` (≈ 1 where the whitening fits it; higher where the
    family's ratios are larger or heavier-tailed, so no bin's tail dominates the max-T). The background is
    ``max(1, C_g)`` over the families; a surrogate's value is its largest ratio to the background with its
    own spectrum left out of its family's quantile (the other families' levels unchanged)."""
    ref = -np.log1p(-QUANTILE)
    levels, loo = {}, {}
    for null, p in null_power.items():
        p = p.astype(np.float64)
        s = p.shape[0]
        j = min(int(np.ceil(QUANTILE * s)) - 1, s - 1)
        jl = min(int(np.ceil(QUANTILE * (s - 1))) - 1, s - 2) if s > 1 else j
        ranked = np.partition(p, sorted({j, jl, min(jl + 1, s - 1)}), axis=0)  # the order statistics used
        levels[null] = ranked[j] / ref
        if s > 1:  # the same order statistic of the other S − 1: one lower for a surrogate at or above it
            above = p >= ranked[jl + 1][None, :]
            loo[null] = np.where(above, ranked[jl][None, :], ranked[jl + 1][None, :]) / ref
        else:
            loo[null] = np.broadcast_to(levels[null], p.shape)
    background = np.maximum.reduce(list(levels.values())).clip(min=1.0)
    out = {}
    for null, p in null_power.items():
        others = [m for name, m in levels.items() if name != null]
        rest = np.maximum.reduce(others) if others else np.ones_like(background)
        out[null] = (p / np.maximum(np.maximum(loo[null], rest), 1.0)).max(axis=1)
    return background, out


def _fill_outside(values: np.ndarray, lengths: list[int]) -> np.ndarray:
    """Each series' NaN entries (outside the band) set to the nearest finite entry of the same series."""
    out, start = values.copy(), 0
    for length in lengths:
        seg = out[start : start + length]
        good = np.flatnonzero(np.isfinite(seg))
        if good.size:
            idx = np.arange(length)
            nearest = good[np.clip(np.searchsorted(good, idx), 1, good.size) - 1]
            upper = good[np.clip(np.searchsorted(good, idx), 0, good.size - 1)]
            pick = np.where(np.abs(upper - idx) < np.abs(nearest - idx), upper, nearest)
            seg[:] = seg[pick]
        else:
            seg[:] = 1.0
        start += length
    return out

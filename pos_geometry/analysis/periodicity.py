"""Periodicity of a positional table: similarity by offset, spectra, tested periods, sinusoidal columns.

For one matrix ``X`` ``(n, d)`` (rows = positions of the window) :func:`periodicity` computes, on the
device ``X`` lives on:

* ``similarity`` ``(n, n)``: cosine similarity between positions;
* ``mean_similarity`` ``(n,)``: the mean of each diagonal, i.e. the mean similarity at offset ``|i − j|``;
* ``toeplitz_score``: the fraction of the off-diagonal similarities' variance explained by a function of
  the offset alone, ``1 − Σ_{i≠j}(S_ij − m(|i−j|))² / Σ_{i≠j}(S_ij − S̄)²`` (1 = perfectly Toeplitz, i.e. a
  purely relative-position code; ``m`` is ``mean_similarity``, the least-squares function of the offset);
* spectra: the normalised power (Hann taper, linear detrend, 8× zero padding; see ``_fourier.tapered_power``)
  of the mean-similarity curve over offsets ``1..n−1`` and of each of the top ``n_pcs`` PCA coordinates
  (from :func:`pos_geometry.analysis.pca.pca`);
* ``peaks``: up to ``n_peaks`` dominant periods per series, each with a permutation p-value;
* columns: each column, as a function of position, fitted by ``c + a cos(wt) + b sin(wt)`` with ``w``
  searched; the fraction with R² ≥ ``column_r2_threshold`` and their periods.

The null hypothesis for the p-values is **"positions are exchangeable"** (no order at all): surrogates
permute the rows of ``X`` (seeded ``numpy.random.Generator``). Phase-randomised surrogates would keep the
power spectrum and so could not test for a period. A row permutation leaves the PCA unchanged and permutes
its coordinates, and turns the similarity matrix into ``S[π][:, π]``, so surrogates are cheap. Multiple
testing over frequencies and series is controlled with maxima: for each series (the mean-similarity
curve, each PC) the statistic is the maximum normalised power over frequencies, whose raw p-value is
``(1 + #{surrogates with max ≥ P}) / (1 + n_surrogates)``; across series the raw p-values are combined by
the Westfall–Young min-P step (the adjusted p-value is the share of the observed + surrogate tables
whose smallest per-series p-value is ≤ the raw one). This controls the family-wise error over every
reported peak, and unlike a max over raw powers it does not let a series with a peaky null (a PC)
swamp one with a flat null (the offset curve). The smallest attainable p-value is
``1 / (1 + n_surrogates)``. Only periods with at least ``min_cycles`` cycles in the series are considered. A slow trend is "not
exchangeable" too, so a significant peak near the window length means "ordered structure at that
scale", not necessarily an oscillation.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

import numpy as np
import torch

from pos_geometry.analysis._batch import BatchResult, pca_items
from pos_geometry.analysis._fourier import best_sinusoid, tapered_power, work_dtype
from pos_geometry.analysis._inputs import as_batch, parse_window
from pos_geometry.analysis._results import Result
from pos_geometry.embedding import Provenance
from pos_geometry.errors import InvalidArgumentError

__all__ = ["PeriodPeak", "PeriodicityResult", "periodicity"]

_PAD = 8


@dataclass(frozen=True)
class PeriodPeak:
    """A spectral peak: ``series`` (``"mean_similarity"`` or ``"PC1"``...), ``period`` in positions."""

    series: str
    period: float
    power_fraction: float
    p_value: float
    significant: bool


@dataclass(frozen=True, eq=False)
class PeriodicityResult(Result):
    """Periodicity analysis of one matrix (``n`` positions in ``window``, ``d`` columns).

    Tensors stay on the input's device: ``similarity`` ``(n, n)``, ``mean_similarity`` ``(n,)`` (index =
    offset), ``offset_spectrum`` ``(F₁,)`` with ``offset_periods`` ``(F₁,)``, ``pc_spectrum`` ``(n_pcs, F₂)``
    with ``pc_periods`` ``(F₂,)``, ``column_periods``/``column_r2`` ``(d,)``. ``peaks`` are sorted by
    power; ``column_fraction`` is the share of columns with R² ≥ ``column_r2_threshold``.
    """

    similarity: torch.Tensor
    mean_similarity: torch.Tensor
    toeplitz_score: float
    offset_spectrum: torch.Tensor
    offset_periods: torch.Tensor
    pc_spectrum: torch.Tensor
    pc_periods: torch.Tensor
    peaks: tuple[PeriodPeak, ...]
    column_periods: torch.Tensor
    column_r2: torch.Tensor
    column_r2_threshold: float
    column_fraction: float
    n_surrogates: int
    seed: int | None
    alpha: float
    window: tuple[int, int]
    n_positions: int
    provenance: Provenance

    @property
    def dominant_periods(self) -> tuple[PeriodPeak, ...]:
        """The significant peaks (p ≤ ``alpha``), strongest first."""
        return tuple(p for p in self.peaks if p.significant)

    def summary_rows(self) -> list[tuple[str, str]]:
        good = self.column_r2 >= self.column_r2_threshold
        col_periods = torch.sort(self.column_periods[good]).values.cpu().tolist()
        shown = ", ".join(f"{p:.4g}" for p in col_periods[:8]) + (" ..." if len(col_periods) > 8 else "")
        peaks = "; ".join(
            f"{p.series}: {p.period:.4g} (p={p.p_value:.3g})" for p in self.peaks if p.significant
        )
        return [
            ("window", f"positions {self.window[0]}..{self.window[1] - 1} ({self.n_positions})"),
            ("Toeplitz score", f"{self.toeplitz_score:.4f}"),
            (
                "mean similarity at offset 1, 8, 64",
                ", ".join(
                    f"{float(self.mean_similarity[o]):.3f}" if o < self.n_positions else "-"
                    for o in (1, 8, 64)
                ),
            ),
            (f"significant periods (α={self.alpha})", peaks or "none"),
            (
                f"columns with sinusoid R² ≥ {self.column_r2_threshold}",
                f"{self.column_fraction:.1%} ({shown or '-'})",
            ),
            ("surrogates", f"{self.n_surrogates} row permutations, seed={self.seed}"),
        ]


def _offset_means(s: torch.Tensor, offset_index: torch.Tensor, counts: torch.Tensor) -> torch.Tensor:
    """Mean of each diagonal of ``s`` ``(..., n, n)`` → ``(..., n)``."""
    flat = s.reshape(*s.shape[:-2], -1)
    idx = offset_index.reshape(-1).expand_as(flat)
    return (
        torch.zeros(*s.shape[:-2], counts.shape[0], dtype=s.dtype, device=s.device).scatter_add_(
            -1, idx, flat
        )
        / counts
    )


def _max_stat(power: torch.Tensor, band: torch.Tensor) -> torch.Tensor:
    return power[..., band].amax(dim=-1)


def _peaks(power: torch.Tensor, band: torch.Tensor, n_peaks: int) -> list[int]:
    """Indices of the ``n_peaks`` strongest local maxima in ``band``, at least two native bins apart."""
    p = power.clone()
    p[~band] = -1.0
    is_max = torch.zeros_like(band)
    is_max[1:-1] = (p[1:-1] >= p[:-2]) & (p[1:-1] >= p[2:]) & band[1:-1]
    out: list[int] = []
    for i in torch.argsort(p, descending=True).tolist():
        if len(out) == n_peaks or p[i] < 0:
            break
        if is_max[i] and all(abs(i - j) >= 2 * _PAD for j in out):
            out.append(i)
    return out


def _interpolated_period(power: torch.Tensor, i: int, length: int) -> float:
    """Period of the peak at bin ``i`` (bin ``i`` ↔ frequency index ``i + 1``), parabola-interpolated."""
    shift = 0.0
    if 0 < i < power.shape[0] - 1:
        a, b, c = (float(v) for v in power[i - 1 : i + 2])
        denom = a - 2 * b + c
        shift = 0.5 * (a - c) / denom if denom < 0 else 0.0
    return _PAD * length / (i + 1 + shift)


def _analyse(x, coords, prov, window, *, n_surrogates, seed, alpha, n_peaks, min_cycles, threshold):
    n, dev = x.shape[0], x.device
    dt = work_dtype(dev)
    xw = x.to(dt)
    xn = xw / torch.linalg.vector_norm(xw, dim=1, keepdim=True).clamp_min(torch.finfo(dt).tiny)
    sim = xn @ xn.T
    pos = torch.arange(n, device=dev)
    offset_index = (pos[:, None] - pos[None, :]).abs()
    counts = torch.bincount(offset_index.reshape(-1), minlength=n).to(dt)
    mean_sim = _offset_means(sim, offset_index, counts)
    off = offset_index > 0
    resid = (sim - mean_sim[offset_index])[off]
    total = sim[off] - sim[off].mean()
    toeplitz = float(1 - (resid @ resid) / (total @ total)) if float(total @ total) > 0 else 1.0

    z = coords.to(dt).T  # (c, n)
    p_off, per_off = tapered_power(mean_sim[1:], pad=_PAD)
    p_pc, per_pc = tapered_power(z, pad=_PAD)
    band_off, band_pc = per_off <= (n - 1) / min_cycles, per_pc <= n / min_cycles

    # Row 0: the observed table; rows 1..S: row-permuted surrogates. T[r, j] = max power of series j.
    rng = np.random.default_rng(seed)
    perms = torch.from_numpy(rng.permuted(np.tile(np.arange(n), (n_surrogates, 1)), axis=1)).to(dev)
    stats = [torch.cat([_max_stat(p_off, band_off)[None], _max_stat(p_pc, band_pc)])[None]]
    chunk = max(1, 2**23 // (n * n))
    for s in range(0, n_surrogates, chunk):
        pi = perms[s : s + chunk]
        ms = _offset_means(sim[pi[:, :, None], pi[:, None, :]], offset_index, counts)
        stat_off = _max_stat(tapered_power(ms[:, 1:], pad=_PAD)[0], band_off)
        stat_pc = _max_stat(tapered_power(z[:, pi].transpose(0, 1), pad=_PAD)[0], band_pc)
        stats.append(torch.cat([stat_off[:, None], stat_pc], dim=1))
    t_all = torch.cat(stats)  # (S + 1, m)
    null = t_all[1:]
    # Westfall–Young min-P: each row's smallest per-series p-value, ranks taken over all S + 1 rows.
    p_rows = (t_all[None, :, :] >= t_all[:, None, :]).sum(dim=1).to(dt) / (n_surrogates + 1)  # (S + 1, m)
    min_p = p_rows.amin(dim=1)

    def p_value(j: int, power: float) -> float:
        raw = (1 + int((null[:, j] >= power).sum())) / (n_surrogates + 1)
        return float((min_p <= raw + 1e-12).sum()) / (n_surrogates + 1)

    peaks = []
    series = [("mean_similarity", p_off, band_off)] + [
        (f"PC{i + 1}", p_pc[i], band_pc) for i in range(p_pc.shape[0])
    ]
    for j, (name, pw, band) in enumerate(series):
        length = n - 1 if j == 0 else n
        for i in _peaks(pw, band, n_peaks):
            pv = p_value(j, float(pw[i]))
            peaks.append(PeriodPeak(name, _interpolated_period(pw, i, length), float(pw[i]), pv, pv <= alpha))
    peaks.sort(key=lambda p: p.p_value - p.power_fraction * 1e-9)

    t = torch.arange(window[0], window[1], dtype=dt, device=dev)
    w, r2 = best_sinusoid(xw, t, min_turns=min_cycles)
    return PeriodicityResult(
        similarity=sim.to(x.dtype),
        mean_similarity=mean_sim,
        toeplitz_score=toeplitz,
        offset_spectrum=p_off,
        offset_periods=per_off,
        pc_spectrum=p_pc,
        pc_periods=per_pc,
        peaks=tuple(peaks),
        column_periods=2 * math.pi / w,
        column_r2=r2,
        column_r2_threshold=threshold,
        column_fraction=float((r2 >= threshold).to(dt).mean()),
        n_surrogates=n_surrogates,
        seed=seed,
        alpha=alpha,
        window=window,
        n_positions=n,
        provenance=prov,
    )


def _windowed(prov: Provenance, start: int, stop: int, n: int) -> Provenance:
    """The input's provenance with the window recorded (similarities use the raw, uncentred rows)."""
    return prov if (start, stop) == (0, n) else prov.with_processing(f"rows[{start}:{stop}]")


def periodicity(
    x: Any,
    *,
    window: Any = None,
    n_pcs: int = 3,
    n_surrogates: int = 199,
    seed: int | None = 0,
    alpha: float = 0.01,
    n_peaks: int = 3,
    min_cycles: float = 1.0,
    column_r2_threshold: float = 0.9,
) -> PeriodicityResult | BatchResult:
    """Similarity-by-offset, spectra, permutation-tested dominant periods and sinusoidal columns.

    ``x``: a ``PositionalEmbedding``, a list of them, or a tensor/array ``(n, d)`` / ``(batch, n, d)``.
    ``window``: ``(start, stop)`` positions analysed. ``n_pcs``: PCA coordinates whose spectra are
    tested. ``n_surrogates``/``seed``: row permutations for the null (``seed=None`` draws fresh entropy).
    ``alpha``: family-wise level at which a peak is called significant. ``min_cycles``: the longest period
    considered is series length / ``min_cycles`` (also the longest column period searched).
    Returns a :class:`PeriodicityResult`, or a ``BatchResult`` of them for a batch (see the module docstring).
    """
    for name, value, low in (("n_pcs", n_pcs, 1), ("n_surrogates", n_surrogates, 1), ("n_peaks", n_peaks, 1)):
        if isinstance(value, bool) or not isinstance(value, int) or value < low:
            raise InvalidArgumentError(f"{name} must be an integer >= {low}; got {value!r}.")
    if not (isinstance(alpha, int | float) and 0 < alpha < 1):
        raise InvalidArgumentError(
            f"alpha must be a level strictly between 0 and 1, e.g. 0.01; got {alpha!r}."
        )
    if not (isinstance(min_cycles, int | float) and min_cycles > 0):
        raise InvalidArgumentError(
            f"min_cycles must be a positive number of cycles per window; got {min_cycles!r}."
        )
    if not (isinstance(column_r2_threshold, int | float) and 0 < column_r2_threshold <= 1):
        raise InvalidArgumentError(f"column_r2_threshold must be in (0, 1]; got {column_r2_threshold!r}.")
    batch = as_batch(x, min_positions=8)
    start, stop = parse_window(window, batch.data.shape[1])
    if stop - start < 8:
        raise InvalidArgumentError(
            f"periodicity needs at least 8 positions in the window; got {stop - start} (window {(start, stop)})."
        )
    items, single = pca_items(x, n_pcs, window=(start, stop), center=True)
    results = tuple(
        _analyse(
            batch.data[i, start:stop],
            it.coords,
            _windowed(batch.provenances[i], start, stop, batch.data.shape[1]),
            (start, stop),
            n_surrogates=n_surrogates,
            seed=seed,
            alpha=float(alpha),
            n_peaks=n_peaks,
            min_cycles=float(min_cycles),
            threshold=float(column_r2_threshold),
        )
        for i, it in enumerate(items)
    )
    return results[0] if single else BatchResult(results, tuple(r.provenance for r in results))

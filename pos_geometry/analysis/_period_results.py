"""The periodicity analysis' results: :class:`PeriodPeak` (one spectral peak of one series) and
:class:`PeriodicityResult` (everything :func:`pos_geometry.analysis.periodicity.periodicity` computes on one
matrix), with the one-peak-per-spectral-line rule (:data:`LINE_BINS`)."""

from __future__ import annotations

import dataclasses
import math
from dataclasses import dataclass, field

import numpy as np
import torch

from pos_geometry.analysis._results import Result
from pos_geometry.analysis.nulls.monte_carlo import NULL_DESCRIPTIONS
from pos_geometry.embedding import Provenance

__all__ = ["LINE_BINS", "SERIES_LABELS", "PeriodPeak", "PeriodicityResult"]

LINE_BINS = 2.0
"""Significant peaks whose frequencies differ by less than this many Fourier bins (``1/n`` cycles per
position) are reported as one spectral line: the Hann taper's main lobe spans two bins on each side."""


SERIES_LABELS = {"mean_similarity": "similarity by offset"}


@dataclass(frozen=True)
class PeriodPeak:
    """A spectral peak of one ``series`` (``"mean_similarity"`` or ``"PC1"``...).

    ``period``: least-squares period in positions (inside the band; for ``at_edge`` peaks the band's
    longest period, a lower bound); ``period_std``: its standard error (from the fit, scaled by the
    residual's spectrum beside the line, so serially correlated residuals widen it; ± 1.96 ``period_std`` is a
    95% interval, its coverage checked in ``benchmarks/bench_coverage.py``; NaN for the similarity by offset,
    whose error the fit cannot state: see :mod:`~pos_geometry.analysis.periodicity`); ``power_fraction``:
    share of the series' tapered power at the peak; ``p_value``: the largest of its p-values against the three null families; ``significant``:
    ``p_value <= alpha`` and not at the edge; ``status``: ``"period"`` or ``"does not apply"``, with ``reason``;
    ``also_in``: in :attr:`PeriodicityResult.dominant_periods`, the other series whose significant peak lies
    on the same spectral line (empty in ``peaks``, which keeps every series' own peaks); ``ratio``: the
    statistic the p-value compares with the surrogates, the series' power over its background on the
    peak's grid point (the refined ``period`` can lie a few grid points away, where the curve is lower).
    """

    series: str
    period: float
    period_std: float
    power_fraction: float
    p_value: float
    significant: bool
    at_edge: bool = False
    status: str = "period"
    reason: str = ""
    also_in: tuple[str, ...] = ()
    ratio: float = math.nan

    @property
    def label(self) -> str:
        """The series in words: ``"similarity by offset"`` or ``"PC1"``."""
        return SERIES_LABELS.get(self.series, self.series)

    @property
    def period_words(self) -> str:
        """``"300.2 ± 0.41"`` (the period ± its standard error), or ``"300.2"`` for a peak without an error bar."""
        spread = f" ± {self.period_std:.2g}" if math.isfinite(self.period_std) else ""
        return f"{self.period:.4g}{spread}"


@dataclass(frozen=True, eq=False, repr=False)
class PeriodicityResult(Result):
    """Periodicity analysis of one matrix (``n`` positions in ``window``, ``d`` columns).

    Tensors stay on the input's device: ``similarity`` ``(n, n)``, ``mean_similarity`` ``(n,)`` (index =
    offset), ``offset_spectrum`` ``(F₁,)`` with ``offset_periods`` ``(F₁,)``, ``pc_spectrum`` ``(n_components, F₂)``
    with ``pc_periods`` ``(F₂,)``, ``column_periods``/``column_r2`` ``(d,)``. ``peaks`` are sorted by
    power; ``column_fraction`` is the share of columns with R² ≥ ``column_r2_threshold``. ``null``: the
    families a peak must beat (:data:`PERIODICITY_NULLS`); ``null_values``: per family, each surrogate's
    largest power-to-background ratio ``(n_surrogates,)`` (the max-T nulls; not serialised), drawn by
    ``null_method``. ``offset_ratio`` ``(F₁,)`` and ``pc_ratio`` ``(n_components, F₂)``: each series' power over
    its background (the larger of the AR(1)-plus-white spectrum fitted to it and its running median, raised
    where a null family's surrogates rise above it; the statistic the nulls test; see the module docstring),
    on the same periods.
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
    random_state: int | None
    alpha: float
    null: str
    min_p_value: float
    window: tuple[int, int]
    n_positions: int
    provenance: Provenance
    null_method: str = "fast"
    null_values: dict[str, np.ndarray] | None = field(
        default=None, compare=False, metadata={"serialize": False}
    )
    offset_ratio: torch.Tensor | None = None
    pc_ratio: torch.Tensor | None = None
    outlier_rows: str = ""
    """Empty, or which rows dominate the leading components this analysis read
    (:func:`~pos_geometry.analysis.leverage.dominance_note`)."""

    def significance_thresholds(self) -> dict[str, float]:
        """Per null family, the power-to-background ratio a peak must exceed to reach p ≤ ``alpha`` against it
        (the ``(m+1)``-th largest of the surrogates' largest ratios, ``m = ⌊α(S+1)⌋ − 1``); a peak is
        significant when it exceeds every family's. Empty when the surrogates' values are not kept."""
        if not self.null_values:
            return {}
        m = math.floor(self.alpha * (self.n_surrogates + 1) + 1e-9) - 1
        out = {}
        for null, values in self.null_values.items():
            ranked = np.sort(np.asarray(values, dtype=np.float64))[::-1]
            out[null] = float(ranked[m]) if 0 <= m < ranked.size else float("inf")
        return out

    @property
    def dominant_periods(self) -> tuple[PeriodPeak, ...]:
        """The significant peaks (p ≤ ``alpha``, not at the band edge), one per spectral line, strongest
        first: peaks of several series within :data:`LINE_BINS` Fourier bins of each other are one line,
        reported by its first peak in ``peaks`` order that has an error bar (the similarity by offset's have
        none; a line only it shows is reported by it), with the other series named in ``also_in``."""
        kept: list[PeriodPeak] = []
        for peak in (p for p in self.peaks if p.significant):
            home = next(
                (
                    i
                    for i, k in enumerate(kept)
                    if abs(1 / k.period - 1 / peak.period) * self.n_positions < LINE_BINS
                ),
                None,
            )
            if home is None:
                kept.append(peak)
            elif not math.isfinite(kept[home].period_std) and math.isfinite(peak.period_std):
                old = kept[home]  # the first with an error bar reports the line; the rest are named
                named = (old.label, *old.also_in)
                kept[home] = dataclasses.replace(peak, also_in=tuple(n for n in named if n != peak.label))
            elif peak.label != kept[home].label and peak.label not in kept[home].also_in:
                kept[home] = dataclasses.replace(kept[home], also_in=(*kept[home].also_in, peak.label))
        return tuple(kept)

    @property
    def seed(self) -> int | None:
        """Deprecated name of :attr:`random_state`."""
        return self.random_state

    def summary_rows(self) -> list[tuple[str, str]]:
        good = self.column_r2 >= self.column_r2_threshold
        col_periods = torch.sort(self.column_periods[good]).values.cpu().tolist()
        shown = ", ".join(f"{p:.4g}" for p in col_periods[:8]) + (" ..." if len(col_periods) > 8 else "")
        peaks = "; ".join(
            f"{p.label}: {p.period_words} (p={p.p_value:.3g})"
            + (f", also in {', '.join(p.also_in)}" if p.also_in else "")
            for p in self.dominant_periods
        )
        edge = "; ".join(f"{p.label}: {p.reason}" for p in self.peaks if p.at_edge)
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
            ("at the band edge (does not apply)", edge or "none"),
            (
                f"columns with sinusoid R² ≥ {self.column_r2_threshold}",
                f"{self.column_fraction:.1%} ({shown or '-'})",
            ),
            (
                "nulls (a period beats each)",
                " and ".join(f"{self.n_surrogates} {NULL_DESCRIPTIONS[n]}" for n in self.null.split(" and "))
                + f" (random_state={self.random_state}, {self.null_method}; smallest reachable p {self.min_p_value:.3g})",
            ),
            *([("outlier rows", self.outlier_rows)] if self.outlier_rows else []),
        ]

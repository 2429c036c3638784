"""Power spectra of the periodicity analysis, with the significant periods marked.

Series (from :func:`~pos_geometry.analysis.periodicity.periodicity`): the mean-similarity-by-offset
curve and ``"PC1"``, ``"PC2"``... (the PCA coordinates). Each is the normalised tapered power
against period (positions, log axis), drawn over the range of periods that carry power. Every peak
with a p-value ≤ ``alpha`` gets a marker in its series' colour and one legend entry
``"PC1 peak: period 530.3 ± 2.1, p = 0.005"``: labels live in the legend, so close peaks never
crowd each other or cross arrows.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np
import plotly.graph_objects as go

from pos_geometry.analysis.periodicity import PeriodicityResult, PeriodPeak
from pos_geometry.errors import InvalidArgumentError
from pos_geometry.plotting._data import as_numpy, periodicity_of
from pos_geometry.plotting._style import base_layout, title_for

__all__ = ["log_ticks", "peak_label", "period_range", "plot_spectrum", "series_label"]

_SERIES_LABEL = {"mean_similarity": "mean similarity by offset"}
_COLORS = ("#636efa", "#ef553b", "#00cc96", "#ab63fa", "#ffa15a", "#19d3f3", "#ff6692", "#b6e880")
_SYMBOLS = ("circle", "square", "diamond", "triangle-up", "cross", "star", "x", "pentagon")
_VISIBLE = 0.005
"""Power below this share of the tallest drawn curve is not worth axis room."""


def series_label(series: str) -> str:
    """A series in words: ``"mean_similarity"`` -> ``"mean similarity by offset"``; ``"PC1"`` stays."""
    return _SERIES_LABEL.get(series, series)


def peak_label(peak: PeriodPeak) -> str:
    """``"period 520.9 ± 2.1, p = 0.005"``: a peak's period (positions), its standard error and p-value."""
    spread = f" ± {peak.period_std:.2g}" if np.isfinite(peak.period_std) and peak.period_std > 0 else ""
    return f"period {peak.period:.1f}{spread}, p = {peak.p_value:.3g}"


def _series(res: PeriodicityResult) -> dict[str, tuple[np.ndarray, np.ndarray]]:
    out = {"mean_similarity": (as_numpy(res.offset_periods), as_numpy(res.offset_spectrum))}
    pc_power = as_numpy(res.pc_spectrum)
    pc_periods = as_numpy(res.pc_periods)
    for i in range(pc_power.shape[0]):
        out[f"PC{i + 1}"] = (pc_periods, pc_power[i])
    return out


def period_range(
    curves: Sequence[tuple[np.ndarray, np.ndarray]], marks: Sequence[float], longest: float
) -> tuple[float, float]:
    """The periods to show ``(lo, hi)``: every period up to ``longest`` (the window's length) where a
    curve holds at least ``_VISIBLE`` of the tallest curve's power, and every marked period, with a
    small margin on the log axis."""
    top = max(float(np.max(power)) for _, power in curves)
    every = [float(p) for periods, _ in curves for p in periods if p <= longest]
    shown = [
        float(p)
        for periods, power in curves
        for p in periods[(power >= _VISIBLE * top) & (periods <= longest)]
    ]
    shown += [float(m) for m in marks]
    lo, hi = min(shown or every), max(shown or every)
    lo, hi = max(min(every), lo / 1.25), min(longest, max(hi * 1.25, lo * 4))
    return lo, hi


def log_ticks(lo: float, hi: float) -> list[float]:
    """Round periods (1, 2, 3, 5 times a power of ten) inside ``[lo, hi]``, for a readable log axis."""
    ticks = [
        m * 10.0**e
        for e in range(int(np.floor(np.log10(lo))), int(np.ceil(np.log10(hi))) + 1)
        for m in (1, 2, 3, 5)
    ]
    return [t for t in ticks if lo <= t <= hi]


def plot_spectrum(
    x: Any,
    *,
    series: str | Sequence[str] | None = None,
    show_insignificant: bool = False,
    window: Any = None,
    title: str | None = None,
    **periodicity_kwargs: Any,
) -> go.Figure:
    """Spectra of the periodicity analysis with the significant periods marked and labelled.

    Args:
        x: a ``PeriodicityResult``, or an embedding/array to analyse (keywords go to ``periodicity``).
        series: which spectra: ``"mean_similarity"``, ``"PC1"``... or a list (default: all).
        show_insignificant: also mark the peaks that are not significant (hollow grey markers).
        window: positions analysed (for embeddings).
        title: replaces ``"Spectra · model @ rev · rows a–b · α=0.01"``.

    Returns:
        a ``Figure``: one ``Scatter`` line per series (x = period, log scale, limited to the periods
        that carry power; y = share of power), then one marker trace per significant peak in its
        series' colour, named ``"<series> peak: period … ± …, p = …"`` (the label is the legend
        entry: no annotations), then optionally one trace of the insignificant peaks.
    """
    res = periodicity_of(x, window=window, **periodicity_kwargs)
    available = _series(res)
    wanted = list(available) if series is None else [series] if isinstance(series, str) else list(series)
    unknown = [s for s in wanted if s not in available]
    if unknown or not wanted:
        raise InvalidArgumentError(f"series must be among {list(available)}; got {series!r}.")
    fig = go.Figure()
    color = {name: _COLORS[list(available).index(name) % len(_COLORS)] for name in wanted}
    for name in wanted:
        periods, power = available[name]
        label = series_label(name)
        fig.add_trace(
            go.Scatter(
                x=periods,
                y=power,
                mode="lines",
                name=label,
                line={"color": color[name]},
                hovertemplate=f"{label}<br>period %{{x:.1f}}<br>power %{{y:.4f}}<extra></extra>",
            )
        )
    peaks = [p for p in res.peaks if p.series in wanted]
    significant = sorted(
        (p for p in peaks if p.significant), key=lambda p: (wanted.index(p.series), p.period)
    )
    for i, p in enumerate(significant):
        label = f"{series_label(p.series)} peak: {peak_label(p)}"
        fig.add_trace(
            go.Scatter(
                x=[p.period],
                y=[p.power_fraction],
                mode="markers",
                name=label,
                legendgroup="peaks",
                legendgrouptitle={"text": f"significant (p ≤ {res.alpha:g})"} if i == 0 else None,
                marker={
                    "size": 11,
                    "symbol": _SYMBOLS[i % len(_SYMBOLS)],
                    "color": color[p.series],
                    "line": {"color": "black", "width": 1.5},
                },
                hovertemplate=label + "<extra></extra>",
            )
        )
    hollow = [p for p in peaks if not p.significant] if show_insignificant else []
    if hollow:
        fig.add_trace(
            go.Scatter(
                x=[p.period for p in hollow],
                y=[p.power_fraction for p in hollow],
                mode="markers",
                name="not significant",
                marker={"size": 9, "symbol": "circle-open", "color": "grey"},
                customdata=[[series_label(p.series), p.p_value] for p in hollow],
                hovertemplate="%{customdata[0]}: period %{x:.1f}, p = %{customdata[1]:.3g}<extra></extra>",
            )
        )
    curves = [available[name] for name in wanted]
    top = max(float(np.max(power)) for _, power in curves)
    lo, hi = period_range(curves, [p.period for p in [*significant, *hollow]], float(res.n_positions))
    auto = title_for(res.provenance, tuple(res.window), prefix="Spectra") + f" · α={res.alpha:g}"
    fig.update_layout(
        base_layout(
            title if title is not None else auto,
            xaxis={
                "title": {"text": "period (positions, log scale)"},
                "type": "log",
                "range": [float(np.log10(lo)), float(np.log10(hi))],
                "tickvals": log_ticks(lo, hi),
            },
            yaxis={"title": {"text": "share of power"}, "range": [0, top * 1.08], "rangemode": "tozero"},
            legend={"tracegroupgap": 12},
        )
    )
    return fig

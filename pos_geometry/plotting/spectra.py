"""Spectra of the periodicity analysis as they are tested: each series' power over its background, the
level each null sets, and the significant periods marked.

Series (from :func:`~pos_geometry.analysis.periodicity.periodicity`): the mean-similarity-by-offset
curve and ``"PC1"``, ``"PC2"``... (the PCA coordinates). Each is drawn as its tapered power over its
background (the larger of the AR(1)-plus-white spectrum fitted to it and its running median, raised
where a null family's surrogates rise above it: the statistic the nulls test, log axis) against period
(positions, log axis). A horizontal line per null family marks the ratio a peak must exceed for p ≤ α
against that family; a period is significant when it clears every line. Every significant peak gets a
marker on its own curve, in its series' colour, and one legend entry
``"PC1 peak: period 530.3 ± 2.1, p = 0.005"``: labels live in the legend, so close peaks never crowd each
other or cross arrows. A result without those ratios (read from an older JSON) is drawn as shares of power.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np
import plotly.graph_objects as go

from pos_geometry.analysis._inputs import Window
from pos_geometry.analysis.periodicity import PeriodicityResult, PeriodPeak
from pos_geometry.errors import InvalidArgumentError
from pos_geometry.plotting._data import as_numpy, periodicity_of
from pos_geometry.plotting._style import base_layout, title_for

__all__ = ["log_ticks", "peak_label", "period_range", "plot_spectrum", "series_label"]

_SERIES_LABEL = {"mean_similarity": "mean similarity by offset"}
_DASHES = ("solid", "dash", "dot", "dashdot", "longdash", "longdashdot")
_NULL_LINES = {
    "red_noise": ("red noise", "dash"),
    "step_walk": ("random walks of its steps", "dot"),
    "smooth_gp": ("smooth GP curves", "dashdot"),
}
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


def _series(res: PeriodicityResult, ratio: bool) -> dict[str, tuple[np.ndarray, np.ndarray]]:
    """Each series' ``(periods, values)``: power over background when ``ratio``, else share of power."""
    off = res.offset_ratio if ratio else res.offset_spectrum
    pcs = res.pc_ratio if ratio else res.pc_spectrum
    out = {"mean_similarity": (as_numpy(res.offset_periods), as_numpy(off))}
    pc_values, pc_periods = as_numpy(pcs), as_numpy(res.pc_periods)
    for i in range(pc_values.shape[0]):
        out[f"PC{i + 1}"] = (pc_periods, pc_values[i])
    return out


def _on_curve(periods: np.ndarray, values: np.ndarray, period: float) -> float:
    """The top of the curve's peak at ``period``: its largest value on the two grid points around
    ``period`` and their outer neighbours. A peak is tested on its grid point and its period refined between
    grid points, where the curve, drawn straight between them, can sit lower: a marker there fell below the
    significance level it had cleared."""
    order = np.argsort(periods)
    grid, curve = periods[order], values[order]
    right = int(np.clip(np.searchsorted(grid, period), 1, grid.shape[0] - 1))
    return float(np.max(curve[max(right - 2, 0) : right + 2]))


def _marker_height(peak: PeriodPeak, periods: np.ndarray, values: np.ndarray) -> float:
    """Where a peak's marker sits: the ratio its p-value was computed on (``peak.ratio``, on its grid point),
    or the curve's top around its refined period where that is higher. The refined period can lie a few grid
    points from the tested one, where the curve is lower: a significant peak's marker there fell below the
    levels it had cleared."""
    top = _on_curve(periods, values, peak.period)
    return max(top, peak.ratio) if np.isfinite(peak.ratio) else top


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


def log_ticks(lo: float, hi: float, mantissas: Sequence[int] = (1, 2, 3, 5)) -> list[float]:
    """Round values (``mantissas`` times a power of ten) inside ``[lo, hi]``, for a readable log axis."""
    ticks = [
        float(f"{m}e{e}")
        for e in range(int(np.floor(np.log10(lo))), int(np.ceil(np.log10(hi))) + 1)
        for m in mantissas
    ]
    return [t for t in ticks if lo <= t <= hi]


def plot_spectrum(
    x: Any,
    *,
    series: str | Sequence[str] | None = None,
    show_insignificant: bool = False,
    window: Window = None,
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
        that carry power; y = power over the series' background, log scale), then one marker trace per
        significant peak on its own curve, named ``"<series> peak: period … ± …, p = …"`` (the label is the
        legend entry: no annotations), optionally one trace of the insignificant peaks, then one horizontal
        line per null family at the ratio that reaches p = α against it.
    """
    res = periodicity_of(x, window=window, **periodicity_kwargs)
    ratio = res.offset_ratio is not None and res.pc_ratio is not None
    available = _series(res, ratio)
    wanted = list(available) if series is None else [series] if isinstance(series, str) else list(series)
    unknown = [s for s in wanted if s not in available]
    if unknown or not wanted:
        raise InvalidArgumentError(f"series must be among {list(available)}; got {series!r}.")
    fig = go.Figure()
    color = {name: _COLORS[list(available).index(name) % len(_COLORS)] for name in wanted}
    dash = {name: _DASHES[list(available).index(name) % len(_DASHES)] for name in wanted}
    unit = "power over background" if ratio else "power"
    for name in reversed(wanted):  # PC1 drawn last, on top; dashes tell overlapping curves apart
        periods, values = available[name]
        label = series_label(name)
        fig.add_trace(
            go.Scatter(
                x=periods,
                y=values,
                mode="lines",
                name=label,
                line={"color": color[name], "dash": dash[name], "width": 3 if name == wanted[0] else 2},
                hovertemplate=f"{label}<br>period %{{x:.1f}}<br>{unit} %{{y:.4g}}<extra></extra>",
            )
        )
    fig.data = tuple(reversed(fig.data))  # legend in series order
    peaks = [p for p in res.peaks if p.series in wanted]
    significant = sorted(
        (p for p in peaks if p.significant), key=lambda p: (wanted.index(p.series), p.period)
    )
    hollow = [p for p in peaks if not p.significant] if show_insignificant else []
    at = {id(p): _marker_height(p, *available[p.series]) for p in [*significant, *hollow]}
    for i, p in enumerate(significant):
        label = f"{series_label(p.series)} peak: {peak_label(p)}"
        fig.add_trace(
            go.Scatter(
                x=[p.period],
                y=[at[id(p)]],
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
    if hollow:
        fig.add_trace(
            go.Scatter(
                x=[p.period for p in hollow],
                y=[at[id(p)] for p in hollow],
                mode="markers",
                name="not significant",
                marker={"size": 9, "symbol": "circle-open", "color": "grey"},
                customdata=[[series_label(p.series), p.p_value] for p in hollow],
                hovertemplate="%{customdata[0]}: period %{x:.1f}, p = %{customdata[1]:.3g}<extra></extra>",
            )
        )
    curves = [available[name] for name in wanted]
    top = max(float(np.max(values)) for _, values in curves)
    lo, hi = period_range(curves, [p.period for p in [*significant, *hollow]], float(res.n_positions))
    levels = res.significance_thresholds() if ratio else {}
    for null, level in levels.items():
        words, line_dash = _NULL_LINES.get(null, (null.replace("_", " "), "dash"))
        if np.isfinite(level):
            fig.add_trace(
                go.Scatter(
                    x=[lo, hi],
                    y=[level, level],
                    mode="lines",
                    name=f"p = {res.alpha:g} vs {words}: {level:.3g}",
                    legendgroup="nulls",
                    legendgrouptitle={"text": f"null levels ({res.n_surrogates} surrogates each)"},
                    line={"color": "#444444", "dash": line_dash, "width": 1.5},
                    hoverinfo="skip",
                )
            )
    auto = title_for(res.provenance, tuple(res.window), prefix="Spectra") + f" · α={res.alpha:g}"
    finite = [v for v in levels.values() if np.isfinite(v)]
    if ratio:
        # the floor shows every curve down to a 1e-4 of its peak (below that is the window's leakage, not signal)
        lowest = min(float(np.min(values[values > 0])) for _, values in curves if np.any(values > 0))
        floor, ceiling = max(lowest, top * 1e-4, 1e-12), max([top, *finite]) * 1.6
        if finite and top < min(finite):
            fig.add_annotation(
                text=(
                    f"no peak reaches a null's p = {res.alpha:g} level: nothing here is a significant period<br>"
                    "(the dashed lines are each null's level, the curves each series' power over its background)"
                ),
                xref="paper", yref="paper", x=0.0, y=1.01, xanchor="left", yanchor="bottom", showarrow=False,
                align="left", font={"size": 11, "color": "#444444"},
            )  # fmt: skip
        yaxis = {
            "title": {"text": "power over its background (log scale)"},
            "type": "log",
            "tickformat": "~g",  # 0.0005, not 500μ
            "range": [float(np.log10(floor)), float(np.log10(ceiling))],
            "tickvals": log_ticks(floor, ceiling, (1, 2, 5)),
        }
    else:
        yaxis = {"title": {"text": "share of power"}, "range": [0, top * 1.08], "rangemode": "tozero"}
    fig.update_layout(
        base_layout(
            title if title is not None else auto,
            xaxis={
                "title": {"text": "period (positions, log scale)"},
                "type": "log",
                "range": [float(np.log10(lo)), float(np.log10(hi))],
                "tickvals": log_ticks(lo, hi),
            },
            yaxis=yaxis,
            legend={"tracegroupgap": 12},
        )
    )
    return fig

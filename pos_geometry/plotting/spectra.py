"""Power spectra of the periodicity analysis, with the significant periods marked.

Series (from :func:`~pos_geometry.analysis.periodicity.periodicity`): ``"mean_similarity"``
(the mean-similarity-by-offset curve) and ``"PC1"``, ``"PC2"``... (the PCA coordinates).
Each is the normalised tapered power against period (positions, log axis). Every peak with
a permutation p-value ≤ ``alpha`` gets a marker and a label ``"PC1: P=601.7 p=0.005"``.
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

__all__ = ["peak_label", "plot_spectrum"]

_SERIES_LABEL = {"mean_similarity": "mean similarity by offset"}


def peak_label(peak: PeriodPeak) -> str:
    """``"P=520.9 p=0.005"``: a peak's period (positions) and permutation p-value."""
    return f"P={peak.period:.1f} p={peak.p_value:.3g}"


def _series(res: PeriodicityResult) -> dict[str, tuple[np.ndarray, np.ndarray]]:
    out = {"mean_similarity": (as_numpy(res.offset_periods), as_numpy(res.offset_spectrum))}
    pc_power = as_numpy(res.pc_spectrum)
    pc_periods = as_numpy(res.pc_periods)
    for i in range(pc_power.shape[0]):
        out[f"PC{i + 1}"] = (pc_periods, pc_power[i])
    return out


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
        a ``Figure``: one ``Scatter`` line per series (x = period, log scale; y = share of power),
        one marker trace of significant peaks, and one annotation ``"series: P=… p=…"`` per significant peak.
    """
    res = periodicity_of(x, window=window, **periodicity_kwargs)
    available = _series(res)
    wanted = list(available) if series is None else [series] if isinstance(series, str) else list(series)
    unknown = [s for s in wanted if s not in available]
    if unknown or not wanted:
        raise InvalidArgumentError(f"series must be among {list(available)}; got {series!r}.")
    fig = go.Figure()
    for name in wanted:
        periods, power = available[name]
        fig.add_trace(
            go.Scatter(
                x=periods,
                y=power,
                mode="lines",
                name=_SERIES_LABEL.get(name, name),
                hovertemplate=f"{name}<br>period %{{x:.1f}}<br>power %{{y:.4f}}<extra></extra>",
            )
        )
    peaks = [p for p in res.peaks if p.series in wanted]
    for significant in (True, False) if show_insignificant else (True,):
        chosen = [p for p in peaks if p.significant == significant]
        if not chosen:
            continue
        fig.add_trace(
            go.Scatter(
                x=[p.period for p in chosen],
                y=[p.power_fraction for p in chosen],
                mode="markers",
                name=f"significant (p ≤ {res.alpha:g})" if significant else "not significant",
                marker={
                    "size": 10,
                    "symbol": "circle" if significant else "circle-open",
                    "color": "black" if significant else "grey",
                },
                customdata=[[p.series, p.p_value] for p in chosen],
                hovertemplate="%{customdata[0]}: period %{x:.1f}, p = %{customdata[1]:.3g}<extra></extra>",
            )
        )
    mid = 0.5 * (np.log10(2) + np.log10(res.n_positions))
    top = max(float(np.max(available[name][1])) for name in wanted)
    significant_peaks = [q for q in peaks if q.significant]
    for i, p in enumerate(significant_peaks):  # labels stacked above the curves so close peaks don't collide
        fig.add_annotation(
            x=np.log10(p.period),
            y=p.power_fraction,
            text=f"{p.series}: {peak_label(p)}",
            showarrow=True,
            arrowhead=2,
            ax=-140 if np.log10(p.period) > mid else 140,
            ay=top * (1.08 + 0.09 * i),
            ayref="y",
            bgcolor="rgba(255,255,255,0.8)",
        )
    auto = title_for(res.provenance, tuple(res.window), prefix="Spectra") + f" · α={res.alpha:g}"
    fig.update_layout(
        base_layout(
            title if title is not None else auto,
            xaxis={
                "title": {"text": "period (positions)"},
                "type": "log",
                "range": [np.log10(2), np.log10(res.n_positions)],
            },
            yaxis={
                "title": {"text": "share of power"},
                "range": [0, top * (1.12 + 0.09 * len(significant_peaks))],
            },
            legend={"x": 0.01, "y": 0.99, "xanchor": "left", "yanchor": "top"},
        )
    )
    return fig

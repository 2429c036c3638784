"""Cosine similarity between positions: the full matrix as a heatmap, and its mean by offset.

Both read a :class:`~pos_geometry.analysis.periodicity.PeriodicityResult` (``similarity``
``(n, n)`` and ``mean_similarity`` ``(n,)``); given an embedding they compute it first with
:func:`~pos_geometry.analysis.periodicity.periodicity` (extra keywords go there).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np
import plotly.graph_objects as go
from plotly.colors import DEFAULT_PLOTLY_COLORS as DEFAULT_COLORS

from pos_geometry.analysis._batch import BatchResult
from pos_geometry.analysis._inputs import Window
from pos_geometry.analysis.periodicity import PeriodicityResult
from pos_geometry.errors import InvalidArgumentError
from pos_geometry.plotting._data import as_numpy, periodicity_of
from pos_geometry.plotting._style import base_layout, model_label, title_for, window_label

__all__ = ["plot_similarity", "plot_similarity_by_offset"]


def plot_similarity(
    x: Any,
    *,
    window: Window = None,
    title: str | None = None,
    colorscale: str = "RdBu_r",
    max_cells: int = 512,
    **periodicity_kwargs: Any,
) -> go.Figure:
    """Heatmap of the cosine similarity between every pair of positions in the window.

    Args:
        x: a ``PeriodicityResult``, or an embedding/array ``(n, d)`` to analyse.
        window: ``(start, stop)`` positions (not with a result).
        title: replaces ``"Cosine similarity · model @ rev · rows a–b · Toeplitz score s"``.
        colorscale: diverging scale, fixed to [-1, 1] with white at 0.
        max_cells: at most this many cells per side: a longer window is shown as the means of
            ``b × b`` blocks of positions, ``b = ceil(n / max_cells)`` (the title says so), which keeps a
            1024-position figure at ~1.5 MB instead of ~7 MB of numbers.

    Returns:
        a ``Figure`` with one ``Heatmap`` ``(m, m)``, ``m = ceil(n / b)``; both axes are positions (the
        first position of each block; row 0 at the top); values as float32.
    """
    if isinstance(max_cells, bool) or not isinstance(max_cells, int) or max_cells < 2:
        raise InvalidArgumentError(f"max_cells must be an integer >= 2; got {max_cells!r}.")
    res = periodicity_of(x, window=window, **periodicity_kwargs)
    sim = as_numpy(res.similarity, dtype=np.float64)
    n = sim.shape[0]
    block = -(-n // max_cells)
    if block > 1:
        m = -(-n // block)
        padded = np.full((m * block, m * block), np.nan)
        padded[:n, :n] = sim
        sim = np.nanmean(padded.reshape(m, block, m, block), axis=(1, 3))
    pos = np.arange(res.window[0], res.window[1], block)
    where = "positions %{y} and %{x}" if block == 1 else f"blocks of {block} from positions %{{y}} and %{{x}}"
    heat = go.Heatmap(
        z=sim.astype(np.float32),  # sent as base64 float32: 4 bytes a cell
        x=pos,
        y=pos,
        zmin=-1.0,
        zmax=1.0,
        zmid=0.0,
        colorscale=colorscale,
        colorbar={"title": {"text": "cosine"}},
        hovertemplate=where + "<br>cosine similarity %{z:.3f}<extra></extra>",
    )
    auto = title_for(res.provenance, tuple(res.window), prefix="Cosine similarity")
    auto += f" · Toeplitz score {res.toeplitz_score:.3f}"
    if block > 1:
        auto += f" · {block}×{block} block means"
    fig = go.Figure(heat)
    fig.update_layout(
        base_layout(
            title if title is not None else auto,
            xaxis={"title": {"text": "position"}, "constrain": "domain"},
            yaxis={"title": {"text": "position"}, "autorange": "reversed", "scaleanchor": "x"},
        )
    )
    return fig


def _results(items: Any, window: Any, kwargs: dict[str, Any]) -> list[PeriodicityResult]:
    if isinstance(items, BatchResult):
        return list(items.items)
    if isinstance(items, Sequence) and not isinstance(items, str | bytes):
        if not items:
            raise InvalidArgumentError(
                "items must be a non-empty list of results or embeddings; got an empty list."
            )
        return [periodicity_of(e, window=window, name="each item", **kwargs) for e in items]
    return [periodicity_of(items, window=window, **kwargs)]


def plot_similarity_by_offset(
    items: Any,
    *,
    labels: Sequence[str] | None = None,
    window: Window = None,
    max_offset: int | None = None,
    title: str | None = None,
    **periodicity_kwargs: Any,
) -> go.Figure:
    """Mean cosine similarity between positions ``i`` and ``i + Δ``, against the offset ``Δ``.

    Args:
        items: one ``PeriodicityResult`` or embedding, a list of them, or a batched ``BatchResult``.
        labels: one legend label per item (default ``"model @ rev (rows a–b)"``).
        window: positions analysed (for embeddings).
        max_offset: the largest offset shown (default: all, ``n - 1``).
        title: replaces the automatic title.

    Returns:
        a ``Figure`` with one ``Scatter`` line per item (x = offset 0..n-1, y = mean similarity), solid
        (learned tables wider), grouped in the legend by embedding kind.
    """
    results = _results(items, window, periodicity_kwargs)
    if labels is not None and len(labels) != len(results):
        raise InvalidArgumentError(
            f"labels must have one entry per item ({len(results)}); got {len(labels)}."
        )
    if max_offset is not None and (
        isinstance(max_offset, bool) or not isinstance(max_offset, int) or max_offset < 1
    ):
        raise InvalidArgumentError(f"max_offset must be a positive integer; got {max_offset!r}.")
    fig = go.Figure()
    titled: set[str] = set()  # each kind's legend title once
    for i, res in enumerate(results):
        y = as_numpy(res.mean_similarity)
        if max_offset is not None:
            y = y[: max_offset + 1]
        prov = res.provenance
        name = labels[i] if labels is not None else f"{model_label(prov)} ({window_label(tuple(res.window))})"
        n = len(as_numpy(res.mean_similarity))
        # offset Δ averages n − Δ pairs: past FEW_PAIRS of the window the mean rests on few pairs, drawn faint
        cut = min(y.shape[0], int(np.ceil(FEW_PAIRS * n)) + 1)
        color = DEFAULT_COLORS[i % len(DEFAULT_COLORS)]
        for part, (lo, hi) in enumerate(((0, cut), (cut - 1, y.shape[0]))):
            if hi - lo < 1 or (part == 1 and hi <= cut):
                continue
            fig.add_trace(
                go.Scatter(
                    x=np.arange(lo, hi), y=y[lo:hi], mode="lines", name=name, showlegend=part == 0,
                    # solid lines: a dash pattern on a curve that oscillates every few offsets (a rotary table's
                    # fast planes) turns it into noise; the kind is told by width and the legend's groups instead
                    line={"width": 2.2 if prov.kind == "learned" else 1.3, "color": color},
                    opacity=(1.0 if prov.kind == "learned" else 0.8) * (1 if part == 0 else 0.3),
                    legendgroup=f"{prov.kind}-{i}",
                    legendgrouptitle={"text": prov.kind} if part == 0 and prov.kind not in titled else None,
                    hovertemplate=f"{name}<br>offset %{{x}}: mean cosine %{{y:.3f}} (over %{{customdata}} pairs)"
                    "<extra></extra>",
                    customdata=n - np.arange(lo, hi),
                )
            )  # fmt: skip
        titled.add(prov.kind)
    if title is None:
        title = (
            title_for(
                results[0].provenance, tuple(results[0].window), prefix="Mean cosine similarity by offset"
            )
            if len(results) == 1
            else "Mean cosine similarity by offset"
        )
    fig.update_layout(
        base_layout(
            title,
            xaxis={"title": {"text": "offset |i − j| (positions)"}},
            yaxis={"title": {"text": "mean cosine similarity"}},
            showlegend=len(results) > 1,
        )
    )
    fig.add_annotation(
        text=f"faint: offsets past {FEW_PAIRS:.0%} of the window, each the mean of fewer than {1 - FEW_PAIRS:.0%} of "
        "its rows' pairs",
        xref="paper", yref="paper", x=1.0, y=1.0, xanchor="right", yanchor="bottom", showarrow=False,
        font={"size": 11, "color": "#555555"},
    )  # fmt: skip
    return fig


FEW_PAIRS = 0.75
"""Offsets past this fraction of the window are drawn faint: each averages few pairs of rows."""

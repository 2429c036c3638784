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

from pos_geometry.analysis._batch import BatchResult
from pos_geometry.analysis.periodicity import PeriodicityResult
from pos_geometry.errors import InvalidArgumentError
from pos_geometry.plotting._data import as_numpy, periodicity_of
from pos_geometry.plotting._style import KIND_DASH, base_layout, model_label, title_for, window_label

__all__ = ["plot_similarity", "plot_similarity_by_offset"]


def plot_similarity(
    x: Any,
    *,
    window: Any = None,
    title: str | None = None,
    colorscale: str = "RdBu_r",
    **periodicity_kwargs: Any,
) -> go.Figure:
    """Heatmap of the cosine similarity between every pair of positions in the window.

    Args:
        x: a ``PeriodicityResult``, or an embedding/array ``(n, d)`` to analyse.
        window: ``(start, stop)`` positions (not with a result).
        title: replaces ``"Cosine similarity · model @ rev · rows a–b · Toeplitz score s"``.
        colorscale: diverging scale, fixed to [-1, 1] with white at 0.

    Returns:
        a ``Figure`` with one ``Heatmap`` ``(n, n)``; both axes are positions (row 0 at the top).
    """
    res = periodicity_of(x, window=window, **periodicity_kwargs)
    sim = as_numpy(res.similarity, dtype=np.float32)
    pos = np.arange(res.window[0], res.window[1])
    heat = go.Heatmap(
        z=sim,
        x=pos,
        y=pos,
        zmin=-1.0,
        zmax=1.0,
        zmid=0.0,
        colorscale=colorscale,
        colorbar={"title": {"text": "cosine"}},
        hovertemplate="positions %{y} and %{x}<br>cosine similarity %{z:.3f}<extra></extra>",
    )
    auto = title_for(res.provenance, tuple(res.window), prefix="Cosine similarity")
    auto += f" · Toeplitz score {res.toeplitz_score:.3f}"
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
    window: Any = None,
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
        a ``Figure`` with one ``Scatter`` line per item (x = offset 0..n-1, y = mean similarity);
        dash = embedding kind.
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
    for i, res in enumerate(results):
        y = as_numpy(res.mean_similarity)
        if max_offset is not None:
            y = y[: max_offset + 1]
        prov = res.provenance
        name = labels[i] if labels is not None else f"{model_label(prov)} ({window_label(tuple(res.window))})"
        fig.add_trace(
            go.Scatter(
                x=np.arange(y.shape[0]),
                y=y,
                mode="lines",
                name=name,
                line={"dash": KIND_DASH.get(prov.kind, "solid")},
                hovertemplate=f"{name}<br>offset %{{x}}: mean cosine %{{y:.3f}}<extra></extra>",
            )
        )
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
    return fig

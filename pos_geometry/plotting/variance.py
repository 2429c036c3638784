"""Explained-variance curves of several models on one chart (learned, rotary, sinusoidal side by side).

For each model: the explained-variance ratio of principal components ``1..n_components``
(or its running sum), one line per model; the line dash shows the embedding kind and the
legend groups models by kind.
"""

from __future__ import annotations

import itertools
from collections.abc import Sequence
from typing import Any

import numpy as np
import plotly.graph_objects as go

from pos_geometry.analysis._inputs import Window
from pos_geometry.errors import InvalidArgumentError
from pos_geometry.plotting._data import as_numpy, pca_of, provenance_of, split_items
from pos_geometry.plotting._style import KIND_DASH, base_layout, model_label, window_label

__all__ = ["plot_explained_variance"]


def plot_explained_variance(
    items: Any,
    *,
    n_components: int = 10,
    cumulative: bool = True,
    labels: Sequence[str] | None = None,
    window: Window = None,
    center: bool = True,
    title: str | None = None,
) -> go.Figure:
    """Explained variance of the top ``n_components`` PCs, one curve per model.

    Args:
        items: a list of ``PositionalEmbedding``/arrays/``PCAResult``s (shapes may differ), or a
            batched ``PCAResult``. Each ``PCAResult`` must hold ``n_components`` components.
        n_components: components shown (x = 1..n_components).
        cumulative: plot the running sum (the share captured by the top ``k``) instead of each PC's share.
        labels: one legend label per item (default ``"model @ revision"``, plus the window).
        window, center: as in :func:`~pos_geometry.analysis.pca.pca`.
        title: replaces the automatic title.

    Returns:
        a ``Figure`` of ``Scatter`` lines; y is in percent of the total variance of each table.
        Dash = kind (learned solid, rotary dashed, sinusoidal dotted); legend grouped by kind. Tables of
        different widths get a note on the figure saying so.
    """
    if isinstance(n_components, bool) or not isinstance(n_components, int) or n_components < 1:
        raise InvalidArgumentError(f"n_components must be a positive integer; got {n_components!r}.")
    entries = split_items(items)
    if labels is not None and len(labels) != len(entries):
        raise InvalidArgumentError(
            f"labels must have one entry per item ({len(entries)}); got {len(labels)}."
        )
    results = [pca_of(e, n_components, window=window, center=center, name="each item") for e in entries]
    ks = np.arange(1, n_components + 1)
    fig = go.Figure()
    seen_kinds: set[str] = set()
    drawn: list[tuple[str, np.ndarray]] = []
    for i, res in enumerate(results):
        prov = provenance_of(res)
        ratio = as_numpy(res.explained_variance_ratio_)[:n_components]
        y = 100 * (np.cumsum(ratio) if cumulative else ratio)
        name = labels[i] if labels is not None else f"{model_label(prov)} ({window_label(tuple(res.window))})"
        fig.add_trace(
            go.Scatter(
                x=ks,
                y=y,
                mode="lines+markers",
                name=name,
                line={"dash": KIND_DASH.get(prov.kind, "solid"), "width": 2},
                legendgroup=prov.kind,
                legendgrouptitle={"text": prov.kind} if prov.kind not in seen_kinds else None,
                hovertemplate=f"{name}<br>PC%{{x}}: %{{y:.2f}}%<extra>{prov.kind}</extra>",
            )
        )
        seen_kinds.add(prov.kind)
        drawn.append((name, y))
    what = "Cumulative explained variance" if cumulative else "Explained variance per component"
    fig.update_layout(
        base_layout(
            title if title is not None else f"{what} (top {n_components} PCs)",
            xaxis={"title": {"text": "principal component"}, "dtick": 1 if n_components <= 20 else None},
            yaxis={"title": {"text": "cumulative % of variance" if cumulative else "% of variance"}},
            legend={"groupclick": "toggleitem"},
        )
    )
    if cumulative:
        fig.update_yaxes(range=[0, 101])
    notes = []
    widths = sorted({int(r.n_features_) for r in results})
    if len(widths) > 1:  # a d-column table holds all its variance in d components: say so on the figure
        shown = ", ".join(map(str, widths[:-1])) + f" and {widths[-1]}"
        notes.append(
            f"The tables have {shown} columns: each % is of its own table's variance, and a d-column table "
            "reaches 100% by component d."
        )
    for (a, ya), (b, yb) in itertools.combinations(drawn, 2):  # a curve drawn under another: say so
        gap = float(np.max(np.abs(ya - yb))) if len(ya) == len(yb) else np.inf
        if gap < 1.0:
            notes.append(f"{a} and {b} lie on top of each other (at most {gap:.1f} points apart).")
    if notes:
        fig.add_annotation(
            text="<br>".join(notes),
            xref="paper", yref="paper", x=0.0, y=1.0, yanchor="bottom", xanchor="left", showarrow=False,
            font={"size": 11, "color": "#555555"},
        )  # fmt: skip
    return fig

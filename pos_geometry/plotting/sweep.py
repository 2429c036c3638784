"""Figures of a training sweep: metrics against training step, and the helix forming (animated).

:func:`plot_sweep_metrics` draws one panel per metric against the training step on a log axis, one line
per sweep (several seeds or models overlaid, one colour each across panels); failed checkpoints are left
out, and hovering a point names its revision (and the helix verdict, when the sweep has one). A rotary
model's sweep draws its atlas metrics (short-wavelength share, plane usage, pair cosines, usage drift).
:func:`plot_sweep_helix` is :func:`~pos_geometry.plotting.checkpoints.plot_checkpoints` over the PCA fits
stored by the sweep (no table is read again): one 3D frame per checkpoint, bases Procrustes-aligned.
:func:`plot_sweep_usage` is a rotary sweep's plane usage over training: a heatmap of each rotation plane's
mean share of the QK form (planes by wavelength) against the training step, from the stored atlases.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np
import plotly.graph_objects as go
from plotly.subplots import make_subplots

from pos_geometry._escape import plotly_text
from pos_geometry.errors import InvalidArgumentError
from pos_geometry.plotting._style import base_layout

__all__ = ["DEFAULT_METRICS", "plot_sweep_helix", "plot_sweep_metrics", "plot_sweep_usage"]

DEFAULT_METRICS = (
    "top3_ratio",
    "top10_ratio",
    "helix_p_value",
    "drift_previous",
    "drift_final",
    "position0_norm",
    # rotary models (the frequency atlas of each checkpoint)
    "short_share",
    "top_plane_share",
    "effective_planes",
    "q_pair_cosine_abs",
    "k_pair_cosine_abs",
    "usage_drift_previous",
    "usage_drift_final",
)
_TITLES = {
    "top3_ratio": "top-3 explained variance",
    "top10_ratio": "top-10 explained variance",
    "helix_p_value": "helix p-value (largest over its nulls)",
    "helix_turns": "helix turns",
    "helix_period": "helix period (positions)",
    "periodicity_period": "strongest significant period",
    "drift_previous": "basis drift to previous",
    "drift_final": "basis drift to final",
    "shape_drift_previous": "shape drift to previous",
    "shape_drift_final": "shape drift to final",
    "table_norm": "table norm ‖X‖_F",
    "position0_norm": "norm of position 0",
    "mean_row_norm": "mean row norm",
    "short_share": "share of QK form in planes with a cycle within the context",
    "top_plane_share": "mean share of the most used plane",
    "effective_planes": "effective planes per head (exp entropy)",
    "q_pair_cosine_abs": "mean |cosine| of a plane's two query rows",
    "k_pair_cosine_abs": "mean |cosine| of a plane's two key rows",
    "q_plane_norm": "mean plane norm of W_q",
    "k_plane_norm": "mean plane norm of W_k",
    "usage_drift_previous": "plane-usage drift to previous (total variation)",
    "usage_drift_final": "plane-usage drift to final (total variation)",
}


def _as_list(results: Any) -> list[Any]:
    from pos_geometry.sweeps.result import SweepResult

    items = (
        [results]
        if isinstance(results, SweepResult)
        else list(results)
        if isinstance(results, Sequence)
        else None
    )
    if not items or not all(isinstance(r, SweepResult) for r in items):
        raise InvalidArgumentError(
            f"results must be a SweepResult or a non-empty list of them (one per seed or model); got {type(results).__name__}."
        )
    return items


def plot_sweep_metrics(
    results: Any,
    metrics: Sequence[str] | None = None,
    *,
    labels: Sequence[str] | None = None,
    title: str | None = None,
) -> go.Figure:
    """Metrics against training step (log axis), one panel per metric, one line per sweep.

    Args:
        results: a :class:`~pos_geometry.sweeps.SweepResult` or a list of them (seeds or models, overlaid).
        metrics: metric names (columns of the sweep's table); default: those of :data:`DEFAULT_METRICS`
            that the sweeps hold.
        labels: one legend name per sweep (default: each sweep's model).
        title: replaces the automatic title.

    The x axis is ``step + 1`` on a log scale, so checkpoint 0 is drawn (at 1); a metric that is None for
    a checkpoint (a helix that does not apply has no turns) leaves a gap, never a made-up value.
    """
    items = _as_list(results)
    names = [plotly_text(r.model) for r in items] if labels is None else [str(s) for s in labels]
    if len(names) != len(items):
        raise InvalidArgumentError(f"labels must have one entry per sweep ({len(items)}); got {len(names)}.")
    held = {k for r in items for rec in r.ok for k in rec.metrics}
    chosen = [m for m in DEFAULT_METRICS if m in held] if metrics is None else list(metrics)
    missing = [m for m in chosen if m not in held]
    if missing or not chosen:
        raise InvalidArgumentError(
            f"metrics {missing or chosen} are not in these sweeps; they hold {sorted(held)}. Pick from those "
            "(or run the sweep with the analyses that make them)."
        )
    fig = make_subplots(
        rows=len(chosen), cols=1, shared_xaxes=True, vertical_spacing=0.04,
        subplot_titles=[_TITLES.get(m, m) for m in chosen],
    )  # fmt: skip
    palette = ["#1f77b4", "#d62728", "#2ca02c", "#9467bd", "#ff7f0e", "#17becf", "#8c564b", "#e377c2"]
    for i, (res, name) in enumerate(zip(items, names, strict=True)):
        ok = [r for r in res.ok if r.step is not None]
        hover = [
            plotly_text(r.revision)
            + (f" · helix: {r.metrics['helix_verdict']}" if "helix_verdict" in r.metrics else "")
            for r in ok
        ]
        x = np.array([r.step + 1 for r in ok], dtype=np.float64)
        for row, metric in enumerate(chosen, start=1):
            values = [r.metrics.get(metric) for r in ok]
            y = np.array([np.nan if v is None or isinstance(v, str) else float(v) for v in values])
            fig.add_trace(
                go.Scatter(
                    x=x,
                    y=y,
                    mode="lines+markers",
                    name=name,
                    legendgroup=name,
                    showlegend=row == 1,
                    line={"color": palette[i % len(palette)]},
                    marker={"size": 4},
                    text=hover,
                    hovertemplate="%{text}<br>step %{customdata}<br>"
                    + metric
                    + " %{y:.4g}<extra>"
                    + name
                    + "</extra>",
                    customdata=x - 1,
                ),
                row=row,
                col=1,
            )
    for row in range(1, len(chosen) + 1):
        fig.update_xaxes(type="log", row=row, col=1)
    fig.update_xaxes(title_text="training step + 1 (log scale)", row=len(chosen), col=1)
    n_ok = sum(len(r.ok) for r in items)
    auto = f"{', '.join(dict.fromkeys(names))} · {n_ok} checkpoints over training"
    fig.update_layout(**base_layout(title or auto, height=max(300, 220 * len(chosen))))
    return fig


def plot_sweep_helix(result: Any, *, reference: Any = -1, **kwargs: Any) -> go.Figure:
    """The Procrustes-aligned 3D helix with a slider over the sweep's ok checkpoints.

    Uses the PCA fits the sweep stored (``"pca"`` among its analyses); ``reference`` and the other
    keyword arguments are those of :func:`~pos_geometry.plotting.checkpoints.plot_checkpoints`
    (default: bases aligned to the final checkpoint).
    """
    from pos_geometry.plotting.checkpoints import plot_checkpoints

    (res,) = _as_list(result)
    fits = res.pca(n_components=max(kwargs.get("components", (0, 1, 2))) + 1)
    return plot_checkpoints(fits, reference=reference, labels=[r.revision for r in res.ok], **kwargs)


def plot_sweep_usage(result: Any, *, layer: int | None = None, title: str | None = None) -> go.Figure:
    """How a rotary model's heads use each rotation plane over training: a heatmap of the mean ``qk_share``
    of each plane (rows, labelled by wavelength) at each ok checkpoint (columns, ``step + 1`` on a log axis).

    Args:
        result: a rotary :class:`~pos_geometry.sweeps.SweepResult` (its atlases are read from the store).
        layer: one layer index (as in the atlas' ``layers``) to show; None: the mean over every layer read.
        title: replaces the automatic title.

    ``z[i, j]`` is the mean over heads (and layers) of plane ``i``'s share at checkpoint ``j``: each column
    sums to 1. Planes marked ``*`` complete a cycle within the training context.
    """
    (res,) = _as_list(result)
    ok = [r for r in res.ok if r.step is not None]
    if res.config.kind != "rotary" or not ok:
        raise InvalidArgumentError(
            "plot_sweep_usage draws a rotary sweep's plane usage; this sweep is "
            f"{res.config.kind} with {len(ok)} ok checkpoints with a step. Use plot_sweep_metrics for it."
        )
    columns = []
    for record in ok:
        atlas = res.atlas(record.revision)
        if layer is not None and layer not in atlas.layers:
            raise InvalidArgumentError(
                f"layer must be one of the layers read, {list(atlas.layers)}; got {layer!r}."
            )
        usage = atlas.layer_usage if layer is None else atlas.layer_usage[[atlas.layers.index(layer)]]
        columns.append(usage.mean(dim=0).numpy())
    last = res.atlas(ok[-1].revision)
    labels = [f"plane {i}: λ={w:.4g}" + (" *" if c else "") for i, (w, c) in
              enumerate(zip(last.wavelengths.tolist(), last.critical.tolist(), strict=True))]  # fmt: skip
    x = np.array([r.step + 1 for r in ok], dtype=np.float64)
    fig = go.Figure(
        go.Heatmap(
            x=x, y=labels, z=np.stack(columns, axis=1), colorscale="Viridis", colorbar={"title": "mean share"},
            text=[[plotly_text(r.revision) for r in ok]] * len(labels),
            hovertemplate="%{text}<br>%{y}<br>mean share %{z:.3f}<extra></extra>",
        )
    )  # fmt: skip
    fig.update_xaxes(type="log", title_text="training step + 1 (log scale)")
    fig.update_yaxes(title_text="rotation plane (* : a cycle within the context)")
    where = "all layers" if layer is None else f"layer {layer}"
    auto = f"{res.model} · plane usage over training ({where}, mean over heads)"
    fig.update_layout(**base_layout(title or auto, height=max(300, 40 * len(labels) + 160)))
    return fig

"""Figures of a comparison of models (:mod:`pos_geometry.comparison`): the overlays only a comparison shows.

Each function takes the comparison's ``series`` (:mod:`pos_geometry.comparison.series`, the data as
``compare.json`` holds it) and returns a figure, or None when no model has the data:

* :func:`plot_compare_rotary`: each plane's mean share of the QK form against its wavelength over the layer
  type's attention span, one line per model and layer type;
* :func:`plot_compare_residual`: each layer's positional share (and its floor, dotted) against relative depth;
* :func:`plot_compare_locality`: every head's attention on the nearest tokens, per model, beside uniform;
* :func:`plot_compare_causal`: each edit's Δloss with its interval, per model;
* :func:`plot_compare_revisions`: a model at several training steps, each claim's number against the step.

Model names are written through :func:`~pos_geometry._escape.plotly_text`.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import plotly.graph_objects as go

from pos_geometry._escape import plotly_text
from pos_geometry.plotting._style import base_layout

__all__ = [
    "comparison_figures",
    "plot_compare_causal",
    "plot_compare_locality",
    "plot_compare_residual",
    "plot_compare_revisions",
    "plot_compare_rotary",
]

_COLORS = ("#1f77b4", "#d62728", "#2ca02c", "#9467bd", "#ff7f0e", "#8c564b", "#e377c2", "#17becf", "#7f7f7f")


def _colors(series: Mapping[str, Any]) -> dict[str, str]:
    names: list[str] = []
    for key in ("rotary", "residual", "locality", "causal"):
        names += [s["model"] for s in series.get(key, []) if s["model"] not in names]
    return {name: _COLORS[i % len(_COLORS)] for i, name in enumerate(names)}


def plot_compare_rotary(series: Mapping[str, Any]) -> go.Figure | None:
    """Mean QK share per plane against wavelength / span (log x), one line per model and layer type."""
    data = series.get("rotary", [])
    if not data:
        return None
    colors, fig = _colors(series), go.Figure()
    for s in data:
        name = plotly_text(s["model"] + (f" ({s['layer_type']})" if s["layer_type"] else ""))
        fig.add_trace(go.Scatter(
            x=s["wavelength_over_span"], y=s["usage"], mode="lines+markers", name=name,
            line={"color": colors[s["model"]], "dash": "dot" if s["layer_type"] else "solid"},
            hovertemplate=f"{name}<br>wavelength / span %{{x:.3g}}<br>mean QK share %{{y:.4f}}<extra></extra>",
        ))  # fmt: skip
    fig.add_vline(x=1.0, line={"color": "#888", "dash": "dash"}, annotation_text="one cycle within the span")
    fig.update_layout(**base_layout("Rotary plane use against wavelength over the attention span"), height=460, showlegend=True,
                      xaxis={"title": "wavelength / attention span", "type": "log"},
                      yaxis={"title": "mean share of the QK form"})  # fmt: skip
    return fig


def plot_compare_residual(series: Mapping[str, Any]) -> go.Figure | None:
    """Each layer's positional share (solid) and its sampling floor (dotted) against relative depth."""
    data = series.get("residual", [])
    if not data:
        return None
    colors, fig = _colors(series), go.Figure()
    for s in data:
        name = plotly_text(s["model"])
        fig.add_trace(go.Scatter(x=s["depth"], y=s["positional_share"], mode="lines+markers", name=name,
                                 line={"color": colors[s["model"]]}, customdata=s["layer"],
                                 hovertemplate=f"{name}<br>layer %{{customdata}}<br>positional share %{{y:.3f}}<extra></extra>"))  # fmt: skip
        fig.add_trace(go.Scatter(x=s["depth"], y=s["floor"], mode="lines", name=f"{name}: floor", showlegend=False,
                                 line={"color": colors[s["model"]], "dash": "dot"}, hoverinfo="skip"))  # fmt: skip
    fig.update_layout(**base_layout("Position in the residual stream against relative depth"), height=460, showlegend=True,
                      xaxis={"title": "relative depth (layer / deepest layer read)", "range": [0, 1]},
                      yaxis={"title": "positional share (dotted: its floor)"})  # fmt: skip
    return fig


def plot_compare_locality(series: Mapping[str, Any]) -> go.Figure | None:
    """Every head's attention on the nearest tokens (a box of heads per model) and uniform attention's (◆)."""
    data = series.get("locality", [])
    if not data:
        return None
    colors, fig = _colors(series), go.Figure()
    for s in data:
        name = plotly_text(s["model"])
        fig.add_trace(go.Box(y=s["local_mass"], name=name, boxpoints="all", jitter=0.4, pointpos=0,
                             marker={"color": colors[s["model"]], "size": 4}, showlegend=False))  # fmt: skip
        fig.add_trace(go.Scatter(x=[name], y=[s["uniform"]], mode="markers", showlegend=False,
                                 marker={"symbol": "diamond", "size": 12, "color": "#333"},
                                 hovertemplate=f"{name}: uniform attention %{{y:.3f}}<extra></extra>"))  # fmt: skip
    fig.update_layout(**base_layout("Attention on the nearest tokens, per head (◆: uniform attention)"), height=460, showlegend=True,
                      yaxis={"title": "share of attention on the nearest tokens", "range": [0, 1]})  # fmt: skip
    return fig


def plot_compare_causal(series: Mapping[str, Any]) -> go.Figure | None:
    """Each edit's Δloss (edited − base) with its interval, one group of bars per edit, one colour per model."""
    data = series.get("causal", [])
    if not data:
        return None
    colors, fig = _colors(series), go.Figure()
    for s in data:
        name = plotly_text(s["model"])
        d = [e["delta"] for e in s["edits"]]
        fig.add_trace(go.Bar(
            x=[plotly_text(e["edit"]) for e in s["edits"]], y=d, name=name, marker={"color": colors[s["model"]]},
            error_y={"type": "data", "symmetric": False, "array": [e["interval"][1] - e["delta"] for e in s["edits"]],
                     "arrayminus": [e["delta"] - e["interval"][0] for e in s["edits"]]},
        ))  # fmt: skip
    fig.update_layout(**base_layout("Δloss of each positional edit, with its interval"), height=480, showlegend=True, barmode="group",
                      yaxis={"title": "Δloss (nats per token)"})  # fmt: skip
    return fig


def plot_compare_revisions(series: Mapping[str, Any]) -> go.Figure | None:
    """A model at several training steps: each number of its cells against the step, one line per number."""
    data = series.get("revisions", [])
    if not data:
        return None
    fig = go.Figure()
    for s in data:
        for name, values in s["numbers"].items():
            label = plotly_text(f"{s['model']}: {name}")
            fig.add_trace(go.Scatter(x=s["steps"], y=values, mode="lines+markers", name=label,
                                     hovertemplate=f"{label}<br>step %{{x}}<br>%{{y:.4g}}<extra></extra>"))  # fmt: skip
    fig.update_layout(**base_layout("Each claim's number against the training step"), height=520, showlegend=True,
                      xaxis={"title": "training step"}, yaxis={"title": "value"})  # fmt: skip
    return fig


def comparison_figures(series: Mapping[str, Any]) -> list[tuple[str, go.Figure, str]]:
    """``(stem, figure, caption)`` of every overlay that has data, in page order."""
    made = [
        ("rotary", plot_compare_rotary(series),
         "Each rotary plane's mean share of the QK form against its wavelength over the layer type's attention span: "
         "left of the dashed line a plane completes a cycle within the span."),
        ("residual", plot_compare_residual(series),
         "Each layer's positional share of the residual stream (dotted: the share the same contexts give with no "
         "positional signal) against relative depth."),
        ("locality", plot_compare_locality(series),
         "Each head's attention on the nearest tokens on its card's corpus; ◆ what uniform attention puts there."),
        ("causal", plot_compare_causal(series), "Δloss of each edit with its bootstrap interval, per model."),
        ("revisions", plot_compare_revisions(series), "The cells' numbers against the training step."),
    ]  # fmt: skip
    return [(stem, fig, caption) for stem, fig, caption in made if fig is not None]

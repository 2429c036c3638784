"""Figures of the learned-table QK view (:class:`~pos_geometry.atlas.position_qk.PositionQKAtlas`).

* :func:`plot_position_qk_offsets`: one row per (layer, head), one column per offset Δ; colour is the
  head's mean position logit at that offset, minus its mean over offsets (how the head's
  positional preference changes with distance).
* :func:`plot_position_qk_shares`: two layer × head heatmaps: the share of the QK form in the
  table's top principal directions, and the share of the position logits' variance the offset explains.
* :func:`plot_position_qk_lookback`: each head against its null (``permute_key_rows=True``): the
  position term's Toeplitz share, and the look-back its rotation in the table's top plane implies
  against where its logits peak.

Titles name the model (and revision); every figure is returned, never shown.
"""

from __future__ import annotations

import math

import numpy as np
import plotly.graph_objects as go
from plotly.subplots import make_subplots

from pos_geometry.atlas.position_qk import PositionQKAtlas
from pos_geometry.errors import InvalidArgumentError
from pos_geometry.plotting._style import base_layout, model_label

__all__ = ["plot_position_qk_offsets", "plot_position_qk_shares", "plot_position_qk_lookback"]


def _check(atlas: object) -> PositionQKAtlas:
    if not isinstance(atlas, PositionQKAtlas):
        raise InvalidArgumentError(
            f"atlas must be a PositionQKAtlas (from pos_geometry.position_qk_atlas); got {type(atlas).__name__}."
        )
    return atlas


def plot_position_qk_offsets(atlas: PositionQKAtlas, *, title: str | None = None) -> go.Figure:
    """Heatmap ``(n_layers·n_heads, n_positions)``: each head's mean causal logit at offset Δ, centred and
    scaled per row (in units of that head's own spread over offsets: heads whose logits differ in scale by
    orders of magnitude all show their shape; the raw scale is in the hover)."""
    atlas = _check(atlas)
    profile = atlas.offset_profile.numpy()
    n_layers, n_heads, n = profile.shape
    centred = profile - profile.mean(-1, keepdims=True)
    spread = centred.std(-1, keepdims=True)
    scaled = centred / np.where(spread > 0, spread, 1.0)
    rows = [f"L{layer} H{head}" for layer in atlas.layers for head in range(n_heads)]
    fig = go.Figure(
        go.Heatmap(
            z=scaled.reshape(n_layers * n_heads, n), x=list(range(n)), y=list(range(n_layers * n_heads)),
            text=[[r] * n for r in rows], customdata=centred.reshape(n_layers * n_heads, n),
            colorscale="RdBu_r", zmid=0.0, zmin=-3.0, zmax=3.0,
            colorbar={"title": "logit − row mean,<br>in the head's<br>own std"},
            hovertemplate="%{text}<br>offset %{x}<br>%{z:.2f} std (%{customdata:.4g} logit)<extra></extra>",
        )
    )  # fmt: skip
    for i in range(1, n_layers):  # a line between layers
        fig.add_hline(y=i * n_heads - 0.5, line={"color": "black", "width": 0.6})
    label = title or f"{model_label(atlas.provenance)}: position logits by offset, per head"
    fig.update_layout(
        **base_layout(label),
        xaxis={"title": "offset Δ = query position − key position"},
        yaxis={
            "title": f"layer (its {n_heads} heads in order)", "autorange": "reversed", "showgrid": False,
            "tickvals": [i * n_heads + (n_heads - 1) / 2 for i in range(n_layers)],
            "ticktext": [f"L{layer}" for layer in atlas.layers],
        },
        height=int(min(1400, max(420, 5 * n_layers * n_heads + 180))),
    )  # fmt: skip
    return fig


def plot_position_qk_shares(atlas: PositionQKAtlas, *, title: str | None = None) -> go.Figure:
    """Two heatmaps over (layer, head): ``form_share`` (left) and ``offset_r2`` (right), each in [0, 1]."""
    atlas = _check(atlas)
    n_heads = atlas.shape[1]
    fig = make_subplots(
        rows=1, cols=2, horizontal_spacing=0.12,
        subplot_titles=(
            f"QK form in the table's top {atlas.n_components} directions",
            "logit variance explained by the offset",
        ),
    )  # fmt: skip
    y = [f"layer {layer}" for layer in atlas.layers]
    for col, (values, name) in enumerate(
        ((atlas.form_share, "form share"), (atlas.offset_r2, "offset R²")), 1
    ):
        fig.add_trace(
            go.Heatmap(
                z=values.numpy(), x=list(range(n_heads)), y=y, zmin=0.0, zmax=1.0, colorscale="Viridis",
                name=name, showscale=col == 2,
                hovertemplate="%{y}, head %{x}<br>" + name + " %{z:.4f}<extra></extra>",
            ),
            row=1, col=col,
        )  # fmt: skip
        fig.update_xaxes(title="head", row=1, col=col)
        fig.update_yaxes(autorange="reversed", row=1, col=col)
    label = title or f"{model_label(atlas.provenance)}: how each head's QK circuit reads the position table"
    fig.update_layout(**base_layout(label), height=max(360, 22 * len(atlas.layers) + 200))
    return fig


def plot_position_qk_lookback(
    atlas: PositionQKAtlas, null: PositionQKAtlas, *, rotation: float = 0.9, title: str | None = None
) -> go.Figure:
    """Two panels, one point per head, the trained heads (``atlas``) against the ``null`` (the same heads
    with ``W_k``'s rows permuted). Left: Toeplitz share of the position term (y) against the head's
    null value (x), with the diagonal. Right: the look-back implied by the rotation in the table's top
    plane (y) against the offset where the logits peak (x), on log axes (offset + 1), for the heads
    whose form there is at least ``rotation`` a rotation; the diagonal is exact agreement."""
    atlas, null = _check(atlas), _check(null)
    if not null.permuted_key_rows or atlas.shape != null.shape:
        raise InvalidArgumentError(
            "null must be the same model's atlas with permute_key_rows=True (same layers); got "
            f"permuted_key_rows={null.permuted_key_rows}, shape {null.shape} against {atlas.shape}."
        )
    fig = make_subplots(
        rows=1, cols=2, horizontal_spacing=0.14,
        subplot_titles=("share of the position term that<br>depends on the offset alone",
                        f"heads whose top-plane form is ≥ {rotation:g} a rotation<br>"
                        "(those peaking at offset 0 left out: no look-back)"),
    )  # fmt: skip
    n_heads = atlas.shape[1]
    names = [f"L{layer} H{h}" for layer in atlas.layers for h in range(n_heads)]
    fig.add_trace(
        go.Scatter(
            x=null.toeplitz_share.flatten().numpy(), y=atlas.toeplitz_share.flatten().numpy(), mode="markers",
            text=names, name="each head: trained (y) vs its null (x)", marker={"size": 6, "color": "#555555"},
            hovertemplate="%{text}<br>null %{x:.3f}<br>trained %{y:.3f}<extra></extra>",
        ),
        row=1, col=1,
    )  # fmt: skip
    fig.add_trace(
        go.Scatter(x=[0, 1], y=[0, 1], mode="lines", line={"dash": "dash", "color": "gray"}, showlegend=False),
        row=1, col=1,
    )  # fmt: skip
    for result, label, color, symbol in (
        (atlas, "trained heads", "#1f77b4", "circle"),
        (null, "null (W_k rows permuted)", "#ff7f0e", "x"),
    ):
        keep = ((result.rotation_fit >= rotation) & (result.peak_offset >= 1)).flatten()
        peak = result.peak_offset.flatten()[keep].double().numpy()
        implied = result.implied_offset.flatten()[keep].numpy()
        fig.add_trace(
            go.Scatter(
                x=peak + 1, y=implied + 1, mode="markers", name=f"{label}: {int(keep.sum())}",
                text=[n for n, k in zip(names, keep.tolist(), strict=True) if k],
                marker={"size": 8, "color": color, "opacity": 0.85, "symbol": symbol},
                hovertemplate="%{text}<br>peak %{customdata[0]}<br>implied %{customdata[1]:.1f}<extra></extra>",
                customdata=list(zip(peak.tolist(), implied.tolist(), strict=True)),
            ),
            row=1, col=2,
        )  # fmt: skip
    top = atlas.n_positions + 1
    fig.add_trace(
        go.Scatter(x=[1, top], y=[1, top], mode="lines", line={"dash": "dash", "color": "gray"}, showlegend=False),
        row=1, col=2,
    )  # fmt: skip
    # past the table's last position an implied look-back is no look-back at all
    fig.add_hline(y=top, line={"color": "#d62728", "dash": "dot", "width": 1.2}, row=1, col=2)
    fig.add_annotation(
        x=0, xref="x2 domain", y=math.log10(top), yref="y2", xanchor="left", yanchor="bottom", showarrow=False,
        text=f"the table's last position ({atlas.n_positions - 1})", font={"size": 11, "color": "#d62728"},
    )  # fmt: skip
    fig.update_xaxes(title="Toeplitz share, null", range=[0, 1], row=1, col=1)
    fig.update_yaxes(title="Toeplitz share, trained", range=[0, 1], row=1, col=1)
    fig.update_xaxes(title="offset where the logits peak + 1", type="log", dtick=1, row=1, col=2)
    fig.update_yaxes(title="look-back the rotation implies + 1", type="log", dtick=1, row=1, col=2)
    label = title or f"{model_label(atlas.provenance)}: does a head look back N tokens by rotating the helix?"
    fig.update_layout(**base_layout(label), height=580, width=1100)
    fig.update_layout(margin={"t": 130})  # the two-line panel titles sit below the figure's own
    return fig

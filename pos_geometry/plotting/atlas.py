"""Figures of the rotary frequency atlas (:class:`~pos_geometry.atlas.rotary.RotaryAtlas`).

* :func:`plot_atlas_heatmap`: one row per (layer, head), one column per rotation plane placed at
  its wavelength on a log axis; colour is the plane's share of the head's QK form (or any other
  per-plane array). The training context (the critical wavelength) is marked: planes to its left
  complete a cycle within it.
* :func:`plot_atlas_usage`: per layer, the mean share over heads against wavelength.
* :func:`plot_atlas_head`: one head's profile: share, q/k norms and pair cosines against wavelength.

Titles name the model (and revision); every figure is returned, never shown.
"""

from __future__ import annotations

import numpy as np
import plotly.graph_objects as go
from plotly.colors import sample_colorscale
from plotly.subplots import make_subplots

from pos_geometry.atlas.rotary import RotaryAtlas
from pos_geometry.errors import InvalidArgumentError
from pos_geometry.plotting._style import FIT_COLOR, POSITION_BLUE, TOKEN_RED, base_layout, model_label

__all__ = ["plot_atlas_heatmap", "plot_atlas_usage", "plot_atlas_head", "ATLAS_VALUES"]

ATLAS_VALUES: dict[str, str] = {
    "qk_share": "share of the head's QK form",
    "q_norm": "‖W_q rows‖ of the plane",
    "k_norm": "‖W_k rows‖ of the plane",
    "q_pair_cosine": "cosine of the plane's two W_q rows",
    "k_pair_cosine": "cosine of the plane's two W_k rows",
}


def _check(atlas: object) -> RotaryAtlas:
    if not isinstance(atlas, RotaryAtlas):
        raise InvalidArgumentError(
            f"atlas must be a RotaryAtlas (from pos_geometry.rotary_atlas); got {type(atlas).__name__}."
        )
    return atlas


def _context_marker(fig: go.Figure, atlas: RotaryAtlas, **where: object) -> None:
    """A dashed line at the training context, labelled inside the plot (planes left of it complete a cycle)."""
    fig.add_vline(
        x=float(atlas.context_length), line={"color": FIT_COLOR, "dash": "dash", "width": 1.5}, **where
    )
    # annotations on a log axis take log10 of the value (shapes take the value itself)
    fig.add_annotation(
        x=float(np.log10(atlas.context_length)), xref="x", y=0.0, yref="y domain", xanchor="left", yanchor="bottom",
        text=f" training context {atlas.context_length}", showarrow=False, font={"color": FIT_COLOR, "size": 12},
        bgcolor="rgba(255,255,255,0.8)", **where,
    )  # fmt: skip


def _wavelength_axis(title: str = "wavelength 2π/θ (positions, log scale)") -> dict[str, object]:
    """A log axis labelled at whole decades only, with unlabelled minor ticks between them."""
    return {"type": "log", "title": title, "dtick": 1, "minor": {"ticks": "outside", "ticklen": 3}}


def plot_atlas_heatmap(atlas: RotaryAtlas, *, value: str = "qk_share", title: str | None = None) -> go.Figure:
    """Heatmap of ``atlas.<value>``: rows ``(layer, head)``, columns rotation planes at their wavelengths.

    Args:
        atlas: a :class:`RotaryAtlas`.
        value: one of :data:`ATLAS_VALUES` (default: the plane's QK share).
        title: replaces ``"<model>: <value label> per head and rotation plane"``.

    Returns:
        a ``Figure`` with one ``Heatmap`` of shape ``(n_layers·n_heads, n_planes)`` on a log-wavelength
        x axis, and a dashed line at the training context.
    """
    atlas = _check(atlas)
    if value not in ATLAS_VALUES:
        raise InvalidArgumentError(f"value must be one of {sorted(ATLAS_VALUES)}; got {value!r}.")
    data = getattr(atlas, value).detach().cpu().numpy()
    n_layers, n_heads, n_planes = data.shape
    rows = [f"L{layer} H{head}" for layer in atlas.layers for head in range(n_heads)]
    wavelengths = atlas.wavelengths.numpy()
    fig = go.Figure(
        go.Heatmap(
            z=data.reshape(n_layers * n_heads, n_planes),
            x=wavelengths,
            y=list(range(n_layers * n_heads)),
            text=[[r] * n_planes for r in rows],
            colorscale="Viridis",
            colorbar={"title": ATLAS_VALUES[value]},
            hovertemplate="%{text}<br>wavelength %{x:.4g}<br>"
            + ATLAS_VALUES[value]
            + " %{z:.4f}<extra></extra>",
        )
    )
    for i in range(1, n_layers):  # a line between layers: the heads of one layer sit together
        fig.add_hline(y=i * n_heads - 0.5, line={"color": "white", "width": 1})
    _context_marker(fig, atlas)
    label = title or f"{model_label(atlas.provenance)}: {ATLAS_VALUES[value]} per head and rotation plane"
    fig.update_layout(
        **base_layout(label),
        xaxis=_wavelength_axis(),
        yaxis={
            "title": f"layer (its {n_heads} heads in order)",
            "autorange": "reversed",
            "tickvals": [i * n_heads + (n_heads - 1) / 2 for i in range(n_layers)],
            "ticktext": [f"L{layer}" for layer in atlas.layers],
            "showgrid": False,
        },
        height=int(min(1600, max(420, 4 * n_layers * n_heads + 180))),
    )
    return fig


def plot_atlas_usage(atlas: RotaryAtlas, *, title: str | None = None) -> go.Figure:
    """Per layer, the mean QK share over heads of each plane against its wavelength (one line per layer).

    Returns:
        a ``Figure`` with one ``Scatter`` line per layer (colour from early to late layer) and the
        training context marked.
    """
    atlas = _check(atlas)
    wavelengths = atlas.wavelengths.numpy()
    usage = atlas.layer_usage.numpy()
    fig = go.Figure()
    layers = list(atlas.layers)
    low, high = min(layers), max(layers)
    for i, layer in enumerate(layers):  # one line per layer, coloured by its depth (the colour bar)
        shade = (layer - low) / max(high - low, 1)
        fig.add_trace(
            go.Scatter(
                x=wavelengths, y=usage[i], mode="lines", name=f"layer {layer}", showlegend=False,
                line={"color": sample_colorscale("Viridis", [shade])[0], "width": 1.5},
                hovertemplate=f"layer {layer}<br>wavelength %{{x:.4g}}<br>mean share %{{y:.4f}}<extra></extra>",
            )
        )  # fmt: skip
    fig.add_trace(  # the colour bar that says which colour is which layer
        go.Scatter(
            x=[wavelengths[0]], y=[usage[0, 0]], mode="markers", showlegend=False, hoverinfo="skip",
            marker={"size": 0.1, "color": [low], "cmin": low, "cmax": high, "colorscale": "Viridis",
                    "colorbar": {"title": "layer", "thickness": 14}},
        )
    )  # fmt: skip
    uniform = 1.0 / usage.shape[1]
    fig.add_hline(
        y=uniform, line={"color": "#444444", "dash": "dot", "width": 1.5},
        annotation_text=f"uniform use (1/{usage.shape[1]})", annotation_position="top left",
        annotation_font={"color": "#444444", "size": 12},
    )  # fmt: skip
    _context_marker(fig, atlas)
    label = title or f"{model_label(atlas.provenance)}: mean share of the QK form by wavelength, per layer"
    fig.update_layout(
        **base_layout(label), xaxis=_wavelength_axis(), yaxis={"title": "mean share over heads"}
    )
    return fig


def plot_atlas_short_share(atlas: RotaryAtlas, *, title: str | None = None) -> go.Figure:
    """Per layer, the share of the heads' QK form in planes that complete a cycle within the training
    context (short wavelengths) and in the others (long), as stacked bars; each head's short share as dots.

    Returns:
        a ``Figure`` with two ``Bar`` traces (short, long; they sum to 1 per layer) and one ``Scatter``
        of the per-head short shares.
    """
    atlas = _check(atlas)
    layers = [str(layer) for layer in atlas.layers]
    short = atlas.layer_short_share.numpy()
    fig = go.Figure()
    fig.add_trace(go.Bar(x=layers, y=short, name="short wavelengths (cycle within the context)",
                         marker_color=POSITION_BLUE))  # fmt: skip
    fig.add_trace(go.Bar(x=layers, y=1 - short, name="long wavelengths", marker_color="#c6dbef"))
    heads = atlas.short_share.numpy()
    fig.add_trace(
        go.Scatter(
            x=np.repeat(layers, heads.shape[1]), y=heads.reshape(-1), mode="markers", name="each head (short)",
            marker={"color": TOKEN_RED, "size": 4, "opacity": 0.6},
        )
    )  # fmt: skip
    label = title or (
        f"{model_label(atlas.provenance)}: share of the QK form in short vs long wavelengths, per layer "
        f"(context {atlas.context_length})"
    )
    fig.update_layout(
        **base_layout(label), barmode="stack", xaxis={"title": "layer", "type": "category"},
        yaxis={"title": "share of the QK form", "range": [0, 1]},
    )  # fmt: skip
    return fig


def plot_atlas_head(atlas: RotaryAtlas, layer: int, head: int, *, title: str | None = None) -> go.Figure:
    """One head's profile against wavelength: QK share (top), q/k norms (middle), pair cosines (bottom).

    ``layer`` is a model layer index present in ``atlas.layers``; ``head`` a query head.
    """
    atlas = _check(atlas)
    if layer not in atlas.layers:
        raise InvalidArgumentError(f"layer must be one of the atlas's layers {atlas.layers}; got {layer!r}.")
    n_heads = atlas.shape[1]
    if not isinstance(head, int) or not 0 <= head < n_heads:
        raise InvalidArgumentError(f"head must be in [0, {n_heads}); got {head!r}.")
    i = atlas.layers.index(layer)
    x = atlas.wavelengths.numpy()
    fig = make_subplots(
        rows=3, cols=1, shared_xaxes=True, vertical_spacing=0.07,
        subplot_titles=("share of the head's QK form", "norms of the plane's rows", "pair cosine"),
    )  # fmt: skip

    def line(y: object, name: str, color: str, row: int) -> None:
        fig.add_trace(
            go.Scatter(x=x, y=np.asarray(y), mode="lines+markers", name=name, line={"color": color}),
            row=row,
            col=1,
        )

    line(atlas.qk_share[i, head], "QK share", POSITION_BLUE, 1)
    line(atlas.q_norm[i, head], "query rows", POSITION_BLUE, 2)
    line(atlas.k_norm[i, head], f"key rows (key head {atlas.kv_heads[head]})", TOKEN_RED, 2)
    line(atlas.q_pair_cosine[i, head], "query pair", POSITION_BLUE, 3)
    line(atlas.k_pair_cosine[i, head], "key pair", TOKEN_RED, 3)
    for row in (1, 2, 3):
        _context_marker(fig, atlas, row=row, col=1)
        fig.update_xaxes(type="log", dtick=1, row=row, col=1)
    fig.update_xaxes(title="wavelength 2π/θ (positions, log scale)", row=3, col=1)
    label = title or f"{model_label(atlas.provenance)}: layer {layer}, head {head} by rotation plane"
    fig.update_layout(**base_layout(label), height=720)
    return fig

"""Figures of position inside the network (:mod:`pos_geometry.hidden`).

* :func:`plot_hidden_metrics`: every per-layer metric of a
  :class:`~pos_geometry.hidden.decomposition.HiddenPositions` against the layer.
* :func:`plot_hidden_trajectory`: each layer's positional part ``pos[t]`` in 3D (top principal
  components, bases Procrustes-aligned from layer to layer) with a layer slider; it is
  :func:`~pos_geometry.plotting.checkpoints.plot_checkpoints` with layers in place of checkpoints.
* :func:`plot_attention_offsets`: heatmap of the mean attention probability or pre-softmax logit of
  every (layer, head) against the offset ``Δ = query - key``.

Titles name the model and the corpus; figures are returned, never shown.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import plotly.graph_objects as go
from plotly.subplots import make_subplots

from pos_geometry._escape import plotly_text
from pos_geometry.errors import InvalidArgumentError
from pos_geometry.hidden.attention import AttentionByOffset
from pos_geometry.hidden.decomposition import HiddenPositions
from pos_geometry.plotting._style import FIT_COLOR, POSITION_BLUE, TOKEN_RED, base_layout, model_label
from pos_geometry.plotting.checkpoints import plot_checkpoints

__all__ = ["plot_hidden_metrics", "plot_hidden_trajectory", "plot_attention_offsets", "OFFSET_VALUES"]

OFFSET_VALUES: dict[str, str] = {
    "mean_probability": "mean attention probability",
    "mean_logit": "mean pre-softmax logit",
}

# (metric, label, colour) per panel: shares; shape of pos (ratios in [0, 1]); scale-free sizes. Every metric has
# its own colour (one legend serves the three panels, so a colour must name one line), and the legend is
# grouped by panel.
_PANELS: tuple[tuple[str, tuple[tuple[str, str, str], ...]], ...] = (
    (
        "share of the hidden-state variance",
        (
            ("positional_share", "positional", POSITION_BLUE),
            ("context_share", "context", TOKEN_RED),
            ("residual_share", "residual", "#7f7f7f"),
            ("relative_norm", "relative norm of pos (RMS)", "#08306b"),
            ("positional_floor", "positional share with no position (sampling floor)", "#bdbdbd"),
            ("positional_share_late", "positional, first positions left out", "#6baed6"),
            ("positional_floor_late", "its sampling floor", "#e0c9a6"),
        ),
    ),
    (
        "shape of pos[t]",
        (
            ("top_k_ratio", "top-k ratio", "#2ca02c"),
            ("top_k_ratio_without_0", "top-k ratio without position 0", "#98df8a"),
            ("smoothness", "low-frequency DCT share", FIT_COLOR),
            ("max_cosine", "max cosine pos/context subspaces", "#9467bd"),
        ),
    ),
    (
        "sizes and ratios (log scale)",
        (
            ("stable_rank", "stable rank", "#8c564b"),
            ("position0_norm_ratio", "‖pos[0]‖ / median ‖pos[t]‖", "#e377c2"),
            ("positional_over_floor", "positional share / sampling floor", "#17becf"),
        ),
    ),
)


def _corpus_note(text: str) -> str:
    return plotly_text(text if len(text) <= 90 else text[:87] + "...")


def plot_hidden_metrics(result: HiddenPositions, *, title: str | None = None) -> go.Figure:
    """Every metric of ``result`` against the layer, in three panels (shares, shape, sizes).

    Returns:
        a ``Figure`` with one line per metric (x: layer index, 0 = embedding output).
    """
    if not isinstance(result, HiddenPositions):
        raise InvalidArgumentError(
            f"plot_hidden_metrics takes a HiddenPositions; got {type(result).__name__}."
        )
    fig = make_subplots(
        rows=3, cols=1, shared_xaxes=True, subplot_titles=[p[0] for p in _PANELS], vertical_spacing=0.08
    )
    layers = list(result.layers)
    for row, (panel, lines) in enumerate(_PANELS, start=1):
        for i, (name, label, color) in enumerate(lines):
            if name == "top_k_ratio" or name == "top_k_ratio_without_0":
                label = label.replace("top-k", f"top-{result.n_components}")
            hover = f"layer %{{x}}<br>{label}: %{{y:.4f}}<extra></extra>"
            trace = go.Scatter(
                x=layers, y=result.metric(name), mode="lines+markers", name=label, line={"color": color},
                hovertemplate=hover, legendgroup=panel, legendgrouptitle={"text": panel} if i == 0 else None,
            )  # fmt: skip
            fig.add_trace(trace, row=row, col=1)
    fig.update_xaxes(
        title_text="layer (0 = embedding output)", row=3, col=1, dtick=1 if len(layers) <= 30 else None
    )
    fig.update_yaxes(range=[0, 1.02], row=1, col=1)
    fig.update_yaxes(range=[0, 1.02], row=2, col=1)
    # a stable rank of 1-3 and a norm ratio of hundreds: ratios, on a log axis where both read
    fig.update_yaxes(type="log", dtick=1, title_text="ratio (log scale)", row=3, col=1)
    label = title or (
        f"{model_label(result.provenance)}: position in the hidden states<br>"
        f"<sub>{_corpus_note(result.corpus)}</sub>"
    )
    fig.update_layout(**base_layout(label), height=820, legend={"orientation": "v", "tracegroupgap": 18})
    return fig


def plot_hidden_trajectory(
    result: HiddenPositions,
    *,
    layers: Sequence[int] | None = None,
    components: Sequence[int] = (0, 1, 2),
    reference: int | str = -1,
    title: str | None = None,
    skip_first: int | None = None,
) -> go.Figure:
    """Each layer's ``pos[t]`` in 3D (top principal components), one slider step per layer.

    Bases are Procrustes-aligned to the ``reference`` layer's (an index into the plotted layers:
    default the deepest; ``"previous"`` chains them), so the view does not jump between layers.
    ``skip_first``: positions left out at the start. Default: the result's own ``skip_first`` when position 0
    is an outlier in a plotted layer (its norm at least :data:`~pos_geometry.hidden.reading.OUTLIER_NORM`
    times the median position's: it would take the whole view and squeeze every other point into a dot, as
    the table analysis's repaired rows would), else none; the title says what was left out.
    """
    if not isinstance(result, HiddenPositions):
        raise InvalidArgumentError(
            f"plot_hidden_trajectory takes a HiddenPositions; got {type(result).__name__}."
        )
    chosen = list(result.layers if layers is None else layers)
    missing = [layer for layer in chosen if layer not in result.positional]
    if missing or not chosen:
        raise InvalidArgumentError(f"layers {missing or chosen} were not read; read layers: {result.layers}.")
    if skip_first is None:
        from pos_geometry.hidden.reading import OUTLIER_NORM

        ratio = dict(zip(result.layers, result.metric("position0_norm_ratio"), strict=True))
        skip_first = result.skip_first if any(ratio[layer] >= OUTLIER_NORM for layer in chosen) else 0
    n = result.positional[chosen[0]].n_positions
    if not 0 <= int(skip_first) < n - 2:
        raise InvalidArgumentError(
            f"skip_first must be in 0..{n - 3} (3 positions at least remain); got {skip_first}."
        )
    if title is None and skip_first:
        title = (
            f"{model_label(result.provenance)}: position in the hidden states, positions {skip_first}–{n - 1} "
            f"<br><sub>the first {skip_first} left out: position 0's norm is an outlier, which would squeeze the "
            "rest into a dot</sub>"
        )
    return plot_checkpoints(
        [result.positional[layer] for layer in chosen],
        labels=[f"layer {layer}" for layer in chosen],
        reference=reference,
        components=components,
        title=title,
        slider_prefix="layer",
        window=(int(skip_first), n) if skip_first else None,
    )


def plot_attention_offsets(
    result: AttentionByOffset,
    *,
    value: str = "mean_logit",
    max_offset: int | None = None,
    title: str | None = None,
) -> go.Figure:
    """Heatmap of ``result.<value>``: one row per (layer, head), one column per offset ``Δ``.

    ``value``: ``"mean_logit"`` (default) or ``"mean_probability"``; ``max_offset`` limits the columns
    to ``|Δ| ≤ max_offset``. Logits are drawn centred per head (each row minus its mean over offsets,
    so heads with different scales share one colour scale); the hover shows the raw value. The colour scale
    ends at the 99th percentile of what is drawn (symmetric for logits), so a few large values (the
    attention every head puts on Δ = 0 or on the first token) do not wash out the rest; larger values take the
    end colour, and the colour bar says so. With many heads the rows are labelled once per layer.
    """
    if not isinstance(result, AttentionByOffset):
        raise InvalidArgumentError(
            f"plot_attention_offsets takes an AttentionByOffset; got {type(result).__name__}."
        )
    if value not in OFFSET_VALUES:
        raise InvalidArgumentError(f"value must be one of {sorted(OFFSET_VALUES)}; got {value!r}.")
    data = getattr(result, value)
    keep = (
        np.ones(len(result.offsets), dtype=bool)
        if max_offset is None
        else np.abs(result.offsets) <= max_offset
    )
    raw = data[..., keep].reshape(-1, int(keep.sum()))
    shown = raw - raw.mean(axis=1, keepdims=True) if value == "mean_logit" else raw
    rows = [f"L{layer} H{head}" for layer in result.layers for head in range(result.n_heads)]
    finite = shown[np.isfinite(shown)]
    if value == "mean_logit":
        top = float(np.percentile(np.abs(finite), 99)) if finite.size else 1.0
        lo, hi, bar = -top, top, "logit − head mean<br>(99th percentile ± at the ends)"
    else:
        lo, hi = 0.0, float(np.percentile(finite, 99)) if finite.size else 1.0
        bar = "probability<br>(top colour: ≥ the 99th percentile)"
    fig = go.Figure(
        go.Heatmap(
            z=shown,
            x=result.offsets[keep],
            y=rows,
            customdata=raw,
            colorscale="RdBu_r" if value == "mean_logit" else "Viridis",
            zmin=lo, zmax=hi if hi > lo else lo + 1.0,
            colorbar={"title": bar},
            hovertemplate="%{y}<br>Δ = %{x}<br>" + value + " %{customdata:.4f}<extra></extra>",
        )
    )  # fmt: skip
    label = title or (
        f"{model_label(result.provenance)}: {OFFSET_VALUES[value]} by offset Δ = query − key<br>"
        f"<sub>{_corpus_note(result.corpus)}</sub>"
    )
    yaxis: dict = {"title": "layer, head", "autorange": "reversed"}
    if len(rows) > 64:  # one label per layer, at its first head; the hover names every row
        firsts = [f"L{layer} H0" for layer in result.layers]
        yaxis.update(title="layer (its heads in order)", tickmode="array", tickvals=firsts,
                     ticktext=[f"L{layer}" for layer in result.layers])  # fmt: skip
    fig.update_layout(
        **base_layout(label),
        xaxis={"title": "offset Δ (positions)"},
        yaxis=yaxis,
        height=max(360, min(1200, 12 * len(rows) + 160)),
    )
    return fig

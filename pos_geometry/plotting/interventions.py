"""Figures of causal interventions (:mod:`pos_geometry.interventions`).

* :func:`plot_intervention_sweep`: Δloss (edited − base, nats per token) against the edits' parameter,
  one line per edit family (rank k; planes removed from the slow or the fast end; scale factor...),
  with each point's bootstrap interval over sequences; edits without a parameter as labelled points.
* :func:`plot_intervention_positions`: the loss by position of both passes and their difference.

Titles name the model; every figure is returned, never shown.
"""

from __future__ import annotations

import re
from typing import Any

import numpy as np
import plotly.graph_objects as go
from plotly.subplots import make_subplots

from pos_geometry.errors import InvalidArgumentError
from pos_geometry.plotting._style import base_layout, model_label

__all__ = ["plot_intervention_sweep", "plot_intervention_positions"]


def _family(label: str) -> str:
    """The edit family of a label: the label with its numbers taken out (``"rank # PCA reconstruction..."``)."""
    return re.sub(r"\d+(\.\d+)?", "#", label)


def _categories(fig: go.Figure, sweep: Any, label: str, conf: float) -> go.Figure:
    """One marker per edit, each edit a category of the x axis (in the sweep's order)."""
    results = list(sweep.results)
    y = np.array([r.delta for r in results])
    interval = np.array([r.delta_interval for r in results])
    fig.add_trace(
        go.Scatter(
            x=[r.edit for r in results], y=y, mode="markers", name="Δloss", showlegend=False,
            marker={"size": 10, "color": ["#d62728" if lo > 0 else "#1f77b4" if hi < 0 else "#7f7f7f"
                                          for lo, hi in interval]},
            error_y={"type": "data", "symmetric": False, "array": interval[:, 1] - y, "arrayminus": y - interval[:, 0]},
            hovertemplate="%{x}<br>Δloss %{y:+.4f} nats/token<extra></extra>",
        )
    )  # fmt: skip
    fig.add_hline(y=0.0, line={"dash": "dash", "color": "gray"})
    fig.update_layout(
        **base_layout(label),
        xaxis={
            "title": "edit (each on its own: no order between them)",
            "type": "category",
            "automargin": True,
        },
        yaxis={"title": f"Δloss, nats/token ({conf:.0%} interval over sequences)"},
        height=560,
    )
    return fig


def plot_intervention_sweep(sweep, *, title: str | None = None) -> go.Figure:
    """Δloss ± interval of each edit; ``sweep``: an ``InterventionSweep``.

    When an edit family is swept over a parameter (rank 1, 4, 16; 1, 4, 16 planes removed), Δloss is drawn
    against the parameter, a line per family. When every edit stands alone (a card's default edits: unrelated
    edits, no dose to respond to), each is a category on the x axis, so no line suggests a trend between them.
    """
    from pos_geometry.interventions.run import InterventionSweep

    if not isinstance(sweep, InterventionSweep):
        raise InvalidArgumentError(
            f"sweep must be an InterventionSweep (from pos_geometry.intervene_sweep); got {type(sweep).__name__}."
        )
    fig = go.Figure()
    families: dict[str, list] = {}
    for r in sweep.results:
        families.setdefault(_family(r.edit) if r.parameter is not None else r.edit, []).append(r)
    conf = sweep.results[0].confidence
    label = (
        title
        or f"{model_label(sweep.provenance)}: what each positional edit costs (base loss {sweep.base_loss:.3f})"
    )
    if all(len(results) == 1 for results in families.values()):
        return _categories(fig, sweep, label, conf)
    for family, results in families.items():
        results = sorted(results, key=lambda r: r.parameter if r.parameter is not None else 0.0)
        x = [r.parameter if r.parameter is not None else 0.0 for r in results]
        y = np.array([r.delta for r in results])
        interval = np.array([r.delta_interval for r in results])
        fig.add_trace(
            go.Scatter(
                x=x, y=y, mode="lines+markers" if len(results) > 1 else "markers", name=family.replace("#", "n"),
                error_y={"type": "data", "symmetric": False, "array": interval[:, 1] - y, "arrayminus": y - interval[:, 0]},
                text=[r.edit for r in results],
                hovertemplate="%{text}<br>Δloss %{y:+.4f} nats/token<extra></extra>",
            )
        )  # fmt: skip
    fig.add_hline(y=0.0, line={"dash": "dash", "color": "gray"})
    fig.update_layout(
        **base_layout(label),
        xaxis={"title": "edit parameter n (rank, planes removed, factor, shift); edits without one at 0"},
        yaxis={"title": f"Δloss, nats/token ({conf:.0%} interval over sequences)"},
        legend={"orientation": "h", "yanchor": "top", "y": -0.22, "xanchor": "left", "x": 0.0},
        height=560,
    )
    return fig


def plot_intervention_positions(result, *, title: str | None = None) -> go.Figure:
    """Top: the loss at each position, base and edited; bottom: their difference. ``result``: an ``Intervention``."""
    from pos_geometry.interventions.run import Intervention

    if not isinstance(result, Intervention):
        raise InvalidArgumentError(
            f"result must be an Intervention (from pos_geometry.intervene); got {type(result).__name__}."
        )
    t = np.arange(result.base_loss_by_position.size)
    fig = make_subplots(rows=2, cols=1, shared_xaxes=True, vertical_spacing=0.08, row_heights=[0.6, 0.4])
    for values, name in (
        (result.base_loss_by_position, "as trained"),
        (result.edited_loss_by_position, result.edit),
    ):
        fig.add_trace(go.Scatter(x=t, y=values, mode="lines", name=name), row=1, col=1)
    fig.add_trace(
        go.Scatter(x=t, y=result.delta_by_position, mode="lines", name="edited − as trained", line={"color": "black"}),
        row=2, col=1,
    )  # fmt: skip
    fig.update_yaxes(title=f"{result.objective} loss, nats", row=1, col=1)
    fig.update_yaxes(title="Δloss", row=2, col=1)
    axis = (
        "position t (predicting token t + 1)"
        if result.objective == "next-token"
        else "position t (its own token, masked; mean over the contexts that mask it)"
    )
    fig.update_xaxes(title=axis, row=2, col=1)
    label = title or f"{model_label(result.provenance)}: loss by position, {result.edit}"
    fig.update_layout(**base_layout(label), height=520)
    return fig

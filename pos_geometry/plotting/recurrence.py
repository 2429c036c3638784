"""The fitted recurrence ``z[t+1] ≈ M z[t]``: eigenvalues of ``M`` and multi-step prediction error.

Left: the eigenvalues ``λ = ρ e^{iα}`` of the transition matrix in the complex plane, with the
unit circle (an undamped rotation has ``ρ = 1``; its period is ``2π/α``). Right: the ``h``-step
relative prediction error of the fitted map against the persistence baseline ``z[t+h] ≈ z[t]``.
Data: :class:`~pos_geometry.analysis.recurrence.RecurrenceFit`.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import plotly.graph_objects as go
from plotly.subplots import make_subplots

from pos_geometry.analysis._batch import BatchResult, renamed
from pos_geometry.analysis._inputs import Window
from pos_geometry.analysis.recurrence import RecurrenceFit, fit_recurrence
from pos_geometry.errors import InvalidArgumentError
from pos_geometry.plotting._style import FIT_COLOR, POSITION_BLUE, base_layout, title_for
from pos_geometry.plotting.spectra import log_ticks

__all__ = ["plot_recurrence"]

DEFAULT_HORIZONS = (1, 2, 4, 8, 16, 32, 64, 128, 256, 512)


def plot_recurrence(
    x: Any,
    *,
    n_components: int | str = "auto",
    window: Window = None,
    center: bool = False,
    affine: bool = False,
    horizons: tuple[int, ...] = DEFAULT_HORIZONS,
    title: str | None = None,
    **deprecated: Any,
) -> go.Figure:
    """Eigenvalues of the fitted transition matrix and its prediction error by horizon.

    Args:
        x: a ``RecurrenceFit``, or what :func:`~pos_geometry.analysis.recurrence.fit_recurrence`
            accepts (then fitted here with ``n_components``, ``window``, ``center``, ``affine``, ``horizons``;
            ``k=`` is a deprecated alias of ``n_components``).
        title: replaces ``"Recurrence z[t+1] ≈ M z[t] · model @ rev · rows a–b · PC1–k: x%"``.

    Returns:
        a ``Figure`` with two panels: ``Scatter`` of eigenvalues (+ the unit circle), and
        ``Scatter`` lines of the fitted-map and persistence errors against the horizon (log axes).
    """
    if isinstance(x, RecurrenceFit):
        fit = x
    else:
        n_components = renamed(
            "plot_recurrence", deprecated, {"k": "n_components"}, {"n_components": n_components}
        )["n_components"]
        fit = fit_recurrence(
            x, n_components, window=window, center=center, affine=affine, horizons=tuple(horizons)
        )
        if isinstance(fit, BatchResult):
            raise InvalidArgumentError(
                f"x is a batch of {len(fit)} matrices; this figure shows one. Pass one embedding or result[i]."
            )
    ev = np.asarray(fit.eigenvalues)
    fig = make_subplots(
        rows=1,
        cols=2,
        subplot_titles=("eigenvalues of M", "h-step relative prediction error"),
        horizontal_spacing=0.2,
    )
    theta = np.linspace(0, 2 * np.pi, 361)
    fig.add_trace(
        go.Scatter(
            x=np.cos(theta),
            y=np.sin(theta),
            mode="lines",
            name="unit circle",
            line={"color": "lightgrey"},
            hoverinfo="skip",
        ),
        row=1,
        col=1,
    )
    periods = [f"{p:.1f}" if np.isfinite(p) else "∞" for p in fit.periods]
    fig.add_trace(
        go.Scatter(
            x=ev.real,
            y=ev.imag,
            mode="markers",
            name="eigenvalues",
            marker={"size": 9, "color": POSITION_BLUE},
            customdata=np.stack([np.asarray(fit.moduli), np.asarray(periods, dtype=object)], axis=1),
            hovertemplate="λ = %{x:.4f} %{y:+.4f}i<br>|λ| = %{customdata[0]:.4f}<br>period %{customdata[1]}<extra></extra>",
        ),
        row=1,
        col=1,
    )
    hs = sorted(fit.prediction_error)
    for name, errors, style in (
        ("fitted map M^h", fit.prediction_error, {"color": FIT_COLOR}),
        ("persistence z[t+h] ≈ z[t]", fit.persistence_error, {"color": "grey", "dash": "dash"}),
    ):
        fig.add_trace(
            go.Scatter(
                x=hs,
                y=[errors[h] for h in hs],
                mode="lines+markers",
                name=name,
                line=style,
                hovertemplate=f"{name}<br>h = %{{x}}: %{{y:.3g}}<extra></extra>",
            ),
            row=1,
            col=2,
        )
    fig.update_xaxes(title_text="Re λ", row=1, col=1)
    fig.update_yaxes(title_text="Im λ", scaleanchor="x", row=1, col=1)
    # explicit ticks: plotly's own minor log ticks are bare digits ("2", "5") with no power of ten
    fig.update_xaxes(title_text="horizon h (positions)", type="log", row=1, col=2, tickvals=hs,
                     ticktext=[f"{h:g}" for h in hs])  # fmt: skip
    errors = [v for e in (fit.prediction_error, fit.persistence_error) for v in e.values() if v > 0]
    if errors:
        ticks = log_ticks(min(errors), max(errors), (1, 2, 5)) or [min(errors), max(errors)]
        fig.update_yaxes(tickvals=ticks, ticktext=[f"{t:g}" for t in ticks], row=1, col=2)
    fig.update_yaxes(title_text="relative error", type="log", row=1, col=2)
    mapping = "z[t+1] ≈ M z[t] + b" if fit.affine else "z[t+1] ≈ M z[t]"
    auto = title_for(
        fit.provenance,
        tuple(fit.window),
        fit.explained_variance_ratio,
        range(fit.n_components),
        prefix=f"Recurrence {mapping}",
    )
    fig.update_layout(base_layout(title if title is not None else auto))
    return fig

"""Individual columns of a positional table against position, each with its sinusoid fit.

The fit is the one :func:`~pos_geometry.analysis.periodicity.periodicity` reports per column,
``y(t) ≈ c + a cos(wt) + b sin(wt)`` with the searched period ``2π/w`` (``column_periods``);
for drawing, ``c, a, b`` are recovered by least squares at that period (``numpy.linalg.lstsq``),
which reproduces the reported ``column_r2``.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np
import plotly.graph_objects as go
from plotly.subplots import make_subplots

from pos_geometry.analysis._inputs import Window, as_batch, parse_window
from pos_geometry.analysis.periodicity import PeriodicityResult
from pos_geometry.errors import InvalidArgumentError
from pos_geometry.plotting._data import as_numpy, periodicity_of
from pos_geometry.plotting._style import FIT_COLOR, POSITION_BLUE, base_layout, title_for

__all__ = ["plot_columns", "sinusoid_curve"]


def sinusoid_curve(t: np.ndarray, y: np.ndarray, period: float) -> tuple[np.ndarray, float]:
    """Least-squares ``c + a cos(2πt/P) + b sin(2πt/P)`` through ``y`` ``(n,)``: the curve ``(n,)`` and its R²."""
    w = 2 * np.pi / period
    design = np.stack([np.ones_like(t), np.cos(w * t), np.sin(w * t)], axis=1)
    coef = np.linalg.lstsq(design, y, rcond=None)[0]
    curve = design @ coef
    tss = float(((y - y.mean()) ** 2).sum())
    r2 = 1 - float(((y - curve) ** 2).sum()) / tss if tss > 0 else 0.0
    return curve, r2


def plot_columns(
    x: Any,
    columns: int | Sequence[int] = 4,
    *,
    fits: bool = True,
    window: Window = None,
    result: PeriodicityResult | None = None,
    title: str | None = None,
    **periodicity_kwargs: Any,
) -> go.Figure:
    """Columns of the table as functions of position, stacked, each with its fitted sinusoid.

    Args:
        x: a ``PositionalEmbedding`` or array ``(n, d)`` (the raw columns are plotted).
        columns: column indices, or an int ``m`` for the ``m`` columns the sinusoid fits best
            (highest ``column_r2``).
        fits: overlay each column's sinusoid fit (period and R² in the subplot title).
        window: ``(start, stop)`` positions shown and fitted.
        result: a ``PeriodicityResult`` of ``x`` on the same window (computed when needed and absent;
            extra keywords go to ``periodicity``).
        title: replaces ``"Columns vs position · model @ rev · rows a–b"``.

    Returns:
        a ``Figure`` with one row per column: a ``Scatter`` of the values and, with ``fits``, a
        ``Scatter`` line of the fit.
    """
    batch = as_batch(x)
    if not batch.single:
        raise InvalidArgumentError(
            f"plot_columns shows one table; got a batch of {batch.data.shape[0]}. Pass x[i]."
        )
    start, stop = parse_window(window if result is None else (window or result.window), batch.data.shape[1])
    data = as_numpy(batch.data[0, start:stop])
    need_result = fits or isinstance(columns, int)
    if need_result:
        result = (
            result if result is not None else periodicity_of(x, window=(start, stop), **periodicity_kwargs)
        )
        if tuple(result.window) != (start, stop):
            raise InvalidArgumentError(
                f"result was computed on window {tuple(result.window)} but the columns are shown on {(start, stop)}; "
                "pass matching windows."
            )
    d = data.shape[1]
    if isinstance(columns, int) and not isinstance(columns, bool):
        if not 1 <= columns <= d:
            raise InvalidArgumentError(f"columns={columns} best columns asked for; use 1..d_model={d}.")
        cols = [int(c) for c in np.argsort(-as_numpy(result.column_r2), kind="stable")[:columns]]
    else:
        cols = [int(c) for c in columns]
        if not cols or any(not 0 <= c < d for c in cols):
            raise InvalidArgumentError(
                f"columns must be indices in 0..{d - 1} (or an int count); got {columns!r}."
            )
    t = np.arange(start, stop, dtype=np.float64)
    subtitles = []
    for c in cols:
        if fits:
            p, r2 = float(as_numpy(result.column_periods)[c]), float(as_numpy(result.column_r2)[c])
            subtitles.append(f"column {c}: period {p:.1f}, R² {r2:.3f}")
        else:
            subtitles.append(f"column {c}")
    fig = make_subplots(
        rows=len(cols), cols=1, shared_xaxes=True, subplot_titles=subtitles, vertical_spacing=0.06
    )
    for row, c in enumerate(cols, start=1):
        y = data[:, c]
        fig.add_trace(
            go.Scatter(
                x=t,
                y=y,
                mode="lines",
                name="column values",
                line={"color": POSITION_BLUE, "width": 1.5},
                legendgroup="data",
                showlegend=row == 1,
                hovertemplate=f"column {c}<br>position %{{x}}<br>value %{{y:.4g}}<extra></extra>",
            ),
            row=row,
            col=1,
        )
        if fits:
            curve, _ = sinusoid_curve(t, y, float(as_numpy(result.column_periods)[c]))
            fig.add_trace(
                go.Scatter(
                    x=t,
                    y=curve,
                    mode="lines",
                    name="sinusoid fit",
                    line={"color": FIT_COLOR, "dash": "dash"},
                    legendgroup="fit",
                    showlegend=row == 1,
                    hovertemplate="fit at position %{x}: %{y:.4g}<extra></extra>",
                ),
                row=row,
                col=1,
            )
    fig.update_xaxes(title_text="position", row=len(cols), col=1)
    auto = title_for(batch.provenances[0], (start, stop), prefix="Columns vs position")
    fig.update_layout(base_layout(title if title is not None else auto, height=max(350, 200 * len(cols))))
    return fig

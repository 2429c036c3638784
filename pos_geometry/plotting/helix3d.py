"""The interactive 3D helix: a positional table in its top three principal components.

Each row ``p`` of the table is a point ``(PC_a(p), PC_b(p), PC_c(p))`` coloured by ``p``;
optionally joined in position order, overlaid with the fitted helix
(:func:`~pos_geometry.analysis.helix.fit_helix`) and with extra rows (e.g. block means)
projected into the same basis with ``PCAResult.transform``.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np
import plotly.graph_objects as go

from pos_geometry.analysis._inputs import Window
from pos_geometry.analysis.helix import HelixFit, fit_helix
from pos_geometry.analysis.pca import PCAResult
from pos_geometry.embedding import PositionalEmbedding
from pos_geometry.errors import InvalidArgumentError
from pos_geometry.plotting._data import as_numpy, check_components, pca_of, provenance_of
from pos_geometry.plotting._style import (
    EXTRA_COLOR,
    FIT_COLOR,
    POSITION_COLORSCALE,
    base_layout,
    title_for,
)

__all__ = ["block_means", "helix_curve", "helix_traces", "plot_helix", "scene_aspect", "scene_axes"]

DEFAULT_CAMERA = {"eye": {"x": 1.45, "y": 1.45, "z": 0.8}, "up": {"x": 0, "y": 0, "z": 1}}
GRID_CAMERA = {"eye": {"x": 2.0, "y": 2.0, "z": 1.1}, "up": {"x": 0, "y": 0, "z": 1}}
"""Farther out than :data:`DEFAULT_CAMERA`: a small scene draws its tick labels and axis titles
outside the box, and WebGL clips whatever falls outside the scene's domain."""


def helix_curve(fit: HelixFit, positions: Any) -> np.ndarray:
    """The fitted helix ``z(t)`` ``(n, k)`` at positions ``t`` ``(n,)``, in the PCA coordinates of the fit.

    ``z(t) = c + v·(t − t̄) + Σ_j a_j cos(w_j t) + b_j sin(w_j t)``, with ``t̄`` the mean position of
    the fitted window (the model documented in :mod:`pos_geometry.analysis.helix`).
    """
    if hasattr(fit, "evaluate"):
        return as_numpy(fit.evaluate(positions))
    t = as_numpy(positions).reshape(-1)
    t_mean = (fit.window[0] + fit.window[1] - 1) / 2.0
    wt = np.outer(t, np.asarray(fit.frequencies, dtype=np.float64))  # (n, K)
    return (
        np.asarray(fit.center)[None, :]
        + np.outer(t - t_mean, np.asarray(fit.drift))
        + np.cos(wt) @ np.asarray(fit.cos_coef)
        + np.sin(wt) @ np.asarray(fit.sin_coef)
    )


def block_means(x: Any, size: int = 32) -> tuple[np.ndarray, np.ndarray]:
    """Means of consecutive blocks of ``size`` rows: ``(n // size, d)`` and each block's mean position.

    The blog's overlay: averaging 32 neighbouring rows removes the high-frequency wiggle, and
    the means, projected into the full table's basis, sit on the helix. A trailing partial block
    is dropped.
    """
    m = as_numpy(x)
    if m.ndim != 2:
        raise InvalidArgumentError(
            f"block_means needs a 2-D table (n_positions, d_model); got shape {m.shape}."
        )
    if isinstance(size, bool) or not isinstance(size, int) or not 1 <= size <= m.shape[0]:
        raise InvalidArgumentError(f"size must be an integer in 1..n_positions={m.shape[0]}; got {size!r}.")
    nb = m.shape[0] // size
    means = m[: nb * size].reshape(nb, size, m.shape[1]).mean(axis=1)
    centres = np.arange(nb) * size + (size - 1) / 2.0
    return means, centres


def scene_axes(res: PCAResult, components: Sequence[int], *, small: bool = False) -> dict[str, Any]:
    """Scene axes for the plotted components: titles ``"PC1 (72.4%)"`` on all three axes; ``small``
    (a scene in a grid) uses fewer ticks and smaller fonts so labels neither crowd nor get clipped."""
    ratios = as_numpy(res.explained_variance_ratio_)
    names = ("xaxis", "yaxis", "zaxis")
    style: dict[str, Any] = {"nticks": 5, "tickfont": {"size": 11}} if small else {"nticks": 7}
    font = {"size": 12} if small else {}
    return {
        ax: {"title": {"text": f"PC{c + 1} ({100 * ratios[c]:.1f}%)", "font": font}, **style}
        for ax, c in zip(names, components, strict=True)
    }


def scene_aspect(res: PCAResult, components: Sequence[int], *, floor: float = 0.4) -> dict[str, Any]:
    """The box's proportions: each axis as long as its data range relative to the longest (true
    geometry, like ``aspectmode="data"``), but never shorter than ``floor``, so a flat trajectory does
    not inflate the other two axes out of the scene (plotly's ``"data"`` keeps the volume, not the
    longest side, and a flat table's box then spills over its domain)."""
    xyz = as_numpy(res.coordinates)[:, list(components)]
    span = np.ptp(xyz, axis=0) if xyz.shape[0] else np.ones(3)
    ratio = np.maximum(span / max(float(span.max()), np.finfo(np.float64).tiny), floor)
    return {"aspectmode": "manual", "aspectratio": dict(zip("xyz", (float(r) for r in ratio), strict=True))}


def helix_traces(
    res: PCAResult,
    components: Sequence[int] = (0, 1, 2),
    *,
    line: bool = True,
    coloraxis: str | None = None,
    showscale: bool = True,
    marker_size: float = 3.0,
    relative: bool = False,
) -> list[go.Scatter3d]:
    """The point cloud (coloured by position, hover = position and coordinates) and the optional path.
    ``relative``: colour by the position's place in the window (0 at its first row, 1 at its last), for a
    colour bar shared by tables of different lengths."""
    comps = list(components)
    xyz = as_numpy(res.coordinates)[:, comps]
    pos = as_numpy(res.positions, dtype=np.int64)
    labels = [f"PC{c + 1}" for c in comps]
    color = (pos - pos.min()) / max(int(pos.max() - pos.min()), 1) if relative else pos
    marker: dict[str, Any] = {"size": marker_size, "color": color}
    if coloraxis:
        marker["coloraxis"] = coloraxis
    else:
        marker.update(
            colorscale=POSITION_COLORSCALE,
            showscale=showscale,
            colorbar={"title": {"text": "position"}, "len": 0.8, "thickness": 16},
        )
    traces = [
        go.Scatter3d(
            x=xyz[:, 0],
            y=xyz[:, 1],
            z=xyz[:, 2],
            mode="markers",
            name="positions",
            marker=marker,
            customdata=pos,
            hovertemplate=(
                "position %{customdata}<br>"
                f"{labels[0]} %{{x:.4g}}<br>{labels[1]} %{{y:.4g}}<br>{labels[2]} %{{z:.4g}}<extra></extra>"
            ),
            showlegend=False,
        )
    ]
    if line:
        traces.append(
            go.Scatter3d(
                x=xyz[:, 0],
                y=xyz[:, 1],
                z=xyz[:, 2],
                mode="lines",
                name="consecutive positions",
                line={"color": "rgba(90,90,90,0.45)", "width": 2},
                hoverinfo="skip",
                showlegend=False,
            )
        )
    return traces


def _fit_trace(res: PCAResult, fit: Any, comps: tuple[int, ...]) -> go.Scatter3d | None:
    """The fitted helix curve, or None when the verdict does not support one (a line, a curve on the
    search boundary, or a trajectory that does not beat its nulls): no curve is drawn for those."""
    if fit is True:
        fit = fit_helix(res, n_components=max(comps) + 1)
    if not isinstance(fit, HelixFit):
        raise InvalidArgumentError(
            f"fit must be None/False, True (fit here) or a HelixFit from fit_helix(); got {type(fit).__name__}."
        )
    if tuple(fit.window) != tuple(res.window) or fit.n_components <= max(comps):
        raise InvalidArgumentError(
            f"the HelixFit (window {tuple(fit.window)}, n_components={fit.n_components}) does not match the "
            f"plotted PCA (window {tuple(res.window)}, components {comps}); fit it on the same rows with "
            f"n_components > {max(comps)}, "
            "or pass fit=True."
        )
    if fit.verdict not in ("helix", "untested"):
        return None
    lo, hi = fit.window
    t = np.linspace(lo, hi - 1, max(4 * (hi - lo), 400))
    curve = helix_curve(fit, t)[:, list(comps)]
    return go.Scatter3d(
        x=curve[:, 0],
        y=curve[:, 1],
        z=curve[:, 2],
        mode="lines",
        name=f"fitted helix ({fit.verdict}, period {fit.periods[0]:.1f}, R² {fit.r2:.3f})",
        line={"color": FIT_COLOR, "width": 5},
        customdata=t,
        hovertemplate="fitted helix at position %{customdata:.1f}<extra></extra>",
    )


def _extra_trace(
    res: PCAResult, extra: Any, comps: tuple[int, ...], label: str, positions: Any
) -> go.Scatter3d:
    rows = extra.matrix if isinstance(extra, PositionalEmbedding) else extra
    coords = as_numpy(res.transform(rows))
    if coords.ndim != 2:
        raise InvalidArgumentError(
            f"extra_points must be rows (m, d_model); projected shape was {coords.shape}."
        )
    xyz = coords[:, list(comps)]
    hover = f"{label}<br>"
    custom = None
    if positions is not None:
        custom = as_numpy(positions).reshape(-1)
        if custom.shape[0] != xyz.shape[0]:
            raise InvalidArgumentError(
                f"extra_positions must have one entry per extra point ({xyz.shape[0]}); got {custom.shape[0]}."
            )
        hover += "position %{customdata:.1f}<br>"
    return go.Scatter3d(
        x=xyz[:, 0],
        y=xyz[:, 1],
        z=xyz[:, 2],
        mode="markers+lines",
        name=label,
        marker={"size": 5, "color": EXTRA_COLOR, "symbol": "diamond"},
        line={"color": EXTRA_COLOR, "width": 2},
        customdata=custom,
        hovertemplate=hover + "%{x:.4g}, %{y:.4g}, %{z:.4g}<extra></extra>",
    )


def plot_helix(
    x: Any,
    *,
    window: Window = None,
    center: bool = True,
    components: Sequence[int] = (0, 1, 2),
    line: bool = True,
    fit: bool | HelixFit | None = None,
    extra_points: Any = None,
    extra_label: str = "block means",
    extra_positions: Any = None,
    title: str | None = None,
    marker_size: float = 3.0,
) -> go.Figure:
    """Interactive 3D view of a positional table in three principal components.

    Args:
        x: a ``PositionalEmbedding``, an array/tensor ``(n, d)``, or an unbatched ``PCAResult``.
        window: ``(start, stop)`` rows to fit and show (not with a ``PCAResult``).
        center: centre the columns before PCA (ignored for a ``PCAResult``).
        components: the three 0-based components on the x, y, z axes.
        line: join consecutive positions with a thin line.
        fit: overlay a fitted helix: ``True`` fits one here, or pass a ``HelixFit`` of the same window.
        extra_points: rows ``(m, d)`` projected with ``PCAResult.transform`` and overlaid (e.g. the
            first output of :func:`block_means`); ``extra_label`` names them, ``extra_positions``
            ``(m,)`` labels them in the hover.
        title: replaces the automatic ``"model @ revision · rows a–b · PC1–3: x%"``.

    Returns:
        a ``Figure`` with a ``Scatter3d`` of the points (colour bar = position), then the optional
        path, fit and extra traces. Nothing is shown.
    """
    comps = check_components(components, 3)
    res = pca_of(x, max(comps) + 1, window=window, center=center)
    traces: list[go.Scatter3d] = helix_traces(res, comps, line=line, marker_size=marker_size)
    if fit is not None and fit is not False:
        curve = _fit_trace(res, fit, comps)
        if curve is not None:
            traces.append(curve)
    if extra_points is not None:
        traces.append(_extra_trace(res, extra_points, comps, extra_label, extra_positions))
    auto = title_for(provenance_of(res), tuple(res.window), as_numpy(res.explained_variance_ratio_), comps)
    layout = base_layout(
        title if title is not None else auto,
        scene={**scene_axes(res, comps), **scene_aspect(res, comps), "camera": DEFAULT_CAMERA},
        # the legend in the top-left corner, clear of the axis labels the scene draws along its bottom edge
        legend={"x": 0.0, "y": 1.0, "xanchor": "left", "yanchor": "top", "bgcolor": "rgba(255,255,255,0.75)"},
        margin={"l": 0, "r": 0, "t": 50, "b": 0},
    )
    return go.Figure(data=traces, layout=layout)

"""Token vs positional embeddings in the positional table's principal components (the blog's scatter).

The PCA is fitted on the positional rows only (centred over positions). Every row is then projected
with that same mean and those same axes: positions ``p`` (blue) at ``(x_p - mean) @ components_.T``
and token ``v`` (red) at ``(t_v - mean) @ components_.T``. How little of the token cloud reaches
into the positional directions is summarised in the title as the share of the token matrix's
centred variance that lies in the plotted positional subspace, next to the share a random subspace
of the same dimension would get (``k / d_model``):
:attr:`~pos_geometry.analysis.subspace.SubspaceOverlap.token_variance_fraction` and
:attr:`~pos_geometry.analysis.subspace.SubspaceOverlap.random_fraction`.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np
import plotly.graph_objects as go
import torch

from pos_geometry.analysis._inputs import Window
from pos_geometry.analysis.pca import PCAResult
from pos_geometry.analysis.subspace import SubspaceOverlap
from pos_geometry.embedding import Provenance, TokenEmbedding
from pos_geometry.errors import InvalidArgumentError
from pos_geometry.plotting._data import as_numpy, check_components, pca_of, provenance_of
from pos_geometry.plotting._style import (
    POSITION_BLUE,
    TOKEN_RED,
    base_layout,
    components_label,
    model_label,
    title_for,
)
from pos_geometry.plotting.helix3d import DEFAULT_CAMERA, scene_axes

__all__ = ["plot_token_positions", "subsample_indices", "token_variance_fraction"]


def subsample_indices(n: int, max_rows: int | None, seed: int = 0) -> np.ndarray:
    """Sorted row indices ``(min(n, max_rows),)``: all rows, or ``max_rows`` drawn without replacement.

    The draw is ``numpy.random.default_rng(seed).choice(n, max_rows, replace=False)``, sorted, so the
    same ``(n, max_rows, seed)`` always picks the same rows.
    """
    if max_rows is None or n <= max_rows:
        return np.arange(n)
    return np.sort(np.random.default_rng(seed).choice(n, size=max_rows, replace=False))


def token_variance_fraction(res: PCAResult, tokens: torch.Tensor, components: Sequence[int]) -> float:
    """Share of the centred token variance in the span of ``res.components_[components]``.

    ``‖(T - mean T) Pᵀ‖² / ‖T - mean T‖²`` over all ``(vocab, d)`` rows ``T``, in float64 on the
    tokens' device; for ``components = (0, …, k-1)`` it is ``subspace_overlap(...).token_variance_fraction``.
    """
    basis = res.components_[list(components)].to(torch.float64)
    t = tokens.to(torch.float64)
    tc = t - t.mean(dim=0, keepdim=True)
    total = float(tc.square().sum())
    return float((tc @ basis.mT).square().sum()) / total if total > 0 else 0.0


def _as_tokens(tokens: Any) -> tuple[torch.Tensor, Provenance | None]:
    """The ``(vocab, d)`` floating-point token matrix (float16/bfloat16 upcast) and its provenance, if known."""
    prov = tokens.provenance if isinstance(tokens, TokenEmbedding) else None
    t = tokens.matrix if isinstance(tokens, TokenEmbedding) else tokens
    if isinstance(t, np.ndarray):
        t = torch.from_numpy(np.ascontiguousarray(t))
    if not isinstance(t, torch.Tensor) or t.ndim != 2 or not t.is_floating_point() or t.shape[0] < 1:
        raise InvalidArgumentError(
            "tokens must be a floating-point token-embedding matrix (vocab, d_model): a TokenEmbedding, tensor "
            f"or array; got {type(tokens).__name__} of shape {tuple(getattr(t, 'shape', ()))}."
        )
    return (t.float() if t.dtype in (torch.float16, torch.bfloat16) else t), prov


def _check_overlap(ov: SubspaceOverlap, res: PCAResult, comps: tuple[int, ...]) -> None:
    k = len(comps)
    if (
        comps != tuple(range(k))
        or ov.k != k
        or ov.d_model != res.n_features_
        or tuple(ov.window) != tuple(res.window)
    ):
        raise InvalidArgumentError(
            f"the SubspaceOverlap (k={ov.k}, d_model={ov.d_model}, window {tuple(ov.window)}) does not describe "
            f"the plotted subspace (components {comps}, d_model={res.n_features_}, window {tuple(res.window)}); "
            f"it must be subspace_overlap(positions, tokens, k={k}, window=...) with the plotted components "
            f"{tuple(range(k))}, or pass overlap=True to compute the share here."
        )


def _check_max_tokens(max_tokens: Any) -> None:
    if max_tokens is not None and (
        isinstance(max_tokens, bool) or not isinstance(max_tokens, int) or max_tokens < 1
    ):
        raise InvalidArgumentError(
            f"max_tokens must be a positive integer (or None for every token); got {max_tokens!r}."
        )


def _trace(
    xy: np.ndarray,
    ids: np.ndarray,
    comps: tuple[int, ...],
    *,
    name: str,
    color: str,
    what: str,
    size: float,
    opacity: float,
) -> go.Scatter | go.Scatter3d:
    hover = f"{what} %{{customdata}}<br>" + "<br>".join(
        f"PC{c + 1} %{{{axis}:.4g}}" for c, axis in zip(comps, ("x", "y", "z"), strict=False)
    )
    common: dict[str, Any] = {
        "x": xy[:, 0],
        "y": xy[:, 1],
        "mode": "markers",
        "name": name,
        "customdata": ids,
        "marker": {"color": color, "size": size, "opacity": opacity},
        "hovertemplate": hover + "<extra></extra>",
    }
    if xy.shape[1] == 3:
        return go.Scatter3d(z=xy[:, 2], **common)
    return go.Scatter(**common)


def plot_token_positions(
    positions: Any,
    tokens: Any,
    *,
    components: Sequence[int] = (0, 1),
    window: Window = None,
    max_tokens: int | None = 2000,
    seed: int = 0,
    overlap: bool | SubspaceOverlap = True,
    title: str | None = None,
    marker_size: float = 4.0,
) -> go.Figure:
    """Positional rows (blue) and token embeddings (red) in the positional table's principal components.

    Args:
        positions: a ``PositionalEmbedding`` or array/tensor ``(n, d)``, fitted here with
            :func:`~pos_geometry.analysis.pca.pca` (centred over positions), or an unbatched ``PCAResult``.
        tokens: the token-embedding matrix ``(vocab, d)``: a ``TokenEmbedding``, tensor or array on the
            same device as ``positions``; projected with ``PCAResult.transform`` (the positions' mean and axes).
        components: two (a 2D ``Scatter``) or three (a ``Scatter3d``) distinct 0-based components.
        window: ``(start, stop)`` positional rows to fit and show (not with a ``PCAResult``).
        max_tokens: at most this many tokens are drawn, chosen by :func:`subsample_indices` with ``seed``
            (the legend and title then say ``"2000 of 50257 tokens"``); ``None`` draws all of them.
        seed: seed of the token subsample.
        overlap: ``True`` puts the token variance share in the plotted subspace (all tokens, not only the
            drawn ones) and the random baseline ``k / d`` in the title; a ``SubspaceOverlap`` of the same
            top-``k`` subspace supplies those numbers; ``False`` leaves them out.
        title: replaces the automatic title.
        marker_size: point size (tokens are drawn slightly smaller and translucent).

    Returns:
        a ``Figure`` whose traces are ``"tokens …"`` (red; ``customdata`` = token index) then
        ``"positions"`` (blue; ``customdata`` = position). Nothing is shown.
    """
    try:
        n_comp = len(components)
    except TypeError:
        n_comp = 0
    if n_comp not in (2, 3):
        raise InvalidArgumentError(
            "components must be 2 (a 2D scatter) or 3 (a 3D scatter) distinct 0-based principal-component "
            f"indices, e.g. (0, 1) or (0, 1, 2); got {components!r}."
        )
    comps = check_components(components, n_comp)
    _check_max_tokens(max_tokens)
    if isinstance(seed, bool) or not isinstance(seed, int) or seed < 0:
        raise InvalidArgumentError(f"seed must be a non-negative integer; got {seed!r}.")
    if not (isinstance(overlap, bool | SubspaceOverlap)):
        raise InvalidArgumentError(
            f"overlap must be True, False or a SubspaceOverlap from subspace_overlap(); got {type(overlap).__name__}."
        )
    res = pca_of(positions, max(comps) + 1, window=window, name="positions")
    t, tprov = _as_tokens(tokens)
    d = res.n_features_
    if t.shape[1] != d:
        raise InvalidArgumentError(
            f"tokens must have d_model={d} columns like the positional table, so both can be projected into "
            f"one basis; got tokens of shape {tuple(t.shape)}. Pass the token embedding (W_E / wte) of the "
            "same model as the positions."
        )
    vocab = int(t.shape[0])
    idx = subsample_indices(vocab, max_tokens, seed)
    rows = t if idx.shape[0] == vocab else t[torch.as_tensor(idx, device=t.device)]
    token_xy = as_numpy(res.transform(rows))[:, list(comps)]
    pos_xy = as_numpy(res.coordinates)[:, list(comps)]
    pos_ids = as_numpy(res.positions, dtype=np.int64)

    shown = f"{idx.shape[0]} of {vocab} tokens" if idx.shape[0] < vocab else f"all {vocab} tokens"
    traces = [
        _trace(
            token_xy,
            idx,
            comps,
            name=f"tokens ({shown})" if tprov is None else f"tokens of {model_label(tprov)} ({shown})",
            color=TOKEN_RED,
            what="token",
            size=0.75 * marker_size,
            opacity=0.5,
        ),
        _trace(
            pos_xy,
            pos_ids,
            comps,
            name="positions",
            color=POSITION_BLUE,
            what="position",
            size=marker_size,
            opacity=0.9,
        ),
    ]

    prov = provenance_of(res)
    auto = title_for(prov, tuple(res.window), as_numpy(res.explained_variance_ratio_), comps)
    auto = f"Tokens vs positions · {auto}"
    if overlap is not False:
        if isinstance(overlap, SubspaceOverlap):
            _check_overlap(overlap, res, comps)
            frac, rand = overlap.token_variance_fraction, overlap.random_fraction
        else:
            frac, rand = token_variance_fraction(res, t, comps), len(comps) / d
        auto += (
            f"<br>token variance in {components_label(comps)}: {100 * frac:.2f}% "
            f"(random subspace {len(comps)}/{d}: {100 * rand:.2f}%)"
        )
    if idx.shape[0] < vocab:
        auto += f" · {shown} shown"

    axes = scene_axes(res, comps) if len(comps) == 3 else None
    if axes is not None:
        extra: dict[str, Any] = {"scene": {**axes, "aspectmode": "data", "camera": DEFAULT_CAMERA}}
    else:
        ratios = as_numpy(res.explained_variance_ratio_)
        extra = {
            "xaxis": {"title": {"text": f"PC{comps[0] + 1} ({100 * ratios[comps[0]]:.1f}%)"}},
            "yaxis": {
                "title": {"text": f"PC{comps[1] + 1} ({100 * ratios[comps[1]]:.1f}%)"},
                "scaleanchor": "x",
                "scaleratio": 1,
            },
        }
    layout = base_layout(
        title if title is not None else auto,
        legend={"itemsizing": "constant"},
        margin={"l": 40, "r": 20, "t": 90, "b": 40},
        **extra,
    )
    return go.Figure(data=traces, layout=layout)

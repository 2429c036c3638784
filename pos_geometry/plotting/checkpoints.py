"""One 3D helix with a slider over training checkpoints, in Procrustes-aligned PCA bases.

Each checkpoint's table is fitted by one batched :func:`~pos_geometry.analysis.pca.pca` call; then
:func:`~pos_geometry.analysis.procrustes.align_bases` rotates every basis, inside its own top-``k``
subspace, onto the reference checkpoint's basis (default: the last, i.e. the final model). Without
that, nearby checkpoints whose leading variances are close come out with swapped or flipped axes
and the animation shows axes jumping instead of the helix forming. Checkpoint ``i`` is drawn at
its aligned coordinates ``Y_i R_iᵀ`` (``(n, k)``), as a plotly frame; a slider and play/pause
buttons step through the frames, and the axis ranges are fixed over all frames so the view holds still.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np
import plotly.graph_objects as go
import torch

from pos_geometry._escape import plotly_text
from pos_geometry.analysis._inputs import Window
from pos_geometry.analysis.pca import PCAResult, pca
from pos_geometry.analysis.procrustes import align_bases
from pos_geometry.embedding import PositionalEmbedding
from pos_geometry.errors import InvalidArgumentError
from pos_geometry.plotting._data import as_numpy, check_components, provenance_of
from pos_geometry.plotting._style import base_layout, model_label, variance_label, window_label
from pos_geometry.plotting.helix3d import DEFAULT_CAMERA, helix_traces

__all__ = ["checkpoint_labels", "plot_checkpoints"]

_FRAME_ARGS = {"mode": "immediate", "frame": {"duration": 0, "redraw": True}, "transition": {"duration": 0}}


def _fit(items: Any, k: int, window: Any, center: bool) -> PCAResult:
    """A batched ``PCAResult`` with at least ``k`` components, one fit per checkpoint."""
    if isinstance(items, PCAResult) or (
        isinstance(items, Sequence)
        and not isinstance(items, str | bytes)
        and len(items) > 0
        and all(isinstance(r, PCAResult) for r in items)
    ):
        if window is not None:
            raise InvalidArgumentError(
                f"window={window!r} cannot be applied to fitted PCAResults; pass the embeddings instead, "
                "or fit them with pca([...], window=...) yourself."
            )
        res = items if isinstance(items, PCAResult) else PCAResult.stack(items)
        if not res.batched:
            res = PCAResult.stack([res])
        if res.n_components_ < k:
            raise InvalidArgumentError(
                f"the figure needs {k} principal components but the PCA results hold {res.n_components_}; "
                f"refit with pca([...], n_components={k})."
            )
        return res
    if isinstance(items, np.ndarray | torch.Tensor) and items.ndim != 3:
        raise InvalidArgumentError(
            f"items must hold several checkpoints: a (checkpoints, n_positions, d_model) array; got shape "
            f"{tuple(items.shape)}. Pass a list of PositionalEmbedding, one per checkpoint."
        )
    if isinstance(items, Sequence) and not isinstance(items, str | bytes) and len(items) > 0:
        if all(isinstance(e, np.ndarray | torch.Tensor) for e in items):
            shapes = {tuple(e.shape) for e in items}
            if len(shapes) != 1:
                raise InvalidArgumentError(
                    f"checkpoint tables must share one shape; got shapes {sorted(shapes)}. Bring them to a "
                    "common number of positions first (e.g. PositionalEmbedding.rows(0, n))."
                )
            items = torch.stack([torch.as_tensor(e) for e in items])
        elif not all(isinstance(e, PositionalEmbedding) for e in items):
            kinds = sorted({type(e).__name__ for e in items})
            raise InvalidArgumentError(
                "items must be a list of PositionalEmbedding (or of arrays/tensors, or of PCAResults) of one "
                f"shape, a (checkpoints, n, d) array, or a batched PCAResult; got a list of {kinds}."
            )
    elif not isinstance(items, np.ndarray | torch.Tensor):
        raise InvalidArgumentError(
            "items must be a non-empty list of PositionalEmbedding (one per checkpoint), a (checkpoints, n, d) "
            f"array, or a batched PCAResult; got {type(items).__name__}."
        )
    return pca(items, n_components=k, window=window, center=center)


def checkpoint_labels(res: PCAResult, labels: Sequence[str] | None = None) -> list[str]:
    """One unique slider label per checkpoint of a batched ``res``.

    Given ``labels`` are checked (one per checkpoint, all different). By default each checkpoint is
    named by its provenance's revision (``"checkpoint-400"``), else by ``model @ revision``, else by
    its index; a repeated default name gets ``" #i"`` appended.
    """
    n = len(res)
    if labels is not None:
        out = [str(s) for s in labels]
        if len(out) != n:
            raise InvalidArgumentError(f"labels must have one entry per checkpoint ({n}); got {len(out)}.")
        dup = sorted({s for s in out if out.count(s) > 1})
        if dup:
            raise InvalidArgumentError(
                f"labels must all be different (they name the slider steps); {dup} repeat. Make them unique."
            )
        return out
    provs = [res[i].provenance for i in range(n)]
    out = [
        plotly_text(p.revision) if p.revision else (model_label(p) if p.model_id != "<array>" else str(i))
        for i, p in enumerate(provs)
    ]
    return [s if out.count(s) == 1 else f"{s} #{i}" for i, s in enumerate(out)]


def _model_name(res: PCAResult) -> str:
    ids = {res[i].provenance.model_id for i in range(len(res))}
    if len(ids) == 1:
        only = next(iter(ids))
        return "array" if only == "<array>" else plotly_text(only)
    return f"{len(ids)} models"


def _reference_name(reference: Any, labels: list[str]) -> tuple[int | None, str]:
    """The reference's index in the batch (None when it is not one of the checkpoints) and its name."""
    if isinstance(reference, str):
        return None, "the previous checkpoint (chained)"
    if (
        isinstance(reference, int)
        and not isinstance(reference, bool)
        and -len(labels) <= reference < len(labels)
    ):
        idx = reference % len(labels)
        return idx, labels[idx]
    if isinstance(reference, PCAResult) and not reference.batched:
        return None, model_label(provenance_of(reference))
    return None, "the given basis"


def _ranges(coords: np.ndarray) -> tuple[list[list[float]], dict[str, float]]:
    """Axis ranges ``[lo, hi]`` covering every frame (5% padding) and the matching aspect ratio."""
    lo, hi = coords.min(axis=(0, 1)), coords.max(axis=(0, 1))
    span = np.maximum(hi - lo, 1e-12)
    pad = 0.05 * span
    ranges = [[float(a - p), float(b + p)] for a, b, p in zip(lo, hi, pad, strict=True)]
    widths = np.array([r[1] - r[0] for r in ranges])
    ratio = widths / widths.max()
    return ranges, {"x": float(ratio[0]), "y": float(ratio[1]), "z": float(ratio[2])}


def plot_checkpoints(
    items: Any,
    *,
    labels: Sequence[str] | None = None,
    window: Window = None,
    center: bool = True,
    reference: int | str | PCAResult | torch.Tensor = -1,
    components: Sequence[int] = (0, 1, 2),
    line: bool = True,
    title: str | None = None,
    marker_size: float = 3.0,
    slider_prefix: str = "checkpoint",
) -> go.Figure:
    """One 3D helix with a slider (and play/pause) over training checkpoints, bases Procrustes-aligned.

    Args:
        items: the checkpoints, one table shape: a list of ``PositionalEmbedding`` (e.g. one model at
            revisions ``checkpoint-0 … checkpoint-N``), a list of arrays/tensors ``(n, d)`` or one
            ``(checkpoints, n, d)``, or a batched ``PCAResult`` / list of single ``PCAResult`` s.
        labels: slider labels, one per checkpoint (default: :func:`checkpoint_labels`).
        window, center: as in :func:`~pos_geometry.analysis.pca.pca` (not with ``PCAResult`` s).
        reference: what the bases are aligned to (as in :func:`~pos_geometry.analysis.procrustes.align_bases`):
            a checkpoint index (default ``-1``, the final one), ``"previous"`` (a chain), a single
            ``PCAResult`` or a ``(k, d)`` basis.
        components: the three 0-based aligned axes on x, y, z; ``k = max(components) + 1`` components
            are fitted and aligned.
        line: join consecutive positions.
        title: replaces the automatic title (the per-checkpoint titles of the frames then keep it too).
        marker_size: point size.
        slider_prefix: what the slider steps through (``"checkpoint"``; ``"layer"`` for hidden states).

    Returns:
        a ``Figure`` showing the reference checkpoint (the last one when the reference is not a
        checkpoint), with one frame per checkpoint (named by its label; data = the
        :func:`~pos_geometry.plotting.helix3d.helix_traces` at the aligned coordinates; layout = that
        checkpoint's title), a slider with one step per checkpoint, play (from the first checkpoint)
        and pause buttons, and scene axis ranges fixed over all frames.
    """
    comps = check_components(components, 3)
    res = _fit(items, max(comps) + 1, window, center)
    aligned = align_bases(res, reference)
    names = checkpoint_labels(aligned, labels)
    ref_idx, ref_name = _reference_name(reference, names)
    start = ref_idx if ref_idx is not None else len(names) - 1

    coords = as_numpy(aligned.coordinates)[..., list(comps)]  # (checkpoints, n, 3)
    ranges, aspect = _ranges(coords)
    model = _model_name(aligned)
    rows = window_label(tuple(aligned.window))
    ratios = as_numpy(aligned.explained_variance_ratio_)
    aligned_to = f"bases Procrustes-aligned to {ref_name}"

    def frame_title(i: int) -> str:
        if title is not None:
            return title
        return f"{model} · {names[i]} · {rows} · {variance_label(ratios[i], comps)}<br>{aligned_to}"

    frames = []
    for i, name in enumerate(names):
        data = helix_traces(aligned[i], comps, line=line, marker_size=marker_size)
        frames.append(go.Frame(data=data, name=name, layout={"title": {"text": frame_title(i)}}))

    steps = [{"method": "animate", "label": name, "args": [[name], _FRAME_ARGS]} for name in names]
    slider = {
        "active": start,
        "steps": steps,
        "currentvalue": {"prefix": f"{slider_prefix}: "},
        "pad": {"t": 30, "b": 10},
        "x": 0.1,
        "len": 0.9,
    }
    # play runs from the first checkpoint (the figure opens on the reference, usually the last one)
    play = {"frame": {"duration": 500, "redraw": True}, "transition": {"duration": 0}, "fromcurrent": False}
    buttons = {
        "type": "buttons",
        "direction": "left",
        "showactive": False,
        "x": 0.1,
        "xanchor": "right",
        "y": 0,
        "yanchor": "top",
        "pad": {"t": 40, "r": 10},
        "buttons": [
            {"label": "▶ play", "method": "animate", "args": [None, play]},
            {"label": "❚❚ pause", "method": "animate", "args": [[None], _FRAME_ARGS]},
        ],
    }
    axes = {
        ax: {"title": {"text": f"aligned PC{c + 1}"}, "range": rng, "autorange": False}
        for ax, c, rng in zip(("xaxis", "yaxis", "zaxis"), comps, ranges, strict=True)
    }
    layout = base_layout(
        frame_title(start),
        scene={**axes, "aspectmode": "manual", "aspectratio": aspect, "camera": DEFAULT_CAMERA},
        sliders=[slider],
        updatemenus=[buttons],
        margin={"l": 0, "r": 0, "t": 80, "b": 0},
    )
    return go.Figure(data=frames[start].data, layout=layout, frames=frames)

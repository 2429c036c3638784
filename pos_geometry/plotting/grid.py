"""Many helices side by side: one 3D scene per model, cameras linked or independent.

Plotly has no axis ``matches`` for 3D scenes, so linking is done in two parts: every scene
starts from the same ``scene.camera``, and the figure records the scene names in
``layout.meta`` (key :data:`~pos_geometry.plotting.export.LINKED_SCENES_META`), from which
:func:`~pos_geometry.plotting.export.save_figure` embeds a short script that copies the
dragged scene's camera to all the others.
"""

from __future__ import annotations

import math
import textwrap
from collections.abc import Sequence
from typing import Any

import plotly.graph_objects as go
from plotly.subplots import make_subplots

from pos_geometry.analysis._inputs import Window
from pos_geometry.errors import InvalidArgumentError
from pos_geometry.plotting._data import as_numpy, check_components, pca_of, provenance_of, split_items
from pos_geometry.plotting._style import POSITION_COLORSCALE, base_layout, components_label, title_for
from pos_geometry.plotting.export import DEFAULT_WIDTH, LINKED_SCENES_META, STATIC_SIZE_META
from pos_geometry.plotting.helix3d import DEFAULT_CAMERA, GRID_CAMERA, helix_traces, scene_aspect, scene_axes

__all__ = ["plot_helix_grid"]

ROW_HEIGHT = 420
"""Pixels per row of scenes."""
SCENE_WIDTH = 380
"""Pixels per column in static exports (PNG/SVG) when no size is given."""


def plot_helix_grid(
    items: Any,
    *,
    cols: int = 3,
    link_cameras: bool = True,
    titles: Sequence[str] | None = None,
    window: Window = None,
    center: bool = True,
    components: Sequence[int] = (0, 1, 2),
    line: bool = True,
    title: str | None = None,
) -> go.Figure:
    """A grid of 3D helices, e.g. the blog's 3×3 of nine GPT-2s.

    Args:
        items: a list of ``PositionalEmbedding``/arrays/``PCAResult``s (tables may differ in shape),
            a ``(batch, n, d)`` array, or a batched ``PCAResult``.
        cols: scenes per row (rows follow).
        link_cameras: one shared camera: all scenes start equal and, in exported HTML, rotating one
            rotates all. ``False`` leaves each scene independent.
        titles: one subplot title per item (default: ``"model @ rev · rows a–b · PC1–3: x%"``).
        window, center, components, line: as in :func:`~pos_geometry.plotting.plot_helix`.
        title: the figure title.

    Returns:
        a ``Figure`` with one scene per item (``scene``, ``scene2``, ...), points coloured on one
        shared position colour axis; ``ROW_HEIGHT`` pixels per row, and static exports (PNG/SVG)
        ``SCENE_WIDTH`` pixels per column unless a size is given.
    """
    entries = split_items(items)
    if isinstance(cols, bool) or not isinstance(cols, int) or cols < 1:
        raise InvalidArgumentError(f"cols must be a positive integer; got {cols!r}.")
    if titles is not None and len(titles) != len(entries):
        raise InvalidArgumentError(
            f"titles must have one entry per item ({len(entries)}); got {len(titles)}."
        )
    comps = check_components(components, 3)
    results = [pca_of(e, max(comps) + 1, window=window, center=center, name="each item") for e in entries]
    n = len(results)
    cols = min(cols, n)
    rows = math.ceil(n / cols)
    subtitles = (
        list(titles)
        if titles is not None
        else [
            title_for(provenance_of(r), tuple(r.window), as_numpy(r.explained_variance_ratio_), comps)
            for r in results
        ]
    )
    # long subplot titles wrap instead of running into their neighbours'
    subtitles = ["<br>".join(textwrap.wrap(s, 52)) if "<br>" not in s else s for s in subtitles]
    # tables of different lengths cannot share one position scale: each is coloured by its place in its window
    spans = {(int(as_numpy(r.positions).min()), int(as_numpy(r.positions).max())) for r in results}
    relative = len(spans) > 1
    fig = make_subplots(
        rows=rows,
        cols=cols,
        specs=[[{"type": "scene"} if r * cols + c < n else None for c in range(cols)] for r in range(rows)],
        subplot_titles=subtitles,
        horizontal_spacing=0.03,
        vertical_spacing=0.06 if rows > 1 else 0.0,
    )
    scenes = []
    for i, res in enumerate(results):
        r, c = divmod(i, cols)
        for tr in helix_traces(
            res, comps, line=line, coloraxis="coloraxis", marker_size=2.0, relative=relative
        ):
            fig.add_trace(tr, row=r + 1, col=c + 1)
        name = "scene" if i == 0 else f"scene{i + 1}"
        scenes.append(name)
        scene: dict[str, Any] = {**scene_axes(res, comps, small=True), **scene_aspect(res, comps)}
        if link_cameras:
            scene["camera"] = GRID_CAMERA if cols > 1 else DEFAULT_CAMERA  # one column: room for the default
        fig.update_layout({name: scene})
    fig.update_layout(
        base_layout(
            title
            if title is not None
            else f"Positional embeddings in {components_label(comps)} ({n} models)",
            coloraxis={
                "colorscale": POSITION_COLORSCALE,
                "colorbar": {
                    "title": {
                        "text": "position,<br>as a share of<br>each table's rows" if relative else "position"
                    }
                },
            },
            margin={"l": 30, "r": 0, "t": 110, "b": 0},
            height=110 + ROW_HEIGHT * rows,
        )
    )
    for ann in fig.layout.annotations:  # subplot titles: smaller than the figure title
        ann.font = {"size": 11}
    meta: dict[str, Any] = {STATIC_SIZE_META: [max(DEFAULT_WIDTH, SCENE_WIDTH * cols + 120), None]}
    if link_cameras:
        meta[LINKED_SCENES_META] = scenes
    fig.update_layout(meta=meta)
    return fig

"""Figures in notebooks that also show where JavaScript does not run (GitHub, nbviewer).

A plotly figure in a notebook is stored as plotly JSON (``application/vnd.plotly.v1+json``) that
JupyterLab, Notebook 7 and VS Code draw interactively, but GitHub and nbviewer strip JavaScript
and show nothing. :func:`use_static_fallback` makes every figure displayed afterwards carry a PNG
of itself too (``image/png``, rendered by kaleido in a headless Chromium): plotly's own renderer
framework joins the two (``"plotly_mimetype+pos_geometry_png"``), so interactive front ends still
draw the JSON and static viewers show the picture. It is the one plotly setting this package
changes, and only when called.
"""

from __future__ import annotations

import base64
import os
import warnings
from typing import Any

import plotly.graph_objects as go
import plotly.io as pio
from plotly.io.base_renderers import MimetypeRenderer

from pos_geometry.errors import ExportError
from pos_geometry.plotting.export import figure_to_image, find_browser

__all__ = ["STATIC_RENDERER", "use_static_fallback"]

STATIC_RENDERER = "pos_geometry_png"
"""Name under which the PNG renderer is registered with ``plotly.io.renderers``."""


class _PngRenderer(MimetypeRenderer):
    """plotly renderer: the figure as a base64 PNG (``image/png``), through :func:`figure_to_image`."""

    def __init__(self, browser: str, width: int | None, height: int | None, scale: float) -> None:
        self.browser, self.width, self.height, self.scale = browser, width, height, scale

    def to_mimebundle(self, fig_dict: dict[str, Any]) -> dict[str, str]:
        fig = go.Figure(fig_dict, skip_invalid=True)
        data = figure_to_image(
            fig, "png", width=self.width, height=self.height, scale=self.scale, browser=self.browser
        )
        return {"image/png": base64.b64encode(data).decode("ascii")}


def use_static_fallback(
    *,
    browser: str | os.PathLike[str] | None = None,
    width: int | None = None,
    height: int | None = None,
    scale: float = 1,
) -> str:
    """Display every plotly figure from now on interactively *and* as a PNG beside it.

    Sets ``plotly.io.renderers.default`` to ``"plotly_mimetype+pos_geometry_png"``: each displayed
    figure's output holds the plotly JSON and a PNG (sizes as in
    :func:`~pos_geometry.plotting.save_figure`). Without a browser the default becomes
    ``"plotly_mimetype"`` alone and a warning says how to install one.

    Returns:
        the renderer now in use.
    """
    try:
        found = find_browser(browser)
    except ExportError as exc:
        warnings.warn(f"no static fallback for the figures: {exc}", stacklevel=2)
        pio.renderers.default = "plotly_mimetype"
        return pio.renderers.default
    pio.renderers[STATIC_RENDERER] = _PngRenderer(str(found), width, height, scale)
    pio.renderers.default = f"plotly_mimetype+{STATIC_RENDERER}"
    return pio.renderers.default

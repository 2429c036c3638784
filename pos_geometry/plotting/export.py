"""Write figures to disk: standalone offline HTML, or PNG/SVG/PDF/JPEG/WebP through kaleido.

HTML embeds plotly.js by default (``plotlyjs="inline"``: one self-contained, offline file of ~5 MB);
``plotlyjs="directory"`` writes one shared ``plotly.min.js`` beside the figures instead (a folder of
figures stays offline-capable and small), and ``"cdn"`` loads it from plotly's CDN (small, needs a
network to view). These are plotly's own ``include_plotlyjs`` modes. No MathJax; a deterministic
div id; written atomically, so the same figure gives the same bytes. Figures
whose 3D cameras are linked (see :func:`~pos_geometry.plotting.plot_helix_grid`) get a
small script that keeps every scene's camera equal to the one being dragged.

Static formats are rendered by kaleido 1.x in a headless Chromium. The browser is found
in this order: the ``browser`` argument; the ``BROWSER_PATH`` environment variable (the
one choreographer/kaleido read); ``/usr/bin/chromium`` (Debian's package); ``chromium``,
``chromium-browser``, ``google-chrome`` on ``PATH``; a Chrome downloaded by
``kaleido.get_chrome()``/``plotly_get_chrome``. The path is handed to kaleido for this
call only (no environment variable is changed). Kaleido starts Chromium with
``--headless --no-sandbox --disable-gpu --no-first-run --disable-component-update
--disable-sync`` and Debian's launcher adds ``--disable-background-networking``.
"""

from __future__ import annotations

import json
import os
import shutil
from pathlib import Path
from typing import Any

import plotly.graph_objects as go
import plotly.io as pio

from pos_geometry._files import atomic_write
from pos_geometry.errors import ExportError, InvalidArgumentError
from pos_geometry.plotting._style import figure_id

__all__ = [
    "INSTALL_HINT",
    "LINKED_SCENES_META",
    "PLOTLYJS_MODES",
    "STATIC_SIZE_META",
    "figure_to_html",
    "figure_to_image",
    "find_browser",
    "save_figure",
    "write_plotlyjs",
]

DEBIAN_CHROMIUM = "/usr/bin/chromium"
_BROWSER_NAMES = ("chromium", "chromium-browser", "google-chrome", "google-chrome-stable", "chrome")
STATIC_FORMATS = ("png", "svg", "pdf", "jpeg", "webp")
_SUFFIX_FORMATS = {"html": "html", "htm": "html", "jpg": "jpeg", **{f: f for f in STATIC_FORMATS}}
DEFAULT_WIDTH, DEFAULT_HEIGHT = 900, 700

LINKED_SCENES_META = "pos_geometry_linked_scenes"
"""Key in ``fig.layout.meta`` listing the 3D scenes whose cameras move together in HTML."""

STATIC_SIZE_META = "pos_geometry_static_size"
"""Key in ``fig.layout.meta``: ``[width, height]`` of static exports when neither the call nor the
layout fixes the size (a grid needs more than 900 px across); HTML still fills the page."""

INSTALL_HINT = (
    "Static export (PNG/SVG/PDF) renders the figure in a headless Chromium through kaleido, and none was "
    "found. Install one: `apt-get install -y chromium` on Debian/Ubuntu (it lands at /usr/bin/chromium); "
    "or, where the internet is reachable, run `plotly_get_chrome` (or `kaleido.get_chrome_sync()` in "
    "Python); or point to an existing Chrome/Chromium with save_figure(..., browser=PATH) or the "
    "BROWSER_PATH environment variable. HTML export needs no browser: save to a .html path."
)

# Keeps every linked scene's camera equal to the one the user drags ({plot_id} is filled by plotly).
_LINK_CAMERAS_JS = """
(function () {
  var gd = document.getElementById('{plot_id}');
  var scenes = %s;
  var busy = false;
  function sync(ev) {
    if (busy || !ev) return;
    var cam = null, src = null;
    for (var k in ev) {
      var m = k.match(/^(scene[0-9]*)\\.camera$/);
      if (m) { cam = ev[k]; src = m[1]; break; }
    }
    if (!cam) return;
    var upd = {};
    scenes.forEach(function (s) { if (s !== src) upd[s + '.camera'] = cam; });
    busy = true;
    Plotly.relayout(gd, upd).then(function () { busy = false; }, function () { busy = false; });
  }
  gd.on('plotly_relayout', sync);
  gd.on('plotly_relayouting', sync);
})();
"""


def _static_size(fig: go.Figure) -> tuple[int | None, int | None]:
    meta = fig.layout.meta
    size = meta.get(STATIC_SIZE_META) if isinstance(meta, dict) else None
    if isinstance(size, list | tuple) and len(size) == 2:
        return (int(size[0]) if size[0] else None, int(size[1]) if size[1] else None)
    return None, None


def _linked_scenes(fig: go.Figure) -> list[str]:
    meta = fig.layout.meta
    if isinstance(meta, dict) and isinstance(meta.get(LINKED_SCENES_META), list | tuple):
        return [str(s) for s in meta[LINKED_SCENES_META]]
    return []


PLOTLYJS_MODES = ("inline", "directory", "cdn")
"""How an HTML figure gets plotly.js (see the module docstring)."""

PLOTLYJS_FILE = "plotly.min.js"


def check_plotlyjs(plotlyjs: str) -> str:
    if plotlyjs not in PLOTLYJS_MODES:
        raise InvalidArgumentError(
            f"plotlyjs must be one of {', '.join(PLOTLYJS_MODES)} (inline: one self-contained file; directory: "
            f"a shared {PLOTLYJS_FILE} beside the figures; cdn: loaded from the network); got {plotlyjs!r}."
        )
    return plotlyjs


def figure_to_html(
    fig: go.Figure,
    *,
    div_id: str | None = None,
    width: int | None = None,
    height: int | None = None,
    plotlyjs: str = "inline",
) -> str:
    """An HTML page for ``fig``.

    ``plotlyjs``: ``"inline"`` embeds plotly.js (works offline on its own), ``"directory"`` refers
    to ``plotly.min.js`` in the same folder, ``"cdn"`` to plotly's CDN. MathJax is not loaded, the div id is ``div_id`` or a hash of the
    figure (:func:`~pos_geometry.plotting._style.figure_id`), and linked 3D cameras get their
    sync script. Animations (e.g. a checkpoint slider) do not start by themselves.
    ``width``/``height`` (pixels) fix the plot size; by default it fills the page.
    """
    scenes = _linked_scenes(fig)
    post_script = _LINK_CAMERAS_JS % json.dumps(scenes) if len(scenes) > 1 else None
    return pio.to_html(
        fig,
        include_plotlyjs={"inline": True, "directory": "directory", "cdn": "cdn"}[check_plotlyjs(plotlyjs)],
        include_mathjax=False,
        full_html=True,
        div_id=div_id or figure_id(fig),
        post_script=post_script,
        config={"displaylogo": False, "responsive": True},
        auto_play=False,  # an animated figure opens on its initial frame and waits for the user
        default_width=f"{width}px" if width else "100%",
        default_height=f"{height}px" if height else "100%",
    )


def write_plotlyjs(folder: str | os.PathLike[str]) -> Path:
    """Write plotly's bundled ``plotly.min.js`` into ``folder`` (atomically; kept when already identical)."""
    from plotly.offline import get_plotlyjs

    target = Path(folder) / PLOTLYJS_FILE
    data = get_plotlyjs().encode("utf-8")
    if target.is_file() and target.stat().st_size == len(data) and target.read_bytes() == data:
        return target
    return atomic_write(target, data)


def find_browser(browser: str | os.PathLike[str] | None = None) -> Path:
    """The Chrome/Chromium executable static export will use (order in the module docstring).

    Raises :class:`ExportError` with installation instructions when there is none, or when
    ``browser``/``BROWSER_PATH`` names a file that is missing or not executable.
    """
    for origin, value in (("browser=", browser), ("BROWSER_PATH=", os.environ.get("BROWSER_PATH"))):
        if value:
            path = Path(value)
            if path.is_file() and os.access(path, os.X_OK):
                return path
            raise ExportError(f"no executable browser at {origin}{str(value)!r}. {INSTALL_HINT}")
    candidates = [DEBIAN_CHROMIUM, *(shutil.which(n) for n in _BROWSER_NAMES)]
    for cand in candidates:
        if cand and Path(cand).is_file() and os.access(cand, os.X_OK):
            return Path(cand)
    try:  # a Chrome downloaded by kaleido.get_chrome() / plotly_get_chrome
        from choreographer.browsers.chromium import Chromium

        found = Chromium.find_browser(skip_local=False)
    except Exception:  # best effort: choreographer's search is optional
        found = None
    if found and Path(found).is_file():
        return Path(found)
    raise ExportError(f"no Chrome or Chromium found. {INSTALL_HINT}")


def _format_for(path: Path, format: str | None) -> str:
    if format is not None:
        fmt = _SUFFIX_FORMATS.get(format.lower().lstrip("."))
        if fmt is None:
            raise InvalidArgumentError(
                f"format must be one of html, {', '.join(STATIC_FORMATS)} (or jpg); got {format!r}."
            )
        return fmt
    fmt = _SUFFIX_FORMATS.get(path.suffix.lower().lstrip("."))
    if fmt is None:
        raise InvalidArgumentError(
            f"cannot tell the format from the file name {str(path)!r} (suffix {path.suffix!r}); use a "
            f"suffix .html, .png, .svg, .pdf, .jpg or .webp, or pass format=..."
        )
    return fmt


RENDER_ATTEMPTS = 3
"""Renders tried before a static export fails, when kaleido's page was not ready for its script (see
:func:`_not_ready`)."""


def _not_ready(exc: Exception) -> bool:
    """Whether kaleido's render failed because its page's script had not loaded when it was called (a
    ``JavascriptError``: ``kaleido_scopes is not defined``, seen on a loaded machine): a new try renders."""
    return type(exc).__name__ == "JavascriptError" and "is not defined" in str(exc)


def _render_static(fig: go.Figure, fmt: str, width: int, height: int, scale: float, browser: Path) -> bytes:
    import kaleido
    from kaleido.errors import ChromeNotFoundError

    opts: dict[str, Any] = {"format": fmt, "width": width, "height": height, "scale": scale}
    for attempt in range(RENDER_ATTEMPTS):
        try:
            data = kaleido.calc_fig_sync(fig, opts=opts, kopts={"path": str(browser), "mathjax": False})
            break
        except ChromeNotFoundError as exc:
            raise ExportError(
                f"kaleido could not start the browser at {str(browser)!r} ({exc}). {INSTALL_HINT}"
            ) from None
        except Exception as exc:
            if attempt + 1 < RENDER_ATTEMPTS and _not_ready(exc):
                continue
            raise ExportError(
                f"kaleido failed to render the figure as {fmt} with the browser {str(browser)!r}: "
                f"{type(exc).__name__}: {exc}. Check that the browser starts (`{browser} --headless --version`), "
                "or save to .html instead."
            ) from exc
    if not isinstance(data, bytes | bytearray) or not data:
        raise ExportError(
            f"kaleido returned no {fmt} data (got {type(data).__name__}); try again or save to .html."
        )
    return bytes(data)


def save_figure(
    fig: go.Figure,
    path: str | os.PathLike[str],
    *,
    format: str | None = None,
    width: int | None = None,
    height: int | None = None,
    scale: float = 1,
    div_id: str | None = None,
    browser: str | os.PathLike[str] | None = None,
    plotlyjs: str = "directory",
) -> Path:
    """Write ``fig`` to ``path`` atomically and return the path.

    Args:
        fig: the figure.
        path: where to write; the suffix picks the format unless ``format`` is given.
        format: ``"html"``, ``"png"``, ``"svg"``, ``"pdf"``, ``"jpeg"``/``"jpg"`` or ``"webp"``.
        width, height: size in CSS pixels (default: the figure's layout size, else the size in
            ``layout.meta[STATIC_SIZE_META]``, else 900×700).
            A PNG is ``width*scale`` × ``height*scale`` pixels. For HTML, None fills the page.
        scale: resolution multiplier for raster formats (> 0).
        div_id: HTML id of the plot div (default: a hash of the figure, so output is reproducible).
        browser: Chrome/Chromium executable for static formats (default: see :func:`find_browser`).
        plotlyjs: for HTML, ``"directory"`` (the default, as every CLI command: the page loads the shared
            ``plotly.min.js`` written beside ``path`` when it is missing or stale; offline and small),
            ``"inline"`` (self-contained, ~5 MB) or ``"cdn"`` (loads plotly.js from the network).

    Raises:
        ExportError: no browser for a static format, or kaleido failed (the message says why).
        InvalidArgumentError: unknown format, or a non-positive size or scale.
    """
    if not isinstance(fig, go.Figure):
        raise InvalidArgumentError(f"fig must be a plotly.graph_objects.Figure; got {type(fig).__name__}.")
    path = Path(path)
    fmt = _format_for(path, format)
    for name, value in (("width", width), ("height", height), ("scale", scale)):
        if value is not None and not value > 0:
            raise InvalidArgumentError(f"{name} must be > 0; got {value!r}.")
    if fmt == "html":
        data = figure_to_html(fig, div_id=div_id, width=width, height=height, plotlyjs=plotlyjs).encode(
            "utf-8"
        )
        if plotlyjs == "directory":
            write_plotlyjs(path.parent)
    else:
        data = figure_to_image(fig, fmt, width=width, height=height, scale=scale, browser=browser)
    return atomic_write(path, data)


def figure_to_image(
    fig: go.Figure,
    format: str = "png",
    *,
    width: int | None = None,
    height: int | None = None,
    scale: float = 1,
    browser: str | os.PathLike[str] | None = None,
) -> bytes:
    """The bytes of ``fig`` as a static image (``format`` one of PNG/SVG/PDF/JPEG/WebP), rendered by
    kaleido in the browser :func:`find_browser` finds; sizes as in :func:`save_figure`."""
    fmt = _format_for(Path(f"figure.{format}"), format)
    if fmt == "html":
        raise InvalidArgumentError("figure_to_image makes static images; use figure_to_html for HTML.")
    hint_w, hint_h = _static_size(fig)
    w = int(width or fig.layout.width or hint_w or DEFAULT_WIDTH)
    h = int(height or fig.layout.height or hint_h or DEFAULT_HEIGHT)
    return _render_static(fig, fmt, w, h, scale, find_browser(browser))

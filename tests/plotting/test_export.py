"""save_figure: offline reproducible HTML, PNG/SVG through kaleido + Chromium, clear errors."""

from __future__ import annotations

import re
import xml.etree.ElementTree as ET
from pathlib import Path

import numpy as np
import plotly.graph_objects as go
import pytest

from pos_geometry.errors import ExportError, InvalidArgumentError
from pos_geometry.plotting import export
from pos_geometry.plotting.export import LINKED_SCENES_META, STATIC_SIZE_META, find_browser, save_figure


def _helix_figure(n: int = 120) -> go.Figure:
    t = np.linspace(0, 4 * np.pi, n)
    return go.Figure(
        go.Scatter3d(
            x=np.cos(t),
            y=np.sin(t),
            z=t,
            mode="markers",
            marker={"color": t, "colorbar": {"title": "position"}},
        ),
        layout={"title": {"text": "synthetic helix"}},
    )


def _line_figure() -> go.Figure:
    return go.Figure(
        go.Scatter(x=[0, 1, 2, 3], y=[0, 3, 1, 2], mode="lines+markers"), layout={"title": "line"}
    )


# --- HTML -----------------------------------------------------------------------------------------
def test_html_by_default_shares_one_plotlyjs_beside_it_as_the_cli_does(tmp_path: Path) -> None:
    a = save_figure(_helix_figure(), tmp_path / "a.html")
    text = a.read_text(encoding="utf-8")
    assert a.stat().st_size < 200_000 and re.search(r'<script[^>]+src="plotly\.min\.js"', text)
    assert (tmp_path / "plotly.min.js").stat().st_size > 1_000_000  # offline: the bundle is beside it


def test_html_is_standalone_offline_and_reproducible(tmp_path: Path) -> None:
    fig = _helix_figure()
    a = save_figure(fig, tmp_path / "a.html", plotlyjs="inline")
    b = save_figure(fig, tmp_path / "b.html", plotlyjs="inline")
    text = a.read_text(encoding="utf-8")
    # plotly.js is inlined (the bundle is megabytes), nothing is fetched from the network
    assert a.stat().st_size > 1_000_000
    assert not re.search(r"<script[^>]+src=", text), "an external script would break offline use"
    assert "cdn.plot.ly" not in re.sub(r"<script[^>]*>.*?</script>", "", text, flags=re.S)
    assert "MathJax.Hub" not in text and "mathjax" not in text.split("<body>")[0].lower()
    # deterministic div id -> identical files for identical figures
    assert a.read_bytes() == b.read_bytes()
    ids = set(re.findall(r'<div id="([^"]+)" class="plotly-graph-div', text))
    assert len(ids) == 1 and next(iter(ids)).startswith("pos-geometry-")
    # a different figure gets a different id
    other = save_figure(_line_figure(), tmp_path / "c.html", plotlyjs="inline").read_text(encoding="utf-8")
    assert next(iter(ids)) not in other
    # nothing but the outputs is left behind (atomic write via a temporary file)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["a.html", "b.html", "c.html"]


def test_html_explicit_div_id_and_size(tmp_path: Path) -> None:
    out = save_figure(_line_figure(), tmp_path / "fig.htm", div_id="my-plot", width=640, height=480)
    text = out.read_text(encoding="utf-8")
    assert '<div id="my-plot"' in text
    assert "height:480px; width:640px" in text


def test_linked_scene_meta_adds_camera_sync_script(tmp_path: Path) -> None:
    fig = _helix_figure()
    plain = save_figure(fig, tmp_path / "plain.html").read_text(encoding="utf-8")
    fig.update_layout(meta={LINKED_SCENES_META: ["scene", "scene2"]})
    linked = save_figure(fig, tmp_path / "linked.html").read_text(encoding="utf-8")
    assert "gd.on('plotly_relayout', sync)" not in plain
    assert '["scene", "scene2"]' in linked and "gd.on('plotly_relayout', sync)" in linked


def test_format_errors(tmp_path: Path) -> None:
    with pytest.raises(InvalidArgumentError, match=r"suffix '\.txt'"):
        save_figure(_line_figure(), tmp_path / "fig.txt")
    with pytest.raises(InvalidArgumentError, match="format must be one of"):
        save_figure(_line_figure(), tmp_path / "fig.png", format="bmp")
    with pytest.raises(InvalidArgumentError, match="scale must be > 0"):
        save_figure(_line_figure(), tmp_path / "fig.png", scale=0)
    with pytest.raises(InvalidArgumentError, match=r"plotly\.graph_objects\.Figure"):
        save_figure({"data": []}, tmp_path / "fig.html")  # type: ignore[arg-type]
    assert list(tmp_path.iterdir()) == []


def test_static_size_comes_from_the_call_the_layout_or_the_meta_hint(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    sizes = []

    def fake_render(fig, fmt, width, height, scale, browser):
        sizes.append((width, height))
        return b"rendered"

    monkeypatch.setattr(export, "_render_static", fake_render)
    browser = tmp_path / "chromium"
    browser.write_text("#!/bin/sh\n")
    browser.chmod(0o755)
    fig = _line_figure()
    save_figure(fig, tmp_path / "a.png", browser=browser)
    fig.update_layout(meta={STATIC_SIZE_META: [1260, None]})
    save_figure(fig, tmp_path / "b.png", browser=browser)
    fig.update_layout(height=500)
    save_figure(fig, tmp_path / "c.png", browser=browser)
    save_figure(fig, tmp_path / "d.png", browser=browser, width=300, height=200)
    assert sizes == [
        (export.DEFAULT_WIDTH, export.DEFAULT_HEIGHT),
        (1260, export.DEFAULT_HEIGHT),
        (1260, 500),
        (300, 200),
    ]
    # HTML ignores the hint: it fills the page
    page = save_figure(fig, tmp_path / "e.html").read_text(encoding="utf-8")
    assert "1260px" not in page


# --- missing or failing browser --------------------------------------------------------------------
def test_missing_browser_argument_raises_export_error_with_install_hint(tmp_path: Path) -> None:
    with pytest.raises(ExportError, match=r"apt-get install -y chromium") as info:
        save_figure(_line_figure(), tmp_path / "fig.png", browser=tmp_path / "no-such-chromium")
    assert "no-such-chromium" in str(info.value) and "plotly_get_chrome" in str(info.value)
    assert info.value.__cause__ is None and info.value.__suppress_context__ is False
    assert not (tmp_path / "fig.png").exists()


def test_browser_path_env_pointing_nowhere_raises(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("BROWSER_PATH", str(tmp_path / "missing" / "chrome"))
    with pytest.raises(ExportError, match=r"BROWSER_PATH=.*missing.*apt-get install -y chromium"):
        save_figure(_line_figure(), tmp_path / "fig.svg")


def test_no_browser_anywhere_raises(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.delenv("BROWSER_PATH", raising=False)
    monkeypatch.setattr(export, "DEBIAN_CHROMIUM", str(tmp_path / "usr-bin-chromium"))
    monkeypatch.setattr(export.shutil, "which", lambda name: None)
    from choreographer.browsers import chromium as choreo_chromium

    monkeypatch.setattr(choreo_chromium.Chromium, "find_browser", classmethod(lambda cls, **kw: None))
    with pytest.raises(ExportError, match=r"no Chrome or Chromium found.*apt-get install -y chromium"):
        find_browser()


def test_kaleido_failure_is_wrapped(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    import kaleido

    fake_browser = tmp_path / "chromium"
    fake_browser.write_text("#!/bin/sh\nexit 1\n")
    fake_browser.chmod(0o755)

    def boom(*args, **kwargs):
        raise RuntimeError("renderer crashed")

    monkeypatch.setattr(kaleido, "calc_fig_sync", boom)
    with pytest.raises(
        ExportError, match=r"kaleido failed to render the figure as png.*renderer crashed"
    ) as info:
        save_figure(_line_figure(), tmp_path / "fig.png", browser=fake_browser)
    assert isinstance(info.value.__cause__, RuntimeError)
    assert not (tmp_path / "fig.png").exists()


def test_a_render_whose_page_was_not_ready_is_tried_again(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    """kaleido sometimes calls its page's script before the page has loaded it (seen on a loaded machine:
    ``ReferenceError: kaleido_scopes is not defined``); that render is tried again, and only that kind."""
    import kaleido

    from pos_geometry.plotting.export import RENDER_ATTEMPTS

    class JavascriptError(Exception):  # kaleido's own class name
        pass

    fake_browser = tmp_path / "chromium"
    fake_browser.write_text("#!/bin/sh\nexit 1\n")
    fake_browser.chmod(0o755)
    calls = []

    def not_ready_once(*args, **kwargs):
        calls.append(1)
        if len(calls) == 1:
            raise JavascriptError("ReferenceError: kaleido_scopes is not defined")
        return b"\x89PNG fake"

    monkeypatch.setattr(kaleido, "calc_fig_sync", not_ready_once)
    save_figure(_line_figure(), tmp_path / "fig.png", browser=fake_browser)
    assert len(calls) == 2 and (tmp_path / "fig.png").read_bytes() == b"\x89PNG fake"

    def never_ready(*args, **kwargs):
        calls.append(1)
        raise JavascriptError("ReferenceError: kaleido_scopes is not defined")

    calls.clear()
    monkeypatch.setattr(kaleido, "calc_fig_sync", never_ready)
    with pytest.raises(ExportError, match="kaleido_scopes is not defined"):
        save_figure(_line_figure(), tmp_path / "again.png", browser=fake_browser)
    assert len(calls) == RENDER_ATTEMPTS and not (tmp_path / "again.png").exists()


# --- real rendering through Chromium ---------------------------------------------------------------
@pytest.mark.browser
def test_png_export_has_requested_size_and_is_not_blank(chromium: str, tmp_path: Path, png_pixels) -> None:
    out = save_figure(_line_figure(), tmp_path / "fig.png", width=320, height=240, scale=2, browser=chromium)
    pixels = png_pixels(out.read_bytes())
    assert pixels.shape[:2] == (480, 640)  # height*scale, width*scale
    rgb = pixels[..., :3].reshape(-1, 3)
    background = np.all(rgb == rgb[0], axis=1).mean()
    assert len(np.unique(rgb, axis=0)) > 20, "a rendered plot has lines, text and antialiasing"
    assert 0.5 < background < 0.99, f"fraction of background pixels {background:.3f}"


@pytest.mark.browser
@pytest.mark.slow
def test_gpt2_helix_png_has_the_default_size_and_shows_the_helix(
    chromium: str, gpt2_wpe: np.ndarray, tmp_path: Path, png_pixels
) -> None:
    import torch

    from pos_geometry.embedding import PositionalEmbedding, Provenance
    from pos_geometry.plotting.helix3d import plot_helix

    pe = PositionalEmbedding(torch.from_numpy(gpt2_wpe), Provenance("gpt2", "learned", "wpe"))
    out = save_figure(plot_helix(pe, window=(1, 1024), fit=True), tmp_path / "helix.png", browser=chromium)
    pixels = png_pixels(out.read_bytes())[..., :3]
    assert pixels.shape[:2] == (export.DEFAULT_HEIGHT, export.DEFAULT_WIDTH)
    rgb = pixels.reshape(-1, 3).astype(int)
    white = np.all(rgb >= 250, axis=1).mean()
    assert 0.5 < white < 0.97, f"share of white pixels {white:.3f}"
    # left of the colour bar, the points are drawn in the Viridis colours: many strongly coloured
    # pixels, from dark purple (position 1) to yellow (position 1023)
    plot_area = pixels[:, : int(0.85 * pixels.shape[1])].reshape(-1, 3).astype(int)
    saturated = plot_area[(plot_area.max(1) - plot_area.min(1)) > 80]
    assert len(saturated) > 2000 and len(np.unique(saturated, axis=0)) > 200
    purple = (saturated[:, 2] > saturated[:, 1]) & (saturated[:, 0] > saturated[:, 1])
    yellow = (saturated[:, 0] > 180) & (saturated[:, 1] > 180) & (saturated[:, 2] < 100)
    assert purple.sum() > 100 and yellow.sum() > 100


@pytest.mark.slow
@pytest.mark.browser
def test_svg_export_parses_as_xml(chromium: str, tmp_path: Path) -> None:
    out = save_figure(_line_figure(), tmp_path / "fig.svg", width=400, height=300)
    root = ET.parse(out).getroot()
    assert root.tag == "{http://www.w3.org/2000/svg}svg"
    assert float(root.get("width")) == 400 and float(root.get("height")) == 300
    texts = "".join(t.text or "" for t in root.iter("{http://www.w3.org/2000/svg}text"))
    assert "line" in texts  # the title made it into the drawing


@pytest.mark.browser
@pytest.mark.slow
def test_html_renders_in_chromium(tmp_path: Path, browser_probe) -> None:
    out = save_figure(_helix_figure(), tmp_path / "helix.html")
    report = browser_probe(out)
    assert report["errors"] == []
    assert report["roots"] == 1 and report["main_svg"] >= 1
    assert report["canvases"] >= 1, "a 3D scene draws into a WebGL canvas"
    assert "WebGL is not supported" not in report["text"]
    shot = report["screenshot"][..., :3].reshape(-1, 3)
    assert len(np.unique(shot, axis=0)) > 50, "screenshot is blank"

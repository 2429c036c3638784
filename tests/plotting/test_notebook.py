"""use_static_fallback: figures displayed in a notebook carry a PNG beside their plotly JSON."""

from __future__ import annotations

import base64

import plotly.graph_objects as go
import plotly.io as pio
import pytest

from pos_geometry.errors import ExportError
from pos_geometry.plotting import notebook
from pos_geometry.plotting.notebook import STATIC_RENDERER, use_static_fallback

PLOTLY = "application/vnd.plotly.v1+json"


@pytest.fixture
def restore_renderer():
    before = pio.renderers.default
    yield
    pio.renderers.default = before


def _figure() -> go.Figure:
    return go.Figure(go.Scatter(x=[0, 1, 2], y=[2, 0, 1]), layout={"width": 320, "height": 240})


def test_importing_changes_no_plotly_setting() -> None:
    assert STATIC_RENDERER not in pio.renderers.default


def test_without_a_browser_it_warns_and_keeps_the_interactive_figure(monkeypatch, restore_renderer) -> None:
    def missing(browser=None):
        raise ExportError("no browser here")

    monkeypatch.setattr(notebook, "find_browser", missing)
    with pytest.warns(UserWarning, match="no static fallback.*no browser here"):
        assert use_static_fallback() == "plotly_mimetype"
    assert set(_figure()._repr_mimebundle_()) == {PLOTLY}


@pytest.mark.slow
@pytest.mark.browser
def test_each_figure_carries_its_png(chromium: str, restore_renderer) -> None:
    assert use_static_fallback(browser=chromium) == f"plotly_mimetype+{STATIC_RENDERER}"
    bundle = _figure()._repr_mimebundle_()
    assert set(bundle) == {PLOTLY, "image/png"}
    data = base64.b64decode(bundle["image/png"])
    assert data[:8] == b"\x89PNG\r\n\x1a\n"
    assert int.from_bytes(data[16:20], "big") == 320 and int.from_bytes(data[20:24], "big") == 240

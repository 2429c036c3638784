"""The card in a real browser: Debian's chromium, driven by Playwright, with the network blocked. The page
loads, every figure has data and drew, the console stays clean, and the table of contents' anchors resolve."""

from __future__ import annotations

import pytest

pytestmark = pytest.mark.browser

playwright = pytest.importorskip("playwright.sync_api", reason="playwright is installed by setup.sh --dev")

CHECK = """() => {
  const plots = Array.from(document.querySelectorAll('.js-plotly-plot'));
  const anchors = Array.from(document.querySelectorAll('nav a[href^="#"]')).map(a => a.getAttribute('href').slice(1));
  return {
    plots: plots.map(p => ({id: p.id, traces: (p._fullData || []).length,
                            points: (p._fullData || []).reduce((n, t) => n + ((t.z || t.x || t.y || []).length || 0), 0),
                            drawn: p.querySelectorAll('.cartesianlayer .trace, .cartesianlayer image, .gl-container canvas').length})),
    figures: document.querySelectorAll('figure').length,
    missing: anchors.filter(a => !document.getElementById(a)),
    anchors: anchors.length,
  };
}"""


def _browser():
    from pos_geometry.errors import ExportError
    from pos_geometry.plotting.export import find_browser

    try:
        return str(find_browser())
    except ExportError as exc:
        pytest.skip(f"no Chromium on this machine ({exc})")


@pytest.fixture(scope="module")
def browser():
    """One headless chromium for the module (software WebGL, for the 3D figures)."""
    executable = _browser()
    with playwright.sync_playwright() as p:
        chromium = p.chromium.launch(
            executable_path=executable,
            headless=True,
            args=["--use-angle=swiftshader", "--enable-unsafe-swiftshader"],
        )
        yield chromium
        chromium.close()


@pytest.mark.parametrize("kind", ["learned", "rotary"])  # between them: every kind of figure a card draws
# (and the page loads with the network blocked, the console stays clean, the contents' anchors resolve)
def test_the_page_draws_every_figure_offline(kind_cards, kind, browser, tmp_path):
    c = kind_cards[kind]
    c.save(tmp_path)
    requests, errors = [], []
    page = browser.new_page()

    def route(r):
        requests.append(r.request.url)
        if r.request.url.startswith("file://"):
            r.continue_()
        else:
            r.abort()  # the network is blocked: a card needs none

    try:
        page.route("**/*", route)
        page.on("console", lambda m: errors.append(m.text) if m.type == "error" else None)
        page.on("pageerror", lambda e: errors.append(str(e)))
        page.goto((tmp_path / "index.html").as_uri(), wait_until="load")
        page.wait_for_function(
            "() => Array.from(document.querySelectorAll('.js-plotly-plot')).every(p => p._fullLayout)",
            timeout=30_000,
        )
        found = page.evaluate(CHECK)
    finally:
        page.close()
    assert errors == []
    assert [u for u in requests if not u.startswith("file://")] == []
    expected = sum(len(s.figures) for s in c.sections)
    assert found["figures"] == len(found["plots"]) == expected > 0
    for plot in found["plots"]:
        assert plot["traces"] > 0 and plot["points"] > 0, plot  # it has data
        assert plot["drawn"] > 0, plot  # and plotly drew it
    assert found["anchors"] == len(c.sections) + 1 and found["missing"] == []

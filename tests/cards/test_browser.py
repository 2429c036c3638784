"""The card in a real browser: Debian's chromium, driven by Playwright, with the network blocked. The page
loads, every figure has data and drew, the console stays clean, and the table of contents' anchors resolve."""

from __future__ import annotations

import pytest

pytestmark = pytest.mark.browser


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


@pytest.mark.parametrize("kind", ["learned", "rotary"])  # between them: every kind of figure a card draws
# (and the page loads with the network blocked, the console stays clean, the contents' anchors resolve)
def test_the_page_draws_every_figure_offline(kind_cards, kind, browser, load_page, tmp_path):
    c = kind_cards[kind]
    c.save(tmp_path)
    found, requests, errors = load_page(browser, tmp_path / "index.html", CHECK)
    assert errors == []
    assert [u for u in requests if not u.startswith("file://")] == []
    expected = sum(len(s.figures) for s in c.sections)
    assert found["figures"] == len(found["plots"]) == expected > 0
    for plot in found["plots"]:
        assert plot["traces"] > 0 and plot["points"] > 0, plot  # it has data
        assert plot["drawn"] > 0, plot  # and plotly drew it
    assert found["anchors"] == len(c.sections) + 1 and found["missing"] == []


HOSTILE_CHECK = """() => {
  const svgs = Array.from(document.querySelectorAll('.js-plotly-plot svg'));
  const texts = svgs.flatMap(s => Array.from(s.querySelectorAll('text')));
  return {
    links: svgs.reduce((n, s) => n + s.querySelectorAll('a').length, 0),
    bold: svgs.reduce((n, s) => n + s.querySelectorAll('tspan[style*="bold"]').length, 0),
    big: svgs.reduce((n, s) => n + s.querySelectorAll('[style*="90px"]').length, 0),
    images: document.querySelectorAll('img').length,
    named: texts.filter(t => t.textContent.includes('<img src=x onerror=alert(1)>')).length,
    titles: Array.from(document.querySelectorAll('.gtitle')).map(t => t.textContent),
  };
}"""


@pytest.mark.parametrize("kind", ["table", "rotary"])
def test_untrusted_names_show_as_text_in_the_figures(hostile_cards, kind, browser, load_page):
    folder, _ = hostile_cards[kind]
    found, requests, errors = load_page(browser, folder / "index.html", HOSTILE_CHECK)
    assert errors == [] and [u for u in requests if not u.startswith("file://")] == []
    assert found["links"] == 0 and found["bold"] == 0 and found["big"] == 0 and found["images"] == 0, found
    assert found["named"] > 0, found  # the name is in the figures, as its characters


def test_a_card_exports_its_page_as_png_and_pdf(kind_cards, browser, tmp_path):
    """``static="png,pdf"``: the whole page as one image (its width, figures drawn) and as a printed PDF, inside
    the one card folder; an unknown format is refused before anything is written."""
    import struct

    from pos_geometry.errors import InvalidArgumentError

    c = kind_cards["table_file"]
    with pytest.raises(InvalidArgumentError, match="png, pdf"):
        c.save(tmp_path / "bad", static="gif")
    assert not (tmp_path / "bad").exists()
    written = c.save(tmp_path / "card", static="png,pdf")
    assert sorted(p.name for p in written) == [
        "card.json",
        "card.md",
        "card.pdf",
        "card.png",
        "index.html",
        "plotly.min.js",
    ]
    png = (tmp_path / "card" / "card.png").read_bytes()
    width, height = struct.unpack(">II", png[16:24])
    assert png[:8] == b"\x89PNG\r\n\x1a\n" and width == 1200 and height > 2000
    assert (tmp_path / "card" / "card.pdf").read_bytes()[:5] == b"%PDF-"

"""The comparison's page in a real browser (Debian's chromium, the network blocked): it loads, every overlay
has data and drew, the console stays clean, and untrusted names show as their characters."""

from __future__ import annotations

import pytest

import pos_geometry as pg

pytestmark = pytest.mark.browser

CHECK = """() => {
  const plots = Array.from(document.querySelectorAll('.js-plotly-plot'));
  return {
    plots: plots.map(p => ({id: p.id, traces: (p._fullData || []).length,
                            drawn: p.querySelectorAll('.cartesianlayer .trace, .boxlayer .trace').length})),
    cells: document.querySelectorAll('table.grid td').length,
    images: document.querySelectorAll('img').length,
    links: Array.from(document.querySelectorAll('a')).map(a => a.getAttribute('href')),
  };
}"""


def test_the_comparison_draws_every_overlay_offline(kind_cards, hostile_cards, browser, load_page, tmp_path):
    folders = []
    for kind in ("rotary", "per_type", "learned"):
        kind_cards[kind].save(tmp_path / kind)
        folders.append(tmp_path / kind)
    hostile, _ = hostile_cards["rotary"]
    c = pg.compare([*folders, hostile], tmp_path / "page")
    found, requests, errors = load_page(browser, tmp_path / "page" / "index.html", CHECK)
    assert errors == [] and [u for u in requests if not u.startswith("file://")] == []
    assert [p["id"] for p in found["plots"]] == ["fig-rotary", "fig-residual", "fig-locality", "fig-causal"]
    for plot in found["plots"]:
        assert plot["traces"] > 0 and plot["drawn"] > 0, plot
    assert found["images"] == 0  # the hostile name's <img> is text
    n_models, n_claims = len(c.models), len(c.claims)
    assert found["cells"] == n_models * 10 + n_models * n_claims  # the identity rows, then the matrix
    cards = [h for h in found["links"] if h.endswith("/index.html")]
    assert len(cards) == n_models and all((tmp_path / "page" / h).is_file() for h in cards)

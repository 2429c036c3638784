"""The card as files: one offline page whose anchors resolve and whose verdicts are the card's, strict JSON with
every number and its provenance, Markdown with the same verdict lines; nothing half-written on bad input."""

from __future__ import annotations

import html
import json
import re

import pytest

from pos_geometry._escape import markdown_text
from pos_geometry.cards.render import render_html, render_markdown
from pos_geometry.errors import InvalidArgumentError


@pytest.mark.parametrize("kind", ["learned", "rotary", "table_file"])
def test_the_page_holds_every_verdict_section_and_figure(kind_cards, kind):
    c = kind_cards[kind]
    page = render_html(c)
    ids = set(re.findall(r'id="([^"]+)"', page))
    links = set(re.findall(r'href="#([^"]+)"', page))
    assert links and links <= ids  # every in-page link lands somewhere
    assert {s.key for s in c.sections} <= ids
    for v in c.verdicts:
        assert html.escape(v.text) in page
    for s in c.sections:
        for stem, _, caption in s.figures:
            assert f'id="fig-{stem}"' in page and html.escape(caption) in page
    assert '<script src="plotly.min.js"></script>' in page and "cdn.plot.ly" not in page
    assert "cost:" in page and c.provenance.model_id in page


def test_the_markdown_has_the_same_verdicts(kind_cards):
    c = kind_cards["rotary"]
    md = render_markdown(c)
    assert all(markdown_text(v.text) in md for v in c.verdicts)  # each as its characters (escaped)
    assert md.count("\n## ") == len(c.sections) + 2  # verdicts, each section, cost and provenance


def test_save_writes_the_page_json_markdown_and_plotly_once(kind_cards, tmp_path):
    c = kind_cards["learned"]
    written = c.save(tmp_path / "card")
    assert sorted(p.name for p in written) == ["card.json", "card.md", "index.html", "plotly.min.js"]
    data = json.loads((tmp_path / "card" / "card.json").read_text())
    assert data["type"] == "Card" and data["kind"] == "learned table"
    assert [s["key"] for s in data["sections"]] == [s.key for s in c.sections]
    table = next(s for s in data["sections"] if s["key"] == "table")
    assert table["values"]["top3"] == c.section("table").values["top3"]
    assert table["provenance"][0]["model_id"] == c.section("table").provenance[0].model_id
    inline = c.save(tmp_path / "inline", plotlyjs="inline")
    assert "plotly.min.js" not in [p.name for p in inline]
    assert len((tmp_path / "inline" / "index.html").read_bytes()) > 3_000_000  # plotly.js is in the page


def test_a_card_refuses_the_cdn_and_leaves_no_folder(kind_cards, tmp_path):
    with pytest.raises(InvalidArgumentError, match="offline"):
        kind_cards["learned"].save(tmp_path / "nope", plotlyjs="cdn")
    assert not (tmp_path / "nope").exists()
    (tmp_path / "file").write_text("x")
    with pytest.raises(InvalidArgumentError, match="is a file"):
        kind_cards["learned"].save(tmp_path / "file")

"""The card as a publishing surface: a model's file name, its config's strings, a tensor key and a corpus name
reach card.md, the page's figures and the terminal as their characters, never as markup, a link, a new
Markdown block or a terminal escape (the page in a real browser: ``test_browser.py``)."""

from __future__ import annotations

import json
import re

import _pos_geometry_tests_markdown as markdown
import pytest

ALLOWED = {"h1", "h2", "p", "ul", "li", "strong", "table", "thead", "tbody", "tr", "th", "td"}


@pytest.mark.parametrize("renderer", ["python-markdown", "markdown-it"])
@pytest.mark.parametrize("kind", ["table", "rotary"])
def test_card_md_renders_no_element_link_or_block_from_untrusted_strings(hostile_cards, kind, renderer):
    folder, _ = hostile_cards[kind]
    card = json.loads((folder / "card.json").read_text())
    found = markdown.tags(markdown.render((folder / "card.md").read_text(), renderer))
    assert set(found) <= ALLOWED, sorted(set(found) - ALLOWED)
    assert found.count("h1") == 1
    assert found.count("h2") == len(card["sections"]) + 2  # verdicts, each section, cost: no fake heading
    n_verdicts = sum(len(s["verdicts"]) for s in card["sections"])
    assert found.count("li") == n_verdicts + sum(
        len(s["verdicts"]) for s in card["sections"] if s["status"] == "ran"
    )  # the verdict list and each section's list: no fake list item


@pytest.mark.parametrize("kind", ["table", "rotary"])
def test_the_terminal_lines_hold_no_escape_and_one_line_per_verdict(hostile_cards, kind):
    folder, output = hostile_cards[kind]
    card = json.loads((folder / "card.json").read_text())
    assert "\x1b" not in output and "\\x1b" in output
    printed = [line for line in output.splitlines() if line.startswith("  [")]
    assert len(printed) == sum(len(s["verdicts"]) for s in card["sections"])


@pytest.mark.parametrize("kind", ["table", "rotary"])
def test_figure_titles_and_names_carry_no_plotly_markup(hostile_cards, kind):
    folder, _ = hostile_cards[kind]
    page = (folder / "index.html").read_text()
    assert "&lt;img src=x onerror" in page or "\\u0026lt;img src=x onerror" in page  # the name, escaped
    for markup in ("<a href=x>", "<b>bold", "<span style=font-size:90px>", "<img src=x"):
        assert markup not in page


_SOURCE_FILE = re.compile(r"\b[\w/]+\.py\b")


@pytest.mark.parametrize("kind", ["learned", "rotary", "per_type", "no_table", "table_file"])
def test_no_card_text_names_a_source_file(kind_cards, kind):
    """A reader's page says why in words, never by pointing into the package's files."""
    from pos_geometry.cards.render import render_markdown

    made = kind_cards[kind]
    texts = [render_markdown(made), *(f"{k} {v}" for k, v in made.summary_rows()), json.dumps(made.to_dict())]
    assert not [m for text in texts for m in _SOURCE_FILE.findall(text)], kind

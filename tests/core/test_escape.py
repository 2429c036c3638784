"""One escaping rule per output format: every hostile string renders as its own characters in Markdown
(Python-Markdown as MkDocs uses it, markdown-it as notebooks and most sites do, raw HTML on in both), in a
plotly label and on a terminal line; none forms an element, a link, emphasis, a heading, a list item or a
table cell."""

from __future__ import annotations

import html

import _pos_geometry_tests_markdown as markdown
import pytest

from pos_geometry._escape import html_text, markdown_text, plotly_text, terminal_text

HOSTILE = [
    "m<img src=x onerror=alert(1)>.npy",
    "</script><script>alert(1)</script>",
    "a tensor key ending in a backtick`",
    "\n\n## Verdicts\n\n- [measured] a fake verdict",
    "[x](javascript:alert(1))",
    "![i](http://127.0.0.1/i.png)",
    "**bold** __bold__ *em* _em_ ~~strike~~ $x^2$ $$y$$",
    "&amp; &#60;b&#62; &lt;i&gt;",
    '<a href="http://127.0.0.1/">link</a> <b>b</b> <span style="font-size:90px">big</span>',
    "a | b | c",
    "`code` ``more`` ```fence```",
    "1. not a list\r2. nor this\u2028# nor a heading",
    "\\*escaped\\* \\",
    "<!-- comment --> <![CDATA[x]]> <?php x ?>",
    "{{ template }} {% tag %} <<>> > quote",
]


def _tags(rendered: str) -> list[str]:
    return markdown.tags(rendered)


def _text(rendered: str) -> str:
    return markdown.text(rendered)


def _renderers():
    return {name: (lambda text, name=name: markdown.render(text, name)) for name in markdown.RENDERERS}


@pytest.mark.parametrize("renderer", ["python-markdown", "markdown-it"])
@pytest.mark.parametrize("text", HOSTILE)
def test_markdown_text_renders_as_its_characters_and_nothing_else(renderer, text):
    render = _renderers()[renderer]
    out = render(f"before {markdown_text(text)} after")
    assert _tags(out) == ["p"], out  # one paragraph: no element, link, image, emphasis, code or heading
    assert _text(out) == " ".join(f"before {' '.join(text.splitlines())} after".split())


@pytest.mark.parametrize("renderer", ["python-markdown", "markdown-it"])
def test_markdown_text_keeps_a_table_row_one_row_of_two_cells(renderer):
    render = _renderers()[renderer]
    rows = "\n".join(f"| {markdown_text(t)} | {markdown_text(t[::-1])} |" for t in HOSTILE)
    out = render(f"| key | value |\n|---|---|\n{rows}\n")
    tags = _tags(out)
    assert tags.count("tr") == len(HOSTILE) + 1 and tags.count("td") == 2 * len(HOSTILE)
    assert set(tags) <= {"table", "thead", "tbody", "tr", "th", "td"}


def test_markdown_text_shows_control_characters_and_keeps_one_line():
    out = markdown_text("a\x1b[31mred\x07\n\rb")
    assert "\x1b" not in out and "\x07" not in out and "\n" not in out and "\r" not in out
    assert "\\x1b" in out


@pytest.mark.parametrize("text", HOSTILE)
def test_plotly_text_leaves_no_tag_and_decodes_to_the_text(text):
    out = plotly_text(text)
    assert "<" not in out and ">" not in out and "\n" not in out
    assert html.unescape(out) == " ".join(text.splitlines())  # plotly decodes these entities


def test_html_text_and_terminal_text():
    assert _tags(html_text(HOSTILE[0])) == [] and html.unescape(html_text(HOSTILE[1])) == HOSTILE[1]
    line = terminal_text("name\x1b]0;title\x07\x1b[2J\nnext\tcol", limit=200)
    assert "\x1b" not in line and "\x07" not in line and "\n" not in line and "\\x1b" in line
    assert terminal_text("x" * 50, limit=10).endswith("(50 characters)")


@pytest.mark.parametrize("renderer", ["python-markdown", "markdown-it"])
@pytest.mark.parametrize(
    "text", ["# heading", "> quote", "- item", "+ item", "12. item", "3) item", "    code"]
)
def test_a_block_marker_at_the_start_of_a_line_stays_text(renderer, text):
    out = _renderers()[renderer](markdown_text(text))
    assert _tags(out) == ["p"] and _text(out) == text.strip(), out


def test_ordinary_text_stays_readable_as_markdown_source():
    assert markdown_text("smollm2_135m_instruct_q4_1.gguf") == "smollm2_135m_instruct_q4_1.gguf"
    assert (
        markdown_text("Song & Zhong (2023), p ≤ 0.05, rows 1–1023.")
        == "Song & Zhong (2023), p ≤ 0.05, rows 1–1023."
    )

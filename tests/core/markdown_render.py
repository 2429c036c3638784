"""Markdown as the renderers that publish a card show it, and the HTML elements in the result.

``render(text, renderer)``: Python-Markdown with tables (what MkDocs uses) or markdown-it in CommonMark mode
with tables and strikethrough (notebooks and most sites), raw HTML on in both. ``tags(html)``: the start tags
in order. ``text(html)``: the visible characters, tags dropped, entities decoded, white space folded.
"""

from __future__ import annotations

import html
import re
from html.parser import HTMLParser

RENDERERS = ("python-markdown", "markdown-it")


def render(text: str, renderer: str) -> str:
    if renderer == "python-markdown":
        import markdown

        return markdown.markdown(text, extensions=["tables"])
    from markdown_it import MarkdownIt

    return MarkdownIt("commonmark", {"html": True}).enable("table").enable("strikethrough").render(text)


class _Tags(HTMLParser):
    def __init__(self) -> None:
        super().__init__()
        self.found: list[str] = []

    def handle_starttag(self, tag, attrs):
        self.found.append(tag)


def tags(rendered: str) -> list[str]:
    parser = _Tags()
    parser.feed(rendered)
    return parser.found


def text(rendered: str) -> str:
    return " ".join(html.unescape(re.sub(r"<[^>]+>", "", rendered)).split())

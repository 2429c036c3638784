"""One escaping rule per output format, applied where a string leaves the program.

A model's file name, a config or GGUF metadata string, a tensor key or a corpus name is untrusted text: it
may hold markup (``<img src=x onerror=...>``, ``[x](javascript:...)``), line breaks that start a new
Markdown block, or terminal control sequences. Each output has one function here, and every writer of that
format passes the text it did not write itself through it:

- :func:`html_text`: an HTML page (element content and quoted attribute values).
- :func:`markdown_text`: one line of Markdown (a list item, a table cell, a heading, a paragraph) that
  renders as the same characters in CommonMark (markdown-it), Python-Markdown (MkDocs) and a notebook's
  Markdown cell, with raw HTML allowed: no element, link, emphasis, code span, math, cell break or new block.
- :func:`plotly_text`: a plotly title, subtitle, legend name or hover text (plotly renders a subset of HTML
  there: ``<a href>``, ``<b>``, ``<span style>``, ``<br>``); the text shows as written.
- :func:`terminal_text`: one terminal line: line breaks as spaces, every other control or non-printable
  character as a visible escape (``\\x1b``), bounded in length.
"""

from __future__ import annotations

import html
import re

from pos_geometry._describe import printable

__all__ = ["html_text", "markdown_text", "plotly_text", "terminal_text"]


def html_text(text: str) -> str:
    """``text`` as HTML character data or a quoted attribute value: ``& < > " '`` as entities."""
    return html.escape(str(text), quote=True)


# Markdown, inline: the characters that open an inline construct wherever they stand are backslash-escaped
# (CommonMark and Python-Markdown both unescape these): emphasis, code spans, links and images, table cells,
# Python-Markdown's attribute lists ``{: key=value}``. ``<`` (raw HTML, autolinks), ``~`` (strikethrough) and
# ``$`` (math in notebooks and MkDocs' arithmatex) become character references, and ``&`` does when it could
# start one (a letter, digit or ``#`` follows). Block constructs (headings, lists, quotes, code blocks, setext
# rules) start only at the beginning of a line: line breaks become spaces and a leading marker is escaped.
_MD_BACKSLASH = frozenset("\\`*[]{}|")
_MD_ENTITY = {"<": "&lt;", "~": "&#126;", "$": "&#36;"}
_MD_LEADING = re.compile(r"^([#>+\-]|\d{1,9}[.)])")


def markdown_text(text: str) -> str:
    """``text`` as one line of Markdown that renders as exactly its characters.

    Every line break (``\\n``, ``\\r``, and the other separators :meth:`str.splitlines` knows) becomes a
    space, so the text cannot end the line it is written into (no fake heading, list item or table row), and
    a block marker at its start (``#``, ``>``, ``-``, ``1.``) is escaped; other control characters are shown as
    escapes; the characters that open emphasis, a code span, a link, an image, raw HTML, an entity, math or a
    table cell are escaped, so none forms. Intra-word underscores (``q4_1``) and ordinary punctuation are left
    as they are, so the Markdown stays readable as text.
    """
    flat = " ".join(str(text).splitlines()).lstrip()
    flat = "".join(c if c.isprintable() or c == " " else repr(c)[1:-1] for c in flat)
    out = []
    for i, c in enumerate(flat):
        before, after = flat[i - 1 : i], flat[i + 1 : i + 2]
        if c in _MD_ENTITY:
            out.append(_MD_ENTITY[c])
        elif c == "&":
            out.append("&amp;" if after and (after.isalnum() or after == "#") else c)
        elif c == "_":
            out.append(c if before.isalnum() and after.isalnum() else "\\_")
        elif c in _MD_BACKSLASH:
            out.append("\\" + c)
        else:
            out.append(c)
    line = "".join(out)
    lead = _MD_LEADING.match(line)
    if lead and not line.startswith("\\"):
        marker = lead.group(1)
        line = line[: len(marker) - 1] + "\\" + line[len(marker) - 1 :]
    return line


_PLOTLY = {"&": "&amp;", "<": "&lt;", ">": "&gt;"}


def plotly_text(text: str) -> str:
    """``text`` for a plotly label: ``& < >`` as the entities plotly decodes, so no tag it renders
    (``<a>``, ``<b>``, ``<span>``, ``<br>``) forms; line breaks as spaces (plotly breaks lines only at
    ``<br>``)."""
    flat = " ".join(str(text).splitlines())
    return "".join(_PLOTLY.get(c, c) for c in flat)


def terminal_text(text: str, limit: int = 2000) -> str:
    """``text`` as one bounded terminal line: line breaks and tabs as spaces, every other control or
    non-printable character escaped (``\\x1b``: a file name cannot clear the screen or recolour the
    terminal), cut to ``limit`` characters with the full length said."""
    flat = " ".join(str(text).replace("\t", " ").splitlines())
    return printable(flat, limit)

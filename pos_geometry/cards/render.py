"""A card as files: ``index.html`` (one page, offline: plotly.js once beside it), ``card.json`` (every number,
with provenance) and ``card.md``.

The page opens with the verdicts in plain words, one line each with its null, then a table of contents, then
one section per part of the card with its figures and detail rows, and a cost line (seconds per section).
"""

from __future__ import annotations

import html
import os
from pathlib import Path
from typing import Any

from pos_geometry._escape import markdown_text
from pos_geometry._version import __version__

# The card calls this module to save itself, so nothing here imports the card's types back: ``card`` is a
# :class:`~pos_geometry.cards.result.Card`, ``s`` a ``Section`` and ``v`` a ``Verdict`` wherever they appear.
Card = Section = Verdict = Any

__all__ = ["figure_html", "html_page", "render_html", "render_markdown", "save_card"]

_STYLE = """
body{font-family:system-ui,-apple-system,Segoe UI,Roboto,sans-serif;margin:0 auto;max-width:1100px;padding:1.5rem;
color:#1b1b1b;line-height:1.45}
h1{font-size:1.6rem;margin-bottom:.2rem}h2{border-bottom:1px solid #ddd;padding-bottom:.2rem;margin-top:2.2rem}
.meta{color:#555;font-size:.9rem}.verdicts li{margin:.35rem 0}
.badge{display:inline-block;font-size:.75rem;padding:0 .4rem;border-radius:.6rem;margin-right:.4rem;
background:#e8f0fe;color:#174ea6}.badge.not{background:#f1f3f4;color:#5f6368}
.badge.weak{background:#fef7e0;color:#8d5b00}.badge.plain{background:#f3f0fa;color:#4a3b7a}
.verdicts a{color:inherit;text-decoration:none}.verdicts a:hover{text-decoration:underline}
.null{color:#555;font-size:.88rem}figure{margin:1rem 0}figcaption{color:#444;font-size:.9rem}
table.rows{border-collapse:collapse;font-size:.85rem}table.rows td,table.rows th{border-top:1px solid #eee;
padding:.2rem .6rem;text-align:left;vertical-align:top}nav ol{columns:2}.plot{min-height:420px}
"""


_BADGE = {"beats its null": "badge", "not significant": "badge weak", "descriptive": "badge plain"}


def _status_badge(v: Verdict) -> str:
    return f'<span class="{_BADGE.get(v.status, "badge not")}">{html.escape(v.status)}</span>'


def _verdict_li(v: Verdict, anchor: str) -> str:
    extra = []
    if v.null:
        extra.append(f"null: {v.null}")
    if v.p_value is not None:
        extra.append(f"p = {v.p_value:.3g}")
    null = f' <span class="null">({html.escape("; ".join(extra))})</span>' if extra else ""
    return f'<li>{_status_badge(v)}<a href="#{anchor}">{html.escape(v.text)}</a>{null}</li>'


def figure_html(stem: str, fig: Any, caption: str) -> str:
    """A figure as a ``<figure>`` of its plotly div (no plotly.js: the page loads it once) and its caption."""
    import plotly.io as pio

    div = pio.to_html(
        fig, include_plotlyjs=False, full_html=False, include_mathjax=False, div_id=f"fig-{stem}",
        config={"displaylogo": False, "responsive": True}, auto_play=False, default_width="100%",
        default_height=f"{fig.layout.height or 520}px",
    )  # fmt: skip
    return f'<figure id="figure-{stem}"><div class="plot">{div}</div><figcaption>{html.escape(caption)}</figcaption></figure>'


def _section_html(s: Section) -> str:
    parts = [f'<section id="{s.key}"><h2>{html.escape(s.title)}</h2>']
    if s.status != "ran":
        parts.append(f"<p><b>{html.escape(s.status)}</b>: {html.escape(s.reason)}</p>")
    else:
        parts.append('<ul class="verdicts">' + "".join(_verdict_li(v, s.key) for v in s.verdicts) + "</ul>")
    parts += [figure_html(stem, fig, caption) for stem, fig, caption in s.figures]
    if s.rows:
        body = "".join(f"<tr><th>{html.escape(k)}</th><td>{html.escape(v)}</td></tr>" for k, v in s.rows)
        parts.append(f'<details><summary>Details</summary><table class="rows">{body}</table></details>')
    parts.append(f'<p class="meta">{s.seconds:.1f} s</p></section>')
    return "\n".join(parts)


def _policy(card: Card) -> str:
    """How each line was decided (the vocabulary) and the card's multiple-comparison policy, in two sentences."""
    return (
        "Each line says what was decided: beats its null or not significant (a test ran; its p), does not apply "
        "(the premise is false), not available or skipped (not run here), descriptive (a number beside what it is "
        f"compared to, no test). Multiple comparisons: {card.multiple_comparisons()}."
    )


def _cost_line(card: Card) -> str:
    total = sum(s.seconds for s in card.sections)
    line = f"cost: {total:.1f} s in all; " + ", ".join(f"{s.key} {s.seconds:.1f} s" for s in card.sections)
    ran = {s.key for s in card.sections if s.status == "ran"}
    if {"attention", "residual"} <= ran:
        line += " (attention and the residual stream read one model pass, counted under residual)"
    return line


def render_html(card: Card, *, plotlyjs: str = "directory") -> str:
    """The card as one HTML page; ``plotlyjs="directory"`` loads ``plotly.min.js`` from beside the page,
    ``"inline"`` embeds it (one self-contained file)."""
    from plotly.offline import get_plotlyjs

    from pos_geometry.plotting.export import check_plotlyjs

    if check_plotlyjs(plotlyjs) == "cdn":
        from pos_geometry.errors import InvalidArgumentError

        raise InvalidArgumentError(
            "a card works offline: plotlyjs must be 'directory' or 'inline'; got 'cdn'."
        )
    script = (
        '<script src="plotly.min.js"></script>'
        if plotlyjs == "directory"
        else f'<script type="text/javascript">{get_plotlyjs()}</script>'
    )
    title = f"Positional card: {Path(card.model).name if os.sep in card.model else card.model}"
    head = [
        f"<h1>{html.escape(title)}</h1>",
        f'<p class="meta">model: {html.escape(card.model)} · kind: <b>{html.escape(card.kind)}</b> · made {html.escape(card.created)} with pos_geometry '
        f"{html.escape(__version__)}" + (" · fast card" if card.fast else "") + "</p>",
        f'<p class="meta">corpus: {html.escape(card.corpus or "none read")}</p>',
        '<h2 id="verdicts">Verdicts</h2>',
        '<ul class="verdicts">'
        + "".join(_verdict_li(v, s.key) for s in card.sections for v in s.verdicts)
        + "</ul>",
        f'<p class="meta">{html.escape(_policy(card))}</p>',
    ]
    nav = "<nav><h2>Contents</h2><ol>" + "".join(
        f'<li><a href="#{s.key}">{html.escape(s.title)}</a></li>' for s in card.sections
    ) + '<li><a href="#cost">Cost and provenance</a></li></ol></nav>'  # fmt: skip
    prov = html.escape(repr(card.provenance))
    foot = (
        f'<section id="cost"><h2>Cost and provenance</h2><p>{html.escape(_cost_line(card))}</p>'
        f'<p class="meta">{prov}</p><p class="meta">Every number: <a href="card.json">card.json</a>; as text: '
        '<a href="card.md">card.md</a>.</p></section>'
    )
    body = "\n".join([*head, nav, *(_section_html(s) for s in card.sections), foot])
    return html_page(title, _STYLE, script, body)


def html_page(title: str, style: str, script: str, body: str) -> str:
    """One HTML page: ``title`` (escaped here), the ``style`` sheet and the ``script`` tag in its head, ``body``
    (already HTML) in its body."""
    return (
        f'<!DOCTYPE html>\n<html lang="en"><head><meta charset="utf-8"><title>{html.escape(title)}</title>'
        f'<meta name="viewport" content="width=device-width, initial-scale=1"><style>{style}</style>{script}'
        f"</head><body>\n{body}\n</body></html>\n"
    )


def _md_cell(text: str) -> str:
    return markdown_text(text) or " "


def render_markdown(card: Card) -> str:
    """The card as Markdown: the verdicts, then each section's verdicts and detail rows (figures are in
    ``index.html``). Every string is written through :func:`~pos_geometry._escape.markdown_text`: a model's
    file name, a config field or a tensor key shows as its characters and never as markup, a link or a new
    block."""
    md = markdown_text
    made = f"made {card.created} with pos_geometry {__version__}" + (" · fast card" if card.fast else "")
    lines = [f"# Positional card: {md(card.model)}", "", f"kind: **{md(card.kind)}** · {md(made)}", "",
             f"corpus: {md(card.corpus or 'none read')}", "", "## Verdicts", ""]  # fmt: skip
    for v in card.verdicts:
        null = f" (null: {md(v.null)})" if v.null else ""
        lines.append(f"- \\[{md(v.status)}\\] {md(v.text)}{null}")
    lines += ["", md(_policy(card))]
    for s in card.sections:
        lines += ["", f"## {md(s.title)}", ""]
        if s.status != "ran":
            lines.append(f"**{md(s.status)}**: {md(s.reason)}")
            continue
        lines += [f"- {md(v.text)}" for v in s.verdicts]
        if s.figures:
            lines += ["", "Figures (in index.html): " + ", ".join(md(stem) for stem, _, _ in s.figures)]
        if s.rows:
            lines += ["", "| | |", "|---|---|", *(f"| {_md_cell(k)} | {_md_cell(v)} |" for k, v in s.rows)]
    lines += ["", "## Cost and provenance", "", md(_cost_line(card)), "", md(repr(card.provenance)), ""]
    return "\n".join(lines)


def save_card(
    card: Card, out: str | os.PathLike[str], *, plotlyjs: str = "directory", static: Any = None
) -> list[Path]:
    """Write the card as the whole of the folder ``out``: ``index.html``, ``card.json``, ``card.md``, and
    ``plotly.min.js`` beside the page unless ``plotlyjs="inline"``; ``static`` (``"png"``, ``"pdf"``,
    ``"png,pdf"``): the page also as ``card.png`` and/or ``card.pdf`` (headless Chromium,
    :mod:`~pos_geometry.cards.static`). Returns the paths.

    The folder holds this card or the one before it, never a mix (:mod:`~pos_geometry.cards.folder`): the
    files are written into a temporary folder that is then swapped in whole; a folder holding files that
    are not a card's is refused, and so is a second writer on the same folder.
    """
    from pos_geometry.cards.folder import write_card_folder
    from pos_geometry.cards.static import check_static, page_height, page_to_static
    from pos_geometry.plotting.export import write_plotlyjs

    page = render_html(card, plotlyjs=plotlyjs)  # before any file: a bad argument leaves no folder
    formats = check_static(static)
    files: dict[str, Any] = {"plotly.min.js": write_plotlyjs} if plotlyjs == "directory" else {}
    files.update({
        "index.html": page,
        "card.json": card.to_json(allow_nan=False, indent=1),
        "card.md": render_markdown(card),
    })  # fmt: skip
    height = page_height(card)
    for fmt in formats:  # after the page and plotly.js: the browser loads them from the folder being written
        files[f"card.{fmt}"] = lambda folder, fmt=fmt: page_to_static(
            folder / "index.html", folder / f"card.{fmt}", fmt, height=height
        )
    return write_card_folder(out, files)

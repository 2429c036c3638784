"""A comparison as files: ``index.html`` (one offline page: plotly.js once beside it), ``compare.json`` (every
number, as the cards hold them) and ``compare.md``; each model's card in ``cards/`` when it was made here.

Every string that comes from a model, a file name, a card or a config goes through the escapes of
:mod:`pos_geometry._escape`: HTML text and attributes, one line of Markdown, plotly's markup.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

from pos_geometry._escape import html_text, markdown_text
from pos_geometry._version import __version__
from pos_geometry.errors import InvalidArgumentError

# The comparison calls this module to save itself: ``comparison`` is a Comparison wherever it appears.
Comparison = Any

__all__ = ["COMPARE_FILES", "check_compare_folder", "render_html", "render_markdown", "save_comparison"]

COMPARE_FILES = frozenset({"index.html", "compare.json", "compare.md", "plotly.min.js", "cards"})
"""What a comparison's folder may hold; a folder holding anything else is not a comparison's, and is refused."""

_STYLE = """
body{font-family:system-ui,-apple-system,Segoe UI,Roboto,sans-serif;margin:0 auto;max-width:1280px;padding:1.5rem;
color:#1b1b1b;line-height:1.45}h1{font-size:1.6rem;margin-bottom:.2rem}
h2{border-bottom:1px solid #ddd;padding-bottom:.2rem;margin-top:2.2rem}.meta{color:#555;font-size:.9rem}
table.grid{border-collapse:collapse;font-size:.85rem;width:100%}table.grid td,table.grid th{border:1px solid #e3e3e3;
padding:.3rem .5rem;text-align:left;vertical-align:top;overflow-wrap:anywhere}table.grid th.claim{width:14%}.asks{color:#666;font-weight:normal;
font-size:.8rem;display:block}.badge{display:inline-block;font-size:.72rem;padding:0 .4rem;border-radius:.6rem;
margin-right:.3rem;background:#e8f0fe;color:#174ea6}.badge.not{background:#f1f3f4;color:#5f6368}
.badge.weak{background:#fef7e0;color:#8d5b00}.badge.plain{background:#f3f0fa;color:#4a3b7a}
.warn{background:#fff4e5;border-left:4px solid #f29900;padding:.4rem .8rem}figure{margin:1rem 0}
figcaption{color:#444;font-size:.9rem}.plot{min-height:420px}
"""
_BADGE = {"beats its null": "badge", "not significant": "badge weak", "descriptive": "badge plain"}


def check_compare_folder(out: str | os.PathLike[str]) -> Path:
    """``out`` as the comparison will be written, checked before any work: a new folder, an empty one, or one
    holding an earlier comparison (nothing but :data:`COMPARE_FILES`)."""
    from pos_geometry.cards.folder import check_output_folder

    folder = check_output_folder(
        out, COMPARE_FILES, "comparison", "a comparison's",
        "a comparison's folder holds index.html, compare.json, compare.md, plotly.min.js and cards/",
    )  # fmt: skip
    folder.mkdir(exist_ok=True)  # its parent was just written to
    return folder


def _cell_html(cell: Any) -> str:
    badge = f'<span class="{_BADGE.get(cell.status, "badge not")}">{html_text(cell.status)}</span>'
    p = f" (p = {cell.p_value:.3g})" if cell.p_value is not None else ""
    return f"<td>{badge}{html_text(cell.text + p)}</td>"


def _card_link(row: Any, folder: Path | None) -> str:
    if row.card is None:
        return "not kept"
    target = Path(row.card) / "index.html"
    href = os.path.relpath(target, folder) if folder is not None else target.as_uri()
    return f'<a href="{html_text(Path(href).as_posix())}">card</a>'


def _short(text: str, limit: int = 60) -> str:
    """``text`` as a cell: at most ``limit`` characters shown, the whole of it on hover (its ``title``)."""
    shown = text if len(text) <= limit else text[: limit - 1] + "…"
    return f'<td title="{html_text(text)}">{html_text(shown)}</td>'


def _identity_html(comparison: Comparison, folder: Path | None) -> str:
    head = [
        "model",
        "kind",
        "source",
        "revision",
        "card from",
        "corpus",
        "fast",
        "card made",
        "by version",
        "card",
    ]
    body = "".join(
        "<tr>" + "".join(_short(str(v)) for v in (
            m.label, m.kind, m.model, m.revision or "-", m.origin, m.corpus or "none read", "yes" if m.fast else "no",
            m.created, m.version)) + f"<td>{_card_link(m, folder)}</td></tr>"
        for m in comparison.models
    )  # fmt: skip
    return (
        '<table class="grid"><tr>'
        + "".join(f"<th>{html_text(h)}</th>" for h in head)
        + f"</tr>{body}</table>"
    )


def _matrix_html(comparison: Comparison) -> str:
    from pos_geometry.comparison.cells import CLAIMS

    head = '<tr><th class="claim">claim</th>' + "".join(
        f"<th>{html_text(m.label)}</th>" for m in comparison.models
    )
    rows = []
    for j, claim in enumerate(comparison.claims):
        asks = CLAIMS[claim][3]
        cells = "".join(_cell_html(comparison.cells[i][j]) for i in range(len(comparison.models)))
        rows.append(
            f'<tr><th class="claim">{html_text(claim)}<span class="asks">{html_text(asks)}</span></th>{cells}</tr>'
        )
    return f'<table class="grid">{head}</tr>{"".join(rows)}</table>'


def _figures_html(comparison: Comparison) -> str:
    from pos_geometry.cards.render import figure_html
    from pos_geometry.plotting.comparison import comparison_figures

    parts = [figure_html(stem, fig, caption) for stem, fig, caption in comparison_figures(comparison.series)]
    return "\n".join(parts) or "<p>No overlay: no two models share a section that ran.</p>"


def render_html(comparison: Comparison, *, folder: Path | None = None, plotlyjs: str = "directory") -> str:
    """The comparison as one HTML page (``folder``: where it is written, for the links to the cards)."""
    from plotly.offline import get_plotlyjs

    if plotlyjs not in ("directory", "inline"):
        raise InvalidArgumentError(
            f"a comparison works offline: plotlyjs must be 'directory' or 'inline'; got {plotlyjs!r}."
        )
    script = (
        '<script src="plotly.min.js"></script>'
        if plotlyjs == "directory"
        else f"<script>{get_plotlyjs()}</script>"
    )
    title = f"Positional comparison: {', '.join(m.label for m in comparison.models)}"
    warnings = "".join(f'<p class="warn">{html_text(w)}</p>' for w in comparison.warnings)
    body = "\n".join([
        f"<h1>{html_text(title)}</h1>",
        f'<p class="meta">made {html_text(comparison.created)} with pos_geometry {html_text(__version__)}; every number '
        "is read from the models' own cards</p>", warnings,
        '<h2 id="verdicts">Verdicts</h2>', _matrix_html(comparison),
        f'<p class="meta">Multiple comparisons: {html_text(comparison.policy)}.</p>',
        '<h2 id="models">Models</h2>', _identity_html(comparison, folder),
        '<h2 id="overlays">Overlays</h2>', _figures_html(comparison),
        '<p class="meta">Every number: <a href="compare.json">compare.json</a>; as text: <a href="compare.md">compare.md</a>.</p>',
    ])  # fmt: skip
    from pos_geometry.cards.render import html_page

    return html_page(title, _STYLE, script, body)


def _md_cell(text: str) -> str:
    return markdown_text(text) or " "


def render_markdown(comparison: Comparison) -> str:
    """The comparison as Markdown: the models, the verdict matrix (claims × models), the warnings and the policy.
    Every string is written through :func:`~pos_geometry._escape.markdown_text`."""
    md = markdown_text
    labels = [m.label for m in comparison.models]
    lines = [f"# Positional comparison: {md(', '.join(labels))}", "",
             md(f"made {comparison.created} with pos_geometry {__version__}; every number is read from the models' own cards"), ""]  # fmt: skip
    lines += [f"> warning: {md(w)}" for w in comparison.warnings] + ([""] if comparison.warnings else [])
    lines += ["## Models", "", "| model | kind | source | revision | card from | corpus | fast | card made | by version |",
              "|---|---|---|---|---|---|---|---|---|"]  # fmt: skip
    lines += [
        "| " + " | ".join(_md_cell(str(v)) for v in (m.label, m.kind, m.model, m.revision or "-", m.origin,
                                                      m.corpus or "none read", "yes" if m.fast else "no", m.created, m.version)) + " |"
        for m in comparison.models
    ]  # fmt: skip
    lines += ["", "## Verdicts", "", "| claim | " + " | ".join(_md_cell(x) for x in labels) + " |",
              "|---|" + "---|" * len(labels)]  # fmt: skip
    for j, claim in enumerate(comparison.claims):
        cells = []
        for i in range(len(labels)):
            c = comparison.cells[i][j]
            p = f" (p = {c.p_value:.3g})" if c.p_value is not None else ""
            cells.append(_md_cell(f"[{c.status}] {c.text}{p}"))
        lines.append(f"| {_md_cell(claim)} | " + " | ".join(cells) + " |")
    lines += ["", md(f"Multiple comparisons: {comparison.policy}."), ""]
    return "\n".join(lines)


def save_comparison(
    comparison: Comparison, out: str | os.PathLike[str], *, plotlyjs: str = "directory"
) -> list[Path]:
    """Write ``index.html``, ``compare.json``, ``compare.md`` (and ``plotly.min.js`` unless inline) into ``out``,
    each file whole (:func:`~pos_geometry._files.atomic_write`); returns the paths."""
    from pos_geometry._files import atomic_write
    from pos_geometry.plotting.export import write_plotlyjs

    folder = check_compare_folder(out)
    page = render_html(comparison, folder=folder, plotlyjs=plotlyjs)
    written = [write_plotlyjs(folder)] if plotlyjs == "directory" else []
    written.append(atomic_write(folder / "compare.json", comparison.to_json(allow_nan=False, indent=1)))
    written.append(atomic_write(folder / "compare.md", render_markdown(comparison)))
    written.append(atomic_write(folder / "index.html", page))
    return written

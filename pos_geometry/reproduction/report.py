"""``report.md`` and ``report.json``: the measured numbers beside the post's claims, with verdicts."""

from __future__ import annotations

import datetime as _dt
import platform
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import torch

from pos_geometry._escape import markdown_text
from pos_geometry._version import __version__
from pos_geometry.analysis._results import to_jsonable
from pos_geometry.provenance import shown_path
from pos_geometry.reproduction.claims import Claim
from pos_geometry.reproduction.located import Located
from pos_geometry.reproduction.published import Comparison

__all__ = ["PARAPHRASED", "POST", "FigureEntry", "post_reading", "render_json", "render_markdown"]

POST = (
    '"GPT-2\'s positional embedding matrix is a helix" (Adam Yedidia, LessWrong, 2023-07-21); '
    "its code: github.com/adamyedidia/resid_viewer, experiments/helix.py"
)


_UNREAD = "data/reference/helix_post.json is not available, so how the post was read cannot be shown."
PARAPHRASED = (
    "Each claim is this repository's paraphrase of the post, not a quotation: only the post's opening could "
    "be retrieved when the claims were written, so their wording and numbers are not verified against its "
    "full text."
)


def post_reading() -> str:
    """How the post's claims were read (``how_it_was_read`` of ``data/reference/helix_post.json``)."""
    from pos_geometry.reference import reference

    ref = reference("helix_post") or {}
    how = ref.get("how_it_was_read")
    return how if isinstance(how, str) and how else _UNREAD


@dataclass(frozen=True)
class FigureEntry:
    """One written figure: its stem, caption, and the files written (or why a format was skipped)."""

    stem: str
    caption: str
    files: tuple[Path, ...]
    skipped: str = ""


def _cell(text: str) -> str:
    return markdown_text(text)


def _sources(located: Sequence[Located]) -> list[str]:
    lines = ["| model | kind | shape | where it came from |", "|---|---|---|---|"]
    for loc in located:
        if loc.table is None:
            lines.append(
                f"| {loc.name} | – | – | **missing**: {_cell(loc.where)}; fetch with `{loc.fetch}` |"
            )
            continue
        t = loc.table
        lines.append(
            f"| {loc.name} | {t.kind} | {t.n_positions}×{t.d_model} | {_cell(shown_path(loc.where))} |"
        )
    return lines


def _published(published: Sequence[Comparison]) -> list[str]:
    if not published:
        return []
    lines = [
        "",
        "## Published vs measured",
        "",
        "| quantity | source | published | measured here | how | where the published number was read |",
        "|---|---|---|---|---|---|",
    ]
    for c in published:
        p = c.published
        value = f"~{p.value:g}" if p.approximate else f"{p.value:g}"
        measured = (
            "–"
            if c.measured is None
            else f"{c.measured:g}"
            if float(c.measured).is_integer()
            else f"{c.measured:.4f}"
        )
        where = f"{p.where} ({p.verified})" if p.verified else p.where
        lines.append(
            f"| {c.quantity} | {_cell(p.source)} | {value} | {measured} | {_cell(c.how)} | {_cell(where)} |"
        )
    return lines


def render_markdown(
    claims: Sequence[Claim],
    located: Sequence[Located],
    figures: Sequence[FigureEntry],
    *,
    notes: Sequence[str] = (),
    out: Path,
    published: Sequence[Comparison] = (),
    sections: Sequence[str] = (),
) -> str:
    """The report as Markdown: verdict table, per-claim details, published figures, extra ``sections``
    (Markdown blocks, e.g. the rotary frequency atlas), data sources, figures, notes."""
    counts: dict[str, int] = {}
    for c in claims:
        counts[c.verdict] = counts.get(c.verdict, 0) + 1
    tally = ", ".join(f"{n} {v}" for v, n in counts.items())
    lines = [
        "# Reproduction: GPT-2's positional embedding matrix is a helix",
        "",
        f"Post: {POST}.",
        "",
        f"Made by pos_geometry {__version__} (torch {torch.__version__}, Python {platform.python_version()}) on "
        f"{_dt.datetime.now(_dt.timezone.utc):%Y-%m-%d %H:%M} UTC. Verdicts: {tally}.",
        "",
        "Every number below was measured in this run on the tables listed under *Data*; a claim whose table is "
        "missing is marked *not measured*, never estimated. Tables are the raw checkpoint weights (no "
        "TransformerLens processing); PCA centres the rows over positions, as PCA does.",
        "",
        f"**How the post was read.** {post_reading()}",
        "",
        "## Claims",
        "",
        "| # | the post's claim (paraphrased) | measured here | verdict |",
        "|---|---|---|---|",
    ]
    for i, c in enumerate(claims, 1):
        lines.append(f"| {i} | {_cell(c.statement)} | {_cell(c.measured)} | **{c.verdict}** |")
    lines += ["", "## How each verdict was decided", ""]
    for i, c in enumerate(claims, 1):
        lines.append(f"{i}. **{c.key}**: {c.criterion}.")
        for p in c.provenance:
            steps = ", ".join(p.processing) or "none"
            lines.append(
                f"   - table: {markdown_text(p.label)} ({p.kind}) from {markdown_text(shown_path(p.source))}; stored "
                f"{p.original_dtype}; processing: {markdown_text(steps)}"
            )
    lines += _published(published)
    for block in sections:
        if block:
            lines += ["", block.rstrip()]
    lines += ["", "## Data", "", *_sources(located), ""]
    if figures:
        lines += ["## Figures", ""]
        for f in figures:
            links = ", ".join(f"[{p.suffix[1:]}]({p.relative_to(out).as_posix()})" for p in f.files)
            skipped = f" ({f.skipped})" if f.skipped else ""
            lines.append(f"- **{f.stem}** ({links}){skipped}: {f.caption}")
            png = next((p for p in f.files if p.suffix == ".png"), None)
            if png is not None:
                lines.append(f"\n  ![{f.stem}]({png.relative_to(out).as_posix()})\n")
        lines.append("")
    if notes:
        lines += ["## Notes", "", *(f"- {markdown_text(n)}" for n in notes), ""]
    return "\n".join(lines)


def render_json(
    claims: Sequence[Claim], located: Sequence[Located], figures: Sequence[FigureEntry], *, out: Path
) -> dict[str, Any]:
    """The same content as a JSON-ready dict (claims with their values and provenance)."""
    return {
        "post": POST,
        "post_reading": {"how_it_was_read": post_reading(), "claim_wording": PARAPHRASED},
        "pos_geometry": __version__,
        "claims": [to_jsonable(c) for c in claims],
        "data": [
            {
                "model": loc.name,
                "found": loc.found,
                "where": loc.where,
                "fetch": loc.fetch,
                "provenance": loc.table.provenance.to_dict() if loc.table is not None else None,
            }
            for loc in located
        ],
        "figures": [
            {
                "stem": f.stem,
                "caption": f.caption,
                "files": [p.relative_to(out).as_posix() for p in f.files],
                "skipped": f.skipped,
            }
            for f in figures
        ],
    }

"""``pos-geometry compare``: several models' positional cards side by side, on one page."""

from __future__ import annotations

from pathlib import Path

import typer

from pos_geometry.cli._common import DEVICE, guard, one_line, out_console

__all__ = ["compare"]


def compare(
    models: list[str] = typer.Argument(
        ...,
        metavar="MODEL_OR_CARD...",
        help="Two or more: card folders (read from their card.json) or models as `card` takes them "
        "(name, hub id, folder, .gguf, table file), a hub model at a revision as MODEL@REVISION.",
    ),
    out: Path = typer.Option(
        ..., "--out", help="Folder for index.html, compare.json, compare.md, plotly.min.js and cards/."
    ),
    corpus: Path | None = typer.Option(
        None,
        "--corpus",
        help="The corpus of the cards made here (as `card --corpus`); card folders keep theirs.",
    ),
    fast: bool = typer.Option(False, "--fast", help="Make fast cards (no causal edits, fewer contexts)."),
    seq_len: int | None = typer.Option(None, "--seq-len", help="Context length of the cards made here."),
    n_sequences: int | None = typer.Option(None, "--n-sequences", help="Contexts the cards made here read."),
    random_state: int = typer.Option(0, "--random-state", help="Seed of every null of the cards made here."),
    force: bool = typer.Option(
        False, "--force", help="Make the cards again even when the results cache holds them."
    ),
    device: str = DEVICE,
) -> None:
    """Compare MODELs: a verdict matrix (each claim's decision and number, per model) and overlays.

    Each argument is a card folder or a model; a model's card is made through the results cache (a card made
    before with the same inputs is copied, not recomputed) into OUT/cards/. Every number on the page is read from
    those cards. The page warns when the models were measured on different corpora or settings.
    """

    def run() -> None:
        from pos_geometry.cards.corpus import check_corpus_options
        from pos_geometry.comparison import compare as make

        text = str(corpus) if corpus is not None else None
        check_corpus_options(text, seq_len=seq_len, n_sequences=n_sequences)
        result = make(
            models, out, corpus=text, fast=fast, seq_len=seq_len, n_sequences=n_sequences, device=device,
            random_state=random_state, force=force, progress=False,
        )  # fmt: skip
        console = out_console()
        for m in result.models:
            line = f"{m.label}: {m.kind} (its card: {m.origin})"
            console.print(one_line(line), markup=False, emoji=False, highlight=False)
        for claim, row in zip(result.claims, zip(*result.cells, strict=True), strict=True):
            text_row = "; ".join(
                f"{m.label} [{c.status}] {c.text}" for m, c in zip(result.models, row, strict=True)
            )
            console.print(one_line(f"  {claim}: {text_row}"), markup=False, emoji=False, highlight=False)
        for warning in result.warnings:
            console.print(one_line(f"warning: {warning}"), markup=False, emoji=False, highlight=False)
        done = f"wrote the comparison to {Path(out)} (open {Path(out) / 'index.html'})"
        console.print(one_line(done), markup=False, emoji=False, highlight=False)

    guard(run)

"""``pos-geometry card``: one model's positional card, written to a folder."""

from __future__ import annotations

from pathlib import Path

import typer

from pos_geometry.cli._common import (
    DEVICE,
    REVISION,
    guard,
    one_line,
    out_console,
    progress_bar,
)

__all__ = ["card"]


def card(
    model: str = typer.Argument(
        ...,
        metavar="MODEL_OR_PATH",
        help="Model-table name, hub repo id, local model folder, .gguf file or table file (.npy/.safetensors).",
    ),
    out: Path = typer.Option(
        ..., "--out", help="Folder for index.html, card.json, card.md and plotly.min.js."
    ),
    corpus: Path | None = typer.Option(
        None,
        "--corpus",
        help="Text file (the model's tokenizer) or token ids (.npy, n_sequences x seq_len). Default: the "
        "public-domain text in data/corpus (offline); random tokens for a model without a tokenizer.",
    ),
    fast: bool = typer.Option(
        False, "--fast", help="Skip the causal edits and read fewer, shorter contexts (8 x 256)."
    ),
    seq_len: int | None = typer.Option(
        None, "--seq-len", help="Context length (default 512; 256 with --fast)."
    ),
    n_sequences: int | None = typer.Option(
        None, "--n-sequences", help="Contexts to read (default 16; 8 with --fast)."
    ),
    random_state: int = typer.Option(0, "--random-state", help="Seed of every null and bootstrap."),
    plotlyjs: str = typer.Option(
        "directory",
        "--plotlyjs",
        help="directory (plotly.min.js once beside the page) or inline (one self-contained page, ~5 MB).",
    ),
    static: str = typer.Option(
        "none",
        "--static",
        help="none, png, pdf or png,pdf: the page also as card.png / card.pdf (needs Chromium).",
    ),
    revision: str | None = REVISION,
    device: str = DEVICE,
) -> None:
    """Write MODEL's positional card: every analysis that applies to its kind of position, each verdict with its null.

    One page (index.html, offline) with the verdicts in plain words at the top, then a section per part: identity,
    the learned table, rotary planes, how attention reads position, the residual stream, causal edits. What does
    not apply to the model, or is not on this machine, is listed with the reason. card.json holds every number
    with its provenance; card.md the same as text. The verdicts are printed when done.
    """
    from pos_geometry.cards import SECTION_KEYS
    from pos_geometry.cards import card as make_card
    from pos_geometry.cards.build import SECTION_TITLES
    from pos_geometry.cards.folder import hold_card_folder
    from pos_geometry.cli._stages import StageLog

    def run() -> None:
        from pos_geometry.plotting.export import check_plotlyjs

        if check_plotlyjs(plotlyjs) == "cdn":
            from pos_geometry.errors import InvalidArgumentError

            raise InvalidArgumentError(
                "a card works offline: --plotlyjs must be directory or inline; got cdn."
            )
        from pos_geometry.cards.static import check_static

        formats = check_static(static)  # before any work: the formats, and a browser when one is needed
        titles = [SECTION_TITLES[key] for key in SECTION_KEYS]
        with hold_card_folder(out) as folder, progress_bar() as bar, StageLog("card", len(titles)) as stages:
            task = bar.add_task("card", total=len(SECTION_KEYS))
            stages.started(1, titles[0])

            def report(done: int, total: int) -> None:  # off a terminal: a line per stage start and end
                title = titles[done - 1]
                bar.update(task, completed=done, total=total, description=f"card: {title.lower()} done")
                stages.done(done, title)
                if done < total:
                    stages.started(done + 1, titles[done])

            result = make_card(
                model, corpus, fast=fast, seq_len=seq_len, n_sequences=n_sequences, revision=revision,
                device=device, random_state=random_state, progress=report,
            )  # fmt: skip
            written = result.save(folder, plotlyjs=plotlyjs, static=formats)
        console = out_console()
        shown = {"markup": False, "emoji": False, "highlight": False}
        console.print(one_line(f"{result.model}: {result.kind}"), **shown)
        for verdict in result.verdicts:
            console.print(one_line(f"  [{verdict.status}] {verdict.text}"), **shown)
        shown_out = one_line(str(folder))
        page = one_line(str(folder / "index.html"))
        console.print(f"wrote {len(written)} files to {shown_out} (open {page})", **shown)

    guard(run)

"""``pos-geometry card``: one model's positional card, written to a folder."""

from __future__ import annotations

import json
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
    force: bool = typer.Option(
        False, "--force", help="Compute the card again even when the results cache holds it for these inputs."
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

    def run() -> None:
        from pos_geometry.cards.cache import card_key, through_cache
        from pos_geometry.cards.corpus import check_corpus_options
        from pos_geometry.cards.folder import hold_card_folder
        from pos_geometry.cards.static import check_static
        from pos_geometry.plotting.export import check_plotlyjs

        if check_plotlyjs(plotlyjs) == "cdn":
            from pos_geometry.errors import InvalidArgumentError

            raise InvalidArgumentError(
                "a card works offline: --plotlyjs must be directory or inline; got cdn."
            )
        formats = check_static(static)  # before any work: the formats, and a browser when one is needed
        text = str(corpus) if corpus is not None else None
        check_corpus_options(text, seq_len=seq_len, n_sequences=n_sequences)
        options = {"fast": fast, "seq_len": seq_len, "n_sequences": n_sequences, "random_state": random_state,
                   "revision": revision, "device": device, "plotlyjs": plotlyjs, "static": formats}  # fmt: skip
        with hold_card_folder(out) as folder:  # one writer, from the cache look-up to the last file
            key = card_key(model, text, **options)
            cached = through_cache(key, folder, lambda target: _compute(target, formats), force=force)
            data = json.loads((folder / "card.json").read_text(encoding="utf-8"))
            lines = [f"{data['model']}: {data['kind']}"] + [
                f"  [{v['status']}] {v['text']}" for s in data["sections"] for v in s["verdicts"]
            ]
            n_files = len(list(folder.iterdir()))
            note = (
                f"the same inputs' card, made {data['created']}, from the results cache (--force computes it again); "
                if cached
                else ""
            )
        console = out_console()
        for line in lines:
            console.print(one_line(line), markup=False, emoji=False, highlight=False)
        done = f"{note}wrote {n_files} files to {folder} (open {folder / 'index.html'})"
        console.print(one_line(done), markup=False, emoji=False, highlight=False)

    def _compute(folder: Path, formats: tuple[str, ...]) -> None:
        """Make the card with a progress bar (and stage lines off a terminal) and save it as ``folder``."""
        from pos_geometry.cards import card as make_card
        from pos_geometry.cards.result import SECTION_KEYS, SECTION_TITLES
        from pos_geometry.cli._stages import StageLog

        titles = [SECTION_TITLES[k] for k in SECTION_KEYS]
        with progress_bar() as bar, StageLog("card", len(titles)) as stages:
            task = bar.add_task("card", total=len(titles))
            stages.started(1, titles[0])

            def report(done: int, total: int) -> None:  # off a terminal: a line per stage start and end
                bar.update(
                    task, completed=done, total=total, description=f"card: {titles[done - 1].lower()} done"
                )
                stages.done(done, titles[done - 1])
                if done < total:
                    stages.started(done + 1, titles[done])

            result = make_card(
                model, corpus, fast=fast, seq_len=seq_len, n_sequences=n_sequences, revision=revision,
                device=device, random_state=random_state, progress=report,
            )  # fmt: skip
            result.save(folder, plotlyjs=plotlyjs, static=formats)

    guard(run)

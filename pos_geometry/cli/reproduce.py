"""``pos-geometry reproduce``: the blog post's figures and claims."""

from __future__ import annotations

from pathlib import Path

import typer

from pos_geometry.cli._common import DEVICE, PLOTLYJS, err, guard, out_console, parse_formats, progress_bar


def reproduce(
    out: Path = typer.Option(..., "--out", help="Folder for report.md, report.json and the figures."),
    data_dir: Path | None = typer.Option(
        None,
        "--data-dir",
        help="Folder with the real tables (default: ../shared/data/real beside the checkout).",
    ),
    model: list[str] = typer.Option(
        [], "--model", help="NAME=PATH: read NAME's table from a local checkpoint (repeatable)."
    ),
    tokens: Path | None = typer.Option(
        None, "--tokens", help="A checkpoint holding GPT-2 small's token embedding (wte)."
    ),
    online: bool = typer.Option(
        False, "--online", help="Allow downloads of missing models (default: offline)."
    ),
    format: str = typer.Option(
        "html,png", "--format", help="Figure formats; PNG is skipped when no browser is found."
    ),
    device: str = DEVICE,
    plotlyjs: str = PLOTLYJS,
) -> None:
    """Reproduce the figures and claims of "GPT-2's positional embedding matrix is a helix" (offline by default).

    Stages are shown on stderr as they start: a progress bar on a terminal, one line per stage otherwise.
    """

    def run() -> None:
        from pos_geometry.reproduction.runner import parse_model_paths, reproduce_blog_post

        paths = parse_model_paths(model)
        fmts = parse_formats(format)
        console, log = out_console(), err()
        with progress_bar() as bar:
            task = bar.add_task("reproducing", total=None)
            last = [""]

            def step(label: str, done: int, total: int) -> None:
                bar.update(task, description=f"reproducing: {label}", completed=done, total=total)
                if not log.is_terminal and label != last[0]:  # a log file or a pipe: one line per stage
                    log.print(f"reproduce [{done}/{total}]: {label}", markup=False)
                    last[0] = label

            result = reproduce_blog_post(
                out, data_dir=data_dir, paths=paths, tokens=tokens, online=online, formats=fmts,
                device=device, on_stage=step, plotlyjs=plotlyjs,
            )  # fmt: skip
        console.print(result.summary_text(), markup=False)

    guard(run)

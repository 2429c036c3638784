"""``pos-geometry reproduce``: the blog post's figures and claims."""

from __future__ import annotations

from pathlib import Path

import typer

from pos_geometry.cli._common import (
    DEVICE,
    PLOTLYJS,
    err,
    guard,
    one_line,
    out_console,
    parse_formats,
    progress_bar,
)
from pos_geometry.cli._stages import StageLog

REPRODUCTION_FILES = frozenset({"report.md", "report.json", "figures"})
"""What a reproduction folder holds."""


def _check_out(out: Path, force: bool) -> bool:
    """Refuse an ``--out`` holding other files (unless ``force``); True when it holds an earlier reproduction."""
    from pos_geometry.errors import InvalidArgumentError

    if out.exists() and not out.is_dir():
        raise InvalidArgumentError(f"--out must be a folder; {str(out)!r} is a file. Give another path.")
    names = {p.name for p in out.iterdir()} if out.is_dir() else set()
    others = sorted(names - REPRODUCTION_FILES)
    if others and not force:
        listed = ", ".join(repr(n) for n in others[:5]) + (
            f" and {len(others) - 5} more" if len(others) > 5 else ""
        )
        raise InvalidArgumentError(
            f"--out {str(out)!r} holds files that are not a reproduction's ({listed}); the reproduction rewrites "
            "report.md, report.json and figures/ there. Give a new folder, or pass --force to write beside them."
        )
    return bool(names & REPRODUCTION_FILES)


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
    force: bool = typer.Option(
        False,
        "--force",
        help="Compute again even when the results cache holds these inputs' reproduction, and write into --out "
        "even when it holds files that are not a reproduction's.",
    ),
    device: str = DEVICE,
    plotlyjs: str = PLOTLYJS,
) -> None:
    """Reproduce the figures and claims of "GPT-2's positional embedding matrix is a helix" (offline by default).

    Stages are shown on stderr: a progress bar on a terminal; otherwise a line when each stage starts and ends, and
    one every 10 s while it runs.
    """

    def run() -> None:
        from pos_geometry.reproduction.cache import cached_reproduction, reproduction_key, store_reproduction
        from pos_geometry.reproduction.models import REPRODUCED_MODELS, parse_model_paths
        from pos_geometry.sources.locations import find_data_dir

        paths = parse_model_paths(model)
        fmts = parse_formats(format)
        earlier = _check_out(out, force)  # before any work
        console = out_console()
        key = reproduction_key(
            names=REPRODUCED_MODELS, data_dir=find_data_dir(data_dir), paths=paths, tokens=tokens, online=online,
            formats=fmts, device=device, plotlyjs=plotlyjs,
        )  # fmt: skip
        summary = None if force else cached_reproduction(key, out)
        if summary is not None:
            console.print(summary, markup=False)
            console.print(
                f"wrote {out / 'report.md'} and its figures to {out}: the same inputs' reproduction, from the results "
                "cache (--force computes it again)",
                markup=False,
            )
            return
        with progress_bar() as bar, StageLog("reproduce", 0) as stages:
            task = bar.add_task("reproducing", total=None)
            current: list = [0, ""]  # the stage running: its number (1-based) and title

            def step(label: str, done: int, total: int) -> None:
                bar.update(task, description=f"reproducing: {label}", completed=done, total=total)
                stages.total = total  # off a terminal: a line per stage start and end, and while one runs
                number = done + 1
                if label == "done" or number != current[0]:
                    if current[0]:
                        stages.done(current[0], current[1])
                    if label != "done":
                        current[:] = [number, label.split(" (")[0]]
                        stages.started(number, current[1])

            from pos_geometry.reproduction.runner import reproduce_blog_post

            result = reproduce_blog_post(
                out, data_dir=data_dir, paths=paths, tokens=tokens, online=online, formats=fmts,
                device=device, on_stage=step, plotlyjs=plotlyjs,
            )  # fmt: skip
        if earlier:
            err().print(one_line(f"note: the earlier reproduction in {out} was replaced"), markup=False)
        text = result.summary_text()
        store_reproduction(key, out, text.rsplit("\n", 1)[0])  # without its "wrote … to <out>" line
        console.print(text, markup=False)

    guard(run)

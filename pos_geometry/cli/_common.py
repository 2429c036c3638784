"""What every command shares: consoles, the error guard, progress bars, output folders and options."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import TypeVar

import click
import typer
from rich.console import Console
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

from pos_geometry.errors import InvalidArgumentError, PosGeometryError

T = TypeVar("T")
STATE = {"debug": False}
FORMATS = ("html", "png", "svg", "pdf", "jpeg", "webp")


def err() -> Console:
    return Console(stderr=True, highlight=False, soft_wrap=True)


def out_console() -> Console:
    """stdout; when it is not a terminal (a pipe, a file), wide enough that tables are not cut."""
    console = Console(highlight=False, soft_wrap=True)
    if not console.is_terminal:
        console.width = 200
    return console


def guard(fn: Callable[[], T]) -> T:
    """Run ``fn``; a PosGeometryError or OSError becomes one line on stderr and exit status 1."""
    try:
        return fn()
    except (PosGeometryError, OSError) as exc:
        if STATE["debug"]:
            raise
        if isinstance(exc, OSError) and exc.filename is not None:
            message = f"{exc.strerror or exc}: {exc.filename} (run with --debug for the traceback)."
        else:
            message = str(exc)
        err().print(f"error: {message}", markup=False)
        raise typer.Exit(1) from None
    except (click.exceptions.ClickException, click.exceptions.Exit, click.exceptions.Abort):
        raise  # usage errors and exits: typer reports them itself
    except Exception as exc:  # a bug, not bad input: still one line, with the way to learn more
        if STATE["debug"]:
            raise
        err().print(
            f"error: internal error ({type(exc).__name__}: {str(exc)[:300]}). This is a bug in pos_geometry: "
            "run with --debug for the traceback and please report it.",
            markup=False,
        )
        raise typer.Exit(1) from None


def out_dir(out: Path) -> Path:
    """Create the ``--out`` folder up front, so a bad path fails before any work is done."""
    if out.exists() and not out.is_dir():
        raise InvalidArgumentError(
            f"--out must be a folder (it is created if needed); {str(out)!r} is a file. Give another path."
        )
    out.mkdir(parents=True, exist_ok=True)
    return out


def progress_bar() -> Progress:
    """A transient progress bar on stderr, shown only when stderr is a terminal."""
    console = err()
    return Progress(
        TextColumn("{task.description}"), BarColumn(), MofNCompleteColumn(), TimeElapsedColumn(),
        console=console, transient=True, disable=not console.is_terminal,
    )  # fmt: skip


@contextmanager
def progress(description: str, total: int) -> Iterator[Callable[[str], None]]:
    """A rich progress bar on stderr; yields ``advance(label)``."""
    with progress_bar() as bar:
        task = bar.add_task(description, total=total)

        def advance(label: str) -> None:
            bar.update(task, advance=1, description=f"{description}: {label}")

        yield advance


def parse_formats(text: str) -> tuple[str, ...]:
    fmts = tuple(f.strip().lower() for f in text.split(",") if f.strip())
    bad = [f for f in fmts if f not in FORMATS]
    if bad or not fmts:
        raise InvalidArgumentError(
            f"--format takes a comma-separated list of {', '.join(FORMATS)}; got {text!r}."
        )
    return fmts


def load_all(models: list[str], *, revision: str | None, device: str, offline: bool | None) -> list:
    from pos_geometry.loading import load

    tables = []
    with progress("loading", len(models)) as advance:
        for name in models:
            tables.append(load(name, revision=revision, device=device, offline=offline))
            advance(name)
    return tables


def figures_all(tables: list, window) -> list:
    from pos_geometry.reproduction.measure import model_figures

    out = []
    with progress("analysing", len(tables)) as advance:
        for pe in tables:
            out.append(model_figures(pe, window=window))
            advance(pe.provenance.model_id)
    return out


def safe_name(label: str) -> str:
    keep = "".join(c if c.isalnum() or c in "-._" else "_" for c in label)
    return keep.strip("._") or "model"


def file_stems(models: list[str], tables: list) -> list[str]:
    """One distinct file name per model: a local path gives its file (or folder) name without the
    suffix, anything else its model id; the revision is appended; repeats get ``-2``, ``-3``..."""
    stems: list[str] = []
    taken = {"grid"}
    for arg, pe in zip(models, tables, strict=True):
        path = Path(arg).expanduser()
        base = (
            (path.stem if path.is_file() else path.resolve().name)
            if path.exists()
            else pe.provenance.model_id
        )
        if pe.provenance.revision:
            base += f"_{pe.provenance.revision}"
        stem, i = safe_name(base), 2
        while stem.lower() in taken:
            stem, i = f"{safe_name(base)}-{i}", i + 1
        taken.add(stem.lower())
        stems.append(stem)
    return stems


MODELS = typer.Argument(
    ...,
    metavar="MODEL_OR_PATH",
    help="Model-table names (gpt2, pythia-70m), hub repo ids or local checkpoint paths.",
)
REVISION = typer.Option(None, "--revision", help="Branch, tag, commit, checkpoint-N or stepN.")
WINDOW = typer.Option(None, "--window", help="Positions start:stop (slice semantics), e.g. 1:1024.")
DEVICE = typer.Option("auto", "--device", help="auto, cpu, cuda, cuda:N or mps.")
OFFLINE = typer.Option(
    None, "--offline/--online", help="Never touch the network / allow downloads (default: environment)."
)


def parse_layers(text: str | None) -> list[int] | None:
    if text is None:
        return None
    try:
        return [int(part) for part in text.split(",") if part.strip()]
    except ValueError:
        raise InvalidArgumentError(
            f"--layers takes comma-separated layer indices such as 0,5,-1; got {text!r}."
        ) from None


def parse_window_text(text: str | None) -> tuple[int | None, int | None] | None:
    """``"1:1024"`` -> ``(1, 1024)``; ``"100:"`` -> ``(100, None)``; None or ``""`` -> None (all rows).

    Slice semantics over positions (stop exclusive). Raises InvalidArgumentError for anything
    that is not ``start:stop`` with integer (or empty) ends.
    """
    if text is None or not text.strip():
        return None
    parts = text.split(":")
    if len(parts) != 2:
        raise InvalidArgumentError(
            f"--window takes start:stop over positions (slice semantics, either end may be empty), "
            f"e.g. 1:1024 or 100:; got {text!r}."
        )
    ends: list[int | None] = []
    for part in parts:
        part = part.strip()
        try:
            ends.append(int(part) if part else None)
        except ValueError:
            raise InvalidArgumentError(
                f"--window ends must be integers (positions), e.g. 1:1024; got {text!r}."
            ) from None
    return ends[0], ends[1]

"""What every command shares: consoles, the error guard, progress bars, output folders and options."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any, TypeVar

import click
import typer
from rich.console import Console
from rich.progress import Progress

from pos_geometry._describe import printable
from pos_geometry._escape import terminal_text
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


MESSAGE_LIMIT = 2000
"""The most characters an error line prints (a message quoting user text can be megabytes long)."""


def one_line(text: str, limit: int = MESSAGE_LIMIT) -> str:
    """``text`` as one bounded terminal line: line breaks and tabs as spaces, every other control or
    non-printable character escaped (``\\x1b``: a file name cannot clear the screen), cut to ``limit``
    characters with the full length said."""
    return terminal_text(text, limit)


def _message(exc: BaseException, *, hint: bool = False) -> str:
    """One line for a user error: an OSError as ``reason: file``, anything else as its message."""
    if isinstance(exc, OSError) and exc.filename is not None:
        return one_line(f"{exc.strerror or exc}: {exc.filename}") + (
            " (run with --debug for the traceback)." if hint else ""
        )
    return one_line(str(exc))


def _print_error(text: str) -> None:
    """One error line on stderr, as written: no markup, no emoji codes (``:yarn:``), no highlighting, not
    wrapped into several lines."""
    err().print(text, markup=False, emoji=False, highlight=False, soft_wrap=True)


def guard(fn: Callable[[], T]) -> T:
    """Run ``fn``; a PosGeometryError or OSError becomes one line on stderr and exit status 1."""
    try:
        return fn()
    except (PosGeometryError, OSError) as exc:
        if STATE["debug"]:
            raise
        _print_error(f"error: {_message(exc, hint=True)}")
        raise typer.Exit(1) from None
    except (click.exceptions.ClickException, click.exceptions.Exit, click.exceptions.Abort, typer.Exit):
        raise  # usage errors and exits: typer reports them itself
    except Exception as exc:  # a bug, not bad input: still one line, with the way to learn more
        if STATE["debug"]:
            raise
        _print_error(
            f"error: internal error ({type(exc).__name__}: {one_line(str(exc), 300)}). This is a bug in "
            "pos_geometry: run with --debug for the traceback and please report it."
        )
        raise typer.Exit(1) from None


def check_out(out: Path) -> Path:
    """Check the ``--out`` folder before any work (it is created only when the first file is written,
    so a run in which every model fails leaves no empty folder behind)."""
    if out.exists() and not out.is_dir():
        raise InvalidArgumentError(
            f"--out must be a folder (it is created if needed); {str(out)!r} is a file. Give another path."
        )
    parent = next((p for p in (out, *out.parents) if p.exists()), Path("."))
    if not parent.is_dir():
        raise InvalidArgumentError(
            f"--out {str(out)!r} cannot be created: {str(parent)!r} is a file. Give another path."
        )
    return out


def out_dir(out: Path) -> Path:
    """Check the ``--out`` folder and create it (for commands that always write)."""
    check_out(out).mkdir(parents=True, exist_ok=True)
    return out


def figure_output(format: str, out: Path, *, create: bool = True) -> tuple[tuple[str, ...], Path]:
    """``--format`` and ``--out`` of a command that writes figures, checked before any work: the
    formats, a browser when a static one is asked for, and the folder (created unless ``create`` is
    False, for commands that create it only when the first file is written)."""
    from pos_geometry.plotting.export import find_browser

    fmts = parse_formats(format)
    if any(f != "html" for f in fmts):
        find_browser()  # static formats need one: say so before any work is done
    return fmts, out_dir(out) if create else check_out(out)


def progress_bar() -> Progress:
    """A transient progress bar on stderr, shown only when stderr is a terminal (and not ``--quiet``); the
    library's own bars (the nulls of an analysis) add their lines to it while it is live."""
    from pos_geometry import _progress

    return _progress.new_bar(show=None if err().is_terminal else False)


LINE_EVERY_S = 10.0
"""Without a terminal, a long command prints a progress line at most this often (and when it is done)."""


def reporter(bar: Progress, task: Any, what: str, unit: str) -> Callable[[int, int], None]:
    """``report(done, total)`` for a library ``progress`` callable: it moves ``bar`` on a terminal; in a log
    file or a pipe (where the bar is not drawn) it prints ``what: done/total unit (elapsed)`` at most every
    :data:`LINE_EVERY_S` seconds and at the end, unless ``--quiet``."""
    import time

    from pos_geometry import _progress

    log = err()
    start, last = time.monotonic(), [-LINE_EVERY_S]

    def report(done: int, total: int) -> None:
        bar.update(task, completed=done, total=total)
        if log.is_terminal or _progress._settings["quiet"]:
            return
        now = time.monotonic() - start
        if now - last[0] >= LINE_EVERY_S or done >= total:
            last[0] = now
            log.print(f"{what}: {done}/{total} {unit} ({now:.0f} s)", markup=False, highlight=False)

    return report


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


def report_failure(label: str | None, exc: BaseException) -> None:
    """One line on stderr for one model that could not be loaded or analysed (the run goes on);
    ``label`` (the model's argument) leads the line when several models were given."""
    if STATE["debug"]:
        raise exc
    message = _message(exc)
    err().print(f"error: {label}: {message}" if label else f"error: {message}", markup=False)


def load_all(
    models: list[str], *, revision: str | None, device: str, offline: bool | None
) -> tuple[list[tuple[str, Any]], list[str]]:
    """Load each model; a missing or broken one is one line on stderr and the others go on.

    Returns ``([(argument, PositionalEmbedding), ...], [failed argument, ...])``.
    """
    from pos_geometry.loading import load

    loaded, failed = [], []
    with progress("loading", len(models)) as advance:
        for name in models:
            try:
                loaded.append((name, load(name, revision=revision, device=device, offline=offline)))
            except (PosGeometryError, OSError) as exc:
                report_failure(name if len(models) > 1 else None, exc)
                failed.append(name)
            advance(name)
    return loaded, failed


SEQUENTIAL = typer.Option(
    True,
    "--sequential/--all-surrogates",
    help="sequential: a helix or recurrence null stops once 10 of its surrogates reach the table (the "
    "decision all of them would give; Besag & Clifford); all-surrogates: draw every surrogate.",
)


def analyze_all(
    loaded: list[tuple[str, Any]],
    window: Any,
    analyses: tuple[str, ...],
    *,
    null_method: str = "fast",
    sequential: bool = True,
) -> tuple[list[tuple[str, Any, Any]], list[str]]:
    """:func:`pos_geometry.analyze` each loaded table once; returns ``([(argument, table, Analysis)], failed)``."""
    import warnings

    from pos_geometry.analysis._inputs import parse_window
    from pos_geometry.analysis.costs import COSTLY_POSITIONS, CostWarning, cost_note
    from pos_geometry.analysis.pipeline import analyze
    from pos_geometry.cli._stages import StageLog

    done, failed = [], []
    stages_log = StageLog(
        "analyze", len(loaded), enabled=len(loaded) > 1
    )  # one table: its result is the line
    with progress("analysing", len(loaded)) as advance, stages_log as stages:
        for number, (name, pe) in enumerate(loaded, start=1):
            stages.started(number, name)  # off a terminal: a line per table, and one every 10 s while it runs
            try:
                start, stop = parse_window(window, pe.n_positions)
                if stop - start > COSTLY_POSITIONS and analyses:  # said before the work, as one line
                    err().print(
                        f"note: {printable(name, 200)}: {cost_note(stop - start)}",
                        markup=False,
                        highlight=False,
                    )
                with warnings.catch_warnings():
                    warnings.simplefilter("ignore", CostWarning)
                    result = analyze(
                        pe, window=window, analyses=analyses, null_method=null_method, sequential=sequential
                    )
                done.append((name, pe, result))
            except PosGeometryError as exc:
                report_failure(name if len(loaded) > 1 else None, exc)
                failed.append(name)
            stages.done(number, name)
            advance(pe.provenance.model_id)
    return done, failed


def finish(failed: list[str], total: int) -> None:
    """Exit with status 1 when any model failed (after the others were written)."""
    if failed and total == 1:
        raise typer.Exit(1)
    if failed:
        err().print(
            f"{len(failed)} of {total} model(s) failed: {', '.join(failed)} (each is reported above).",
            markup=False,
        )
        raise typer.Exit(1)


def parse_analyses(text: str) -> tuple[str, ...]:
    import difflib

    from pos_geometry.analysis.pipeline import ANALYSES

    chosen = tuple(a.strip().lower() for a in text.split(",") if a.strip())
    bad = [a for a in chosen if a not in ANALYSES]
    if bad:
        close = [m for b in bad for m in difflib.get_close_matches(b, ANALYSES, n=1)]
        hint = f" Did you mean {', '.join(close)}?" if close else ""
        raise InvalidArgumentError(
            f"--analyses takes a comma-separated subset of {', '.join(ANALYSES)}; got {text!r}.{hint}"
        )
    return chosen


FIGURE_SUFFIXES = (".html", ".png", ".svg", ".pdf", ".jpg", ".jpeg", ".webp")


def wrote(written: list[Path], out: Path) -> str:
    """``wrote 4 figures (html, png), 2 data files (csv, json) and the shared plotly.min.js to OUT``."""

    def counted(paths: list[Path], noun: str) -> str:
        kinds = ", ".join(sorted({p.suffix.lstrip(".") or "no suffix" for p in paths}))
        return f"{len(paths)} {noun}{'' if len(paths) == 1 else 's'} ({kinds})"

    figures = [p for p in written if p.suffix.lower() in FIGURE_SUFFIXES]
    data = [p for p in written if p.suffix.lower() not in FIGURE_SUFFIXES]
    parts = [counted(figures, "figure")] if figures else []
    parts += [counted(data, "data file")] if data else []
    if (out / "plotly.min.js").is_file() and any(p.suffix == ".html" for p in written):
        parts.append("the shared plotly.min.js")
    listed = ", ".join(parts[:-1]) + (" and " if len(parts) > 1 else "") + parts[-1] if parts else "nothing"
    return f"wrote {listed} to {out}"


def safe_name(label: str) -> str:
    keep = "".join(c if c.isalnum() or c in "-._" else "_" for c in label)
    return keep.strip("._") or "model"


def file_stems(models: list[str], tables: list) -> list[str]:
    """One distinct file name per model: a local path gives its file (or folder) name without the
    suffix, anything else its model id (``gpt2`` and ``gpt2=PATH`` both give ``gpt2``); a revision other
    than the default branch is appended; repeats get ``-2``, ``-3``..."""
    stems: list[str] = []
    taken = {"grid"}
    for arg, pe in zip(models, tables, strict=True):
        path = Path(arg).expanduser()
        base = (
            (path.stem if path.is_file() else path.resolve().name)
            if path.exists()
            else pe.provenance.model_id
        )
        if pe.provenance.revision and pe.provenance.revision != "main":
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
PLOTLYJS = typer.Option(
    "directory",
    "--plotlyjs",
    help="How HTML figures get plotly.js: directory (the default: one shared plotly.min.js beside them, "
    "offline and small), inline (each file self-contained, ~5 MB) or cdn (needs a network to view).",
)
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

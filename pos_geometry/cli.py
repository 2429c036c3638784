"""The ``pos-geometry`` command line: ``plot``, ``atlas``, ``analyze``, ``info`` and ``reproduce``.

The CLI only parses arguments and calls the public API; every number it prints comes from
the same functions as in Python. Progress goes to stderr (never into ``--json``/``--csv``
output). A :class:`~pos_geometry.errors.PosGeometryError`, or an ``OSError`` while writing, is
printed as one line and exits with status 1 (``--debug`` shows the traceback); so is any other
exception, as an internal error to report: no input shows a traceback without ``--debug``.
Usage errors exit with status 2.
"""

from __future__ import annotations

import csv
import io
import json
import sys
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import TypeVar

import click
import typer
from rich.console import Console
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn
from rich.table import Table

from pos_geometry.errors import InvalidArgumentError, PosGeometryError

__all__ = ["app", "main"]

app = typer.Typer(
    name="pos-geometry",
    help="The geometry of positional embeddings in pretrained transformers.",
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,
)

T = TypeVar("T")
_STATE = {"debug": False}
_FORMATS = ("html", "png", "svg", "pdf", "jpeg", "webp")


def _err() -> Console:
    return Console(stderr=True, highlight=False, soft_wrap=True)


def _out() -> Console:
    """stdout; when it is not a terminal (a pipe, a file), wide enough that tables are not cut."""
    console = Console(highlight=False, soft_wrap=True)
    if not console.is_terminal:
        console.width = 200
    return console


def _guard(fn: Callable[[], T]) -> T:
    """Run ``fn``; a PosGeometryError or OSError becomes one line on stderr and exit status 1."""
    try:
        return fn()
    except (PosGeometryError, OSError) as exc:
        if _STATE["debug"]:
            raise
        if isinstance(exc, OSError) and exc.filename is not None:
            message = f"{exc.strerror or exc}: {exc.filename} (run with --debug for the traceback)."
        else:
            message = str(exc)
        _err().print(f"error: {message}", markup=False)
        raise typer.Exit(1) from None
    except (click.exceptions.ClickException, click.exceptions.Exit, click.exceptions.Abort):
        raise  # usage errors and exits: typer reports them itself
    except Exception as exc:  # a bug, not bad input: still one line, with the way to learn more
        if _STATE["debug"]:
            raise
        _err().print(
            f"error: internal error ({type(exc).__name__}: {str(exc)[:300]}). This is a bug in pos_geometry: "
            "run with --debug for the traceback and please report it.",
            markup=False,
        )
        raise typer.Exit(1) from None


def _out_dir(out: Path) -> Path:
    """Create the ``--out`` folder up front, so a bad path fails before any work is done."""
    if out.exists() and not out.is_dir():
        raise InvalidArgumentError(
            f"--out must be a folder (it is created if needed); {str(out)!r} is a file. Give another path."
        )
    out.mkdir(parents=True, exist_ok=True)
    return out


def _bar() -> Progress:
    """A transient progress bar on stderr, shown only when stderr is a terminal."""
    console = _err()
    return Progress(
        TextColumn("{task.description}"), BarColumn(), MofNCompleteColumn(), TimeElapsedColumn(),
        console=console, transient=True, disable=not console.is_terminal,
    )  # fmt: skip


@contextmanager
def _progress(description: str, total: int) -> Iterator[Callable[[str], None]]:
    """A rich progress bar on stderr; yields ``advance(label)``."""
    with _bar() as bar:
        task = bar.add_task(description, total=total)

        def advance(label: str) -> None:
            bar.update(task, advance=1, description=f"{description}: {label}")

        yield advance


def _formats(text: str) -> tuple[str, ...]:
    fmts = tuple(f.strip().lower() for f in text.split(",") if f.strip())
    bad = [f for f in fmts if f not in _FORMATS]
    if bad or not fmts:
        raise InvalidArgumentError(
            f"--format takes a comma-separated list of {', '.join(_FORMATS)}; got {text!r}."
        )
    return fmts


def _load_all(models: list[str], *, revision: str | None, device: str, offline: bool | None) -> list:
    from pos_geometry.loading import load

    tables = []
    with _progress("loading", len(models)) as advance:
        for name in models:
            tables.append(load(name, revision=revision, device=device, offline=offline))
            advance(name)
    return tables


def _figures_all(tables: list, window) -> list:
    from pos_geometry.reproduction.measure import model_figures

    out = []
    with _progress("analysing", len(tables)) as advance:
        for pe in tables:
            out.append(model_figures(pe, window=window))
            advance(pe.provenance.model_id)
    return out


def _safe_name(label: str) -> str:
    keep = "".join(c if c.isalnum() or c in "-._" else "_" for c in label)
    return keep.strip("._") or "model"


def _file_stems(models: list[str], tables: list) -> list[str]:
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
        stem, i = _safe_name(base), 2
        while stem.lower() in taken:
            stem, i = f"{_safe_name(base)}-{i}", i + 1
        taken.add(stem.lower())
        stems.append(stem)
    return stems


@app.callback()
def _root(
    debug: bool = typer.Option(False, "--debug", help="Show the full traceback of errors."),
) -> None:
    """The geometry of positional embeddings in pretrained transformers."""
    _STATE["debug"] = debug


_MODELS = typer.Argument(
    ...,
    metavar="MODEL_OR_PATH",
    help="Model-table names (gpt2, pythia-70m), hub repo ids or local checkpoint paths.",
)
_REVISION = typer.Option(None, "--revision", help="Branch, tag, commit, checkpoint-N or stepN.")
_WINDOW = typer.Option(None, "--window", help="Positions start:stop (slice semantics), e.g. 1:1024.")
_DEVICE = typer.Option("auto", "--device", help="auto, cpu, cuda, cuda:N or mps.")
_OFFLINE = typer.Option(
    None, "--offline/--online", help="Never touch the network / allow downloads (default: environment)."
)


@app.command()
def plot(
    models: list[str] = _MODELS,
    out: Path = typer.Option(..., "--out", help="Folder for the figures (created if needed)."),
    revision: str | None = _REVISION,
    window: str | None = _WINDOW,
    format: str = typer.Option("html", "--format", help="Comma-separated: html,png,svg,pdf,jpeg,webp."),
    device: str = _DEVICE,
    offline: bool | None = _OFFLINE,
) -> None:
    """Write one 3D helix figure per model and a grid of all of them; print a summary line per model.

    Files are named after the model (a local file: its name without the suffix) plus the
    revision, e.g. ``gpt2.html``, ``pythia-70m_step1000.png``, and ``grid.html``.
    """
    from pos_geometry.plotting.export import find_browser, save_figure
    from pos_geometry.plotting.grid import plot_helix_grid
    from pos_geometry.plotting.helix3d import plot_helix
    from pos_geometry.reproduction.measure import parse_window_text

    def run() -> None:
        fmts = _formats(format)
        win = parse_window_text(window)
        if any(f != "html" for f in fmts):
            find_browser()  # static formats need one: say so before any work is done
        folder = _out_dir(out)
        tables = _load_all(models, revision=revision, device=device, offline=offline)
        figures = _figures_all(tables, win)
        written: list[Path] = []
        with _progress("writing figures", len(tables) + 1) as advance:
            for pe, fig, stem in zip(tables, figures, _file_stems(models, tables), strict=True):
                view = plot_helix(pe, window=win, fit=fig.helix)
                written += [save_figure(view, folder / f"{stem}.{f}", format=f) for f in fmts]
                advance(stem)
            grid = plot_helix_grid(tables, window=win, cols=min(3, len(tables)))
            written += [save_figure(grid, folder / f"grid.{f}", format=f) for f in fmts]
            advance("grid")
        console = _out()
        for fig in figures:
            console.print(fig.line(), markup=False)
        console.print(f"wrote {len(written)} file(s) to {out}", markup=False)

    _guard(run)


def _layers(text: str | None) -> list[int] | None:
    if text is None:
        return None
    try:
        return [int(part) for part in text.split(",") if part.strip()]
    except ValueError:
        raise InvalidArgumentError(
            f"--layers takes comma-separated layer indices such as 0,5,-1; got {text!r}."
        ) from None


@app.command()
def atlas(
    models: list[str] = _MODELS,
    out: Path = typer.Option(..., "--out", help="Folder for the figures (created if needed)."),
    revision: str | None = _REVISION,
    layers: str | None = typer.Option(None, "--layers", help="Comma-separated layer indices (default: all)."),
    fold_norm: bool = typer.Option(
        False, "--fold-norm", help="Fold the attention norm's gain into W_q, W_k."
    ),
    format: str = typer.Option("html", "--format", help="Comma-separated: html,png,svg,pdf,jpeg,webp."),
    offline: bool | None = _OFFLINE,
) -> None:
    """Write the rotary frequency atlas of each model: a heatmap, per-layer usage curves and a JSON file.

    Reads only the query/key projections (and with --fold-norm the norm gains) of rotary models
    (Pythia, Mistral, Llama, any row of the attention-layout table). Files are named after the
    model plus the revision: ``<name>_atlas.<fmt>``, ``<name>_usage.<fmt>``, ``<name>_atlas.json``.
    """
    from pos_geometry.analysis.rotary_atlas import rotary_atlas
    from pos_geometry.plotting.atlas import plot_atlas_heatmap, plot_atlas_usage
    from pos_geometry.plotting.export import find_browser, save_figure

    def run() -> None:
        fmts = _formats(format)
        chosen = _layers(layers)
        if any(f != "html" for f in fmts):
            find_browser()
        folder = _out_dir(out)
        results = []
        with _progress("reading q/k weights", len(models)) as advance:
            for name in models:
                results.append(
                    rotary_atlas(name, layers=chosen, revision=revision, fold_norm=fold_norm, offline=offline)
                )
                advance(name)
        written: list[Path] = []
        for result, stem in zip(results, _file_stems(models, results), strict=True):
            for fig, kind in ((plot_atlas_heatmap(result), "atlas"), (plot_atlas_usage(result), "usage")):
                written += [save_figure(fig, folder / f"{stem}_{kind}.{f}", format=f) for f in fmts]
            path = folder / f"{stem}_atlas.json"
            path.write_text(result.to_json(allow_nan=False))
            written.append(path)
        console = _out()
        for result in results:
            n_layers, n_heads, n_planes = result.shape
            console.print(
                f"{result.provenance.label}: {n_layers} layers × {n_heads} heads × {n_planes} planes, "
                f"{int(result.critical.sum())} planes complete a cycle in {result.context_length} positions, "
                f"mean short-wavelength share {float(result.short_share.mean()):.3f}",
                markup=False,
            )
        console.print(f"wrote {len(written)} file(s) to {out}", markup=False)

    _guard(run)


@app.command()
def analyze(
    models: list[str] = _MODELS,
    revision: str | None = _REVISION,
    window: str | None = _WINDOW,
    as_json: bool = typer.Option(False, "--json", help="Print the figures as JSON (a list of rows)."),
    as_csv: bool = typer.Option(False, "--csv", help="Print the figures as CSV."),
    device: str = _DEVICE,
    offline: bool | None = _OFFLINE,
) -> None:
    """Print the table of figures per model: size, kind, top-k variance, stable rank, helix fit."""
    from pos_geometry.reproduction.measure import parse_window_text

    if as_json and as_csv:
        raise typer.BadParameter("use only one of --json and --csv.")

    def run() -> None:
        rows = [
            f.row()
            for f in _figures_all(
                _load_all(models, revision=revision, device=device, offline=offline),
                parse_window_text(window),
            )
        ]
        if as_json:
            from pos_geometry.analysis._results import to_jsonable

            sys.stdout.write(json.dumps(to_jsonable(rows), indent=2, allow_nan=False) + "\n")
            return
        if as_csv:
            buf = io.StringIO()
            writer = csv.DictWriter(buf, fieldnames=list(rows[0]), lineterminator="\n")
            writer.writeheader()
            writer.writerows({**r, "processing": ";".join(r["processing"])} for r in rows)
            sys.stdout.write(buf.getvalue())
            return
        table = Table(title="positional-table figures (PCA centred over positions)")
        cols = [
            "model",
            "kind",
            "n_positions",
            "d_model",
            "window",
            "top1",
            "top3",
            "top10",
            "stable_rank",
            "helix_shape",
            "helix_turns",
            "helix_period",
            "helix_r2",
        ]
        for c in cols:
            table.add_column(
                c, justify="left" if c in ("model", "kind", "window", "helix_shape") else "right"
            )
        for r in rows:
            table.add_row(*(_cell(r[c]) for c in cols))
        _out().print(table)

    _guard(run)


def _cell(value: object) -> str:
    if value is None:
        return "–"
    if isinstance(value, float):
        return f"{value:.4f}" if abs(value) < 10 else f"{value:.1f}"
    return str(value)


@app.command()
def info(
    model: str = typer.Argument(..., help="A model-table name, alias or repo id."),
    revision: str | None = _REVISION,
) -> None:
    """Show what the model table knows about MODEL and whether its table is cached locally."""
    from pos_geometry.registry import get_spec, revisions
    from pos_geometry.reproduction.availability import cache_status, fetch_command

    def run() -> None:
        spec = get_spec(model)
        revs = revisions(spec)
        shown = ", ".join(revs) if len(revs) <= 6 else f"{', '.join(revs[:3])}, ..., {', '.join(revs[-3:])}"
        status = cache_status(spec, revision)
        if status.computed:
            cached = "not needed: the rotary table is computed from the model table (no download)"
        elif status.any:
            cached = "; ".join(
                s for s in (
                    f"pos_geometry cache: {status.pos_geometry}" if status.pos_geometry else "",
                    f"HF cache: commit {status.hf[:12]}" if status.hf else "",
                ) if s
            )  # fmt: skip
        else:
            cached = f"no (fetch with: {fetch_command(spec)})"
        rows = [
            ("name", spec.name),
            ("aliases", ", ".join(spec.aliases) or "–"),
            ("repo", spec.repo_id),
            ("family", spec.family),
            ("kind", spec.kind + (" (no learned positional table)" if spec.kind == "rotary" else "")),
            ("tensor key", spec.position_key or "–"),
            ("n_positions × d_model", f"{spec.n_positions} × {spec.d_model}"),
            ("row offset", str(spec.row_offset)),
            ("revisions", f"{len(revs)}: {shown}"),
            ("cached locally", cached),
        ]
        if spec.kind == "rotary":
            rows.insert(
                6, ("rotary config", ", ".join(f"{k}={v}" for k, v in sorted(spec.rotary_config.items())))
            )
        if spec.notes:
            rows.append(("notes", spec.notes))
        table = Table(show_header=False, title=f"{spec.name}")
        table.add_column(style="bold")
        table.add_column()
        for key, value in rows:
            table.add_row(key, value)
        _out().print(table)

    _guard(run)


@app.command()
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
    device: str = typer.Option("cpu", "--device", help="auto, cpu, cuda, cuda:N or mps."),
) -> None:
    """Reproduce the figures and claims of "GPT-2's positional embedding matrix is a helix" (offline by default)."""
    from pos_geometry.reproduction.runner import parse_model_paths, reproduce_blog_post

    def run() -> None:
        paths = parse_model_paths(model)
        fmts = _formats(format)
        console = _out()
        with _bar() as bar:
            task = bar.add_task("reproducing", total=None)

            def step(label: str, done: int, total: int) -> None:
                bar.update(task, description=f"reproducing: {label}", completed=done, total=total)

            result = reproduce_blog_post(
                out, data_dir=data_dir, paths=paths, tokens=tokens, online=online, formats=fmts,
                device=device, progress=step,
            )  # fmt: skip
        console.print(result.summary_text(), markup=False)

    _guard(run)


def main() -> None:
    """Console-script entry point."""
    app()


if __name__ == "__main__":  # pragma: no cover
    main()

"""``pos-geometry analyze`` and ``pos-geometry info``: tables printed to stdout."""

from __future__ import annotations

import csv
import io
import json
import sys

import typer
from rich.markup import escape
from rich.table import Table

from pos_geometry.cli._common import (
    DEVICE,
    MODELS,
    OFFLINE,
    REVISION,
    SEQUENTIAL,
    WINDOW,
    analyze_all,
    finish,
    guard,
    load_all,
    out_console,
    parse_analyses,
    parse_window_text,
)

_COLUMNS = (
    "model", "kind", "n_positions", "d_model", "window", "top1", "top3", "top10", "stable_rank",
    "helix_verdict", "helix_turns", "helix_period", "helix_p_value", "period", "period_series",
    "period_p_value", "recurrence_status",
)  # fmt: skip
_LEFT = ("model", "kind", "window", "helix_verdict", "period_series", "recurrence_status")


def analyze(
    models: list[str] = MODELS,
    revision: str | None = REVISION,
    window: str | None = WINDOW,
    analyses: str = typer.Option(
        "helix,periodicity,recurrence",
        "--analyses",
        help="Comma-separated subset of helix,periodicity,recurrence (the PCA always runs).",
    ),
    as_json: bool = typer.Option(False, "--json", help="Print the figures as JSON (a list of rows)."),
    as_csv: bool = typer.Option(False, "--csv", help="Print the figures as CSV."),
    null_method: str = typer.Option(
        "fast",
        "--null-method",
        help="fast: the nulls' surrogates in each table's leading principal subspace; exact: whole tables "
        "(the reference, slower). The same nulls.",
    ),
    sequential: bool = SEQUENTIAL,
    device: str = DEVICE,
    offline: bool | None = OFFLINE,
) -> None:
    """Print the figures per model: size, kind, top-k variance, stable rank, helix verdict, periods, recurrence.

    Each table is analysed once by 'pos_geometry.analyze' (one PCA shared by every analysis). A
    model that cannot be loaded or analysed is one line on stderr; the others are printed, and the
    exit status is 1.
    """
    if as_json and as_csv:
        raise typer.BadParameter("use only one of --json and --csv.")
    if as_json or as_csv:
        from pos_geometry import _progress

        _progress.set_quiet(True)  # machine-readable output: nothing else on the terminal

    def run() -> None:
        chosen = parse_analyses(analyses)
        loaded, failed = load_all(models, revision=revision, device=device, offline=offline)
        done, broken = analyze_all(
            loaded, parse_window_text(window), chosen, null_method=null_method, sequential=sequential
        )
        failed += broken
        rows = [a.row() for _, _, a in done]
        if as_json:
            from pos_geometry.analysis._results import to_jsonable

            sys.stdout.write(json.dumps(to_jsonable(rows), indent=2, allow_nan=False) + "\n")
        elif as_csv and rows:
            buf = io.StringIO()
            writer = csv.DictWriter(buf, fieldnames=list(rows[0]), lineterminator="\n")
            writer.writeheader()
            writer.writerows({**r, "processing": ";".join(r["processing"])} for r in rows)
            sys.stdout.write(buf.getvalue())
        elif rows:
            table = Table(title="positional-table figures (one PCA per table, centred over positions)")
            for c in _COLUMNS:  # headers wrap at their spaces instead of being cut to "n_positio…"
                table.add_column(
                    c.replace("_", " "), justify="left" if c in _LEFT else "right", overflow="fold"
                )
            for r in rows:
                table.add_row(*(_cell(r[c]) for c in _COLUMNS))
            console = out_console()
            console.print(table)
            for r in rows:  # why each verdict is what it is (a "does not apply" or "not run" included)
                for what, key in (("outlier rows", "outlier_rows"), ("helix", "helix_reason"),
                                  ("period", "period_reason"), ("recurrence", "recurrence_reason")):  # fmt: skip
                    if r.get(key):
                        console.print(f"{escape(r['model'])}: {what}: {escape(str(r[key]))}", highlight=False)
        finish(failed, len(models))

    guard(run)


def _cell(value: object) -> str:
    if value is None:
        return "–"
    if isinstance(value, float):
        return f"{value:.4f}" if abs(value) < 10 else f"{value:.1f}"
    return str(value)


def info(
    model: str = typer.Argument(
        ...,
        metavar="MODEL_OR_PATH",
        help="A model-table name, alias or repo id; or a local file or model folder (described from its headers).",
    ),
    revision: str | None = REVISION,
    tensors: bool = typer.Option(
        False, "--tensors", help="For a local path: list every tensor with its shape."
    ),
) -> None:
    """Show what the model table knows about MODEL and where its table would be found (each place, found or not).

    For a local path: its format, its tensors, the one pos_geometry would load as the positional table,
    the kind (learned, rotary, none) and the config, all from headers (no tensor bytes are read).
    """
    from pathlib import Path

    def run() -> None:
        if Path(model).expanduser().exists():
            _info_path(model, tensors)
        elif _looks_like_a_path(model):
            from pos_geometry.errors import InvalidArgumentError

            raise InvalidArgumentError(
                f"No file or folder at {model!r}: it looks like a path (it has a file extension or a leading ./, ~ "
                "or /), and nothing is there. Check the path; `pos-geometry models` lists the names of the model table."
            )
        else:
            _info_name(model, revision)

    guard(run)


_FILE_SUFFIXES = (".npy", ".npz", ".safetensors", ".bin", ".pt", ".pth", ".gguf", ".json")


def _looks_like_a_path(text: str) -> bool:
    """A name the model table and the hub could not mean: a file extension, or a relative/absolute path start."""
    return (
        text.lower().endswith(_FILE_SUFFIXES)
        or text.startswith(("./", "../", "/", "~"))
        or text.count("/") > 1
    )


def _info_path(path: str, all_tensors: bool) -> None:
    from pos_geometry._describe import printable
    from pos_geometry.sources.checkpoint_summary import describe_checkpoint

    summary = describe_checkpoint(path)
    table = Table(show_header=False, title=escape(printable(path, 300)))
    table.add_column(style="bold")
    table.add_column()
    for key, value in summary.rows():
        table.add_row(escape(printable(key, 120)), escape(printable(value, 300)))
    shown = summary.tensors if all_tensors else summary.tensors[:12]
    for t in shown:
        shape = "?" if t.shape is None else "×".join(map(str, t.shape)) or "scalar"
        table.add_row(
            "  tensor", escape(f"{printable(t.key) or '(the array)'}  {shape}  {t.stored_type or '?'}")
        )
    if len(shown) < len(summary.tensors):
        table.add_row("  ...", f"{len(summary.tensors) - len(shown)} more (--tensors lists them all)")
    out_console().print(table)


def _info_name(model: str, revision: str | None) -> None:
    from pos_geometry.registry import get_spec, revisions
    from pos_geometry.sources.locations import fetch_command, table_locations

    spec = get_spec(model)
    revs = revisions(spec)
    shown = ", ".join(revs) if len(revs) <= 6 else f"{', '.join(revs[:3])}, ..., {', '.join(revs[-3:])}"
    places = table_locations(spec, revision)
    found = [p for p in places if p.found]
    where = [("found" if p.found else "not found", f"{p.label}: {p.where}") for p in places]
    cached = f"yes ({found[0].label})" if found else f"no (fetch with: {fetch_command(spec, revision)})"
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
        ("available offline", cached),
        *where,
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
    out_console().print(table)

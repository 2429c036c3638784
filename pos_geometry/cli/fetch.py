"""``pos-geometry fetch MODEL``: put a table into the cache (and, with ``--export``, into data/tables/)."""

from __future__ import annotations

import typer

from pos_geometry.cli._common import REVISION, guard, out_console


def fetch(
    model: str = typer.Argument(
        ..., metavar="MODEL", help="A model-table name or alias (`pos-geometry models` lists them)."
    ),
    revision: str | None = REVISION,
    export: bool = typer.Option(
        False, "--export", help="Also write data/tables/<name>[_<revision>].npy with its provenance JSON."
    ),
) -> None:
    """Download only MODEL's positional table (range reads) into the cache, so load, info and reproduce find it offline."""
    from pos_geometry.sources.fetch import fetch_table

    def run() -> None:
        got = fetch_table(model, revision, export=export)
        rows, d_model = got.shape
        console = out_console()
        console.print(
            f"{got.name}@{got.revision}: {got.tensor_key} ({rows} × {d_model}, {got.stored_dtype}) from {got.file}, "
            f"commit {got.commit[:12]} ({got.origin}); cached",
            markup=False,
        )
        if got.exported is not None:
            console.print(f"exported to {got.exported} (provenance: {got.provenance_file})", markup=False)

    guard(run)

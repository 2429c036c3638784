"""``pos-geometry models [FILTER]``: the model table, without importing torch."""

from __future__ import annotations

import json
import sys

import typer

from pos_geometry.cli._common import guard, out_console


def models(
    contains: str | None = typer.Argument(
        None, metavar="[FILTER]", help="Show only rows whose name, alias, repo, family or kind contains it."
    ),
    as_json: bool = typer.Option(False, "--json", help="Print the rows as JSON (a list of objects)."),
) -> None:
    """List the models known by name: aliases, family, kind, n_positions × d_model and hub repo."""
    from pos_geometry.errors import UnknownModelError
    from pos_geometry.registry.lookup import suggest, table_records

    def run() -> None:
        rows = table_records(contains)
        if not rows:
            hints = suggest(contains or "")
            also = f" Closest names: {', '.join(hints)}." if hints else ""
            raise UnknownModelError(
                f"no row of the model table ({len(table_records())} models) contains {contains!r}.{also} "
                "Run `pos-geometry models` without a filter to list them all.",
                name=contains or "",
                suggestions=hints,
            )
        if as_json:
            keep = ("name", "aliases", "family", "kind", "n_positions", "d_model", "repo_id")
            listed = [{k: list(r.get(k, ())) if k == "aliases" else r.get(k) for k in keep} for r in rows]
            sys.stdout.write(json.dumps(listed, indent=2) + "\n")
            return
        from rich.table import Table

        title = f"model table: {len(rows)} model(s)" + (f" matching {contains!r}" if contains else "")
        table = Table(title=title)
        for column in ("name", "aliases", "family", "kind", "n_positions × d_model", "repo"):
            table.add_column(column, justify="right" if column.startswith("n_") else "left")
        for r in rows:
            table.add_row(
                r["name"],
                ", ".join(r.get("aliases", ())) or "–",
                r["family"],
                r["kind"],
                f"{r['n_positions']} × {r['d_model']}",
                r["repo_id"],
            )
        out_console().print(table)

    guard(run)

"""``pos-geometry plot`` and ``pos-geometry atlas``: figures per model."""

from __future__ import annotations

from pathlib import Path

import typer

from pos_geometry.cli._common import (
    DEVICE,
    MODELS,
    OFFLINE,
    REVISION,
    WINDOW,
    figures_all,
    file_stems,
    guard,
    load_all,
    out_console,
    out_dir,
    parse_formats,
    parse_layers,
    parse_window_text,
    progress,
)


def plot(
    models: list[str] = MODELS,
    out: Path = typer.Option(..., "--out", help="Folder for the figures (created if needed)."),
    revision: str | None = REVISION,
    window: str | None = WINDOW,
    format: str = typer.Option("html", "--format", help="Comma-separated: html,png,svg,pdf,jpeg,webp."),
    device: str = DEVICE,
    offline: bool | None = OFFLINE,
) -> None:
    """Write one 3D helix figure per model and a grid of all of them; print a summary line per model.

    Files are named after the model (a local file: its name without the suffix) plus the
    revision, e.g. ``gpt2.html``, ``pythia-70m_step1000.png``, and ``grid.html``.
    """
    from pos_geometry.plotting.export import find_browser, save_figure
    from pos_geometry.plotting.grid import plot_helix_grid
    from pos_geometry.plotting.helix3d import plot_helix

    def run() -> None:
        fmts = parse_formats(format)
        win = parse_window_text(window)
        if any(f != "html" for f in fmts):
            find_browser()  # static formats need one: say so before any work is done
        folder = out_dir(out)
        tables = load_all(models, revision=revision, device=device, offline=offline)
        figures = figures_all(tables, win)
        written: list[Path] = []
        with progress("writing figures", len(tables) + 1) as advance:
            for pe, fig, stem in zip(tables, figures, file_stems(models, tables), strict=True):
                view = plot_helix(pe, window=win, fit=fig.helix)
                written += [save_figure(view, folder / f"{stem}.{f}", format=f) for f in fmts]
                advance(stem)
            grid = plot_helix_grid(tables, window=win, cols=min(3, len(tables)))
            written += [save_figure(grid, folder / f"grid.{f}", format=f) for f in fmts]
            advance("grid")
        console = out_console()
        for fig in figures:
            console.print(fig.line(), markup=False)
        console.print(f"wrote {len(written)} file(s) to {out}", markup=False)

    guard(run)


def atlas(
    models: list[str] = MODELS,
    out: Path = typer.Option(..., "--out", help="Folder for the figures (created if needed)."),
    revision: str | None = REVISION,
    layers: str | None = typer.Option(None, "--layers", help="Comma-separated layer indices (default: all)."),
    fold_norm: bool = typer.Option(
        False, "--fold-norm", help="Fold the attention norm's gain into W_q, W_k."
    ),
    format: str = typer.Option("html", "--format", help="Comma-separated: html,png,svg,pdf,jpeg,webp."),
    offline: bool | None = OFFLINE,
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
        fmts = parse_formats(format)
        chosen = parse_layers(layers)
        if any(f != "html" for f in fmts):
            find_browser()
        folder = out_dir(out)
        results = []
        with progress("reading q/k weights", len(models)) as advance:
            for name in models:
                results.append(
                    rotary_atlas(name, layers=chosen, revision=revision, fold_norm=fold_norm, offline=offline)
                )
                advance(name)
        written: list[Path] = []
        for result, stem in zip(results, file_stems(models, results), strict=True):
            for fig, kind in ((plot_atlas_heatmap(result), "atlas"), (plot_atlas_usage(result), "usage")):
                written += [save_figure(fig, folder / f"{stem}_{kind}.{f}", format=f) for f in fmts]
            path = folder / f"{stem}_atlas.json"
            path.write_text(result.to_json(allow_nan=False))
            written.append(path)
        console = out_console()
        for result in results:
            n_layers, n_heads, n_planes = result.shape
            console.print(
                f"{result.provenance.label}: {n_layers} layers × {n_heads} heads × {n_planes} planes, "
                f"{int(result.critical.sum())} planes complete a cycle in {result.context_length} positions, "
                f"mean short-wavelength share {float(result.short_share.mean()):.3f}",
                markup=False,
            )
        console.print(f"wrote {len(written)} file(s) to {out}", markup=False)

    guard(run)

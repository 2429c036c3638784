"""``pos-geometry plot`` and ``pos-geometry atlas``: figures per model."""

from __future__ import annotations

from pathlib import Path

import typer

from pos_geometry.cli._common import (
    DEVICE,
    MODELS,
    OFFLINE,
    PLOTLYJS,
    REVISION,
    WINDOW,
    analyze_all,
    figure_output,
    file_stems,
    finish,
    guard,
    load_all,
    out_console,
    parse_layers,
    parse_window_text,
    progress,
    wrote,
)


def plot(
    models: list[str] = MODELS,
    out: Path = typer.Option(..., "--out", help="Folder for the figures (created if needed)."),
    revision: str | None = REVISION,
    window: str | None = WINDOW,
    format: str = typer.Option("html", "--format", help="Comma-separated: html,png,svg,pdf,jpeg,webp."),
    plotlyjs: str = PLOTLYJS,
    device: str = DEVICE,
    offline: bool | None = OFFLINE,
) -> None:
    """Write one 3D helix figure per model and, for two or more, a grid of all of them; print a summary line per model.

    Files are named after the model (a local file: its name without the suffix) plus the
    revision, e.g. 'gpt2.html', 'pythia-70m_step1000.png', and 'grid.html'. Each table is
    decomposed once (one PCA, one helix fit with its nulls); the figures draw that fit. A model
    that cannot be loaded is one line on stderr; the others are drawn, and the exit status is 1.
    """

    def run() -> None:
        from pos_geometry.plotting.export import check_plotlyjs, save_figure
        from pos_geometry.plotting.grid import plot_helix_grid
        from pos_geometry.plotting.helix3d import plot_helix

        check_plotlyjs(plotlyjs)
        win = parse_window_text(window)
        fmts, folder = figure_output(format, out, create=False)
        loaded, failed = load_all(models, revision=revision, device=device, offline=offline)
        done, broken = analyze_all(loaded, win, ("helix",))
        failed += broken
        written: list[Path] = []
        if done:
            with progress("writing figures", len(done) + (len(done) > 1)) as advance:
                stems = file_stems([arg for arg, _, _ in done], [pe for _, pe, _ in done])
                for (_, _, a), stem in zip(done, stems, strict=True):
                    view = plot_helix(a.pca, fit=a.helix)
                    written += [
                        save_figure(view, folder / f"{stem}.{f}", format=f, plotlyjs=plotlyjs) for f in fmts
                    ]
                    advance(stem)
                if len(done) > 1:  # a grid of one model would repeat its figure
                    grid = plot_helix_grid([a.pca for _, _, a in done], cols=min(3, len(done)))
                    written += [
                        save_figure(grid, folder / f"grid.{f}", format=f, plotlyjs=plotlyjs) for f in fmts
                    ]
                    advance("grid")
        console = out_console()
        for _, _, a in done:
            console.print(a.line(), markup=False)
        if written:
            console.print(wrote(written, out), markup=False)
        finish(failed, len(models))

    guard(run)


def atlas(
    models: list[str] = MODELS,
    out: Path = typer.Option(..., "--out", help="Folder for the figures (created if needed)."),
    revision: str | None = REVISION,
    layers: str | None = typer.Option(None, "--layers", help="Comma-separated layer indices (default: all)."),
    fold_norm: bool = typer.Option(
        True,
        "--fold-norm/--no-fold-norm",
        help="Fold the attention norm's gain into W_q, W_k (rotary models), as the reproduction and the notebooks "
        "do; --no-fold-norm reads the raw weights.",
    ),
    format: str = typer.Option("html", "--format", help="Comma-separated: html,png,svg,pdf,jpeg,webp."),
    offline: bool | None = OFFLINE,
    plotlyjs: str = PLOTLYJS,
) -> None:
    """Write the query/key atlas of each model: figures and a JSON file.

    Rotary models (Pythia, Mistral, Llama, any row of the attention-layout table): the frequency
    atlas, read from the query/key projections only: '<name>_atlas.<fmt>' (heatmap) and
    '<name>_usage.<fmt>' (per-layer curves). Learned-table models (GPT-2): how each head's QK
    circuit reads the position table: '<name>_offsets.<fmt>' and '<name>_shares.<fmt>'. Both
    write '<name>_atlas.json'. Other models get a clear "does not apply".
    """
    from pos_geometry.atlas.qk import qk_atlas
    from pos_geometry.atlas.rotary import RotaryAtlas
    from pos_geometry.plotting.atlas import plot_atlas_heatmap, plot_atlas_usage
    from pos_geometry.plotting.export import check_plotlyjs, save_figure
    from pos_geometry.plotting.position_qk import plot_position_qk_offsets, plot_position_qk_shares

    def run() -> None:
        check_plotlyjs(plotlyjs)
        chosen = parse_layers(layers)
        fmts, folder = figure_output(format, out, create=False)
        results = []
        with progress("reading q/k weights", len(models)) as advance:
            for name in models:
                results.append(
                    qk_atlas(name, layers=chosen, revision=revision, fold_norm=fold_norm, offline=offline)
                )
                advance(name)
        folder.mkdir(parents=True, exist_ok=True)  # only now: a failed run leaves no empty folder
        written: list[Path] = []
        for result, stem in zip(results, file_stems(models, results), strict=True):
            if isinstance(result, RotaryAtlas):
                figures = ((plot_atlas_heatmap(result), "atlas"), (plot_atlas_usage(result), "usage"))
            else:
                figures = (
                    (plot_position_qk_offsets(result), "offsets"),
                    (plot_position_qk_shares(result), "shares"),
                )
            for fig, kind in figures:
                written += [
                    save_figure(fig, folder / f"{stem}_{kind}.{f}", format=f, plotlyjs=plotlyjs) for f in fmts
                ]
            path = folder / f"{stem}_atlas.json"
            path.write_text(result.to_json(allow_nan=False))
            written.append(path)
        console = out_console()
        for result in results:
            if isinstance(result, RotaryAtlas):
                n_layers, n_heads, n_planes = result.shape
                line = (
                    f"{n_layers} layers × {n_heads} heads × {n_planes} planes, {int(result.critical.sum())} planes "
                    f"complete a cycle in {result.context_length} positions, mean short-wavelength share "
                    f"{float(result.short_share.mean()):.3f}"
                )
            else:
                n_layers, n_heads = result.shape
                line = (
                    f"learned table: {n_layers} layers × {n_heads} heads, mean QK form share in the top "
                    f"{result.n_components} table directions {float(result.form_share.mean()):.3f}, mean logit "
                    f"variance explained by the offset {float(result.offset_r2.mean()):.3f}"
                )
            console.print(f"{result.provenance.label}: {line}", markup=False)
        console.print(wrote(written, out), markup=False)

    guard(run)

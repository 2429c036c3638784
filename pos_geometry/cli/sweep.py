"""``pos-geometry sweep``: metrics over training checkpoints, resumable, written as a tidy table and figures."""

from __future__ import annotations

from pathlib import Path

import typer

from pos_geometry.cli._common import (
    PLOTLYJS,
    SEQUENTIAL,
    WINDOW,
    err,
    guard,
    out_console,
    parse_layers,
    parse_window_text,
    safe_name,
)
from pos_geometry.errors import InvalidArgumentError


def _revisions(text: str) -> str | list[str | int]:
    """``all`` / ``every:N`` / ``log:N`` as is; anything else a comma-separated list of names or steps."""
    text = text.strip()
    if text == "all" or text.startswith(("every:", "log:")):
        return text
    items = [p.strip() for p in text.split(",") if p.strip()]
    if not items:
        raise InvalidArgumentError(
            f"--revisions needs all, every:N, log:N or a comma-separated list; got {text!r}."
        )
    return [int(p) if p.isdigit() else p for p in items]


def _analyses(text: str) -> str | list[str]:
    text = text.strip()
    return text if text in ("all", "cheap") else [p.strip() for p in text.split(",") if p.strip()]


def _line(result) -> str:
    ok = result.ok
    parts = [f"{result.model}: {len(ok)}/{len(result.records)} checkpoints ok"]
    if result.failures:
        kinds: dict[str, int] = {}
        for r in result.failures:
            kinds[r.status] = kinds.get(r.status, 0) + 1
        parts.append("skipped " + ", ".join(f"{n} {s}" for s, n in sorted(kinds.items())))
    if ok and "top3_ratio" in ok[0].metrics:
        parts.append(f"top-3 ratio {ok[0].metrics['top3_ratio']:.3f} ({ok[0].revision}) → "
                     f"{ok[-1].metrics['top3_ratio']:.3f} ({ok[-1].revision})")  # fmt: skip
    if ok and ok[0].metrics.get("short_share") is not None and ok[-1].metrics.get("short_share") is not None:
        parts.append(f"short-wavelength share {ok[0].metrics['short_share']:.3f} ({ok[0].revision}) → "
                     f"{ok[-1].metrics['short_share']:.3f} ({ok[-1].revision})")  # fmt: skip
    if ok and "helix_verdict" in ok[-1].metrics and result.config.kind == "learned":
        parts.append(f"final helix: {ok[-1].metrics['helix_verdict']}")
    parts.append(f"{result.n_resumed} resumed, {result.bytes_read / 1e6:.1f} MB read")
    return " · ".join(parts)


def sweep(
    models: list[str] = typer.Argument(
        ..., metavar="MODEL", help="Model-table names or hub repo ids (seeds overlay)."
    ),
    revisions: str = typer.Option("all", "--revisions", help="all, every:N, log:N, or names/steps a,b,c."),
    out: Path = typer.Option(..., "--out", help="Folder for the tables, figures and the resumable store."),
    analyses: str = typer.Option(
        "all",
        "--analyses",
        help="all, cheap, or a list: norms,pca,helix,periodicity,drift (rotary models: atlas,drift).",
    ),
    n_surrogates: int = typer.Option(
        199, "--n-surrogates", help="Surrogates of the helix and periodicity nulls."
    ),
    alpha: float = typer.Option(0.01, "--alpha", help="Level of the null tests."),
    sequential: bool = SEQUENTIAL,
    n_components: int = typer.Option(10, "--n-components", help="PCA components kept (top-N ratio)."),
    window: str | None = WINDOW,
    executor: str = typer.Option(
        "local", "--executor", help="local, or a Dask scheduler address tcp://host:8786."
    ),
    workers: int | None = typer.Option(None, "--workers", help="Threads of the local pool (default 8)."),
    resume: bool = typer.Option(True, "--resume/--no-resume", help="Skip checkpoints already in the store."),
    keep_tables: bool = typer.Option(
        False, "--keep-tables", help="Also keep each table in the tensor cache."
    ),
    figures: bool = typer.Option(
        True, "--figures/--no-figures", help="Write metrics.html and helix.html (rotary: usage.html)."
    ),
    layers: str | None = typer.Option(
        None,
        "--layers",
        help="Rotary models: the layers whose q/k weights are read, e.g. 0,5,11 (default all).",
    ),
    fold_norm: bool = typer.Option(
        False,
        "--fold-norm",
        help="Rotary models: fold the attention norm's gain into W_q, W_k. Off by default here, unlike the atlas "
        "command: one sweep command serves learned tables too, which have no norm gain to fold.",
    ),
    gguf_file: str | None = typer.Option(
        None,
        "--gguf-file",
        help="Rotary models: read each checkpoint's GGUF file of this name (header and q/k only).",
    ),
    plotlyjs: str = PLOTLYJS,
) -> None:
    """Read every training checkpoint's positional table (rotary models: its q/k weights, as the frequency
    atlas) and measure it; resumable (re-run the same command).

    Writes OUT/metrics.csv, metrics.parquet, sweep.json and the figures (one model), or one folder per model
    plus OUT/metrics.html overlaying them. Each checkpoint's result is stored in <folder>/checkpoints as soon
    as it is done; Ctrl-C leaves only complete results there.
    """
    import pos_geometry as pg
    from pos_geometry.plotting import plot_sweep_helix, plot_sweep_metrics, plot_sweep_usage, save_figure

    def run() -> None:
        from pos_geometry.plotting.export import check_plotlyjs

        check_plotlyjs(plotlyjs)
        opts = dict(
            analyses=_analyses(analyses), n_surrogates=n_surrogates, alpha=alpha, n_components=n_components,
            window=parse_window_text(window), executor=executor, n_workers=workers, resume=resume,
            keep_tables=keep_tables, progress=True, layers=parse_layers(layers), fold_norm=fold_norm,
            gguf_file=gguf_file, sequential=sequential,
        )  # fmt: skip
        revs = _revisions(revisions)
        folders = [out] if len(models) == 1 else [out / safe_name(m) for m in models]
        results = []
        for model, folder in zip(models, folders, strict=True):
            try:
                result = pg.sweep(model, revs, out=folder, **opts)
            except KeyboardInterrupt:
                err().print(
                    f"interrupted: the finished checkpoints are stored in {folder / 'checkpoints'}; run the same "
                    "command again to resume.",
                    markup=False,
                )
                raise typer.Exit(130) from None
            results.append(result)
            out_console().print(_line(result), markup=False)
            if figures and result.ok:
                save_figure(plot_sweep_metrics(result), folder / "metrics.html", plotlyjs=plotlyjs)
                if "pca" in result.config.analyses and len(result.ok) > 1:
                    save_figure(plot_sweep_helix(result), folder / "helix.html", plotlyjs=plotlyjs)
                if result.config.kind == "rotary":
                    save_figure(plot_sweep_usage(result), folder / "usage.html", plotlyjs=plotlyjs)
        if figures and len(results) > 1 and any(r.ok for r in results):
            save_figure(
                plot_sweep_metrics([r for r in results if r.ok]), out / "metrics.html", plotlyjs=plotlyjs
            )
        err().print(f"wrote {out}", markup=False)
        empty = [r for r in results if r.records and not r.ok]
        if empty:  # nothing succeeded: a failure, with the first reason, not a quiet "wrote"
            from pos_geometry.cli._common import one_line

            for r in empty:
                first = r.failures[0]
                err().print(
                    f"error: no checkpoint of {r.model} could be read: {first.status} ({one_line(first.reason, 300)})"
                    + (f", and {len(r.failures) - 1} more" if len(r.failures) > 1 else "")
                    + "; every reason is in metrics.csv.",
                    markup=False, emoji=False, highlight=False, soft_wrap=True,
                )  # fmt: skip
            raise typer.Exit(1)

    guard(run)

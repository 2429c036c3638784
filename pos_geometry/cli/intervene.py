"""``pos-geometry intervene``: the loss with and without positional edits, written to a folder."""

from __future__ import annotations

import csv
import io
from pathlib import Path

import typer

from pos_geometry.cli._common import (
    DEVICE,
    PLOTLYJS,
    REVISION,
    figure_output,
    guard,
    one_line,
    out_console,
    progress_bar,
    reporter,
    wrote,
)

__all__ = ["intervene"]


def _csv(sweep) -> str:
    buffer = io.StringIO()
    writer = csv.writer(buffer, lineterminator="\n")
    writer.writerow(["edit", "parameter", "base_loss", "edited_loss", "delta", "delta_low", "delta_high"])
    for r in sweep.results:
        writer.writerow([r.edit, r.parameter, r.base_loss, r.edited_loss, r.delta, *r.delta_interval])
    return buffer.getvalue()


def intervene(
    model: str = typer.Argument(
        ...,
        metavar="MODEL_OR_PATH",
        help="Model-table name, hub repo id, local transformers folder or .gguf file.",
    ),
    corpus: Path | None = typer.Option(
        None,
        "--corpus",
        help="A text file (the model's tokenizer) or token ids (.npy). Default: the public-domain text in "
        "data/corpus (offline), as the card reads.",
    ),
    edit: list[str] = typer.Option(
        ...,
        "--edit",
        help="NAME[:V1,V2,...], repeatable: rank:1,2,3,5,10  helix  shuffle:START  mean  shift:S  "
        "planes-slow:N  planes-fast:N  scale:F  rope:TYPE:FACTOR  swap  identity.",
    ),
    out: Path = typer.Option(..., "--out", help="Folder for interventions.json/csv and the figure."),
    seq_len: int | None = typer.Option(
        None, "--seq-len", help="Context length (default: the model's, ≤ 1024)."
    ),
    n_sequences: int | None = typer.Option(None, "--n-sequences", help="Contexts to read (default: all)."),
    batch_size: int | None = typer.Option(
        None,
        "--batch-size",
        help="Contexts per forward pass (default: 1024 tokens per pass on a CPU, 16384 on an accelerator).",
    ),
    n_bootstrap: int = typer.Option(
        1000, "--n-bootstrap", help="Resamples of the sequences for the interval."
    ),
    random_state: int = typer.Option(
        0,
        "--random-state",
        help="Seed of the bootstrap (and of the masked positions of a masked-token loss).",
    ),
    format: str = typer.Option("html", "--format", help="Comma-separated: html,png,svg,pdf,jpeg,webp."),
    revision: str | None = REVISION,
    device: str = DEVICE,
    plotlyjs: str = PLOTLYJS,
) -> None:
    """Run MODEL on the corpus as it is and with each positional edit; write Δloss with bootstrap intervals.

    The loss is the model's own objective: the next-token loss of a causal decoder, the masked-token loss of a
    model that attends both ways (15% of each context's positions masked, drawn with --random-state; the
    rule is in the provenance).

    Writes 'interventions.json' (every result, provenance included), 'interventions.csv' (one row
    per edit) and the figure 'interventions' (Δloss against each edit's parameter). The model is
    run whole: a position table alone, or a partial folder, cannot be intervened on, and the error
    says what is missing.
    """
    from pos_geometry._files import atomic_write
    from pos_geometry.interventions import parse_edits
    from pos_geometry.interventions.run import intervene_sweep
    from pos_geometry.plotting import plot_intervention_sweep, save_figure

    def run() -> None:
        from pos_geometry.plotting.export import check_plotlyjs

        check_plotlyjs(plotlyjs)
        edits = parse_edits(edit)
        fmts, folder = figure_output(format, out, create=False)
        from pos_geometry.cards.corpus import default_text

        text = corpus if corpus is not None else default_text("intervene")
        with progress_bar() as bar:
            task = bar.add_task(f"base pass and {len(edits)} edit(s)", total=None)
            sweep = intervene_sweep(
                model, text, edits, batch_size=batch_size, device=device, seq_len=seq_len,
                n_sequences=n_sequences, n_bootstrap=n_bootstrap, random_state=random_state, revision=revision,
                progress=reporter(bar, task, "interventions", "contexts of the current pass"),
            )  # fmt: skip
        folder.mkdir(parents=True, exist_ok=True)  # only now: a failed run leaves no empty folder
        written = [
            atomic_write(folder / "interventions.json", sweep.to_json(allow_nan=False, indent=1)),
            atomic_write(folder / "interventions.csv", _csv(sweep)),
        ]
        fig = plot_intervention_sweep(sweep)
        written += [
            save_figure(fig, folder / f"interventions.{f}", format=f, plotlyjs=plotlyjs) for f in fmts
        ]
        console = out_console()
        console.print(one_line(f"{sweep.provenance.label}: {sweep.results[0].corpus}"), markup=False)
        console.print(
            f"base {sweep.results[0].objective} loss {sweep.base_loss:.4f} nats/token", markup=False
        )
        for r in sweep.results:
            low, high = r.delta_interval
            console.print(f"{r.edit}: Δloss {r.delta:+.4f} [{low:+.4f}, {high:+.4f}]", markup=False)
        console.print(wrote(written, out), markup=False)

    guard(run)

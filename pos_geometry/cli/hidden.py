"""``pos-geometry hidden``: position in the hidden states and in attention, written to a folder."""

from __future__ import annotations

import csv
import io
from collections.abc import Callable
from pathlib import Path
from typing import Any

import typer

from pos_geometry.cli._common import (
    DEVICE,
    PLOTLYJS,
    REVISION,
    figure_output,
    guard,
    one_line,
    out_console,
    parse_layers,
    progress_bar,
    reporter,
    wrote,
)
from pos_geometry.errors import InvalidArgumentError

__all__ = ["hidden"]


def _csv(rows: list[dict]) -> str:
    buffer = io.StringIO()
    writer = csv.DictWriter(buffer, fieldnames=list(rows[0]), lineterminator="\n")
    writer.writeheader()
    writer.writerows(rows)
    return buffer.getvalue()


_CORPUS = typer.Option(
    None,
    "--corpus",
    help="Token ids (.npy, shape n_sequences x seq_len) or a text file (the model's tokenizer). Default: the "
    "public-domain text in data/corpus (offline), as the card reads; random tokens (labelled so in every output) "
    "for a model without a tokenizer.",
)


def _default_corpus_run(decompose: Callable[[Any], Any]) -> Any:
    """``decompose`` on the default text, or on random tokens when it is not here or the model has no tokenizer
    (the result's corpus line says which)."""
    from pos_geometry.cards.corpus import default_corpus
    from pos_geometry.hidden.corpus import NoTokenizerError

    text = default_corpus()
    if text is None:
        return decompose(None)
    try:
        return decompose(text)
    except NoTokenizerError:
        return decompose(None)


def hidden(
    model: str = typer.Argument(
        ..., metavar="MODEL_OR_PATH", help="Model-table name, hub repo id, local model folder or .gguf file."
    ),
    out: Path = typer.Option(..., "--out", help="Folder for metrics.json/csv, attention.json and figures."),
    corpus: Path | None = _CORPUS,
    layers: str | None = typer.Option(
        None, "--layers", help="Comma-separated layers, 0..n_layers (default: all)."
    ),
    seq_len: int | None = typer.Option(
        None, "--seq-len", help="Context length (default: the model's, ≤ 1024)."
    ),
    n_sequences: int | None = typer.Option(
        None, "--n-sequences", help="Contexts to read (random default: 64)."
    ),
    batch_size: int | None = typer.Option(
        None,
        "--batch-size",
        help="Contexts per forward pass (default: 1024 tokens per pass on a CPU, 16384 on an accelerator).",
    ),
    random_state: int = typer.Option(0, "--random-state", help="Seed of the random-token default."),
    attention: bool = typer.Option(
        True, "--attention/--no-attention", help="Also measure attention by offset."
    ),
    max_offset: int | None = typer.Option(
        None, "--max-offset", help="Offsets shown in the attention heatmaps."
    ),
    save_tables: bool = typer.Option(
        False, "--save-tables", help="Also write each layer's pos[t] as positional/layer_<i>.safetensors."
    ),
    format: str = typer.Option("html", "--format", help="Comma-separated: html,png,svg,pdf,jpeg,webp."),
    revision: str | None = REVISION,
    device: str = DEVICE,
    plotlyjs: str = PLOTLYJS,
) -> None:
    """Decompose each layer's hidden states into position, context and residual; attention by offset.

    Writes 'metrics.json' (the full result, provenance included) and 'metrics.csv' (one row per
    layer), 'attention.json', and the figures 'metrics', 'trajectory' (3D, one slider step
    per layer), 'attention_logit' and 'attention_probability'. One forward pass reads both: the
    hidden states, and the attention of the blocks among the chosen layers (layer i < n_layers is
    block i's input).
    """
    from pos_geometry._files import atomic_write
    from pos_geometry.hidden import hidden_positions
    from pos_geometry.hidden.reading import layer_line
    from pos_geometry.plotting import (
        plot_attention_offsets,
        plot_hidden_metrics,
        plot_hidden_trajectory,
        save_figure,
    )

    def run() -> None:
        from pos_geometry.plotting.export import check_plotlyjs

        check_plotlyjs(plotlyjs)
        if max_offset is not None and max_offset < 1:
            raise InvalidArgumentError(
                f"--max-offset must be a whole number ≥ 1 (the offsets the heatmaps show); got {max_offset}. "
                "Leave it out to show every offset read."
            )
        chosen = parse_layers(layers)
        fmts, folder = figure_output(format, out, create=False)
        with progress_bar() as bar:
            task = bar.add_task("hidden states" + (" and attention" if attention else ""), total=None)

            def decompose(tokens: Any) -> Any:
                return hidden_positions(
                    model, tokens, layers=chosen, batch_size=batch_size, device=device, attention=attention,
                    seq_len=seq_len, n_sequences=n_sequences, random_state=random_state, revision=revision,
                    progress=reporter(bar, task, "hidden states", "contexts"),
                )  # fmt: skip

            result = decompose(corpus) if corpus is not None else _default_corpus_run(decompose)
        att = result.attention
        folder.mkdir(parents=True, exist_ok=True)  # only now: a failed run leaves no empty folder
        written = [
            atomic_write(folder / "metrics.json", result.to_json(allow_nan=False, indent=1)),
            atomic_write(folder / "metrics.csv", _csv(result.metrics_rows())),
        ]
        figures = {"metrics": plot_hidden_metrics(result), "trajectory": plot_hidden_trajectory(result)}
        if att is not None:
            written.append(atomic_write(folder / "attention.json", att.to_json(allow_nan=False)))
            for value, name in (
                ("mean_logit", "attention_logit"),
                ("mean_probability", "attention_probability"),
            ):
                figures[name] = plot_attention_offsets(att, value=value, max_offset=max_offset)
        for name, fig in figures.items():
            written += [save_figure(fig, folder / f"{name}.{f}", format=f, plotlyjs=plotlyjs) for f in fmts]
        if save_tables:
            written += [
                pe.save(folder / "positional" / f"layer_{i}.safetensors")
                for i, pe in result.positional.items()
            ]
        console = out_console()
        console.print(one_line(f"{result.provenance.label}: {result.corpus}"), markup=False)
        for row in result.metrics_rows():
            console.print(layer_line(row, result.n_components, result.skip_first), markup=False)
        if att is not None:
            console.print(f"attention by offset: rotary per-plane usage {att.rotary_status}", markup=False)
        console.print(wrote(written, out), markup=False)

    guard(run)

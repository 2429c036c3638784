"""The figures of the reproduction, built from tables that were found (never from missing ones).

:func:`blog_figures` returns ``{file stem: (figure, caption)}``; the runner writes them and the
report links them. Every title says which table, which rows and how much variance is shown.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

import plotly.graph_objects as go

from pos_geometry.analysis.helix import HelixFit
from pos_geometry.analysis.periodicity import PeriodicityResult
from pos_geometry.analysis.periodicity import periodicity as run_periodicity
from pos_geometry.embedding import PositionalEmbedding, TokenEmbedding
from pos_geometry.plotting.columns import plot_columns
from pos_geometry.plotting.grid import plot_helix_grid
from pos_geometry.plotting.helix3d import block_means, plot_helix
from pos_geometry.plotting.similarity import plot_similarity, plot_similarity_by_offset
from pos_geometry.plotting.spectra import plot_spectrum
from pos_geometry.plotting.tokens import plot_token_positions
from pos_geometry.plotting.variance import plot_explained_variance

__all__ = ["Figures", "blog_figures"]

Figures = dict[str, tuple[go.Figure, str]]

_BLOCK = 32  # rows per block mean, as in the post's overlay


def _gpt2_figures(
    gpt2: PositionalEmbedding, fit: HelixFit | None, periodicity: PeriodicityResult | None
) -> Figures:
    means, at = block_means(gpt2, _BLOCK)
    figs: Figures = {
        "gpt2_helix": (
            plot_helix(
                gpt2,
                fit=fit if fit is not None else None,
                extra_points=means,
                extra_positions=at,
                extra_label=f"means of {_BLOCK} consecutive rows",
            ),
            "GPT-2 small's positional table in its top 3 principal components (raw weights, PCA centred over "
            f"positions), with the fitted helix and the means of {_BLOCK}-row blocks projected into the same basis.",
        ),
        "gpt2_helix_rows100-1023": (
            plot_helix(gpt2, window=(100, 1024)),
            "The truncated view: positions 100–1023, PCA fitted on those rows.",
        ),
        "gpt2_helix_rows1-99": (
            plot_helix(gpt2, window=(1, 100)),
            "The first-100 view: positions 1–99, PCA fitted on those rows.",
        ),
    }
    if periodicity is not None:
        figs["gpt2_similarity"] = (
            plot_similarity(periodicity),
            "Cosine similarity between every pair of positional rows (raw rows).",
        )
        figs["gpt2_spectrum"] = (
            plot_spectrum(periodicity),
            "Spectra of the mean similarity by offset and of the top principal components; significant periods "
            "(permutation test) are marked.",
        )
        figs["gpt2_columns"] = (
            plot_columns(gpt2, 6, result=periodicity),
            "The six columns best fitted by a single sinusoid, each with its fit (period and R² in the title).",
        )
    return figs


def blog_figures(
    *,
    gpt2: PositionalEmbedding | None,
    fit: HelixFit | None,
    periodicity: PeriodicityResult | None,
    family: Mapping[str, PositionalEmbedding | None],
    learned: Sequence[PositionalEmbedding],
    rotary: Sequence[PositionalEmbedding],
    reference: Sequence[PositionalEmbedding],
    tokens: TokenEmbedding | None,
) -> Figures:
    """Every figure the available tables allow.

    ``gpt2``: GPT-2 small (None when missing); ``fit``/``periodicity``: its helix fit and periodicity
    analysis; ``family``: the nine GPT-2s (None = missing); ``learned``: other learned tables for the
    comparison (GPT-1); ``rotary``: the rotary tables (Pythia, Mistral); ``reference``: the
    sinusoidal table; ``tokens``: GPT-2 small's token embedding, or None.
    """
    figs: Figures = _gpt2_figures(gpt2, fit, periodicity) if gpt2 is not None else {}
    found = [t for t in family.values() if t is not None]
    if found:
        missing = [name for name, t in family.items() if t is None]
        note = f" Missing here: {', '.join(missing)}." if missing else ""
        figs["gpt2_family_grid"] = (
            plot_helix_grid(found, cols=min(3, len(found)), title="The GPT-2 family's positional tables"),
            f"{len(found)} of the nine GPT-2s (four OpenAI sizes, five Stanford CRFM replicas), one scene each, "
            f"cameras linked.{note}",
        )
    compared = [*([gpt2] if gpt2 is not None else []), *learned, *rotary, *reference]
    if compared:
        labels = [f"{t.provenance.model_id} ({t.kind}, {t.n_positions}×{t.d_model})" for t in compared]
        figs["explained_variance"] = (
            plot_explained_variance(compared, labels=labels),
            "Cumulative explained variance of the top 10 principal components: learned tables (solid), rotary "
            "tables (dashed) and the sinusoidal table (dotted).",
        )
        # GPT-2's analysis is reused; the others need only their mean similarity (few surrogates)
        by_offset = [
            periodicity
            if t is gpt2 and periodicity is not None
            else run_periodicity(t, n_surrogates=19, alpha=0.05)
            for t in compared
        ]
        figs["similarity_by_offset"] = (
            plot_similarity_by_offset(by_offset, labels=labels),
            "Mean cosine similarity between positions p and p + Δ against the offset Δ, for each table.",
        )
    if rotary:
        figs["rotary_tables"] = (
            plot_helix_grid(
                list(rotary),
                cols=len(rotary),
                titles=[f"{t.provenance.model_id}: rotary table (no learned W_pos)" for t in rotary],
                title="Rotary models have no learned positional matrix: their exact rotary tables",
            ),
            "Pythia and Mistral shown as what they are: the cos/sin tables of their rotary embeddings, built from "
            "their configs. They are not learned matrices, and no 'W_pos' is plotted for them.",
        )
    if gpt2 is not None and tokens is not None:
        figs["gpt2_tokens"] = (
            plot_token_positions(gpt2, tokens),
            "Token embeddings (red) and positional rows (blue) in the positional table's top principal components.",
        )
    return figs

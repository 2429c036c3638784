"""The figures of the reproduction, built from tables that were found (never from missing ones).

:func:`blog_figures` returns ``{file stem: (figure, caption)}``; the runner writes them and the
report links them. Every figure is drawn from results fitted once upstream (an
:class:`~pos_geometry.analysis.pipeline.Analysis` per table, one PCA per truncation window): no
figure decomposes a table again. Titles are model names; a fitted helix is drawn only where the
verdict supports it, and rotary tables are shown as what they are.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

import numpy as np
import plotly.graph_objects as go

from pos_geometry.analysis.pca import PCAResult, pca
from pos_geometry.analysis.pipeline import Analysis
from pos_geometry.embedding import PositionalEmbedding, TokenEmbedding
from pos_geometry.plotting._style import model_label
from pos_geometry.plotting.columns import plot_columns
from pos_geometry.plotting.grid import plot_helix_grid
from pos_geometry.plotting.helix3d import block_means, helix_curve, plot_helix
from pos_geometry.plotting.similarity import plot_similarity, plot_similarity_by_offset
from pos_geometry.plotting.spectra import plot_spectrum
from pos_geometry.plotting.tokens import plot_token_positions
from pos_geometry.plotting.variance import plot_explained_variance

__all__ = ["Figures", "blog_figures"]

Figures = dict[str, tuple[go.Figure, str]]

_BLOCK = 32  # rows per block mean, as in the post's overlay


def _early_misfit(table: PositionalEmbedding, analysis: Analysis) -> str:
    """A sentence on the leading positions the fitted helix misses (distance to the fit > 2× the median
    distance, for most positions up to the last such one in the first half), or ``""`` when there are none."""
    fit = analysis.helix
    if fit is None or fit.period is None:
        return ""
    a, b = analysis.window
    coords = np.asarray(analysis.pca.transform(table)[:, :3], dtype=np.float64)
    dist = np.linalg.norm(coords - helix_curve(fit, np.arange(a, b)), axis=1)
    far = dist > 2 * np.median(dist)
    half = far[: (b - a) // 2]
    if not half.any():
        return ""
    last = int(np.nonzero(half)[0].max())
    if far[: last + 1].mean() < 0.5:
        return ""
    return (
        f" The fit misses positions {a}–{a + last} (distance to the fit more than twice the median, up to "
        f"{float(dist[: last + 1].max() / np.median(dist)):.0f}×): they curl into a tighter loop than one helix "
        "with a linear drift allows; the rows 100–1023 view leaves them out."
    )


def _gpt2_figures(gpt2: PositionalEmbedding, analysis: Analysis, windows: Mapping[str, PCAResult]) -> Figures:
    means, at = block_means(gpt2, _BLOCK)
    fit = analysis.helix
    drawn = fit is not None and fit.verdict in ("helix", "untested")
    figs: Figures = {
        "gpt2_helix": (
            plot_helix(
                analysis.pca,
                fit=fit,
                extra_points=means,
                extra_positions=at,
                extra_label=f"means of {_BLOCK} consecutive rows",
                title="GPT-2 small: positional embeddings in PC1–3",
            ),
            "GPT-2 small's positional table in its top 3 principal components (raw weights, PCA centred over "
            + ("positions), with the fitted helix" if drawn else "positions; no helix is drawn: "
               + (fit.reason if fit is not None else analysis.notes.get("helix", "not fitted")))
            + f", and the means of {_BLOCK}-row blocks projected into the same basis."
            + (_early_misfit(gpt2, analysis) if drawn else ""),
        ),
    }  # fmt: skip
    for name, stem, caption in (
        ("rows 100–1023", "gpt2_helix_rows100-1023", "The truncated view: positions 100–1023, PCA fitted on those rows."),
        ("rows 1–99", "gpt2_helix_rows1-99", "The first-100 view: positions 1–99, PCA fitted on those rows."),
    ):  # fmt: skip
        if name in windows:
            figs[stem] = (plot_helix(windows[name], title=f"GPT-2 small, {name}: PC1–3"), caption)
    per = analysis.periodicity
    if per is not None:
        figs["gpt2_similarity"] = (
            plot_similarity(per, title="GPT-2 small: cosine similarity between positions"),
            "Cosine similarity between every pair of positional rows (raw rows).",
        )
        figs["gpt2_spectrum"] = (
            plot_spectrum(
                per, title="GPT-2 small: spectra against red noise, random walks and smooth GP curves"
            ),
            "Spectra of the mean similarity by offset and of the top principal components, each over the "
            "background (AR(1)-plus-white or running median, raised where a null family sits higher); periods "
            "that beat red noise, random walks of its steps and smooth GP curves are marked.",
        )
        figs["gpt2_columns"] = (
            plot_columns(gpt2, 6, result=per),
            "The six columns best fitted by a single sinusoid, each with its fit (period and R² in the title).",
        )
    return figs


def _slow_planes(table: PositionalEmbedding, analysis: Analysis) -> tuple[PCAResult, str] | None:
    """PC1–3 of a rotary table's slow rotation planes (those turning at most 4 times over the table, at least
    the two slowest), with a subplot title; None when the table is not identified as a formula. PCA of the
    whole table is arbitrary here (every plane holds the same variance) and its fast planes scatter the points."""
    ident = analysis.identity
    if ident is None or not ident.is_formula or ident.frequencies is None:
        return None
    n = analysis.n_positions
    periods = 2 * np.pi / np.asarray(ident.frequencies, dtype=np.float64)
    order = np.argsort(-periods)
    keep = [int(i) for i in order if periods[i] >= n / 4] or [int(i) for i in order[:2]]
    keep = keep if len(keep) >= 2 else [int(i) for i in order[:2]]
    sines, cosines = ident.pair_columns()
    cols = sorted(int(c) for i in keep for c in (sines[i], cosines[i]))
    shortest = float(periods[keep].min())
    sub = PositionalEmbedding(
        table.matrix[:, cols],
        table.provenance.with_processing(
            f"columns {cols}: the {len(keep)} rotation planes of period >= {shortest:.0f}"
        ),
    )
    res = pca(sub, 3, solver="exact")
    share = float(res.explained_variance_ratio_[:3].sum())
    return res, (
        f"{model_label(table.provenance)} (rotary table): its {len(keep)} slowest planes (periods ≥ {shortest:.0f}) · "
        f"PC1–3: {share:.0%}"
    )


def blog_figures(
    *,
    gpt2: tuple[PositionalEmbedding, Analysis, Mapping[str, PCAResult]] | None,
    family: Mapping[str, Analysis | None],
    learned: Sequence[Analysis],
    rotary: Sequence[Analysis],
    reference: Sequence[Analysis],
    tokens: TokenEmbedding | None,
    rotary_tables: Sequence[PositionalEmbedding] | None = None,
) -> Figures:
    """Every figure the available tables allow, drawn from results fitted upstream.

    ``gpt2``: GPT-2 small's table, its :class:`Analysis` and its truncation-window PCAs (None when
    missing); ``family``: the nine GPT-2s' analyses (None = missing); ``learned``: other learned
    tables for the comparison (GPT-1); ``rotary``: the rotary tables (Pythia, Mistral);
    ``reference``: the sinusoidal table; ``tokens``: GPT-2 small's token embedding, or None;
    ``rotary_tables``: the rotary tables themselves, in the order of ``rotary`` (their slow planes are
    drawn; without them, the whole tables' PCA). The
    comparison analyses need a PCA (and a periodicity result for the similarity-by-offset figure).
    """
    figs: Figures = _gpt2_figures(*gpt2) if gpt2 is not None else {}
    found = [a for a in family.values() if a is not None]
    if len(found) >= 2:  # a grid of one would repeat the helix figure
        missing = [name for name, a in family.items() if a is None]
        note = f" Missing here: {', '.join(missing)}." if missing else ""
        figs["gpt2_family_grid"] = (
            plot_helix_grid(
                [a.pca for a in found],
                cols=min(3, len(found)),
                title="The GPT-2 family's positional tables in PC1–3",
            ),
            f"{len(found)} of the nine GPT-2s (four OpenAI sizes, five Stanford CRFM replicas), one scene each, "
            f"cameras linked.{note}",
        )
    compared = [*([gpt2[1]] if gpt2 is not None else []), *learned, *rotary, *reference]
    if compared:
        labels = [
            f"{model_label(a.provenance)} ({a.provenance.kind}, {a.n_positions}×{a.d_model})"
            for a in compared
        ]
        figs["explained_variance"] = (
            plot_explained_variance(
                [a.pca for a in compared], labels=labels, title="Cumulative explained variance"
            ),
            "Cumulative explained variance of the top 10 principal components: learned tables (solid), rotary "
            "tables (dashed) and the sinusoidal table (dotted).",
        )
        with_offsets = [
            (a, lab) for a, lab in zip(compared, labels, strict=True) if a.periodicity is not None
        ]
        figs["similarity_by_offset"] = (
            plot_similarity_by_offset(
                [a.periodicity for a, _ in with_offsets],
                labels=[lab for _, lab in with_offsets],
                title="Mean cosine similarity by offset",
            ),
            "Mean cosine similarity between positions p and p + Δ against the offset Δ, for each table.",
        )
    if rotary:
        slow = [
            _slow_planes(t, a) if t is not None else None
            for t, a in zip(rotary_tables or [None] * len(rotary), rotary, strict=True)
        ]
        panels = [s if s is not None else (a.pca, None) for s, a in zip(slow, rotary, strict=True)]
        titles = [
            t if t is not None else f"{model_label(a.provenance)} (rotary table, whole)"
            for (_, t), a in zip(panels, rotary, strict=True)
        ]
        figs["rotary_tables"] = (
            plot_helix_grid(
                [p for p, _ in panels],
                cols=len(rotary),
                titles=titles,
                title="Rotary models have no learned positional matrix: their exact rotary tables",
            ),
            "Pythia and Mistral shown as what they are: the cos/sin tables of their rotary embeddings, built from "
            "their configs. They are not learned matrices, no 'W_pos' is plotted for them, and no helix is "
            "fitted to them. Each panel shows the PCA of the table's slow rotation planes (those turning at most "
            "4 times over the window): every plane of a rotary table holds the same variance, so PCA of the whole "
            "table mixes planes arbitrarily, and its fast planes scatter consecutive positions into a cloud.",
        )
    if gpt2 is not None and tokens is not None:
        figs["gpt2_tokens"] = (
            plot_token_positions(gpt2[1].pca, tokens),
            "Token embeddings (red) and positional rows (blue) in the positional table's top principal components.",
        )
    return figs

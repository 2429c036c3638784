"""The standard figures of one positional table: what ``pos-geometry plot`` and ``analyze`` print.

:func:`model_figures` runs one PCA (centred over positions) and fits the helix in its top
three components; :class:`ModelFigures` holds the numbers with the table's provenance and
renders them as a one-line summary or as a flat row for JSON/CSV.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np

from pos_geometry.analysis._inputs import parse_window
from pos_geometry.analysis.helix import HelixFit, fit_helix
from pos_geometry.analysis.pca import pca
from pos_geometry.embedding import PositionalEmbedding, Provenance

__all__ = ["HELIX_MAX_POSITIONS", "ModelFigures", "model_figures"]

HELIX_MAX_POSITIONS = 4096
"""Windows longer than this get no helix fit by default (its frequency search grows as n²)."""


@dataclass(frozen=True)
class ModelFigures:
    """The figures of one table over one window of positions.

    ``top1``/``top3``/``top10``: cumulative explained-variance ratios (PCA centred over the
    window's positions; ``top10`` is None when fewer than 10 components exist).
    ``stable_rank``: ``‖A‖_F² / ‖A‖₂²`` of the centred window. ``helix``: the fit in the top
    three components, or None with ``helix_note`` saying why.
    """

    provenance: Provenance
    n_positions: int
    d_model: int
    window: tuple[int, int]
    top1: float
    top3: float | None
    top10: float | None
    stable_rank: float
    helix: HelixFit | None
    helix_note: str = ""

    @property
    def label(self) -> str:
        return self.provenance.label

    def row(self) -> dict[str, Any]:
        """A flat, JSON-ready row (the columns of ``pos-geometry analyze``)."""
        h = self.helix
        p = self.provenance
        return {
            "model": p.model_id,
            "kind": p.kind,
            "n_positions": self.n_positions,
            "d_model": self.d_model,
            "window": f"{self.window[0]}:{self.window[1]}",
            "top1": self.top1,
            "top3": self.top3,
            "top10": self.top10,
            "stable_rank": self.stable_rank,
            "helix_shape": h.shape if h else None,
            "helix_verdict": h.verdict if h else None,
            "helix_reason": h.reason if h else self.helix_note or None,
            "helix_p_value": h.p_value if h else None,
            "helix_nulls": ",".join(t.null for t in h.tests) if h else None,
            "helix_turns": float(h.turns[0]) if h and h.period is not None else None,
            "helix_period": h.period if h else None,
            "helix_r2": h.r2 if h and h.period is not None else None,
            "revision": p.revision,
            "source": p.source,
            "original_dtype": p.original_dtype,
            "row_offset": p.row_offset,
            "processing": list(p.processing),
        }

    def line(self) -> str:
        """One line: ``name: 1024×768 learned, rows 0–1023, top-3 variance 90.39%, helix 1.97 turns ...``."""
        a, b = self.window
        top3 = f"{100 * self.top3:.2f}%" if self.top3 is not None else "n/a (fewer than 3 components)"
        text = (
            f"{self.label}: {self.n_positions}×{self.d_model} {self.provenance.kind}, rows {a}–{b - 1}, "
            f"top-3 variance {top3}"
        )
        h = self.helix
        if h is None:
            return text + (f"; helix {self.helix_note}" if self.helix_note else "")
        if h.period is None:
            return text + f"; helix: does not apply ({h.reason})"
        p = (
            f", p = {h.p_value:.3g} against {' and '.join(t.null.replace('_', ' ') for t in h.tests)}"
            if h.tests
            else ""
        )
        return text + (
            f", helix verdict: {h.verdict}{p}; {float(h.turns[0]):.2f} turns of period {h.period:.1f}, "
            f"R² {h.r2:.3f} (best shape by BIC: {h.shape})"
        )


def model_figures(
    pe: PositionalEmbedding,
    *,
    window: Any = None,
    helix_max_positions: int = HELIX_MAX_POSITIONS,
) -> ModelFigures:
    """PCA (top 10, centred over positions) and the top-3 helix fit of ``pe`` over ``window``.

    The helix is fitted on the same PCA (no second decomposition). Windows longer than
    ``helix_max_positions`` are not fitted (the note says so and how to narrow the window).
    """
    start, stop = parse_window(window, pe.n_positions)
    n = stop - start
    k = min(10, n, pe.d_model)
    res = pca(pe, k, window=(start, stop))
    ratios = np.cumsum(res.explained_variance_ratio_)
    helix, note = None, ""
    if k < 3 or n < 8:
        note = "not fitted: needs at least 3 components and 8 positions"
    elif n > helix_max_positions:
        note = f"not fitted: {n} positions > {helix_max_positions}; pass a window such as 0:{helix_max_positions}"
    else:
        helix = fit_helix(res, n_components=3)
    return ModelFigures(
        provenance=res.provenance,
        n_positions=pe.n_positions,
        d_model=pe.d_model,
        window=(start, stop),
        top1=float(ratios[0]),
        top3=float(ratios[2]) if k >= 3 else None,
        top10=float(ratios[9]) if k >= 10 else None,
        stable_rank=float(res.stable_rank_),
        helix=helix,
        helix_note=note,
    )

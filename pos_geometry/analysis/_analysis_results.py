"""The result of :func:`~pos_geometry.analysis.pipeline.analyze`: :class:`Analysis`, one decomposition and the analyses on it."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from pos_geometry.analysis._results import Result
from pos_geometry.analysis.helix import HelixFit
from pos_geometry.analysis.identify import Identification
from pos_geometry.analysis.pca import PCAResult
from pos_geometry.analysis.periodicity import PeriodicityResult
from pos_geometry.analysis.recurrence import RecurrenceFit
from pos_geometry.embedding import Provenance

__all__ = ["ANALYSES", "Analysis"]

ANALYSES = ("helix", "periodicity", "recurrence")
"""What :func:`analyze` can run on top of the PCA (which always runs)."""


_NULL_WORDS = {"red_noise": "red noise", "step_walk": "random walks of the table's steps"}


def _period_reason(per: PeriodicityResult) -> str:
    """Why the periodicity column says what it says, in one sentence."""
    nulls = " and ".join(_NULL_WORDS.get(n, n) for n in per.null.split(" and "))
    if per.dominant_periods:
        top = per.dominant_periods[0]
        return f"{top.label}'s period {top.period:.4g} beats {nulls} (p = {top.p_value:.3g})"
    if not per.peaks:
        return "no spectral peak within the band searched"
    best = min(per.peaks, key=lambda p: p.p_value)
    if best.status != "period":
        return f"the strongest peak ({best.label}) does not apply: {best.reason}"
    return (
        f"no peak beats {nulls} at α = {per.alpha:g}; the strongest, {best.label} "
        f"{best.period:.4g}, has p = {best.p_value:.3g}"
    )


def _model_width(provenance: Provenance, columns: int) -> int:
    """The model's hidden size when its config says it (a rotary table has fewer columns), else the table's."""
    config = provenance.config_dict
    for key in ("hidden_size", "n_embd", "d_model"):
        value = config.get(key)
        if isinstance(value, int) and not isinstance(value, bool) and value > 0:
            return value
    return columns


@dataclass(frozen=True, repr=False)
class Analysis(Result):
    """Every analysis of one table over one window, fitted on one PCA.

    Attributes:
        provenance: the table's provenance with the window and centring recorded.
        window: ``(start, stop)`` positions analysed (stop exclusive).
        n_positions, d_model: the whole table's shape (before the window).
        pca: the one decomposition: exact, centred over the window's positions, with
            ``min(max(n_components, 256 if recurrence ran), n, d)`` components.
        helix: the helix fit in the top 3 components with its nulls, or None (see ``notes``).
        periodicity: similarity-by-offset, spectra and red-noise-tested periods, or None.
        recurrence: the linear-recurrence fit in the same centred PCA basis, or None.
        notes: ``{analysis: why it was not run}`` for each analysis that is None.
        identity: :func:`~pos_geometry.analysis.identify.identify` of the window: whether the table is a
            sinusoidal or rotary formula (then no helix is fitted, whatever kind it was loaded as).
    """

    provenance: Provenance
    window: tuple[int, int]
    n_positions: int
    d_model: int
    pca: PCAResult
    helix: HelixFit | None
    periodicity: PeriodicityResult | None
    recurrence: RecurrenceFit | None
    notes: Mapping[str, str] = field(default_factory=dict)
    identity: Identification | None = None
    helices: tuple[HelixFit, ...] = ()
    """When the recurrence finds several rotations: one helix fit per rotation, in its own plane with the trend
    axis of the rest, each with its own nulls (:mod:`~pos_geometry.analysis.helix_planes`); else empty."""

    # --- the headline numbers ---------------------------------------------------------------
    def _cumulative(self, k: int) -> float | None:
        ratios = self.pca.explained_variance_ratio_
        return float(ratios[:k].sum()) if len(ratios) >= k else None

    @property
    def top1(self) -> float:
        """Explained-variance ratio of PC1."""
        return float(self.pca.explained_variance_ratio_[0])

    @property
    def top3(self) -> float | None:
        """Cumulative ratio of PC1–3 (None with fewer than 3 components)."""
        return self._cumulative(3)

    @property
    def top10(self) -> float | None:
        """Cumulative ratio of PC1–10 (None with fewer than 10 components)."""
        return self._cumulative(10)

    @property
    def stable_rank(self) -> float:
        """``‖A‖_F² / ‖A‖₂²`` of the centred window."""
        return float(self.pca.stable_rank_)

    @property
    def label(self) -> str:
        return self.provenance.label

    # --- renderings -------------------------------------------------------------------------
    def row(self) -> dict[str, Any]:
        """A flat, JSON-ready row (the columns of ``pos-geometry analyze --json``/``--csv``)."""
        h, per, rec, p = self.helix, self.periodicity, self.recurrence, self.provenance
        fitted = h is not None and h.period is not None
        sig = per.dominant_periods if per is not None else ()
        return {
            "model": p.model_id,
            "kind": p.kind,
            "n_positions": self.n_positions,
            "n_columns": self.d_model,  # the table's columns (a rotary table: 2 per rotation plane)
            "d_model": _model_width(p, self.d_model),
            "window": f"{self.window[0]}:{self.window[1]}",
            "top1": self.top1,
            "top3": self.top3,
            "top10": self.top10,
            "stable_rank": self.stable_rank,
            "helix_shape": h.shape if h else None,
            "helix_verdict": h.verdict if h else "not run",
            "helix_reason": h.reason if h else self.notes.get("helix"),
            "helix_p_value": h.p_value if h else None,
            "helix_nulls": ",".join(t.null for t in h.tests) if h else None,
            "helix_turns": float(h.turns[0]) if fitted else None,
            "helix_period": h.period if fitted else None,
            "helix_r2": h.r2 if fitted else None,
            "period": sig[0].period if sig else None,
            "period_series": sig[0].label if sig else None,
            "period_p_value": sig[0].p_value if sig else None,
            "period_status": ("significant" if sig else "none significant") if per else "not run",
            "period_reason": _period_reason(per) if per is not None else self.notes.get("periodicity"),
            "recurrence_status": rec.status if rec is not None else "not run",
            "recurrence_reason": rec.reason if rec is not None else self.notes.get("recurrence"),
            "recurrence_rotation_pairs": len(rec.rotation_pairs()) if rec is not None else None,
            "outlier_rows": self.notes.get("outlier_rows"),
            "identified_kind": self.identity.kind if self.identity else None,
            "identified_layout": self.identity.layout if self.identity else None,
            "identified_base": self.identity.base if self.identity else None,
            "revision": p.revision,
            "source": p.source,
            "original_dtype": p.original_dtype,
            "row_offset": p.row_offset,
            "processing": list(p.processing),
        }

    def line(self) -> str:
        """One line: ``gpt2: 1024×768 learned, rows 0–1023, top-3 variance 90.39%, helix verdict: ...``."""
        a, b = self.window
        top3 = f"{100 * self.top3:.2f}%" if self.top3 is not None else "n/a (fewer than 3 components)"
        text = (
            f"{self.label}: {self.n_positions}×{self.d_model} {self.provenance.kind}, rows {a}–{b - 1}, "
            f"top-3 variance {top3}"
        )
        h = self.helix
        if h is None:
            note = self.notes.get("helix")
            return text + (f"; helix {note}" if note else "")
        if h.period is None:
            return text + f"; helix: does not apply ({h.reason})"
        from pos_geometry.analysis.nulls.monte_carlo import NULL_NAMES

        against = " and ".join(NULL_NAMES.get(t.null, t.null_description) for t in h.tests)
        p = f", p = {h.p_value:.3g} against {against}"
        return text + (
            f", helix verdict: {h.verdict}{p if h.tests else ''}; {float(h.turns[0]):.2f} turns of period "
            f"{h.period:.1f}, R² {h.r2:.3f} (best shape by BIC: {h.shape})"
        )

    def summary_rows(self) -> list[tuple[str, str]]:
        rows = [
            ("window", f"rows {self.window[0]}–{self.window[1] - 1} of {self.n_positions}"),
            *([("outlier rows", self.notes["outlier_rows"])] if "outlier_rows" in self.notes else []),
            ("PCA", f"{self.pca.n_components_} components, exact, centred over positions"),
            ("top-1 / top-3 / top-10", " / ".join("–" if v is None else f"{v:.4f}" for v in
                                                  (self.top1, self.top3, self.top10))),
            ("stable rank", f"{self.stable_rank:.3f}"),
        ]  # fmt: skip
        if self.identity is not None:
            rows.append(
                ("identified as", self.identity.reason if self.identity.is_formula else self.identity.kind)
            )
        h, per, rec = self.helix, self.periodicity, self.recurrence
        done = {
            "helix": f"{h.verdict} ({h.reason})" if h else "",
            "periodicity": ", ".join(
                f"{p.label} {p.period:.4g} (p={p.p_value:.3g})"
                + (f", also in {', '.join(p.also_in)}" if p.also_in else "")
                for p in per.dominant_periods
            )
            or "no significant period"
            if per
            else "",
            "recurrence": f"{rec.status}: {len(rec.rotation_pairs())} rotation pair(s)" if rec else "",
        }
        for name in ANALYSES:
            text = done[name] if getattr(self, name) is not None else self.notes.get(name, "not requested")
            rows.append((name, text))
            if name == "helix" and self.helices:
                rows.append((
                    "helices (one per rotation plane)",
                    "; ".join(
                        f"period {h.periods[0]:.4g}: {h.verdict} (p = {h.p_value:.3g})" if h.periods.size else h.verdict
                        for h in self.helices
                    ),
                ))  # fmt: skip
        return rows

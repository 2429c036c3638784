"""``analyze``: every analysis of one table over one window, on one decomposition.

scikit-learn fits once and passes the fitted state down; so does this. :func:`analyze` runs one
exact PCA of the window (centred over positions, enough components for every analysis) and hands
that :class:`~pos_geometry.analysis.pca.PCAResult` to :func:`~pos_geometry.analysis.helix.fit_helix`,
:func:`~pos_geometry.analysis.periodicity.periodicity` and
:func:`~pos_geometry.analysis.recurrence.fit_recurrence`. The frozen :class:`Analysis` it returns
is what the CLI prints, what the reproduction judges and what the plots draw
(``plot_helix(a.pca, fit=a.helix)``): nothing downstream decomposes the table again.

An analysis that cannot run on this table is ``None`` with the reason in ``Analysis.notes``;
analytic tables (rotary, sinusoidal) get no helix fit, since their shape is fixed by their
frequencies and a "helix" verdict would describe the formula, not a model.
"""

from __future__ import annotations

import warnings
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from pos_geometry import _progress
from pos_geometry._limits import check_positions
from pos_geometry._progress import Progress
from pos_geometry._threads import cpu_workers, parallel_map
from pos_geometry.analysis._inputs import Window, check_int, parse_window
from pos_geometry.analysis._results import Result
from pos_geometry.analysis.costs import COSTLY_POSITIONS, CostWarning, cost_note
from pos_geometry.analysis.helix import HelixFit, fit_helix
from pos_geometry.analysis.identify import Identification, identify
from pos_geometry.analysis.nulls.basis import _decomposition, check_null_method
from pos_geometry.analysis.nulls.helix_test import HELIX_NULLS
from pos_geometry.analysis.nulls.monte_carlo import check_sequential
from pos_geometry.analysis.pca import PCAResult, pca
from pos_geometry.analysis.periodicity import PERIODICITY_NULLS, PeriodicityResult, periodicity
from pos_geometry.analysis.recurrence import AUTO_CAP, RECURRENCE_NULLS, RecurrenceFit, fit_recurrence
from pos_geometry.embedding import Provenance
from pos_geometry.errors import InvalidArgumentError

_RECURRENCE_SURROGATES = 99  # fit_recurrence's default

__all__ = [
    "ANALYSES",
    "ANALYTIC_KINDS",
    "COSTLY_POSITIONS",
    "CostWarning",
    "HELIX_MAX_POSITIONS",
    "Analysis",
    "analyze",
]

ANALYSES = ("helix", "periodicity", "recurrence")
"""What :func:`analyze` can run on top of the PCA (which always runs)."""

ANALYTIC_KINDS = ("rotary", "sinusoidal")
"""Tables computed from a formula: shown as what they are, never fitted with a helix."""

HELIX_MAX_POSITIONS = 4096
"""Windows longer than this get no helix fit by default (its frequency search grows as n²)."""

_MIN_PERIODICITY_POSITIONS = 8


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
        p = f", p = {h.p_value:.3g} against {' and '.join(t.null.replace('_', ' ') for t in h.tests)}"
        return text + (
            f", helix verdict: {h.verdict}{p if h.tests else ''}; {float(h.turns[0]):.2f} turns of period "
            f"{h.period:.1f}, R² {h.r2:.3f} (best shape by BIC: {h.shape})"
        )

    def summary_rows(self) -> list[tuple[str, str]]:
        rows = [
            ("window", f"rows {self.window[0]}–{self.window[1] - 1} of {self.n_positions}"),
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
        return rows


def _check_analyses(analyses: Sequence[str] | str) -> tuple[str, ...]:
    chosen = (analyses,) if isinstance(analyses, str) else tuple(analyses)
    bad = [a for a in chosen if a not in ANALYSES]
    if bad:
        raise InvalidArgumentError(
            f"analyses must be a subset of {ANALYSES}; got {chosen!r} ({', '.join(map(repr, bad))} unknown)."
        )
    return chosen


def analyze(
    x: Any,
    *,
    window: Window = None,
    analyses: Sequence[str] = ANALYSES,
    n_components: int = 10,
    n_surrogates: int = 199,
    alpha: float = 0.01,
    random_state: int = 0,
    helix_max_positions: int = HELIX_MAX_POSITIONS,
    null_method: str = "fast",
    sequential: bool = True,
    progress: Progress = None,
) -> Analysis:
    """PCA, helix, periodicity and recurrence of one ``(n, d)`` table over ``window``, on one decomposition.

    Args:
        x: a ``PositionalEmbedding`` (or a ``(n, d)`` tensor/array).
        window: ``(start, stop)`` positions analysed (slice semantics; default all).
        analyses: which of :data:`ANALYSES` to run on top of the PCA.
        n_components: principal components kept at least (more when the recurrence needs them).
        n_surrogates, alpha, random_state: the nulls of the helix and periodicity tests (the
            recurrence keeps its own defaults: 99 surrogates at α = 0.05).
        helix_max_positions: longer windows get no helix fit (the note says how to narrow it).
        null_method: ``"fast"`` (every null's surrogates drawn and decomposed in the table's leading
            principal subspace, 99.9% of its variance) or ``"exact"`` (whole tables, the reference; the
            same nulls, see :mod:`pos_geometry.analysis.nulls.basis`).
        sequential: the helix and recurrence nulls stop once 10 of their surrogates reach the table's
            statistic (Besag & Clifford: the decision all ``n_surrogates`` would give, at a fraction of the
            cost where the null explains the table); False draws them all. The periodicity test always
            draws all: its background is made of every surrogate.
        progress: a bar of the surrogates done, on stderr; None shows it in a terminal or Jupyter,
            True/False always/never; a callable is called with ``(done, total)`` instead.

    Returns:
        a frozen :class:`Analysis`; each analysis that cannot run is None with its reason in ``notes``.
    """
    chosen = _check_analyses(analyses)
    n_components = check_int("n_components", n_components, 1)
    helix_max_positions = check_int("helix_max_positions", helix_max_positions, 1)
    # the shape only: pca() below converts and checks the table (done once, not twice)
    shape = tuple(int(v) for v in getattr(x, "shape", ()))
    if isinstance(x, list | tuple) or len(shape) != 2:
        what = f"a list of {len(x)}" if isinstance(x, list | tuple) else f"shape {shape}"
        raise InvalidArgumentError(
            f"analyze takes one table (n_positions, d_model); got {what}. "
            "Call it once per table: [analyze(t) for t in tables]."
        )
    n_total, d = shape
    start, stop = parse_window(window, n_total)
    n = stop - start
    if "periodicity" in chosen:  # before any decomposition: the similarity matrix is n × n
        check_positions("analyze's periodicity", n)
    if n > COSTLY_POSITIONS and chosen:
        warnings.warn(cost_note(n), CostWarning, stacklevel=2)
    want = max(n_components, AUTO_CAP if "recurrence" in chosen else 0)
    k = min(want, n, d)
    res = pca(x, k, window=(start, stop), solver="exact")
    kind = res.provenance.kind
    notes: dict[str, str] = {}
    null_method = check_null_method(null_method)
    sequential = check_sequential(sequential)
    nulls = {
        "n_surrogates": n_surrogates,
        "alpha": alpha,
        "random_state": random_state,
        "null_method": null_method,
    }

    total = (len(HELIX_NULLS) * n_surrogates * ("helix" in chosen)
             + len(PERIODICITY_NULLS) * n_surrogates * ("periodicity" in chosen)
             + len(RECURRENCE_NULLS) * _RECURRENCE_SURROGATES * ("recurrence" in chosen))  # fmt: skip
    identity = identify(x, window=(start, stop))
    jobs: dict[str, Callable[[], Any]] = {}
    if "helix" in chosen:
        if kind in ANALYTIC_KINDS:
            notes["helix"] = (
                f"not fitted: a {kind} table is computed from a formula (no learned positions), so its shape "
                "is fixed by its frequencies"
            )
        elif identity.is_formula:
            notes["helix"] = (
                f"not fitted: loaded as {kind}, but it is {identity.reason}; its shape is fixed by its "
                "frequencies"
            )
        elif k < 3 or n < 8:
            notes["helix"] = "not fitted: needs at least 3 components and 8 positions"
        elif n > helix_max_positions:
            notes["helix"] = (
                f"not fitted: {n} positions > {helix_max_positions}; pass a window such as "
                f"0:{helix_max_positions}"
            )
        else:
            jobs["helix"] = lambda: fit_helix(res, n_components=3, sequential=sequential, **nulls)
    if "periodicity" in chosen:
        if n < _MIN_PERIODICITY_POSITIONS:
            notes["periodicity"] = f"not run: needs at least {_MIN_PERIODICITY_POSITIONS} positions"
        else:
            jobs["periodicity"] = lambda: periodicity(res, n_components=min(3, k), **nulls)
    if "recurrence" in chosen:
        if n < 6 or k < 2:
            notes["recurrence"] = "not run: needs at least 6 positions and 2 components"
        else:
            jobs["recurrence"] = lambda: fit_recurrence(
                res, "auto", affine=True, random_state=random_state, null_method=null_method,
                sequential=sequential,
            )  # fmt: skip
    with _progress.task(f"nulls of {res.provenance.model_id}", total, show=progress):
        done = _run_side_by_side(jobs, res)
    return Analysis(
        provenance=res.provenance,
        window=(start, stop),
        n_positions=n_total,
        d_model=d,
        pca=res,
        helix=done.get("helix"),
        periodicity=done.get("periodicity"),
        recurrence=done.get("recurrence"),
        notes=notes,
        identity=identity,
    )


def _run_side_by_side(jobs: dict[str, Callable[[], Any]], res: PCAResult) -> dict[str, Any]:
    """``{name: job()}``: the analyses are independent given the PCA, so on the CPU they run side by side on
    :func:`~pos_geometry._threads.cpu_workers` threads, each kernel single-threaded (torch's own threads meet
    at a barrier in every one of the nulls' many small kernels and gain little); a thread whose analysis is
    done takes chunks of the others' nulls. The decomposition their nulls share is computed first, here, so
    that every thread reuses it (:mod:`pos_geometry.analysis.nulls.basis`). The results do not depend on the
    number of threads."""
    rows = res.fitted_rows
    workers = cpu_workers(rows.device) if rows is not None else 1
    if workers > 1 and len(jobs) > 1:
        _decomposition(rows)
    names = list(jobs)
    return dict(zip(names, parallel_map(lambda name: jobs[name](), names, workers), strict=True))


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

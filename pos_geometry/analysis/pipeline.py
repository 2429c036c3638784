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

import dataclasses
import warnings
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

from pos_geometry import _progress
from pos_geometry._limits import check_positions
from pos_geometry._progress import Progress
from pos_geometry._threads import cpu_workers, parallel_map
from pos_geometry.analysis._analysis_results import ANALYSES, Analysis
from pos_geometry.analysis._inputs import Window, check_int, parse_window
from pos_geometry.analysis.costs import COSTLY_POSITIONS, CostWarning, cost_note
from pos_geometry.analysis.helix import fit_helix
from pos_geometry.analysis.helix_planes import fit_helices
from pos_geometry.analysis.identify import identify, identify_in_steps
from pos_geometry.analysis.leverage import REPAIR_ROUNDS, held_words, repaired_table
from pos_geometry.analysis.nulls.basis import _decomposition, check_null_method, remember
from pos_geometry.analysis.nulls.helix_test import HELIX_NULLS
from pos_geometry.analysis.nulls.monte_carlo import check_sequential
from pos_geometry.analysis.pca import PCAResult, pca
from pos_geometry.analysis.periodicity import PERIODICITY_NULLS, periodicity
from pos_geometry.analysis.recurrence import AUTO_CAP, RECURRENCE_NULLS, fit_recurrence
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


ANALYTIC_KINDS = ("rotary", "sinusoidal")
"""Tables computed from a formula: shown as what they are, never fitted with a helix."""

HELIX_MAX_POSITIONS = 4096
"""Windows longer than this get no helix fit by default (its frequency search grows as n²)."""

_MIN_PERIODICITY_POSITIONS = 8


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
    outlier_rows: str = "repair",
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
        outlier_rows: when a few rows hold most of a leading component's variance
            (:mod:`pos_geometry.analysis.leverage`): ``"repair"`` (the default) replaces them by the mean of
            their nearest ordinary neighbours before the one PCA, and the provenance and ``notes["outlier_rows"]``
            say which; ``"keep"`` analyses them as they are, and the note warns.

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
    notes: dict[str, str] = {}
    if outlier_rows not in ("repair", "keep"):
        raise InvalidArgumentError(f"outlier_rows must be 'repair' or 'keep'; got {outlier_rows!r}.")
    if k >= 3 and n >= 8:
        x, res, note = _outlier_rows(x, res, outlier_rows)
        if note:
            notes["outlier_rows"] = note
    kind = res.provenance.kind
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
    identity = _identity_beside_nulls(x, (start, stop), res, bool(chosen))
    jobs: dict[str, Callable[[], Any]] = {}
    if callable(identity):  # no formula: its linear-image test runs beside the nulls
        jobs["identity"] = identity
    if "helix" in chosen:
        if kind in ANALYTIC_KINDS:
            notes["helix"] = (
                f"not fitted: a {kind} table is computed from a formula (no learned positions), so its shape "
                "is fixed by its frequencies"
            )
        elif not callable(identity) and identity.is_formula:
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
    helices = ()
    if done.get("helix") is not None:
        helices = fit_helices(res, done.get("recurrence"), top=done["helix"], sequential=sequential, **nulls)
        done["helix"] = _consistent_helix(
            done["helix"], done.get("recurrence"), done.get("periodicity"), helices
        )
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
        identity=done.pop("identity") if callable(identity) else identity,
        helices=helices,
    )


def _outlier_rows(x: Any, res: PCAResult, mode: str) -> tuple[Any, PCAResult, str]:
    """``(table, pca, note)``: with ``mode="repair"``, the outliers among dominant rows replaced and the PCA
    redone, round after round (at most :data:`~pos_geometry.analysis.leverage.REPAIR_ROUNDS`) until no row
    dominates or no jump sets the dominant rows apart; the note says what the replaced rows held in the first
    decomposition and what, if anything, still dominates (empty when no row ever did)."""
    first = res.row_leverage(3)
    if not first.dominated:
        return x, res, ""
    if mode == "keep":
        return x, res, first.words() + "; kept (outlier_rows='keep'): window them out, or repair"
    window = tuple(int(v) for v in res.window)
    before, replaced, leverage = res, [], first
    for _ in range(REPAIR_ROUNDS):
        todo = [r for r in leverage.outliers if r not in replaced]
        if not leverage.dominated or not todo:
            break
        replaced = sorted({*replaced, *todo})
        x = repaired_table(x, tuple(todo), res.provenance, window)
        res = pca(x, res.n_components_, window=window, solver="exact")
        leverage = res.row_leverage(3)
    if not replaced:
        return x, res, first.words() + "; kept"
    said = (
        f"position(s) {replaced} {held_words(before, replaced)}; replaced by interpolation between their nearest "
        "ordinary rows in the window"
    )
    if leverage.dominated:
        return x, res, f"{said}; still: {leverage.words()}"
    return x, res, f"{said}; no row dominates the leading components now"


def _consistent_helix(helix: Any, recurrence: Any, periodicity: Any, helices: tuple = ()) -> Any:
    """``helix`` with its reason completed when the same call's recurrence or periodicity found rotations
    that a top-3 helix fit did not: several rotation planes that share the leading components are mixed by
    them, so "not a helix" there says nothing against the rotations the other analyses found."""
    if helix.verdict == "helix":
        return _drift_said(helix, recurrence)
    found = []
    if recurrence is not None and recurrence.rotation_periods():
        found.append(
            f"the recurrence finds {len(recurrence.rotation_periods())} rotation(s) beating its nulls (periods "
            f"{recurrence.rotation_words()})"
        )
    if periodicity is not None and periodicity.dominant_periods:
        periods = ", ".join(f"{p.period:.4g}" for p in periodicity.dominant_periods)
        found.append(f"periodicity finds significant period(s) {periods}")
    if not found:
        return helix
    planes = ""
    if helices:
        each = "; ".join(
            f"period {h.periods[0]:.4g}: {h.verdict} (p = {h.p_value:.3g})" if h.periods.size else h.verdict
            for h in helices
        )
        planes = (
            f". Fitted in each rotation's own plane (with the trend axis of the rest), with its own nulls: {each} "
            "(Analysis.helices)"
        )
    return dataclasses.replace(
        helix,
        reason=f"{helix.reason}. In the same analysis {' and '.join(found)}: rotations that share the leading "
        "components are mixed by them (several helices, or a helix beside other rotations), so this top-3 fit "
        f"does not contradict them; they are the analysis to read here{planes}",
    )


def _drift_said(helix: Any, recurrence: Any) -> Any:
    """``helix`` with its reason completed when the same call's recurrence finds the rotation's angle drifting:
    the helix's period is then a mean, and its harmonics are the drift's sidebands, not a second rotation."""
    if recurrence is None or recurrence.period_halves is None:
        return helix
    drifts = [
        f"from {a:.4g} to {b:.4g}"
        for (a, b), c in zip(recurrence.period_halves, recurrence.pair_classes, strict=True)
        if c == "drifting" and np.isfinite(a) and np.isfinite(b)
    ]
    if not drifts:
        return helix
    return dataclasses.replace(
        helix,
        reason=f"{helix.reason}. Its period is a mean: in the same analysis the recurrence finds the period drifting "
        f"{', '.join(drifts)} positions between the window's halves (a one-parameter group turns by a constant "
        "angle), so the helix's harmonics are sidebands of that drift, not rotations of their own",
    )


def _identity_beside_nulls(x: Any, window: tuple[int, int], res: PCAResult, nulls: bool) -> Any:
    """``identify(x, window=window)``; when nulls will run on the CPU's threads, its first step
    (:func:`~pos_geometry.analysis.identify.identify_in_steps`: a formula or not, which decides the helix) is
    computed beside the decomposition their surrogates share (:mod:`pos_geometry.analysis.nulls.basis`), which
    is then this context's, and its second (the linear-image test), when there is one, is returned to run beside
    the nulls."""
    rows = res.fitted_rows
    workers = cpu_workers(rows.device) if rows is not None else 1
    if not nulls or workers < 2:
        return identify(x, window=window)
    jobs = (lambda: identify_in_steps(x, window=window), lambda: _decomposition(rows))
    identity, dec = parallel_map(lambda job: job(), jobs, workers)
    remember(rows, dec)
    return identity


def _run_side_by_side(jobs: dict[str, Callable[[], Any]], res: PCAResult) -> dict[str, Any]:
    """``{name: job()}``: the analyses are independent given the PCA, so on the CPU they run side by side on
    :func:`~pos_geometry._threads.cpu_workers` threads, each kernel single-threaded (torch's own threads meet
    at a barrier in every one of the nulls' many small kernels and gain little); a thread whose analysis is
    done takes chunks of the others' nulls. The decomposition their nulls share was computed before, beside
    ``identify`` (:func:`_identity_beside_nulls`), so that every thread reuses it
    (:mod:`pos_geometry.analysis.nulls.basis`). The results do not depend on the number of threads."""
    rows = res.fitted_rows
    workers = cpu_workers(rows.device) if rows is not None else 1
    names = list(jobs)
    return dict(zip(names, parallel_map(lambda name: jobs[name](), names, workers), strict=True))

"""The card's learned-table section: one :func:`~pos_geometry.analyze` (spectrum, helix, periodicity,
recurrence, identification, each with its null) and the 3D view, in plain words.

The verdict lines are written from the results' own fields (verdict, p-value, the nulls each beat, the
reason when something does not apply); nothing is re-decided here.
"""

from __future__ import annotations

from typing import Any

from pos_geometry.analysis.nulls.monte_carlo import NULL_NAMES
from pos_geometry.cards.identity import Subject
from pos_geometry.cards.result import Section, Verdict, not_run, ran
from pos_geometry.errors import InvalidArgumentError, NotApplicableError

__all__ = ["NULL_WORDS", "nulls_in_words", "table_section"]

KEY = "table"

NULL_WORDS = NULL_NAMES
"""Short names of the nulls, for verdict lines (:data:`~pos_geometry.analysis.nulls.monte_carlo.NULL_NAMES`)."""


def nulls_in_words(tests: Any) -> str:
    """``"random walks of its own steps, smooth random curves and its own spectrum"`` for a result's tests
    (:class:`~pos_geometry.NullTest` objects, or null names)."""
    names = [NULL_WORDS.get(getattr(t, "null", t), getattr(t, "null_description", t)) for t in tests or ()]
    names = list(dict.fromkeys(names))
    if len(names) <= 1:
        return "".join(names)
    return ", ".join(names[:-1]) + " and " + names[-1]


def _floor(tests: Any) -> float | None:
    """The smallest p the tests' surrogates can give together (the largest of their floors), or None."""
    floors = [t.min_p_value for t in tests or ()]
    return max(floors) if floors else None


def _p(p: float | None, floor: float | None = None) -> str:
    """``"p = 0.03"``; at the floor, ``"p = 0.005, the smallest its surrogates can give"``."""
    if p is None:
        return ""
    if floor is not None and p <= floor * (1 + 1e-9):
        return f"p = {p:.3g}, the smallest its surrogates can give"
    return f"p = {p:.3g}"


def _tested(text: str, tests: Any, p: float | None, passed: bool) -> Verdict:
    """A verdict decided by ``tests`` (``passed``: the analysis's own decision at its α)."""
    floor = _floor(tests)
    if p is None:  # no test ran (no surrogates): a number, not a decision
        return Verdict(text, "descriptive", null=nulls_in_words(tests) or None)
    status = "beats its null" if passed else "not significant"
    return Verdict(text, status, null=nulls_in_words(tests) or None, p_value=p, min_p_value=floor)


def _helix(a: Any) -> Verdict:
    h = a.helix
    if h is None:
        return Verdict(f"helix: does not apply: {a.notes.get('helix', 'not fitted')}", "does not apply")
    against = nulls_in_words(h.tests)
    if h.verdict == "does not apply":
        return Verdict(f"learned table: the helix does not apply ({h.reason})", "does not apply")
    if not h.tests:
        return Verdict(f"learned table: {h.verdict}, untested ({h.reason})")
    if h.verdict == "helix":
        text = (
            f"learned table: a helix, {h.turns[0]:.2f} turns of period {h.periods[0]:.0f} positions in its top "
            f"3 components ({a.top3:.2f} of the variance), beating {against} ({_p(h.p_value, _floor(h.tests))})"
        )
    else:
        text = f"learned table: {h.verdict} ({h.reason})"
    return _tested(text, h.tests, h.p_value, h.verdict == "helix")


def _planes(a: Any) -> list[Verdict]:
    """One line per helix fitted in a rotation's own plane (when the recurrence finds several rotations)."""
    out = []
    for h in getattr(a, "helices", ()):
        period = f"period {h.periods[0]:.4g}" if h.periods.size else "a rotation"
        words = "a helix" if h.verdict == "helix" else h.verdict
        text = (
            f"learned table, in the plane of the rotation of {period}: {words}, against "
            f"{nulls_in_words(h.tests)} ({_p(h.p_value, _floor(h.tests))})"
        )
        out.append(_tested(text, h.tests, h.p_value, h.verdict == "helix"))
    return out


def _periodicity(a: Any) -> Verdict:
    per = a.periodicity
    if per is None:
        return Verdict(f"periodicity: does not apply: {a.notes.get('periodicity', '')}", "does not apply")
    against = nulls_in_words(per.null.split(" and ")) or None
    found = per.dominant_periods
    if not found:
        return Verdict(
            f"periodicity: no period beats its nulls at α = {per.alpha:g} (smallest reachable p {per.min_p_value:.3g})",
            "not significant", null=against, min_p_value=per.min_p_value,
        )  # fmt: skip
    best = found[0]
    words = ", ".join(f"{p.period_words} in {p.label} ({_p(p.p_value, per.min_p_value)})" for p in found[:4])
    return Verdict(
        f"periodicity: period(s) {words}", "beats its null", null=against, p_value=best.p_value,
        min_p_value=per.min_p_value,
    )  # fmt: skip


def _recurrence(a: Any) -> Verdict:
    rec = a.recurrence
    if rec is None:
        return Verdict(f"recurrence: does not apply: {a.notes.get('recurrence', '')}", "does not apply")
    p = max((t.p_value for t in rec.tests or ()), default=None)
    if rec.status == "does not apply":
        return Verdict(f"recurrence (one-parameter group): does not apply: {rec.reason}", "does not apply")
    if rec.status != "rotations":
        return _tested(f"recurrence (one-parameter group): {rec.status}: {rec.reason}", rec.tests, p, False)
    rows = dict(rec.summary_rows())
    text = (
        f"recurrence (one-parameter group): rotations of period {rows['rotation periods (positions)']}, beating "
        f"{nulls_in_words(rec.tests)} ({_p(p, _floor(rec.tests))})"
    )
    return _tested(text, rec.tests, p, True)


def _reconciled(a: Any, verdicts: list[Verdict]) -> Verdict | None:
    """One line that says how a helix that beats its nulls sits beside a period and a rotation that do not:
    three questions, not three answers to one."""
    helix, per, rec = verdicts[0], verdicts[-2], verdicts[-1]
    if helix.status != "beats its null" or "beats its null" in (per.status, rec.status):
        return None
    h = a.helix
    return Verdict(
        f"reading: the helix is a statement about the curve's shape in its top 3 components together ({h.turns[0]:.2f} "
        "turns in the window, from the helix fit); the periodicity test asks whether one component alone holds a "
        "period, and the recurrence whether a one-step map predicts the rows; neither beats smooth random curves, so "
        "no period or rotation is claimed beyond the helix fit's own"
    )


def _identified(a: Any) -> Verdict | None:
    ident = a.identity
    if ident is None:
        return None
    text = ident.reason if ident.is_formula else f"{ident.kind}: {ident.reason}"
    return Verdict(f"formula: {text}")


def table_section(s: Subject, *, random_state: int = 0, progress: Any = None) -> tuple[Section, Any]:
    """The learned-table section and the :class:`~pos_geometry.Analysis` behind it (None when it does not apply)."""
    if s.unavailable and s.table is None:
        return not_run(
            KEY, "not available", f"the model's weights cannot be read here: {s.unavailable}"
        ), None
    if s.table is None:
        return not_run(KEY, "does not apply", "the model has no positional table"), None
    if s.is_rotary:
        why = (
            "a rotary model has no learned table; its rotary table is exact, built from the config, so its "
            "geometry is the formula's (see the rotary section)"
        )
        return not_run(KEY, "does not apply", why), None
    from pos_geometry.analysis.pipeline import analyze
    from pos_geometry.plotting import plot_explained_variance, plot_helix

    try:
        a = analyze(s.table, random_state=random_state, progress=progress)
    except (InvalidArgumentError, NotApplicableError) as exc:  # too few positions to have a geometry
        why = f"the table ({s.table.n_positions} × {s.table.d_model}) cannot be analysed: {exc}"
        return not_run(KEY, "does not apply", why), None
    verdicts = [_helix(a), *_planes(a), _periodicity(a), _recurrence(a)]
    reading = _reconciled(a, verdicts)
    if reading is not None:
        verdicts.append(reading)
    ident = _identified(a)
    if ident is not None:
        verdicts.append(ident)
    rows = tuple(a.summary_rows())
    figures = [
        ("table_spectrum", plot_explained_variance(a.pca, n_components=min(20, a.pca.n_components_)),
         "Cumulative share of the variance in the leading principal components."),
    ]  # fmt: skip
    if a.pca.n_components_ >= 3:
        figures.insert(0, ("table_helix", plot_helix(a.pca, fit=a.helix if a.helix is not None else None),
                           "The table in its top three principal components, with the fitted helix (drag to turn)."))  # fmt: skip
    else:
        rows += (
            (
                "3D view",
                f"not drawn: the table has {a.pca.n_components_} principal component(s), a 3D view needs 3",
            ),
        )
    values = {
        "top1": a.top1, "top3": a.top3, "top10": a.top10, "stable_rank": a.stable_rank, "notes": dict(a.notes),
        "helix": None if a.helix is None else {
            "verdict": a.helix.verdict, "p_value": a.helix.p_value, "reason": a.helix.reason,
            "periods": a.helix.periods, "turns": a.helix.turns,
            "tests": a.helix.tests,
        },
        "periodicity": None if a.periodicity is None else {
            "dominant_periods": [(p.label, p.period, p.period_std, p.p_value) for p in a.periodicity.dominant_periods],
            "min_p_value": a.periodicity.min_p_value,
        },
        "recurrence": None if a.recurrence is None else {
            "status": a.recurrence.status, "reason": a.recurrence.reason,
            "rotations": a.recurrence.rotation_pairs(), "periods": a.recurrence.rotation_periods(),
            "tests": a.recurrence.tests,
        },
        "identity": None if a.identity is None else {"kind": a.identity.kind, "reason": a.identity.reason},
        "helices": [
            {"period": float(h.periods[0]) if h.periods.size else None, "verdict": h.verdict, "p_value": h.p_value}
            for h in a.helices
        ],
    }  # fmt: skip
    return ran(KEY, verdicts, rows, values, (a.provenance,), figures), a

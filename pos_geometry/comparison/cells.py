"""The comparison's verdict matrix: one cell per model and claim, each read from the model's own card.

A cell holds the card's decision for the claim (its verdict line's status: ``"beats its null"``, ``"not
significant"``, ``"descriptive"``, or why it has none: ``"does not apply"``, ``"not available"``,
``"skipped"``), a short text with the claim's number, the line's p-value, and the numbers behind it as the
card's ``values`` hold them (copied, never recomputed: the page's numbers are the card's).
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

from pos_geometry.cards.result import short_reason

__all__ = ["CLAIMS", "Cell", "card_cells"]


@dataclass(frozen=True)
class Cell:
    """One model's decision on one claim.

    Attributes:
        claim: the claim (a key of :data:`CLAIMS`).
        status: the decision, in the card's vocabulary (:data:`~pos_geometry.cards.result.VERDICT_STATUSES`).
        text: the decision with its number, or the reason there is none.
        p_value: the verdict line's p-value, when a test decided it.
        values: the card's numbers behind the cell (a subset of the section's ``values``).
    """

    claim: str
    status: str
    text: str
    p_value: float | None = None
    values: Mapping[str, Any] = field(default_factory=dict)


def _pct(x: float) -> str:
    return f"{x:.2f}"


def _table_shape(v: dict) -> tuple[str, dict]:
    h = v.get("helix")
    if not h:
        return (v.get("notes") or {}).get("helix", "no helix fit"), {"top3": v.get("top3")}
    text = h["verdict"]
    if h["verdict"] == "helix" and h.get("turns"):
        text += f", {h['turns'][0]:.2f} turns of period {h['periods'][0]:.0f}"
    text += f"; top 3 components hold {_pct(v['top3'])}"
    return text, {"verdict": h["verdict"], "p_value": h.get("p_value"), "turns": h.get("turns"),
                  "periods": h.get("periods"), "top3": v.get("top3")}  # fmt: skip


def _period(v: dict) -> tuple[str, dict]:
    p = v.get("periodicity")
    if not p:
        return "not run", {}
    periods = [float(row[1]) for row in p["dominant_periods"]]
    text = "period(s) " + ", ".join(f"{x:.4g}" for x in periods) if periods else "no period"
    return text, {"periods": periods}


_NULL_NAMES = {"step_walk": "random walks of its steps", "smooth_gp": "smooth GP curves",
               "stationary": "stationary curves of its spectrum"}  # fmt: skip


def _rotation(v: dict) -> tuple[str, dict]:
    r = v.get("recurrence")
    if not r:
        return "not run", {}
    found = [list(p) if isinstance(p, list | tuple) else [p, None, None] for p in r.get("periods") or []]
    periods = [float(p[0]) for p in found]
    if periods:  # each (period, low, high) of the 95% interval, or the period alone
        words = [f"{p[0]:.4g}" + (f" [{p[1]:.4g}, {p[2]:.4g}]" if p[1] is not None and p[2] is not None else "")
                 for p in found]  # fmt: skip
        return f"{r['status']}: period " + ", ".join(words), {"status": r["status"], "periods": found}
    tests = [t for t in r.get("tests") or [] if t.get("p_value") is not None]
    if not tests:
        return r["status"], {"status": r["status"], "periods": periods}
    t = max(tests, key=lambda t: t["p_value"])  # the null that decided it
    null = _NULL_NAMES.get(t["null"], str(t["null"]).replace("_", " "))
    text = f"{r['status']}: gain {t['observed']:.3f} against {null} (95% of them below {t['null_q95']:.3f})"
    return text, {"status": r["status"], "periods": periods, "observed": t["observed"], "null": t["null"],
                  "null_q95": t["null_q95"]}  # fmt: skip


def _formula(v: dict) -> tuple[str, dict]:
    i = v.get("identity") or {}
    kind = str(i.get("kind", "not identified"))
    said = {"learned": "learned: no formula rebuilds it"}.get(kind, kind)
    return said, {"kind": i.get("kind")}


def _rotary(v: dict) -> tuple[str, dict]:
    parts, numbers = [], {}
    for label, t in v.items():
        where = f"{label}: " if label != "all" else ""
        parts.append(
            f"{where}fast planes carry {_pct(t['short_share_mean'])} (uniform use {_pct(t['uniform_share'])}); "
            f"{t['heads_leaning']} of {t['heads_tested']} heads lean on them (Holm)"
        )
        numbers[label] = {
            k: t[k] for k in ("short_share_mean", "uniform_share", "heads_leaning", "heads_tested", "n_heads")
        }
    return "; ".join(parts), numbers


def _qk_term(v: dict) -> tuple[str, dict]:
    q = v.get("qk_view") or {}
    if not q:
        return "", {}
    text = (
        f"{_pct(q['toeplitz_share_mean'])} a function of the offset (null {_pct(q['toeplitz_null_mean'])}); "
        f"{q['heads_above_null']} heads above their null"
    )
    return text, {k: q[k] for k in ("toeplitz_share_mean", "toeplitz_null_mean", "heads_above_null")}


def _locality(v: dict) -> tuple[str, dict]:
    b = v.get("by_offset") or {}
    if not b:
        return "", {}
    mass = [m for row in b["local_mass"] for m in row]
    mean = sum(mass) / max(len(mass), 1)
    text = (
        f"{b['local_heads']} of {len(mass)} heads mostly local; mean {_pct(mean)} on the nearest tokens "
        f"(uniform {_pct(b['uniform_local_mass'])})"
    )
    return text, {"local_heads": b["local_heads"], "n_heads": len(mass), "mean_local_mass": mean,
                  "uniform_local_mass": b["uniform_local_mass"]}  # fmt: skip


def _residual(v: dict) -> tuple[str, dict]:
    states = (v.get("reading") or {}).get("states") or {}
    counts: dict[str, int] = {}
    for state in states.values():
        counts[state] = counts.get(state, 0) + 1
    text = "; ".join(f"{state} in {n} of {len(states)} layers" for state, n in counts.items())
    return text, {"states": dict(states)}


def _causal(v: dict) -> tuple[str, dict]:
    edits = v.get("edits") or []
    parts = [
        f"{e['edit']}: Δ {e['delta']:+.3g} [{e['interval'][0]:+.3g}, {e['interval'][1]:+.3g}]" for e in edits
    ]
    text = f"{v.get('objective', 'loss')} loss {v.get('base_loss', float('nan')):.3g}; " + "; ".join(parts)
    return text, {"objective": v.get("objective"), "base_loss": v.get("base_loss"),
                  "edits": [{k: e[k] for k in ("edit", "delta", "interval")} for e in edits]}  # fmt: skip


Reader = Callable[[dict], tuple[str, dict]]

CLAIMS: dict[str, tuple[str, str, Reader, str]] = {
    "learned-table shape": ("table", r"learned table:", _table_shape, "a helix beyond smooth random curves"),
    "period": ("table", r"periodicity:", _period, "a period in similarity by offset or PC1..3"),
    "rotation": ("table", r"recurrence", _rotation, "rotations of a one-parameter group"),
    "formula": ("table", r"formula:", _formula, "what formula, if any, rebuilds the table"),
    # one line per layer type (the section's other line names heads and planes)
    "rotary plane use": ("rotary", r"rotary( \([^)]*\))?: the \d+ of \d+ planes", _rotary, "share of the QK form on the planes that turn within the span"),
    "QK position term": ("attention", r"how heads read the table:", _qk_term, "the table's QK term as a function of offset"),
    "attention locality": ("attention", r"attention by offset:", _locality, "attention on the nearest tokens"),
    "residual stream": ("residual", r"residual stream:", _residual, "where position is in the residual stream"),
    "causal edits": ("causal", r"causal", _causal, "Δloss of each positional edit"),
}  # fmt: skip
"""Each claim: ``(section, the start of its verdict lines as a regular expression, reader of the section's values,
what it asks)``."""


def _lines(section: dict, start: str) -> list[dict]:
    return [v for v in section.get("verdicts", []) if re.match(start, v["text"])]


def _decision(lines: list[dict]) -> tuple[str, float | None]:
    """The claim's status over its lines (a test's decision first) and the smallest tested p-value."""
    tested = [
        v
        for v in lines
        if v["status"] in ("beats its null", "not significant") and v.get("p_value") is not None
    ]
    for status in (
        "beats its null",
        "not significant",
        "descriptive",
        "not available",
        "does not apply",
        "skipped",
    ):
        if any(v["status"] == status for v in lines):
            p = min((float(v["p_value"]) for v in tested), default=None)
            return status, p
    return lines[0]["status"], None


def card_cells(card: dict) -> tuple[Cell, ...]:
    """One :class:`Cell` per claim of :data:`CLAIMS`, in order, from ``card`` (a card's JSON)."""
    sections = {s["key"]: s for s in card["sections"]}
    cells = []
    for claim, (key, start, reader, _) in CLAIMS.items():
        section = sections.get(key)
        if section is None:
            cells.append(Cell(claim, "not available", f"the card has no {key} section"))
            continue
        if section["status"] != "ran":
            cells.append(Cell(claim, section["status"], short_reason(section["reason"])))
            continue
        lines = _lines(section, start)
        if not lines:
            why = (
                "only a learned table has a QK term of its own table"
                if claim == "QK position term"
                else f"the {key} section states nothing on it"
            )
            cells.append(Cell(claim, "does not apply", why))
            continue
        status, p = _decision(lines)
        if status not in ("beats its null", "not significant", "descriptive"):
            text = next(v["text"] for v in lines if v["status"] == status)
            marker = text.find(f"{status}: ")
            cells.append(
                Cell(claim, status, short_reason(text[marker + len(status) + 2 :] if marker >= 0 else text))
            )
            continue
        text, numbers = reader(section["values"])
        cells.append(Cell(claim, status, text, p, numbers))
    return tuple(cells)

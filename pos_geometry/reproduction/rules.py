"""How a claim's verdict follows from its numbers: each part of a claim holds, fails, or cannot be decided from
the table, and the parts combine into the claim's verdict by one rule a reader can check.

A part that compares a statistic with a threshold uses the statistic's interval, not its point estimate: the
part **holds** when the whole interval is on the claimed side, **fails** when the whole interval is on the
other side, and is **undecidable** when the interval straddles the threshold. :func:`combine` then gives

- ``"reproduced"``: every part holds;
- ``"not reproduced"``: no part holds and some part fails;
- ``"partly reproduced"``: some parts hold and some fail;
- ``"undecidable from this table"``: no part fails and some part cannot be decided.
"""

from __future__ import annotations

from collections.abc import Sequence

__all__ = ["HOLDS", "FAILS", "UNDECIDABLE", "OUTCOMES", "above", "below", "within", "combine", "COMBINE_RULE"]

HOLDS, FAILS, UNDECIDABLE = "holds", "fails", "undecidable"
OUTCOMES = (HOLDS, FAILS, UNDECIDABLE)

COMBINE_RULE = (
    "reproduced when every part holds; partly reproduced when some hold and some fail; not reproduced when "
    "none holds and some fails; undecidable from this table when none fails and some cannot be decided (its "
    "interval straddles the threshold)"
)


def above(low: float, high: float, threshold: float) -> str:
    """The part "the statistic is above ``threshold``" for an interval ``[low, high]``."""
    if low > threshold:
        return HOLDS
    if high < threshold:
        return FAILS
    return UNDECIDABLE


def below(low: float, high: float, threshold: float) -> str:
    """The part "the statistic is below ``threshold``" for an interval ``[low, high]``."""
    return {HOLDS: FAILS, FAILS: HOLDS, UNDECIDABLE: UNDECIDABLE}[above(low, high, threshold)]


def within(low: float, high: float, band: tuple[float, float]) -> str:
    """The part "the statistic lies in ``band``": holds when the interval is inside it, fails when the interval
    misses it entirely, undecidable when the interval crosses one of its edges."""
    if band[0] <= low and high <= band[1]:
        return HOLDS
    if high < band[0] or low > band[1]:
        return FAILS
    return UNDECIDABLE


def combine(parts: Sequence[str]) -> str:
    """The claim's verdict from its parts' outcomes (module docstring)."""
    if not parts or any(p not in OUTCOMES for p in parts):
        raise ValueError(f"parts must be a non-empty sequence of {OUTCOMES}; got {list(parts)!r}")
    holds, fails = parts.count(HOLDS), parts.count(FAILS)
    if holds == len(parts):
        return "reproduced"
    if fails and holds:
        return "partly reproduced"
    if fails:
        return "not reproduced"
    return "undecidable from this table"

"""One claim of the post, measured and judged: the record every claim function returns."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from pos_geometry.embedding import Provenance

__all__ = ["VERDICTS", "Claim", "missing"]

VERDICTS = (
    "reproduced",
    "partly reproduced",
    "not reproduced",
    "undecidable from this table",
    "does not apply",
    "not measured",
)
"""What a claim can come to. "undecidable from this table": the numbers cannot tell the claim from its
negation (an interval straddles the threshold, a period with too few cycles in the window); "does not apply":
the claim's premise is false for the model (no learned table to speak of)."""


@dataclass(frozen=True)
class Claim:
    """One claim of the post with the measurement that tests it.

    ``statement``: the claim, as the post makes it. ``criterion``: the rule the verdict follows.
    ``measured``: what was found, in words. ``verdict``: one of :data:`VERDICTS`. ``values``: the
    numbers behind it. ``provenance``: the tables it was measured on.
    """

    key: str
    statement: str
    criterion: str
    measured: str
    verdict: str
    values: dict[str, Any] = field(default_factory=dict)
    provenance: tuple[Provenance, ...] = ()


def missing(key: str, statement: str, criterion: str, what: str, *, sentence: str | None = None) -> Claim:
    """A claim that could not be measured: ``what`` is not here (or ``sentence`` says so in its own words)."""
    said = sentence or f"{what} is not available here"
    return Claim(key, statement, criterion, f"{said}, so nothing was measured.", "not measured")

"""What a positional card holds: verdict lines, sections, and the card itself (JSON, text summary, files).

A :class:`Verdict` is one claim in plain words with what it was tested against. A :class:`Section` is one
part of the page (identity, the learned table, rotary planes, how attention reads position, the residual
stream, causal edits): what ran, or why it does not apply or was skipped, its verdicts, its detail rows,
its figures and its numbers. A :class:`Card` is the sections of one model, in order.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from pos_geometry.analysis._results import Result, to_jsonable
from pos_geometry.embedding import Provenance

__all__ = ["SECTION_KEYS", "SECTION_STATUSES", "SECTION_TITLES", "Card", "Section", "Verdict"]

SECTION_TITLES = {
    "identity": "Identity",
    "table": "The learned table",
    "rotary": "Rotary planes",
    "attention": "How attention reads position",
    "residual": "Position in the residual stream",
    "causal": "Does the model use it: causal edits",
}
"""Each section's anchor and heading, in page order."""

SECTION_KEYS = tuple(SECTION_TITLES)
"""The card's sections, in page order."""

SECTION_STATUSES = ("ran", "does not apply", "not available", "skipped")
"""What happened to a section: it ran; its premise is false for this kind of model ("does not apply");
what it reads is not on this machine ("not available"); or the caller left it out ("skipped", ``fast``)."""


@dataclass(frozen=True)
class Verdict:
    """One claim about the model, in plain words, with its null.

    Attributes:
        text: the claim as a sentence (``"learned table: a helix (...)"``).
        status: ``"measured"``, or a section status (``"does not apply"``...) when nothing was measured.
        null: what the measurement was compared with, in words (None when nothing was measured).
        p_value: the Monte-Carlo p-value against that null, when there is one.
        interval: ``(low, high)`` of the measured value, when it has one.
    """

    text: str
    status: str = "measured"
    null: str | None = None
    p_value: float | None = None
    interval: tuple[float, float] | None = None


@dataclass(frozen=True, eq=False)
class Section:
    """One part of the card.

    Attributes:
        key: the section's anchor on the page (``"identity"``, ``"table"``, ``"rotary"``, ``"attention"``,
            ``"residual"``, ``"causal"``).
        title: its heading.
        status: one of :data:`SECTION_STATUSES`.
        reason: why it did not run (empty when it ran).
        verdicts: its claims, in order.
        rows: ``(label, value)`` detail rows.
        values: every number behind the verdicts and rows, JSON-ready.
        seconds: wall time it took.
        provenance: the results it was computed from.
        figures: ``(stem, plotly figure, caption)`` triples (not serialised).
    """

    key: str
    title: str
    status: str
    reason: str = ""
    verdicts: tuple[Verdict, ...] = ()
    rows: tuple[tuple[str, str], ...] = ()
    values: Mapping[str, Any] = field(default_factory=dict)
    seconds: float = 0.0
    provenance: tuple[Provenance, ...] = ()
    figures: tuple[tuple[str, Any, str], ...] = field(default=(), metadata={"serialize": False})

    def with_seconds(self, seconds: float) -> Section:
        """The same section with its wall time set."""
        from dataclasses import replace

        return replace(self, seconds=float(seconds))


SHORT_REASON = 240
"""The most characters of a reason a verdict line shows (the section shows all of it)."""


def short_reason(reason: str) -> str:
    """The first sentence of ``reason``, at most :data:`SHORT_REASON` characters."""
    first = reason.split(". ")[0].rstrip(".")
    return first if len(first) <= SHORT_REASON else first[: SHORT_REASON - 1] + "…"


def ran(
    key: str,
    verdicts: Iterable[Verdict],
    rows: Iterable[tuple[str, str]],
    values: Mapping[str, Any],
    provenance: Iterable[Provenance],
    figures: Iterable[tuple[str, Any, str]] = (),
) -> Section:
    """Section ``key`` that ran, titled from :data:`SECTION_TITLES` (its ``seconds`` are filled in by the build)."""
    return Section(
        key, SECTION_TITLES[key], "ran", "", tuple(verdicts), tuple(rows), values, 0.0,
        tuple(provenance), tuple(figures),
    )  # fmt: skip


def not_run(key: str, status: str, reason: str) -> Section:
    """Section ``key`` that did not run, with one verdict line saying why (its first sentence)."""
    title = SECTION_TITLES[key]
    return Section(
        key, title, status, reason, (Verdict(f"{title}: {status}: {short_reason(reason)}", status),)
    )


@dataclass(frozen=True, eq=False, repr=False)
class Card(Result):
    """A model's positional card: every analysis that applies to its kind of position, with its null.

    Attributes:
        model: the model as it was given (a name, repo id, folder, ``.gguf`` file or table file).
        kind: how the model encodes position: ``"learned table"``, ``"rotary"``, ``"rotary, per layer
            type"``, ``"no positional table"`` or ``"table file"`` (a bare table: no model around it).
        sections: the sections, in page order.
        corpus: the corpus the model-running sections read, in words (None when none ran).
        fast: whether the card was made with ``fast=True`` (causal section skipped, fewer contexts).
        created: the UTC date and time the card was made (ISO 8601).
        provenance: the model's table (or, where it has none, its identity).
    """

    model: str
    kind: str
    sections: tuple[Section, ...]
    corpus: str | None
    fast: bool
    created: str
    provenance: Provenance

    @property
    def verdicts(self) -> tuple[Verdict, ...]:
        """Every section's verdicts, in page order."""
        return tuple(v for s in self.sections for v in s.verdicts)

    def section(self, key: str) -> Section:
        """The section with anchor ``key``."""
        for s in self.sections:
            if s.key == key:
                return s
        from pos_geometry.errors import InvalidArgumentError

        raise InvalidArgumentError(
            f"the card has no section {key!r}; its sections are {[s.key for s in self.sections]}."
        )

    def summary_rows(self) -> list[tuple[str, str]]:
        rows = [("kind", self.kind)]
        rows += [(s.key, v.text) for s in self.sections for v in s.verdicts]
        rows.append(("cost", ", ".join(f"{s.key} {s.seconds:.1f} s" for s in self.sections)))
        return rows

    def to_dict(self) -> dict[str, Any]:
        out = {"type": type(self).__name__}
        out.update(to_jsonable(self))
        return out

    def save(self, out: Any, *, plotlyjs: str = "directory") -> list[Any]:
        """Write ``index.html``, ``card.json`` and ``card.md`` into the folder ``out`` (and ``plotly.min.js``
        beside the page, unless ``plotlyjs="inline"``); returns the paths written."""
        from pos_geometry.cards.render import save_card

        return save_card(self, out, plotlyjs=plotlyjs)

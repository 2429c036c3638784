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

from pos_geometry._multiple import holm
from pos_geometry.analysis._results import Result, to_jsonable
from pos_geometry.embedding import Provenance

__all__ = [
    "ALPHA",
    "CARD_FORMAT",
    "SECTION_KEYS",
    "SECTION_STATUSES",
    "SECTION_TITLES",
    "VERDICT_STATUSES",
    "Card",
    "Section",
    "Verdict",
    "holm",
    "holm_policy",
]

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


VERDICT_STATUSES = (
    "beats its null",
    "not significant",
    "does not apply",
    "not available",
    "skipped",
    "descriptive",
)
"""What each verdict line decided, one vocabulary for the card, ``analyze`` and the reproduction:

- ``"beats its null"``: a test ran and the measurement beat its null at ``alpha`` (``p_value`` ≤ ``alpha``;
  ``min_p_value`` is the smallest p its surrogates can give);
- ``"not significant"``: a test ran and did not (with its ``p_value``);
- ``"does not apply"``: the premise is false (a rotary model has no learned table), with the reason;
- ``"not available"``: what it reads is not on this machine; ``"skipped"``: left out (``fast``);
- ``"descriptive"``: a number with what it is compared to (``null``), and no test behind it."""

CARD_FORMAT = 2
"""The layout of ``card.json`` (its ``"format"``): what :func:`~pos_geometry.compare` reads. A card of another
format (or of none: made before formats were numbered) is made again, not guessed at. Format 2: the rotary
section's heads that lean on the fast planes are a tested count (``heads_leaning`` of ``heads_tested``, with
each head's ``lean_p_values``), no longer the count above the uniform share."""

ALPHA = 0.05
"""The family-wise level of the card's multiple-comparison line (Holm's correction over its tests)."""


@dataclass(frozen=True)
class Verdict:
    """One claim about the model, in plain words, with its null and its decision.

    Attributes:
        text: the claim as a sentence (``"learned table: a helix (...)"``).
        status: one of :data:`VERDICT_STATUSES`: what was decided, and how.
        null: what the measurement was compared with, in words (None when nothing was).
        p_value: the Monte-Carlo p-value against that null, when a test ran.
        interval: ``(low, high)`` of the measured value, when it has one.
        min_p_value: the smallest p the test's surrogates can give (``1 / (1 + surrogates)``), when a test ran.
    """

    text: str
    status: str = "descriptive"
    null: str | None = None
    p_value: float | None = None
    interval: tuple[float, float] | None = None
    min_p_value: float | None = None

    @property
    def tested(self) -> bool:
        """Whether a test decided this line (``"beats its null"`` or ``"not significant"``, with a p-value)."""
        return self.status in ("beats its null", "not significant") and self.p_value is not None


def holm_policy(tested: list[tuple[str, float]], where: str = "") -> str:
    """The multiple-comparison policy over the ``tested`` verdicts ``(status, p_value)`` (``where``: words after
    "tests with a p-value", such as " across the 3 cards"): each decides on its own, at its analysis's α; Holm's
    correction over all of them (at :data:`ALPHA`) says how many still hold."""
    beat = sum(status == "beats its null" for status, _ in tested)
    hold = sum(a <= ALPHA for a in holm([p for _, p in tested]))
    return (
        f"each of the {len(tested)} tests with a p-value{where} decides on its own, at its analysis's α ({beat} beat "
        f"their nulls); with Holm's correction over all {len(tested)}, {hold} still do at a family-wise α = {ALPHA:g}"
    )


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
    depth, cut = 0, len(reason)
    for i, c in enumerate(reason):  # the first ". " outside parentheses: a parenthesis is never left open
        depth += (c == "(") - (c == ")")
        if depth <= 0 and reason.startswith(". ", i):
            cut = i
            break
    first = reason[:cut].rstrip(".")
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

    def multiple_comparisons(self) -> str:
        """The card's policy across its tests, in one sentence with its numbers: each test decides on its own at
        its analysis's α; Holm's correction over all of them (at :data:`ALPHA`) says how many hold for the card."""
        tested = [(v.status, float(v.p_value)) for v in self.verdicts if v.tested]
        if not tested:
            return "no verdict of this card comes from a test: every number is descriptive, with what it is compared to"
        return holm_policy(tested)

    def summary_rows(self) -> list[tuple[str, str]]:
        rows = [("kind", self.kind)]
        rows += [(s.key, v.text) for s in self.sections for v in s.verdicts]
        rows.append(("cost", ", ".join(f"{s.key} {s.seconds:.1f} s" for s in self.sections)))
        return rows

    def to_dict(self) -> dict[str, Any]:
        out: dict[str, Any] = {"type": type(self).__name__, "format": CARD_FORMAT}
        out.update(to_jsonable(self))
        return out

    def save(self, out: Any, *, plotlyjs: str = "directory", static: Any = None) -> list[Any]:
        """Write ``index.html``, ``card.json`` and ``card.md`` as the folder ``out`` (and ``plotly.min.js``
        beside the page, unless ``plotlyjs="inline"``; ``static="png,pdf"``: the page as ``card.png`` and
        ``card.pdf`` too); returns the paths written."""
        from pos_geometry.cards.render import save_card

        return save_card(self, out, plotlyjs=plotlyjs, static=static)

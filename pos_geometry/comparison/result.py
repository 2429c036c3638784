"""What a comparison holds: the models (each with its identity row), the verdict matrix, the overlays' data,
the warnings and the multiple-comparison policy across every card on the page."""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from pos_geometry.analysis._results import Result, to_jsonable
from pos_geometry.comparison.cells import Cell

__all__ = ["COMPARE_FORMAT", "Comparison", "ModelRow"]

COMPARE_FORMAT = 1
"""The layout of ``compare.json`` (its ``"format"``)."""


@dataclass(frozen=True)
class ModelRow:
    """Who was compared: one model's identity row.

    Attributes:
        label: the model's name on the page (unique among the compared).
        argument: the argument as given (a model or a card folder).
        model: the model its card is of.
        kind: how it encodes position (the card's ``kind``).
        revision: the revision asked for, else None.
        origin: where its card came from: ``"card folder"``, ``"results cache"`` or ``"computed"``.
        corpus: what its model-running sections read (None: none ran).
        fast: whether its card is a fast one (no causal edits, fewer contexts).
        created: when its card was made (UTC, ISO 8601).
        version: the pos_geometry version that made its card.
        card: its card's folder (absolute), or None when the card was made into a temporary folder.
    """

    label: str
    argument: str
    model: str
    kind: str
    revision: str | None
    origin: str
    corpus: str | None
    fast: bool
    created: str
    version: str
    card: str | None


@dataclass(frozen=True, eq=False, repr=False)
class Comparison(Result):
    """Models side by side: each claim's decision per model, and the overlays only a comparison shows.

    Attributes:
        models: one :class:`ModelRow` per model, in the order given.
        claims: the claims, in the matrix's order (:data:`~pos_geometry.comparison.cells.CLAIMS`).
        cells: ``(n_models, n_claims)`` :class:`~pos_geometry.comparison.cells.Cell` s: ``cells[i][j]`` is model
            ``i``'s decision on claim ``j``, read from its card.
        series: the overlays' data (:mod:`~pos_geometry.comparison.series`).
        warnings: what a reader must know before comparing the numbers (different corpora, settings, versions).
        policy: the multiple-comparison policy over every test on the page, with its numbers.
        created: when the comparison was made (UTC, ISO 8601).
    """

    models: tuple[ModelRow, ...]
    claims: tuple[str, ...]
    cells: tuple[tuple[Cell, ...], ...]
    series: Mapping[str, Any]
    warnings: tuple[str, ...]
    policy: str
    created: str
    provenance: Any = field(default=None, metadata={"serialize": False})

    def cell(self, model: str, claim: str) -> Cell:
        """The cell of the model labelled ``model`` (or given as that argument) on ``claim``."""
        from pos_geometry.errors import InvalidArgumentError

        rows = [i for i, m in enumerate(self.models) if model in (m.label, m.argument)]
        if not rows or claim not in self.claims:
            raise InvalidArgumentError(
                f"no cell for model {model!r} and claim {claim!r}; models {[m.label for m in self.models]}, "
                f"claims {list(self.claims)}."
            )
        return self.cells[rows[0]][self.claims.index(claim)]

    def summary_rows(self) -> list[tuple[str, str]]:
        rows = [(m.label, f"{m.kind} ({m.origin})") for m in self.models]
        for i, m in enumerate(self.models):
            rows += [(f"{m.label}: {c.claim}", f"[{c.status}] {c.text}") for c in self.cells[i]]
        return [*rows, ("warnings", "; ".join(self.warnings) or "none"), ("policy", self.policy)]

    def to_dict(self) -> dict[str, Any]:
        out: dict[str, Any] = {"type": type(self).__name__, "format": COMPARE_FORMAT}
        out.update(to_jsonable(self))
        return out

    def save(self, out: str | os.PathLike[str], *, plotlyjs: str = "directory") -> list[Any]:
        """Write ``index.html``, ``compare.json`` and ``compare.md`` into the folder ``out`` (and
        ``plotly.min.js`` beside the page unless ``plotlyjs="inline"``); returns the paths written."""
        from pos_geometry.comparison.render import save_comparison

        return save_comparison(self, out, plotlyjs=plotlyjs)

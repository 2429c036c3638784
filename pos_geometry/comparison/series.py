"""The comparison's overlays as data: what only a comparison can show, read from each model's card.

Each series is JSON-ready and keyed by the model's label on the page:

* ``rotary``: per model and layer type, each plane's mean share of the QK form against its wavelength over
  the layer type's attention span (1: the plane completes one cycle within the span);
* ``residual``: per model, each layer's positional share and its sampling floor against relative depth
  (layer over the deepest layer read; layer 0 is the embedding output);
* ``locality``: per model, every head's attention on the nearest tokens and what uniform attention gives;
* ``causal``: per model, each edit's Δloss with its interval;
* ``revisions``: per model compared at two or more revisions whose names carry a training step
  (``step3000``), each claim's number against the step.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from typing import Any

__all__ = ["SERIES", "comparison_series", "training_step"]


def _section(card: dict, key: str) -> dict | None:
    for s in card["sections"]:
        if s["key"] == key and s["status"] == "ran":
            return s["values"]
    return None


def _rotary(label: str, card: dict) -> list[dict]:
    values = _section(card, "rotary") or {}
    out = []
    for layer_type, t in values.items():
        if "plane_usage" not in t:
            continue
        span = float(t["span"])
        out.append({
            "model": label, "layer_type": None if layer_type == "all" else layer_type, "span": span,
            "wavelength_over_span": [float(w) / span for w in t["wavelengths"]],
            "usage": [float(u) for u in t["plane_usage"]], "uniform": 1.0 / len(t["plane_usage"]),
        })  # fmt: skip
    return out


def _residual(label: str, card: dict) -> list[dict]:
    values = _section(card, "residual")
    if not values or not values.get("metrics"):
        return []
    rows = values["metrics"]
    deepest = max(int(r["layer"]) for r in rows) or 1
    return [{
        "model": label, "depth": [int(r["layer"]) / deepest for r in rows], "layer": [int(r["layer"]) for r in rows],
        "positional_share": [float(r["positional_share"]) for r in rows],
        "floor": [float(r["positional_floor"]) for r in rows],
    }]  # fmt: skip


def _locality(label: str, card: dict) -> list[dict]:
    values = (_section(card, "attention") or {}).get("by_offset")
    if not values:
        return []
    return [{
        "model": label, "local_mass": [float(m) for row in values["local_mass"] for m in row],
        "uniform": float(values["uniform_local_mass"]),
    }]  # fmt: skip


def _causal(label: str, card: dict) -> list[dict]:
    values = _section(card, "causal")
    if not values:
        return []
    return [{
        "model": label, "objective": values.get("objective"),
        "edits": [{"edit": e["edit"], "delta": float(e["delta"]), "interval": [float(x) for x in e["interval"]]}
                  for e in values["edits"]],
    }]  # fmt: skip


_PER_CARD = {"rotary": _rotary, "residual": _residual, "locality": _locality, "causal": _causal}
"""The overlays read card by card, and their readers."""

SERIES = (*_PER_CARD, "revisions")
"""The overlays, in page order (``revisions`` reads the compared models together)."""


def training_step(revision: str | None) -> int | None:
    """The training step a revision's name carries (``step3000``, ``global_step3000``, ``ckpt-3000``), else None."""
    if not revision:
        return None
    found = re.fullmatch(r"(?:global_)?(?:step|ckpt|checkpoint)[-_]?(\d+)", revision)
    return int(found.group(1)) if found else None


def _revisions(labels: Sequence[str], entries: Sequence[Any], cells: Sequence[Sequence[Any]]) -> list[dict]:
    groups: dict[str, list[int]] = {}
    for i, entry in enumerate(entries):
        if training_step(entry.revision) is not None:
            groups.setdefault(entry.model, []).append(i)
    out = []
    for model, members in groups.items():
        if len(members) < 2:
            continue
        members.sort(key=lambda i: training_step(entries[i].revision))
        numbers: dict[str, list[float | None]] = {}
        for i in members:
            for cell in cells[i]:
                for name, value in _scalars(cell.claim, cell.values).items():
                    numbers.setdefault(name, [None] * len(members))[members.index(i)] = value
        out.append({"model": model, "labels": [labels[i] for i in members],
                    "steps": [training_step(entries[i].revision) for i in members], "numbers": numbers})  # fmt: skip
    return out


def _scalars(claim: str, values: Any) -> dict[str, float]:
    """The numbers of a cell that can be drawn against a training step (named ``claim: number``)."""
    out = {}
    for name, value in (values or {}).items():
        if isinstance(value, bool) or not isinstance(value, int | float):
            if isinstance(value, dict):
                out.update({f"{claim} {name}: {k}": float(v) for k, v in value.items()
                            if isinstance(v, int | float) and not isinstance(v, bool)})  # fmt: skip
            continue
        out[f"{claim}: {name}"] = float(value)
    return out


def comparison_series(
    labels: Sequence[str], cards: Sequence[dict], entries: Sequence[Any], cells: Sequence[Sequence[Any]]
) -> dict[str, list[dict]]:
    """Every overlay of :data:`SERIES` for the models ``labels`` with their ``cards`` (card JSON), ``entries``
    (:class:`~pos_geometry.comparison.inputs.CardEntry`) and ``cells`` (their rows of the verdict matrix)."""
    series = {
        key: [s for label, card in zip(labels, cards, strict=True) for s in read(label, card)]
        for key, read in _PER_CARD.items()
    }
    series["revisions"] = _revisions(labels, entries, cells)
    return series

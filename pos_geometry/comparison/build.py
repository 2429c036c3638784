"""``compare(models)``: several models' positional stories side by side, each cell with its card's decision.

Every argument becomes a card (read from its folder, copied from the results cache, or made), and every
number of the comparison is read from those cards' JSON: the page says nothing a model's own card does not.
"""

from __future__ import annotations

import os
import tempfile
from collections.abc import Sequence
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

from pos_geometry._device import Device
from pos_geometry._progress import Progress
from pos_geometry.cards.result import holm_policy
from pos_geometry.comparison.cells import CLAIMS, card_cells
from pos_geometry.comparison.inputs import CardEntry, card_entry
from pos_geometry.comparison.render import check_compare_folder
from pos_geometry.comparison.result import Comparison, ModelRow
from pos_geometry.comparison.series import comparison_series
from pos_geometry.errors import InvalidArgumentError

__all__ = ["compare"]


def _labels(entries: Sequence[CardEntry]) -> list[str]:
    """A short, unique name per model: the file or folder name (the hub id for a name), with ``@revision``."""
    labels: list[str] = []
    for e in entries:
        base = Path(e.model).name if os.sep in e.model or Path(e.model).exists() else e.model
        label = base + (f"@{e.revision}" if e.revision else "")
        if label in labels:
            label = f"{label} ({sum(x.startswith(label) for x in labels) + 1})"
        labels.append(label)
    return labels


def _policy(cards: Sequence[dict]) -> str:
    """The cards' policy (each test at its own α; Holm's correction says how many hold), over every card."""
    tested = [
        (v["status"], float(v["p_value"]))
        for c in cards
        for s in c["sections"]
        for v in s["verdicts"]
        if v["status"] in ("beats its null", "not significant") and v.get("p_value") is not None
    ]
    if not tested:
        return "no verdict on this page comes from a test: every number is descriptive, with what it is compared to"
    return holm_policy(tested, f" across the {len(cards)} cards")


def _warnings(rows: Sequence[ModelRow]) -> list[str]:
    out = []
    read = {r.corpus for r in rows if r.corpus is not None}
    if len(read) > 1:
        out.append(
            "the models read different corpora (their attention, residual-stream and causal numbers are not measured "
            "on the same text): " + "; ".join(f"{r.label}: {r.corpus}" for r in rows if r.corpus is not None)
        )
    if len({r.fast for r in rows}) > 1:
        fast = ", ".join(r.label for r in rows if r.fast)
        out.append(
            f"fast and full cards are mixed (fast: {fast}): fast cards read fewer, shorter contexts and skip the causal edits"
        )
    if len({r.version for r in rows}) > 1:
        out.append(
            "the cards were made by different pos_geometry versions: "
            + ", ".join(f"{r.label}: {r.version}" for r in rows)
        )
    return out


def _drop_stale_cards(cards: Path, kept: set[Path]) -> None:
    """Remove the card folders an earlier comparison made in ``cards`` that this one does not show (a folder
    holding anything but a card's files is left alone)."""
    import shutil

    from pos_geometry.cards.folder import CARD_FILES

    if not cards.is_dir():
        return
    for path in cards.iterdir():
        card = path.is_dir() and not path.is_symlink() and (path / "card.json").is_file()
        if card and path.resolve() not in kept and all(p.name in CARD_FILES for p in path.iterdir()):
            shutil.rmtree(path, ignore_errors=True)


def compare(
    models: Sequence[str | os.PathLike[str]],
    out: str | os.PathLike[str] | None = None,
    *,
    corpus: Any = None,
    fast: bool = False,
    seq_len: int | None = None,
    n_sequences: int | None = None,
    device: Device = "auto",
    random_state: int = 0,
    force: bool = False,
    progress: Progress = None,
) -> Comparison:
    """Compare the positional cards of ``models``: a verdict matrix (models × claims) and overlays.

    Args:
        models: two or more, each a card folder (read from its ``card.json``) or a model as
            :func:`~pos_geometry.card` takes it, optionally ``MODEL@REVISION``.
        out: the comparison's folder: ``index.html``, ``compare.json``, ``compare.md``, ``plotly.min.js``, and
            ``cards/NN-name/`` for each card made here. None: nothing is written (cards made here go to a
            temporary folder and the results cache).
        corpus, fast, seq_len, n_sequences, device, random_state: the options of the cards made here
            (:func:`~pos_geometry.card`); cards read from folders keep their own, and the page warns when they differ.
        force: make the cards again even when the results cache holds them.
        progress: each card made here shows its own (None: a bar in a terminal or Jupyter; True/False; a
            callable ``(sections done, total)``).

    Returns:
        a :class:`~pos_geometry.comparison.result.Comparison`.

    Raises:
        InvalidArgumentError: fewer than two models, a folder that is not a comparison's, or a card of
            another format; what :func:`~pos_geometry.card` raises for a model it cannot find.
    """
    items = [os.fspath(m) for m in models] if not isinstance(models, str | os.PathLike) else None
    if items is None or len(items) < 2:
        raise InvalidArgumentError(
            f"compare needs two or more models or card folders; got {models!r}. Pass a list: compare(['gpt2', 'card_dir'])."
        )
    folder = check_compare_folder(out) if out is not None else None
    text = os.fspath(corpus) if isinstance(corpus, str | os.PathLike) else corpus
    options = {"fast": fast, "seq_len": seq_len, "n_sequences": n_sequences, "random_state": random_state,
               "device": device, "plotlyjs": "directory", "static": ()}  # fmt: skip
    with tempfile.TemporaryDirectory(prefix="pos_geometry-compare-") as scratch:
        cards_dir = folder / "cards" if folder is not None else Path(scratch)
        entries = [
            card_entry(arg, i, cards_dir, corpus=text, options=options, force=force, progress=progress)
            for i, arg in enumerate(items)
        ]
    if folder is not None:
        _drop_stale_cards(folder / "cards", {e.folder.resolve() for e in entries})
    labels = _labels(entries)
    cards = [e.data for e in entries]
    rows = tuple(
        ModelRow(
            label=label, argument=e.argument, model=e.model, kind=str(e.data["kind"]), revision=e.revision,
            origin=e.origin, corpus=e.data.get("corpus"), fast=bool(e.data.get("fast")), created=str(e.data["created"]),
            version=str((e.data.get("provenance") or {}).get("package_version", "unknown")),
            card=str(e.folder.resolve()) if folder is not None or e.origin == "card folder" else None,
        )
        for label, e in zip(labels, entries, strict=True)
    )  # fmt: skip
    cells = tuple(card_cells(c) for c in cards)
    result = Comparison(
        models=rows,
        claims=tuple(CLAIMS),
        cells=cells,
        series=comparison_series(labels, cards, entries, cells),
        warnings=tuple(_warnings(rows)),
        policy=_policy(cards),
        created=datetime.now(timezone.utc).isoformat(timespec="seconds"),
    )
    if folder is not None:
        result.save(folder)
    return result

"""What ``compare`` reads: each argument as one model's card, as its ``card.json`` holds it.

An argument is a card folder (a folder holding ``card.json``: read, never recomputed) or a model, as
:func:`~pos_geometry.card` takes it (a name, hub id, folder, ``.gguf`` file or table file), optionally at a
revision written ``MODEL@REVISION`` (a hub model's branch, tag or commit: ``EleutherAI/pythia-70m@step3000``).
A model's card is made through the results cache (:mod:`~pos_geometry.cards.cache`, the same keys as
``pos-geometry card``): a card already made with the same inputs is copied, not recomputed. Either way the
comparison reads the card's JSON, so a card computed now and one read from disk are the same data.
"""

from __future__ import annotations

import json
import os
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from pos_geometry.cards.result import CARD_FORMAT
from pos_geometry.errors import InvalidArgumentError

__all__ = ["CardEntry", "card_entry", "is_card_folder", "read_card", "split_revision"]

ORIGINS = ("card folder", "results cache", "computed")
"""Where an entry's card came from: read from a folder given as an argument, copied from the results cache, or
made by this comparison."""


@dataclass(frozen=True)
class CardEntry:
    """One compared model: the argument, its card's JSON, and where the card is.

    Attributes:
        argument: the argument as given.
        model: the model (the card's own ``model`` field).
        revision: the revision asked for (``MODEL@REVISION``), else None.
        data: the card as ``card.json`` holds it.
        origin: one of :data:`ORIGINS`.
        folder: the card's folder.
    """

    argument: str
    model: str
    revision: str | None
    data: dict[str, Any]
    origin: str
    folder: Path


def _shown(path: Any) -> str:
    from pos_geometry._describe import printable

    return repr(printable(os.fspath(path), 300))


def is_card_folder(argument: str | os.PathLike[str]) -> bool:
    """Whether ``argument`` is a folder holding a card (``card.json``)."""
    path = Path(argument).expanduser()
    return path.is_dir() and (path / "card.json").is_file()


def read_card(folder: str | os.PathLike[str]) -> dict[str, Any]:
    """The card in ``folder`` as its ``card.json`` holds it, checked to be one this version reads.

    Raises:
        InvalidArgumentError: no ``card.json``, not a card's JSON, or a card of another format (the message
            says how to make it again).
    """
    path = Path(folder).expanduser() / "card.json"
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise InvalidArgumentError(
            f"{_shown(Path(folder))} holds no card.json; give a card folder (written by pos-geometry card) or a model."
        ) from None
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise InvalidArgumentError(
            f"{_shown(path)} is not a card's JSON ({exc}); make the card again with pos-geometry card MODEL --out "
            f"{_shown(Path(folder))} --force."
        ) from None
    if not isinstance(data, dict) or data.get("type") != "Card":
        raise InvalidArgumentError(f'{_shown(path)} is not a positional card\'s JSON (no "type": "Card").')
    found = data.get("format")
    if found != CARD_FORMAT:
        made = (data.get("provenance") or {}).get("package_version", "an unknown version")
        said = "none (made before card formats were numbered)" if found is None else repr(found)
        raise InvalidArgumentError(
            f"the card in {_shown(Path(folder))} was made by pos_geometry {made} in card format {said}; this version "
            f"compares format {CARD_FORMAT}. Make it again: pos-geometry card MODEL --out {_shown(Path(folder))} --force."
        )
    return data


def split_revision(argument: str) -> tuple[str, str | None]:
    """``(model, revision)`` of ``MODEL@REVISION``; an argument that is a path on disk, or has no ``@``, is a
    model at no revision."""
    if "@" not in argument or Path(argument).expanduser().exists():
        return argument, None
    model, _, revision = argument.rpartition("@")
    if not model or not revision:
        raise InvalidArgumentError(
            f"a model at a revision is written MODEL@REVISION (EleutherAI/pythia-70m@step3000); got {argument!r}."
        )
    return model, revision


def _slug(index: int, argument: str) -> str:
    name = re.sub(r"[^A-Za-z0-9._-]+", "_", Path(argument).name or argument).strip("._") or "model"
    return f"{index + 1:02d}-{name[:60]}"


def card_entry(
    argument: str,
    index: int,
    cards: Path,
    *,
    corpus: str | None,
    options: dict[str, Any],
    force: bool,
    progress: Any = None,
) -> CardEntry:
    """The card of ``argument`` (the ``index``-th compared): read from a card folder, or made into
    ``cards/<NN-name>`` through the results cache (``options``: ``pos-geometry card``'s, revision aside)."""
    if is_card_folder(argument):
        folder = Path(argument).expanduser()
        data = read_card(folder)
        return CardEntry(argument, str(data.get("model", argument)), None, data, "card folder", folder)
    from pos_geometry.cards import card
    from pos_geometry.cards.cache import card_key, through_cache
    from pos_geometry.cards.folder import hold_card_folder

    model, revision = split_revision(argument)
    chosen = {**options, "revision": revision}

    def make(folder: Path) -> None:
        made = card(
            model, corpus, fast=chosen["fast"], seq_len=chosen["seq_len"], n_sequences=chosen["n_sequences"],
            revision=revision, device=chosen["device"], random_state=chosen["random_state"], progress=progress,
        )  # fmt: skip
        made.save(folder, plotlyjs=chosen["plotlyjs"], static=chosen["static"])

    with hold_card_folder(cards / _slug(index, argument)) as folder:
        cached = through_cache(card_key(model, corpus, **chosen), folder, make, force=force)
        origin = "results cache" if cached else "computed"
        return CardEntry(argument, model, revision, read_card(folder), origin, folder)

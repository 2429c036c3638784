"""Published numbers we compare against, read from the checkout's ``data/reference/*.json``.

Each file holds a ``citation`` and ``values``: ``{key: {"value", "definition", "rows", "where",
"verified", ...}}`` (see ``data/README.md``). The folder is found beside the package's checkout (or
``$POS_GEOMETRY_REFERENCE``); an installed package without a checkout has none, and every reader
here then answers None instead of failing.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

from pos_geometry.errors import CheckpointFormatError

__all__ = ["REFERENCE_ENV", "PublishedValue", "published_value", "reference", "reference_dir"]

REFERENCE_ENV = "POS_GEOMETRY_REFERENCE"
"""Environment variable naming the folder of reference files; when set, it replaces ``<checkout>/data/reference``."""


def reference_dir() -> Path | None:
    """``$POS_GEOMETRY_REFERENCE``, else ``<checkout>/data/reference``; None when the folder does not exist."""
    from pos_geometry.sources.locations import checkout_data

    folder = checkout_data(REFERENCE_ENV, "reference")
    return folder if folder is not None and folder.is_dir() else None


def reference(name: str) -> dict[str, Any] | None:
    """The parsed ``<name>.json`` (e.g. ``"song_zhong_2023"``), or None when there is no such file."""
    folder = reference_dir()
    path = folder / f"{name}.json" if folder is not None else None
    if path is None or not path.is_file():
        return None
    from pos_geometry._json import loads

    try:
        text = path.read_text(encoding="utf-8")
    except (OSError, ValueError) as exc:
        raise CheckpointFormatError(
            f"{str(path)!r} cannot be read ({exc}); fix it or restore it from git."
        ) from None
    data = loads(text, repr(str(path)), fix="Fix it or restore it from git.")
    if not isinstance(data, dict) or not isinstance(data.get("citation"), dict):
        raise CheckpointFormatError(f"{str(path)!r} must be a JSON object with a 'citation' object; fix it.")
    return data


@dataclass(frozen=True)
class PublishedValue:
    """One published number: ``value``, what it is (``definition``, ``rows``), who published it
    (``source``: a short citation) and where it was read (``where``, ``verified``)."""

    key: str
    value: float
    source: str
    definition: str
    rows: tuple[int, int] | None
    where: str
    verified: str
    approximate: bool = False


def _short(citation: dict[str, Any]) -> str:
    authors = citation.get("authors") or [citation.get("author", "")]
    names = " & ".join(a.split()[-1] for a in authors if a)
    when = citation.get("year") or str(citation.get("date", ""))[:4]
    return f'{names} ({when}), "{citation.get("title", "")}"'


def published_value(name: str, key: str) -> PublishedValue | None:
    """The value ``key`` of reference file ``name``, or None when the file or the key is absent."""
    data = reference(name)
    entry = (data or {}).get("values", {}).get(key)
    if not isinstance(entry, dict) or not isinstance(entry.get("value"), int | float):
        return None
    rows = entry.get("rows")
    return PublishedValue(
        key=key,
        value=float(entry["value"]),
        source=_short(data["citation"]),
        definition=str(entry.get("definition", "")),
        rows=(int(rows[0]), int(rows[1])) if isinstance(rows, list) and len(rows) == 2 else None,
        where=str(entry.get("where", "")),
        verified=str(entry.get("verified", "")),
        approximate=bool(entry.get("approximate", False)),
    )

"""The results cache of cards: a card made again with the same inputs is copied, not recomputed.

A card's key is a SHA-256 over everything that decides its numbers: the pos_geometry version and the card format; the model as it is
on disk (for a file, its path, size and modification time; for a folder, those of every file in it; for a
model-table name or hub id, where it resolves, ``folder`` or ``repo@commit``); the corpus's bytes (the default
text included); and the options (``fast``, ``seq_len``, ``n_sequences``, ``random_state``, ``revision``,
``device`` as resolved, ``plotlyjs``, the static formats). A hit holds the card's files as they were written
(``$POS_GEOMETRY_CACHE/cards/<key>/``, stored whole through :func:`~pos_geometry.cards.folder.write_card_folder`),
and the card folder is written from them. ``--force`` recomputes.
"""

from __future__ import annotations

import hashlib
import json
import os
from collections.abc import Callable
from pathlib import Path
from typing import Any

from pos_geometry.cards.folder import CARD_FILES, write_card_folder

__all__ = ["card_key", "cached_card", "store_card", "through_cache"]


def _stat(path: Path) -> list[Any]:
    st = path.stat()
    return [path.name, st.st_size, st.st_mtime_ns]


def _model_identity(model: str, revision: str | None) -> list[Any]:
    """What the model is, as cheaply as it can be told: files by stat, names by where they resolve."""
    path = Path(model).expanduser()
    if path.is_file():
        return ["file", str(path.resolve()), *_stat(path)]
    if path.is_dir():
        files = sorted(p for p in path.iterdir() if p.is_file())
        return ["folder", str(path.resolve()), *(_stat(p) for p in files)]
    from pos_geometry.sources.opening import open_checkpoint

    checkpoint = open_checkpoint(model, revision=revision, offline=True)
    location = Path(str(checkpoint.location))
    if location.exists():
        return ["name", model, *_model_identity(str(location), None)]
    return ["name", model, str(checkpoint.location), checkpoint.commit]


def _corpus_identity(corpus: Any) -> str | None:
    """The SHA-256 of the corpus's bytes (the default text when ``corpus`` is None), or None when not hashable."""
    import numpy as np

    if corpus is None:
        from pos_geometry.cards.corpus import default_corpus

        corpus = default_corpus()
        if corpus is None:
            return "random tokens"
    if isinstance(corpus, str | os.PathLike):
        digest = hashlib.sha256()
        with open(corpus, "rb") as fh:
            for block in iter(lambda: fh.read(1 << 20), b""):
                digest.update(block)
        return digest.hexdigest()
    array = np.ascontiguousarray(np.asarray(corpus))
    return hashlib.sha256(array.tobytes() + str((array.dtype, array.shape)).encode()).hexdigest()


def card_key(model: Any, corpus: Any = None, **options: Any) -> str | None:
    """The results-cache key of a card (see the module docstring), or None when the model cannot be told
    without computing (it is then never cached)."""
    from pos_geometry._device import resolve_device
    from pos_geometry._version import __version__
    from pos_geometry.errors import PosGeometryError

    options = dict(options)
    if "device" in options:
        options["device"] = resolve_device(options["device"]).type
    try:
        identity = _model_identity(os.fspath(model), options.get("revision"))
        text = _corpus_identity(corpus)
    except (PosGeometryError, OSError):
        return None
    from pos_geometry.cards.result import CARD_FORMAT

    payload = {
        "version": __version__,
        "format": CARD_FORMAT,
        "model": identity,
        "corpus": text,
        "options": options,
    }
    return hashlib.sha256(json.dumps(payload, sort_keys=True, default=str).encode()).hexdigest()


def _entry(key: str) -> Path:
    from pos_geometry.sources.cache import cache_dir

    return cache_dir() / "cards" / key


def cached_card(key: str | None, out: str | os.PathLike[str]) -> tuple[list[Path], dict[str, Any]] | None:
    """Write the cached card ``key`` as the folder ``out``; ``(paths, card.json as a dict)``, or None on a miss."""
    if key is None:
        return None
    entry = _entry(key)
    if not (entry / "card.json").is_file() or not (entry / "index.html").is_file():
        return None
    files = {p.name: p.read_bytes() for p in entry.iterdir() if p.name in CARD_FILES and p.is_file()}
    data = json.loads(files["card.json"])
    return write_card_folder(out, files), data


def through_cache(
    key: str | None, folder: Path, make: Callable[[Path], object], *, force: bool = False
) -> bool:
    """Write the card ``key`` as the folder ``folder``: copied from the results cache when it holds it (and not
    ``force``), else made by ``make(folder)`` and then kept under ``key``. Returns whether it came from the cache.
    The caller holds the folder's writer lock (:func:`~pos_geometry.cards.folder.hold_card_folder`)."""
    if not force and cached_card(key, folder) is not None:
        return True
    make(folder)
    store_card(key, folder)
    return False


def store_card(key: str | None, folder: str | os.PathLike[str]) -> None:
    """Keep the card folder ``folder`` under ``key`` (whole, or not at all)."""
    if key is None:
        return
    files = {p.name: p.read_bytes() for p in Path(folder).iterdir() if p.name in CARD_FILES and p.is_file()}
    write_card_folder(_entry(key), files)

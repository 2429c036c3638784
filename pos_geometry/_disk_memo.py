"""Answers that depend only on their inputs, the installed transformers and pos_geometry's own code, kept
on disk as JSON so transformers' heavier modules are imported once per answer, not once per process.

A memo lives at ``$POS_GEOMETRY_CACHE/<kind>/transformers-<version>/<key>.json``, ``key`` a SHA-256 of the
inputs (canonical JSON) and of the source of the modules that compute the answer, so a new transformers
or a changed computation computes again. Files are written whole (a temporary file renamed into place);
one that does not read back is ignored and replaced (:func:`~pos_geometry._files.atomic_write`). An answer that does not survive a JSON round trip
unchanged (tuples, non-string keys) is not stored.
"""

from __future__ import annotations

import contextlib
import functools
import hashlib
import importlib.metadata
import json
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from pos_geometry._files import atomic_write, cache_dir

__all__ = ["memo_path", "recall", "remember"]


@functools.lru_cache(maxsize=16)
def _code_digest(sources: tuple[Path, ...]) -> str:
    digest = hashlib.sha256()
    for path in sources:
        digest.update(path.read_bytes())
    return digest.hexdigest()


def _transformers_version() -> str:
    try:
        return importlib.metadata.version("transformers")
    except importlib.metadata.PackageNotFoundError:
        return "none"


def memo_path(kind: str, inputs: str, sources: Sequence[Path]) -> Path:
    """Where the answer of ``kind`` for ``inputs`` (canonical JSON), computed by the code in ``sources``, is kept."""
    key = hashlib.sha256((_code_digest(tuple(sources)) + "\n" + inputs).encode()).hexdigest()[:40]
    return cache_dir() / kind / f"transformers-{_transformers_version()}" / f"{key}.json"


def recall(kind: str, inputs: str, sources: Sequence[Path]) -> Any:
    """The stored answer (parsed JSON), or None when there is none or its file does not read back."""
    try:
        data = json.loads(memo_path(kind, inputs, sources).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    return data.get("answer") if isinstance(data, dict) else None


def remember(kind: str, inputs: str, sources: Sequence[Path], answer: Any) -> None:
    """Store ``answer`` (JSON-able) whole; one that a JSON round trip would change, or a cache that cannot be
    written, is simply not stored (the answer is computed again next time)."""
    try:
        text = json.dumps({"answer": answer}, sort_keys=True, allow_nan=False)
    except (TypeError, ValueError):
        return
    if json.loads(text)["answer"] != answer:
        return
    with contextlib.suppress(OSError):
        atomic_write(memo_path(kind, inputs, sources), text)

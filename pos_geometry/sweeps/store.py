"""The resumable result store of a sweep: one file per finished checkpoint, written atomically.

Layout under the store's root::

    <quoted revision>.safetensors    the PCA fit's arrays (basis, coordinates, mean, variances) as
                                     tensors; the record (metrics, provenance, commit, status) and the
                                     analysis config's fingerprint as JSON metadata

A file is written to a temporary name beside it and moved into place with ``os.replace``
(:func:`pos_geometry._files.atomic_write`), so an interrupted run (Ctrl-C, a kill, a crash) leaves each
checkpoint either absent or complete; a re-run reads the complete ones and skips them (and removes the
temporary file a killed run may have left, :func:`remove_stale_temporaries`). A file that does
not parse is ignored (and recomputed), and so is one written under another analysis config or for a
commit other than the one the revision now resolves to. Only results and pinned-commit failures (corrupt,
non-finite, missing tensor) are stored; network failures are retried by the next run.
"""

from __future__ import annotations

import hashlib
import json
from pathlib import Path
from typing import Any
from urllib.parse import quote

import numpy as np

from pos_geometry._files import atomic_write, remove_stale_temporaries
from pos_geometry.analysis._results import to_jsonable
from pos_geometry.sweeps.record import STORED_FAILURES, CheckpointRecord, Outcome

__all__ = ["FORMAT", "SweepStore", "remove_stale_temporaries"]

FORMAT = "pos_geometry.sweeps/1"
_SUFFIX = ".safetensors"


def _file_name(revision: str) -> str:
    name = quote(revision, safe="-_.+=")
    if len(name) > 180 or name.startswith("."):
        name = "sha256-" + hashlib.sha256(revision.encode()).hexdigest()
    return name + _SUFFIX


class SweepStore:
    """Per-checkpoint results under ``root`` (created on the first write)."""

    def __init__(self, root: str | Path) -> None:
        self.root = Path(root).expanduser()

    def path(self, revision: str) -> Path:
        return self.root / _file_name(revision)

    def _open(self, revision: str) -> tuple[dict[str, str], Path] | None:
        from safetensors import SafetensorError, safe_open

        path = self.path(revision)
        if not path.is_file():
            return None
        try:
            with safe_open(str(path), framework="np") as fh:
                meta = fh.metadata() or {}
        except (SafetensorError, OSError, ValueError):
            return None
        if meta.get("format") != FORMAT:
            return None
        return meta, path

    def get(self, revision: str, fingerprint: str, commit: str | None = None) -> CheckpointRecord | None:
        """The stored record of ``revision`` made under ``fingerprint`` (and ``commit`` when given), else None."""
        found = self._open(revision)
        if found is None or found[0].get("fingerprint") != fingerprint:
            return None
        from pos_geometry._json import loads

        try:
            record = CheckpointRecord.from_dict(loads(found[0]["record"], "a stored sweep record"))
        except (
            KeyError,
            ValueError,
            TypeError,
        ):  # unreadable (a CheckpointFormatError is a ValueError): recompute
            return None
        if record.revision != revision or (commit is not None and record.commit != commit):
            return None
        return record

    def arrays(self, revision: str) -> dict[str, np.ndarray]:
        """The stored arrays of ``revision`` (empty when none)."""
        from safetensors import SafetensorError, safe_open

        try:
            with safe_open(str(self.path(revision)), framework="np") as fh:
                return {k: fh.get_tensor(k) for k in fh.keys()}  # noqa: SIM118 (safe_open is no mapping)
        except (SafetensorError, OSError, ValueError):
            return {}

    def put(self, outcome: Outcome, fingerprint: str) -> bool:
        """Store ``outcome`` atomically if it is a result or a stored failure; returns whether it was stored."""
        from safetensors.numpy import save

        record = outcome.record
        if not (record.ok or record.status in STORED_FAILURES):
            return False
        meta: dict[str, Any] = {
            "format": FORMAT,
            "fingerprint": fingerprint,
            "record": json.dumps(to_jsonable(record.to_dict()), allow_nan=False),
        }
        arrays = {k: np.ascontiguousarray(v) for k, v in outcome.arrays.items()}
        atomic_write(self.path(record.revision), save(arrays, metadata=meta))
        return True

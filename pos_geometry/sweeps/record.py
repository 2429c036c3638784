"""One checkpoint's outcome in a sweep: its metrics, or why it was skipped."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import numpy as np

from pos_geometry.embedding import Provenance

__all__ = ["STATUSES", "STORED_FAILURES", "CheckpointRecord", "Outcome"]

STATUSES: tuple[str, ...] = ("ok", "missing", "corrupt", "non-finite", "unreachable", "error")
"""``ok``; ``missing`` (no such revision, or no positional tensor in it); ``corrupt`` (a file that does not
parse); ``non-finite`` (NaN/inf in the table); ``unreachable`` (network or server failure: retried by the
next run); ``error`` (an internal error: retried by the next run, and worth reporting)."""
STORED_FAILURES: tuple[str, ...] = ("corrupt", "non-finite", "missing")
"""Failures of a pinned commit: they do not change, so they are stored and not retried by a re-run."""


@dataclass(frozen=True)
class CheckpointRecord:
    """What the sweep knows about one revision.

    ``status`` is one of :data:`STATUSES` with ``reason`` in words (empty when ok); ``commit`` the
    resolved commit (None when it could not be resolved); ``bytes_read``/``requests``: range-read body
    bytes and requests spent on it by this run (0 when it came from the result store or a cache);
    ``resumed``: it came from the result store of an earlier run; ``metrics``: name -> value (see
    :mod:`pos_geometry.sweeps.metrics`), empty unless ok; ``provenance``: of the table (None unless ok).
    """

    revision: str
    step: int | None
    status: str
    reason: str = ""
    commit: str | None = None
    bytes_read: int = 0
    requests: int = 0
    resumed: bool = False
    metrics: dict[str, Any] = field(default_factory=dict)
    provenance: Provenance | None = None

    @property
    def ok(self) -> bool:
        return self.status == "ok"

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready; :meth:`from_dict` inverts it."""
        return {
            "revision": self.revision, "step": self.step, "status": self.status, "reason": self.reason,
            "commit": self.commit, "bytes_read": self.bytes_read, "requests": self.requests,
            "resumed": self.resumed, "metrics": dict(self.metrics),
            "provenance": None if self.provenance is None else self.provenance.to_dict(),
        }  # fmt: skip

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> CheckpointRecord:
        prov = data.get("provenance")
        return cls(
            revision=str(data["revision"]), step=data.get("step"), status=str(data["status"]),
            reason=str(data.get("reason", "")), commit=data.get("commit"),
            bytes_read=int(data.get("bytes_read", 0)), requests=int(data.get("requests", 0)),
            resumed=bool(data.get("resumed", False)), metrics=dict(data.get("metrics") or {}),
            provenance=None if prov is None else Provenance.from_dict(prov),
        )  # fmt: skip

    def row(self) -> dict[str, Any]:
        """One flat row of the tidy table: identity, status, transfer, provenance fields, then metrics."""
        prov = self.provenance
        return {
            "revision": self.revision, "step": self.step, "commit": self.commit, "status": self.status,
            "reason": self.reason, "bytes_read": self.bytes_read, "requests": self.requests,
            "resumed": self.resumed,
            "tensor_key": prov.tensor_key if prov else None, "source": prov.source if prov else None,
            "stored_dtype": prov.original_dtype if prov else None,
            "row_offset": prov.row_offset if prov else None,
            **self.metrics,
        }  # fmt: skip


@dataclass(frozen=True)
class Outcome:
    """What a checkpoint task hands back: the record and the arrays to store (the PCA fit)."""

    record: CheckpointRecord
    arrays: dict[str, np.ndarray] = field(default_factory=dict)

"""The work on one checkpoint: read its table, or a rotary model's q/k weights (pinned to a commit), analyse
them, say what went wrong.

:func:`run_checkpoint` is what an executor runs, locally or on a Dask worker. It is a pure function of
its :class:`CheckpointTask` (a small picklable record): it writes nothing but the pos_geometry cache
(kept only with ``keep_tables``) and returns an :class:`~pos_geometry.sweeps.record.Outcome`; the
result store is written by the process that drives the sweep. On a worker it reads from the Hub with
that worker's own environment (``HF_ENDPOINT``, ``HF_TOKEN``).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from pos_geometry.errors import (
    AccessDeniedError,
    CheckpointFormatError,
    MissingTensorError,
    NonFiniteError,
    NotCachedError,
    PosGeometryError,
    RemoteError,
    RevisionNotFoundError,
    UnsafeCheckpointError,
)
from pos_geometry.sweeps.metrics import SweepConfig, analyse
from pos_geometry.sweeps.record import CheckpointRecord, Outcome
from pos_geometry.sweeps.revisions import checkpoint_step

__all__ = ["CheckpointTask", "run_checkpoint", "status_of"]


@dataclass(frozen=True)
class CheckpointTask:
    """One checkpoint to read and analyse.

    ``repo_id`` at ``commit`` (resolved beforehand; None: resolve ``revision`` here), ``model_id`` for
    provenance, ``config`` the analyses (its ``kind`` says whether a positional table or a rotary model's
    q/k weights are read). Learned tables: ``row_offset`` leading rows that are not positions, ``key`` a
    tensor key (None: the positional table), ``filename`` the weight file tried first, ``probe`` bytes of
    its first request. ``keep_tables``: keep what the analysis cached (the table; the atlas's sums).
    """

    repo_id: str
    model_id: str
    revision: str
    commit: str | None
    config: SweepConfig
    row_offset: int = 0
    key: str | None = None
    filename: str = "model.safetensors"
    probe: int = 32 * 1024
    keep_tables: bool = False


def status_of(exc: BaseException) -> str:
    """The record status of a failure (see :data:`~pos_geometry.sweeps.record.STATUSES`)."""
    if isinstance(exc, RevisionNotFoundError | MissingTensorError):
        return "missing"
    if isinstance(exc, NonFiniteError):
        return "non-finite"
    if isinstance(exc, CheckpointFormatError | UnsafeCheckpointError):
        return "corrupt"
    if isinstance(exc, RemoteError | NotCachedError | AccessDeniedError):
        return "unreachable"
    return "error"


def _read(task: CheckpointTask):
    from pos_geometry._record_tables import embedding_from_record
    from pos_geometry.sources.hub import read_hub_tensor, read_hub_tensor_pinned

    if task.commit is None:
        record, commit = read_hub_tensor(task.repo_id, revision=task.revision, key=task.key)
    else:
        commit = task.commit
        record = read_hub_tensor_pinned(
            task.repo_id, commit, revision=task.revision, key=task.key, filename=task.filename,
            probe=task.probe, cache=task.keep_tables,
        )  # fmt: skip
    emb = embedding_from_record(
        record, model_id=task.model_id, revision=task.revision, commit=commit, row_offset=task.row_offset
    )
    return emb, commit


def _learned(task: CheckpointTask) -> tuple[dict, dict, Any, str | None]:
    emb, commit = _read(task)
    metrics, arrays = analyse(emb, task.config)
    return {"n_positions": emb.n_positions, "d_model": emb.d_model, **metrics}, arrays, emb.provenance, commit


def _rotary(task: CheckpointTask) -> tuple[dict, dict, Any, str | None]:
    from pos_geometry.sweeps.rotary import atlas_metrics, does_not_apply, read_atlas

    atlas = read_atlas(task)
    metrics, arrays = atlas_metrics(atlas)
    return {**metrics, **does_not_apply(task.model_id)}, arrays, atlas.provenance, atlas.provenance.commit


def run_checkpoint(task: CheckpointTask) -> Outcome:
    """Read ``task``'s table (learned) or q/k weights (rotary) and analyse them; a failure of the checkpoint
    is an outcome, not an exception.

    Missing, corrupt and non-finite checkpoints, and network failures, come back as records with their
    status and reason. Anything else that goes wrong is recorded as ``"error"`` with its type, so one
    bad checkpoint never ends a sweep of hundreds.
    """
    from pos_geometry.sources.http import count_transfers

    step = checkpoint_step(task.revision)
    commit = task.commit
    work = _rotary if task.config.kind == "rotary" else _learned
    with count_transfers() as count:
        try:
            metrics, arrays, provenance, commit = work(task)
        except PosGeometryError as exc:
            status = status_of(exc)
            reason = f"{type(exc).__name__}: {exc}"
            return Outcome(
                CheckpointRecord(
                    task.revision, step, status, reason, commit, count.bytes_read, count.requests
                )
            )
        except Exception as exc:  # a bug: recorded, retried by the next run, never silent
            reason = (
                f"internal error ({type(exc).__name__}: {str(exc)[:300]}); this is a bug in pos_geometry, "
                "please report it"
            )
            return Outcome(
                CheckpointRecord(
                    task.revision, step, "error", reason, commit, count.bytes_read, count.requests
                )
            )
    record = CheckpointRecord(
        task.revision, step, "ok", "", commit, count.bytes_read, count.requests, False, metrics, provenance
    )
    return Outcome(record, arrays)

"""``sweep``: the positional table of every training checkpoint of a model, read, analysed and stored.

The data flow::

    model + revisions ──(model table, or one refs request)──► revisions pinned to commits
        ──► result store: finished checkpoints are skipped (no request at all)
        ──► executor: run_checkpoint per remaining revision (range reads + analyses), concurrently
        ──► each outcome stored atomically as it arrives ──► drift between checkpoints ──► SweepResult
"""

from __future__ import annotations

import dataclasses
import os
import warnings
from pathlib import Path
from typing import Any

from pos_geometry._describe import describe
from pos_geometry.errors import InvalidArgumentError, NotApplicableError, RemoteError
from pos_geometry.sweeps.executors import collect, describe_executor, run_tasks
from pos_geometry.sweeps.metrics import SweepConfig, add_drift
from pos_geometry.sweeps.progress import SweepProgress
from pos_geometry.sweeps.record import CheckpointRecord, Outcome
from pos_geometry.sweeps.result import SweepResult
from pos_geometry.sweeps.revisions import checkpoint_step, published_from_refs, select_revisions
from pos_geometry.sweeps.store import SweepStore
from pos_geometry.sweeps.task import CheckpointTask

__all__ = ["sweep"]


@dataclasses.dataclass(frozen=True)
class _Model:
    name: str
    repo_id: str
    row_offset: int | None  # None: read from config.json
    published: tuple[str, ...]
    filename: str


def _rotary(name: str) -> NotApplicableError:
    return NotApplicableError(
        f"{name} is a rotary model: it has no learned positional table to sweep (its rotary table does not "
        "change with training). Its position lives in the query/key weights: run "
        f"pos_geometry.rotary_atlas({name!r}, revision=...) per checkpoint."
    )


def _resolve_model(model: str) -> _Model:
    from pos_geometry.loading import _looks_like_repo_id
    from pos_geometry.registry import find_spec, get_spec

    if not isinstance(model, str) or not model:
        raise InvalidArgumentError(
            f"model must be a model-table name or a hub repo id ('org/name'); got {describe(model)}."
        )
    spec = find_spec(model)
    if spec is None:
        if not _looks_like_repo_id(model):
            get_spec(model)  # UnknownModelError with the closest names
        return _Model(model, model, None, (), "model.safetensors")
    if spec.kind == "rotary":
        raise _rotary(spec.name)
    schedule = spec.schedule
    files = [f for f in spec.weight_files if "index" not in f]  # a single-file checkpoint: read it directly
    return _Model(
        spec.name, spec.repo_id, spec.row_offset, schedule.revisions if schedule else (),
        files[0] if files else "model.safetensors",
    )  # fmt: skip


def _refs(repo_id: str) -> dict[str, str]:
    from pos_geometry.sources.hub import is_offline, list_refs

    if is_offline():
        return {}
    try:
        return list_refs(repo_id)
    except RemoteError as exc:
        warnings.warn(
            f"could not list the branches of {repo_id!r} ({exc}); each checkpoint is resolved on its own.",
            RuntimeWarning,
            stacklevel=3,
        )
        return {}


def _row_offset(model: _Model, revision: str, commit: str | None) -> int:
    if model.row_offset is not None:
        return model.row_offset
    from pos_geometry.registry import kind_from_config, row_offset_from_config
    from pos_geometry.sources.hub import read_config

    config, _ = read_config(model.repo_id, commit or revision)
    if kind_from_config(config) == "rotary":
        raise _rotary(model.repo_id)
    return row_offset_from_config(config)


def _missing(revision: str, repo_id: str, published: tuple[str, ...]) -> CheckpointRecord:
    have = (
        f" It publishes {len(published)} checkpoints ({published[0]}..{published[-1]})." if published else ""
    )
    reason = (
        f"RevisionNotFoundError: {repo_id!r} has no branch, tag or commit {revision!r}.{have} "
        "Check the name, or leave it out of revisions."
    )
    return CheckpointRecord(revision, checkpoint_step(revision), "missing", reason)


def _default_store(repo_id: str) -> Path:
    from pos_geometry.sources.cache import cache_dir

    return cache_dir() / "sweeps" / repo_id.replace("/", "--")


def sweep(
    model: str,
    revisions: Any = "all",
    *,
    analyses: Any = "all",
    n_components: int = 10,
    n_surrogates: int = 199,
    alpha: float = 0.01,
    random_state: int = 0,
    window: Any = None,
    executor: Any = "local",
    n_workers: int | None = None,
    out: str | os.PathLike[str] | None = None,
    store: str | os.PathLike[str] | None = None,
    resume: bool = True,
    keep_tables: bool = False,
    progress: bool | None = None,
) -> SweepResult:
    """Read the positional table of each training checkpoint of ``model`` and measure it.

    Args:
        model: a model-table name with a checkpoint schedule (``"stanford-crfm/alias-gpt2-small-x21"``,
            ``"crfm-gpt2-small-x21"``) or any hub repo id whose checkpoints are branches.
        revisions: ``"all"``, ``"every:N"``, ``"log:N"`` or a list of revision names / steps
            (:func:`~pos_geometry.sweeps.revisions.select_revisions`).
        analyses: ``"all"``, ``"cheap"`` (norms, PCA, drift: no null) or a list from
            :data:`~pos_geometry.sweeps.metrics.ANALYSES`; ``n_components``, ``n_surrogates``, ``alpha``,
            ``random_state``, ``window``: their parameters (:class:`~pos_geometry.sweeps.metrics.SweepConfig`).
        executor: ``"local"`` (a pool of ``n_workers`` threads, default 8), a Dask scheduler address
            (``"tcp://host:8786"``), a ``dask.distributed.Client``, or any ``concurrent.futures.Executor``.
        out: also write ``metrics.csv``, ``metrics.parquet`` and ``sweep.json`` there; the store then
            defaults to ``out/checkpoints``.
        store: the result store (default ``out/checkpoints``, else
            ``$POS_GEOMETRY_CACHE/sweeps/<org>--<name>``). Each checkpoint's result is written there
            atomically as soon as it is done; ``resume=True`` skips the ones already there (same
            analyses and parameters, same commit) without any request.
        keep_tables: also keep each table in the pos_geometry tensor cache (``load`` then reads it
            without the network; ~3 MB per GPT-2-small checkpoint).
        progress: a progress bar on stderr (default: when stderr is a terminal).

    Returns:
        a :class:`~pos_geometry.sweeps.result.SweepResult`, one record per revision in training order;
        missing, corrupt and non-finite checkpoints (and network failures) are records with their reason.

    Per checkpoint the Hub sees two ranged ``GET`` requests (the safetensors header, the tensor) and
    nothing else: the revisions are pinned to commits by one request for the repo's branches.
    """
    config = SweepConfig.make(
        analyses, n_components=n_components, n_surrogates=n_surrogates, alpha=alpha,
        random_state=random_state, window=window,
    )  # fmt: skip
    executor_label = describe_executor(executor, n_workers)  # validates it before any request
    info = _resolve_model(model)
    refs = _refs(info.repo_id)
    published = info.published or published_from_refs(refs)
    selected = select_revisions(revisions, published, model=info.name)
    root = (
        Path(store)
        if store is not None
        else Path(out) / "checkpoints"
        if out is not None
        else _default_store(info.repo_id)
    )
    results = SweepStore(root)
    fingerprint = config.fingerprint()

    from pos_geometry.sources.cache import is_commit

    records: dict[str, CheckpointRecord] = {}
    pending: list[tuple[str, str | None]] = []
    for revision in selected:
        commit = refs.get(revision) or (revision if is_commit(revision) else None)
        if refs and commit is None:
            records[revision] = _missing(revision, info.repo_id, published)
            continue
        stored = results.get(revision, fingerprint, commit) if resume else None
        if stored is not None:
            records[revision] = dataclasses.replace(stored, resumed=True, bytes_read=0, requests=0)
        else:
            pending.append((revision, commit))
    n_resumed = sum(r.resumed for r in records.values())

    tasks = []
    if pending:
        offset = _row_offset(info, *pending[-1])
        tasks = [
            CheckpointTask(
                info.repo_id,
                info.name,
                rev,
                commit,
                config,
                offset,
                filename=info.filename,
                keep_tables=keep_tables,
            )
            for rev, commit in pending
        ]
    label = f"{info.name}" + (f" ({n_resumed} resumed)" if n_resumed else "")
    bytes_read = requests = 0
    with SweepProgress(len(tasks), label, progress) as bar:

        def done(outcome: Outcome) -> None:
            nonlocal bytes_read, requests
            results.put(outcome, fingerprint)  # atomic: complete or absent
            record = outcome.record
            records[record.revision] = record
            bytes_read += record.bytes_read
            requests += record.requests
            bar.advance(record.bytes_read, failed=not record.ok)

        collect(run_tasks(tasks, executor, n_workers), done)

    ordered = [records[r] for r in selected]
    if "drift" in config.analyses:
        ordered = _with_drift(ordered, results)
    result = SweepResult(
        model=info.name, repo_id=info.repo_id, revisions=selected, records=tuple(ordered), config=config,
        executor=executor_label, store=str(root), bytes_read=bytes_read, requests=requests,
        n_computed=len(tasks), n_resumed=n_resumed,
    )  # fmt: skip
    if out is not None:
        result.write(out)
    return result


def _with_drift(records: list[CheckpointRecord], store: SweepStore) -> list[CheckpointRecord]:
    """The records with the drift columns, reading the stored bases (only the top 3 are kept in memory)."""
    from pos_geometry.sweeps.metrics import DRIFT_COMPONENTS as K

    bases = []
    for record in records:
        arrays = store.arrays(record.revision) if record.ok else {}
        if "components" in arrays:
            bases.append((arrays["components"][:K].copy(), arrays["coordinates"][:, :K].copy()))
        else:
            bases.append(None)
    drift = add_drift(bases, [r.revision for r in records])
    return [
        dataclasses.replace(r, metrics={**r.metrics, **d}) if d else r
        for r, d in zip(records, drift, strict=True)
    ]

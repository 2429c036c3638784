"""``sweep``: the positional table (or a rotary model's q/k weights) of every training checkpoint of a model,
read, analysed and stored.

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
from pos_geometry._progress import Progress
from pos_geometry.analysis._inputs import Window
from pos_geometry.errors import InvalidArgumentError, RemoteError
from pos_geometry.sweeps.executors import collect, describe_executor, run_tasks
from pos_geometry.sweeps.metrics import SweepConfig, add_drift
from pos_geometry.sweeps.progress import SweepProgress
from pos_geometry.sweeps.record import CheckpointRecord, Outcome
from pos_geometry.sweeps.result import SweepResult
from pos_geometry.sweeps.revisions import checkpoint_step, published_from_refs, select_revisions
from pos_geometry.sweeps.store import SweepStore, remove_stale_temporaries
from pos_geometry.sweeps.task import CheckpointTask

__all__ = ["sweep"]


@dataclasses.dataclass(frozen=True)
class _Model:
    name: str
    repo_id: str
    row_offset: int | None  # None: read from config.json
    published: tuple[str, ...]
    filename: str
    kind: str | None  # "learned" | "rotary"; None: read from config.json


def _resolve_model(model: str) -> _Model:
    from pos_geometry._name_targets import looks_like_repo_id
    from pos_geometry.registry import find_spec, get_spec

    if not isinstance(model, str) or not model:
        raise InvalidArgumentError(
            f"model must be a model-table name or a hub repo id ('org/name'); got {describe(model)}."
        )
    spec = find_spec(model)
    if spec is None:
        if not looks_like_repo_id(model):
            get_spec(model)  # UnknownModelError with the closest names
        return _Model(model, model, None, (), "model.safetensors", None)
    schedule = spec.schedule
    files = [f for f in spec.weight_files if "index" not in f]  # a single-file checkpoint: read it directly
    return _Model(
        spec.name, spec.repo_id, spec.row_offset, schedule.revisions if schedule else (),
        files[0] if files else "model.safetensors", "rotary" if spec.kind == "rotary" else "learned",
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


def _from_config(model: _Model, revision: str, commit: str | None, gguf_file: str | None = None) -> _Model:
    """``model`` with its kind and row offset read from ``config.json`` (or the GGUF file's header) at
    ``revision`` where the model table does not give them (one small request the first time; the HF cache
    answers re-runs)."""
    if model.kind is not None and (model.kind == "rotary" or model.row_offset is not None):
        return model
    from pos_geometry.registry import kind_from_config, row_offset_from_config
    from pos_geometry.sources.hub import read_config
    from pos_geometry.sources.opening import open_checkpoint

    if gguf_file is not None:
        config = open_checkpoint(model.repo_id, revision=commit or revision, gguf_file=gguf_file).config
    else:
        config, _ = read_config(model.repo_id, commit or revision)
    kind = "rotary" if kind_from_config(config) == "rotary" else "learned"
    offset = row_offset_from_config(config) if kind == "learned" else None
    return dataclasses.replace(model, kind=kind, row_offset=offset)


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
    window: Window = None,
    executor: Any = "local",
    n_workers: int | None = None,
    out: str | os.PathLike[str] | None = None,
    store: str | os.PathLike[str] | None = None,
    resume: bool = True,
    keep_tables: bool = False,
    progress: Progress = None,
    layers: Any = None,
    fold_norm: bool = False,
    gguf_file: str | None = None,
    null_method: str = "fast",
    sequential: bool = True,
) -> SweepResult:
    """Read the positional table (or, for a rotary model, the query/key weights) of each training checkpoint
    of ``model`` and measure it.

    Args:
        model: a model-table name with a checkpoint schedule (``"stanford-crfm/alias-gpt2-small-x21"``,
            ``"crfm-gpt2-small-x21"``, ``"pythia-70m"``) or any hub repo id whose checkpoints are branches.
            A rotary model (Pythia, Llama, ...) is swept through its frequency atlas
            (:mod:`pos_geometry.sweeps.rotary`): per checkpoint only its q/k tensors (and, with
            ``fold_norm``, the norm gains) are read, and the learned-table verdicts are recorded as
            "does not apply".
        revisions: ``"all"``, ``"every:N"``, ``"log:N"`` or a list of revision names / steps
            (:func:`~pos_geometry.sweeps.revisions.select_revisions`).
        analyses: ``"all"``, ``"cheap"`` (norms, PCA, drift: no null) or a list from
            :data:`~pos_geometry.sweeps.metrics.ANALYSES`; ``n_components``, ``n_surrogates``, ``alpha``,
            ``random_state``, ``window``, ``null_method``, ``sequential``: their parameters
            (:class:`~pos_geometry.sweeps.metrics.SweepConfig`; ``null_method`` and ``sequential`` as in
            :func:`~pos_geometry.analysis.pipeline.analyze`).
            A rotary model's analyses are ``"atlas"`` and ``"drift"`` (both cheap; ``"all"``/``"cheap"``).
        layers, fold_norm: a rotary model's atlas: the layers read (None: all) and whether the norm gain
            is folded in (:func:`~pos_geometry.atlas.rotary.rotary_atlas`).
        gguf_file: read each checkpoint's ``.gguf`` file of this name (rotary models; its header, then
            only the q/k tensors, at the checkpoint's commit) instead of its transformers weights.
        executor: ``"local"`` (a pool of ``n_workers`` threads, default 8), a Dask scheduler address
            (``"tcp://host:8786"``), a ``dask.distributed.Client``, or any ``concurrent.futures.Executor``.
        out: also write ``metrics.csv``, ``metrics.parquet`` and ``sweep.json`` there; the store then
            defaults to ``out/checkpoints``.
        store: the result store (default ``out/checkpoints``, else
            ``$POS_GEOMETRY_CACHE/sweeps/<org>--<name>``). Each checkpoint's result is written there
            atomically as soon as it is done; ``resume=True`` skips the ones already there (same
            analyses and parameters, same commit) without any request.
        keep_tables: also keep what each checkpoint's analysis cached (learned: its table, ~3 MB per
            GPT-2-small checkpoint; rotary: the atlas's per-tensor sums, a few KiB each), so ``load`` or
            ``rotary_atlas`` of it later makes no request.
        progress: a bar of the checkpoints done on stderr (None: when stderr is a terminal or in
            Jupyter; True/False: always/never; a callable: called with ``(done, total)`` instead).

    Returns:
        a :class:`~pos_geometry.sweeps.result.SweepResult`, one record per revision in training order;
        missing, corrupt and non-finite checkpoints (and network failures) are records with their reason.

    Per checkpoint of a learned model the Hub sees two ranged ``GET`` requests (the safetensors header, the
    tensor) and nothing else: the revisions are pinned to commits by one request for the repo's branches.
    Per checkpoint of a rotary model: its listing, config.json, one ``HEAD`` and the header of the weight
    file (small), and one ranged ``GET`` per q/k tensor.
    """
    options = dict(
        n_components=n_components, n_surrogates=n_surrogates, alpha=alpha, random_state=random_state,
        window=window, layers=layers, fold_norm=fold_norm, gguf_file=gguf_file, null_method=null_method,
        sequential=sequential,
    )  # fmt: skip
    executor_label = describe_executor(executor, n_workers)  # validates it before any request
    info = _resolve_model(model)
    # validated before any request where the model table knows the kind; else once config.json tells it
    config = SweepConfig.make(analyses, kind=info.kind, **options) if info.kind else None
    refs = _refs(info.repo_id)
    published = info.published or published_from_refs(refs)
    selected = select_revisions(revisions, published, model=info.name)
    anchor = next((r for r in reversed(selected) if r in refs), selected[-1])  # the last one that exists
    info = _from_config(info, anchor, refs.get(anchor), gguf_file)
    config = config or SweepConfig.make(analyses, kind=info.kind, **options)
    root = (
        Path(store)
        if store is not None
        else Path(out) / "checkpoints"
        if out is not None
        else _default_store(info.repo_id)
    )
    results = SweepStore(root)
    remove_stale_temporaries(root)  # a run killed mid-write (SIGKILL) leaves its temporary file
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

    tasks = [
        CheckpointTask(
            info.repo_id, info.name, rev, commit, config, info.row_offset or 0, filename=info.filename,
            keep_tables=keep_tables,
        )
        for rev, commit in pending
    ]  # fmt: skip
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
        ordered = _with_drift(ordered, results, config.kind)
    result = SweepResult(
        model=info.name, repo_id=info.repo_id, revisions=selected, records=tuple(ordered), config=config,
        executor=executor_label, store=str(root), bytes_read=bytes_read, requests=requests,
        n_computed=len(tasks), n_resumed=n_resumed,
    )  # fmt: skip
    if out is not None:
        result.write(out)
    return result


def _with_drift(records: list[CheckpointRecord], store: SweepStore, kind: str) -> list[CheckpointRecord]:
    """The records with the drift columns, reading the stored bases (only the top 3 are kept in memory) or,
    for a rotary model, the stored plane shares."""
    from pos_geometry.sweeps.metrics import DRIFT_COMPONENTS as K
    from pos_geometry.sweeps.rotary import add_usage_drift

    items: list[Any] = []
    for record in records:
        arrays = store.arrays(record.revision) if record.ok else {}
        if kind == "rotary":
            items.append(arrays.get("qk_share"))
        elif "components" in arrays:
            items.append((arrays["components"][:K].copy(), arrays["coordinates"][:, :K].copy()))
        else:
            items.append(None)
    names = [r.revision for r in records]
    drift = add_usage_drift(items, names) if kind == "rotary" else add_drift(items, names)
    return [
        dataclasses.replace(r, metrics={**r.metrics, **d}) if d else r
        for r, d in zip(records, drift, strict=True)
    ]

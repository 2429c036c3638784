"""Read one tensor (the positional table) from a Hugging Face Hub repo, fetching only its bytes.

:func:`read_hub_tensor` looks in this order, stopping at the first hit:

1. pos_geometry's own cache (:mod:`pos_geometry.sources.cache`), keyed by resolved commit;
2. weight files already in the Hugging Face cache (:mod:`pos_geometry.sources.hf_cache`),
   read lazily from disk;
3. the network: the repo's file list at that revision (one ``model_info`` call, which also
   resolves the commit), then for ``model.safetensors`` the header and the tensor's byte
   range; for an index, the (small) index json then the shard's header and the tensor's
   range; for ``pytorch_model.bin``, the zip central directory, ``data.pkl`` and the one
   storage record. The tensor is then stored in the pos_geometry cache, so a second call
   makes no request.

Offline (``HF_HUB_OFFLINE=1`` as ``huggingface_hub.constants`` sees it, or
``POS_GEOMETRY_OFFLINE=1``) only steps 1 and 2 run. All endpoint, auth and cache
handling is huggingface_hub's (``hf_hub_url``, ``get_hf_file_metadata``, ``hf_hub_download``),
except the model listing and the refs, which :mod:`pos_geometry.sources.hub_api` reads with a
bound on their size and time; every error becomes a pos_geometry error naming the repo, the
revision and the fix.
"""

from __future__ import annotations

import dataclasses
import warnings
from pathlib import Path
from urllib.parse import quote

from huggingface_hub import constants, get_hf_file_metadata, hf_hub_url
from huggingface_hub import errors as hf_errors
from huggingface_hub.utils import validate_repo_id

from pos_geometry._limits import read_config_json
from pos_geometry._names import check_revision_name
from pos_geometry.errors import (
    CheckpointFormatError,
    InvalidArgumentError,
    NotCachedError,
    RemoteError,
)
from pos_geometry.sources import hub_api
from pos_geometry.sources._deadline import bounded, deadline, remaining
from pos_geometry.sources.cache import cache_dir, cached_ref, cached_table, is_commit, store_ref, store_tensor
from pos_geometry.sources.hf_cache import hf_cached_ref, hf_cached_revisions, read_from_hf_cache
from pos_geometry.sources.http import HttpByteSource, transport_errors
from pos_geometry.sources.hub_errors import download_hint, hub_errors, listing, repo_at
from pos_geometry.sources.local import read_checkpoint_tensor
from pos_geometry.sources.metadata_files import metadata_file
from pos_geometry.sources.network import offline_reason
from pos_geometry.sources.sharded import (
    INDEX_SUFFIX,
    WEIGHT_FILES,
    ordered_weight_files,
    parse_index,
    shard_for,
)
from pos_geometry.sources.tensor_record import TensorRecord, Which, check_which

__all__ = [
    "is_offline",
    "resolve_commit",
    "read_config",
    "read_hub_tensor",
    "read_hub_tensor_pinned",
    "list_refs",
]

DEFAULT_PROBE = 32 * 1024
"""Bytes :func:`read_hub_tensor_pinned` asks for first: a GPT-2 small safetensors header is ~15 KB."""


def is_offline(offline: bool | None = None) -> bool:
    """Whether the network is off limits (:mod:`pos_geometry.sources.network`: one policy for every command).

    ``offline=True`` forces it; ``HF_HUB_OFFLINE`` (as ``huggingface_hub.constants`` sees it) or
    ``$POS_GEOMETRY_OFFLINE`` set true decide next (``offline=False`` cannot override them, since
    huggingface_hub itself refuses the network then); with ``offline=None`` a hub that cannot be reached
    (probed once) counts as offline too.
    """
    return offline_reason(offline) is not None


def _check_repo_id(repo_id: str) -> None:
    with hub_errors(repo_id, None):
        validate_repo_id(repo_id)


def _model_info(repo_id: str, revision: str) -> tuple[str, tuple[str, ...]]:
    """(commit, repo-relative filenames) of ``repo_id`` at ``revision``: one API request."""
    url = f"{constants.ENDPOINT}/api/models/{repo_id}/revision/{quote(revision, safe='')}"
    with hub_errors(repo_id, revision, "model info"):
        sha, files = hub_api.model_listing(repo_id, revision)
    if not is_commit(sha):
        raise CheckpointFormatError(
            f"{constants.ENDPOINT} returned no commit hash (sha={sha!r}) for {repo_at(repo_id, revision)}; "
            "HF_ENDPOINT does not look like a Hugging Face Hub. Check it."
        )
    if is_commit(revision) and sha != revision:
        raise RemoteError(
            f"{url} answered with commit {sha} when commit {revision} was asked for: a listing of another "
            "version cannot stand for it. Check HF_ENDPOINT and any proxy in between."
        )
    return sha, files


def _local_commit(repo_id: str, revision: str) -> str | None:
    if is_commit(revision):
        return revision
    return cached_ref(repo_id, revision) or hf_cached_ref(repo_id, revision)


def resolve_commit(repo_id: str, revision: str | None = None, *, offline: bool | None = None) -> str:
    """The 40-hex commit that ``revision`` (default ``"main"``; a branch, tag, ``checkpoint-N``,
    ``stepN`` or commit) of ``repo_id`` points to.

    Online this asks the Hub (one ``model_info`` request; a commit hash is returned as is).
    Offline it reads the HF cache's ``refs/<revision>``, then pos_geometry's own ref index.

    Raises:
        UnknownModelError: no such repo (or private without a token).
        RevisionNotFoundError: the repo has no such revision (the message lists those it has).
        NotCachedError: offline (or the Hub unreachable) and the revision was never resolved here.
    """
    _check_repo_id(repo_id)
    rev = check_revision_name(revision or constants.DEFAULT_REVISION)
    if is_commit(rev):
        return rev
    if is_offline(offline):
        commit = hf_cached_ref(repo_id, rev) or cached_ref(repo_id, rev)
        if commit is None:
            known = sorted(set(hf_cached_revisions(repo_id)))
            have = f" Cached revisions: {listing(known)}." if known else ""
            raise NotCachedError(
                f"{offline_reason(offline)}, and revision {rev!r} of {repo_id!r} was never resolved on this machine "
                f"(no refs/{rev} in {constants.HF_HUB_CACHE} nor in the pos_geometry cache).{have} "
                + download_hint(repo_id, rev)
            )
        return commit
    return _model_info(repo_id, rev)[0]


def read_config(
    repo_id: str, revision: str | None = None, *, offline: bool | None = None
) -> tuple[dict, str]:
    """``(config.json contents, commit)`` of ``repo_id`` at ``revision``, via the HF cache.

    Downloads it into the HF cache with a bound that holds while it streams
    (:func:`~pos_geometry.sources.metadata_files.metadata_file`), so it works offline once fetched; reads
    nothing but ``config.json``.
    """
    _check_repo_id(repo_id)
    rev = check_revision_name(revision or constants.DEFAULT_REVISION)
    with deadline(), hub_errors(repo_id, rev, "config.json"):
        local = is_offline(offline)
        path = metadata_file(repo_id, "config.json", rev, offline=local)
    commit = (
        path.parent.name if is_commit(path.parent.name) else resolve_commit(repo_id, rev, offline=offline)
    )
    config = read_config_json(path, f"config.json of {repo_at(repo_id, rev)} ({path})")
    return config, commit


def _remote_source(repo_id: str, commit: str, filename: str) -> HttpByteSource:
    """An :class:`HttpByteSource` on ``filename`` at ``commit`` (one HEAD for size and location)."""
    url = hf_hub_url(repo_id, filename, revision=commit)
    with transport_errors(url):
        meta = bounded(lambda: get_hf_file_metadata(url, timeout=remaining(url, 10.0)), url)
    if meta.size is None:
        raise CheckpointFormatError(
            f"{constants.ENDPOINT} did not report the size of {filename} in {repo_id!r}@{commit[:10]}; it "
            "cannot be read by byte ranges. Download it with `hf download` and load the local file."
        )
    return HttpByteSource(meta.location, name=f"{repo_id}@{commit[:10]}/{filename}", size=int(meta.size))


def _checked_origin(src: HttpByteSource) -> str:
    """The record's origin. A source whose server sent no version validator (ETag, Last-Modified, the commit
    headers) cannot be pinned: every range is read again and compared before the table is used or cached,
    and the origin says so."""
    if src.pinned:
        return constants.ENDPOINT
    src.verify()
    return (
        f"{constants.ENDPOINT}; the server sent no ETag, Last-Modified or commit header to pin the file's "
        "version, so every range was read twice and compared"
    )


def _read_remote(
    repo_id: str,
    revision: str,
    commit: str,
    files: tuple[str, ...],
    which: Which,
    key: str | None,
    hints: _Hints,
) -> TensorRecord:
    """Read the table over HTTP from the first weight file of ``files`` (see module docstring)."""
    present = [name for name in ordered_weight_files(hints.files) if name in files]
    if not present:
        raise CheckpointFormatError(
            f"{repo_at(repo_id, revision)} (commit {commit[:10]}) has none of the weight files "
            f"{', '.join(WEIGHT_FILES)}; it has: {listing(sorted(files)) or 'no files'}. Pass another "
            "revision, or download a checkpoint and load it with read_local()."
        )
    name, wanted = present[0], key
    with hub_errors(repo_id, revision, name):
        if name.endswith(INDEX_SUFFIX):
            index_path = metadata_file(repo_id, name, commit)
            source = f"{repo_id}@{commit[:10]}/{name}"
            index = parse_index(Path(index_path).read_bytes(), source)
            wanted, name = shard_for(index, which, key, source, hints.preferred)
        src = _remote_source(repo_id, commit, name)
        record = read_checkpoint_tensor(src, which=which, key=wanted, preferred=hints.preferred)
        origin = _checked_origin(src)
    return dataclasses.replace(record, file=name, origin=origin)


def read_hub_tensor(
    repo_id: str,
    *,
    revision: str | None = None,
    which: Which = "position",
    key: str | None = None,
    offline: bool | None = None,
    preferred: str | None = None,
    files: tuple[str, ...] = (),
) -> tuple[TensorRecord, str]:
    """``(record, commit)``: the ``which`` table (or tensor ``key``) of ``repo_id`` at ``revision``.

    ``preferred`` and ``files`` are a model-table row's tensor key and weight files: the key is taken
    when the checkpoint holds it (else the usual keys are searched), the files are tried first.

    ``record.tensor`` is on CPU in the stored dtype and shape (e.g. ``(1024, 768)`` float32 for
    GPT-2's ``transformer.wpe.weight``); ``record.file`` is the repo-relative file it came from.
    Looks in the pos_geometry cache, then the HF cache, then reads only the needed bytes from
    the Hub and caches them (see the module docstring).

    A branch name resolved before is remembered: the second call makes no request, even if the
    branch moved since. Pass a commit hash, or clear the cache, to pick up a newer commit.

    Raises:
        UnknownModelError, RevisionNotFoundError: see :func:`resolve_commit`.
        NotCachedError: offline (or the Hub unreachable) and not cached; says how to fetch it.
        MissingTensorError: the checkpoint holds no such table (lists its keys).
        CheckpointFormatError: the repo has no weight file, or a file is malformed, or the server
            does not honour HTTP Range requests.
    """
    check_which(which)
    _check_repo_id(repo_id)
    rev = check_revision_name(revision or constants.DEFAULT_REVISION)
    commit = _local_commit(repo_id, rev)
    if commit is not None:
        hints = _Hints(preferred, tuple(files))
        hit = _cached(repo_id, commit, which, key, hints)
        if hit is not None:
            return hit, commit
    if is_offline(offline):
        known = f" (revision {rev!r} resolves to {commit[:10]} locally)" if commit else ""
        raise NotCachedError(
            f"{offline_reason(offline)}, and the {which} table of {repo_at(repo_id, rev)} is in neither the pos_geometry cache "
            f"nor the HF cache{known}. " + download_hint(repo_id, rev)
        )
    with deadline():
        return _fetch_remote(repo_id, rev, commit, which, key, _Hints(preferred, tuple(files)))


@dataclasses.dataclass(frozen=True)
class _Hints:
    """A model-table row's tensor key (taken when present) and weight files (tried first)."""

    preferred: str | None = None
    files: tuple[str, ...] = ()


def _cached(repo_id: str, commit: str, which: Which, key: str | None, hints: _Hints) -> TensorRecord | None:
    return cached_table(repo_id, commit, which, key, hints.preferred) or read_from_hf_cache(
        repo_id, commit, which, key, hints.preferred, hints.files
    )


def _fetch_remote(
    repo_id: str, rev: str, commit: str | None, which: Which, key: str | None, hints: _Hints
) -> tuple[TensorRecord, str]:
    """The network half of :func:`read_hub_tensor`: list, read, cache (within the load's deadline)."""
    remote_commit, files = _model_info(repo_id, rev)
    if remote_commit != commit:
        hit = _cached(repo_id, remote_commit, which, key, hints)
        if hit is not None:
            _remember(repo_id, rev, remote_commit, None)
            return hit, remote_commit
    record = _read_remote(repo_id, rev, remote_commit, files, which, key, hints)
    _remember(repo_id, rev, remote_commit, record)
    return record, remote_commit


def _remember(repo_id: str, revision: str, commit: str, record: TensorRecord | None) -> None:
    """Cache the tensor and the ref; a cache that cannot be written only costs a warning."""
    try:
        if record is not None:
            store_tensor(repo_id, commit, record)
        store_ref(repo_id, revision, commit)
    except OSError as exc:
        warnings.warn(
            f"pos_geometry could not write its cache under {cache_dir()} ({exc}); {repo_id!r} will be "
            "fetched again next time. Set POS_GEOMETRY_CACHE to a writable directory.",
            RuntimeWarning,
            stacklevel=3,
        )


def list_refs(repo_id: str) -> dict[str, str]:
    """Every branch and tag of ``repo_id`` with the commit it points to (one API request).

    For a training run published as branches (``checkpoint-N``, ``stepN``) this pins every checkpoint
    at once, instead of one ``model_info`` request per checkpoint.
    """
    _check_repo_id(repo_id)
    with deadline(), hub_errors(repo_id, None, "branches and tags"):
        refs = hub_api.refs(repo_id)
    return {name: commit for name, commit in refs.items() if is_commit(commit)}


def read_hub_tensor_pinned(
    repo_id: str,
    commit: str,
    *,
    revision: str | None = None,
    which: Which = "position",
    key: str | None = None,
    filename: str = "model.safetensors",
    probe: int = DEFAULT_PROBE,
    cache: bool = True,
) -> TensorRecord:
    """:func:`read_hub_tensor` for a revision already pinned to ``commit``, in as few requests as possible.

    The pos_geometry and HF caches are read first (no request). Otherwise ``filename`` at ``commit``
    is opened with one ranged ``GET`` of its first ``probe`` bytes (no file listing, no ``HEAD``;
    :meth:`HttpByteSource.open_first`), which holds the safetensors header when it is shorter, and the
    tensor is a second ``GET`` of exactly its bytes. A repo without ``filename`` (a ``.bin`` or a
    sharded checkpoint) falls back to :func:`read_hub_tensor`. ``cache=False`` keeps the tensor out of
    the pos_geometry cache (a sweep of hundreds of checkpoints keeps only its results).
    """
    check_which(which)
    _check_repo_id(repo_id)
    if not is_commit(commit):
        raise InvalidArgumentError(f"commit must be a 40-hex commit hash; got {commit!r}.")
    rev = check_revision_name(revision or commit)
    hit = cached_table(repo_id, commit, which, key) or read_from_hf_cache(repo_id, commit, which, key)
    if hit is not None:
        return hit
    if is_offline():
        raise NotCachedError(
            f"{offline_reason()}, and the {which} table of {repo_at(repo_id, rev)} (commit {commit[:10]}) is in neither "
            "the pos_geometry cache nor the HF cache. " + download_hint(repo_id, rev)
        )
    url = hf_hub_url(repo_id, filename, revision=commit)
    with deadline(), hub_errors(repo_id, rev, filename):
        try:
            src = HttpByteSource.open_first(url, probe, name=f"{repo_id}@{commit[:10]}/{filename}")
        except hf_errors.RemoteEntryNotFoundError:  # another layout: list the files, read it the general way
            return read_hub_tensor(repo_id, revision=commit, which=which, key=key)[0]
        record = read_checkpoint_tensor(src, which=which, key=key)
        record = dataclasses.replace(record, file=filename, origin=_checked_origin(src))
    if cache:
        _remember(repo_id, rev, commit, record)
    return record

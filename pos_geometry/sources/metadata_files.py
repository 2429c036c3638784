"""Small files a load needs whole (``config.json``, a shard index), downloaded into the Hugging Face cache
with a bound that holds while they stream.

``huggingface_hub.hf_hub_download`` writes a whole file before anyone can look at its size, so a hostile or
broken server could fill the disk with a "config" and leave it in the cache. :func:`metadata_file` reads the
file's size, commit and ETag with one ``HEAD`` (``get_hf_file_metadata``), refuses a file over
``POS_GEOMETRY_MAX_METADATA_BYTES`` (default 64 MiB) before any byte of it, then streams it and stops as
soon as it passes the announced size or the limit. Only a complete file enters the cache: it is held in
memory until it is whole, then written by the package's one atomic writer (``blobs/<etag>``), then linked from
``snapshots/<commit>/<filename>`` and, for a branch or tag, ``refs/<revision>``: the layout huggingface_hub
reads (`Understand caching`), so ``try_to_load_from_cache`` and offline loads find it. Offline, the file is
taken from the cache as ``hf_hub_download(local_files_only=True)`` finds it.
"""

from __future__ import annotations

import contextlib
import hashlib
import os
import re
from pathlib import Path

from huggingface_hub import get_hf_file_metadata, hf_hub_download, hf_hub_url
from huggingface_hub.utils import hf_raise_for_status

from pos_geometry._files import atomic_write
from pos_geometry._limits import MAX_METADATA_BYTES, limit
from pos_geometry._names import check_file_name, check_revision_name
from pos_geometry.errors import CheckpointFormatError, RemoteError
from pos_geometry.sources._deadline import bounded, remaining
from pos_geometry.sources.cache import is_commit
from pos_geometry.sources.hf_cache import hf_repo_dir
from pos_geometry.sources.http_transport import hub_headers, open_stream, transport_errors

__all__ = ["metadata_file"]

_BLOB = re.compile(r"[0-9A-Za-z_-]{1,128}")


def metadata_file(repo_id: str, filename: str, revision: str, *, offline: bool = False) -> Path:
    """The local path of ``filename`` of ``repo_id`` at ``revision`` (a commit, branch or tag), from the HF
    cache, downloaded into it first when online (module docstring). Hub errors (no such repo, revision or
    file; gated) are huggingface_hub's own, for the caller's :func:`~pos_geometry.sources.hub_errors.hub_errors`.

    Raises:
        CheckpointFormatError: the file is (or streams) over ``POS_GEOMETRY_MAX_METADATA_BYTES``, or longer
            than the server announced.
        RemoteError: the transfer failed, or the server did not say which commit it served.
    """
    check_file_name(filename)
    check_revision_name(revision)
    url = hf_hub_url(repo_id, filename, revision=revision)
    if offline:
        return Path(hf_hub_download(repo_id, filename, revision=revision, local_files_only=True))
    with transport_errors(url):
        meta = bounded(lambda: get_hf_file_metadata(url, timeout=remaining(url, 10.0)), url)
    commit = meta.commit_hash or (revision if is_commit(revision) else None)
    if commit is None or not is_commit(commit):
        raise RemoteError(
            f"{url}: the server did not say which commit it served (no X-Repo-Commit header), so the file cannot "
            "be kept in the HF cache under one version. Check HF_ENDPOINT, or pass a commit as the revision."
        )
    cap = limit(MAX_METADATA_BYTES)
    if meta.size is not None and meta.size > cap:
        raise _too_large(repo_id, filename, f"is {meta.size:,} bytes", cap)
    repo = hf_repo_dir(repo_id)
    snapshot = repo / "snapshots" / commit / filename
    etag = (meta.etag or "").strip('"').removeprefix("W/").strip('"')
    blob = repo / "blobs" / etag if _BLOB.fullmatch(etag) else None
    if blob is None or not blob.is_file():
        blob = _download(meta.location or url, repo / "blobs", etag, meta.size, cap, repo_id, filename)
    _link(snapshot, blob)
    if not is_commit(revision):
        atomic_write(repo / "refs" / revision, commit)
    return snapshot


def _too_large(repo_id: str, filename: str, what: str, cap: int) -> CheckpointFormatError:
    return CheckpointFormatError(
        f"{filename} of {repo_id!r} {what}, over the limit of {cap:,} bytes for a metadata file set by "
        f"{MAX_METADATA_BYTES}; nothing was kept. A real {filename} is far smaller: check the repository, or "
        f"raise the limit ({MAX_METADATA_BYTES}=<bytes>) for a file you trust."
    )


def _download(
    url: str, blobs: Path, etag: str, size: int | None, cap: int, repo_id: str, filename: str
) -> Path:
    """Read ``url`` whole, bounded by ``size`` and ``cap`` while it streams (a metadata file is small: it is
    held in memory, never on disk, until it is complete and checked), then write it atomically to its blob
    name (the ETag, or the SHA-256 of its bytes when the ETag is not a safe file name)."""
    bound = min(cap, size) if size is not None else cap
    body = bytearray()
    with transport_errors(url):
        headers = {**hub_headers(url), "Accept-Encoding": "identity"}
        with open_stream(url, headers, remaining(url, 10.0)) as response:
            if response.status_code >= 400:
                response.read()
                hf_raise_for_status(response)
            for chunk in response.iter_bytes():
                remaining(url)  # the load's overall deadline, as the body trickles in
                if len(body) + len(chunk) > bound:
                    what = (
                        f"streamed more than the {size:,} bytes its server announced"
                        if size is not None and size < cap
                        else f"streamed past {cap:,} bytes"
                    )
                    raise _too_large(repo_id, filename, what, cap)
                body += chunk
    if size is not None and len(body) != size:
        raise CheckpointFormatError(
            f"{filename} of {repo_id!r}: the transfer ended after {len(body):,} of the {size:,} bytes the "
            "server announced; nothing was kept. Retry."
        )
    name = etag if _BLOB.fullmatch(etag) else hashlib.sha256(body).hexdigest()
    return atomic_write(blobs / name, bytes(body))


def _link(snapshot: Path, blob: Path) -> None:
    """``snapshot`` pointing at ``blob`` (a relative symlink, as huggingface_hub makes, replaced atomically; a
    copy where the file system has no symlinks, as huggingface_hub falls back to)."""
    snapshot.parent.mkdir(parents=True, exist_ok=True)
    temporary = snapshot.with_name(f".{snapshot.name}.{os.getpid()}-{os.urandom(4).hex()}.tmp")
    try:
        temporary.symlink_to(os.path.relpath(blob, snapshot.parent))
        os.replace(temporary, snapshot)
    except OSError:
        atomic_write(snapshot, blob.read_bytes())
    finally:
        with contextlib.suppress(OSError):
            temporary.unlink()

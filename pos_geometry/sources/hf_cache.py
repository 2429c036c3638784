"""Files already in the Hugging Face cache, read lazily and locally (no network).

The HF cache (``huggingface_hub.constants.HF_HUB_CACHE``, i.e. ``$HF_HUB_CACHE`` or
``$HF_HOME/hub``) stores a repo as ``models--<org>--<name>/`` with ``refs/<revision>``
(the commit a branch or tag resolved to) and ``snapshots/<commit>/<filename>``.
When the weight file (or the shard that holds the table) is there, the table is read
from it with the same byte-range parsers used on remote files: only the header and the
tensor's bytes are read from disk.
"""

from __future__ import annotations

import dataclasses
import os
from pathlib import Path

from huggingface_hub import constants, try_to_load_from_cache
from huggingface_hub.file_download import repo_folder_name

from pos_geometry._names import check_file_name, check_revision_name, inside
from pos_geometry.sources.byte_source import FileByteSource
from pos_geometry.sources.cache import is_commit
from pos_geometry.sources.local import read_checkpoint_tensor
from pos_geometry.sources.sharded import INDEX_SUFFIX, ordered_weight_files, parse_index, shard_for
from pos_geometry.sources.tensor_record import TensorRecord, Which

__all__ = ["hf_repo_dir", "hf_cached_ref", "hf_cached_file", "hf_cached_revisions", "read_from_hf_cache"]


def hf_repo_dir(repo_id: str) -> Path:
    """``<HF_HUB_CACHE>/models--<org>--<name>`` (it may not exist)."""
    return Path(constants.HF_HUB_CACHE) / repo_folder_name(repo_id=repo_id, repo_type="model")


def hf_cached_ref(repo_id: str, revision: str) -> str | None:
    """The commit ``refs/<revision>`` of the HF cache points to, else ``None``."""
    if is_commit(revision):
        return revision
    check_revision_name(revision)
    path = hf_repo_dir(repo_id) / "refs" / revision
    if path.exists():
        inside(path, hf_repo_dir(repo_id))  # a planted link under refs/ must not lead out of the cache
    try:
        commit = path.read_text().strip()
    except (OSError, ValueError):
        return None
    return commit if is_commit(commit) else None


def hf_cached_revisions(repo_id: str) -> tuple[str, ...]:
    """Revision names with a ref in the HF cache (for messages), sorted."""
    refs = hf_repo_dir(repo_id) / "refs"
    if not refs.is_dir():
        return ()
    return tuple(sorted(str(p.relative_to(refs)) for p in refs.rglob("*") if p.is_file()))


def hf_cached_file(repo_id: str, commit: str, filename: str) -> Path | None:
    """The snapshot path of ``filename`` at ``commit`` if it is in the HF cache, else ``None``."""
    check_file_name(filename)
    check_revision_name(commit)
    found = try_to_load_from_cache(repo_id, filename, revision=commit)
    return Path(found) if isinstance(found, str) and os.path.isfile(found) else None


def read_from_hf_cache(
    repo_id: str,
    commit: str,
    which: Which = "position",
    key: str | None = None,
    preferred: str | None = None,
    files: tuple[str, ...] = (),
) -> TensorRecord | None:
    """The ``which`` table (or tensor ``key``) of ``repo_id`` at ``commit`` from HF-cached files.

    Weight files are tried in :data:`~pos_geometry.sources.sharded.WEIGHT_FILES` order; for an
    index, only the shard holding the tensor must be cached (``files``, a row's known weight files, are
    tried first; ``preferred`` is the row's tensor key, taken when present). Returns ``None`` when no usable
    file is cached. ``record.file`` is the repo-relative filename.
    """
    for name in ordered_weight_files(files):
        path = hf_cached_file(repo_id, commit, name)
        if path is None:
            continue
        wanted = key
        if name.endswith(INDEX_SUFFIX):
            index = parse_index(path.read_bytes(), source=f"{repo_id}@{commit[:10]}/{name}")
            wanted, name = shard_for(index, which, key, f"{repo_id}@{commit[:10]}/{name}", preferred)
            path = hf_cached_file(repo_id, commit, name)
            if path is None:
                continue
        src = FileByteSource(path, name=f"{repo_id}@{commit[:10]}/{name} (HF cache)")
        record = read_checkpoint_tensor(src, which=which, key=wanted, preferred=preferred)
        return dataclasses.replace(record, file=name, origin="HF cache")
    return None

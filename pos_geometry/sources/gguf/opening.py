"""Opening a GGUF file as a :class:`~pos_geometry.sources.tensor_set.Checkpoint`: local, HF cache or hub.

The file is the whole checkpoint: its config comes from its own metadata and its tensors answer to
their transformers names (:class:`~pos_geometry.sources.gguf.checkpoint.GGUFWeights`). From the hub
only the header and the tensors asked for are range-read, at one pinned commit. Its tensors and the
atlas sums computed from them are not kept in pos_geometry's cache: their transformers key names
would collide with those of the repo's other weight files at the same commit.
"""

from __future__ import annotations

from pathlib import Path

from huggingface_hub import hf_hub_url

from pos_geometry.errors import InvalidArgumentError, NotCachedError
from pos_geometry.sources.byte_source import ByteSource, FileByteSource
from pos_geometry.sources.gguf.checkpoint import GGUFWeights
from pos_geometry.sources.hf_cache import hf_cached_file
from pos_geometry.sources.http import DEFAULT_READAHEAD, HttpByteSource
from pos_geometry.sources.hub_errors import hub_errors
from pos_geometry.sources.network import fetch_hint, offline_reason
from pos_geometry.sources.tensor_set import Checkpoint
from pos_geometry.sources.weight_file import PiecewiseReads

__all__ = ["check_gguf_name", "gguf_checkpoint", "hub_gguf_checkpoint"]


def check_gguf_name(name: object) -> str:
    """A GGUF file name inside a repo: relative, forward slashes, no ``..``, ending in ``.gguf``."""
    parts = name.split("/") if isinstance(name, str) else []
    if not parts or not name.endswith(".gguf") or any(p in ("", ".", "..") or "\\" in p for p in parts):
        raise InvalidArgumentError(
            f"gguf_file must be the path of a .gguf file inside the repo (e.g. 'model.Q4_K_M.gguf'), with no '..', "
            f"no leading '/' and no backslash; got {str(name)[:200]!r}."
        )
    return name


def gguf_checkpoint(
    src: ByteSource, revision: str | None, model_id: str, location: str, directory: Path | None
) -> Checkpoint:
    """A checkpoint on one GGUF file (in ``directory`` when local): its config comes from its own metadata."""
    weights = GGUFWeights(src)
    return Checkpoint(
        dict(weights.config), model_id, revision, None, location, _directory=directory, _single=weights
    )


def hub_gguf_checkpoint(
    repo_id: str, commit: str, name: str, revision: str | None, model_id: str, off: bool
) -> Checkpoint:
    """A GGUF file of a hub repo at ``commit``: from the HF cache, else (online) by range reads (the header,
    then only the tensors asked for)."""
    cached = hf_cached_file(repo_id, commit, name)
    if cached is not None:
        src: ByteSource = FileByteSource(cached, name=f"{repo_id}@{commit[:10]}/{name} (HF cache)")
    elif off:
        raise NotCachedError(
            f"{offline_reason() or 'Offline'}, and {name} of {repo_id}@{commit[:10]} is not in the HF cache. "
            + fetch_hint(repo_id, name, commit)
        )
    else:
        url = hf_hub_url(repo_id, name, revision=commit)
        with hub_errors(repo_id, revision, name):
            src = PiecewiseReads(
                HttpByteSource.open_first(url, DEFAULT_READAHEAD, name=f"{repo_id}@{commit[:10]}/{name}")
            )
    ckpt = gguf_checkpoint(src, revision, model_id, f"{repo_id}@{commit[:10]}/{name}", None)
    ckpt._repo_id, ckpt.commit, ckpt._offline = repo_id, commit, off
    return ckpt

"""Opening a checkpoint by name or path: a local folder or file (a ``.gguf`` file included), a model-table
name, or a hub repo id, as a :class:`~pos_geometry.sources.tensor_set.Checkpoint`.

It sits above both :mod:`~pos_geometry.sources.tensor_set` (what a checkpoint is) and
:mod:`~pos_geometry.sources.gguf.opening` (a GGUF file as one), which therefore never import each other.
"""

from __future__ import annotations

import os
from pathlib import Path

from pos_geometry._limits import read_config_json
from pos_geometry._names import check_revision_name
from pos_geometry.errors import (
    CheckpointFormatError,
    InvalidArgumentError,
    NotCachedError,
)
from pos_geometry.sources._deadline import timed
from pos_geometry.sources.byte_source import FileByteSource
from pos_geometry.sources.gguf.header import is_gguf
from pos_geometry.sources.hub import (
    _local_commit,
    _model_info,
    _remember,
    read_config,
)
from pos_geometry.sources.network import fetch_hint, offline_reason
from pos_geometry.sources.tensor_set import Checkpoint

__all__ = ["open_checkpoint"]


def _local(path: Path, revision: str | None, model_id: str | None) -> Checkpoint:
    if path.is_file():
        src = FileByteSource(path)
        if is_gguf(src):
            from pos_geometry.sources.gguf.opening import gguf_checkpoint

            return gguf_checkpoint(src, revision, model_id or os.fspath(path), str(path), path.parent)
    directory = path if path.is_dir() else path.parent
    cfg = directory / "config.json"
    if not cfg.is_file():
        raise CheckpointFormatError(
            f"{str(cfg)!r} is missing; the model's attention layout is read from it. Give the model's folder."
        )
    config = read_config_json(cfg, repr(str(cfg)))
    return Checkpoint(
        config, model_id or os.fspath(path), revision, None, str(directory), _directory=directory
    )


@timed
def _hub(
    repo_id: str,
    revision: str | None,
    model_id: str | None,
    offline: bool | None,
    gguf_file: str | None = None,
) -> Checkpoint:
    rev = check_revision_name(revision or "main")
    why = offline_reason(offline)
    off = why is not None
    files: tuple[str, ...] | None = None
    commit = _local_commit(repo_id, rev)  # a revision resolved before is remembered, as by load()
    if commit is None:
        if off:
            raise NotCachedError(
                f"{why}, and revision {rev!r} of {repo_id!r} was never resolved on this machine. "
                + fetch_hint(repo_id, "", rev)
            )
        commit, files = _model_info(repo_id, rev)
        _remember(repo_id, rev, commit, None)
    if gguf_file is not None:
        from pos_geometry.sources.gguf.opening import hub_gguf_checkpoint

        return hub_gguf_checkpoint(repo_id, commit, gguf_file, revision, model_id or repo_id, off)
    config, _ = read_config(repo_id, commit, offline=off)
    ckpt = Checkpoint(config, model_id or repo_id, revision, commit, f"{repo_id}@{commit[:10]}")
    ckpt._repo_id, ckpt._offline, ckpt._why_offline = repo_id, off, why
    ckpt._files = files
    return ckpt


def open_checkpoint(
    name_or_path: str | os.PathLike[str],
    *,
    revision: str | None = None,
    offline: bool | None = None,
    model_id: str | None = None,
    gguf_file: str | None = None,
) -> Checkpoint:
    """A :class:`Checkpoint` on a local model folder (or a file in one, a ``.gguf`` file included), a
    model-table name or a hub repo id (``gguf_file``: that GGUF file of the repo, as transformers takes it).

    For the hub, the revision is resolved to one commit here (one ``model_info`` request, or the
    local refs when offline) and every later read uses that commit.
    """
    from pos_geometry.registry import check_revision, find_spec

    name = os.fspath(name_or_path)
    path = Path(name).expanduser()
    if gguf_file is not None:
        from pos_geometry.sources.gguf.opening import check_gguf_name

        check_gguf_name(gguf_file)
        if path.is_dir():
            return _local(path / gguf_file, revision, model_id)
    if path.exists():
        return _local(path, revision, model_id)
    spec = find_spec(name)
    if spec is not None:
        from pos_geometry.sources.locations import find_real_weights

        real = find_real_weights(spec, revision) if gguf_file is None else None
        if real is not None:  # the real weights beside the checkout, as load() finds the real tables
            return _local(real, revision, model_id or spec.name)
        return _hub(spec.repo_id, check_revision(spec, revision), model_id or spec.name, offline, gguf_file)
    parts = name.split("/")
    if len(parts) != 2 or not all(parts):
        raise InvalidArgumentError(
            f"{name!r} is neither an existing path, a model-table name nor a hub repo id ('org/name')."
        )
    return _hub(name, revision, model_id, offline, gguf_file)

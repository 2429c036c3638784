"""``pos_geometry.load``: from a model name, repo id or path to a :class:`PositionalEmbedding`.

The loader decides *where the bytes come from* and *what kind of table it is*:

* a local path (file or Hugging Face model directory) is read by ``sources.local``;
* a model-table name is resolved by the registry: learned tables are read from the hub
  (one tensor, by range requests, cached), rotary tables are built from the config fields
  the table ships, with no download at all;
* any other ``org/name`` repo id is classified from its ``config.json``.

It never builds a model and never unpickles anything outside tensor storage.
"""

from __future__ import annotations

import dataclasses
import os
from pathlib import Path
from typing import Any

import torch

from pos_geometry._device import Device, resolve_device
from pos_geometry._name_targets import check_args, resolve
from pos_geometry._record_tables import check_dtype, embedding_from_record, finish, to_table
from pos_geometry.embedding import PositionalEmbedding, Provenance, TokenEmbedding
from pos_geometry.encodings.rotary import rotary_embedding
from pos_geometry.errors import (
    NoLearnedTableError,
    NotCachedError,
    UnknownModelError,
)
from pos_geometry.registry import (
    ModelSpec,
    check_revision,
    get_spec,
    kind_from_config,
    row_offset_from_config,
)
from pos_geometry.sources._deadline import deadline
from pos_geometry.sources.hub import read_config, read_hub_tensor
from pos_geometry.sources.local import local_config, read_local
from pos_geometry.sources.locations import LocalTable, find_local_table
from pos_geometry.sources.network import offline_reason
from pos_geometry.sources.tensor_record import TensorRecord

__all__ = ["load", "load_token_embedding", "embedding_from_record"]


def load(
    name_or_path: str | os.PathLike[str],
    *,
    revision: str | None = None,
    device: Device = "cpu",
    dtype: torch.dtype = torch.float32,
    n_positions: int | None = None,
    key: str | None = None,
    offline: bool | None = None,
    model_id: str | None = None,
    layer_type: str | None = None,
    gguf_file: str | None = None,
) -> PositionalEmbedding:
    """Load the positional table of a model as a ``(n_positions, d_model)`` :class:`PositionalEmbedding`.

    Args:
        name_or_path: a model-table name or alias (``"gpt2"``, ``"gpt2-small"``, ``"pythia-70m"``,
            ``"stanford-crfm/alias-gpt2-small-x21"``), any Hugging Face repo id, a local
            checkpoint file (``.safetensors``, ``.bin``/``.pt`` zip, ``.npy``, ``.npz``) or an
            HF model directory.
        revision: a branch, tag or commit; for the Stanford CRFM replicas ``"checkpoint-N"``,
            for Pythia ``"stepN"``. Rotary tables do not change with training, so for them the
            revision is only recorded; for a local file it is recorded as given (a label for
            which checkpoint the file is).
        device: where the matrix should live (``"auto"`` picks CUDA when present).
        dtype: the dtype of the returned matrix (the stored dtype is recorded in provenance).
        n_positions: rotary tables only: how many positions to build (default: the model's
            ``max_position_embeddings``).
        key: read this checkpoint key instead of looking for a positional one.
        offline: ``True`` never touches the network (only the pos_geometry and HF caches are read);
            ``None`` follows ``HF_HUB_OFFLINE`` / ``POS_GEOMETRY_OFFLINE``.
        model_id: the name recorded in ``provenance.model_id`` for a local file (default: the path),
            e.g. ``"gpt2"`` for a table exported from GPT-2 small. The path stays in ``source``.
        layer_type: rotary models whose layer types rotate with different frequencies (Gemma-2/3: local
            ``"sliding_attention"`` and global ``"full_attention"`` layers) have one table per type, and
            without this argument loading refuses with the types and their layers; with it, the table is
            that type's, with ``layer_type`` and its ``layers`` in the provenance.
        gguf_file: a ``.gguf`` file of the repo (or folder) ``name_or_path``, as transformers'
            ``gguf_file=``; its header alone is read (from the HF cache, else by range reads), unless the
            table is learned (then that tensor too). A ``.gguf`` path works without it.

    Learned tables are read as one tensor without building the model; leading rows that are
    not positions (OPT, RoBERTa) are dropped and recorded in ``provenance.row_offset``.
    Rotary models (Pythia, Mistral, any RoPE config) have no learned table: the exact rotary
    table ``cos(p·θ_i), sin(p·θ_i)`` is built from the config and has ``kind == "rotary"``.
    """
    check_args(
        name_or_path, revision=revision, key=key, model_id=model_id, offline=offline, n_positions=n_positions,
        layer_type=layer_type, gguf_file=gguf_file,
    )  # fmt: skip
    dev = resolve_device(device)
    check_dtype(dtype)
    with deadline():  # one overall network deadline for the whole load
        if gguf_file is not None:
            from pos_geometry.sources.opening import open_checkpoint

            checkpoint = open_checkpoint(
                name_or_path, revision=revision, offline=offline, model_id=model_id, gguf_file=gguf_file
            )
            return _load_gguf(checkpoint, model_id=checkpoint.model_id, revision=revision, device=dev, dtype=dtype,
                              n_positions=n_positions, key=key, layer_type=layer_type)  # fmt: skip
        return _load(name_or_path, dev, dtype, revision, n_positions, key, offline, model_id, layer_type)


def _load(
    name_or_path, dev, dtype, revision, n_positions, key, offline, model_id, layer_type
) -> PositionalEmbedding:
    name = os.fspath(name_or_path)
    target = resolve(name)
    opts = {"revision": revision, "device": dev, "dtype": dtype, "n_positions": n_positions, "key": key,
            "layer_type": layer_type}  # fmt: skip
    if target.path is not None:
        return _load_path(target.path, target.spec, model_id=model_id or target.label or name, **opts)
    if target.spec is not None:
        return _load_spec(target.spec, offline=offline, **opts)
    return _load_repo(name, offline=offline, **opts)


def _load_path(
    path: Path,
    spec: ModelSpec | None,
    *,
    model_id,
    revision,
    device,
    dtype,
    n_positions,
    key,
    layer_type=None,
) -> PositionalEmbedding:
    """A local file or folder; with ``spec`` (``NAME=PATH``) the row names it and gives its row offset."""
    if path.is_file() and path.suffix.lower() == ".gguf":
        from pos_geometry.sources.opening import open_checkpoint

        checkpoint = open_checkpoint(path)
        return _load_gguf(checkpoint, model_id=spec.name if spec is not None else model_id, revision=revision,
                          device=device, dtype=dtype, n_positions=n_positions, key=key,
                          layer_type=layer_type)  # fmt: skip

    config = local_config(path)
    config_rotary = config is not None and key is None and kind_from_config(config) == "rotary"
    if spec is not None and spec.kind == "rotary" and not config_rotary:
        raise NoLearnedTableError(
            f"{spec.name} is a rotary model: it has no learned positional table, so {str(path)!r} cannot stand "
            f"for one. Load {spec.name!r} by name (its exact rotary table is built from the model table), or give "
            "its model folder (with config.json)."
        )
    name = spec.name if spec is not None else model_id
    if config_rotary:
        return rotary_embedding(
            config,
            model_id=name,
            revision=revision,
            n_positions=n_positions,
            source=str(path / "config.json" if path.is_dir() else path.parent / "config.json"),
            device=device,
            dtype=dtype,
            layer_type=layer_type,
        )
    record = read_local(path, which="position", key=key)
    if spec is not None:
        offset = _spec_offset(spec, record)
    else:
        offset = row_offset_from_config(config) if config is not None else 0
    table = finish(
        record, model_id=name, revision=revision, row_offset=offset, commit=None, device=device, dtype=dtype
    )
    if spec is None:
        return table
    fields = {
        **table.provenance.config_dict,
        "model_table_row": spec.name,
    }  # NAME=PATH: the row's metadata applied
    return PositionalEmbedding(
        table.matrix, dataclasses.replace(table.provenance, config=fields), check_finite=False
    )


def _load_gguf(
    checkpoint: Any, *, model_id, revision, device, dtype, n_positions, key, layer_type
) -> PositionalEmbedding:
    """A GGUF checkpoint (local, HF cache or hub): the rotary table built from its metadata, or its learned
    table (``position_embd``) decoded."""
    from pos_geometry.sources.gguf.checkpoint import POSITION_TENSOR

    config = checkpoint.config
    if key is None and kind_from_config(config) == "rotary":
        table = rotary_embedding(
            config, model_id=model_id, revision=revision, n_positions=n_positions,
            source=f"{checkpoint.location} (GGUF metadata)", device=device, dtype=dtype, layer_type=layer_type,
        )  # fmt: skip
        fields = dict(table.provenance.config)
        fields["gguf"] = config["gguf"]
        return PositionalEmbedding(
            table.matrix,
            dataclasses.replace(table.provenance, config=fields, commit=checkpoint.commit),
            check_finite=False,
        )
    name = key or POSITION_TENSOR
    tensor = checkpoint.read([name])[name]
    record = TensorRecord(tensor, name, checkpoint.location, checkpoint.stored_type(name), checkpoint.keys())
    return finish(
        record, model_id=model_id, revision=revision, row_offset=row_offset_from_config(config),
        commit=checkpoint.commit, device=device, dtype=dtype,
    )  # fmt: skip


def _spec_offset(spec: ModelSpec, record: TensorRecord) -> int:
    """The row's leading non-position rows, unless the file holds exactly ``n_positions`` rows (a table
    already cut to its positions, as ``PositionalEmbedding.save`` writes it)."""
    return 0 if record.tensor.ndim and record.tensor.shape[0] == spec.n_positions else spec.row_offset


def _load_spec(
    spec: ModelSpec, *, revision, device, dtype, n_positions, key, offline, layer_type=None
) -> PositionalEmbedding:
    rev = check_revision(spec, revision)
    if spec.kind == "rotary":
        return rotary_embedding(
            spec.rotary_config,
            model_id=spec.name,
            revision=rev,
            n_positions=n_positions,
            source="model table",
            device=device,
            dtype=dtype,
            layer_type=layer_type,
        )
    hub = {"revision": rev, "which": "position", "key": key}
    hub |= {
        "preferred": spec.position_key,
        "files": spec.weight_files,
    }  # the row's key and files, tried first
    try:  # the caches first, then data/tables and the real tables, then (online) the hub
        record, commit = read_hub_tensor(spec.repo_id, offline=True, **hub)
    except NotCachedError as exc:
        local = find_local_table(spec, rev) if key is None else None
        if local is not None:
            return _load_local_table(spec, rev, local, device=device, dtype=dtype)
        why = offline_reason(offline)
        if why is not None:
            raise NotCachedError(
                f"{why}, and the positional table of {spec.name} is in none of the places looked (the pos_geometry "
                f"and HF caches, data/tables, the real tables; `pos-geometry info {spec.name}` lists them). To fetch "
                f"it: run `pos-geometry fetch {spec.name}` once with network access (only the table's bytes), or "
                f"download beforehand with `hf download {spec.repo_id}`, or pass a local path."
            ) from exc
        record, commit = read_hub_tensor(spec.repo_id, offline=offline, **hub)
    return finish(
        record,
        model_id=spec.name,
        revision=rev,
        row_offset=spec.row_offset,
        commit=commit,
        device=device,
        dtype=dtype,
    )


def _load_local_table(
    spec: ModelSpec, rev: str, local: LocalTable, *, device: torch.device, dtype: torch.dtype
) -> PositionalEmbedding:
    """A row's table from ``data/tables`` (its provenance JSON gives the commit, key and stored dtype)
    or from the real tables (the stored rows of the default revision)."""
    record = read_local(local.path, which="position")
    meta = local.meta
    return finish(
        record,
        model_id=spec.name,
        revision=rev,
        row_offset=_spec_offset(spec, record),
        commit=meta.get("commit") if isinstance(meta.get("commit"), str) else None,
        device=device,
        dtype=dtype,
        source=f"{local.path} ({local.origin})",
        tensor_key=meta.get("key") if isinstance(meta.get("key"), str) else None,
        original_dtype=meta.get("stored_dtype") if isinstance(meta.get("stored_dtype"), str) else None,
    )


def _load_repo(
    repo_id: str, *, revision, device, dtype, n_positions, key, offline, layer_type=None
) -> PositionalEmbedding:
    try:
        config, commit = read_config(repo_id, revision, offline=offline)
    except UnknownModelError as exc:
        try:
            get_spec(repo_id)
        except UnknownModelError as table_exc:
            if table_exc.suggestions:
                raise UnknownModelError(
                    f"{exc} Known models with similar names: {', '.join(table_exc.suggestions)}.",
                    name=repo_id,
                    suggestions=table_exc.suggestions,
                ) from None
        raise
    if key is None and kind_from_config(config) == "rotary":
        return rotary_embedding(
            config,
            model_id=repo_id,
            revision=revision,
            n_positions=n_positions,
            source=f"{repo_id}@{commit[:12]}::config.json",
            device=device,
            dtype=dtype,
            layer_type=layer_type,
        )
    record, commit = read_hub_tensor(repo_id, revision=revision, which="position", key=key, offline=offline)
    return finish(
        record,
        model_id=repo_id,
        revision=revision,
        row_offset=row_offset_from_config(config),
        commit=commit,
        device=device,
        dtype=dtype,
    )


def load_token_embedding(
    name_or_path: str | os.PathLike[str],
    *,
    revision: str | None = None,
    device: Device = "cpu",
    dtype: torch.dtype = torch.float32,
    key: str | None = None,
    offline: bool | None = None,
    model_id: str | None = None,
) -> TokenEmbedding:
    """Load the token-embedding matrix ``(vocab, d_model)`` the same lazy way as :func:`load`.

    Used to measure how token embeddings sit relative to the positional subspace. ``offline`` and
    ``model_id`` are as in :func:`load`.
    """
    check_args(name_or_path, revision=revision, key=key, model_id=model_id, offline=offline)
    dev = resolve_device(device)
    check_dtype(dtype)
    with deadline():
        name = os.fspath(name_or_path)
        target = resolve(name)
        commit, rev = None, revision
        if target.path is not None:
            record = read_local(target.path, which="token", key=key)
            model_id = model_id or target.label or name
        else:
            spec = target.spec
            repo = spec.repo_id if spec is not None else name
            rev = check_revision(spec, revision) if spec is not None else revision
            hints = {"preferred": spec.token_key, "files": spec.weight_files} if spec is not None else {}
            record, commit = read_hub_tensor(
                repo, revision=rev, which="token", key=key, offline=offline, **hints
            )
            model_id = model_id or (spec.name if spec is not None else name)
    provenance = Provenance(
        model_id=model_id,
        kind="learned",
        source=f"{record.file}::{record.key}" + (f" ({record.origin})" if record.origin else ""),
        revision=rev,
        tensor_key=record.key,
        original_dtype=record.dtype,
        commit=commit,
    )
    return TokenEmbedding(to_table(record, dev, dtype), provenance)

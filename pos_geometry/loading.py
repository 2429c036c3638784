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
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import torch

from pos_geometry._describe import describe
from pos_geometry._device import resolve_device
from pos_geometry._limits import read_config_json
from pos_geometry.embedding import PositionalEmbedding, Provenance, TokenEmbedding
from pos_geometry.encodings.rotary import rotary_embedding
from pos_geometry.errors import (
    CheckpointFormatError,
    InvalidArgumentError,
    NoLearnedTableError,
    NotCachedError,
    UnknownModelError,
)
from pos_geometry.registry import (
    ModelSpec,
    check_revision,
    find_spec,
    get_spec,
    kind_from_config,
    row_offset_from_config,
)
from pos_geometry.sources._deadline import deadline
from pos_geometry.sources.hub import read_config, read_hub_tensor
from pos_geometry.sources.local import CHECKPOINT_SUFFIXES, read_local
from pos_geometry.sources.locations import LocalTable, find_local_table, parse_named_path
from pos_geometry.sources.network import offline_reason
from pos_geometry.sources.tensor_record import TensorRecord, dtype_name

__all__ = ["load", "load_token_embedding", "embedding_from_record"]


def _looks_like_repo_id(name: str) -> bool:
    parts = name.split("/")
    return len(parts) == 2 and all(parts) and not name.startswith((".", "/", "~"))


def _looks_like_path(name: str) -> bool:
    """A name that can only mean a file or folder: absolute, relative, home-based, or with a checkpoint suffix."""
    return (
        name.startswith(("/", "./", "../", "~"))
        or name.count("/") > 1  # a repo id has exactly one
        or "\\" in name
        or Path(name).suffix.lower() in CHECKPOINT_SUFFIXES
    )


def _local_config(path: Path) -> dict[str, Any] | None:
    folder = path if path.is_dir() else path.parent
    cfg = folder / "config.json"
    if not cfg.is_file():
        return None
    return read_config_json(cfg, repr(str(cfg)))


def _check_args(name_or_path: object, **optional: object) -> None:
    """Each argument of :func:`load` has the type its docstring promises, or InvalidArgumentError."""
    if not isinstance(name_or_path, str | os.PathLike):
        raise InvalidArgumentError(
            f"name_or_path must be a model name, repo id or path (str or os.PathLike); got "
            f"{describe(name_or_path)} ({type(name_or_path).__name__})."
        )
    for arg, value in optional.items():
        kind = bool if arg == "offline" else int if arg == "n_positions" else str
        if value is None or (isinstance(value, kind) and (kind is bool or not isinstance(value, bool))):
            continue
        raise InvalidArgumentError(
            f"{arg} must be {'an' if kind is int else 'a'} {kind.__name__} or None; got {describe(value)} "
            f"({type(value).__name__})."
        )


def _to_table(
    record: TensorRecord, device: torch.device, dtype: torch.dtype, row_offset: int = 0
) -> torch.Tensor:
    """The stored tensor in ``dtype`` on ``device``; refused when it is not real floating point
    (integers, bools and complex numbers are not a table of vectors: casting would silently drop
    the imaginary part or invent a float table) or when ``dtype`` cannot hold its values (a
    nonzero value that becomes 0, or a finite one that becomes infinite)."""
    stored = record.tensor[row_offset:] if row_offset else record.tensor
    where = f"the tensor {record.key!r} in {record.file!r}"
    if not stored.is_floating_point():
        raise CheckpointFormatError(
            f"{where} is stored as {dtype_name(stored.dtype)}; an embedding table must be real floating point "
            "(float16, bfloat16, float32, float64). It is refused rather than cast, which would "
            + ("drop its imaginary part." if stored.is_complex() else "invent a float table from integers.")
            + " Pass key= to pick another tensor, or convert the checkpoint."
        )
    out = stored.to(dtype=dtype)
    if out.dtype != stored.dtype:
        # float8 has no isfinite/comparison kernels on the CPU: compare through float32, which holds every float8
        ref = stored.to(torch.float32) if stored.dtype.itemsize == 1 else stored
        underflow = int(((out == 0) & (ref != 0)).sum())
        overflow = int((torch.isinf(out) & torch.isfinite(ref)).sum())
        if underflow or overflow:
            raise InvalidArgumentError(
                f"dtype={dtype} cannot hold {where} (stored as {dtype_name(stored.dtype)}): "
                f"{underflow} nonzero value(s) would become 0 and {overflow} finite value(s) would become "
                "infinite. Pass a wider dtype, e.g. dtype=torch.float64."
            )
    return out.to(device=device).contiguous()


def _check_dtype(dtype: object) -> None:
    if not isinstance(dtype, torch.dtype) or not dtype.is_floating_point:
        raise InvalidArgumentError(
            "dtype must be a floating torch.dtype such as torch.float32; got "
            f"{dtype if isinstance(dtype, torch.dtype) else describe(dtype)}."
        )


def _finish(
    record: TensorRecord,
    *,
    model_id: str,
    revision: str | None,
    row_offset: int,
    commit: str | None,
    device: torch.device,
    dtype: torch.dtype,
    source: str | None = None,
    tensor_key: str | None = None,
    original_dtype: str | None = None,
) -> PositionalEmbedding:
    matrix = record.tensor
    if matrix.ndim != 2:
        raise CheckpointFormatError(
            f"the positional tensor {record.key!r} in {record.file!r} has shape {tuple(matrix.shape)}; "
            "a positional table must be 2-D (n_positions, d_model)."
        )
    if row_offset and matrix.shape[0] <= row_offset:
        raise CheckpointFormatError(
            f"the positional tensor {record.key!r} has {matrix.shape[0]} rows but {row_offset} leading "
            "rows are not positions for this model; the checkpoint does not match its config."
        )
    if source is None:
        source = f"{record.file}::{record.key}" if record.key else record.file
        source += f" ({record.origin})" if record.origin else ""
    provenance = Provenance(
        model_id=model_id,
        kind="learned",
        source=source,
        revision=revision,
        tensor_key=tensor_key or record.key or None,
        original_dtype=original_dtype or record.dtype,
        row_offset=row_offset,
        commit=commit,
    )
    return PositionalEmbedding(_to_table(record, device, dtype, row_offset), provenance)


def embedding_from_record(
    record: TensorRecord,
    *,
    model_id: str,
    revision: str | None,
    commit: str | None,
    row_offset: int = 0,
    device: str | torch.device = "cpu",
    dtype: torch.dtype = torch.float32,
) -> PositionalEmbedding:
    """The :class:`PositionalEmbedding` that :func:`load` makes of a tensor it has read: the same shape
    and dtype checks, dropped leading rows, finiteness check and provenance (for callers that read the
    tensor themselves, such as a training sweep)."""
    _check_dtype(dtype)
    return _finish(
        record, model_id=model_id, revision=revision, row_offset=row_offset, commit=commit,
        device=resolve_device(device), dtype=dtype,
    )  # fmt: skip


@dataclass(frozen=True)
class _Target:
    """What a name passed to :func:`load` stands for: a local ``path`` (for ``NAME=PATH`` with the
    row ``spec`` it stands for), a model-table ``spec``, or a hub ``repo_id`` not in the table."""

    path: Path | None = None
    spec: ModelSpec | None = None
    repo_id: str | None = None
    label: str | None = None  # NAME of NAME=PATH (the spec's name when it is in the model table)


def _resolve(name: str) -> _Target:
    """The one place a name becomes a path, a model-table row or a repo id (for every loader)."""
    try:
        path = Path(name).expanduser()
    except RuntimeError:  # "~user..." of no such user: not a path here
        path = Path(name)
    if path.exists():
        return _Target(path=path)
    named = parse_named_path(name)
    if named is not None:  # NAME labels the file; a model-table NAME also brings its row's metadata
        return _Target(path=named[1], spec=find_spec(named[0]), label=named[0])
    spec = find_spec(name)
    if spec is not None:
        return _Target(spec=spec)
    if _looks_like_path(name):
        raise UnknownModelError(
            f"{name!r} does not exist: there is no such file or folder. Check the path (it is read relative to "
            f"{os.getcwd()!r}); model-table names such as 'gpt2' and hub repo ids such as 'org/name' are not paths.",
            name=name,
        )
    if not _looks_like_repo_id(name):
        get_spec(name)  # raises UnknownModelError with the closest known names
    return _Target(repo_id=name)


def load(
    name_or_path: str | os.PathLike[str],
    *,
    revision: str | None = None,
    device: str | torch.device = "cpu",
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
    _check_args(
        name_or_path, revision=revision, key=key, model_id=model_id, offline=offline, n_positions=n_positions,
        layer_type=layer_type, gguf_file=gguf_file,
    )  # fmt: skip
    dev = resolve_device(device)
    _check_dtype(dtype)
    with deadline():  # one overall network deadline for the whole load
        if gguf_file is not None:
            from pos_geometry.sources.tensor_set import open_checkpoint

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
    target = _resolve(name)
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
        from pos_geometry.sources.tensor_set import open_checkpoint

        checkpoint = open_checkpoint(path)
        return _load_gguf(checkpoint, model_id=spec.name if spec is not None else model_id, revision=revision,
                          device=device, dtype=dtype, n_positions=n_positions, key=key,
                          layer_type=layer_type)  # fmt: skip

    config = _local_config(path)
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
    table = _finish(
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
    from pos_geometry.sources.gguf_checkpoint import POSITION_TENSOR

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
    return _finish(
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
    return _finish(
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
    return _finish(
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
    return _finish(
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
    device: str | torch.device = "cpu",
    dtype: torch.dtype = torch.float32,
    key: str | None = None,
    offline: bool | None = None,
    model_id: str | None = None,
) -> TokenEmbedding:
    """Load the token-embedding matrix ``(vocab, d_model)`` the same lazy way as :func:`load`.

    Used to measure how token embeddings sit relative to the positional subspace. ``offline`` and
    ``model_id`` are as in :func:`load`.
    """
    _check_args(name_or_path, revision=revision, key=key, model_id=model_id, offline=offline)
    dev = resolve_device(device)
    _check_dtype(dtype)
    with deadline():
        name = os.fspath(name_or_path)
        target = _resolve(name)
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
    return TokenEmbedding(_to_table(record, dev, dtype), provenance)

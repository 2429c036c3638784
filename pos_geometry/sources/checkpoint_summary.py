"""What a local path holds, read from headers only: ``pos-geometry info PATH`` and :func:`describe_checkpoint`.

A path is a table file (``.npy``/``.npz``), a weight file (safetensors, PyTorch zip), a shard index,
a GGUF file, or a model folder. The summary names its format, lists its tensors with shapes and stored
types (no tensor bytes are read), says which tensor ``pos_geometry.load`` would take as the positional
table and, from the config, how the model encodes position: a learned table, rotary (no learned table:
``load`` builds the exact rotary table from the config), or a scheme with no table at all.
"""

from __future__ import annotations

import dataclasses
import os
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from pos_geometry._limits import check_regular_file
from pos_geometry.errors import InvalidArgumentError, MissingTensorError, NoLearnedTableError
from pos_geometry.sources import numpy_format
from pos_geometry.sources.byte_source import FileByteSource
from pos_geometry.sources.gguf.header import is_gguf
from pos_geometry.sources.keys import find_key
from pos_geometry.sources.local import _weights_in, detect_format, load_index, local_config
from pos_geometry.sources.sharded import INDEX_SUFFIX
from pos_geometry.sources.tensor_record import dtype_name

__all__ = ["CONFIG_FIELDS", "CheckpointSummary", "TensorInfo", "describe_checkpoint"]

CONFIG_FIELDS: tuple[str, ...] = (
    "model_type", "architectures", "hidden_size", "n_embd", "d_model", "num_hidden_layers", "n_layer",
    "num_attention_heads", "n_head", "num_key_value_heads", "head_dim", "max_position_embeddings",
    "n_positions", "n_ctx", "rope_theta", "rotary_emb_base", "partial_rotary_factor", "rotary_pct",
    "rope_scaling", "rope_parameters", "sliding_window", "position_embedding_type",
)  # fmt: skip
"""The config fields a summary shows (those present), in this order."""


@dataclasses.dataclass(frozen=True)
class TensorInfo:
    """One stored tensor: its key, shape (None when not read) and stored type (a dtype or GGUF type)."""

    key: str
    shape: tuple[int, ...] | None
    stored_type: str | None


@dataclasses.dataclass(frozen=True)
class CheckpointSummary:
    """What a local path holds (headers only).

    Attributes:
        path: the path asked about.
        format: ``"npy"``, ``"npz"``, ``"safetensors"``, ``"torch-zip"``, ``"gguf"`` or ``"shard index"``.
        weights: the file the tensors are listed from (a folder's weight file, or ``path`` itself).
        tensors: every tensor, in stored order.
        position_key: the tensor ``load`` reads as the positional table (``""`` for a ``.npy``), or None.
        kind: ``"learned"``, ``"rotary"``, ``"no positional table"`` or ``"unknown"``.
        reason: one sentence on how ``kind`` was decided.
        config: the :data:`CONFIG_FIELDS` present in the config (``config.json``, or GGUF metadata).
        config_source: where the config came from, or None when there is none.
        layer_types: for a rotary model, each layer type as ``(label, layers, rotation and span)``
            (:class:`~pos_geometry.registry.architecture.LayerType`); one ``"all"`` entry when every layer is
            alike; a ``("not described", "", reason)`` entry when the config cannot be described.
    """

    path: str
    format: str
    weights: str
    tensors: tuple[TensorInfo, ...]
    position_key: str | None
    kind: str
    reason: str
    config: Mapping[str, Any]
    config_source: str | None
    layer_types: tuple[tuple[str, str, str], ...] = ()

    def rows(self) -> list[tuple[str, str]]:
        """``(field, text)`` pairs for a two-column table."""
        pos = next((t for t in self.tensors if t.key == self.position_key), None)
        where = "the array" if self.position_key == "" else repr(self.position_key)
        position = "–" if pos is None else f"{where}, shape {_shape(pos.shape)}, stored as {pos.stored_type}"
        rows = [
            ("path", self.path),
            ("format", self.format),
            ("weights", self.weights),
            ("tensors", str(len(self.tensors))),
            ("positional table", position),
            ("kind", self.kind),
            ("how decided", self.reason),
            ("config", self.config_source or "none found"),
        ]
        rows += [(f"  {k}", str(v)) for k, v in self.config.items()]
        if self.layer_types:
            rows.append(("layer types", str(sum(1 for t in self.layer_types if t[0] != "not described"))))
            rows += [
                (f"  {label}", "; ".join(p for p in (layers, text) if p))
                for label, layers, text in self.layer_types
            ]
        return rows


def _shape(shape: tuple[int, ...] | None) -> str:
    return "?" if shape is None else "×".join(map(str, shape)) or "scalar"


def _config(path: Path) -> tuple[dict[str, Any] | None, str | None]:
    directory = path if path.is_dir() else path.parent
    config = local_config(directory)
    return config, (str(directory / "config.json") if config is not None else None)


def _file_tensors(path: Path) -> tuple[str, tuple[TensorInfo, ...]]:
    """The format of one file and its tensors, from its header."""
    from pos_geometry.sources import safetensors_format, torch_zip

    src = FileByteSource(path)
    fmt = detect_format(src)
    if fmt == "npy":
        shape, _, dtype, _ = numpy_format.npy_header(src)
        return fmt, (TensorInfo("", shape, str(dtype)),)
    if fmt == "npz":
        infos = []
        for name, entry in numpy_format.npz_members(src).items():
            shape, dtype = numpy_format.npz_member_header(src, entry)
            infos.append(TensorInfo(name, shape, str(dtype)))
        return fmt, tuple(infos)
    if fmt == "safetensors":
        header = safetensors_format.read_header(src)
        return fmt, tuple(
            TensorInfo(k, tuple(shape), dtype_name(safetensors_format.SAFETENSORS_DTYPES[code]))
            for k, (code, shape, _) in header.entries.items()
        )
    index = torch_zip.read_index(src)
    return fmt, tuple(
        TensorInfo(k, tuple(ref.shape), dtype_name(ref.dtype)) for k, ref in index.tensors.items()
    )


def _index_tensors(path: Path) -> tuple[TensorInfo, ...]:
    """A shard index's keys; shapes from each shard's header (when the shard is there)."""
    weight_map = load_index(path)["weight_map"]
    shards: dict[str, dict[str, TensorInfo]] = {}
    for shard in dict.fromkeys(weight_map.values()):
        shard_path = path.parent / shard
        if "/" not in shard and "\\" not in shard and shard_path.is_file():
            shards[shard] = {t.key: t for t in _file_tensors(shard_path)[1]}
    return tuple(
        shards.get(shard, {}).get(key, TensorInfo(key, None, None)) for key, shard in weight_map.items()
    )


def _gguf(path: Path) -> tuple[tuple[TensorInfo, ...], dict[str, Any]]:
    from pos_geometry.sources.gguf.checkpoint import GGUFWeights

    weights = GGUFWeights(FileByteSource(path))
    infos = tuple(
        TensorInfo(name, tuple(info.shape), weights.quantization(name))
        for name, info in weights.header.tensors.items()
    )
    return infos, dict(weights.config)


def _kind(config: Mapping[str, Any] | None, position_key: str | None) -> tuple[str, str]:
    from pos_geometry.registry.lookup import kind_from_config

    if config is not None:
        try:
            kind = kind_from_config(config)
        except NoLearnedTableError as exc:
            return "no positional table", str(exc)
        if kind == "rotary":
            return "rotary", (
                "the config describes rotary position embeddings: the model has no learned positional table; "
                "load() builds the exact rotary table from the config."
            )
        if position_key is not None:
            return "learned", "the config describes a learned absolute table, and the checkpoint holds it."
        return (
            "learned",
            "the config describes a learned absolute table, but no tensor here is named like one.",
        )
    if position_key is not None:
        return "learned", "no config; a tensor is named like a positional table (load() reads it as learned)."
    return "unknown", "no config, and no tensor is named like a positional table; pass key= to load one."


def describe_checkpoint(path: str | os.PathLike[str]) -> CheckpointSummary:
    """Summarise the checkpoint at ``path`` from its headers (no tensor bytes are read).

    ``path`` is a ``.npy``/``.npz`` table, a safetensors or PyTorch-zip weight file, a shard index, a
    ``.gguf`` file, or a model folder (its weight file is chosen as :func:`pos_geometry.load` chooses it).

    Raises:
        InvalidArgumentError: nothing at ``path``.
        CheckpointFormatError, UnsafeCheckpointError: a file that cannot be read safely.
    """
    p = Path(os.fspath(path)).expanduser()
    if not p.exists():
        raise InvalidArgumentError(
            f"No file or folder at {str(p)!r}. Check the path; `pos-geometry info NAME` describes a model-table name."
        )
    check_regular_file(p)
    target = p
    if p.is_dir():
        gguf = sorted(q for q in p.iterdir() if q.suffix.lower() == ".gguf" and q.is_file())
        target = gguf[0] if len(gguf) == 1 and not (p / "config.json").is_file() else _weights_in(p)
    config, config_source = (None, None)
    if target.is_file() and is_gguf(FileByteSource(target)):
        fmt = "gguf"
        tensors, config = _gguf(target)
        config_source = f"{target} (GGUF metadata; {config['gguf'].get('config_source', 'renamed')})"
        keys = [t.key for t in tensors]
        position_key = "position_embd.weight" if "position_embd.weight" in keys else None
    else:
        config, config_source = _config(target)
        if target.name.endswith(INDEX_SUFFIX):
            fmt, tensors = "shard index", _index_tensors(target)
        else:
            fmt, tensors = _file_tensors(target)
        position_key = _position_key(fmt, tensors, str(target))
    kind, reason = _kind(config, position_key)
    shown = {k: config[k] for k in CONFIG_FIELDS if config is not None and config.get(k) is not None}
    return CheckpointSummary(
        path=str(p), format=fmt, weights=str(target), tensors=tensors, position_key=position_key,
        kind=kind, reason=reason, config=shown, config_source=config_source,
        layer_types=_layer_types(config) if kind == "rotary" and config is not None else (),
    )  # fmt: skip


def _layer_types(config: Mapping[str, Any]) -> tuple[tuple[str, str, str], ...]:
    """Each layer type of a rotary config: its layers, rotation and attention span (module docstring)."""
    from pos_geometry.registry.architecture import describe_architecture, layer_list

    try:
        architecture = describe_architecture(config)
    except InvalidArgumentError as exc:
        return (("not described", "", str(exc)),)
    return tuple((t.label, f"layers {layer_list(t.layers)}", t.describe()) for t in architecture.layer_types)


def _position_key(fmt: str, tensors: tuple[TensorInfo, ...], source: str) -> str | None:
    if fmt == "npy":
        return ""
    if fmt == "npz" and len(tensors) == 1:
        return tensors[0].key
    try:
        return find_key([t.key for t in tensors], "position", source=source)
    except MissingTensorError:
        return None

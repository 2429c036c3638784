"""Hugging Face weight-file layout: which file to open, and which shard holds a tensor.

An HF model directory (or repo) holds ``model.safetensors``, or
``model.safetensors.index.json`` plus shards, or the legacy ``pytorch_model.bin``
(optionally sharded with ``pytorch_model.bin.index.json``). An index is
``{"metadata": {...}, "weight_map": {tensor key: shard filename}}``.
"""

from __future__ import annotations

import json
import posixpath
from collections.abc import Mapping
from typing import Any

from pos_geometry.errors import CheckpointFormatError
from pos_geometry.sources.keys import select_key
from pos_geometry.sources.tensor_record import Which

__all__ = [
    "ordered_weight_files",
    "WEIGHT_FILES",
    "INDEX_SUFFIX",
    "MAX_INDEX_BYTES",
    "parse_index",
    "shard_for",
]

WEIGHT_FILES: tuple[str, ...] = (
    "model.safetensors",
    "model.safetensors.index.json",
    "pytorch_model.bin",
    "pytorch_model.bin.index.json",
)
INDEX_SUFFIX = ".index.json"


def ordered_weight_files(preferred: tuple[str, ...] = ()) -> tuple[str, ...]:
    """``preferred`` (a model-table row's ``weight_files``) first, then the rest of :data:`WEIGHT_FILES`."""
    return tuple(dict.fromkeys((*preferred, *WEIGHT_FILES)))


MAX_INDEX_BYTES = 64 * 1024 * 1024


def parse_index(data: bytes, source: str = "") -> dict[str, Any]:
    """Decode a shard index (JSON bytes) into a dict; :class:`CheckpointFormatError` when malformed."""
    where = source or "the shard index"
    if len(data) > MAX_INDEX_BYTES:
        raise CheckpointFormatError(
            f"{where} is {len(data)} bytes, more than the {MAX_INDEX_BYTES} a shard index can "
            "plausibly be; it is not an index file. Re-download it."
        )
    try:
        parsed = json.loads(data)
    except (ValueError, RecursionError) as exc:
        raise CheckpointFormatError(f"{where} is not valid JSON ({exc}); re-download it.") from exc
    if not isinstance(parsed, dict):
        raise CheckpointFormatError(
            f"{where} must be a JSON object with a 'weight_map'; got a {type(parsed).__name__}. Re-download it."
        )
    return parsed


def _check_shard_name(name: object, key: str, where: str) -> str:
    ok = (
        isinstance(name, str)
        and name != ""
        and "\\" not in name
        and not posixpath.isabs(name)
        and ".." not in name.split("/")
    )
    if not ok:
        raise CheckpointFormatError(
            f"{where} maps {key!r} to {name!r}, which is not a file name inside the model directory "
            "(shard names must be relative, without '..'). The index is corrupted or malicious; re-download it."
        )
    return name  # type: ignore[return-value]


def shard_for(
    index_json: Mapping[str, Any],
    which: Which = "position",
    key: str | None = None,
    source: str = "",
    preferred: str | None = None,
) -> tuple[str, str]:
    """``(tensor key, shard filename)`` for the ``which`` table (or exactly ``key``) in a shard index.

    Raises:
        CheckpointFormatError: the index has no ``weight_map`` object of ``{str: str}``, or a
            shard name escapes the directory.
        MissingTensorError: no positional/token key (or not ``key``) in the weight map.
    """
    where = source or "the shard index"
    weight_map = index_json.get("weight_map") if isinstance(index_json, Mapping) else None
    if not isinstance(weight_map, Mapping) or not all(isinstance(k, str) for k in weight_map):
        raise CheckpointFormatError(
            f"{where} has no 'weight_map' object mapping tensor names to shard files "
            f"(got {type(weight_map).__name__}). Re-download the index."
        )
    found = select_key(weight_map.keys(), which, key, source=where, preferred=preferred)
    return found, _check_shard_name(weight_map[found], found, where)

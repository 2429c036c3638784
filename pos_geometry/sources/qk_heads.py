"""Query and key projections split into heads: head counts from a config, the rotation planes of a pairing,
and :class:`QKWeights` (the per-head rows of the layers read).

Three layouts of the rows: separate ``q_proj``/``k_proj`` (rows ``h*head_dim + j``); fused per head
(GPT-NeoX's ``query_key_value``: rows ``(h, [q|k|v], j)``); fused in blocks (Phi-3's ``qkv_proj``:
``[all q | all k | all v]``).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import torch

from pos_geometry._limits import check_config_int
from pos_geometry.encodings.rotary import (
    RotaryParams,
)
from pos_geometry.errors import (
    CheckpointFormatError,
    InvalidArgumentError,
)
from pos_geometry.registry.attention import AttentionLayout
from pos_geometry.sources.tensor_set import Checkpoint

__all__ = ["QKWeights", "head_counts", "rotation_planes", "split_heads", "check_shape", "head_start"]


def _int_field(config: Mapping[str, Any], keys: tuple[str, ...], default: int | None = None) -> int:
    for key in keys:
        value = config.get(key)
        if value is not None:
            if isinstance(value, bool) or not isinstance(value, int) or value < 1:
                raise InvalidArgumentError(f"config {key} must be a positive int; got {value!r}.")
            return check_config_int(key, value)
    if default is None:
        raise InvalidArgumentError(f"config has none of {keys}; the attention shape cannot be read from it.")
    return default


def head_counts(config: Mapping[str, Any]) -> tuple[int, int, int]:
    """``(n_layers, n_heads, n_kv_heads)`` from a config.json dict (``n_kv_heads`` defaults to ``n_heads``)."""
    n_layers = _int_field(config, ("num_hidden_layers", "n_layer", "num_layers"))
    n_heads = _int_field(config, ("num_attention_heads", "n_head"))
    n_kv = _int_field(config, ("num_key_value_heads",), n_heads)
    if n_heads % n_kv:
        raise InvalidArgumentError(
            f"num_attention_heads ({n_heads}) must be a multiple of num_key_value_heads ({n_kv}); fix the config."
        )
    return n_layers, n_heads, n_kv


def rotation_planes(pairing: str, rotary_dim: int) -> torch.Tensor:
    """``(rotary_dim//2, 2)`` long: the two head dimensions rotation plane ``i`` turns, at angle ``p·θ_i``.

    ``"rotate_half"``: ``(i, i + rotary_dim/2)``; ``"interleaved"``: ``(2i, 2i+1)``.
    """
    half = torch.arange(rotary_dim // 2)
    if pairing == "rotate_half":
        return torch.stack([half, half + rotary_dim // 2], dim=1)
    if pairing == "interleaved":
        return torch.stack([2 * half, 2 * half + 1], dim=1)
    raise InvalidArgumentError(f"pairing must be 'rotate_half' or 'interleaved'; got {pairing!r}.")


@dataclass(frozen=True, eq=False)
class QKWeights:
    """Per-head query and key projection weights of some layers of a rotary model.

    Attributes:
        q: ``(n_layers, n_heads, head_dim, d_model)`` float32: row ``j`` of head ``h`` is the weight
            vector of query dimension ``j`` (``q_h = q[l, h] @ x``).
        k: ``(n_layers, n_kv_heads, head_dim, d_model)`` float32; query head ``h`` reads key head
            ``h // (n_heads // n_kv_heads)`` (grouped-query attention).
        norm: ``(n_layers, d_model)`` float32 gain of the norm feeding attention (offset applied),
            or None when not read.
        layers: the layer indices, in order.
        planes: ``(n_planes, 2)`` long: the head dimensions of each rotation plane.
        rotary: the rotary parameters (frequencies, context length, rope type).
        layout: the attention layout used (:func:`~pos_geometry.registry.architecture.attention_of`).
        keys: every checkpoint key read.
        stored_dtype: the dtype the projections are stored in.
        checkpoint: where they came from (config, model id, revision, commit, location).
    """

    q: torch.Tensor
    k: torch.Tensor
    norm: torch.Tensor | None
    layers: tuple[int, ...]
    planes: torch.Tensor
    rotary: RotaryParams
    layout: AttentionLayout
    keys: tuple[str, ...]
    stored_dtype: str
    checkpoint: Checkpoint

    @property
    def n_heads(self) -> int:
        return self.q.shape[1]

    @property
    def n_kv_heads(self) -> int:
        return self.k.shape[1]

    def kv_head(self, head: int) -> int:
        """The key head that query head ``head`` attends with."""
        return head // (self.n_heads // self.n_kv_heads)


def split_heads(
    layout: AttentionLayout, tensor: torch.Tensor, which: str, n_heads: int, n_kv: int, head_dim: int
) -> torch.Tensor:
    """``which`` (``"q"``: ``(n_heads, head_dim, d)``, ``"k"``: ``(n_kv, head_dim, d)``) from the tensor
    read for it: its own projection, or the fused qkv projection (a view, no copy)."""
    heads = n_heads if which == "q" else n_kv
    if layout.qkv_key is None:
        gated = 2 if which == "q" and layout.q_gate else 1
        if tensor.ndim != 2 or tensor.shape[0] != gated * heads * head_dim:
            raise CheckpointFormatError(
                f"the {which} projection has shape {tuple(tensor.shape)}; the config implies "
                f"({gated * heads * head_dim}, d_model). The checkpoint and its config.json disagree."
            )
        if gated == 2:  # [query | gate] per head: the query half
            return tensor.reshape(heads, 2, head_dim, -1)[:, 0]
        return tensor.reshape(heads, head_dim, -1)
    rows = (n_heads + 2 * n_kv) * head_dim
    if tensor.ndim != 2 or tensor.shape[0] != rows:
        raise CheckpointFormatError(
            f"the fused qkv projection has shape {tuple(tensor.shape)}; the config implies ({rows}, d_model)."
        )
    if layout.fused == "per_head":  # GPT-NeoX: view(heads, 3 * head_size), chunk(3)
        if n_kv != n_heads:
            raise CheckpointFormatError("a per-head fused qkv layout has as many key heads as query heads.")
        return tensor.reshape(n_heads, 3, head_dim, -1)[:, 0 if which == "q" else 1]
    q_rows = n_heads * head_dim  # Phi-3: [all q | all k | all v]
    if which == "q":
        return tensor[:q_rows].reshape(n_heads, head_dim, -1)
    return tensor[q_rows : q_rows + n_kv * head_dim].reshape(n_kv, head_dim, -1)


def check_shape(
    layout: AttentionLayout,
    shape: tuple[int, ...],
    which: str,
    n_heads: int,
    n_kv: int,
    head_dim: int,
    d_model: int | None = None,
) -> None:
    """The stored shape of the tensor holding ``which`` must be what the config implies: its rows from the head
    counts and head size, its columns ``d_model`` (when the config gives it)."""
    if layout.qkv_key is None:
        rows = (n_heads if which == "q" else n_kv) * head_dim * (2 if which == "q" and layout.q_gate else 1)
        what = f"the {which} projection"
    else:
        rows = (n_heads + 2 * n_kv) * head_dim
        what = "the fused qkv projection"
        if layout.fused == "per_head" and n_kv != n_heads:
            raise CheckpointFormatError("a per-head fused qkv layout has as many key heads as query heads.")
    if len(shape) != 2 or shape[0] != rows or (d_model is not None and shape[1] != d_model):
        cols = "d_model" if d_model is None else str(d_model)
        raise CheckpointFormatError(
            f"{what} has shape {tuple(shape)}; the config implies ({rows}, {cols}). The checkpoint and its "
            "config.json disagree."
        )


def head_start(layout: AttentionLayout, which: str, head: int, n_heads: int, head_dim: int) -> int:
    """The first row of ``head`` of ``which`` in the tensor read for it (the layouts of :func:`_split`)."""
    if layout.qkv_key is None:
        return head * head_dim * (2 if which == "q" and layout.q_gate else 1)
    if layout.fused == "per_head":  # rows (h, [q|k|v], j)
        return (3 * head + (0 if which == "q" else 1)) * head_dim
    return (head if which == "q" else n_heads + head) * head_dim  # [all q | all k | all v]

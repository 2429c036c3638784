"""An opened learned-table checkpoint for the position-QK view: its layout row, shapes, table and weights.

:class:`TableQKModel` reads, for :func:`~pos_geometry.atlas.position_qk.position_qk_atlas`,
the position table ``(n_positions, d_model)`` and, per layer, the ``ln_1`` gain and bias, the fused
``c_attn`` weight ``(d_model, 3·d_model)`` and bias ``(3·d_model,)``, nothing else; it knows the
logit divisor GPT2Attention uses and how a head's query/key columns are laid out.
:func:`hidden_rows` takes the hidden path's rows from a ``hidden_positions`` result and
:func:`atlas_provenance` writes what an atlas read and did.
"""

from __future__ import annotations

import math
from typing import TYPE_CHECKING

import torch

from pos_geometry._dtypes import dtype_name
from pos_geometry.atlas.qk_head_view import layer_norm_table
from pos_geometry.embedding import Provenance
from pos_geometry.errors import (
    CheckpointFormatError,
    InvalidArgumentError,
    MissingTensorError,
    NonFiniteError,
    NotApplicableError,
)
from pos_geometry.registry.attention import TABLE_QK_LAYOUTS, TableQKLayout, table_qk_layout
from pos_geometry.sources.roles import _resolve_prefix, head_counts
from pos_geometry.sources.tensor_set import Checkpoint

if TYPE_CHECKING:
    from pos_geometry.hidden.decomposition import HiddenPositions

__all__ = ["TableQKModel", "hidden_rows", "atlas_provenance"]


def _read(ckpt: Checkpoint, layout: TableQKLayout, key: str) -> torch.Tensor:
    key = _resolve_prefix(ckpt, layout, key)  # a headless checkpoint (the hub's gpt2) drops the prefix
    return _finite(ckpt.read([key])[key], key)


def _finite(tensor: torch.Tensor, key: str) -> torch.Tensor:
    """``tensor``, refused with :class:`NonFiniteError` when it holds NaN or inf."""
    if tensor.is_floating_point() and not bool(torch.isfinite(tensor).all()):
        raise NonFiniteError(
            f"{key!r} holds {int((~torch.isfinite(tensor)).sum())} NaN or infinite value(s); the QK view of such "
            "weights would be NaN. Check or re-export the checkpoint."
        )
    return tensor


def _does_not_apply(ckpt: Checkpoint) -> NotApplicableError:
    from pos_geometry.atlas.rotary import _does_not_apply as why

    exc = why(ckpt.config, ckpt.model_id)
    return NotApplicableError(
        f"{exc} Nor does the learned-table QK view: where model_type {ckpt.config.get('model_type')!r} keeps its "
        "table and query/key weights is not known here (the learned-table layouts know "
        f"{', '.join(sorted(TABLE_QK_LAYOUTS))})."
    )


class TableQKModel:
    """An opened learned-table checkpoint: its layout row, shapes and the position table."""

    def __init__(self, ckpt: Checkpoint) -> None:
        layout = table_qk_layout(ckpt.config)
        if layout is None:
            raise _does_not_apply(ckpt)
        self.ckpt, self.layout = ckpt, layout
        self.n_layers, self.n_heads, _ = head_counts(ckpt.config)
        self.table_key = _resolve_prefix(ckpt, layout, layout.position_key)
        self.table = _read(ckpt, layout, layout.position_key)
        self.n_positions, self.d_model = self.table.shape
        if self.d_model % self.n_heads:
            raise CheckpointFormatError(
                f"d_model {self.d_model} is not a multiple of the config's {self.n_heads} heads."
            )
        self.d_head = self.d_model // self.n_heads
        self.eps = float(ckpt.config.get(layout.eps_field, 1e-5))

    def scale(self, index: int) -> float:
        """The logit divisor of layer ``index``: ``√d_head`` (if ``scale_attn_weights``) × ``(index + 1)``
        (if ``scale_attn_by_inverse_layer_idx``), as GPT2Attention divides."""
        config = self.ckpt.config
        root = math.sqrt(self.d_head) if config.get("scale_attn_weights", True) else 1.0
        return root * (index + 1 if config.get("scale_attn_by_inverse_layer_idx", False) else 1)

    def bias(
        self, index: int, device: torch.device, dtype: torch.dtype
    ) -> tuple[torch.Tensor | None, str | None]:
        """``(bias, key)``: the c_attn bias ``(3·d_model,)`` of layer ``index``, or ``(None, None)`` when the
        checkpoint has none (``Conv1D`` without bias)."""
        key = self.layout.keys(index)["qkv"].removesuffix("weight") + "bias"
        try:
            spelled = _resolve_prefix(self.ckpt, self.layout, key)
        except MissingTensorError:
            return None, None
        bias = _finite(self.ckpt.read([spelled])[spelled], spelled)
        if tuple(bias.shape) != (3 * self.d_model,):
            raise CheckpointFormatError(
                f"{spelled} has shape {tuple(bias.shape)}; expected ({3 * self.d_model},)."
            )
        return bias.to(device, dtype), spelled

    def layer(
        self, index: int, device: torch.device, dtype: torch.dtype, rows: torch.Tensor | None = None
    ) -> tuple[torch.Tensor, torch.Tensor, tuple[str, ...]]:
        """``(x, w, keys)``: ``LN_index(rows)`` ``(n, d_model)`` (``rows`` default: the position table) and
        the c_attn weight ``(d_model, 3·d_model)`` of layer ``index`` on ``device``, and the keys read."""
        names = self.layout.keys(index)
        w = _read(self.ckpt, self.layout, names["qkv"])
        if tuple(w.shape) != (self.d_model, 3 * self.d_model):
            raise CheckpointFormatError(
                f"{names['qkv']} has shape {tuple(w.shape)}; a Conv1D c_attn of d_model {self.d_model} is "
                f"({self.d_model}, {3 * self.d_model}). The checkpoint and its config.json disagree."
            )
        gain, bias = (_read(self.ckpt, self.layout, names[r]) for r in ("norm", "norm_bias"))
        keys = tuple(_resolve_prefix(self.ckpt, self.layout, names[r]) for r in ("qkv", "norm", "norm_bias"))
        x = layer_norm_table(self.table if rows is None else rows, gain, bias, self.eps)
        return x.to(device, dtype), w.to(device, dtype), keys

    def head(self, w: torch.Tensor, h: int) -> tuple[torch.Tensor, torch.Tensor]:
        """``(A, B)``: head ``h``'s query and key columns of the c_attn weight, each ``(d_model, d_head)``
        (also: its query and key entries of the c_attn bias, each ``(d_head,)``)."""
        d, dh = self.d_model, self.d_head
        return w[..., h * dh : (h + 1) * dh], w[..., d + h * dh : d + (h + 1) * dh]


def hidden_rows(
    model: TableQKModel, hidden: HiddenPositions, chosen: tuple[int, ...]
) -> dict[int, torch.Tensor]:
    """``{layer: pos_layer (seq_len, d_model)}`` from ``hidden`` for the blocks ``chosen``, checked against ``model``."""
    d_model = hidden.grand_mean.shape[-1]
    n_layers = int(hidden.provenance.config_dict.get("n_layers", model.n_layers))
    if d_model != model.d_model or n_layers != model.n_layers:
        raise InvalidArgumentError(
            f"hidden was measured on a model of {n_layers} layers × d_model {d_model} "
            f"({hidden.provenance.model_id}); this checkpoint has {model.n_layers} × {model.d_model}. "
            "Pass the hidden_positions result of the same model."
        )
    absent = [layer for layer in chosen if layer not in hidden.positional]
    if absent:
        raise InvalidArgumentError(
            f"hidden has no positional part for layer(s) {absent} (it has {list(hidden.layers)}). "
            "Fix: hidden_positions(model, tokens, layers=None) reads every layer."
        )
    return {layer: hidden.positional[layer].matrix.to(torch.float64) for layer in chosen}


def atlas_provenance(
    model: TableQKModel,
    chosen: tuple[int, ...],
    keys: list[str],
    n_components: int,
    biases: bool,
    path: str,
    hidden: HiddenPositions | None,
    permute_key_rows: bool,
    random_state: int,
) -> Provenance:
    """What the atlas read and what it did to it."""
    ckpt = model.ckpt
    read = "position table, " if path == "direct" else ""
    config = {
        "model_type": model.layout.model_type,
        "n_positions": model.n_positions,
        "d_model": model.d_model,
        "num_attention_heads": model.n_heads,
        "layer_norm_epsilon": model.eps,
        "tensor_keys": tuple(keys),
    }
    processing = [
        f"ln_1 of each layer applied to {'the table' if path == 'direct' else 'the layer input positional part'}; "
        f"top {n_components} PCA directions",
        "c_attn biases in the logits" if biases else "c_attn biases left out",
        "direct path only" if path == "direct" else "hidden path: positional part of each layer's input",
    ]
    if hidden is not None:
        prov = hidden.provenance
        config |= {"hidden_model": prov.model_id, "corpus": hidden.corpus, "n_sequences": hidden.n_sequences,
                   "seq_len": hidden.seq_len}  # fmt: skip
        processing.append(f"positional parts from hidden_positions ({', '.join(prov.processing)})")
    if permute_key_rows:
        processing.append(f"null: each layer's W_k rows permuted (random_state {random_state})")
    return Provenance(
        model_id=ckpt.model_id,
        kind="learned" if path == "direct" else "hidden",
        source=f"{ckpt.location}: {model.layout.model_type} {read}c_attn and ln_1 of {len(chosen)} layer(s)",
        revision=ckpt.revision,
        config=config,
        original_dtype=dtype_name(model.table.dtype),
        commit=ckpt.commit,
        processing=tuple(processing),
    )

"""Take the positional matrix from a TransformerLens ``TransformerBridge`` (TransformerLens 4.x).

TransformerLens processes weights by default (``center_writing_weights`` centres ``W_pos``
over ``d_model``); the provenance records whether the bridge's weights were processed and
whether the table we got is in fact centred, so a result never passes processed weights off
as raw ones.
"""

from __future__ import annotations

from typing import Any

import torch

from pos_geometry._dtypes import dtype_name
from pos_geometry.embedding import PositionalEmbedding, Provenance
from pos_geometry.errors import InvalidArgumentError, NoLearnedTableError

__all__ = ["from_transformer_lens"]

_LEARNED_TYPES = ("standard",)


def _is_row_centred(matrix: torch.Tensor) -> bool:
    """True when every row has (numerically) zero mean over ``d_model``.

    Rounding a centred float32 row to the stored dtype moves its mean by at most
    ``eps/2`` times the row's mean absolute value, so each row is held to
    ``|mean| <= max(1e-5, eps) * mean|x|``: bfloat16 tables that TransformerLens centred
    pass, raw tables (whose row means are a few percent of that scale) do not.
    """
    m = matrix.detach().double()
    tol = max(1e-5, torch.finfo(matrix.dtype).eps)
    row_scale = m.abs().mean(dim=1).clamp_min(1e-30)
    return bool((m.mean(dim=1).abs() <= tol * row_scale).all())


def from_transformer_lens(bridge: Any, *, revision: str | None = None) -> PositionalEmbedding:
    """The bridge's ``W_pos`` ``(n_ctx, d_model)`` as a :class:`PositionalEmbedding`, on the bridge's device.

    ``bridge`` is a ``transformer_lens.model_bridge.TransformerBridge`` (from
    ``TransformerBridge.boot_transformers(...)``). Rotary and other models without a learned
    absolute table are refused with :class:`NoLearnedTableError`: use ``pos_geometry.load(name)``
    to get their exact rotary table instead.
    """
    cfg = getattr(bridge, "cfg", None)
    if cfg is None or not hasattr(type(bridge), "W_pos"):
        raise InvalidArgumentError(
            f"from_transformer_lens expects a TransformerLens TransformerBridge; got {type(bridge).__name__}. "
            "Create one with transformer_lens.model_bridge.TransformerBridge.boot_transformers(name)."
        )
    name = str(getattr(cfg, "model_name", None) or "transformer_lens model")
    pos_type = getattr(cfg, "positional_embedding_type", "unknown")
    if pos_type not in _LEARNED_TYPES:
        raise NoLearnedTableError(
            f"{name!r} has no learned positional matrix (TransformerLens positional_embedding_type="
            f"{pos_type!r}); a W_pos for it would be zeros or initial weights, not a table the model uses. "
            f"Use pos_geometry.load({name!r}) to get its exact rotary table (kind='rotary') instead."
        )
    matrix = bridge.W_pos.detach()
    processed = bool(getattr(bridge, "_weights_processed", False))
    steps: tuple[str, ...] = ()
    if processed:
        steps = ("transformer_lens.process_weights",)
        if _is_row_centred(matrix):
            steps += ("center_d_model",)
    original_dtype = dtype_name(matrix.dtype)
    provenance = Provenance(
        model_id=name,
        kind="learned",
        source=f"TransformerBridge({name}).W_pos",
        revision=revision,
        tensor_key="W_pos",
        original_dtype=original_dtype,
        processing=steps,
    )
    return PositionalEmbedding(matrix.clone(), provenance)

"""The per-plane statistics of a rotary model's query/key weights, and the atlas's summaries of them.

Definitions (see :mod:`pos_geometry.atlas.rotary`): for query rows ``Q`` and key rows ``K`` of a plane
(each ``2 × d_model``), ``q_norm = ‖Q‖_F``, ``k_norm = ‖K‖_F``, the plane's strength ``‖Qᵀ K‖_F``, its
``qk_share`` (strength over the head's total) and the cosine between each side's two rows.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

import torch

from pos_geometry._device import Device, resolve_device
from pos_geometry.atlas.plane_sums import plane_grams

__all__ = ["plane_statistics", "span_critical", "usage_summaries"]


def plane_statistics(
    q: torch.Tensor,
    k: torch.Tensor,
    planes: torch.Tensor,
    *,
    kv_heads: torch.Tensor | None = None,
    gain: torch.Tensor | None = None,
    device: Device = "auto",
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor]:
    """``(q_norm, k_norm, qk_share, q_pair_cosine, k_pair_cosine)``, each ``(n_heads, n_planes)`` float64.

    ``q``: ``(n_heads, head_dim, d_model)``; ``k``: ``(n_kv_heads, head_dim, d_model)`` (any float
    dtype); ``planes``: ``(n_planes, 2)`` head dimensions; ``kv_heads``: ``(n_heads,)`` the key head
    of each query head (default: ``k`` has one per query head); ``gain``: ``(d_model,)`` multiplied
    into every column first (the folded norm); ``device``: where the dot products run (``"auto"``
    resolves it; results come back on the CPU). Definitions in the module docstring; computed in
    float64 through the ``2 × 2`` Gram matrices of each plane's rows.
    """
    where = resolve_device(device)
    gq = plane_grams(q, planes, gain, where)
    gk = plane_grams(k, planes, gain, where)
    return _plane_stats(gq, gk[kv_heads] if kv_heads is not None else gk)


def _plane_stats(
    gq: torch.Tensor, gk: torch.Tensor
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor]:
    """The statistics of :func:`plane_statistics` from the ``(n_heads, n_planes, 2, 2)`` Grams (k matched to q)."""
    q_norm = gq.diagonal(dim1=-2, dim2=-1).sum(-1).sqrt()
    k_norm = gk.diagonal(dim1=-2, dim2=-1).sum(-1).sqrt()
    strength = (gq * gk).sum(dim=(-1, -2)).clamp_min(0).sqrt()
    total = strength.sum(-1, keepdim=True)
    share = torch.where(total > 0, strength / total.clamp_min(torch.finfo(torch.float64).tiny), math.nan)

    def pair_cosine(g: torch.Tensor) -> torch.Tensor:
        return g[..., 0, 1] / (g[..., 0, 0] * g[..., 1, 1]).sqrt()

    return q_norm, k_norm, share, pair_cosine(gq), pair_cosine(gk)


def span_critical(wavelengths: torch.Tensor, spans: Sequence[int]) -> torch.Tensor:
    """``(len(spans), n_planes)`` bool: plane ``i`` completes a cycle within each layer's span."""
    return wavelengths[None, :] <= torch.tensor(spans, dtype=torch.float64)[:, None]


def usage_summaries(share: torch.Tensor, critical: torch.Tensor) -> dict[str, torch.Tensor]:
    """The atlas's summaries of ``qk_share`` ``(n_layers, n_heads, n_planes)``: ``short_share``
    ``(n_layers, n_heads)``, the share held by the ``critical`` planes (``(n_planes,)`` bool, or
    ``(n_layers, n_planes)`` for a span per layer), and ``layer_usage`` ``(n_layers, n_planes)``, the
    mean share over each layer's heads."""
    mask = critical if critical.dim() == 2 else critical.expand(share.shape[0], -1)
    short = torch.where(mask[:, None, :], share, torch.zeros((), dtype=share.dtype)).sum(-1)
    return {"short_share": short, "layer_usage": share.mean(dim=1)}

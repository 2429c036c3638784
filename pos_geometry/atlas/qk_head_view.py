"""One head of the position-QK view: its logit terms and statistics (definitions in
:mod:`pos_geometry.atlas.position_qk` and :mod:`pos_geometry.atlas.lookback`)."""

from __future__ import annotations

import functools
import math

import torch

from pos_geometry.atlas.lookback import rotation_in_plane, toeplitz_share

__all__ = ["layer_norm_table", "offset_means", "head_view"]


def layer_norm_table(table: torch.Tensor, gain: torch.Tensor, bias: torch.Tensor, eps: float) -> torch.Tensor:
    """``(n, d)`` float64: ``LayerNorm`` over the last dimension (biased variance), then ``· gain + bias``."""
    x = table.to(torch.float64)
    mean = x.mean(-1, keepdim=True)
    var = ((x - mean) ** 2).mean(-1, keepdim=True)
    return (x - mean) / torch.sqrt(var + eps) * gain.to(torch.float64) + bias.to(torch.float64)


@functools.lru_cache(maxsize=4)
def _causal(n: int, device: torch.device) -> tuple[torch.Tensor, torch.Tensor]:
    """``(i, j)``: the indices of the pairs ``j ≤ i`` of an ``n × n`` matrix (kept: every head reuses them)."""
    i, j = torch.tril_indices(n, n, device=device)
    return i, j


def offset_means(logits: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """``(means, counts)``, each ``(n,)``: the mean of ``logits[i, i - Δ]`` over ``i ≥ Δ``, for ``Δ = 0..n-1``."""
    n = logits.shape[-1]
    i, j = _causal(n, logits.device)
    offset = i - j
    counts = torch.bincount(offset, minlength=n).to(logits.dtype)
    sums = torch.zeros(n, dtype=logits.dtype, device=logits.device).index_add_(0, offset, logits[i, j])
    return sums / counts, counts


def head_view(
    x: torch.Tensor,
    mean: torch.Tensor,
    coords: torch.Tensor,
    basis: torch.Tensor,
    a: torch.Tensor,
    b: torch.Tensor,
    bq: torch.Tensor | None,
    bk: torch.Tensor | None,
    scale: float,
    plane: torch.Tensor,
) -> tuple:
    """``(form_share, logit_share, offset_profile, offset_r2, logit_std, term_share, peak_offset,
    toeplitz_share, rotation_fit, rotation_angle)`` of one head (module docstrings): ``x`` ``(n, d)`` the
    normed rows, ``mean`` ``(1, d)`` their mean and ``coords`` ``(n, k)`` their centred coordinates in
    the top-``k`` principal ``basis`` ``(d, k)`` (the rank-k rebuild is ``mean + coords basisᵀ``),
    ``a``/``b`` ``(d, d_head)``,
    ``bq``/``bk`` ``(d_head,)`` or None (no biases), ``plane`` ``(d, 2)``."""
    ga, gb = a.T @ a, b.T @ b  # ‖A Bᵀ‖² = tr(AᵀA BᵀB), never forming the d × d form
    pa, pb = basis.T @ a, basis.T @ b
    total = float((ga * gb).sum())
    form_share = float(((pa.T @ pa) * (pb.T @ pb)).sum()) / total if total > 0 else math.nan
    xa, xb = x @ a, x @ b
    position = xa @ xb.T / scale
    rebuilt = (mean @ a + coords @ pa) @ (mean @ b + coords @ pb).T / scale
    n = position.shape[0]
    i, j = _causal(n, position.device)
    zeros = torch.zeros(n, dtype=position.dtype, device=position.device)
    query_bias = (xb @ bq) / scale if bq is not None else zeros  # (n,): a function of the key position
    key_bias = (xa @ bk) / scale if bk is not None else zeros  # (n,): of the query position
    constant = float(bq @ bk) / scale if bq is not None and bk is not None else 0.0
    parts = [position[i, j], query_bias[j], key_bias[i]]
    energy = torch.stack([((p - p.mean()) ** 2).sum() for p in parts] + [zeros.sum()])
    term_share = energy / energy.sum() if float(energy.sum()) > 0 else torch.full_like(energy, math.nan)
    logits = position + query_bias[None, :] + key_bias[:, None] + constant
    causal = logits[i, j]
    pos_causal = position[i, j]
    centred = pos_causal - pos_causal.mean()
    pos_variance = float((centred**2).sum())
    residual = float(((pos_causal - rebuilt[i, j]) ** 2).sum())
    logit_share = 1 - residual / pos_variance if pos_variance > 0 else math.nan
    means, counts = offset_means(logits)
    variance = float(((causal - causal.mean()) ** 2).sum())
    between = float((counts * (means - causal.mean()) ** 2).sum())
    peak = int(torch.argmax(means[: n // 2 + 1]))
    toeplitz = toeplitz_share(position)
    fit, angle = rotation_in_plane((plane.T @ a) @ (plane.T @ b).T)
    lookback = (toeplitz, fit, angle)
    if variance > 0:
        return (
            form_share,
            logit_share,
            means,
            between / variance,
            float(causal.std()),
            term_share,
            peak,
            *lookback,
        )
    return form_share, logit_share, means, math.nan, 0.0, term_share, peak, *lookback

"""Does a head "look back N tokens" through a rotation of the positional helix? Per-head measures.

The helix post's comments propose that the helix lets a head attend a fixed offset back: if the
normed table ``X`` turns in a plane at ``ω`` radians per position and the head's QK form restricted to
that plane is a rotation by ``φ``, its position logits peak where the query is ``φ/ω`` positions after
the key. For one head with position term ``P = X A Bᵀ Xᵀ / s`` ``(n, n)`` (all pairs):

* ``toeplitz_share``: the share of ``P``'s variance explained by a function of ``i - j`` alone (the
  between-diagonal variance over the total), over every pair, before the causal mask. A smooth
  table gives a sizeable share whatever the weights; the null to beat is the same head with its
  ``W_k`` rows permuted (``position_qk_atlas(..., permute_key_rows=True)``): about 0.26 on GPT-2;
* in the plane of the table's top two principal directions ``U`` ``(d, 2)`` (where GPT-2's helix
  turns), the ``2 × 2`` form ``M = Uᵀ A Bᵀ U`` split into a scaled rotation ``c R(φ)`` and the rest:
  ``rotation_fit = ‖c R(φ)‖² / ‖M‖²`` (1: a pure rotation), ``rotation_angle = φ``;
* ``plane_step``: the table's own angle per position in that plane, ``ω``, the least-squares slope
  of the unwrapped angle of ``Uᵀ x_t`` against ``t``;
* ``implied_offset = (φ/ω) mod (2π/|ω|)``: the look-back the rotation alone would give, to compare
  with the head's ``peak_offset``.
"""

from __future__ import annotations

import math

import torch

__all__ = ["plane_step", "toeplitz_share", "rotation_in_plane", "implied_offset"]


def plane_step(x: torch.Tensor, plane: torch.Tensor) -> float:
    """``ω``: radians per position of ``x`` ``(n, d)`` (centred) projected on ``plane`` ``(d, 2)``."""
    coords = (x - x.mean(0, keepdim=True)) @ plane
    angle = torch.atan2(coords[:, 1], coords[:, 0]).cpu().double().numpy()
    import numpy as np

    unwrapped = np.unwrap(angle)
    t = np.arange(angle.size, dtype=np.float64)
    return float(np.polyfit(t, unwrapped, 1)[0])


def toeplitz_share(position: torch.Tensor) -> float:
    """Share of the variance of the square matrix ``position`` explained by its diagonal (offset) means."""
    n = position.shape[0]
    i = torch.arange(n, device=position.device)
    offset = (i[:, None] - i[None, :] + n - 1).reshape(-1)
    values = position.reshape(-1)
    counts = torch.bincount(offset, minlength=2 * n - 1).to(values.dtype)
    means = (
        torch.zeros(2 * n - 1, dtype=values.dtype, device=values.device).index_add_(0, offset, values)
        / counts
    )
    centred = values - values.mean()
    total = float((centred**2).sum())
    between = float((counts * (means - values.mean()) ** 2).sum())
    return between / total if total > 0 else math.nan


def rotation_in_plane(form: torch.Tensor) -> tuple[float, float]:
    """``(rotation_fit, φ)`` of a ``2 × 2`` form: its scaled-rotation part ``a I + b J`` (``J`` the quarter turn)."""
    a = float(form[0, 0] + form[1, 1]) / 2
    b = float(form[1, 0] - form[0, 1]) / 2
    total = float((form**2).sum())
    return (2 * (a * a + b * b) / total if total > 0 else math.nan), math.atan2(b, a)


def implied_offset(angle: float, step: float) -> float:
    """``(φ/ω) mod (2π/|ω|)``: the offset at which a rotation by ``angle`` peaks on a helix turning ``step``
    radians per position (NaN when the table does not turn)."""
    if not math.isfinite(step) or abs(step) < 1e-12:
        return math.nan
    return (angle / step) % (2 * math.pi / abs(step))

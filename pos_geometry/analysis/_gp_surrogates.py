"""The fast smooth-GP null: every axis' smooth part, in a few coordinates, with no axis left out.

A smooth-GP surrogate (:func:`pos_geometry.analysis._nulls.smooth_gp` on the axes of
:func:`pos_geometry.analysis._null_basis.null_basis`) is, on the ``R`` axes of its column covariance
(variances ``λ_j``) and around the table's mean ``μ``,

    Y = B A diag(√λ) + √η E diag(√λ) + 1 μᵀ        (A: 2K × R, E: n × R, both iid standard normal)

with ``B`` ``(n, 2K)`` the kernel's ``K`` Fourier modes (:func:`pos_geometry.analysis._draws.gp_modes`). The
smooth part has rank ``2K`` (a few dozen for a slowly varying table) whatever ``R``; only the white part
needs one column per axis. So the white part is kept on the leading ``r`` axes only (what it leaves out, ``η``
times the other axes' variance, is held below ``1 − FAST_VARIANCE`` of the total and below the table's own
``n_components``-th principal share, which the surrogates' ``n_components``-th component is about as large as) and the surrogate is written
``Y = [Y_r, [B, 1] G]``: the ``r`` axes with a white part written out, and the other ``R − r`` axes plus the
mean outside them as ``[B, 1] G`` with ``G`` ``(2K + 1, R − r + 1)``. With ``Gᵀ = Q R_G``,
``G Gᵀ = R_Gᵀ R_G``, so the ``(n, r + 2K + 1)`` table ``[Y_r, [B, 1] R_Gᵀ]`` has the rows' inner products of the
surrogate itself, which is all a null's statistic may read
(:func:`pos_geometry.analysis._nulls.surrogate_values`). GPT-2's table needs 561
axes for 99.9% of this null's variance; its surrogates here are 1024 × 60.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch

from pos_geometry.analysis._draws import gp_modes, randn
from pos_geometry.analysis._null_basis import FAST_VARIANCE, TAIL_RATIO, _decomposition, _likelihood_axes

__all__ = ["GPFactors", "gp_factors"]


@dataclass(frozen=True)
class GPFactors:
    """What the fast smooth-GP surrogates of one table are made of (units of its largest entry).

    ``modes`` ``(n, 2K)``: the kernel's modes (:func:`gp_modes`); ``scales`` ``(R,)``: ``√λ`` on every axis of
    the null's column covariance; ``mean_in`` ``(R,)``/``mean_out``: the table's mean on those axes and its
    length outside them; ``white``: ``√η``; ``white_rank``: the leading axes that get the white part.
    """

    modes: torch.Tensor
    scales: torch.Tensor
    mean_in: torch.Tensor
    mean_out: float
    white: float
    white_rank: int

    @property
    def width(self) -> int:
        """Columns of each surrogate table: ``2K + r + 1``."""
        return int(self.modes.shape[1]) + self.white_rank + 1

    def tables(self, count: int, gen: torch.Generator, like: torch.Tensor) -> torch.Tensor:
        """``count`` surrogates ``(count, n, width)`` in ``like``'s dtype and on its device, isometric to the
        whole tables (their rows' inner products are those of ``Y`` above).

        The ``r`` axes with a white part are written out (``n × r``); the other axes and the mean outside
        them, ``[B, 1] G`` with ``G`` ``(2K + 1, R − r + 1)``, become ``[B, 1] R_Gᵀ`` (``Gᵀ = Q R_G``), which has
        the same rows' inner products: ``(n, 2K + 1)`` whatever ``R``.
        """
        n, k2 = self.modes.shape
        big_r, r = self.scales.shape[0], self.white_rank
        scales = self.scales.to(like.device, like.dtype)
        mean_in = self.mean_in.to(like.device, like.dtype)
        modes = self.modes.to(like.device, like.dtype)
        weights = randn((count, k2, big_r), gen, like) * scales  # (count, 2K, R): every axis' smooth part
        out = torch.empty(count, n, self.width, dtype=like.dtype, device=like.device)
        out[..., :r] = modes @ weights[..., :r] + self.white * randn((count, n, r), gen, like) * scales[:r]
        out[..., :r] += mean_in[:r]
        rest = torch.zeros(count, k2 + 1, big_r - r + 1, dtype=like.dtype, device=like.device)
        rest[:, :k2, :-1] = weights[..., r:]
        rest[:, -1, :-1] = mean_in[r:]
        rest[:, -1, -1] = self.mean_out
        r_g = torch.linalg.qr(rest.mT, mode="r").R  # (count, 2K + 1, 2K + 1) when R − r + 1 ≥ 2K + 1
        basis = torch.cat([modes, torch.ones(n, 1, dtype=like.dtype, device=like.device)], dim=1)
        out[..., r : r + r_g.shape[-2]] = basis @ r_g.mT
        out[..., r + r_g.shape[-2] :] = 0
        return out


def gp_factors(x: torch.Tensor, min_rank: int) -> GPFactors | None:
    """The :class:`GPFactors` of ``x`` ``(n, d)`` for a statistic that reads ``min_rank`` components, or None
    where they save nothing: a short length scale (too many modes) or a surrogate no narrower than the
    axes themselves."""
    dec = _decomposition(x)
    ell, nugget = dec["length_scale"]
    modes = gp_modes(x.shape[0], ell, nugget)
    if modes is None:
        return None
    lam, w = _likelihood_axes(dec, "smooth_gp")
    total = float(lam.sum())
    if total <= 0:
        return None
    # left_out[j]: the white part's share of the surrogates' variance on axes j, j+1, ...
    left_out = nugget * torch.cat([lam.flip(0).cumsum(0).flip(0), lam.new_zeros(1)]) / total
    evals = dec["evals"].clamp_min(0)
    k = max(1, min(int(min_rank), evals.shape[0]))
    # what is left out stays below 0.1% and below the table's own k-th principal share (the surrogates'
    # k-th component is about as large; for a smooth table far smaller than the k-th axis' λ)
    bound = min(1 - FAST_VARIANCE, TAIL_RATIO * float(evals[k - 1] / evals.sum()))
    r = int(torch.nonzero(left_out <= bound)[0])
    if modes.shape[1] + r + 1 >= lam.shape[0] + 1:
        return None
    axes = dec["axes"] @ w
    mean = dec["mean"]
    mean_in = axes.T @ mean
    return GPFactors(
        modes=modes,
        scales=lam.sqrt(),
        mean_in=mean_in,
        mean_out=float(torch.linalg.vector_norm(mean - axes @ mean_in)),
        white=float(nugget) ** 0.5,
        white_rank=r,
    )

"""The fast smooth-GP and stationary nulls: every axis' leading Fourier modes, in a few coordinates.

A surrogate of either null (:func:`pos_geometry.analysis.nulls.surrogates.smooth_gp`,
:func:`pos_geometry.analysis.nulls.surrogates.stationary`, on the axes of
:func:`pos_geometry.analysis.nulls.basis.null_basis`) is, on the ``R`` axes of its likelihood's column
covariance (variances ``λ_j``) and around the table's mean ``μ``, a sum of Fourier modes with independent
Gaussian weights, axis by axis:

    Y = B A diag(√λ) + E diag(√λ) + 1 μᵀ        (A: 2K × R iid standard normal)

with ``B`` ``(n, 2K)`` the few modes that carry most of the kernel's variance, each times its weight's
standard deviation, and ``E`` ``(n, R)`` the rest of the kernel, independent of ``A``:

* smooth GP: ``B`` the squared-exponential kernel's ``K`` modes (:func:`pos_geometry.analysis.nulls.draws.gp_modes`),
  ``E = √η · white noise`` (the nugget);
* stationary: ``B`` the ``K`` frequency bins of the table's pooled spectrum
  (:func:`pos_geometry.analysis.nulls.stationary.pooled_spectrum`) with the largest variance, ``E`` a stationary
  draw through the other bins (one inverse FFT, :func:`pos_geometry.analysis.nulls.draws.fourier_draws`).

``B A`` has rank ``2K`` (a few dozen for a slowly varying table) whatever ``R``; only ``E`` needs one
column per axis. So ``E`` is kept on the leading ``r`` axes only: what it leaves out (its share ``ε`` of
the kernel's variance times the other axes' variance) is held below ``1 − FAST_VARIANCE`` of the total and
below the table's own ``n_components``-th principal share, which the surrogates' ``n_components``-th
component is about as large as. The surrogate is then written ``Y = [Y_r, [B, 1] G]``: the ``r`` axes
written out, and the other ``R − r`` axes plus the mean outside them as ``[B, 1] G`` with ``G``
``(2K + 1, R − r + 1)``. With ``Gᵀ = Q R_G``, ``G Gᵀ = R_Gᵀ R_G``, so the ``(n, r + 2K + 1)`` table
``[Y_r, [B, 1] R_Gᵀ]`` has the rows' inner products of the surrogate itself, which is all a null's
statistic may read (:func:`pos_geometry.analysis.nulls.surrogates.surrogate_values`). For the stationary null ``K``
and ``r`` are chosen together (more bins, fewer axes) for the narrowest table.

GPT-2's table needs 561 axes for 99.9% of the smooth-GP null's variance and 479 for the stationary null's;
their surrogates here are 1024 × 55 and 1024 × 271.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import torch

from pos_geometry.analysis.nulls.basis import (
    FAST_VARIANCE,
    TAIL_RATIO,
    _decomposition,
    _gp_length_scale,
    _likelihood_axes,
    _spectrum,
)
from pos_geometry.analysis.nulls.draws import fourier_draws, gp_modes, mode_variances, randn

__all__ = ["FACTORS", "ModeFactors", "gp_factors", "stationary_factors"]


@dataclass(frozen=True)
class ModeFactors:
    """What the fast surrogates of one table are made of (units of its largest entry).

    ``modes`` ``(n, 2K)``: the leading modes ``B``; ``scales`` ``(R,)``: ``√λ`` on every axis of the null's
    column covariance; ``mean_in`` ``(R,)``/``mean_out``: the table's mean on those axes and its length
    outside them; ``white_rank``: the leading ``r`` axes that get the rest ``E`` of the kernel, which is
    ``white`` times white noise (smooth GP) or, where ``tail`` ``(n + 1,)`` is given, a stationary draw with
    those Fourier-mode variances on a circulant of size ``2n`` (stationary).
    """

    modes: torch.Tensor
    scales: torch.Tensor
    mean_in: torch.Tensor
    mean_out: float
    white: float
    white_rank: int
    tail: torch.Tensor | None = None

    @property
    def width(self) -> int:
        """Columns of each surrogate table: ``2K + r + 1``."""
        return int(self.modes.shape[1]) + self.white_rank + 1

    def tables(
        self, count: int, gen: torch.Generator, like: torch.Tensor, out: torch.Tensor | None = None
    ) -> torch.Tensor:
        """``count`` surrogates ``(count, n, width)`` in ``like``'s dtype and on its device, isometric to the
        whole tables (their rows' inner products are those of ``Y`` above). ``out``: a ``(count, w, n)`` buffer
        (``w ≥ width``, ``like``'s dtype and device) to write them into, axes first, the columns past ``width``
        zero (they change no inner product); then ``(count, n, w)``, its transposed view, is returned.

        The ``r`` axes with the rest of the kernel are written out (``n × r``); the other axes and the mean
        outside them, ``[B, 1] G`` with ``G`` ``(2K + 1, R − r + 1)``, become ``[B, 1] R_Gᵀ`` (``Gᵀ = Q R_G``),
        which has the same rows' inner products: ``(n, 2K + 1)`` whatever ``R``.
        """
        n, k2 = self.modes.shape
        big_r, r = self.scales.shape[0], self.white_rank
        scales = self.scales.to(like.device, like.dtype)
        mean_in = self.mean_in.to(like.device, like.dtype)
        modes = self.modes.to(like.device, like.dtype)
        weights = randn((count, big_r, k2), gen, like) * scales[:, None]  # (count, R, 2K): every axis' modes
        # built axes-first, (count, width, n), and handed over as its transposed view: the FFT's draws come
        # out axes-first, so nothing is transposed in memory
        if out is None:
            out = torch.empty(count, self.width, n, dtype=like.dtype, device=like.device)
        out[:, :r] = weights[:, :r] @ modes.T + self._rest(count, n, r, gen, like) * scales[:r, None]
        out[:, :r] += mean_in[:r, None]
        rest = torch.zeros(count, big_r - r + 1, k2 + 1, dtype=like.dtype, device=like.device)  # Gᵀ
        rest[:, :-1, :k2] = weights[:, r:]
        rest[:, :-1, -1] = mean_in[r:]
        rest[:, -1, -1] = self.mean_out
        r_g = torch.linalg.qr(rest, mode="r").R  # (count, 2K + 1, 2K + 1) when R − r + 1 ≥ 2K + 1
        basis = torch.cat([modes, torch.ones(n, 1, dtype=like.dtype, device=like.device)], dim=1)
        out[:, r : r + r_g.shape[-2]] = r_g @ basis.T
        out[:, r + r_g.shape[-2] :] = 0
        return out.mT

    def _rest(self, count: int, n: int, r: int, gen: torch.Generator, like: torch.Tensor) -> torch.Tensor:
        """``E`` on the leading ``r`` axes, unit scale, axes first: ``(count, r, n)``."""
        if self.tail is None:
            return self.white * randn((count, r, n), gen, like)
        if r == 0:  # no axis gets the tail (MKL's FFT refuses an empty batch)
            return torch.zeros(count, 0, n, dtype=like.dtype, device=like.device)
        tail = self.tail.to(like.device, like.dtype)
        return fourier_draws(tail, n, 2 * n, (count, r), gen)


def _left_out(lam: torch.Tensor) -> torch.Tensor:
    """``(R + 1,)``: the share of the total variance ``lam`` ``(R,)`` (descending) on axes ``j, j+1, …``."""
    total = lam.sum().clamp_min(torch.finfo(lam.dtype).tiny)
    return torch.cat([lam.flip(0).cumsum(0).flip(0), lam.new_zeros(1)]) / total


def _bound(dec: dict, min_rank: int) -> float:
    """What the fast surrogates may leave out, as a share of their variance: below 0.1% and below the
    table's own ``min_rank``-th principal share (the surrogates' ``min_rank``-th component is about as
    large; for a smooth table far smaller than the ``min_rank``-th axis' ``λ``)."""
    evals = dec["evals"].clamp_min(0)
    k = max(1, min(int(min_rank), evals.shape[0]))
    return min(1 - FAST_VARIANCE, TAIL_RATIO * float(evals[k - 1] / evals.sum()))


def _factors(
    dec: dict, null: str, modes: torch.Tensor, r: int, ell: float | None = None, **rest
) -> ModeFactors:
    # λ may have axes off the table's span after W's (no mean there). W is square and orthogonal, so the
    # mean's coordinates on the likelihood's axes are Wᵀ (its principal coordinates), and what lies outside
    # them is what lies outside the principal axes: no d × R product with W.
    lam, w = _likelihood_axes(dec, null, ell)
    mean = dec["mean"]
    principal = dec["axes"].T @ mean
    inside = w.T @ principal
    return ModeFactors(
        modes=modes,
        scales=lam.sqrt(),
        mean_in=torch.cat([inside, inside.new_zeros(lam.shape[0] - inside.shape[0])]),
        mean_out=float(torch.linalg.vector_norm(mean - dec["axes"] @ principal)),
        white_rank=r,
        **rest,
    )


def gp_factors(x: torch.Tensor, min_rank: int, ell: float | None = None) -> ModeFactors | None:
    """The smooth-GP null's :class:`ModeFactors` of ``x`` ``(n, d)`` for a statistic that reads ``min_rank``
    components, with length scale ``ell`` (by default the table's estimate), or None where they save
    nothing: a short length scale (too many modes) or a surrogate no narrower than the axes themselves."""
    dec = _decomposition(x)
    ell, nugget = _gp_length_scale(dec, ell)
    modes = gp_modes(x.shape[0], ell, nugget)
    if modes is None:
        return None
    lam = _likelihood_axes(dec, "smooth_gp", ell)[0]
    if float(lam.sum()) <= 0:
        return None
    r = int(torch.nonzero(nugget * _left_out(lam) <= _bound(dec, min_rank))[0])
    if modes.shape[1] + r + 1 >= lam.shape[0] + 1:
        return None
    return _factors(dec, "smooth_gp", modes, r, ell, white=float(nugget) ** 0.5)


def stationary_factors(x: torch.Tensor, min_rank: int, ell: float | None = None) -> ModeFactors | None:
    """The stationary null's :class:`ModeFactors` of ``x`` ``(n, d)`` for a statistic that reads
    ``min_rank`` components, or None where they save nothing (a flat spectrum: white noise). ``ell`` is
    not used (the null has the table's whole spectrum, not a length scale); it is there so that every
    builder of :data:`FACTORS` is called alike.

    The bins of the circulant (size ``2n``) enter ``B`` in order of their variance; with the ``K`` largest
    in, the others hold a share ``ε_K`` of the kernel's variance, and ``r`` axes must get them so that
    ``ε_K`` times the variance of the other axes stays within the bound. ``K`` (and so ``r``) is the one
    with the narrowest table ``2K + r + 1`` (bins ``0`` and ``n`` count one mode: no sine); ``K = 0`` is the
    plain fast null (``r + 1`` columns), and then there is nothing to gain.
    """
    dec = _decomposition(x)
    lam = _likelihood_axes(dec, "stationary")[0]
    if float(lam.sum()) <= 0:
        return None
    n = x.shape[0]
    var = mode_variances(_spectrum(dec).to(torch.float64).cpu(), 2 * n, 0.0)  # (n + 1,) per weight
    columns = torch.full_like(var, 2.0)
    columns[0] = columns[-1] = 1.0
    per_bin = var * columns
    order = torch.argsort(per_bin, descending=True)
    kept_share = per_bin[order].cumsum(0) / per_bin.sum().clamp_min(torch.finfo(torch.float64).tiny)
    eps = torch.cat([per_bin.new_ones(1), (1 - kept_share).clamp_min(0)])  # eps[K]: K bins in B
    left_out = _left_out(lam.cpu())
    bound = _bound(dec, min_rank)
    axes_needed = (eps[:, None] * left_out[None, :] > bound).sum(dim=1)  # r for each K
    widths = torch.cat([columns.new_zeros(1), columns[order].cumsum(0)]) + axes_needed + 1
    k = int(torch.argmin(widths))
    if k == 0:
        return None
    bins = torch.sort(order[:k]).values
    t = torch.arange(n, dtype=torch.float64)
    wt = t[:, None] * (2 * math.pi * bins.to(torch.float64) / (2 * n))[None, :]
    amp = var[bins].sqrt()
    sines = (bins > 0) & (bins < n)
    modes = torch.cat([torch.cos(wt) * amp, (torch.sin(wt) * amp)[:, sines]], dim=1)
    tail = var.clone()
    tail[bins] = 0
    device = dec["coords"].device
    return _factors(dec, "stationary", modes.to(device), int(axes_needed[k]), white=0.0, tail=tail.to(device))


FACTORS = {"smooth_gp": gp_factors, "stationary": stationary_factors}
"""The nulls with a fast mode-factor form, and the function that builds it, ``(x, min_rank, ell)`` -> factors
(None: use the plain fast path)."""

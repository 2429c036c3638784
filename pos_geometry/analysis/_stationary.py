"""Stationary curves with the table's own spectrum: the parameters of the ``stationary`` null.

The null (:func:`pos_geometry.analysis._nulls.stationary`) treats a table ``X`` ``(n, d)`` as a matrix-normal
draw whose rows are correlated by **the table's own pooled autocovariance** (any kernel: AR(1), smooth, or
neither) and whose columns by the covariance that makes the table most likely under it:
``X = 1μᵀ + K^{1/2} Z Σ^{1/2}``. It covers what the smooth-GP null's squared-exponential kernel cannot: a
rough stationary curve. With many columns the leading principal axes of such a curve are close to sine and
cosine pairs of nearly equal variance (the eigenvectors of a Toeplitz covariance), which turn: 19 of 20
AR(1) tables (φ = 0.99, 1024 × 768) beat random walks and smooth GP curves as "helices"
(``benchmarks/RESULTS.md``, ``bench_calibration_cuda``).

* :func:`pooled_spectrum`: the kernel, as the eigenvalues of its circulant embedding of size ``2n``: the
  pooled periodogram of the centred columns zero-padded to ``2n`` (the sample autocovariance by offset,
  summed over columns, is invariant to any orthogonal change of basis of the columns), scaled so the
  kernel's variance is 1. Draws through it have exactly that autocovariance at offsets ``0..n−1``.
* :func:`stationary_column_covariance`: ``Σ`` by maximum likelihood under that kernel, as the smooth-GP
  null's (:func:`pos_geometry.analysis._smoothness.column_covariance`). The sample covariance would not do:
  the rows of a table with a long correlation are far from independent, and surrogates drawn with its
  spread variances turn far less than the table (AR(1) tables of φ = 0.99: median rotation share 0.22
  against 0.7–0.8 for the tables; 0.7 with the likelihood's ``Σ``).
"""

from __future__ import annotations

import torch

from pos_geometry.analysis._smoothness import NUGGET_FLOOR, column_covariance

__all__ = ["pooled_spectrum", "stationary_column_covariance", "toeplitz_kernel"]


def pooled_spectrum(c: torch.Tensor) -> torch.Tensor:
    """The circulant eigenvalues ``(n + 1,)`` float64 of the pooled autocovariance of ``c`` ``(n, r)``
    (centred over positions): ``Σ_j |FFT_{2n}(c_j)|² / n``, over bins ``0..n`` of the real FFT, divided by the
    autocovariance at offset 0 (their mean over all ``2n`` bins), so the kernel has variance 1."""
    n = c.shape[0]
    spec = torch.fft.rfft(c.to(torch.float64), n=2 * n, dim=0)
    lam = (spec.real**2 + spec.imag**2).sum(dim=1) / n
    full = torch.cat([lam, lam[1:-1].flip(0)])  # all 2n bins (a real signal's spectrum is symmetric)
    return (lam / full.mean().clamp_min(torch.finfo(torch.float64).tiny)).clamp_min(0)


def toeplitz_kernel(lam: torch.Tensor, n: int) -> torch.Tensor:
    """The row covariance ``K`` ``(n, n)`` float64 whose circulant embedding has eigenvalues ``lam``."""
    acov = torch.fft.irfft(lam, n=2 * n)[:n]
    idx = torch.arange(n, device=lam.device)
    return acov[(idx[:, None] - idx[None, :]).abs()]


def stationary_column_covariance(c: torch.Tensor, lam: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """``(λ, W)`` of the maximum-likelihood column covariance of ``c`` ``(n, r)`` under the row kernel with
    spectrum ``lam`` (:func:`toeplitz_kernel`; held at a ridge of :data:`NUGGET_FLOOR` for the solves)."""
    k = toeplitz_kernel(lam.to(c.device), c.shape[0])
    k.diagonal().add_(NUGGET_FLOOR)
    return column_covariance(c, k)

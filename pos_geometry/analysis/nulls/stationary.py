"""Stationary curves with the table's own spectrum: the parameters of the ``stationary`` null.

The null (:func:`pos_geometry.analysis.nulls.surrogates.stationary`) treats a table ``X`` ``(n, d)`` as a matrix-normal
draw whose rows are correlated by **the table's own pooled autocovariance** (any kernel: AR(1), smooth, or
neither) and whose columns by the covariance that makes the table most likely under it:
``X = 1μᵀ + K^{1/2} Z Σ^{1/2}``. It covers what the smooth-GP null's squared-exponential kernel cannot: a
rough stationary curve. With many columns the leading principal axes of such a curve are close to sine and
cosine pairs of nearly equal variance (the eigenvectors of a Toeplitz covariance), which turn: 19 of 20
AR(1) tables (φ = 0.99, 1024 × 768) beat random walks and smooth GP curves as "helices"
(``benchmarks/RESULTS.md``, ``bench_calibration_cuda``).

* :func:`pooled_spectrum`: the kernel, as the eigenvalues of its circulant embedding of size ``2n``, from
  the sample autocovariance by offset summed over columns (:func:`pooled_autocovariance`: invariant to any
  orthogonal change of basis of the columns), with its spectral lines capped at the background (a line is
  what a helix is made of), scaled so the kernel's variance is 1.
* :func:`stationary_column_covariance`: ``Σ`` by maximum likelihood under that kernel, as the smooth-GP
  null's (:func:`pos_geometry.analysis.nulls.smoothness.column_covariance`). The sample covariance would not do:
  the rows of a table with a long correlation are far from independent, and surrogates drawn with its
  spread variances turn far less than the table (AR(1) tables of φ = 0.99: median rotation share 0.22
  against 0.7–0.8 for the tables; 0.7 with the likelihood's ``Σ``). Its eigenvalues' own sampling spread
  is then taken out (:func:`shrink_spread`), over every axis of the embedding space when the table has
  more columns than positions (the axes it cannot show get the bulk's level).

With all three, 768-wide AR(1) tables (φ = 0.9 and 0.99, 256 and 1024 positions) are helices in 0 of 20 at
α = 0.01 and 0.05, where they were in up to 5 of 20 with the first version of this null and 9 to 20 of 20 without it;
AR(1) tables with φ = 0.99 over 1024 × 64 in 0 and 4 of 60, where they were in 3 and 7 of 60
(``benchmarks/RESULTS.md``, ``bench_calibration`` and its notes). GPT-2's table still beats it (median 0.21
against its 0.84).
"""

from __future__ import annotations

import math

import torch

from pos_geometry.analysis._spectra import ar1_from_lags, ar1_white_spectrum, local_background
from pos_geometry.analysis.nulls.smoothness import NUGGET_FLOOR, column_covariance

__all__ = [
    "pooled_autocovariance",
    "pooled_spectrum",
    "shrink_spread",
    "stationary_column_covariance",
    "toeplitz_kernel",
]


def pooled_autocovariance(c: torch.Tensor) -> torch.Tensor:
    """``(n,)`` float64: the autocovariance of ``c`` ``(n, r)`` (centred over positions) at offsets ``0..n−1``,
    summed over columns; offset ``τ`` averaged over its ``n − τ`` pairs up to the first offset past ``n/2``
    where it is ``≤ 0``, and from there on the constant of those offsets pooled over all their pairs.

    The usual estimate divides every offset by ``n``: a taper ``1 − τ/n`` on the truth less the variance of
    the mean. Centring a draw made through it subtracts that variance again, and the taper makes the first
    subtraction a ramp that centring does not remove: 768 iid AR(1) columns (φ = 0.9) over 256 positions
    gave surrogates whose centred autocorrelation at offset 10 was 0.25 against the tables' 0.28, and whose
    principal axes turned less (median rotation share 0.55 against 0.62). Averaged over its own pairs each
    offset is the truth less a constant, which centring does remove; the far offsets, with few pairs each,
    are pooled instead of amplified (where the truth has died out they are that constant).
    """
    n = c.shape[0]
    spec = torch.fft.rfft(c.to(torch.float64), n=2 * n, dim=0)
    summed = torch.fft.irfft((spec.real**2 + spec.imag**2).sum(dim=1), n=2 * n)[:n]  # Σ_t c_t c_{t+τ}
    pairs = torch.arange(n, 0, -1, dtype=torch.float64, device=summed.device)
    acov = summed / pairs
    half = n // 2
    if half > 2:
        acov[half:] = summed[half:].sum() / pairs[half:].sum()
    return acov


def pooled_spectrum(c: torch.Tensor) -> torch.Tensor:
    """The circulant eigenvalues ``(n + 1,)`` float64 (bins ``0..n`` of a circulant of size ``2n``, mean 1 over
    all ``2n``: a kernel of variance 1) of the pooled autocovariance of ``c`` ``(n, r)``
    (:func:`pooled_autocovariance`; offset ``n`` repeats offset ``n − 1``), **its spectral lines taken out**.

    A line is what a helix or a period is made of, so a null with it would explain a helix by itself: a
    stationary curve with a line at period 256 turns like a cone of that period (median rotation share 0.61,
    so a 4-turn cone at 0.81 was "not a helix"). Each bin is capped at the background: the larger of the
    AR(1)-plus-white spectrum fitted to the autocovariance's first two offsets and a running median of the
    spectrum (:func:`pos_geometry.analysis._spectra.local_background`, windows of ±8 to ±64 bins: it passes
    under a line and follows a shoulder). Bin 0 (a constant, which every statistic centres away) takes bin
    1's value, so the kernel is not singular along the constant; bins the estimate makes negative are 0.
    """
    acov = pooled_autocovariance(c)
    n = acov.shape[0]
    if n < 3 or float(acov[0]) <= 0:
        return torch.ones(n + 1, dtype=torch.float64, device=acov.device)
    lam = torch.fft.rfft(torch.cat([acov, acov[-1:], acov[1:].flip(0)])).real.clamp_min(0)
    lam = lam / torch.cat([lam, lam[1:-1].flip(0)]).mean().clamp_min(torch.finfo(torch.float64).tiny)
    phi, red = ar1_from_lags(acov[1] / acov[0], acov[2] / acov[0])
    f = torch.arange(n + 1, dtype=torch.float64, device=lam.device) / (2 * n)
    ar1 = ar1_white_spectrum(phi, red, f)
    median = local_background(lam[None, 1:], pad=1)[0] * math.log(2.0)  # the pooled bins are not exponential
    lam[1:] = torch.minimum(lam[1:], torch.maximum(ar1[1:], median))
    lam[0] = lam[1]
    return lam / torch.cat([lam, lam[1:-1].flip(0)]).mean().clamp_min(torch.finfo(torch.float64).tiny)


def toeplitz_kernel(lam: torch.Tensor, n: int) -> torch.Tensor:
    """The row covariance ``K`` ``(n, n)`` float64 whose circulant embedding has eigenvalues ``lam``."""
    acov = torch.fft.irfft(lam, n=2 * n)[:n]
    idx = torch.arange(n, device=lam.device)
    return acov[(idx[:, None] - idx[None, :]).abs()]


def stationary_column_covariance(
    c: torch.Tensor, lam: torch.Tensor, dim: int = 0
) -> tuple[torch.Tensor, torch.Tensor]:
    """``(λ, W)`` of the column covariance of ``c`` ``(n, r)`` under the row kernel with spectrum ``lam``
    (:func:`toeplitz_kernel`; held at a ridge of :data:`NUGGET_FLOOR` for the solves): the maximum-likelihood
    one, its eigenvalues' sampling spread taken out (:func:`shrink_spread`).

    ``W`` ``(r, r)``: its eigenvectors on the ``r`` axes of ``c``. ``λ`` ``(r + e,)`` descending, ``e = dim − r −
    1`` when the embedding space has ``dim`` axes and the table spans fewer than ``dim − 1`` of them (more
    columns than positions): the estimate is then zero off the table's span only because there are too few
    rows to see the rest, so those ``e`` axes (outside the span and the mean's direction) are shrunk along
    with the others, and the surrogates have them. Without them, 768 iid AR(1) columns over 256 positions
    were drawn in 255 dimensions and turned less than the table (``"helix"`` in 9 of 20).
    """
    k = toeplitz_kernel(lam.to(c.device), c.shape[0])
    k.diagonal().add_(NUGGET_FLOOR)
    evals, w = column_covariance(c, k)
    extra = max(0, int(dim) - evals.shape[0] - 1)
    padded = torch.cat([evals, evals.new_zeros(extra)])
    return shrink_spread(padded, c.shape[0] - 1), w


def shrink_spread(evals: torch.Tensor, dof: float) -> torch.Tensor:
    """The eigenvalues ``evals`` ``(p,)`` (descending) of a covariance estimate with ``dof`` degrees of
    freedom, the sampling spread of their bulk taken out.

    A Wishart estimate spreads eigenvalues that are equal in truth over Marchenko–Pastur's law: 768 iid
    AR(1) columns whitened over 1024 positions come out from 0.02 to 3.5 times their mean, and surrogates
    drawn with that spread turn less than the table (768-wide AR(1) tables were "helices" far above ``α``).
    A spiked model separates what is real from that spread: eigenvalues above the bulk's upper edge
    ``μ (1 + √(p_b/m))²`` (``μ``: the bulk's mean, ``p_b`` its size, ``m = dof``; with a margin of
    ``5 m^{-2/3}`` for the largest one's Tracy–Widom fluctuation) are kept as they are, peeled off until none
    is left above. The bulk is then shrunk linearly towards its mean so that its sum of squares is the
    unbiased estimate of the truth's: ``E tr(S²) = (1 + 1/m) tr(Σ²) + tr(Σ)²/m`` and
    ``E tr(S)² = tr(Σ)² + 2 tr(Σ²)/m`` give ``T = (tr(S²) − tr(S)²/m) / (1 + 1/m − 2/m²)``, and
    ``(1 − ρ) S + ρ μ I`` has ``tr(·²) = c + (1 − ρ)² (tr(S²) − c)``, ``c = p_b μ²``. An isotropic bulk is
    made flat; structure in it beyond the sampling spread stays in part; the total is unchanged. With fewer
    degrees of freedom than bulk axes (``m < p_b``: a noise-free smooth curve's likelihood, about 28 rows' worth
    for 1024 positions of length scale 100) the bulk's structure is not identifiable and it is made flat: its
    unbiased ``tr(Σ²)`` is too noisy to shrink by (GP tables of 64 iid columns would beat their surrogates in 6 of
    30 at α = 0.05, against 0 of 30 with the bulk flat).
    """
    p = evals.shape[0]
    m = max(int(dof), 2)
    k = 0  # eigenvalues peeled off as spikes
    while k < p - 2:
        bulk = evals[k:]
        mu = float(bulk.mean())
        edge = mu * (1 + (bulk.shape[0] / m) ** 0.5) ** 2 * (1 + 5 * m ** (-2 / 3))
        above = int((bulk > edge).sum())
        if above == 0:
            break
        k += above
    bulk = evals[k:]
    pb = bulk.shape[0]
    s1, s2 = float(bulk.sum()), float((bulk**2).sum())
    c = s1 * s1 / max(pb, 1)
    if pb < 2 or s2 <= c * (1 + 1e-12):
        return evals
    if m < pb:  # fewer degrees of freedom than bulk axes: its structure is not identifiable, only its mean
        return torch.cat([evals[:k], torch.full_like(bulk, s1 / pb)])
    t2 = (s2 - s1 * s1 / m) / (1 + 1 / m - 2 / m**2)
    rho = 1 - min(1.0, max(0.0, (t2 - c) / (s2 - c))) ** 0.5
    return torch.cat([evals[:k], (1 - rho) * bulk + rho * (s1 / pb)])

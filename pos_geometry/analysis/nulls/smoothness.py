"""How smooth a table is, as the smooth-GP null models it: length scale, noise share, column covariance.

The smooth-GP null (:func:`pos_geometry.analysis.nulls.surrogates.smooth_gp`) treats a table ``X`` ``(n, d)`` as a
matrix-normal draw: rows correlated by the squared-exponential kernel plus white noise,
``K_η = (1 − η)·exp(-Δ²/2ℓ²) + η·I``, columns by a covariance ``Σ``:
``X = 1μᵀ + K_η^{1/2} Z Σ^{1/2}`` with ``Z`` iid standard normal. This module estimates its parameters:

* :func:`length_scale`: ``ℓ`` and the noise share ``η``, from the table's centred autocorrelation by
  offset (:func:`autocorrelation`) against what that estimator returns on average for the model
  (:func:`expected_autocorrelation`);
* :func:`gp_column_covariance`: ``Σ`` by maximum likelihood given ``K_η``, as its eigen-decomposition.

The null itself takes the Wishart spread out of ``Σ``'s eigenvalues
(:func:`pos_geometry.analysis.nulls.basis._likelihood_axes`) and draws ``ℓ`` over its own sampling spread
(:mod:`pos_geometry.analysis.nulls.gp_nodes`).

Why ``Σ`` by likelihood and not the table's sample covariance: the rows of a smooth table are far from
independent (1024 positions of length scale 79 hold about seven independent rows' worth of information),
so its sample covariance is far more spread than ``Σ``: the principal axes of 64 iid GP columns carry
27%, 23%, 14%, ... of the variance although every column has the same. Surrogates drawn with the sample
variances spread it once more, and their principal coordinates are then less smooth and less predictable
than the table's own (on GP tables, the recurrence's gain 64 rows ahead: 0.96 for the tables, a median of
0.77 for such surrogates, 0.96 with the likelihood's ``Σ``).
"""

from __future__ import annotations

import math

import numpy as np
import torch

__all__ = [
    "autocorrelation",
    "column_covariance",
    "expected_autocorrelation",
    "gp_column_covariance",
    "length_scale",
    "storage_noise_share",
]

NUGGET_FLOOR = 1e-9
"""The noise share below which ``K_η`` is held for the likelihood's solves (its condition number then
stays below ~1e12 for ``n ≤ 8192``); the surrogates themselves are drawn with the estimated share."""


def autocorrelation(x: torch.Tensor) -> torch.Tensor:
    """Centred autocorrelation by offset ``(..., n)``: ``c(Δ) = mean_t <a_t, a_{t+Δ}> / mean_t |a_t|²``.

    ``a`` = ``x`` ``(..., n, d)`` (one table or a batch) centred over positions; computed with an FFT along
    positions (zero-padded, so there is no wrap-around), in float64.
    """
    a = x.to(torch.float64)
    a = (a - a.mean(dim=-2, keepdim=True)).mT.contiguous()  # positions last: each column's FFT is contiguous
    n = a.shape[-1]
    spec = torch.fft.rfft(a, n=2 * n, dim=-1)
    power = (spec.real**2 + spec.imag**2).sum(dim=-2)  # summed over columns before the one inverse FFT
    acov = torch.fft.irfft(power, n=2 * n, dim=-1)[..., :n]
    acov = acov / torch.arange(n, 0, -1, dtype=acov.dtype, device=acov.device)
    return acov / acov[..., :1].clamp_min(torch.finfo(torch.float64).tiny)


def _crossings(c: np.ndarray, level: np.ndarray) -> np.ndarray:
    """``(B,)``: for each curve of ``c`` ``(B, n)``, the first offset ``Δ ≥ 1`` where it falls below its
    ``level`` ``(B,)``, linearly interpolated; NaN where it never does."""
    below = c[:, 1:] < level[:, None]
    i = np.argmax(below, axis=1) + 1
    rows = np.arange(c.shape[0])
    before, after = c[rows, i - 1], c[rows, i]
    at = i - 1 + (before - level) / np.maximum(before - after, 1e-300)
    return np.where(below.any(axis=1), at, np.nan)


def expected_autocorrelation(n: int, ell: float, nugget: float) -> np.ndarray:
    """What :func:`autocorrelation` returns on average ``(n,)`` for a GP of kernel ``exp(-Δ²/2ℓ²)`` plus
    the nugget share of white noise: the mean of each diagonal of ``P K P`` (``P`` removes the mean over
    positions, as the estimator does), over that of the main diagonal. Centring over a window only a few
    length scales long makes the autocorrelation fall faster than the kernel; this is by how much."""
    return _expected(n, np.array([float(ell)]), nugget)[0]


def _expected(n: int, ells: np.ndarray, nugget: float) -> np.ndarray:
    """:func:`expected_autocorrelation` for each length scale of ``ells`` ``(B,)``: ``(B, n)``."""
    lag = np.arange(n, dtype=np.float64)
    k = (1 - nugget) * np.exp(-0.5 * (lag[None, :] / np.maximum(ells, 1e-12)[:, None]) ** 2)
    k[:, 0] += nugget
    cum = np.cumsum(k, axis=1)
    rows = cum + cum[:, ::-1] - k[:, :1]  # r_t = Σ_j k(|t − j|) = Σ_{m≤t} k(m) + Σ_{1≤m≤n−1−t} k(m)
    total = rows.sum(axis=1, keepdims=True)
    prefix = np.concatenate([np.zeros((len(ells), 1)), np.cumsum(rows, axis=1)], axis=1)
    counts = n - lag
    head = prefix[:, n - lag.astype(int)] / counts  # mean of r_t over t < n − Δ
    tail = (prefix[:, n : n + 1] - prefix[:, lag.astype(int)]) / counts  # mean of r_t over t ≥ Δ
    acov = k - (head + tail) / n + total / n**2
    return acov / np.maximum(acov[:, :1], 1e-300)


def _intercept(c: np.ndarray) -> float:
    """``1 − c`` extrapolated to offset 0 from offsets 1 and 2 (``1 − c(Δ) ≈ a + bΔ²`` near 0): the share
    of the variance that does not continue from one position to the next, the smooth part's own drop
    removed."""
    return 1.0 - (4.0 * c[1] - c[2]) / 3.0


def _bisect(increasing, target: float, lo: float, hi: float) -> float:
    """The ``v`` in ``[lo, hi]`` where the increasing ``increasing(v)`` reaches ``target`` (40 halvings)."""
    for _ in range(40):
        mid = 0.5 * (lo + hi)
        lo, hi = (mid, hi) if increasing(mid) < target else (lo, mid)
    return 0.5 * (lo + hi)


def _ell_given(c: np.ndarray, nugget: float) -> float:
    return float(_ells_given(c[None], nugget)[0])


def _ells_given(c: np.ndarray, nugget: float) -> np.ndarray:
    """``(B,)``: the length scale of each autocorrelation curve of ``c`` ``(B, n)`` given the noise share: the
    ``ℓ`` whose expected curve (:func:`expected_autocorrelation`) first falls below ``e^{-1/2}`` of its value at
    offset 1 where the curve does, found by bisection (all curves at once); ``n`` where the curve never falls
    that far or the expected one falls too soon at every ``ℓ ≤ n``."""
    n = c.shape[1]
    seen = _crossings(c, c[:, 1] * math.exp(-0.5))

    def crossing(ells: np.ndarray) -> np.ndarray:
        e = _expected(n, ells, nugget)
        at = _crossings(e, e[:, 1] * math.exp(-0.5))
        return np.where(np.isnan(at), float(n), at)

    out = np.full(seen.shape, float(n))
    falls = ~np.isnan(seen)
    target = seen[falls]
    lo, hi = np.maximum(0.5, target * 0.5), np.full(target.shape, float(n))
    early = crossing(lo) >= target  # the curve falls no later than any ℓ ≥ its half-crossing would
    late = crossing(np.array([float(n)]))[0] < target  # it falls later than ℓ = n would
    for _ in range(40):
        mid = 0.5 * (lo + hi)
        short = crossing(mid) < target
        lo, hi = np.where(short, mid, lo), np.where(short, hi, mid)
    found = np.maximum(0.5, 0.5 * (lo + hi))
    found = np.where(late, float(n), found)
    out[falls] = np.where(early, np.maximum(0.5, target), found)
    return out


def _nugget_given(c: np.ndarray, ell: float) -> float:
    n = c.shape[0]
    target = _intercept(c)

    def intercept(nugget: float) -> float:
        return _intercept(expected_autocorrelation(n, ell, nugget))

    if intercept(0.0) >= target:
        return 0.0
    if intercept(1.0) <= target:
        return 1.0
    return _bisect(intercept, target, 0.0, 1.0)


RESOLVED = 10.0
"""The autocorrelation's noise share is used when it is at least this many times the smooth part's own drop at
offset 1 (``1/2ℓ²``); below, the share is fitted by likelihood. Its sampling error is not a small fraction of
that drop: noise-free GP curves of length scale 100 over 1024 positions, stored in float32, read shares of 0.7–1.5
times ``1/2ℓ²`` in a third of the tables, whose smooth-GP surrogates then carried that much white noise and
predicted less well 64 rows ahead than the tables themselves (recurrence "rotations" in 32 of 200 such tables
at α = 0.01, ``benchmarks/RESULTS.md``)."""

LIKELIHOOD_ROWS = 1024
"""The noise share is fitted on the first this many positions (the kernel's eigendecomposition is cubic in
them; every window of a stationary table has the same share)."""
LIKELIHOOD_AXES = 64
"""The noise share is fitted on at most this many leading principal axes (every column of a matrix-normal
table is one with the same row covariance, so any of them tells ``η``; the leading ones carry the signal)."""


def _nugget_by_likelihood(y: torch.Tensor, ell: float) -> float:
    """The noise share ``η`` that maximises the matrix-normal likelihood of ``y`` ``(n, m)`` (float64,
    centred) given ``ℓ``, the column covariance profiled out:

        ℓ(η) = −(m/2) Σ_i log κ_i(η) − (n/2) log det Σ̂(η),   Σ̂(η) = Y_Vᵀ diag(1/κ(η)) Y_V / n,

    with ``κ_i(η) = (1 − η) k_i + η`` the eigenvalues of ``K_η`` (``k_i`` those of the kernel, ``Y_V`` = ``y``
    on its eigenvectors). A grid of 4 points per decade over ``[1e-9, 1]``, then 30 golden-section steps
    around its best. Noise well below the smooth part's own variance changes how predictable the principal
    coordinates are (on GP tables of ℓ = 20 the recurrence's gain falls from 0.97 to 0.94 at ``η`` = 6e-5),
    and only the likelihood sees it: it reads the noise floor in the kernel's fastest directions, where the
    smooth part has no variance at all.
    """
    n, m = y.shape
    evals, vecs = torch.linalg.eigh(kernel(n, ell, 0.0))
    k = evals.clamp_min(0)
    yv = vecs.T @ y

    def loglik(log_eta: float) -> float:
        eta = 10.0**log_eta
        kappa = (1 - eta) * k + eta
        sigma = (yv / kappa.sqrt()[:, None]).T @ (yv / kappa.sqrt()[:, None]) / n
        _, logdet = torch.linalg.slogdet(sigma)
        return float(-0.5 * m * torch.log(kappa).sum() - 0.5 * n * logdet)

    grid = np.linspace(-9.0, 0.0, 37)
    values = [loglik(g) for g in grid]
    best = int(np.argmax(values))
    lo, hi = grid[max(best - 1, 0)], grid[min(best + 1, len(grid) - 1)]
    golden = (math.sqrt(5) - 1) / 2
    a, b = hi - golden * (hi - lo), lo + golden * (hi - lo)
    fa, fb = loglik(a), loglik(b)
    for _ in range(30):
        if fa > fb:
            hi, b, fb = b, a, fa
            a = hi - golden * (hi - lo)
            fa = loglik(a)
        else:
            lo, a, fa = a, b, fb
            b = lo + golden * (hi - lo)
            fb = loglik(b)
    eta = 10.0 ** (0.5 * (lo + hi))
    return 0.0 if eta <= 2e-9 else float(min(eta, 1.0))


STORAGE = 10.0
"""A noise share within this many times what the table's storage rounding alone gives
(:func:`storage_noise_share`) is the rounding, not white noise, and the null gets none: a smooth curve stored in
float16 varies slowly across its rounding grid, so its rounding error is far more predictable than white noise
of the same variance. Read as white noise (shares of 2–7e-8 on GP curves in float16), it made the smooth-GP
surrogates predict less well than the tables, which the recurrence then called rotations in 25 of 200
(``benchmarks/RESULTS.md``); with no nugget, in none of the 10 such tables rechecked."""

_GRIDS = ((torch.float16, 10), (torch.bfloat16, 7))  # a half-precision storage and its mantissa bits


def storage_noise_share(x: torch.Tensor) -> float:
    """The share of ``x``'s ``(n, d)`` variance over positions that rounding to its storage grid gives: each
    entry's grid spacing ``u`` contributes ``u²/12``. The grid is float16's or bfloat16's when ``x`` has that
    dtype or every entry of it lies on that grid (a half-precision checkpoint read as float32), else 0 (finer
    grids round below every share the likelihood reads)."""
    a = x.detach()
    if not a.is_floating_point() or a.numel() == 0:
        return 0.0
    v = a.to(torch.float64)
    variance = float((v - v.mean(dim=0)).square().mean())
    if not variance > 0:
        return 0.0
    for dtype, bits in _GRIDS:
        on_grid = a.dtype == dtype or (a.element_size() > 2 and bool(torch.equal(a.to(dtype).to(a.dtype), a)))
        if on_grid:
            smallest = torch.finfo(dtype).tiny * 2.0**-bits  # the subnormals' spacing
            exponent = torch.frexp(v).exponent  # v = m·2^e with 0.5 ≤ |m| < 1: spacing 2^(e − 1 − bits)
            spacing = torch.ldexp(torch.ones_like(v), exponent - 1 - bits).clamp_min(smallest)
            spacing = torch.where(v == 0, torch.full_like(v, smallest), spacing)
            return float((spacing.square() / 12).mean()) / variance
    return 0.0


def length_scale(x: torch.Tensor, storage: float = 0.0) -> tuple[float, float]:
    """``(ℓ, η)``: the squared-exponential length scale and the white-noise ("nugget") share of ``x``.

    The centred autocorrelation of a smooth curve plus white noise is ``(1 − η)·k(Δ)`` for ``Δ ≥ 1`` and 1
    at ``Δ = 0`` (before centring). ``ℓ`` is read off the offset where ``c(Δ)`` first falls below
    ``c(1)·exp(-1/2)``, and ``η`` off the drop at offset 0 that the smooth part does not explain: ``1 − c``
    extrapolated to 0 from offsets 1 and 2 (a smooth kernel's own drop at offset 1, ``1/2ℓ²``, is not noise:
    read as noise, it gave a noise-free GP of ℓ = 20 a share of 0.002, enough to make its surrogates visibly
    rougher). Both are matched to the model's *expected* centred autocorrelation
    (:func:`expected_autocorrelation`; centring biases the crossing low when the window holds few length
    scales), alternating three times between ``ℓ`` given ``η`` and ``η`` given ``ℓ`` (bisection, 40 steps
    each). The autocorrelation resolves a noise share only down to about the smooth part's own drop at
    offset 1, ``1/2ℓ²``, and its sampling error is of that order: a share below :data:`RESOLVED` times it is
    fitted by likelihood instead (:func:`_nugget_by_likelihood`, on the leading principal axes), which reads
    shares of 1e-6 to a few percent. (A table that the model does not fit, GPT-2's, can have a likelihood that keeps rising
    as the share falls to 0 although 0.6% of its variance does not continue from one position to the
    next: above the resolution, the autocorrelation's share is the one that describes the table.) A table
    whose autocorrelation never falls that low gets ``ℓ = n``; white noise gets ``ℓ = 0.5``,
    ``η = 1``. ``storage``: the share the table's storage rounding gives (:func:`storage_noise_share`, of the
    table as stored: ``x`` may be a rescaled float64 copy); a share within :data:`STORAGE` times it is 0.
    """
    c = autocorrelation(x).cpu().numpy()
    n = c.shape[0]
    smooth = float(np.clip(c[1], 0.0, 1.0)) if n > 1 else 0.0
    if smooth <= 0:
        return 0.5, 1.0
    nugget = 1.0 - smooth
    ell = _ell_given(c, nugget)
    if n < 3:
        return ell, nugget
    for _ in range(3):
        nugget = _nugget_given(c, ell)
        ell = _ell_given(c, nugget)
    if n < 8 or nugget >= RESOLVED * 0.5 / ell**2:  # resolved by the autocorrelation
        return _rounding_is_not_noise(c, ell, nugget, storage)
    nugget = _nugget_by_likelihood(_leading_coordinates(x[:LIKELIHOOD_ROWS]), ell)
    return _rounding_is_not_noise(c, _ell_given(c, nugget), nugget, storage)


def _rounding_is_not_noise(c: np.ndarray, ell: float, nugget: float, storage: float) -> tuple[float, float]:
    if 0 < nugget <= STORAGE * storage:
        return _ell_given(c, 0.0), 0.0
    return ell, nugget


def _leading_coordinates(x: torch.Tensor) -> torch.Tensor:
    """The centred ``x`` ``(n, d)`` on its top :data:`LIKELIHOOD_AXES` principal axes ``(n, m)``, float64 on
    the CPU (the likelihood's small solves run there, beside the kernel's eigendecomposition)."""
    a = x.detach().to("cpu", torch.float64)
    a = a - a.mean(dim=0)
    if a.shape[1] <= LIKELIHOOD_AXES:
        return a
    evals, vecs = torch.linalg.eigh(a.T @ a if a.shape[1] <= a.shape[0] else a @ a.T)
    if a.shape[1] <= a.shape[0]:
        return a @ vecs[:, -LIKELIHOOD_AXES:]
    return vecs[:, -LIKELIHOOD_AXES:] * evals[-LIKELIHOOD_AXES:].clamp_min(0).sqrt()


def kernel(n: int, ell: float, nugget: float, *, floor: float = 0.0) -> torch.Tensor:
    """``K_η`` ``(n, n)`` float64: ``(1 − η)·exp(-Δ²/2ℓ²) + max(η, floor)·I``."""
    t = torch.arange(n, dtype=torch.float64)
    k = torch.exp(-0.5 * ((t[:, None] - t[None, :]) / max(ell, 1e-12)) ** 2) * (1 - nugget)
    k.diagonal().add_(max(nugget, floor))
    return k


def gp_column_covariance(
    y: torch.Tensor, ell: float, nugget: float, *, innovations: bool = False
) -> tuple[torch.Tensor, ...]:
    """``(λ, W)``: the eigen-decomposition ``Σ̂ = W diag(λ) Wᵀ`` (descending) of the maximum-likelihood
    column covariance of ``y`` ``(n, r)`` (float64, centred over positions) under the matrix-normal model
    with row covariance ``K_η`` (see the module docstring; :func:`column_covariance`). ``K_η`` is held at a
    noise share of at least :data:`NUGGET_FLOOR` for the solves. A surrogate column on axis ``W[:, i]`` then
    has variance ``λ_i``. ``innovations``: also return the whitened rows the estimate sums (see
    :func:`column_covariance`).
    """
    return column_covariance(y, kernel(y.shape[0], ell, nugget, floor=NUGGET_FLOOR), innovations=innovations)


def column_covariance(
    y: torch.Tensor, k: torch.Tensor, *, innovations: bool = False
) -> tuple[torch.Tensor, ...]:
    """``(λ, W)`` (descending) of the maximum-likelihood column covariance of ``y`` ``(n, r)`` (float64,
    centred over positions) given the row covariance ``k`` ``(n, n)`` (positive definite), its mean
    estimated by generalised least squares:

        Σ̂ = (Y − 1δᵀ)ᵀ K⁻¹ (Y − 1δᵀ) / (n − 1),   δ = Yᵀ K⁻¹ 1 / (1ᵀ K⁻¹ 1)    (float64),

    with ``K = L Lᵀ`` (Cholesky) and every product of the form ``(L⁻¹a)ᵀ(L⁻¹b)``: one triangular solve, a
    third of the cost of solving with ``K`` itself. ``innovations``: also return ``Z = L⁻¹(Y − 1δᵀ)`` ``(n, r)``,
    the whitened rows whose products sum to ``Σ̂ (n − 1)`` (what
    :func:`~pos_geometry.analysis.nulls.gp_dof.effective_dof` reads).
    """
    n = y.shape[0]
    chol = torch.linalg.cholesky(k.to(y.device))
    ones = torch.ones(n, 1, dtype=torch.float64, device=y.device)
    z = torch.linalg.solve_triangular(chol, torch.cat([y, ones], dim=1), upper=False)  # L⁻¹ [Y, 1]
    zy, z1 = z[:, :-1], z[:, -1:]
    g = zy.T @ zy  # Yᵀ K⁻¹ Y
    v = zy.T @ z1  # (r, 1): Yᵀ K⁻¹ 1
    s = (g - v @ v.T / (z1.T @ z1)) / max(n - 1, 1)
    lam, w = torch.linalg.eigh((s + s.T) / 2)
    if innovations:
        return lam.flip(0).clamp_min(0), w.flip(1), zy - z1 @ (v.T / (z1.T @ z1))
    return lam.flip(0).clamp_min(0), w.flip(1)

"""Frequency search and spectra shared by the helix, periodicity and recurrence analyses.

Private helpers, all in torch on the device of their input:

* :func:`frequency_grid`: angular frequencies from ``min_turns`` turns over the window up to Nyquist.
* :func:`harmonic_rss`: for each trial frequency ``w``, the residual sum of squares of the least-squares
  fit ``Y ≈ base @ B + cos(w t) a + sin(w t) b`` (linear in the coefficients once ``w`` is fixed).
* :func:`best_sinusoid`: per-column frequency search (coarse grid, then successively finer local grids).
* :func:`tapered_power`: Hann-tapered, zero-padded rFFT power of linearly detrended series.
"""

from __future__ import annotations

import math

import numpy as np
import torch
from scipy.optimize import minimize_scalar

__all__ = [
    "best_sinusoid",
    "mean_similarity_fft",
    "noise_colour",
    "refine_period",
    "sinusoid_rss",
    "frequency_grid",
    "harmonic_rss",
    "linear_detrend",
    "own_rss",
    "rss_near",
    "work_dtype",
]


def work_dtype(device: torch.device) -> torch.dtype:
    """float64 wherever the device supports it (phases ``w·t`` need the precision), else float32."""
    return torch.float32 if device.type == "mps" else torch.float64


def frequency_grid(span: float, n_points: int, *, min_turns: float = 1.0, oversample: int = 5, device=None):
    """Angular frequencies (rad/position) from ``min_turns`` turns over ``span`` positions up to π.

    ``w_j = w_min + j·step`` with ``step = 2π / (oversample · n_points)``, a fraction of the periodogram's
    resolution (so the grid is the bins of an ``oversample·n_points``-point FFT, shifted by ``w_min``:
    :func:`harmonic_rss` evaluates it with one FFT), and π last. Returns ``(grid, step)`` with ``grid`` a
    1-D float64 tensor.
    """
    w_min = 2 * math.pi * min_turns / max(span, 1.0)
    step = 2 * math.pi / (oversample * n_points)
    count = max(math.floor((math.pi - w_min) / step + 1e-9) + 1, 1)
    grid = w_min + step * torch.arange(count, dtype=torch.float64, device=device)
    if float(grid[-1]) < math.pi - 1e-9 * step:
        grid = torch.cat([grid, torch.tensor([math.pi], dtype=torch.float64, device=device)])
    return grid, step


def _orth_base(base: torch.Tensor) -> torch.Tensor:
    q, _ = torch.linalg.qr(base)
    return q


def harmonic_rss(y: torch.Tensor, t: torch.Tensor, base: torch.Tensor, freqs: torch.Tensor, chunk: int = 256):
    """RSS of ``y ≈ base·B + cos(w t)·a + sin(w t)·b`` for every ``w`` in ``freqs``, per column of ``y``.

    ``y``: ``(n, c)``; ``t``: ``(n,)`` consecutive positions; ``base``: ``(n, p)`` fixed regressors (full
    column rank); ``freqs``: ``(G,)``. Returns ``(G, c)``. A frequency whose sine column vanishes on the
    sample (e.g. ``w = π`` on integer positions) is handled by a ridge on the 2×2 normal equations.
    The run of ``freqs`` spaced ``2π/L`` apart for an integer ``L ≥ n`` (a :func:`frequency_grid`) is
    evaluated by FFTs of length ``L``; the others one by one (:func:`_harmonic_rss_direct`).
    """
    n = y.shape[0]
    if freqs.shape[0] >= 3:
        step = float(freqs[1] - freqs[0])
        size = round(2 * math.pi / step) if step > 0 else 0
        uniform = torch.isclose(freqs[1:] - freqs[:-1], freqs.new_tensor(step), rtol=0, atol=1e-9 * step)
        run = int(torch.cumprod(uniform.to(torch.int64), 0).sum()) + 1
        if size >= n and abs(2 * math.pi / size - step) <= 1e-9 * step and run >= 3:
            head = _harmonic_rss_fft(y, t, base, float(freqs[0]), size, run)
            if run == freqs.shape[0]:
                return head
            return torch.cat([head, _harmonic_rss_direct(y, t, base, freqs[run:], chunk)])
    return _harmonic_rss_direct(y, t, base, freqs, chunk)


def _harmonic_rss_fft(y: torch.Tensor, t: torch.Tensor, base: torch.Tensor, w0: float, size: int, count: int):
    """:func:`harmonic_rss` at ``w_j = w0 + 2πj/size``, ``j < count``, from length-``size`` FFTs.

    Positions are shifted to start at 0 (the pair ``cos(wt), sin(wt)`` spans the same plane as
    ``cos(w(t − t₀)), sin(w(t − t₀))``, so the RSS does not change). With ``F = Σ_s f(s) e^{−iw_j s}``:
    ``cᵀr = (Re, −Im) F[r]``, ``cᵀq`` likewise for the base, and ``Σ cos² = (n + Re E)/2``,
    ``Σ sin² = (n − Re E)/2``, ``Σ cos·sin = −Im E / 2`` with ``E = Σ_s e^{−2iw_j s}``.
    """
    n, k = y.shape
    q = _orth_base(base)
    r = y - q @ (q.T @ y)
    total = (r * r).sum(dim=0)
    s = (t - t[0]).to(y.dtype)
    one = torch.ones((), dtype=y.dtype, device=y.device)
    phase = torch.polar(one.expand(n), -w0 * s)
    spec = torch.fft.fft(torch.cat([r, q], dim=1) * phase[:, None], n=size, dim=0)[:count]  # (G, k + p)
    j = torch.arange(count, device=y.device)
    double = torch.fft.fft(phase * phase, n=size)[(2 * j) % size]  # Σ e^{-2iw_j s}
    hc, hs = spec.real[:, :k], -spec.imag[:, :k]
    qc, qs = spec.real[:, k:], -spec.imag[:, k:]
    cc = (n + double.real) / 2 - (qc * qc).sum(dim=1)
    ss = (n - double.real) / 2 - (qs * qs).sum(dim=1)
    cs = -double.imag / 2 - (qc * qs).sum(dim=1)
    ridge = 1e-10 * (cc + ss).clamp_min(1e-30)
    cc, ss = (cc + ridge)[:, None], (ss + ridge)[:, None]
    cs = cs[:, None]
    explained = (ss * hc * hc - 2 * cs * hc * hs + cc * hs * hs) / (cc * ss - cs * cs)
    return (total[None, :] - explained).clamp_min(0.0)


def _harmonic_rss_direct(
    y: torch.Tensor, t: torch.Tensor, base: torch.Tensor, freqs: torch.Tensor, chunk: int
):
    """:func:`harmonic_rss` for any ``freqs``, one ``(g, n, 2)`` block of cosines and sines at a time."""
    q = _orth_base(base)
    r = y - q @ (q.T @ y)
    total = (r * r).sum(dim=0)
    out = []
    for s in range(0, freqs.shape[0], chunk):
        wt = freqs[s : s + chunk, None] * t[None, :]  # (g, n)
        c = torch.stack([torch.cos(wt), torch.sin(wt)], dim=-1)  # (g, n, 2)
        c = c - q @ (q.T @ c)  # remove what the base already explains
        gram = c.transpose(1, 2) @ c  # (g, 2, 2)
        ridge = 1e-10 * gram.diagonal(dim1=1, dim2=2).sum(-1).clamp_min(1e-30)
        gram = gram + ridge[:, None, None] * torch.eye(2, dtype=gram.dtype, device=gram.device)
        h = c.transpose(1, 2) @ r  # (g, 2, c)
        out.append(total[None, :] - (h * torch.linalg.solve(gram, h)).sum(dim=1))
    return torch.cat(out).clamp_min(0.0)


def best_sinusoid(y: torch.Tensor, t: torch.Tensor, *, min_turns: float = 1.0, rounds: int = 4):
    """Best single-sinusoid fit ``y[:, j] ≈ c_j + a_j cos(w_j t) + b_j sin(w_j t)`` per column.

    The frequency ``w_j`` is searched on a grid from ``min_turns`` turns over the window to Nyquist
    (periodogram of the zero-padded FFT), then refined ``rounds`` times on local 9-point grids, 4× finer each
    by the exact least-squares RSS. Returns ``(freqs (c,), r2 (c,))``;
    a constant column has R² = 0.
    """
    n = y.shape[0]
    span = float(t[-1] - t[0]) if n > 1 else 1.0
    base = torch.ones(n, 1, dtype=y.dtype, device=y.device)
    # Coarse stage: the periodogram on a zero-padded FFT grid (spacing 2π / (5n)), which equals the exact
    # RSS reduction wherever cos/sin are orthogonal to the constant; the local stages below are exact.
    pad = 5 * n
    spec = torch.fft.rfft(y - y.mean(dim=0), n=pad, dim=0)
    fft_w = 2 * math.pi * torch.arange(spec.shape[0], dtype=y.dtype, device=y.device) / pad
    w_min = 2 * math.pi * min_turns / max(span, 1.0)
    keep = (fft_w >= w_min) & (fft_w <= math.pi)
    if not bool(keep.any()):
        keep = fft_w == fft_w[fft_w <= math.pi].max()
    grid, step = fft_w[keep], 2 * math.pi / pad
    best = grid[(spec.real[keep] ** 2 + spec.imag[keep] ** 2).argmax(dim=0)]  # (c,)
    lo, hi = max(w_min, float(grid[0]) - step), math.pi
    offsets = torch.linspace(-1.0, 1.0, 9, dtype=y.dtype, device=y.device)
    for _ in range(rounds):
        # each column's own 9-point grid around its best frequency; points past the band are evaluated
        # at its edge (the grid clamped to [lo, hi])
        cand = best[:, None] + step * offsets[None, :]
        rss = rss_near(y, t, best, step, offsets)
        for edge, out in ((lo, cand < lo), (hi, cand > hi)):
            cols = torch.nonzero(out.any(dim=1))[:, 0]  # only the columns whose grid crosses the edge
            if cols.numel():
                at_edge = rss_near(y[:, cols], t, torch.full_like(best[cols], edge), step, offsets[4:5])
                rss[cols] = torch.where(out[cols], at_edge, rss[cols])
        cand = cand.clamp(lo, hi)
        best = cand.gather(1, rss.argmin(dim=1, keepdim=True))[:, 0]
        step = step / 4
    final = own_rss(y, t, base, best[:, None])[:, 0]
    tss = ((y - y.mean(dim=0)) ** 2).sum(dim=0)
    r2 = torch.where(tss > 0, 1 - final / tss.clamp_min(1e-300), torch.zeros_like(tss))
    return best, r2


def rss_near(y: torch.Tensor, t: torch.Tensor, centre: torch.Tensor, step: float, offsets: torch.Tensor):
    """RSS of ``y[:, j] ≈ c + a cos(w t) + b sin(w t)`` at ``w = centre[j] + step·offsets[k]``: ``(c, m)``.

    The same numbers as :func:`own_rss` with a constant base, computed from shared phasors: ``e^{iwt} =
    e^{i centre_j t} · e^{i step·offset_k t}``, so each column needs one row of phases and the ``m`` trial
    frequencies are one complex matrix product ``(c, n) @ (n, m)``. With ``S_k = Σ_t e^{iw_k t}`` and
    ``C_k = Σ_t e^{2iw_k t}`` the centred normal equations are ``Σ cos² = (n + Re C)/2 − (Re S)²/n``,
    ``Σ sin² = (n − Re C)/2 − (Im S)²/n``, ``Σ cos·sin = Im C / 2 − Re S·Im S / n``.
    """
    n = y.shape[0]
    r = y - y.mean(dim=0)
    total = (r * r).sum(dim=0)
    one = torch.ones((), dtype=y.dtype, device=y.device)
    base = torch.polar(one.expand(centre.shape[0], n), centre[:, None] * t[None, :])  # (c, n)
    shift = torch.polar(one.expand(n, offsets.shape[0]), t[:, None] * (step * offsets)[None, :])  # (n, m)
    sums = (base * r.T) @ shift  # Σ r e^{iwt}: (c, m)
    s1 = base @ shift
    s2 = (base * base) @ (shift * shift)
    scc = (n + s2.real) / 2 - s1.real**2 / n
    sss = (n - s2.real) / 2 - s1.imag**2 / n
    scs = s2.imag / 2 - s1.real * s1.imag / n
    ridge = 1e-10 * (scc + sss).clamp_min(1e-30)
    scc, sss = scc + ridge, sss + ridge
    hc, hs = sums.real, sums.imag
    explained = (sss * hc * hc - 2 * scs * hc * hs + scc * hs * hs) / (scc * sss - scs * scs)
    return (total[:, None] - explained).clamp_min(0.0)


def own_rss(y: torch.Tensor, t: torch.Tensor, base: torch.Tensor, freqs: torch.Tensor, chunk: int = 32):
    """RSS of column ``j`` of ``y`` at each of its own trial frequencies ``freqs[j, :]``: ``(c, m)``."""
    q = _orth_base(base)
    r = y - q @ (q.T @ y)
    total = (r * r).sum(dim=0)
    out = []
    for s in range(0, y.shape[1], chunk):
        wt = freqs[s : s + chunk, :, None] * t  # (cc, m, n)
        c = torch.stack([torch.cos(wt), torch.sin(wt)], dim=-1)  # (cc, m, n, 2)
        c = c - q @ (q.T @ c)
        gram = c.transpose(-1, -2) @ c  # (cc, m, 2, 2)
        ridge = 1e-10 * gram.diagonal(dim1=-2, dim2=-1).sum(-1).clamp_min(1e-30)
        gram = gram + ridge[..., None, None] * torch.eye(2, dtype=gram.dtype, device=gram.device)
        h = torch.einsum("cmnk,nc->cmk", c, r[:, s : s + chunk])[..., None]  # (cc, m, 2, 1)
        out.append(total[s : s + chunk, None] - (h * torch.linalg.solve(gram, h)).sum(dim=(-1, -2)))
    return torch.cat(out).clamp_min(0.0)


def linear_detrend(y: torch.Tensor) -> torch.Tensor:
    """Remove the least-squares line from each series along the last axis."""
    n = y.shape[-1]
    x = torch.linspace(-1.0, 1.0, n, dtype=y.dtype, device=y.device)
    y = y - y.mean(dim=-1, keepdim=True)
    slope = (y * x).sum(dim=-1, keepdim=True) / (x * x).sum().clamp_min(1e-30)
    return y - slope * x


def mean_similarity_fft(x: torch.Tensor) -> torch.Tensor:
    """Mean cosine similarity by offset ``(c, n)`` of each table of ``x`` ``(c, n, d)``, by FFT along positions."""
    n = x.shape[-2]
    xn = x / torch.linalg.vector_norm(x, dim=-1, keepdim=True).clamp_min(torch.finfo(x.dtype).tiny)
    spec = torch.fft.rfft(xn.transpose(-1, -2), n=2 * n, dim=-1)  # along contiguous memory: ~20% faster
    power = (spec.real**2 + spec.imag**2).sum(dim=-2)  # (c, n + 1)
    acf = torch.fft.irfft(power, n=2 * n, dim=-1)[..., :n]
    return acf / torch.arange(n, 0, -1, dtype=x.dtype, device=x.device)


def sinusoid_rss(y: np.ndarray, t: np.ndarray, w: float) -> tuple[float, np.ndarray]:
    rss, coef, _ = _sinusoid_fit(y, t, w)
    return rss, coef


def _sinusoid_fit(y: np.ndarray, t: np.ndarray, w: float) -> tuple[float, np.ndarray, np.ndarray]:
    """``(rss, coefficients, residual)`` of ``c + s·(t − t̄) + a cos(wt) + b sin(wt)`` fitted to ``y``."""
    design = np.stack([np.ones_like(t), t - t.mean(), np.cos(w * t), np.sin(w * t)], axis=1)
    coef, *_ = np.linalg.lstsq(design, y, rcond=None)
    r = y - design @ coef
    return float(r @ r), coef, r


NEAR_BINS = (2, 6)
"""The residual's spectrum beside a line is read from the Fourier bins this far from it (the fit empties the
nearer ones)."""


def noise_colour(r: np.ndarray, w: float) -> float:
    """How much the residual ``r`` ``(n,)`` of a sinusoid fit at ``w`` (rad/position) exceeds white noise beside
    the line: its mean periodogram over the bins :data:`NEAR_BINS` away from ``w``, over its mean periodogram
    (``‖r‖²/n``, by Parseval), at least 1.

    The least-squares frequency's variance is set by the noise spectrum *at* the line's frequency (Whittle;
    Hannan 1973): ``σ²`` of the white-noise formula becomes ``2π f(w)``. A residual whose power sits at low
    frequencies (the similarity by offset, an average over pairs, is such a curve) thus has a frequency error
    several times the white-noise one; the ratio is never taken below 1 (the local estimate, from a dozen
    bins, is itself noisy)."""
    n = r.shape[0]
    power = np.abs(np.fft.rfft(r)) ** 2 / n
    away = np.abs(np.arange(power.shape[0]) - w * n / (2 * math.pi))
    near = (away >= NEAR_BINS[0]) & (away <= NEAR_BINS[1])
    near[0] = False  # the constant
    if n % 2 == 0:
        near[-1] = False  # Nyquist: a real bin, half the degrees of freedom
    mean = float(r @ r) / n
    if near.sum() < 2 or mean <= 0:
        return 1.0
    return max(1.0, float(power[near].mean()) / mean)


def refine_period(
    y: np.ndarray, t: np.ndarray, w0: float, w_lo: float, w_hi: float
) -> tuple[float, float, bool, bool]:
    """Least-squares sinusoid ``c + s·t + a cos(wt) + b sin(wt)`` near ``w0`` within ``[w_lo, w_hi]``.

    Returns ``(w, w_std, at_edge, off_peak)``: the frequency minimising the residual sum of squares within
    two periodogram bins of ``w0`` (a 41-point grid, then Brent's method around its best point; bounded, so
    never outside the band); its standard error, from the fit's covariance ``σ² (JᵀJ)⁻¹`` scaled by the
    residual's spectrum beside the line (:func:`noise_colour`: residuals are rarely white, and a frequency's
    error depends on the noise at that frequency); whether the fit ran into the band's low-frequency end;
    and whether it ran into the end of the two bins searched inside the band (``off_peak``: the residual
    falls further outside them, towards a stronger line; the peak is a side lobe or a shoulder of that line,
    not a sinusoid of its own).
    """
    span = float(t[-1] - t[0]) + 1.0
    bin_w = 2 * math.pi / span
    lo, hi = max(w_lo, w0 - 2 * bin_w), min(w_hi, w0 + 2 * bin_w)
    # A fine grid first (the RSS has several local minima within two bins), then Brent around the best.
    grid = np.linspace(lo, hi, 41)
    yt, tt = torch.from_numpy(np.ascontiguousarray(y, dtype=np.float64))[:, None], torch.from_numpy(t)
    line = torch.stack([torch.ones_like(tt), tt - tt.mean()], dim=1)
    costs = _harmonic_rss_direct(yt, tt, line, torch.from_numpy(grid), 64)[:, 0].numpy()
    i = int(np.argmin(costs))
    step = grid[1] - grid[0]
    res = minimize_scalar(
        lambda w: sinusoid_rss(y, t, w)[0],
        bounds=(max(lo, grid[i] - step), min(hi, grid[i] + step)),
        method="bounded",
        options={"xatol": 1e-12},
    )
    w = float(res.x) if res.fun <= costs[i] else float(grid[i])
    rss, coef, r = _sinusoid_fit(y, t, w)
    a, b = coef[2], coef[3]
    jac = np.stack(
        [
            np.ones_like(t),
            t - t.mean(),
            np.cos(w * t),
            np.sin(w * t),
            t * (-a * np.sin(w * t) + b * np.cos(w * t)),
        ],
        axis=1,
    )
    dof = max(len(t) - 5, 1)
    try:
        cov = np.linalg.inv(jac.T @ jac) * (rss / dof)
        w_std = float(math.sqrt(max(cov[4, 4], 0.0) * noise_colour(r, w)))
    except np.linalg.LinAlgError:
        w_std = math.inf
    tol = 1e-3 * bin_w
    at_edge = w <= w_lo + tol
    off_peak = not at_edge and ((lo > w_lo and w <= lo + tol) or (hi < w_hi and w >= hi - tol))
    return w, w_std, bool(at_edge), bool(off_peak)

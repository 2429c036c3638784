"""Null models for the analyses' verdicts: whole surrogate tables, and the Monte-Carlo test record.

A verdict is only as good as its null. PCA itself turns any smooth curve into sinusoids (the top
principal components of a random walk are close to ``cos(πjt/n)``; Antognini & Sohl-Dickstein 2018),
so every surrogate here is a **whole table** of the input's shape ``(n, d)``, pushed through the same
pipeline as the table (PCA included). Three families, each matched to a statistic of the table:

* :func:`step_walks` -- "a random walk with the table's own steps": the ``n - 1`` step vectors
  ``x[t+1] - x[t]``, in blocks of the table's length scale, in a random order, cumulated from ``x[0]``.
  Same steps and local arcs, no coordination between them.
* :func:`smooth_gp` -- "a smooth Gaussian-process curve of the table's length scale": each column an
  independent draw of a Gaussian process with the squared-exponential kernel ``exp(-Δ²/(2ℓ²))`` plus the
  table's share of white noise, scaled to the column's standard deviation; ``ℓ`` and the noise share are
  read off the table's centred autocorrelation by offset (:func:`length_scale`).
* :func:`red_noise` -- "AR(1) red noise plus white noise": each column an AR(1) process plus white
  noise, fitted to the column's lag-1 and lag-2 autocorrelation and its variance (the red-noise
  background of spectral peak tests in climate science and astronomy; Gilman et al. 1963, Schulz &
  Mudelsee 2002, with a white part for measurement noise).

None of them has a period or a rotation of its own; a smooth curve bent into sinusoids by PCA is what
they all produce. The p-value of an observed statistic ``T`` against ``S`` surrogate values is
``(1 + #{T_s >= T}) / (1 + S)`` (never 0; the smallest reachable value is ``1 / (1 + S)``).
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass

import numpy as np
import torch

from pos_geometry.analysis._fourier import ar1_plus_white

__all__ = [
    "NullTest",
    "autocorrelation",
    "length_scale",
    "monte_carlo_p",
    "red_noise",
    "smooth_gp",
    "step_walks",
    "surrogate_values",
    "NULL_DESCRIPTIONS",
    "SAMPLERS",
]

NULL_DESCRIPTIONS = {
    "step_walk": "random walks made of the table's own steps (blocks of its length scale, shuffled)",
    "smooth_gp": "smooth Gaussian-process curves with the table's length scale and noise share",
    "red_noise": "AR(1) red noise plus white noise, fitted to each column's autocorrelation and variance",
}


@dataclass(frozen=True)
class NullTest:
    """One Monte-Carlo test: ``statistic`` observed as ``observed``, against ``null`` surrogates.

    ``p_value`` = ``(1 + #{surrogate >= observed}) / (1 + n_surrogates)``; ``min_p_value`` = the
    smallest p these surrogates can give; ``null_median``/``null_q95``: the surrogate distribution;
    ``significant``: ``p_value <= alpha``.
    """

    statistic: str
    observed: float
    null: str
    null_description: str
    n_surrogates: int
    p_value: float
    min_p_value: float
    alpha: float
    null_median: float
    null_q95: float

    @property
    def significant(self) -> bool:
        return self.p_value <= self.alpha

    def words(self) -> str:
        """``"0.678 vs random walks ... (median 0.38, 95% 0.45; p = 0.005, 199 surrogates)"``."""
        return (
            f"{self.observed:.3g} vs {self.null_description} (median {self.null_median:.3g}, "
            f"95% {self.null_q95:.3g}; p = {self.p_value:.3g}, {self.n_surrogates} surrogates)"
        )


def monte_carlo_p(statistic: str, observed: float, null: str, values: np.ndarray, alpha: float) -> NullTest:
    """The :class:`NullTest` of ``observed`` against the surrogate ``values`` ``(S,)``."""
    values = np.asarray(values, dtype=np.float64)
    s = int(values.size)
    p = (1 + int(np.sum(values >= observed - 1e-12 * abs(observed)))) / (1 + s)
    return NullTest(
        statistic=statistic,
        observed=float(observed),
        null=null,
        null_description=NULL_DESCRIPTIONS[null],
        n_surrogates=s,
        p_value=float(p),
        min_p_value=1.0 / (1 + s),
        alpha=float(alpha),
        null_median=float(np.median(values)),
        null_q95=float(np.quantile(values, 0.95)),
    )


def _randn(shape: tuple[int, ...], gen: torch.Generator, like: torch.Tensor) -> torch.Tensor:
    """float32 Gaussian draws made on the CPU from ``gen``, cast to ``like``'s dtype and device: one seed
    gives the same surrogates on every device and for every dtype of the table."""
    return torch.randn(shape, generator=gen, dtype=torch.float32).to(device=like.device, dtype=like.dtype)


Sampler = Callable[[int, torch.Generator], torch.Tensor]
"""``sampler(count, generator)`` -> ``(count, n, d)`` surrogate tables."""


def step_walks(x: torch.Tensor) -> Sampler:
    """Random walks: ``x[0]`` plus the steps of ``x`` ``(n, d)`` cumulated in a random order of blocks.

    The ``n − 1`` steps ``x[t+1] − x[t]`` are cut into consecutive blocks of ``L = round(ℓ)`` steps (``ℓ``
    from :func:`length_scale`) and the blocks are shuffled. A random walk's blocks are independent, so it
    is its own surrogate; a curve that turns keeps its local arcs but loses the coordination between
    them. (Blocks rather than single steps: position-to-position noise dominates single steps, and a walk of
    shuffled noisy steps wanders like a random walk whatever the curve underneath.)
    """
    steps = x[1:] - x[:-1]
    m = steps.shape[0]
    block = max(1, min(m, round(length_scale(x)[0])))
    starts = torch.arange(0, m, block)

    def draw(count: int, gen: torch.Generator) -> torch.Tensor:
        out = torch.empty(count, m + 1, x.shape[1], dtype=x.dtype, device=x.device)
        out[:, 0] = x[0]
        for c in range(count):
            order = starts[torch.randperm(starts.shape[0], generator=gen)]
            idx = (order[:, None] + torch.arange(block)[None, :]).reshape(-1)
            idx = idx[idx < m].to(x.device)
            out[c, 1:] = x[0] + torch.cumsum(steps[idx], dim=0)
        return out

    return draw


def autocorrelation(x: torch.Tensor) -> torch.Tensor:
    """Centred autocorrelation by offset ``(n,)``: ``c(Δ) = mean_t <a_t, a_{t+Δ}> / mean_t |a_t|²``.

    ``a`` = ``x`` ``(n, d)`` centred over positions; computed with an FFT along positions (zero-padded,
    so there is no wrap-around), in float64.
    """
    a = x.to(torch.float64)
    a = a - a.mean(dim=0)
    n = a.shape[0]
    spec = torch.fft.rfft(a, n=2 * n, dim=0)
    acov = torch.fft.irfft(spec.real**2 + spec.imag**2, n=2 * n, dim=0)[:n].sum(dim=1)
    acov = acov / torch.arange(n, 0, -1, dtype=acov.dtype, device=acov.device)
    return acov / acov[0].clamp_min(torch.finfo(torch.float64).tiny)


def length_scale(x: torch.Tensor) -> tuple[float, float]:
    """``(ℓ, η)``: the squared-exponential length scale and the white-noise ("nugget") share of ``x``.

    The centred autocorrelation ``c(Δ)`` of a smooth curve plus white noise is ``(1 − η)·k(Δ)`` for
    ``Δ ≥ 1`` and 1 at ``Δ = 0``. So ``1 − η = c(1)`` (clipped to ``[0, 1]``), and ``ℓ`` is the offset where
    ``c(Δ)`` first falls below ``c(1)·exp(-1/2)`` (where ``exp(-Δ²/2ℓ²)`` does), interpolated linearly. A
    table whose autocorrelation never falls that low gets ``ℓ = n``; white noise gets ``ℓ = 0.5``, ``η = 1``.
    """
    c = autocorrelation(x).cpu().numpy()
    smooth = float(np.clip(c[1], 0.0, 1.0)) if c.shape[0] > 1 else 0.0
    level = smooth * math.exp(-0.5)
    below = np.nonzero(c[1:] < level)[0] + 1
    if smooth <= 0:
        return 0.5, 1.0
    if below.size == 0:
        return float(c.shape[0]), 1.0 - smooth
    i = int(below[0])
    frac = (c[i - 1] - level) / max(c[i - 1] - c[i], 1e-300)
    return float(max(0.5, i - 1 + frac)), 1.0 - smooth


def smooth_gp(x: torch.Tensor) -> Sampler:
    """Gaussian-process tables: squared-exponential kernel of ``x``'s :func:`length_scale`, plus its nugget.

    Each column is ``sqrt(1 − η)·f + sqrt(η)·ε`` with ``f`` a GP draw of kernel ``exp(-Δ²/2ℓ²)`` and ``ε``
    white noise, scaled to the standard deviation of the same column of ``x`` ``(n, d)``: smooth, with the
    table's length scale and its share of position-to-position noise, and no period or rotation of its own.
    The kernel's square root keeps only eigenvalues above ``1e-10`` of the largest, so a smooth kernel costs
    a few dozen columns instead of ``n``.
    """
    n, d = x.shape
    ell, nugget = length_scale(x)
    t = torch.arange(n, dtype=torch.float64, device=x.device)
    evals, evecs = torch.linalg.eigh(torch.exp(-0.5 * ((t[:, None] - t[None, :]) / ell) ** 2))
    keep = evals > 1e-10 * evals.max()
    root = (evecs[:, keep] * (evals[keep] * (1 - nugget)).sqrt()).to(x.dtype)  # (n, m)
    sigma = x.to(torch.float64).std(dim=0).to(x.dtype)
    white = math.sqrt(nugget)

    def draw(count: int, gen: torch.Generator) -> torch.Tensor:
        out = root @ _randn((count, root.shape[1], d), gen, root)
        if white > 0:
            out = out + white * _randn((count, n, d), gen, root)
        return out * sigma

    return draw


def red_noise(x: torch.Tensor) -> Sampler:
    """AR(1) red noise plus white noise, fitted column by column to ``x`` ``(n, d)``.

    Column ``j`` of a surrogate is ``mean_j + σ_j (sqrt(1 − η_j) a_t + sqrt(η_j) ε_t)`` with ``a`` a
    stationary AR(1) process of coefficient ``φ_j`` and unit variance and ``ε`` white. For that model the
    lag-1 and lag-2 autocorrelations are ``r₁ = (1 − η)φ`` and ``r₂ = (1 − η)φ²``, so ``φ = r₂ / r₁`` and
    ``1 − η = r₁² / r₂`` (clipped to ``[0, 0.9999]`` and ``[0, 1]``); a column where that does not hold
    (``r₂ ≤ 0`` or ``r₂ ≥ r₁``) is plain AR(1) with ``φ = max(r₁, 0)``. The white part matters: without it a
    table's measurement noise would stand out against a purely red background at high frequencies.
    """
    a = x.to(torch.float64)
    mean = a.mean(dim=0)
    phi64, smooth, var = ar1_plus_white((a - mean).T)  # one fit per column
    sigma = var.sqrt()
    phi = phi64.to(x.dtype)
    innov = torch.sqrt(1 - phi64**2).to(x.dtype)
    w_red, w_white = smooth.sqrt(), (1 - smooth).sqrt()
    n, d = x.shape

    def draw(count: int, gen: torch.Generator) -> torch.Tensor:
        y = _randn((count, n, d), gen, x) * innov
        y[:, 0] = y[:, 0] / innov
        for i in range(1, n):
            y[:, i] += phi * y[:, i - 1]
        white = _randn((count, n, d), gen, x).double()
        return ((y.double() * w_red + white * w_white) * sigma + mean).to(x.dtype)

    return draw


SAMPLERS: dict[str, Callable[[torch.Tensor], Sampler]] = {
    "step_walk": step_walks,
    "smooth_gp": smooth_gp,
    "red_noise": red_noise,
}


def surrogate_values(
    x: torch.Tensor,
    null: str,
    n_surrogates: int,
    random_state: int,
    statistic: Callable[[torch.Tensor], torch.Tensor | np.ndarray],
    *,
    budget_bytes: int = 48 * 2**20,
) -> np.ndarray:
    """``statistic`` of ``n_surrogates`` whole surrogate tables of ``x`` ``(n, d)``: ``(S, ...)`` float64.

    Tables are drawn and evaluated in chunks of about ``budget_bytes`` (never all at once), from one
    ``torch.Generator`` seeded with ``random_state``: the same seed gives the same surrogates on every
    device. ``statistic`` maps a ``(c, n, d)`` batch to ``(c, ...)`` values and must be scale-free: ``x`` is
    first divided by its largest entry, so a table times 1e200 gives the surrogates of the table itself.
    """
    x = (x.to(torch.float64) / x.detach().abs().amax().to(torch.float64).clamp_min(1e-300)).to(x.dtype)
    draw = SAMPLERS[null](x)
    gen = torch.Generator(device="cpu").manual_seed(int(random_state))
    per_table = x.shape[0] * x.shape[1] * 8
    chunk = max(1, budget_bytes // per_table)
    out = []
    for start in range(0, n_surrogates, chunk):
        vals = statistic(draw(min(chunk, n_surrogates - start), gen))
        out.append(
            vals.detach().cpu().double().numpy() if isinstance(vals, torch.Tensor) else np.asarray(vals)
        )
    return np.concatenate(out).astype(np.float64)

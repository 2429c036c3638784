"""The helix model's least squares: design matrices and the frequency search (NumPy float64, CPU).

Private to :mod:`pos_geometry.analysis.helix`, whose module docstring states the model.
"""

from __future__ import annotations

import math

import numpy as np
import torch
from scipy.optimize import least_squares, minimize_scalar

from pos_geometry.analysis._fourier import frequency_grid, harmonic_rss

__all__ = ["Fitter", "design", "rss_of", "solve"]


def design(t: np.ndarray, tau: np.ndarray, freqs, *, drift: bool) -> np.ndarray:
    cols = [np.ones_like(t)] + ([tau] if drift else [])
    for w in freqs:
        cols += [np.cos(w * t), np.sin(w * t)]
    return np.stack(cols, axis=1)


def solve(z: np.ndarray, x: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Coefficients ``(p, k)`` and residual ``(n, k)`` of ``z ≈ x @ coef``."""
    coef = np.linalg.lstsq(x, z, rcond=None)[0]
    return coef, z - x @ coef


def rss_of(z, t, tau, freqs, drift) -> float:
    return float(np.sum(solve(z, design(t, tau, freqs, drift=drift))[1] ** 2))


class Fitter:
    """Frequency search for one trajectory ``z`` ``(n, k)`` at positions ``t`` ``(n,)``."""

    def __init__(self, z: np.ndarray, t: np.ndarray, min_turns: float):
        self.z, self.t = z, t
        self.n, self.k = z.shape
        span = float(t[-1] - t[0]) + 1.0
        self.tau = (t - t.mean()) / (span / 2)
        grid, self.step = frequency_grid(span, self.n, min_turns=min_turns)
        self.grid = grid.numpy()
        self.w_lo, self.w_hi = float(self.grid[0]), float(self.grid[-1])
        # RSS below float64 round-off of the data is not evidence: floor it so exact curves are ranked by p.
        self.rss_floor = max(1e-12 * float(np.sum((z - z.mean(axis=0)) ** 2)), 1e-300)
        self.resolution = 2 * math.pi / span  # two harmonics closer than this are not separable

    def _separated(self, freqs) -> bool:
        w = np.sort(np.asarray(freqs))
        return bool(np.all(np.diff(w) >= self.resolution))

    def next_frequency(self, freqs: list[float], drift: bool) -> float:
        """Best added frequency given ``freqs``: grid search, then bounded 1-D refinement."""
        base = design(self.t, self.tau, freqs, drift=drift)
        far = np.all(np.abs(self.grid[:, None] - np.asarray(freqs)[None, :]) >= self.resolution, axis=1)
        rss = harmonic_rss(
            torch.from_numpy(self.z),
            torch.from_numpy(self.t),
            torch.from_numpy(base),
            torch.from_numpy(self.grid),
        ).sum(dim=1)
        rss = rss[torch.from_numpy(far)]
        w0 = float(self.grid[far][int(rss.argmin())])
        lo, hi = max(self.w_lo, w0 - self.step), min(self.w_hi, w0 + self.step)
        res = minimize_scalar(
            lambda w: rss_of(self.z, self.t, self.tau, [*freqs, w], drift),
            bounds=(lo, hi),
            method="bounded",
            options={"xatol": 1e-10},
        )
        ok = res.fun <= float(rss.min()) and self._separated([*freqs, float(res.x)])
        return float(res.x) if ok else w0

    def refine(self, freqs: list[float], drift: bool) -> list[float]:
        """Joint refinement of all frequencies (variable projection: coefficients solved inside)."""
        if len(freqs) < 2:
            return freqs

        def resid(w: np.ndarray) -> np.ndarray:
            return solve(self.z, design(self.t, self.tau, w, drift=drift))[1].ravel()

        x0 = np.clip(np.asarray(freqs), self.w_lo, self.w_hi)
        res = least_squares(resid, x0, bounds=(self.w_lo, self.w_hi), x_scale=self.step, xtol=1e-12)
        better = 2 * res.cost <= rss_of(self.z, self.t, self.tau, freqs, drift) and self._separated(res.x)
        return [float(w) for w in res.x] if better else freqs

    def bic(self, rss: float, p: int) -> float:
        big_n = self.n * self.k
        return big_n * math.log(max(rss, self.rss_floor) / big_n) + p * math.log(big_n)

    def circular(self, w: float, coef: np.ndarray) -> tuple[float, float, float]:
        """Constant-radius helix, started from a one-harmonic elliptical helix; returns ``(rss, r, w)``."""
        c, v, a, b = coef[0], coef[1], coef[2], coef[3]
        u, s, vt = np.linalg.svd(np.stack([a, b], axis=1), full_matrices=False)
        frame = u @ vt
        x0 = np.concatenate([c, v, [w, s.mean()], frame[:, 0], frame[:, 1]])
        k, t, tau, z = self.k, self.t, self.tau, self.z

        def resid(p: np.ndarray) -> np.ndarray:
            p1, p2 = p[2 * k + 2 : 3 * k + 2], p[3 * k + 2 :]
            u1 = p1 / max(np.linalg.norm(p1), 1e-300)
            u2 = p2 - (u1 @ p2) * u1
            u2 = u2 / max(np.linalg.norm(u2), 1e-300)
            wt = p[2 * k] * t
            model = (
                p[:k]
                + np.outer(tau, p[k : 2 * k])
                + p[2 * k + 1] * (np.outer(np.cos(wt), u1) + np.outer(np.sin(wt), u2))
            )
            return (model - z).ravel()

        res = least_squares(resid, x0, x_scale="jac")
        return float(2 * res.cost), abs(float(res.x[2 * k + 1])), float(res.x[2 * k])

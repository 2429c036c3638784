"""Is a PCA trajectory a helix, or a smooth random curve that PCA bent into sinusoids?

The statistic is the **rotation share**: the share of the top-``k`` trajectory's variance, after its
centre and linear drift (the helix axis) are removed, that its strongest planar rotation carries. For
each trial frequency ``w`` (from ``min_turns`` turns over the window to Nyquist, spaced a quarter of a
periodogram bin) the detrended trajectory ``r`` ``(n, k)`` is fitted by ``F = a cos(wt) + b sin(wt)``
(``a, b ∈ R^k``, least squares). ``F`` traces an ellipse; twice the sum of squares along its minor axis
is the part that turns in both directions, a circle's worth. The statistic is
``max_w 2 λ_min(FᵀF) / ‖r‖²`` ∈ [0, 1]: 1 for a helix (a circle around a straight axis), 0 for any
curve that oscillates in one direction only (a line, a parabola, one cosine).

A random walk's top principal components are close to ``cos(πjt/n)``, ``j = 1, 2, 3`` (Antognini &
Sohl-Dickstein 2018), and in projection these make partial rotations too; a smooth Gaussian process
does the same, and so does a wide stationary curve of any kernel (the leading principal axes of a
Toeplitz covariance are close to sine/cosine pairs: 19 of 20 tables of 768 AR(1) columns turned enough
to beat the first two nulls). So the statistic is compared with whole surrogate tables from
:mod:`pos_geometry.analysis.nulls.surrogates` (random walks of the table's own steps, smooth GP curves of its
length scale, and stationary curves with its own pooled spectrum), each pushed through the same PCA and
the same scan. The direct diagnostic
:func:`dct_correlation` is reported beside it.
"""

from __future__ import annotations

import functools
import math

import numpy as np
import torch

from pos_geometry.analysis.nulls.monte_carlo import NullTest, StopRule, monte_carlo_p
from pos_geometry.analysis.nulls.surrogates import surrogate_values

__all__ = ["HELIX_NULLS", "RotationScan", "dct_correlation", "helix_null_tests", "rotation_scan"]

HELIX_NULLS = ("step_walk", "smooth_gp", "stationary")


class RotationScan:
    """The rotation-share scan over trial frequencies for trajectories of ``n`` positions.

    The trial frequencies are the bins ``w_j = j·π/(2n)`` of a 4×-zero-padded FFT (a quarter of a
    periodogram bin apart) from ``min_turns`` turns over the window to Nyquist, so the projections of a
    whole batch of trajectories onto ``cos(w_j t)``, ``sin(w_j t)`` are one ``rfft``. The normal equations
    of those pairs (after removing a constant and a line) depend only on the positions: built once
    ``(G, 2, 2)`` (and one scan per ``(n, min_turns, device)`` is kept, see :func:`rotation_scan`).
    """

    def __init__(self, n: int, *, min_turns: float = 1.0, device: torch.device | str = "cpu"):
        dt = torch.float64 if torch.device(device).type != "mps" else torch.float32
        t = torch.arange(n, dtype=dt, device=device)
        self.n = n
        self.step = math.pi / (2 * n)
        self.w_min = 2 * math.pi * min_turns / n
        first = min(max(1, math.ceil(self.w_min / self.step - 1e-9)), 2 * n - 1)
        self.bins = slice(first, 2 * n + 1)
        self.grid = self.step * torch.arange(first, 2 * n + 1, dtype=dt, device=device)
        tau = (t - t.mean()) / max(n / 2, 1.0)
        self.q = torch.linalg.qr(torch.stack([torch.ones_like(t), tau], dim=1)).Q  # (n, 2)
        wt = self.grid[:, None] * t[None, :]
        c = torch.stack([torch.cos(wt), torch.sin(wt)], dim=-1)  # (G, n, 2)
        c = c - self.q @ (self.q.T @ c)
        self.gram = c.mT @ c  # (G, 2, 2): the fitted curve's covariance is Bᵀ G B
        ridge = 1e-10 * self.gram.diagonal(dim1=-2, dim2=-1).sum(-1).clamp_min(1e-30)
        self.inverse = torch.linalg.inv(
            self.gram + ridge[:, None, None] * torch.eye(2, dtype=dt, device=device)
        )
        self.dtype = dt

    def __call__(self, z: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """``z`` ``(B, n, k)`` -> ``(share (B,), frequency (B,))`` of each trajectory's strongest rotation."""
        z = z.to(self.dtype)
        r = z - self.q @ (self.q.T @ z)
        # cᵀr for every trial pair: the detrended r is orthogonal to the constant and the line, so the
        # raw cos/sin projections are the detrended ones; rfft gives Σ r e^{-iwt} = Σ r cos − i Σ r sin.
        spec = torch.fft.rfft(r, n=4 * self.n, dim=1)[:, self.bins]  # (B, G, k)
        ctr = torch.stack([spec.real, -spec.imag], dim=2)  # (B, G, 2, k)
        coef = self.inverse @ ctr  # (B, G, 2, k)
        # The fitted ellipse F = C B (n, k) has rank 2; the nonzero eigenvalues of FᵀF = Bᵀ G B are those of
        # the 2 x 2 matrix (B Bᵀ) G. Its smaller one is the sum of squares along the minor axis.
        mg = (coef @ coef.mT) @ self.gram  # (B, G, 2, 2)
        tr = mg[..., 0, 0] + mg[..., 1, 1]
        det = mg[..., 0, 0] * mg[..., 1, 1] - mg[..., 0, 1] * mg[..., 1, 0]
        minor = ((tr - torch.sqrt((tr * tr - 4 * det).clamp_min(0))) / 2).clamp_min(0)
        total = r.square().sum(dim=(-2, -1))  # (B,)
        best, idx = minor.max(dim=-1)
        share = 2 * best / total.clamp_min(torch.finfo(self.dtype).tiny)
        return share, self.grid[idx]


@functools.lru_cache(maxsize=8)
def rotation_scan(n: int, min_turns: float, device: str = "cpu") -> RotationScan:
    """The :class:`RotationScan` of ``n`` positions, built once per ``(n, min_turns, device)``."""
    return RotationScan(n, min_turns=min_turns, device=device)


def dct_correlation(z: np.ndarray) -> np.ndarray:
    """``|corr(z[:, j], cos(π (j+1) (t + ½) / n))|`` for each column ``j`` of ``z`` ``(n, k)``: ``(k,)``.

    Near 1 for every column: the trajectory is the cosine basis a random walk's PCA produces.
    """
    n, k = z.shape
    t = np.arange(n) + 0.5
    out = np.zeros(k)
    for j in range(k):
        basis = np.cos(np.pi * (j + 1) * t / n)
        zc = z[:, j] - z[:, j].mean()
        denom = np.linalg.norm(zc) * np.linalg.norm(basis - basis.mean())
        out[j] = abs(float(zc @ (basis - basis.mean()))) / denom if denom > 0 else 0.0
    return out


def helix_null_tests(
    rows: torch.Tensor,
    n_components: int,
    observed: float,
    *,
    min_turns: float,
    n_surrogates: int,
    alpha: float,
    random_state: int,
    method: str = "fast",
    sequential: bool = False,
) -> tuple[NullTest, ...]:
    """Rotation share of ``rows`` ``(n, d)`` (already ``observed``) against each of :data:`HELIX_NULLS`.

    Every surrogate is a table of the same rows (``method``: see :mod:`pos_geometry.analysis.nulls.basis`),
    centred and decomposed by the same top-``n_components`` PCA, then scanned like the table.
    ``sequential``: each null stops once enough surrogates reach ``observed`` (:class:`StopRule`).
    """
    scan = rotation_scan(rows.shape[0], float(min_turns), str(rows.device))

    def statistic(coords: torch.Tensor) -> torch.Tensor:
        return scan(coords)[0]

    rule = StopRule.for_level(observed, n_surrogates, alpha) if sequential else None
    return tuple(
        monte_carlo_p(
            "rotation_share",
            observed,
            null,
            surrogate_values(
                rows,
                null,
                n_surrogates,
                random_state + i,
                statistic,
                method=method,
                n_components=n_components,
                coordinates=True,
                rule=rule,
            ),
            alpha,
            method,
            rule=rule,
        )
        for i, null in enumerate(HELIX_NULLS)
    )

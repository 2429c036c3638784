"""The one-step map of a trajectory and what it predicts: least squares, powers, pairs, the null statistic.

A trajectory ``z`` ``(n, k)`` is fitted by ``z[t+1] ≈ M z[t] + b`` (``b = 0`` when not affine). The affine
map is iterated with one matrix power of the augmented ``(k+1, k+1)`` matrix ``[[M, b], [0, 1]]``, so an
``h``-step prediction costs ``log h`` products, not ``h``.
"""

from __future__ import annotations

import warnings

import numpy as np
import scipy.linalg
import torch

from pos_geometry.analysis import _small_linalg

__all__ = [
    "GAIN_FLOOR",
    "fit_map",
    "fitted_gain",
    "improvement",
    "predict",
    "real_log",
]

GAIN_FLOOR = -1.0  # a gain over persistence below this (worse than twice persistence) is recorded as this


def _solve(z: torch.Tensor, affine: bool, rcond: float) -> tuple[torch.Tensor, torch.Tensor]:
    """The one-step maps of trajectories ``z`` ``(B, n, k)`` float64, in row form, and their ranks ``(B,)``:
    :func:`_solve_pairs` of the consecutive rows ``(z[t], z[t+1])``."""
    return _solve_pairs(z[:, :-1], z[:, 1:], affine, rcond)


def _solve_pairs(
    a: torch.Tensor, y: torch.Tensor, affine: bool, rcond: float
) -> tuple[torch.Tensor, torch.Tensor]:
    """The one-step maps taking rows ``a`` to rows ``y`` (each ``(B, m, k)`` float64), in row form, and their
    ranks ``(B,)``.

    Minimum-norm least squares ``[a, 1] @ A ≈ [y, 1]`` by a truncated SVD of the design (singular values below
    ``rcond`` times the largest dropped): ``A`` ``(B, k+1, k+1)`` is ``[[Mᵀ, 0], [bᵀ, 1]]`` (``b = 0`` when
    not ``affine``), so ``h`` steps are one matrix power.
    """
    if affine:
        a = torch.cat([a, torch.ones_like(a[..., :1])], dim=-1)
    u, sv, vt = _small_linalg.svd(a)
    keep = (sv > rcond * sv[:, :1]) & (sv[:, :1] > 0)
    inv = torch.where(keep, 1 / sv.clamp_min(1e-300), torch.zeros_like(sv))
    coef = vt.mT @ ((u.mT @ y) * inv[..., None])  # (B, k [+1], k)
    k = y.shape[-1]
    aug = torch.zeros(y.shape[0], k + 1, k + 1, dtype=y.dtype, device=y.device)
    aug[:, :k, :k] = coef[:, :k]
    if affine:
        aug[:, k, :k] = coef[:, k]
    aug[:, k, k] = 1.0
    return aug, keep.sum(dim=-1)


def _ahead(z: torch.Tensor, aug: torch.Tensor, h: int) -> torch.Tensor:
    """``z[:, :-h]`` ``(B, n - h, k)`` pushed ``h`` steps by the row-form maps ``aug``."""
    k = z.shape[-1]
    power = torch.linalg.matrix_power(aug, h)
    return z[:, :-h] @ power[:, :k, :k] + power[:, k : k + 1, :k]


def fit_map(z: np.ndarray, affine: bool, rcond: float) -> tuple[np.ndarray, np.ndarray, int]:
    """Minimum-norm least squares ``z[1:] ≈ z[:-1] Mᵀ (+ b)`` by a truncated SVD, in float64.

    ``z``: ``(n, k)``. Singular values of the design below ``rcond`` times the largest are dropped.
    Returns ``M`` ``(k, k)``, ``b`` ``(k,)`` (zeros when not ``affine``) and the rank kept.
    """
    k = z.shape[1]
    aug, rank = _solve(torch.from_numpy(np.asarray(z, dtype=np.float64))[None], affine, rcond)
    aug = aug[0].numpy()
    return aug[:k, :k].T.copy(), aug[k, :k].copy(), int(rank[0])


def predict(z: np.ndarray, m: np.ndarray, b: np.ndarray, h: int) -> np.ndarray:
    """``z[:-h]`` ``(n - h, k)`` pushed ``h`` steps by ``z ↦ M z + b``: ``(n - h, k)``."""
    k = m.shape[0]
    aug = np.zeros((k + 1, k + 1))
    aug[:k, :k], aug[k, :k], aug[k, k] = m.T, b, 1.0
    return _ahead(torch.from_numpy(np.asarray(z, dtype=np.float64))[None], torch.from_numpy(aug)[None], h)[
        0
    ].numpy()


def real_log(m: np.ndarray) -> np.ndarray | None:
    """The real logarithm of ``M`` ``(k, k)`` (``scipy.linalg.logm``), or None when none exists."""
    ev = np.linalg.eigvals(m)
    if np.any((np.abs(ev.imag) <= 1e-12 * max(1.0, np.abs(ev).max())) & (ev.real <= 0)):
        return None
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        a = scipy.linalg.logm(m)
    if not np.all(np.isfinite(a)) or np.abs(np.imag(a)).max(initial=0.0) > 1e-8 * max(1.0, np.abs(a).max()):
        return None
    return np.real(a)


def improvement(z: torch.Tensor, rcond: float, horizon: int, affine: bool) -> torch.Tensor:
    """``1 − e_h / e_persist,h`` of each trajectory, floored at :data:`GAIN_FLOOR`.

    ``z``: ``(B, n, k)``. The map of each is the minimum-norm least-squares one-step map (:func:`_solve`,
    as :func:`fit_map`); ``e_h`` is its ``h``-step error, ``e_persist,h`` that of ``z[t+h] = z[t]``. A map
    that grows makes ``e_h`` huge: the floor keeps such a number out of a null distribution (it only says
    "worse than persistence"). Returns ``(B,)``.
    """
    return fitted_gain(z, rcond, horizon, affine)[0]


def fitted_gain(
    z: torch.Tensor, rcond: float, horizon: int, affine: bool
) -> tuple[torch.Tensor, torch.Tensor]:
    """``(gain (B,), maps (B, k+1, k+1))``: :func:`improvement` and the row-form maps it fitted
    (``[[Mᵀ, 0], [bᵀ, 1]]``, :func:`_solve_pairs`), for a caller that reads the maps too."""
    z = z.to(torch.float64)
    z = z / z.abs().amax(dim=(-2, -1), keepdim=True).clamp_min(1e-300)
    aug, _ = _solve(z, affine, rcond)
    target = z[:, horizon:]
    err = torch.linalg.matrix_norm(_ahead(z, aug, horizon) - target) / torch.linalg.matrix_norm(
        target - z[:, :-horizon]
    ).clamp_min(1e-300)
    gain = 1 - err
    gain = torch.where(torch.isfinite(gain), gain, torch.full_like(gain, GAIN_FLOOR)).clamp_min(GAIN_FLOOR)
    return gain, aug

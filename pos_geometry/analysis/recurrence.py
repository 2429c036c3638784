"""Is the positional code a one-parameter group?  Fit ``z[t+1] ≈ M z[t]`` in the top-``k`` PCA subspace.

A relative-position code that is linear and translation-invariant satisfies ``E[t+h] = M^h E[t]`` with
``M = exp(A)``: a rotary table is exactly such a code, with ``M`` block-diagonal rotations by its inverse
frequencies ``θ_i``. :func:`fit_recurrence` takes the top-``k`` PCA coordinates ``Z`` ``(n, k)`` of the
window and fits, by least squares on the device of the input,

    Z[1:] ≈ Z[:-1] Mᵀ            (``affine=False``)   or   Z[1:] ≈ Z[:-1] Mᵀ + 1 bᵀ   (``affine=True``).

Centring: by default the coordinates are **not** centred (``center=False``: PCA on the raw rows, so
``Z = X V``). Centring replaces ``z`` by ``z − μ`` and turns a linear recurrence into an affine one,
``z − μ ↦ M(z − μ) + (M − I)μ``; with ``center=True`` pass ``affine=True`` to absorb that offset.

Reported: ``M`` (``transition``, ``(k, k)``), its eigenvalues ``λ = ρ e^{iα}`` as ``moduli`` ρ (damping:
1 = undamped rotation), ``angles`` |α| ∈ [0, π] (rad/position) and ``periods`` 2π/|α| (positions; inf for
real positive eigenvalues); the ``h``-step prediction error ``‖M^h z_t − z_{t+h}‖_F / ‖z_{t+h}‖_F`` over all
``t`` (the affine map iterated when ``affine=True``) for each horizon shorter than the window (others are
listed in ``skipped_horizons``), next to the persistence baseline ``‖z_t − z_{t+h}‖_F / ‖z_{t+h}‖_F``; and
the real logarithm ``A = log M`` (``generator``, via ``scipy.linalg.logm`` on the CPU) when it exists
(no eigenvalue on the closed negative real axis), else None.
"""

from __future__ import annotations

import math
import warnings
from dataclasses import dataclass
from typing import Any

import numpy as np
import scipy.linalg
import torch

from pos_geometry.analysis._batch import BatchResult, PCAItem, pca_items
from pos_geometry.analysis._fourier import work_dtype
from pos_geometry.analysis._results import Result
from pos_geometry.embedding import Provenance
from pos_geometry.errors import InvalidArgumentError

__all__ = ["RecurrenceFit", "fit_recurrence"]


@dataclass(frozen=True, eq=False)
class RecurrenceFit(Result):
    """A linear (or affine) recurrence fitted to one matrix's top-``k`` PCA coordinates.

    ``transition`` ``(k, k)``, ``offset`` ``(k,)`` or None; ``eigenvalues`` ``(k,)`` complex, sorted by
    ``angles`` then by decreasing ``moduli``; ``periods`` ``(k,)``; ``prediction_error`` and
    ``persistence_error``: horizon → relative error; ``generator``: real ``log M`` ``(k, k)`` or None.
    Small arrays are NumPy on the CPU.
    """

    transition: np.ndarray
    offset: np.ndarray | None
    eigenvalues: np.ndarray
    moduli: np.ndarray
    angles: np.ndarray
    periods: np.ndarray
    prediction_error: dict[int, float]
    persistence_error: dict[int, float]
    skipped_horizons: tuple[int, ...]
    generator: np.ndarray | None
    k: int
    center: bool
    affine: bool
    window: tuple[int, int]
    n_positions: int
    explained_variance_ratio: np.ndarray
    provenance: Provenance

    def rotation_pairs(self) -> list[tuple[float, float]]:
        """``(period, modulus)`` of each complex-conjugate pair (eigenvalues with Im > 0), longest period first."""
        sel = self.eigenvalues.imag > 1e-12
        return sorted(zip(self.periods[sel].tolist(), self.moduli[sel].tolist(), strict=True), reverse=True)

    def summary_rows(self) -> list[tuple[str, str]]:
        pairs = ", ".join(f"{p:.4g} (|λ|={m:.4f})" for p, m in self.rotation_pairs()) or "none"
        real = self.moduli[np.abs(self.eigenvalues.imag) <= 1e-12]
        errs = ", ".join(
            f"h={h}: {e:.3g} (persistence {self.persistence_error[h]:.3g})"
            for h, e in self.prediction_error.items()
        )
        skipped = f"; skipped h={list(self.skipped_horizons)} (≥ window)" if self.skipped_horizons else ""
        return [
            (
                "subspace",
                f"top {self.k} PCs ({float(np.sum(self.explained_variance_ratio)):.1%}), "
                f"{'centred' if self.center else 'uncentred'}, {'affine' if self.affine else 'linear'} recurrence",
            ),
            ("window", f"positions {self.window[0]}..{self.window[1] - 1} ({self.n_positions})"),
            ("rotation periods (positions)", pairs),
            ("real eigenvalues", ", ".join(f"{v:.4f}" for v in real) or "none"),
            ("prediction error", errs + skipped),
            (
                "real logarithm",
                "exists" if self.generator is not None else "none (eigenvalue on the negative real axis)",
            ),
        ]


def _real_log(m: np.ndarray) -> np.ndarray | None:
    ev = np.linalg.eigvals(m)
    if np.any((np.abs(ev.imag) <= 1e-12 * max(1.0, np.abs(ev).max())) & (ev.real <= 0)):
        return None
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        a = scipy.linalg.logm(m)
    if not np.all(np.isfinite(a)) or np.abs(np.imag(a)).max(initial=0.0) > 1e-8 * max(1.0, np.abs(a).max()):
        return None
    return np.real(a)


def _fit_one(item: PCAItem, horizons: tuple[int, ...], center: bool, affine: bool) -> RecurrenceFit:
    z = item.coords.to(work_dtype(item.coords.device))
    n, k = z.shape
    if n < k + 2 + int(affine):
        raise InvalidArgumentError(
            f"fit_recurrence needs more positions than unknowns per equation (k + 1{' + 1' if affine else ''}); "
            f"got n={n} positions in the window with k={k}. Widen the window or lower k."
        )
    design = z[:-1]
    if affine:
        design = torch.cat([design, torch.ones(n - 1, 1, dtype=z.dtype, device=z.device)], dim=1)
    coef = torch.linalg.lstsq(design, z[1:]).solution  # (k [+1], k)
    m = coef[:k].T
    b = coef[k] if affine else torch.zeros(k, dtype=z.dtype, device=z.device)

    pred_err: dict[int, float] = {}
    pers_err: dict[int, float] = {}
    usable = tuple(h for h in horizons if h < n)
    for h in usable:
        pred = z[:-h]
        for _ in range(h):
            pred = pred @ m.T + b
        target = z[h:]
        denom = float(torch.linalg.matrix_norm(target)) or 1.0
        pred_err[h] = float(torch.linalg.matrix_norm(pred - target)) / denom
        pers_err[h] = float(torch.linalg.matrix_norm(z[:-h] - target)) / denom

    m_np = m.detach().cpu().numpy()
    ev = np.linalg.eigvals(m_np)
    angles = np.abs(np.angle(ev))
    order = np.lexsort((-np.abs(ev), angles))
    ev, angles = ev[order], angles[order]
    with np.errstate(divide="ignore"):
        periods = np.where(angles > 0, 2 * math.pi / np.where(angles > 0, angles, 1.0), np.inf)
    return RecurrenceFit(
        transition=m_np,
        offset=b.detach().cpu().numpy() if affine else None,
        eigenvalues=ev,
        moduli=np.abs(ev),
        angles=angles,
        periods=periods,
        prediction_error=pred_err,
        persistence_error=pers_err,
        skipped_horizons=tuple(h for h in horizons if h >= n),
        generator=_real_log(m_np),
        k=k,
        center=center,
        affine=affine,
        window=item.window,
        n_positions=n,
        explained_variance_ratio=np.asarray(item.explained_variance_ratio, dtype=np.float64),
        provenance=item.provenance,
    )


def fit_recurrence(
    x: Any,
    k: int = 8,
    *,
    window: Any = None,
    center: bool = False,
    affine: bool = False,
    horizons: tuple[int, ...] = (1, 8, 64),
) -> RecurrenceFit | BatchResult:
    """Fit ``z[t+1] ≈ M z[t]`` (+ ``b`` if ``affine``) in the top-``k`` PCA subspace; see the module docstring.

    ``x``: a ``PositionalEmbedding``, a list of them, a tensor/array ``(n, d)`` / ``(batch, n, d)``, or a
    ``PCAResult`` (its first ``k`` coordinates, with its own window and centring). Returns a
    :class:`RecurrenceFit`, or a ``BatchResult`` of them for a batch.

    >>> import numpy as np
    >>> theta = np.array([0.5, 0.05])
    >>> ang = np.arange(100)[:, None] * theta
    >>> table = np.concatenate([np.cos(ang), np.sin(ang)], axis=1)
    >>> fit = fit_recurrence(table, k=4)
    >>> np.round(np.unique(np.round(fit.angles, 8)), 6).tolist(), bool(np.allclose(fit.moduli, 1))
    ([0.05, 0.5], True)
    """
    if not isinstance(horizons, tuple | list) or not all(
        isinstance(h, int) and not isinstance(h, bool) and h >= 1 for h in horizons
    ):
        raise InvalidArgumentError(
            f"horizons must be a tuple of positive integers, e.g. (1, 8, 64); got {horizons!r}."
        )
    items, single = pca_items(x, k, window=window, center=center)
    fits = tuple(_fit_one(it, tuple(horizons), it.center, affine) for it in items)
    return fits[0] if single else BatchResult(fits, tuple(f.provenance for f in fits))

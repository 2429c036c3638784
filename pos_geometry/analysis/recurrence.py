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

Defaults that hold: ``n_components="auto"`` takes the fewest principal components holding
:data:`AUTO_VARIANCE` (99.9%) of the table's variance, at most :data:`AUTO_CAP` (32) and at least 2, so a
rotary table is covered whole (its columns hold equal shares) and the README's claim -- the eigen-frequencies
of a rotary table are its inverse frequencies -- holds with default arguments. The least squares are
solved in float64 on the CPU by a truncated SVD of the design (singular values below ``rcond`` times the
largest are dropped; ``rank`` reports what was kept), so an ill-conditioned table gives the minimum-norm
fit, the same to round-off on every call.

When rotations do not apply: the eigenvalues are reported, but ``rotation_pairs()`` is empty and
``status`` is ``"does not apply"`` (with ``reason``) when the fitted map's one-step gain over persistence
is no better than for random walks made of the table's own steps (``test``, a Monte-Carlo null through the
same PCA and fit: PCA turns a random walk into cosines that a linear map predicts well), or no better
than persistence (one-step error ≥ persistence's), or when no
conjugate pair has ``| |λ| − 1 | ≤`` :data:`MODULUS_TOLERANCE` (white noise: ``|λ| ≈ 0``). A pair is listed
only when its modulus is within that tolerance of 1.
"""

from __future__ import annotations

import math
import warnings
from dataclasses import dataclass
from typing import Any

import numpy as np
import scipy.linalg
import torch

from pos_geometry import _progress
from pos_geometry.analysis._batch import BatchResult, PCAItem, pca_items, renamed
from pos_geometry.analysis._inputs import as_batch, check_int, check_level, parse_window
from pos_geometry.analysis._null_basis import check_null_method
from pos_geometry.analysis._nulls import NullTest, monte_carlo_p, surrogate_values
from pos_geometry.analysis._results import Result
from pos_geometry.analysis.pca import PCAResult
from pos_geometry.embedding import Provenance
from pos_geometry.errors import InvalidArgumentError

__all__ = [
    "RecurrenceFit",
    "fit_recurrence",
    "AUTO_VARIANCE",
    "AUTO_CAP",
    "MODULUS_TOLERANCE",
    "PERSISTENCE_RATIO",
]

AUTO_VARIANCE = 0.999
AUTO_CAP = 32
MODULUS_TOLERANCE = 0.05
PERSISTENCE_RATIO = 1.0


@dataclass(frozen=True, eq=False, repr=False)
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
    n_components: int
    rank: int
    center: bool
    affine: bool
    window: tuple[int, int]
    n_positions: int
    explained_variance_ratio: np.ndarray
    status: str
    reason: str
    test: NullTest | None
    provenance: Provenance

    @property
    def k(self) -> int:
        """Deprecated name of :attr:`n_components`."""
        return self.n_components

    def rotation_pairs(self) -> list[tuple[float, float]]:
        """``(period, modulus)`` of each undamped conjugate pair (Im λ > 0, ``| |λ| − 1 | ≤ MODULUS_TOLERANCE``),
        longest period first; empty when ``status`` is ``"does not apply"``."""
        if self.status != "rotations":
            return []
        sel = (self.eigenvalues.imag > 1e-12) & (np.abs(self.moduli - 1) <= MODULUS_TOLERANCE)
        return sorted(zip(self.periods[sel].tolist(), self.moduli[sel].tolist(), strict=True), reverse=True)

    def summary_rows(self) -> list[tuple[str, str]]:
        pairs = ", ".join(f"{p:.4g} (|λ|={m:.4f})" for p, m in self.rotation_pairs())
        pairs = pairs or (f"does not apply: {self.reason}" if self.status != "rotations" else "none")
        real = self.moduli[np.abs(self.eigenvalues.imag) <= 1e-12]
        errs = ", ".join(
            f"h={h}: {e:.3g} (persistence {self.persistence_error[h]:.3g})"
            for h, e in self.prediction_error.items()
        )
        skipped = f"; skipped h={list(self.skipped_horizons)} (≥ window)" if self.skipped_horizons else ""
        return [
            (
                "subspace",
                f"top {self.n_components} PCs ({float(np.sum(self.explained_variance_ratio)):.1%}), "
                f"{'centred' if self.center else 'uncentred'}, {'affine' if self.affine else 'linear'} recurrence, "
                f"rank {self.rank}",
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


def _lstsq(design: np.ndarray, target: np.ndarray, rcond: float) -> tuple[np.ndarray, int]:
    """Minimum-norm least squares by a truncated SVD: ``(coef, rank)``; deterministic, float64."""
    u, sv, vt = np.linalg.svd(design, full_matrices=False)
    keep = sv > rcond * sv[0] if sv.size and sv[0] > 0 else np.zeros(sv.shape, dtype=bool)
    coef = vt[keep].T @ ((u[:, keep].T @ target) / sv[keep, None])
    return coef, int(keep.sum())


def _improvement(z: torch.Tensor, rcond: float, horizon: int) -> torch.Tensor:
    """``1 − e_h / e_persist,h``: how much better ``M^h`` predicts ``h`` rows ahead than persistence.

    ``z``: ``(B, n, k)`` trajectories; ``M`` is the minimum-norm least-squares one-step map of each (the
    same truncated SVD as the fit). Returns ``(B,)``.
    """
    z = z.to(torch.float64)
    z = z / z.abs().amax(dim=(-2, -1), keepdim=True).clamp_min(1e-300)
    a, y = z[:, :-1], z[:, 1:]
    u, sv, vt = torch.linalg.svd(a, full_matrices=False)
    keep = sv > rcond * sv[:, :1]
    inv = torch.where(keep, 1 / sv.clamp_min(1e-300), torch.zeros_like(sv))
    m_t = vt.mT @ ((u.mT @ y) * inv[..., None])  # (B, k, k): z[t+1] ≈ z[t] @ m_t
    pred = z[:, :-horizon] @ torch.linalg.matrix_power(m_t, horizon)
    target = z[:, horizon:]
    err = torch.linalg.matrix_norm(pred - target) / torch.linalg.matrix_norm(
        target - z[:, :-horizon]
    ).clamp_min(1e-300)
    return 1 - err


def _null(
    rows: torch.Tensor,
    z: torch.Tensor,
    k: int,
    center: bool,
    rcond: float,
    horizon: int,
    null: dict[str, Any],
) -> NullTest:
    """``M^horizon``'s gain over persistence on ``z`` ``(n, k)`` against random walks of ``rows``' own steps."""

    def statistic(coords: torch.Tensor) -> torch.Tensor:
        return _improvement(coords, rcond, horizon)

    observed = float(_improvement(z[None], rcond, horizon)[0])
    method = null["method"]
    values = surrogate_values(
        rows, "step_walk", null["n_surrogates"], null["random_state"], statistic, method=method, n_components=k,
        coordinates=center,
    )  # fmt: skip
    return monte_carlo_p(
        f"gain_over_persistence_h{horizon}", observed, "step_walk", values, null["alpha"], method
    )


def _status(
    moduli: np.ndarray, ev: np.ndarray, pred: dict[int, float], pers: dict[int, float], test: NullTest | None
) -> tuple[str, str]:
    if 1 in pred and pred[1] >= PERSISTENCE_RATIO * pers[1]:
        return "does not apply", (
            f"the fitted map predicts the next row no better than persistence z[t+1] = z[t] (one-step error "
            f"{pred[1]:.3g} vs {pers[1]:.3g}): a random-walk-like curve, whose eigenvalues near 1 are not rotations"
        )
    pairs = (ev.imag > 1e-12) & (np.abs(moduli - 1) <= MODULUS_TOLERANCE)
    if not pairs.any():
        return "does not apply", (
            f"no conjugate pair has |λ| within {MODULUS_TOLERANCE} of 1 (largest |λ| {float(moduli.max()):.3g}): "
            "the map damps rather than rotates"
        )
    if test is not None and not test.significant:
        return "does not apply", (
            f"the map predicts {test.statistic.rsplit('h', 1)[-1]} rows ahead no better than it does for a random walk: "
            "gain over persistence " + test.words()
        )
    return "rotations", f"{int(pairs.sum())} undamped rotation pair(s)"


def _auto_components(ratios: np.ndarray, d: int) -> int:
    if d <= AUTO_CAP:
        return max(2, min(d, int(ratios.size)))
    reached = np.nonzero(np.cumsum(ratios) >= AUTO_VARIANCE)[0]
    k = int(reached[0]) + 1 if reached.size else int(ratios.size)
    return max(2, min(k, int(ratios.size)))


def _fit_one(
    item: PCAItem,
    horizons: tuple[int, ...],
    center: bool,
    affine: bool,
    rcond: float,
    auto: bool,
    null: dict[str, Any],
) -> RecurrenceFit:
    d = int(item.rows.shape[1]) if item.rows is not None else AUTO_CAP + 1
    k = _auto_components(np.asarray(item.explained_variance_ratio), d) if auto else int(item.coords.shape[1])
    z = item.coords[:, :k].detach().to("cpu", torch.float64).numpy()
    n = z.shape[0]
    if n < k + 2 + int(affine):
        raise InvalidArgumentError(
            f"fit_recurrence needs more positions than unknowns per equation (n_components + 1"
            f"{' + 1' if affine else ''}); got n={n} positions in the window with n_components={k}. "
            "Widen the window or lower n_components."
        )
    # Work in the units of the largest coordinate: the fit is scale-free, and so are its errors.
    unit = float(np.abs(z).max()) or 1.0
    z = z / unit
    design = z[:-1]
    if affine:
        design = np.concatenate([design, np.ones((n - 1, 1))], axis=1)
    coef, rank = _lstsq(design, z[1:], rcond)  # (k [+1], k)
    m = coef[:k].T
    b = coef[k] if affine else np.zeros(k)

    pred_err: dict[int, float] = {}
    pers_err: dict[int, float] = {}
    usable = tuple(h for h in horizons if h < n)
    for h in usable:
        pred = z[:-h]
        for _ in range(h):
            pred = pred @ m.T + b
        target = z[h:]
        denom = float(np.linalg.norm(target)) or 1.0
        pred_err[h] = float(np.linalg.norm(pred - target)) / denom
        pers_err[h] = float(np.linalg.norm(z[:-h] - target)) / denom

    m_np = m
    ev = np.linalg.eigvals(m_np)
    angles = np.abs(np.angle(ev))
    order = np.lexsort((-np.abs(ev), angles))
    ev, angles = ev[order], angles[order]
    with np.errstate(divide="ignore"):
        periods = np.where(angles > 0, 2 * math.pi / np.where(angles > 0, angles, 1.0), np.inf)
    test = None
    if null["n_surrogates"] and pred_err:
        if item.rows is None:
            raise InvalidArgumentError(
                "fit_recurrence's null needs the table's rows, and this PCAResult does not hold them; pass the "
                "embedding (or a PCAResult from pca() of it), or n_surrogates=0 to skip the null."
            )
        horizon = max(h for h in pred_err if h <= n // 2) if any(h <= n // 2 for h in pred_err) else 1
        test = _null(item.rows, torch.from_numpy(z), k, center, rcond, horizon, null)
    status, reason = _status(np.abs(ev), ev, pred_err, pers_err, test)
    return RecurrenceFit(
        transition=m_np,
        offset=b * unit if affine else None,
        eigenvalues=ev,
        moduli=np.abs(ev),
        angles=angles,
        periods=periods,
        prediction_error=pred_err,
        persistence_error=pers_err,
        skipped_horizons=tuple(h for h in horizons if h >= n),
        generator=_real_log(m_np),
        n_components=k,
        rank=rank,
        center=center,
        affine=affine,
        window=item.window,
        n_positions=n,
        explained_variance_ratio=np.asarray(item.explained_variance_ratio[:k], dtype=np.float64),
        status=status,
        reason=reason,
        test=test,
        provenance=item.provenance,
    )


def fit_recurrence(
    x: Any,
    n_components: int | str = "auto",
    *,
    window: Any = None,
    center: bool = False,
    affine: bool = False,
    horizons: tuple[int, ...] = (1, 8, 64),
    rcond: float = 1e-10,
    n_surrogates: int = 99,
    alpha: float = 0.05,
    random_state: int = 0,
    null_method: str = "fast",
    **deprecated: Any,
) -> RecurrenceFit | BatchResult:
    """Fit ``z[t+1] ≈ M z[t]`` (+ ``b`` if ``affine``) in the top PCA subspace; see the module docstring.

    ``x``: a ``PositionalEmbedding``, a list of them, a tensor/array ``(n, d)`` / ``(batch, n, d)``, or a
    ``PCAResult`` (its coordinates, with its own window and centring). ``n_components``: an integer, or
    ``"auto"`` (the fewest components holding 99.9% of the variance, 2..32). ``rcond``: singular values of the
    design below ``rcond`` times the largest are dropped. ``n_surrogates``, ``alpha``, ``random_state``: the
    null for "rotations": the one-step gain over persistence must beat that of random walks made of the
    table's own steps (same PCA, same fit); ``n_surrogates=0`` skips it. ``null_method``: ``"fast"`` (the
    walks in the table's leading principal subspace) or ``"exact"`` (whole tables, the reference; see
    :mod:`pos_geometry.analysis._null_basis`). ``k=`` is a deprecated alias of
    ``n_components``.
    Returns a :class:`RecurrenceFit`, or a ``BatchResult`` of them for a batch.

    >>> import numpy as np
    >>> theta = np.array([0.5, 0.05])
    >>> ang = np.arange(100)[:, None] * theta
    >>> table = np.concatenate([np.cos(ang), np.sin(ang)], axis=1)
    >>> fit = fit_recurrence(table)
    >>> fit.n_components, np.round(np.unique(np.round(fit.angles, 8)), 6).tolist(), fit.status
    (4, [0.05, 0.5], 'rotations')
    """
    args = renamed("fit_recurrence", deprecated, {"k": "n_components"}, {"n_components": n_components})
    n_components = args["n_components"]
    if not isinstance(horizons, tuple | list) or not all(
        isinstance(h, int) and not isinstance(h, bool) and h >= 1 for h in horizons
    ):
        raise InvalidArgumentError(
            f"horizons must be a tuple of positive integers, e.g. (1, 8, 64); got {horizons!r}."
        )
    if isinstance(rcond, bool) or not isinstance(rcond, int | float) or not 0 <= rcond < 1:
        raise InvalidArgumentError(f"rcond must be a number in [0, 1), e.g. 1e-10; got {rcond!r}.")
    n_surrogates = check_int("n_surrogates", n_surrogates, 0, ">= 0 (0 skips the null)")
    random_state = check_int("random_state", random_state, 0, ">= 0 (a seed)")
    if n_surrogates:
        alpha = check_level(alpha, n_surrogates)
    null = {
        "n_surrogates": n_surrogates,
        "alpha": float(alpha),
        "random_state": random_state,
        "method": check_null_method(null_method),
    }
    auto = n_components == "auto"
    if auto:
        cap = AUTO_CAP
        if isinstance(x, PCAResult):
            cap = x.n_components_
        else:
            shape = as_batch(x).data.shape
            start, stop = parse_window(window, shape[1])
            cap = min(cap, shape[2], max(1, stop - start - 3))
        n_components = cap
    elif isinstance(n_components, str):
        raise InvalidArgumentError(
            f"n_components must be a positive integer or 'auto'; got {n_components!r}."
        )
    items, single = pca_items(x, n_components, window=window, center=center)
    with _progress.task("recurrence null", n_surrogates * len(items)):
        fits = tuple(
            _fit_one(it, tuple(horizons), it.center, affine, float(rcond), auto, null) for it in items
        )
    return fits[0] if single else BatchResult(fits, tuple(f.provenance for f in fits))

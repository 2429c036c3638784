"""Where the nulls' surrogate tables are drawn: the table's own principal axes, full or truncated.

Every null of :mod:`pos_geometry.analysis.nulls.surrogates` is drawn column by column in the table's **PCA basis**
(the centred table ``X − μ = Y Vᵀ``, ``Y`` ``(n, R)`` with uncorrelated columns, ``R`` its rank), then put
back around the table's mean (the smooth-GP null on the eigenvectors of its likelihood's column
covariance, a rotation of the principal axes within their span). So the surrogates match the table's
covariance whatever basis its columns happen to be stored in: the verdicts do not change when the
embedding space is rotated.

Two methods give the same null (``null_method``):

* ``"exact"``: all ``R`` axes; each surrogate is a whole ``(n, d)`` table ``μ + Y_s Vᵀ`` in the stored
  coordinates, pushed through the full pipeline (the reference).
* ``"fast"``: only the axes the surrogates need, and each surrogate stays in ``r + 1`` coordinates: the
  ``r`` axes plus the direction of the mean outside them. The axes kept are the fewest (in order of the
  surrogates' expected variance, :func:`_surrogate_variance`) that hold :data:`FAST_VARIANCE` of it and
  leave out less than :data:`TAIL_RATIO` times the variance of the ``n_components``-th axis (a statistic
  that reads 27 components needs more axes than one that reads 3). The map to ``r + 1`` coordinates is an
  isometry onto the subspace the surrogate lives in, so every statistic of the analyses (PCA, centred or
  not; cosine similarities; norms) is computed exactly on the ``(n, r + 1)`` table; what is left out is
  the variance the other axes carry. ``tests/analysis/nulls/test_null_methods.py`` checks, on the controls and
  the real tables, that both methods give the same surrogate distributions (two-sample KS) and the same
  verdicts.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from contextvars import ContextVar
from dataclasses import dataclass
from typing import TypeVar

import torch

from pos_geometry._threads import Flag
from pos_geometry.errors import InvalidArgumentError

__all__ = ["FAST_VARIANCE", "NULL_METHODS", "NullBasis", "check_null_method", "null_basis"]

NULL_METHODS = ("fast", "exact")
FAST_VARIANCE = 0.999
"""The share of the surrogates' expected variance the fast axes hold at least."""
TAIL_RATIO = 1.0
"""The axes left out hold less than this times the expected variance of the ``n_components``-th axis."""


def check_null_method(method: object) -> str:
    """``method`` if it is one of :data:`NULL_METHODS`, else a typed error that names them."""
    if method not in NULL_METHODS:
        raise InvalidArgumentError(
            f"null_method must be one of {NULL_METHODS} ('fast': the surrogates in the table's leading principal "
            f"subspace; 'exact': whole tables, the reference); got {method!r}."
        )
    return str(method)


@dataclass(frozen=True)
class NullBasis:
    """The table's principal axes, as the samplers and the embedding of surrogates need them.

    ``coords`` ``(n, r)``: the centred table's coordinates on the kept axes (float64; column ``j`` has
    variance ``σ_j²``, columns uncorrelated). ``axes`` ``(d, r)`` (``"exact"`` only, else None) put a
    surrogate back in the stored coordinates; ``mean_in`` ``(r,)``/``mean_out`` (the mean's coordinates on
    the kept axes and its length outside them) put it back around the mean in ``r + 1`` coordinates.
    ``length_scale``: ``(ℓ, η)`` of the whole table. ``variance_kept``: the kept axes' share of the
    surrogates' variance. ``scales`` ``(r,)``: the standard deviation each axis is drawn with, where the
    null sets it (the smooth-GP null: the square roots of its likelihood's column covariance, whose
    eigenvectors are then the axes), else None (each sampler fits the table's own coordinates).
    ``spectrum`` ``(n + 1,)``: for the stationary null, the table's pooled spectrum
    (:func:`pos_geometry.analysis.nulls.stationary.pooled_spectrum`), else None.
    Everything is in units of the table's largest entry.
    """

    method: str
    coords: torch.Tensor
    axes: torch.Tensor | None
    mean: torch.Tensor
    mean_in: torch.Tensor
    mean_out: float
    rank: int
    full_rank: int
    variance_kept: float
    length_scale: tuple[float, float]
    scales: torch.Tensor | None = None
    spectrum: torch.Tensor | None = None

    def embed(self, y: torch.Tensor) -> torch.Tensor:
        """Surrogates ``y`` ``(c, n, r)`` (centred, on the kept axes) as tables around the table's mean.

        ``"exact"``: ``(c, n, d)`` in the stored coordinates. ``"fast"``: ``(c, n, r + 1)``, isometric to them.
        """
        if self.axes is not None:
            return y @ self.axes.mT.to(y.dtype) + self.mean.to(y.dtype)
        out = torch.empty(*y.shape[:-1], y.shape[-1] + 1, dtype=y.dtype, device=y.device)
        out[..., :-1] = y + self.mean_in.to(y.device, y.dtype)
        out[..., -1] = self.mean_out
        return out


T = TypeVar("T")
_ONCE = threading.Lock()  # guards the pending computations of once()

_memory: ContextVar[tuple | None] = ContextVar("pos_geometry_decomposition", default=None)
"""The last table's decomposition, per context: each thread starts with its own (a sweep's workers each analyse
their own tables), and the workers of :func:`pos_geometry._threads.parallel_map` run in a copy of their
caller's, so they share the decomposition their caller computed."""


def _decomposition(x: torch.Tensor) -> tuple:
    """``(scale, mean, evals, axes, centred, (ℓ, η))`` of ``x / max|x|`` ``(n, d)``, remembered for the
    last table.

    ``analyze`` runs four nulls on the same rows (often as different views of them): the
    eigendecomposition is computed once. The memory is one slot per context (:data:`_memory`) holding the
    last table and its version counter; a table is served from it only if it is equal to it element by element, so an edited
    table is never served a stale decomposition.
    """
    last = _memory.get()
    if last is not None:
        prev, version, out = last
        same = prev is x or (
            prev.shape == x.shape
            and prev.dtype == x.dtype
            and prev.device == x.device
            and torch.equal(prev, x)
        )
        if same and prev._version == version:
            return out
    from pos_geometry.analysis.nulls.smoothness import length_scale, storage_noise_share

    scale = float(x.detach().abs().amax().to(torch.float64).clamp_min(1e-300))
    a = x.detach().to(torch.float64) / scale
    mean = a.mean(dim=0)
    c = a - mean
    n, d = c.shape
    if d <= n:
        evals, vecs = torch.linalg.eigh(c.T @ c)  # ascending
        evals, axes = evals.flip(0), vecs.flip(1)
    else:
        evals, u = torch.linalg.eigh(c @ c.T)
        evals, u = evals.flip(0), u.flip(1)
        keep = evals > 1e-12 * evals[0].clamp_min(torch.finfo(torch.float64).tiny)
        axes = (c.T @ u[:, keep]) / evals[keep].sqrt()
        evals = evals[keep]
    full = int((evals > 1e-12 * evals[0].clamp_min(torch.finfo(torch.float64).tiny)).sum())
    axes = axes[:, : max(full, 1)]
    out = {"scale": scale, "mean": mean, "evals": evals[: max(full, 1)], "axes": axes, "coords": c @ axes}
    out["length_scale"] = length_scale(a, storage_noise_share(x))
    _memory.set((x, x._version, out))
    return out


def remember(x: torch.Tensor, dec: dict) -> None:
    """Make ``dec``, what :func:`_decomposition` returned for ``x`` in another context (a worker thread of
    :func:`pos_geometry._threads.parallel_map`, whose context is a copy), this context's remembered one."""
    _memory.set((x, x._version, dec))


def _surrogate_variance(dec: dict, null: str, ell: float | None = None) -> torch.Tensor:
    """Each axis' expected variance in a surrogate of ``null`` ``(R,)``: what decides which axes matter.

    The red-noise surrogates have each axis' own variance by construction, and the smooth-GP ones the
    variance of their likelihood's column covariance on its own axes (:func:`_likelihood_axes`). A random walk of
    the table's steps does not: position-to-position noise, cumulated, wanders far more than it did in the
    table (a table with a short length scale has many blocks to shuffle), so its trailing axes can carry a
    real share of a walk's variance. That share is measured on 8 walks (a fixed seed; the spread of a walk's
    mean position is as large as its spread, so no shortcut formula), computed once per table.
    """
    if null in LIKELIHOOD_NULLS:
        return _likelihood_axes(dec, null, ell)[0]
    if null != "step_walk":
        return dec["evals"].clamp_min(0)

    def walk_variance() -> torch.Tensor:
        from pos_geometry.analysis.nulls.samplers import step_walks

        draw = step_walks(dec["coords"].to(torch.float32), *dec["length_scale"])
        gen = torch.Generator(device="cpu").manual_seed(0)
        walks = torch.cat([draw(2, gen) for _ in range(4)]).double()  # (8, n, R)
        return (walks - walks.mean(dim=1, keepdim=True)).square().mean(dim=1).mean(dim=0)

    return once(dec, "walk_variance", walk_variance)


LIKELIHOOD_NULLS = ("smooth_gp", "stationary")
"""The nulls drawn on the eigenvectors of their likelihood's column covariance (a rotation of the principal
axes within their span), each axis with its eigenvalue as variance."""


def _likelihood_axes(dec: dict, null: str, ell: float | None = None) -> tuple[torch.Tensor, torch.Tensor]:
    """``(λ, W)`` of ``null``'s column covariance on the principal axes (computed once per table and length
    scale): the smooth-GP null's (:func:`pos_geometry.analysis.nulls.smoothness.gp_column_covariance`, with the
    length scale ``ell``, by default the table's estimate) or the stationary null's
    (:func:`pos_geometry.analysis.nulls.stationary.stationary_column_covariance`) of the table's coordinates.

    Both are maximum-likelihood (Wishart) estimates, and both have their eigenvalues' sampling spread taken
    out (:func:`pos_geometry.analysis.nulls.stationary.shrink_spread`, over every axis of the embedding space):
    64 iid GP columns over 256 positions come out with eigenvalues from about 0.25 to 2.25 times their
    mean, and GP tables beat surrogates drawn with that spread (their principal axes turn less): "helix" at
    α = 0.05 in 20 of 200, 13 of 200 once flattened (``benchmarks/RESULTS.md``)."""
    key = f"{null}_axes" if ell is None or null != "smooth_gp" else f"{null}_axes_{float(ell)!r}"

    def axes() -> tuple[torch.Tensor, torch.Tensor]:
        if null == "smooth_gp":
            from pos_geometry.analysis.nulls.gp_dof import SMALL_NUGGET, effective_dof, likelihood_dof
            from pos_geometry.analysis.nulls.smoothness import gp_column_covariance
            from pos_geometry.analysis.nulls.stationary import shrink_spread

            n = dec["coords"].shape[0]
            length, nugget = _gp_length_scale(dec, ell)
            lam, w, z = gp_column_covariance(dec["coords"], length, nugget, innovations=True)
            dof = likelihood_dof(n, length, nugget)  # n − 1, or fewer rows' worth for a noise-free curve
            lam = lam * ((n - 1) / dof)
            if nugget < SMALL_NUGGET:  # fewer still where a few frequencies carry the estimate
                dof = min(dof, effective_dof(z, lam))
            # a Wishart estimate of m < p degrees of freedom has rank m: a table whose coordinates span fewer axes
            # than it has (a noise-free smooth curve stored in float32) has only that many degrees of freedom
            extra = max(0, int(dec["mean"].shape[0]) - lam.shape[0] - 1)  # axes the rows are too few to show
            rank = int((lam > 1e-10 * float(lam.max())).sum())
            if rank < lam.shape[0] + extra:
                dof = min(dof, max(2.0, float(rank)))
            return shrink_spread(torch.cat([lam, lam.new_zeros(extra)]), dof), w
        from pos_geometry.analysis.nulls.stationary import stationary_column_covariance

        return stationary_column_covariance(dec["coords"], _spectrum(dec), dec["mean"].shape[0])

    return once(dec, key, axes)


def _gp_length_scale(dec: dict, ell: float | None) -> tuple[float, float]:
    """``(ℓ, η)`` of the smooth-GP null: ``ell`` (one node of its length scale's spread,
    :mod:`pos_geometry.analysis.nulls.gp_nodes`) or the table's estimate, with the table's noise share."""
    estimate, nugget = dec["length_scale"]
    return (estimate if ell is None else float(ell)), nugget


def _spectrum(dec: dict) -> torch.Tensor:
    """The table's pooled spectrum (:func:`pos_geometry.analysis.nulls.stationary.pooled_spectrum`), once per table."""
    from pos_geometry.analysis.nulls.stationary import pooled_spectrum

    return once(dec, "spectrum", lambda: pooled_spectrum(dec["coords"]))


def once(dec: dict, key: str, compute: Callable[[], T]) -> T:
    """``dec[key]``, computed by ``compute()`` the first time: once, even when several threads (the analyses
    of :func:`pos_geometry.analyze` side by side) ask for it at the same moment. The others wait on a
    :class:`~pos_geometry._threads.Flag`, running the pool's other items meanwhile (the pieces of the
    computation they wait for among them) instead of leaving their cores idle."""
    while key not in dec:
        with _ONCE:
            if key in dec:
                break
            pending = dec.setdefault("pending", {})
            flag, mine = pending.get(key), key not in pending
            if mine:
                flag = pending[key] = Flag()
        if not mine:  # another thread computes it: run the pool's items until it is done (or failed)
            flag.wait()
            continue
        try:
            dec[key] = compute()
        finally:  # on failure the waiters find no value and no pending computation: one of them computes it
            with _ONCE:
                del dec["pending"][key]
            flag.set()
    return dec[key]


def _complement(axes: torch.Tensor, mean: torch.Tensor, count: int) -> torch.Tensor:
    """``count`` orthonormal axes ``(d, count)`` orthogonal to ``axes`` ``(d, r)`` and to ``mean`` ``(d,)``."""
    d = axes.shape[0]
    q = torch.linalg.qr(torch.cat([axes, mean[:, None]], dim=1), mode="complete").Q
    return q[:, d - count :]


def null_basis(
    x: torch.Tensor, method: str, null: str = "smooth_gp", *, min_rank: int = 0, ell: float | None = None
) -> NullBasis:
    """The :class:`NullBasis` of ``x`` ``(n, d)`` for ``method`` and the ``null`` family, in units of ``x``'s
    largest entry (every statistic of the nulls is scale-free); ``ell``: the smooth-GP null's length scale
    (by default the table's estimate).

    ``"fast"`` keeps the fewest axes holding :data:`FAST_VARIANCE` of the surrogates' expected variance
    (:func:`_surrogate_variance`), and at least ``2·min_rank``; ``"exact"`` keeps every axis.

    The axes come from the eigendecomposition of the float64 Gram matrix on the smaller side of the
    centred table (``d × d`` or ``n × n``); axes with eigenvalues below ``1e-12`` of the largest are rank
    deficiency, not variance, and are dropped.
    """
    dec = _decomposition(x)
    mean, evals, axes, coords = dec["mean"], dec["evals"], dec["axes"], dec["coords"]
    total = float(evals.clamp_min(0).sum())
    scales = None
    if total <= 0:
        raise InvalidArgumentError(
            "the nulls need a table that varies over positions; every row of this window is the same. "
            "Pass a window with distinct rows."
        )
    variance = _surrogate_variance(dec, null, ell)
    full = int(variance.shape[0])
    if null in LIKELIHOOD_NULLS:  # the likelihood's axes: a rotation of the principal ones
        w = _likelihood_axes(dec, null, ell)[1]
        axes, coords, scales = axes @ w, coords @ w, variance.sqrt()
        if full > axes.shape[1]:  # axes off the table's span (and its mean's direction): no coordinates
            coords = torch.cat([coords, coords.new_zeros(coords.shape[0], full - axes.shape[1])], dim=1)
            axes = (
                torch.cat([axes, _complement(axes, mean, full - axes.shape[1])], dim=1)
                if method == "exact"
                else axes
            )
    if method == "fast":
        order = torch.argsort(variance, descending=True)
        ranked = variance[order]
        left_out = ranked.flip(0).cumsum(0).flip(0)  # left_out[i]: what axes i, i+1, ... hold together
        k = max(1, min(int(min_rank), full))
        needed = (left_out > (1 - FAST_VARIANCE) * left_out[0]) | (left_out > TAIL_RATIO * ranked[k - 1])
        r = min(full, max(int(needed.sum()), k + 1, 2))
        keep = torch.sort(order[:r]).values
    else:
        r, keep = full, torch.arange(full)
    # the axes off the span come last, and the mean has no part on them (the fast path needs no vectors there)
    inside = keep[keep < axes.shape[1]]
    mean_in = torch.zeros(keep.shape[0], dtype=mean.dtype, device=mean.device)
    mean_in[: inside.shape[0]] = axes[:, inside].T @ mean
    axes = axes[:, keep] if method == "exact" else axes[:, inside]
    return NullBasis(
        method=method,
        coords=coords[:, keep],
        axes=axes if method == "exact" else None,
        mean=mean,
        mean_in=mean_in,
        mean_out=float(torch.linalg.vector_norm(mean - axes @ mean_in[: axes.shape[1]])),
        rank=r,
        full_rank=full,
        variance_kept=float(variance[keep].sum() / variance.sum().clamp_min(1e-300)),
        length_scale=_gp_length_scale(dec, ell if null == "smooth_gp" else None),
        scales=None if scales is None else scales[keep],
        spectrum=_spectrum(dec) if null == "stationary" else None,
    )

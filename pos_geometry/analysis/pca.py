"""Batched principal component analysis of positional tables, in torch, on the input's device.

:func:`pca` fits the top-``k`` principal components of one matrix ``(n, d)`` or of a batch
``(batch, n, d)`` at once (no Python loop over the batch) and returns a :class:`PCAResult` with
scikit-learn's attribute names and sign convention, so ``components_`` equal
``sklearn.decomposition.PCA(k).fit(x).components_`` up to rounding, signs included.

Solvers (``solver=``):

* ``"exact"``: eigh of the float64 Gram matrix ``AᵀA`` (``n >= d``) or a float64 thin SVD
  (``n < d``); ratios agree with ``PCA(svd_solver="full")`` to ~1e-7.
* ``"randomized"``: Halko et al.'s randomized range finder with ``n_iter`` power iterations
  (``"auto"``: 7 if ``k < 0.1 min(n, d)`` else 4, as scikit-learn) and ``n_oversamples`` extra
  columns (default 10), re-orthonormalised at every step. **Accuracy bound** (checked by the
  tests on the real GPT-2 table and on synthetic decaying spectra): every explained-variance
  ratio within ``1e-3`` of the exact one (absolute) and the top-``k`` subspace within a largest
  principal angle of ``1e-2`` rad of the exact one when there is a spectral gap after component
  ``k`` (``s_{k+1} / s_k <= 0.9``). Without a gap, individual components of near-equal variance
  are not determined by the data, by any solver.
* ``"auto"``: ``"randomized"`` when ``max(n, d) > 500`` and ``k < 0.1 min(n, d)`` (the regime
  where it is several times faster and as accurate as above), else ``"exact"``. GPT-2's table
  (1024 x 768) with ``k <= 76`` is fitted by the randomized solver.

The explained-variance ratio is relative to the **total** variance of all components
(``‖A‖_F² / (n-1)``), for both solvers, as in scikit-learn. Computation is float32 unless the
input is float64 (float16/bfloat16 are upcast to float32).
"""

from __future__ import annotations

from typing import Any, Literal

import numpy as np
import torch

from pos_geometry._dtypes import dtype_name
from pos_geometry.analysis._inputs import Window, as_batch, check_int, parse_window, refuse_non_finite
from pos_geometry.analysis._pca_results import PCAResult, item_at
from pos_geometry.analysis._pca_solvers import SUBSPACE_ITERATIONS, fit_batch, resolve_n_iter
from pos_geometry.errors import InvalidArgumentError

__all__ = ["PCAResult", "pca", "SOLVERS", "surrogate_coordinates"]

SOLVERS: tuple[str, ...] = ("auto", "exact", "randomized")


def _scales(xw: torch.Tensor) -> torch.Tensor:
    """Largest |entry| of each matrix ``(batch,)`` in float64: the unit the fit runs in.

    Dividing by it makes every result scale-free: a float32 table times 1e-30 or 1e20 gives the
    same ratios as the table itself (its squares would underflow or overflow float32 otherwise).
    """
    lo, hi = torch.aminmax(xw.detach().reshape(xw.shape[0], -1), dim=1)  # one pass, no |x| temporary
    return torch.maximum(lo.abs(), hi.abs()).to(torch.float64)


def _checked_scales(xw: torch.Tensor) -> torch.Tensor:
    """:func:`_scales` of ``xw`` ``(batch, n, d)``, refusing a non-finite or an all-zero matrix."""
    scale = _scales(xw)
    if not bool(torch.isfinite(scale).all()):  # min and max propagate NaN; inf is one
        refuse_non_finite(xw)
    if bool((scale == 0).any()):
        raise InvalidArgumentError(
            "every entry of the table is 0 in the window; PCA does not apply to an all-zero table. "
            "Check where it came from (an unset or zero-initialised weight?)."
        )
    return scale


def pca(
    x: Any,
    n_components: int = 10,
    *,
    window: Window = None,
    center: bool = True,
    solver: Literal["auto", "exact", "randomized"] = "auto",
    n_oversamples: int = 10,
    n_iter: int | Literal["auto"] = "auto",
    random_state: int = 0,
) -> PCAResult:
    """Top-``n_components`` PCA of the rows (positions) of one matrix or of each matrix of a batch.

    Args:
        x: a PositionalEmbedding, a list of them (one shape), or a tensor/array ``(n, d)`` or
            ``(batch, n, d)``. Computation happens on its device.
        n_components: ``k``, between 1 and ``min(n_window, d)``.
        window: ``(start, stop)`` positions to fit (slice semantics; ``(1, 1024)`` = rows 1..1023).
        center: subtract the mean over the windowed positions (as PCA does). ``False`` analyses the
            raw rows (an uncentred SVD); ``mean_`` is then zero.
        solver: ``"auto"``, ``"exact"`` or ``"randomized"`` (see the module docstring for the rule
            and the randomized solver's accuracy bound).
        n_oversamples, n_iter, random_state: randomized-solver settings (scikit-learn's defaults).

    Returns:
        A :class:`PCAResult` (batched when ``x`` was a batch).
    """
    if solver not in SOLVERS:
        raise InvalidArgumentError(f"solver must be one of {SOLVERS}; got {solver!r}.")
    if not isinstance(center, bool):
        raise InvalidArgumentError(f"center must be True or False; got {center!r}.")
    check_int("n_oversamples", n_oversamples, 0, ">= 0")
    check_int("random_state", random_state, 0, ">= 0 (a seed)")
    if n_iter != "auto":
        check_int("n_iter", n_iter, 0, ">= 0 or 'auto'")
    batch = as_batch(x, check_finite=False)  # the one min/max pass below checks it
    data = batch.data
    start, stop = parse_window(window, data.shape[1])
    xw = data[:, start:stop]
    n, d = int(xw.shape[1]), int(xw.shape[2])
    if (
        isinstance(n_components, bool)
        or not isinstance(n_components, int)
        or not 1 <= n_components <= min(n, d)
    ):
        raise InvalidArgumentError(
            f"n_components must be an integer between 1 and min(n_positions in window, d_model) = "
            f"min({n}, {d}) = {min(n, d)}; got {n_components!r}. Ask for fewer components or widen the window."
        )
    if center and n < 2:
        raise InvalidArgumentError(
            f"centred PCA needs at least 2 positions in the window; got {n} (window {(start, stop)}). "
            "Widen the window or pass center=False."
        )
    k = n_components
    if solver == "auto":
        solver = "randomized" if max(n, d) > 500 and k < 0.1 * min(n, d) else "exact"

    iters = resolve_n_iter(n_iter, k, n, d) if solver == "randomized" else None
    # the rows outside the window must be finite too (fit_batch checks the window's own, chunk by chunk)
    outside = [part for part in (data[:, :start], data[:, stop:]) if part.numel()]
    if any(not bool(torch.isfinite(_scales(part)).all()) for part in outside):  # min/max propagate NaN
        refuse_non_finite(data)
    s, comps, coords, mean, total_ss, scale = fit_batch(
        xw,
        k,
        scale=_checked_scales,  # per chunk, while the chunk is in the caches (one pass fewer)
        center=center,
        solver=solver,
        n_oversamples=n_oversamples,
        n_iter=iters or 0,
        random_state=random_state,
    )
    dof = max(n - 1, 1)
    s64 = s.detach().to("cpu", torch.float64).numpy()
    tss64 = total_ss.detach().to("cpu", torch.float64).numpy()
    if not np.all(tss64 > 0):
        raise InvalidArgumentError(
            f"the table has zero variance over the positions of window {(start, stop)}: every row is the same, "
            "so there are no principal directions. PCA does not apply; use a window with distinct rows "
            "(or center=False to analyse the raw rows)."
        )
    scale64 = scale.cpu().numpy()
    ratio = s64**2 / tss64[:, None]
    srank = tss64 / np.maximum(s64[:, 0] ** 2, np.finfo(np.float64).tiny)
    with np.errstate(over="ignore"):
        sv = s64 * scale64[:, None]
        ev = sv**2 / dof
        total_var = tss64 * scale64**2 / dof
    back = scale.to(coords.dtype).to(coords.device)
    coords = coords * back.view(-1, 1, 1)
    mean = mean * back.view(-1, 1)
    if not bool(torch.isfinite(coords).all()):  # a row's coordinates can exceed the largest entry by √d
        raise InvalidArgumentError(
            f"the table's principal coordinates overflow {dtype_name(coords.dtype)} (its entries reach "
            f"{float(scale.max()):.3g}, near the type's largest value {torch.finfo(coords.dtype).max:.3g}). "
            "Convert the table to float64 first: table.to(dtype=torch.float64), or pg.load(..., dtype=torch.float64)."
        )

    steps = []
    if (start, stop) != (0, data.shape[1]):
        steps.append(f"rows[{start}:{stop}]")
    if center:
        steps.append("center_positions")
    provs = tuple(p.with_processing(*steps) for p in batch.provenances)
    squeeze = (lambda t: item_at(t, 0)) if batch.single else (lambda t: t)
    randomized = solver == "randomized"
    return PCAResult(
        components_=squeeze(comps),
        explained_variance_=squeeze(ev),
        explained_variance_ratio_=squeeze(ratio),
        singular_values_=squeeze(sv),
        mean_=squeeze(mean),
        total_variance_=squeeze(total_var),
        stable_rank_=squeeze(srank),
        coordinates=squeeze(coords),
        positions=torch.arange(start, stop, device=xw.device),
        n_samples_=n,
        n_features_=d,
        window=(start, stop),
        center=center,
        solver=solver,
        n_iter=iters,
        n_oversamples=n_oversamples if randomized else None,
        random_state=random_state if randomized else None,
        provenance=provs[0] if batch.single else provs,
        fitted_rows=squeeze(xw),
    )


def surrogate_coordinates(
    x: torch.Tensor,
    n_components: int,
    *,
    center: bool = True,
    random_state: int = 0,
    subspace: bool = False,
) -> torch.Tensor:
    """Top-``n_components`` PCA coordinates ``(c, n, k)`` of internally made tables ``x`` ``(c, n, d)``.

    The same solver rule and signs as :func:`pca`, without its input checks, scaling and bookkeeping: for
    the surrogate tables of the analyses' nulls, which are finite by construction and already in units of
    their table's largest entry (:func:`~pos_geometry.analysis.nulls.surrogates.surrogate_values` divides by it), so
    their float32 squares cannot overflow; the coordinates are in the tables' own units. ``subspace``: the
    caller's statistic depends only on the subspace the coordinates span, so the randomized solver runs
    :data:`~pos_geometry.analysis._pca_solvers.SUBSPACE_ITERATIONS` (fewer products, the subspace as accurate).
    """
    n, d = x.shape[-2:]
    k = n_components
    # the fast nulls' surrogates are narrow (d = a few dozen axes): the d × d eigenproblem is the cheap one
    solver = "randomized" if min(n, d) > 200 and k < 0.1 * min(n, d) else "exact"
    iters, over = (resolve_n_iter("auto", k, n, d), 10) if solver == "randomized" else (0, 10)
    if subspace and solver == "randomized":
        iters, over = SUBSPACE_ITERATIONS
    coords = fit_batch(
        x,
        k,
        center=center,
        solver=solver,
        n_oversamples=over,
        n_iter=iters,
        random_state=random_state,
    )[2]
    return coords

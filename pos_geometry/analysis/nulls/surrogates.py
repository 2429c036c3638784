"""Null models for the analyses' verdicts: whole surrogate tables, and the Monte-Carlo test record.

A verdict is only as good as its null. PCA itself turns any smooth curve into sinusoids (the top
principal components of a random walk are close to ``cos(πjt/n)``; Antognini & Sohl-Dickstein 2018),
so every surrogate here is a **whole table** of the input's shape ``(n, d)``, pushed through the same
pipeline as the table (PCA included). Four families, each matched to a statistic of the table:

* :func:`step_walks` -- "a random walk with the table's own steps": the ``n - 1`` step vectors
  ``x[t+1] - x[t]``, in blocks of the table's length scale, in a random order, cumulated from ``x[0]``.
  Same steps and local arcs, no coordination between them.
* :func:`smooth_gp` -- "a smooth Gaussian-process curve of the table's length scale": the table as a
  matrix-normal draw, rows correlated by the squared-exponential kernel ``exp(-Δ²/(2ℓ²))`` plus the
  table's share of white noise, columns by the covariance that makes the table most likely under that
  kernel (:mod:`pos_geometry.analysis.nulls.smoothness`); each surrogate axis is an independent draw on an
  eigenvector of that covariance, with its eigenvalue as variance. ``ℓ`` and the noise share are read off
  the table's centred autocorrelation by offset (:func:`length_scale`); ``ℓ`` is an estimate, so the
  surrogates are split among a few length scales spread as far as the estimate's own sampling spread
  (:mod:`pos_geometry.analysis.nulls.gp_nodes`).
* :func:`stationary` -- "a stationary curve with the table's own spectrum": rows correlated by the table's
  pooled autocovariance (any kernel, rough or smooth), columns by the covariance that makes the table most
  likely under it (:mod:`pos_geometry.analysis.nulls.stationary`).
* :func:`red_noise` -- "AR(1) red noise plus white noise": each axis an AR(1) process plus white
  noise, fitted to the axis' lag-1 and lag-2 autocorrelation and its variance (the red-noise
  background of spectral peak tests in climate science and astronomy; Gilman et al. 1963, Schulz &
  Mudelsee 2002, with a white part for measurement noise).

Each family is drawn column by column **on the table's principal axes** (its PCA basis, or for the
smooth-GP null a rotation of it within the same span; see
:mod:`pos_geometry.analysis.nulls.basis`), where the columns are uncorrelated, and put back around the
table's mean: the surrogates match the table's covariance in whatever basis it is stored, so no verdict
depends on the basis. None of them has a period or a rotation of its own; a smooth curve bent into
sinusoids by PCA is what they all produce. The p-value of an observed statistic ``T`` against ``S`` surrogate values is
``(1 + #{T_s >= T}) / (1 + S)`` (never 0; the smallest reachable value is ``1 / (1 + S)``).

The Monte-Carlo test record and its p-values, sequential tests included, are in
:mod:`pos_geometry.analysis.nulls.monte_carlo`.
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np
import torch

from pos_geometry import _progress
from pos_geometry._threads import check_stop, cpu_workers, parallel_map
from pos_geometry.analysis._spectra import ar1_plus_white
from pos_geometry.analysis.nulls.basis import null_basis
from pos_geometry.analysis.nulls.draws import fourier_draws, mode_variances
from pos_geometry.analysis.nulls.draws import randn as _randn
from pos_geometry.analysis.nulls.gp_nodes import length_scale_nodes
from pos_geometry.analysis.nulls.mode_surrogates import FACTORS
from pos_geometry.analysis.nulls.monte_carlo import StopRule
from pos_geometry.analysis.nulls.samplers import Sampler, smooth_gp, step_walks, walk_block
from pos_geometry.analysis.nulls.smoothness import autocorrelation, length_scale
from pos_geometry.analysis.nulls.walk_coordinates import WalkCoordinates, block_orders, structure_pays
from pos_geometry.analysis.pca import surrogate_coordinates

__all__ = [
    "autocorrelation",
    "chunk_seeds",
    "length_scale",
    "red_noise",
    "smooth_gp",
    "stationary",
    "step_walks",
    "surrogate_values",
    "SAMPLERS",
]


def stationary(
    y: torch.Tensor, ell: float, nugget: float, scales: torch.Tensor | None = None, spectrum=None
) -> Sampler:
    """Stationary Gaussian curves with the table's own pooled spectrum (``ell``, ``nugget`` unused).

    Each axis is an independent draw whose autocovariance at offsets ``0..n−1`` is the table's pooled one
    (``spectrum`` ``(n + 1,)``: the eigenvalues of its circulant embedding of size ``2n``,
    :func:`pos_geometry.analysis.nulls.stationary.pooled_spectrum`), scaled to ``scales`` ``(r,)`` (the null
    basis passes the square roots of its likelihood's column covariance; by default each axis of ``y``
    ``(n, r)`` has its own standard deviation). Any kernel: a rough AR(1) curve, a smooth one, or neither;
    no period or rotation of its own beyond what a stationary curve with that spectrum has.
    """
    n, r = y.shape
    if spectrum is None:
        from pos_geometry.analysis.nulls.stationary import pooled_spectrum

        spectrum = pooled_spectrum(y.to(torch.float64) - y.to(torch.float64).mean(dim=0))
    sigma = (y.to(torch.float64).std(dim=0) if scales is None else scales).to(y.device, y.dtype)
    var = mode_variances(spectrum.to(y.device, torch.float64), 2 * n, 0.0).to(y.dtype)

    def draw(count: int, gen: torch.Generator) -> torch.Tensor:
        return (fourier_draws(var, n, 2 * n, (count, r), gen).mT * sigma).to(y.dtype)

    return draw


def red_noise(y: torch.Tensor, ell: float, nugget: float) -> Sampler:
    """AR(1) red noise plus white noise, fitted axis by axis to ``y`` ``(n, r)`` (``ell``, ``nugget`` unused).

    Axis ``j`` of a surrogate is ``σ_j (sqrt(1 − η_j) a_t + sqrt(η_j) ε_t)`` with ``a`` a stationary AR(1)
    process of coefficient ``φ_j`` and unit variance and ``ε`` white. For that model the lag-1 and lag-2
    autocorrelations are ``r₁ = (1 − η)φ`` and ``r₂ = (1 − η)φ²``, so ``φ = r₂ / r₁`` and ``1 − η = r₁² / r₂``
    (clipped to ``[0, 0.9999]`` and ``[0, 1]``); an axis where that does not hold (``r₂ ≤ 0`` or ``r₂ ≥ r₁``)
    is plain AR(1) with ``φ = max(r₁, 0)``. The white part matters: without it a table's measurement noise
    would stand out against a purely red background at high frequencies.
    """
    a = y.to(torch.float64)
    phi64, smooth, var = ar1_plus_white((a - a.mean(dim=0)).T)  # one fit per axis (float64)
    sigma = var.sqrt()
    phi = phi64.to(y.dtype)  # the draws themselves in the table's dtype: a null needs no more
    innov = torch.sqrt(1 - phi64**2).to(y.dtype)
    w_red, w_white = (smooth.sqrt() * sigma).to(y.dtype), ((1 - smooth).sqrt() * sigma).to(y.dtype)
    n, r = y.shape

    def draw(count: int, gen: torch.Generator) -> torch.Tensor:
        red = _randn((n, count, r), gen, y)  # positions first
        red[1:] *= innov  # a stationary start: a_0 has unit variance, every later innovation 1 − φ²
        red = _ar1_scan(red, phi).transpose(0, 1)
        white = _randn((count, n, r), gen, y)
        return torch.addcmul(white.mul_(w_white), red, w_red)

    return draw


def _ar1_scan(e: torch.Tensor, phi: torch.Tensor) -> torch.Tensor:
    """``a_t = φ a_{t−1} + e_t`` with ``a_0 = e_0`` along the first axis of ``e`` ``(n, ...)``, ``φ``
    broadcast over the rest: :func:`_ar1_steps` on the CPU, :func:`_ar1_log_scan` on an accelerator."""
    return _ar1_steps(e, phi) if e.device.type == "cpu" else _ar1_log_scan(e, phi)


def _ar1_steps(e: torch.Tensor, phi: torch.Tensor) -> torch.Tensor:
    """:func:`_ar1_scan` as ``n`` in-place steps over contiguous rows (each ``a_t`` one fused multiply-add over
    a ``(count, r)`` slice): on the CPU 10–20× faster than the log-depth scan, which copies the whole
    tensor ``⌈log₂ n⌉`` times."""
    a = e.contiguous().clone()
    for t in range(1, a.shape[0]):
        a[t].addcmul_(phi, a[t - 1])
    return a


def _ar1_log_scan(e: torch.Tensor, phi: torch.Tensor) -> torch.Tensor:
    """:func:`_ar1_scan` as a prefix scan in ``⌈log₂ n⌉`` whole-tensor steps (after the step of shift ``s``,
    ``a_t`` holds ``Σ φ^{t−u} e_u`` over the ``2s`` terms ending at ``t``): a few large kernels on an
    accelerator instead of ``n`` small launches."""
    a, p, shift = e, phi, 1
    while shift < e.shape[0]:
        a = torch.cat([a[:shift], a[shift:] + p * a[:-shift]])
        p, shift = p * p, 2 * shift
    return a


SAMPLERS: dict[str, Callable[..., Sampler]] = {
    "step_walk": step_walks,
    "smooth_gp": smooth_gp,
    "stationary": stationary,
    "red_noise": red_noise,
}


def surrogate_values(
    x: torch.Tensor,
    null: str,
    n_surrogates: int,
    random_state: int,
    statistic: Callable[[torch.Tensor], torch.Tensor | np.ndarray],
    *,
    method: str = "fast",
    n_components: int = 0,
    coordinates: bool | None = None,
    subspace: bool = False,
    budget_bytes: int | None = None,
    workers: int | None = None,
    rule: StopRule | None = None,
) -> np.ndarray:
    """``statistic`` of ``n_surrogates`` surrogate tables of ``x`` ``(n, d)``: ``(S, ...)`` float64.

    The surrogates are drawn on the table's principal axes (:func:`null_basis` with ``method``; ``"fast"``
    keeps the axes the surrogates need for an ``n_components``-component statistic) and handed to
    ``statistic`` as ``(c, n, m)`` tables: ``m = d`` in the stored coordinates (``"exact"``), or ``m = r + 1``
    coordinates isometric to them (``"fast"``). ``statistic`` must depend on the rows only through their
    inner products (PCA, norms, cosine similarities) and be scale-free: ``x`` is first divided by its
    largest entry, so a table times 1e200 gives the surrogates of the table itself. With ``coordinates``
    (True: centred over positions, False: not) ``statistic`` gets the surrogates' top-``n_components`` PCA
    coordinates ``(c, n, n_components)`` instead (for the fast step walks computed from their block
    structure, :mod:`pos_geometry.analysis.nulls.walk_coordinates`); ``subspace``: ``statistic`` depends on them only
    through the subspace they span (any orthonormal basis of it gives the same value), so the solvers need
    only the subspace (:data:`~pos_geometry.analysis._pca_solvers.SUBSPACE_ITERATIONS`). Tables are drawn and evaluated in chunks of
    about ``budget_bytes`` (default 24 MiB on the CPU, 48 MiB on an accelerator), chunk ``i`` from its own ``torch.Generator`` (:func:`chunk_seeds`), so the
    chunks are independent: on the CPU they run on ``workers`` threads (default
    :func:`~pos_geometry._threads.cpu_workers`: torch's thread count), each kernel single-threaded, and the
    same seed gives the same surrogates whatever the number of threads and the table's dtype (on an
    accelerator the Gaussian draws are made on the device, see :func:`_randn`). ``rule``: a sequential test
    (:class:`StopRule`, for a scalar statistic): chunks past the one where it stops are not drawn, and the
    values end at its stop, ``(l,)`` with ``l <= n_surrogates``: the first ``l`` of what all
    ``n_surrogates`` would give.
    """
    workers = cpu_workers(x.device) if workers is None else workers
    walks = None
    if null == "step_walk" and coordinates is not None and method == "fast" and x.device.type == "cpu":
        basis = null_basis(x, method, null, min_rank=n_components)
        block = walk_block(x.shape[0], basis.length_scale[0])
        if structure_pays(x.shape[0], basis.rank, block, n_components, subspace):
            walks = WalkCoordinates(basis.coords.to(x.dtype), block, basis.mean_in, basis.mean_out)
            width, depth = basis.rank + 1, basis.rank
    if walks is None:  # the smooth-GP null: one maker per node of its length scale's spread (i mod nodes)
        nodes = length_scale_nodes(x) if null == "smooth_gp" else (None,)
        # (the nodes' column covariances are independent: their eigenproblems run side by side)
        makers = parallel_map(lambda ell: _maker(x, null, method, n_components, ell), nodes, workers)
        width = max(m[1] for m in makers)
        depth = max(m[2] for m in makers)

        def make(start: int, count: int, gen: torch.Generator) -> torch.Tensor:
            k = len(makers)
            counts = [len(range((j - start) % k, count, k)) for j in range(k)]
            drawn = [j for j, c in enumerate(counts) if c]  # (an FFT refuses an empty batch)
            if len(drawn) == 1:  # one node (or one table): no copy
                return makers[drawn[0]][0](counts[drawn[0]], gen)
            wide = max(makers[j][1] for j in drawn)  # zero columns change no inner product
            buf = torch.empty(count, wide, x.shape[0], dtype=x.dtype, device=x.device)
            at = 0
            for j in drawn:  # each node writes its rows of one buffer, in node order
                makers[j][0](counts[j], gen, buf[at : at + counts[j]])
                at += counts[j]
            return buf.mT

    if budget_bytes is None:  # on the CPU two or three chunks are live at once (one per thread)
        budget_bytes = (24 if x.device.type == "cpu" else 48) * 2**20
    chunk = max(1, budget_bytes // (x.shape[0] * (width + depth) * 8))
    starts = range(0, n_surrogates, chunk)
    seeds = chunk_seeds(random_state, len(starts))

    counted: list[int] = []

    def evaluate(i: int) -> np.ndarray:
        check_stop()
        start, count = starts[i], min(chunk, n_surrogates - starts[i])
        gen = torch.Generator(device="cpu").manual_seed(seeds[i])
        if walks is not None:
            orders = block_orders(walks.starts.shape[0], count, gen)
            vals = statistic(
                walks.coordinates(
                    orders, n_components, center=coordinates, random_state=random_state, subspace=subspace
                )
            )
        elif coordinates is not None:
            tables = make(start, count, gen)
            vals = statistic(
                surrogate_coordinates(
                    tables, n_components, center=coordinates, random_state=random_state, subspace=subspace
                )
            )
        else:
            vals = statistic(make(start, count, gen))
        _progress.advance(count)
        counted.append(count)
        return vals.detach().cpu().double().numpy() if isinstance(vals, torch.Tensor) else np.asarray(vals)

    until = None if rule is None else (lambda parts: rule.drawn(np.concatenate(parts)) is not None)
    values = np.concatenate(parallel_map(evaluate, range(len(starts)), workers, until=until)).astype(
        np.float64
    )
    if rule is not None:
        _progress.advance(n_surrogates - sum(counted))  # the surrogates a stop spared: the bar still fills
        values = values[: rule.drawn(values) or n_surrogates]
    return values


def chunk_seeds(random_state: int, count: int) -> list[int]:
    """The seeds of the generators of ``count`` chunks of surrogates: ``numpy.random.SeedSequence(random_state)``'s
    first ``count`` 63-bit words, independent streams whatever the chunks' sizes and the order they run in."""
    words = np.random.SeedSequence(int(random_state)).generate_state(max(count, 1), np.uint64)
    return [int(w) >> 1 for w in words[:count]]


def _maker(
    x: torch.Tensor, null: str, method: str, n_components: int, ell: float | None
) -> tuple[Callable[..., torch.Tensor], int, int]:
    """``(make, width, depth)``: ``make(count, gen)`` draws ``count`` surrogate tables of ``null`` ``(count, n,
    width)`` (the smooth-GP null's at length scale ``ell``), ``depth`` their rank; ``make(count, gen, out)``
    writes the same tables into ``out``, a ``(count, w, n)`` buffer axes first (``w ≥ width``, the columns past
    their width zero), and returns its transposed view ``(count, n, w)``."""
    factors = None
    if (
        method == "fast" and null in FACTORS
    ):  # every axis' leading modes in a few coordinates (_mode_surrogates)
        factors = FACTORS[null](x, n_components, ell)
    if factors is not None:
        like = torch.empty(0, dtype=x.dtype, device=x.device)
        return (
            (lambda count, gen, out=None: factors.tables(count, gen, like, out)),
            factors.width,
            factors.width,
        )
    basis = null_basis(x, method, null, min_rank=n_components, ell=ell)
    extra = {"scales": basis.scales, "spectrum": basis.spectrum}
    draw = SAMPLERS[null](
        basis.coords.to(x.dtype), *basis.length_scale, **{k: v for k, v in extra.items() if v is not None}
    )
    width = x.shape[1] if method == "exact" else basis.rank + 1

    def make(count: int, gen: torch.Generator, out: torch.Tensor | None = None) -> torch.Tensor:
        tables = basis.embed(draw(count, gen))
        if out is None:
            return tables
        out[:, : tables.shape[-1]] = tables.mT
        out[:, tables.shape[-1] :] = 0
        return out.mT

    return make, width, basis.rank

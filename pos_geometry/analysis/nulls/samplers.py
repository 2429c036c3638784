"""The surrogate samplers that need nothing but the table: random walks of its own steps and smooth
Gaussian-process curves of its length scale.

They sit below :mod:`~pos_geometry.analysis.nulls.surrogates` (which re-exports them with the other samplers) and the
null-basis machinery (:mod:`~pos_geometry.analysis.nulls.basis`, :mod:`~pos_geometry.analysis.nulls.gp_nodes`),
which draw from them, so none of those imports another for them.
"""

from __future__ import annotations

import math
from collections.abc import Callable

import torch

from pos_geometry.analysis.nulls.draws import circulant_spectrum, fourier_draws, gp_modes, mode_variances
from pos_geometry.analysis.nulls.draws import randn as _randn
from pos_geometry.analysis.nulls.walk_coordinates import block_orders, step_index

__all__ = ["Sampler", "smooth_gp", "step_walks", "walk_block"]

Sampler = Callable[[int, torch.Generator], torch.Tensor]
"""``sampler(count, generator)`` -> ``(count, n, r)`` centred surrogate coordinates on the table's axes."""


def step_walks(y: torch.Tensor, ell: float, nugget: float) -> Sampler:
    """Random walks: ``y[0]`` plus the steps of ``y`` ``(n, r)`` cumulated in a random order of blocks.

    The ``n − 1`` steps ``y[t+1] − y[t]`` are cut into consecutive blocks of ``L = round(ℓ)`` steps (``ℓ``
    from :func:`length_scale`) and the blocks are shuffled. A random walk's blocks are independent, so it
    is its own surrogate; a curve that turns keeps its local arcs but loses the coordination between
    them. (Blocks rather than single steps: position-to-position noise dominates single steps, and a walk of
    shuffled noisy steps wanders like a random walk whatever the curve underneath.) The walk is linear in
    the table, so it is the same walk in any basis.
    """
    steps = y[1:] - y[:-1]
    m = steps.shape[0]
    block = walk_block(y.shape[0], ell)
    n_blocks = -(-m // block)

    def draw(count: int, gen: torch.Generator) -> torch.Tensor:
        idx = step_index(block_orders(n_blocks, count, gen), block, m).to(y.device)
        out = torch.empty(count, m + 1, y.shape[1], dtype=y.dtype, device=y.device)
        out[:, 0] = y[0]
        out[:, 1:] = y[0] + torch.cumsum(steps[idx], dim=1)
        return out

    return draw


def walk_block(n: int, ell: float) -> int:
    """The block length of :func:`step_walks` for ``n`` positions and length scale ``ell``."""
    return max(1, min(n - 1, round(ell)))


def smooth_gp(y: torch.Tensor, ell: float, nugget: float, scales: torch.Tensor | None = None) -> Sampler:
    """Gaussian-process tables: squared-exponential kernel of length scale ``ell``, plus the nugget share.

    Each axis is ``sqrt(1 − η)·f + sqrt(η)·ε`` with ``f`` a GP draw of kernel ``exp(-Δ²/2ℓ²)`` and ``ε``
    white noise, scaled to ``scales`` ``(r,)`` (by default the standard deviation of the same axis of ``y``
    ``(n, r)``; :func:`surrogate_values` passes the null basis' own, from the model's likelihood): smooth,
    with the table's length scale and its share of position-to-position noise, and no period or rotation
    of its own.
    ``f`` is drawn by circulant embedding (:func:`circulant_spectrum`): a sum of the circulant's Fourier
    modes with independent Gaussian weights of variance ``λ_k / M``. The smooth kernel's spectrum falls
    off like a Gaussian, so only the modes above 1e-10 of the largest are kept: a few dozen for a table
    whose rows change slowly, drawn as one ``(n, 2K)`` basis times the weights; when many are needed
    (a short length scale) the weights go through one inverse real FFT instead.
    """
    n, r = y.shape
    sigma = (y.to(torch.float64).std(dim=0) if scales is None else scales).to(
        y.device, y.dtype
    )  # in y's dtype
    white = math.sqrt(nugget)
    basis = gp_modes(n, ell, nugget)
    if basis is not None:
        basis = basis.to(y.device, y.dtype)

        def modes(count: int, gen: torch.Generator) -> torch.Tensor:
            return basis @ _randn((count, basis.shape[1], r), gen, basis)

    else:
        m, lam = circulant_spectrum(n, ell)
        var = mode_variances(lam, m, nugget).to(y.device, y.dtype)

        def modes(count: int, gen: torch.Generator) -> torch.Tensor:
            return fourier_draws(var, n, m, (count, r), gen).mT

    def draw(count: int, gen: torch.Generator) -> torch.Tensor:
        out = modes(count, gen)
        if white > 0:
            out = out + white * _randn((count, n, r), gen, sigma)
        return (out * sigma).to(y.dtype)

    return draw

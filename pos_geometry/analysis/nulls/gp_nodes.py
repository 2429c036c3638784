"""The smooth-GP null's length scale is estimated, not known: its sampling spread, as a few nodes.

The smooth-GP null (:func:`pos_geometry.analysis.nulls.surrogates.smooth_gp`) draws curves with the table's length
scale ``ℓ̂`` (:func:`pos_geometry.analysis.nulls.smoothness.length_scale`). ``ℓ̂`` is itself a draw: on GP tables
of 256 positions and true ``ℓ = 19.65`` it spreads by about ±5%. A table whose estimate fell short of its
true length scale gets surrogates rougher than itself, so less predictable, and it beats them: with one
plug-in ``ℓ̂``, GP tables got "rotations" at α = 0.01 in 15 of 800 (bound 1.7%), and given the true ``ℓ``
the same tables fell within bounds (``benchmarks/RESULTS.md``, ``bench_calibration``).

So the null carries the uncertainty of its own estimate (a parametric bootstrap of ``ℓ̂``):

1. draw :data:`BOOTSTRAP` tables from the fitted null itself (``ℓ̂``, the noise share ``η̂``, the
   likelihood's column covariance; fixed seed, so every method and analysis of one table gets the same
   answer), and estimate the length scale of each as the table's was (given ``η̂``);
2. ``s`` = the standard deviation of ``log ℓ̂*`` over them;
3. the null's length scales are ``ℓ̂ · exp(s · z_k)`` for :data:`NODES` equal-probability quantiles ``z_k``
   of a normal of standard deviation :data:`WIDEN`, and the surrogates are split evenly among them
   (surrogate ``i`` to node ``i mod NODES``), each node with its own likelihood column covariance.

That is the null averaged over a log-normal spread of ``ℓ`` around ``ℓ̂`` a little wider than ``ℓ̂``'s own
sampling spread: an unknown ``ℓ`` is integrated out instead of being plugged in.
"""

from __future__ import annotations

import math
from statistics import NormalDist

import numpy as np
import torch

__all__ = ["BOOTSTRAP", "NODES", "WIDEN", "length_scale_nodes", "length_scale_spread"]

BOOTSTRAP = 64
"""Tables drawn from the fitted null to measure the spread of ``ℓ̂`` (the spread's own relative error is
about ``1/√(2·63)`` ≈ 9%). With 16 (an 18% error, and one seed for every table, so every table of a family
shared the same luck), GP tables of length scale 100 over 1024 positions had their spread read 0.027–0.114
against a true 0.043; those read low and whose ``ℓ̂`` fell 2 SDs short beat every surrogate."""
NODES = 5
"""Length scales the smooth-GP null's surrogates are split among."""

WIDEN = 1.25
"""The nodes spread this many times the bootstrap's ``s``. Measured over independent tables, ``ℓ̂`` spreads
further than one table's bootstrap says: GP curves of length scale 25 over 256 positions, 64 columns, spread
0.046 in ``log ℓ̂`` against a mean bootstrap ``s`` of 0.043, and the tables whose ``ℓ̂`` fell lowest read
``s`` ≈ 0.036 (10 of 200 more than 2.5 of their own ``s`` below the truth, against 1.2 for a normal); an SD
from 64 draws is itself uncertain by 9%. Those tables beat every surrogate of a null at ``±1.4 s``
(recurrence "rotations" at α = 0.01 in 5 of 200), and are within bounds at ``1.25 s`` (4 of 200)."""

_Z = np.array([NormalDist().inv_cdf((k + 0.5) / NODES) for k in range(NODES)])
_Z = WIDEN * _Z / math.sqrt(float(np.mean(_Z**2)))  # unit variance times WIDEN: as far as ℓ̂ spreads, and more


def length_scale_spread(x: torch.Tensor) -> float:
    """``s``: the standard deviation of ``log ℓ̂`` over :data:`BOOTSTRAP` tables drawn from the smooth-GP
    null of ``x`` ``(n, d)`` at its own estimate (0 where there is no smooth length scale to spread: white
    noise, a table whose autocorrelation never falls, or fewer than 8 positions). Computed once per table."""
    from pos_geometry.analysis.nulls.basis import _decomposition, once

    dec = _decomposition(x)
    return once(dec, "gp_spread", lambda: _spread(x, dec))


def _spread(x: torch.Tensor, dec: dict) -> float:
    from pos_geometry.analysis.nulls.smoothness import _ells_given, autocorrelation

    n = x.shape[0]
    ell, nugget = dec["length_scale"]
    if n < 8 or ell <= 0.5 or ell >= n or nugget >= 1:
        return 0.0
    gen = torch.Generator(device="cpu").manual_seed(0)
    tables = _null_tables(x, BOOTSTRAP, gen)
    estimates = _ells_given(autocorrelation(tables).numpy(), nugget)
    if not np.all(np.isfinite(estimates)) or np.any(estimates <= 0):
        return 0.0
    return float(np.std(np.log(estimates), ddof=1))


def _null_tables(x: torch.Tensor, count: int, gen: torch.Generator) -> torch.Tensor:
    """``count`` smooth-GP surrogates of ``x`` at its estimated length scale, float64 on the CPU, in the
    narrowest coordinates whose centred rows have the inner products of whole tables' (the autocorrelation
    centres each column and reads only the rows' inner products, so the table's mean is left out)."""
    from pos_geometry.analysis.nulls.basis import null_basis
    from pos_geometry.analysis.nulls.mode_surrogates import gp_factors
    from pos_geometry.analysis.nulls.samplers import smooth_gp

    factors = gp_factors(x, 0)
    if factors is not None:
        return factors.tables(count, gen, torch.empty(0, dtype=torch.float64))
    basis = null_basis(x, "fast", "smooth_gp")
    coords = basis.coords.to("cpu", torch.float64)
    scales = basis.scales.to("cpu", torch.float64)
    return smooth_gp(coords, *basis.length_scale, scales=scales)(count, gen)


def length_scale_nodes(x: torch.Tensor) -> tuple[float, ...]:
    """The smooth-GP null's length scales for ``x`` ``(n, d)``: ``ℓ̂ · exp(s · z_k)``, :data:`NODES` of them
    (ascending), or ``(ℓ̂,)`` where the spread ``s`` is 0 (:func:`length_scale_spread`)."""
    from pos_geometry.analysis.nulls.basis import _decomposition

    ell = float(_decomposition(x)["length_scale"][0])
    s = length_scale_spread(x)
    if s <= 0:
        return (ell,)
    n = x.shape[0]
    return tuple(float(min(max(ell * math.exp(s * z), 0.5), n)) for z in _Z)

"""How many rows' worth the smooth-GP null's column covariance rests on: its Wishart degrees of freedom.

:func:`~pos_geometry.analysis.nulls.smoothness.gp_column_covariance` estimates ``Σ`` by likelihood given the
row kernel; :func:`~pos_geometry.analysis.nulls.stationary.shrink_spread` takes the sampling spread out of its
eigenvalues, which needs the estimate's degrees of freedom. A table with a noise share has every row's worth;
a noise-free curve has far fewer (:func:`likelihood_dof`), and fewer still when a few frequencies of its
whitened rows carry the estimate (:func:`effective_dof`): for a noise-free curve (:data:`SMALL_NUGGET`) the null
takes the smaller.
"""

from __future__ import annotations

import torch

from pos_geometry.analysis.nulls.smoothness import NUGGET_FLOOR, kernel

__all__ = ["SMALL_NUGGET", "effective_dof", "likelihood_dof"]

SMALL_NUGGET = NUGGET_FLOOR
"""Below this noise share (a noise-free curve: the solves' floor is what bounds the whitening) the null also
counts the rows' worth its estimate rests on (:func:`effective_dof`). With a real noise share the whitening
amplifies the kernel's fast directions by at most ``1/η``: a GP table with a share of 1e-6 read at 1.13 times its
length scale still loses rows' worth (308 of 1023), but counting them did not bring that family's calibration
closer (GP tables of GPT-2's length scale at 256 × 64, helix at α = 0.05: 16 of 200 without, 17 with), and a
structured table (GPT-2's whitened rows are far from white: 118 rows' worth at its own ``ℓ̂``) would have the
bulk of its covariance made flat and its surrogates 14 times wider."""


def likelihood_dof(n: int, ell: float, nugget: float) -> float:
    """The degrees of freedom of :func:`gp_column_covariance`'s estimate over ``n`` positions: ``tr(K_η K_δ⁻¹) − 1``
    with ``δ = max(η, NUGGET_FLOOR)`` the noise share its solves hold (one taken by the mean).

    When the table's noise share is at least the floor, ``δ = η`` and that is ``n − 1``. A smoother table
    (a noise-free curve: ``η`` near 0) has next to nothing along the kernel's eigen-directions below the floor,
    and each direction of eigenvalue ``λ`` adds only ``λ / (λ + δ)`` of a row: 256 positions of length scale 25
    are about 60 rows' worth, not 255. The estimate's sampling spread is that of a Wishart with these degrees
    of freedom; taken out as if it had ``n − 1`` (:func:`~pos_geometry.analysis.nulls.stationary.shrink_spread`),
    most of it would stay, and noise-free GP tables would beat surrogates drawn with it ("helix" at α = 0.05 in
    11 of 40 at 256 × 64, length scale 25, against 2 of 40 with these degrees of freedom)."""
    delta = max(float(nugget), NUGGET_FLOOR)
    if delta <= nugget:
        return float(n - 1)
    chol = torch.linalg.cholesky(kernel(n, ell, nugget, floor=NUGGET_FLOOR))
    inverse = torch.linalg.solve_triangular(chol, torch.eye(n, dtype=torch.float64), upper=False)  # L⁻¹
    trace = float(inverse.square().sum())  # tr(K_δ⁻¹)
    return max(n - (delta - float(nugget)) * trace - 1.0, 2.0)


def effective_dof(innovations: torch.Tensor, variances: torch.Tensor) -> float:
    """The rows' worth a likelihood estimate ``Σ̂ ∝ Zᵀ Z`` rests on, from its whitened rows ``Z`` ``(n, r)`` and
    the eigenvalues ``λ`` ``(r,)`` of ``Σ̂`` (:func:`~pos_geometry.analysis.nulls.smoothness.column_covariance` with
    ``innovations=True`` returns both; ``tr Σ̂²/(tr Σ̂)² = Σλ²/(Σλ)²``, so ``ZᵀZ`` is not formed again).

    ``ZᵀZ`` is also the sum over frequencies of ``ẑ_f ẑ_fᴴ`` (Parseval, ``ẑ`` the DFT of ``Z`` along positions).
    When the model fits, the whitened rows are white and every frequency carries alike: ``n − 1`` rows' worth. When
    it does not (a length scale read longer than the table's own), the whitening amplifies the kernel's fast
    directions, where the table holds more than the kernel expects, and a few frequencies carry the estimate.
    Kish's effective number of the terms' energies ``e_f = ‖ẑ_f‖²``, times ``1 + tr Σ̂²/(tr Σ̂)²`` (a complex term's
    own spread over the columns), less one for the mean, says how many: 1023.5 for a GP table of ℓ = 78.6 over
    1024 positions with a noise share of 1e-6 read at its own length scale, 308 read at 1.13 ℓ; 35 and 10 for a
    noise-free one of ℓ = 100 (where :func:`likelihood_dof`, 28 and 25, is the smaller at the truth).

    Taken as the kernel's count, that spread stayed in ``Σ̂`` as "spikes" (7–9 times the mean on noise-free GP
    tables; 3–6 times with a noise share of 1e-6 at the null's upper nodes, where it is not counted: see
    :data:`SMALL_NUGGET`),
    surrogates drawn with them turned less than the isotropic tables, and the helix beat its smooth-GP null
    too often (noise-free GP tables of ℓ = 100: 20 of 200 at α = 0.05, ``benchmarks/RESULTS.md``).
    """
    n = innovations.shape[0]
    f = torch.fft.fft(innovations, dim=0)
    energy = (f.real.square() + f.imag.square()).sum(dim=1)
    lam = variances.to(torch.float64)
    tiny = torch.finfo(torch.float64).tiny
    spread = float(lam.square().sum() / lam.sum().square().clamp_min(tiny))
    kish = float(energy.sum().square() / energy.square().sum().clamp_min(tiny))
    return max(min(kish * (1 + spread) - 1.0, n - 1.0), 2.0)

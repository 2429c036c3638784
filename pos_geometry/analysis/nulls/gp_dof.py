"""How many rows' worth the smooth-GP null's column covariance rests on: its Wishart degrees of freedom.

:func:`~pos_geometry.analysis.nulls.smoothness.gp_column_covariance` estimates ``Σ`` by likelihood given the
row kernel; :func:`~pos_geometry.analysis.nulls.stationary.shrink_spread` takes the sampling spread out of its
eigenvalues, which needs the estimate's degrees of freedom. A table with a noise share has every row's worth;
a noise-free curve has far fewer (:func:`likelihood_dof`), and fewer still when a few of the kernel's
directions carry the estimate (:func:`effective_dof`).
"""

from __future__ import annotations

import torch

from pos_geometry.analysis.nulls.smoothness import LIKELIHOOD_ROWS, NUGGET_FLOOR, kernel

__all__ = ["effective_dof", "likelihood_dof"]


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


def effective_dof(y: torch.Tensor, ell: float, nugget: float) -> float:
    """The degrees of freedom :func:`gp_column_covariance`'s estimate of ``y`` ``(n, r)`` (float64, centred)
    rests on: :func:`likelihood_dof`'s count, or fewer where the table's whitened variance sits in a few of the
    kernel's directions. Only a noise-free curve (``η`` below :data:`NUGGET_FLOOR`) is checked; with a noise
    share the solves bound every direction's weight and the count is ``n − 1``.

    On the kernel's eigen-directions ``v_k`` (eigenvalues ``κ_k`` as the solves hold them) the estimate is a sum
    of ``(v_kᵀY)ᵀ(v_kᵀY) / κ_k``, and the rows' worth it holds is Kish's effective number of those terms
    (their energies ``e_k``), times ``1 + 2 tr Σ̂²/(tr Σ̂)²`` (one term's own spread over ``r`` columns), one
    taken by the mean (over more than :data:`LIKELIHOOD_ROWS` positions, read on the first of them as a share of
    their count). It matches the count when the model fits (27.6 against 28.0 on a GP table of ℓ = 100
    over 1024 positions); when ``ℓ̂`` came out above the curve's own length scale, the kernel's fast directions,
    where it puts almost nothing, hold far more than it expects and dominate: 10.7 rows' worth against 25.3 at
    ``ℓ̂`` = 112.7 for a table of ℓ = 100. Read as 25 rows, the few directions' spread survived as "spikes" of
    the column covariance (17 and 14 times its mean), surrogates drawn with them turned less than the isotropic
    table, and noise-free GP tables of ℓ = 100 were "helices" at α = 0.05 in 20 of 200
    (``benchmarks/RESULTS.md``)."""
    n = y.shape[0]
    expected = likelihood_dof(n, ell, nugget)
    if nugget >= NUGGET_FLOOR:
        return expected
    if (
        n > LIKELIHOOD_ROWS
    ):  # read on the first rows (an eigendecomposition is cubic), as a share of their count
        head = y[:LIKELIHOOD_ROWS] - y[:LIKELIHOOD_ROWS].mean(dim=0)
        share = effective_dof(head, ell, nugget) / likelihood_dof(LIKELIHOOD_ROWS, ell, nugget)
        return max(expected * min(share, 1.0), 2.0)
    kappa, vecs = torch.linalg.eigh(kernel(n, ell, nugget, floor=NUGGET_FLOOR).to(y.device))
    kappa = kappa.clamp_min(NUGGET_FLOOR)
    w = (vecs.T @ y) / kappa.sqrt()[:, None]  # (n, r): the table whitened, on the kernel's eigen-directions
    energy = w.square().sum(1)
    s = w.T @ w
    spread = float(s.square().sum() / s.trace().square().clamp_min(torch.finfo(torch.float64).tiny))
    kish = float(energy.sum().square() / energy.square().sum().clamp_min(torch.finfo(torch.float64).tiny))
    return max(min(expected, kish * (1 + 2 * spread) - 1.0), 2.0)

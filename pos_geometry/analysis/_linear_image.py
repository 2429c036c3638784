"""Is a table a linear image ``x = S·A (+ noise)`` of a sinusoidal table ``S``?  The shift-invariance test.

A table of sinusoid pairs times any map is shift-invariant: its column space over positions is spanned by
``e^{±iθp}``, so (ESPRIT) the leading left singular vectors ``U`` satisfy ``U[1:] ≈ U[:-1]·Φ`` and the
eigenvalues of ``Φ`` are ``e^{±iθ}``, on the unit circle. Smooth curves (random walks, Gaussian processes,
polynomials) are nearly shift-invariant too -- any smooth low-rank table is, over a short enough step -- so the
test asks for what only rotations give:

1. **The noise level.** The singular values of white noise of level ``σ`` in an ``n × d`` table lie in
   ``σ(√n ± √d)`` (Marchenko–Pastur); ``σ`` is estimated from the smallest singular value (an upper bound when
   the table has no noise directions) and never below the storage precision. It is stated, as a fraction of
   the table's norm, and bounds the rebuild (4). The signal rank stops at the bulk's edge when a bulk is there
   (the noise's own eigenvalues would otherwise land near the circle now and then), so the verdict does not
   move with the storage dtype.
2. **Rotations that turn.** Total-least-squares ESPRIT (no bias toward the inside of the circle under noise)
   gives each plane's angle ``θ`` and damping ``g = n·log|λ|`` (the log of how much its amplitude grows over
   the window). A plane counts when the window resolves it (:func:`resolved_planes`: enough turns, a Fourier
   bin from its neighbours) and it is undamped (``|g| ≤`` :data:`DAMPING`).
3. **On a lattice.** At least :data:`MIN_PLANES` such planes, their frequencies on one geometric lattice
   ``θ_i = base^{−2i/d}`` to 1% (:func:`lattice_base`); a table whose undamped planes follow no lattice is not
   called an image (the reason says so).
4. **Rebuilt to its noise.** The eigenvalues' powers rebuild the table to within :data:`REBUILD` times its
   noise level (or 1e-6 of its norm, for an exact table), so a drift no rotation makes is not absorbed.

Calibrated in ``benchmarks/bench_calibration.py`` (claim "linear image"): walks, AR(1), GP curves of several
length scales in float16/32, polynomials and white noise as nulls; noisy images as power.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, replace

import numpy as np

from pos_geometry.analysis._pair_phases import rebuild

__all__ = ["ImageFit", "linear_image", "resolved_planes", "resolution_turns", "lattice_base"]

DAMPING = 1.0
"""Largest ``|n·log|λ||`` of a plane called undamped: its amplitude changes by at most a factor e over the
window (a rotation's is constant; the smooth curves' resolved planes decay by e² to e⁹⁰)."""
EDGE = 1.2
"""Margin above the Marchenko–Pastur bulk's upper edge for a singular value to count as signal."""
MIN_PLANES = 4
"""Fewest resolved undamped planes on one lattice for a linear image (two frequencies fit a lattice of their
own ratio too easily)."""
REBUILD = 3.0
"""How many times its noise level the eigenvalues' powers may leave of the table."""


@dataclass(frozen=True)
class ImageFit:
    """What :func:`linear_image` found. ``is_image``: the verdict; ``why_not``: the rule that failed (empty for
    an image); ``frequencies`` ``(m,)`` the undamped planes' angles, largest first; ``resolved`` how many of
    them the window resolves; ``base`` the lattice's (None when they follow none); ``residual`` the rebuild's
    relative error; ``noise`` the noise level as a fraction of the table's norm; ``rank`` the signal rank;
    ``condition`` the map's condition number (None when not an image)."""

    is_image: bool
    why_not: str
    frequencies: np.ndarray
    resolved: int
    base: float | None
    residual: float
    noise: float
    rank: int
    condition: float | None = None


def resolution_turns(eps: float) -> int:
    """How many turns in the window resolve a plane stored at relative precision ``eps``: 4, or 8 in half
    precision (``eps`` > 1e-6), where the shift map's angles of the slower planes wander by percents."""
    return 4 if eps <= 1e-6 else 8


def resolved_planes(freqs: np.ndarray, span: float, eps: float) -> np.ndarray:
    """``(m,)`` bool: which of ``freqs`` (rad/position) a window of ``span`` positions resolves: each turns at
    least four times (eight in half precision, ``eps`` > 1e-6) and lies at least one Fourier bin (``2π/span``)
    from its neighbours (the classical resolution; a wide sinusoidal table's slow planes crowd closer)."""
    turns = resolution_turns(eps)
    order = np.sort(freqs)
    gaps = np.diff(order)
    nearest = np.minimum(np.r_[np.inf, gaps], np.r_[gaps, np.inf]) if freqs.size > 1 else np.full(1, np.inf)
    ok_sorted = (order * span >= 2 * np.pi * turns) & (nearest >= 2 * np.pi / span)
    out = np.zeros(freqs.shape, dtype=bool)
    out[np.argsort(freqs)] = ok_sorted
    return out


def lattice_base(freqs: np.ndarray, d: int) -> float | None:
    """The base of ``θ_i = base^{−2i/d}`` that the resolved frequencies ``freqs`` (descending) follow to 1%, or
    None. A linear image need not show every plane (slow ones sink into the storage noise, and nothing says which
    index a frequency has), so each frequency's index is read off the lattice: ``i = round(log θ / log q)``
    with ``q`` the median ratio of neighbours; ``log q`` is then fitted on the indices by least squares."""
    if freqs.size < 2 or np.any(freqs <= 0):
        return None
    logs = np.log(freqs)
    step = float(np.median(np.diff(logs)))  # log q < 0
    if not step < 0:
        return None
    index = np.round(logs / step)
    if np.unique(index).size != index.size or float(index @ index) == 0:
        return None
    step = float(index @ logs) / float(index @ index)
    if np.max(np.abs(np.exp(index * step) / freqs - 1)) > 1e-2:
        return None
    return math.exp(-step * d / 2)


def _signal_rank(sv: np.ndarray, n: int, d: int, rms: float, eps: float) -> tuple[int, float]:
    """``(rank, σ)``: how many singular values ``sv`` are signal, and the noise level per entry.

    White noise of level ``σ`` puts an ``n × d`` table's singular values in ``σ(√n ± √d)`` (Marchenko–Pastur),
    so ``σ`` is the smallest singular value divided by ``√n − √d`` (an upper bound when the table has no noise
    directions), never below the storage precision's rounding ``eps·rms/√3``. When at least ``max(4, d/8)``
    singular values lie under :data:`EDGE` times the bulk's upper edge ``σ(√n + √d)``, they are the noise and the
    rank stops there; otherwise (a full-rank table without a bulk, whose smallest value is signal) the rank keeps
    every singular value above ``max(eps, 1e-8)`` of the largest."""
    sigma = max(float(sv[-1]) / (math.sqrt(n) - math.sqrt(d)), eps * rms / math.sqrt(3))
    precision = int(np.sum(sv > max(eps, 1e-8) * float(sv[0])))
    above_bulk = int(np.sum(sv > EDGE * sigma * (math.sqrt(n) + math.sqrt(d))))
    if d - above_bulk >= max(4, d // 8):
        return min(above_bulk, precision), sigma
    return precision, sigma


def _tls_eigenvalues(u: np.ndarray) -> np.ndarray:
    """The eigenvalues of the shift map ``Φ`` with ``u[1:] ≈ u[:-1]·Φ``, fitted by total least squares
    (errors in both sides): ``Φ = −V₁₂ V₂₂⁻¹`` from the right singular vectors of ``[u[:-1] | u[1:]]``."""
    r = u.shape[1]
    _, _, vh = np.linalg.svd(np.hstack([u[:-1], u[1:]]), full_matrices=False)
    v = vh.T
    return np.linalg.eigvals(-v[:r, r:] @ np.linalg.pinv(v[r:, r:]))


def linear_image(x: np.ndarray, positions: np.ndarray, eps: float) -> ImageFit | None:
    """Whether ``x`` ``(n, d)`` (float64, scaled near 1) is ``S·A`` plus noise; see the module docstring.
    ``eps``: the relative precision it was stored in. None when the table is too short (``n < 2d + 2``) or too
    narrow for the test."""
    n, d = x.shape
    if n < 2 * d + 2:
        return None
    u, sv, _ = np.linalg.svd(x, full_matrices=False)
    norm = float(np.linalg.norm(x)) or 1.0
    r, sigma = _signal_rank(sv, n, d, norm / math.sqrt(n * d), eps)
    noise = sigma * math.sqrt(n * d) / norm
    if r < 4:
        return ImageFit(False, f"only {r} direction(s) rise above the noise: no two planes", np.zeros(0), 0, None,
                        math.inf, noise, r)  # fmt: skip
    lam = _tls_eigenvalues(u[:, :r])
    if not np.all(np.isfinite(lam)):
        return ImageFit(False, "the shift map is singular", np.zeros(0), 0, None, math.inf, noise, r)
    span = float(positions[-1] - positions[0] + 1)
    angles, damping = np.angle(lam), np.log(np.abs(lam)) * span
    upper = angles > 1e-9  # one of each conjugate pair
    residual = _rebuild_error(x, positions, lam[np.abs(damping) <= _MAX_LOG_GROWTH])
    undamped = upper & (np.abs(damping) <= DAMPING)
    order = np.argsort(-angles[undamped])
    freqs = angles[undamped][order]
    resolved = resolved_planes(freqs, span, eps)
    base = lattice_base(freqs[resolved], d) if resolved.sum() >= 2 else None
    n_turning = int(resolved.sum())
    found = ImageFit(False, "", freqs, n_turning, base, residual, noise, r)
    if n_turning < MIN_PLANES:
        why = (f"{n_turning} undamped plane(s) turn in the window (a linear image shows at least {MIN_PLANES}; "
               f"{int(upper.sum())} eigen-pairs of its shift map, the rest decay or grow)")  # fmt: skip
        return replace(found, why_not=why)
    if base is None:
        return replace(
            found,
            why_not=f"its {n_turning} undamped turning planes follow no base lattice θ_i = base^(−2i/d)",
        )
    if residual > max(REBUILD * noise, 1e-6):
        return replace(
            found,
            why_not=f"the rotations leave {residual:.2g} of the table, more than {REBUILD:g}× its noise ({noise:.2g})",
        )
    m = freqs.size
    s = rebuild(positions, freqs, 1.0, np.arange(m), np.arange(m, 2 * m), 2 * m)  # [sines | cosines]
    a, *_ = np.linalg.lstsq(s, x, rcond=None)
    return ImageFit(True, "", freqs, n_turning, base, residual, noise, r, float(np.linalg.cond(a)))


_MAX_LOG_GROWTH = 600.0
"""Eigenvalues whose powers grow or decay by more than ``e^600`` over the window are left out of the rebuild
(their powers would overflow; a wild total-least-squares eigenvalue of a noise direction explains nothing)."""


def _rebuild_error(x: np.ndarray, positions: np.ndarray, lam: np.ndarray) -> float:
    """``‖x − V c‖ / ‖x‖`` for ``V = [λ^p]`` ``(n, r)`` and the least-squares ``c``: how much of the table the
    eigenvalues' powers leave (inf when the solve fails)."""
    steps = positions - positions[0]
    v = np.exp(np.outer(steps, np.log(lam.astype(np.complex128))))  # λ^p without overflow
    try:
        coef, *_ = np.linalg.lstsq(v, x.astype(np.complex128), rcond=None)
    except np.linalg.LinAlgError:
        return math.inf
    return float(np.linalg.norm(x - (v @ coef).real)) / (float(np.linalg.norm(x)) or 1.0)

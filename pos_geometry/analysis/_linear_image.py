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
   ``θ_i = base^{−2i/d}`` to 1% (:func:`lattice_base`), read on at least :data:`MIN_PLANES` of them where that
   lattice's planes are more than a bin apart (:func:`lattice_planes`); a table whose undamped planes follow no
   lattice is not called an image (the reason says so).
4. **Rebuilt to its noise.** The eigenvalues' powers rebuild the table to within :data:`REBUILD` times its
   noise level (or 1e-6 of its norm, for an exact table), so a drift no rotation makes is not absorbed; a
   table whose noise puts that bound at half its norm or more (:data:`MAX_BOUND`) is not tested by it, and
   not called an image.

The shift test needs ``n ≥ 2r + 2`` positions for ``r`` signal directions (not ``2d + 2``: a wide sinusoidal
table's slow planes are nearly polynomials of low degree, and few directions rise above its noise).

Calibrated in ``benchmarks/bench_calibration.py`` (claim "linear image"): walks, AR(1), GP curves of several
length scales in float16/32, polynomials and white noise as nulls; noisy images as power.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, replace

import numpy as np

from pos_geometry.analysis._pair_phases import rebuild

__all__ = [
    "ImageFit",
    "lattice_base",
    "lattice_planes",
    "linear_image",
    "resolved_planes",
    "resolution_turns",
]

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
MAX_BOUND = 0.5
"""The rebuild's bound (:data:`REBUILD` times the noise level) must stay below this share of the table's norm.
A noisier table's rebuild tests nothing: colored noise of as many columns as positions (AR(1) 0.5, 256 × 768)
has sinusoid-like principal directions (its position covariance is Toeplitz), a few of them on some lattice by
chance, and a noise level of 0.7 of its norm that any rebuild is within 3× of (11 of 200 such tables were
"images"). The noisiest images the lattice still reads (noise 3e-2 of the largest entry) are 15% noise."""


@dataclass(frozen=True)
class ImageFit:
    """What :func:`linear_image` found. ``is_image``: the verdict; ``why_not``: the rule that failed (empty for
    an image); ``frequencies`` ``(m,)`` the undamped planes' angles, largest first; ``resolved`` how many of
    them the window resolves; ``base`` the lattice's (None when they follow none); ``residual`` the rebuild's
    relative error (nan when an earlier rule failed: the rebuild is the last rule, and the costliest);
    ``noise`` the noise level as a fraction of the table's norm; ``rank`` the signal rank; ``condition`` the
    map's condition number (None when not an image); ``tested``: False when the window is too short for the
    shift test on that many directions (``why_not`` says so, and nothing else is claimed); ``on_lattice``: how
    many of the resolved planes the lattice is read on (:func:`lattice_planes`)."""

    is_image: bool
    why_not: str
    frequencies: np.ndarray
    resolved: int
    base: float | None
    residual: float
    noise: float
    rank: int
    condition: float | None = None
    tested: bool = True
    on_lattice: int = 0


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


def lattice_planes(freqs: np.ndarray, span: float) -> np.ndarray:
    """``(m,)`` bool: which of the resolved frequencies ``freqs`` (descending) lie where their own lattice's planes
    are more than a Fourier bin (``2π/span``) apart: ``θ·(1 − q) ≥ 2π/span``, with ``q`` the median ratio of
    neighbours. Below that a lattice crowds its planes within a bin: the window cannot separate them, and the
    shift map gives fewer eigenvalues there than the lattice has planes, each a blend of several, a bin or so
    apart (so counted resolved) but off the lattice by up to half its step. A wide table's lattice crowds early
    (768 columns of base 1e4 over 1024 positions: below 0.26 rad/position, where the planes are 2.4% apart);
    64 columns of the same base crowd where they stop turning four times, so nothing changes there."""
    keep = np.ones(freqs.shape, dtype=bool)
    if freqs.size < 2 or np.any(freqs <= 0):
        return keep
    q = float(np.exp(np.median(np.diff(np.log(freqs)))))
    if not q < 1:
        return keep
    return freqs * (1 - q) >= 2 * np.pi / span


def _signal_rank(sv: np.ndarray, n: int, d: int, rms: float, eps: float) -> tuple[int, float]:
    """``(rank, σ)``: how many singular values ``sv`` are signal, and the noise level per entry.

    White noise of level ``σ`` puts the ``k = min(n, d)`` singular values of an ``n × d`` table in
    ``σ(√max(n, d) ± √k)`` (Marchenko–Pastur), so ``σ`` is the smallest singular value divided by
    ``√max(n, d) − √k`` (an upper bound when the table has no noise directions; not read from a square table,
    whose bulk reaches 0), never below the storage precision's rounding ``eps·rms/√3``. When at least
    ``max(4, k/8)`` singular values lie under :data:`EDGE` times the bulk's upper edge ``σ(√n + √d)``, they are
    the noise and the rank stops there; otherwise (a full-rank table without a bulk, whose smallest value is
    signal) the rank keeps every singular value above ``max(eps, 1e-8)`` of the largest."""
    k = min(n, d)
    gap = math.sqrt(max(n, d)) - math.sqrt(k)
    sigma = max(float(sv[-1]) / gap if gap > 0 else 0.0, eps * rms / math.sqrt(3))
    precision = int(np.sum(sv > max(eps, 1e-8) * float(sv[0])))
    above_bulk = int(np.sum(sv > EDGE * sigma * (math.sqrt(n) + math.sqrt(d))))
    if k - above_bulk >= max(4, k // 8):
        return min(above_bulk, precision), sigma
    return precision, sigma


def _tls_eigenvalues(u: np.ndarray) -> np.ndarray:
    """The eigenvalues of the shift map ``Φ`` with ``u[1:] ≈ u[:-1]·Φ``, fitted by total least squares
    (errors in both sides): ``Φ = −V₁₂ V₂₂⁻¹`` from the right singular vectors of ``[u[:-1] | u[1:]]``."""
    r = u.shape[1]
    _, _, vh = np.linalg.svd(np.hstack([u[:-1], u[1:]]), full_matrices=False)
    v = vh.T
    return np.linalg.eigvals(-v[:r, r:] @ np.linalg.pinv(v[r:, r:]))


def linear_image(x: np.ndarray, positions: np.ndarray, eps: float) -> ImageFit:
    """Whether ``x`` ``(n, d)`` (float64, scaled near 1) is ``S·A`` plus noise; see the module docstring.
    ``eps``: the relative precision it was stored in.

    The shift map of ``r`` signal directions is fitted on ``n − 1`` shifted rows of ``2r`` columns, so the test
    needs ``n ≥ 2r + 2`` positions: ``r`` is the table's signal rank, not its width (a sinusoidal table of 768
    columns over 1024 positions has about 200 directions above a noise of 1e-6: its slow planes are nearly
    polynomials of low degree). A table with more directions than that is not tested (``tested`` False)."""
    n, d = x.shape
    u, sv, _ = np.linalg.svd(x, full_matrices=False)
    norm = float(np.linalg.norm(x)) or 1.0
    r, sigma = _signal_rank(sv, n, d, norm / math.sqrt(n * d), eps)
    noise = sigma * math.sqrt(n * d) / norm
    if n < 2 * r + 2:
        why = (f"the shift test of its {r} directions above the noise needs at least 2·{r} + 2 = {2 * r + 2} "
               f"positions, the window has {n}")  # fmt: skip
        return ImageFit(False, why, np.zeros(0), 0, None, math.nan, noise, r, tested=False)
    if r < 4:
        return ImageFit(False, f"only {r} direction(s) rise above the noise: no two planes", np.zeros(0), 0, None,
                        math.nan, noise, r)  # fmt: skip
    lam = _tls_eigenvalues(u[:, :r])
    if not np.all(np.isfinite(lam)):
        return ImageFit(False, "the shift map is singular", np.zeros(0), 0, None, math.nan, noise, r)
    span = float(positions[-1] - positions[0] + 1)
    angles, damping = np.angle(lam), np.log(np.abs(lam)) * span
    upper = angles > 1e-9  # one of each conjugate pair
    undamped = upper & (np.abs(damping) <= DAMPING)
    order = np.argsort(-angles[undamped])
    freqs = angles[undamped][order]
    resolved = resolved_planes(freqs, span, eps)
    n_turning = int(resolved.sum())
    on_lattice = freqs[resolved][lattice_planes(freqs[resolved], span)]
    base = lattice_base(on_lattice, d) if on_lattice.size >= MIN_PLANES else None
    found = ImageFit(False, "", freqs, n_turning, base, math.nan, noise, r, on_lattice=on_lattice.size)
    if n_turning < MIN_PLANES:
        why = (f"{n_turning} undamped plane(s) turn in the window (a linear image shows at least {MIN_PLANES}; "
               f"{int(upper.sum())} eigen-pairs of its shift map, the rest decay or grow)")  # fmt: skip
        return replace(found, why_not=why)
    if base is None:
        return replace(
            found,
            why_not=f"its {n_turning} undamped turning planes ({on_lattice.size} of them more than a bin apart on "
            "their own lattice) follow no base lattice θ_i = base^(−2i/d)",
        )
    if REBUILD * noise >= MAX_BOUND:
        why = (f"its noise ({noise:.2g} of its norm) is too large for the rebuild to test anything: the rotations "
               f"may leave {REBUILD:g}× the noise, and a linear image must be at least half the table")  # fmt: skip
        return replace(found, why_not=why)
    residual = _rebuild_error(x, positions, lam[np.abs(damping) <= _MAX_LOG_GROWTH])
    if residual > max(REBUILD * noise, 1e-6):
        return replace(
            found,
            residual=residual,
            why_not=f"the rotations leave {residual:.2g} of the table, more than {REBUILD:g}× its noise ({noise:.2g})",
        )
    m = freqs.size
    s = rebuild(positions, freqs, 1.0, np.arange(m), np.arange(m, 2 * m), 2 * m)  # [sines | cosines]
    a, *_ = np.linalg.lstsq(s, x, rcond=None)
    return replace(found, is_image=True, residual=residual, condition=float(np.linalg.cond(a)))


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

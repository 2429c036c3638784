"""The rotations' angles refined by nonlinear least squares on the trajectory itself, with standard errors.

The one-step map's eigenvalues are least squares of ``z[t+1]`` on ``z[t]``: noise in the regressors shrinks
them, and their angles wander with it (a period-300 helix at SNR 1 came out 288.6, and the spread of fits on
overlapping windows, 2.0, did not cover the difference). The standard answer for sums of sinusoids in noise is
to fit the sinusoids to the data: with the angles ``θ`` of the rotations found,

    z_t ≈ c₀ + c₁ t + Σ_j (a_j cos θ_j t + b_j sin θ_j t)        (every column of ``z`` at once)

is linear in the coefficients for fixed ``θ``, so the residual sum of squares is a function of ``θ`` alone
(variable projection, Golub & Pereyra). Its minimum, found by Gauss–Newton from the eigenvalues' angles,
is the maximum-likelihood estimate under white noise, unbiased to first order and as precise as the
Cramér–Rao bound allows; its standard errors come from the same fit (``σ² (JᵀJ)⁻¹``, ``σ²`` the residual
variance per entry), scaled by how much louder the residual is near each angle than on average (a smooth
background is loud at low frequencies, and a white-noise error would be optimistic there). The trend term
absorbs a drift along the curve (a helix's pitch).

The intervals built on them (``RecurrenceFit.period_interval``) are checked by simulation in
``benchmarks/bench_coverage.py``: the nominal 95% covers the truth 90–98% of the time in the settings named
there. Residuals that are not white (a learned table's other structure) make the errors optimistic; a pair
whose angle drifts is reported as drifting, not refined (:mod:`~pos_geometry.analysis._recurrence_pairs`).
"""

from __future__ import annotations

import math

import numpy as np
import scipy.optimize

__all__ = ["drift_p_value", "refine_angles", "refine_halves"]

NOISE_GAP, NOISE_BINS = 1.0, 3
"""The residual's level near an angle is read from ``NOISE_GAP`` to ``NOISE_BINS`` Fourier bins away (on a grid
four times finer than the bins, so a slow rotation's level includes the slower frequencies below it)."""
_PAD = 4
MIN_TURN = 1.0
"""A rotation that turns fewer times than this in the window is not refined: less than a turn is no rate."""


def _design(theta: np.ndarray, t: np.ndarray) -> np.ndarray:
    """``(n, 2 + 2J)``: constant, trend, and a cosine and sine per angle."""
    cols = [np.ones_like(t), t / t[-1] if t[-1] > 0 else t]
    for a in theta:
        cols += [np.cos(a * t), np.sin(a * t)]
    return np.stack(cols, axis=1)


def _residual(theta: np.ndarray, t: np.ndarray, z: np.ndarray) -> np.ndarray:
    phi = _design(theta, t)
    coef, *_ = np.linalg.lstsq(phi, z, rcond=None)
    return (z - phi @ coef).ravel()


def refine_angles(
    z: np.ndarray, angles: np.ndarray, refine: np.ndarray | None = None, level: np.ndarray | None = None
) -> tuple[np.ndarray, np.ndarray]:
    """``(angles, standard errors)`` ``(J,)`` of the sinusoids of the trajectory ``z`` ``(n, k)`` whose angles
    (radians per position) start at ``angles``, by variable-projection least squares (module docstring).

    Only the angles where ``refine`` (default: all) is true are fitted; the others stay in the model at their
    own angle (a slow rotation the trend cannot absorb would otherwise bias the rest; once per Fourier bin,
    :func:`_separated`) and are returned as they are, with a NaN error. ``level`` ``(J,)``: a lower bound on each angle's noise factor
    (:func:`_local_noise`; the halves take the whole window's). So are angles that turn fewer than
    :data:`MIN_TURN` times in the window, and
    everything when the fit does not converge or runs into another sinusoid's angle.
    """
    angles = np.asarray(angles, dtype=np.float64)
    n, k = z.shape
    errors = np.full(angles.shape, np.nan)
    t = np.arange(n, dtype=np.float64)
    chosen = np.ones(angles.shape, dtype=bool) if refine is None else np.asarray(refine, dtype=bool)
    fit = chosen & (angles * n >= 2 * math.pi * MIN_TURN)
    if not fit.any() or n * k <= 2 + 4 * int(fit.sum()):
        return angles.copy(), errors
    start = angles[fit]
    step = 2 * math.pi / n  # one Fourier bin: the fit may not move an angle further than this
    # Slow ones stay in the model at their own angle, so they are not taken as noise; once per Fourier bin.
    others = _separated(angles[~fit], step)

    def solve(w: np.ndarray) -> scipy.optimize.OptimizeResult:
        def residual(theta: np.ndarray) -> np.ndarray:
            return _residual(np.concatenate([theta, others]), t, w)

        return scipy.optimize.least_squares(
            residual,
            start,
            bounds=(np.maximum(start - step, 1e-12), start + step),
            x_scale=step,
            method="trf",
        )

    try:
        first = solve(z)
        # Each column has its own noise (PCA puts the noisiest directions of the noise first): weight every
        # column by its residual scale and fit again, so the angles' errors use the noise of the columns
        # that hold each rotation, not the pooled one.
        scale = np.sqrt(np.mean(first.fun.reshape(n, k) ** 2, axis=0))
        scale = np.where(scale > 0, scale, 1.0)
        res = solve(z / scale)
    except (ValueError, np.linalg.LinAlgError):
        return angles.copy(), errors
    theta = res.x
    if not res.success or np.any(np.abs(theta - start) >= step * (1 - 1e-6)):
        return angles.copy(), errors  # it ran to the edge: another rotation's angle, or no minimum here
    dof = n * k - (2 + 2 * theta.size + others.size * 2) * k - theta.size
    sigma2 = float(res.fun @ res.fun) / max(dof, 1)
    try:
        cov = sigma2 * np.linalg.inv(res.jac.T @ res.jac)
    except np.linalg.LinAlgError:
        return angles.copy(), errors
    out = angles.copy()
    out[fit] = theta
    factor = _local_noise(res.fun.reshape(n, k), theta)
    if level is not None:
        factor = np.maximum(factor, np.asarray(level, dtype=np.float64)[fit])
    errors[fit] = np.sqrt(np.clip(np.diag(cov), 0.0, None)) * factor
    return out, errors


def _separated(angles: np.ndarray, step: float) -> np.ndarray:
    """The ``angles`` at least ``step`` (one Fourier bin) from every one kept before them. Two fixed sinusoids
    closer than a bin are nearly collinear over the window: with free amplitudes in every column their
    difference absorbs whatever lies near them, and the residual no longer has a minimum at a rotation's angle
    (a period-301 circle beside an unresolved background pair at 491 and 499 came out 262)."""
    kept: list[float] = []
    for a in np.asarray(angles, dtype=np.float64).tolist():
        if all(abs(a - b) >= step for b in kept):
            kept.append(a)
    return np.asarray(kept, dtype=np.float64)


def _local_noise(resid: np.ndarray, theta: np.ndarray) -> np.ndarray:
    """``(J,)``: how much louder the residual is near each angle than on average, as a factor on its standard
    error (at least 1). A frequency's error depends on the noise at that frequency (Whittle); ``σ² (JᵀJ)⁻¹``
    assumes white noise, so a smooth background (a walk, a GP curve), loud at low frequencies, would make the
    errors of a slow rotation optimistic. The level near ``θ`` is the residual periodogram (summed over
    columns) averaged from :data:`NOISE_GAP` to :data:`NOISE_BINS` bins away on either side (the fitted sinusoid
    empties the nearest, and a drift leaves its sidebands there), against its mean over all frequencies."""
    n = resid.shape[0]
    power = (np.abs(np.fft.rfft(resid, n=_PAD * n, axis=0)) ** 2).sum(axis=1)[
        1:
    ]  # every 1/_PAD bin, DC left out
    mean = float(power.mean()) if power.size else 0.0
    if mean <= 0:
        return np.ones_like(theta)
    bins = np.arange(1, power.size + 1) / _PAD
    centre = theta * n / (2 * math.pi)
    far = np.abs(bins[None, :] - centre[:, None])
    mirrored = bins[None, :] + centre[:, None]  # a real residual's spectrum at -θ is its spectrum at θ
    near = (far >= NOISE_GAP) & (np.minimum(far, mirrored) <= NOISE_BINS)
    local = np.where(
        near.any(axis=1), (power[None, :] * near).sum(axis=1) / np.maximum(near.sum(axis=1), 1), mean
    )
    return np.sqrt(np.maximum(local / mean, 1.0))


def refine_halves(z: np.ndarray, angles: np.ndarray, refine: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """``(angles (J, 2), errors (J, 2))``: each angle where ``refine`` is true refined by :func:`refine_angles` on
    the first and on the second half of ``z`` ``(n, k)`` (no row in common), with its standard error there;
    NaN where a half could not be fitted (a rotation that turns less than once in a half, a fit that ran to
    its bounds). The drift test compares them."""
    angles = np.asarray(angles, dtype=np.float64)
    refine = np.asarray(refine, dtype=bool)
    out = np.full((angles.size, 2), np.nan)
    errors = np.full((angles.size, 2), np.nan)
    n, k = z.shape
    # The noise level near each angle read on the whole window too (each column in units of its residual
    # scale, as the fit weighs it): a half resolves the background's spectrum half as finely, and a slow
    # rotation's level would miss the loud frequencies just below it. Each half's factor is at least this.
    whole = _residual(angles, np.arange(n, dtype=np.float64), z).reshape(n, k)
    scale = np.sqrt(np.mean(whole**2, axis=0))
    level = _local_noise(whole / np.where(scale > 0, scale, 1.0), angles)
    for j, part in enumerate((z[: n // 2], z[n // 2 :])):
        fitted, error = refine_angles(part, angles, refine, level)
        ok = refine & np.isfinite(error)
        out[ok, j], errors[ok, j] = fitted[ok], error[ok]
    return out, errors


def drift_p_value(
    z: np.ndarray,
    angles: np.ndarray,
    refine: np.ndarray,
    index: int,
    change: float,
    n_surrogates: int,
    random_state: int,
) -> float:
    """The p-value of ``change``, the change between the halves' angles of rotation ``index`` (an index into
    ``angles``; :func:`refine_halves`), against constant rotations with the table's own background: the whole window's fit at ``angles`` (each
    ``refine`` angle constant over the window) plus its residual with every frequency's phase randomised (the
    same phases in every column: the residual's spectrum and its columns' cross-spectra are kept), fitted on
    the halves as the table was. ``(1 + #{surrogate changes ≥ the table's}) / (n_surrogates + 1)``.

    The halves' standard errors assume the residual is locally white; a loud smooth background (a GP curve
    at the rotation's frequency, with under two turns in a half) moves both halves' angles by more than they
    say, and this null measures by how much."""
    n = z.shape[0]
    t = np.arange(n, dtype=np.float64)
    phi = _design(angles, t)
    coef, *_ = np.linalg.lstsq(phi, z, rcond=None)
    fitted = phi @ coef
    spectrum = np.fft.rfft(z - fitted, axis=0)
    if not np.isfinite(change):
        return 1.0
    rng = np.random.default_rng(random_state)
    reached = 0
    for _ in range(n_surrogates):
        phases = np.exp(2j * np.pi * rng.random(spectrum.shape[0]))
        phases[0] = 1.0
        if n % 2 == 0:
            phases[-1] = 1.0
        surrogate = fitted + np.fft.irfft(spectrum * phases[:, None], n=n, axis=0)
        halves = [
            refine_angles(part, angles, refine)[0][index]
            for part in (surrogate[: n // 2], surrogate[n // 2 :])
        ]
        reached += abs(halves[0] - halves[1]) >= change
    return (1 + reached) / (n_surrogates + 1)

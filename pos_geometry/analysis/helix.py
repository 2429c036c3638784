"""Fit a helix to the PCA trajectory of a positional table, and test it against simpler shapes.

The trajectory is ``z(t)``, the top-``k`` principal-component coordinates of row ``t`` (``t`` = the
position index, so periods are in positions). The helix model is

    z(t) = c + v·(t − t̄) + Σ_{j=1..K} [ a_j cos(w_j t) + b_j sin(w_j t) ]        (c, v, a_j, b_j ∈ R^k)

a centre ``c`` (at the window's mean position ``t̄``), a linear drift ``v`` along the helix axis, and
``K`` elliptical harmonics. For fixed frequencies the model is linear in ``(c, v, a, b)`` and is solved by
least squares; the frequencies are **searched**, not assumed: each new harmonic is found on a dense
grid of ``w`` from ``min_turns`` turns over the window up to Nyquist (π rad/position, spacing a fifth of
the periodogram resolution) on the residual of the current model, refined by a bounded 1-D
``scipy.optimize.minimize_scalar``, and then all frequencies are re-refined jointly with
``scipy.optimize.least_squares``. Harmonics are added while the BIC decreases (at most ``max_harmonics``).

Baselines a sceptic would propose, each fitted by least squares (frequencies searched the same way):

==================  =======================================================  ===================
shape               model                                                    parameters ``p``
==================  =======================================================  ===================
``line``            ``c + v·(t − t̄)``                                         ``2k``
``ellipse``         ``c + a cos(wt) + b sin(wt)`` (closed curve, no drift)     ``3k + 1``
``circular_helix``  ``c + v·(t − t̄) + r(u₁ cos(wt) + u₂ sin(wt))``, u₁ ⟂ u₂     ``4k − 1``
                    unit vectors (circular cross-section of radius ``r``)     (``2k + 2 + (2k−3)``)
``helix``           the model above with ``K`` elliptical harmonics           ``2k + K(2k + 1)``
==================  =======================================================  ===================

(``2k − 3`` is the dimension of the set of orthonormal pairs ``(u₁, u₂)`` in R^k, which includes the phase.)
With ``N = n·k`` fitted numbers and ``RSS`` the residual sum of squares over all of them,

    BIC = N · ln(RSS / N) + p · ln(N)

(Gaussian residuals with one common variance; RSS is floored at 1e-12 of the total sum of squares so
that noiseless synthetic curves are ranked by ``p``, not by round-off). The shape with the lowest BIC is reported, with
``delta_bic`` = BIC(runner-up) − BIC(best) ≥ 0. Caveat: residuals of a smooth trajectory are
correlated along positions, so ``N`` overstates the independent evidence and large ΔBIC values are
larger than a white-noise calculation would justify; read them as "clearly", not as exact odds.

Accuracy (held by ``tests/analysis/test_helix.py``, hypothesis over the ranges given): for a circular
helix of period 20–150 positions (≥ 2.7 turns in a 400-position window), radius 1–5, pitch 0.5–3
radii, embedded in R^8 with isotropic noise of up to 5% of the radius in every coordinate, the
period, circular-helix period and number of turns are recovered within 2% and the radius,
circular-helix radius and pitch within 5%, and a helix shape is preferred to the line and the
ellipse. A noisy straight line is classified ``line``; a closed ellipse ``ellipse``.

Computation: the PCA runs on the device of the input (via :func:`pos_geometry.analysis.pca.pca`); the
small ``(n, k)`` coordinate matrix is then copied to the CPU in float64 for SciPy's optimisers.
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np
import torch

from pos_geometry import _progress
from pos_geometry._progress import Progress
from pos_geometry.analysis._batch import BatchResult, PCAItem, pca_items, renamed
from pos_geometry.analysis._helix_model import Fitter, design, rss_of, solve
from pos_geometry.analysis._helix_results import SHAPES, VERDICTS, HelixFit
from pos_geometry.analysis._inputs import Window, check_int, check_level
from pos_geometry.analysis.leverage import dominance_note
from pos_geometry.analysis.nulls.basis import check_null_method
from pos_geometry.analysis.nulls.helix_test import (
    HELIX_NULLS,
    dct_correlation,
    helix_null_tests,
    rotation_scan,
)
from pos_geometry.analysis.nulls.monte_carlo import NullTest, check_sequential
from pos_geometry.errors import InvalidArgumentError

__all__ = ["SHAPES", "VERDICTS", "HelixFit", "fit_helix"]

_MIN_DELTA_BIC = 10.0  # "very strong" evidence on the Kass & Raftery scale


def _scaled(rss: dict[str, float], unit: float) -> dict[str, float]:
    with np.errstate(over="ignore"):
        return {shape: float(np.float64(value) * unit * unit) for shape, value in rss.items()}


def _pinned(w: np.ndarray, f: Fitter) -> np.ndarray:
    """Harmonics stuck on a search bound: the longest period searched, Nyquist, the separation limit, or a
    point of the search grid.

    ``w`` is ordered by decreasing radius. Of two harmonics held exactly one resolution step apart, the
    weaker is the one the limit holds (a sideband pressed against its line, as a helix whose radius grows
    or shrinks makes); the stronger sits where the data put it and is not pinned by that pair. A frequency
    still exactly on a grid point was never refined: its refinement was refused because the optimum lies
    within the separation limit of another harmonic (GPT-2's third harmonic sits at 4.8 turns, the first
    grid point one resolution step past its neighbour at 3.62), so its period is the grid's, not the data's.
    """
    tol = 1e-3 * f.resolution
    at_bound = (np.abs(w - f.w_lo) <= tol) | (np.abs(w - f.w_hi) <= tol)
    gaps = np.where(np.eye(w.size, dtype=bool), np.inf, np.abs(w[:, None] - w[None, :]))
    at_limit = np.abs(gaps - f.resolution) <= tol
    on_grid = np.abs(w[:, None] - f.grid[None, :]).min(axis=1) <= 1e-9 * f.resolution
    return at_bound | np.triu(at_limit, 1).any(axis=0) | on_grid


def _verdict(
    shape: str, delta: float, pinned_lead: bool, tests: tuple[NullTest, ...], span: float, min_turns: float
):
    """``(verdict, reason)`` from the BIC ranking, the leading harmonic's place and the null tests."""
    if shape == "line":
        return (
            "does not apply",
            "a straight line describes the trajectory best (BIC): it does not turn, so it has no helix period or turns",
        )
    if pinned_lead:
        return "does not apply", (
            f"the leading harmonic sits on the search boundary (period {span / min_turns:.0f} = window/min_turns, "
            "Nyquist, or the separation limit): the curve turns less than the band allows, as a random walk's "
            "PCA does, so no period is reported"
        )
    if shape == "ellipse":
        return "not a helix", "BIC prefers a closed ellipse (no drift along an axis)"
    if delta <= _MIN_DELTA_BIC:
        return (
            "not a helix",
            f"the helix beats a line and an ellipse by only ΔBIC = {delta:.1f} (≤ {_MIN_DELTA_BIC:.0f})",
        )
    if not tests:
        return "untested", "the helix shape fits best, but no null was run (n_surrogates=0)"
    failed = [t for t in tests if not t.significant]
    if failed:
        return "not a helix", (
            "not distinguishable from a random-walk-like smooth curve: its rotation share is not above "
            + "; ".join(t.words() for t in failed)
            + f" at α = {failed[0].alpha}"
        )
    return (
        "helix",
        f"the helix shape fits best and its rotation beats every null (largest p = {max(t.p_value for t in tests):.3g})",
    )


def _fit_one(item: PCAItem, max_harmonics: int, min_turns: float, null: dict[str, Any]) -> HelixFit:
    z = item.coords.detach().to("cpu", torch.float64).numpy()
    # Fit in units of the largest coordinate (scale-free verdicts; no overflow for a table x 1e200).
    unit = float(np.abs(z).max()) or 1.0
    z = z / unit
    t = item.positions.detach().to("cpu", torch.float64).numpy()
    n, k = z.shape
    if n < 4 * k + 8:
        raise InvalidArgumentError(
            f"fit_helix needs at least 4·n_components + 8 = {4 * k + 8} positions in the window to fit and compare the "
            f"shapes with n_components={k}; got {n}. Widen the window or lower n_components."
        )
    f = Fitter(z, t, min_turns)
    rss = {"line": rss_of(z, t, f.tau, [], True)}
    n_params = {"line": 2 * k, "ellipse": 3 * k + 1, "circular_helix": 4 * k - 1}
    w_ell = f.next_frequency([], drift=False)
    rss["ellipse"] = rss_of(z, t, f.tau, [w_ell], False)

    freqs: list[float] = []
    best: tuple[float, list[float]] | None = None
    first_coef = None
    for n_h in range(1, max_harmonics + 1):
        trial = f.refine([*freqs, f.next_frequency(freqs, drift=True)], drift=True)
        trial_rss = rss_of(z, t, f.tau, trial, True)
        trial_bic = f.bic(trial_rss, 2 * k + n_h * (2 * k + 1))
        if n_h == 1:
            first_coef = solve(z, design(t, f.tau, trial, drift=True))[0]
            w_first = trial[0]
        elif trial_bic >= best[0]:
            break
        best, freqs = (trial_bic, trial), trial
    rss["circular_helix"], circ_r, circ_w = f.circular(w_first, first_coef)

    coef, resid = solve(z, design(t, f.tau, freqs, drift=True))
    rss["helix"] = float(np.sum(resid**2))
    n_params["helix"] = 2 * k + len(freqs) * (2 * k + 1)
    bic = {s: f.bic(rss[s], n_params[s]) for s in SHAPES}
    ranked = sorted(SHAPES, key=bic.__getitem__)

    span = float(t[-1] - t[0]) + 1.0
    cos_c, sin_c = coef[2::2], coef[3::2]  # (K, k)
    semi = np.stack(
        [np.linalg.svd(np.stack([a, b], axis=1), compute_uv=False) for a, b in zip(cos_c, sin_c, strict=True)]
    )
    radii = np.sqrt((semi**2).sum(axis=1) / 2)
    order = np.argsort(-radii)
    w = np.asarray(freqs)[order]
    periods = 2 * np.pi / w
    drift = coef[1] / (span / 2)
    tss = np.sum((z - z.mean(axis=0)) ** 2, axis=0)
    pinned = _pinned(w, f)
    scan = rotation_scan(n, float(min_turns), "cpu")
    share_t, w_rot = scan(torch.from_numpy(z)[None])
    share = float(share_t[0])
    tests: tuple[NullTest, ...] = ()
    if null["n_surrogates"] and ranked[0] != "line" and not pinned[0]:
        if item.rows is None:
            raise InvalidArgumentError(
                "fit_helix's null needs the table's rows, and this PCAResult does not hold them; pass the "
                "embedding (or a PCAResult from pca() of it), or n_surrogates=0 to skip the null."
            )
        tests = helix_null_tests(item.rows, k, share, min_turns=min_turns, **null)
    margin = min(bic["line"], bic["ellipse"]) - min(bic["helix"], bic["circular_helix"])
    verdict, reason = _verdict(ranked[0], float(margin), bool(pinned[0]), tests, span, min_turns)
    outliers = dominance_note(item.coords, item.positions)
    if outliers:
        reason = f"{reason}. Read with care: {outliers}"
    keep = slice(None) if verdict != "does not apply" else slice(0, 0)
    rot_period = 2 * math.pi / float(w_rot[0])
    return HelixFit(
        periods=periods[keep],
        frequencies=w[keep],
        turns=(n / periods)[keep],
        radii=radii[order][keep] * unit,
        semi_axes=semi[order][keep] * unit,
        center=coef[0] * unit,
        drift=drift * unit,
        cos_coef=cos_c[order][keep] * unit,
        sin_coef=sin_c[order][keep] * unit,
        pinned=pinned[keep],
        pitch=float(np.linalg.norm(drift) * periods[0] * unit) if verdict != "does not apply" else None,
        circular_radius=circ_r * unit if verdict != "does not apply" else None,
        circular_period=2 * math.pi / circ_w if verdict != "does not apply" else None,
        r2=float(1 - rss["helix"] / tss.sum()),
        r2_per_component=1 - np.sum(resid**2, axis=0) / np.maximum(tss, 1e-300),
        bic=bic,
        n_params=n_params,
        rss=_scaled(rss, unit),
        shape=ranked[0],
        runner_up=ranked[1],
        delta_bic=float(bic[ranked[1]] - bic[ranked[0]]),
        n_components=k,
        window=item.window,
        n_positions=n,
        explained_variance_ratio=np.asarray(item.explained_variance_ratio, dtype=np.float64),
        verdict=verdict,
        reason=reason,
        outlier_rows=outliers,
        tests=tests,
        rotation_share=share,
        rotation_period=rot_period if float(w_rot[0]) > float(scan.grid[0]) + 1e-12 else None,
        dct_correlation=dct_correlation(z),
        provenance=item.provenance,
    )


def fit_helix(
    x: Any,
    n_components: int = 3,
    *,
    window: Window = None,
    max_harmonics: int = 3,
    min_turns: float = 1.0,
    n_surrogates: int = 199,
    alpha: float = 0.01,
    random_state: int = 0,
    null_method: str = "fast",
    sequential: bool = True,
    progress: Progress = None,
    **deprecated: Any,
) -> HelixFit | BatchResult:
    """Fit the helix model (and the line / ellipse / circular-helix baselines) to the top PCA trajectory,
    and test it against smooth random curves.

    ``x``: a ``PositionalEmbedding``, a list of them, a tensor/array ``(n, d)`` or ``(batch, n, d)``, or a
    ``PCAResult`` (its first ``n_components`` coordinates are used, with its own window). ``window``:
    ``(start, stop)`` positions to fit (PCA is fitted on the same rows). ``max_harmonics``: most harmonics
    the greedy BIC search may add (≥ 1). ``min_turns``: the longest period searched is ``window length /
    min_turns``. ``n_surrogates``, ``alpha``, ``random_state``: the null test (see
    :mod:`pos_geometry.analysis.nulls.helix_test`): the verdict is ``"helix"`` only when the helix shape wins by
    ΔBIC > 10 and its rotation share beats ``n_surrogates`` random walks of the table's own steps *and*
    as many smooth Gaussian-process curves of its length scale at level ``alpha``.
    ``n_surrogates=0`` skips the null (verdict ``"untested"``). ``null_method``: ``"fast"`` draws and
    decomposes the surrogates in the table's leading principal subspace (99.9% of its variance), ``"exact"``
    as whole tables (the reference; same null, see :mod:`pos_geometry.analysis.nulls.basis`). ``sequential``:
    each null stops once 10 of its surrogates reach the table's rotation share (Besag & Clifford; p = 10/l
    after ``l`` surrogates): the verdict is the one all ``n_surrogates`` would give, and a curve the null
    explains costs a few dozen surrogates instead of ``n_surrogates``; False draws them all (for the whole
    null distribution). ``progress``:
    a bar of the surrogates done, on stderr (None: in a terminal or Jupyter; True/False: always/never; a
    callable: called with ``(done, total)`` instead). ``k=`` is a deprecated alias
    of ``n_components``.

    Returns a :class:`HelixFit` (``verdict``/``reason`` in words, ``tests`` with each null's p), or a
    ``BatchResult`` of them for a batch.

    >>> import numpy as np
    >>> t = np.arange(400.0)
    >>> z = np.stack([3 * np.cos(2 * np.pi * t / 80), 3 * np.sin(2 * np.pi * t / 80), 0.01 * t], axis=1)
    >>> fit = fit_helix(z)
    >>> fit.verdict, fit.shape, round(fit.period, 2), round(fit.circular_radius, 2)
    ('helix', 'circular_helix', 80.0, 3.0)
    """
    args = renamed("fit_helix", deprecated, {"k": "n_components"}, {"n_components": n_components})
    k = args["n_components"]
    if isinstance(max_harmonics, bool) or not isinstance(max_harmonics, int) or max_harmonics < 1:
        raise InvalidArgumentError(f"max_harmonics must be an integer >= 1; got {max_harmonics!r}.")
    if isinstance(min_turns, bool) or not (isinstance(min_turns, int | float) and min_turns > 0):
        raise InvalidArgumentError(
            f"min_turns must be a positive number (the longest period searched is window/min_turns); got {min_turns!r}."
        )
    if isinstance(k, int | np.integer) and not isinstance(k, bool) and k < 2:
        raise InvalidArgumentError(
            f"n_components must be >= 2 for a helix (a curve needs a plane to turn in); got n_components={k}."
        )
    n_surrogates = check_int("n_surrogates", n_surrogates, 0, ">= 0 (0 skips the null)")
    random_state = check_int("random_state", random_state, 0, ">= 0 (a seed)")
    if n_surrogates:
        alpha = check_level(alpha, n_surrogates)
    null = {
        "n_surrogates": n_surrogates,
        "alpha": float(alpha),
        "random_state": random_state,
        "method": check_null_method(null_method),
        "sequential": check_sequential(sequential),
    }
    items, single = pca_items(x, k, window=window, center=True)
    with _progress.task("helix nulls", len(HELIX_NULLS) * n_surrogates * len(items), show=progress):
        fits = tuple(_fit_one(it, max_harmonics, float(min_turns), null) for it in items)
    return fits[0] if single else BatchResult(fits, tuple(f.provenance for f in fits))

"""The recurrence's result: :class:`RecurrenceFit`, a linear (or affine) map fitted to a table's PCA coordinates."""

from __future__ import annotations

import math
from dataclasses import dataclass
from statistics import NormalDist

import numpy as np

from pos_geometry.analysis._recurrence_pairs import SPREAD_TOLERANCE
from pos_geometry.analysis._results import Result
from pos_geometry.analysis.nulls.monte_carlo import NullTest
from pos_geometry.embedding import Provenance

__all__ = ["RecurrenceFit", "period_interval", "period_words"]


def period_interval(angle: float, error: float, confidence: float) -> tuple[float, float]:
    """``(low, high)``: the ``confidence`` interval of the period ``2π/angle`` of an angle (rad/position) with
    standard error ``error``, from the normal interval of the angle (its upper bound gives the shorter period)."""
    # the standard library's quantile: scipy.stats costs ~0.5 s to import
    q = NormalDist().inv_cdf(0.5 + confidence / 2)
    return 2 * math.pi / (angle + q * error), 2 * math.pi / max(angle - q * error, 1e-300)


SHOWN = 16
"""The summary lists at most this many rotation periods (the longest); ``rotation_periods()`` has them all."""


def period_words(period: float, low: float, high: float) -> str:
    """One period with its interval, at the digits the interval supports."""
    if not np.isfinite(low):
        return f"{period:.5g}"
    if not low < high:
        return f"{period:.6g} (exact)"
    if high - low < 1e-4 * period:  # narrower than five digits show: the half-width instead
        return f"{period:.9g} ± {(high - low) / 2:.1g}"
    return f"{period:.5g} [{low:.5g}, {high:.5g}]"


@dataclass(frozen=True, eq=False, repr=False)
class RecurrenceFit(Result):
    """A linear (or affine) recurrence fitted to one matrix's top-``k`` PCA coordinates.

    ``transition`` ``(k, k)``, ``offset`` ``(k,)`` or None; ``eigenvalues`` ``(k,)`` complex, sorted by
    ``angles`` then by decreasing ``moduli``; ``periods`` ``(k,)``; ``prediction_error`` and
    ``persistence_error``: horizon → relative error; ``generator``: real ``log M`` ``(k, k)`` or None.
    Small arrays are NumPy on the CPU.
    """

    transition: np.ndarray
    offset: np.ndarray | None
    eigenvalues: np.ndarray
    moduli: np.ndarray
    angles: np.ndarray
    periods: np.ndarray
    pair_classes: tuple[str, ...]
    period_spread: np.ndarray
    prediction_error: dict[int, float]
    persistence_error: dict[int, float]
    skipped_horizons: tuple[int, ...]
    generator: np.ndarray | None
    n_components: int
    rank: int
    center: bool
    affine: bool
    window: tuple[int, int]
    n_positions: int
    explained_variance_ratio: np.ndarray
    status: str
    reason: str
    tests: tuple[NullTest, ...]
    provenance: Provenance
    period_halves: np.ndarray | None = None
    """``(k, 2)``: each eigenvalue's period fitted on the first and on the second half of the window (no row in
    common); a rotation whose two periods differ beyond their error bars is ``"drifting"``, not a rotation."""
    refined_periods: np.ndarray | None = None
    """``(k,)``: each rotation's period refined by least squares of its sinusoid on the trajectory
    (:mod:`~pos_geometry.analysis._recurrence_phase`); NaN for other pairs and where it was not refined."""
    period_interval: np.ndarray | None = None
    """``(k, 2)``: the ``confidence`` interval of each refined period (NaN elsewhere); its coverage is measured
    by ``benchmarks/bench_coverage.py``."""
    confidence: float = 0.95
    stored_planes: np.ndarray | None = None
    """``(d/2, 2)``: when the table's stored columns pair into single rotations (a sinusoidal or rotary
    table: :func:`~pos_geometry.analysis.identify.stored_planes`), each pair's frequency (rad/position) and
    its standard error, fitted on its own two columns; None otherwise. The shift map cannot separate planes
    within a Fourier bin of each other; these need not."""
    stored_layout: str | None = None
    """The arrangement of :attr:`stored_planes` in the columns (e.g. ``"interleaved layout, sin-cos pairs"``)."""
    outlier_rows: str = ""
    """Empty, or which rows dominate the leading components this fit read
    (:func:`~pos_geometry.analysis.leverage.dominance_note`)."""
    background_p: np.ndarray | None = None
    """``(k,)``: for each rotation of the map (the upper eigenvalue of its pair), the p-value of its line
    against a smooth background with the table's spectrum
    (:mod:`~pos_geometry.analysis.nulls.pair_background`); those above ``alpha`` are ``"not above the
    background"``, not rotations. NaN elsewhere and where the test did not run (no null, an exact map, planes
    read from the stored columns)."""

    @property
    def test(self) -> NullTest | None:
        """The deciding null test (the largest p of :attr:`tests`), or None when no null ran."""
        return max(self.tests, key=lambda t: t.p_value) if self.tests else None

    @property
    def k(self) -> int:
        """Deprecated name of :attr:`n_components`."""
        return self.n_components

    @property
    def spectral_radius(self) -> float:
        """The largest ``|λ|``: above 1 the map grows and its ``h``-step predictions diverge."""
        return float(self.moduli.max(initial=0.0))

    def pairs(self, kind: str | None = None) -> list[tuple[float, float]]:
        """``(period, modulus)`` of each conjugate pair (Im λ > 0) of class ``kind`` (a ``pair_classes``
        value: ``"rotation"``, ``"slower than the window"``, ``"unresolved"``, ``"unstable"``, ``"damped"``,
        ``"growing"``, ``"drifting"``, ``"not above the background"``;
        None: all), longest period first."""
        sel = np.array([c != "" and (kind is None or c == kind) for c in self.pair_classes], dtype=bool)
        return sorted(zip(self.periods[sel].tolist(), self.moduli[sel].tolist(), strict=True), reverse=True)

    def rotation_periods(self) -> list[tuple[float, float, float]]:
        """``(period, low, high)`` of each rotation, longest first, with its ``confidence`` interval.

        When the stored columns hold the planes (:attr:`stored_planes`), every plane that turns at least
        once in the window, each fitted on its own pair of columns (the shift map's rotations are among
        them; its unresolved pairs are not left out). Otherwise the map's rotations: the refined period, or
        the eigenvalue's period with NaN bounds where it was not refined."""
        if self.status != "rotations":
            return []
        if self.stored_planes is not None:
            return self._plane_periods()
        out = []
        for i, c in enumerate(self.pair_classes):
            if c != "rotation":
                continue
            refined = self.refined_periods[i] if self.refined_periods is not None else np.nan
            low, high = self.period_interval[i] if self.period_interval is not None else (np.nan, np.nan)
            period = float(refined) if np.isfinite(refined) else float(self.periods[i])
            out.append((period, float(low), float(high)))
        return sorted(out, reverse=True)

    def _plane_periods(self) -> list[tuple[float, float, float]]:
        theta, se = np.asarray(self.stored_planes, dtype=np.float64).T
        turning = theta * self.n_positions >= 2 * math.pi
        return sorted(
            (2 * math.pi / t, *period_interval(t, e, self.confidence))
            for t, e in zip(theta[turning].tolist(), se[turning].tolist(), strict=True)
        )[::-1]

    def rotation_pairs(self) -> list[tuple[float, float]]:
        """``(period, modulus)`` of each rotation: an undamped conjugate pair (``| |λ| − 1 | ≤
        MODULUS_TOLERANCE``) that turns at least once in the window and is resolved from every other
        eigenvalue; longest period first; empty unless ``status`` is ``"rotations"``."""
        return self.pairs("rotation") if self.status == "rotations" else []

    def rotation_words(self) -> str:
        """The periods of :meth:`rotation_periods` in words, each with its interval (empty when there is
        none): what the summary, the card and every other analysis's reason quote."""
        found = self.rotation_periods()
        if not found:
            return ""
        if not any(np.isfinite(lo) for _, lo, _ in found):
            return ", ".join(f"{p:.4g}" for p, _, _ in found) + " (eigenvalue periods: no intervals)"
        words = f" ({self.confidence:.0%} intervals)"
        if self.stored_planes is not None:
            words = (
                f" ({len(found)} planes, each fitted on its own pair of stored columns, {self.stored_layout}; "
                f"{self.confidence:.0%} intervals; the shift map resolves {len(self.pairs('rotation'))})"
            )
        shown = [period_words(*r) for r in found[:SHOWN]]
        if len(found) > SHOWN:
            shown.append(f"... {len(found) - SHOWN} more (rotation_periods())")
        return ", ".join(shown) + words

    def summary_rows(self) -> list[tuple[str, str]]:
        def drifts() -> str:
            halves = (
                self.period_halves
                if self.period_halves is not None
                else np.full((len(self.periods), 2), np.nan)
            )
            return (
                ", ".join(
                    f"from {a:.4g} to {b:.4g}"
                    for (a, b), c in zip(halves, self.pair_classes, strict=True)
                    if c == "drifting" and np.isfinite(a) and np.isfinite(b)
                )
                + " (first half, second half)"
            )

        def counted(kind: str) -> str:
            found = len(self.pairs(kind))
            if kind == "slower than the window":
                return f"{found} pair(s), each period > {self.n_positions} (less than a turn: no estimate)"
            if kind == "unresolved":
                if self.stored_planes is not None and self.status == "rotations":
                    return f"{found} pair(s) of the map within a Fourier bin of another (the stored pairs give them)"
                return f"{found} pair(s) within a Fourier bin of another (no period can be given)"
            if kind == "unstable":
                return (
                    f"{found} pair(s) whose angle moves by more than {SPREAD_TOLERANCE:.0%} between overlapping "
                    "windows (no period given)"
                )
            if kind == "not above the background":
                p = self.background_p if self.background_p is not None else np.full(len(self.periods), np.nan)
                return (
                    ", ".join(
                        f"{t:.4g} (p = {q:.3g})"
                        for t, q, c in zip(self.periods, p, self.pair_classes, strict=True)
                        if c == kind
                    )
                    + " (each a line no stronger than a smooth background puts at its frequency)"
                )
            return drifts()

        pairs = self.rotation_words()
        pairs = pairs or (f"{self.status}: {self.reason}" if self.status != "rotations" else "none")
        untestable = "; ".join(
            f"{kind}: {counted(kind)}"
            for kind in (
                "slower than the window",
                "unresolved",
                "unstable",
                "drifting",
                "not above the background",
            )
            if self.pairs(kind)
        )
        real = self.moduli[np.abs(self.eigenvalues.imag) <= 1e-12]
        errs = ", ".join(
            f"h={h}: {e:.3g} (persistence {self.persistence_error[h]:.3g})"
            for h, e in self.prediction_error.items()
        )
        skipped = f"; skipped h={list(self.skipped_horizons)} (≥ window)" if self.skipped_horizons else ""
        return [
            (
                "subspace",
                f"top {self.n_components} PCs ({float(np.sum(self.explained_variance_ratio)):.1%}), "
                f"{'centred' if self.center else 'uncentred'}, {'affine' if self.affine else 'linear'} recurrence, "
                f"rank {self.rank}",
            ),
            ("window", f"positions {self.window[0]}..{self.window[1] - 1} ({self.n_positions})"),
            ("rotation periods (positions)", pairs),
            ("not testable", untestable or "none"),
            ("real eigenvalues", ", ".join(f"{v:.4f}" for v in real) or "none"),
            ("prediction error", errs + skipped),
            (
                "real logarithm",
                "exists" if self.generator is not None else "none (eigenvalue on the negative real axis)",
            ),
            *([("outlier rows", self.outlier_rows)] if self.outlier_rows else []),
        ]

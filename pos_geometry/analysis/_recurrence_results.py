"""The recurrence's result: :class:`RecurrenceFit`, a linear (or affine) map fitted to a table's PCA coordinates."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from pos_geometry.analysis._results import Result
from pos_geometry.analysis.nulls.monte_carlo import NullTest
from pos_geometry.embedding import Provenance

__all__ = ["RecurrenceFit"]


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
        ``"growing"``;
        None: all), longest period first."""
        sel = np.array([c != "" and (kind is None or c == kind) for c in self.pair_classes], dtype=bool)
        return sorted(zip(self.periods[sel].tolist(), self.moduli[sel].tolist(), strict=True), reverse=True)

    def rotation_pairs(self) -> list[tuple[float, float]]:
        """``(period, modulus)`` of each rotation: an undamped conjugate pair (``| |λ| − 1 | ≤
        MODULUS_TOLERANCE``) that turns at least once in the window and is resolved from every other
        eigenvalue; longest period first; empty when ``status`` is ``"does not apply"``."""
        return self.pairs("rotation") if self.status == "rotations" else []

    def summary_rows(self) -> list[tuple[str, str]]:
        spread = {
            float(p): s
            for p, s, c in zip(self.periods, self.period_spread, self.pair_classes, strict=True)
            if c
        }

        def listed(kind: str) -> str:
            return ", ".join(
                f"{p:.4g}" + (f" ± {spread[p] * p:.2g}" if np.isfinite(spread.get(p, np.nan)) else "")
                + f" (|λ|={m:.4f})"
                for p, m in self.pairs(kind)
            )  # fmt: skip

        pairs = listed("rotation") if self.status == "rotations" else ""
        pairs = pairs or (f"does not apply: {self.reason}" if self.status != "rotations" else "none")
        untestable = "; ".join(
            f"{kind}: {listed(kind)}"
            for kind in ("slower than the window", "unresolved", "unstable", "drifting")
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
        ]

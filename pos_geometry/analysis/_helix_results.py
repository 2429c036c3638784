"""The result of :func:`pos_geometry.analysis.helix.fit_helix`: :class:`HelixFit`, its shapes and verdicts."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from pos_geometry.analysis._results import Result
from pos_geometry.analysis.nulls.monte_carlo import NullTest
from pos_geometry.embedding import Provenance

__all__ = ["SHAPES", "VERDICTS", "HelixFit"]

SHAPES = ("line", "ellipse", "circular_helix", "helix")
VERDICTS = ("helix", "not a helix", "does not apply", "untested")


@dataclass(frozen=True, eq=False, repr=False)
class HelixFit(Result):
    """A helix fitted to one matrix's top-``k`` PCA trajectory (``K`` harmonics, largest radius first).

    ``periods``/``frequencies``/``turns``/``radii``: ``(K,)`` in positions, rad/position, turns over the
    window (window length / period) and equivalent radius ``sqrt((s₁² + s₂²)/2)`` of each harmonic's
    ellipse, whose semi-axes ``s₁ ≥ s₂`` are ``semi_axes`` ``(K, 2)``. ``center`` ``(k,)``, ``drift``
    ``(k,)`` (per position), ``cos_coef``/``sin_coef`` ``(K, k)``: the fitted model. ``pitch``: drift
    per turn of the first harmonic, ``|v| · periods[0]``. ``circular_radius``/``circular_period``: the
    constant-radius helix. ``r2``/``r2_per_component``: of the ``helix`` model. ``bic``, ``n_params``,
    ``rss``: per shape (see the module docstring); ``shape`` is the BIC winner, ``delta_bic`` its
    margin over ``runner_up``. ``pinned`` ``(K,)``: harmonics stuck on a search bound (not findings).

    The verdict (one of :data:`VERDICTS`) and its ``reason`` in words: ``"helix"`` needs the helix shape
    to win by ΔBIC > 10 *and* its ``rotation_share`` (the share of the trajectory's variance in its
    strongest planar rotation, turning at ``rotation_period``) to beat every null in ``tests`` (random walks
    of the table's own steps, smooth Gaussian-process curves of its length scale, stationary curves with its
    own spectrum; each a :class:`~pos_geometry.analysis.nulls.monte_carlo.NullTest`, sequential or not). ``"does not apply"``:
    a line, or a leading harmonic on the search boundary; the harmonic arrays are then empty and
    ``period`` is None. ``dct_correlation`` ``(k,)``: ``|corr(PC j, cos(π j t / n))|``, near 1 for the
    PCA of a random walk.
    """

    periods: np.ndarray
    frequencies: np.ndarray
    turns: np.ndarray
    radii: np.ndarray
    semi_axes: np.ndarray
    center: np.ndarray
    drift: np.ndarray
    cos_coef: np.ndarray
    sin_coef: np.ndarray
    pinned: np.ndarray
    pitch: float | None
    circular_radius: float | None
    circular_period: float | None
    r2: float
    r2_per_component: np.ndarray
    bic: dict[str, float]
    n_params: dict[str, int]
    rss: dict[str, float]
    shape: str
    runner_up: str
    delta_bic: float
    n_components: int
    window: tuple[int, int]
    n_positions: int
    explained_variance_ratio: np.ndarray
    verdict: str
    reason: str
    tests: tuple[NullTest, ...]
    rotation_share: float
    rotation_period: float | None
    dct_correlation: np.ndarray
    provenance: Provenance
    outlier_rows: str = ""
    """Empty, or which rows dominate the leading components this fit read
    (:func:`~pos_geometry.analysis.leverage.dominance_note`)."""

    @property
    def k(self) -> int:
        """Deprecated name of :attr:`n_components`."""
        return self.n_components

    @property
    def n_harmonics(self) -> int:
        return int(self.periods.shape[0])

    @property
    def applies(self) -> bool:
        """False when the helix model does not apply (a line, or its turn on the search boundary)."""
        return self.verdict != "does not apply"

    @property
    def period(self) -> float | None:
        """The leading harmonic's period in positions, or None where the helix does not apply."""
        return float(self.periods[0]) if self.periods.size else None

    @property
    def p_value(self) -> float | None:
        """The largest p over the nulls (the helix must beat every one), or None when untested."""
        return max(t.p_value for t in self.tests) if self.tests else None

    def _marked(self, values: np.ndarray) -> str:
        """``values`` with each harmonic held by a search bound marked (pinned: a bound's value, not a finding)."""
        return ", ".join(
            f"{v:.4g}" + (" (pinned on a search bound)" if pin else "")
            for v, pin in zip(np.ravel(values), np.ravel(self.pinned), strict=True)
        )

    def summary_rows(self) -> list[tuple[str, str]]:
        fmt = lambda a: ", ".join(f"{v:.4g}" for v in np.ravel(a))  # noqa: E731
        bics = ", ".join(f"{s}={self.bic[s]:.1f}" for s in SHAPES)
        rows = [
            (
                "window",
                f"positions {self.window[0]}..{self.window[1] - 1} ({self.n_positions}), top {self.n_components} "
                f"PCs ({float(np.sum(self.explained_variance_ratio)):.1%} of variance)",
            ),
            ("verdict", f"{self.verdict}: {self.reason}"),
            ("best shape (BIC)", f"{self.shape}, ΔBIC = {self.delta_bic:.1f} over {self.runner_up}"),
            ("BIC", bics),
        ]
        from pos_geometry.analysis.nulls.monte_carlo import NULL_NAMES

        rows += [(f"null: {NULL_NAMES.get(t.null, t.null)}", t.words()) for t in self.tests]
        if self.outlier_rows:
            rows.append(("outlier rows", self.outlier_rows))
        rows.append(("PC vs cos(πjt/n) |r|", fmt(self.dct_correlation)))
        if not self.applies:
            return [*rows, ("periods", f"does not apply: {self.reason}")]
        return [
            *rows,
            ("periods (positions)", self._marked(self.periods)),
            ("turns over window", self._marked(self.turns)),
            ("radii (equivalent)", fmt(self.radii)),
            ("pitch (drift per turn)", f"{self.pitch:.4g}"),
            ("circular helix", f"radius {self.circular_radius:.4g}, period {self.circular_period:.4g}"),
            ("R² overall / per PC", f"{self.r2:.4f} / {fmt(self.r2_per_component)}"),
        ]

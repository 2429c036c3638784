"""The Monte-Carlo test of one statistic against one null: its record, :class:`NullTest`, and its p-value.

The p-value of an observed statistic ``T`` against ``S`` surrogate values is ``(1 + #{T_s >= T}) / (1 + S)``
(never 0; the smallest reachable value is ``1 / (1 + S)``).

**Sequential tests** (Besag & Clifford 1991, :class:`StopRule`): a null may stop drawing once ``h``
surrogates have reached ``T``. Stopped after ``l`` surrogates, its p-value is ``h / l``; otherwise all ``S``
are drawn and the p-value is the one above. With ``h > α·S`` both are valid p-values and the decision at
``α`` is the one the ``S`` surrogates would give: stopping means at least ``h`` of them reach ``T``, so the
full test's ``p ≥ (h + 1)/(S + 1) > α``, and ``h / l ≥ h / S > α``. A table the null explains (most of a
sweep's early checkpoints, every calibration table) stops after about ``h / p`` surrogates; a significant one
draws all ``S``.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

import numpy as np

from pos_geometry.analysis._inputs import check_bool

__all__ = [
    "NULL_DESCRIPTIONS",
    "NULL_NAMES",
    "NullTest",
    "SEQUENTIAL_EXCEEDANCES",
    "StopRule",
    "check_sequential",
    "monte_carlo_p",
]

NULL_NAMES = {
    "step_walk": "random walks of its own steps",
    "smooth_gp": "smooth random curves",
    "stationary": "its own spectrum",
    "red_noise": "red noise",
}
"""Each null in a few words, for verdict lines and tables (:data:`NULL_DESCRIPTIONS` says how it is drawn)."""

NULL_DESCRIPTIONS = {
    "step_walk": "random walks made of the table's own steps (blocks of its length scale, shuffled)",
    "smooth_gp": "smooth Gaussian-process curves with the table's length scale (over its sampling spread) and noise share",
    "stationary": "stationary Gaussian curves with the table's own pooled spectrum (any kernel: AR(1), smooth, ...)",
    "red_noise": "AR(1) red noise plus white noise, fitted to each principal axis' autocorrelation and variance",
}


@dataclass(frozen=True)
class NullTest:
    """One Monte-Carlo test: ``statistic`` observed as ``observed``, against ``null`` surrogates.

    ``p_value`` = ``(1 + #{surrogate >= observed}) / (1 + n_surrogates)``, or for a sequential test that
    stopped (``stopped``: ``stop_after`` surrogates reached ``observed``) ``stop_after / n_surrogates``;
    ``n_surrogates``: those drawn, ``max_surrogates``: those a sequential test would have drawn at most
    (None: a fixed test, all drawn); ``min_p_value`` = the smallest p the test can give;
    ``null_median``/``null_q95``: the drawn surrogates' distribution; ``significant``: ``p_value <= alpha``
    (for a sequential test the decision all ``max_surrogates`` would give); ``method``: how the surrogates
    were computed (``"fast"`` in the table's leading principal subspace, ``"exact"`` as whole tables; the
    same null); ``values`` ``(S,)``: the surrogates' statistics (not serialised).
    """

    statistic: str
    observed: float
    null: str
    null_description: str
    n_surrogates: int
    p_value: float
    min_p_value: float
    alpha: float
    null_median: float
    null_q95: float
    method: str = "fast"
    max_surrogates: int | None = None
    stop_after: int | None = None
    stopped: bool = False
    values: np.ndarray | None = field(default=None, repr=False, compare=False, metadata={"serialize": False})

    @property
    def significant(self) -> bool:
        return self.p_value <= self.alpha

    def words(self) -> str:
        """``"0.678 vs random walks ... (median 0.38, 95% 0.45; p = 0.005, 199 surrogates)"``; a sequential
        test that stopped says so: ``"(…; p = 0.42, stopped after 24 of 199 surrogates: 10 reached it)"``."""
        drawn = (
            f"stopped after {self.n_surrogates} of {self.max_surrogates} surrogates: {self.stop_after} reached it"
            if self.stopped
            else f"{self.n_surrogates} surrogates"
        )
        return (
            f"{self.observed:.3g} vs {self.null_description} (median {self.null_median:.3g}, "
            f"95% {self.null_q95:.3g}; p = {self.p_value:.3g}, {drawn})"
        )


SEQUENTIAL_EXCEEDANCES = 10
"""A sequential null stops once this many surrogates (at least; more where ``α·S`` needs it) have reached the
observed statistic: Besag & Clifford's ``h``, for a p-value of about ±30% relative spread when it stops."""


def check_sequential(value: object) -> bool:
    """``value`` of a ``sequential=`` argument as a bool, else :class:`~pos_geometry.errors.InvalidArgumentError`
    (one rule and one message for every analysis and the sweep)."""
    meaning = (
        f"stop a helix or recurrence null once {SEQUENTIAL_EXCEEDANCES} of its surrogates reach the table"
    )
    return check_bool("sequential", value, meaning)


def _reaching(values: np.ndarray, observed: float) -> np.ndarray:
    """Which ``values`` reach ``observed`` (``>=``, with a relative round-off allowance of 1e-12)."""
    return values >= observed - 1e-12 * abs(observed)


@dataclass(frozen=True)
class StopRule:
    """Besag & Clifford's sequential stop for one null (see the module docstring): draw until ``stop_after``
    surrogates reach ``observed``, at most ``max_surrogates``. :meth:`for_level` picks ``stop_after``."""

    observed: float
    stop_after: int
    max_surrogates: int

    @classmethod
    def for_level(cls, observed: float, max_surrogates: int, alpha: float) -> StopRule:
        """The rule whose decision at ``alpha`` is that of all ``max_surrogates``: ``h`` =
        max(:data:`SEQUENTIAL_EXCEEDANCES`, ⌊α·S⌋ + 1), so that ``h > α·S``."""
        h = max(SEQUENTIAL_EXCEEDANCES, math.floor(alpha * max_surrogates) + 1)
        return cls(float(observed), int(h), int(max_surrogates))

    def drawn(self, values: np.ndarray) -> int | None:
        """How many of ``values`` (in the order drawn) the test uses: up to the ``stop_after``-th that reaches
        ``observed``, or None when fewer reach it (go on drawing)."""
        hits = np.flatnonzero(_reaching(np.asarray(values, dtype=np.float64), self.observed))
        return int(hits[self.stop_after - 1]) + 1 if hits.size >= self.stop_after else None


def monte_carlo_p(
    statistic: str,
    observed: float,
    null: str,
    values: np.ndarray,
    alpha: float,
    method: str = "fast",
    *,
    rule: StopRule | None = None,
) -> NullTest:
    """The :class:`NullTest` of ``observed`` against the surrogate ``values`` ``(S,)``: all of them, or with
    ``rule`` those a sequential test drew (:func:`surrogate_values` with the same ``rule``)."""
    values = np.asarray(values, dtype=np.float64)
    s = int(values.size)
    reached = int(np.sum(_reaching(values, observed)))
    stopped = rule is not None and reached >= rule.stop_after
    if rule is not None and (rule.drawn(values) != s if stopped else s != rule.max_surrogates):
        raise ValueError(f"{s} surrogate values do not end where the sequential rule {rule} stops")
    p = rule.stop_after / s if stopped else (1 + reached) / (1 + s)
    planned = rule.max_surrogates if rule is not None else s
    return NullTest(
        statistic=statistic,
        observed=float(observed),
        null=null,
        null_description=NULL_DESCRIPTIONS[null],
        n_surrogates=s,
        p_value=float(p),
        min_p_value=1.0 / (1 + planned),
        alpha=float(alpha),
        null_median=float(np.median(values)),
        null_q95=float(np.quantile(values, 0.95)),
        method=method,
        max_surrogates=planned if rule is not None else None,
        stop_after=rule.stop_after if rule is not None else None,
        stopped=bool(stopped),
        values=values,
    )

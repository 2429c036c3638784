"""Does a fitted recurrence predict better than it does for curves with no rotation?  Its Monte-Carlo nulls.

The statistic is the gain over persistence ``h`` rows ahead of the map fitted to the top-``k`` PCA
coordinates (:func:`pos_geometry.analysis._recurrence_map.improvement`); each surrogate of
:data:`RECURRENCE_NULLS` is pushed through the same PCA and the same fit
(:func:`pos_geometry.analysis.nulls.surrogates.surrogate_values`), and the map must beat both families
(:mod:`pos_geometry.analysis.recurrence`). The smooth-GP surrogates' spectra are kept for the test of each
rotation against the background (:mod:`pos_geometry.analysis.nulls.pair_background`): the same draws.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np
import torch

from pos_geometry.analysis._recurrence_map import fitted_gain, improvement
from pos_geometry.analysis.nulls.monte_carlo import NullTest, StopRule, monte_carlo_p
from pos_geometry.analysis.nulls.pair_background import BACKGROUND_NULL, surrogate_columns
from pos_geometry.analysis.nulls.surrogates import surrogate_values

__all__ = ["RECURRENCE_NULLS", "recurrence_null_tests"]

RECURRENCE_NULLS = ("step_walk", "smooth_gp")


@dataclass(frozen=True)
class _OnGain:
    """A sequential rule read on the first column of a statistic whose other columns ride along."""

    rule: StopRule

    def drawn(self, values: np.ndarray) -> int | None:
        return self.rule.drawn(np.asarray(values)[:, 0])


def recurrence_null_tests(
    rows: torch.Tensor,
    z: torch.Tensor,
    k: int,
    center: bool,
    affine: bool,
    rcond: float,
    horizon: int,
    null: dict[str, Any],
) -> tuple[tuple[NullTest, ...], np.ndarray | None]:
    """``(tests, columns)``: ``M^horizon``'s gain over persistence on ``z`` ``(n, k)`` (the top-``k`` coordinates
    of ``rows`` ``(n, d)``, in units of their largest) against each of :data:`RECURRENCE_NULLS`, one
    :class:`NullTest` per family; ``columns`` ``(S, G + k)``: the :data:`BACKGROUND_NULL` surrogates' power spectra and eligible pairs
    (:func:`~pos_geometry.analysis.nulls.pair_background.surrogate_columns`), every one drawn (None when that
    null stopped early: it was not beaten, and no rotation is tested against it). ``null``: ``n_surrogates``,
    ``alpha``, ``random_state``, ``method`` and ``sequential`` (each null stops once enough surrogates reach
    the table's gain, :class:`StopRule`)."""

    def gain(coords: torch.Tensor) -> torch.Tensor:
        return improvement(coords, rcond, horizon, affine)

    def gain_and_spectrum(coords: torch.Tensor) -> torch.Tensor:
        values, maps = fitted_gain(coords, rcond, horizon, affine)  # one fit for the gain and the pairs
        return torch.cat([values[:, None], surrogate_columns(coords, maps)], dim=1)

    observed = float(improvement(z[None], rcond, horizon, affine)[0])
    method = null["method"]
    rule = StopRule.for_level(observed, null["n_surrogates"], null["alpha"]) if null["sequential"] else None
    tests, columns = [], None
    for i, family in enumerate(RECURRENCE_NULLS):
        both = family == BACKGROUND_NULL
        values = surrogate_values(
            rows, family, null["n_surrogates"], null["random_state"] + i, gain_and_spectrum if both else gain,
            method=method, n_components=k, coordinates=center, subspace=True,
            rule=_OnGain(rule) if both and rule is not None else rule,
        )  # fmt: skip
        if both:
            values, drawn = values[:, 0], values[:, 1:]
            columns = drawn if len(drawn) == null["n_surrogates"] else None
        tests.append(
            monte_carlo_p(
                f"gain_over_persistence_h{horizon}",
                observed,
                family,
                values,
                null["alpha"],
                method,
                rule=rule,
            )
        )
    return tuple(tests), columns

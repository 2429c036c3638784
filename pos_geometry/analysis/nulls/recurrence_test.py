"""Does a fitted recurrence predict better than it does for curves with no rotation?  Its Monte-Carlo nulls.

The statistic is the gain over persistence ``h`` rows ahead of the map fitted to the top-``k`` PCA
coordinates (:func:`pos_geometry.analysis._recurrence_map.improvement`); each surrogate of
:data:`RECURRENCE_NULLS` is pushed through the same PCA and the same fit
(:func:`pos_geometry.analysis.nulls.surrogates.surrogate_values`), and the map must beat both families
(:mod:`pos_geometry.analysis.recurrence`).
"""

from __future__ import annotations

from typing import Any

import torch

from pos_geometry.analysis._recurrence_map import improvement
from pos_geometry.analysis.nulls.monte_carlo import NullTest, StopRule, monte_carlo_p
from pos_geometry.analysis.nulls.surrogates import surrogate_values

__all__ = ["RECURRENCE_NULLS", "recurrence_null_tests"]

RECURRENCE_NULLS = ("step_walk", "smooth_gp")


def recurrence_null_tests(
    rows: torch.Tensor,
    z: torch.Tensor,
    k: int,
    center: bool,
    affine: bool,
    rcond: float,
    horizon: int,
    null: dict[str, Any],
) -> tuple[NullTest, ...]:
    """``M^horizon``'s gain over persistence on ``z`` ``(n, k)`` (the top-``k`` coordinates of ``rows``
    ``(n, d)``, in units of their largest) against each of :data:`RECURRENCE_NULLS`: one :class:`NullTest`
    per family. ``null``: ``n_surrogates``, ``alpha``, ``random_state``, ``method`` and ``sequential`` (each
    null stops once enough surrogates reach the table's gain, :class:`StopRule`)."""

    def statistic(coords: torch.Tensor) -> torch.Tensor:
        return improvement(coords, rcond, horizon, affine)

    observed = float(improvement(z[None], rcond, horizon, affine)[0])
    method = null["method"]
    rule = StopRule.for_level(observed, null["n_surrogates"], null["alpha"]) if null["sequential"] else None
    tests = []
    for i, family in enumerate(RECURRENCE_NULLS):
        values = surrogate_values(
            rows, family, null["n_surrogates"], null["random_state"] + i, statistic, method=method,
            n_components=k, coordinates=center, subspace=True, rule=rule,
        )  # fmt: skip
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
    return tuple(tests)

"""Rows that make a decomposition: a handful of positions that hold most of a leading component's variance.

PCA follows variance, so a few rows far from the rest (a corrupted position, a first-token outlier) can take
the leading components for themselves, and every analysis that reads "the top three components" then reads
those rows instead of the curve. :func:`row_leverage` measures it: for each of the first ``n_components``
components, the share of its variance held by its largest rows; the rows are **dominant** when at most
``max_fraction`` of the rows (at least one) hold more than ``share`` of some component's variance.
:func:`repair_rows` replaces such rows by the mean of their nearest ordinary neighbours, the robust step
:func:`~pos_geometry.analysis.pipeline.analyze` takes (and records in the provenance) before its one PCA.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

import numpy as np
import torch

from pos_geometry.embedding import PositionalEmbedding
from pos_geometry.provenance import Provenance

__all__ = ["DOMINANT_SHARE", "MAX_FRACTION", "RowLeverage", "repair_rows", "repaired_table", "row_leverage"]

DOMINANT_SHARE = 0.5
"""Rows dominate a component when they hold more than this share of its variance..."""
MAX_FRACTION = 0.01
"""...while they are at most this fraction of the rows (at least one row)."""


@dataclass(frozen=True)
class RowLeverage:
    """``rows``: the dominant rows (absolute positions, ascending; empty when none); ``top_share``: per
    component, the share of its variance held by its ``n_top`` largest rows; ``n_top``: how many rows that is
    (``max(1, floor(max_fraction · n))``)."""

    rows: tuple[int, ...]
    top_share: tuple[float, ...]
    n_top: int

    @property
    def dominated(self) -> bool:
        return bool(self.rows)

    def words(self) -> str:
        shown = ", ".join(map(str, self.rows[:12])) + (", ..." if len(self.rows) > 12 else "")
        worst = max(range(len(self.top_share)), key=lambda j: self.top_share[j])
        return (
            f"{len(self.rows)} row(s) (positions {shown}) hold {self.top_share[worst]:.0%} of PC{worst + 1}'s "
            f"variance: the leading components are theirs, not the curve's"
        )


def row_leverage(
    coordinates: torch.Tensor,
    positions: torch.Tensor,
    n_components: int = 3,
    *,
    share: float = DOMINANT_SHARE,
    max_fraction: float = MAX_FRACTION,
) -> RowLeverage:
    """The :class:`RowLeverage` of a decomposition's ``coordinates`` ``(n, k)`` (centred PCA coordinates) at
    ``positions`` ``(n,)``: module docstring."""
    z = coordinates[:, :n_components].detach().to("cpu", torch.float64)
    n = z.shape[0]
    n_top = max(1, math.floor(max_fraction * n))
    energy = z**2
    total = energy.sum(0).clamp_min(torch.finfo(torch.float64).tiny)
    ordered, order = torch.sort(energy, dim=0, descending=True)
    top_share = (ordered[:n_top].sum(0) / total).tolist()
    rows: set[int] = set()
    for j in range(z.shape[1]):
        if top_share[j] > share:
            reach = (
                int(torch.searchsorted(torch.cumsum(ordered[:, j], 0) / total[j], torch.tensor(share))) + 1
            )
            rows.update(int(positions[i]) for i in order[: min(reach, n_top), j].tolist())
    return RowLeverage(tuple(sorted(rows)), tuple(float(s) for s in top_share), n_top)


def repair_rows(matrix: torch.Tensor, rows: tuple[int, ...] | list[int]) -> torch.Tensor:
    """A copy of ``matrix`` ``(n, d)`` whose ``rows`` (indices) are each replaced by the mean of the nearest
    row before and after it that is not among ``rows`` (the one there is, at an end)."""
    out = matrix.clone()
    bad = set(int(r) for r in rows)
    n = matrix.shape[0]
    for r in sorted(bad):
        before = next((i for i in range(r - 1, -1, -1) if i not in bad), None)
        after = next((i for i in range(r + 1, n) if i not in bad), None)
        neighbours = [i for i in (before, after) if i is not None]
        if neighbours:
            out[r] = matrix[neighbours].mean(0)
    return out


def repaired_table(x: Any, leverage: RowLeverage, provenance: Provenance) -> PositionalEmbedding:
    """``x`` (a ``PositionalEmbedding`` or an ``(n, d)`` array) with its dominant rows replaced by their
    neighbours' mean (:func:`repair_rows`), the step recorded in its provenance (``provenance`` for an array)."""
    matrix = x.matrix if isinstance(x, PositionalEmbedding) else torch.as_tensor(np.asarray(x))
    base = x.provenance if isinstance(x, PositionalEmbedding) else provenance
    step = (
        f"rows {list(leverage.rows)} replaced by their nearest ordinary neighbours' mean (they held "
        f"{max(leverage.top_share):.0%} of a leading component's variance)"
    )
    return PositionalEmbedding(repair_rows(matrix, leverage.rows), base.with_processing(step))

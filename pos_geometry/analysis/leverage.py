"""Rows that make a decomposition: a handful of positions that hold most of a leading component's variance.

PCA follows variance, so a few rows far from the rest (a corrupted position, a first-token outlier) can take
the leading components for themselves, and every analysis that reads "the top three components" then reads
those rows instead of the curve. :func:`row_leverage` measures it: for each of the first ``n_components``
components, the share of its variance held by its largest rows. The rows are **dominant** when at most
``n_top = max(1, ⌊max_fraction · n⌋, min(MIN_GROUP, ⌊n / 32⌋))`` rows hold more than ``share`` of some
component's variance (a group: two equal spikes in 128 rows dominate as one does in 1024), or when the rows
that jumps set apart from the curve hold it together (any number of them, up to ``OUTLIER_FRACTION`` of the
rows).

A dominant row is an **outlier** when a jump sets it apart: the step into it or out of it is more than
``JUMP`` times the median step around it (over ``±max(16, 2·n_top)`` positions), and the run of rows
between two such jumps (or a jump and the window's end) is short (at most ``OUTLIER_FRACTION`` of the rows).
A row that changes smoothly with position (a helix whose radius flares at its ends) is part of the curve:
no jump sets it apart, so it is named, never replaced.

:func:`repair_rows` replaces outliers by linear interpolation between the nearest rows before and after them
that are inside the window and not outliers (the nearest such row at an end);
:func:`~pos_geometry.analysis.pipeline.analyze` repeats detection and repair (at most ``REPAIR_ROUNDS``
times) until no row dominates, and records every replaced row in the provenance.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

import numpy as np
import torch

from pos_geometry.embedding import PositionalEmbedding
from pos_geometry.provenance import Provenance

__all__ = [
    "DOMINANT_SHARE",
    "JUMP",
    "MAX_FRACTION",
    "MIN_GROUP",
    "OUTLIER_FRACTION",
    "REPAIR_ROUNDS",
    "RowLeverage",
    "dominance_note",
    "held_words",
    "repair_rows",
    "repaired_table",
    "row_leverage",
]

DOMINANT_SHARE = 0.5
"""Rows dominate a component when they hold more than this share of its variance..."""
MAX_FRACTION = 0.01
"""...while they are at most this fraction of the rows (at least one)..."""
MIN_GROUP = 4
"""...or this many rows, in a table of at least 32 rows per row of the group."""
JUMP = 6.0
"""A step is a jump when it is more than this many times the median step around it."""
OUTLIER_FRACTION = 0.02
"""Runs of rows set apart by jumps are outliers when each is at most this fraction of the rows (at least one);
when they add up to more than ``2.5 ×`` this fraction, the table is not a curve with a few outliers and none
is named."""
REPAIR_ROUNDS = 5
"""``analyze`` detects and repairs at most this many times."""


@dataclass(frozen=True)
class RowLeverage:
    """``rows``: the dominant rows (absolute positions, ascending; empty when none); ``top_share``: per
    component, the share of its variance held by its ``n_top`` largest rows; ``n_top``: how many rows that is;
    ``shares``: per component, the share held by ``rows`` themselves; ``outliers``: when dominated, every row
    a jump sets apart from the curve (what a repair replaces; it may include rows that dominate no component)."""

    rows: tuple[int, ...]
    top_share: tuple[float, ...]
    n_top: int
    shares: tuple[float, ...] = ()
    outliers: tuple[int, ...] = ()

    @property
    def dominated(self) -> bool:
        return bool(self.rows)

    @property
    def smooth(self) -> tuple[int, ...]:
        """Dominant rows no jump sets apart: part of the curve, named but never replaced."""
        return tuple(r for r in self.rows if r not in set(self.outliers))

    def words(self) -> str:
        """What dominates, with the share those rows hold (empty when nothing does)."""
        if not self.rows:
            return ""
        shares = self.shares or self.top_share
        worst = max(range(len(shares)), key=lambda j: shares[j])
        text = (
            f"{len(self.rows)} row(s) (positions {_listed(self.rows)}) hold {shares[worst]:.0%} of PC{worst + 1}'s "
            "variance: the leading components are theirs, not the curve's"
        )
        if self.smooth:
            text += (
                f"; position(s) {_listed(self.smooth)} change smoothly with position (no jump sets them apart), "
                "so they are part of the curve, not outliers"
            )
        return text


def _listed(rows: tuple[int, ...]) -> str:
    return ", ".join(map(str, rows[:12])) + (", ..." if len(rows) > 12 else "")


def _outlier_mask(z: np.ndarray, n_top: int) -> np.ndarray:
    """``(n,)`` bool: the rows of ``z`` ``(n, k)`` (consecutive positions) that jumps set apart (module docstring).

    A step is a jump when it is more than :data:`JUMP` times the median step around it and it is not smooth:
    a step that differs from the step before or after it by less than half its own length is the curve
    moving fast (a flare), not leaving it. A short run between jumps is made of outliers only where its rows
    lie more than :data:`JUMP` median steps from the line between the nearest rows outside every short run
    (two spikes a few rows apart do not make the rows between them outliers)."""
    n = z.shape[0]
    mask = np.zeros(n, dtype=bool)
    if n < 8:
        return mask
    delta = np.diff(z, axis=0)
    steps = np.linalg.norm(delta, axis=1)
    floor = max(0.1 * float(steps.mean()), np.finfo(np.float64).tiny)
    h = min(max(16, 2 * n_top), steps.size - 1)
    padded = np.pad(steps, h, mode="reflect")
    scale = np.maximum(np.median(np.lib.stride_tricks.sliding_window_view(padded, 2 * h + 1), axis=1), floor)
    change = np.full((2, steps.size), np.inf)
    change[0, 1:] = np.linalg.norm(delta[1:] - delta[:-1], axis=1)
    change[1, :-1] = change[0, 1:]
    smooth = change.min(axis=0) <= 0.5 * steps
    jumps = (steps > JUMP * scale) & ~smooth
    if not jumps.any():
        return mask
    segment = np.concatenate([[0], np.cumsum(jumps)])  # row i's run: how many jumps come before it
    lengths = np.bincount(segment)
    longest = max(1, math.floor(OUTLIER_FRACTION * n))
    candidate = ((lengths <= longest) & (lengths < lengths.max()))[segment]
    anchors = np.flatnonzero(~candidate)
    rows = np.flatnonzero(candidate)
    if anchors.size < 2:
        return mask
    after = np.clip(np.searchsorted(anchors, rows), 1, anchors.size - 1)
    lo, hi = anchors[after - 1], anchors[after]
    w = np.clip((rows - lo) / (hi - lo), 0.0, 1.0)[:, None]
    line = (1 - w) * z[lo] + w * z[hi]
    local = scale[np.clip(rows, 0, steps.size - 1)]
    mask[rows] = np.linalg.norm(z[rows] - line, axis=1) > JUMP * local
    if mask.sum() > max(longest, math.floor(2.5 * OUTLIER_FRACTION * n)):
        return np.zeros(n, dtype=bool)
    return mask


def _held(energy: np.ndarray, total: np.ndarray, rows: np.ndarray) -> np.ndarray:
    return energy[rows].sum(0) / total if rows.size else np.zeros_like(total)


def row_leverage(
    coordinates: torch.Tensor,
    positions: torch.Tensor,
    n_components: int = 3,
    *,
    share: float = DOMINANT_SHARE,
    max_fraction: float = MAX_FRACTION,
) -> RowLeverage:
    """The :class:`RowLeverage` of a decomposition's ``coordinates`` ``(n, k)`` (centred PCA coordinates, rows
    at consecutive ``positions`` ``(n,)``): the shares read the first ``n_components`` columns, the jumps all
    ``k`` (module docstring)."""
    everything = coordinates.detach().to("cpu", torch.float64).numpy()
    z = everything[:, :n_components]
    n = z.shape[0]
    at = np.asarray(positions.detach().cpu()).astype(np.int64)
    n_top = max(1, math.floor(max_fraction * n), min(MIN_GROUP, n // 32))
    energy = z**2
    total = np.maximum(energy.sum(0), np.finfo(np.float64).tiny)
    order = np.argsort(-energy, axis=0, kind="stable")
    ordered = np.take_along_axis(energy, order, axis=0)
    top_share = ordered[:n_top].sum(0) / total
    dominant: set[int] = set()
    for j in range(z.shape[1]):
        if top_share[j] > share:
            reach = int(np.searchsorted(np.cumsum(ordered[:, j]) / total[j], share, side="right")) + 1
            dominant.update(order[: min(reach, n_top), j].tolist())
    apart = np.flatnonzero(_outlier_mask(everything, n_top))
    if apart.size and (_held(energy, total, apart) > share).any():
        dominant.update(apart.tolist())
    if not dominant:
        return RowLeverage((), tuple(float(s) for s in top_share), n_top)
    rows = np.array(sorted(dominant))
    return RowLeverage(
        rows=tuple(int(at[i]) for i in rows),
        top_share=tuple(float(s) for s in top_share),
        n_top=n_top,
        shares=tuple(float(s) for s in _held(energy, total, rows)),
        outliers=tuple(int(at[i]) for i in apart),
    )


def dominance_note(coordinates: torch.Tensor, positions: torch.Tensor) -> str:
    """What an analysis called on its own says about its decomposition's rows: empty when no row dominates the
    first three of ``coordinates`` ``(n, k)``, else :meth:`RowLeverage.words` and what ``analyze`` would do."""
    if coordinates.shape[0] < 8:
        return ""
    leverage = row_leverage(coordinates, positions, min(3, int(coordinates.shape[1])))
    if not leverage.dominated:
        return ""
    if leverage.outliers:
        return (
            leverage.words()
            + f"; pg.analyze replaces position(s) {_listed(leverage.outliers)} (outlier_rows="
            "'repair') before it decomposes the table"
        )
    return leverage.words()


def held_words(res: Any, rows: list[int] | tuple[int, ...], n_components: int = 3) -> str:
    """ "held X% of PCj's variance": the largest share of a leading component's variance that ``rows``
    (absolute positions) hold in the single-fit PCA result ``res``."""
    z = res.coordinates[:, :n_components].detach().to("cpu", torch.float64).numpy()
    energy = z**2
    total = np.maximum(energy.sum(0), np.finfo(np.float64).tiny)
    at = {int(p): i for i, p in enumerate(res.positions.tolist())}
    shares = _held(energy, total, np.array([at[r] for r in rows if r in at], dtype=np.int64))
    worst = int(np.argmax(shares))
    return f"held {shares[worst]:.0%} of PC{worst + 1}'s variance"


def repair_rows(
    matrix: torch.Tensor, rows: tuple[int, ...] | list[int], window: tuple[int, int] | None = None
) -> torch.Tensor:
    """A copy of ``matrix`` ``(n, d)`` whose ``rows`` (indices) are each replaced by linear interpolation, in
    position, between the nearest rows before and after it inside ``window`` (``(start, stop)``, default all)
    that are not among ``rows`` (the nearest such row, at an end of the window). Rows outside the window are
    neither replaced nor read."""
    out = matrix.clone()
    start, stop = window if window is not None else (0, matrix.shape[0])
    bad = {int(r) for r in rows if start <= int(r) < stop}
    good = [i for i in range(start, stop) if i not in bad]
    if not good:
        return out
    ordinary = torch.tensor(good)
    for r in sorted(bad):
        after_at = int(torch.searchsorted(ordinary, r))
        before = good[after_at - 1] if after_at > 0 else None
        after = good[after_at] if after_at < len(good) else None
        if before is None or after is None:
            out[r] = matrix[before if after is None else after]
        else:
            w = (r - before) / (after - before)
            out[r] = (1 - w) * matrix[before] + w * matrix[after]
    return out


def repaired_table(
    x: Any,
    rows: tuple[int, ...],
    provenance: Provenance,
    window: tuple[int, int] | None = None,
    held: str = "",
) -> PositionalEmbedding:
    """``x`` (a ``PositionalEmbedding`` or an ``(n, d)`` array) with ``rows`` replaced by
    :func:`repair_rows` inside ``window``, the step recorded in its provenance (``provenance`` for an array);
    ``held`` says what those rows held."""
    matrix = x.matrix if isinstance(x, PositionalEmbedding) else torch.as_tensor(np.asarray(x))
    base = x.provenance if isinstance(x, PositionalEmbedding) else provenance
    step = (
        f"rows {list(rows)} replaced by linear interpolation between their nearest ordinary rows in the window"
        + (f" ({held})" if held else "")
    )
    return PositionalEmbedding(repair_rows(matrix, rows, window), base.with_processing(step))

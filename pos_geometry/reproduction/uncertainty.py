"""Uncertainty for the claims that a fixed threshold would otherwise decide: resampling intervals over
positions, and the same statistic on the nulls the helix verdict uses.

- :func:`top3_intervals`: the top-3 explained-variance ratio of each truncation window, and the paired
  difference of two windows, with a delete-one-block jackknife over positions (contiguous blocks: rows of a
  positional table are correlated over tens of positions). Each replicate is computed from the table's
  principal coordinates: the trace from every coordinate, the top-3 eigenvalues from the axes holding
  99.99% of the variance (the rest moves their sum by at most 1e-4 of the variance).
- :func:`column_sine_nulls`: how sine-like the columns are (the share whose best single sinusoid has
  R² ≥ a threshold, and the median R²), on
  whole-table surrogates of the two helix nulls (random walks of the table's own steps, smooth GP curves of
  its length scale), drawn in the stored basis (columns are coordinates of that basis).
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Mapping
from dataclasses import dataclass

import numpy as np
import torch

from pos_geometry.analysis._fourier import best_sinusoid
from pos_geometry.analysis.nulls.surrogates import surrogate_values
from pos_geometry.embedding import PositionalEmbedding

__all__ = [
    "Interval",
    "RunNull",
    "TOP3_NULLS",
    "column_sine_nulls",
    "top3_intervals",
    "top3_nulls",
    "truncation_null",
]

N_BLOCKS = 16
"""Contiguous blocks a window is cut into for the delete-one-block jackknife."""
_KEEP = 0.9999


@dataclass(frozen=True)
class Interval:
    """A statistic with its delete-one-block jackknife interval at ``level`` (normal, ``n_blocks`` blocks),
    and the range of the statistic over the ``n_blocks`` leave-one-block-out tables."""

    estimate: float
    low: float
    high: float
    level: float
    n_blocks: int
    leave_one_out: tuple[float, float]

    def words(self, digits: int = 4) -> str:
        return f"{self.estimate:.{digits}f} [{self.low:.{digits}f}, {self.high:.{digits}f}]"

    def to_dict(self) -> dict[str, object]:
        keys = ("estimate", "low", "high", "level", "n_blocks", "leave_one_out")
        return {k: getattr(self, k) for k in keys} | {"method": "delete-one-block jackknife over positions"}


def _ratio(z: torch.Tensor, z_top: torch.Tensor, rows: torch.Tensor) -> float:
    """Top-3 variance ratio of the rows ``rows`` (a boolean mask): the trace from every coordinate ``z``, the
    top eigenvalues from the leading coordinates ``z_top``."""
    a, b = z[rows], z_top[rows]
    a, b = a - a.mean(dim=0), b - b.mean(dim=0)
    top = torch.linalg.eigvalsh(b.T @ b)[-3:].sum()
    return float(top / (a * a).sum())


def _interval(estimate: float, replicates: list[float], level: float) -> Interval:
    g = len(replicates)
    r = torch.tensor(replicates, dtype=torch.float64)
    se = math.sqrt((g - 1) / g * float(((r - r.mean()) ** 2).sum()))
    q = float(torch.distributions.Normal(0.0, 1.0).icdf(torch.tensor(0.5 + level / 2, dtype=torch.float64)))
    return Interval(
        estimate, estimate - q * se, estimate + q * se, level, g, (float(r.min()), float(r.max()))
    )


def _coordinates(table: PositionalEmbedding) -> tuple[torch.Tensor, torch.Tensor]:
    """The table's principal coordinates ``z`` (every axis) and ``z_top`` (the axes holding 99.99%)."""
    x = table.matrix.detach().to("cpu", torch.float64)
    x = x - x.mean(dim=0)
    u, s, _ = torch.linalg.svd(x, full_matrices=False)
    z = u * s
    share = torch.cumsum(s**2, 0) / (s**2).sum()
    r = max(3, int(torch.searchsorted(share, torch.tensor(_KEEP, dtype=share.dtype))) + 1)
    return z, z[:, : min(r, z.shape[1])]


@dataclass(frozen=True)
class RunNull:
    """Dropping the first ``length`` positions against dropping any other run of ``length`` consecutive
    positions: ``gain`` (top-3 ratio without the first run minus with all rows), ``others`` (the same gain for
    each other run, starting every ``step`` positions after the first run), and ``p_value``."""

    gain: float
    others: tuple[float, ...]
    length: int
    step: int

    @property
    def p_value(self) -> float:
        return (1 + sum(g >= self.gain for g in self.others)) / (1 + len(self.others))

    def to_dict(self) -> dict[str, object]:
        return {
            "gain": self.gain, "p_value": self.p_value, "length": self.length, "step": self.step,
            "n_runs": len(self.others), "median_other_gain": float(np.median(self.others)) if self.others else None,
        }  # fmt: skip


def truncation_null(table: PositionalEmbedding, *, length: int = 100, step: int = 8) -> RunNull:
    """How much dropping the first ``length`` positions raises the top-3 ratio, against dropping any other run
    of ``length`` consecutive positions (:class:`RunNull`). Dropping rows always changes the ratio; the claim
    that the first positions are what spoils the 3-D picture needs them to matter more than other rows do."""
    z, z_top = _coordinates(table)
    n = z.shape[0]
    everything = torch.ones(n, dtype=torch.bool)
    base = _ratio(z, z_top, everything)

    def without(start: int) -> float:
        keep = everything.clone()
        keep[start : start + length] = False
        return _ratio(z, z_top, keep) - base

    others = tuple(without(s) for s in range(length, n - length + 1, step))
    return RunNull(without(0), others, length, step)


def top3_intervals(
    table: PositionalEmbedding,
    windows: Mapping[str, tuple[int, int]],
    *,
    differences: Mapping[str, tuple[str, str]] = {},
    n_blocks: int = N_BLOCKS,
    level: float = 0.95,
) -> dict[str, Interval]:
    """Each window's top-3 ratio, and each ``differences`` entry ``name: (a, b)`` = ratio(a) − ratio(b), with a
    delete-one-block jackknife interval over positions.

    A window is cut into ``n_blocks`` contiguous blocks of positions; each replicate leaves one block out and
    recomputes the ratio (an exact PCA of the remaining rows). The interval is the estimate ± z·SE; the
    range over the replicates says how far dropping any one block moves the number. A bootstrap that draws
    positions with replacement is biased here (duplicated rows make a curve look more concentrated: its
    intervals missed the estimate on GPT-2), which leaving rows out is not. A difference uses the blocks of
    its larger window ``b``, dropped from both windows at once (paired).
    """
    z, z_top = _coordinates(table)
    n = z.shape[0]

    def mask(start: int, stop: int) -> torch.Tensor:
        m = torch.zeros(n, dtype=torch.bool)
        m[start:stop] = True
        return m

    def blocks(start: int, stop: int) -> list[torch.Tensor]:
        edges = torch.linspace(start, stop, n_blocks + 1).round().long().tolist()
        return [mask(lo, hi) for lo, hi in itertools.pairwise(edges) if hi > lo]

    out: dict[str, Interval] = {}
    for name, (start, stop) in windows.items():
        whole = mask(start, stop)
        reps = [_ratio(z, z_top, whole & ~blk) for blk in blocks(start, stop)]
        out[name] = _interval(_ratio(z, z_top, whole), reps, level)
    for name, (a, b) in differences.items():
        wa, wb = mask(*windows[a]), mask(*windows[b])
        reps = []
        for blk in blocks(*windows[b]):
            keep_a = wa & ~blk
            ra = _ratio(z, z_top, keep_a if keep_a.sum() > 3 else wa)
            reps.append(ra - _ratio(z, z_top, wb & ~blk))
        out[name] = _interval(out[a].estimate - out[b].estimate, reps, level)
    return out


def column_sine_nulls(
    table: PositionalEmbedding,
    *,
    threshold: float = 0.5,
    min_turns: float = 1.0,
    n_surrogates: int = 19,
    n_columns: int = 128,
    random_state: int = 0,
) -> dict[str, dict[str, np.ndarray]]:
    """``{null: {"share": (S,), "median_r2": (S,)}}`` for ``"step_walk"`` and ``"smooth_gp"`` surrogate tables of
    ``table`` (drawn in the stored basis): the share of columns with best-sinusoid R² ≥ ``threshold`` and the
    columns' median R², each estimated on ``n_columns`` columns drawn at random (the same columns every time)."""
    x = table.matrix.detach().to("cpu", torch.float64)
    t = torch.arange(x.shape[0], dtype=torch.float64)
    gen = torch.Generator().manual_seed(int(random_state) + 1)
    cols = torch.randperm(x.shape[1], generator=gen)[: min(n_columns, x.shape[1])]

    def stats(tables: torch.Tensor) -> torch.Tensor:
        out = []
        for tb in tables:
            r2 = best_sinusoid(tb[:, cols], t, min_turns=min_turns)[1].double()
            out.append(torch.stack([(r2 >= threshold).double().mean(), r2.median()]))
        return torch.stack(out)

    result = {}
    for null in ("step_walk", "smooth_gp"):
        values = surrogate_values(x, null, n_surrogates, random_state, stats, method="exact")
        result[null] = {"share": values[:, 0], "median_r2": values[:, 1]}
    return result


TOP3_NULLS = {
    "step_walk": "random walks of its own steps",
    "smooth_gp": "smooth GP curves of its length scale",
}


def top3_nulls(
    table: PositionalEmbedding, *, n_surrogates: int = 99, random_state: int = 0
) -> dict[str, np.ndarray]:
    """``{null: (S,)}``: the top-3 explained-variance ratio (centred over positions) of ``n_surrogates``
    whole-table surrogates of ``table`` for each null of :data:`TOP3_NULLS` (the helix verdict's first two:
    random walks of the table's own steps, smooth GP curves of its length scale and noise share). Whether
    0.9 of the variance in three components is notable depends on what such curves give: any smooth curve's
    PCA is dominated by its first few components."""
    x = table.matrix.detach().to("cpu", torch.float64)

    def stats(tables: torch.Tensor) -> torch.Tensor:
        centred = tables - tables.mean(dim=1, keepdim=True)
        energy = torch.linalg.svdvals(centred) ** 2
        return energy[:, :3].sum(-1) / energy.sum(-1)

    return {
        null: surrogate_values(x, null, n_surrogates, random_state, stats, method="fast", n_components=3)
        for null in TOP3_NULLS
    }

"""How the helix, periodicity and recurrence analyses handle a batch, and how they get PCA coordinates.

Design (one rule for all three): the analysis of **one** matrix returns one frozen result
(``HelixFit``, ``PeriodicityResult``, ``RecurrenceFit``); the analysis of a **batch** (a list of
embeddings, a ``(batch, n, d)`` tensor, or a batched ``PCAResult``) returns a :class:`BatchResult`
whose ``items`` are those per-matrix results, in input order, each with its own provenance.
Per-matrix fits differ in shape (the chosen model, the number of harmonics, peaks), so a tuple of
results is the honest container; ``batch[i]``, ``len(batch)`` and iteration work as for a tuple.
"""

from __future__ import annotations

import warnings
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import numpy as np
import torch

from pos_geometry.analysis._inputs import Window
from pos_geometry.analysis._results import Result
from pos_geometry.analysis.pca import PCAResult, pca
from pos_geometry.embedding import Provenance
from pos_geometry.errors import InvalidArgumentError

__all__ = ["BatchResult", "PCAItem", "pca_items", "renamed"]


@dataclass(frozen=True, eq=False, repr=False)
class BatchResult(Result):
    """Per-matrix results of a batched analysis: ``items[i]`` belongs to ``provenance[i]``."""

    items: tuple[Any, ...]
    provenance: tuple[Provenance, ...]

    def __getitem__(self, i: int) -> Any:
        return self.items[i]

    def __len__(self) -> int:
        return len(self.items)

    def __iter__(self) -> Iterator[Any]:
        return iter(self.items)

    def summary_rows(self) -> list[tuple[str, str]]:
        rows: list[tuple[str, str]] = []
        for i, item in enumerate(self.items):
            rows += [(f"[{i}] {k}", v) for k, v in item.summary_rows()]
        return rows


@dataclass(frozen=True, eq=False)
class PCAItem:
    """One matrix's PCA coordinates: ``coords`` ``(n_win, k)`` (device of the input), ``positions`` ``(n_win,)``."""

    coords: torch.Tensor
    positions: torch.Tensor
    explained_variance_ratio: np.ndarray
    window: tuple[int, int]
    center: bool
    provenance: Provenance
    rows: torch.Tensor | None = None


def renamed(
    func: str, kwargs: dict[str, Any], names: dict[str, str], values: dict[str, Any]
) -> dict[str, Any]:
    """Map deprecated keyword names in ``kwargs`` to their new ones (``names``: old -> new), with a warning.

    ``values`` holds the new names' current values; unknown keywords raise ``TypeError`` as Python would.
    """
    out = dict(values)
    for old, value in kwargs.items():
        if old not in names:
            raise TypeError(f"{func}() got an unexpected keyword argument {old!r}")
        new = names[old]
        warnings.warn(
            f"{func}({old}=...) is deprecated; use {new}=... (one vocabulary across the analyses).",
            DeprecationWarning,
            stacklevel=3,
        )
        out[new] = value
    return out


def _items_of(res: PCAResult) -> list[PCAResult]:
    return [res[i] for i in range(len(res))]


def pca_items(x: Any, k: int, *, window: Window = None, center: bool = True) -> tuple[list[PCAItem], bool]:
    """Top-``k`` PCA coordinates of each matrix of ``x`` (anything ``pca`` accepts, or a ``PCAResult``).

    Returns ``(items, single)``. A ``PCAResult`` is used as it is (its own window and centring);
    it must hold at least ``k`` components.
    """
    if isinstance(k, bool) or not isinstance(k, int | np.integer) or k < 1:
        raise InvalidArgumentError(
            f"n_components must be a positive integer number of principal components; got {k!r}."
        )
    k = int(k)
    if isinstance(x, PCAResult):
        if window is not None:
            raise InvalidArgumentError(
                f"window={window!r} cannot be applied to a PCAResult, which was fitted on window {x.window}; "
                "pass the embedding instead, or call pca(..., window=...) yourself."
            )
        res, single = x, not x.batched
    else:
        res = pca(x, n_components=k, window=window, center=center)
        single = not res.batched
    items = []
    for r in _items_of(res):
        if r.coordinates.shape[-1] < k:
            raise InvalidArgumentError(
                f"n_components={k} principal components were asked for but the PCA result holds only "
                f"{r.coordinates.shape[-1]}; use n_components <= {r.coordinates.shape[-1]} or refit pca with "
                f"n_components >= {k}."
            )
        prov = r.provenance if isinstance(r.provenance, Provenance) else r.provenance[0]
        items.append(
            PCAItem(
                coords=r.coordinates[:, :k],
                positions=r.positions,
                explained_variance_ratio=r.explained_variance_ratio_[:k],
                window=tuple(int(v) for v in r.window),
                center=bool(r.center),
                provenance=prov,
                rows=r.fitted_rows,
            )
        )
    return items, single

"""Turning analysis inputs into plottable NumPy arrays (shared by the figure modules).

Plotting is the one place where tensors are copied to the CPU: plotly serialises NumPy
arrays. The analysis itself (PCA, fits) runs where the data lives, before that copy.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np
import torch

from pos_geometry.analysis._batch import BatchResult
from pos_geometry.analysis._inputs import Window
from pos_geometry.analysis.pca import PCAResult, pca
from pos_geometry.analysis.periodicity import PeriodicityResult, periodicity
from pos_geometry.embedding import PositionalEmbedding, Provenance
from pos_geometry.errors import InvalidArgumentError

__all__ = ["as_numpy", "check_components", "pca_of", "periodicity_of", "provenance_of", "split_items"]


def as_numpy(x: Any, dtype: type = np.float64) -> np.ndarray:
    """A CPU NumPy copy of a tensor, array or ``PositionalEmbedding`` (for plotting only)."""
    if isinstance(x, PositionalEmbedding):
        x = x.matrix
    if isinstance(x, torch.Tensor):
        x = x.detach().to("cpu", torch.float64 if x.is_floating_point() else x.dtype).numpy()
    return np.asarray(x, dtype=dtype)


def check_components(components: Sequence[int], n: int = 3) -> tuple[int, ...]:
    """Validate ``n`` distinct non-negative 0-based component indices."""
    try:
        comps = tuple(int(c) for c in components)
    except (TypeError, ValueError):
        comps = ()
    if len(comps) != n or len(set(comps)) != n or min(comps, default=-1) < 0:
        raise InvalidArgumentError(
            f"components must be {n} distinct 0-based principal-component indices, e.g. "
            f"{tuple(range(n))}; got {components!r}."
        )
    return comps


def provenance_of(res: PCAResult) -> Provenance:
    """The single provenance of an unbatched result."""
    prov = res.provenance
    return prov if isinstance(prov, Provenance) else prov[0]


def pca_of(
    x: Any, n_components: int, *, window: Window = None, center: bool = True, name: str = "x"
) -> PCAResult:
    """One matrix's PCA: ``x`` is a ``PCAResult`` (used as it is) or anything :func:`pca` accepts.

    Raises :class:`InvalidArgumentError` for a batch (plot one matrix at a time, or use the grid),
    for a window given together with a fitted result, or when the result has too few components.
    """
    if isinstance(x, PCAResult):
        if window is not None:
            raise InvalidArgumentError(
                f"window={window!r} cannot be applied to a PCAResult, which was fitted on window {tuple(x.window)}; "
                "pass the embedding instead, or call pca(..., window=...) yourself."
            )
        res = x
    else:
        res = pca(x, n_components=n_components, window=window, center=center)
    if res.batched:
        raise InvalidArgumentError(
            f"{name} is a batch of {len(res.provenance)} matrices; this figure shows one. Index it "
            "(result[i]) or use plot_helix_grid for several models."
        )
    if res.components_.shape[0] < n_components:
        raise InvalidArgumentError(
            f"the figure needs {n_components} principal components but the PCA result holds "
            f"{res.components_.shape[0]}; refit with pca(..., n_components={n_components})."
        )
    return res


def split_items(items: Any, name: str = "items") -> list[Any]:
    """A list of per-model inputs: a batched ``PCAResult`` is split; a single input becomes ``[x]``."""
    if isinstance(items, PCAResult):
        return [items[i] for i in range(len(items.provenance))] if items.batched else [items]
    if isinstance(items, PositionalEmbedding | np.ndarray | torch.Tensor):
        arr = items.matrix if isinstance(items, PositionalEmbedding) else items
        if arr.ndim == 3:
            return [arr[i] for i in range(arr.shape[0])]
        return [items]
    if isinstance(items, Sequence) and not isinstance(items, str | bytes) and len(items) > 0:
        return list(items)
    raise InvalidArgumentError(
        f"{name} must be a non-empty list of embeddings/arrays/PCAResults, or a batched PCAResult; "
        f"got {type(items).__name__}."
    )


def periodicity_of(x: Any, *, window: Window = None, name: str = "x", **kwargs: Any) -> PeriodicityResult:
    """One matrix's :func:`periodicity`: ``x`` is a ``PeriodicityResult`` (used as it is) or its input.

    ``kwargs`` go to :func:`periodicity` (``n_surrogates``, ``seed``, ``alpha``...).
    """
    if isinstance(x, PeriodicityResult):
        if window is not None or kwargs:
            raise InvalidArgumentError(
                f"window/{sorted(kwargs) or 'options'} cannot be applied to a PeriodicityResult, which was computed on "
                f"window {tuple(x.window)}; pass the embedding instead, or call periodicity(...) yourself."
            )
        return x
    res = x if isinstance(x, BatchResult) else periodicity(x, window=window, **kwargs)
    if isinstance(res, BatchResult):
        raise InvalidArgumentError(
            f"{name} is a batch of {len(res)} matrices; this figure shows one. Index the result (result[i]) "
            "or pass one embedding."
        )
    return res

"""The result of :func:`pos_geometry.analysis.pca.pca`: :class:`PCAResult`, one fit or a batch of them."""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import torch

from pos_geometry.analysis._inputs import as_batch
from pos_geometry.analysis._results import Result
from pos_geometry.analysis.leverage import RowLeverage, row_leverage
from pos_geometry.embedding import Provenance
from pos_geometry.errors import DeviceMismatchError, InvalidArgumentError

__all__ = ["PCAResult", "item_at"]


@dataclass(frozen=True, eq=False, repr=False)
class PCAResult(Result):
    """Top-``k`` principal components of one matrix, or of each matrix of a batch.

    Shapes are given for one matrix; a batched result has a leading ``batch`` axis on every tensor
    (``batched`` is True, ``len(result)`` is the batch size, ``result[i]`` is the i-th fit).

    Attributes:
        components_: ``(k, d)`` tensor, orthonormal principal axes (rows), largest-|.| entry positive.
        explained_variance_: ``(k,)`` float64 array, ``s² / (n_samples_ - 1)`` (scikit-learn's
            definition); ``inf`` where it exceeds float64 (a table of entries ~1e200, say).
        explained_variance_ratio_: ``(k,)`` float64 array, share of the total variance (all components).
        singular_values_: ``(k,)`` float64 array, singular values of the centred windowed matrix.
        mean_: ``(d,)`` tensor, the mean subtracted (zeros when ``center=False``).
        total_variance_: float (``(batch,)`` array for a batch), ``‖A‖_F² / (n_samples_ - 1)``,
            the denominator of the ratios.
        stable_rank_: float (``(batch,)`` array for a batch), ``‖A‖_F² / ‖A‖₂²`` of the centred windowed matrix ``A``.
        coordinates: ``(n_samples_, k)`` the fitted rows projected on the components.
        positions: ``(n_samples_,)`` LongTensor, the positions that were fitted.
        window: ``(start, stop)``, the positions fitted (``stop`` exclusive).
        solver: the solver actually used, ``"exact"`` or ``"randomized"``.
        n_iter: power iterations of the randomized solver (None for exact).
        rotation_: ``(k, k)`` the Procrustes rotation applied by ``align_bases`` (None if none).
        fitted_rows: ``(n_samples_, d)`` the input rows that were fitted (a view of the input, not a
            copy; not serialised): what the helix and periodicity nulls draw their surrogates from.
        provenance: the input's provenance (a tuple for a batch) with the window and centring recorded.
    """

    components_: torch.Tensor
    explained_variance_: np.ndarray
    explained_variance_ratio_: np.ndarray
    singular_values_: np.ndarray
    mean_: torch.Tensor
    total_variance_: float | np.ndarray
    stable_rank_: float | np.ndarray
    coordinates: torch.Tensor
    positions: torch.Tensor
    n_samples_: int
    n_features_: int
    window: tuple[int, int]
    center: bool
    solver: str
    n_iter: int | None
    n_oversamples: int | None
    random_state: int | None
    provenance: Provenance | tuple[Provenance, ...]
    rotation_: torch.Tensor | None = None
    fitted_rows: torch.Tensor | None = dataclasses.field(
        default=None, repr=False, metadata={"serialize": False}
    )

    # --- batch access ------------------------------------------------------------------------
    @property
    def batched(self) -> bool:
        """True when the result holds one fit per matrix of a batch."""
        return self.components_.ndim == 3

    @property
    def n_components_(self) -> int:
        return int(self.components_.shape[-2])

    def __len__(self) -> int:
        return int(self.components_.shape[0]) if self.batched else 1

    def __getitem__(self, i: int) -> PCAResult:
        """The ``i``-th single fit of a batched result (``result[0]`` of a single result is itself)."""
        if isinstance(i, bool) or not isinstance(i, int):
            raise InvalidArgumentError(f"PCAResult indices must be integers; got {i!r}.")
        n = len(self)
        if not -n <= i < n:
            raise IndexError(f"index {i} is out of range for a PCAResult of {n} fit(s).")
        if not self.batched:
            return self
        per_item = {
            f.name: item_at(getattr(self, f.name), i)
            for f in dataclasses.fields(self)
            if isinstance(getattr(self, f.name), torch.Tensor | np.ndarray) and f.name != "positions"
        }
        return dataclasses.replace(self, provenance=self.provenance[i], **per_item)

    def top(self, k: int) -> PCAResult:
        """The first ``k`` components of this fit, without refitting (components, variances, coordinates)."""
        if isinstance(k, bool) or not isinstance(k, int | np.integer) or not 1 <= k <= self.n_components_:
            raise InvalidArgumentError(
                f"k must be an integer between 1 and the {self.n_components_} fitted components; got {k!r}. "
                f"Refit with pca(..., n_components={k}) for more."
            )
        k = int(k)
        if k == self.n_components_:
            return self
        return dataclasses.replace(
            self,
            components_=self.components_[..., :k, :],
            explained_variance_=self.explained_variance_[..., :k],
            explained_variance_ratio_=self.explained_variance_ratio_[..., :k],
            singular_values_=self.singular_values_[..., :k],
            coordinates=self.coordinates[..., :k],
            rotation_=None if self.rotation_ is None else self.rotation_[..., :k, :k],
        )

    @classmethod
    def stack(cls, results: Sequence[PCAResult]) -> PCAResult:
        """Combine single fits of matrices of one shape (same ``k``, window, solver) into a batched result."""
        items = [r for res in results for r in (res[j] for j in range(len(res)))]
        if not items:
            raise InvalidArgumentError("PCAResult.stack needs at least one result; got an empty sequence.")
        first = items[0]
        keys = {
            (r.components_.shape, r.n_samples_, r.window, r.center, r.solver, r.components_.device)
            for r in items
        }
        if len(keys) != 1:
            raise InvalidArgumentError(
                "PCAResult.stack combines fits with the same (components shape, n_samples, window, center, "
                f"solver, device); got {len(keys)} different ones: {sorted(map(str, keys))[:4]}. Refit them "
                "together with pca([...]) on tables of one shape."
            )
        rotations = [r.rotation_ for r in items]
        tensors = {
            f.name: _stack([getattr(r, f.name) for r in items])
            for f in dataclasses.fields(first)
            if isinstance(getattr(first, f.name), torch.Tensor | np.ndarray | float)
            and f.name not in ("positions", "rotation_", "fitted_rows")
        }
        rotation = None if any(r is None for r in rotations) else torch.stack(rotations)
        rows = [r.fitted_rows for r in items]
        tensors["fitted_rows"] = None if any(r is None for r in rows) else torch.stack(rows)
        provs = tuple(r.provenance for r in items)
        return dataclasses.replace(first, provenance=provs, rotation_=rotation, **tensors)

    # --- projection ----------------------------------------------------------------------------
    def row_leverage(self, n_components: int = 3) -> RowLeverage:
        """Whether a few rows hold most of a leading component's variance
        (:func:`~pos_geometry.analysis.leverage.row_leverage`): the dominant positions, and per component the
        share held by its largest 1% of rows."""
        if self.batched:
            raise InvalidArgumentError("row_leverage reads one fit; index the batch first (res[i]).")
        return row_leverage(self.coordinates, self.positions, min(n_components, self.n_components_))

    def transform(self, y: Any) -> torch.Tensor:
        """Project other rows into the fitted basis: ``(y - mean_) @ components_.T``.

        ``y``: a PositionalEmbedding, a list of them, or a tensor/array ``(m, d)`` or ``(batch, m, d)``
        on the result's device. Returns ``(m, k)`` for a single fit and a single ``y``, otherwise
        ``(batch, m, k)`` (a single ``y`` is projected into every basis of a batched fit; a batch of
        ``y`` into a single basis, or matrix by matrix into a batch of the same size).
        """
        b = as_batch(y, name="y")
        data = b.data
        if data.device != self.components_.device:
            raise DeviceMismatchError(
                f"y lives on {data.device} but the PCA basis on {self.components_.device}; "
                f"move y with .to({str(self.components_.device)!r}) first."
            )
        if data.shape[-1] != self.n_features_:
            raise InvalidArgumentError(
                f"y must have d={self.n_features_} features like the fitted matrix; got shape {tuple(data.shape)}."
            )
        comps = self.components_ if self.batched else self.components_.unsqueeze(0)
        mean = self.mean_ if self.batched else self.mean_.unsqueeze(0)
        if data.shape[0] not in (1, comps.shape[0]) and comps.shape[0] != 1:
            raise InvalidArgumentError(
                f"a batch of {data.shape[0]} matrices cannot be projected into a batch of {comps.shape[0]} "
                "bases; pass one matrix, or as many as there are bases."
            )
        out = (data.to(comps.dtype) - mean.unsqueeze(-2)) @ comps.mT
        return out[0] if b.single and not self.batched else out

    # --- reporting --------------------------------------------------------------------------------
    def summary_rows(self) -> list[tuple[str, str]]:
        """Top-1/3/10 cumulative ratios, stable rank, window, centring, solver."""
        cum = np.cumsum(self.explained_variance_ratio_, axis=-1)
        srank = np.asarray(self.stable_rank_, dtype=np.float64)

        def fmt(t: np.ndarray) -> str:
            t = np.ravel(t)
            return f"{float(t[0]):.4f}" if t.size == 1 else f"{float(t.min()):.4f} .. {float(t.max()):.4f}"

        rows: list[tuple[str, str]] = []
        if self.batched:
            rows.append(("batch", f"{len(self)} matrices (ranges are min .. max)"))
        a, b = self.window
        rows += [
            ("window", f"positions {a}..{b - 1} ({self.n_samples_} rows) of d={self.n_features_}"),
            ("centred", "yes (mean over positions)" if self.center else "no"),
            (
                "solver",
                self.solver
                + (
                    f" (n_iter={self.n_iter}, oversamples={self.n_oversamples})"
                    if self.n_iter is not None
                    else ""
                ),
            ),
            ("components", str(self.n_components_)),
        ]
        for top in (1, 3, 10):
            if top <= self.n_components_:
                rows.append((f"top-{top} variance ratio", fmt(cum[..., top - 1])))
        rows.append(("stable rank", fmt(srank)))
        if self.rotation_ is not None:
            rows.append(("aligned", "Procrustes-rotated to a reference basis"))
        return rows


def item_at(value: torch.Tensor | np.ndarray, i: int) -> torch.Tensor | np.ndarray | float:
    """Entry ``i`` of a batched field ``value`` (a numpy scalar becomes a float): one fit's field."""
    out = value[i]
    return float(out) if isinstance(out, np.floating) else out


def _stack(values: list) -> torch.Tensor | np.ndarray:
    """The fields ``values`` of single fits stacked into a batched field (float64 for numpy)."""
    if isinstance(values[0], torch.Tensor):
        return torch.stack(values)
    return np.stack([np.asarray(v, dtype=np.float64) for v in values])

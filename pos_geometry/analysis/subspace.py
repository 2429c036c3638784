"""How much of the token embeddings lies in the positional subspace.

The top-``k`` principal axes of the positional table span a ``k``-dimensional subspace ``P`` of the
residual stream. :func:`subspace_overlap` measures how much of the token-embedding matrix
``(vocab, d)`` lies in ``P`` (its share of the centred variance and of the uncentred squared norm),
the share a random ``k``-dimensional subspace would get (``k / d``), and the principal angles between
``P`` and the token matrix's own top-``k`` principal subspace. A share far below ``k / d`` and angles
near 90° mean the token embeddings avoid the positional subspace.

Like every analysis it takes one table or a batch: a batch of positional tables (many checkpoints of
one model, say) is fitted by one batched PCA on the tables' device, and compared with one shared
token matrix or with one token matrix per table; the result is then a ``BatchResult`` of
:class:`SubspaceOverlap`, one per table, in input order.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

import numpy as np
import torch

from pos_geometry.analysis._batch import BatchResult, renamed
from pos_geometry.analysis._inputs import Window
from pos_geometry.analysis._results import Result
from pos_geometry.analysis.pca import PCAResult, pca
from pos_geometry.embedding import Provenance
from pos_geometry.errors import DeviceMismatchError, InvalidArgumentError

__all__ = ["SubspaceOverlap", "subspace_overlap", "principal_angles"]


@dataclass(frozen=True, eq=False, repr=False)
class SubspaceOverlap(Result):
    """Overlap of token embeddings with the top-``k`` positional PCA subspace.

    Attributes:
        n_components: ``k``, the dimension of the subspaces compared; d_model: ``d``.
        token_variance_fraction: ``‖(T - mean T) Pᵀ‖² / ‖T - mean T‖²`` (centred tokens).
        token_norm_fraction: ``‖T Pᵀ‖² / ‖T‖²`` (raw tokens).
        random_fraction: ``k / d``, the expectation of either fraction for a uniformly random subspace.
        principal_angles_deg: ``(k,)`` angles between ``P`` and the tokens' top-``k`` PCA subspace,
            ascending, in degrees (0 = shared direction, 90 = orthogonal).
        positional_components: ``(k, d)`` the basis ``P``; token_components: ``(k, d)`` the tokens' basis.
        positional_variance_ratio: ``(k,)`` explained-variance ratios of ``P`` within the positional table.
        window, center: how the positional PCA was fitted.
        provenance: the positional table's provenance; token_provenance: the token matrix's.
    """

    n_components: int
    d_model: int
    token_variance_fraction: float
    token_norm_fraction: float
    random_fraction: float
    principal_angles_deg: torch.Tensor
    positional_components: torch.Tensor
    token_components: torch.Tensor
    positional_variance_ratio: np.ndarray
    window: tuple[int, int]
    center: bool
    provenance: Provenance
    token_provenance: Provenance

    @property
    def k(self) -> int:
        """Deprecated name of :attr:`n_components`."""
        return self.n_components

    @property
    def variance_fraction_vs_random(self) -> float:
        """``token_variance_fraction / (k / d)``: below 1 means tokens avoid the positional subspace."""
        return self.token_variance_fraction / self.random_fraction

    def summary_rows(self) -> list[tuple[str, str]]:
        angles = ", ".join(f"{float(a):.1f}" for a in self.principal_angles_deg.cpu())
        a, b = self.window
        return [
            ("positional subspace", f"top-{self.k} PCA of positions {a}..{b - 1} (d={self.d_model})"),
            ("tokens", self.token_provenance.label),
            ("token variance in it", f"{self.token_variance_fraction:.4f}"),
            ("token squared norm in it", f"{self.token_norm_fraction:.4f}"),
            ("random k-dim subspace", f"{self.random_fraction:.4f} (k/d)"),
            ("variance vs random", f"{self.variance_fraction_vs_random:.3f}x"),
            ("principal angles (deg)", angles),
        ]


def principal_angles(a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
    """Principal angles (radians, ascending) between the row spaces of ``a`` ``(p, d)`` and ``b`` ``(q, d)``.

    Björck & Golub with the sine formula for small angles, as ``scipy.linalg.subspace_angles``
    (which takes column spaces and returns the angles descending); computed in float64.
    """
    qa = torch.linalg.qr(a.to(torch.float64).mT).Q
    qb = torch.linalg.qr(b.to(torch.float64).mT).Q
    if qa.shape[1] < qb.shape[1]:
        qa, qb = qb, qa
    cross = qa.mT @ qb
    cos = torch.linalg.svdvals(cross).clamp(-1, 1)  # descending -> angles ascending
    sin = torch.linalg.svdvals(qb - qa @ cross).clamp(-1, 1).flip(-1)  # ascending
    return torch.where(cos.square() >= 0.5, torch.arcsin(sin), torch.arccos(cos))


def _as_tokens(tokens: Any, token_provenance: Provenance | None) -> tuple[torch.Tensor, Provenance]:
    prov = token_provenance
    if hasattr(tokens, "matrix") and hasattr(tokens, "provenance"):
        prov = prov or tokens.provenance
        tokens = tokens.matrix
    if isinstance(tokens, np.ndarray):
        tokens = torch.from_numpy(np.ascontiguousarray(tokens))
    if not isinstance(tokens, torch.Tensor) or tokens.ndim != 2 or not tokens.is_floating_point():
        raise InvalidArgumentError(
            "tokens must be a floating-point token-embedding matrix (vocab, d_model) as a tensor/array, or an "
            f"object with .matrix and .provenance; got {type(tokens).__name__} "
            f"{tuple(getattr(tokens, 'shape', ()))}."
        )
    if prov is None:
        prov = Provenance(
            model_id="<array>",
            kind="learned",
            source=f"token-embedding matrix of shape {tuple(tokens.shape)} passed in",
        )
    if tokens.dtype in (torch.float16, torch.bfloat16):
        tokens = tokens.float()
    return tokens, prov


def _token_list(
    tokens: Any, n: int, token_provenance: Provenance | None
) -> list[tuple[torch.Tensor, Provenance]]:
    """One ``(matrix, provenance)`` per positional table: a shared token matrix, or one per table."""
    per_table = None
    if isinstance(tokens, list | tuple):
        per_table = list(tokens)
    elif isinstance(tokens, torch.Tensor | np.ndarray) and tokens.ndim == 3:
        per_table = [tokens[i] for i in range(tokens.shape[0])]
    if per_table is None:
        return [_as_tokens(tokens, token_provenance)] * n
    if len(per_table) != n:
        raise InvalidArgumentError(
            f"tokens must be one token matrix (vocab, d_model) shared by every positional table, or one per "
            f"table; got {len(per_table)} token matrices for {n} positional table(s)."
        )
    return [_as_tokens(t, token_provenance) for t in per_table]


def _overlap_one(pos: PCAResult, t: torch.Tensor, tprov: Provenance, center: bool) -> SubspaceOverlap:
    """The overlap of one token matrix ``t`` ``(vocab, d)`` with one single-table PCA fit ``pos``."""
    k = pos.n_components_
    if t.device != pos.components_.device:
        raise DeviceMismatchError(
            f"tokens live on {t.device} and positions on {pos.components_.device}; move one with .to() first."
        )
    d = pos.n_features_
    if t.shape[1] != d:
        raise InvalidArgumentError(
            f"tokens must have d_model={d} columns like the positional table; got shape {tuple(t.shape)}."
        )
    if t.shape[0] < max(2, k):
        raise InvalidArgumentError(f"tokens need at least max(2, k)={max(2, k)} rows; got {t.shape[0]}.")
    basis = pos.components_.to(torch.float64)
    t64 = t.to(torch.float64)
    tc = t64 - t64.mean(dim=0, keepdim=True)
    total_var, total_norm = float(tc.square().sum()), float(t64.square().sum())
    if not (total_var > 0 and math.isfinite(total_var) and math.isfinite(total_norm)):
        raise InvalidArgumentError(
            f"the token matrix from {tprov.source!r} must be finite with non-zero variance over tokens; got "
            f"total centred sum of squares {total_var!r}. Pass the model's real token-embedding matrix."
        )
    var_frac = float((tc @ basis.mT).square().sum()) / total_var
    norm_frac = float((t64 @ basis.mT).square().sum()) / total_norm
    tok = pca(t, k, center=True)
    angles = torch.rad2deg(principal_angles(pos.components_, tok.components_))
    return SubspaceOverlap(
        n_components=k,
        d_model=d,
        token_variance_fraction=var_frac,
        token_norm_fraction=norm_frac,
        random_fraction=k / d,
        principal_angles_deg=angles.to(t.dtype),
        positional_components=pos.components_,
        token_components=tok.components_,
        positional_variance_ratio=pos.explained_variance_ratio_,
        window=pos.window,
        center=center,
        provenance=pos.provenance,
        token_provenance=tprov,
    )


def subspace_overlap(
    positions: Any,
    tokens: Any,
    n_components: int = 3,
    *,
    center: bool = True,
    window: Window = None,
    token_provenance: Provenance | None = None,
    **deprecated: Any,
) -> SubspaceOverlap | BatchResult:
    """Share of token-embedding variance and norm in the top-``k`` positional PCA subspace.

    Args:
        positions: the positional table(s): a PositionalEmbedding, a list of them (one shape), or a
            tensor/array ``(n, d)`` or ``(batch, n, d)``; the PCA runs on their device, batched. A
            ``PCAResult`` with at least ``n_components`` components is used as fitted.
        tokens: the token-embedding matrix ``(vocab, d)``: a tensor/array or an object with
            ``.matrix`` and ``.provenance`` (a :class:`~pos_geometry.TokenEmbedding`), on the same
            device as ``positions``. For a batch of positional tables, either one token matrix shared
            by all of them, or one per table (a list, or a ``(batch, vocab, d)`` tensor/array).
        n_components: dimension ``k`` of the positional subspace (and of the token subspace for the
            angles); ``k=`` is a deprecated alias.
        center: centre the positional table before its PCA (the token variance fraction is always
            centred, the norm fraction never).
        window: positions used for the positional PCA (see :func:`pca`).
        token_provenance: provenance of bare token tensors.

    Returns:
        A :class:`SubspaceOverlap` for one table; a ``BatchResult`` of them, in input order, for a batch.
    """
    k = renamed("subspace_overlap", deprecated, {"k": "n_components"}, {"n_components": n_components})[
        "n_components"
    ]
    if isinstance(positions, PCAResult):  # fitted once upstream: use its top k, no second decomposition
        if window is not None:
            raise InvalidArgumentError(
                f"window={window!r} cannot be applied to a PCAResult (fitted on {tuple(positions.window)}); "
                "pass the table instead."
            )
        pos, center = positions.top(k), positions.center
    else:
        pos = pca(positions, k, window=window, center=center)
    pairs = _token_list(tokens, len(pos), token_provenance)
    results = tuple(_overlap_one(pos[i], t, tprov, center) for i, (t, tprov) in enumerate(pairs))
    if not pos.batched:
        return results[0]
    return BatchResult(results, tuple(r.provenance for r in results))

"""Orthogonal Procrustes alignment of PCA bases across checkpoints.

PCA axes of nearby checkpoints can swap, flip or rotate within the top-``k`` subspace when
their variances are close. :func:`align_bases` rotates each basis, inside its own subspace, onto a
reference basis (the orthogonal Procrustes solution ``R = argmin ‖R C - C_ref‖_F``), so a training
sweep shows the helix forming and not axes swapping. Batched in torch (one ``k x k`` SVD per
matrix, no Python loop except for ``reference="previous"``, which is a chain by nature).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence

import numpy as np
import torch

from pos_geometry.analysis.pca import PCAResult
from pos_geometry.errors import DeviceMismatchError, InvalidArgumentError

__all__ = ["align_bases", "procrustes_rotation"]


def procrustes_rotation(
    components: torch.Tensor, reference: torch.Tensor, *, allow_reflection: bool = True
) -> torch.Tensor:
    """Orthogonal ``R`` ``(..., k, k)`` minimising ``‖R @ components - reference‖_F``.

    ``components``: ``(k, d)`` or ``(batch, k, d)`` orthonormal rows; ``reference``: ``(k, d)`` or
    ``(batch, k, d)``. ``R = U Vᵀ`` from the SVD ``reference @ componentsᵀ = U Σ Vᵀ`` (the solution
    of ``scipy.linalg.orthogonal_procrustes(componentsᵀ, referenceᵀ)``, transposed). With
    ``allow_reflection=False`` ``det R = +1`` (Kabsch).
    """
    if components.shape[-2:] != reference.shape[-2:]:
        raise InvalidArgumentError(
            f"components {tuple(components.shape)} and reference {tuple(reference.shape)} must both be (k, d) "
            "bases with the same k and d; fit both with the same n_components on tables of one d_model."
        )
    if components.device != reference.device:
        raise DeviceMismatchError(
            f"components live on {components.device} and the reference on {reference.device}; move one first."
        )
    m = reference.to(torch.float64) @ components.to(torch.float64).mT
    u, _, vt = torch.linalg.svd(m)
    if not allow_reflection:
        det = torch.linalg.det(u @ vt)
        fix = torch.ones(m.shape[:-1], dtype=m.dtype, device=m.device)
        fix[..., -1] = torch.sign(det)
        u = u * fix.unsqueeze(-2)
    return (u @ vt).to(components.dtype)


def _rotate(res: PCAResult, rot: torch.Tensor, label: str) -> PCAResult:
    """Apply ``rot`` ``(B, k, k)`` to a result: components ``R C``, coordinates ``Y Rᵀ``, variances along new axes."""
    comps = rot @ res.components_
    coords = res.coordinates @ rot.mT
    # Variance along each new axis from the rotated coordinates (sum of squares / (n - 1), sklearn's
    # convention; the coordinates of a centred fit have zero mean), as a share of the unchanged total.
    ss = coords.detach().to("cpu", torch.float64).square().sum(-2).numpy()
    ratio = ss / (np.asarray(res.total_variance_, dtype=np.float64)[..., None] * max(res.n_samples_ - 1, 1))
    with np.errstate(over="ignore"):
        ev = ss / max(res.n_samples_ - 1, 1)
    prov = res.provenance
    provs = (
        prov.with_processing(label)
        if not isinstance(prov, tuple)
        else tuple(p.with_processing(label) for p in prov)
    )
    return dataclasses.replace(
        res,
        components_=comps,
        coordinates=coords,
        explained_variance_=ev,
        explained_variance_ratio_=ratio,
        singular_values_=np.sqrt(ss),
        rotation_=rot if res.rotation_ is None else rot @ res.rotation_,
        provenance=provs,
    )


def align_bases(
    results: PCAResult | Sequence[PCAResult],
    reference: PCAResult | torch.Tensor | int | str = -1,
    *,
    allow_reflection: bool = True,
) -> PCAResult:
    """Rotate every basis of ``results`` onto ``reference`` within its own top-``k`` subspace.

    Args:
        results: a batched :class:`PCAResult` (e.g. ``pca([checkpoints...])``) or a sequence of single
            results of one shape (stacked with :meth:`PCAResult.stack`).
        reference: an index into the batch (default ``-1``, the last checkpoint), a single
            ``PCAResult``, a ``(k, d)`` basis, or ``"previous"`` to align each basis to the aligned
            one before it (a chain, for sweeps whose first and last bases differ a lot).
        allow_reflection: allow ``det R = -1`` (sign flips); False restricts to proper rotations.

    Returns:
        A ``PCAResult`` (batched unless one single fit was given): components ``R_i C_i``, coordinates ``Y_i R_iᵀ``, per-axis explained
        variance (ratios) of the new axes, ``rotation_`` ``(batch, k, k)``, and ``"procrustes_aligned"``
        (or ``"procrustes_aligned(previous)"``) appended to each provenance. The subspaces, total
        variance, means and stable ranks are unchanged.
    """
    res = results if isinstance(results, PCAResult) else PCAResult.stack(results)
    single = not res.batched
    if single:
        res = PCAResult.stack([res])
    comps = res.components_
    if isinstance(reference, str):
        if reference != "previous":
            raise InvalidArgumentError(
                f"reference must be an index, a PCAResult, a (k, d) basis or 'previous'; got {reference!r}."
            )
        rots = [torch.eye(comps.shape[-2], dtype=comps.dtype, device=comps.device)]
        prev = comps[0]
        for i in range(1, comps.shape[0]):
            rot = procrustes_rotation(comps[i], prev, allow_reflection=allow_reflection)
            rots.append(rot)
            prev = rot @ comps[i]
        out = _rotate(res, torch.stack(rots), "procrustes_aligned(previous)")
        return out[0] if single else out
    if isinstance(reference, bool):
        raise InvalidArgumentError(f"reference must not be a bool; got {reference!r}.")
    if isinstance(reference, int):
        b = comps.shape[0]
        if not -b <= reference < b:
            raise InvalidArgumentError(
                f"reference index {reference} is out of range for a batch of {b} bases; use -{b} <= index < {b}."
            )
        ref = comps[reference]
    elif isinstance(reference, PCAResult):
        if reference.batched:
            raise InvalidArgumentError(
                f"reference must be a single PCA fit; got a batch of {len(reference)}. Pick one with reference[i]."
            )
        ref = reference.components_
    elif isinstance(reference, torch.Tensor):
        ref = reference
    else:
        raise InvalidArgumentError(
            f"reference must be an index, a PCAResult, a (k, d) tensor or 'previous'; got {type(reference).__name__}."
        )
    if ref.ndim != 2:
        raise InvalidArgumentError(f"the reference basis must have shape (k, d); got {tuple(ref.shape)}.")
    rot = procrustes_rotation(comps, ref.unsqueeze(0), allow_reflection=allow_reflection)
    out = _rotate(res, rot, "procrustes_aligned")
    return out[0] if single else out

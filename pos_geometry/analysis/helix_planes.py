"""Several helices at once: one helix fit per rotation the recurrence finds, in that rotation's own plane.

The helix fit reads the top three principal components. Two helices of equal variance in disjoint subspaces
share those components, which then mix them arbitrarily, and the top-3 fit finds no helix while the
recurrence finds both rotations. :func:`fit_helices` looks beyond the top three: for each rotation of the
fitted one-step map (a conjugate eigenvalue pair ``λ``, right eigenvector ``v``), the trajectory in its plane
``span(Re v, Im v)`` of the PCA coordinates, with the trend axis of what is left (the direction of the
remaining coordinates that moves most linearly with position), is a three-column table; :func:`fit_helix`
fits it with its own nulls (random walks of its steps, smooth curves of its length scale, its own
spectrum). Each rotation gets its own verdict, period and p-value.

**Selection and multiplicity.** The planes are the ones the recurrence calls rotations, which it does only
when its map beats its own nulls and each of them is a line above a smooth background
(:mod:`~pos_geometry.analysis.nulls.pair_background`: a background pair the map resolves is tested as
background first, and gives no plane to test). The ``m`` planes are then ``m`` tests: each is held to ``α/m`` (Bonferroni; a family-wise error of
at most ``α`` across the planes whatever their dependence), with at least ``m/α − 1`` surrogates so that
``α/m`` is reachable (``1/(S + 1) ≤ α/m``). One rotation is tested in its plane too (a helix behind a random
walk of larger variance is not in the top three components), unless the top-3 fit already calls it a helix.
"""

from __future__ import annotations

import dataclasses
import inspect
import math
from typing import Any

import numpy as np
import torch

from pos_geometry.analysis.helix import HelixFit, fit_helix
from pos_geometry.embedding import PositionalEmbedding

__all__ = ["MIN_ROTATIONS", "fit_helices", "plane_tables"]

MIN_ROTATIONS = 1
""":func:`fit_helices` runs when the recurrence finds at least this many rotations."""


def plane_tables(pca: Any, recurrence: Any) -> list[tuple[float, np.ndarray]]:
    """``[(period, (n, 3) table)]``, one per rotation of ``recurrence`` (longest period first): the trajectory in
    the rotation's plane and along the trend axis of the rest, from the same PCA coordinates."""
    k = recurrence.n_components
    z = pca.coordinates[:, :k].detach().to("cpu", torch.float64).numpy()
    z = z - z.mean(axis=0)
    values, vectors = np.linalg.eig(recurrence.transition)
    t = np.arange(z.shape[0], dtype=np.float64)
    t -= t.mean()
    out = []
    for period, _ in recurrence.rotation_pairs():
        angle = 2 * np.pi / period
        j = int(np.argmin(np.abs(np.abs(np.angle(values)) - angle) + (values.imag < 0)))
        plane, _ = np.linalg.qr(np.stack([vectors[:, j].real, vectors[:, j].imag], axis=1))
        inside = z @ plane
        rest = z - inside @ plane.T
        trend = rest.T @ t
        axis = rest @ (trend / np.linalg.norm(trend)) if np.linalg.norm(trend) > 0 else np.zeros_like(t)
        out.append((float(period), np.column_stack([inside, axis])))
    return out


def fit_helices(
    pca: Any, recurrence: Any, *, top: HelixFit | None = None, **nulls: Any
) -> tuple[HelixFit, ...]:
    """One :func:`fit_helix` per rotation of ``recurrence``, each on its :func:`plane_tables` table, each at
    ``alpha / m`` for ``m`` planes with at least ``ceil(m / alpha) − 1`` surrogates (``nulls``: ``n_surrogates``,
    ``alpha``, ``random_state``, ``null_method``, ``sequential``, as :func:`fit_helix` takes them). Empty when
    the recurrence found fewer than :data:`MIN_ROTATIONS` rotations or did not beat its nulls, and when it found
    one and the top-3 fit ``top`` is already a helix (the same rotation, fitted once)."""
    if recurrence is None or recurrence.status != "rotations":
        return ()
    m = len(recurrence.rotation_pairs())
    if m < MIN_ROTATIONS or (m == 1 and top is not None and top.verdict == "helix"):
        return ()
    defaults = inspect.signature(fit_helix).parameters  # a caller's omission means fit_helix's own default
    alpha = float(nulls.pop("alpha", defaults["alpha"].default))
    surrogates = int(nulls.pop("n_surrogates", defaults["n_surrogates"].default))
    if surrogates > 0:
        surrogates = max(surrogates, math.ceil(m / alpha - 1e-9) - 1)
    fits = []
    for period, table in plane_tables(pca, recurrence):
        prov = pca.provenance.with_processing(
            f"plane of the rotation of period {period:.4g} (recurrence) + trend"
        )
        fit = fit_helix(
            PositionalEmbedding(torch.from_numpy(table), prov), n_components=3, alpha=alpha / m,
            n_surrogates=surrogates, **nulls,
        )  # fmt: skip
        if m > 1:
            fit = dataclasses.replace(
                fit,
                reason=f"{fit.reason} (each of the {m} planes tested at α/{m} = {alpha / m:.3g}, Bonferroni)",
            )
        fits.append(fit)
    return tuple(fits)

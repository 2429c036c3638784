"""Per-layer metrics of the positional part ``pos`` ``(T, d_model)`` of a :class:`Decomposition`.

With ``λ_1 ≥ λ_2 ≥ ...`` the eigenvalues of ``posᵀ pos`` (``pos`` sums to zero over positions, so
these are its principal-component variances times ``T``):

* ``positional_share`` / ``context_share`` / ``residual_share``: each part's share of the total sum of
  squares ``Σ_{c,t} ‖h - μ‖²``; ``relative_norm = sqrt(positional_share)``, the RMS norm of ``pos[t]``
  over the RMS norm of the centred hidden state;
* ``top_k_ratio = Σ_{i≤k} λ_i / Σ λ_i`` (``k = n_components``: PCA's explained-variance ratio);
* ``stable_rank = Σ λ_i / λ_1``;
* ``smoothness``: the share of the Gram matrix ``G = pos posᵀ`` ``(T, T)`` whose 2-D orthonormal
  DCT-II coefficients lie in the lowest ``n_frequencies × n_frequencies`` block (Song & Zhong's
  Fourier view: a smooth trajectory's Gram matrix is low-frequency);
* ``principal_angles`` (degrees) between the top-``k`` positional and top-``k`` context subspaces
  of ``d_model`` (context subspace: eigenvectors of the context scatter), and ``max_cosine``, the
  cosine of the smallest angle (0: incoherent, 1: they share a direction);
* position 0 on its own: ``position0_norm_ratio = ‖pos[0]‖ / median_{t≥1} ‖pos[t]‖`` and
  ``top_k_ratio_without_0`` (positions 1..T-1, re-centred);
* the sampling floor: ``positional_floor = residual / ((C - 1) · total)``, the positional share that
  ``C`` contexts give with NO positional signal at all. In the two-way layout, position carries no
  signal when ``E[positional] = residual / (C - 1)`` (the ANOVA expectation; for i.i.d. states about
  ``1/C``: 0.125 with 8 contexts, 0.016 with 64). A share near its floor is sampling noise, not
  position. ``positional_over_floor`` is their ratio (about 1 at the floor);
* the first positions left out: ``positional_share_late`` and ``positional_floor_late``, the same two
  over positions ``t ≥ skip`` (re-centred; ``skip`` = 2 by default), for models whose first positions
  carry massive activations that would otherwise dominate the shares.

All in float64 (numpy/scipy on the CPU).
"""

from __future__ import annotations

import numpy as np

from pos_geometry.hidden.running_sums import Decomposition

__all__ = ["METRIC_NAMES", "layer_metrics", "dct_smoothness", "principal_angles"]

METRIC_NAMES: tuple[str, ...] = (
    "positional_share",
    "context_share",
    "residual_share",
    "relative_norm",
    "top_k_ratio",
    "stable_rank",
    "smoothness",
    "max_cosine",
    "position0_norm_ratio",
    "top_k_ratio_without_0",
    "positional_floor",
    "positional_over_floor",
    "positional_share_late",
    "positional_floor_late",
)


def _floor(residual: float, total: float, n_sequences: int) -> float:
    """The positional share expected with no positional signal (module docstring)."""
    return residual / ((n_sequences - 1) * total) if total > 0 and n_sequences > 1 else float("nan")


def _top_eig(scatter: np.ndarray, k: int) -> tuple[np.ndarray, np.ndarray]:
    """The top-``k`` eigenvalues (descending, clipped at 0) and eigenvectors ``(d, k)`` of a symmetric PSD matrix.

    Lanczos (ARPACK, from a fixed start vector, so results are deterministic) when ``k`` is small
    against ``d``: a full ``eigh`` of a 768 × 768 matrix costs ~50× more and every layer needs two.
    """
    d = scatter.shape[0]
    if d > 64 and k < d // 8:
        from scipy.sparse.linalg import eigsh

        values, vectors = eigsh(scatter, k=k, which="LA", v0=np.ones(d), tol=0.0)
    else:
        values, vectors = np.linalg.eigh(scatter)
        values, vectors = values[-k:], vectors[:, -k:]
    order = np.argsort(values)[::-1]
    return values[order].clip(min=0.0), vectors[:, order]


def dct_smoothness(pos: np.ndarray, n_frequencies: int) -> float:
    """Share of ``‖DCT2(pos posᵀ)‖²`` in the lowest ``n_frequencies × n_frequencies`` coefficients.

    The 2-D orthonormal DCT of the Gram matrix is ``C G Cᵀ = (C pos)(C pos)ᵀ`` (``C`` the ``T × T``
    DCT-II matrix), and ``‖G‖_F² = ‖posᵀ pos‖_F²``, so only ``pos`` is transformed, along positions:
    ``O(T log T × d_model)`` instead of a ``T × T`` Gram matrix and its 2-D transform.
    """
    from scipy.fft import dct

    k = min(n_frequencies, pos.shape[0])
    low = dct(pos, type=2, norm="ortho", axis=0)[:k]  # (k, d_model): the lowest frequencies of C pos
    total = float(np.square(pos.T @ pos).sum())
    return float(np.square(low @ low.T).sum() / total) if total > 0 else float("nan")


def principal_angles(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """Principal angles in degrees (ascending) between the column spans of orthonormal ``a`` and ``b``."""
    cosines = np.linalg.svd(a.T @ b, compute_uv=False).clip(0.0, 1.0)
    return np.degrees(np.arccos(cosines))


def _top_k_ratio(pos: np.ndarray, k: int) -> float:
    """PCA's top-``k`` explained-variance ratio of the rows of ``pos`` (re-centred)."""
    centred = pos - pos.mean(axis=0)
    gram = centred.T @ centred if centred.shape[0] > centred.shape[1] else centred @ centred.T
    values, _ = _top_eig(gram, k)
    total = float(np.square(centred).sum())  # the trace: Σ of all eigenvalues
    return float(values[:k].sum() / total) if total > 0 else float("nan")


def layer_metrics(dec: Decomposition, *, n_components: int, n_frequencies: int) -> dict[str, object]:
    """The metrics of the module docstring for one layer: floats, plus ``principal_angles`` ``(k,)``."""
    pos = dec.positional.numpy()
    t, d = pos.shape
    k = min(n_components, t - 1, d)
    total = dec.total
    share = (lambda ss: ss / total) if total > 0 else (lambda ss: float("nan"))
    values, pos_vectors = _top_eig(pos.T @ pos, k)
    trace = float(np.square(pos).sum())  # Σ of all eigenvalues
    _, ctx_vectors = _top_eig(dec.context_scatter.numpy(), k)
    angles = principal_angles(pos_vectors, ctx_vectors)
    late_total, late_pos, _, late_res = dec.late
    norms = np.linalg.norm(pos, axis=1)
    median_rest = float(np.median(norms[1:])) if t > 1 else float("nan")
    return {
        "positional_share": share(dec.positional_ss),
        "context_share": share(dec.context_ss),
        "residual_share": share(dec.residual_ss),
        "relative_norm": float(np.sqrt(share(dec.positional_ss))),
        "top_k_ratio": float(values[:k].sum() / trace) if trace > 0 else float("nan"),
        "stable_rank": float(trace / values[0]) if values[0] > 0 else float("nan"),
        "smoothness": dct_smoothness(pos, n_frequencies),
        "max_cosine": float(np.cos(np.radians(angles[0]))),
        "principal_angles": angles,
        "position0_norm_ratio": float(norms[0] / median_rest) if median_rest > 0 else float("nan"),
        "top_k_ratio_without_0": _top_k_ratio(pos[1:], k) if t > 2 else float("nan"),
        "positional_floor": (floor := _floor(dec.residual_ss, total, dec.n_sequences)),
        "positional_over_floor": share(dec.positional_ss) / floor if floor > 0 else float("nan"),
        "positional_share_late": late_pos / late_total if late_total > 0 else float("nan"),
        "positional_floor_late": _floor(late_res, late_total, dec.n_sequences),
    }

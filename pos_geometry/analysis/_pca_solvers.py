"""Batched PCA kernels in torch: an exact solver and a randomized (Halko et al.) solver.

Both take ``x``: ``Float[Tensor, "batch n d"]`` (any strides; a window is a view, never a copy)
and ``mean``: ``Float[Tensor, "batch d"]`` or ``None`` (no centring), and return
``(s, components, coords)``:

* ``s``: ``(batch, k)`` singular values of the centred matrix ``A = x - mean``, descending;
* ``components``: ``(batch, k, d)`` orthonormal right singular vectors (rows), signs fixed by
  :func:`flip_signs` (scikit-learn's ``svd_flip(u_based_decision=False)``);
* ``coords``: ``(batch, n, k)`` = ``A @ components.mT`` (the fitted rows projected).

Everything runs on ``x.device`` in ``x.dtype`` (float32 or float64); the small ``l x l``
eigenproblems and Gram matrices are formed in float64 whatever the input dtype, which costs
nothing and keeps the float32 path accurate.
"""

from __future__ import annotations

from collections.abc import Callable

import torch

from pos_geometry.analysis import _small_linalg

__all__ = [
    "SUBSPACE_ITERATIONS",
    "exact_pca",
    "randomized_pca",
    "flip_signs",
    "resolve_n_iter",
    "fit_batch",
]

#: Intermediate power-iteration steps use Cholesky-QR (two small float64 products); a block whose
#: Cholesky factor has ``min(diag) / max(diag)`` below this (condition number above ~1e4) falls
#: back to Householder QR, which is always stable.
_CHOLQR_MIN_DIAG_RATIO = 1e-4


SUBSPACE_ITERATIONS = (3, 20)
"""``(n_iter, n_oversamples)`` of the randomized solver when only the top-``k`` subspace matters (the
recurrence's statistic is the same for any orthonormal basis of it): 3 power iterations on ``k + 20``
vectors instead of scikit-learn's 7 on ``k + 10``. On GPT-2's surrogates (``k = 27``) the recurrence's gain
then differs from the exact eigendecomposition's by at most about 1e-4, against a null spread of ~0.03
(``tests/analysis/nulls/test_null_methods.py``), at about 60% of the products."""


def resolve_n_iter(n_iter: int | str, n_components: int, n: int, d: int) -> int:
    """scikit-learn's rule: 7 power iterations when ``k < 0.1 * min(n, d)``, else 4."""
    if n_iter == "auto":
        return 7 if n_components < 0.1 * min(n, d) else 4
    return int(n_iter)


def flip_signs(components: torch.Tensor, coords: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """Make the largest-|.| entry of each component positive (first such entry on ties).

    This is ``sklearn.utils.extmath.svd_flip(U, Vt, u_based_decision=False)``; the coordinates
    are flipped with their component. A component that is exactly zero is left as it is.
    """
    idx = components.abs().argmax(dim=-1, keepdim=True)
    signs = torch.sign(torch.gather(components, -1, idx))
    signs = torch.where(signs == 0, torch.ones_like(signs), signs)
    return components * signs, coords * signs.squeeze(-1).unsqueeze(-2)


def exact_pca(x: torch.Tensor, mean: torch.Tensor | None, k: int):
    """Exact top-``k`` PCA: eigh of the float64 ``d x d`` Gram matrix, or a float64 SVD when ``n < d``.

    For ``n >= d`` the eigenvectors of ``AᵀA`` are the right singular vectors; forming ``AᵀA`` in
    float64 makes the eigenvalues accurate to ~1e-16 ``s₁²`` (absolute), better than a float32 SVD
    and several times faster than a float64 SVD on the CPU. For ``n < d`` a thin SVD of ``A``
    (float64) is used, so components with zero singular value stay orthonormal.
    """
    n, d = x.shape[-2:]
    a = x.to(torch.float64)
    if mean is not None:
        a = a - mean.to(torch.float64).unsqueeze(-2)
    if n >= d:
        evals, evecs = _small_linalg.top_eigh(a.mT @ a, k)
        s = evals.clamp_min(0).sqrt()
        vt = evecs.mT
    else:
        _, s, vt = _small_linalg.svd(a)
        s, vt = s[..., :k], vt[..., :k, :]
    comps, coords = flip_signs(vt, a @ vt.mT)
    return s.to(x.dtype), comps.to(x.dtype), coords.to(x.dtype)


def _left(mt: torch.Tensor, x: torch.Tensor, mean: torch.Tensor | None) -> torch.Tensor:
    """``Mᵀ A`` for ``mt`` ``(B|1, l, n)`` -> ``(B, l, d)``, with ``A = x - mean`` never formed."""
    out = mt @ x
    if mean is not None:
        out = out - mt.sum(-1, keepdim=True) * mean.unsqueeze(-2)
    return out


def _right(zt: torch.Tensor, x: torch.Tensor, mean: torch.Tensor | None) -> torch.Tensor:
    """``Zᵀ Aᵀ`` for ``zt`` ``(B, l, d)`` -> ``(B, l, n)``, with ``A = x - mean`` never formed."""
    out = zt @ x.mT
    if mean is not None:
        out = out - zt @ mean.unsqueeze(-1)
    return out


def _qr_rows(m: torch.Tensor) -> torch.Tensor:
    """Orthonormalise the rows of ``m`` ``(B, l, m)`` by Householder QR."""
    return torch.linalg.qr(m.mT).Q.mT


def _orth_rows(m: torch.Tensor) -> torch.Tensor:
    """Cheaply re-orthonormalise the rows of ``m`` for a power-iteration step.

    Cholesky-QR: ``L = chol(M Mᵀ)``, rows ``L⁻¹ M``. Power iterations only need the block kept well
    conditioned and its span kept, not exact orthonormality (the last step uses Householder QR). The
    ``l x l`` Gram matrix is accumulated in ``m``'s dtype and factorised in float64; ``L⁻¹`` is applied
    in ``m``'s dtype. Cholesky-QR loses orthogonality like ``u·κ(M)²``, so a block whose factor has
    ``min(diag) / max(diag)`` below :data:`_CHOLQR_MIN_DIAG_RATIO` (float64) or its square root (any
    coarser dtype: ``κ`` above ~100) falls back to Householder QR, which is always stable. On 2 CPU
    threads, for 2 × 20 × 1024 float32 blocks, this is about half the time of either a float64 Gram
    matrix or Householder QR.
    """
    chol, info = torch.linalg.cholesky_ex((m @ m.mT).to(torch.float64))
    diag = chol.diagonal(dim1=-2, dim2=-1)
    ratio = _CHOLQR_MIN_DIAG_RATIO if m.dtype == torch.float64 else _CHOLQR_MIN_DIAG_RATIO**0.5
    ok = (info == 0) & (diag.amin(-1) > ratio * diag.amax(-1))
    if not bool(ok.all()):
        return _qr_rows(m)
    eye = torch.eye(chol.shape[-1], dtype=chol.dtype, device=chol.device).expand_as(chol)
    inv = torch.linalg.solve_triangular(chol, eye, upper=False)  # L⁻¹, (B, l, l)
    return inv.to(m.dtype) @ m


def randomized_pca(
    x: torch.Tensor,
    mean: torch.Tensor | None,
    k: int,
    *,
    omega_t: torch.Tensor,
    n_iter: int,
):
    """Randomized top-``k`` PCA (Halko, Martinsson & Tropp 2011, Alg. 4.4 with subspace iteration).

    With ``l = k + n_oversamples`` and a Gaussian test matrix ``Ω`` (``omega_t`` = ``Ωᵀ``, ``(1, l, n)``):
    ``Z₀ = orth(AᵀΩ)``, then ``n_iter`` times ``Y = orth(A Z)``, ``Z = orth(Aᵀ Y)``; finally
    ``Y = A Z`` and the ``l x l`` eigenproblem of ``YᵀY`` (float64) gives ``s`` and
    ``components = Wᵀ Zᵀ``, ``coords = Y W``. ``Z`` spans ``(AᵀA)^n_iter AᵀΩ``, the same power
    (``2 n_iter + 1``) and the same number of products with ``A`` (``2 n_iter + 2``) as
    scikit-learn's ``randomized_svd``; the coordinates come for free.

    ``Ω`` comes from :func:`gaussian_test_matrix`.
    """
    zt = _left(omega_t, x, mean)
    for _ in range(n_iter):
        zt = _orth_rows(zt)
        yt = _orth_rows(_right(zt, x, mean))
        zt = _left(yt, x, mean)
    zt = _qr_rows(zt)
    yt = _right(zt, x, mean).to(torch.float64)
    evals, w = _small_linalg.eigh(yt @ yt.mT)
    w = w.flip(-1)[..., :k]
    s = evals.flip(-1)[..., :k].clamp_min(0).sqrt()
    comps = w.mT.to(x.dtype) @ zt
    coords = (w.mT @ yt).mT
    comps, coords = flip_signs(comps, coords.to(x.dtype))
    return s.to(x.dtype), comps, coords


def gaussian_test_matrix(ell: int, n: int, random_state: int, like: torch.Tensor) -> torch.Tensor:
    """``Ωᵀ`` ``(1, ell, n)``, drawn on the CPU from ``torch.Generator().manual_seed(random_state)``.

    It is moved to ``like.device`` afterwards: one seed gives the same start on every device, and
    every matrix of a batch gets the same ``Ω``, so a batched fit equals the per-matrix fits.
    """
    gen = torch.Generator().manual_seed(int(random_state))
    return torch.randn(ell, n, generator=gen, dtype=like.dtype).to(like.device).unsqueeze(0)


def chunk_size(x: torch.Tensor) -> int:
    """Matrices per chunk: about 4 MiB of input per CPU thread (at least 8 MiB), 2 GiB elsewhere.

    On the CPU every product with ``A`` is a thin matrix product; running all 16 of them on a
    chunk small enough to stay in the caches (a thread's share of L2 + L3) beats streaming a
    larger batch from memory each time. Measured for 1024x768 float32 tables on 2 cores (AMD
    EPYC, 2 MiB L2 per core, 32 MiB shared L3): 2 matrices per chunk fit 609 tables 14 % (2 threads)
    to 17 % (1 thread) faster than 10 per chunk (the former 32 MiB budget). The budget grows with
    the thread count so each thread still has a matrix to work on. The exact solver forms float64
    copies, so chunking also bounds its scratch memory. This is a loop over chunks, never over matrices.
    """
    per_item = x.shape[-2] * x.shape[-1] * x.element_size()
    if x.device.type == "cpu":
        budget = max(8 * 2**20, 4 * 2**20 * torch.get_num_threads())
    else:
        budget = 2 * 2**30
    return max(1, budget // max(1, per_item))


_SAFE_SCALES = (2.0**-40, 2.0**40)
"""Largest |entry| of a table that :func:`fit_batch` fits without dividing it first: the squares of its
entries (summed over a million of them) stay far inside float32's range (1e-38 to 3e38)."""


def _sum_squares(x: torch.Tensor, mean: torch.Tensor | None) -> torch.Tensor:
    """``‖x - mean‖_F²`` per matrix, ``(B,)``, to ~1e-7 relative error without forming ``x - mean``.

    Row norms are taken in the input dtype and their squares summed in float64 (one float32 norm
    over all ``n*d`` entries would be off by ~1e-4). Centring uses ``‖X‖² - n‖μ‖²``, which loses
    at most a factor ``‖X‖² / ‖A‖²`` of that accuracy; when the mean carries more than half the
    squared norm (factor > 2) the centred rows are formed instead.
    """
    along = -1 if x.stride(-1) == 1 else -2  # the norms run along memory (a transposed view: columns)
    sq = torch.linalg.vector_norm(x, dim=along).double().square().sum(-1)
    if mean is None:
        return sq.to(x.dtype)
    mu2 = x.shape[-2] * mean.double().square().sum(-1)
    if bool((mu2 > 0.5 * sq).any()):
        resid = x - mean.unsqueeze(-2)
        return torch.linalg.vector_norm(resid, dim=along).double().square().sum(-1).to(x.dtype)
    return (sq - mu2).to(x.dtype)


def fit_batch(
    x: torch.Tensor,
    k: int,
    *,
    center: bool,
    solver: str,
    n_oversamples: int,
    n_iter: int,
    random_state: int,
    scale: torch.Tensor | Callable[[torch.Tensor], torch.Tensor] | None = None,
):
    """Fit every matrix of ``x`` ``(batch, n, d)``, chunk by chunk (see :func:`chunk_size`).

    ``scale`` ``(batch,)``: fit ``x[i] / scale[i]`` instead; a function of a chunk ``(c, n, d)`` -> ``(c,)``
    is called on each chunk while it is in the caches (it may refuse the chunk by raising). Where every scale of a chunk lies within
    :data:`_SAFE_SCALES` the chunk is fitted as it is and the results divided afterwards (PCA is
    equivariant: the components are the same, ``s``, the coordinates and the mean scale with the table,
    ``total_ss`` with its square), which saves a pass over the data; a table whose squares could leave
    float32's range is divided first, chunk by chunk while it is in the caches.

    Returns ``(s, components, coords, mean, total_ss, scale)`` with ``mean`` ``(batch, d)`` (zeros when
    not centring), ``total_ss`` ``(batch,)`` = ``‖A‖_F²`` of the (centred) matrices, all of the divided
    matrices, and ``scale`` ``(batch,)`` the divisors (ones without ``scale``).
    """
    n, d = x.shape[-2:]
    omega_t = None
    if solver == "randomized":
        omega_t = gaussian_test_matrix(min(k + n_oversamples, n, d), n, random_state, x)
    parts = []
    step = chunk_size(x)
    for start in range(0, x.shape[0], step):
        xc = x[start : start + step]
        after = None
        sc64 = (scale(xc) if callable(scale) else scale[start : start + step]) if scale is not None else None
        if sc64 is not None:
            sc = sc64.to(xc.dtype)
            lo, hi = _SAFE_SCALES
            if bool(((sc >= lo) & (sc <= hi)).all()):
                after = sc
            else:
                xc = xc / sc.view(-1, 1, 1)
        mean = xc.mean(dim=-2) if center else None
        total_ss = _sum_squares(xc, mean)
        if solver == "exact":
            s, comps, coords = exact_pca(xc, mean, k)
        else:
            s, comps, coords = randomized_pca(xc, mean, k, omega_t=omega_t, n_iter=n_iter)
        if mean is None:
            mean = torch.zeros(xc.shape[0], d, dtype=xc.dtype, device=xc.device)
        if after is not None:
            s, coords, mean = s / after[:, None], coords / after[:, None, None], mean / after[:, None]
            total_ss = total_ss / after.square()
        if sc64 is None:
            sc64 = torch.ones(xc.shape[0], dtype=torch.float64, device=xc.device)
        parts.append((s, comps, coords, mean, total_ss, sc64))
    return tuple(torch.cat(p) for p in zip(*parts, strict=True))

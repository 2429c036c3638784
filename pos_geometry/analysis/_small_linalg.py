"""Small dense factorizations of the nulls, solved on the host when their data lives on an accelerator.

The nulls end in batches of small problems: the ``l × l`` eigenproblems of the randomized PCA
(``l ≈ 37``), the ``(r + 1) × (r + 1)`` Gram matrices of narrow surrogates, the ``(n, k + 1)`` designs
of the recurrence. A GPU solver takes one launch (or one ``syevd``) per matrix and is slower than a
CPU LAPACK call on the whole batch: 199 eigenproblems of 37 × 37 cost tens of milliseconds on an H100
and about one on a CPU core. So these functions move such a batch to the host, factorize it there with
the same LAPACK routines as the CPU path, and hand the factors back on the input's device (an SVD
with one small side is first reduced to that side on the device by a QR). Large problems, and anything
already on the CPU, are solved where they are. This is a kernel choice inside the analyses, not a
device choice: the caller's tensors stay where they were.
"""

from __future__ import annotations

import torch

__all__ = ["HOST_MAX_DIM", "HOST_MAX_ELEMENTS", "eigh", "reduced_svd", "svd", "top_eigh"]

HOST_MAX_DIM = 128
"""Matrices whose smaller side is at most this are factorized on the host when they sit on a GPU."""
HOST_MAX_ELEMENTS = 2**26
"""…and whose batch holds at most this many elements (512 MiB of float64): moving more costs more than
it saves."""


def _on_host(a: torch.Tensor) -> bool:
    return (
        a.device.type != "cpu"
        and min(a.shape[-2], a.shape[-1]) <= HOST_MAX_DIM
        and a.numel() <= HOST_MAX_ELEMENTS
    )


def eigh(a: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """``torch.linalg.eigh`` of symmetric ``a`` ``(..., m, m)``: eigenvalues ascending ``(..., m)`` and
    eigenvectors ``(..., m, m)``, on ``a``'s device (small batches on a GPU are solved on the host)."""
    if not _on_host(a):
        return torch.linalg.eigh(a)
    evals, evecs = torch.linalg.eigh(a.cpu())
    return evals.to(a.device), evecs.to(a.device)


def top_eigh(a: torch.Tensor, k: int) -> tuple[torch.Tensor, torch.Tensor]:
    """The ``k`` largest eigenpairs of symmetric ``a`` ``(..., m, m)``: eigenvalues descending ``(..., k)`` and
    eigenvectors ``(..., m, k)``, on ``a``'s device.

    On the host (the CPU, or a small batch from a GPU) LAPACK's MRRR driver (``syevr``, through SciPy)
    computes only those ``k``, matrix by matrix: for the nulls' ``(r + 1) × (r + 1)`` Gram matrices (``r`` up to
    a few hundred) that is several times faster than torch's batched ``syevd`` of every eigenpair, which
    also slows down with more threads on matrices this small. Elsewhere, or when ``k`` is most of ``m``:
    ``torch.linalg.eigh``, sliced.
    """
    m = a.shape[-1]
    k = max(0, min(int(k), m))
    if (a.device.type == "cpu" or _on_host(a)) and 0 < k <= m // 2 and a.dtype == torch.float64:
        from scipy.linalg import eigh as scipy_eigh

        host = a.detach().cpu().reshape(-1, m, m).numpy()
        evals = torch.empty(host.shape[0], k, dtype=a.dtype)
        evecs = torch.empty(host.shape[0], m, k, dtype=a.dtype)
        for i, mat in enumerate(host):
            w, v = scipy_eigh(mat, subset_by_index=[m - k, m - 1], driver="evr", check_finite=False)
            evals[i] = torch.from_numpy(w[::-1].copy())
            evecs[i] = torch.from_numpy(v[:, ::-1].copy())
        shape = a.shape[:-2]
        return evals.reshape(*shape, k).to(a.device), evecs.reshape(*shape, m, k).to(a.device)
    evals, evecs = eigh(a)
    return evals.flip(-1)[..., :k], evecs.flip(-1)[..., :k]


def svd(a: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """Thin ``torch.linalg.svd`` of ``a`` ``(..., m, p)``: ``U`` ``(..., m, q)``, ``S`` ``(..., q)``,
    ``Vᴴ`` ``(..., q, p)`` with ``q = min(m, p)``, on ``a``'s device.

    On a GPU, a matrix with a small side is first reduced to that side (a Householder QR of the tall
    matrix, or of its transpose, on the device), the small square factor is decomposed on the host, and
    ``U`` (or ``V``) is rebuilt on the device: only ``q × q`` matrices cross the bus.
    """
    if not _on_host(a):
        return torch.linalg.svd(a, full_matrices=False)
    return reduced_svd(a)


def reduced_svd(a: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """The thin SVD of ``a`` ``(..., m, p)`` through a QR on ``a``'s device and the SVD of the small
    ``q × q`` factor on the host (what :func:`svd` does on a GPU; on the CPU it is only a check)."""
    m, p = a.shape[-2:]
    if m >= p:
        q, r = torch.linalg.qr(a)  # (…, m, p), (…, p, p)
        u, s, vt = torch.linalg.svd(r.cpu(), full_matrices=False)
        return q @ u.to(a.device), s.to(a.device), vt.to(a.device)
    q, r = torch.linalg.qr(a.mT)  # a = rᵀ qᵀ
    u, s, vt = torch.linalg.svd(r.mT.cpu(), full_matrices=False)
    return u.to(a.device), s.to(a.device), vt.to(a.device) @ q.mT

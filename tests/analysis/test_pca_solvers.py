"""The power iterations' cheap re-orthonormalisation (_pca_solvers._orth_rows) against Householder QR."""

from __future__ import annotations

import pytest
import torch

from pos_geometry.analysis._pca_solvers import _orth_rows, _qr_rows


def _block(cond: float, dtype: torch.dtype, seed: int = 0) -> torch.Tensor:
    """``(2, 20, 1024)`` rows spanning a random 20-dimensional subspace, with condition number ``cond``."""
    gen = torch.Generator().manual_seed(seed)
    q = torch.linalg.qr(torch.randn(2, 1024, 20, generator=gen, dtype=torch.float64)).Q.mT
    mix = torch.linalg.qr(torch.randn(2, 20, 20, generator=gen, dtype=torch.float64)).Q
    s = torch.logspace(0, -torch.log10(torch.tensor(cond)).item(), 20, dtype=torch.float64)
    return ((mix * s) @ q).to(dtype)


def _span_distance(a: torch.Tensor, b: torch.Tensor) -> float:
    """Largest sine of the principal angles between the row spaces of ``a`` and ``b`` (orthonormal rows)."""
    a, b = _qr_rows(a.double()), _qr_rows(b.double())
    return float(torch.linalg.matrix_norm(a - (a @ b.mT) @ b, ord=2).max())


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
@pytest.mark.parametrize("cond", [1.0, 30.0, 1e3, 1e6])
def test_orth_rows_keeps_the_span_and_returns_nearly_orthonormal_rows(dtype, cond):
    # a float32 Gram matrix is accurate only for well-conditioned blocks: beyond κ ≈ 100 (float32) or 1e4
    # (float64) the Householder fallback must take over, so the rows stay orthonormal at every κ
    m = _block(cond, dtype)
    got = _orth_rows(m)
    assert got.dtype == dtype and got.shape == m.shape
    gram = (got.double() @ got.double().mT) - torch.eye(20, dtype=torch.float64)
    tol = 1e-3 if dtype == torch.float32 else 1e-8
    assert float(gram.abs().max()) < tol
    if (
        dtype == torch.float64 or cond <= 1e3
    ):  # (a float32 block of κ = 1e6 has no well-defined smallest rows)
        assert _span_distance(got, m) < (1e-4 if dtype == torch.float32 else 1e-9) * cond

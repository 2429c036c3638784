"""The small factorizations of the nulls (``_small_linalg``): on the CPU they are torch's own; the
QR-reduced SVD that a GPU uses gives the same factorization (checked here on the CPU; the GPU run itself
is in ``test_null_device.py``)."""

from __future__ import annotations

import pytest
import torch

from pos_geometry.analysis import _small_linalg


@pytest.mark.parametrize("shape", [(7, 1023, 29), (5, 29, 300), (3, 40, 40)])
def test_the_qr_reduced_svd_is_the_svd(shape):
    gen = torch.Generator().manual_seed(1)
    a = torch.randn(*shape, generator=gen, dtype=torch.float64)
    a[0, :, -1] = a[0, :, 0]  # one rank-deficient matrix: a zero singular value
    u, s, vt = _small_linalg.reduced_svd(a)
    ref_s = torch.linalg.svdvals(a)
    q = min(shape[-2:])
    assert u.shape == (*shape[:-1], q) and s.shape == (shape[0], q) and vt.shape == (shape[0], q, shape[-1])
    torch.testing.assert_close(s, ref_s, rtol=1e-12, atol=1e-12)
    torch.testing.assert_close((u * s[..., None, :]) @ vt, a, rtol=1e-11, atol=1e-11)
    eye = torch.eye(q, dtype=torch.float64).expand(shape[0], q, q)
    torch.testing.assert_close(vt @ vt.mT, eye, rtol=1e-11, atol=1e-11)
    torch.testing.assert_close(u.mT @ u, eye, rtol=1e-11, atol=1e-11)


def test_on_the_cpu_nothing_moves():
    a = torch.randn(4, 30, 30, dtype=torch.float64)
    a = a @ a.mT
    assert not _small_linalg._on_host(a)
    evals, evecs = _small_linalg.eigh(a)
    ref = torch.linalg.eigh(a)
    assert torch.equal(evals, ref.eigenvalues) and torch.equal(evecs, ref.eigenvectors)

"""The nulls on a GPU (issue 26): surrogates drawn and batched on the device (from a device generator
seeded by the CPU stream) give the CPU's verdicts, and their null distributions agree with the CPU's
(two-sample KS). Skipped without CUDA; ``benchmarks/gpu_check.sh`` runs these and
``benchmarks/bench_verdicts.py --device cuda`` when a GPU is lent."""

from __future__ import annotations

import pytest
import torch
from scipy.stats import ks_2samp

import pos_geometry as pg

pytestmark = pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA device")


@pytest.mark.slow
def test_gpu_and_cpu_give_the_same_verdicts(gpt2_wpe):
    cpu = pg.analyze(torch.from_numpy(gpt2_wpe), n_surrogates=99, sequential=False)  # whole distributions
    gpu = pg.analyze(torch.from_numpy(gpt2_wpe).to("cuda"), n_surrogates=99, sequential=False)
    assert gpu.pca.components_.device.type == "cuda"
    assert gpu.helix.verdict == cpu.helix.verdict
    tests = [
        *zip(cpu.helix.tests, gpu.helix.tests, strict=True),
        *zip(cpu.recurrence.tests, gpu.recurrence.tests, strict=True),
    ]
    for a, b in tests:  # other draws of the same null: the same distribution, the same side of alpha
        assert a.null == b.null and a.significant == b.significant
        assert ks_2samp(a.values, b.values).pvalue > 0.01, (a.null, a.statistic)
    assert [(p.series, round(p.period)) for p in cpu.periodicity.dominant_periods] == [
        (p.series, round(p.period)) for p in gpu.periodicity.dominant_periods
    ]
    assert gpu.recurrence.status == cpu.recurrence.status


def test_small_factorizations_on_a_gpu_equal_the_cpu_ones():
    """The small eigenproblems and SVDs of the nulls are solved on the host when their data is on a GPU
    (``_small_linalg``): the factors come back on the GPU and equal the CPU's (same LAPACK routine)."""
    from pos_geometry.analysis import _small_linalg

    gen = torch.Generator().manual_seed(0)
    a = torch.randn(199, 37, 50, generator=gen, dtype=torch.float64)
    gram = a @ a.mT
    evals, evecs = _small_linalg.eigh(gram.cuda())
    assert evals.device.type == "cuda" and evecs.device.type == "cuda"
    ref_vals, ref_vecs = torch.linalg.eigh(gram)
    torch.testing.assert_close(evals.cpu(), ref_vals, rtol=0, atol=0)
    torch.testing.assert_close(evecs.cpu(), ref_vecs, rtol=0, atol=0)
    tall = torch.randn(64, 1023, 28, generator=gen, dtype=torch.float64)
    u, s, vt = _small_linalg.svd(tall.cuda())
    assert u.shape == (64, 1023, 28) and s.shape == (64, 28) and vt.shape == (64, 28, 28)
    torch.testing.assert_close((u * s[..., None, :]) @ vt, tall.cuda(), rtol=1e-10, atol=1e-10)
    big = torch.randn(2, 300, 300, generator=gen, dtype=torch.float64).cuda()
    assert not _small_linalg._on_host(big)  # large problems stay on the device

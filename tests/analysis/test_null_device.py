"""The nulls on a GPU (issue 26): the same surrogates (drawn from one CPU generator, then moved), batched
on the device, give the CPU's verdicts. Skipped without CUDA; ``benchmarks/bench_verdicts.py --device
cuda`` times it when a GPU is lent."""

from __future__ import annotations

import pytest
import torch

import pos_geometry as pg

pytestmark = pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA device")


@pytest.mark.slow
def test_gpu_and_cpu_give_the_same_verdicts(gpt2_wpe):
    cpu = pg.analyze(torch.from_numpy(gpt2_wpe), n_surrogates=99)
    gpu = pg.analyze(torch.from_numpy(gpt2_wpe).to("cuda"), n_surrogates=99)
    assert gpu.pca.components_.device.type == "cuda"
    assert gpu.helix.verdict == cpu.helix.verdict
    step = 1 / 100  # one surrogate either way: float32 kernels may order sums differently
    for a, b in zip(cpu.helix.tests, gpu.helix.tests, strict=True):
        assert abs(a.p_value - b.p_value) <= step + 1e-12
    assert [(p.series, round(p.period)) for p in cpu.periodicity.dominant_periods] == [
        (p.series, round(p.period)) for p in gpu.periodicity.dominant_periods
    ]
    assert gpu.recurrence.status == cpu.recurrence.status

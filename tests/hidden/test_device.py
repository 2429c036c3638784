"""Device and batching at the edges: ``device="auto"``, progress reports, and CPU vs CUDA (when present)."""

from __future__ import annotations

import copy

import numpy as np
import pytest
import torch

import pos_geometry as pg
from pos_geometry._device import resolve_device


def test_auto_device_loads_where_resolve_device_says_and_progress_counts_every_context(tiny_gpt2, tmp_path):
    tiny_gpt2.save_pretrained(tmp_path / "model")
    seen = []
    res = pg.hidden_positions(
        tmp_path / "model", n_sequences=7, seq_len=12, layers=[1], batch_size=3,
        attention=True, progress=lambda done, total: seen.append((done, total)),
    )  # fmt: skip
    assert seen == [(3, 7), (6, 7), (7, 7)]  # one report per batch of the single pass
    assert res.grand_mean.device.type == "cpu" and res.attention.layers == (1,)
    assert res.provenance.config_dict["n_sequences"] == 7
    assert resolve_device("auto").type in ("cuda", "mps", "cpu")


def test_default_batch_fills_1024_tokens_on_a_cpu(tiny_gpt2):
    seen = []
    pg.hidden_positions(
        tiny_gpt2, n_sequences=40, seq_len=100, layers=[0], progress=lambda d, t: seen.append(d)
    )
    assert seen == [10, 20, 30, 40]  # 1024 // 100 = 10 contexts per pass


@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA device")
def test_cpu_and_cuda_give_the_same_results(tiny_gpt2, tiny_llama):
    tokens = np.random.default_rng(7).integers(0, 50, size=(6, 32))
    for model in (tiny_gpt2, tiny_llama((1, 0, 2, 8.0))):
        on_cpu = pg.hidden_positions(model, tokens, batch_size=4, attention=True)
        gpu_model = copy.deepcopy(model).to("cuda")
        on_gpu = pg.hidden_positions(gpu_model, tokens, batch_size=4, attention=True, device="cuda")
        for layer in on_cpu.layers:
            np.testing.assert_allclose(
                on_gpu.positional[layer].numpy(), on_cpu.positional[layer].numpy(), atol=1e-4, rtol=1e-4
            )
        for name, values in on_cpu.metrics.items():
            np.testing.assert_allclose(on_gpu.metrics[name], values, rtol=1e-3, atol=1e-5, err_msg=name)
        np.testing.assert_allclose(
            on_gpu.attention.mean_logit, on_cpu.attention.mean_logit, rtol=1e-3, atol=1e-4
        )
        np.testing.assert_allclose(
            on_gpu.attention.mean_probability, on_cpu.attention.mean_probability, rtol=1e-3, atol=1e-5
        )

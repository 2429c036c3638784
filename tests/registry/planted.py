"""Helpers for planted-plane tests (registered by conftest.py as ``_pos_geometry_tests_planted``).

``logit_period(model, index, head, n)``: the period, in positions, of a head's log-attention over the keys of
the last query of ``n`` identical tokens (the best single sinusoid on a grid); ``index`` counts the attention
maps the model returns (hybrid models return one per attention layer only).
``qwen3_next_config(vocab_size)``: a tiny Qwen3-Next config (three linear-attention layers, one gated-query
attention layer, rotary_dim 8 of head_dim 16).
"""

from __future__ import annotations

import math

import numpy as np
import torch
import transformers


def logit_period(model, index: int, head: int, n: int, dtype: torch.dtype = torch.float64) -> float:
    with torch.no_grad():
        out = model.to(dtype)(torch.full((1, n), 7), output_attentions=True)
    y = torch.log(out.attentions[index][0, head, n - 1].double()).flip(0).numpy()
    t, y = np.arange(n), y - y.mean()
    best, period = -1.0, math.nan
    for p in np.geomspace(3.0, 2.0 * n, 3000):
        basis = np.stack([np.cos(2 * np.pi * t / p), np.sin(2 * np.pi * t / p)], 1)
        coef, *_ = np.linalg.lstsq(basis, y, rcond=None)
        share = 1 - np.sum((y - basis @ coef) ** 2) / np.sum(y**2)
        if share > best:
            best, period = share, p
    return period


def qwen3_next_config(vocab_size: int = 64):
    return transformers.AutoConfig.for_model(
        "qwen3_next", hidden_size=64, intermediate_size=64, num_attention_heads=4, num_key_value_heads=2,
        head_dim=16, num_hidden_layers=4, vocab_size=vocab_size, partial_rotary_factor=0.5, linear_num_value_heads=2,
        linear_num_key_heads=2, linear_key_head_dim=16, linear_value_head_dim=16, num_experts=2,
        num_experts_per_tok=2, moe_intermediate_size=32, shared_expert_intermediate_size=32,
    )  # fmt: skip

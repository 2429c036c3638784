"""Tiny causal LMs written by transformers (random weights): a learned-table GPT-2 and a rotary Llama."""

from __future__ import annotations

import numpy as np
import pytest
import torch
import transformers


@pytest.fixture(scope="session")
def tiny_gpt2(tmp_path_factory):
    config = transformers.GPT2Config(
        vocab_size=61, n_positions=48, n_embd=32, n_layer=2, n_head=4, n_inner=64,
        attn_pdrop=0.0, resid_pdrop=0.0, embd_pdrop=0.0,
    )  # fmt: skip
    torch.manual_seed(0)
    model = transformers.GPT2LMHeadModel(config).eval()
    with torch.no_grad():
        model.transformer.wpe.weight.mul_(20)  # position matters: the table is as large as the tokens
    folder = tmp_path_factory.mktemp("tiny_gpt2_lm")
    model.save_pretrained(folder)
    return folder


@pytest.fixture(scope="session")
def tiny_llama(tmp_path_factory):
    config = transformers.LlamaConfig(
        vocab_size=61, hidden_size=32, intermediate_size=64, num_hidden_layers=2, num_attention_heads=4,
        num_key_value_heads=2, max_position_embeddings=128, rope_theta=500.0,
    )  # fmt: skip
    torch.manual_seed(1)
    model = transformers.LlamaForCausalLM(config).eval()
    with torch.no_grad():
        for block in model.model.layers:  # sharp attention, so the rotation matters
            block.self_attn.q_proj.weight.mul_(8)
            block.self_attn.k_proj.weight.mul_(8)
    folder = tmp_path_factory.mktemp("tiny_llama_lm")
    model.save_pretrained(folder)
    return folder


@pytest.fixture(scope="session")
def tokens() -> np.ndarray:
    """Six contexts of 40 tokens with structure: each context repeats a random 10-token motif."""
    rng = np.random.default_rng(0)
    return np.stack([np.tile(rng.integers(0, 61, 10), 4) for _ in range(6)]).astype(np.int64)

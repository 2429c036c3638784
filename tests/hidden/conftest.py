"""Tiny transformers models (random weights) for the hidden-state and attention-by-offset tests.

``gpt2_real_wpe(n_layers)``: GPT-2 with d_model 768, a 16-token vocabulary and GPT-2 small's real
``wpe`` (from ``../shared/data/real``) written into it. ``tiny_gpt2``: d_model 64, 2 layers.
``tiny_llama(plant=(layer, head, plane, factor))``: a 2-layer Llama (head_dim 16: 8 rotation planes,
rotate-half pairing, base 10000) with one plane of one head amplified in both W_q and W_k, the rows
chosen here from the test's own reading of Llama's layout (plane i turns head dims i and i + 8).
"""

from __future__ import annotations

import numpy as np
import pytest
import torch
import transformers

HEAD_DIM = 16


def _gpt2(n_embd: int, n_layer: int, n_head: int, vocab: int, n_positions: int) -> transformers.GPT2Model:
    config = transformers.GPT2Config(
        n_embd=n_embd, n_layer=n_layer, n_head=n_head, vocab_size=vocab, n_positions=n_positions,
        bos_token_id=0, eos_token_id=0,
    )  # fmt: skip
    config._attn_implementation = "eager"
    torch.manual_seed(0)
    return transformers.GPT2Model(config).eval()


@pytest.fixture(scope="session")
def gpt2_real_wpe(gpt2_wpe: np.ndarray) -> transformers.GPT2Model:
    model = _gpt2(768, 1, 12, 16, 1024)
    with torch.no_grad():
        model.wpe.weight.copy_(torch.from_numpy(gpt2_wpe))
    return model


@pytest.fixture(scope="session")
def tiny_gpt2() -> transformers.GPT2Model:
    return _gpt2(64, 2, 4, 50, 128)


def llama(plant: tuple[int, int, int, float] | None = None) -> transformers.LlamaModel:
    config = transformers.LlamaConfig(
        hidden_size=64, intermediate_size=128, num_attention_heads=4, num_key_value_heads=2,
        num_hidden_layers=2, vocab_size=50, max_position_embeddings=256,
    )  # fmt: skip
    config._attn_implementation = "eager"
    torch.manual_seed(0)
    model = transformers.LlamaModel(config).eval()
    if plant is not None:
        layer, head, plane, factor = plant
        attn = model.layers[layer].self_attn
        dims = torch.tensor([plane, plane + HEAD_DIM // 2])
        kv_head = head // 2  # 4 query heads share 2 key heads
        with torch.no_grad():
            attn.q_proj.weight[head * HEAD_DIM + dims] *= factor
            attn.k_proj.weight[kv_head * HEAD_DIM + dims] *= factor
    return model


@pytest.fixture
def tiny_llama():
    return llama

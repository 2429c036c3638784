"""Tiny rotary models built with transformers (random weights), for the atlas and role-reading tests.

``tiny_model(arch, directory, plant=None) -> (model, directory)`` builds a 2-layer model of one
of :data:`ARCHS`, optionally amplifies one rotation plane of one head (``plant=(layer, head,
plane, factor)``, rows chosen with the test's own knowledge of each architecture's pairing
convention and weight layout), and saves it with ``save_pretrained``.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pytest
import torch
import transformers

ARCHS = ("llama", "mistral", "gpt_neox", "gptj", "phi3")
_SMALL = {"vocab_size": 50, "num_hidden_layers": 2}


def _config(arch: str) -> transformers.PretrainedConfig:
    if arch == "llama":  # head_dim 16: 8 planes, wavelengths 6.3 .. 353 (base 10000)
        return transformers.LlamaConfig(
            hidden_size=64,
            intermediate_size=128,
            num_attention_heads=4,
            max_position_embeddings=256,
            **_SMALL,
        )
    if arch == "mistral":  # grouped-query: 4 query heads share 2 key heads
        return transformers.MistralConfig(
            hidden_size=64, intermediate_size=128, num_attention_heads=4, num_key_value_heads=2,
            max_position_embeddings=256, **_SMALL,
        )  # fmt: skip
    if arch == "gpt_neox":  # head_dim 32, 25% rotary: 4 planes, wavelengths 6.3, 19.9, 62.8, 199 (base 100)
        return transformers.GPTNeoXConfig(
            hidden_size=128, intermediate_size=256, num_attention_heads=4, rotary_pct=0.25,
            rope_parameters={"rope_type": "default", "rope_theta": 100.0}, max_position_embeddings=256, **_SMALL,
        )  # fmt: skip
    if arch == "gptj":  # head_dim 16, rotary_dim 8 interleaved: 4 planes, wavelengths 6.3, 62.8, ...
        return transformers.GPTJConfig(
            n_embd=64, n_head=4, rotary_dim=8, n_positions=256, vocab_size=50, n_layer=2
        )
    if arch == "phi3":  # fused qkv_proj in blocks, grouped-query
        return transformers.Phi3Config(
            hidden_size=64, intermediate_size=128, num_attention_heads=4, num_key_value_heads=2,
            max_position_embeddings=256, pad_token_id=0, **_SMALL,
        )  # fmt: skip
    raise ValueError(arch)


def plane_rows(arch: str, config, head: int, plane: int, kv: bool) -> tuple[torch.Tensor, str]:
    """Rows of the projection weight holding (head, plane), and which weight (the test's own reading)."""
    n_heads = config.num_attention_heads
    head_dim = config.hidden_size // n_heads
    if arch == "gptj":
        dims = [2 * plane, 2 * plane + 1]  # rotate_every_two
    else:
        # transformers 5 keeps GPT-NeoX's rotary_pct as rope_parameters["partial_rotary_factor"]
        fraction = (config.rope_parameters or {}).get("partial_rotary_factor", 1.0)
        rot = int(head_dim * fraction)
        dims = [plane, plane + rot // 2]  # rotate_half
    if arch == "gpt_neox":  # view(heads, 3 * head_dim): [q_h | k_h | v_h]
        base = head * 3 * head_dim + (head_dim if kv else 0)
        return torch.tensor(dims) + base, "qkv"
    if arch == "phi3":  # [all q | all k | all v]
        n_kv = config.num_key_value_heads
        group = head // (n_heads // n_kv)
        base = n_heads * head_dim + group * head_dim if kv else head * head_dim
        return torch.tensor(dims) + base, "qkv"
    n_kv = getattr(config, "num_key_value_heads", n_heads) or n_heads
    group = head // (n_heads // n_kv) if kv else head
    return torch.tensor(dims) + group * head_dim, "k" if kv else "q"


def attention_module(model, arch: str, layer: int):
    if arch == "gpt_neox":
        return model.gpt_neox.layers[layer].attention
    if arch == "gptj":
        return model.transformer.h[layer].attn
    return model.model.layers[layer].self_attn


def _weights(attn, arch: str) -> dict[str, torch.Tensor]:
    if arch == "gpt_neox":
        return {"qkv": attn.query_key_value.weight}
    if arch == "phi3":
        return {"qkv": attn.qkv_proj.weight}
    return {"q": attn.q_proj.weight, "k": attn.k_proj.weight}


def _tiny_model(arch: str, directory: Path, plant: tuple[int, int, int, float] | None = None):
    config = _config(arch)
    config._attn_implementation = "eager"
    torch.manual_seed(0)
    model = transformers.AutoModelForCausalLM.from_config(config)
    if plant is not None:
        layer, head, plane, factor = plant
        weights = _weights(attention_module(model, arch, layer), arch)
        with torch.no_grad():
            for kv in (False, True):
                rows, which = plane_rows(arch, config, head, plane, kv)
                weights[which][rows] *= factor
    model.save_pretrained(directory)
    return model, directory


@pytest.fixture
def tiny_model() -> Callable:
    return _tiny_model


@pytest.fixture
def attention_of() -> Callable:
    """``attention_of(model, arch, layer)``: the attention module of that layer."""
    return attention_module

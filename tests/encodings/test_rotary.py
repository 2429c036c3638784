"""Rotary tables against transformers' own rotary modules, config parsing (v4/v5), and errors."""

from __future__ import annotations

import math

import pytest
import torch
import transformers
from transformers.models.gpt_neox.modeling_gpt_neox import GPTNeoXRotaryEmbedding
from transformers.models.mistral.modeling_mistral import MistralRotaryEmbedding

from pos_geometry.encodings import inverse_frequencies, rotary_embedding, rotary_params, rotary_table
from pos_geometry.errors import InvalidArgumentError
from pos_geometry.registry import get_spec

PYTHIA_LIKE = {
    "hidden_size": 512,
    "num_attention_heads": 8,
    "rotary_pct": 0.25,
    "rotary_emb_base": 10000,
    "max_position_embeddings": 2048,
}
MISTRAL_LIKE = {
    "hidden_size": 4096,
    "num_attention_heads": 32,
    "rope_theta": 1000000.0,
    "max_position_embeddings": 32768,
}

# The published config.json files (as served by the hub) the registry rows must reproduce.
PYTHIA_70M_CONFIG_JSON = {
    "architectures": ["GPTNeoXForCausalLM"],
    "bos_token_id": 0,
    "eos_token_id": 0,
    "hidden_act": "gelu",
    "hidden_size": 512,
    "initializer_range": 0.02,
    "intermediate_size": 2048,
    "layer_norm_eps": 1e-05,
    "max_position_embeddings": 2048,
    "model_type": "gpt_neox",
    "num_attention_heads": 8,
    "num_hidden_layers": 6,
    "rotary_emb_base": 10000,
    "rotary_pct": 0.25,
    "tie_word_embeddings": False,
    "torch_dtype": "float16",
    "transformers_version": "4.24.0",
    "use_cache": True,
    "use_parallel_residual": True,
    "vocab_size": 50304,
}
MISTRAL_V01_CONFIG_JSON = {
    "architectures": ["MistralForCausalLM"],
    "bos_token_id": 1,
    "eos_token_id": 2,
    "hidden_act": "silu",
    "hidden_size": 4096,
    "initializer_range": 0.02,
    "intermediate_size": 14336,
    "max_position_embeddings": 32768,
    "model_type": "mistral",
    "num_attention_heads": 32,
    "num_hidden_layers": 32,
    "num_key_value_heads": 8,
    "rms_norm_eps": 1e-05,
    "rope_theta": 10000.0,
    "sliding_window": 4096,
    "tie_word_embeddings": False,
    "torch_dtype": "bfloat16",
    "transformers_version": "4.34.0",
    "use_cache": True,
    "vocab_size": 32000,
}


def _reference(module_cls, config, n: int) -> tuple[torch.Tensor, torch.Tensor]:
    """transformers' cos/sin for positions 0..n-1, layout cat(freqs, freqs): (n, rotary_dim) each."""
    module = module_cls(config)
    x = torch.zeros(1, n, 4, dtype=torch.float32)
    cos, sin = module(x, torch.arange(n)[None])
    return cos[0].double(), sin[0].double()


@pytest.mark.parametrize(
    ("module_cls", "config_cls", "fields"),
    [
        (GPTNeoXRotaryEmbedding, transformers.GPTNeoXConfig, PYTHIA_LIKE),
        (MistralRotaryEmbedding, transformers.MistralConfig, MISTRAL_LIKE),
    ],
    ids=["gpt_neox-pythia", "mistral-theta1e6"],
)
def test_matches_transformers_rotary_module(module_cls, config_cls, fields):
    config = config_cls(**fields)
    params = rotary_params(fields)
    n = fields["max_position_embeddings"]
    ref_cos, ref_sin = _reference(module_cls, config, n)
    half = params.rotary_dim // 2
    assert ref_cos.shape == (n, params.rotary_dim)
    assert torch.equal(ref_cos[:, :half], ref_cos[:, half:])  # transformers' layout is cat(freqs, freqs)
    ours = rotary_table(params, dtype=torch.float64)
    # transformers computes the angle p·θ in float32: its error grows like p · 2^-24 rad.
    atol = 4 * n * 2.0**-24
    torch.testing.assert_close(ours[:, 0::2], ref_cos[:, :half], rtol=0, atol=atol)
    torch.testing.assert_close(ours[:, 1::2], ref_sin[:, :half], rtol=0, atol=atol)
    torch.testing.assert_close(ours[:64, 0::2], ref_cos[:64, :half], rtol=0, atol=1e-5)
    inv_ref = module_cls(config).inv_freq.double()
    torch.testing.assert_close(inverse_frequencies(params), inv_ref, rtol=1e-6, atol=0)


def test_v4_and_v5_configs_give_identical_tables():
    v4 = dict(PYTHIA_LIKE)
    v5 = {
        "hidden_size": 512,
        "num_attention_heads": 8,
        "max_position_embeddings": 2048,
        "rope_parameters": {"rope_theta": 10000, "partial_rotary_factor": 0.25, "rope_type": "default"},
    }
    from_transformers = transformers.GPTNeoXConfig(**PYTHIA_LIKE).to_dict()  # what v5 writes to config.json
    assert "rope_parameters" in from_transformers
    tables = [rotary_table(rotary_params(c)) for c in (v4, v5, from_transformers)]
    assert torch.equal(tables[0], tables[1]) and torch.equal(tables[0], tables[2])
    m_v4 = rotary_table(rotary_params(MISTRAL_LIKE), 512)
    m_v5 = rotary_table(rotary_params(transformers.MistralConfig(**MISTRAL_LIKE).to_dict()), 512)
    assert torch.equal(m_v4, m_v5)


@pytest.mark.parametrize(
    ("name", "config_json"),
    [("pythia-70m", PYTHIA_70M_CONFIG_JSON), ("mistral-7b-v0.1", MISTRAL_V01_CONFIG_JSON)],
)
def test_table_from_registry_row_equals_table_from_config_json(name, config_json):
    spec = get_spec(name)
    from_row = rotary_embedding(spec.rotary_config, model_id=spec.name, source="model table")
    from_json = rotary_embedding(config_json, model_id=spec.repo_id, revision="main")
    assert torch.equal(from_row.matrix, from_json.matrix)
    assert from_row.shape == (spec.n_positions, rotary_params(config_json).rotary_dim)
    assert from_row.provenance.source == "model table" and from_json.provenance.source == "config.json"


def test_provenance_records_exactly_the_fields_used():
    pe = rotary_embedding(PYTHIA_70M_CONFIG_JSON, model_id="EleutherAI/pythia-70m", revision="step1000")
    assert pe.kind == "rotary" and pe.provenance.revision == "step1000" and pe.provenance.tensor_key is None
    assert pe.provenance.config_dict == {
        "rotary_emb_base": 10000,
        "hidden_size": 512,
        "num_attention_heads": 8,
        "rotary_pct": 0.25,
        "max_position_embeddings": 2048,
    }
    v5 = rotary_embedding(
        {
            "head_dim": 64,
            "max_position_embeddings": 16,
            "rope_parameters": {"rope_theta": 500000.0, "rope_type": "default"},
        },
        model_id="x",
    )
    assert v5.provenance.config_dict == {
        "rope_parameters.rope_theta": 500000.0,
        "head_dim": 64,
        "max_position_embeddings": 16,
        "partial_rotary_factor (default)": 1.0,
    }
    assert v5.shape == (16, 64)


def test_table_structure():
    params = rotary_params({"head_dim": 32, "rope_theta": 100.0, "max_position_embeddings": 40})
    inv = inverse_frequencies(params)
    assert inv.dtype == torch.float64 and inv.shape == (16,)
    assert inv[0] == 1.0 and inv[-1].item() == pytest.approx(100.0 ** (-30 / 32), rel=1e-15)
    assert bool((inv[1:] < inv[:-1]).all())
    t = rotary_table(params, 100, dtype=torch.float64)
    assert t.shape == (100, 32)
    assert torch.equal(t[0], torch.tensor([1.0, 0.0] * 16, dtype=torch.float64))
    norms = t[:, 0::2] ** 2 + t[:, 1::2] ** 2  # each column pair is a unit circle
    torch.testing.assert_close(norms, torch.ones_like(norms), rtol=0, atol=1e-12)
    assert t[7, 2 * 3 + 1].item() == pytest.approx(math.sin(7 * 100.0 ** (-6 / 32)), abs=1e-15)
    assert rotary_table(params).shape == (40, 32)
    assert rotary_table(params, 5, dtype=torch.float16).dtype == torch.float16


def test_explicit_rotary_dim_and_gptj_style_fields():
    params = rotary_params(
        {"model_type": "gptj", "n_embd": 4096, "n_head": 16, "rotary_dim": 64, "n_positions": 2048}
    )
    assert (params.head_dim, params.rotary_dim, params.max_positions, params.base) == (256, 64, 2048, 10000.0)
    assert dict(params.defaults) == {"rope_theta": 10000.0}


def test_gpt_neox_default_fraction_follows_transformers():
    cfg = {
        "model_type": "gpt_neox",
        "hidden_size": 512,
        "num_attention_heads": 8,
        "max_position_embeddings": 64,
    }
    ours = rotary_params(cfg)
    ref = GPTNeoXRotaryEmbedding(transformers.GPTNeoXConfig(**cfg)).inv_freq
    assert ours.rotary_dim == 2 * ref.numel() == 16


@pytest.mark.parametrize(
    ("config", "message"),
    [
        ({**MISTRAL_LIKE, "rope_scaling": {"type": "linear"}}, "rope_type='linear' but no factor"),
        ({**MISTRAL_LIKE, "rope_scaling": {"rope_type": "llama3", "factor": 8.0}}, "no low_freq_factor"),
        ({**MISTRAL_LIKE, "rope_scaling": {"rope_type": "su-rope", "factor": 8.0}}, "rope_type='su-rope'"),
        (
            {
                "hidden_size": 64,
                "num_attention_heads": 4,
                "max_position_embeddings": 8,
                "rope_parameters": {"rope_type": "yarn", "rope_theta": 1e4, "factor": 4.0},
                "rope_scaling": {"rope_type": "linear", "factor": 4.0},
            },
            "two rope types",
        ),
        (
            {
                "hidden_size": 64,
                "num_attention_heads": 4,
                "max_position_embeddings": 8,
                "rope_parameters": {
                    "full_attention": {"rope_theta": 1e6},
                    "sliding_attention": {"rope_theta": 1e4},
                },
            },
            "pass layer_type=",
        ),
        ({"rope_theta": 1e4, "max_position_embeddings": 8}, "head_dim"),
        ({"hidden_size": 64, "num_attention_heads": 4, "rope_theta": 1e4}, "max_position_embeddings"),
        ({**PYTHIA_LIKE, "rope_theta": 500.0}, "two different rope bases"),
        ({**PYTHIA_LIKE, "rotary_pct": 0.0}, r"fraction must be in \(0, 1\]"),
        ({**PYTHIA_LIKE, "rotary_emb_base": 0.5}, "finite number > 1"),
        ({"hidden_size": 60, "num_attention_heads": 8, "max_position_embeddings": 8}, "not divisible"),
        ({"head_dim": 10, "partial_rotary_factor": 0.5, "max_position_embeddings": 8}, "must be even"),
        ([("rope_theta", 1e4)], "mapping"),
    ],
)
def test_bad_configs_raise_clear_errors(config, message):
    with pytest.raises(InvalidArgumentError, match=message):
        rotary_params(config)


def test_n_positions_must_be_positive():
    params = rotary_params(PYTHIA_LIKE)
    with pytest.raises(InvalidArgumentError, match="n_positions"):
        rotary_table(params, 0)


def test_a_v4_gemma3_config_gives_one_labelled_table_per_layer_type(tmp_path):
    """Gemma-3 4B's config.json as published (v4 fields): local layers rotate at base 1e4, the global ones at
    1e6 with linear scaling ×8. transformers' own config class tells which layer is which."""
    import json

    import pos_geometry as pg

    config = {
        "model_type": "gemma3_text", "hidden_size": 2560, "num_attention_heads": 8, "num_key_value_heads": 4,
        "head_dim": 256, "num_hidden_layers": 34, "max_position_embeddings": 131072, "rope_theta": 1000000.0,
        "rope_local_base_freq": 10000.0, "rope_scaling": {"factor": 8.0, "rope_type": "linear"},
        "sliding_window_pattern": 6, "vocab_size": 262208,
    }  # fmt: skip
    (tmp_path / "config.json").write_text(json.dumps(config))
    with pytest.raises(InvalidArgumentError, match="pass layer_type=") as info:
        pg.load(tmp_path)
    assert "'full_attention': layers 5, 11, 17, 23, 29" in str(info.value)
    local = pg.load(tmp_path, layer_type="sliding_attention", n_positions=64)
    full = pg.load(tmp_path, layer_type="full_attention", n_positions=64)
    fields = dict(full.provenance.config)
    assert fields["layers"] == (5, 11, 17, 23, 29) and fields["rope_type"] == "linear"
    assert len(dict(local.provenance.config)["layers"]) == 29
    p = torch.arange(64, dtype=torch.float64)[:, None]
    i = torch.arange(128, dtype=torch.float64)
    expected_local = torch.cos(p * 10000.0 ** (-2 * i / 256))
    expected_full = torch.cos(p * 1000000.0 ** (-2 * i / 256) / 8)
    torch.testing.assert_close(local.matrix[:, 0::2].double(), expected_local, rtol=0, atol=1e-6)
    torch.testing.assert_close(full.matrix[:, 0::2].double(), expected_full, rtol=0, atol=1e-6)

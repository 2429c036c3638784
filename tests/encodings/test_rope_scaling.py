"""Scaled rotary frequencies against transformers' own ``ROPE_INIT_FUNCTIONS``, configs written both ways."""

from __future__ import annotations

import math

import pytest
import torch
import transformers
from transformers.modeling_rope_utils import ROPE_INIT_FUNCTIONS

from pos_geometry.encodings import inverse_frequencies, rotary_embedding, rotary_params
from pos_geometry.encodings.rope_scaling import ROPE_TYPES
from pos_geometry.errors import InvalidArgumentError

BASE = {"hidden_size": 256, "num_attention_heads": 4, "max_position_embeddings": 4096}
THETA = 500000.0
# one set of scaling parameters per rope type, chosen so every branch of each formula is used
# (llama3: high, medium and low frequencies; yarn: a ramp that is neither all 0 nor all 1)
SCALINGS = {
    "linear": {"factor": 4.0},
    "dynamic": {"factor": 2.0},
    "yarn": {"factor": 8.0, "original_max_position_embeddings": 512, "beta_fast": 16, "beta_slow": 2},
    "longrope": {
        "short_factor": [1.0 + 0.05 * i for i in range(32)],
        "long_factor": [2.0 + 0.1 * i for i in range(32)],
        "original_max_position_embeddings": 1024,
    },
    "llama3": {
        "factor": 8.0,
        "low_freq_factor": 1.0,
        "high_freq_factor": 4.0,
        "original_max_position_embeddings": 1024,
    },
}
WRITINGS = ("v5 rope_parameters", "v4 rope_scaling + type", "v4 rope_scaling + rope_type")


def _config(rope_type: str, writing: str, extra: dict | None = None) -> dict:
    params = dict(SCALINGS[rope_type])
    if writing == "v5 rope_parameters":
        return {
            **BASE,
            **(extra or {}),
            "rope_parameters": {"rope_type": rope_type, "rope_theta": THETA, **params},
        }
    key = "type" if writing.endswith("+ type") else "rope_type"
    return {**BASE, **(extra or {}), "rope_theta": THETA, "rope_scaling": {key: rope_type, **params}}


def _reference(config: dict) -> tuple[torch.Tensor, float]:
    cfg = transformers.LlamaConfig(**config)
    inv_freq, factor = ROPE_INIT_FUNCTIONS[cfg.rope_parameters["rope_type"]](cfg)
    return inv_freq.double(), float(factor)


def test_every_transformers_rope_type_is_covered():
    assert set(SCALINGS) | {"default"} == set(ROPE_TYPES)
    assert set(SCALINGS) <= set(ROPE_INIT_FUNCTIONS)


@pytest.mark.parametrize("writing", WRITINGS)
@pytest.mark.parametrize("rope_type", sorted(SCALINGS))
def test_inverse_frequencies_equal_transformers(rope_type, writing):
    config = _config(rope_type, writing)
    ref, ref_factor = _reference(config)
    params = rotary_params(config)
    ours = inverse_frequencies(params)
    assert params.rope_type == rope_type
    torch.testing.assert_close(ours, ref, rtol=2e-6, atol=0)
    assert params.attention_factor == pytest.approx(ref_factor, rel=1e-12)
    # the scaling did something: the frequencies differ from the unscaled ones (except dynamic at init)
    unscaled = THETA ** -(torch.arange(0, 64, 2, dtype=torch.float64) / 64)
    assert torch.allclose(ours, unscaled) == (rope_type == "dynamic")


@pytest.mark.parametrize(
    ("rope_type", "extra"),
    [
        ("yarn", {"mscale": 0.707, "mscale_all_dim": 1.0}),
        ("yarn", {"attention_factor": 1.3, "truncate": False}),
        ("longrope", {"factor": 4.0}),
    ],
)
def test_optional_yarn_and_longrope_fields(rope_type, extra):
    config = _config(rope_type, "v5 rope_parameters")
    config["rope_parameters"].update(extra)
    ref, ref_factor = _reference(config)
    params = rotary_params(config)
    torch.testing.assert_close(inverse_frequencies(params), ref, rtol=2e-6, atol=0)
    assert params.attention_factor == pytest.approx(ref_factor, rel=1e-12)


@pytest.mark.parametrize("rope_type", ["yarn", "longrope", "llama3"])
def test_top_level_original_max_position_embeddings_wins(rope_type):
    """Phi-3 style: a top-level original_max_position_embeddings overrides the rope dict's, as in transformers."""
    config = _config(rope_type, "v5 rope_parameters", {"original_max_position_embeddings": 2048})
    ref, ref_factor = _reference(config)
    params = rotary_params(config)
    assert params.context_length == 2048
    torch.testing.assert_close(inverse_frequencies(params), ref, rtol=2e-6, atol=0)
    assert params.attention_factor == pytest.approx(ref_factor, rel=1e-12)


def test_yarn_attention_factor_is_the_paper_value():
    params = rotary_params(_config("yarn", "v5 rope_parameters"))
    assert params.attention_factor == pytest.approx(0.1 * math.log(8.0) + 1.0)
    assert params.context_length == 512


def test_provenance_records_the_rope_type_and_attention_factor():
    pe = rotary_embedding(_config("yarn", "v4 rope_scaling + type"), model_id="toy", n_positions=16)
    cfg = pe.provenance.config_dict
    assert cfg["rope_type"] == "yarn"
    assert cfg["rope_scaling.factor"] == 8.0
    assert cfg["rope_scaling.original_max_position_embeddings"] == 512
    assert cfg["attention_factor (derived)"] == pytest.approx(0.1 * math.log(8.0) + 1.0)
    dyn = rotary_embedding(_config("dynamic", "v5 rope_parameters"), model_id="toy", n_positions=16)
    assert "unscaled" in dyn.provenance.config_dict["dynamic (built at)"]


def test_load_builds_scaled_tables_from_a_model_folder(tmp_path):
    """pos_geometry.load used to refuse scaled rope types; it now builds them, labelled."""
    import json

    import pos_geometry as pg

    config = {"model_type": "llama", **_config("llama3", "v4 rope_scaling + rope_type")}
    (tmp_path / "config.json").write_text(json.dumps(config))
    pe = pg.load(tmp_path, n_positions=64)
    ref, _ = _reference(config)
    angles = torch.arange(64, dtype=torch.float64)[:, None] * ref[None, :]
    torch.testing.assert_close(pe.matrix[:, 0::2].double(), torch.cos(angles), rtol=0, atol=2e-5)
    assert pe.provenance.config_dict["rope_type"] == "llama3"


_PHI = {"model_type": "phi3", "hidden_size": 64, "num_attention_heads": 4, "max_position_embeddings": 4096}
_LONG = {"rope_type": "longrope", "short_factor": [1.0] * 8, "long_factor": [1.0] * 8, "factor": 2.0}


@pytest.mark.parametrize(
    "scaling, words",
    [
        ({**_LONG, "original_max_position_embeddings": 1}, "between 2 and"),  # log(1) = 0 divides
        ({**_LONG, "original_max_position_embeddings": 2048, "short_factor": [1.0] * 3}, "one factor per rotation plane"),
        ({**_LONG, "original_max_position_embeddings": 2048, "attention_factor": -1.0}, "attention_factor"),
        ({"rope_type": "yarn", "factor": 2.0, "original_max_position_embeddings": 0}, "between 2 and"),
        ({"rope_type": "yarn", "factor": 2.0, "original_max_position_embeddings": 10**30}, "between 2 and"),
        ({"rope_type": "yarn", "factor": 2.0, "mscale": float("nan"), "mscale_all_dim": 1.0}, "mscale"),
        ({"rope_type": "llama3", "factor": 8.0, "low_freq_factor": 1.0, "high_freq_factor": 1.0,
          "original_max_position_embeddings": 8192}, "greater than"),
        ({"rope_type": "linear", "factor": "2"}, "finite number"),
    ],
)  # fmt: skip
def test_every_rope_field_is_checked_before_any_arithmetic(scaling, words):
    """A config whose rope fields would divide by zero or give NaN frequencies is a typed error naming the
    field, for every rope type (never a ZeroDivisionError, a NaN table or a warning)."""
    with pytest.raises(InvalidArgumentError, match=words):
        params = rotary_params({**_PHI, "rope_scaling": scaling})
        params.attention_factor  # noqa: B018

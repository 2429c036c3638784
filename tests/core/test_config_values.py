"""Config values are checked where the config is read: a context length that is a string, Infinity, NaN or a
list, a head count of 0 in a GGUF header, a ``layer_types`` of unknown names or the wrong length; each is one
:class:`CheckpointFormatError` naming the field (and, for a GGUF, its metadata key), never an untyped error
from deep inside an analysis or from transformers."""

from __future__ import annotations

import json
import math

import _pos_geometry_tests_gguf_files as gguf_files
import pytest

import pos_geometry as pg
from pos_geometry._config_values import check_config_values
from pos_geometry.errors import CheckpointFormatError

GOOD = {"model_type": "llama", "num_hidden_layers": 2, "max_position_embeddings": 128, "hidden_size": 32,
        "num_attention_heads": 4, "rope_theta": 500.0, "sliding_window": None}  # fmt: skip


@pytest.mark.parametrize(
    ("field", "value"),
    [
        ("max_position_embeddings", "2048"),
        ("max_position_embeddings", math.inf),
        ("max_position_embeddings", math.nan),
        ("max_position_embeddings", [2048]),
        ("max_position_embeddings", 0),
        ("max_position_embeddings", True),
        ("num_attention_heads", 0),
        ("hidden_size", 31.5),
        ("rope_theta", -1.0),
        ("rope_theta", math.inf),
        ("rope_theta", "10000"),
        ("sliding_window", -4),
        ("partial_rotary_factor", 1.5),
        ("layer_types", ["full_attention"]),  # 1 entry for 2 layers
        ("layer_types", ["full_attention", "bogus_attention"]),
        ("layer_types", "full_attention"),
        ("rope_scaling", {"rope_type": "\x1b[31mlinear", "factor": 2.0}),
        ("rope_parameters", {"full_attention": {"rope_type": "<b>default</b>"}}),
    ],
)
def test_a_malformed_value_is_refused_naming_the_field(field, value):
    with pytest.raises(CheckpointFormatError, match=f"'{field}' must be") as caught:
        check_config_values({**GOOD, field: value}, "config.json")
    assert "config.json" in str(caught.value) and "Fix the config" in str(caught.value)


def test_well_formed_values_pass():
    check_config_values(GOOD, "config.json")
    check_config_values({**GOOD, "max_position_embeddings": 2048.0, "head_dim": None, "sliding_window": 0,
                         "layer_types": ["sliding_attention", "full_attention"]}, "config.json")  # fmt: skip


def _folder(tmp_path, **fields):
    import transformers

    model = transformers.LlamaForCausalLM(
        transformers.LlamaConfig(vocab_size=61, hidden_size=32, intermediate_size=64, num_hidden_layers=2,
                                 num_attention_heads=4, num_key_value_heads=2, max_position_embeddings=128)
    )  # fmt: skip
    model.save_pretrained(tmp_path)
    config = json.loads((tmp_path / "config.json").read_text())
    config.update(fields)
    (tmp_path / "config.json").write_text(json.dumps(config))
    return tmp_path


@pytest.mark.parametrize("value", ["2048", [2048], 0])
def test_load_and_the_card_refuse_a_folder_whose_context_is_not_a_number(tmp_path, value):
    folder = _folder(tmp_path, max_position_embeddings=value)
    with pytest.raises(CheckpointFormatError, match="'max_position_embeddings' must be a whole number"):
        pg.load(folder)
    with pytest.raises(CheckpointFormatError, match="'max_position_embeddings'"):
        pg.card(folder, progress=False, fast=True, device="cpu")


def test_a_folder_whose_layer_types_have_the_wrong_length_is_refused_before_transformers(tmp_path):
    folder = _folder(tmp_path, layer_types=["full_attention"] * 3)
    from pos_geometry.hidden.opening import open_model

    with pytest.raises(CheckpointFormatError, match="'layer_types' must be a list with one entry per layer"):
        pg.load(folder)
    with pytest.raises(CheckpointFormatError, match="'layer_types'"):
        open_model(folder, device="cpu")


def test_a_gguf_whose_head_count_is_zero_is_refused_naming_its_key(tmp_path):
    path = gguf_files.tiny_llama_gguf(tmp_path / "zero.gguf", heads=0)
    with pytest.raises(CheckpointFormatError, match=r"'llama\.attention\.head_count' \(the config's"):
        pg.load(path)
    with pytest.raises(CheckpointFormatError, match="head_count"):
        pg.rotary_atlas(path)
    pe = pg.load(
        gguf_files.tiny_llama_gguf(tmp_path / "two.gguf", heads=2)
    )  # the same file with two heads loads
    assert pe.kind == "rotary" and pe.matrix.shape == (64, 8)

"""The per-``model_type`` tables (learned row offsets, sinusoidal models) against transformers' own code.

The oracle is transformers itself: the ``offset`` of its ``*LearnedPositionalEmbedding`` modules,
the first position row its RoBERTa-style embeddings compute, and which modules it builds for
positions (a ``*SinusoidalPositionalEmbedding`` is a formula, not a learned table).
"""

from __future__ import annotations

import importlib

import pytest
import torch
import transformers
from transformers.models.auto.configuration_auto import CONFIG_MAPPING, model_type_to_module_name

from pos_geometry.errors import InvalidArgumentError, NoLearnedTableError
from pos_geometry.registry import all_specs, kind_from_config, row_offset_from_config
from pos_geometry.registry.lookup import (
    LEARNED_MODEL_TYPES,
    ROW_OFFSET_BY_MODEL_TYPE,
    SINUSOIDAL_MODEL_TYPES,
)


def _modeling(model_type: str):
    package = model_type_to_module_name(model_type)
    leaf = "data2vec_text" if model_type == "data2vec-text" else package
    return importlib.import_module(f"transformers.models.{package}.modeling_{leaf}")


def _position_ids_function(module):
    """transformers' RoBERTa-style ``create_position_ids_from_input_ids`` (a module function or a static
    method of the ``*Embeddings`` class), or None when the model numbers positions from 0."""
    if callable(getattr(module, "create_position_ids_from_input_ids", None)):
        return module.create_position_ids_from_input_ids
    for name in dir(module):
        fn = getattr(getattr(module, name), "create_position_ids_from_input_ids", None)
        if name.endswith("Embeddings") and callable(fn):
            return fn
    return None


@pytest.mark.parametrize("model_type", sorted(LEARNED_MODEL_TYPES))
def test_row_offset_of_every_learned_model_type_matches_transformers(model_type):
    module = _modeling(model_type)
    learned = [getattr(module, n) for n in dir(module) if n.endswith("LearnedPositionalEmbedding")]
    config = CONFIG_MAPPING[model_type]().to_dict()
    if learned:  # fairseq-style: position p is row p + offset
        assert row_offset_from_config(config) == learned[0](10, 4).offset == 2
    elif (position_ids := _position_ids_function(module)) is not None:  # start at padding_idx + 1
        pad = config["pad_token_id"]
        first = position_ids(torch.tensor([[pad + 5, pad + 6]]), pad)
        assert row_offset_from_config(config) == int(first[0, 0]) == pad + 1
    else:
        assert row_offset_from_config(config) == 0
        assert model_type not in ROW_OFFSET_BY_MODEL_TYPE


def test_roberta_offset_follows_the_padding_index():
    config = transformers.RobertaConfig(pad_token_id=3).to_dict()
    assert row_offset_from_config(config) == 4
    assert row_offset_from_config({"model_type": "roberta"}) == 2  # transformers' default pad_token_id 1
    with pytest.raises(InvalidArgumentError, match="pad_token_id must be a non-negative integer"):
        row_offset_from_config({"model_type": "roberta", "pad_token_id": "one"})
    with pytest.raises(InvalidArgumentError, match="mapping"):
        row_offset_from_config(["opt"])  # type: ignore[arg-type]


def test_the_model_table_rows_agree_with_the_model_type_rule():
    """Each row names its config's model_type; its kind and row offset follow from transformers' config."""
    for spec in all_specs():
        assert spec.model_type in CONFIG_MAPPING, spec.name
        config = CONFIG_MAPPING[spec.model_type]().to_dict()
        assert kind_from_config(config) == spec.kind, spec.name
        if spec.kind == "learned":
            assert spec.row_offset == row_offset_from_config(config), spec.name
    assert {s.row_offset for s in all_specs() if s.family in ("opt", "roberta")} == {2}


@pytest.mark.parametrize("model_type", sorted(SINUSOIDAL_MODEL_TYPES))
def test_sinusoidal_models_have_no_learned_table(model_type):
    module = _modeling(model_type)
    assert any(n.endswith("SinusoidalPositionalEmbedding") for n in dir(module))
    assert not any(n.endswith("LearnedPositionalEmbedding") for n in dir(module))
    with pytest.raises(NoLearnedTableError, match=r"sinusoidal.*pos_geometry\.sinusoidal"):
        kind_from_config(CONFIG_MAPPING[model_type]().to_dict())


def test_xglm_checkpoints_really_store_no_positional_table():
    config = transformers.XGLMConfig(
        vocab_size=50, d_model=16, ffn_dim=32, num_layers=1, attention_heads=2, max_position_embeddings=32
    )
    keys = transformers.XGLMForCausalLM(config).state_dict().keys()
    assert not [k for k in keys if "position" in k]
    with pytest.raises(NoLearnedTableError):
        kind_from_config(config.to_dict())


def test_learned_model_types_build_no_sinusoidal_module():
    for model_type in LEARNED_MODEL_TYPES:
        assert not any(n.endswith("SinusoidalPositionalEmbedding") for n in dir(_modeling(model_type))), (
            model_type
        )

"""Shard indexes: which shard holds the table; malformed or hostile indexes are refused."""

from __future__ import annotations

import json

import pytest

from pos_geometry.errors import CheckpointFormatError, MissingTensorError
from pos_geometry.sources.sharded import WEIGHT_FILES, parse_index, shard_for

INDEX = {
    "metadata": {"total_size": 123},
    "weight_map": {
        "transformer.wte.weight": "model-00001-of-00002.safetensors",
        "transformer.wpe.weight": "model-00002-of-00002.safetensors",
        "transformer.h.0.ln_1.weight": "model-00001-of-00002.safetensors",
    },
}


def test_weight_files_prefer_safetensors_then_single_files() -> None:
    assert WEIGHT_FILES == (
        "model.safetensors",
        "model.safetensors.index.json",
        "pytorch_model.bin",
        "pytorch_model.bin.index.json",
    )


def test_shard_for_position_token_and_explicit_key() -> None:
    assert shard_for(INDEX) == ("transformer.wpe.weight", "model-00002-of-00002.safetensors")
    assert shard_for(INDEX, "token") == ("transformer.wte.weight", "model-00001-of-00002.safetensors")
    assert shard_for(INDEX, key="transformer.h.0.ln_1.weight")[1] == "model-00001-of-00002.safetensors"


def test_shard_for_without_a_positional_key_lists_the_weight_map() -> None:
    index = {"weight_map": {"model.embed_tokens.weight": "a.safetensors", "lm_head.weight": "b.safetensors"}}
    with pytest.raises(MissingTensorError, match=r"model\.embed_tokens\.weight") as info:
        shard_for(index, source="mistral/model.safetensors.index.json")
    assert "mistral/model.safetensors.index.json" in str(info.value)


@pytest.mark.parametrize(
    "index",
    [{}, {"weight_map": ["a"]}, {"weight_map": "x"}, {"weight_map": {1: "a.safetensors"}}],
)
def test_malformed_index_is_a_format_error(index: dict) -> None:
    with pytest.raises(CheckpointFormatError, match="weight_map"):
        shard_for(index)


@pytest.mark.parametrize("shard", ["../../etc/passwd", "/etc/passwd", "a\\..\\b", "", 3])
def test_shard_names_must_stay_inside_the_directory(shard: object) -> None:
    index = {"weight_map": {"transformer.wpe.weight": shard}}
    with pytest.raises(CheckpointFormatError, match="inside the model directory"):
        shard_for(index)


def test_parse_index_rejects_non_json_and_non_objects() -> None:
    assert parse_index(json.dumps(INDEX).encode()) == INDEX
    with pytest.raises(CheckpointFormatError, match="not valid JSON"):
        parse_index(b"{not json", "x.index.json")
    with pytest.raises(CheckpointFormatError, match="JSON object"):
        parse_index(b"[1, 2]")

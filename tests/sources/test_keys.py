"""Key selection: every known naming variant, preference order, suffix fallback, strict keys, errors."""

from __future__ import annotations

import pytest

from pos_geometry.errors import InvalidArgumentError, MissingTensorError
from pos_geometry.sources.keys import POSITION_KEYS, TOKEN_KEYS, find_key, select_key

LAYER_KEYS = ("h.0.attn.c_attn.weight", "h.0.ln_1.weight", "ln_f.weight", "lm_head.weight")


@pytest.mark.parametrize(
    "key",
    [
        "wpe.weight",
        "transformer.wpe.weight",  # GPT-2 LM head model, GPT-Neo
        "model.decoder.embed_positions.weight",  # OPT
        "decoder.embed_positions.weight",
        "embeddings.position_embeddings.weight",
        "bert.embeddings.position_embeddings.weight",
        "roberta.embeddings.position_embeddings.weight",
        "transformer.positions_embed.weight",  # GPT-1
        "positions_embed.weight",
    ],
)
def test_each_known_position_key_is_found_among_other_tensors(key: str) -> None:
    keys = (*LAYER_KEYS, "transformer.wte.weight", key, "embeddings.token_type_embeddings.weight")
    assert key in POSITION_KEYS
    assert find_key(keys) == key


@pytest.mark.parametrize(
    ("key", "tokens"),
    [
        ("transformer.wte.weight", "transformer.wte.weight"),
        ("model.decoder.embed_tokens.weight", "model.decoder.embed_tokens.weight"),
        ("gpt_neox.embed_in.weight", "gpt_neox.embed_in.weight"),
        ("model.embed_tokens.weight", "model.embed_tokens.weight"),
        ("bert.embeddings.word_embeddings.weight", "bert.embeddings.word_embeddings.weight"),
    ],
)
def test_token_tables(key: str, tokens: str) -> None:
    keys = (*LAYER_KEYS, key, "transformer.wpe.weight")
    assert tokens in TOKEN_KEYS
    assert find_key(keys, "token") == tokens


def test_preference_order_is_the_order_of_position_keys() -> None:
    both = ("transformer.wpe.weight", "wpe.weight")
    assert find_key(both) == "wpe.weight"
    assert POSITION_KEYS.index("wpe.weight") < POSITION_KEYS.index("transformer.wpe.weight")
    # an encoder-decoder checkpoint: the decoder's table is the preferred one
    assert find_key(("model.encoder.embed_positions.weight", "model.decoder.embed_positions.weight")) == (
        "model.decoder.embed_positions.weight"
    )


def test_preferred_is_a_hint_taken_when_present() -> None:
    keys = ("transformer.wpe.weight", "my.custom.table")
    assert find_key(keys, preferred="my.custom.table") == "my.custom.table"
    assert find_key(keys, preferred="absent.key") == "transformer.wpe.weight"


def test_suffix_fallback_handles_wrapped_checkpoints_and_picks_the_shortest() -> None:
    # nanoGPT-style training checkpoints: {"model": state_dict} and torch.compile's _orig_mod prefix
    assert (
        find_key(("model._orig_mod.transformer.wpe.weight", "model.x"))
        == "model._orig_mod.transformer.wpe.weight"
    )
    keys = ("teacher.student.transformer.wpe.weight", "student.transformer.wpe.weight")
    assert find_key(keys) == "student.transformer.wpe.weight"
    assert find_key(("a.embed_positions.weight", "b.embed_positions.weight")) == "a.embed_positions.weight"


@pytest.mark.parametrize("name", ["wpe", "pos_embed", "position_embeddings", "model.positional_embedding"])
def test_bare_table_names_as_in_npz_files(name: str) -> None:
    assert find_key(("other", "wte", name)) == name
    assert find_key(("other", "wte", name), "token") == "wte"


def test_names_must_match_a_whole_component() -> None:
    with pytest.raises(MissingTensorError):
        find_key(("layers.0.mywpe.weight", "newpe", "rotary_emb.inv_freq"))


def test_missing_table_lists_the_keys_the_checkpoint_has() -> None:
    neox = (
        "embed_out.weight",
        "gpt_neox.embed_in.weight",
        "gpt_neox.layers.0.attention.query_key_value.weight",
    )
    with pytest.raises(MissingTensorError) as info:
        find_key(neox, source="EleutherAI/pythia-70m/model.safetensors")
    msg = str(info.value)
    assert info.value.keys == neox
    assert "EleutherAI/pythia-70m/model.safetensors" in msg
    assert all(k in msg for k in neox)
    assert "rotary" in msg and "key=" in msg


def test_missing_message_is_bounded_for_huge_checkpoints() -> None:
    keys = tuple(f"layers.{i}.weight" for i in range(500))
    with pytest.raises(MissingTensorError) as info:
        find_key(keys)
    msg = str(info.value)
    assert "layers.19.weight" in msg and "layers.20.weight" not in msg
    assert "480 more" in msg
    assert len(info.value.keys) == 500


def test_select_key_is_strict_about_an_explicit_key() -> None:
    keys = ("transformer.wpe.weight", "transformer.wte.weight")
    assert select_key(keys) == "transformer.wpe.weight"
    assert select_key(keys, "token") == "transformer.wte.weight"
    assert select_key(keys, key="transformer.wte.weight") == "transformer.wte.weight"
    with pytest.raises(MissingTensorError, match=r"no tensor 'wpe\.weight'") as info:
        select_key(keys, key="wpe.weight", source="f.safetensors")
    assert "transformer.wpe.weight" in str(info.value)


def test_which_is_validated() -> None:
    with pytest.raises(InvalidArgumentError, match="'positions'"):
        find_key(("wpe.weight",), "positions")  # type: ignore[arg-type]

"""Lookup by name/alias/repo id, suggestions, revision validation and kind detection."""

from __future__ import annotations

import pytest
import transformers
from hypothesis import given, settings
from hypothesis import strategies as st

from pos_geometry.errors import (
    InvalidArgumentError,
    NoLearnedTableError,
    RevisionNotFoundError,
    UnknownModelError,
)
from pos_geometry.registry import (
    all_specs,
    check_revision,
    find_spec,
    get_schedule,
    get_spec,
    kind_from_config,
    known_names,
    revisions,
)


@pytest.mark.parametrize(
    ("query", "name"),
    [
        ("gpt2", "gpt2"),
        ("GPT2-Small", "gpt2"),
        ("openai-community/gpt2", "gpt2"),
        ("gpt2-medium", "gpt2-medium"),
        ("EleutherAI/gpt-neo-125M", "gpt-neo-125m"),  # the hub's older capitalisation
        ("stanford-crfm/arwen-gpt2-medium-x21", "arwen-gpt2-medium-x21"),
        ("crfm-gpt2-small-x777", "expanse-gpt2-small-x777"),
        ("EleutherAI/Pythia-70M-Deduped", "pythia-70m-deduped"),
        ("  facebook/opt-125m ", "opt-125m"),
        ("google-bert/bert-base-uncased", "bert-base-uncased"),
        ("openai-gpt", "openai-gpt"),
    ],
)
def test_get_spec_by_name_alias_or_repo_id(query, name):
    assert get_spec(query).name == name
    assert find_spec(query) is get_spec(query)


def test_every_key_of_every_row_resolves_to_it():
    for spec in all_specs():
        for key in spec.keys:
            assert get_spec(key) is spec
            assert get_spec(key.upper()) is spec
    assert known_names() == tuple(s.name for s in all_specs())
    assert len(set(known_names())) == len(known_names())


@pytest.mark.parametrize(
    ("typo", "expected"),
    [
        ("gpt-2", "gpt2"),
        ("pythia70m", "pythia-70m"),
        ("GPT2_XL", "gpt2-xl"),
        ("opt125m", "opt-125m"),
        ("pythia-70m-dedup", "pythia-70m-deduped"),
        ("bert", "bert-base-uncased"),
        ("gpt2-meduim", "gpt2-medium"),
    ],
)
def test_unknown_names_raise_with_the_closest_suggestion_first(typo, expected):
    assert find_spec(typo) is None
    with pytest.raises(UnknownModelError) as info:
        get_spec(typo)
    assert info.value.suggestions[0] == expected
    assert repr(expected) in str(info.value) and repr(typo) in str(info.value)
    assert isinstance(info.value, LookupError)


def test_repo_ids_not_in_the_table():
    assert find_spec("someorg/some-model") is None
    with pytest.raises(UnknownModelError, match="not in the model table"):
        get_spec("someorg/some-model")
    for bad in ("", "   ", None, 3):
        assert find_spec(bad) is None
        with pytest.raises(UnknownModelError):
            get_spec(bad)


def test_revisions():
    assert revisions("gpt2") == ("main",)
    assert revisions(get_spec("opt-125m")) == ("main",)
    assert len(revisions("arwen-gpt2-medium-x21")) == 609
    assert revisions("pythia-160m")[:3] == ("step0", "step1", "step2")


def test_check_revision_passes_valid_and_hub_revisions_through():
    assert check_revision(get_spec("gpt2"), None) == "main"
    assert check_revision("pythia-70m", None) == "main"
    assert check_revision("pythia-70m", "step143000") == "step143000"
    assert check_revision("alias-gpt2-small-x21", "checkpoint-400000") == "checkpoint-400000"
    sha = "a" * 40
    for rev in ("main", "refs/pr/1", sha, "v1.0"):
        assert check_revision("alias-gpt2-small-x21", rev) == rev
    assert check_revision("gpt2", "step7") == "step7"  # no schedule: the hub decides
    with pytest.raises(InvalidArgumentError):
        check_revision("gpt2", "")
    with pytest.raises(InvalidArgumentError):
        check_revision("gpt2", 1000)  # type: ignore[arg-type]


@settings(max_examples=60, deadline=None)
@given(st.integers(min_value=0, max_value=450000))
def test_unknown_checkpoints_name_the_nearest_valid_ones(step):
    sched = get_schedule("stanford-crfm")
    revision = f"checkpoint-{step}"
    if revision in sched:
        assert check_revision("durin-gpt2-medium-x343", revision) == revision
        return
    with pytest.raises(RevisionNotFoundError) as info:
        check_revision("durin-gpt2-medium-x343", revision)
    closest = min(sched.steps, key=lambda s: (abs(s - step), s))
    assert f"checkpoint-{closest}" in str(info.value) and revision in str(info.value)


def test_wrong_checkpoint_naming_points_to_the_right_one():
    with pytest.raises(RevisionNotFoundError, match=r"named 'stepN'.*Use step1000;"):
        check_revision("pythia-70m", "checkpoint-1000")
    with pytest.raises(RevisionNotFoundError, match=r"named 'checkpoint-N'.*Use checkpoint-2000;"):
        check_revision("beren-gpt2-medium-x49", "step2000")
    with pytest.raises(RevisionNotFoundError, match="step143000"):
        check_revision("pythia-12b", "step144000")


# --- kind detection: transformers' own config classes as the oracle -------------------
FAMILY_CONFIG = {
    "gpt2": transformers.GPT2Config,
    "stanford-crfm": transformers.GPT2Config,
    "pythia": transformers.GPTNeoXConfig,
    "mistral": transformers.MistralConfig,
    "openai-gpt": transformers.OpenAIGPTConfig,
    "opt": transformers.OPTConfig,
    "gpt-neo": transformers.GPTNeoConfig,
    "bert": transformers.BertConfig,
    "roberta": transformers.RobertaConfig,
    "distilbert": transformers.DistilBertConfig,
}


def test_kind_from_config_agrees_with_every_row():
    for spec in all_specs():
        config = FAMILY_CONFIG[spec.family]().to_dict()
        assert kind_from_config(config) == spec.kind, spec.name


@pytest.mark.parametrize(
    "config",
    [
        transformers.BloomConfig().to_dict(),
        {"model_type": "mpt", "attn_config": {"alibi": True}},
        {"model_type": "falcon", "alibi": True},
        transformers.T5Config().to_dict(),
        {"model_type": "bert", "position_embedding_type": "relative_key"},
        {"model_type": "mpt", "learned_pos_emb": False, "attn_config": {"alibi": False}},
        {},
        {"model_type": "mystery", "hidden_size": 64},
    ],
)
def test_models_without_a_positional_table_raise(config):
    with pytest.raises(NoLearnedTableError):
        kind_from_config(config)


def test_kind_from_fields_for_unknown_model_types():
    assert kind_from_config({"model_type": "falcon", "alibi": False}) == "rotary"
    assert kind_from_config(transformers.LlamaConfig().to_dict()) == "rotary"
    assert (
        kind_from_config({"model_type": "mpt", "learned_pos_emb": True, "attn_config": {"alibi": False}})
        == "learned"
    )
    assert (
        kind_from_config({"model_type": "newthing", "rope_theta": 5e5, "max_position_embeddings": 8})
        == "rotary"
    )
    assert kind_from_config({"model_type": "newthing", "rope_parameters": {"rope_theta": 1e4}}) == "rotary"
    assert kind_from_config({"model_type": "newthing", "n_positions": 1024}) == "learned"
    with pytest.raises(InvalidArgumentError, match="mapping"):
        kind_from_config(["gpt2"])  # type: ignore[arg-type]

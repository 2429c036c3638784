"""The model table: every row is valid, loadable offline where it must be, and unambiguous."""

from __future__ import annotations

import json
from collections import Counter

import pytest

from pos_geometry.encodings import rotary_params, rotary_table
from pos_geometry.errors import InvalidArgumentError
from pos_geometry.registry import ModelSpec, all_specs, get_spec, revisions
from pos_geometry.sources.keys import POSITION_KEYS, find_key

SPECS = all_specs()
BY_FAMILY = {f: [s for s in SPECS if s.family == f] for f in {s.family for s in SPECS}}


@pytest.mark.parametrize("spec", SPECS, ids=lambda s: s.name)
def test_every_row_is_valid(spec: ModelSpec):
    assert spec.kind in ("learned", "rotary")
    assert spec.n_positions > 0 and spec.d_model > 0
    assert spec.name == spec.name.lower() and spec.repo_id.count("/") == 1
    assert spec.stored_rows == spec.n_positions + spec.row_offset
    assert spec.default_revision in revisions(spec) or spec.schedule is not None
    if spec.kind == "learned":
        # the loader's key finder must recognise the row's keys as positional / token tables
        assert spec.position_key in POSITION_KEYS
        assert find_key([spec.position_key, spec.token_key], "position") == spec.position_key
        assert (
            spec.token_key is None or find_key([spec.position_key, spec.token_key], "token") == spec.token_key
        )
        assert not spec.rotary_config
    else:
        params = rotary_params(spec.rotary_config)  # everything needed offline is in the row
        # the base is never guessed; only the standard full-rotation fraction may be implied
        assert dict(params.defaults) in ({}, {"partial_rotary_factor": 1.0})
        assert params.max_positions == spec.n_positions
        table = rotary_table(params, 8)
        assert table.shape == (8, params.rotary_dim)


def test_row_offsets_where_expected():
    for spec in SPECS:
        expected = 2 if spec.family in ("opt", "roberta") else 0
        assert spec.row_offset == expected, spec.name
    assert get_spec("opt-125m").stored_rows == 2050
    assert get_spec("roberta-base").stored_rows == 514


def test_no_name_alias_or_repo_id_collisions():
    keys = Counter(k.lower() for spec in SPECS for k in set(spec.keys))
    assert [k for k, n in keys.items() if n > 1] == []


def test_crfm_rows():
    crfm = BY_FAMILY["stanford-crfm"]
    assert sorted(s.name for s in crfm) == sorted(
        f"{p}-gpt2-{size}-x{seed}"
        for size, prefixes in (
            ("small", ("alias", "battlestar", "caprica", "darkmatter", "expanse")),
            ("medium", ("arwen", "beren", "celebrimbor", "durin", "eowyn")),
        )
        for p, seed in zip(prefixes, (21, 49, 81, 343, 777), strict=True)
    )
    for spec in crfm:
        revs = revisions(spec)
        assert len(revs) == 609 and "checkpoint-0" in revs and "checkpoint-400000" in revs
        assert spec.weight_files == ("pytorch_model.bin",)
        assert spec.d_model == (768 if "small" in spec.name else 1024)
        assert spec.repo_id == f"stanford-crfm/{spec.name}"


def test_pythia_rows():
    pythia = BY_FAMILY["pythia"]
    sizes = ["14m", "31m", "70m", "160m", "410m", "1b", "1.4b", "2.8b", "6.9b", "12b"]
    assert {s.name for s in pythia} == {f"pythia-{z}" for z in sizes} | {
        f"pythia-{z}-deduped" for z in sizes[2:]
    }
    for spec in pythia:
        revs = revisions(spec)
        assert len(revs) == 154 and "step0" in revs and "step143000" in revs
        cfg = spec.rotary_config
        assert cfg["rotary_pct"] == 0.25 and cfg["rotary_emb_base"] == 10000
        assert cfg["max_position_embeddings"] == 2048
        params = rotary_params(cfg)
        assert params.rotary_dim == params.head_dim // 4
        assert params.head_dim * cfg["num_attention_heads"] == spec.d_model
    # deduped twins share the architecture of their standard-Pile siblings
    for spec in pythia:
        if spec.name.endswith("-deduped"):
            twin = get_spec(spec.name.removesuffix("-deduped"))
            assert twin.rotary_config == spec.rotary_config


def test_mistral_rows_differ_only_in_rope_theta():
    v1, v3 = get_spec("mistral-7b-v0.1"), get_spec("mistral-7b-v0.3")
    p1, p3 = rotary_params(v1.rotary_config), rotary_params(v3.rotary_config)
    assert (p1.base, p3.base) == (10000.0, 1e6)
    assert p1.head_dim == p3.head_dim == p1.rotary_dim == 128
    assert p1.max_positions == p3.max_positions == 32768


def test_opt_and_learned_families():
    assert {s.name for s in BY_FAMILY["opt"]} >= {
        f"opt-{z}" for z in ("125m", "350m", "1.3b", "2.7b", "6.7b", "13b", "30b", "66b")
    }
    assert all(s.n_positions == 2048 for s in BY_FAMILY["opt"] + BY_FAMILY["gpt-neo"])
    assert (
        get_spec("openai-gpt").position_key == "positions_embed.weight"
        and get_spec("gpt1").n_positions == 512
    )
    assert (
        get_spec("distilbert-base-uncased").position_key == "distilbert.embeddings.position_embeddings.weight"
    )
    assert [get_spec(n).d_model for n in ("gpt2", "gpt2-medium", "gpt2-large", "gpt2-xl")] == [
        768,
        1024,
        1280,
        1600,
    ]


def test_rows_match_the_real_tables(gpt2_wpe, gpt1_positions):
    assert gpt2_wpe.shape == (get_spec("gpt2").stored_rows, get_spec("gpt2").d_model)
    assert gpt1_positions.shape == (get_spec("openai-gpt").stored_rows, get_spec("openai-gpt").d_model)


@pytest.mark.parametrize("spec", SPECS[:: max(1, len(SPECS) // 12)], ids=lambda s: s.name)
def test_spec_round_trips_through_json(spec: ModelSpec):
    assert ModelSpec.from_record(json.loads(json.dumps(spec.to_dict()))) == spec


BASE = {
    "name": "toy",
    "repo_id": "org/toy",
    "family": "toy",
    "kind": "learned",
    "n_positions": 8,
    "d_model": 4,
    "position_key": "wpe.weight",
}
ROPE = {"hidden_size": 64, "num_attention_heads": 4, "rope_theta": 10000, "max_position_embeddings": 8}


@pytest.mark.parametrize(
    ("change", "message"),
    [
        ({"kind": "alibi"}, "kind must be one of"),
        ({"n_positions": 0}, "n_positions must be a positive int"),
        ({"d_model": True}, "d_model must be a positive int"),
        ({"row_offset": -1}, "row_offset"),
        ({"position_key": None}, "needs position_key"),
        ({"revisions": "nope"}, "must name a schedule"),
        ({"repo_id": "toy"}, "org/name"),
        ({"name": "Toy"}, "lower-case"),
        ({"colour": "red"}, "unknown fields"),
        ({"kind": "rotary", "position_key": None}, "needs its rotary config"),
        ({"kind": "rotary", "rotary": {**ROPE, "max_position_embeddings": 16}}, "must equal the rotary max"),
        ({"kind": "rotary", "rotary": {"rope_theta": 10000, "max_position_embeddings": 8}}, "head_dim"),
        ({"rotary": ROPE}, "must not carry rotary"),
    ],
)
def test_invalid_rows_are_refused(change, message):
    with pytest.raises(InvalidArgumentError, match=message):
        ModelSpec.from_record({**BASE, **change})

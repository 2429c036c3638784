"""``pg.open_model``: a model opened once (weights loaded, architecture resolved) that every model-running
analysis accepts, with the same results and provenance as the model's path gives; a card opens its model
once."""

from __future__ import annotations

import numpy as np
import pytest
import torch
import transformers

import pos_geometry as pg
from pos_geometry.errors import DeviceMismatchError, InvalidArgumentError, NotApplicableError
from pos_geometry.interventions import RemovePlanes, SwapPairing

TOKENS = np.random.default_rng(0).integers(0, 61, size=(4, 32))


@pytest.fixture(scope="module")
def folder(tmp_path_factory):
    torch.manual_seed(0)
    model = transformers.LlamaForCausalLM(
        transformers.LlamaConfig(vocab_size=61, hidden_size=32, intermediate_size=64, num_hidden_layers=2,
                                 num_attention_heads=4, num_key_value_heads=2, max_position_embeddings=128,
                                 rope_theta=500.0)
    ).eval()  # fmt: skip
    path = tmp_path_factory.mktemp("opened") / "llama"
    model.save_pretrained(path)
    return path


@pytest.fixture
def loads(monkeypatch):
    """Counts every whole-model load through transformers."""
    count = []
    for auto in (
        transformers.AutoModel,
        transformers.AutoModelForCausalLM,
        transformers.AutoModelForMaskedLM,
    ):
        original = auto.from_pretrained.__func__

        def counted(cls, *args, _original=original, **kwargs):
            count.append(cls.__name__)
            return _original(cls, *args, **kwargs)

        monkeypatch.setattr(auto, "from_pretrained", classmethod(counted))
    return count


def test_the_handle_holds_the_model_with_its_head_and_resolved_description(folder, loads):
    opened = pg.open_model(folder, device="cpu")
    assert loads == ["AutoModelForCausalLM"]
    assert opened.module.get_output_embeddings() is not None  # a decoder: its next-token head is there
    assert opened.model_id == str(folder) and opened.config["model_type"] == "llama"
    assert opened.kind == "rotary" and opened.direction.causal
    assert opened.architecture.layer_types[0].layers == (0, 1)


def test_analyses_of_the_handle_equal_those_of_the_path_and_load_nothing_again(folder, loads):
    opened = pg.open_model(folder, device="cpu")
    options = dict(seq_len=32, n_sequences=4, device="cpu", progress=None, random_state=0)
    hidden = pg.hidden_positions(opened, TOKENS, **options)
    assert len(loads) == 1
    reference = pg.hidden_positions(folder, TOKENS, **options)
    for name, values in reference.metrics.items():
        np.testing.assert_array_equal(hidden.metrics[name], values, err_msg=name)
    assert hidden.provenance == reference.provenance

    loads.clear()
    edit = pg.intervene(opened, TOKENS, SwapPairing(), attention=False, n_bootstrap=20, **options)
    sweep = pg.intervene_sweep(opened, TOKENS, [SwapPairing(), RemovePlanes([0])], n_bootstrap=20, **options)
    atlas = pg.rotary_atlas(opened)
    assert loads == []
    assert edit.delta == pg.intervene(folder, TOKENS, SwapPairing(), attention=False, n_bootstrap=20,
                                      **options).delta  # fmt: skip
    assert sweep.results[0].delta == edit.delta
    torch.testing.assert_close(atlas.qk_share, pg.rotary_atlas(folder).qk_share, rtol=0, atol=0)


def test_a_handle_stays_where_it_was_opened_and_keeps_its_revision(folder):
    opened = pg.open_model(folder, device="cpu")
    with pytest.raises(DeviceMismatchError, match="lives on cpu"):
        pg.hidden_positions(opened, TOKENS, seq_len=32, device="meta", progress=None)
    with pytest.raises(InvalidArgumentError, match="revision"):
        pg.hidden_positions(opened, TOKENS, seq_len=32, revision="main", progress=None)


def test_an_encoder_saved_bare_is_opened_bare_without_its_pooler_and_its_loss_is_refused(tmp_path, loads):
    torch.manual_seed(0)
    config = transformers.BertConfig(vocab_size=61, hidden_size=32, num_hidden_layers=2, num_attention_heads=4,
                                     intermediate_size=64, max_position_embeddings=64)  # fmt: skip
    transformers.BertModel(config).save_pretrained(tmp_path / "bert")
    opened = pg.open_model(tmp_path / "bert", device="cpu")
    # its config names the bare class: no masked-LM head is looked for, and the pooler no analysis reads is left out
    assert loads == ["AutoModel"] and opened.kind == "learned" and not opened.direction.causal
    assert opened.head is None and opened.module.pooler is None
    assert opened.architecture is None  # (the rotary description; a learned table has its own path)
    hidden = pg.hidden_positions(opened, TOKENS, seq_len=32, device="cpu", progress=None)
    assert hidden.metrics  # the hidden-state path reads it
    with pytest.raises(NotApplicableError, match="no masked-token loss"):
        pg.intervene(opened, TOKENS, pg.interventions.ShuffleRows(), seq_len=32, device="cpu", progress=None)
    assert len(loads) == 1
    # a masked LM saved whole opens with its head, once
    transformers.BertForMaskedLM(config).save_pretrained(tmp_path / "mlm")
    masked = pg.open_model(tmp_path / "mlm", device="cpu")
    assert loads[1:] == ["AutoModelForMaskedLM"] and masked.head == "masked-token"
    # and its bare model opens without the pooler it never had (no random weights filled in)
    bare = pg.open_model(tmp_path / "mlm", device="cpu", head=False)
    assert bare.head is None and bare.module.pooler is None


def test_a_card_opens_its_model_once(folder, loads):
    from pos_geometry.cards import card

    made = card(folder, TOKENS, device="cpu", progress=False)
    assert loads == ["AutoModelForCausalLM"], loads
    ran = {s.key: s.status for s in made.sections}
    assert ran["residual"] == "ran" and ran["causal"] == "ran", ran


def test_a_next_token_loss_is_refused_before_the_weights_are_read(tmp_path, loads):
    """The config alone decides that a model attends both ways: nothing is loaded to be told so."""
    config = transformers.Gemma3TextConfig(
        hidden_size=32, intermediate_size=64, num_attention_heads=4, num_key_value_heads=2, head_dim=8,
        num_hidden_layers=2, vocab_size=61, use_bidirectional_attention=True,
    )  # fmt: skip
    torch.manual_seed(0)
    transformers.Gemma3ForCausalLM(config).save_pretrained(tmp_path / "bidirectional")
    with pytest.raises(NotApplicableError, match="both directions"):
        pg.intervene(
            tmp_path / "bidirectional", TOKENS, SwapPairing(), seq_len=32, device="cpu", progress=None
        )
    assert loads == []

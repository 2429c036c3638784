"""The masked-token loss of a model that attends both ways: the stated masking rule, the mask token's source,
and the loss equal to one computed directly with transformers on the same masked positions."""

from __future__ import annotations

from types import SimpleNamespace

import numpy as np
import pytest
import torch
import transformers

import pos_geometry as pg
from pos_geometry.errors import NotApplicableError
from pos_geometry.interventions import ShuffleRows
from pos_geometry.interventions.masking import mask_token_id, masked_positions, n_masked

VOCAB = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"] + [f"t{i}" for i in range(5, 61)]


@pytest.fixture(scope="module")
def bert(tmp_path_factory):
    """A tiny BERT masked LM with a WordPiece tokenizer whose [MASK] is id 4."""
    folder = tmp_path_factory.mktemp("masking") / "bert"
    torch.manual_seed(0)
    config = transformers.BertConfig(vocab_size=61, hidden_size=32, num_hidden_layers=2, num_attention_heads=4,
                                     intermediate_size=64, max_position_embeddings=64)  # fmt: skip
    transformers.BertForMaskedLM(config).save_pretrained(folder)
    transformers.BertTokenizer(vocab={word: i for i, word in enumerate(VOCAB)}).save_pretrained(folder)
    return folder


TOKENS = np.random.default_rng(1).integers(5, 61, size=(5, 40))


def test_the_rule_masks_fifteen_percent_of_each_context_reproducibly():
    positions = masked_positions(6, 40, random_state=3)
    assert positions.shape == (6, 40) and n_masked(40) == 6 and (positions.sum(1) == 6).all()
    np.testing.assert_array_equal(positions, masked_positions(6, 40, random_state=3))
    assert not np.array_equal(positions, masked_positions(6, 40, random_state=4))
    assert len({row.tobytes() for row in positions}) == 6  # each context its own draw
    assert n_masked(3) == 1 and n_masked(100) == 15  # at least one per context


def test_the_loss_is_the_cross_entropy_at_the_masked_positions(bert):
    result = pg.intervene(bert, TOKENS, ShuffleRows(), attention=False, n_bootstrap=50, random_state=7,
                          device="cpu", progress=None)  # fmt: skip
    model = transformers.BertForMaskedLM.from_pretrained(bert).eval()
    positions = torch.from_numpy(masked_positions(*TOKENS.shape, random_state=7))
    ids = torch.from_numpy(TOKENS)
    with torch.no_grad():
        logits = model(input_ids=ids.masked_fill(positions, 4)).logits
    per_token = torch.nn.functional.cross_entropy(logits.transpose(1, 2), ids, reduction="none")
    per_sequence = (per_token * positions).sum(1) / positions.sum(1)
    assert result.objective == "masked-token"
    assert result.base_loss == pytest.approx(float(per_sequence.mean()), rel=1e-5)
    by_position = (per_token * positions).sum(0) / positions.sum(0)
    seen = positions.any(0).numpy()
    np.testing.assert_allclose(result.base_loss_by_position[seen], by_position[seen].numpy(), rtol=1e-5)
    assert np.isnan(result.base_loss_by_position[~seen]).all()  # never masked: no loss there, said as NaN
    assert "masked-token loss" in result.summary_rows()[2][0]


def test_the_mask_token_comes_from_the_tokenizer_else_the_config_else_a_refusal(bert, tmp_path):
    opened = pg.open_model(bert, device="cpu")
    assert mask_token_id(opened, None) == 4  # the folder's own tokenizer
    other = SimpleNamespace(mask_token_id=9)  # the tokenizer that tokenised the corpus comes first
    assert mask_token_id(opened, other) == 9
    bare = tmp_path / "untokenised"
    transformers.BertForMaskedLM.from_pretrained(bert).save_pretrained(bare)
    with pytest.raises(NotApplicableError, match="mask token, and none was found"):
        pg.intervene(bare, TOKENS, ShuffleRows(), device="cpu", progress=None)
    config = transformers.AutoConfig.from_pretrained(bare)
    config.mask_token_id = 7
    config.save_pretrained(bare)
    assert mask_token_id(pg.open_model(bare, device="cpu"), None) == 7


def test_both_passes_mask_the_same_positions_so_an_edit_that_changes_nothing_costs_nothing(bert):
    from pos_geometry.interventions import Rank

    full = pg.intervene(bert, TOKENS, Rank(32), attention=False, n_bootstrap=20, device="cpu", progress=None)
    assert full.delta == pytest.approx(0.0, abs=1e-5)
    np.testing.assert_allclose(full.sequence_delta, 0.0, atol=1e-5)

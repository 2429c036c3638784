"""Which way a model attends, from its config (transformers' own facts, no table of names), and what follows:
no next-token loss on a model that sees the next token, and a uniform-attention reference that matches its mask."""

from __future__ import annotations

from types import SimpleNamespace

import numpy as np
import pytest
import transformers

import pos_geometry as pg
from pos_geometry.cards.model_sections import both_ways, local_mass
from pos_geometry.errors import NotApplicableError
from pos_geometry.interventions import Rank
from pos_geometry.registry.direction import attention_direction

_SMALL = dict(vocab_size=61, hidden_size=32, intermediate_size=64, num_hidden_layers=2, num_attention_heads=4)


@pytest.mark.parametrize(
    ("config", "causal", "said"),
    [
        (transformers.GPT2Config(), True, "causal decoder"),
        (transformers.LlamaConfig(), True, "causal decoder"),
        (
            transformers.Gemma3TextConfig(use_bidirectional_attention=True),
            False,
            "use_bidirectional_attention",
        ),
        (transformers.BertConfig(), False, "encoder"),
        (transformers.RoFormerConfig(), False, "encoder"),
        (transformers.BertConfig(is_decoder=True), True, "causal decoder"),
    ],
)
def test_the_direction_is_read_from_the_config(config, causal, said):
    direction = attention_direction(config.to_dict())
    assert direction.causal is causal and said in direction.reason
    assert direction.objective == ("next-token" if causal else "masked-token")


def _save(model, folder):
    model.save_pretrained(folder)
    return folder


def test_a_model_that_sees_the_next_token_gets_no_next_token_loss(tmp_path):
    """A decoder family run both ways has no head for the masked-token loss that fits it: refused with the
    reason. An encoder is measured with its masked-token loss (tests/interventions/test_masking.py); the decoder
    keeps its next-token loss."""
    tokens = np.random.default_rng(0).integers(0, 61, size=(3, 24))
    bidirectional = transformers.Gemma3TextConfig(
        **_SMALL,
        num_key_value_heads=2,
        head_dim=8,
        max_position_embeddings=128,
        use_bidirectional_attention=True,
    )
    model = transformers.AutoModelForCausalLM.from_config(bidirectional)
    with pytest.raises(NotApplicableError, match="attends in both directions") as info:
        pg.intervene(_save(model, tmp_path / "gemma"), tokens, Rank(2))
    assert "masked-token loss" in str(info.value) and "builds no masked-token head" in str(info.value)
    decoder = transformers.GPT2LMHeadModel(transformers.GPT2Config(vocab_size=61, n_positions=64, n_embd=32,
                                                                   n_layer=2, n_head=4))  # fmt: skip
    result = pg.intervene(_save(decoder, tmp_path / "gpt2"), tokens, Rank(2))
    assert np.isfinite(result.base_loss) and result.objective == "next-token"
    assert result.provenance.processing[0] == "next-token loss"


def _by_offset(allowed: np.ndarray) -> SimpleNamespace:
    """What attention by offset records for uniform attention over the keys ``allowed`` ``(T, T)`` lets through."""
    t = allowed.shape[0]
    probs = allowed / allowed.sum(1, keepdims=True)
    offsets = np.arange(-(t - 1), t)
    q, k = np.indices((t, t))
    sums = np.array([probs[(q - k == d) & allowed].sum() for d in offsets])
    counts = np.array([int(((q - k == d) & allowed).sum()) for d in offsets])
    keep = counts > 0
    mean = np.where(keep, sums / np.maximum(counts, 1), 0.0)[keep]
    return SimpleNamespace(offsets=offsets[keep], counts=counts[keep], seq_len=t,
                           mean_probability=mean[None, None, :])  # fmt: skip


@pytest.mark.parametrize("kind", ["causal", "causal window 5", "both ways", "both ways window 5"])
def test_the_uniform_reference_is_what_uniform_attention_records_under_the_mask(kind):
    # the oracle: an explicit uniform attention matrix under each mask, summed by offset as the probe sums it
    t = 40
    q, k = np.indices((t, t))
    allowed = (q >= k) if kind.startswith("causal") else np.ones((t, t), dtype=bool)
    if kind.endswith("window 5"):
        allowed &= np.abs(q - k) <= 5
    att = _by_offset(allowed)
    observed, uniform = local_mass(att)
    assert both_ways(att) is kind.startswith("both")
    assert observed[0, 0] == pytest.approx(uniform, rel=1e-12)
    if kind == "causal":  # the closed form the card states: 1/(q + 1) at every visible key
        assert uniform == pytest.approx(sum(np.mean(1 / (np.arange(d, t) + 1)) for d in range(4)), rel=1e-12)

"""``from_transformer_lens`` against real TransformerLens 4.x bridges booted offline.

Tiny GPT-2 and GPT-NeoX models are built with ``transformers`` and saved with a local
WordLevel tokenizer into a temporary directory; ``TransformerBridge.boot_transformers``
loads them from that path, so nothing touches the hub. The raw checkpoint tensor
(``transformer.wpe.weight``, read with ``safetensors``) is the oracle.
"""

from __future__ import annotations

from pathlib import Path

import pytest
import torch

pytest.importorskip("transformers")
pytest.importorskip("tokenizers")
pytest.importorskip("transformer_lens.model_bridge")

from safetensors.torch import load_file
from tokenizers import Tokenizer, models, pre_tokenizers
from transformer_lens.model_bridge import TransformerBridge
from transformers import (
    GPT2Config,
    GPT2LMHeadModel,
    GPTNeoXConfig,
    GPTNeoXForCausalLM,
    PreTrainedTokenizerFast,
)

from pos_geometry.errors import InvalidArgumentError, NoLearnedTableError
from pos_geometry.sources.lens import from_transformer_lens

VOCAB = 96
N_POSITIONS = 128
D_MODEL = 64
POS_KEY = "transformer.wpe.weight"


def _tokenizer() -> PreTrainedTokenizerFast:
    """A WordLevel tokenizer over ``VOCAB`` made-up words (id 0 is the end-of-text token)."""
    vocab = {"<|endoftext|>": 0, **{f"w{i}": i + 1 for i in range(VOCAB - 1)}}
    tok = Tokenizer(models.WordLevel(vocab, unk_token="<|endoftext|>"))
    tok.pre_tokenizer = pre_tokenizers.Whitespace()
    special = "<|endoftext|>"
    return PreTrainedTokenizerFast(
        tokenizer_object=tok, bos_token=special, eos_token=special, unk_token=special
    )


@pytest.fixture(scope="module")
def gpt2_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A 2-layer GPT-2 (d_model 64, 128 positions) saved as an HF directory with its tokenizer.

    The positional table is drawn with a non-zero mean so that centring over d_model
    visibly changes it.
    """
    out = tmp_path_factory.mktemp("tiny_gpt2")
    cfg = GPT2Config(
        n_layer=2,
        n_embd=D_MODEL,
        n_head=4,
        n_positions=N_POSITIONS,
        vocab_size=VOCAB,
        bos_token_id=0,
        eos_token_id=0,
    )
    torch.manual_seed(0)
    model = GPT2LMHeadModel(cfg)
    with torch.no_grad():
        model.transformer.wpe.weight.normal_(mean=0.5, std=1.0)
    model.save_pretrained(out)
    _tokenizer().save_pretrained(out)
    return out


@pytest.fixture(scope="module")
def raw_table(gpt2_dir: Path) -> torch.Tensor:
    """The checkpoint's positional tensor, read directly from ``model.safetensors``."""
    return load_file(gpt2_dir / "model.safetensors")[POS_KEY]


def _boot(path: Path) -> TransformerBridge:
    return TransformerBridge.boot_transformers(str(path), device="cpu")


def test_raw_bridge_gives_the_checkpoint_table_exactly(gpt2_dir: Path, raw_table: torch.Tensor) -> None:
    bridge = _boot(gpt2_dir)
    emb = from_transformer_lens(bridge, revision="main")
    assert emb.matrix.shape == (N_POSITIONS, D_MODEL)
    assert torch.equal(emb.matrix, raw_table)
    assert raw_table.mean(dim=1).abs().min() > 0.1  # the oracle is not centred, so the check has teeth
    assert emb.provenance.processing == ()
    assert emb.provenance.kind == "learned"
    assert emb.provenance.revision == "main"
    assert emb.provenance.original_dtype == "float32"
    assert not emb.matrix.requires_grad


def test_result_is_a_copy_not_a_view_of_the_bridge(gpt2_dir: Path, raw_table: torch.Tensor) -> None:
    bridge = _boot(gpt2_dir)
    emb = from_transformer_lens(bridge)
    with torch.no_grad():
        bridge.W_pos.zero_()
    assert torch.equal(emb.matrix, raw_table)


def test_compatibility_mode_without_processing_is_raw(gpt2_dir: Path, raw_table: torch.Tensor) -> None:
    bridge = _boot(gpt2_dir)
    bridge.enable_compatibility_mode(no_processing=True, disable_warnings=True)
    emb = from_transformer_lens(bridge)
    assert torch.equal(emb.matrix, raw_table)
    assert emb.provenance.processing == ()


def test_processed_bridge_is_centred_and_says_so(gpt2_dir: Path, raw_table: torch.Tensor) -> None:
    bridge = _boot(gpt2_dir)
    bridge.enable_compatibility_mode(disable_warnings=True)
    emb = from_transformer_lens(bridge)
    expected = raw_table - raw_table.mean(dim=1, keepdim=True)
    torch.testing.assert_close(emb.matrix, expected, rtol=0, atol=1e-6)
    assert emb.matrix.mean(dim=1).abs().max() < 1e-6
    assert emb.provenance.processing == ("transformer_lens.process_weights", "center_d_model")


def test_processed_bfloat16_bridge_is_recorded_as_centred(gpt2_dir: Path, raw_table: torch.Tensor) -> None:
    bridge = TransformerBridge.boot_transformers(str(gpt2_dir), device="cpu", dtype=torch.bfloat16)
    bridge.enable_compatibility_mode(disable_warnings=True)
    emb = from_transformer_lens(bridge)
    assert emb.provenance.original_dtype == "bfloat16"
    expected = raw_table.double() - raw_table.double().mean(dim=1, keepdim=True)
    torch.testing.assert_close(emb.matrix.double(), expected, rtol=2**-7, atol=2**-7)
    assert emb.provenance.processing == ("transformer_lens.process_weights", "center_d_model")


def test_processing_without_centring_is_recorded_but_not_called_centred(
    gpt2_dir: Path, raw_table: torch.Tensor
) -> None:
    bridge = _boot(gpt2_dir)
    bridge.process_weights(center_writing_weights=False)
    emb = from_transformer_lens(bridge)
    assert torch.equal(emb.matrix, raw_table)  # fold_ln and friends leave W_pos alone
    assert emb.provenance.processing == ("transformer_lens.process_weights",)


def test_raw_bridge_matches_pos_geometry_load(gpt2_dir: Path) -> None:
    from pos_geometry.loading import load

    via_lens = from_transformer_lens(_boot(gpt2_dir))
    direct = load(gpt2_dir)
    assert torch.equal(via_lens.matrix, direct.matrix)
    assert direct.provenance.tensor_key == POS_KEY
    assert direct.provenance.row_offset == 0


def test_rotary_bridge_is_refused_pointing_to_load(tmp_path: Path) -> None:
    cfg = GPTNeoXConfig(
        num_hidden_layers=2,
        hidden_size=D_MODEL,
        num_attention_heads=4,
        intermediate_size=4 * D_MODEL,
        max_position_embeddings=N_POSITIONS,
        vocab_size=VOCAB,
        rotary_pct=0.25,
        bos_token_id=0,
        eos_token_id=0,
    )
    GPTNeoXForCausalLM(cfg).save_pretrained(tmp_path)
    _tokenizer().save_pretrained(tmp_path)
    bridge = _boot(tmp_path)
    assert bridge.cfg.positional_embedding_type == "rotary"
    with pytest.raises(NoLearnedTableError, match=r"rotary") as info:
        from_transformer_lens(bridge)
    assert "pos_geometry.load(" in str(info.value)


def test_non_bridge_is_refused() -> None:
    with pytest.raises(InvalidArgumentError, match="TransformerBridge"):
        from_transformer_lens(torch.zeros(4, 4))
